"""``compute=dask`` (and ``compute=slurm``): low-rank kernels on row blocks of a Dask cluster.

The backend holds the graph's shards (partitioned once into the data cache, or
``compute.shards``), a cluster (:mod:`.cluster`) and the run's roots folder (:mod:`.root_files`).
The kernel's blocks are the local path's, on a :class:`~.dask_roots.RowBlockContext`; the
statistics inference needs are reduced over row blocks in a tree; each labelled row block is a
row group that the job's own functions score on a worker. Nothing of ``N`` rows reaches the
client. What it does not run is refused before any work: exact kernels (no low-rank root to
distribute) and ``fit=mll`` (it needs gradients through the kernel on every node).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import operator
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch

from ...config import parse
from ...data import DataStore, load_dataset
from ...data.files import locked
from ...data.order_cache import cached_order
from ...data.datasets import DATASETS
from ...data.shards import (TEST, TRAIN, VAL, ShardMeta, changed_files, folder_listing, input_record, read_meta, record_inputs,
                            shards_match, stale_inputs, tell_warnings, write_data)
from ...data.store import default_root
from ...data.trust import untrusted, untrusted_tree
from ...errors import ComputeError, ConfigError, DatasetError, ResourceError
from ...job.backend_interface import GraphInfo
from ...job.estimate import Estimate, rowblock_estimate, size_text
from ...job.loading import check_load_memory
from ...gp.posterior import RowGroup
from ...gp.sufficient import SPLITS, TrainingStatistics, low_rank_statistics, regression_targets
from ...gp.likelihoods import LIKELIHOODS
from ...results.rows import dataset_label
from ...kernels import Architecture, BaseKernel
from ...kernels.architectures import KernelEntry
from ...kernels.blocks import Block, branch_count
from ...kernels.numerics import lapack_eigh
from ...runtime import Stopwatch, peak_rss_mb, start_job
from ...stops import stopped_by_signals
from .cluster import dask_client, peak_worker_mb, task_times, time_summary, worker_memory_limits
from .sharded_graph import ShardedGraph, tree_reduce
from .dask_roots import BlockAdjacency, DaskRoots, RowBlockContext
from .root_files import RootStore

log = logging.getLogger("gnngp")

BITS = {"train": TRAIN, "val": VAL, "test": TEST}


# Dataset settings that change how a job runs on a graph, not the graph its shards hold (the
# validation labels that hide_val hides are masked by the job, not in the shards).
RUN_SETTINGS = ("metric", "landmark_fraction", "landmark_count", "large", "hide_val")


def dataset_source(spec: Any) -> str:
    """What the shards are written from, as a key: the dataset settings that make the graph
    (its features, labels, split), without :data:`RUN_SETTINGS`, and the stand-in setting."""
    settings = {k: v for k, v in asdict(spec.dataset).items() if k not in RUN_SETTINGS}
    order = f"|order={spec.data.order}" if spec.data.order != "none" else ""   # shards written before data.order keep their key
    return json.dumps(settings, sort_keys=True) + f"|stand_in={spec.experiment.stand_in}" + order


def _differences(written: str, wanted: str) -> str:
    """``dataset.split_seed=0, not 1``: the settings in which two sources differ."""
    def parse(source: str) -> dict:
        text, _, rest = source.partition("|stand_in=")
        stand_in, _, order = rest.partition("|order=")
        try:
            settings = json.loads(text)
        except ValueError:
            settings = {}
        return {**{f"dataset.{k}": v for k, v in settings.items()}, "experiment.stand_in": stand_in, "data.order": order or "none"}
    a, b = parse(written), parse(wanted)
    return "; ".join(f"{k}={a.get(k)!s}, not {b.get(k)!s}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def refuse_streamed_order(spec: Any) -> None:
    """``data.order`` with a dataset partitioned streaming from its raw files (papers100M): one line."""
    name = str(spec.dataset.name).lower()
    entry = DATASETS.get(name)
    if entry is not None and entry.partition is not None and spec.data.order != "none":
        raise ConfigError(f"data.order={spec.data.order} numbers the nodes of a graph loaded in one process; {name} is partitioned "
                          "streaming from its raw files: drop data.order")


def partition(spec: Any, store: DataStore, out: Path, rows: int, data: Any = None) -> ShardMeta:
    """Write ``spec.dataset`` as row blocks of ``rows`` nodes into ``out``: streamed from the raw
    files when the dataset's entry can (papers100M), else from the graph loaded in this process
    (``data``: loaded already)."""
    spec = parse(spec, command="partition")
    rows = DEFAULT_ROWS if rows == "auto" else int(rows)   # gnngp partition knows no workers
    name = str(spec.dataset.name).lower()
    entry = DATASETS.get(name)
    source = dataset_source(spec)
    if entry is not None and entry.partition is not None:
        refuse_streamed_order(spec)
        meta = entry.partition(spec.dataset, store, out, rows, source)
    else:
        if data is None:
            check_load_memory(spec)
            data = load_dataset(spec.dataset, store, spec.experiment.stand_in)
        order = cached_order(data.edge_index, int(data.num_nodes), spec.data.order, store.root / "orders", store.untrusted)
        meta = write_data(data, out, rows, name, source, order, spec.data.order)
    inputs = graph_inputs(spec, store)
    return record_inputs(out, inputs) if inputs else meta


def graph_inputs(spec: Any, store: DataStore) -> list[list]:
    """The files the job's graph was read from, each :func:`~gnngp_cli.data.shards.input_record`:
    a custom graph's files (those directly in ``dataset.path``), a named dataset's raw files in
    the data cache (their sha256 from its load's checks, ``store.digests``); none for a generated
    graph, or a stand-in. Shards written from files that changed since are not the graph
    (:func:`~gnngp_cli.data.shards.stale_inputs`)."""
    if spec.experiment.stand_in:
        return []
    if str(spec.dataset.name).lower() == "custom" and getattr(spec.dataset, "path", None):
        folder = Path(str(spec.dataset.path)).expanduser()
        if not folder.is_dir():
            return []
        files = [input_record(p) for p in sorted(folder.iterdir()) if p.is_file()]
        return files + [[str(folder.absolute()), len(files), 0, folder_listing(folder)]]   # and which files it holds (masks added)
    records = []
    for name, files in store.digests.items():
        for file, digest in sorted(files.items()):
            path = store.folder(name) / file
            if path.is_file():   # a raw file read from the mirror in place (papers100M's 57 GB) is not the cache's
                records.append(input_record(path, digest))
    return records


def first_and_more(items: list[str]) -> str:
    """``a`` or ``a and 2 more``: the first of ``items`` named, the others counted."""
    return items[0] + (f" and {len(items) - 1} more" if len(items) > 1 else "")


def stale_problem(meta: ShardMeta) -> str:
    """Which files the shards were written from hold other bytes now ('' when none does)."""
    stale = stale_inputs(meta)
    return f"{first_and_more(stale)} changed since they were written from it" if stale else ""


def sharded_graph(spec: Any, store: DataStore, client: Any = None) -> ShardedGraph:
    """The shards of the job's dataset: ``compute.shards``, or partitioned once into the data
    cache (``<data root>/shards/<dataset>-r<rows>-<config hash>``) and reused; with
    ``partition.rows=auto``, rows of :func:`auto_rows` for ``client``'s workers."""
    spec = parse(spec)
    name = str(spec.dataset.name).lower()
    if spec.compute.shards:
        root = Path(spec.compute.shards)
        distrusted = untrusted_tree(root, shared=store.shared_cache)
        if distrusted is not None:
            raise DatasetError(f"not trusting compute.shards: {distrusted} (their digests are written beside them, by whoever can write "
                               "them)")
        meta = read_meta(root)
        if meta.dataset != name:
            raise DatasetError(f"compute.shards={root} holds {meta.dataset}, not {name}; point compute.shards at the shards of {name} or drop it")
        if meta.source != dataset_source(spec):
            raise DatasetError(f"compute.shards={root} holds {name} written with {_differences(meta.source, dataset_source(spec))} "
                               f"(this job's setting second); partition it again with this job's settings (gnngp partition ... out=<dir>) "
                               f"or drop compute.shards")
        changed = changed_files(root, meta) if store.verify else []
        if changed:
            raise DatasetError(f"compute.shards={root}: shard file {first_and_more(changed)} changed since gnngp partition wrote it; "
                               "write the shards again with gnngp partition (or data.verify=false to use them as they are)")
        stale = stale_problem(meta) if store.verify else ""
        if stale:
            raise DatasetError(f"compute.shards={root} holds the graph of other files: {stale}; write the shards again with "
                               "gnngp partition (or data.verify=false to use them as they are)")
        log_source_rows(meta)
        tell_warnings(root, meta)   # the graph is not loaded here: its loader's warnings are the shards'
        return ShardedGraph(root, meta)
    source = dataset_source(spec)
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    distrusted = untrusted_tree(store.root / "shards", store.root, store.shared_cache)
    if distrusted is not None:
        raise DatasetError(f"not trusting the cached shards: {distrusted} (their digests are written beside them, by whoever can write "
                           "them); or give shards of your own (compute.shards=<dir>)")
    rows, data = spec.partition.rows, None
    if rows == "auto":
        rows, data = auto_rows(spec, store, client, store.root / "shards", f"{name}-r*-{digest}", source)
    root = store.root / "shards" / f"{name}-r{rows}-{digest}"
    loaded = data is not None   # loaded here (partition.rows=auto): its loader said its warnings
    meta = shards_match(root, source)
    changed = changed_files(root, meta) if meta is not None and store.verify else []
    if changed:
        log.warning("the cached shards %s changed since they were written (%s); partitioning %s again", root, first_and_more(changed), name)
        meta = None
    stale = stale_problem(meta) if meta is not None else ""   # whatever data.verify says: the graph of other files is another graph
    if stale:
        log.warning("the cached shards %s hold the graph of other files (%s); partitioning %s again", root, stale, name)
        meta = None
    if meta is None:
        # one writer at a time (two jobs, or two test processes, that both found no shards wrote the
        # same files, one truncating them while the other read): whoever waited finds them written
        with locked(root):
            meta = shards_match(root, source)
            if meta is not None and (store.verify and changed_files(root, meta) or stale_problem(meta)):
                meta = None
            if meta is None:
                log.info("partitioning %s into row blocks of %d nodes: %s", name, rows, root)
                meta = partition(spec, store, root, rows, data)
                loaded = True   # loaded to be partitioned (or streamed from its raw files, which warn as they go)
    if not loaded:   # the cached shards of an earlier run: what its loader warned of, said again
        tell_warnings(root, meta)
    log_source_rows(meta)
    return ShardedGraph(root, meta)


def source_blocks(meta: ShardMeta) -> float:
    """The source blocks an output block's ``A Q`` reads, on average: its distinct source rows
    (``meta.source_rows``), each in one block, but no more than there are blocks (all of them where
    the shards do not say)."""
    if not meta.source_rows:
        return float(meta.num_blocks)
    return min(float(meta.num_blocks), float(np.mean(meta.source_rows)))


def log_source_rows(meta: ShardMeta) -> None:
    """What a row block's ``A Q`` task reads: the rows of ``Q`` its entries name (``data.order``
    cuts them on a graph with communities)."""
    if meta.source_rows:
        rows = np.asarray(meta.source_rows, dtype=np.float64)
        log.info("A Q by %d row blocks of %s: a task reads %.0f rows of Q on average (%.1f%% of the %s nodes; at most %.0f), "
                 "times 4 bytes (8 in float64) per column; data.order=%s", meta.num_blocks, meta.dataset, rows.mean(),
                 100 * rows.mean() / meta.num_nodes, f"{meta.num_nodes:,}", rows.max(), meta.order)


# The share of a worker's memory limit one task's working set may take. A worker holds computed
# blocks up to about 70% of its limit before it spills them, and its nanny restarts it past 95%
# (Dask's defaults); at 10^7 nodes, row blocks whose tasks may need 86% of a 3 GB worker got workers
# restarted, and blocks needing 43% ran through (scripts/bench_dask.py).
TASK_SHARE = 0.5
MIN_BLOCK_ROWS = 1000   # smaller row blocks are all overhead: past it the fix is more memory per worker
TASK_BLOCKS = 6   # row blocks alive in one task at most: the ReLU's Nystrom step (its input, C[b, a] and the arc-cosine's temporaries)
DEFAULT_ROWS = 100_000   # partition.rows=auto at most (more blocks than workers keeps them all busy), and gnngp partition's


def row_bytes(num_features: int, landmarks: int, layers: int, branches: int, dtype: torch.dtype) -> int:
    """What one row of a row block costs a task at most: :data:`TASK_BLOCKS` rows of the widest root."""
    return (max(num_features, landmarks) + layers + 1) * branches * (torch.finfo(dtype).bits // 8) * TASK_BLOCKS


def task_bytes(graph: ShardedGraph, network: Block, landmarks: int, layers: int, dtype: torch.dtype) -> int:
    """What one row block's task may need at most: :data:`TASK_BLOCKS` blocks of
    ``rows x width`` (an output block of ``A Q`` holds itself, one source's rows and their product)."""
    return largest_block(graph) * row_bytes(graph.meta.num_features, landmarks, layers, branch_count(network), dtype)


def fitting_rows(memory_limit: float, per_row: int) -> int:
    """The most rows whose task (``per_row`` bytes a row) fits :data:`TASK_SHARE` of a worker's
    ``memory_limit``, rounded down to two significant digits (80,437 -> 80,000)."""
    fit = int(TASK_SHARE * memory_limit // per_row)
    step = 10 ** max(0, len(str(fit)) - 2)
    return fit // step * step


def _branches(spec: Any) -> int:
    """The most roots side by side (:func:`branch_count`) among the kernel's candidate
    architectures; 4 (a tangent kernel's or a product's, the most) where they cannot be built yet."""
    from ...job.gp_job import candidates
    from ...kernels import KERNELS

    try:
        entry = KERNELS[spec.kernel.name]
        return max(branch_count(entry.architecture(spec.kernel, {k: v for k, v in choice.items() if k != "gamma"}).network)
                   for choice in candidates(spec.kernel, False))
    except Exception as err:  # noqa: BLE001 - the estimate checks the real architecture before any kernel work
        log.debug("partition.rows=auto sized for 4 branches: %s", err)
        return 4


def auto_rows(spec: Any, store: DataStore, client: Any, shards: Path, pattern: str, source: str) -> tuple[int, Any]:
    """``partition.rows=auto``: the largest row block whose task fits a worker's memory
    (:func:`fitting_rows` of the smallest worker limit), at most :data:`DEFAULT_ROWS`; that
    where the workers have no limit. The graph's size comes from shards of the same dataset
    already in the cache (any row count), else from the graph loaded here (returned, so that it
    is partitioned without loading it again; a dataset streamed from raw files, :data:`DEFAULT_ROWS`
    unless its entry gives its size). No block of :data:`MIN_BLOCK_ROWS` fitting is refused in one
    line naming the memory a worker needs."""
    limits = [m for m in worker_memory_limits(client) if m > 0] if client is not None else []
    if not limits:
        return DEFAULT_ROWS, None
    data = None
    written = [(p, m) for p, m in ((p, shards_match(p, source)) for p in sorted(shards.glob(pattern))) if m is not None]
    if written:
        path, meta = written[0]
        num_nodes, num_features, num_train = meta.num_nodes, meta.num_features, ShardedGraph(path, meta).train_ids().size
    else:
        name = str(spec.dataset.name).lower()
        entry = DATASETS.get(name)
        if entry is not None and entry.partition is not None:   # streamed from its raw files: sized by its entry
            if entry.stand_in is None:   # not known before streaming: the estimate's check still refuses blocks too large
                log.info("partition.rows=auto: row blocks of %s nodes (%s is streamed from its raw files, its size not known before)",
                         f"{DEFAULT_ROWS:,}", name)
                return DEFAULT_ROWS, None
            num_nodes, num_features, num_train = int(entry.stand_in[0]), int(entry.stand_in[2]), int(entry.stand_in[4])
        else:
            check_load_memory(spec)
            data = load_dataset(spec.dataset, store, spec.experiment.stand_in)
            num_nodes, num_features, num_train = int(data.num_nodes), int(data.x.shape[1]), int(data.train_mask.sum())
    count = spec.landmarks.count   # else each training node w.p. 1/fraction: sized for a tenth more than expected
    landmarks = int(count) if count is not None else min(num_train, int(1.1 * num_train / float(spec.landmarks.fraction)) + 1)
    per_row = row_bytes(num_features, landmarks, int(spec.kernel.layers), _branches(spec), getattr(torch, spec.dtype))
    limit = min(limits)
    fit = fitting_rows(limit, per_row)
    if fit < MIN_BLOCK_ROWS:
        raise ResourceError(
            f"no row block of {MIN_BLOCK_ROWS:,} nodes or more fits a worker's {size_text(limit)} (a task may take half: "
            f"{size_text(per_row * MIN_BLOCK_ROWS)} for {MIN_BLOCK_ROWS:,} nodes, {landmarks:,} landmarks); use a larger "
            f"compute.memory_limit (at least {size_text(per_row * MIN_BLOCK_ROWS / TASK_SHARE * 1.1)} a worker) or fewer landmarks")
    rows = min(fit, DEFAULT_ROWS)
    log.info("partition.rows=auto: row blocks of %s nodes (the most whose task fits half of a worker's %s, at most %s)%s",
             f"{rows:,}", size_text(limit), f"{DEFAULT_ROWS:,}", f": one block of all {num_nodes:,}" if num_nodes <= rows else "")
    return rows, data


def largest_block(graph: ShardedGraph) -> int:
    """Rows of the largest row block: ``partition.rows``, or every node of a smaller graph."""
    return min(graph.meta.rows, graph.meta.num_nodes)


def check_block_memory(client: Any, graph: ShardedGraph, network: Block, landmarks: int, layers: int, dtype: torch.dtype,
                       offer_auto: bool = True) -> None:
    """Refuse, before any work, a worker memory limit whose :data:`TASK_SHARE` is below what one
    row block's task may need (:func:`task_bytes`); ``offer_auto``: name partition.rows=auto among
    the fixes (not where the blocks are auto's already, or compute.shards')."""
    limits = [m for m in worker_memory_limits(client) if m > 0] if client is not None else []
    if not limits:
        return
    rows = largest_block(graph)
    need = task_bytes(graph, network, landmarks, layers, dtype)
    budget = TASK_SHARE * min(limits)
    if need > budget:
        fit = fitting_rows(min(limits), need // rows)
        smaller = (f"use more, smaller row blocks (partition.rows={fit}{' or auto' if offer_auto else ''}, or gnngp partition ... partition.rows={fit}) or "
                   if fit >= MIN_BLOCK_ROWS else "")
        raise ResourceError(
            f"one row block of {rows} nodes needs about {size_text(need)} of worker memory, more than the half of a worker's "
            f"{size_text(min(limits))} that a task may take beside the blocks the worker holds; {smaller}"
            f"a larger compute.memory_limit (at least {size_text(need / TASK_SHARE * 1.1)} a worker for these blocks)")


def root_store(spec: Any) -> RootStore:
    """The run's folder for its roots' files: under ``compute.roots_dir``, else ``<data.root>/roots``.
    A folder that another user could write (from the data root down, for the default) is
    refused: the run reads its roots back from there (:mod:`~gnngp_cli.data.trust`)."""
    top = Path(spec.compute.roots_dir) if spec.compute.roots_dir else Path(spec.data.root or default_root())
    base = top if spec.compute.roots_dir else top / "roots"
    distrusted = untrusted(base, top)
    if distrusted is not None:
        raise ComputeError(f"not trusting the roots folder: {distrusted} (the run reads its roots back from there); "
                           "or set compute.roots_dir to a folder of your own")
    return RootStore(base)


@dataclass
class WrittenKernel:
    """An evaluated kernel as row-block files: its root, and a tangent kernel's NNGP root beside
    it (``nngp``; the covariance along training time reads both)."""

    root: Any
    nngp: Any = None


def _tensor(block: Optional[np.ndarray]) -> Optional[torch.Tensor]:
    return None if block is None else torch.from_numpy(np.ascontiguousarray(block))


def _statistics(q_b: np.ndarray, nngp_b: Optional[np.ndarray], y_b: np.ndarray, mask_b: np.ndarray, task: str, num_classes: int,
                num_nodes: int, per_class: bool = False) -> TrainingStatistics:
    """One row block's share of the training statistics (``per_class``: each class's Gram matrix
    too; ``nngp_b``: the NNGP root's rows, for the cross Gram matrix)."""
    q = _tensor(q_b)
    train = torch.from_numpy(np.nonzero(np.asarray(mask_b) & TRAIN)[0])
    y_train = regression_targets(torch.from_numpy(np.asarray(y_b))[train], task, num_classes, q.dtype)
    return low_rank_statistics(q, train, y_train, num_nodes, per_class=per_class, nngp=_tensor(nngp_b))


def _add(*parts: TrainingStatistics) -> TrainingStatistics:
    return functools.reduce(operator.add, parts)


def _on_group(fn: Callable[[RowGroup], Any], q_b: np.ndarray, nngp_b: Optional[np.ndarray], y_b: np.ndarray, mask_b: np.ndarray) -> Any:
    """``fn`` on one row block's labelled rows."""
    mask = np.asarray(mask_b)
    y = torch.from_numpy(np.asarray(y_b))
    positions = {key: torch.from_numpy(np.nonzero(mask & BITS[key])[0]) for key in SPLITS}
    return fn(RowGroup(_tensor(q_b), positions, {key: y[positions[key]] for key in SPLITS}, nngp=_tensor(nngp_b)))


class DaskBackend:
    """See the module docstring. ``client``: an existing ``distributed.Client`` (tests share
    one); ``cluster=False``: no cluster, Dask's default scheduler in this process (the
    benchmarks' synchronous runs)."""

    supports_fit = False

    def __init__(self, spec: Any, client: Any = None, cluster: bool = True):
        self.spec = spec = parse(spec)
        self.name = spec.compute.backend
        self.client, self._start_cluster = client, cluster and client is None
        self._stack = ExitStack()

    def refuse(self, spec: Any, entry: KernelEntry) -> None:
        if spec.device == "cuda":
            raise ConfigError(f"compute={self.name} computes on its workers' CPUs; device=cuda runs with compute=local (or use device=cpu)")
        if spec.max_memory_gb is not None:
            raise ConfigError(f"max_memory_gb limits the exact kernels of compute=local; compute={self.name} sizes each task by "
                              "compute.memory_limit: drop max_memory_gb, or use compute=local")
        if not spec.kernel.low_rank:
            raise ConfigError(f"exact kernels are not distributed: kernel={spec.kernel.name} with compute={self.name}; use its low-rank twin "
                              f"kernel={spec.kernel.name}_x (Nystrom, with landmarks) or compute=local")
        if not entry.runs_on(self.name):
            raise ConfigError(f"kernel={entry.name}_x does not run with compute={self.name}; use compute={' or compute='.join(entry.backends)}")
        refuse_streamed_order(spec)   # before the cluster starts (a refusal seconds later, after its workers, was this one)

    def __enter__(self) -> "DaskBackend":
        spec = self.spec
        try:
            store = DataStore.of(spec.data)
            self.store = root_store(spec)   # a roots_dir that cannot be written stops the job before partitioning
            self._stack.callback(self.store.close)
            self._stack.enter_context(stopped_by_signals())   # SIGTERM clears the roots as Ctrl-C does
            if self._start_cluster:   # before partitioning: partition.rows=auto sizes the blocks by the workers' memory
                self.client = self._stack.enter_context(dask_client(spec.compute))
            start_job(torch.device("cpu"), lapack_eigh)   # the process's one-time start-up, timed apart (warmup_seconds)
            watch = Stopwatch(torch.device("cpu"))
            with watch.measure():
                self.graph = sharded_graph(spec, store, self.client)
            self.load_seconds = watch.seconds
            meta = self.graph.meta
            self.info = GraphInfo(meta.dataset, meta.task, meta.num_classes, meta.num_nodes, meta.num_edges, meta.num_features, meta.split,
                                  meta.stand_in, meta.num_splits, tuple(meta.warnings))
            self.dtype = getattr(torch, spec.dtype)
            # asked of the scheduler now: the client's cached scheduler_info() once gave 0 workers of 3 (a CI run)
            self.workers = len(self.client.nthreads()) if self.client is not None else 1
            self.labels, self.masks = self.graph.labels(), self.graph.masks()
        except BaseException:   # a stop or a failure anywhere here (a graph of 10^6 row blocks) removes the run's roots folder
            self._stack.close()
            raise
        self._train: Optional[torch.Tensor] = None
        self._times_before: dict = {}
        self._told = False
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    @property
    def where(self) -> str:
        split = f"split {int(self.spec.dataset.split_index)}, " if self.spec.get("splits") == "all" else ""   # each split's lines say which
        return f"{dataset_label(self.spec.dataset.name, self.info.stand_in)} ({split}compute={self.name}, {self.workers} workers)"

    def train_ids(self) -> torch.Tensor:
        if self._train is None:
            self._train = torch.from_numpy(self.graph.train_ids())
            if self._train.numel() == 0:
                raise DatasetError(f"dataset '{self.info.dataset}': the training set is empty; give a training mask or a positive dataset.train_ratio")
        return self._train

    def train_targets(self) -> torch.Tensor:
        raise ConfigError(f"fit=mll does not run with compute={self.name}")   # refused before any work (run_gp)

    def context(self, adjacency: str, base: BaseKernel, landmarks: Optional[torch.Tensor], feature_scale: float = 1.0) -> RowBlockContext:
        features = self.graph.features(np.float64 if self.dtype == torch.float64 else np.float32)
        if feature_scale != 1:  # C0 reads sqrt(scale) x (linear: scale x.x')
            features = features * np.asarray(feature_scale ** 0.5, dtype=features.dtype)
        return RowBlockContext(features, BlockAdjacency(self.graph, adjacency, self.store), base, landmarks,
                               roots=DaskRoots(self.graph, self.store), graph=self.graph, dtype=self.dtype)

    def estimate(self, arch: Architecture, ctx: Any, landmarks: Optional[torch.Tensor], fit: bool) -> Estimate:
        """The run's root files at their peak (what ``compute.roots_dir`` must hold), after
        refusing a worker too small for one row block's task and a folder without room."""
        m, layers = int(landmarks.numel()), int(self.spec.kernel.layers)
        check_block_memory(self.client, self.graph, arch.network, m, layers, self.dtype,
                           offer_auto=self.spec.partition.rows != "auto" and not self.spec.compute.shards)
        meta = self.graph.meta
        estimate = rowblock_estimate(
            num_nodes=meta.num_nodes, num_edges=meta.num_edges, num_features=meta.num_features, landmarks=m, layers=layers,
            bytes_per_entry=torch.finfo(self.dtype).bits // 8, rows=largest_block(self.graph),
            task_bytes=task_bytes(self.graph, arch.network, m, layers, self.dtype), branches=branch_count(arch.network),
            num_blocks=meta.num_blocks, source_blocks=source_blocks(meta))
        self.store.check_room(estimate.gb)   # the last run's files are cleared first
        self._times_before = task_times(self.client) if self.client is not None else {}
        if not self._told:
            log.info("roots of this run as row-block files in %s (removed at its end)", self.store.folder)
            self._told = True
        return estimate

    def evaluate(self, arch: Architecture, ctx: Any) -> WrittenKernel:
        """The root ``Q`` written to row-block files (the statistics and each scoring read it),
        and a tangent kernel's NNGP root where the evaluation keeps it (``ctx.keep_nngp``)."""
        self.store.clear()   # the last evaluation's roots: kept till now for its means (tests)
        kernel = arch.network(None, ctx, None)
        nngp = None if kernel.nngp is None else self.store.written(kernel.nngp.root, "the NNGP kernel")
        return WrittenKernel(self.store.written(kernel.root, "the kernel"), nngp)

    def _blocks(self, k: WrittenKernel) -> list:
        def delayed(root: Any) -> list:
            if root.numblocks[1] != 1:
                root = root.rechunk({1: -1})
            return list(root.to_delayed().ravel())

        roots = delayed(k.root)
        nngp = delayed(k.nngp) if k.nngp is not None else [None] * len(roots)
        return list(zip(roots, nngp, self.labels.to_delayed().ravel(), self.masks.to_delayed().ravel()))

    def statistics(self, k: WrittenKernel) -> TrainingStatistics:
        import dask

        info = self.info
        parts = [dask.delayed(_statistics, pure=True)(q, n, y, m, info.task, info.num_classes, info.num_nodes,
                                                         LIKELIHOODS[self.spec.likelihood.name].per_class) for q, n, y, m in self._blocks(k)]
        return tree_reduce(parts, _add).compute()

    def reduce(self, k: WrittenKernel, fn: Callable[[RowGroup], Any], combine: Callable[..., Any]) -> Any:
        """``fn`` on each row block's labelled rows (on the workers; ``fn`` is sent once), the
        results combined in a tree."""
        import dask

        shared = dask.delayed(fn, pure=True)
        return tree_reduce([dask.delayed(_on_group, pure=True)(shared, q, n, y, m) for q, n, y, m in self._blocks(k)], combine).compute()

    def columns(self) -> dict:
        """The row's columns; and, in the log, where the workers' time went in this run."""
        client = self.client
        if client is not None:
            log.info("%s: %s", self.where, time_summary(client, since=self._times_before))
        return dict(device="cpu", peak_rss_mb=peak_rss_mb(), peak_cuda_mb=0.0, compute_backend=self.name, workers=self.workers,
                    peak_worker_mb=peak_worker_mb(client) if client is not None else peak_rss_mb(),
                    extra={"shards": str(self.graph.root), "row_block": self.graph.meta.rows})
