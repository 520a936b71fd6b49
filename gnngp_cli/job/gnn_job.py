"""The GNN baselines' job: ``runs`` seeds of one GNN on a loaded graph, one row each.

On a classification task a row also has the uncertainty columns the GP rows have (NLL, Brier,
ECE, MCE, and AUROC/AUPR of detecting wrong predictions or a protocol's OOD nodes), from the
class probabilities of ``gnn.uncertainty``:

- ``softmax``: the trained model's softmax;
- ``temperature``: the softmax of ``logits / T``, ``T`` of the lowest validation NLL (Guo et al.,
  2017; the GP's temperature grid, :mod:`gnngp_cli.gp.probabilities`);
- ``ensemble``: the mean softmax of ``gnn.members`` models trained with seeds ``seed``,
  ``seed + 1000``, ... (Lakshminarayanan et al., 2017); its variance across members is the
  ``variance`` score; its seconds are every member's;
- ``mc_dropout``: the mean softmax of ``gnn.mc_samples`` forward passes with dropout on (Gal and
  Ghahramani, 2016); the variance across passes is the ``variance`` score.

The ensemble's and MC dropout's train/val/test metrics are the averaged prediction's.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Collection, Optional, Sequence

import torch
from torch import Tensor

from ..config import check_steps, parse, training_times, with_method_defaults
from ..errors import ConfigError, ResourceError, grid_edge
from ..gnn import GNNS, GradientDescent, train_gnn
from ..metrics import MetricInput, Scores, score, uncertainty_metrics
from ..gp.probabilities import best_temperature, class_probabilities, nll_by_temperature, reliability_bins
from ..runtime import Stopwatch, memory_limit_bytes, peak_cuda_mb, peak_rss_mb
from .estimate import size_text
from ..conformal import Calibration
from .conformal_rows import add_conformal, gnn_conformal
from .loading import LoadedGraph, reuse
from ..results.rows import base_row, graph_columns, with_extra

log = logging.getLogger("gnngp")

ENSEMBLE_SEED_STEP = 1000   # member m of an ensemble trains with seed + 1000 m


def probabilities(uncertainty: str, data: Any, runs: list, passes: Optional[Tensor]) -> tuple[Tensor, Optional[Tensor], float]:
    """The class probabilities of every node (``n x C``) by ``uncertainty``, their variance
    across members or passes (``n x C``; ``None`` for one model), and the temperature (1 unless fitted)."""
    if uncertainty in ("softmax", "temperature"):
        logits = runs[0].outputs.double()
        t = 1.0
        if uncertainty == "temperature":
            val = data.val_mask
            t = best_temperature(nll_by_temperature(logits[val], None, data.y[val], "probit", 1))
        return class_probabilities(logits, None, temperature=t), None, t
    stack = passes if uncertainty == "mc_dropout" else torch.stack([r.outputs for r in runs])
    members = torch.softmax(stack.double(), dim=2)
    return members.mean(0), members.var(0), 1.0


def uncertainty_columns(data: Any, probs: Tensor, variance: Optional[Tensor]) -> dict:
    """The test columns of :func:`gnngp_cli.metrics.uncertainty_metrics` from class probabilities."""
    test = data.test_mask
    ood = getattr(data, "ood_mask", None)
    flags = ood[test] if ood is not None and bool(ood.any()) else None
    logp = torch.log(probs[test].clamp_min(1e-300))
    prediction = MetricInput(logp[:, None, :], data.y[test], None if variance is None else variance[test][:, None, :],
                            probs=probs[test], ood=flags)
    scores = Scores()
    for metric in uncertainty_metrics("classification", int(data.num_classes)):
        if variance is None and metric.name.startswith("var_"):
            continue
        scores.add(metric.name, metric, prediction)
    out = {name: float(scores.value(name)[0]) for name in scores.states}
    state = scores.states.get("ece")
    if state is not None:
        out["reliability"] = reliability_bins(state["probs"], state["y"])
    if flags is not None:
        y_ood = data.y[test][flags]
        if bool((y_ood < probs.size(1)).all()):
            out["test_ood"] = score(data.metric, logp[flags], y_ood)
    return out


def gradient_descent(spec: Any) -> Optional[GradientDescent]:
    """``gnn.regime=ntk``: gradient descent at ``inference.learning_rate``, recording the steps of
    ``inference.time`` (or about 30 log-spaced ones); ``None`` for the standard training."""
    if spec.gnn.regime != "ntk":
        return None
    times = training_times(spec)
    check_steps(times or [], spec.gnn.epochs)
    record = [int(t) for t in times] if times else GradientDescent.default_record(spec.gnn.epochs)
    return GradientDescent(float(spec.inference.learning_rate), record)


def gnn_rows(spec: Any, graph: LoadedGraph, run: int, uncertainties: Sequence[str]) -> list[dict]:
    """The rows of one run (seed ``seed + run``), one per way of reading class probabilities in
    ``uncertainties`` (classification; else the one row), from one training: the ensemble's
    first member is the model the others read. Each row's seconds are its own method's: the
    members it trained, and its inference (MC dropout's passes, the temperature's fit)."""
    g, info = spec.gnn, graph.info()
    seed = spec.seed + run
    members = int(g.members) if "ensemble" in uncertainties else 1
    descent = gradient_descent(spec)
    results = [train_gnn(g, graph.data, graph.device, seed + ENSEMBLE_SEED_STEP * m, spec.progress, lambda: Stopwatch(graph.device), descent)
               for m in range(members)]
    rows = []
    edge = _grid_edge(g, results[0].weight_decay)   # every row's model is the first's, or an ensemble seeded alike
    for uncertainty in (uncertainties if info.task == "classification" else ["softmax"]):
        used = results if uncertainty == "ensemble" else results[:1]
        metrics = dict(used[0].metrics)
        train_seconds = sum(r.train_seconds for r in used)
        inference_seconds = sum(r.inference_seconds for r in used)
        precomputed = [r.precompute_seconds for r in used if r.precompute_seconds is not None]   # SGC, SIGN: the graph read once
        precompute_seconds = sum(precomputed) if precomputed else None
        columns: dict = {}
        probs = None
        if info.task == "classification" and descent is None:   # trained on the MSE (gnn.regime=ntk): no softmax probabilities
            watch = Stopwatch(graph.device)
            with watch.measure():
                passes = used[0].dropout_passes(int(g.mc_samples)) if uncertainty == "mc_dropout" else None
                probs, variance, t = probabilities(uncertainty, graph.data, used, passes)
                columns = uncertainty_columns(graph.data, probs, variance)
            inference_seconds += watch.seconds
            columns["temperature"] = t
            if uncertainty in ("ensemble", "mc_dropout"):   # the averaged prediction's metrics
                logp = torch.log(probs.clamp_min(1e-300))
                ood = getattr(graph.data, "ood_mask", None)
                for key in ("train", "val", "test"):
                    mask = graph.data[f"{key}_mask"] if key != "test" or ood is None else graph.data.test_mask & ~ood
                    metrics[key] = score(graph.data.metric, logp[mask], graph.data.y[mask])
        row = base_row(spec)
        row.update(
            metric=graph.data.metric,
            **metrics, layers=g.layers, seed=seed,
            train_seconds=train_seconds, inference_seconds=inference_seconds, precompute_seconds=precompute_seconds,
            total_seconds=(precompute_seconds or 0.0) + train_seconds + inference_seconds,
            uncertainty=uncertainty if info.task == "classification" and descent is None else "",
            extra=json.dumps({"best_epoch": used[0].best_epoch, "epochs": g.epochs, "lr": g.lr if descent is None else descent.lr,
                              **({"hidden": g.hidden} if not getattr(GNNS[g.name].model, "widthless", False) else {}),
                              "batch_size": g.batch_size, "batch_norm": g.batch_norm, "dropout": g.dropout,
                              **({"recipe": g.recipe} if g.recipe != "paper" else {}),
                              # the weight decay trained with: chosen on validation from gnn.weight_decay_grid (SGC's), or gnn.weight_decay
                              **({"weight_decay": used[0].weight_decay, "weight_decay_grid": len(g.weight_decay_grid)}
                                 if used[0].weight_decay is not None else {"weight_decay": g.weight_decay}),
                              **({"members": len(used)} if len(used) > 1 else {}),
                              **({"mc_samples": int(g.mc_samples)} if uncertainty == "mc_dropout" else {})}),
            **{k: v for k, v in columns.items() if k != "reliability"},
        )
        if "reliability" in columns:   # the test rows' reliability diagram (gnngp report draws it)
            with_extra(row, reliability=columns["reliability"])
        if used[0].curve is not None:   # gnn.regime=ntk: the learning curve (gnngp report draws it beside the NTK's)
            with_extra(row, regime="ntk", learning_rate=descent.lr, curve=used[0].curve)
        row.update(graph_columns(info, graph.load_seconds, spec, run))
        row.update(device=str(graph.device), peak_rss_mb=peak_rss_mb(), peak_cuda_mb=peak_cuda_mb(graph.device), compute_backend="local", workers=1)
        said = [*info.warnings, *([edge] if edge else [])]
        if said:  # e.g. a single training class, a weight decay chosen on its grid's edge: the row says so
            with_extra(row, warnings=said)
        if descent is None:   # after the graph's warnings: a conformal warning is added to them
            add_conformal(row, gnn_conformal(Calibration.from_spec(spec.conformal), graph.data, graph.device, probs, used[0].outputs))
        rows.append(row)
    return rows


def _grid_edge(g: Any, chosen: Optional[float]) -> Optional[str]:
    """A warning when the weight decay chosen on validation (SGC's gnn.weight_decay_grid) is the
    grid's largest or smallest: the best may lie beyond it (a trial: citeseer chose 1e-3, the
    default grid's top, at 0.692; a grid to 0.3 chose 0.03, at 0.730), logged once per run."""
    grid = sorted(set(float(v) for v in (getattr(g, "weight_decay_grid", None) or [])))
    if chosen is None or len(grid) < 3 or chosen not in (grid[0], grid[-1]) or chosen == grid[0] == 0.0:   # nothing lies below 0
        return None
    fix = f"widen the grid (e.g. {f'up to {grid[-1] * 100:g}' if chosen == grid[-1] else f'down to {grid[0] / 100:g}'})"
    text = grid_edge("the weight decay chosen on validation (gnn.weight_decay_grid)", chosen, grid[0], grid[-1], fix)
    log.warning(text)
    return text


BATCH_REACH = 100   # a mini-batch's nodes with their sampled neighbours, per seed node, at most as counted here


def gnn_bytes(num_nodes: int, num_features: int, outputs: int, hidden: int, layers: int, batch_size: int = 0) -> float:
    """A float32 network's training peak, roughly: its weights with their gradient and Adam's two
    moments (four copies), and the activations (each layer's output, its ReLU's and its dropout's)
    of the nodes a step reads: every node full batch, else at most :data:`BATCH_REACH` a seed node.
    ``hidden`` is the layer's width (an attention layer's heads share it)."""
    params = num_features * hidden + max(layers - 2, 0) * hidden * hidden + hidden * outputs   # in, hidden-to-hidden, out
    nodes = num_nodes if not batch_size else min(num_nodes, batch_size * BATCH_REACH)
    activations = nodes * (num_features + 3 * hidden * max(layers, 1))
    return 4.0 * (4 * params + activations)


def check_gnn_memory(spec: Any, info: Any, device: torch.device) -> None:
    """Refuse, before it trains, a GNN whose weights and activations would not fit in the memory
    limit (``gnn.hidden=2000000`` on Cora was the kernel's out-of-memory killer, 23 GB, and no row)."""
    g = spec.gnn
    need = gnn_bytes(info.num_nodes, info.num_features, max(int(info.num_classes or 1), 1), int(g.hidden or 1), int(g.layers or 1),
                     int(g.batch_size or 0))
    limit = memory_limit_bytes(spec.max_memory_gb, device)
    if need > limit:
        raise ResourceError(f"gnn={g.name} with gnn.hidden={g.hidden} and gnn.layers={g.layers} on {spec.dataset.name} needs about "
                            f"{size_text(need)} to train (its weights, their gradients and Adam's moments, and the activations of "
                            f"{'every node' if not g.batch_size else 'a mini-batch'}), and the limit is {size_text(limit)} (max_memory_gb; default half of the free "
                            "memory); use a smaller gnn.hidden or fewer gnn.layers, or raise max_memory_gb if the memory is yours")


def run_gnn(spec: Any, graph: Optional[LoadedGraph] = None, on_run: Optional[Callable[[list[dict]], Any]] = None,
            skip: Collection[int] = (), uncertainties: Optional[Sequence[str]] = None) -> list[dict]:
    """All runs of a GNN job (seeds ``seed .. seed+runs-1``) but those in ``skip``; one row per
    run (per item of ``uncertainties``, default ``[gnn.uncertainty]``), a run's rows handed to
    ``on_run`` together when it finishes (so a stop never splits a run)."""
    spec = parse(spec)
    graph = reuse(spec, graph)
    info = graph.info()
    spec = with_method_defaults(spec, info.task)
    g = spec.gnn
    wanted = list(uncertainties) if uncertainties is not None else [str(g.uncertainty)]
    if wanted != ["softmax"] and info.task != "classification":
        raise ConfigError(f"gnn.uncertainty={','.join(wanted)} gives class probabilities, and {spec.dataset.name} is a regression task; "
                          "use gnn.uncertainty=softmax (the default)")
    check_gnn_memory(spec, info, graph.device)
    if "mc_dropout" in wanted and g.batch_size:
        raise ConfigError(f"gnn.uncertainty=mc_dropout makes full-batch passes, and gnn.batch_size={g.batch_size} trains in mini-batches "
                          f"on {spec.dataset.name}; use gnn.batch_size=0 if the graph fits, or gnn.uncertainty=ensemble")
    rows = []
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        for run in range(spec.runs):
            if run in skip:
                continue
            run_rows = gnn_rows(spec, graph, run, wanted)
            rows += run_rows
            if on_run is not None:
                on_run(run_rows)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
    return rows
