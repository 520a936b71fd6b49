"""The ReLU expectation ``g`` (closed-form arc-cosine kernel of order 1)."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def relu_expectation_entries(cov: Tensor, var_x: Tensor, var_y: Tensor) -> Tensor:
    """``g = E[relu(z_x) relu(z_y)]`` for ``(z_x, z_y) ~ N(0, [[var_x, cov], [cov, var_y]])``,
    entry by entry (broadcasting):

        g = sqrt(var_x var_y) / (2 pi) * (sin t + (pi - t) cos t),
        t = arccos(cov / sqrt(var_x var_y)),

    with the cosine clamped to ``[-1, 1]``; a zero variance gives 0, not NaN.
    """
    sd_x, sd_y = var_x.clamp_min(0).sqrt(), var_y.clamp_min(0).sqrt()
    inv_x = torch.where(sd_x > 0, 1 / sd_x, torch.zeros_like(sd_x))  # a zero variance gives cos 0, then g 0
    inv_y = torch.where(sd_y > 0, 1 / sd_y, torch.zeros_like(sd_y))
    cos = (cov * inv_x).mul_(inv_y).clamp_(-1, 1)
    t = torch.arccos(cos)
    out = torch.sin(t)
    out += t.neg_().add_(math.pi).mul_(cos)
    return out.mul_(sd_x).mul_(sd_y).div_(2 * math.pi)


def relu_expectation(cov: Tensor, var_rows: Tensor, var_cols: Tensor, chunk_rows: int = 2048) -> Tensor:
    """``g(K)`` for a block ``cov = K[rows, cols]`` with diagonals ``var_rows = K_xx`` and
    ``var_cols = K_yy`` (see :func:`relu_expectation_entries`), in row chunks to bound temporaries."""
    out = torch.empty_like(cov)
    for start in range(0, cov.size(0), chunk_rows):
        stop = min(start + chunk_rows, cov.size(0))
        out[start:stop] = relu_expectation_entries(cov[start:stop], var_rows[start:stop, None], var_cols[None, :])
    return out
