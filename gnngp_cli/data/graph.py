"""Graph preprocessing shared by the kernels and the GNN baselines.

One normalisation function, sparse throughout:
    symmetric  A_hat = (I + D)^-1/2 (I + A) (I + D)^-1/2
    row        A_hat = (I + D)^-1 (I + A)
The unit self-loop is added on top of any self-loop already in the edge list and the
weights are summed, as in the GNNGP paper's code.

The edge-list helpers (:func:`coalesce`, :func:`make_undirected`) are plain torch and give the
same edges in the same order as ``torch_geometric.utils.coalesce`` / ``to_undirected`` (rows,
then columns, ascending; ``tests/test_graph.py`` compares them), so that nothing here imports
torch_geometric, whose import alone costs more than torch's.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

NORMALISATIONS = ("sym", "row")


@contextmanager
def sparse_beta_quiet():
    """Silence PyTorch's warning that sparse CSR support is in beta (known and accepted here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*[Ss]parse.*")
        yield


def coalesce(edge_index: Tensor, edge_weight: Optional[Tensor], num_nodes: int) -> tuple[Tensor, Optional[Tensor]]:
    """Sort edges by (row, column) and merge duplicates, summing their weights.

    The sort key ``row * N + col`` is one int64 per edge; no other edge-sized int64 array is
    alive beside the output."""
    key = edge_index[0] * num_nodes + edge_index[1]
    key, order = torch.sort(key)
    unique, inverse = torch.unique_consecutive(key, return_inverse=True)
    del key
    out = torch.stack([torch.div(unique, num_nodes, rounding_mode="floor"), unique % num_nodes])
    if edge_weight is None:
        return out, None
    summed = torch.zeros(unique.numel(), dtype=edge_weight.dtype, device=edge_weight.device)
    summed.index_add_(0, inverse, edge_weight[order])
    return out, summed


def make_undirected(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Symmetrise and coalesce an edge list (duplicates merged, self-loops kept once)."""
    both = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    return coalesce(both, None, num_nodes)[0]


def normalized_adjacency(
    edge_index: Tensor,
    num_nodes: int,
    kind: str = "sym",
    edge_weight: Optional[Tensor] = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """Return ``(edge_index, edge_weight)`` of the normalised adjacency with unit self-loops.

    ``kind="sym"``: ``(I+D)^-1/2 (I+A) (I+D)^-1/2``; ``kind="row"``: ``(I+D)^-1 (I+A)``.
    Degrees are taken over rows of ``I + A``; an isolated node keeps its unit loop, so no
    degree is ever zero and no NaN can appear.
    """
    if kind not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {kind!r}; use one of {NORMALISATIONS}")
    if edge_weight is None:
        edge_weight = torch.ones(edge_index.size(1), dtype=dtype, device=edge_index.device)
    loops = torch.arange(num_nodes, device=edge_index.device)
    edge_index = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
    edge_weight = torch.cat([edge_weight.to(dtype), torch.ones(num_nodes, dtype=dtype, device=edge_index.device)])
    edge_index, edge_weight = coalesce(edge_index, edge_weight, num_nodes)
    row, col = edge_index
    deg = torch.zeros(num_nodes, dtype=dtype, device=edge_index.device).index_add_(0, row, edge_weight)
    if kind == "sym":
        inv_sqrt = deg.pow(-0.5)
        edge_weight = inv_sqrt[row] * edge_weight * inv_sqrt[col]
    else:
        edge_weight = edge_weight / deg[row]
    return edge_index, edge_weight


@dataclass
class Adjacency:
    """A normalised sparse adjacency ``A`` with the operations the kernels need."""

    edge_index: Tensor
    edge_weight: Tensor
    num_nodes: int
    _csr: Optional[Tensor] = None

    @classmethod
    def from_graph(cls, edge_index: Tensor, num_nodes: int, kind: str, dtype: torch.dtype, device) -> "Adjacency":
        ei, w = normalized_adjacency(edge_index.to(device), num_nodes, kind, dtype=dtype)
        return cls(ei, w, num_nodes)

    def csr_parts(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(crow, col, weight)`` of ``A`` in CSR order."""
        if self._csr is None:
            self._csr = _csr(self.edge_index, self.edge_weight, (self.num_nodes, self.num_nodes))
        return self._csr.crow_indices(), self._csr.col_indices(), self._csr.values()

    def matmul(self, dense: Tensor) -> Tensor:
        """``A @ dense`` for all nodes (sparse CSR product)."""
        if self._csr is None:
            self._csr = _csr(self.edge_index, self.edge_weight, (self.num_nodes, self.num_nodes))
        return torch.sparse.mm(self._csr, dense)

    def neighbours(self, nodes: Tensor) -> Tensor:
        """Sorted ids of every node reachable in one step from ``nodes`` (``nodes`` included)."""
        mask = torch.zeros(self.num_nodes, dtype=torch.bool, device=self.edge_index.device)
        mask[nodes.to(mask.device)] = True   # ids from the host index a graph on the GPU too
        row, col = self.edge_index
        reach = torch.zeros_like(mask)
        reach[col[mask[row]]] = True
        return (reach | mask).nonzero().view(-1)

    def block(self, rows: Tensor, cols: Tensor) -> Tensor:
        """The sparse block ``A[rows][:, cols]`` (CSR); ``cols`` must hold every neighbour of ``rows``."""
        pos_row = torch.full((self.num_nodes,), -1, dtype=torch.long, device=rows.device)
        pos_col = torch.full_like(pos_row, -1)
        pos_row[rows] = torch.arange(rows.numel(), device=rows.device)
        pos_col[cols] = torch.arange(cols.numel(), device=rows.device)
        r, c = self.edge_index
        keep = pos_row[r] >= 0
        r, c, w = pos_row[r[keep]], pos_col[c[keep]], self.edge_weight[keep]
        if bool((c < 0).any()):
            raise ValueError("column set misses neighbours of the requested rows")
        return _csr(torch.stack([r, c]), w, (rows.numel(), cols.numel()))


def row_pointers(rows: Tensor, num_rows: int) -> Tensor:
    """CSR row pointers ``crow`` of entries whose (sorted) row ids are ``rows``."""
    crow = torch.zeros(num_rows + 1, dtype=torch.long, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=num_rows), 0)
    return crow


def csr_order(row: Tensor, col: Tensor, shape: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """``(crow, order)``: the CSR row pointers of the COO entries ``(row, col)`` and the
    permutation that puts them in CSR (row-major) order."""
    order = torch.argsort(row * shape[1] + col)
    return row_pointers(row, shape[0]), order


def _csr(index: Tensor, weight: Tensor, shape: tuple[int, int]) -> Tensor:
    """A CSR matrix from coalesced-or-not COO entries, built without COO coalescing."""
    crow, order = csr_order(index[0], index[1], shape)
    with sparse_beta_quiet():
        return torch.sparse_csr_tensor(crow, index[1][order], weight[order], shape)
