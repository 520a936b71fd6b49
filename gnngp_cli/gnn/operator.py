"""The graph operator of the GNN baselines' fast path (``gnn.propagation=sparse``): one sparse
CSR matrix over targets (row = target, column = source) that carries its transpose, and the
product whose backward pass reads that transpose.

``torch.sparse.mm(A, X)`` with a CSR ``A`` differentiates ``X`` through ``A^T``, which torch
builds again at every backward pass (a transpose and a sort of every stored entry), every
epoch of a full-batch run. :func:`operator` builds ``A`` and, on the first backward pass that needs it,
``A^T`` once (the same entries, swapped, in row-major order), and :func:`product` is ``A @ X``
whose backward is one more CSR product, ``A^T @ dY``: a full-batch run sorts its edges for the
transpose once, not once an epoch (a mini-batch's sampled matrix is new each batch: its
transpose is built once a batch, as torch's would be). The PyG layers of the baselines are
subclassed (:func:`reading_operator`) so that their sum or mean aggregation over such an
operator is this product; over anything else they are PyG's own.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import torch
from torch import Tensor

from ..graph.operators import coo_to_csr

TRANSPOSE = "gnngp_transpose"   # the attribute of an operator that holds its transpose


class Transpose:
    """``A^T`` of a CSR operator, built from ``A``'s own arrays on the first backward pass that
    reads it and kept: a full-batch run builds it once, an inference (no gradient) never, and
    nothing is held for it before (the arrays are ``A``'s)."""

    def __init__(self, a: Tensor):
        self._csr: Optional[tuple] = (a.crow_indices(), a.col_indices(), a.values(), a.size(0), a.size(1))
        self._matrix: Optional[Tensor] = None

    def matrix(self) -> Tensor:
        if self._matrix is None:
            crow, col, values, rows, cols = self._csr
            row = torch.repeat_interleave(torch.arange(rows, device=crow.device), crow[1:] - crow[:-1])
            self._matrix, self._csr = coo_to_csr(torch.stack([col, row]), values, (cols, rows)), None
        return self._matrix


def carrying_transpose(a: Tensor) -> Tensor:
    """``a`` (a CSR matrix over targets) with its :class:`Transpose`, for :func:`product`'s backward."""
    setattr(a, TRANSPOSE, Transpose(a))
    return a


def operator(target: Tensor, source: Tensor, weight: Optional[Tensor], num_nodes: int, dtype: torch.dtype) -> Tensor:
    """``A`` with ``A[target, source] = weight`` (ones when ``None``), as a CSR matrix that
    carries its :class:`Transpose`."""
    values = (weight if weight is not None else torch.ones(target.numel(), device=target.device)).to(dtype)
    return carrying_transpose(coo_to_csr(torch.stack([target, source]), values, (num_nodes, num_nodes)))


class _Product(torch.autograd.Function):
    """``A @ X``, differentiated in ``X`` only (the operator is data) through the cached ``A^T``."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, transposed: Transpose, x: Tensor) -> Tensor:
        ctx.transposed = transposed
        return torch.sparse.mm(a, x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        return None, None, torch.sparse.mm(ctx.transposed.matrix(), grad.contiguous())


def product(a: Tensor, x: Tensor) -> Tensor:
    """``A @ X`` for a sparse ``A``; with the transpose of :func:`operator`, a backward pass that reads it."""
    transposed = getattr(a, TRANSPOSE, None)
    if transposed is None or not x.requires_grad:
        return torch.sparse.mm(a, x)
    return _Product.apply(a, transposed, x)


def mean_product(a: Tensor, x: Tensor) -> Tensor:
    """The mean over each row's stored entries of ``A @ X`` (mean aggregation; a row with none gives 0)."""
    crow = a.crow_indices()
    return product(a, x) / (crow[1:] - crow[:-1]).clamp_min(1).to(x.dtype)[:, None]


AGGREGATIONS = {"add": product, "sum": product, "mean": mean_product}


@functools.cache
def reading_operator(layer: type) -> type:
    """``layer`` (a PyG message-passing class) whose sum or mean aggregation over an
    :func:`operator` is :func:`product`; over any other adjacency, the layer's own."""

    def message_and_aggregate(self, adj_t, x):
        aggregate = AGGREGATIONS.get(self.aggr) if hasattr(adj_t, TRANSPOSE) else None
        if aggregate is None:
            return layer.message_and_aggregate(self, adj_t, x)
        return aggregate(adj_t, x[0] if isinstance(x, tuple) else x)

    return type(layer.__name__, (layer,), {"message_and_aggregate": message_and_aggregate, "__module__": __name__,
                                            "__qualname__": layer.__name__, "__doc__": layer.__doc__})
