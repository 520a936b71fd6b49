"""The activation check: each activation's Gaussian expectations, as the kernel reads them, against
direct Monte Carlo of the activation the network runs, at the covariances the kernel feeds it.

The wide networks test the whole composition, but their noise falls only like
``1 / sqrt(seeds * width)``: a 1% error in the ReLU's derivative expectation moves a GCN's tangent
kernel by 0.2%, which would take millions of network draws to see. The activation's maps are the
one non-linear-algebra part of a kernel, and each is a two-dimensional Gaussian expectation that
can be sampled directly: for every pair of nodes ``(x, y)`` of the check graph, with ``K`` the
block's input kernel,

    g(K)_xy  = E[phi(u) phi(v)],   g'(K)_xy = E[phi'(u) phi'(v)],   (u, v) ~ N(0, [[K_xx, K_xy], [K_xy, K_yy]]),

``phi`` the activation's torch function (the network's own layer; ``phi'`` by autograd), never the
kernel's formula. One draw ``(z_1, z_2)`` gives every pair's ``(u, v)`` (``u = sqrt(K_xx) z_1``,
``v = K_xy / sqrt(K_xx) z_1 + sqrt(K_yy - K_xy^2 / K_xx) z_2``) and one number,
``t_s = <phi(u_s) phi(v_s), G> / <G, G> - 1`` (``G`` the kernel's map on the pairs), averaged with
its antithetic twin ``-z``: the pairs are independent, so the mean of ``t_s`` is the map's relative
error along itself with an exact standard error, the same :class:`~.statistics.Shift` the
networks give.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
from torch import Tensor

from ..kernels import Block
from .statistics import Shift


SAMPLES = 1_000_000   # Gaussian draws per map, in antithetic pairs
PAIRS = 256           # node pairs per map (the diagonal and a seeded draw of the others): they move together, so more add little
CHUNK = 512          # draws per pass: 512 x 256 pairs of float64 (1 MB) stay in a core's cache; a multiple of 8, so the
                     # draws are those of any other multiple (torch makes its normals 16 at a time)


@dataclass(frozen=True)
class Observed:
    """An activation block, the activation (maps and function) it read, and the dense kernel it
    read in the analytic evaluation: the check tests the maps the kernel was computed with."""

    block: Block
    activation: Any
    kernel: Tensor

    @classmethod
    def of(cls, block: Block, kernel: Tensor) -> "Observed":
        """What the analytic kernel's ``observe`` is told, kept (the kernel copied, in float64)."""
        return cls(block, block.activation, kernel.detach().to(torch.float64).clone())


def _derivative(phi: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    def d(u: Tensor) -> Tensor:
        u = u.detach().requires_grad_(True)
        with torch.enable_grad():
            return torch.autograd.grad(phi(u).sum(), u)[0]
    return d


def map_shift(activation, kernel: Tensor, which: str, generator: torch.Generator,
              samples: Optional[int] = None, label: str = "") -> Shift:
    """The relative error of ``activation``'s ``which`` map (``expectation``: ``g``, ``derivative``:
    ``g'``) along itself on the pairs of nodes of ``kernel`` (every one, or :data:`PAIRS` of them), by
    direct Monte Carlo (module docstring)."""
    from scipy import stats

    n = kernel.size(0)
    rows, cols = torch.triu_indices(n, n)
    if rows.numel() > PAIRS:
        off = (rows != cols).nonzero().squeeze(1)
        keep = off[torch.randperm(off.numel(), generator=generator)[:max(PAIRS - n, 0)]]
        chosen = torch.cat([(rows == cols).nonzero().squeeze(1), keep])
        rows, cols = rows[chosen], cols[chosen]
    var = kernel.diagonal().clamp_min(0)
    cov, vx, vy = kernel[rows, cols], var[rows], var[cols]
    entries = activation.expectation_entries if which == "expectation" else activation.derivative_entries
    analytic = entries(cov, vx, vy).to(torch.float64)
    norm = float(analytic @ analytic)
    source = "Monte Carlo of the activation is"
    if norm == 0 or not math.isfinite(norm):
        return Shift(math.nan, math.nan, 1.0, 0.0, label, source)
    a = vx.sqrt().clamp_min(1e-300)
    b = torch.where(vx > 0, cov / a, torch.zeros_like(cov))
    r = (vy - b * b).clamp_min(0).sqrt()
    phi = activation.function if which == "expectation" else _derivative(activation.function)
    total = square = 0.0
    done = 0
    samples = (SAMPLES if samples is None else samples) // 2   # antithetic pairs
    while done < samples:
        size = min(CHUNK, samples - done)
        z = torch.randn(size, 2, generator=generator, dtype=torch.float64)
        u = z[:, :1] * a
        v = z[:, :1] * b + z[:, 1:] * r
        t = ((phi(u) * phi(v) + phi(-u) * phi(-v)) / 2) @ analytic / norm - 1   # z and -z: an antithetic pair, one draw of t
        total += float(t.sum())
        square += float((t * t).sum())
        done += size
    estimate = total / samples
    se = math.sqrt(max(square / samples - estimate ** 2, 0.0) / (samples - 1))
    p = (1.0 if estimate == 0 else 0.0) if se == 0 else float(2 * stats.norm.sf(abs(estimate / se)))
    return Shift(estimate, se, p, 0.0, label, source)


def activation_shifts(observed: Sequence[Observed], tangent: bool, seed: int, samples: int = SAMPLES) -> list[Shift]:
    """The check of every observed activation block (the analytic kernel's ``observe``): ``g``
    always, ``g'`` for a tangent kernel; each map as the kernel read it, from ``samples`` draws."""
    generator = torch.Generator().manual_seed(seed)
    shifts, seen = [], []
    for item in observed:
        if any(item.block is b and torch.equal(item.kernel, k) for b, k in seen):
            continue   # the same block on the same input (a tangent kernel evaluates it once more)
        seen.append((item.block, item.kernel))
        activation = item.activation
        index = len(seen)
        for which in ("expectation", "derivative") if tangent else ("expectation",):
            name = "g" if which == "expectation" else "g'"
            shifts.append(map_shift(activation, item.kernel, which, generator, samples,
                                    label=f"the {activation.name} map {name} (activation {index})"))
    return shifts
