"""The fast baselines that read the graph once, before training: SGC and SIGN.

- ``sgc`` (Wu et al., ICML 2019): ``softmax(S^K X W)`` with ``S = D^-1/2 (A + I) D^-1/2``, the
  normalised adjacency with unit self-loops of GCN and the kernels; PyG's ``SGConv`` with
  ``cached=True``, so ``S^K X`` is computed once (``K = gnn.layers``) and every epoch is one
  linear map on the rows it reads (the training rows, as the paper's code trains). The paper's recipe: K = 2, Adam at lr 0.2, 100 epochs, no dropout, the weight
  decay tuned on the validation set (the paper by hyperopt; here the grid
  ``gnn.weight_decay_grid``, each value trained from the same initialisation on the same
  ``S^K X``, the one with the best validation accuracy kept). Full batch by default (as in the
  paper, Reddit included: ``S^K X`` has the size of ``X``), mini-batches of rows with ``gnn.batch_size``.
- ``sign`` (Frasca et al., 2020): ``[X, S X, ..., S^K X]`` precomputed by PyG's ``SIGN``
  transform (``K = gnn.layers``; the transform's ``D^-1/2 A D^-1/2`` on the graph with unit
  self-loops added, so ``S`` is SGC's), then the inception MLP of PyG's ``examples/sign.py``:
  ``Z = dropout(relu([X W_0, S X W_1, ..., S^K X W_K]))``, ``Y = Z W_out``. Mini-batches are rows of
  the precomputed features (``gnn.batch_size``): no neighbour sampling.

Each model's ``precompute(x, adjacency, weight)`` is timed apart (``precompute_seconds``) and
returns the features whose rows the model reads: training reads the training rows (or a
mini-batch of them), never the graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from ..schema import GNNConfig
from .baselines import register_gnn

# the weight decays SGC's validation grid tries: 10 log-spaced values, 1e-6 .. 1e-3
SGC_WEIGHT_DECAYS = [float(f"{10 ** (-6 + 3 * i / 9):.3g}") for i in range(10)]

SGC_DEFAULTS = {"*": {"lr": 0.2, "epochs": 100, "batch_norm": False, "dropout": 0.0}}
SIGN_DEFAULTS = {"*": {"lr": 0.01, "epochs": 100, "batch_norm": False, "hidden": 512, "dropout": 0.5}}


@dataclass
class SGCConfig(GNNConfig):
    weight_decay_grid: Optional[list[float]] = field(default_factory=lambda: list(SGC_WEIGHT_DECAYS))   # weight decays tried, the best validation metric kept (null or []: gnn.weight_decay alone)


def _check_sgc(options: Any, hidden: int) -> None:
    """SGC is one linear map: no hidden layer, dropout or batch norm to set."""
    for key, given in (("hidden", options.hidden is not None), ("dropout", bool(options.dropout)), ("batch_norm", bool(options.batch_norm))):
        if given:
            raise ConfigError(f"gnn=sgc is one linear map on S^K X and has no gnn.{key}; leave gnn.{key} unset (gnn=sign has an MLP)")
    if options.uncertainty == "mc_dropout":   # its dropout is refused above: no pass could differ (a trial went round in a circle)
        raise ConfigError("gnn.uncertainty=mc_dropout needs dropout, and gnn=sgc is one linear map without it; use gnn=sign (an MLP) "
                          "with gnn.dropout=0.5, or gnn.uncertainty=ensemble or temperature with gnn=sgc")
    grid = options.weight_decay_grid or []
    if any(not value >= 0 for value in grid):
        raise ConfigError(f"gnn.weight_decay_grid={list(grid)} must hold weight decays >= 0")
    if grid and options.weight_decay:
        raise ConfigError(f"gnn.weight_decay={options.weight_decay} and gnn.weight_decay_grid are both set; "
                          "set gnn.weight_decay_grid=null to train at gnn.weight_decay alone")
    if options.layers < 1:
        raise ConfigError(f"gnn.layers={options.layers} is SGC's K, the power of S; it must be at least 1")


@register_gnn("sgc", "SGC", config=SGCConfig, graph_layers=lambda layers: 0, defaults=SGC_DEFAULTS, check=_check_sgc, row_batches=True)
class SGC(nn.Module):
    """``SGConv(K = layers, cached=True)``: ``S^K X W + b``, ``S^K X`` computed once; the model
    reads rows of that cache."""

    normalised_graph = False   # SGConv normalises (gcn_norm, unit self-loops) itself
    widthless = True           # one linear map: no hidden width (gnn.hidden is refused; a row records none)
    reads_operator = True      # gnn.propagation=sparse: the raw adjacency as one sparse matrix, K sparse products
    graph_layers = 0

    def __init__(self, options: Any, in_dim: int, out_dim: int):
        super().__init__()
        from torch_geometric.nn import SGConv

        self.conv = SGConv(in_dim, out_dim, K=options.layers, cached=True)

    def precompute(self, x: Tensor, adjacency: Tensor, weight: Optional[Tensor]) -> Tensor:
        """``S^K X``: one pass of ``SGConv`` fills its cache (``_cached_x``, the attribute PyG declares for it)."""
        self.conv(x, adjacency, weight)
        return self.conv._cached_x

    def forward(self, x: Tensor, edge_index: Tensor = None, edge_weight: Optional[Tensor] = None) -> Tensor:
        """``x W + b`` for rows ``x`` of ``S^K X``: what ``SGConv`` does with its cache, on the rows given."""
        return self.conv.lin(x)


def _check_sign(options: Any, hidden: int) -> None:
    if options.layers < 1:
        raise ConfigError(f"gnn.layers={options.layers} is SIGN's K, the largest power of S; it must be at least 1")


@register_gnn("sign", "SIGN", graph_layers=lambda layers: 0, defaults=SIGN_DEFAULTS, check=_check_sign, row_batches=True)
class SIGN(nn.Module):
    """``[X, S X, ..., S^K X]`` from PyG's ``SIGN`` transform, then one linear map per hop,
    ReLU and dropout, concatenated, and a linear output."""

    normalised_graph = False   # the transform normalises the graph (with self-loops added here)
    graph_layers = 0

    def __init__(self, options: Any, in_dim: int, out_dim: int):
        super().__init__()
        self.hops, self.in_dim, self.dropout = options.layers, in_dim, options.dropout
        self.lins = nn.ModuleList(nn.Linear(in_dim, options.hidden) for _ in range(self.hops + 1))
        self.norms = nn.ModuleList((nn.BatchNorm1d(options.hidden) if options.batch_norm else nn.Identity()) for _ in range(self.hops + 1))
        self.out = nn.Linear((self.hops + 1) * options.hidden, out_dim)

    def precompute(self, x: Tensor, adjacency: Tensor, weight: Optional[Tensor]) -> Tensor:
        """``[X, S X, ..., S^K X]`` as one ``n x (K + 1) d`` matrix (its rows are what a mini-batch reads)."""
        from torch_geometric.data import Data
        from torch_geometric.transforms import SIGN as Hops
        from torch_geometric.utils import add_remaining_self_loops

        edge_index, _ = add_remaining_self_loops(adjacency, num_nodes=x.size(0))
        hops = Hops(self.hops)(Data(x=x, edge_index=edge_index, num_nodes=x.size(0)))
        return torch.cat([x] + [hops[f"x{k}"] for k in range(1, self.hops + 1)], dim=1)

    def forward(self, x: Tensor, edge_index: Tensor = None, edge_weight: Optional[Tensor] = None) -> Tensor:
        parts = x.split(self.in_dim, dim=1)
        z = torch.cat([norm(lin(part)) for part, lin, norm in zip(parts, self.lins, self.norms)], dim=1)
        return self.out(F.dropout(F.relu(z), self.dropout, self.training))
