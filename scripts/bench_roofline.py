#!/usr/bin/env python
"""Each phase of the low-rank kernel GCNGP-X against this machine's limits, measured in one run.

The limits: the float32 GEMM peak (``torch.mm`` of two 4,096 x 4,096 matrices, best of five) and
the STREAM-style bandwidth (copy, and triad ``a = b + 3 c``, over 256 MB arrays, best of five,
counting the bytes each pass reads and writes), as ``scripts/bench_spmm.py`` measures it; each
measured before and after the phases, the better of the two kept.

The phases, on a dataset loaded by the package (``--dataset pubmed``) or on a random graph of a
given size (``--nodes``, ``--entries``, ``--features``, as ``bench_spmm.py --graph random``),
with ``r`` landmarks (``--landmarks``; default one node in 50, the paper's fraction on arxiv and
Reddit), each timed alone, best of ``--repeats``:

- ``adjacency (build)``: the normalised adjacency from the edge list
  (:func:`gnngp_cli.graph.operators.normalised_parts`); ``adjacency (cached)``: the same read
  back from the data cache (:func:`gnngp_cli.data.adjacency_cache.cached_adjacency`, digests
  checked), as every job after the first on a dataset does. Bound: the bytes that cannot be
  avoided (the edge list read and the CSR arrays written; the file read and the arrays written)
  at the copy bandwidth.
- ``A X`` and ``A Q``: the graph convolutions of the two layers (``Adjacency.matmul``, the
  default ``compute.product=auto``) on roots of ``d + 1`` and ``r + 1`` columns. Bound: ``A``
  read once, the root read once and the result written once, at the triad bandwidth.
- ``ReLU Nystrom``: ``chol(g(Q Q^T))`` on the landmarks over every node
  (``TorchRoots.activation_root``), and its parts: ``landmark eigh`` (the eigendecomposition of
  ``g(Q_a Q_a^T)``, by torch's LAPACK and by SciPy's ``syevd``, which
  :func:`gnngp_cli.kernels.numerics.lapack_eigh` calls on the CPU since issue 51) and ``rows`` (the two matrix products ``Q Q_a^T`` and ``C V`` with ``g``
  between them). Bound: their ``2 N r (w + r)`` flops at the GEMM peak (the eigh has no bound
  here: it is not one BLAS-3 call). ``factored rows``: the step as a GP job takes it past
  ``ROW_BLOCK_ENTRIES`` (``TorchRoots(factored=True)``: ``C[:, a]`` kept beside ``V s``, the ``C V``
  product left to the GP's Gram matrices); bound: ``Q Q_a^T``'s ``2 N r w`` flops. Code before
  the factored root has no such row.

``of_bound`` is ``bound_s / seconds``. The script runs against whichever ``gnngp_cli`` is on the
path (``--code`` names it in the rows), so a row of the main branch and one of a change come from
the same script; the rows say the load average when they were measured.

    python scripts/bench_roofline.py --nodes 60000 --entries 1000000 --features 128 --code r4 --csv scripts/results/roofline.csv
    python scripts/bench_roofline.py --dataset pubmed --landmarks 2000 --code r4 --csv scripts/results/roofline.csv
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_spmm import append_rows, bandwidth, graph   # noqa: E402 - the same bandwidth, random graph and CSV rows as the graph-product page
from benchrun import guarded


def gemm_peak(size: int = 4096, repeats: int = 5) -> float:
    """GFLOP/s of float32 ``torch.mm`` on two ``size x size`` matrices, best of ``repeats``."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best / 1e9


def best_of(repeats: int, run) -> tuple[float, object]:
    """The least wall-clock seconds of ``run()`` over ``repeats`` calls, and its last result."""
    best, out = math.inf, None
    for _ in range(repeats):
        out = None
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, out


def inputs(args) -> tuple[str, torch.Tensor, torch.Tensor, int]:
    """``(name, edge_index, features, nodes)``: a dataset the package loads, or a random graph."""
    if args.dataset:
        from gnngp_cli.api import compose
        from gnngp_cli.job.loading import load_graph

        data = load_graph(compose([f"dataset={args.dataset}", "kernel=gcngp_x"])).data
        return args.dataset, data.edge_index, data.x.float(), int(data.num_nodes)
    edges = graph("random", args.nodes, args.entries)
    x = torch.randn(args.nodes, args.features, generator=torch.Generator().manual_seed(2))
    return f"random {args.nodes:,} nodes", edges, x, args.nodes


def normalise(edges: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(crow, col, weight)`` of the symmetric normalised adjacency, by the code on the path
    (before ``normalised_parts`` existed: ``normalized_adjacency`` and the row pointers, as
    ``Adjacency.from_graph`` built them)."""
    from gnngp_cli.graph import operators

    if hasattr(operators, "normalised_parts"):
        return operators.normalised_parts(edges, n, "sym", torch.float32)
    ei, weight = operators.normalized_adjacency(edges, n, "sym", dtype=torch.float32)
    return operators.row_pointers(ei[0], n), ei[1].clone(), weight


def main() -> None:
    from gnngp_cli.graph.operators import Adjacency
    from gnngp_cli.kernels.activations import RELU
    from gnngp_cli.kernels import numerics
    from gnngp_cli.kernels.torch_roots import LOCAL_ROOTS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=None, help="a dataset the package loads (else a random graph)")
    parser.add_argument("--nodes", type=int, default=60_000)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--landmarks", type=int, default=0, help="r (default: one node in 50)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--code", default="", help="which code ran (e.g. the branch), for the rows")
    parser.add_argument("--csv", type=Path, default=None, help="append the rows here")
    args = parser.parse_args()
    name, edges, x, n = inputs(args)
    r = args.landmarks or max(1, n // 50)
    load = os.getloadavg()[0]
    peak, bw = gemm_peak(), bandwidth()
    print(f"{name}: GEMM peak {peak:.0f} GFLOP/s, copy {bw['copy_gbs']:.1f} GB/s, triad {bw['triad_gbs']:.1f} GB/s "
          f"({torch.get_num_threads()} threads, load {load:.1f}); measured again at the end", flush=True)
    timed: list[tuple] = []

    def record(phase: str, seconds: float, flops: float = 0.0, moved: float = 0.0, rate: str = "", **size) -> None:
        timed.append((phase, seconds, flops, moved, rate, size.get("width", "")))
        print(f"{phase:38s} {seconds:8.2f} s", flush=True)

    build_s, (crow, col, weight) = best_of(args.repeats, lambda: normalise(edges, n))
    nnz = weight.numel()
    parts_bytes = crow.numel() * 8 + col.numel() * 8 + weight.numel() * 4
    record("adjacency (build)", build_s, moved=edges.numel() * 8 + parts_bytes, rate="copy_gbs")
    try:
        from gnngp_cli.data.adjacency_cache import cached_adjacency
    except ImportError:   # code without the cache
        cached_adjacency = None
    if cached_adjacency is not None:
        with tempfile.TemporaryDirectory() as root:
            cached_adjacency(edges, n, "sym", torch.float32, Path(root))   # written once
            cached_s, _ = best_of(args.repeats, lambda: cached_adjacency(edges, n, "sym", torch.float32, Path(root)))
        record("adjacency (cached)", cached_s, moved=edges.numel() * 8 + 2 * parts_bytes, rate="copy_gbs")
    adj = Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu", product="auto")
    root = torch.cat([x / math.sqrt(x.size(1)), torch.full((n, 1), 0.1)], dim=1)

    def convolution(q: torch.Tensor, phase: str) -> torch.Tensor:
        seconds, out = best_of(args.repeats, lambda: adj.matmul(q))
        record(phase, seconds, moved=nnz * 12 + (crow.numel() * 8) + 2 * q.numel() * 4, rate="triad_gbs", width=q.size(1))
        return out

    q = convolution(root, "A X (layer 1)")
    landmarks = torch.randperm(n, generator=torch.Generator().manual_seed(3))[:r].sort().values
    q_a = q[landmarks]
    var_a = (q_a * q_a).sum(1)
    block = RELU.expectation(q_a @ q_a.T, var_a, var_a)
    sym = (block + block.T) / 2
    eigh_s, _ = best_of(args.repeats, lambda: torch.linalg.eigh(sym))
    record("ReLU Nystrom: landmark eigh (torch)", eigh_s, width=r)
    import scipy.linalg

    eigh_s, _ = best_of(args.repeats, lambda: scipy.linalg.eigh(sym.numpy(), driver="evd", check_finite=False))
    record("ReLU Nystrom: landmark eigh (scipy)", eigh_s, width=r)
    w = q.size(1)
    flops = 2.0 * n * r * (w + r)
    seconds, _ = best_of(args.repeats, lambda: LOCAL_ROOTS.activation_root(q, landmarks))
    record("ReLU Nystrom (whole step)", seconds, flops=flops, width=w)
    factor = numerics.NystromFactor.of(block, "activation")

    def rows_only() -> torch.Tensor:
        from gnngp_cli.kernels.torch_roots import activation_nystrom_rows, by_row_blocks

        return by_row_blocks(q, landmarks, "relu", lambda start, stop, marks, idx, *into: activation_nystrom_rows(   # into: since its rows are written in place
            q[start:stop], q_a, var_a, factor, marks, idx, **({"into": into[0]} if into else {})))
    seconds, relu = best_of(args.repeats, rows_only)
    record("ReLU Nystrom: rows (2 GEMMs + g)", seconds, flops=flops, width=w)
    try:
        from gnngp_cli.kernels.torch_roots import TorchRoots

        factored = TorchRoots(factored=True)
    except TypeError:   # code before the factored root
        factored = None
    if factored is not None:
        seconds, _ = best_of(args.repeats, lambda: factored.activation_root(q, landmarks))
        record("ReLU Nystrom: factored rows (1 GEMM + g)", seconds, flops=2.0 * n * r * w, width=w)
    convolution(torch.cat([relu, torch.full((n, 1), 0.1)], dim=1), "A Q (layer 2)")
    # The limits: the best of their measurements before and after the phases (on a shared machine
    # a single measurement can land in a busy moment, and a phase then seems faster than its bound).
    peak = max(peak, gemm_peak())
    bw = {key: max(value, again) for (key, value), again in zip(bw.items(), bandwidth().values())}
    rows = []
    for phase, seconds, flops, moved, rate, width in timed:
        bound = flops / (peak * 1e9) if flops else (moved / (bw[rate] * 1e9) if moved else math.nan)
        rows.append({"graph": name, "nodes": n, "entries": nnz, "features": x.size(1), "landmarks": r, "phase": phase,
                     "width": width, "seconds": round(seconds, 3), "gflop": round(flops / 1e9, 1),
                     "bytes_gb": round(moved / 1e9, 3), "bound_s": round(bound, 3),
                     "of_bound": round(bound / seconds, 3) if not math.isnan(bound) else math.nan,
                     "gemm_gflops": round(peak, 1), "copy_gbs": round(bw["copy_gbs"], 1), "triad_gbs": round(bw["triad_gbs"], 1),
                     "code": args.code, "load1": round(load, 1), "threads": torch.get_num_threads(),
                     "machine": platform.node(), "date": dt.date.today().isoformat()})
        shown = f"{bound / seconds:.0%} of its bound ({bound:.2f} s)" if not math.isnan(bound) else "no bound"
        print(f"{phase:38s} {seconds:8.2f} s  {shown}", flush=True)
    print(f"limits (best of start and end): GEMM peak {peak:.0f} GFLOP/s, copy {bw['copy_gbs']:.1f} GB/s, triad {bw['triad_gbs']:.1f} GB/s",
          flush=True)
    if args.csv is not None:
        append_rows(args.csv, rows)


if __name__ == "__main__":
    sys.exit(guarded(main))
