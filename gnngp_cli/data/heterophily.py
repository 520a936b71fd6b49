"""The heterophily benchmark suite of Platonov et al. (ICLR 2023), "A critical look at the
evaluation of GNNs under heterophily".

roman_empire, amazon_ratings, minesweeper, tolokers, questions, chameleon_filtered and
squirrel_filtered, each one file ``<name>/raw/<name>.npz`` in the layout of PyG's
``HeterophilousGraphDataset`` (yandex-research/heterophilous-graphs ``data/<name>.npz``):

- ``node_features`` (N x d), ``node_labels`` (N, integer classes),
- ``edges`` (M x 2, one direction per edge),
- ``train_masks``, ``val_masks``, ``test_masks`` (10 x N booleans: the 10 fixed splits).

The file is read with ``np.load(allow_pickle=False)`` (never unpickled), and processed as PyG's
``HeterophilousGraphDataset.process`` does: edges made undirected (``to_undirected``), the
masks of split ``k`` are row ``k`` of the mask arrays, as the file gives them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from ..schema import DatasetConfig
from ..errors import DatasetError
from .container import GraphData as Data  # PyG's Data interface, without importing torch_geometric
from ..graph.operators import make_undirected
from .datasets import register_dataset
from .labels import published_class_count
from .store import DataStore, Opener, plain_open

HETEROPHILY_URL = "https://github.com/yandex-research/heterophilous-graphs/raw/main/data"
HETEROPHILY_NAMES = (
    "roman_empire", "amazon_ratings", "minesweeper", "tolokers", "questions",
    "chameleon_filtered", "squirrel_filtered",
)
HETEROPHILY_KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks")


def heterophily_files(name: str) -> dict[str, str]:
    """Raw file (relative to ``<name>``) -> download URL."""
    return {f"raw/{name}.npz": f"{HETEROPHILY_URL}/{name}.npz"}


def read_heterophily_npz(path: Path, opener: Opener = plain_open) -> dict[str, np.ndarray]:
    """The arrays of a suite file, checked for keys, shapes and types (no pickles allowed)."""
    try:
        with opener(path) as f, np.load(f, allow_pickle=False) as z:
            missing = [k for k in HETEROPHILY_KEYS if k not in z.files]
            if missing:
                raise DatasetError(f"raw file {path} lacks {', '.join(missing)}; it is not a heterophily-suite npz (keys {', '.join(HETEROPHILY_KEYS)}), fetch it again")
            arrays = {k: z[k] for k in HETEROPHILY_KEYS}
    except DatasetError:
        raise
    except Exception as err:  # noqa: BLE001 - numpy/zipfile raise many types (a pickled array: ValueError)
        raise DatasetError(f"raw file {path} could not be read as a plain npz ({type(err).__name__}: {err}); delete it and fetch it again") from err
    x, y, edges = arrays["node_features"], arrays["node_labels"], arrays["edges"]
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):   # complex: cast to real, silently
        raise DatasetError(f"raw file {path}: node_features must be a real N x d array, got shape {x.shape} ({x.dtype})")
    n = x.shape[0]
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or (n and y.min() < 0):
        raise DatasetError(f"raw file {path}: node_labels must be {n} non-negative integers, got shape {y.shape} ({y.dtype})")
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise DatasetError(f"raw file {path}: edges must be an M x 2 integer array, got shape {edges.shape} ({edges.dtype})")
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise DatasetError(f"raw file {path}: an edge names a node outside [0, {n})")
    splits = arrays["train_masks"].shape[0] if arrays["train_masks"].ndim == 2 else -1
    for key in ("train_masks", "val_masks", "test_masks"):
        m = arrays[key]
        if m.ndim != 2 or m.shape != (splits, n) or m.dtype != np.bool_:
            raise DatasetError(f"raw file {path}: {key} must be a splits x {n} boolean array like train_masks, got shape {m.shape} ({m.dtype})")
    if splits < 1:
        raise DatasetError(f"raw file {path} holds no split; train_masks must have one row per split")
    return arrays


def load_heterophily(name: str, store: DataStore, split_index: int = 0) -> Data:
    """Split ``split_index`` of suite dataset ``name``; ``data.num_splits`` says how many the
    file holds."""
    files = heterophily_files(name)
    folder = store.fetch(name, list(files), files)
    arrays = read_heterophily_npz(folder / f"raw/{name}.npz", store.opener())
    splits = arrays["train_masks"].shape[0]
    if not 0 <= split_index < splits:
        raise DatasetError(f"dataset.split_index={split_index} is out of range; {name} provides splits 0..{splits - 1}")
    x = torch.from_numpy(np.asarray(arrays["node_features"], dtype=np.float32))
    n = x.size(0)
    edge_index = make_undirected(torch.from_numpy(arrays["edges"].astype(np.int64)).t().contiguous(), n)
    y = torch.from_numpy(arrays["node_labels"].astype(np.int64))
    data = Data(x=x, y=y, edge_index=edge_index)
    for key in ("train", "val", "test"):
        data[f"{key}_mask"] = torch.from_numpy(arrays[f"{key}_masks"][split_index].copy())
    data.task = "classification"
    data.num_classes = published_class_count(y, f"raw file {folder / f'raw/{name}.npz'}", DISPLAY.get(name, name), HETEROPHILY_CLASSES[name]) \
        if name in HETEROPHILY_CLASSES else (int(y.max()) + 1 if n else 0)
    data.num_splits = splits
    data.split = f"platonov {split_index}"
    return data


# each dataset's classes (Platonov et al. 2023): a larger class id in a raw file is refused (a one-hot target as wide as it)
HETEROPHILY_CLASSES = {"roman_empire": 18, "amazon_ratings": 5, "minesweeper": 2, "tolokers": 2, "questions": 2,
                       "chameleon_filtered": 5, "squirrel_filtered": 5}
DISPLAY = {"roman_empire": "Roman-empire", "amazon_ratings": "Amazon-ratings", "minesweeper": "Minesweeper", "tolokers": "Tolokers",
           "questions": "Questions", "chameleon_filtered": "Chameleon (filtered)", "squirrel_filtered": "Squirrel (filtered)"}
# the larger suite graphs: the low-rank twins use 300 training nodes as landmarks; questions is
# too large for the exact kernels in experiments
LANDMARKS = {"roman_empire": 300, "amazon_ratings": 300, "minesweeper": 300, "tolokers": 300, "questions": 300}


def _suite(name: str):
    def load(options, store: DataStore) -> Data:
        return load_heterophily(name, store, options.split_index)
    return load


# yandex-research/heterophilous-graphs data/<name>.npz (those in the offline mirror)
DIGESTS = {
    "tolokers/raw/tolokers.npz": ("dacf3ac94cec53d03cd2adb5255c08b33dee1656c33ca8164a464bd9450a1667",),
    "minesweeper/raw/minesweeper.npz": ("e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3",),
    "chameleon_filtered/raw/chameleon_filtered.npz": ("bf46f07e1fb5249280447e5fe3100f3e82fc4b93ad1e13ffcfdec924b6ac0bb5",),
}


for _name in HETEROPHILY_NAMES:
    register_dataset(_name, DISPLAY[_name], _suite(_name),
                     DatasetConfig(name=_name, landmark_count=LANDMARKS.get(_name), large=_name == "questions"), split="fixed",
                     digests={key: value for key, value in DIGESTS.items() if key.startswith(f"{_name}/")})
