"""A GP job on row blocks (``compute=dask`` or ``compute=slurm``): the shards, the cluster, the
same architecture's blocks on a :class:`~.roots.RowBlockContext`, the row-block posterior, and
result rows as the local path writes them plus the compute backend, the worker count and the
peak memory of the largest worker."""
from __future__ import annotations

import hashlib
import json
import logging
import signal
import threading
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import torch
from omegaconf import OmegaConf

from ..config import resolve_method_defaults, validate
from ..data import DataStore, load_dataset
from ..data.store import default_root
from ..data.registry import DATASETS
from ..data.shards import ShardMeta, read_meta, shards_match, write_data
from ..errors import DatasetError, ResourceError
from ..estimate import rowblock_estimate
from ..inference import log_grid
from ..kernels import BaseKernel
from ..kernels.blocks import Block, branch_count
from ..progress import Progress
from ..runtime import Stopwatch, peak_rss_mb
from .cluster import dask_client, peak_worker_mb, task_times, time_summary, worker_memory_limits
from .graph import ShardedGraph
from .posterior import row_block_predict
from .roots import BlockAdjacency, DaskRoots, RowBlockContext
from .store import RootStore

log = logging.getLogger("gnngp")


def dataset_source(cfg: Any) -> str:
    """The dataset config the shards are written from (a cache key)."""
    return json.dumps(OmegaConf.to_container(cfg.dataset, resolve=True), sort_keys=True) + f"|stand_in={cfg.experiment.stand_in}"


def partition(cfg: Any, store: DataStore, out: Path, rows: int) -> ShardMeta:
    """Write ``cfg.dataset`` as row blocks of ``rows`` nodes into ``out``: streamed from the raw
    files when the dataset's entry can (papers100M), else from the graph loaded in this process."""
    name = str(cfg.dataset.name).lower()
    entry = DATASETS.get(name)
    source = dataset_source(cfg)
    if entry is not None and entry.partition is not None:
        return entry.partition(cfg.dataset, store, out, rows, source)
    data = load_dataset(cfg.dataset, store, cfg.experiment.stand_in)
    return write_data(data, out, rows, name, source)


def sharded_graph(cfg: Any, store: DataStore) -> ShardedGraph:
    """The shards of the job's dataset: ``compute.shards``, or partitioned once into the data
    cache (``<data root>/shards/<dataset>-r<rows>-<config hash>``) and reused."""
    name = str(cfg.dataset.name).lower()
    if cfg.compute.shards:
        root = Path(cfg.compute.shards)
        meta = read_meta(root)
        if meta.dataset != name:
            raise DatasetError(f"compute.shards={root} holds {meta.dataset}, not {name}; point compute.shards at the shards of {name} or drop it")
        return ShardedGraph(root, meta)
    source = dataset_source(cfg)
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    root = store.root / "shards" / f"{name}-r{cfg.partition.rows}-{digest}"
    meta = shards_match(root, source)
    if meta is None:
        log.info("partitioning %s into row blocks of %d nodes: %s", name, cfg.partition.rows, root)
        meta = partition(cfg, store, root, cfg.partition.rows)
    return ShardedGraph(root, meta)


# The share of a worker's memory limit one task's working set may take. A worker holds computed
# blocks up to about 70% of its limit before it spills them, and its nanny restarts it past 95%
# (Dask's defaults); at 10^7 nodes, row blocks whose tasks may need 86% of a 3 GB worker got workers
# restarted, and blocks needing 43% ran through (scripts/bench_dask.py).
TASK_SHARE = 0.5
MIN_BLOCK_ROWS = 1000   # smaller row blocks are all overhead: past it the fix is more memory per worker
TASK_BLOCKS = 6   # row blocks alive in one task at most: the ReLU's Nystrom step (its input, C[b, a] and the arc-cosine's temporaries)


def task_bytes(graph: ShardedGraph, network: Block, landmarks: int, layers: int, dtype: torch.dtype) -> int:
    """What one row block's task may need at most: :data:`TASK_BLOCKS` blocks of
    ``rows x width`` (an output block of ``A Q`` holds itself, one source's rows and their product)."""
    width = (max(graph.meta.num_features, landmarks) + layers + 1) * branch_count(network)
    return largest_block(graph) * width * (torch.finfo(dtype).bits // 8) * TASK_BLOCKS


def largest_block(graph: ShardedGraph) -> int:
    """Rows of the largest row block: ``partition.rows``, or every node of a smaller graph."""
    return min(graph.meta.rows, graph.meta.num_nodes)


def check_block_memory(client: Any, graph: ShardedGraph, network: Block, landmarks: int, layers: int, dtype: torch.dtype) -> None:
    """Refuse, before any work, a worker memory limit whose :data:`TASK_SHARE` is below what one
    row block's task may need (:func:`task_bytes`)."""
    limits = [m for m in worker_memory_limits(client) if m > 0] if client is not None else []
    if not limits:
        return
    rows = largest_block(graph)
    need = task_bytes(graph, network, landmarks, layers, dtype)
    budget = TASK_SHARE * min(limits)
    if need > budget:
        fit = int(rows * budget / need * 0.9)
        smaller = (f"use more, smaller row blocks (partition.rows={fit}, or gnngp partition ... partition.rows={fit}) or "
                   if fit >= MIN_BLOCK_ROWS else "")
        raise ResourceError(
            f"one row block of {rows} nodes needs about {need / 2**30:.2f} GiB of worker memory, more than the half of a worker's "
            f"{min(limits) / 2**30:.2f} GiB that a task may take beside the blocks the worker holds; {smaller}"
            f"a larger compute.memory_limit (at least {need / TASK_SHARE * 1.1 / 2**30:.2f} GiB a worker for these blocks)")


def run_gp_rowblocks(cfg: Any) -> list[dict]:
    """All runs of a GP job on row blocks, on the cluster of ``cfg.compute``; one row per run."""
    validate(cfg)
    store = DataStore.from_config(cfg.data.root, cfg.data.mirror, cfg.data.download, cfg.data.download_timeout)
    roots = root_store(cfg)   # a roots_dir that cannot be written stops the job before partitioning
    try:
        with stopped_by_sigterm():
            watch = Stopwatch(torch.device("cpu"))
            with watch.measure():
                graph = sharded_graph(cfg, store)
            with dask_client(cfg.compute) as client:
                return [row for _, row in gp_runs(cfg, graph, client, watch.seconds, roots)]
    finally:
        roots.close()


def root_store(cfg: Any) -> RootStore:
    """The run's folder for its roots' files: under ``compute.roots_dir``, else ``<data.root>/roots``."""
    return RootStore(Path(cfg.compute.roots_dir) if cfg.compute.roots_dir else Path(cfg.data.root or default_root()) / "roots")


@contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM (``kill``, SLURM at the end of a walltime) raises ``SystemExit`` in the main
    thread, so the run's clean-up (its roots' files, the cluster) runs as on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def gp_runs(cfg: Any, graph: ShardedGraph, client: Any, load_seconds: float = 0.0, roots: Optional[RootStore] = None) -> Iterator[tuple[Any, dict]]:
    """``(result, row)`` of each run (seed ``cfg.seed + run``) of the GP job on ``graph``, with
    the same architecture, landmarks, nugget grid and gamma search as the local path.
    ``client=None``: Dask's default scheduler in this process (e.g. the synchronous one).
    ``roots``: where the roots' files go (default: a store of this call's own, removed when it
    ends; a result's ``means()`` reads them, so call it before the next run starts)."""
    from ..runner import architecture, base_row, dataset_label, deterministic, landmarks_among

    meta = graph.meta
    resolve_method_defaults(cfg, meta.task)
    dtype = getattr(torch, cfg.dtype)
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    kcfg = cfg.kernel
    arch = architecture(kcfg)
    workers = len(client.scheduler_info(n_workers=-1)["workers"]) if client is not None else 1
    check_block_memory(client, graph, arch.network, cfg.landmarks.count or 0, kcfg.layers, dtype)
    train = torch.from_numpy(graph.train_ids())
    if train.numel() == 0:
        raise DatasetError(f"dataset '{meta.dataset}': the training set is empty; give a training mask or a positive dataset.train_ratio")
    labels, masks = graph.labels(), graph.masks()
    runs = 1 if deterministic(cfg) and not cfg.repeat_deterministic else cfg.runs
    store = roots if roots is not None else root_store(cfg)
    try:
        for run in range(runs):
            seed = cfg.seed + run
            landmarks = landmarks_among(train, cfg.landmarks.fraction, cfg.landmarks.count, seed, cfg.dataset.name)
            if cfg.landmarks.count is None:
                check_block_memory(client, graph, arch.network, int(landmarks.numel()), kcfg.layers, dtype)
            base = BaseKernel(kcfg.base.name, kcfg.base.gamma, kcfg.base.c, kcfg.base.d)
            ctx = RowBlockContext(graph.features(np_dtype), BlockAdjacency(graph, arch.adjacency, store), base, landmarks,
                                  roots=DaskRoots(graph, store), graph=graph, dtype=dtype)
            grid = log_grid(cfg.nugget.min, cfg.nugget.max, cfg.nugget.num, dtype=dtype)
            kernel_watch, inference_watch = Stopwatch(torch.device("cpu")), Stopwatch(torch.device("cpu"))
            gammas = log_grid(kcfg.gamma_grid.min, kcfg.gamma_grid.max, kcfg.gamma_grid.num).tolist() if kcfg.gamma_search else [kcfg.base.gamma]
            where = f"{dataset_label(cfg.dataset.name, meta)} (compute=dask, {workers} workers)"
            estimate = rowblock_estimate(
                num_nodes=meta.num_nodes, num_edges=meta.num_edges, num_features=meta.num_features, landmarks=int(landmarks.numel()),
                layers=int(kcfg.layers), bytes_per_entry=torch.finfo(dtype).bits // 8, rows=largest_block(graph),
                task_bytes=task_bytes(graph, arch.network, int(landmarks.numel()), kcfg.layers, dtype), branches=branch_count(arch.network))
            log.info(estimate.line(arch.label, where))
            store.check_room(estimate.gb)   # the last run's files are cleared first
            times_before = task_times(client) if client is not None else {}
            if run == 0:
                log.info("roots of this run as row-block files in %s (removed at its end)", store.folder)
            layers = int(kcfg.layers)
            evaluations = len(gammas) + (1 if len(gammas) > 1 else 0)   # each gamma on validation, then the chosen one
            progress = Progress(f"{arch.label} on {where}", total=evaluations * (layers + 1))
            done = {"evaluation": 0, "layers": 0}

            def tell(label: str) -> None:   # a kernel's named layers may be more than kcfg.layers (GPRGP): clamped
                progress.step(done["evaluation"] * (layers + 1) + min(done["layers"], layers), label)

            def on_layer(name: str) -> None:   # a named layer is computed (written and checked) when this is told
                done["layers"] += 1
                tell(f"kernel {name} done" + (f", gamma {done['evaluation'] + 1} of {len(gammas)}" if len(gammas) > 1 else ""))

            ctx = replace(ctx, on_layer=on_layer)

            def evaluate(gamma: float, validation_only: bool):
                nonlocal ctx
                ctx = ctx.with_base(BaseKernel(kcfg.base.name, float(gamma), kcfg.base.c, kcfg.base.d))
                done["layers"] = 0
                store.clear()   # the last evaluation's roots: kept till now for the result's means (tests)
                with kernel_watch.measure():
                    root = store.written(arch.network(None, ctx, None).root, "the kernel")   # read three times by the posterior
                done["layers"] = layers
                tell("posterior")
                with inference_watch.measure():
                    out = row_block_predict(root, labels, masks, meta.task, meta.num_classes, meta.num_nodes, grid, validation_only)
                done["evaluation"], done["layers"] = done["evaluation"] + 1, 0
                tell("posterior done")
                return out

            gamma = kcfg.base.gamma
            with progress:
                if len(gammas) > 1:  # score every gamma on validation, then predict with the best (the first on ties)
                    scores = [evaluate(g, validation_only=True).val for g in gammas]
                    gamma = gammas[max(range(len(gammas)), key=lambda i: (scores[i], -i))]
                result = evaluate(gamma, validation_only=False)
            row = base_row(cfg)
            row.update(
                metric=result.metric_name, **{k: result.metrics[k] for k in ("train", "val", "test")},
                nugget=result.nugget, layers=kcfg.layers, sigma_w=kcfg.get("sigma_w"), sigma_b=kcfg.get("sigma_b"),
                landmark_fraction=cfg.landmarks.fraction, kernel_seconds=kernel_watch.seconds, inference_seconds=inference_watch.seconds,
                landmarks=int(landmarks.numel()), seed=seed,
                extra=json.dumps({**({"gamma": gamma} if kcfg.gamma_search else {}), "shards": str(graph.root), "row_block": meta.rows}),
                **result.uncertainty,
            )
            row["total_seconds"] = row["kernel_seconds"] + row["inference_seconds"]
            if client is not None:
                log.info("%s: %s", where, time_summary(client, since=times_before))
            row.update(
                task=meta.task, run=run, n_nodes=meta.num_nodes, n_edges=meta.num_edges, load_seconds=load_seconds, device="cpu",
                split=meta.split, stand_in="", experiment=cfg.experiment.name or "", peak_rss_mb=peak_rss_mb(), peak_cuda_mb=0.0,
                compute_backend=cfg.compute.backend, workers=workers, estimated_gb=round(estimate.gb, 3),
                peak_worker_mb=peak_worker_mb(client) if client is not None else peak_rss_mb(),
                timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            )
            yield result, row
    finally:
        if roots is None:
            store.close()
