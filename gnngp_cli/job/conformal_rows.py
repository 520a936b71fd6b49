"""A row's conformal columns (:mod:`gnngp_cli.conformal`), for a GP run on any backend and for
a GNN run: what each method predicts, handed over in one form (every node's, or the labelled
nodes' in node order), with the evaluation nodes and the seconds the conformal step took.

A GP run's predictions come through the backend's row groups (:meth:`GPResult.means` and
``variances``: the labelled nodes, in node order), so ``aps``, ``raps`` and ``tps`` run on every
backend; the graph scores read every node's, which the local backend predicts from the
evaluated kernel (:meth:`prediction_rows`, as ``NodeGP.predict`` does).
"""
from __future__ import annotations

import json
import logging
from typing import Any, Optional

import torch
from torch import Tensor

from ..conformal import Calibration, conformal_columns
from ..errors import GnngpError
from ..gp.inference import GPResult, concatenate
from ..gp.posterior import RowGroup, TrainingTimes
from ..gp.sufficient import SPLITS
from ..runtime import Stopwatch, peak_rss_mb

log = logging.getLogger("gnngp")


def _labelled_targets(group: RowGroup) -> Tensor:
    """The targets of the group's labelled rows, in node order."""
    labelled = group.labelled()
    out = torch.empty(labelled.numel(), dtype=group.targets["train"].dtype, device=labelled.device)
    for key in SPLITS:
        out[torch.searchsorted(labelled, group.positions[key])] = group.targets[key]
    return out


def _evaluation_flags(group: RowGroup) -> Tensor:
    """Which of the group's labelled rows (node order) are evaluation nodes: the test rows in distribution."""
    labelled = group.labelled()
    flags = torch.zeros(labelled.numel(), dtype=torch.bool, device=labelled.device)
    test = group.positions["test"]
    flags[torch.searchsorted(labelled, test[group.in_distribution("test")])] = True
    return flags


def _evaluation_ids(data: Any) -> Tensor:
    """The evaluation nodes of a loaded graph: its test nodes in distribution."""
    ood = getattr(data, "ood_mask", None)
    return (data.test_mask & ~ood if ood is not None else data.test_mask).nonzero().view(-1)


def gp_conformal(cal: Optional[Calibration], backend: Any, result: GPResult, evaluated: Any, task: str) -> dict:
    """The conformal columns of a GP run (none for ``conformal=none``), with ``conformal_seconds``;
    a refusal on the way (e.g. the memory check of an exact kernel evaluated on every node for
    ``daps``) is a warning: the run's row keeps its results without the columns."""
    if cal is None:
        return {}
    try:
        return _gp_conformal(cal, backend, result, evaluated, task)
    except GnngpError as err:
        return {"conformal": cal.score, "conformal_alpha": cal.alpha, "warning": f"no conformal columns: {err}"}


def _gp_conformal(cal: Calibration, backend: Any, result: GPResult, evaluated: Any, task: str) -> dict:
    watch = Stopwatch(result.eps.device if isinstance(result.eps, Tensor) else torch.device("cpu"))
    with watch.measure():
        timed = isinstance(result.eps, TrainingTimes)
        if cal.reads_graph and task == "classification":   # every node: the local backend's kernel (the config refuses these scores elsewhere)
            data = backend.data
            ids = torch.arange(int(data.num_nodes), device=data.y.device)
            features, prior = backend.prediction_rows(evaluated.kernel, ids, evaluated.arch, evaluated.ctx)
            at = torch.arange(ids.numel(), device=ids.device)
            mean = result.posterior.mean(features, at, result.eps)
            variance = result.posterior.variance(features, at, result.eps, prior)
            evaluation = _evaluation_ids(data)
            y, edges, x = data.y, data.edge_index, data.x
        else:
            reduce = result.reduce
            mean, variance = result.means(), result.variances()
            y = reduce(_labelled_targets, concatenate)
            evaluation = reduce(_evaluation_flags, concatenate).nonzero().view(-1)
            edges = x = None
        if task == "classification":
            probs = result.rule.probabilities(mean, variance)
            columns = conformal_columns(cal, evaluation, y, probs=probs, edge_index=edges, features=x)
        else:
            noise = 0.0 if timed else float(result.eps)
            scale = 1.0 if timed else result.posterior.output_scale(result.eps)
            sd = (scale * (variance.double() + noise)).clamp_min(0).sqrt()
            columns = conformal_columns(cal, evaluation, y, mean=mean[:, 0], sd=sd)
    return {**columns, "conformal_seconds": watch.seconds}


def gnn_conformal(cal: Optional[Calibration], data: Any, device: torch.device, probs: Optional[Tensor], outputs: Tensor) -> dict:
    """The conformal columns of a GNN run: from its class probabilities of every node
    (classification), or its predictions (``outputs``; regression, the absolute residual)."""
    if cal is None:
        return {}
    watch = Stopwatch(device)
    try:
        with watch.measure():
            evaluation = _evaluation_ids(data)
            if probs is not None:
                columns = conformal_columns(cal, evaluation, data.y, probs=probs, edge_index=data.edge_index, features=data.x)
            else:
                columns = conformal_columns(cal, evaluation, data.y, mean=outputs.view(outputs.size(0), -1)[:, 0])
    except GnngpError as err:   # as a GP run's: the row keeps its results without the columns
        return {"conformal": cal.score, "conformal_alpha": cal.alpha, "warning": f"no conformal columns: {err}"}
    return {**columns, "conformal_seconds": watch.seconds}


def add_conformal(row: dict, columns: dict) -> dict:
    """``row`` with the conformal ``columns``; a column set that could not be made (too few test
    nodes) is a warning in the log and in the row's ``extra`` ``warnings``, not an error: the
    row keeps its other results."""
    columns = dict(columns)
    warning = columns.pop("warning", None)
    row.update(columns)
    if columns and "peak_rss_mb" in row:   # the conformal splits run after the row's peak was read: it counts them too
        row["peak_rss_mb"] = max(float(row["peak_rss_mb"] or 0.0), peak_rss_mb())
    if warning is not None:
        log.warning(warning)
        extra = json.loads(row.get("extra") or "{}")
        extra["warnings"] = [*extra.get("warnings", []), warning]
        row["extra"] = json.dumps(extra)
    return row
