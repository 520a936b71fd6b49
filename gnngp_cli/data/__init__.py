"""Datasets: every loader returns a PyG ``Data`` with ``x``, ``y``, ``edge_index``,
``train_mask``, ``val_mask``, ``test_mask`` and the attributes ``task``
(``classification`` or ``regression``), ``num_classes`` and ``split`` (a description)."""
from __future__ import annotations

import contextlib
import difflib
import io
import logging
import sys
from typing import Any, Optional

import torch

from ..errors import DatasetError, DatasetUnavailable
from ..progress import Progress
from .container import GraphData
from ..graph.operators import Adjacency, make_undirected, normalized_adjacency
from .datasets import DATASETS, PRESETS, display_name, register_dataset, register_preset
from .store import MIRROR_ENV, DataStore
from .synthetic import edge_homophily, generate_csbm
from . import custom, heterophily, papers100m, public, wikipedia  # noqa: F401,E402 - each registers its datasets

log = logging.getLogger("gnngp")

__all__ = [
    "DATASETS", "PRESETS", "Adjacency", "DataStore", "MIRROR_ENV", "display_name", "edge_homophily", "generate_csbm",
    "load_dataset", "make_undirected", "normalized_adjacency", "check_graph", "register_dataset", "register_preset",
]


def stand_in(name: str, kind: str, seed: int) -> GraphData:
    """A csbm graph with the node, edge, feature and class counts (and split proportions) of
    the absent dataset ``name``; ``data.stand_in`` says so wherever the data is reported."""
    shape = DATASETS[name].stand_in if name in DATASETS else None
    if shape is None:
        raise DatasetError(f"no stand-in is defined for '{name}'; stand-ins exist for {', '.join(n for n, e in DATASETS.items() if e.stand_in)}")
    nodes, edges, features, classes, train, val = shape
    with Progress(f"generating the csbm stand-in for {name} ({nodes:,} nodes, {edges:,} edges)"):
        data = generate_csbm(num_nodes=nodes, avg_degree=2 * edges / nodes, num_classes=classes, homophily=0.5,
                             num_features=features, snr=0.2, seed=seed, train_ratio=train, val_ratio=val)
    data.stand_in = f"{kind} stand-in (N={nodes}, M={edges}, d={features}, C={classes})"
    return data


def load_dataset(options: Any, store: DataStore, stand_in_kind: Optional[str] = None, validation: bool = True,
                 training: bool = True) -> GraphData:
    """Load ``options.name`` (a :class:`~gnngp_cli.config.DatasetConfig`), preprocess and check it.
    With ``stand_in_kind="csbm"``, an absent large dataset is replaced by a csbm stand-in.
    ``validation=False``: the job reads no validation labels (``fit=mll``), so they may be absent;
    ``training=False``: nor the training mask (an active-learning run buys its labels from the pool)."""
    name = str(options.name).lower()
    try:
        with _stdout_to_log():  # PyG's "Processing... Done!" and OGB's prints go to the job's log, as log lines
            data = _load(name, options, store)
    except DatasetUnavailable:
        if stand_in_kind is None or name not in DATASETS or DATASETS[name].stand_in is None:
            raise
        data = stand_in(name, stand_in_kind, options.split_seed)
    data.name = name
    preprocess_features(data, options.center, options.scale)
    check_graph(data, validation, training)
    return data


class _LogLines(io.TextIOBase):
    """A text stream whose lines go to the ``gnngp`` logger."""

    def __init__(self) -> None:
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if line.strip():
                log.info(line.rstrip())
        return len(text)

    def flush(self) -> None:
        if self.pending.strip():
            log.info(self.pending.rstrip())
        self.pending = ""


@contextlib.contextmanager
def _stdout_to_log():
    stream = _LogLines()
    try:
        with contextlib.redirect_stdout(stream):   # stderr stays: gnngp's own warnings (digests, labels) go there
            yield
    finally:
        stream.flush()


def _load(name: str, options: Any, store: DataStore) -> GraphData:
    if name not in DATASETS:
        close = difflib.get_close_matches(name, DATASETS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise DatasetError(f"unknown dataset '{options.name}'{hint}; choose one of {', '.join(DATASETS)}")
    data = DATASETS[name].load(options, store)
    if not hasattr(data, "x"):   # a registered loader's bug: None, a dict, a tensor...
        raise DatasetError(f"dataset '{name}': its loader returned {type(data).__name__}, not a graph; a dataset's loader returns a PyG Data "
                           "(or gnngp's GraphData) with x, edge_index, y, the three masks and task: docs/extending.md")
    if options.task and name != "custom" and options.task != data.task:
        raise DatasetError(f"dataset.task={options.task} does not fit {name}, a {data.task} dataset; remove the override")
    return data


def preprocess_features(data: GraphData, center: bool, scale: bool) -> None:
    """Optionally center each feature column to mean 0 and scale it to unit standard deviation
    (float64 features stay float64: a custom file's precision is kept)."""
    x = data.x if data.x.dtype == torch.float64 else data.x.float()
    if center:
        x = x - x.mean(dim=0, keepdim=True)
    if scale:
        std = x.std(dim=0, keepdim=True)
        x = x / torch.where(std > 0, std, torch.ones_like(std))
    data.x = x


def check_graph(data: GraphData, validation: bool = True, training: bool = True) -> None:
    """Invariants every loader must meet; a violation is a loader bug or a bad file. Checked
    before any computation: disjoint, non-empty splits; finite features; finite regression
    targets on every labelled node. A single training class is allowed (toy graphs) with a
    warning, kept in ``data.warnings`` for the result row. ``training=False`` (an active-learning
    run, whose labels are bought from the pool): the training mask may be empty or of one class."""
    where = f"dataset '{getattr(data, 'name', '?')}'"
    required = ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask", "task")
    missing = [key for key in required if getattr(data, key, None) is None]
    if not missing and data.task == "classification" and not getattr(data, "num_classes", None):
        missing = ["num_classes"]
    if not missing and getattr(data, "num_classes", None) is None:   # regression: no classes (the built-in loaders say 0)
        data.num_classes = 0
    if missing:   # a registered loader's bug: an AttributeError or KeyError deep inside, otherwise
        raise DatasetError(f"{where}: its loader gave a graph without {', '.join(missing)}; a dataset's loader returns x, edge_index, y, "
                           "train_mask, val_mask, test_mask and task (and num_classes for classification): docs/extending.md")
    n = data.num_nodes
    if data.x.size(0) != n or data.y.size(0) != n:
        raise DatasetError(f"{where}: features ({data.x.size(0)}) and targets ({data.y.size(0)}) disagree on the node count")
    if data.edge_index.numel() and (data.edge_index.min() < 0 or data.edge_index.max() >= n):
        raise DatasetError(f"{where}: an edge names a node outside [0, {n})")
    for key in ("train_mask", "val_mask", "test_mask"):
        if data[key].numel() != n:
            raise DatasetError(f"{where}: {key} has length {data[key].numel()}, not {n}")
    drawn = str(getattr(data, "split", "")).startswith("random")   # a split by ratios; else masks given (files, a loader's, the API's)
    if training and int(data.train_mask.sum()) == 0:
        raise DatasetError(f"{where}: the training set is empty; " + (f"dataset.train_ratio of its {n:,} nodes rounds down to none: give a "
                           "larger dataset.train_ratio, or more nodes" if drawn else
                           "its train_mask selects no node: give a training mask with some True entry"))
    for key, what, fix in (("val_mask", "validation", "the nugget is chosen on it; " + ("give a positive dataset.val_ratio" if drawn else
                                                     "its val_mask selects no node: give one with some True entry")),
                           ("test_mask", "test", "dataset.train_ratio + dataset.val_ratio must stay below 1" if drawn else
                            "its test_mask selects no node: give one with some True entry")):
        if int(data[key].sum()) == 0 and (validation or key != "val_mask") and not (key == "test_mask" and getattr(data, "unscored", False)):
            raise DatasetError(f"{where}: the {what} set is empty ({fix})")
    if training and (data.train_mask & (data.val_mask | data.test_mask)).any():
        raise DatasetError(f"{where}: training nodes overlap validation or test nodes; the masks must be disjoint")
    overlap = data.val_mask & data.test_mask
    if (training or validation) and overlap.any():   # an active run reads neither mask: its pool is every node but the test ones
        raise DatasetError(f"{where}: {int(overlap.sum())} nodes are in both the validation and the test set (first: node {int(overlap.nonzero()[0])}); the masks must be disjoint")
    if not torch.isfinite(data.x).all():
        raise DatasetError(f"{where}: the features contain NaN or infinite values")
    # the nodes whose labels the job reads: the masks', or (an active run) every node: any pool node may be bought
    labelled = (data.train_mask | data.val_mask | data.test_mask) if training else torch.ones(n, dtype=torch.bool, device=data.y.device)
    label_fix = ("fix the labels, or give masks that leave those nodes out (a split drawn by dataset.train_ratio and val_ratio puts every "
                 "node in one; a graph of your own takes train_mask, val_mask and test_mask files)" if training and drawn else
                 "fix the labels, or leave those nodes out of the masks" if training else
                 "fix the labels: an active run reads every node's, as it may buy any node but the test ones and scores the test nodes")
    if data.task == "classification" and (data.y.is_floating_point() or data.y.is_complex()):   # one_hot's RuntimeError deep in the job
        raise DatasetError(f"{where}: a classification graph's y holds {data.y.dtype} values; class ids are integers "
                           "(data.y = data.y.long()), or the task is regression")
    if data.task == "regression":
        bad = labelled & ~torch.isfinite(data.y.float())
        if bad.any():
            count = int(bad.sum())
            which = "labelled nodes have" if training else "nodes have"
            if count == 1:
                which = "labelled node has" if training else "node has"
            raise DatasetError(f"{where}: {count} {which} a NaN or infinite regression target (first: node {int(bad.nonzero()[0])}); "
                               f"{label_fix}")
    else:   # class ids within num_classes on the nodes read (a protocol's held-out classes, leave_out_classes' OOD test nodes, by design beyond)
        classes = int(data.num_classes)
        y = data.y.reshape(-1) if data.y.numel() == n else data.y[:, 0]   # a class id a node ([N] or [N, 1])
        ood = getattr(data, "ood_mask", None) if training else None   # an active run may buy any pool node: every one's id counts
        bad = (labelled & ~ood if ood is not None else labelled) & ((y < 0) | (y >= classes))
        if bad.any():
            first, count = int(bad.nonzero()[0]), int(bad.sum())
            raise DatasetError(f"{where}: node {first} has class id {int(y[first])}, and num_classes={classes} allows 0..{classes - 1} "
                               f"({count} {'node has' if count == 1 else 'nodes have'} no valid class id); {label_fix}, or give the graph "
                               "the right num_classes")
    if data.task != "regression" and training:
        classes = torch.unique(data.y[data.train_mask])
        if classes.numel() == 1:
            note = (f"every training node has class {int(classes[0])}: every prediction is that class, "
                    f"so accuracy only counts the validation and test nodes of that class")
            data.warnings = [*getattr(data, "warnings", []), note]
            print(f"gnngp: warning: {where}: {note}", file=sys.stderr)
