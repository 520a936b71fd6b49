"""MUSAE Wikipedia page-traffic graphs (chameleon, squirrel, crocodile), a regression task.

Raw files in ``<Name>/raw/``: ``<name>.json`` (node -> list of feature ids),
``<name>_edges.csv`` (header ``id1,id2``), ``<name>_target.csv`` (``id,target``: average
monthly traffic) and, for chameleon and squirrel, the geom-gcn splits
``<name>_split_0.6_0.2_<k>.npz``. Features are a dense binary matrix over the sorted
distinct feature ids; the target is ``log(traffic)``; edges are made undirected.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from ..config import DatasetConfig
from ..errors import DatasetError
from .cache import cached_tensors
from .container import GraphData as Data  # PyG's Data interface, without importing torch_geometric
from .graph import make_undirected
from .registry import register_dataset
from .store import DataStore

MUSAE_URL = "https://raw.githubusercontent.com/benedekrozemberczki/MUSAE/master/input"
GEOM_GCN_URL = "https://raw.githubusercontent.com/graphdml-uiuc-jlu/geom-gcn/master/splits"
WIKIPEDIA_NAMES = ("chameleon", "squirrel", "crocodile")
GEOM_GCN_SPLITS = 10


def wikipedia_files(name: str) -> dict[str, str]:
    """Raw file (relative to ``<name>``) -> download URL."""
    files = {
        f"raw/{name}.json": f"{MUSAE_URL}/features/{name}.json",
        f"raw/{name}_edges.csv": f"{MUSAE_URL}/edges/{name}_edges.csv",
        f"raw/{name}_target.csv": f"{MUSAE_URL}/target/{name}_target.csv",
    }
    if name != "crocodile":
        for k in range(GEOM_GCN_SPLITS):
            files[f"raw/{name}_split_0.6_0.2_{k}.npz"] = f"{GEOM_GCN_URL}/{name}_split_0.6_0.2_{k}.npz"
    return files


def read_musae_features(path: Path) -> torch.Tensor:
    """Dense binary features from a MUSAE json (parsed with ``json``, never ``eval``)."""
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as err:
        raise DatasetError(f"raw file {path} is not valid json ({err}); delete it and fetch it again") from err
    if not isinstance(raw, dict):
        raise DatasetError(f"raw file {path} must map node ids to feature-id lists; fetch it again")
    n = len(raw)
    try:
        ids = sorted(int(k) for k in raw)
        rows = np.concatenate([np.full(len(raw[str(i)]), i) for i in range(n)]) if n else np.zeros(0, int)
        cols = np.concatenate([np.asarray(raw[str(i)], dtype=np.int64) for i in range(n)]) if n else np.zeros(0, int)
    except (KeyError, ValueError, TypeError) as err:
        raise DatasetError(f"raw file {path} has a malformed entry ({type(err).__name__}: {err}); fetch it again") from err
    if ids != list(range(n)):
        raise DatasetError(f"raw file {path} must have node ids 0..{n - 1}; fetch it again")
    values, cols = np.unique(cols, return_inverse=True)
    x = torch.zeros(n, len(values))
    x[torch.from_numpy(rows), torch.from_numpy(cols.reshape(-1))] = 1.0
    return x


def read_edge_csv(path: Path, num_nodes: int, header: bool | None = True) -> torch.Tensor:
    """Two integer columns of node ids; ``header=None`` detects a header row."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, header=None, dtype=str, skip_blank_lines=True)
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise DatasetError(f"edge file {path} could not be read as CSV ({err}); it needs two integer columns of node ids") from err
    if frame.shape[1] != 2:
        raise DatasetError(f"edge file {path} has {frame.shape[1]} columns; it needs exactly two integer columns of node ids")
    if header is None:
        header = len(frame) > 0 and not all(str(v).strip().lstrip("-").isdigit() for v in frame.iloc[0])
    if header:
        frame = frame.iloc[1:]
    try:
        edges = frame.apply(lambda c: c.str.strip()).astype(np.int64).to_numpy()
    except (ValueError, TypeError) as err:
        raise DatasetError(f"edge file {path} has a non-integer node id ({err}); every row must be two integers") from err
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise DatasetError(f"edge file {path} has node id {int(edges.max() if edges.max() >= num_nodes else edges.min())} outside [0, {num_nodes}); the other files have {num_nodes} nodes")
    return torch.from_numpy(edges.T.copy()).reshape(2, -1)


def _read_target(path: Path, num_nodes: int) -> torch.Tensor:
    import pandas as pd

    try:
        frame = pd.read_csv(path)
        ids = frame.iloc[:, 0].to_numpy(dtype=np.int64)
        traffic = frame.iloc[:, 1].to_numpy(dtype=np.float64)
    except (OSError, ValueError, IndexError, pd.errors.ParserError) as err:
        raise DatasetError(f"target file {path} could not be read ({err}); it needs columns id,target") from err
    if len(ids) != num_nodes or set(ids.tolist()) != set(range(num_nodes)):
        raise DatasetError(f"target file {path} has {len(ids)} rows but the features have {num_nodes} nodes; the files disagree, fetch them again")
    if (traffic <= 0).any() or not np.isfinite(traffic).all():
        raise DatasetError(f"target file {path} has a non-positive or missing traffic value; log(traffic) needs positive numbers")
    y = np.empty(num_nodes)
    y[ids] = np.log(traffic)
    return torch.from_numpy(y).float()


def _read_splits(raw: Path, name: str, num_nodes: int) -> dict[str, torch.Tensor]:
    masks = {"train": [], "val": [], "test": []}
    for k in range(GEOM_GCN_SPLITS):
        path = raw / f"{name}_split_0.6_0.2_{k}.npz"
        try:
            with np.load(path, allow_pickle=False) as z:
                for key in masks:
                    masks[key].append(torch.from_numpy(z[f"{key}_mask"].astype(bool)))
        except Exception as err:  # noqa: BLE001 - numpy/zipfile raise many types
            raise DatasetError(f"split file {path} is corrupt ({type(err).__name__}: {err}); fetch it again") from err
        if any(m[-1].numel() != num_nodes for m in masks.values()):
            raise DatasetError(f"split file {path} has masks of length {masks['train'][-1].numel()} but the graph has {num_nodes} nodes; fetch it again")
    return {key: torch.stack(value, dim=1) for key, value in masks.items()}


def read_wikipedia(raw: Path, name: str) -> dict[str, torch.Tensor]:
    """Features, undirected edges, ``log(traffic)`` targets and (chameleon, squirrel) the
    geom-gcn split masks stacked as columns, from the raw MUSAE files."""
    x = read_musae_features(raw / f"{name}.json")
    n = x.size(0)
    tensors = {
        "x": x,
        "edge_index": make_undirected(read_edge_csv(raw / f"{name}_edges.csv", n), n),
        "y": _read_target(raw / f"{name}_target.csv", n),
    }
    if name != "crocodile":
        for key, mask in _read_splits(raw, name, n).items():
            tensors[f"{key}_masks"] = mask
    return tensors


def random_split(num_nodes: int, train_ratio: float, val_ratio: float, seed: int) -> dict[str, torch.Tensor]:
    """Seeded random train/val/test masks; the rest after train and val is test."""
    perm = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))
    n_train, n_val = int(round(train_ratio * num_nodes)), int(round(val_ratio * num_nodes))
    out = {}
    for key, idx in (("train", perm[:n_train]), ("val", perm[n_train:n_train + n_val]), ("test", perm[n_train + n_val:])):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[idx] = True
        out[key] = mask
    return out


def load_wikipedia(name: str, store: DataStore, split_index: int = 0, split_seed: int = 0) -> Data:
    files = wikipedia_files(name)
    folder = store.fetch(name, list(files), files)
    full = cached_tensors(folder, store.digests[name], lambda: read_wikipedia(folder / "raw", name))
    data = Data(x=full["x"], y=full["y"], edge_index=full["edge_index"])
    if name == "crocodile":
        masks = random_split(data.num_nodes, 0.48, 0.32, split_seed)
        data.split = f"random 0.48/0.32/0.20, seed {split_seed}"
    else:
        if not 0 <= split_index < GEOM_GCN_SPLITS:
            raise DatasetError(f"dataset.split_index={split_index} is out of range; geom-gcn provides splits 0..{GEOM_GCN_SPLITS - 1}")
        masks = {key: full[f"{key}_masks"][:, split_index].clone() for key in ("train", "val", "test")}
        data.split = f"geom-gcn {split_index}"
        data.num_splits = GEOM_GCN_SPLITS
    for key, mask in masks.items():
        data[f"{key}_mask"] = mask
    data.task, data.num_classes = "regression", 0
    return data


def _wikipedia(name: str):
    def load(cfg, store: DataStore) -> Data:
        return load_wikipedia(name, store, cfg.split_index, cfg.split_seed)
    return load


for _name in WIKIPEDIA_NAMES:
    register_dataset(_name, _name.capitalize(), _wikipedia(_name), DatasetConfig(name=_name))
