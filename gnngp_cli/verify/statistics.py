"""Statistics of the wide-network check: errors with bootstrap intervals, the slope of the error
against the width, and a randomisation test that gives the verdict.

Notation: ``K`` the analytic kernel; for width ``w`` and seed ``s``, ``K_ws = f f^T / w`` the
output covariance of one random network (``f``: its ``w`` output units), ``D_ws = K_ws - K``.

- Relative error at width ``w``: ``e_w = ||mean_s D_ws||_F / ||K||_F``, with a percentile
  bootstrap interval over the seeds.
- Noise: ``sigma_w = sqrt(sum_s ||D_ws - mean_s D_ws||_F^2 / (S (S - 1))) / ||K||_F``, the
  error expected from Monte-Carlo noise alone with ``S`` networks of width ``w``.
- Slope: the least-squares slope of ``log e_w`` against ``log w`` with a bootstrap interval.
  Theory (Theorem 1): ``Var(K_ws) = O(1/w)``, and the mean of ``K_ws`` is ``K`` exactly for
  the GCN, GIN, SAGE, GGP and RBF networks at ``L <= 2`` (their first layer reads fixed
  features, so it is exactly Gaussian) and ``O(1/w)`` off otherwise (deeper networks, and the
  GCNII and composed networks, whose Gaussian input layer ``X_0`` is itself random), so a right
  kernel gives a slope near ``-1/2``; a wrong one levels off at its error.
- Verdict: a sign-flip randomisation test of ``H0: E[K_ws] = K``. The statistic pools every
  network with weight ``w`` (its inverse variance): ``T = ||sum_ws w D_ws||_F^2``. Under
  ``H0`` the ``D_ws`` are independent and (to ``O(w^-1/2)`` skewness) symmetric about 0, so
  ``T`` is as large as ``||sum_ws eps_ws w D_ws||_F^2`` for random signs ``eps``; the p-value is
  the share of ``B`` random sign patterns at least as large (``(1 + #) / (1 + B)``). FAIL when
  ``p < level``, or when the slope's ``1 - level`` interval lies wholly above ``-1/2`` (the
  error does not shrink as the theory says).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class WidthSummary:
    width: int
    seeds: int
    relative_error: float
    error_low: float
    error_high: float
    noise: float

    @property
    def noise_ratio(self) -> float:
        """The error in units of the pure Monte-Carlo noise (about 1 for a right kernel)."""
        return self.relative_error / self.noise if self.noise > 0 else math.inf


@dataclass
class Verdict:
    slope: float
    slope_low: float
    slope_high: float
    p_value: float
    level: float
    passed: bool
    reason: str

    @property
    def label(self) -> str:
        return "PASS" if self.passed else "FAIL"


def _relative_error(deviations: Tensor, norm: float) -> Tensor:
    """``||mean D||_F / ||K||_F`` for a stack ``(S, n*n)`` of deviations."""
    return deviations.mean(0).norm() / norm


def _bootstrap_errors(deviations: Tensor, norm: float, bootstrap: int, generator: torch.Generator) -> Tensor:
    """The relative error of ``bootstrap`` resamples (with replacement) of the seeds."""
    s = deviations.size(0)
    pick = torch.randint(s, (bootstrap, s), generator=generator)
    counts = torch.zeros(bootstrap, s, dtype=deviations.dtype).scatter_add_(1, pick, torch.ones(bootstrap, s, dtype=deviations.dtype))
    return (counts @ deviations / s).norm(dim=1) / norm


def _slope(widths: Tensor, errors: Tensor) -> Tensor:
    """Least-squares slope of ``log errors`` on ``log widths`` (last dimension)."""
    x = widths.log() - widths.log().mean()
    y = errors.log() - errors.log().mean(-1, keepdim=True)
    return (y * x).sum(-1) / (x * x).sum()


def summarise(deviations: dict[int, Tensor], norm: float, bootstrap: int, level: float, generator: torch.Generator) -> tuple[list[WidthSummary], Verdict]:
    """Per-width errors and the verdict from ``deviations[w]`` (``S x n*n``: ``K_ws - K``)."""
    widths = sorted(deviations)
    confidence = 1 - level
    lo_q, hi_q = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    rows, boot_errors = [], []
    for w in widths:
        d = deviations[w]
        s = d.size(0)
        error = float(_relative_error(d, norm))
        spread = ((d - d.mean(0)) ** 2).sum() / (s * (s - 1)) if s > 1 else torch.tensor(math.nan)
        boot = _bootstrap_errors(d, norm, bootstrap, generator)
        boot_errors.append(boot)
        low, high = torch.quantile(boot, torch.tensor([lo_q, hi_q], dtype=boot.dtype)).tolist()
        rows.append(WidthSummary(w, s, error, low, high, float(spread.sqrt()) / norm))
    w_tensor = torch.tensor(widths, dtype=torch.float64)
    errors = torch.tensor([r.relative_error for r in rows], dtype=torch.float64)
    slope = float(_slope(w_tensor, errors)) if len(widths) > 1 else math.nan
    if len(widths) > 1:
        boot_slopes = _slope(w_tensor, torch.stack(boot_errors, 1).double().clamp_min(1e-300))
        slope_low, slope_high = torch.quantile(boot_slopes, torch.tensor([lo_q, hi_q], dtype=torch.float64)).tolist()
    else:
        slope_low = slope_high = math.nan
    p_value = sign_flip_p_value(deviations, bootstrap_size(bootstrap), generator)
    passed, reason = decide(p_value, level, slope_low, slope_high)
    return rows, Verdict(slope, slope_low, slope_high, p_value, level, passed, reason)


def bootstrap_size(bootstrap: int) -> int:
    """Sign patterns for the randomisation test: at least 9999, so a p-value resolves 1e-4."""
    return max(bootstrap, 9999)


def sign_flip_p_value(deviations: dict[int, Tensor], patterns: int, generator: torch.Generator) -> float:
    """p-value of ``T = ||sum_ws w D_ws||^2`` against random sign flips of the ``D_ws``."""
    weighted = torch.cat([w * d for w, d in sorted(deviations.items())])  # units x n*n
    gram = weighted @ weighted.T
    observed = float(gram.sum())
    signs = torch.randint(2, (patterns, gram.size(0)), generator=generator).to(gram.dtype) * 2 - 1
    flipped = ((signs @ gram) * signs).sum(1)
    # a relative tolerance so that round-off in equal statistics counts as "at least as large"
    exceed = int((flipped >= observed * (1 - 1e-12)).sum())
    return (1 + exceed) / (1 + patterns)


def decide(p_value: float, level: float, slope_low: float, slope_high: float) -> tuple[bool, str]:
    """PASS unless the randomisation test rejects at ``level`` or the slope's ``1 - level``
    interval lies wholly above ``-1/2`` (an error that does not shrink as the theory says)."""
    if p_value < level:
        return False, f"the networks' mean covariance differs from the kernel beyond Monte-Carlo noise (p = {p_value:.2g} < {level:g})"
    if math.isfinite(slope_low) and slope_low > -0.5:
        return False, f"the error does not shrink like width^-1/2 (slope interval [{slope_low:.2f}, {slope_high:.2f}] excludes -0.5)"
    return True, f"consistent with Monte-Carlo noise (p = {p_value:.2g} >= {level:g}) and the slope interval [{slope_low:.2f}, {slope_high:.2f}] does not lie wholly above -0.5"
