"""ogbn-papers100M (111M nodes, 1.6B edges, 128 features, 172 classes, OGB's time split).

OGB's raw files: ``raw/data.npz`` (``edge_index`` 2 x E int64, ``node_feat`` N x 128),
``raw/node-label.npz`` (``node_label`` N x 1, NaN where unlabelled) and
``split/time/{train,valid,test}.csv.gz`` (node ids). The graph is made undirected, as for arxiv.

With ``compute=dask`` the files are streamed straight into row blocks (:func:`partition`): the
``.npy`` members of the archives are read in chunks (never whole), each edge goes in both
directions to a spill file of its row block, and each block is then merged and written on its
own, so no process holds the graph. ``compute=local`` (:func:`load`) reads everything into one
process, which suits only small graphs in this format.
"""
from __future__ import annotations

import gzip
import shutil
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np
import torch

from ..schema import DatasetConfig
from ..errors import DatasetError
from .container import GraphData as Data  # PyG's Data interface, without importing torch_geometric
from ..graph.operators import make_undirected
from .datasets import register_dataset
from .shards import ShardMeta, ShardWriter, block_dir, npy_header
from .store import DataStore

NAME = "ogbn_papers100M"
FILES = ("raw/data.npz", "raw/node-label.npz", "split/time/train.csv.gz", "split/time/valid.csv.gz", "split/time/test.csv.gz")
URL = "https://snap.stanford.edu/ogb/data/nodeproppred/papers100M-bin.zip"
SPLITS = {"train": "train", "val": "valid", "test": "test"}
CHUNK = 1 << 22


def folder(store: DataStore) -> Path:
    """The raw files: read in place from the mirror when it has them all (the archive is
    57 GB, so it is not copied), else from the cache (fetched there)."""
    if store.mirror is not None and all((store.mirror / NAME / f).is_file() for f in FILES):
        return store.mirror / NAME
    members = {f"papers100M-bin/{f}": f for f in FILES}

    def unpack(archive: Path, target: Path) -> None:
        with zipfile.ZipFile(archive) as z:
            for member, name in members.items():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                with z.open(member) as src, open(target / name, "wb") as dst:
                    shutil.copyfileobj(src, dst)

    return store.fetch(NAME, list(FILES), archive=(URL, unpack))


class NpyMember:
    """An array inside an ``.npz`` archive, read in chunks of rows (never unpickled)."""

    def __init__(self, path: Path, name: str):
        self.path, self.name = path, name
        try:
            self.zip = zipfile.ZipFile(path)
            with self.zip.open(f"{name}.npy") as f:
                self.shape, self.fortran, self.dtype, self.offset = npy_header(f)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as err:
            raise DatasetError(f"raw file {path} has no readable array '{name}' ({err}); delete it and fetch it again") from err

    def open(self) -> BinaryIO:
        f = self.zip.open(f"{self.name}.npy")
        f.seek(self.offset)
        return f

    def read(self, f: BinaryIO, count: int) -> np.ndarray:
        data = f.read(count * self.dtype.itemsize)
        if len(data) != count * self.dtype.itemsize:
            raise DatasetError(f"raw file {self.path}: array '{self.name}' is truncated; delete it and fetch it again")
        return np.frombuffer(data, dtype=self.dtype)

    def rows(self, size: int) -> Iterator[np.ndarray]:
        """Consecutive row ranges of ``size`` rows (C order)."""
        if self.fortran and len(self.shape) > 1 and self.shape[1] > 1:
            raise DatasetError(f"raw file {self.path}: '{self.name}' is stored column-major; rewrite it in C order")
        width = int(np.prod(self.shape[1:])) if len(self.shape) > 1 else 1
        with self.open() as f:
            for start in range(0, self.shape[0], size):
                n = min(size, self.shape[0] - start)
                yield self.read(f, n * width).reshape((n,) + tuple(self.shape[1:]))


def edge_chunks(path: Path) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(sources, targets)`` of ``edge_index`` (2 x E) in chunks, from two streams."""
    member = NpyMember(path, "edge_index")
    if len(member.shape) != 2 or member.shape[0] != 2:
        raise DatasetError(f"raw file {path}: edge_index has shape {member.shape}, not (2, E)")
    e = member.shape[1]
    if member.fortran:  # pairs interleaved
        with member.open() as f:
            for start in range(0, e, CHUNK):
                pairs = member.read(f, 2 * min(CHUNK, e - start)).reshape(-1, 2)
                yield pairs[:, 0], pairs[:, 1]
        return
    with member.open() as sources, member.open() as targets:
        targets.seek(member.offset + e * member.dtype.itemsize)
        for start in range(0, e, CHUNK):
            n = min(CHUNK, e - start)
            yield member.read(sources, n), member.read(targets, n)


def _split_ids(root: Path, key: str) -> Iterator[np.ndarray]:
    path = root / "split" / "time" / f"{SPLITS[key]}.csv.gz"
    try:
        import pandas as pd   # when a split file is read: importing the registries stays light

        for chunk in pd.read_csv(path, header=None, chunksize=CHUNK, dtype=np.int64):
            yield chunk[0].to_numpy()
    except (OSError, ValueError, EOFError, gzip.BadGzipFile) as err:
        raise DatasetError(f"raw file {path} is corrupt or truncated ({err}); delete it and fetch it again") from err


def partition(options: Any, store: DataStore, out: Path, rows: int, source: str) -> ShardMeta:
    """Stream the raw files into row blocks of ``rows`` nodes (see the module docstring)."""
    root = folder(store)
    features = NpyMember(root / "raw" / "data.npz", "node_feat")
    labels = NpyMember(root / "raw" / "node-label.npz", "node_label")
    n = features.shape[0]
    if labels.shape[0] != n:
        raise DatasetError(f"{root}: node_feat has {n} rows but node_label has {labels.shape[0]}; the raw files do not belong together")
    writer = ShardWriter(out, n, rows)
    spill = Path(out) / "spill"
    spill.mkdir(parents=True, exist_ok=True)
    for src, dst in edge_chunks(root / "raw" / "data.npz"):
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise DatasetError(f"{root}/raw/data.npz: an edge names a node outside [0, {n})")
        both = np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])], axis=1).astype(np.int64)
        both = both[np.argsort(both[:, 0] // rows, kind="stable")]
        bounds = np.searchsorted(both[:, 0] // rows, np.arange(writer.num_blocks + 1))
        for b in np.nonzero(np.diff(bounds))[0]:
            with open(spill / f"{b}.bin", "ab") as f:
                f.write(both[bounds[b]:bounds[b + 1]].tobytes())
    for b in range(writer.num_blocks):
        path = spill / f"{b}.bin"
        edges = np.fromfile(path, dtype=np.int64).reshape(-1, 2) if path.exists() else np.zeros((0, 2), np.int64)
        writer.write_edges(b, edges[:, 0], edges[:, 1], merge_duplicates=True)
        path.unlink(missing_ok=True)
    shutil.rmtree(spill, ignore_errors=True)
    num_classes = 0
    for b, (x, y) in enumerate(zip(features.rows(rows), labels.rows(rows))):
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        labelled = np.isfinite(y)
        if labelled.any():
            num_classes = max(num_classes, int(y[labelled].max()) + 1)
        writer.write_nodes(b, x, np.where(labelled, y, 0).astype(np.int64), np.zeros(x.shape[0], np.uint8))
    for bit, key in ((1, "train"), (2, "val"), (4, "test")):
        for ids in _split_ids(root, key):
            if ids.size and (ids.min() < 0 or ids.max() >= n):
                raise DatasetError(f"{root}/split/time/{SPLITS[key]}.csv.gz names a node outside [0, {n})")
            ids = np.sort(ids)
            bounds = np.searchsorted(ids // rows, np.arange(writer.num_blocks + 1))
            for b in np.nonzero(np.diff(bounds))[0]:
                path = block_dir(out, b) / "mask.npy"
                mask = np.load(path, mmap_mode="r+", allow_pickle=False)
                mask[ids[bounds[b]:bounds[b + 1]] - b * rows] |= bit
                mask.flush()
                del mask
    return writer.finish("papers100m", int(features.shape[1]), num_classes, "classification", "ogb time", source)


def load(options: Any, store: DataStore) -> Data:
    """The whole graph in this process (small graphs in this format; the real one needs compute=dask)."""
    root = folder(store)
    x = np.concatenate(list(NpyMember(root / "raw" / "data.npz", "node_feat").rows(CHUNK)))
    y = np.concatenate(list(NpyMember(root / "raw" / "node-label.npz", "node_label").rows(CHUNK))).astype(np.float64).reshape(-1)
    chunks = list(edge_chunks(root / "raw" / "data.npz"))
    n = x.shape[0]
    edge_index = torch.from_numpy(np.stack([np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])]).astype(np.int64))
    labelled = np.isfinite(y)
    data = Data(x=torch.from_numpy(x.astype(np.float32)), y=torch.from_numpy(np.where(labelled, y, 0).astype(np.int64)),
                edge_index=make_undirected(edge_index, n))
    mask = np.zeros(n, np.uint8)
    for bit, key in ((1, "train"), (2, "val"), (4, "test")):
        for ids in _split_ids(root, key):
            mask[ids] |= bit
    for bit, key in ((1, "train"), (2, "val"), (4, "test")):
        data[f"{key}_mask"] = torch.from_numpy((mask & bit) > 0)
    data.task, data.num_classes = "classification", int(y[labelled].max()) + 1 if labelled.any() else 0
    data.split = "ogb time"
    return data


register_dataset("papers100m", "ogbn-papers100M", load,
                 DatasetConfig(name="papers100m", landmark_count=256, large=True), partition=partition)
