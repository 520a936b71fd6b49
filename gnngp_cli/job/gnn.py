"""The GNN baselines' job: ``runs`` seeds of one GNN on a loaded graph, one row each."""
from __future__ import annotations

import json
from typing import Any, Callable, Collection, Optional

import torch

from ..gnn import train_gnn
from ..runtime import Stopwatch, peak_cuda_mb, peak_rss_mb
from .loading import LoadedGraph, reuse
from .rows import base_row, graph_columns, with_extra


def run_gnn(cfg: Any, graph: Optional[LoadedGraph] = None, on_row: Optional[Callable[[dict], Any]] = None,
            skip: Collection[int] = ()) -> list[dict]:
    """All runs of a GNN job (seeds ``seed .. seed+runs-1``) but those in ``skip``; one row per
    run, each handed to ``on_row`` as it finishes."""
    graph = reuse(cfg, graph)
    info = graph.info()
    g = cfg.gnn
    rows = []
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        for run in range(cfg.runs):
            if run in skip:
                continue
            result = train_gnn(g, graph.data, graph.device, cfg.seed + run, cfg.progress, lambda: Stopwatch(graph.device))
            row = base_row(cfg)
            row.update(
                metric=graph.data.metric,
                **result.metrics, layers=g.layers, seed=cfg.seed + run,
                train_seconds=result.train_seconds, inference_seconds=result.inference_seconds,
                total_seconds=result.train_seconds + result.inference_seconds,
                extra=json.dumps({"best_epoch": result.best_epoch, "epochs": g.epochs, "lr": g.lr, "hidden": g.hidden,
                                  "batch_size": g.batch_size, "batch_norm": g.batch_norm}),
            )
            row.update(graph_columns(info, graph.load_seconds, cfg, run))
            row.update(device=str(graph.device), peak_rss_mb=peak_rss_mb(), peak_cuda_mb=peak_cuda_mb(graph.device), compute_backend="local", workers=1)
            if info.warnings:  # e.g. a single training class: the row says so
                with_extra(row, warnings=list(info.warnings))
            rows.append(row)
            if on_row is not None:
                on_row(row)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
    return rows
