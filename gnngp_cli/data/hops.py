"""H2GCN's neighbourhood operators (Zhu et al., NeurIPS 2020), shared by the H2GCN-GP kernel
and the H2GCN baseline.

With ``A`` the graph's adjacency without self-loops (binary, undirected):

- 1-hop set ``N1(v) = {u != v : A_vu = 1}``;
- 2-hop set ``N2(v) = {u != v : (A^2)_vu > 0, A_vu = 0}``: nodes reachable in two steps and
  not in one, and never ``v`` itself (H2GCN's "exactly two hops");

each normalised symmetrically by its own degrees, ``A_i <- D_i^-1/2 A_i D_i^-1/2`` with
``D_i = diag(|N_i(v)|)`` (no self-loops added; a node with an empty set gets a zero row).
"""
from __future__ import annotations

import torch
from torch import Tensor

from .graph import Adjacency


def one_hop_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The 1-hop set as an undirected, coalesced edge list without self-loops."""
    from torch_geometric.utils import remove_self_loops, to_undirected   # when used: importing gnngp stays light
    edge_index, _ = remove_self_loops(edge_index)
    return to_undirected(edge_index, num_nodes=num_nodes)


def two_hop_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The exact 2-hop set (reachable in two steps, not in one, not the node itself)."""
    from torch_geometric.utils import coalesce

    one = one_hop_edges(edge_index, num_nodes)
    if one.numel() == 0:
        return one
    ones = torch.ones(one.size(1), dtype=torch.float32, device=one.device)
    a = torch.sparse_coo_tensor(one, ones, (num_nodes, num_nodes)).coalesce()
    reach = torch.sparse.mm(a, a).coalesce().indices()
    keys = reach[0] * num_nodes + reach[1]
    excluded = torch.cat([one[0] * num_nodes + one[1], torch.arange(num_nodes, device=one.device) * (num_nodes + 1)])
    keep = ~torch.isin(keys, excluded)
    return coalesce(reach[:, keep], num_nodes=num_nodes)


def symmetric_normalised(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> Adjacency:
    """``D^-1/2 M D^-1/2`` of the binary matrix ``M`` with the given edges (no self-loops added)."""
    row, col = edge_index
    deg = torch.bincount(row, minlength=num_nodes).to(dtype)
    inv_sqrt = torch.where(deg > 0, deg.clamp_min(1).pow(-0.5), torch.zeros_like(deg))
    return Adjacency(edge_index, inv_sqrt[row] * inv_sqrt[col], num_nodes)


def h2gcn_operators(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> tuple[Adjacency, Adjacency]:
    """``(A1, A2)``: the normalised 1-hop and exact 2-hop operators of H2GCN."""
    return (symmetric_normalised(one_hop_edges(edge_index, num_nodes), num_nodes, dtype),
            symmetric_normalised(two_hop_edges(edge_index, num_nodes), num_nodes, dtype))
