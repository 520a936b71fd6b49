"""A sharded graph as Dask collections: features, degrees, labels and masks by row block, and
the blocked sparse-dense product ``A Q``.

``A Q`` for row block ``b`` of the output reads only the row blocks ``j`` of ``Q`` whose nodes
are columns of ``A[b]``: one task per touched ``(b, j)`` computes ``(I + A)[b, j] (s_in Q_j)``
on the rows of ``b`` that have an entry in ``j`` (a slice of ``b``'s shard, sorted by source
block), and a tree of sums (fan-in :data:`FAN_IN`) adds them and scales the rows by ``s_out``:
``s_in = s_out = D^-1/2`` (symmetric) or ``s_in = 1, s_out = D^-1`` (row normalisation).
No task holds more than ``FAN_IN`` partial row blocks.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..data.shards import TRAIN, ShardMeta, load_part

FAN_IN = 8


def tree_reduce(parts: Sequence[Any], combine: Callable[..., Any], fan_in: int = FAN_IN) -> Any:
    """Reduce delayed ``parts`` with ``combine(*group)`` in a tree of fan-in ``fan_in``."""
    import dask

    parts = list(parts)
    while len(parts) > 1:
        parts = [dask.delayed(combine, pure=True)(*parts[i:i + fan_in]) if len(parts[i:i + fan_in]) > 1 else parts[i]
                 for i in range(0, len(parts), fan_in)]
    return parts[0]


def _node_part(root: str, b: int, name: str, dtype: Any = None) -> np.ndarray:
    part = np.asarray(load_part(Path(root), b, name))
    return part if dtype is None else part.astype(dtype)


def _scale(root: str, b: int, kind: str, dtype: Any) -> np.ndarray:
    """``s_out`` of block ``b`` (a column vector): ``D^-1/2`` (sym) or ``D^-1`` (row)."""
    deg = np.asarray(load_part(Path(root), b, "deg"))
    return (deg ** -0.5 if kind == "sym" else 1.0 / deg).astype(dtype)[:, None]


def _partial_product(root: str, b: int, j: int, kind: str, q_j: np.ndarray) -> tuple:
    """``(I + A)[b, j] (s_in_j Q_j)`` on the rows of ``b`` with an entry in ``j``: ``(rows, values)``.
    ``s_in`` scales the entries (``O(edges)``), not ``Q_j``."""
    import scipy.sparse as sp

    split = load_part(Path(root), b, "split")
    lo, hi = int(split[j]), int(split[j + 1])
    rows = np.asarray(load_part(Path(root), b, "rows")[lo:hi])
    cols = np.asarray(load_part(Path(root), b, "cols")[lo:hi])
    weights = np.asarray(load_part(Path(root), b, "weights")[lo:hi])
    if kind == "sym":
        weights = weights * np.asarray(load_part(Path(root), j, "deg"))[cols] ** -0.5
    touched, local = np.unique(rows, return_inverse=True)
    a = sp.csr_matrix((weights.astype(q_j.dtype), (local, cols)), shape=(touched.size, q_j.shape[0]))
    return touched, np.asarray(a @ q_j)


def _sum_parts(count: int, width: int, dtype: Any, *parts: Any) -> np.ndarray:
    """The sum of partial products (``(rows, values)``) and partial sums (dense) of one block."""
    out = np.zeros((count, width), dtype=dtype)
    for part in parts:
        if isinstance(part, tuple):
            out[part[0]] += part[1]
        else:
            out += part
    return out


def _finish(total: Any, s_out: np.ndarray, count: int, width: int) -> np.ndarray:
    if isinstance(total, tuple):
        total = _sum_parts(count, width, s_out.dtype, total)
    return total * s_out


@dataclass
class ShardedGraph:
    """The shards of one graph (see :mod:`gnngp_cli.data.shards`) and the Dask collections
    read from them. Every collection is chunked by row block."""

    root: Path
    meta: ShardMeta

    @property
    def chunks(self) -> tuple[int, ...]:
        return tuple(self.meta.block_rows(b) for b in range(self.meta.num_blocks))

    def _column(self, name: str, dtype: Any, width: int = 0):
        import dask
        import dask.array as da

        blocks = []
        for b in range(self.meta.num_blocks):
            shape = (self.meta.block_rows(b), width) if width else (self.meta.block_rows(b),)
            part = dask.delayed(_node_part, pure=True)(str(self.root), b, name, dtype)
            blocks.append(da.from_delayed(part, shape=shape, dtype=dtype))
        return da.concatenate(blocks, axis=0)

    def features(self, dtype: Any):
        """``X`` (N x d), in ``dtype``."""
        return self._column("x", np.dtype(dtype), self.meta.num_features)

    def labels(self):
        dtype = np.int64 if self.meta.task == "classification" else np.float64
        return self._column("y", dtype)

    def masks(self):
        return self._column("mask", np.uint8)

    def gather_rows(self, array, nodes: np.ndarray) -> np.ndarray:
        """``array[nodes]`` on the client (``nodes`` sorted, few: the landmarks)."""
        return np.asarray(array[nodes].compute())

    def train_ids(self) -> np.ndarray:
        """The training node ids, in order (one int64 per training node, on the client)."""
        import dask

        parts = [dask.delayed(_ids_of, pure=True)(str(self.root), b, self.meta.block_start(b), TRAIN) for b in range(self.meta.num_blocks)]
        return np.concatenate(dask.compute(*parts))

    def convolve(self, q, kind: str):
        """``A Q`` by row blocks (see the module docstring); ``kind`` is ``sym`` or ``row``."""
        import dask
        import dask.array as da

        if q.numblocks[1] != 1:
            q = q.rechunk({1: -1})
        width, dtype = q.shape[1], q.dtype
        sources = dask.compute(*[dask.delayed(_touched_sources, pure=True)(str(self.root), b) for b in range(self.meta.num_blocks)])
        q_blocks = q.to_delayed().ravel()
        out = []
        for b in range(self.meta.num_blocks):
            count = self.meta.block_rows(b)
            parts = [dask.delayed(_partial_product, pure=True)(str(self.root), b, int(j), kind, q_blocks[j]) for j in sources[b]]
            total = tree_reduce(parts, partial(_sum_parts, count, width, dtype)) if parts else np.zeros((count, width), dtype)
            s_out = dask.delayed(_scale, pure=True)(str(self.root), b, kind, dtype)
            block = dask.delayed(_finish, pure=True)(total, s_out, count, width)
            out.append(da.from_delayed(block, shape=(count, width), dtype=dtype))
        return da.concatenate(out, axis=0)


def _touched_sources(root: str, b: int) -> np.ndarray:
    split = np.asarray(load_part(Path(root), b, "split"))
    return np.nonzero(np.diff(split) > 0)[0]


def _ids_of(root: str, b: int, start: int, bit: int) -> np.ndarray:
    mask = np.asarray(load_part(Path(root), b, "mask"))
    return np.nonzero(mask & bit)[0].astype(np.int64) + start

