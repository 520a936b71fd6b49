"""Datasets: every loader returns a PyG ``Data`` with ``x``, ``y``, ``edge_index``,
``train_mask``, ``val_mask``, ``test_mask`` and the attributes ``task``
(``classification`` or ``regression``), ``num_classes`` and ``split`` (a description)."""
from __future__ import annotations

import difflib
from typing import Any

import torch
from torch_geometric.data import Data

from ..errors import DatasetError
from .custom import load_custom
from .graph import Adjacency, make_undirected, normalized_adjacency
from .public import PLANETOID_NAMES, load_arxiv, load_planetoid, load_reddit
from .store import MIRROR_ENV, DataStore
from .synthetic import edge_homophily, generate_csbm
from .wikipedia import WIKIPEDIA_NAMES, load_wikipedia

DATASETS = (*PLANETOID_NAMES, *WIKIPEDIA_NAMES, "arxiv", "reddit", "csbm", "custom")

__all__ = [
    "DATASETS", "Adjacency", "DataStore", "MIRROR_ENV", "edge_homophily", "generate_csbm",
    "load_dataset", "make_undirected", "normalized_adjacency", "check_graph",
]


def load_dataset(cfg: Any, store: DataStore) -> Data:
    """Load ``cfg.name`` (a :class:`~gnngp_cli.config.DatasetConfig`), preprocess and check it."""
    name = str(cfg.name).lower()
    if name in PLANETOID_NAMES:
        data = load_planetoid(name, store)
        data.split = "planetoid public"
    elif name in WIKIPEDIA_NAMES:
        data = load_wikipedia(name, store, cfg.split_index, cfg.split_seed)
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
