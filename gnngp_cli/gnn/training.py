"""Training a GNN baseline, timed like the GPs: full batch, or mini-batches of sampled
neighbourhoods with layer-wise inference over every node; the test metric is read at the
epoch with the best validation metric."""
from __future__ import annotations

import copy
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..graph.operators import csr_order, normalized_adjacency, sparse_beta_quiet
from ..errors import ConfigError, DatasetError
from ..metrics import score
from ..progress import Progress
from .models import GNN
from .operator import carrying_transpose, operator
from .residual import ResidualNetwork
from .baselines import GNNS


@dataclass
class Graph:
    """The edges a model reads: normalised with unit self-loops (gcn, gcn2) or raw (gin, sage)."""

    edge_index: Tensor
    edge_weight: Optional[Tensor]
    num_nodes: int
    crow: Tensor = None
    col: Tensor = None
    weight: Optional[Tensor] = None
    _operator: Optional[Tensor] = None

    def operator(self, dtype: torch.dtype) -> Tensor:
        """The adjacency as one cached sparse CSR matrix over targets (``adj_t``: row = target,
        column = source; the normalised weights, or ones) that carries its transpose
        (:func:`~gnngp_cli.gnn.operator.operator`): what a PyG layer reads on the fast path, one
        sparse-dense product per layer in place of gathering an edges x features message matrix
        and scattering it back, and one more in the backward pass."""
        if self._operator is None or self._operator.dtype != dtype:
            values = self.weight if self.weight is not None else torch.ones(self.col.numel(), device=self.col.device)
            with sparse_beta_quiet():
                self._operator = carrying_transpose(
                    torch.sparse_csr_tensor(self.crow, self.col, values.to(dtype), (self.num_nodes, self.num_nodes), check_invariants=False))
        return self._operator

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


def sampled_operator(edge_index: Tensor, weight: Optional[Tensor], num_nodes: int, dtype: torch.dtype) -> Tensor:
    """A sampled computation graph as one sparse CSR matrix over targets, with its transpose
    (:func:`~gnngp_cli.gnn.operator.operator`): the fast path of a mini-batch (at Reddit's size
    with every neighbour, the edge-wise messages of one batch would be a 117 GB matrix)."""
    return operator(edge_index[1], edge_index[0], weight, num_nodes, dtype)


@dataclass
class GNNResult:
    metrics: dict[str, float]
    best_epoch: int   # the epoch chosen, 1 to gnn.epochs
    train_seconds: float
    inference_seconds: float
    history: list[tuple[float, float]]
    outputs: Optional[Tensor] = None                         # the best epoch's outputs on every node (eval mode)
    dropout_passes: Optional[Callable[[int], Tensor]] = None  # k forward passes with dropout on: k x nodes x outputs (full batch)
    curve: Optional[dict] = None                             # gnn.regime=ntk: the metric on each split after each recorded step
    precompute_seconds: Optional[float] = None               # a model that reads the graph once (SGC, SIGN): that precomputation; else None
    weight_decay: Optional[float] = None                     # the weight decay chosen on validation (gnn.weight_decay_grid); else None


class TrainingDiverged(ConfigError):
    """Gradient descent at too large a learning rate (a setting to change, told in one line)."""


@dataclass(frozen=True)
class GradientDescent:
    """``gnn.regime=ntk``: full-batch gradient descent with learning rate ``lr`` on the MSE loss
    ``1/(2 n_b) sum_b ||f_b - y_b||^2`` (one-hot targets) in the NTK parameterisation, the training
    whose infinite-width limit ``kernel.limit=ntk`` with ``inference.time`` predicts (time ``t`` =
    ``t`` steps). The network is centred (its output at initialisation subtracted), so that it
    starts at the prior mean 0, as the limit's mean does. ``record``: the steps after which the
    metrics are recorded (the learning curve), and among which the best validation step is kept
    (early stopping)."""

    lr: float
    record: Sequence[int]

    @staticmethod
    def default_record(epochs: int, points: int = 30) -> list[int]:
        """About ``points`` steps, log-spaced from 1 to ``epochs``."""
        return sorted({max(1, round(epochs ** (i / (points - 1)))) for i in range(points)})

    def optimizer(self, model: torch.nn.Module, generator: torch.Generator) -> torch.optim.Optimizer:
        """Redraw ``model``'s weights ``N(0, 1 / fan_in)`` and zero its biases (frozen: the
        kernel's ``s_w = 1``, ``s_b = 0``), and return plain gradient descent whose step on a
        weight is ``lr / fan_in``: a step ``lr`` on ``w`` for ``W = w / sqrt(fan_in)``, the NTK
        parameterisation, in which the network's tangent kernel tends to the kernel's."""
        groups = []
        with torch.no_grad():
            for name, param in model.named_parameters():
                if param.dim() == 2:   # a weight, stored out x in
                    fan_in = param.size(1)
                    param.copy_(torch.randn(param.shape, generator=generator, dtype=param.dtype) / math.sqrt(fan_in))
                    groups.append({"params": [param], "lr": self.lr / fan_in})
                else:
                    param.zero_()
                    param.requires_grad_(False)
        return torch.optim.SGD(groups, lr=self.lr)

    def check(self, step: int, loss: float, seen: list[float]) -> None:
        """Stop a diverging run in one line: a loss that is not finite or 100 times the first."""
        seen.append(loss)
        if not math.isfinite(loss) or loss > 100 * seen[0]:
            raise TrainingDiverged(f"gnn.regime=ntk diverged at step {step} (loss {loss:.3g}, {seen[0]:.3g} at step 1): the learning rate "
                                   f"inference.learning_rate={self.lr:g} is above 2 / the tangent kernel's largest eigenvalue per node; lower it")


FLOAT32_SQUARE = math.sqrt(torch.finfo(torch.float32).max)   # a feature above it overflows float32 once multiplied by one of its size


def train_gnn(options: Any, data, device: torch.device, seed: int, progress: bool, watch_factory,
              descent: Optional[GradientDescent] = None, last_epoch: bool = False) -> GNNResult:
    """Train one model (seed ``seed``) and report train/val/test at the best validation epoch;
    with ``descent`` (``gnn.regime=ntk``), by that gradient descent, recording its learning curve;
    with ``last_epoch`` (no validation set to choose on: active learning), the model after its
    last epoch, no epoch evaluated before it."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    regression = data.task == "regression"
    out_dim = 1 if regression else data.num_classes
    entry = GNNS[options.name]
    network = ResidualNetwork if options.recipe == "platonov2023" else entry.model
    model = network(options, data.num_features, out_dim).to(device)
    graph = Graph.build(data.edge_index, data.num_nodes, model.normalised_graph)
    x, y = data.x.float(), data.y
    largest = float(x.abs().max()) if x.numel() else 0.0
    if largest > FLOAT32_SQUARE:   # a float32 network's products of such features overflow: training diverges (an "ok" row at chance, or NaN)
        raise DatasetError(f"the features reach {largest:.3g}, and the {entry.label} network computes in float32, where their products "
                           f"overflow (above {FLOAT32_SQUARE:.2g}); scale them (dataset.scale=true, or divide them in your files)")
    # the whole graph's layers read one cached sparse operator where the model's layers take one (gnn.propagation=sparse)
    fast = options.propagation == "sparse" and getattr(model, "reads_operator", False)
    adjacency, adjacency_weight = (graph.operator(x.dtype), None) if fast else (graph.edge_index, graph.edge_weight)
    precompute_watch = watch_factory() if hasattr(model, "precompute") else None
    if precompute_watch is not None:   # SGC's S^K X, SIGN's [X, S X, ..., S^K X]: the graph read once; the model trains on these rows
        with precompute_watch.measure(), torch.no_grad(), sparse_beta_quiet():   # PyG's CSR products (torch's beta and invariant-check warnings)
            x = model.precompute(x, adjacency, adjacency_weight)
    rows = precompute_watch is not None and entry.row_batches   # training reads rows of x (its training rows, or a mini-batch's), no graph
    target = y.float().view(-1, 1) if regression else y
    grid = list(getattr(options, "weight_decay_grid", None) or [])   # SGC: weight decays tried, the best validation metric kept
    decays = grid or [options.weight_decay]
    initial = copy.deepcopy(model.state_dict()) if len(decays) > 1 else None   # every weight decay starts from the same weights

    def adam(weight_decay: float) -> torch.optim.Optimizer:
        if isinstance(model, ResidualNetwork):
            return torch.optim.AdamW(model.parameter_groups(weight_decay), lr=options.lr)
        return torch.optim.Adam(model.parameters(), lr=options.lr, weight_decay=weight_decay)

    if descent is None:
        optimizer = None
        recorded = None
    else:
        optimizer = descent.optimizer(model, generator)
        x = x * math.sqrt(data.num_features)   # the first weight N(0, 1/d) then gives the linear C0 = x x^T (kernel.base.scale=1)
        if not regression:
            target = F.one_hot(y, out_dim).to(x.dtype)
        recorded = set(descent.record)
        curve: dict[str, list] = {"t": [], "train": [], "val": [], "test": []}
        with torch.no_grad():   # centred: the output at initialisation subtracted, so training starts at the prior mean 0 as the
            start = model(x, adjacency, adjacency_weight)   # NTK-GP's mean does (else a draw of the NNGP prior stays in every prediction)
    ood = getattr(data, "ood_mask", None)   # a protocol's OOD test nodes: the test metric reads the others
    masks = {"train": data.train_mask, "val": data.val_mask, "test": data.test_mask if ood is None else data.test_mask & ~ood}
    fanouts = list(options.fanouts) if options.fanouts is not None else list(entry.fanouts or [-1] * model.graph_layers)
    fanouts = fanouts[: model.graph_layers]
    train_nodes = data.train_mask.nonzero().view(-1)

    def loss_of(out: Tensor, truth: Tensor) -> Tensor:
        if descent is not None:
            return 0.5 * ((out - truth) ** 2).sum(1).mean()
        return F.mse_loss(out, truth) if regression else F.cross_entropy(out, truth)

    def predict() -> Tensor:
        model.eval()
        with torch.no_grad():
            if rows and options.batch_size:   # rows of the precomputed features, a batch at a time
                return torch.cat([model(x[start:start + options.batch_size]) for start in range(0, x.size(0), options.batch_size)])
            if not options.batch_size or fast or rows:   # one sparse product per layer holds no more than the layer's outputs
                return forward()
            return layerwise_inference(model, x, graph, options.batch_size)

    def forward() -> Tensor:
        out = model(x, adjacency, adjacency_weight)
        return out if descent is None else out - start

    def scores(out: Tensor) -> dict[str, float]:
        name = getattr(data, "metric", None) or ("r2" if regression else "accuracy")
        return {k: score(name, out[m], y[m]) for k, m in masks.items()}

    val_nodes = masks["val"].nonzero().view(-1)

    def validation() -> dict[str, float]:
        """A precomputed model's epoch: the validation rows alone (the epoch is chosen on them; every split is scored at the end)."""
        model.eval()
        with torch.no_grad():
            out = model(x[val_nodes])
        return {"val": score(getattr(data, "metric", None) or ("r2" if regression else "accuracy"), out, y[val_nodes])}

    best, best_state, history, chosen_decay = None, None, [], None
    history_loss: list[float] = []
    train_watch = watch_factory()
    total = options.epochs * len(decays)
    bar = _progress(total, progress)
    lines = Progress(f"{entry.label} training", total=total, enabled=bar is None)  # no terminal: a log line every 30 s
    with train_watch.measure(), lines:
        for trial, weight_decay in enumerate(decays):
            if descent is None:
                if initial is not None:
                    model.load_state_dict(initial)
                optimizer = adam(weight_decay)
            for epoch in range(options.epochs):
                model.train()
                if not options.batch_size and rows:   # precomputed features: the training rows alone
                    optimizer.zero_grad()
                    loss = loss_of(model(x[train_nodes]), target[train_nodes])
                    loss.backward()
                    optimizer.step()
                    epoch_loss = loss.item()
                elif not options.batch_size:
                    optimizer.zero_grad()
                    out = forward()
                    loss = loss_of(out[data.train_mask], target[data.train_mask])
                    loss.backward()
                    optimizer.step()
                    epoch_loss = loss.item()
                    if descent is not None:
                        descent.check(epoch + 1, epoch_loss, history_loss)
                else:
                    epoch_loss = 0.0
                    order = train_nodes[torch.randperm(train_nodes.numel(), generator=generator).to(train_nodes.device)]
                    for start in range(0, order.numel(), options.batch_size):
                        seeds = order[start:start + options.batch_size]
                        optimizer.zero_grad()
                        if rows:   # precomputed features: the batch's own rows
                            out = model(x[seeds])
                        elif fast:   # the sampled graph as one sparse operator, as the whole graph's
                            nodes, ei, ew = graph.sample(seeds, fanouts, generator)
                            out = model(x[nodes], sampled_operator(ei, ew, nodes.numel(), x.dtype))[: seeds.numel()]
                        else:
                            nodes, ei, ew = graph.sample(seeds, fanouts, generator)
                            out = model(x[nodes], ei, ew)[: seeds.numel()]
                        loss = loss_of(out, target[seeds])
                        loss.backward()
                        optimizer.step()
                        epoch_loss += loss.item() * seeds.numel() / order.numel()
                if last_epoch or (recorded is not None and epoch + 1 not in recorded):
                    lines.step(trial * options.epochs + epoch + 1, "epochs", loss=epoch_loss)
                    if bar is not None:
                        bar.update(1)
                    continue
                current = validation() if rows else scores(predict())
                history.append((epoch_loss, current["val"]))
                if recorded is not None:
                    curve["t"].append(epoch + 1)
                    for split in ("train", "val", "test"):
                        curve[split].append(current[split])
                if best is None or current["val"] > best[1]["val"]:
                    best = (epoch + 1, current)   # counted from 1, as gnn.epochs and the curve's t are
                    best_state = copy.deepcopy(model.state_dict())
                    chosen_decay = weight_decay
                lines.step(trial * options.epochs + epoch + 1, "epochs", loss=epoch_loss, val=current["val"])
                if bar is not None:
                    bar.set_postfix(loss=f"{epoch_loss:.4g}", val=f"{current['val']:.4f}")
                    bar.update(1)
    if bar is not None:
        bar.close()
    if best_state is not None:   # (last_epoch: the model as trained)
        model.load_state_dict(best_state)
    inference_watch = watch_factory()
    with inference_watch.measure():
        outputs = predict()
        if not bool(torch.isfinite(outputs).all()):   # NaN probabilities downstream (a bincount's traceback, NaN metrics): one line here
            largest = float(data.x.detach().abs().max()) if data.x.numel() else 0.0
            raise DatasetError(f"the {entry.label} network's outputs are NaN or infinite after training, which diverged; lower gnn.lr, "
                               f"or scale the features (the largest |feature| is {largest:.3g}: dataset.scale=true)")
        final = scores(outputs)
    if best is None:
        best, chosen_decay = (options.epochs, final), decays[-1]

    def dropout_passes(k: int) -> Tensor:
        model.train()   # dropout on (the layers read the model's flag) ...
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.eval()   # ... batch norm on its trained running statistics
        with torch.no_grad():
            return torch.stack([model(x, adjacency, adjacency_weight) for _ in range(k)])

    return GNNResult(final, best[0], train_watch.seconds, inference_watch.seconds, history, outputs,
                     None if options.batch_size else dropout_passes, curve if descent is not None else None,
                     None if precompute_watch is None else precompute_watch.seconds, chosen_decay if grid else None)


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
