"""Blocks for heterophily: polynomial graph filters (GPR-GNN) and H2GCN's hop operators.

| block            | network                  | kernel                          | low rank     |
|------------------|--------------------------|---------------------------------|--------------|
| Poly(g0..gK)     | X <- sum_k g_k A^k X     | K <- P K P^T, P = sum_k g_k A^k | Q <- P Q     |
| HopConv(1 or 2)  | X <- A_i X (H2GCN A1/A2) | K <- A_i K A_i^T                | Q <- A_i Q   |

The terms ``g_k A^k X`` of one filter share ``X``, so they are correlated and the filter is one
block ``P K P^T`` (with the cross terms ``g_i g_j A^i K A^j``), not an independent addition of
branches. Coefficients may have any sign: ``[1, -1]`` is the high-pass ``I - A``. ``P`` is applied
by Horner's rule, ``P Y = g0 Y + A (g1 Y + A (g2 Y + ... + A g_K Y))``, on node sets that shrink
hop by hop: ``P[rows] Y`` needs ``Y`` on the K-hop neighbourhood of ``rows`` (the block's
support) and the sparse blocks ``A[N_k, N_(k+1)]``, so the same code serves a root ``Y = R`` and a
matrix ``Y = K[support, cols]``. On pairs, ``(P K P^T)[r, c] = sum_jk P_rj P_ck K_jk`` over the
sparse rows of ``P`` (formed by sparse products ``E_(k+1) = E_k A``), within the pair budget.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import Tensor

from ..graph.operators import Adjacency, sparse_beta_quiet
from ..errors import ConfigError, KernelError
from ..progress import within
from . import layers
from .blocks import Block, Conv, node_count
from .context import KernelContext
from .value import FactoredRoot, Kernel, Nodes, _find
from .pairs import Pairs, PairValues, PatternTooLarge, product_terms


def filter_coefficients(value: Any, where: str = "kernel block {poly: ...}") -> tuple[float, ...]:
    """A filter ``[g0, g1, ...]`` as floats; an empty or non-numeric list is a :class:`ConfigError`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) == 0:
        raise ConfigError(f"{where}: the filter coefficient list {value!r} is empty or not a list; give at least one coefficient, e.g. [1, -1] for I - A")
    try:
        coefficients = tuple(float(g) for g in value)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: filter coefficients must be numbers, got {value!r}") from err
    if not all(math.isfinite(g) for g in coefficients):
        raise ConfigError(f"{where}: filter coefficients must be finite, got {value!r}")
    if not any(coefficients):
        raise ConfigError(f"{where}: every filter coefficient is zero ({value!r}); the kernel would vanish")
    return coefficients


def filter_grid(value: Any) -> list[tuple[float, ...]]:
    """``kernel.coefficients``: one filter ``[g0, ...]`` or a list of filters (a grid chosen on
    validation)."""
    where = "kernel.coefficients"
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) and all(
            isinstance(v, Sequence) and not isinstance(v, str) for v in value):
        return [filter_coefficients(v, where) for v in value]
    return [filter_coefficients(value, where)]


class Poly(Block):
    """``X <- sum_k g_k A^k X``: ``K <- P K P^T`` with ``P = sum_k g_k A^k``; low rank ``Q <- P Q``."""

    propagates = True

    def __init__(self, coefficients: Sequence[float]):
        coefficients = filter_coefficients(list(coefficients))
        last = max(i for i, g in enumerate(coefficients) if g != 0)
        self.coefficients = coefficients[: last + 1]   # trailing zeros add no hop

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1

    def layer(self, shape):
        return layers.OperatorLayer(layers.polynomial(self.coefficients), shape)

    def hops(self, nodes: Tensor, ctx: KernelContext) -> list[Tensor]:
        """``[N_0 = nodes, N_1, ..., N_K]``: each the 1-hop neighbourhood of the one before."""
        sets = [nodes]
        for _ in range(self.degree):
            sets.append(ctx.adjacency.neighbours(sets[-1]))
        return sets

    def support(self, nodes, ctx):
        return None if nodes is None else self.hops(nodes, ctx)[-1]

    def peak_elements(self, nodes, ctx, cols=None):
        rows = self.hops(nodes, ctx)[-2] if nodes is not None and self.degree else nodes
        return node_count(rows, ctx) * node_count(self.support(nodes if cols is None else cols, ctx), ctx)

    def apply(self, values: Tensor, held: Nodes, rows: Nodes, adjacency: Adjacency, ctx: KernelContext) -> Tensor:
        """``P[rows] Y`` for ``Y`` given on the nodes ``held`` (rows of ``values``; ``None``: every
        node, a root that the context's backing holds: each ``A Y`` is its ``convolve``), by
        Horner's rule on shrinking node sets."""
        g = self.coefficients
        if isinstance(values, FactoredRoot):   # P (L R) = (P L) R
            return FactoredRoot(self.apply(values.left, held, rows, adjacency, ctx), values.right)
        if rows is None:
            out = g[-1] * values
            for gk in reversed(g[:-1]):
                out = ctx.roots.convolve(adjacency, out)
                if gk:
                    out = out + gk * values
            return out
        sets = self.hops(rows, ctx)
        out = g[-1] * values[_find(held, sets[-1])]
        for k in range(self.degree - 1, -1, -1):
            out = torch.sparse.mm(adjacency.block(sets[k], sets[k + 1]), out)
            if g[k]:
                out = out + g[k] * values[_find(held, sets[k])]
        return out

    def __call__(self, k, ctx, nodes, cols=None):
        a = ctx.adjacency
        if nodes is None:
            if k.root is None:
                raise KernelError("a dense kernel over every node is not supported; use the exact mode with node sets")
            return Kernel(None, root=self.apply(k.root, None, None, a, ctx))
        if k.root is not None:
            return Kernel(nodes, root=self.apply(k.root, k.nodes, nodes, a, ctx), cols=cols)
        in_cols = k.nodes if k.cols is None else k.cols
        with within("P K"):
            half = self.apply(k.matrix, k.nodes, nodes, a, ctx)                        # P_r K, |nodes| x |input columns|
        with within("(P K) P^T"):
            out = self.apply(half.T.contiguous(), in_cols, nodes if cols is None else cols, a, ctx).T  # (P_c (P_r K)^T)^T = P_r K P_c^T
        return Kernel(nodes, matrix=out, cols=cols)


    # pairs: the sparse rows of P for the nodes the pairs mention
    def _rows_of_p(self, nodes: Tensor, ctx: KernelContext) -> tuple[Tensor, Tensor, Tensor]:
        """CSR parts ``(crow, col, weight)`` of ``P[nodes, :]``; raises :class:`PatternTooLarge`
        when they hold more entries than the pair budget."""
        n, dtype, device = ctx.num_nodes, ctx.features.dtype, nodes.device
        a = ctx.adjacency
        local = torch.arange(nodes.numel(), device=device)
        with sparse_beta_quiet():
            adjacency = torch.sparse_coo_tensor(a.edge_index, a.edge_weight.to(dtype), (n, n), check_invariants=False).coalesce()
            power = torch.sparse_coo_tensor(torch.stack([local, nodes]), torch.ones(nodes.numel(), dtype=dtype, device=device), (nodes.numel(), n),
                                            check_invariants=False).coalesce()
            total = power * self.coefficients[0]
            for gk in self.coefficients[1:]:
                power = torch.sparse.mm(power, adjacency).coalesce()
                if power._nnz() > ctx.pair_limit:
                    raise PatternTooLarge(power._nnz())
                total = (total + power * gk).coalesce()
            csr = total.to_sparse_csr()
        return csr.crow_indices(), csr.col_indices(), csr.values()

    def _terms(self, pairs: Pairs, ctx: KernelContext):
        nodes = torch.unique(torch.cat([pairs.rows, pairs.cols]))
        crow, col, weight = self._rows_of_p(nodes, ctx)
        return product_terms(torch.searchsorted(nodes, pairs.rows), torch.searchsorted(nodes, pairs.cols), crow, col, weight, ctx.pair_limit)

    def pair_support(self, pairs, ctx):
        _, j, k, _ = self._terms(pairs, ctx)
        return Pairs.make(j, k, ctx.num_nodes)

    def on_pairs(self, k, ctx, pairs):
        if isinstance(k, Kernel):
            return Kernel(None, root=self.apply(k.root, None, None, ctx.adjacency, ctx))
        pair_id, j, kk, w = self._terms(pairs, ctx)
        out = torch.zeros(len(pairs), dtype=k.values.dtype, device=k.values.device)
        out.index_add_(0, pair_id, w * k.values[k.pairs.lookup(j, kk, ctx.num_nodes)])
        return PairValues(pairs, out)


class HopConv(Conv):
    """``X <- A_i X`` with H2GCN's normalised 1-hop (``hop=1``) or exact 2-hop (``hop=2``)
    operator (the adjacency's ``operator("hop1")``, see :mod:`gnngp_cli.graph.operators`):
    ``K <- A_i K A_i^T``; low rank ``Q <- A_i Q`` (on row blocks too: the operator is then
    sharded like the adjacency)."""

    def __init__(self, hop: int):
        if hop not in (1, 2):
            raise ConfigError(f"HopConv(hop={hop}): H2GCN has 1-hop and 2-hop operators; use 1 or 2")
        self.hop = hop

    def operator(self, adjacency: Adjacency) -> Adjacency:
        return adjacency.operator(f"hop{self.hop}")

    def dense_operator(self, graph: Any) -> Tensor:
        return graph.hop_operators()[self.hop - 1]


def hop_paths(rounds: int) -> list[tuple[int, ...]]:
    """H2GCN's blocks as paths of hops: ``()`` (the ego embedding), then every sequence of 1- and
    2-hop steps of length ``1 .. rounds`` (``2^(rounds+1) - 1`` paths in all)."""
    paths: list[tuple[int, ...]] = [()]
    frontier: list[tuple[int, ...]] = [()]
    for _ in range(rounds):
        frontier = [path + (hop,) for path in frontier for hop in (1, 2)]
        paths += frontier
    return paths
