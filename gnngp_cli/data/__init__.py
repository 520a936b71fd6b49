"""Datasets: every loader returns a PyG ``Data`` with ``x``, ``y``, ``edge_index``,
``train_mask``, ``val_mask``, ``test_mask`` and the attributes ``task``
(``classification`` or ``regression``), ``num_classes`` and ``split`` (a description)."""
from __future__ import annotations

import difflib
from typing import Any, Optional

import torch
from torch_geometric.data import Data

from ..errors import DatasetError, DatasetUnavailable
from .custom import load_custom
from .graph import Adjacency, make_undirected, normalized_adjacency
from .heterophily import HETEROPHILY_NAMES, load_heterophily
from .public import PLANETOID_NAMES, load_arxiv, load_planetoid, load_reddit
from .store import MIRROR_ENV, DataStore
from .synthetic import edge_homophily, generate_csbm
from .wikipedia import GEOM_GCN_SPLITS, WIKIPEDIA_NAMES, load_wikipedia

DATASETS = (*PLANETOID_NAMES, *WIKIPEDIA_NAMES, *HETEROPHILY_NAMES, "arxiv", "reddit", "csbm", "custom")

__all__ = [
    "DATASETS", "Adjacency", "DataStore", "MIRROR_ENV", "edge_homophily", "generate_csbm",
    "load_dataset", "make_undirected", "normalized_adjacency", "check_graph",
]


# Table 1 of the paper: nodes, edges, features, classes, train/val ratios of the large graphs
STAND_IN_SHAPES = {
    "arxiv": (169_343, 1_166_243, 128, 40, 0.54, 0.18),
    "reddit": (232_965, 11_606_919, 602, 41, 0.66, 0.10),
}


def stand_in(name: str, kind: str, seed: int) -> Data:
    """A csbm graph with the node, edge, feature and class counts (and split proportions) of
    the absent dataset ``name``; ``data.stand_in`` says so wherever the data is reported."""
    if name not in STAND_IN_SHAPES:
        raise DatasetError(f"no stand-in is defined for '{name}'; stand-ins exist for {', '.join(STAND_IN_SHAPES)}")
    nodes, edges, features, classes, train, val = STAND_IN_SHAPES[name]
    data = generate_csbm(num_nodes=nodes, avg_degree=2 * edges / nodes, num_classes=classes, homophily=0.5,
                         num_features=features, snr=0.2, seed=seed, train_ratio=train, val_ratio=val)
    data.stand_in = f"{kind} stand-in (N={nodes}, M={edges}, d={features}, C={classes})"
    return data


def load_dataset(cfg: Any, store: DataStore, stand_in_kind: Optional[str] = None) -> Data:
    """Load ``cfg.name`` (a :class:`~gnngp_cli.config.DatasetConfig`), preprocess and check it.
    With ``stand_in_kind="csbm"``, an absent large dataset is replaced by a csbm stand-in."""
    try:
        return _load(cfg, store)
    except DatasetUnavailable:
        name = str(cfg.name).lower()
        if stand_in_kind is None or name not in STAND_IN_SHAPES:
            raise
        data = stand_in(name, stand_in_kind, cfg.split_seed)
        data.name = name
        preprocess_features(data, cfg.center, cfg.scale)
        check_graph(data)
        return data


def _load(cfg: Any, store: DataStore) -> Data:
    name = str(cfg.name).lower()
    if name in PLANETOID_NAMES:
        data = load_planetoid(name, store)
        data.split = "planetoid public"
    elif name in WIKIPEDIA_NAMES:
        data = load_wikipedia(name, store, cfg.split_index, cfg.split_seed)
        if name != "crocodile":
            data.num_splits = GEOM_GCN_SPLITS
    elif name in HETEROPHILY_NAMES:
        data = load_heterophily(name, store, cfg.split_index)
    elif name == "arxiv":
        data = load_arxiv(name, store)
        data.split = "ogb time"
    elif name == "reddit":
        data = load_reddit(name, store)
        data.split = "pyg reddit"
    elif name == "csbm":
        data = generate_csbm(
            cfg.num_nodes, cfg.avg_degree, cfg.num_classes, cfg.homophily, cfg.num_features, cfg.snr,
            cfg.split_seed, cfg.train_ratio, cfg.val_ratio,
        )
    elif name == "custom":
        data = load_custom(cfg.path, cfg.task, cfg.train_ratio, cfg.val_ratio, cfg.split_seed)
    else:
        close = difflib.get_close_matches(name, DATASETS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise DatasetError(f"unknown dataset '{cfg.name}'{hint}; choose one of {', '.join(DATASETS)}")
    if cfg.task and name != "custom" and cfg.task != data.task:
        raise DatasetError(f"dataset.task={cfg.task} does not fit {name}, a {data.task} dataset; remove the override")
    data.name = name
    preprocess_features(data, cfg.center, cfg.scale)
    check_graph(data)
    return data


def preprocess_features(data: Data, center: bool, scale: bool) -> None:
    """Optionally center each feature column to mean 0 and scale it to unit standard deviation."""
    x = data.x.float()
    if center:
        x = x - x.mean(dim=0, keepdim=True)
    if scale:
        std = x.std(dim=0, keepdim=True)
        x = x / torch.where(std > 0, std, torch.ones_like(std))
    data.x = x


def check_graph(data: Data) -> None:
    """Invariants every loader must meet; a violation is a loader bug or a bad file."""
    n = data.num_nodes
    where = f"dataset '{getattr(data, 'name', '?')}'"
    if data.x.size(0) != n or data.y.size(0) != n:
        raise DatasetError(f"{where}: features ({data.x.size(0)}) and targets ({data.y.size(0)}) disagree on the node count")
    if data.edge_index.numel() and (data.edge_index.min() < 0 or data.edge_index.max() >= n):
        raise DatasetError(f"{where}: an edge names a node outside [0, {n})")
    for key in ("train_mask", "val_mask", "test_mask"):
        if data[key].numel() != n:
            raise DatasetError(f"{where}: {key} has length {data[key].numel()}, not {n}")
    if int(data.train_mask.sum()) == 0:
        raise DatasetError(f"{where}: the training set is empty; give a training mask or a positive dataset.train_ratio")
    if (data.train_mask & (data.val_mask | data.test_mask)).any():
        raise DatasetError(f"{where}: training nodes overlap validation or test nodes; the masks must be disjoint")
    if not torch.isfinite(data.x).all():
        raise DatasetError(f"{where}: the features contain NaN or infinite values")
