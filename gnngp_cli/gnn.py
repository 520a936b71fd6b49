"""GNN baselines trained with PyTorch Geometric layers, timed like the GPs.

``gcn`` (``GCNConv`` on the shared normalised adjacency), ``gcn2`` (linear in, ``GCN2Conv``
layers, linear out), ``gin`` (``GINConv`` with a 2-layer MLP, linear head) and ``sage``
(``SAGEConv``, mean aggregation). GIN is one aggregation followed by an L-layer MLP,
the network whose infinite-width kernel is GINGP. Full-batch training by default; mini-batch training samples
neighbourhoods (a uniform sampler in plain PyTorch over the CSR adjacency) and then infers
layer by layer over all nodes. The test metric is read at the epoch with the best validation
metric.
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import SQRT_TENTH, GNNConfig
from .data.graph import csr_order, normalized_adjacency
from .metrics import metric
from .progress import Progress

# The paper's training settings for every GNN, per task or dataset (see config.method_defaults).
TRAINING_DEFAULTS = {
    "*": {"lr": 0.01, "epochs": 100, "batch_norm": False},
    "regression": {"lr": SQRT_TENTH, "batch_norm": True},
    "arxiv": {"batch_norm": True},
    "crocodile": {"epochs": 200},
    "reddit": {"epochs": 10, "batch_size": 10240},   # mini-batch training, as in the paper
}


class GNN(nn.Module):
    """``start -> (conv_l -> post_l) x graph_layers -> finish``; ``conv_l`` is the only step that
    reads the graph (so mini-batch training and layer-wise inference work for every GNN).
    A subclass builds its layers in ``__init__`` and overrides the steps it changes."""

    normalised_graph = False   # gcn-style: reads the symmetric-normalised adjacency with unit self-loops

    def __init__(self, cfg: Any, in_dim: int, out_dim: int):
        super().__init__()
        self.dropout = cfg.dropout
        self.dims = [in_dim] + [cfg.hidden] * (cfg.layers - 1) + [out_dim]
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList(self._norm(cfg) for _ in range(cfg.layers - 1))

    @staticmethod
    def _norm(cfg: Any) -> nn.Module:
        return nn.BatchNorm1d(cfg.hidden) if cfg.batch_norm else nn.Identity()

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


@dataclass(frozen=True)
class GNNEntry:
    """One GNN baseline: its model class, typed config, label, default sampling fanouts per
    graph layer (``None``: every neighbour) and training defaults per task or dataset."""

    name: str
    label: str
    model: type
    config: type
    fanouts: Optional[list] = None
    graph_layers: Callable[[int], int] = lambda layers: layers
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: TRAINING_DEFAULTS)


GNNS: dict[str, GNNEntry] = {}


def register_gnn(name: str, label: str, config: type = GNNConfig, fanouts: Optional[list] = None,
                 graph_layers: Callable[[int], int] = lambda layers: layers,
                 defaults: Optional[Mapping[str, Mapping[str, Any]]] = None):
    """Class decorator: add a :class:`GNN` subclass as ``gnn=name``."""
    def add(model: type) -> type:
        GNNS[name] = GNNEntry(name, label, model, config, fanouts, graph_layers, defaults or TRAINING_DEFAULTS)
        return model
    return add


@register_gnn("gcn", "GCN")
class GCN(GNN):
    """``GCNConv`` layers on the same normalised adjacency as the kernels."""

    normalised_graph = True

    def __init__(self, cfg, in_dim, out_dim):
        super().__init__(cfg, in_dim, out_dim)
        from torch_geometric.nn import GCNConv

        self.convs.extend(GCNConv(self.dims[l], self.dims[l + 1], normalize=False) for l in range(cfg.layers))

    def conv(self, l, h, x0, edge_index, edge_weight):
        return self.convs[l](h, edge_index, edge_weight)


@register_gnn("sage", "GraphSAGE", fanouts=[25, 10])
class SAGE(GNN):
    """``SAGEConv`` layers, mean aggregation."""

    def __init__(self, cfg, in_dim, out_dim):
        super().__init__(cfg, in_dim, out_dim)
        from torch_geometric.nn import SAGEConv

        self.convs.extend(SAGEConv(self.dims[l], self.dims[l + 1], aggr="mean") for l in range(cfg.layers))


@register_gnn("gin", "GIN", fanouts=[25], graph_layers=lambda layers: 1)
class GIN(GNN):
    """One ``GINConv`` aggregation (eps = 0) followed by an L-layer MLP: the network whose
    kernel is GINGP."""

    def __init__(self, cfg, in_dim, out_dim):
        super().__init__(cfg, in_dim, out_dim)
        from torch_geometric.nn import GINConv

        mlp: list[nn.Module] = []
        for l in range(cfg.layers):
            mlp.append(nn.Linear(self.dims[l], self.dims[l + 1]))
            if l < cfg.layers - 1:
                mlp += [self._norm(cfg), nn.ReLU(), nn.Dropout(cfg.dropout)]
        self.convs.append(GINConv(nn.Sequential(*mlp), eps=0.0))
        self.norms = nn.ModuleList()


@dataclass
class GCN2Config(GNNConfig):
    alpha: float = 0.1
    theta: float = 0.5


@register_gnn("gcn2", "GCNII", config=GCN2Config)
class GCN2(GNN):
    """Linear, ``GCN2Conv`` layers (initial residual alpha, identity mapping theta), linear."""

    normalised_graph = True

    def __init__(self, cfg, in_dim, out_dim):
        super().__init__(cfg, in_dim, out_dim)
        from torch_geometric.nn import GCN2Conv

        self.pre = nn.Linear(in_dim, cfg.hidden)
        self.convs.extend(GCN2Conv(cfg.hidden, cfg.alpha, cfg.theta, layer=l + 1, normalize=False) for l in range(cfg.layers))
        self.head = nn.Linear(cfg.hidden, out_dim)
        self.norms = nn.ModuleList(self._norm(cfg) for _ in range(cfg.layers))

    def start(self, x):
        return F.relu(self.pre(F.dropout(x, self.dropout, self.training)))

    def conv(self, l, h, x0, edge_index, edge_weight):
        return self.convs[l](F.dropout(h, self.dropout, self.training), x0, edge_index, edge_weight)

    def finish(self, h):
        return self.head(h)


@dataclass
class Graph:
    """The edges a model reads: normalised with unit self-loops (gcn, gcn2) or raw (gin, sage)."""

    edge_index: Tensor
    edge_weight: Optional[Tensor]
    num_nodes: int
    crow: Tensor = None
    col: Tensor = None
    weight: Optional[Tensor] = None

    @classmethod
    def build(cls, edge_index: Tensor, num_nodes: int, normalised: bool) -> "Graph":
        weight = None
        if normalised:
            edge_index, weight = normalized_adjacency(edge_index, num_nodes, "sym")
        # CSR over targets: row = target node, col = source node (messages flow source -> target)
        target, source = edge_index[1], edge_index[0]
        crow, order = csr_order(target, source, (num_nodes, num_nodes))
        return cls(edge_index, weight, num_nodes, crow, source[order], None if weight is None else weight[order])

    def sample(self, seeds: Tensor, fanouts: list[int], generator: torch.Generator):
        """A sampled computation graph for ``seeds``: at most ``fanout`` incoming neighbours per
        node and hop (``-1``: all), uniformly without replacement. Returns the global ids of its
        nodes (seeds first) and its local ``edge_index`` and ``edge_weight``."""
        nodes, frontier = seeds, seeds
        position = torch.full((self.num_nodes,), -1, dtype=torch.long, device=seeds.device)
        position[seeds] = torch.arange(seeds.numel(), device=seeds.device)
        src_all, dst_all, w_all = [], [], []
        for fanout in fanouts:
            start, deg = self.crow[frontier], self.crow[frontier + 1] - self.crow[frontier]
            owner = torch.repeat_interleave(torch.arange(frontier.numel(), device=seeds.device), deg)
            edge = torch.arange(int(deg.sum()), device=seeds.device) - torch.repeat_interleave(torch.cumsum(deg, 0) - deg, deg) + start[owner]
            if fanout >= 0:
                keys = torch.rand(edge.numel(), generator=generator).to(seeds.device) + owner.to(torch.float64)
                order = torch.argsort(keys)
                edge, owner = edge[order], owner[order]
                rank = torch.arange(edge.numel(), device=seeds.device) - torch.repeat_interleave(torch.cumsum(deg, 0) - deg, deg)
                keep = rank < fanout
                edge, owner = edge[keep], owner[keep]
            source = self.col[edge]
            new = torch.unique(source[position[source] < 0])
            position[new] = torch.arange(nodes.numel(), nodes.numel() + new.numel(), device=seeds.device)
            nodes = torch.cat([nodes, new])
            src_all.append(position[source])
            dst_all.append(position[frontier[owner]])
            if self.weight is not None:
                w_all.append(self.weight[edge])
            frontier = new
        edge_index = torch.stack([torch.cat(src_all), torch.cat(dst_all)])
        weight = torch.cat(w_all) if w_all else None
        return nodes, edge_index, weight


@dataclass
class GNNResult:
    metrics: dict[str, float]
    best_epoch: int
    train_seconds: float
    inference_seconds: float
    history: list[tuple[float, float]]


def train_gnn(cfg: Any, data, device: torch.device, seed: int, progress: bool, watch_factory) -> GNNResult:
    """Train one model (seed ``seed``) and report train/val/test at the best validation epoch."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    regression = data.task == "regression"
    out_dim = 1 if regression else data.num_classes
    entry = GNNS[cfg.name]
    model = entry.model(cfg, data.num_features, out_dim).to(device)
    graph = Graph.build(data.edge_index, data.num_nodes, model.normalised_graph)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    x, y = data.x.float(), data.y
    target = y.float().view(-1, 1) if regression else y
    masks = {"train": data.train_mask, "val": data.val_mask, "test": data.test_mask}
    fanouts = list(cfg.fanouts) if cfg.fanouts is not None else list(entry.fanouts or [-1] * model.graph_layers)
    fanouts = fanouts[: model.graph_layers]
    train_nodes = data.train_mask.nonzero().view(-1)

    def loss_of(out: Tensor, truth: Tensor) -> Tensor:
        return F.mse_loss(out, truth) if regression else F.cross_entropy(out, truth)

    def predict() -> Tensor:
        model.eval()
        with torch.no_grad():
            if not cfg.batch_size:
                return model(x, graph.edge_index, graph.edge_weight)
            return layerwise_inference(model, x, graph, cfg.batch_size)

    def scores(out: Tensor) -> dict[str, float]:
        return {k: metric(out[m], y[m], getattr(data, "metric", data.task)) for k, m in masks.items()}

    best, best_state, history = None, None, []
    train_watch = watch_factory()
    bar = _progress(cfg.epochs, progress)
    lines = Progress(f"{entry.label} training", total=cfg.epochs, enabled=bar is None)  # no terminal: a log line every 30 s
    with train_watch.measure(), lines:
        for epoch in range(cfg.epochs):
            model.train()
            if not cfg.batch_size:
                optimizer.zero_grad()
                out = model(x, graph.edge_index, graph.edge_weight)
                loss = loss_of(out[data.train_mask], target[data.train_mask])
                loss.backward()
                optimizer.step()
                epoch_loss = loss.item()
            else:
                epoch_loss = 0.0
                order = train_nodes[torch.randperm(train_nodes.numel(), generator=generator).to(train_nodes.device)]
                for start in range(0, order.numel(), cfg.batch_size):
                    seeds = order[start:start + cfg.batch_size]
                    nodes, ei, ew = graph.sample(seeds, fanouts, generator)
                    optimizer.zero_grad()
                    out = model(x[nodes], ei, ew)[: seeds.numel()]
                    loss = loss_of(out, target[seeds])
                    loss.backward()
                    optimizer.step()
                    epoch_loss += loss.item() * seeds.numel() / order.numel()
            current = scores(predict())
            history.append((epoch_loss, current["val"]))
            if best is None or current["val"] > best[1]["val"]:
                best = (epoch, current)
                best_state = copy.deepcopy(model.state_dict())
            lines.step(epoch + 1, "epochs", loss=epoch_loss, val=current["val"])
            if bar is not None:
                bar.set_postfix(loss=f"{epoch_loss:.4f}", val=f"{current['val']:.4f}")
                bar.update(1)
    if bar is not None:
        bar.close()
    model.load_state_dict(best_state)
    inference_watch = watch_factory()
    with inference_watch.measure():
        final = scores(predict())
    return GNNResult(final, best[0], train_watch.seconds, inference_watch.seconds, history)


def layerwise_inference(model: GNN, x: Tensor, graph: Graph, batch_size: int) -> Tensor:
    """Outputs for every node, one graph layer at a time over node batches with all their
    incoming neighbours, so no multi-hop neighbourhood is ever materialised."""
    h = x0 = model.start(x)
    for l in range(model.graph_layers):
        parts = []
        for start in range(0, graph.num_nodes, batch_size):
            seeds = torch.arange(start, min(start + batch_size, graph.num_nodes), device=x.device)
            nodes, ei, ew = graph.sample(seeds, [-1], None)
            parts.append(model.conv(l, h[nodes], x0[nodes], ei, ew)[: seeds.numel()])
        h = model.post(l, torch.cat(parts))
    return model.finish(h)


def _progress(total: int, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="epochs", leave=False)


from . import gnn_heterophily  # noqa: E402,F401 - registers the heterophily baselines (gprgnn, h2gcn)
