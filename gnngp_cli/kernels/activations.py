"""Elementwise activations as the kernels read them: one :class:`Activation` holds ``phi`` (the
finite network's layer) and its two Gaussian expectations, entry by entry,

    g(K)  = E[phi(u) phi(v)],        g'(K) = E[phi'(u) phi'(v)],
    (u, v) ~ N(0, [[K_xx, K_xy], [K_xy, K_yy]]),

the first carrying the NNGP kernel through the activation, the second the tangent kernel. The
activation block (:class:`~gnngp_cli.kernels.blocks.Elementwise`) and the root operations of both
backings read only these, and every entry of :data:`ACTIVATIONS` is a block name of composed
kernels: a new activation is one :class:`Activation` added there (see ``ERF``)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from .numerics import sqrt_positive
from .relu import relu_derivative_expectation_entries, relu_expectation_entries, relu_expectations

Entries = Callable[[Tensor, Tensor, Tensor], Tensor]   # (cov, var_x, var_y), broadcasting, -> the expectation


def _by_rows(entries: Entries, cov: Tensor, var_rows: Tensor, var_cols: Tensor, chunk_rows: int, out: Optional[Tensor] = None) -> Tensor:
    """``entries`` over a block ``cov = K[rows, cols]`` in row chunks, to bound the temporaries;
    into ``out`` where given (``cov`` itself: in place, each chunk read before it is written)."""
    out = torch.empty_like(cov) if out is None else out
    for start in range(0, cov.size(0), chunk_rows):
        stop = min(start + chunk_rows, cov.size(0))
        out[start:stop] = entries(cov[start:stop], var_rows[start:stop, None], var_cols[None, :])
    return out


@dataclass(frozen=True)
class Activation:
    """An elementwise activation (see the module docstring). ``both``: the two expectations of a
    block in one pass without a gradient, equal bit for bit to each alone (optional; the low-rank
    tangent step uses it where there is one, :func:`~.torch_roots.activation_pair_rows`)."""

    name: str
    function: Callable[[Tensor], Tensor]     # phi, for the wide network that gnngp verify samples
    expectation_entries: Entries             # g, entry by entry
    derivative_entries: Entries              # g', entry by entry
    both: Optional[Callable[..., tuple[Tensor, Tensor]]] = None

    def expectation(self, cov: Tensor, var_rows: Tensor, var_cols: Tensor, chunk_rows: int = 2048, out: Optional[Tensor] = None) -> Tensor:
        """``g(K)`` of a block ``cov = K[rows, cols]`` with the variances of its rows and columns
        (into ``out``, which may be ``cov``: a block of a large root needs no second block)."""
        return _by_rows(self.expectation_entries, cov, var_rows, var_cols, chunk_rows, out)

    def derivative(self, cov: Tensor, var_rows: Tensor, var_cols: Tensor, chunk_rows: int = 2048) -> Tensor:
        """``g'(K)`` of a block, as :meth:`expectation`."""
        return _by_rows(self.derivative_entries, cov, var_rows, var_cols, chunk_rows)


RELU = Activation("relu", torch.relu, relu_expectation_entries, relu_derivative_expectation_entries, relu_expectations)


def _erf_arcsin(cov: Tensor, var_x: Tensor, var_y: Tensor) -> Tensor:
    """``E[erf(u) erf(v)] = (2 / pi) arcsin(2 K_xy / sqrt((1 + 2 K_xx)(1 + 2 K_yy)))`` (Williams 1997)."""
    return torch.arcsin((2 * cov / torch.sqrt((1 + 2 * var_x) * (1 + 2 * var_y))).clamp(-1, 1)) * (2 / math.pi)


def _erf_derivative(cov: Tensor, var_x: Tensor, var_y: Tensor) -> Tensor:
    """``E[erf'(u) erf'(v)] = (4 / pi) / sqrt((1 + 2 K_xx)(1 + 2 K_yy) - 4 K_xy^2)``."""
    return (4 / math.pi) / sqrt_positive((1 + 2 * var_x) * (1 + 2 * var_y) - 4 * cov * cov)


ERF = Activation("erf", torch.erf, _erf_arcsin, _erf_derivative)

ACTIVATIONS = {a.name: a for a in (RELU, ERF)}
