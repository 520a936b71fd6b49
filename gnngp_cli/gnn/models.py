"""The GNN baselines of the paper (GCN, GraphSAGE, GIN, GCNII) and GAT, on PyTorch Geometric layers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from ..schema import GNNConfig
from .operator import reading_operator
from .baselines import register_gnn


class GNN(nn.Module):
    """``start -> (conv_l -> post_l) x graph_layers -> finish``; ``conv_l`` is the only step that
    reads the graph (so mini-batch training and layer-wise inference work for every GNN).
    A subclass builds its layers in ``__init__`` and overrides the steps it changes."""

    normalised_graph = False   # gcn-style: reads the symmetric-normalised adjacency with unit self-loops
    reads_operator = False     # True: its layers take the adjacency as one sparse CSR matrix (gnn.propagation=sparse) as edge_index, edge_weight None

    def __init__(self, options: Any, in_dim: int, out_dim: int):
        super().__init__()
        self.dropout = options.dropout
        self.dims = [in_dim] + [options.hidden] * (options.layers - 1) + [out_dim]
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList(self._norm(options) for _ in range(options.layers - 1))

    @staticmethod
    def _norm(options: Any) -> nn.Module:
        return nn.BatchNorm1d(options.hidden) if options.batch_norm else nn.Identity()

    @property
    def graph_layers(self) -> int:
        return len(self.convs)

    def start(self, x: Tensor) -> Tensor:
        return x

    def conv(self, l: int, h: Tensor, x0: Tensor, edge_index: Tensor, edge_weight: Optional[Tensor]) -> Tensor:
        return self.convs[l](h, edge_index)

    def post(self, l: int, h: Tensor) -> Tensor:
        if l >= len(self.norms):
            return h  # the last graph layer is the output layer
        return F.dropout(F.relu(self.norms[l](h)), self.dropout, self.training)

    def finish(self, h: Tensor) -> Tensor:
        return h

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Optional[Tensor] = None) -> Tensor:
        h = x0 = self.start(x)
        for l in range(self.graph_layers):
            h = self.post(l, self.conv(l, h, x0, edge_index, edge_weight))
        return self.finish(h)


@register_gnn("gcn", "GCN")
class GCN(GNN):
    """``GCNConv`` layers on the same normalised adjacency as the kernels."""

    reads_operator = True

    normalised_graph = True

    def __init__(self, options, in_dim, out_dim):
        super().__init__(options, in_dim, out_dim)
        from torch_geometric.nn import GCNConv
        GCNConv = reading_operator(GCNConv)

        self.convs.extend(GCNConv(self.dims[l], self.dims[l + 1], normalize=False) for l in range(options.layers))

    def conv(self, l, h, x0, edge_index, edge_weight):
        return self.convs[l](h, edge_index, edge_weight)


@register_gnn("sage", "GraphSAGE", fanouts=[25, 10])
class SAGE(GNN):
    """``SAGEConv`` layers, mean aggregation."""

    reads_operator = True

    def __init__(self, options, in_dim, out_dim):
        super().__init__(options, in_dim, out_dim)
        from torch_geometric.nn import SAGEConv
        SAGEConv = reading_operator(SAGEConv)

        self.convs.extend(SAGEConv(self.dims[l], self.dims[l + 1], aggr="mean") for l in range(options.layers))


@register_gnn("gin", "GIN", fanouts=[25], graph_layers=lambda layers: 1)
class GIN(GNN):
    """One ``GINConv`` aggregation (eps = 0) followed by an L-layer MLP: the network whose
    kernel is GINGP."""

    reads_operator = True

    def __init__(self, options, in_dim, out_dim):
        super().__init__(options, in_dim, out_dim)
        from torch_geometric.nn import GINConv
        GINConv = reading_operator(GINConv)

        mlp: list[nn.Module] = []
        for l in range(options.layers):
            mlp.append(nn.Linear(self.dims[l], self.dims[l + 1]))
            if l < options.layers - 1:
                mlp += [self._norm(options), nn.ReLU(), nn.Dropout(options.dropout)]
        self.convs.append(GINConv(nn.Sequential(*mlp), eps=0.0))
        self.norms = nn.ModuleList()


@dataclass
class GCN2Config(GNNConfig):
    alpha: float = 0.1                  # GCNII's initial residual: the share of the input layer in each layer
    theta: float = 0.5                  # GCNII's identity mapping: beta_l = log(theta / l + 1)


@register_gnn("gcn2", "GCNII", config=GCN2Config)
class GCN2(GNN):
    """Linear, ``GCN2Conv`` layers (initial residual alpha, identity mapping theta), linear."""

    reads_operator = True

    normalised_graph = True

    def __init__(self, options, in_dim, out_dim):
        super().__init__(options, in_dim, out_dim)
        from torch_geometric.nn import GCN2Conv
        GCN2Conv = reading_operator(GCN2Conv)

        self.pre = nn.Linear(in_dim, options.hidden)
        self.convs.extend(GCN2Conv(options.hidden, options.alpha, options.theta, layer=l + 1, normalize=False) for l in range(options.layers))
        self.head = nn.Linear(options.hidden, out_dim)
        self.norms = nn.ModuleList(self._norm(options) for _ in range(options.layers))

    def start(self, x):
        return F.relu(self.pre(F.dropout(x, self.dropout, self.training)))

    def conv(self, l, h, x0, edge_index, edge_weight):
        return self.convs[l](F.dropout(h, self.dropout, self.training), x0, edge_index, edge_weight)

    def finish(self, h):
        return self.head(h)


@dataclass
class GATConfig(GNNConfig):
    heads: int = 8                      # attention heads of each hidden layer, hidden / heads features each (the output layer has one)


def _check_heads(options: Any, hidden: int) -> None:
    if options.heads < 1 or (options.layers > 1 and hidden % options.heads):
        raise ConfigError(f"gnn.heads={options.heads} must be at least 1 and divide gnn.hidden={hidden} (each head has hidden / heads features)")


@register_gnn("gat", "GAT", config=GATConfig, fanouts=[25, 10], check=_check_heads)
class GAT(GNN):
    """``GATConv`` layers (Velickovic et al. 2018): each node attends to its neighbours and itself
    (softmax over LeakyReLU(0.2) scores); hidden layers concatenate ``heads`` heads, the output
    layer has one; dropout on the input features, on the attention weights and (as every GNN's
    ``post``) after each hidden layer."""

    def __init__(self, options, in_dim, out_dim):
        super().__init__(options, in_dim, out_dim)
        from torch_geometric.nn import GATConv

        last = options.layers - 1
        self.convs.extend(GATConv(self.dims[l], self.dims[l + 1] if l == last else self.dims[l + 1] // options.heads,
                                  heads=1 if l == last else options.heads, dropout=options.dropout) for l in range(options.layers))

    def conv(self, l, h, x0, edge_index, edge_weight):
        if l == 0:   # later layers read post's output, dropped out already
            h = F.dropout(h, self.dropout, self.training)
        return self.convs[l](h, edge_index)
