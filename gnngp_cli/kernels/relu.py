"""The ReLU expectation ``g`` (closed-form arc-cosine kernel of order 1), and that of its
derivative ``g'`` (order 0), which carries a tangent kernel through the activation."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .numerics import sqrt_positive


def _inverse(sd: Tensor) -> Tensor:
    """``1 / sd``, 0 where ``sd = 0`` (a zero variance gives cos 0, then g 0), with a finite gradient."""
    positive = sd > 0
    return torch.where(positive, 1 / torch.where(positive, sd, 1), 0)


def relu_expectation_entries(cov: Tensor, var_x: Tensor, var_y: Tensor) -> Tensor:
    """``g = E[relu(z_x) relu(z_y)]`` for ``(z_x, z_y) ~ N(0, [[var_x, cov], [cov, var_y]])``,
    entry by entry (broadcasting):

        g = sqrt(var_x var_y) / (2 pi) * (sin t + (pi - t) cos t),
        t = arccos(cov / sqrt(var_x var_y)),

    with the cosine clamped to ``[-1, 1]``; a zero variance gives 0, not NaN.

    Differentiable (for fitting hyperparameters): with ``c = cos t``,
    ``d/dc [sin t + (pi - t) c] = (pi - t) + (cos t - c) dt/dc = pi - t``, because the
    ``t``-terms cancel. So ``t`` is taken as a constant: the gradient is exact and finite at
    ``c = +-1``, where ``arccos``' own derivative is infinite.
    """
    sd_x, sd_y = sqrt_positive(var_x), sqrt_positive(var_y)
    cos = (cov * _inverse(sd_x)).mul_(_inverse(sd_y)).clamp_(-1, 1)
    t = torch.arccos(cos.detach())
    out = torch.sin(t)
    out += t.neg_().add_(math.pi).mul_(cos)
    return out.mul_(sd_x).mul_(sd_y).div_(2 * math.pi)


ROUND_OFF_COSINE = 8   # ulps: a cosine this close to +-1 is +-1 in g' (see relu_derivative_expectation_entries)


def relu_derivative_expectation_entries(cov: Tensor, var_x: Tensor, var_y: Tensor) -> Tensor:
    """``g' = E[relu'(z_x) relu'(z_y)] = P(z_x > 0, z_y > 0)`` for the same Gaussian pair as
    :func:`relu_expectation_entries` (the arc-cosine kernel of order 0, up to its factor 1/2):

        g' = (pi - t) / (2 pi),   t = arccos(cov / sqrt(var_x var_y)),

    ``1/2`` on the diagonal; a zero variance gives 0. ``g'`` is not Lipschitz at ``cos = +-1``
    (``t ~ sqrt(2 (1 - cos))``): a cosine within ``ROUND_OFF_COSINE`` ulps of ``+-1`` (the diagonal,
    computed as ``K_xx / K_xx``, is 1 only to round-off) is taken as exactly ``+-1``, so the result
    is a function of the kernel and not of its last bits. Differentiable: there ``t`` is a constant
    (``arccos``' derivative is infinite); elsewhere the gradient is exact."""
    sd_x, sd_y = sqrt_positive(var_x), sqrt_positive(var_y)
    cos = ((cov * _inverse(sd_x)) * _inverse(sd_y)).clamp(-1, 1)
    inner = cos.detach().abs() < 1 - ROUND_OFF_COSINE * torch.finfo(cos.dtype).eps
    cos = torch.where(inner, cos, cos.detach().sign())
    t = torch.where(inner, torch.arccos(torch.where(inner, cos, 0)), torch.arccos(cos.detach()))
    nonzero = (sd_x > 0) & (sd_y > 0)
    return torch.where(nonzero, (math.pi - t) / (2 * math.pi), 0)


def relu_expectations(cov: Tensor, var_rows: Tensor, var_cols: Tensor, chunk_rows: int = 2048) -> tuple[Tensor, Tensor]:
    """``g(K)`` and ``g'(K)`` of one block in one elementwise pass (the cosine and its ``arccos``
    taken once), equal bit for bit to ``RELU.expectation`` and ``RELU.derivative`` (:mod:`.activations`);
    without a gradient (the low-rank tangent step at scale; a fit goes through those two)."""
    g, dg = torch.empty_like(cov), torch.empty_like(cov)
    with torch.no_grad():
        for start in range(0, cov.size(0), chunk_rows):
            stop = min(start + chunk_rows, cov.size(0))
            sd_x, sd_y = sqrt_positive(var_rows[start:stop, None]), sqrt_positive(var_cols[None, :])
            cos = (cov[start:stop] * _inverse(sd_x)).mul_(_inverse(sd_y)).clamp_(-1, 1)
            t = torch.arccos(cos)
            out = torch.sin(t)
            out += (math.pi - t).mul_(cos)
            g[start:stop] = out.mul_(sd_x).mul_(sd_y).div_(2 * math.pi)
            inner = cos.abs() < 1 - ROUND_OFF_COSINE * torch.finfo(cos.dtype).eps   # g' snaps the cosine there (see its entries)
            t = torch.where(inner, t, torch.where(cos > 0, cos.new_zeros(()), cos.new_full((), math.pi)))
            nonzero = (sd_x > 0) & (sd_y > 0)
            dg[start:stop] = torch.where(nonzero, (math.pi - t) / (2 * math.pi), 0)
    return g, dg
