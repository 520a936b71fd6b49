"""GNN baselines for heterophily, the networks behind GPRGP and H2GCNGP (full batch only).

- ``gprgnn`` (Chien et al., ICLR 2021): an MLP ``H = W2 dropout(relu(W1 dropout(X)))`` (``L``
  layers), then ``Z = sum_(k=0..K) gamma_k A^k dropout(H)`` with learnable ``gamma``, initialised
  as personalised PageRank ``gamma_k = alpha (1 - alpha)^k``, ``gamma_K = (1 - alpha)^K``
  (``alpha = gnn.alpha``, ``K = gnn.hops``); ``A`` is the symmetric normalisation with unit
  self-loops that GCN and the kernels use.
- ``h2gcn`` (Zhu et al., NeurIPS 2020): ego embedding ``r0 = relu(X W_e)``, ``L`` rounds
  ``r_k = [A1 r_(k-1), A2 r_(k-1)]`` with the normalised 1-hop and exact 2-hop operators of
  :mod:`gnngp_cli.graph.operators`, and a linear classifier on ``dropout([r0, r1, ..., r_L])``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..graph.operators import Adjacency, h2gcn_operators
from ..errors import ConfigError
from ..schema import GNNConfig
from .baselines import register_gnn


@dataclass
class GPRGNNConfig(GNNConfig):
    alpha: float = 0.1                  # PageRank initialisation of the learnable filter
    hops: int = 10                      # propagation steps K


def _check_hops(options: Any, hidden: int) -> None:
    if options.hops < 0:
        raise ConfigError(f"gnn.hops={options.hops} must be at least 0")
    if not 0 < options.alpha <= 1:   # the PageRank start alpha (1 - alpha)^k: 1e9 overflowed torch's float, -1 and 2 alternate in sign
        raise ConfigError(f"gnn.alpha={options.alpha:g} is the teleport probability of GPR-GNN's PageRank start: it must be above 0 and at "
                          "most 1 (e.g. gnn.alpha=0.1)")


@register_gnn("gprgnn", "GPRGNN", config=GPRGNNConfig, graph_layers=lambda layers: 0, check=_check_hops)
class GPRGNN(nn.Module):
    normalised_graph = True
    graph_layers = 0  # full batch only: no per-layer neighbour sampling

    def __init__(self, options, in_dim: int, out_dim: int):
        super().__init__()
        hidden, layers, dropout, alpha, hops = options.hidden, options.layers, options.dropout, options.alpha, options.hops
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.lins = nn.ModuleList(nn.Linear(dims[l], dims[l + 1]) for l in range(layers))
        self.dropout = dropout
        gamma = alpha * (1 - alpha) ** torch.arange(hops + 1, dtype=torch.float32)
        gamma[-1] = (1 - alpha) ** hops
        self.gamma = nn.Parameter(gamma)
        self._adjacency: Optional[Adjacency] = None

    def adjacency(self, edge_index: Tensor, edge_weight: Tensor, num_nodes: int) -> Adjacency:
        if self._adjacency is None or self._adjacency.edge_index is not edge_index:
            self._adjacency = Adjacency(edge_index, edge_weight, num_nodes)
        return self._adjacency

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Optional[Tensor] = None) -> Tensor:
        h = x
        for l, lin in enumerate(self.lins):
            h = lin(F.dropout(h, self.dropout, self.training))
            if l < len(self.lins) - 1:
                h = F.relu(h)
        h = F.dropout(h, self.dropout, self.training)
        a = self.adjacency(edge_index, edge_weight, x.size(0))
        out = self.gamma[0] * h
        for k in range(1, self.gamma.numel()):
            h = a.matmul(h)
            out = out + self.gamma[k] * h
        return out


@register_gnn("h2gcn", "H2GCN", graph_layers=lambda layers: 0)
class H2GCN(nn.Module):
    normalised_graph = False
    graph_layers = 0  # full batch only: no per-layer neighbour sampling

    def __init__(self, options, in_dim: int, out_dim: int):
        super().__init__()
        hidden, layers, dropout = options.hidden, options.layers, options.dropout
        self.embed = nn.Linear(in_dim, hidden, bias=False)
        self.rounds = layers
        self.dropout = dropout
        self.classify = nn.Linear(hidden * (2 ** (layers + 1) - 1), out_dim)
        self._operators: Optional[tuple[Tensor, tuple[Adjacency, Adjacency]]] = None

    def operators(self, edge_index: Tensor, num_nodes: int) -> tuple[Adjacency, Adjacency]:
        if self._operators is None or self._operators[0] is not edge_index:
            self._operators = (edge_index, h2gcn_operators(edge_index, num_nodes))
        return self._operators[1]

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Optional[Tensor] = None) -> Tensor:
        a1, a2 = self.operators(edge_index, x.size(0))
        r = F.relu(self.embed(x))
        parts = [r]
        for _ in range(self.rounds):
            r = torch.cat([a1.matmul(r), a2.matmul(r)], dim=1)
            parts.append(r)
        return self.classify(F.dropout(torch.cat(parts, dim=1), self.dropout, self.training))

