"""Statistics of the wide-network check: errors with bootstrap intervals, the slope of the error
against the width, and a randomisation test that gives the verdict.

Notation: ``K`` the analytic kernel; for width ``w`` and seed ``s``, ``K_ws = f f^T / w`` the
output covariance of one random network (``f``: its ``w`` output units), ``D_ws = K_ws - K``.

- Relative error at width ``w``: ``e_w = ||mean_s D_ws||_F / ||K||_F``, with a percentile
  bootstrap interval over the seeds, moved back by the bootstrap's bias (its median less ``e_w``:
  a resampled mean's norm is larger by the resampling's noise) and floored at 0, so that it holds
  ``e_w`` where the error is near the noise (the plain percentiles could lie wholly above it).
- Noise: ``sigma_w = sqrt(sum_s ||D_ws - mean_s D_ws||_F^2 / (S (S - 1))) / ||K||_F``, the
  error expected from Monte-Carlo noise alone with ``S`` networks of width ``w``.
- Slope: the least-squares slope of ``log e_w`` against ``log w`` with a bootstrap interval.
  Theory (Theorem 1): ``Var(K_ws) = O(1/w)``, and the mean of ``K_ws`` is ``K`` exactly for
  the GCN, GIN, SAGE, GGP and RBF networks at ``L <= 2`` (their first layer reads fixed
  features, so it is exactly Gaussian) and ``O(1/w)`` off otherwise (deeper networks, and the
  GCNII and composed networks, whose Gaussian input layer ``X_0`` is itself random), so a right
  kernel gives a slope near ``-1/2``; a wrong one levels off at its error.
- Randomisation test of ``H0: E[K_ws] = K`` in every direction. The statistic is the squared
  width-independent error of every entry, ``T = ||sum_ws a_w D_ws||_F^2``, with weights ``a_w``
  (:func:`intercept_weights`) that cancel a finite-width bias ``b / w``; a wild bootstrap gives
  the residuals of the no-error fit (``D_ws - b_e / w``) random signs, and the p-value is the
  share of ``B`` sign patterns at least as large (``(1 + #) / (1 + B)``). It sees an error in
  any direction, but pays for all ``n^2`` of them.
- Shift: the error along the kernel itself, where a wrong weight variance, activation or
  derivative moves it. Each network gives one number, ``z_ws = <D_ws, K> / <K, K>`` (its
  relative error along ``K``), with ``E[z_ws] = delta + b / w + x_ws beta`` and
  ``Var = c / w``: ``delta`` the kernel's relative error, ``b / w`` the finite-width bias (0 for
  the networks whose first layer is exactly Gaussian, ``O(1/w)`` otherwise), ``x_ws`` the
  network's control variates (:func:`~.wide_check.weight_scales`, mean 0 by construction).
  Weighted least squares over every network gives ``delta`` and a t test its p-value; a tangent
  kernel's parts are tested the same way, and the activation check
  (:mod:`.activation_check`) gives shifts of the same kind. ``detectable`` is the smallest
  relative error along ``K`` the run would have found four times in five at its level.
- Verdict: FAIL when the randomisation test's p-value is below ``level / 2``, when a shift
  test's is below ``level / 2`` shared among the shift tests (Bonferroni: a right kernel FAILs
  at most a share ``level`` of runs), or when the slope's ``1 - level`` interval lies wholly
  above ``-1/2`` (the error does not shrink as the theory says). Networks that equal the kernel
  to float32 round-off (no randomness in their output) PASS.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

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


@dataclass(frozen=True)
class Shift:
    """The kernel's relative error along itself, ``delta``, pooled over widths (module docstring)."""

    estimate: float
    se: float
    p_value: float
    bias: float = 0.0    # the fitted finite-width term ``b`` (``E[z] = delta + b / w``)
    part: str = "the kernel"   # what it measures: the whole kernel, one part of a tangent kernel, an activation's map
    source: str = "the networks' mean is"   # what is off, in the verdict's words
    df: float = math.inf   # the test's degrees of freedom (inf: a normal test)
    detectable: float = math.nan   # set by :meth:`at`

    def at(self, alpha: float) -> "Shift":
        """With ``detectable``: the smallest error found four times in five by a two-sided test at ``alpha``."""
        from scipy import stats

        quantile = stats.norm.ppf(1 - alpha / 2) if math.isinf(self.df) else stats.t.ppf(1 - alpha / 2, self.df)
        return replace(self, detectable=(float(quantile) + float(stats.norm.ppf(0.8))) * self.se)


@dataclass
class Verdict:
    slope: float
    slope_low: float
    slope_high: float
    p_value: float
    level: float
    passed: bool
    reason: str
    shift: Shift = Shift(math.nan, math.nan, 1.0)   # the whole kernel's
    parts: tuple[Shift, ...] = ()      # a tangent kernel's parts', one per block with parameters
    alpha: float = math.nan            # each test's level: level / 2, shared among the shift tests
    activations: tuple[Shift, ...] = ()   # the activation check's (verify.activation_check)
    inconclusive: bool = False         # no error found by a check too weak to find one (POWERLESS): not passed either

    @property
    def rejected(self) -> bool:
        """FAIL: a test rejected the kernel (neither a PASS nor a check too weak to say)."""
        return not self.passed and not self.inconclusive

    @property
    def label(self) -> str:
        return "PASS" if self.passed else "INCONCLUSIVE" if self.inconclusive else "FAIL"


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


def shift_test(deviations: dict[int, Tensor], kernel: Tensor, part: str = "the kernel",
               covariates: Optional[dict[int, Tensor]] = None) -> Shift:
    """The pooled test of the kernel's relative error along itself (module docstring: Shift):
    weighted least squares over the networks,
    ``z_ws = delta + b / w + x_ws beta + e``, ``Var(e) = c / w``, with ``x_ws`` the network's
    control variates (:func:`~.wide_check.weight_scales`: mean 0 whatever the kernel, so they
    leave ``delta`` unbiased and take their share of the noise out of it) where there are
    networks enough to fit them (at least 4 per variate)."""
    from scipy import stats

    k = kernel.reshape(-1).to(torch.float64)
    widths = sorted(deviations)
    if float(k @ k) == 0:
        return Shift(math.nan, math.nan, 1.0, math.nan, part)
    z = torch.cat([(deviations[w].to(torch.float64) @ k) / (k @ k) for w in widths])   # z_ws, one per network
    width = torch.cat([torch.full((deviations[w].size(0),), float(w), dtype=torch.float64) for w in widths])
    columns = [torch.ones_like(z)] + ([1 / width] if len(widths) > 1 else [])
    if covariates is not None:
        x = torch.cat([covariates[w].to(torch.float64) for w in widths])
        spread = x.std(0) if x.size(0) > 1 else torch.zeros(x.size(1), dtype=torch.float64)
        if x.size(1) and z.numel() >= 4 * (x.size(1) + len(columns)) + 10:
            columns += list((x[:, spread > 0] / spread[spread > 0]).T)
    design = torch.stack(columns, 1)
    df = z.numel() - design.size(1)
    if df < 1:
        return Shift(math.nan, math.nan, 1.0, math.nan, part)
    precision = design.T @ (width[:, None] * design)
    covariance = torch.linalg.pinv(precision)
    coef = covariance @ (design.T @ (width * z))
    residual = z - design @ coef
    c = float((width * residual ** 2).sum()) / df     # Var(e_ws) = c / w
    estimate = float(coef[0])
    bias = float(coef[1]) if len(widths) > 1 else 0.0
    se = math.sqrt(max(c, 0.0) * float(covariance[0, 0]))
    p = (1.0 if estimate == 0 else 0.0) if se == 0 else float(2 * stats.t.sf(abs(estimate / se), df))
    return Shift(estimate, se, p, bias, part, df=df)


POWERLESS = 0.25   # a check that finds an error four times in five only above this (its detectable) passes nothing
ROUND_OFF = 1e-5   # float32 networks: a relative error below this is round-off, not a draw


def summarise(deviations: dict[int, Tensor], kernel: Tensor, bootstrap: int, level: float, generator: torch.Generator,
              names: Sequence[str] = (), covariates: Optional[dict[int, Tensor]] = None,
              extra: Sequence[Shift] = ()) -> tuple[list[WidthSummary], Verdict]:
    """Per-width errors and the verdict from ``deviations[w]`` (``S x n*n``, or ``S x (1 + P) x n*n``
    with a tangent kernel's ``P`` parts after the whole: ``K_ws - K``) and the kernel they are
    measured from (``n x n``, or ``(1 + P) x n x n``; the parts named ``names``). The errors,
    slope and randomisation test read the whole kernel; the shift test each of the whole and the
    parts, at ``level / 2`` shared among them (Bonferroni)."""
    kernels = kernel.reshape(-1, *kernel.shape[-2:]) if kernel.dim() >= 2 else kernel.reshape(1, -1)
    kernels = kernels.reshape(kernels.size(0), -1).to(torch.float64)
    parts = {w: (d[:, None] if d.dim() == 2 else d) for w, d in deviations.items()}
    whole = {w: d[:, 0] for w, d in parts.items()}
    norm = float(torch.linalg.norm(kernels[0]))
    widths = sorted(whole)
    confidence = 1 - level
    lo_q, hi_q = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    rows, boot_errors = [], []
    for w in widths:
        d = whole[w]
        s = d.size(0)
        error = float(_relative_error(d, norm))
        spread = ((d - d.mean(0)) ** 2).sum() / (s * (s - 1)) if s > 1 else torch.tensor(math.nan)
        boot = _bootstrap_errors(d, norm, bootstrap, generator)
        boot_errors.append(boot)
        low, high = torch.quantile(boot, torch.tensor([lo_q, hi_q], dtype=boot.dtype)).tolist()
        shift = float(boot.median()) - error   # a resampled mean's norm is biased up by the resampling's own noise (by about
        low, high = max(low - shift, 0.0), max(high - shift, 0.0)   # the noise where the error is near it): the percentiles moved
        rows.append(WidthSummary(w, s, error, low, high, float(spread.sqrt()) / norm))   # back by that bias, so they hold the estimate
    w_tensor = torch.tensor(widths, dtype=torch.float64)
    errors = torch.tensor([r.relative_error for r in rows], dtype=torch.float64)
    slope = float(_slope(w_tensor, errors)) if len(widths) > 1 else math.nan
    if len(widths) > 1:
        boot_slopes = _slope(w_tensor, torch.stack(boot_errors, 1).double().clamp_min(1e-300))
        slope_low, slope_high = torch.quantile(boot_slopes, torch.tensor([lo_q, hi_q], dtype=torch.float64)).tolist()
    else:
        slope_low = slope_high = math.nan
    p_value = sign_flip_p_value(whole, bootstrap_size(bootstrap), generator)
    count = next(iter(parts.values())).size(1) if parts else 1
    alpha = level / 2 / (count + len(extra))
    labels = ["the kernel", *(f"its part {name}" for name in names)]
    shifts = [shift_test({w: d[:, j] for w, d in parts.items()}, kernels[j], labels[j] if j < len(labels) else f"its part {j}", covariates).at(alpha)
              for j in range(count)]
    extra = [shift.at(alpha) for shift in extra]
    passed, reason = decide(p_value, [*shifts, *extra], level, slope_low, slope_high)
    inconclusive = False
    if all(r.relative_error < ROUND_OFF and r.noise < ROUND_OFF for r in rows) and all(e.p_value >= alpha for e in extra):
        passed, reason = True, f"every network equals the kernel to the networks' float32 round-off (relative error below {ROUND_OFF:g}): a network without randomness in its output"
    elif passed and shifts[0].detectable > POWERLESS:   # no evidence either way: a PASS here would be read as one
        passed, inconclusive = False, True
        reason = (f"no error was found, but this check finds one four times in five only from {100 * shifts[0].detectable:.0f}% "
                  f"(above {100 * POWERLESS:g}%): too few seeds or too narrow widths to tell a wrong kernel from a right one; "
                  "give more verify.seeds or wider verify.widths (a check at the defaults finds 2%: verify.resolution)")
    return rows, Verdict(slope, slope_low, slope_high, p_value, level, passed, reason, shifts[0], tuple(shifts[1:]), alpha, tuple(extra),
                         inconclusive)


def bootstrap_size(bootstrap: int) -> int:
    """Sign patterns for the randomisation test: at least 9999, so a p-value resolves 1e-4."""
    return max(bootstrap, 9999)


def intercept_weights(deviations: dict[int, Tensor]) -> dict[int, float]:
    """Each network's weight in the estimate of the width-independent error: the weighted least
    squares of the per-width means on ``[1, 1/w]`` (weights ``S_w w``, each mean's inverse
    variance under ``Var = c / w``), whose intercept is ``sum_w a_w mean_w`` with
    ``sum_w a_w = 1`` and ``sum_w a_w / w = 0``: a finite-width bias ``b / w`` cancels. One
    width: the plain mean."""
    widths = sorted(deviations)
    counts = torch.tensor([deviations[w].size(0) for w in widths], dtype=torch.float64)
    w_t = torch.tensor(widths, dtype=torch.float64)
    x = torch.stack([torch.ones_like(w_t), 1 / w_t], 1) if len(widths) > 1 else torch.ones(1, 1, dtype=torch.float64)
    weight = counts * w_t
    a = torch.linalg.solve(x.T @ (weight[:, None] * x), x.T * weight)[0]
    return {w: float(a[i] / counts[i]) for i, w in enumerate(widths)}


def sign_flip_p_value(deviations: dict[int, Tensor], patterns: int, generator: torch.Generator) -> float:
    """p-value of ``T = ||sum_ws a_w D_ws||^2`` (the squared width-independent error, each entry's
    bias ``b_e / w`` cancelled: :func:`intercept_weights`) by a wild bootstrap: the residuals of
    the hypothesis's own fit, ``r_ws = D_ws - b_e / w`` (``b_e`` fitted with no error term), given
    random signs, give ``T``'s distribution when there is no error."""
    widths = sorted(deviations)
    data = {w: deviations[w].to(torch.float64) for w in widths}
    a = intercept_weights(data)
    if len(widths) > 1:
        counts = {w: data[w].size(0) for w in widths}
        bias = sum(data[w].sum(0) for w in widths) / sum(counts[w] / w for w in widths)   # b_e: WLS of the means on 1 / w alone
        residuals = {w: data[w] - bias / w for w in widths}
    else:
        residuals = data
    observed = float(sum(a[w] * data[w].sum(0) for w in widths).pow(2).sum())
    weighted = torch.cat([a[w] * residuals[w] for w in widths])   # networks x n*n
    gram = weighted @ weighted.T
    signs = torch.randint(2, (patterns, gram.size(0)), generator=generator).to(gram.dtype) * 2 - 1
    flipped = ((signs @ gram) * signs).sum(1)
    # a relative tolerance so that round-off in equal statistics counts as "at least as large"
    exceed = int((flipped >= observed * (1 - 1e-12)).sum())
    return (1 + exceed) / (1 + patterns)


def decide(p_value: float, shifts: Sequence[Shift], level: float, slope_low: float, slope_high: float) -> tuple[bool, str]:
    """PASS unless the randomisation test rejects at ``level / 2``, a shift test at
    ``level / 2`` shared among the shift tests, or the slope's ``1 - level`` interval lies
    wholly above ``-1/2`` (an error that does not shrink as the theory says)."""
    half = level / 2
    alpha = half / max(len(shifts), 1)
    worst = min(shifts, key=lambda shift: shift.p_value) if shifts else None
    if worst is not None and worst.p_value < alpha:
        return False, (f"{worst.source} off {worst.part} along itself by {100 * worst.estimate:+.2f}% "
                       f"(+- {100 * worst.se:.2f}%, p = {worst.p_value:.2g} < {alpha:.2g})")
    if p_value < half:
        return False, f"the networks' mean covariance differs from the kernel beyond Monte-Carlo noise (p = {p_value:.2g} < {half:g})"
    if math.isfinite(slope_low) and slope_low > -0.5:
        return False, f"the error does not shrink like width^-1/2 (slope interval [{slope_low:.2f}, {slope_high:.2f}] excludes -0.5)"
    shift_p = f", shift p >= {worst.p_value:.2g} (level {alpha:.2g})" if worst is not None else ""
    return True, (f"consistent with Monte-Carlo noise (randomisation p = {p_value:.2g} >= {half:g}{shift_p}) "
                  f"and the slope interval [{slope_low:.2f}, {slope_high:.2f}] does not lie wholly above -0.5")
