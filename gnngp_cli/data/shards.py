"""A graph on disk as row blocks: the input of ``compute=dask`` (written by ``gnngp partition``).

Nodes ``[b R, (b+1) R)`` form row block ``b`` (``R = partition.rows``). Each block is one folder
of plain ``.npy`` files, so a worker reads its own block (memory-mapped, never unpickled) and
nothing else:

- ``x.npy`` (float32, ``R x d``; float64 for float64 features), ``y.npy`` (int64 classes or float64 targets), ``mask.npy``
  (uint8: bit 0 train, bit 1 validation, bit 2 test);
- the rows of ``I + A`` (undirected, duplicates merged, the unit self-loop added on top of any
  in the edge list, as :func:`~gnngp_cli.graph.operators.normalized_adjacency`): ``rows.npy`` (row
  within the block), ``cols.npy`` (column within its source block), ``weights.npy`` (float64),
  sorted by source block, and ``split.npy``: the entries of source block ``j`` are
  ``split[j]:split[j+1]``, so the product with ``Q``'s row block ``j`` reads one slice;
- ``deg.npy``: the row sums of ``I + A`` (float64), from which either normalisation is row-local:
  ``A_sym Q = D^-1/2 ((I + A) (D^-1/2 Q))`` and ``A_row Q = D^-1 ((I + A) Q)``;
- with ``data.order=rcm|metis``, the nodes are numbered by that order (neighbours close, so a
  block's ``A Q`` reads fewer rows of other blocks) and ``ids.npy`` (int64) holds each row's
  own node id: the training ids, and so the landmarks, are taken in the graph's own order.

``meta.json`` names the dataset, its config, the node, edge, feature and class counts and the
block size, and the sha256 of every block file, written last; :func:`changed_files` checks them
(a job does so once, on the client, before it reads a block: 0.3 s for the 307 MB of a
10^6-node csbm, measured). Why ``.npy`` rather than Zarr or Parquet: each block is written once and read whole
(or one contiguous slice), which is exactly what ``.npy`` with ``mmap_mode`` gives, with no new
dependency and no chunking layer to tune; every tool (numpy, Dask, a shell) can read the files.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Optional

import numpy as np
import torch

from ..errors import DatasetError
from .digests import sha256
from .trust import make_private_dirs
from ..graph.orders import positions

FORMAT = "gnngp-shards"
VERSION = 3   # 2: whether the graph is a stand-in, its fixed splits, its loader's warnings; 3: every block file's sha256
TRAIN, VAL, TEST = 1, 2, 4


@dataclass(frozen=True)
class ShardMeta:
    dataset: str
    num_nodes: int
    num_edges: int            # directed edges of the undirected graph, without the added self-loops
    rows: int                 # nodes per row block (the last one may hold fewer)
    num_features: int
    num_classes: int
    task: str
    split: str = ""
    source: str = ""          # the dataset config the shards were written from
    stand_in: str = ""        # a csbm stand-in's description (the graph is not the dataset's own)
    num_splits: Optional[int] = None   # fixed splits of the dataset (splits=all runs each)
    warnings: tuple = ()      # what the loader warned of (e.g. a single training class), for every run's row
    order: str = "none"       # data.order the nodes were numbered by (rcm, metis: each block's ids.npy holds its nodes' own ids)
    source_rows: tuple = ()   # per row block, the distinct nodes its A Q reads (the rows of Q a task gathers)
    inputs: tuple = ()        # the files the graph was read from: (path, size, mtime_ns, sha256) each (:func:`stale_inputs`)

    @property
    def num_blocks(self) -> int:
        return -(-self.num_nodes // self.rows)

    def block_rows(self, b: int) -> int:
        return min(self.rows, self.num_nodes - b * self.rows)

    def block_start(self, b: int) -> int:
        return b * self.rows


def block_dir(root: Path, b: int) -> Path:
    return Path(root) / f"block-{b:06d}"


def read_meta(root: Path) -> ShardMeta:
    path = Path(root) / "meta.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DatasetError(f"{path} is missing or unreadable ({err}); write the shards with gnngp partition dataset=<name> out={root}") from err
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise DatasetError(f"{root} does not hold gnngp shards of version {VERSION}; write them again with gnngp partition")
    wrong = _wrong_fields(raw)
    if wrong:
        raise DatasetError(f"{path}: {wrong}; write the shards again with gnngp partition")
    meta = ShardMeta(**{k: raw[k] for k in ShardMeta.__dataclass_fields__ if k in raw})
    meta = replace(meta, warnings=tuple(meta.warnings), source_rows=tuple(meta.source_rows), inputs=tuple(tuple(i) for i in meta.inputs))
    found = _block_count(Path(root))
    if found != meta.num_blocks:   # before any task is built: num_nodes=10^9 would make 10^6 row-block tasks
        raise DatasetError(f"{path} says {meta.num_nodes:,} nodes in row blocks of {meta.rows:,}, so {meta.num_blocks:,} row blocks, "
                           f"and {root} holds {found:,}; write the shards again with gnngp partition")
    last = meta.num_blocks - 1
    try:
        held = load_npy(block_dir(root, last) / "x.npy", mmap=True).shape[0]
    except (OSError, ValueError):
        held = None   # a missing block file is named by the digest check, or by the task that reads it
    if held is not None and held != meta.block_rows(last):
        raise DatasetError(f"{path} says {meta.num_nodes:,} nodes, so {meta.block_rows(last):,} in the last row block, and its x.npy holds "
                           f"{held:,}; write the shards again with gnngp partition")
    return meta


COUNTS = {"num_nodes": 1, "num_edges": 0, "rows": 1, "num_features": 0, "num_classes": 0}   # each count's least valid value
TEXTS = ("dataset", "task", "split", "source", "stand_in", "order")


def _wrong_fields(raw: dict) -> str:
    """What is wrong with ``meta.json``'s fields (``""``: nothing): a count that is not a whole
    number at least its least value, a text that is not text, a list that is not a list."""
    missing = [k for k in ("dataset", *COUNTS, "task") if k not in raw]
    if missing:
        return f"it has no {', '.join(missing)}"
    for key, least in COUNTS.items():
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"{key}={value!r} is not a whole number of at least {least}"
    for key in TEXTS:
        if key in raw and not isinstance(raw[key], str):
            return f"{key}={raw[key]!r} is not text"
    for key in ("warnings", "source_rows", "inputs"):
        if key in raw and not isinstance(raw[key], list):
            return f"{key}={raw[key]!r} is not a list"
    for item in raw.get("inputs", []):
        if not (isinstance(item, list) and len(item) == 4 and isinstance(item[0], str) and isinstance(item[3], str)
                and all(isinstance(v, int) and not isinstance(v, bool) for v in item[1:3])):
            return f"inputs holds {str(item)[:60]}, not [path, size, mtime_ns, sha256]"
    if raw.get("num_splits") is not None and (isinstance(raw["num_splits"], bool) or not isinstance(raw["num_splits"], int)):
        return f"num_splits={raw['num_splits']!r} is not a whole number"
    return ""


def _block_count(root: Path) -> int:
    """How many ``block-*`` folders ``root`` holds."""
    try:
        return sum(1 for entry in os.scandir(root) if entry.name.startswith("block-") and entry.is_dir(follow_symlinks=False))
    except OSError:
        return 0


_HEADER_LOCK = threading.Lock()


def load_npy(path: Any, mmap: bool) -> np.ndarray:
    """One ``.npy`` file (never unpickled), from any number of threads at once (a Dask worker's):
    numpy parses the header with ``ast.literal_eval``, which CPython 3.11 cannot run in two
    threads at once (gh-106905: ``SystemError: AST constructor recursion depth mismatch``), so the
    header is read under a lock and the data, memory-mapped or copied, outside it."""
    with _HEADER_LOCK:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    return array if mmap else np.array(array)


def npy_header(f: BinaryIO) -> tuple:
    """``(shape, fortran_order, dtype, data offset)`` of the ``.npy`` stream ``f`` from its header,
    none of its data read; an object array raises (reading it would need unpickling)."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    if dtype.hasobject:
        raise ValueError("object arrays are not read (they would need unpickling)")
    return shape, fortran, dtype, f.tell()


def load_part(root: Path, b: int, name: str, mmap: bool = True) -> np.ndarray:
    """One array of block ``b`` (memory-mapped; never unpickled)."""
    path = block_dir(root, b) / f"{name}.npy"
    try:
        return load_npy(path, mmap)
    except (OSError, ValueError) as err:
        raise DatasetError(f"shard file {path} is missing or corrupt ({err}); write the shards again with gnngp partition") from err


def check_edges(root: Path, b: int, split: np.ndarray, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, count: int) -> None:
    """Refuse block ``b``'s entries unless ``split`` cuts them into source blocks in order, the
    four files agree on their count and every row lies in the block's ``count`` rows."""
    folder = block_dir(root, b)
    size = int(np.shape(rows)[0]) if np.ndim(rows) == 1 else -1
    if split.ndim != 1 or split.size < 1 or split[0] != 0 or np.any(np.diff(split) < 0) or split[-1] != size \
            or np.shape(cols) != (size,) or np.shape(weights) != (size,):
        raise DatasetError(f"shard files {folder}/split.npy, rows.npy, cols.npy and weights.npy do not agree (entries out of order "
                           "or of different counts); write the shards again with gnngp partition")
    if size and (int(np.min(rows)) < 0 or int(np.max(rows)) >= count):
        raise DatasetError(f"shard file {folder}/rows.npy names a row outside the block's {count:,} rows; write the shards again with gnngp partition")


def check_columns(root: Path, b: int, j: int, columns: np.ndarray, source_rows: int) -> None:
    """Refuse block ``b``'s columns in source block ``j`` unless each is one of its ``source_rows``
    rows (a crafted ``cols.npy`` would index past a root block)."""
    if columns.size and (int(columns.min()) < 0 or int(columns.max()) >= source_rows):
        wrong = int(columns.max()) if int(columns.max()) >= source_rows else int(columns.min())
        raise DatasetError(f"shard file {block_dir(root, b)}/cols.npy names column {wrong} of source block {j}, which has "
                           f"{source_rows:,} rows; write the shards again with gnngp partition")


class ShardWriter:
    """Writes the shards of one graph block by block, then ``meta.json`` last (a folder without
    it is an interrupted write and is never read)."""

    def __init__(self, out: Path, num_nodes: int, rows: int):
        if rows < 1:
            raise DatasetError(f"partition.rows={rows} must be at least 1")
        self.out, self.num_nodes, self.rows = Path(out), num_nodes, rows
        self.num_blocks = -(-num_nodes // rows)
        foreign = foreign_files(self.out)
        if foreign:
            raise DatasetError(f"{self.out} holds files gnngp partition did not write ({', '.join(foreign[:3])}"
                               f"{' and more' if len(foreign) > 3 else ''}); give an empty or new folder for the shards")
        if (self.out / "meta.json").exists():
            (self.out / "meta.json").unlink()
        make_private_dirs(self.out)
        self.num_edges = 0

    def write_edges(self, b: int, rows: np.ndarray, cols: np.ndarray, merge_duplicates: bool = False) -> None:
        """The edges of block ``b`` (``rows`` global ids inside the block, ``cols`` global ids),
        as the local path reads them: a repeated edge adds its weight (``merge_duplicates``:
        counts once, as an edge list made undirected does), then the unit self-loop is added
        on top; sorted by source block, then row, then column."""
        start, count = b * self.rows, min(self.rows, self.num_nodes - b * self.rows)
        key = (rows.astype(np.int64) - start) * self.num_nodes + cols.astype(np.int64)
        if merge_duplicates:
            key = np.unique(key)
        self.num_edges += int(key.size)
        loops = np.arange(count, dtype=np.int64)
        key, weights = np.unique(np.concatenate([key, loops * self.num_nodes + loops + start]), return_counts=True)
        save_edges(block_dir(self.out, b), key // self.num_nodes, key % self.num_nodes, weights.astype(np.float64), count, self.rows, self.num_blocks)

    def write_nodes(self, b: int, x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> None:
        folder = block_dir(self.out, b)
        make_private_dirs(folder)
        _save(folder / "x.npy", np.ascontiguousarray(x, dtype=np.float64 if x.dtype == np.float64 else np.float32))
        _save(folder / "y.npy", y)
        _save(folder / "mask.npy", mask.astype(np.uint8))

    def finish(self, dataset: str, num_features: int, num_classes: int, task: str, split: str = "", source: str = "",
               stand_in: str = "", num_splits: Optional[int] = None, warnings: tuple = (), order: str = "none",
               source_rows: tuple = ()) -> ShardMeta:
        meta = ShardMeta(dataset, self.num_nodes, self.num_edges, self.rows, num_features, num_classes, task, split, source, stand_in,
                         num_splits, tuple(warnings), order, tuple(source_rows))
        _write_meta(self.out, {"format": FORMAT, "version": VERSION, **meta.__dict__,
                               "digests": file_digests(self.out, block_files(self.out, self.num_blocks))})
        return meta


def _write_meta(root: Path, raw: dict) -> None:
    """``meta.json`` of ``raw`` and its ``meta_digest``, written last and atomically (a reader never
    sees half of it, and shards without it are no shards)."""
    raw = {k: v for k, v in raw.items() if k != "meta_digest"}
    tmp = Path(root) / "meta.json.tmp"
    tmp.write_text(json.dumps({**raw, "meta_digest": meta_digest(raw)}, indent=1))
    _no_group_write(tmp)
    os.replace(tmp, Path(root) / "meta.json")


def foreign_files(out: Path) -> list[str]:
    """What a folder holds that is not gnngp's shards (their ``meta.json``, ``block-*`` folders of
    ``.npy`` files, ``operators``, and an interrupted write's ``meta.json.tmp``): writing shards
    there would replace a user's files."""
    if not out.is_dir():
        return []
    foreign = []
    for entry in sorted(out.iterdir()):
        if entry.name == "meta.json":
            try:
                ours = json.loads(entry.read_text()).get("format") == FORMAT
            except (OSError, ValueError, AttributeError):
                ours = False
            if not ours:
                foreign.append(entry.name)
        elif entry.name.startswith("block-") and entry.is_dir() and not entry.is_symlink():
            foreign += [f"{entry.name}/{p.name}" for p in entry.iterdir() if p.suffix != ".npy" or not p.is_file()]
        elif entry.name not in ("operators", "meta.json.tmp"):
            foreign.append(entry.name)
    return foreign


def block_files(root: Path, num_blocks: int) -> list[str]:
    """Every block file below ``root``, as ``block-000000/x.npy`` (sorted)."""
    return sorted(f"{block_dir(root, b).name}/{p.name}" for b in range(num_blocks) for p in block_dir(root, b).glob("*.npy"))


def meta_digest(raw: dict) -> str:
    """sha256 of ``meta.json``'s fields (its own ``meta_digest`` left out), keys sorted."""
    return hashlib.sha256(json.dumps({k: v for k, v in raw.items() if k != "meta_digest"}, sort_keys=True).encode()).hexdigest()


def file_digests(root: Path, names: list[str]) -> dict[str, str]:
    return {name: sha256(Path(root) / name) for name in names}


def stored_meta_digest(root: Path) -> str:
    """The ``meta_digest`` that ``meta.json`` holds (empty when it holds none)."""
    try:
        return str(json.loads((Path(root) / "meta.json").read_text()).get("meta_digest", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def changed_files(root: Path, meta: ShardMeta) -> list[str]:
    """The files of ``root`` that are not the ones ``gnngp partition`` wrote: ``meta.json`` whose
    fields were edited (a task, a count), and block files changed, missing or added since, each
    as ``<path> (sha256 <now>, written <then>)``."""
    path = Path(root) / "meta.json"
    try:
        raw = json.loads(path.read_text())
        written = raw["digests"]
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{path} (no digests)"]
    if raw.get("meta_digest") != meta_digest(raw):
        return [f"{path} (its fields are not the ones written: sha256 {meta_digest(raw)[:12]}, written {str(raw.get('meta_digest'))[:12]})"]
    return [f"{Path(root) / name} (sha256 {now[:12]}, written {str(written.get(name, 'never'))[:12]})"
            for name, now in differing_files(root, written, block_files(root, meta.num_blocks))]


def input_record(path: Path, digest: Optional[str] = None) -> list:
    """``[path, size, mtime_ns, sha256]`` of a file the graph is read from (``digest``: its
    sha256 where the loader has it already)."""
    path = Path(path).absolute()
    stat = path.stat()
    return [str(path), int(stat.st_size), int(stat.st_mtime_ns), digest or sha256(path)]


def record_inputs(root: Path, inputs: list[list]) -> ShardMeta:
    """Add to the shards' ``meta.json`` the files the graph was read from (:func:`input_record`
    each), its ``meta_digest`` computed again (:func:`_write_meta`)."""
    raw = json.loads((Path(root) / "meta.json").read_text())
    _write_meta(root, {**raw, "inputs": [list(item) for item in inputs]})
    return read_meta(root)


def stale_inputs(meta: ShardMeta) -> list[str]:
    """The files the shards were written from that hold other bytes now (their sha256 differs:
    the graph the shards hold is not the one the files give). A file whose size and modification
    time are the ones recorded is taken as unchanged without reading it; a file removed from a
    folder that is here is named, one whose folder is not here either (the shards were written on
    another machine) cannot be compared and is not. A recorded folder (a custom graph's) is
    compared by the names of the files it holds."""
    stale = []
    for path, size, mtime_ns, digest in meta.inputs:
        if os.path.isdir(path):   # a folder of inputs (a custom graph's): the files it holds, by name
            if folder_listing(Path(path)) != digest:
                stale.append(f"{path} (its files)")
            continue
        try:
            stat = os.stat(path)
            if (stat.st_size, stat.st_mtime_ns) == (size, mtime_ns) or sha256(Path(path)) == digest:
                continue
        except OSError:
            if not os.path.isdir(os.path.dirname(path)):   # its folder is not here either: written elsewhere, cannot be compared
                continue
        stale.append(path)   # other bytes, or removed from a folder that is here
    return stale


def folder_listing(folder: Path) -> str:
    """sha256 of the names of the regular files directly in ``folder`` (a custom graph's files:
    one added, such as masks, or one renamed, makes another graph)."""
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def differing_files(root: Path, written: dict, present: list[str]) -> list[tuple[str, str]]:
    """``(name, sha256 now or "missing")`` of each file under ``root``, written or present, whose
    digest is not the one ``written`` records (missing, added or changed since)."""
    out = []
    for name in sorted(set(written) | set(present)):
        try:
            now = sha256(Path(root) / name)
        except OSError:
            now = "missing"
        if now != written.get(name):
            out.append((name, now))
    return out


def _save(path: Path, array: np.ndarray) -> None:
    try:
        np.save(path, array, allow_pickle=False)
    except OSError as err:   # numpy's short write on a full disk says only "N requested and M written"
        if err.filename is not None:
            raise
        raise OSError(err.errno or 28, err.strerror or f"the disk is full: {err}", str(path)) from None
    _no_group_write(path)


def _no_group_write(path: Path) -> None:
    """Take group and others' write from a file just written: under a umask of 002 it would be
    group-writable, and the next run would not trust it (:mod:`.trust`)."""
    os.chmod(path, os.stat(path).st_mode & ~0o022)


def save_edges(folder: Path, local: np.ndarray, cols: np.ndarray, weights: np.ndarray, count: int, rows: int, num_blocks: int) -> None:
    """One row block's entries (``local`` rows within the block, ``cols`` global ids, sorted by
    row then column) in the shard layout: sorted by source block, ``split`` giving each source's
    slice, and ``deg``, the row sums of the weights."""
    deg = np.bincount(local, weights=weights, minlength=count)
    source = cols // rows
    order = np.argsort(source, kind="stable")
    local, cols, weights, source = local[order], cols[order], weights[order], source[order]
    split = np.searchsorted(source, np.arange(num_blocks + 1))
    folder = Path(folder)
    make_private_dirs(folder)
    _save(folder / "rows.npy", local.astype(np.int32))
    _save(folder / "cols.npy", (cols - source * rows).astype(np.int32))
    _save(folder / "weights.npy", weights)
    _save(folder / "split.npy", split.astype(np.int64))
    _save(folder / "deg.npy", deg)


def node_mask(train: Any, val: Any, test: Any) -> np.ndarray:
    return (np.asarray(train, dtype=np.uint8) * TRAIN) | (np.asarray(val, dtype=np.uint8) * VAL) | (np.asarray(test, dtype=np.uint8) * TEST)


def write_data(data: Any, out: Path, rows: int, dataset: str, source: str = "", order: Optional[torch.Tensor] = None,
               order_name: str = "none") -> ShardMeta:
    """Shards of a loaded graph (a PyG ``Data`` in this process: the datasets that fit in one
    process, and csbm graphs up to 10^7 nodes); with ``order`` (position -> node id, named
    ``order_name``), numbered by it, each block's ``ids.npy`` giving its rows' own ids."""
    n = int(data.num_nodes)
    writer = ShardWriter(out, n, rows)
    edge_index = data.edge_index
    if order is not None:
        edge_index = positions(order)[edge_index]
    row_block = edge_index[0] // rows
    by_block = torch.argsort(row_block, stable=True)
    counts = torch.bincount(row_block, minlength=writer.num_blocks).tolist()
    src, dst = edge_index[0][by_block].numpy(), edge_index[1][by_block].numpy()
    del by_block, row_block
    mask = node_mask(data.train_mask.numpy(), data.val_mask.numpy(), data.test_mask.numpy())
    x, y = data.x.numpy(), data.y.numpy()
    ids = np.arange(n, dtype=np.int64) if order is None else order.numpy()   # each position's own node id
    start_edge, source_rows = 0, []
    for b in range(writer.num_blocks):
        stop_edge = start_edge + counts[b]
        writer.write_edges(b, src[start_edge:stop_edge], dst[start_edge:stop_edge])
        source_rows.append(int(np.unique(np.concatenate([dst[start_edge:stop_edge], np.arange(b * rows, min(n, (b + 1) * rows))])).size))
        start_edge = stop_edge
        lo, hi = b * rows, min(n, (b + 1) * rows)
        own = slice(lo, hi) if order is None else ids[lo:hi]   # a block's rows, copied one block at a time
        writer.write_nodes(b, x[own], y[own], mask[own])
        if order is not None:
            _save(block_dir(out, b) / "ids.npy", np.ascontiguousarray(ids[lo:hi]))
    return writer.finish(dataset, int(data.x.size(1)), int(getattr(data, "num_classes", 0) or 0), data.task,
                         str(getattr(data, "split", "")), source, str(getattr(data, "stand_in", "") or ""), getattr(data, "num_splits", None),
                         tuple(getattr(data, "warnings", ()) or ()), order_name, tuple(source_rows))


def tell_warnings(root: Path, meta: ShardMeta) -> None:
    """Say again what the loader warned of when the shards were written (``meta.warnings``: a
    single training class, renumbered class ids), once, on a run that reads them instead of
    loading the graph (which would have said it): each as the loader's own ``gnngp: warning:`` line."""
    for note in meta.warnings:
        print(f"gnngp: warning: dataset '{meta.dataset}': {note} (said when the shards {root} were written)", file=sys.stderr)


def shards_match(root: Path, source: str) -> Optional[ShardMeta]:
    """The shards' meta when ``root`` holds complete shards written from the config ``source``."""
    try:
        meta = read_meta(root)
    except DatasetError:
        return None
    return meta if meta.source == source else None


def read_ids(root: Path, b: int, start: int, count: int, order: str) -> np.ndarray:
    """The graph's own ids of block ``b``'s rows (positions ``start .. start + count`` unless the
    shards were written in an order)."""
    if order == "none":
        return np.arange(start, start + count, dtype=np.int64)
    return np.asarray(load_part(root, b, "ids"))
