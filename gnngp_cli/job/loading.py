"""A dataset loaded onto its device for one job (or several, as the benchmarks share it)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ..config import needs_validation, parse, reads_training_set
from ..data import Adjacency, DataStore, check_graph, load_dataset
from ..data.datasets import DATASETS
from ..errors import ResourceError
from ..data.adjacency_cache import cached_adjacency
from ..data.order_cache import cached_order
from ..graph.operators import normalised_parts
from ..graph.sparse_product import resolve_product
from ..data.protocols import apply_protocol
from ..kernels.numerics import lapack_eigh
from ..metrics import resolve_metric
from ..runtime import Stopwatch, memory_limit_bytes, resolve_device, start_job
from ..schema import RunConfig
from .backend_interface import GraphInfo
from .estimate import size_text

log = logging.getLogger("gnngp")


@dataclass
class LoadedGraph:
    """A loaded dataset on its device, shared by the runs of a job (or by several jobs, as the
    benchmarks do), with the normalised adjacencies built from it."""

    data: Any
    device: torch.device
    dtype: torch.dtype
    load_seconds: float
    num_edges: int = 0
    keep_edges: bool = True        # False: a GP job that owns the data drops its edge list once A is built
    product: str = "torch"         # how A Q runs (compute.product, resolved for the device)
    order: Any = None              # the node order A Q runs in (data.order), or None
    store: Optional[DataStore] = None   # the data cache that keeps the normalised adjacencies (None: built in memory)
    _adjacencies: dict = field(default_factory=dict)

    def info(self) -> GraphInfo:
        """What a job reads of this graph."""
        data = self.data
        return GraphInfo(str(getattr(data, "name", "")), data.task, int(getattr(data, "num_classes", 0) or 0), int(data.num_nodes),
                         self.num_edges, int(data.x.size(1)), str(getattr(data, "split", "")), str(getattr(data, "stand_in", "") or ""),
                         getattr(data, "num_splits", None), tuple(getattr(data, "warnings", ()) or ()),
                         getattr(data, "metric", None) if getattr(data, "protocol_key", None) else None, str(getattr(data, "data_digest", "") or ""))

    def adjacency(self, kind: str) -> Adjacency:
        """The normalised adjacency of this kind (built once per job; with a ``store``, once per
        dataset: kept in the data cache, :func:`~gnngp_cli.data.adjacency_cache.cached_adjacency`).
        When the job owns the data (``keep_edges`` false) the loaded edge list is released after
        the build: the kernels read only ``A`` (1.8 GB on a Reddit-sized graph)."""
        if kind not in self._adjacencies:
            if self.data.edge_index is None:
                raise RuntimeError(f"the edge list was released before the {kind!r} adjacency was built")
            n = int(self.data.num_nodes)
            if self.store is None:
                parts = normalised_parts(self.data.edge_index, n, kind, self.dtype)
            else:
                parts = cached_adjacency(self.data.edge_index, n, kind, self.dtype, self.store.root, self.store.untrusted)
            self._adjacencies[kind] = Adjacency.from_parts(*(part.to(self.device) for part in parts), n, self.product, self.order)
            if not self.keep_edges:
                self.data.edge_index = None
        return self._adjacencies[kind]


def load_graph(spec: Any) -> LoadedGraph:
    """Pick the device and load the dataset of a job's spec (or of a composed config, parsed
    here), timed apart from the method; the dataset's metric is resolved."""
    spec = parse(spec)
    device = resolve_device(spec.device)
    start_job(device, lapack_eigh)
    store = DataStore.of(spec.data)
    check_load_memory(spec)
    watch = Stopwatch(device)
    with watch.measure():
        data = load_dataset(spec.dataset, store, spec.experiment.stand_in, validation=needs_validation(spec),
                            training=reads_training_set(spec)).to(device)
    entry = DATASETS.get(str(spec.dataset.name).lower())
    generated = entry is not None and entry.memory is not None   # a graph whose size is a setting (csbm): made anew, not kept
    return prepared(spec, data, device, watch.seconds, keep_adjacency=not generated)


def check_load_memory(spec: Any) -> None:
    """Tell, before it loads, what a dataset whose size is a setting (a generated graph: its
    entry's ``memory``) will allocate, and refuse it in one line when that would not fit in the
    memory limit (``max_memory_gb``; default half of the free memory); refuse the same way files
    that declare more than the limit (a custom graph's features: its entry's ``reads``)."""
    entry = DATASETS.get(str(spec.dataset.name).lower())
    if entry is None or (entry.memory is None and entry.reads is None):
        return
    limit = memory_limit_bytes(spec.get("max_memory_gb"), torch.device("cpu"))
    if entry.reads is not None:
        need, what = entry.reads(spec.dataset)
        if need > limit:
            raise ResourceError(f"reading {what} needs about {size_text(need)}, and the limit is {size_text(limit)} (max_memory_gb; default "
                                "half of the free memory); give fewer nodes or features, or raise max_memory_gb if the memory is yours")
    if entry.memory is None:
        return
    need = float(entry.memory(spec.dataset))
    if need > limit:   # the generation alone (a process's resident memory is the kernel estimate's to count)
        raise ResourceError(f"generating {entry.display} ({int(spec.dataset.get('num_nodes', 0)):,} nodes) needs about {size_text(need)}, "
                            f"and the limit is {size_text(limit)} (max_memory_gb; default half of the free memory); use fewer nodes "
                            "(dataset.num_nodes), a lower dataset.avg_degree or fewer dataset.num_features")
    if need >= 0.1 * 2**30:
        log.info("generating %s (%s nodes): ~%s (estimate before generating)", entry.display, f"{int(spec.dataset.get('num_nodes', 0)):,}",
                 size_text(need))


def adopt_graph(spec: Any, data: Any) -> LoadedGraph:
    """A graph the caller holds (the Python API: a PyG ``Data`` of their own, or one
    :func:`load_graph` loaded before) as a job's loaded graph: validated as every loader's graph
    is (:func:`~gnngp_cli.data.check_graph`), moved to the job's device."""
    spec = parse(spec)
    device = resolve_device(spec.device)
    start_job(device, lapack_eigh)
    check_graph(data, validation=needs_validation(spec), training=reads_training_set(spec))
    return prepared(spec, data.to(device), device, 0.0, keep_adjacency=False)


def prepared(spec: RunConfig, data: Any, device: torch.device, load_seconds: float, keep_adjacency: bool = True) -> LoadedGraph:
    """``data`` on ``device`` for the job of ``spec``: the validation labels hidden with
    ``dataset.hide_val``, its metric resolved. ``keep_adjacency``: a GP job's normalised adjacency
    kept in the data cache (a dataset read from files); a generated graph or a caller's own (the
    Python API) builds it in memory, so that a session of many graphs leaves no file per graph."""
    if getattr(data, "metric", None) is None or getattr(data, "protocol_key", None) is None:   # a graph a protocol made keeps its metric
        data.metric = resolve_metric(spec.dataset.metric, data.task, data.num_classes, str(spec.dataset.name).lower())
    data = apply_protocol(data, spec.protocol, str(spec.dataset.name).lower())   # after the metric: a protocol may keep fewer classes
    if spec.dataset.hide_val:  # no validation labels at all (fit=mll); after a protocol, which may draw new splits
        data.val_mask = torch.zeros_like(data.val_mask)
    dtype = getattr(torch, spec.dtype)
    product = resolve_product(spec.compute.product, device, dtype)
    order, store = None, None
    if spec.method == "gp":   # the kernels' product and adjacency; a GNN's layers keep PyG's own
        store = DataStore.of(spec.data)
        order = cached_order(data.edge_index, int(data.num_nodes), spec.data.order, store.root / "orders", store.untrusted)
    return LoadedGraph(data, device, dtype, load_seconds, int(data.edge_index.size(1)), product=product,
                       order=None if order is None else order.to(device), store=store if keep_adjacency else None)


def reuse(spec: RunConfig, graph: Optional[LoadedGraph]) -> LoadedGraph:
    """``graph`` (data loaded for another job on the same dataset, as the benchmarks share it)
    for this job's spec; else :func:`load_graph`."""
    if graph is None:
        return load_graph(spec)
    return graph
