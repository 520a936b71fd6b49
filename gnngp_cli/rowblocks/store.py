"""Roots as row-block files: where a ``compute=dask`` run keeps each layer's ``N x r`` factor.

A root that a later step reads again (a layer's output, the operand of ``A Q``, the input root)
is written once, one ``.npy`` file per row block, into a folder that every worker sees (the
run's folder under ``compute.roots_dir``), and read back from there: whole blocks by row-local
tasks, and only the rows it needs by each output block of ``A Q``
(:meth:`~.graph.ShardedGraph.convolve`, memory-mapped). Writing replaces a file atomically, so a
task recomputed after a lost worker writes the same bytes again and no reader sees half a file.

Why files, and not roots persisted in the workers' memory: on a random graph every output block
of ``A Q`` reads every source block. Held by the workers, a root larger than their memory was
spilled by Dask and read back from disk, whole block by whole block, once for every group of
output blocks (at 10^7 nodes, 4 workers of 3 GB: 1,144 worker-seconds reading spilled blocks
and 1,993 moving partial products between workers, for 670 s of wall time). From files, a
worker reads only the rows an output block needs, the operating system caches what is read
often, and nothing moves between workers but small results. The folder is removed when the
evaluation is done (:meth:`RootStore.clear`) and when the run ends.
"""
from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ComputeError


def _write_block(block: np.ndarray, path: str) -> bool:
    """Write ``block`` to ``path`` (atomically); whether every entry is finite."""
    block = np.ascontiguousarray(block)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as f:
            np.save(f, block, allow_pickle=False)
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise ComputeError(f"cannot write root block {path} ({err.strerror or err}); compute.roots_dir needs room for the run's "
                           "roots (its estimate line says how much) and must be writable by every worker") from err
    return bool(np.isfinite(block).all())


def read_block(path: str, mmap: bool = False) -> np.ndarray:
    """One row block of a written root (never unpickled); ``mmap``: memory-mapped, read-only."""
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ComputeError(f"root block {path} is missing or unreadable ({err}); compute.roots_dir must be one folder that "
                           "every worker sees, with room for the run's roots") from err


def _rows_of(path: str, local: np.ndarray) -> np.ndarray:
    return np.array(read_block(path, mmap=True)[local])


class RootStore:
    """The row-block files of one run's roots, in ``<base>/<run id>/<array name>/<block>.npy``."""

    def __init__(self, base: Path):
        self.folder = Path(base) / f"run-{uuid.uuid4().hex[:12]}"
        try:
            self.folder.mkdir(parents=True, exist_ok=False)
        except OSError as err:
            raise ComputeError(f"cannot write the roots of this run into {base} ({err.strerror or err}); "
                               "set compute.roots_dir to a writable folder that every worker sees") from err
        self.paths: dict[str, list[str]] = {}

    def check_room(self, need_gib: float) -> None:
        """Refuse, before any work, a folder with less free space than ``need_gib``."""
        free = shutil.disk_usage(self.folder).free / 2**30
        if free < need_gib:
            raise ComputeError(f"compute.roots_dir={self.folder.parent} has {free:.1f} GiB free and this run writes about {need_gib:.1f} GiB "
                               "of roots at its peak; free space there or set compute.roots_dir to a folder with room that every worker sees")

    def written(self, q) -> Any:
        """``q`` (a Dask array chunked by row blocks), written to files unless it was read from
        them; returns ``(array read from the files, every entry finite)``."""
        import dask
        import dask.array as da

        if q.name in self.paths:
            return q, True
        if q.ndim == 2 and q.numblocks[1] != 1:
            q = q.rechunk({1: -1})
        folder = self.folder / q.name
        folder.mkdir(parents=True, exist_ok=True)
        paths = [str(folder / f"{b:05d}.npy") for b in range(q.numblocks[0])]
        flags = dask.compute(*[dask.delayed(_write_block, pure=True)(block, path) for block, path in zip(q.to_delayed().ravel(), paths)])
        blocks = [da.from_delayed(dask.delayed(read_block, pure=True)(path), shape=(rows, *q.shape[1:]), dtype=q.dtype)
                  for path, rows in zip(paths, q.chunks[0])]
        out = da.concatenate(blocks, axis=0)
        self.paths[out.name] = paths
        return out, all(flags)

    def files(self, q) -> tuple[list[str], Any]:
        """The block files of ``q`` (written first if need be) and the array read from them."""
        q, _ = self.written(q)
        return self.paths[q.name], q

    def gather_rows(self, q, nodes: np.ndarray) -> np.ndarray:
        """``q[nodes]`` on the client (``nodes`` sorted, few: the landmarks), each block's rows
        read by a task from its file."""
        import dask

        paths, q = self.files(q)
        starts = np.cumsum((0, *q.chunks[0]))
        parts = []
        for b, path in enumerate(paths):
            lo, hi = np.searchsorted(nodes, [starts[b], starts[b + 1]])
            if hi > lo:
                parts.append(dask.delayed(_rows_of, pure=True)(path, nodes[lo:hi] - starts[b]))
        rows = dask.compute(*parts)
        return np.concatenate(rows, axis=0) if rows else np.zeros((0, *q.shape[1:]), dtype=q.dtype)

    def clear(self) -> None:
        """Remove every file written so far (an evaluation is done)."""
        for name in list(self.paths):
            shutil.rmtree(Path(self.paths.pop(name)[0]).parent, ignore_errors=True)

    def close(self) -> None:
        self.paths.clear()
        shutil.rmtree(self.folder, ignore_errors=True)
