"""The active-learning job (``active=<strategy>``): labels bought under budgets, chosen from the
GP's own posterior, the posterior updated per label in closed form.

One job is one kernel on one dataset, ``runs`` seeds (``active.seed + r``). Each run
(:meth:`ActiveJob.run`):

1. the pool: every node but the split's test nodes (whose labels are never bought);
2. the kernel over every node, computed once (:class:`~gnngp_cli.gp.updates.Prior`): a
   low-rank kernel's root ``Q`` on landmarks drawn from the pool (every node with
   ``landmarks.pool=all``; labels are not needed for them), an exact kernel's dense matrix, after refusing, before any work, a run whose kernel
   and posterior would not fit in memory;
3. ``active.initial`` random pool nodes labelled, then steps of ``active.batch`` labels chosen
   by the strategy (:mod:`gnngp_cli.gp.strategies`), each label a rank-one update of the
   posterior (:class:`~gnngp_cli.gp.updates.LabelPosterior`), never a refit; a strategy that
   retrains (``active=age``) is handed the GCN (:meth:`ActiveJob.train_gcn`) trained on the
   labels so far at each step, inside the selection's time;
4. at each budget, a row: the test metric, the macro-F1 over every node (FeatProp's protocol),
   the labels so far and the time spent choosing them (cumulative).

The nugget: ``active.nugget`` times the mean diagonal of ``K`` (``fit=grid``, the default: no
validation set chooses it), or with ``fit=mll`` the value of the ``nugget`` grid of the highest
marginal likelihood of the labels so far, chosen again at each budget (starting at
``fit.nugget``); a changed nugget rebuilds the posterior from its labels once, never per label.
"""
from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Optional

import torch

from ..config import method_defaults, parse
from ..gnn import GNNS
from ..gnn.baselines import gnn_defaults
from ..gnn.training import train_gnn
from ..errors import ConfigError, ResourceError
from ..gp.inference import log_grid
from ..gp.strategies import STRATEGIES, Selection, Strategy, choose
from ..gp.sufficient import regression_targets
from ..gp.updates import LabelPosterior, Prior, log_marginal_likelihood, rebuilt
from ..kernels import KERNELS, BaseKernel
from ..kernels.planner import low_rank_width
from ..metrics import macro_f1, score
from ..results.rows import base_row, graph_columns, pool_setting, with_extra
from ..runtime import Stopwatch, current_rss_bytes, memory_limit_bytes
from .estimate import active_bytes, size_text
from .gp_job import KernelJob, candidates
from .landmarks import choose_landmarks, landmark_pool

log = logging.getLogger("gnngp")


def centred(mean: torch.Tensor, order: list[int], y: torch.Tensor) -> torch.Tensor:
    """A regression's prediction centred on the labels bought: ``m + K_xL (K_LL + s2 I)^-1 (y_L - m)``,
    ``m`` their mean, from the posterior means of ``y`` and of a column of ones (``mean``'s two
    columns): ``mean_y + m (1 - mean_1)``. Uncentred, a zero-mean GP pulled the nodes far from
    the few labels toward 0 (a trial: chameleon, targets of mean 7.6, R^2 -1.08 at 10 labels
    bought by sigma_opt, where the labels' own mean scores -0.04)."""
    m = float(y[torch.tensor(order, dtype=torch.long, device=y.device)].double().mean()) if order else 0.0
    return mean[:, :1] + m * (1.0 - mean[:, 1:2])


def labels_bought(targets: torch.Tensor, order: list[int], task: str) -> torch.Tensor:
    """The targets of the labels bought as the marginal likelihood reads them: a regression's
    ``y`` centred on their mean (its column of ones left out), a classification's one-hot rows."""
    rows = targets[order].double()
    return rows[:, :1] - rows[:, :1].mean() if task == "regression" else rows


@dataclass
class ActiveRun:
    """One run: its rows (one per budget) and the labelled nodes in the order they were bought."""

    rows: list[dict]
    order: list[int] = field(default_factory=list)
    posterior: Optional[LabelPosterior] = None


class ActiveJob(KernelJob):
    """The runs of one active-learning job on an open local backend (see the module docstring)."""

    def __init__(self, spec: Any, backend: Any):
        super().__init__(spec, backend)
        info, spec = backend.info, self.spec
        self.strategy: Strategy = STRATEGIES[spec.active.name]
        if spec.active.model == "gcn" and info.task != "classification":
            raise ConfigError(f"active.model=gcn trains the GCN classifier, and {spec.dataset.name} is a regression task; use active.model=gp")
        if self.strategy.classifies and info.task != "classification":
            raise ConfigError(f"active={self.strategy.name} reads class probabilities, and {spec.dataset.name} is a regression task; "
                              "use active=variance, v_opt or sigma_opt")
        if len(candidates(self.kspec, spec.fit.method == "mll")) > 1:   # gamma_search is refused before (config)
            chosen = [f"kernel.{name}" for name, values in KERNELS[self.kspec.name].candidates(self.kspec).items() if len(values) > 1]
            raise ConfigError(f"kernel={self.kspec.name} chooses {' and '.join(chosen) or 'its settings'} among candidates on validation, which "
                              f"an active run has not; give {'it' if len(chosen) < 2 else 'each'} one value for active learning")
        self.pool = ~backend.data.test_mask.cpu()
        pool_size = int(self.pool.sum())
        top = int(spec.active.budgets[-1])
        self._exact: Optional[Prior] = None   # an exact kernel: the same for every run, computed once
        if top > pool_size:
            raise ConfigError(f"active.budgets={list(spec.active.budgets)}: the budget {top} is above the pool of {pool_size} nodes "
                              f"(every node of {spec.dataset.name} but its test nodes); use budgets of at most {pool_size}")

    @property
    def count(self) -> int:
        return int(self.spec.runs)

    @property
    def labels(self) -> int:
        """The labels a run buys: ``active.initial`` random ones, then up to the last budget."""
        return int(self.spec.active.initial) + max(self.spec.active.budgets)

    def runs(self, skip: Collection[int] = ()):
        for index in range(self.count):
            if index not in skip:
                yield self.run(index)

    def prior(self, seed: int) -> tuple[Prior, int]:
        """The kernel over every node (module docstring, 2) and the landmark count (0: exact)."""
        spec, kspec, backend = self.spec, self.kspec, self.backend
        landmarks = None
        pool_ids = self.pool.nonzero().view(-1).to(backend.device)
        if kspec.low_rank:
            drawn, what = landmark_pool(spec.landmarks.pool, pool_ids, backend.info.num_nodes, "pool nodes")
            landmarks = torch.sort(choose_landmarks(drawn, spec.landmarks.fraction, spec.landmarks.count, seed, spec.dataset.name, what))[0]
        if landmarks is None and self._exact is not None:
            return self._exact, 0
        base = BaseKernel(kspec.base.name, kspec.base.gamma, kspec.base.c, kspec.base.d)
        arch = self.entry.architecture(kspec, candidates(kspec, spec.fit.method == "mll")[0])
        ctx = backend.context(arch.adjacency, base, landmarks, kspec.base.scale)
        n, b = backend.info.num_nodes, torch.finfo(backend.dtype).bits // 8
        width = n if landmarks is None else math.ceil(landmarks.numel() * low_rank_width(arch.network, base, arch.adjacency)) + 1   # (a bias column)
        working = self.strategy.working(n, backend.info.num_classes or 1) if self.strategy.working is not None else 0
        need = active_bytes(n, width, b, landmarks is None, self.labels, "v_opt" in self.strategy.tracks, working)
        limit = memory_limit_bytes(spec.max_memory_gb, ctx.features.device)
        peak = current_rss_bytes() + need
        if landmarks is not None:   # the root's own computation comes first: the process's peak then is a GP job's (gnngp_cli.job.estimate)
            peak = max(peak, backend.estimate(arch, ctx, landmarks, False).reach * 2**30)
        scoring = 8.0 * working   # a strategy's own blocks (eer's, float64), which neither a low-rank kernel nor fewer landmarks make smaller
        if peak > limit:
            if landmarks is None:
                fix = f"use the low-rank kernel (kernel={kspec.name}_x)"
            elif scoring and peak - scoring <= limit:   # the blocks are what does not fit
                fix = "choose a strategy without scoring blocks (active=sigma_opt), or raise max_memory_gb if the memory is yours"
            else:
                fix = "use fewer landmarks (landmarks.count), or raise max_memory_gb if the memory is yours"
            held = f"the posterior over all {n:,} nodes: {size_text(need - scoring)}"
            if scoring:
                held += f", and active={self.strategy.name}'s scoring blocks: {size_text(scoring)}"
            raise ResourceError(f"active={self.strategy.name} with the {'exact' if landmarks is None else 'low-rank'} {arch.label} kernel on "
                                f"{spec.dataset.name} needs about {size_text(peak)} at its peak (the kernel, then {held}), and the limit is "
                                f"{size_text(limit)} (max_memory_gb; default half of the free memory); {fix}")
        blocks = f" (its scoring blocks {size_text(scoring)})" if scoring else ""
        log.info(f"active={self.strategy.name}: the {arch.label} kernel and the posterior over {n:,} nodes hold about {size_text(need)}{blocks}, "
                 f"the process about {size_text(peak)} at its peak (the limit: {size_text(limit)}); each label is an O(n k) update"
                 f"{'' if landmarks is None else ' and an O(n m) product, m the root width'}")
        if landmarks is None:
            backend.check_exact_memory(arch, ctx, ctx.every_node, None)
            kernel = arch.network(None, ctx, ctx.every_node)
            every = kernel.positions(ctx.every_node)
            ordered = bool(torch.equal(every, torch.arange(n, device=every.device)))
            if kernel.root is not None:
                self._exact = Prior(root=kernel.root if ordered else kernel.root[every])
            else:
                dense = kernel.dense()
                self._exact = Prior(dense=dense if ordered else dense[every][:, every])
            return self._exact, 0
        kernel = arch.network(None, ctx, None)
        return Prior(root=kernel.root[kernel.positions(ctx.every_node)]), int(landmarks.numel())

    def run(self, index: int) -> ActiveRun:
        spec, backend, info = self.spec, self.backend, self.backend.info
        seed = int(spec.active.seed) + index
        device = backend.device
        kernel_watch = Stopwatch(device)
        with kernel_watch.measure():
            prior, landmarks = self.prior(seed)
        targets = regression_targets(backend.data.y, info.task, info.num_classes, prior.dtype).to(prior.device)
        if info.task == "regression":   # beside y, a column of ones: its posterior mean centres the prediction on the labels bought (centred)
            targets = torch.cat([targets, torch.ones_like(targets)], dim=1)
        scale = float(prior.diagonal().mean())   # the mean of diag K: the nugget is relative to it
        mll = spec.fit.method == "mll"
        nugget = float(spec.fit.nugget if mll else spec.active.nugget)
        grid = log_grid(spec.nugget.min, spec.nugget.max, spec.nugget.num, dtype=torch.float64) if mll else None
        posterior = LabelPosterior(prior, nugget * scale, targets.size(1), self.strategy.tracks, self.labels)
        generator = torch.Generator().manual_seed(seed)
        selection = Selection(posterior, backend.data.edge_index, generator, features=backend.data.x)
        if self.strategy.retrains:   # age: the GCN trained on the labels so far at each step, inside the selection's time
            selection.classifier = lambda labelled: torch.softmax(self.train_gcn(seed, labelled, self.strategy.gcn).outputs.double(), dim=1)
        select_watch = Stopwatch(device)
        # the selection under inference mode (no autograd bookkeeping on its many small steps) unless it trains a GCN (age)
        selecting = (lambda: torch.inference_mode()) if not self.strategy.retrains else contextlib.nullcontext
        rows: list[dict] = []
        order: list[int] = []

        def label(nodes: list[int]) -> None:
            for node in nodes:
                posterior.label(node, targets[node])
                order.append(node)

        pool_ids = self.pool.nonzero().view(-1)
        initial = int(spec.active.initial)
        if initial:
            with select_watch.measure(), selecting():
                label([int(v) for v in pool_ids[torch.randperm(pool_ids.numel(), generator=generator)[:initial]]])
        batch = int(spec.active.batch)
        for budget in spec.active.budgets:
            selection.target = int(budget)
            with select_watch.measure(), selecting():
                while len(order) < budget:
                    label(choose(self.strategy, selection, self.pool, min(batch, int(budget) - len(order))))
            if mll and order:   # the nugget of the highest marginal likelihood of the labels so far; a change rebuilds once (timed as selection)
                with select_watch.measure(), selecting():
                    values = log_marginal_likelihood(prior.block(torch.tensor(order, device=prior.device)).double(), labels_bought(targets, order, info.task),
                                                     grid * scale)
                    best = float(grid[int(torch.argmax(values))])
                    if best != nugget:
                        nugget = best
                        posterior = rebuilt(prior, nugget * scale, targets.size(1), order, targets[order], self.strategy.tracks, self.labels)
                        selection.posterior = posterior
            rows.append(self.row(index, seed, int(budget), posterior, nugget, landmarks, select_watch.seconds, kernel_watch.seconds, order))
        return ActiveRun(rows, order, posterior)

    def row(self, index: int, seed: int, budget: int, posterior: LabelPosterior, nugget: float, landmarks: int, selection_seconds: float,
            kernel_seconds: float, order: list[int]) -> dict:
        spec, backend, info = self.spec, self.backend, self.backend.info
        data = backend.data
        mean = centred(posterior.mean, order, data.y) if info.task == "regression" else posterior.mean
        test = data.test_mask.nonzero().view(-1).to(mean.device)
        y = data.y.to(mean.device)
        labelled = torch.tensor(order, dtype=torch.long, device=mean.device)
        row = base_row(spec)
        row.update(
            metric=self.metric.name, strategy=self.strategy.name, budget=budget, labelled=len(order),
            train=score(self.metric.name, mean[labelled], y[labelled]) if order else float("nan"), val=float("nan"),
            test=score(self.metric.name, mean[test], y[test]),
            macro_f1_all=macro_f1(mean.argmax(1), y, info.num_classes) if info.task == "classification" else float("nan"),
            selection_seconds=selection_seconds, nugget=nugget, layers=self.kspec.layers,
            sigma_w=self.kspec.get("sigma_w"), sigma_b=self.kspec.get("sigma_b"), landmarks=landmarks, seed=seed,
            landmark_fraction=spec.landmarks.fraction if self.kspec.low_rank and spec.landmarks.count is None else None,
            kernel_seconds=kernel_seconds, inference_seconds=selection_seconds, fit=spec.fit.method,
            likelihood="gaussian" if info.task == "classification" else "",
            extra=json.dumps({"active": {"initial": int(spec.active.initial), "batch": int(spec.active.batch), "nodes": list(order)},
                              **pool_setting(spec)}),
        )
        row["total_seconds"] = kernel_seconds + selection_seconds
        row.update(graph_columns(info, backend.load_seconds, spec, index))
        columns = backend.columns()
        with_extra(row, **columns.pop("extra", {}))
        row.update(columns)
        if spec.active.model == "gcn":
            row.update(self.gcn_columns(seed, labelled.cpu()))
        said = [*info.warnings, *self.kernel_notes()]
        if said:
            with_extra(row, warnings=said)
        return row

    def train_gcn(self, seed: int, labelled: torch.Tensor, settings: Optional[dict] = None):
        """The GCN of ``gnn=gcn`` (its defaults for the dataset, then ``settings``, a retraining
        strategy's own; ``depth`` layers, ``active.epochs`` epochs if set) trained on the ``labelled``
        nodes for its epochs, the model after the last (there is no validation set to choose an
        epoch on, and the labels bought are all fitted by the first epochs): the
        :class:`~gnngp_cli.gnn.training.GNNResult`."""
        spec, backend, info = self.spec, self.backend, self.backend.info
        entry = GNNS["gcn"]
        options = entry.config(name="gcn")
        defaults = method_defaults(gnn_defaults(entry, "paper"), str(spec.dataset.name).lower(), info.task)
        defaults.update(settings or {})
        if spec.active.get("epochs") is not None:
            defaults["epochs"] = int(spec.active.epochs)
        options = replace(options, layers=int(spec.depth), **{key: value for key, value in defaults.items()
                                                               if hasattr(options, key) and getattr(options, key) is None})
        data = copy.copy(backend.data)
        mask = torch.zeros(info.num_nodes, dtype=torch.bool, device=backend.data.y.device)
        mask[labelled.to(mask.device)] = True
        data.train_mask, data.val_mask = mask, mask.clone()
        return train_gnn(options, data, backend.device, seed, False, lambda: Stopwatch(backend.device), last_epoch=True)

    def gcn_columns(self, seed: int, labelled: torch.Tensor) -> dict:
        """``active.model=gcn``: the GCN (:meth:`train_gcn`) trained on the labels bought; its test
        metric, its macro-F1 over every node and its training seconds."""
        info = self.backend.info
        result = self.train_gcn(seed, labelled)
        predicted = result.outputs.argmax(1) if result.outputs is not None else None
        return {"gcn_test": result.metrics["test"], "gcn_seconds": result.train_seconds + result.inference_seconds,
                "gcn_macro_f1_all": macro_f1(predicted, self.backend.data.y, info.num_classes) if predicted is not None else float("nan")}


def run_active(spec: Any, backend: Any, on_run: Optional[Callable[[list[dict]], Any]] = None, skip: Collection[int] = ()) -> list[dict]:
    """All runs of an active-learning job on ``backend`` (``compute=local``); each run's rows (one
    per budget) handed to ``on_run`` together once the run has reached its last budget (the
    command line writes them with signals held: a stop between two of them kept a learning curve
    cut short, which resume then took for a finished run), so a stopped job keeps whole runs only."""
    spec = parse(spec)
    entry = KERNELS[spec.kernel.name]
    backend.refuse(spec, entry)
    if entry.note is not None and entry.note(spec.kernel):
        log.warning(entry.note(spec.kernel))
    rows = []
    with backend:
        for run in ActiveJob(spec, backend).runs(skip):
            rows += run.rows
            if on_run is not None:
                on_run(run.rows)
    return rows
