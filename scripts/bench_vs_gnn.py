#!/usr/bin/env python
"""Benchmark: GCN training against the GCNGP kernels, every pair in the same process and run.

For each mirrored dataset: GCN (100 epochs, one seed, full batch) on the fast path
(``gnn.propagation=sparse``: one cached sparse-matrix product per layer, the default) and on
PyG's edge-wise messages (``gnn.propagation=edges``, the path of the tables before 2026-11-28),
and the ``gcngp`` and ``gcngp_x`` kernels, each timed as its method time (device-synchronised
wall seconds: training + inference for GCN, kernel + inference for the GPs; data loading
excluded). A GP run takes seconds, so it is repeated (``--repeats``, default 3) and its median
is used; each GCN runs once (its 100 epochs average out). Writes a CSV with the times and the
ratios fast GCN / GP. Target (issue 27): ``gcngp`` or ``gcngp_x`` at least 10x faster than the
fast GCN on every dataset.

    python scripts/bench_vs_gnn.py --out outputs/bench/bench_vs_gnn.csv
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import pandas as pd

from gnngp_cli.api import compose
from gnngp_cli.execute import run_job
from gnngp_cli.job.loading import load_graph

DATASETS = ["cora", "citeseer", "pubmed", "chameleon", "squirrel"]
TARGET = 10.0   # the faster kernel at least this many times faster than the fast GCN


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/bench/bench_vs_gnn.csv")
    parser.add_argument("--datasets", nargs="*", default=DATASETS)
    parser.add_argument("--repeats", type=int, default=3, help="GP runs per kernel; the median time is used")
    args = parser.parse_args()
    if not os.environ.get("GNNGP_DATA_MIRROR"):
        print("note: GNNGP_DATA_MIRROR is unset; datasets must already be in the cache", file=sys.stderr)
    rows = []
    for name in args.datasets:
        gcn_cfg = compose([f"dataset={name}", "gnn=gcn", "progress=false"])
        prep = load_graph(gcn_cfg)  # loaded once; every method below uses the same data in this process
        gcn = run_job(gcn_cfg, prep)[0]
        edges = run_job(compose([f"dataset={name}", "gnn=gcn", "gnn.propagation=edges", "progress=false"]), prep)[0]
        row = {"dataset": name, "gcn_seconds": gcn["total_seconds"], "gcn_test": gcn["test"],
               "gcn_edges_seconds": edges["total_seconds"], "gcn_edges_test": edges["test"]}
        for kernel in ("gcngp", "gcngp_x"):
            runs = [run_job(compose([f"dataset={name}", f"kernel={kernel}"]), prep)[0] for _ in range(max(args.repeats, 1))]
            gp = runs[0]
            row[f"{kernel}_seconds"] = statistics.median(r["total_seconds"] for r in runs)
            row[f"{kernel}_test"] = gp["test"]
            row[f"ratio_{kernel}"] = gcn["total_seconds"] / row[f"{kernel}_seconds"]
        best = max(row["ratio_gcngp"], row["ratio_gcngp_x"])
        row["target"] = f"faster kernel >= {TARGET:g}x the fast GCN: {'PASS' if best >= TARGET else 'FAIL'}"
        rows.append(row)
        print(f"{name}: GCN {row['gcn_seconds']:.2f} s (edge-wise {row['gcn_edges_seconds']:.2f} s), gcngp {row['gcngp_seconds']:.3f} s ({row['ratio_gcngp']:.0f}x), "
              f"gcngp_x {row['gcngp_x_seconds']:.3f} s ({row['ratio_gcngp_x']:.0f}x)", file=sys.stderr)
    table = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
