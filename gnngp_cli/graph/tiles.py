"""The numba kernels of :class:`gnngp_cli.graph.sparse_product.TiledProduct` (compiled once per
machine, ``cache=True``); imported only when a tiled product runs.

The layout: the entries of ``A`` grouped by source tile ``t`` (columns ``[t S, (t+1) S)``), and
within a tile by row, ascending; only the rows that have entries in a tile are listed
(``rows[tile_start[t]:tile_start[t+1]]``, their entries ``entry[k]:entry[k+1]`` for list
position ``k``), so the layout grows with the entries, never with nodes x tiles."""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True)
def layout(crow, col, val, order, pos, tile_rows, tiles):   # pragma: no cover - compiled
    """``(tile_start, rows, entry, local, weight)`` from the CSR arrays ``(crow, col, val)`` of
    ``A``; ``order`` (position -> node id) and ``pos`` (node id -> position), both empty for
    none, renumber rows and columns. Three passes: count per tile, place (rows in ascending
    position, so each tile's entries come row by row), then list each tile's rows."""
    n = crow.size - 1
    permuted = pos.size > 0
    count = np.zeros(tiles + 1, dtype=np.int64)
    for j in range(col.size):
        c = pos[col[j]] if permuted else col[j]
        count[c // tile_rows + 1] += 1
    for t in range(tiles):
        count[t + 1] += count[t]
    fill = count[:-1].copy()
    local = np.empty(col.size, dtype=np.int32)
    weight = np.empty(col.size, dtype=val.dtype)
    row_of = np.empty(col.size, dtype=np.int32)
    for r in range(n):
        i = order[r] if permuted else r
        for j in range(crow[i], crow[i + 1]):
            c = pos[col[j]] if permuted else col[j]
            t = c // tile_rows
            at = fill[t]
            local[at] = c - t * tile_rows
            weight[at] = val[j]
            row_of[at] = r
            fill[t] = at + 1
    listed = 0
    for t in range(tiles):
        for j in range(count[t], count[t + 1]):
            if j == count[t] or row_of[j] != row_of[j - 1]:
                listed += 1
    tile_start = np.zeros(tiles + 1, dtype=np.int64)
    rows = np.empty(listed, dtype=np.int32)
    entry = np.empty(listed + 1, dtype=np.int64)
    k = 0
    for t in range(tiles):
        tile_start[t] = k
        for j in range(count[t], count[t + 1]):
            if j == count[t] or row_of[j] != row_of[j - 1]:
                rows[k] = row_of[j]
                entry[k] = j
                k += 1
    tile_start[tiles] = k
    entry[k] = col.size
    return tile_start, rows, entry, local, weight


@njit(parallel=True, cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def product(tile_start, rows, entry, local, weight, tile_rows, q, out):   # pragma: no cover - compiled
    """``out += A q`` for one column slice ``q`` (``N x w``, contiguous): tile by tile, so that
    the tile's rows of ``q`` stay in cache; a tile's listed rows split among the threads. A row's
    entries go four at a time into its output segment, which is then read and written once per
    four entries rather than once per entry; the terms are added in the same order as one at a
    time (each parenthesised), so the sums are the same bit for bit."""
    w = out.shape[1]
    chunks = 64
    for t in range(tile_start.size - 1):
        base = t * tile_rows
        lo, hi = tile_start[t], tile_start[t + 1]
        for c in prange(chunks):
            for k in range(lo + c * (hi - lo) // chunks, lo + (c + 1) * (hi - lo) // chunks):
                o = out[rows[k]]
                j, stop = entry[k], entry[k + 1]
                while j + 4 <= stop:
                    r0, r1, r2, r3 = q[base + local[j]], q[base + local[j + 1]], q[base + local[j + 2]], q[base + local[j + 3]]
                    v0, v1, v2, v3 = weight[j], weight[j + 1], weight[j + 2], weight[j + 3]
                    for m in range(w):
                        o[m] = (((o[m] + v0 * r0[m]) + v1 * r1[m]) + v2 * r2[m]) + v3 * r3[m]
                    j += 4
                while j < stop:
                    row = q[base + local[j]]
                    v = weight[j]
                    for m in range(w):
                        o[m] += v * row[m]
                    j += 1


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def slice_in(q, order, start, part, acc):   # pragma: no cover - compiled
    """``part[i] = q[order[i], start:start + w]`` (``order`` empty: ``q[i, ...]``) and ``acc = 0``,
    rows split among the threads: a column slice and its output made ready for :func:`product`."""
    n, w = part.shape
    permuted = order.size > 0
    for i in prange(n):
        src = order[i] if permuted else np.int64(i)
        for m in range(w):
            part[i, m] = q[src, start + m]
            acc[i, m] = 0


@njit(parallel=True, cache=True, nogil=True, boundscheck=False)
def slice_out(acc, order, start, out):   # pragma: no cover - compiled
    """``out[order[i], start:start + w] = acc[i]`` (``order`` empty: ``out[i, ...]``), rows split
    among the threads."""
    n, w = acc.shape
    permuted = order.size > 0
    for i in prange(n):
        dst = order[i] if permuted else np.int64(i)
        for m in range(w):
            out[dst, start + m] = acc[i, m]
