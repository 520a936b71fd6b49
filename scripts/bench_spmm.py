#!/usr/bin/env python
"""The graph product ``A Q`` of a Reddit-sized low-rank kernel, by each method, against this
machine's memory bandwidth measured in the same run.

The graph has Reddit's size (232,965 nodes, 114,615,892 directed entries, the normalised
adjacency with unit self-loops), ``Q`` is ``N x 3,184`` float32 (GCNGP-X's root on Reddit).
``--graph random`` draws the entries uniformly (``scripts/bench_reddit.py``'s graph: no locality
for an order to find); ``--graph communities`` plants 41 communities (90% of a node's entries
inside its own), with the node ids shuffled, as a real graph's ids often are.

Methods, each on the same ``Q`` (``max_err``: largest difference from ``torch``):

- ``torch``: today's product, ``torch.sparse.mm`` on the CSR matrix (MKL), by row blocks;
- ``colblock``: the same product on column slices of 64, each slice contiguous;
- ``tiled``: :class:`gnngp_cli.graph.sparse_product.TiledProduct` (128-column slices, 4 MiB source tiles);
- with ``--orders``: ``tiled`` and ``torch`` under ``data.order=rcm`` and ``metis``
  (the order's own seconds in ``order_s``).

Bandwidth: the best of five STREAM-style passes with torch over 256 MB arrays (copy, and triad
``a = b + 3 c``), counting the bytes each pass reads and writes. Each method's ``bytes`` is the
memory traffic its schedule cannot avoid (``torch``: every entry reads its row of ``Q``, 12.7 KB;
the sliced methods: ``A`` once per slice, ``Q`` and the result once, and ``tiled`` the result
slice once per tile, which does not stay in the last-level cache); ``bound_s`` is those bytes at
the triad bandwidth; ``of_bound`` is ``bound_s / seconds``.

    python scripts/bench_spmm.py [--graph random|communities] [--width 3184] [--orders] [--csv out.csv]
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import platform
import sys
import time
from pathlib import Path

import torch
from benchrun import guarded

NODES, ENTRIES, WIDTH, COMMUNITIES = 232_965, 114_615_892, 3_184, 41
SLOW_WIDTH = 256    # colblock is measured on this many columns and scaled (it is slower than torch)


def bandwidth() -> dict:
    """GB/s of copy and triad, best of five, on this process's threads."""
    n = 64_000_000
    b, c, a = torch.rand(n), torch.rand(n), torch.empty(n)
    best = {"copy": math.inf, "triad": math.inf}
    for _ in range(5):
        start = time.perf_counter()
        a.copy_(b)
        best["copy"] = min(best["copy"], time.perf_counter() - start)
        start = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best["triad"] = min(best["triad"], time.perf_counter() - start)
    return {"copy_gbs": 2 * 4 * n / best["copy"] / 1e9, "triad_gbs": 3 * 4 * n / best["triad"] / 1e9}


def append_rows(path: Path, rows: list[dict]) -> None:
    """``rows`` appended to the CSV ``path`` (its header written first when the file is new)."""
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)
    print(f"rows appended to {path}", file=sys.stderr)


def graph(kind: str, nodes: int, entries: int, seed: int = 0) -> torch.Tensor:
    """``(2, E)`` directed entries, undirected as a whole (each pair mirrored)."""
    g = torch.Generator().manual_seed(seed)
    half = entries // 2
    row = torch.randint(0, nodes, (half,), generator=g)
    if kind == "random":
        col = torch.randint(0, nodes, (half,), generator=g)
    else:
        community = torch.randint(0, COMMUNITIES, (nodes,), generator=g)
        members = torch.argsort(community)
        start = torch.zeros(COMMUNITIES + 1, dtype=torch.long)
        start[1:] = torch.cumsum(torch.bincount(community, minlength=COMMUNITIES), 0)
        inside = torch.rand(half, generator=g) < 0.9
        c = community[row]
        size = start[c + 1] - start[c]
        own = members[start[c] + (torch.rand(half, generator=g) * size).long()]
        col = torch.where(inside, own, torch.randint(0, nodes, (half,), generator=g))
    keep = row != col
    return torch.stack([torch.cat([row[keep], col[keep]]), torch.cat([col[keep], row[keep]])])


def traffic(method: str, nnz: int, nodes: int, width: int, tiles: int) -> float:
    """Bytes the method's schedule must move from memory (see the module docstring)."""
    q = nodes * width * 4
    if method == "torch":
        return nnz * (width * 4 + 12) + q
    cols = 128 if method == "tiled" else 64
    slices = math.ceil(width / cols)
    per_slice = nnz * (8 if method == "tiled" else 12)
    if method == "tiled":
        per_slice += (tiles * nodes + 1) * 8 + tiles * 2 * nodes * cols * 4
    return slices * per_slice + 2 * q


def main() -> None:
    from gnngp_cli.graph.operators import Adjacency
    from gnngp_cli.graph.orders import node_order

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", choices=("random", "communities"), default="random")
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--entries", type=int, default=ENTRIES)
    parser.add_argument("--width", type=int, default=WIDTH)
    parser.add_argument("--orders", action="store_true", help="also under data.order=rcm and metis")
    parser.add_argument("--csv", type=Path, default=None, help="append the rows here")
    args = parser.parse_args()
    bw = bandwidth()
    print(f"bandwidth: copy {bw['copy_gbs']:.1f} GB/s, triad {bw['triad_gbs']:.1f} GB/s ({torch.get_num_threads()} threads)", flush=True)
    start = time.perf_counter()
    edges = graph(args.graph, args.nodes, args.entries)
    base = Adjacency.from_graph(edges, args.nodes, "sym", torch.float32, "cpu", product="torch")
    nnz = base.edge_weight.numel()
    print(f"{args.graph} graph: {args.nodes:,} nodes, {nnz:,} entries with self-loops ({time.perf_counter() - start:.0f} s)", flush=True)
    q = torch.randn(args.nodes, args.width, generator=torch.Generator().manual_seed(1))
    tiles = math.ceil(args.nodes / 8192)
    rows: list[dict] = []
    reference = None

    def record(method: str, order: str, seconds: float, columns: int, out: torch.Tensor, order_s: float = 0.0, build_s: float = 0.0) -> None:
        nonlocal reference
        if method == "torch" and order == "none":
            reference = out
        err = float((out - reference[:, :columns]).abs().max()) if reference is not None else float("nan")
        full = seconds * args.width / columns
        moved = traffic(method.split("+")[0], nnz, args.nodes, args.width, tiles)
        bound = moved / (bw["triad_gbs"] * 1e9)
        rows.append({"graph": args.graph, "method": method, "order": order, "nodes": args.nodes, "entries": nnz, "width": args.width,
                     "columns_measured": columns, "seconds": round(full, 2), "layout_s": round(build_s, 2), "order_s": round(order_s, 2),
                     "bytes_gb": round(moved / 1e9, 1), "achieved_gbs": round(moved / full / 1e9, 2),
                     "triad_gbs": round(bw["triad_gbs"], 2), "bound_s": round(bound, 2), "of_bound": round(bound / full, 3),
                     "max_err": err, "threads": torch.get_num_threads(), "machine": platform.node(),
                     "date": dt.date.today().isoformat()})
        print(f"{method:10s} order={order:6s} {full:8.1f} s (layout {build_s:.1f} s, order {order_s:.1f} s; {columns} columns measured) "
              f"{moved / 1e9:8.1f} GB {moved / full / 1e9:6.1f} GB/s, bound {bound:6.1f} s, {bound / full:.0%} of it, max err {err:.2e}", flush=True)

    start = time.perf_counter()
    out = base.matmul(q)
    record("torch", "none", time.perf_counter() - start, args.width, out)
    del out
    part = q[:, :SLOW_WIDTH]
    start = time.perf_counter()
    out = torch.empty_like(part)
    csr = base._csr_form()
    for s in range(0, part.size(1), 64):
        out[:, s:s + 64] = torch.sparse.mm(csr, part[:, s:s + 64].contiguous())
    record("colblock", "none", time.perf_counter() - start, part.size(1), out)
    del out, csr
    orders = ("none", "rcm", "metis") if args.orders else ("none",)
    for name in orders:
        start = time.perf_counter()
        order = node_order(edges, args.nodes, name)
        order_s = time.perf_counter() - start
        for method in ("tiled", "torch") if name != "none" else ("tiled",):
            adj = Adjacency.from_graph(edges, args.nodes, "sym", torch.float32, "cpu", product=method, order=order)
            build_s = 0.0
            if method == "tiled":
                start = time.perf_counter()
                adj._tiled_product()
                build_s = time.perf_counter() - start
            start = time.perf_counter()
            out = adj.matmul(q)
            record(method, name, time.perf_counter() - start, args.width, out, order_s, build_s)
            del out, adj
    if args.csv is not None:
        append_rows(args.csv, rows)


if __name__ == "__main__":
    sys.exit(guarded(main))
