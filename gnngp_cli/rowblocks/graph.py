"""A sharded graph as Dask collections: features, degrees, labels and masks by row block, and
the blocked sparse-dense product ``A Q``.

``A Q`` for row block ``b`` of the output reads only the row blocks ``j`` of ``Q`` whose nodes
are columns of ``A[b]``: one task per touched ``(b, j)`` computes ``(I + A)[b, j] (s_in Q_j)``
on the rows of ``b`` that have an entry in ``j`` (a slice of ``b``'s shard, sorted by source
block; it runs where ``Q_j`` lives), and a chain of sums adds them, :data:`FAN_IN` partial
products a step, into one running block that the last step scales by ``s_out``:
``s_in = s_out = D^-1/2`` (symmetric) or ``s_in = 1, s_out = D^-1`` (row normalisation).

What is alive is bounded, whatever the graph: a group's partial products wait for the previous
step of their block, and a block's first group for the end of the block ``in_flight`` places
before it (both through a token of no size, so the scheduler still places each partial product
beside its ``Q_j``). On a random graph every output block touches every source block, and the
partial products of one product together are about the size of ``M x width`` (90 GB at 10^8
edges and 257 columns); produced all at once, as a tree of sums let them be, they filled the disk
that the workers spill to. Now at most ``in_flight`` running blocks and ``FAN_IN`` partial
products each are alive. No task holds more than ``FAN_IN`` partial products and one block.
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


def _partial_product(root: str, b: int, j: int, kind: str, q_j: np.ndarray, after: Any = None) -> tuple:
    """``(I + A)[b, j] (s_in_j Q_j)`` on the rows of ``b`` with an entry in ``j``: ``(rows, values)``.
    ``s_in`` scales the entries (``O(edges)``), not ``Q_j``. ``after`` (a token, unused) orders
    the task after the step it names."""
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


def _accumulate(count: int, width: int, dtype: Any, running: Any, *parts: tuple) -> np.ndarray:
    """One step of a block's chain: ``running`` (``None`` at the first step; never changed in
    place, as Dask may hand it to a recomputed task again) plus the partial products ``parts``."""
    out = np.zeros((count, width), dtype=dtype) if running is None else running.copy()
    for rows, values in parts:
        out[rows] += values
    return out


def _last(count: int, width: int, dtype: Any, s_out: np.ndarray, running: Any, *parts: tuple) -> np.ndarray:
    """The chain's last step, scaled by ``s_out``."""
    out = _accumulate(count, width, dtype, running, *parts)
    out *= s_out
    return out


def _token(block: Any) -> None:
    """Done when ``block`` is: orders tasks after it without moving its data."""
    return None


@dataclass
class ShardedGraph:
    """The shards of one graph (see :mod:`gnngp_cli.data.shards`) and the Dask collections
    read from them. Every collection is chunked by row block."""

    root: Path
    meta: ShardMeta
    in_flight: int = 8   # output row blocks of ``A Q`` under way at once (two per thread of the cluster in a run)

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
        product = partial(dask.delayed(_partial_product, pure=True), str(self.root))
        blocks, done = [], []
        for b in range(self.meta.num_blocks):
            count = self.meta.block_rows(b)
            s_out = dask.delayed(_scale, pure=True)(str(self.root), b, kind, dtype)
            groups = [sources[b][i:i + FAN_IN] for i in range(0, len(sources[b]), FAN_IN)] or [[]]
            running, after = None, done[b - self.in_flight] if b >= self.in_flight else None
            for g, group in enumerate(groups):
                parts = [product(b, int(j), kind, q_blocks[j], after) for j in group]
                step = _last if g == len(groups) - 1 else _accumulate
                args = (count, width, dtype, s_out) if step is _last else (count, width, dtype)
                running = dask.delayed(step, pure=True)(*args, running, *parts)
                after = dask.delayed(_token, pure=True)(running)
            done.append(after)
            blocks.append(da.from_delayed(running, shape=(count, width), dtype=dtype))
        return da.concatenate(blocks, axis=0)


def _touched_sources(root: str, b: int) -> np.ndarray:
    split = np.asarray(load_part(Path(root), b, "split"))
    return np.nonzero(np.diff(split) > 0)[0]


def _ids_of(root: str, b: int, start: int, bit: int) -> np.ndarray:
    mask = np.asarray(load_part(Path(root), b, "mask"))
    return np.nonzero(mask & bit)[0].astype(np.int64) + start

