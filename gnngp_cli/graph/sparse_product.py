"""The graph product ``A Q`` on the CPU, cache-tiled.

Almost all of a low-rank kernel's time on a large graph is ``A Q``: a sparse ``N x N``
adjacency times a dense ``N x r`` root (Reddit: 114.6M entries, ``r = 3,184``). torch's CSR
product (MKL) reads, for every entry ``(i, j)``, the whole row ``Q[j]`` (12.7 KB), from memory
since nothing is reused between entries: about 1.5 TB per product. :class:`TiledProduct` moves
fewer bytes. ``Q``'s columns are taken a slice at a time (128 in float32, a 512-byte segment
per row), and ``A`` is split by its columns into *source tiles* of ``tile_rows`` nodes, so that
a tile's slice of ``Q`` (8,192 x 128, 4 MiB) stays in the last-level cache while every row of
``A`` takes its entries in that tile. ``A`` is then read once per slice (25 times on Reddit,
25 x 0.9 GB) instead of ``Q`` once per entry. The slice and tile sizes are the fastest of a
sweep on a Reddit-sized graph (64 to 512 columns, 1 to 16 MiB tiles); ``scripts/bench_spmm.py``
measures each method against the machine's memory bandwidth (the performance page).

Each output row is the sum of its entries in tile order, then in column order within a tile: the
same terms as torch's, summed in another order, so the two agree to float round-off. The
kernel is compiled by numba (``cache=True``: once per machine) and runs on numba's threads,
as many as torch's.
The product runs on the order of :mod:`.orders` when the job has one.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from ..errors import ConfigError
from ..progress import within
from .orders import positions

PRODUCTS = ("auto", "torch", "tiled")   # auto: tiled on the CPU for large products, torch's elsewhere
SLICE_BYTES = 512          # a slice's row segment: 128 float32 or 64 float64 columns (eight cache lines)
TILE_BYTES = 4 << 20       # a source tile's slice of Q (8,192 nodes), held in the last-level cache (32 MiB here)


def _kernels():
    """The numba kernels (:mod:`.tiles`), imported on first use: importing numba costs
    about 0.3 s, which the command line and the small graphs (torch's product) never pay."""
    from . import tiles as tiled_kernels

    return tiled_kernels.layout, tiled_kernels.product, tiled_kernels.slice_in, tiled_kernels.slice_out


_READY: Optional[str] = None   # "" once the kernels imported; else why they cannot


def tiled_unavailable() -> str:
    """Why the tiled product cannot run here ("" when it can): numba absent, or failing to
    import or to compile (a numpy it does not support, no writable folder for its cache)."""
    global _READY
    if _READY is None:
        if importlib.util.find_spec("numba") is None:
            _READY = "numba is not installed"
        else:
            try:
                _kernels()
                _READY = ""
            except (ImportError, RuntimeError, OSError) as err:   # numba's own start-up failures
                _READY = f"numba could not load its kernels ({type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''})"
    return _READY


def numba_available() -> bool:
    """Whether numba is installed (not imported, which costs 0.3 s)."""
    return importlib.util.find_spec("numba") is not None


@dataclass
class TiledProduct:
    """``A`` laid out by source tiles (see :mod:`.tiles`): for tile ``t`` (columns
    ``[t S, (t+1) S)``), the rows with entries there, ``rows[tile_start[t]:tile_start[t+1]]``,
    and their entries ``entry[k]:entry[k+1]`` (``local``: column minus ``t S``; ``weight``).
    Built once per adjacency from its CSR arrays by a counting sort; with ``order``, of
    ``P A P^T``. It holds 8 bytes per entry and 12 per listed row (at most one per entry)."""

    num_nodes: int
    tile_rows: int
    tile_start: np.ndarray
    rows: np.ndarray
    entry: np.ndarray
    local: np.ndarray
    weight: np.ndarray
    order: Optional[np.ndarray] = None     # position -> node id (None: the graph's own numbering)

    @classmethod
    def build(cls, crow: Tensor, col: Tensor, weight: Tensor, num_nodes: int, order: Optional[Tensor] = None) -> "TiledProduct":
        layout = _kernels()[0]
        tile_rows = max(1, TILE_BYTES // SLICE_BYTES)
        tiles = max(1, math.ceil(num_nodes / tile_rows))
        none = np.empty(0, dtype=np.int64)
        order_np, pos = None, none
        if order is not None:
            order_np = order.cpu().numpy().astype(np.int64, copy=False)
            pos = positions(order.cpu().long()).numpy()
        parts = layout(crow.cpu().numpy(), col.cpu().numpy(), weight.cpu().numpy(), none if order_np is None else order_np, pos,
                       tile_rows, tiles)
        return cls(num_nodes, tile_rows, *parts, order_np)

    @property
    def tiles(self) -> int:
        return self.tile_start.size - 1

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.tile_start, self.rows, self.entry, self.local, self.weight))

    def matmul(self, dense: Tensor) -> Tensor:
        """``A @ dense`` (``N x width``, on the CPU, of the layout's dtype), slice by slice."""
        if dense.dim() != 2 or dense.size(0) != self.num_nodes:
            raise ValueError(f"A @ Q needs Q of {self.num_nodes} rows, got shape {tuple(dense.shape)}")
        _, product, slice_in, slice_out = _kernels()
        _threads()
        q = dense.detach().numpy()   # a view's strides kept: each column slice is copied out below (no copy of the whole)
        out = np.empty(q.shape, dtype=q.dtype)
        step = max(1, SLICE_BYTES // q.itemsize)
        order = np.empty(0, dtype=np.int64) if self.order is None else self.order
        part = np.empty((q.shape[0], min(step, q.shape[1])), dtype=q.dtype)   # reused by every slice of that width
        acc = np.empty_like(part)
        starts = range(0, q.shape[1], step)
        for s, start in enumerate(starts):
            width = min(start + step, q.shape[1]) - start
            if width != part.shape[1]:   # the last, narrower slice
                part, acc = np.empty((q.shape[0], width), dtype=q.dtype), np.empty((q.shape[0], width), dtype=q.dtype)
            with within(f"A Q column slice {s + 1} of {len(starts)}"):
                slice_in(q, order, start, part, acc)   # in the slice's node order, on the threads; acc zeroed
                product(self.tile_start, self.rows, self.entry, self.local, self.weight, self.tile_rows, part, acc)
                slice_out(acc, order, start, out)
        return torch.from_numpy(out)

    def coo(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(row, col, weight)`` of ``A`` in the graph's own ids (entries in tile order)."""
        per_row = np.diff(self.entry)
        row = np.repeat(self.rows.astype(np.int64), per_row)
        tile = np.repeat(np.repeat(np.arange(self.tiles, dtype=np.int64), np.diff(self.tile_start)), per_row)
        col = tile * self.tile_rows + self.local
        del tile
        if self.order is not None:
            row, col = self.order[row], self.order[col]
        return torch.from_numpy(row), torch.from_numpy(col), torch.from_numpy(self.weight)


def tiles_pay(num_entries: int, num_nodes: int) -> bool:
    """Whether ``auto`` takes the tiled product: when a row has, on average, an entry in every
    source tile, so that a tile's pass sweeps the result's rows in order. Below that a tile
    touches scattered rows of the result, each a memory access of its own, and torch's product
    is faster (``scripts/bench_spmm.py``; the graph-product benchmark page)."""
    tiles = max(1, math.ceil(num_nodes / max(1, TILE_BYTES // SLICE_BYTES)))
    return num_entries >= num_nodes * tiles


def _threads() -> None:
    """numba's threads follow torch's (a Dask worker of one thread stays at one). numba's OpenMP
    layer, started by the first call, sets the OpenMP thread count it shares with torch to its own
    pool's (the machine's cores): torch's count is put back, or every torch operation after the
    first tiled product runs on all cores whatever the job asked for."""
    import numba

    count = torch.get_num_threads()
    numba.set_num_threads(max(1, min(count, numba.config.NUMBA_NUM_THREADS)))
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)


def resolve_product(name: str, device: torch.device | str, dtype: torch.dtype) -> str:
    """The product a job's adjacency uses: ``auto`` stays ``auto`` on the CPU (float32/float64,
    numba present; each product then takes the tiled kernel past 2^26 output entries where
    :func:`tiles_pay`), else ``torch`` (cuSPARSE on a GPU). ``tiled`` asked for where it cannot
    run is an error."""
    if name not in PRODUCTS:
        raise ConfigError(f"unknown compute.product {name!r}; use one of {', '.join(PRODUCTS)}")
    cpu = torch.device(device).type == "cpu"
    possible = cpu and dtype in (torch.float32, torch.float64)
    if name == "tiled":
        if not possible:
            raise ConfigError(f"compute.product=tiled runs on the CPU in float32 or float64 (this job: {device}, {dtype}); use compute.product=auto")
        why = tiled_unavailable()
        if why:
            raise ConfigError(f"compute.product=tiled needs numba's kernels, and {why}; pip install numba, or use compute.product=torch")
        return name
    if name == "auto":   # the adjacency decides per product (size, density: Adjacency.matmul)
        return "auto" if possible and numba_available() else "torch"
    return name
