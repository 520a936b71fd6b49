"""The graph of the wide-network check: an induced subgraph of the dataset, and its normalised
adjacency computed with PyTorch Geometric's own functions (``gcn_norm``, ``degree``), apart
from the package's :func:`~gnngp_cli.data.normalized_adjacency`.

    symmetric  A = (I + D)^-1/2 (I + A) (I + D)^-1/2
    row        A = (I + D)^-1 (I + A)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import add_self_loops, degree, remove_self_loops, subgraph, to_torch_csr_tensor, to_undirected

from ..errors import ConfigError


def induced_subgraph(edge_index: Tensor, num_nodes: int, size: int, seed: int) -> Tensor:
    """Node ids of a breadth-first ball of ``size`` nodes around a seeded random node (further
    seeded random starts when its component is smaller), so the subgraph keeps the dataset's
    local structure and edges."""
    if size > num_nodes:
        raise ConfigError(f"verify.num_nodes={size} exceeds the {num_nodes} nodes of the dataset; use at most {num_nodes}")
    edge_index = to_undirected(edge_index.cpu(), num_nodes=num_nodes)
    order = torch.argsort(edge_index[0])
    row, col = edge_index[0][order], edge_index[1][order]
    starts = torch.zeros(num_nodes + 1, dtype=torch.long)
    starts[1:] = torch.cumsum(torch.bincount(row, minlength=num_nodes), 0)
    generator = torch.Generator().manual_seed(seed)
    taken = torch.zeros(num_nodes, dtype=torch.bool)
    chosen: list[int] = []
    candidates = torch.randperm(num_nodes, generator=generator).tolist()
    while len(chosen) < size:
        start = next(v for v in candidates if not taken[v])
        frontier = [start]
        taken[start] = True
        chosen.append(start)
        while frontier and len(chosen) < size:
            nxt = []
            for v in frontier:
                for u in col[starts[v]:starts[v + 1]].tolist():
                    if not taken[u] and len(chosen) < size:
                        taken[u] = True
                        chosen.append(u)
                        nxt.append(u)
            frontier = nxt
    return torch.tensor(sorted(chosen))


@dataclass(eq=False)
class CheckGraph:
    """The subgraph's edges for the networks: ``edge_index`` without self-loops (undirected),
    the normalised adjacency as weighted edges with unit self-loops (``norm_index``,
    ``norm_weight``; messages flow ``norm_index[0] -> norm_index[1]``), and as a sparse matrix
    ``adj_t[target, source]``."""

    num_nodes: int
    kind: str
    edge_index: Tensor
    norm_index: Tensor
    norm_weight: Tensor

    @classmethod
    def build(cls, edge_index: Tensor, num_nodes: int, kind: str, dtype: torch.dtype) -> "CheckGraph":
        edge_index, _ = remove_self_loops(to_undirected(edge_index, num_nodes=num_nodes))
        if kind == "sym":
            norm_index, norm_weight = gcn_norm(edge_index, None, num_nodes, add_self_loops=True, dtype=dtype)
        elif kind == "row":
            norm_index, _ = add_self_loops(edge_index, num_nodes=num_nodes)
            norm_weight = 1 / degree(norm_index[1], num_nodes, dtype=dtype)[norm_index[1]]
        else:
            raise ConfigError(f"unknown adjacency normalisation {kind!r}; use sym or row")
        return cls(num_nodes, kind, edge_index, norm_index, norm_weight)

    @cached_property
    def adj_t(self) -> Tensor:
        """``A`` as a sparse CSR matrix indexed ``[target, source]`` (PyG's ``adj_t``: layers
        then aggregate by a sparse product with the weights)."""
        return to_torch_csr_tensor(self.norm_index.flip(0), self.norm_weight, (self.num_nodes, self.num_nodes))

    @cached_property
    def loops_t(self) -> Tensor:
        """The edges with unit self-loops, unit weights, as ``adj_t``: a mean over them is the
        row-normalised ``A``."""
        index, _ = add_self_loops(self.edge_index, num_nodes=self.num_nodes)
        return to_torch_csr_tensor(index.flip(0), torch.ones(index.size(1), dtype=self.norm_weight.dtype), (self.num_nodes, self.num_nodes))

    def hop_operators(self) -> tuple[Tensor, Tensor]:
        """H2GCN's operators of this graph, dense, written out in plain torch: ``A1`` the
        adjacency without self-loops and ``A2`` the nodes two steps away and not one (never the
        node itself), each ``D^-1/2 M D^-1/2`` by its own degrees (a row without neighbours is 0)."""
        n = self.num_nodes
        a = torch.zeros(n, n, dtype=self.norm_weight.dtype)
        a[self.edge_index[1], self.edge_index[0]] = 1.0
        two = ((a @ a) > 0) & (a == 0) & ~torch.eye(n, dtype=torch.bool)

        def normalised(m: Tensor) -> Tensor:
            m = m.to(self.norm_weight.dtype)
            deg = m.sum(1)
            inv = torch.where(deg > 0, deg.clamp_min(1).rsqrt(), torch.zeros_like(deg))
            return m * inv[:, None] * inv[None, :]

        return normalised(a), normalised(two)

    def dense(self) -> Tensor:
        """``A`` as a dense matrix, written out in plain torch for the composed networks:
        ``A_hat = I + A`` from the edge list, then its degree normalisation."""
        a = torch.eye(self.num_nodes, dtype=self.norm_weight.dtype)
        a[self.edge_index[1], self.edge_index[0]] = 1.0
        deg = a.sum(1)
        if self.kind == "sym":
            return a / deg.sqrt()[:, None] / deg.sqrt()[None, :]
        return a / deg[:, None]


def restrict(edge_index: Tensor, nodes: Tensor, num_nodes: int) -> Tensor:
    """The edges among ``nodes``, relabelled ``0 .. len(nodes) - 1``."""
    sub, _ = subgraph(nodes, edge_index.cpu(), relabel_nodes=True, num_nodes=num_nodes)
    return sub
