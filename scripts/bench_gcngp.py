#!/usr/bin/env python
"""Benchmark: wall time and peak memory of gcngp and gcngp_x.

Each case runs as its own ``gnngp run`` process (so peak RSS is that case's own) on every
mirrored dataset, and gcngp_x with 500 landmarks on csbm graphs of 10^4 to 10^6 nodes
(average degree 10, so 10^7 directed edges at 10^6 nodes). Writes a CSV and prints a table with
the targets: exact gcngp on PubMed <= 15 s and <= 3 GB; gcngp_x on the 10^6-node csbm <= 180 s
and <= 12 GB. Times are the kernel + inference wall seconds from results.csv (device
synchronised); data loading is reported apart.

    python scripts/bench_gcngp.py --out outputs/bench/bench_gcngp.csv [--quick]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from benchrun import guarded

MIRRORED = ["cora", "citeseer", "pubmed", "chameleon", "squirrel"]
TARGETS = {("pubmed", "gcngp", None): (15.0, 3 * 1024), ("csbm", "gcngp_x", 1_000_000): (180.0, 12 * 1024)}


def run_case(dataset: str, kernel: str, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "gnngp_cli.cli.main", "run", f"dataset={dataset}", f"kernel={kernel}", f"hydra.run.dir={tmp}", *extra]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0 or not Path(tmp, "results.csv").is_file():
            return {"dataset": dataset, "kernel": kernel, "status": "error", "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
        return pd.read_csv(Path(tmp, "results.csv")).iloc[-1].to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/bench/bench_gcngp.csv")
    parser.add_argument("--quick", action="store_true", help="csbm up to 10^5 nodes only")
    args = parser.parse_args()
    if not os.environ.get("GNNGP_DATA_MIRROR"):
        print("note: GNNGP_DATA_MIRROR is unset; mirrored datasets must already be in the cache", file=sys.stderr)
    rows = []
    for dataset in MIRRORED:
        for kernel in ("gcngp", "gcngp_x"):
            rows.append(run_case(dataset, kernel, []) | {"csbm_nodes": None})
            print(f"{dataset:10s} {kernel:8s} done", file=sys.stderr)
    sizes = [10_000, 100_000] + ([] if args.quick else [1_000_000])
    for n in sizes:
        rows.append(run_case("csbm", "gcngp_x", [f"dataset.num_nodes={n}", "dataset.avg_degree=10", "landmarks.count=500"]) | {"csbm_nodes": n})
        print(f"csbm {n} done", file=sys.stderr)
    table = pd.DataFrame(rows)
    table["method_seconds"] = table.get("kernel_seconds", 0) + table.get("inference_seconds", 0)
    verdicts = []
    for _, r in table.iterrows():
        key = (r["dataset"], r["kernel"], None if pd.isna(r.get("csbm_nodes")) else int(r["csbm_nodes"]))
        if key in TARGETS and r.get("status") == "ok":
            limit_s, limit_mb = TARGETS[key]
            ok = r["method_seconds"] + r["load_seconds"] <= limit_s and r["peak_rss_mb"] <= limit_mb
            verdicts.append(f"{'PASS' if ok else 'FAIL'} (<= {limit_s:.0f} s, <= {limit_mb / 1024:.0f} GB)")
        else:
            verdicts.append("")
    table["target"] = verdicts
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    show = ["dataset", "csbm_nodes", "kernel", "status", "test", "load_seconds", "kernel_seconds", "inference_seconds", "peak_rss_mb", "target"]
    print(table[[c for c in show if c in table.columns]].to_string(index=False))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(guarded(main))
