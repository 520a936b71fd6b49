"""A user's own graph from files in one folder (``dataset=custom dataset.path=<dir>``).

- ``edges.csv``: two integer columns of node ids, with or without a header row.
- ``features.npy`` or ``features.npz`` (dense, or scipy sparse): one row per node; real
  numbers or booleans (binary features), never complex.
- ``labels.npy`` or ``labels.csv``: integers mean classification, floats regression
  (``dataset.task`` overrides; floats that are all whole numbers are a warning). Class ids that
  are not 0..C-1 (``{1, 2}``, ``{0, 1, 7}``, ``10^6``) are renumbered in sorted order (a warning,
  kept in the row's warnings: :mod:`gnngp_cli.data.labels`).
- optional ``train_mask.npy``, ``val_mask.npy``, ``test_mask.npy`` (booleans or 0/1; all three,
  or none: then a seeded random split with ``dataset.train_ratio`` and ``dataset.val_ratio``).

No file is unpickled (``allow_pickle=False``).
"""
from __future__ import annotations

import errno
import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..schema import DatasetConfig
from ..errors import DatasetError
from ..graph.operators import make_undirected, without_self_loops
from .container import GraphData as Data  # PyG's Data interface, without importing torch_geometric
from .cache import manifest
from .datasets import register_dataset
from .digests import sha256
from .labels import class_ids, label_text, untrained_classes, whole_number_floats
from .shards import npy_header
from .wikipedia import random_split, read_edge_csv

SELF_LOOPS_LEFT_OUT = ("those self-loops are left out, as Planetoid's and PyG's GCN normalisation do: every node has one unit "
                       "self-loop in I + A")


DATA_FILES = ("edges.csv", "features.npy", "features.npz", "labels.npy", "labels.csv", "train_mask.npy", "val_mask.npy", "test_mask.npy")


def files_digest(path: Optional[str]) -> str:
    """The first 16 hex digits of the sha256 of a custom graph's files (each present one's name
    and contents, :data:`DATA_FILES`): what tells a run on these files from one on files written
    again at the same path (a row records it; ``resume`` and the report read it). ``""`` when the
    folder cannot be read (the load says why)."""
    folder = Path(str(path or ""))
    try:
        stats = tuple((name, st.st_size, st.st_mtime_ns, st.st_ino) for name in DATA_FILES
                      for st in [_stat(folder / name)] if st is not None)
    except OSError:
        return ""
    return _digest(str(folder), stats) if path and stats else ""


def _stat(path: Path):
    try:
        return path.stat()
    except FileNotFoundError:
        return None


@functools.lru_cache(maxsize=16)
def _digest(folder: str, stats: tuple) -> str:   # once per version of the files (name, size, mtime, inode) in a process
    try:
        return manifest({name: sha256(Path(folder) / name) for name, *_ in stats})[:16]
    except OSError:
        return ""


def untrained_note(shown: list[str], where: str = "") -> str:
    """The warning for classes that validation or test nodes hold and no training node does."""
    listed = ", ".join(shown[:6]) + (", ..." if len(shown) > 6 else "")
    return (f"class{'es' if len(shown) > 1 else ''} {listed}{where} {'have' if len(shown) > 1 else 'has'} validation or test nodes "
            "but no training node, so no prediction can be that class; give each class a training node")

MASKS = ("train_mask", "val_mask", "test_mask")


def _one_of(folder: Path, names: tuple[str, ...], what: str) -> Path:
    found = [folder / name for name in names if (folder / name).is_file()]
    if len(found) > 1:   # two files of one kind (features.npy beside features.npz): which is meant is not gnngp's guess
        raise DatasetError(f"custom dataset {folder} has {len(found)} {what} files ({', '.join(p.name for p in found)}); "
                           "keep one and move the other out of the folder")
    if found:
        return found[0]
    raise DatasetError(f"custom dataset {folder} has no {what} file; add one of {', '.join(names)}")


def _load(path: Path, what: str):
    """``np.load(path)``, never unpickling, after checking that the file is NumPy's format: numpy
    calls any other file (a text file, random bytes) "pickled data" and suggests
    ``allow_pickle=True``, which gnngp never uses on a data file."""
    with open(path, "rb") as f:
        head = f.read(6)
    npz = path.suffix == ".npz"
    if not head.startswith(b"PK" if npz else b"\x93NUMPY"):
        raise DatasetError(f"{what} file {path} is not a NumPy {path.suffix} file (its first bytes are not NumPy's header); "
                           f"save it with {'np.savez or scipy.sparse.save_npz' if npz else 'np.save'}")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as err:
        if "pickle" not in str(err):
            raise
        raise DatasetError(f"{what} file {path} holds Python objects (an object array), which gnngp never unpickles (a data file "
                           "is untrusted input); save a numeric array with np.save") from None


def _read_features(path: Path) -> torch.Tensor:
    try:
        if path.suffix == ".npz":
            with _load(path, "feature") as z:
                sparse = {"format", "shape"} <= set(z.files)   # what scipy.sparse.save_npz writes
                if not sparse and len(z.files) != 1:
                    raise DatasetError(f"feature file {path} holds {len(z.files)} arrays; save one array (np.savez) or a scipy sparse matrix (scipy.sparse.save_npz)")
                array = None if sparse else z[z.files[0]]
                if not sparse and not isinstance(array, np.ndarray):   # a zip of another file (a.txt), named .npz
                    raise DatasetError(f"feature file {path} holds {z.files[0]}, which is not a NumPy array; save the features with "
                                       "np.savez or scipy.sparse.save_npz")
            if sparse:
                array = _densified(path)
        else:
            array = _load(path, "feature")
    except DatasetError:
        raise
    except Exception as err:  # noqa: BLE001 - numpy raises many types for bad files
        if "allow_pickle" in str(err):   # an object array inside an .npz (read when its member is)
            raise DatasetError(f"feature file {path} holds Python objects (an object array), which gnngp never unpickles (a data file "
                               "is untrusted input); save a numeric array") from None
        raise DatasetError(f"feature file {path} could not be read ({type(err).__name__}: {err}); save it with np.save or scipy.sparse.save_npz") from err
    if np.issubdtype(array.dtype, np.complexfloating):
        raise DatasetError(f"feature file {path} holds complex numbers ({array.dtype}); gnngp needs real features: store the real and imaginary parts as separate columns")
    if array.dtype == np.bool_:
        array = array.astype(np.float32)   # binary features: True -> 1.0, False -> 0.0
    if not np.issubdtype(array.dtype, np.number):
        raise DatasetError(f"feature file {path} holds {array.dtype} values; it must hold numbers (or booleans)")
    if array.ndim != 2:
        raise DatasetError(f"feature file {path} must be a 2-D array (nodes x features), got shape {array.shape}")
    if array.shape[0] == 0:
        raise DatasetError(f"feature file {path} has no rows: the graph has no nodes; give one row of features per node")
    if array.shape[1] == 0:   # every kernel of zero features is zero: predictions from nothing
        raise DatasetError(f"feature file {path} has no columns: the nodes have no features; give at least one "
                           "(without features of your own, a column of ones: np.ones((n, 1)))")
    if not np.isfinite(array).all():
        raise DatasetError(f"feature file {path} contains NaN or infinite values; clean them first")
    return torch.from_numpy(np.asarray(array, dtype=wide_enough(array.dtype)))


def _densified(path: Path) -> np.ndarray:
    """A scipy sparse feature file, dense, once its structure is checked: scipy's loader trusts
    the file's column indices, and ``toarray`` writes wherever they point (a segfault)."""
    import scipy.sparse as sp

    try:
        matrix = sp.load_npz(path)
        if hasattr(matrix, "check_format"):   # CSR, CSC, BSR: indptr, and every index within the shape (COO checks on loading)
            matrix.check_format(full_check=True)
    except (ValueError, KeyError, TypeError) as err:
        raise DatasetError(f"feature file {path} holds a sparse matrix whose structure is broken ({err}); it was not read: "
                           "save it again with scipy.sparse.save_npz") from None
    return matrix.toarray()


def _declared(stream) -> tuple[tuple, np.dtype]:
    """The shape and dtype a ``.npy`` stream's header declares (its data not read)."""
    shape, _, dtype, _ = npy_header(stream)
    return tuple(int(v) for v in shape), np.dtype(dtype)


def declared_feature_bytes(options) -> tuple[float, str]:
    """What reading a custom graph's features allocates at its peak, from the sizes its file
    declares, before any of it is read: the array as stored (a sparse file: dense, as it is
    densified) and its copy as float32 or float64. ``(0, ...)`` where the file cannot be read
    so far: the loader names what is wrong with it."""
    import zipfile

    folder = Path(str(options.path or "")).expanduser()
    what = f"the features of {folder}"
    try:
        path = next(p for p in (folder / "features.npy", folder / "features.npz") if p.is_file())
        if path.suffix == ".npy":
            with open(path, "rb") as f:
                shape, dtype = _declared(f)
        else:
            with zipfile.ZipFile(path) as z:
                names = set(z.namelist())
                if {"shape.npy", "data.npy"} <= names:   # scipy.sparse.save_npz: densified to its shape
                    with z.open("shape.npy") as f:
                        shape = tuple(int(v) for v in np.lib.format.read_array(f, allow_pickle=False).reshape(-1)[:2])
                    with z.open("data.npy") as f:
                        dtype = _declared(f)[1]
                elif len(names) == 1:
                    with z.open(next(iter(names))) as f:
                        shape, dtype = _declared(f)
                else:
                    return 0.0, what
    except (StopIteration, OSError, ValueError, zipfile.BadZipFile, EOFError):
        return 0.0, what
    if not shape or any(v < 0 for v in shape):
        return 0.0, what
    count = float(np.prod([float(v) for v in shape]))
    wide = 4 if dtype.kind == "b" or (dtype.kind in "iuf" and dtype.itemsize <= 2) or dtype == np.float32 else 8
    shown = " x ".join(f"{v:,}" for v in shape)
    return count * (dtype.itemsize + wide), f"{what} ({path.name} declares {shown} {dtype} values)"


def wide_enough(dtype: np.dtype) -> type:
    """float32 for what it holds exactly (float16/32, integers to 16 bits), else float64: a
    float64 file keeps its precision (``dtype=float64`` runs then see every digit; a float32 run
    rounds once, where it always did)."""
    return np.float32 if dtype in (np.float16, np.float32, np.int8, np.uint8, np.int16, np.uint16) else np.float64


NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE | re.ASCII)
MISSING = {"", "na", "n/a", "#n/a", "nan", "-nan", "null", "none", "<na>"}   # pandas' spellings of a missing value (R writes NA)
FIELDS = re.compile(r"\s*[,;\t]\s*|\s+")


def _label_lines(path: Path) -> np.ndarray:
    """``labels.csv``: one value a line, an optional header. A blank (or whitespace) line, or a
    missing value as pandas spells it (``NA``, ``null``...), is a node without a label (NaN),
    never a line to skip, which would move every later label onto the node before it (pandas
    skips blank lines, a first one even when told not to); blank lines at the end, and before a
    header, are no nodes. Whole numbers are int64, other numbers float64, anything else text
    (refused by the caller)."""
    lines = [line.strip().strip('"').strip("'").strip() for line in path.read_text(encoding="utf-8-sig").splitlines()]   # -sig: Excel's BOM
    while lines and not lines[-1]:
        lines.pop()
    for number, line in enumerate(lines, 1):   # before the header's test: "0\t1" is two values, not a header
        if len(FIELDS.split(line)) > 1:
            raise DatasetError(f"label file {path} has several values on line {number} ({line[:40]!r}); it needs one value per line")
    first = next((index for index, line in enumerate(lines) if line), None)
    if first is not None and lines[first].lower() not in MISSING and not NUMBER.fullmatch(lines[first]) and re.search("[A-Za-z]", lines[first]):
        lines = lines[first + 1:]   # a header: a word, not a number (blank lines above it are no nodes)
    if any(line.lower() not in MISSING and not NUMBER.fullmatch(line) for line in lines):
        return np.asarray(lines, dtype=object)   # class names: the caller says to write integer ids
    values = [None if line.lower() in MISSING else line for line in lines]
    if all(v is not None and re.fullmatch(r"[+-]?\d+", v) for v in values):
        too_big = next((v for v in values if abs(int(v)) > np.iinfo(np.int64).max), None)
        if too_big is not None:
            raise DatasetError(f"label file {path} holds {too_big[:30]}, beyond a 64-bit integer; class ids are 0..C-1 "
                               "(renumber them), and a regression target is written as a decimal number")
        return np.asarray([int(v) for v in values], dtype=np.int64)
    return np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def _read_labels(path: Path) -> np.ndarray:
    try:
        if path.suffix == ".npy":
            labels = _load(path, "label")
        else:
            labels = _label_lines(path)
    except DatasetError:
        raise
    except Exception as err:  # noqa: BLE001
        raise DatasetError(f"label file {path} could not be read ({type(err).__name__}: {err}); use labels.npy or a one-column labels.csv") from err
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise DatasetError(f"label file {path} holds an array of shape {labels.shape}; it needs one label per node (shape (n,) or (n, 1))")
    if labels.dtype == np.bool_:
        labels = labels.astype(np.int64)
    if np.issubdtype(labels.dtype, np.complexfloating) or not np.issubdtype(labels.dtype, np.number):
        named = labels.dtype.kind in "OUS"   # class names: text
        raise DatasetError(f"label file {path} must hold real numbers, got {labels.dtype}"
                           + ("; write each class as an integer id 0..C-1 (e.g. pandas' factorize of the names)" if named else ""))
    return labels


def _read_mask(path: Path, n: int) -> torch.Tensor:
    """A boolean (or 0/1) node mask saved with ``np.save``; never unpickled."""
    try:
        mask = _load(path, "mask")
    except DatasetError:
        raise
    except Exception as err:  # noqa: BLE001 - numpy raises many types for bad files
        raise DatasetError(f"mask file {path} could not be read ({type(err).__name__}: {err}); save a boolean array with np.save (no pickles)") from err
    mask = np.asarray(mask).reshape(-1)
    if mask.dtype != np.bool_:
        if not np.issubdtype(mask.dtype, np.number) or np.issubdtype(mask.dtype, np.complexfloating) or not np.isin(mask, (0, 1)).all():
            raise DatasetError(f"mask file {path} must hold booleans (or 0/1), got {mask.dtype} values; save a boolean array with np.save")
    if mask.shape[0] != n:
        raise DatasetError(f"mask file {path} has length {mask.shape[0]} but the graph has {n} nodes")
    return torch.from_numpy(mask.astype(bool))


def _nodes(count: int) -> str:
    return f"{count:,} node" + ("s" if count != 1 else "")


def load_custom(path: Optional[str], task: Optional[str], train_ratio: float, val_ratio: float, seed: int) -> Data:
    if not path:
        raise DatasetError("dataset=custom needs dataset.path=<dir> holding edges.csv, features.npy|npz and labels.npy|csv")
    folder = Path(path)
    try:
        folder.stat()
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:   # pathlib's is_file raises it (it swallows only a missing path)
            raise DatasetError(f"dataset.path={path[:60]}... is too long a path ({err.strerror}); give the folder by a shorter path") from None
    if folder.is_file():   # the path of one of its files
        raise DatasetError(f"dataset.path={folder} is a file; give the folder that holds edges.csv, features and labels "
                           f"(dataset.path={folder.parent})")
    if not folder.is_dir():
        raise DatasetError(f"custom dataset folder {folder} does not exist; set dataset.path to a folder holding edges.csv, features and labels")
    digest = files_digest(path)   # the files as they are read: the same before and after, or they changed meanwhile
    x = _read_features(_one_of(folder, ("features.npy", "features.npz"), "features"))
    n = x.size(0)
    label_path = _one_of(folder, ("labels.npy", "labels.csv"), "labels")
    labels = _read_labels(label_path)
    if labels.shape[0] != n:
        hint = ("; a blank line is a node without a label, but blank lines at the end are none: write nan on a last node without one"
                if label_path.suffix == ".csv" and labels.shape[0] < n else "")
        raise DatasetError(f"label file {label_path} has {labels.shape[0]} labels but the features have {n} rows; every file must agree on "
                           f"the node count{hint}")
    notes = []
    missing = int(np.isnan(labels).sum()) if np.issubdtype(labels.dtype, np.floating) else 0
    if not task and whole_number_floats(labels):
        blank = f" (and NaN on {_nodes(missing)})" if missing else ""
        notes.append(f"label file {label_path} holds floating-point values, so this is regression (metric r2), though every value{blank} is a "
                     "whole number; for classification save integer class ids (labels.astype(int)) or set dataset.task=classification")
    task = task or ("classification" if np.issubdtype(labels.dtype, np.integer) else "regression")
    if task == "classification":
        if missing:
            raise DatasetError(f"label file {label_path} has NaN on {_nodes(missing)}, and classification needs a class id for every node "
                               "(any id for a node outside train/val/test: only active learning reads those); give each node a class id, "
                               "or set dataset.task=regression for real targets")
        with np.errstate(invalid="ignore"):   # inf's remainder is NaN: not a class id, and no warning of numpy's
            ids_ok = np.isfinite(labels) & (np.mod(labels, 1) == 0) & (labels >= 0) if np.issubdtype(labels.dtype, np.floating) else labels >= 0
        if not ids_ok.all():
            first = int(np.flatnonzero(~ids_ok)[0])
            unlabelled = ("; gnngp has no id for a node without a label (-1 here): give it one of the class ids yourself and leave it out of "
                          "the three masks (train_mask.npy, val_mask.npy, test_mask.npy), where no run reads it, but an active run "
                          "(active=<strategy>) may buy any node outside the test mask: leave such nodes out of the graph for one") if labels[first] == -1 else ""
            raise DatasetError(f"label file {label_path} must hold non-negative integer class ids for classification (it has "
                               f"{label_text(labels[first])}, first on node {first}){unlabelled}; set dataset.task=regression for real targets")
        ids, classes, renumbered = class_ids(labels, f"label file {label_path}")
        num_classes = int(classes.size)
        if renumbered:
            notes.append(f"{renumbered}; if they are real-valued targets, set dataset.task=regression")
        y = torch.from_numpy(ids)
    else:
        y = torch.from_numpy(labels.astype(wide_enough(labels.dtype)))
        num_classes = 0
    edge_path = _one_of(folder, ("edges.csv",), "edges")
    edge_index, loops = without_self_loops(make_undirected(read_edge_csv(edge_path, n, header=None), n))
    if loops:
        notes.append(f"edge file {edge_path} lists {_nodes(loops)} linked to itself; {SELF_LOOPS_LEFT_OUT}")
    if edge_index.numel() == 0:
        notes.append(f"edge file {edge_path} has no edges: every node is isolated, and the kernels read the features alone")
    data = Data(x=x, y=y, edge_index=edge_index)
    present = [m for m in MASKS if (folder / f"{m}.npy").is_file()]
    if present and len(present) != 3:
        raise DatasetError(f"custom dataset {folder} has {', '.join(present)} but not all of {', '.join(m + '.npy' for m in MASKS)}; give all three masks or none")
    if present:
        for m in MASKS:
            data[m] = _read_mask(folder / f"{m}.npy", n)
        data.split = "from files"
    else:
        for ratio, key, what in ((train_ratio, "train_ratio", "training"), (val_ratio, "val_ratio", "validation")):
            if ratio > 0 and round(ratio * n) < 1:   # said as the rounding it is, not as a missing ratio or mask
                raise DatasetError(f"dataset.{key}={ratio:g} of the {_nodes(n)} of {folder} rounds to no {what} node; give masks "
                                   f"(train_mask.npy, val_mask.npy, test_mask.npy) or dataset.{key} of at least {1 / n:.3g}")
        for key, mask in random_split(n, train_ratio, val_ratio, seed).items():
            data[f"{key}_mask"] = mask
        data.split = f"random {train_ratio}/{val_ratio}, seed {seed}"
    data.task, data.num_classes = task, num_classes
    if task == "classification" and bool(data.train_mask.any()):   # a class the training nodes lack is never predicted: its val/test
        # nodes are all errors (no training node at all: the job's one line says so, not a warning naming every class first)
        untrained = untrained_classes(y, data.train_mask, data.val_mask | data.test_mask)
        if untrained:
            notes.append(untrained_note([label_text(classes[c]) for c in untrained], f" of {label_path}"))
    if files_digest(path) != digest:   # written again while read: a row must not say which version it was computed on wrongly
        raise DatasetError(f"the files of {folder} changed while they were read; run again once they are written")
    for note in notes:   # said now, and kept for the result row's warnings
        print(f"gnngp: warning: {note}", file=sys.stderr)
    data.warnings, data.data_digest = notes, digest
    return data


@dataclass
class CustomConfig(DatasetConfig):
    name: str = "custom"
    path: Optional[str] = None          # the folder with edges.csv, features.npy|npz, labels.npy|csv


register_dataset("custom", "Custom", lambda options, store: load_custom(options.path, options.task, options.train_ratio, options.val_ratio, options.split_seed),
                 CustomConfig(), split="random", reads=declared_feature_bytes)
