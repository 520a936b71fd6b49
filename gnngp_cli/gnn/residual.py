"""``gnn.recipe=platonov2023``: the residual networks of Platonov et al., "A critical look at the
evaluation of GNNs under heterophily" (ICLR 2023), read from their paper and their code
(``yandex-research/heterophilous-graphs``: ``model.py``, ``modules.py``, ``train.py``):

    h = GELU(dropout(W_in x))
    h = h + module(LayerNorm(h))          (gnn.layers times)
    out = W_out LayerNorm(h)

with ``module`` one graph step then a feed-forward block ``dropout(W_2 dropout(GELU(W_1 .)))``:

- ``gcn``: ``A h`` with ``A = D^-1/2 (A + I) D^-1/2`` (their GCN adds self-loops; the normalised
  adjacency the kernels and the paper's GCN use), then the block ``d -> d -> d``;
- ``sage``: ``[h, mean of the neighbours' h]`` (no self-loops), then the block ``2d -> d -> d``.

Their training (``RECIPE_DEFAULTS``): hidden 512, dropout 0.2, AdamW at lr 3e-5 (no weight decay
on biases and norms), 1000 full-batch steps, the metric of the best validation step. One
difference: a two-class set has two outputs and the cross-entropy here, one output and the
binary cross-entropy there (the same model family: a softmax of two logits is the sigmoid of
their difference).
"""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .operator import mean_product, product


class FeedForward(nn.Module):
    def __init__(self, in_dim: int, dim: int, dropout: float):
        super().__init__()
        self.linear_1, self.linear_2 = nn.Linear(in_dim, dim), nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, h: Tensor) -> Tensor:
        h = F.gelu(F.dropout(self.linear_1(h), self.dropout, self.training))
        return F.dropout(self.linear_2(h), self.dropout, self.training)


class ResidualNetwork(nn.Module):
    """The residual network of ``gnn.recipe=platonov2023`` for ``gnn=gcn`` or ``gnn=sage``
    (see the module docstring); it reads the graph as the cached sparse operator of
    :meth:`~gnngp_cli.gnn.training.Graph.operator`, full batch."""

    reads_operator = True
    graph_layers = 0   # full batch only

    def __init__(self, options: Any, in_dim: int, out_dim: int):
        super().__init__()
        self.kind, dim, self.dropout = options.name, options.hidden, options.dropout
        self.normalised_graph = self.kind == "gcn"
        self.input = nn.Linear(in_dim, dim)
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(options.layers))
        width = 2 * dim if self.kind == "sage" else dim
        self.blocks = nn.ModuleList(FeedForward(width, dim, options.dropout) for _ in range(options.layers))
        self.output_norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, out_dim)

    def step(self, h: Tensor, adjacency: Tensor) -> Tensor:
        """The graph step of one module: ``A h`` (gcn) or ``[h, mean of the neighbours' h]`` (sage)."""
        if self.kind == "gcn":
            return product(adjacency, h)
        return torch.cat([h, mean_product(adjacency, h)], dim=1)

    def forward(self, x: Tensor, adjacency: Tensor, edge_weight: Optional[Tensor] = None) -> Tensor:
        h = F.gelu(F.dropout(self.input(x), self.dropout, self.training))
        for norm, block in zip(self.norms, self.blocks):
            h = h + block(self.step(norm(h), adjacency))
        return self.output(self.output_norm(h))

    def parameter_groups(self, weight_decay: float) -> list[dict]:
        """AdamW's groups as their ``get_parameter_groups``: no weight decay on biases and norms."""
        plain = [p for name, p in self.named_parameters() if not (name.endswith("bias") or "norm" in name)]
        exempt = [p for name, p in self.named_parameters() if name.endswith("bias") or "norm" in name]
        return [{"params": plain, "weight_decay": weight_decay}, {"params": exempt, "weight_decay": 0.0}]
