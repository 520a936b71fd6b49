"""The ReLU expectation ``g`` (closed-form arc-cosine kernel of order 1)."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def relu_expectation(cov: Tensor, var_rows: Tensor, var_cols: Tensor, chunk_rows: int = 2048) -> Tensor:
    """``g(K)_xy = E[relu(z_x) relu(z_y)]``, ``z ~ N(0, K)``:

        g_xy = sqrt(K_xx K_yy) / (2 pi) * (sin t + (pi - t) cos t),
        t = arccos(K_xy / sqrt(K_xx K_yy)),

    with the cosine clamped to ``[-1, 1]``. ``cov`` is ``K[rows, cols]``; ``var_rows`` and
    ``var_cols`` are the diagonals ``K_xx`` and ``K_yy``. A node of zero variance gets a
    zero row (not NaN). Rows are processed in chunks to bound temporaries.
    """
    s_rows = var_rows.clamp_min(0).sqrt()
    s_cols = var_cols.clamp_min(0).sqrt()
    out = torch.empty_like(cov)
    for start in range(0, cov.size(0), chunk_rows):
        stop = min(start + chunk_rows, cov.size(0))
        scale = s_rows[start:stop, None] * s_cols[None, :]
        cos = torch.where(scale > 0, cov[start:stop] / torch.where(scale > 0, scale, 1), 0).clamp_(-1, 1)
        t = torch.arccos(cos)
        out[start:stop] = (torch.sin(t) + (math.pi - t) * cos) * scale / (2 * math.pi)
    return out
