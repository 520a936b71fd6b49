"""Kernels on a sparse set of node pairs (exact mode).

Used for the diagonal of ``K`` on every node, and the variances each ReLU needs, without
forming any N x N block: a request is a
canonical pair set (``row <= col``); roots stay dense over all nodes while the network is
linear, and a nonlinearity evaluates its input only on the pairs it needs. Each block's
``pair_support``/``on_pairs`` methods (in :mod:`.blocks`) use these helpers.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..graph.operators import row_pointers, sparse_beta_quiet


class PatternTooLarge(Exception):
    """The pair set needed to evaluate a request exceeds the budget."""


@dataclass(frozen=True)
class Pairs:
    """Sorted unique canonical node pairs ``rows[i] <= cols[i]``."""

    rows: Tensor
    cols: Tensor

    @staticmethod
    def make(rows: Tensor, cols: Tensor, num_nodes: int) -> "Pairs":
        lo, hi = torch.minimum(rows, cols), torch.maximum(rows, cols)
        keys = torch.unique(lo * num_nodes + hi)
        return Pairs(keys // num_nodes, keys % num_nodes)

    @staticmethod
    def diagonal(nodes: Tensor) -> "Pairs":
        return Pairs(nodes, nodes)

    @staticmethod
    def union(parts: "list[Pairs]", num_nodes: int) -> "Pairs":
        return Pairs.make(torch.cat([p.rows for p in parts]), torch.cat([p.cols for p in parts]), num_nodes)

    def with_diagonal(self, num_nodes: int) -> "Pairs":
        """These pairs plus ``(i, i)`` for every node they mention."""
        nodes = torch.unique(torch.cat([self.rows, self.cols]))
        return Pairs.make(torch.cat([self.rows, nodes]), torch.cat([self.cols, nodes]), num_nodes)

    def keys(self, num_nodes: int) -> Tensor:
        return self.rows * num_nodes + self.cols

    def lookup(self, rows: Tensor, cols: Tensor, num_nodes: int) -> Tensor:
        """Positions of the (canonicalised) pairs ``(rows, cols)`` in this set."""
        keys = torch.minimum(rows, cols) * num_nodes + torch.maximum(rows, cols)
        return torch.searchsorted(self.keys(num_nodes), keys)

    def __len__(self) -> int:
        return self.rows.numel()


@dataclass(frozen=True)
class PairValues:
    """``K`` on a pair set."""

    pairs: Pairs
    values: Tensor

    def on(self, pairs: Pairs, num_nodes: int) -> Tensor:
        """Values on ``pairs`` (a subset of this set)."""
        return self.values[self.pairs.lookup(pairs.rows, pairs.cols, num_nodes)]


def root_on_pairs(root: Tensor, pairs: Pairs) -> Tensor:
    """``(R R^T)[r, c]`` for every pair: a sampled dense-dense product on the CSR pattern
    of the pairs (they are sorted row-major, so the pattern is already in CSR order)."""
    n = root.size(0)
    crow = row_pointers(pairs.rows, n)
    with sparse_beta_quiet():
        pattern = torch.sparse_csr_tensor(crow, pairs.cols, root.new_zeros(len(pairs)), (n, n), check_invariants=False)
        return torch.sparse.sampled_addmm(pattern, root, root.T.contiguous(), beta=0.0).values()


def conv_terms(pairs: Pairs, ctx, adjacency=None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """For ``(A K A^T)[r, c] = sum_jk A_rj A_ck K_jk``: the terms ``(pair id, j, k, A_rj A_ck)``
    (``A``: ``adjacency``, by default the context's)."""
    crow, col, weight = (adjacency or ctx.adjacency).csr_parts()
    return product_terms(pairs.rows, pairs.cols, crow, col, weight, ctx.pair_limit)


def product_terms(rows: Tensor, cols: Tensor, crow: Tensor, col: Tensor, weight: Tensor, limit: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """For ``(M K M^T)[r, c] = sum_jk M_rj M_ck K_jk`` over the pairs ``(rows[i], cols[i])``, with
    ``M`` in CSR parts (``rows``, ``cols`` index its rows): the terms ``(pair id, j, k, M_rj M_ck)``.
    Raises :class:`PatternTooLarge` beyond ``limit`` terms."""
    deg = crow[1:] - crow[:-1]
    dr, dc = deg[rows], deg[cols]
    count = dr * dc
    total = int(count.sum())
    if total > limit:
        raise PatternTooLarge(total)
    pair_id = torch.repeat_interleave(torch.arange(rows.numel(), device=count.device), count)
    offset = torch.arange(total, device=count.device) - torch.repeat_interleave(torch.cumsum(count, 0) - count, count)
    jr = offset // dc[pair_id]
    kc = offset - jr * dc[pair_id]
    ej = crow[rows][pair_id] + jr
    ek = crow[cols][pair_id] + kc
    return pair_id, col[ej], col[ek], weight[ej] * weight[ek]
