#!/usr/bin/env python
"""Benchmark: GCNGP-X on row blocks of a Dask cluster, out of core, at growing size.

For each size N (csbm, average degree 10, 64 features, 256 landmarks; 10^8 directed edges at
N = 10^7): ``gnngp partition`` writes the shards (one process, timed apart), then
``gnngp run kernel=gcngp_x compute=dask`` runs on a LocalCluster of ``--workers`` worker
processes of at most ``--memory-limit`` each (spilling to ``--spill``), exactly as a user would.
Prints and writes the wall time (kernel + inference, and the whole command), the peak memory of
the largest worker, the peak disk use of the spill folder and of the roots' files (beside the
run's estimate of the latter), and the least-squares slope of log time against log(M + N).
Targets: slope <= 1.15; 10^7 nodes in <= 30 min on 2 cores.

    python scripts/bench_dask.py --sizes 100000 1000000 10000000 --out outputs/bench/bench_dask.csv

``--compare-local`` instead times compute=local against the same row-block computation on
Dask's synchronous scheduler in this process (the question whether compute=local should become
the row-block path): ``gcngp_x`` on the given mirrored datasets, median of ``--repeats`` runs.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
from benchrun import guarded


def partition(n: int, rows: int, out: Path, data_root: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gnngp_cli", "partition", "dataset=csbm", f"dataset.num_nodes={n}", "dataset.avg_degree=10",
                    "dataset.num_features=64", f"out={out}", f"partition.rows={rows}", f"data.root={data_root}",
                    f"hydra.run.dir={out}.log"], check=True)
    return time.perf_counter() - start


def _folder_bytes(folder: Path) -> int:
    total = 0
    for path, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(path, name)).st_blocks * 512
            except OSError:   # a spilled block removed meanwhile
                pass
    return total


class SpillWatch(threading.Thread):
    """The peak disk use of a folder, sampled every 0.5 s."""

    def __init__(self, folder: Path):
        super().__init__(daemon=True)
        self.folder, self.peak, self.stop = folder, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.peak = max(self.peak, _folder_bytes(self.folder))


def run(n: int, shards: Path, args) -> dict:
    out = Path(args.work) / f"run-{n}"
    spill, roots = SpillWatch(Path(args.spill)), SpillWatch(Path(args.roots))
    spill.start()
    roots.start()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gnngp_cli", "run", "dataset=csbm", f"dataset.num_nodes={n}", "dataset.avg_degree=10",
                    "dataset.num_features=64", "kernel=gcngp_x", "landmarks.count=256", "compute=dask", f"compute.shards={shards}",
                    f"compute.workers={args.workers}", "compute.threads_per_worker=1", f"compute.memory_limit={args.memory_limit}",
                    f"compute.spill_dir={args.spill}", f"compute.roots_dir={args.roots}", "compute.dashboard=:0", "nugget.num=101",
                    f"hydra.run.dir={out}"], check=True)
    wall = time.perf_counter() - start
    for watch in (spill, roots):
        watch.stop.set()
        watch.join()
    row = pd.read_csv(out / "results.csv").iloc[-1].to_dict()
    return {"nodes": n, "edges": int(row["n_edges"]), "seconds": row["total_seconds"], "command_seconds": wall,
            "kernel_seconds": row["kernel_seconds"], "inference_seconds": row["inference_seconds"],
            "peak_worker_mb": row["peak_worker_mb"], "client_peak_mb": row["peak_rss_mb"], "workers": int(row["workers"]),
            "peak_spill_gb": round(spill.peak / 2**30, 2), "peak_roots_gb": round(roots.peak / 2**30, 2), "estimated_gb": row["estimated_gb"],
            "test_accuracy": row["test"]}


def slope(rows: list[dict]) -> float:
    xs = [math.log(r["nodes"] + r["edges"]) for r in rows]
    ys = [math.log(r["seconds"]) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def compare_local(args) -> None:
    import dask

    from gnngp_cli.api import compose
    from gnngp_cli.backends.local import LocalBackend
    from gnngp_cli.backends.rowblocks.dask_backend import DaskBackend
    from gnngp_cli.job.gp_job import GPJob
    from gnngp_cli.job.loading import load_graph

    rows = []
    for name in args.datasets:
        cfg = compose([f"dataset={name}", "kernel=gcngp_x"])
        graph = load_graph(cfg)   # loaded once, outside the timings
        local = []
        with LocalBackend(cfg, graph) as backend:
            job = GPJob(cfg, backend)
            for _ in range(args.repeats):
                row = job.run(0).row
                local.append(row["kernel_seconds"] + row["inference_seconds"])
        dcfg = compose([f"dataset={name}", "kernel=gcngp_x", "compute=dask", f"partition.rows={args.rows}"])
        blocked = []
        with dask.config.set(scheduler="synchronous"), DaskBackend(dcfg, cluster=False) as backend:
            job = GPJob(dcfg, backend)
            for _ in range(args.repeats):
                blocked.append(job.run(0).row["total_seconds"])
            blocks = backend.graph.meta.num_blocks
        rows.append({"dataset": name, "local_seconds": statistics.median(local), "row_blocks_sync_seconds": statistics.median(blocked),
                     "slowdown": statistics.median(blocked) / statistics.median(local), "blocks": blocks})
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", type=int, default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--blocks", type=int, default=80, help="row blocks per graph (rows = N / blocks, at least 25,000)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--memory-limit", default="3GB")
    parser.add_argument("--work", default="outputs/bench/dask", help="shards and run folders")
    parser.add_argument("--spill", default="outputs/bench/dask/spill")
    parser.add_argument("--roots", default="outputs/bench/dask/roots", help="compute.roots_dir: the roots' row-block files")
    parser.add_argument("--data-root", default=os.environ.get("GNNGP_DATA_ROOT", "data"))
    parser.add_argument("--out", default="outputs/bench/bench_dask.csv")
    parser.add_argument("--compare-local", action="store_true", help="time compute=local against row blocks on the synchronous scheduler")
    parser.add_argument("--datasets", nargs="*", default=["cora", "pubmed", "chameleon", "squirrel"])
    parser.add_argument("--rows", type=int, default=1000, help="--compare-local: rows per block")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.compare_local:
        compare_local(args)
        return
    rows = []
    for n in args.sizes:
        shards = Path(args.work) / f"csbm-{n}"
        block_rows = max(25_000, n // args.blocks)
        seconds = partition(n, block_rows, shards, Path(args.data_root))
        result = run(n, shards, args)
        result.update(partition_seconds=seconds, row_block=block_rows)
        rows.append(result)
        print(result, flush=True)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    if len(rows) > 1:
        s = slope(rows)
        print(f"least-squares slope of log time vs log(M + N): {s:.3f} (target <= 1.15)")
        table["slope"] = s
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)


if __name__ == "__main__":
    sys.exit(guarded(main))
