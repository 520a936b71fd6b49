#!/usr/bin/env python
"""Active-learning benchmark: strategies x datasets x seeds, each cell a fresh ``gnngp run``
process (``active=<strategy>``), as a user runs it.

A cell is one dataset, one strategy and one seed: ``gnngp run dataset=<d> <kernel> active=<s>
active.budgets=<budgets> seed=<seed>``, its wall-clock seconds timed around the process (start-up,
loading, kernel, selection), its rows (one per budget) read back from its ``results.csv``, peak
memory included (``peak_rss_mb``). The rows are saved to ``--out`` after every cell, so a
stopped run keeps them, and a rerun skips the cells ``--out`` holds measured: the same command,
every setting of it (budgets, ``--extra``) included (``scripts/benchcsv.py``). A failed cell
writes one row with ``status=error`` and the command's one-line error; a rerun runs it again, in
its place. ``scripts/docs_benchmarks.py``
makes the docs page from the CSV (kind ``active``).

    python scripts/bench_active.py --datasets cora citeseer pubmed --seeds 0 1 2 3 4 --out scripts/results/active.csv
    python scripts/bench_active.py --smoke     # cora, random and sigma_opt, budgets [10,20], seed 0: the wiring, to a temporary CSV
    python scripts/bench_active.py --scale --out scripts/results/active_scale.csv   # low rank at scale (SCALE), one seed

A ``--scale`` cell is one of :data:`SCALE`: a graph named by its own overrides (its kernel included)
with the budgets given there; its wall-clock seconds and peak memory as above.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from gnngp_cli.gp.strategies import STRATEGIES

from benchcsv import check_writable, measured, read_rows, save_rows
from benchrun import guarded

DATASETS = ["cora", "citeseer", "pubmed"]
BUDGETS = [10, 20, 40, 80, 160]   # FeatProp's protocol
KERNEL = ["kernel=gcngp"]   # the exact kernel: it fits on all three (pubmed's dense 19,717^2 kernel in float32 is 1.6 GB)
SMOKE = {"datasets": ["cora"], "strategies": ["random", "sigma_opt"], "budgets": [10, 20], "seeds": [0]}
KEEP = ["status", "dataset", "strategy", "seed", "kernel", "landmarks", "model", "budget", "labelled", "test", "macro_f1_all",
        "gcn_test", "gcn_macro_f1_all", "selection_seconds", "kernel_seconds", "total_seconds", "wall_seconds", "peak_rss_mb", "nugget",
        "command", "error"]


# --scale: low-rank selection on graphs too large for an exact kernel (the row's dataset label: its overrides, budgets, strategies)
SCALE = {
    "csbm, 10^6 nodes": (["dataset=csbm", "dataset.num_nodes=1000000", "kernel=gcngp_x", "landmarks.count=100", "dtype=float32"], [10, 20],
                         ["sigma_opt", "v_opt"]),
    "arxiv (csbm stand-in)": (["dataset=arxiv", "experiment.stand_in=csbm", "kernel=gcngp_x"], BUDGETS, ["sigma_opt"]),
}


def command(dataset: str, strategy: str, seed: int, budgets: list[int], model: str, extra: list[str]) -> list[str]:
    """The ``gnngp run`` overrides of one cell (``dataset``: a dataset's name, or a label of :data:`SCALE`)."""
    graph = SCALE[dataset][0] if dataset in SCALE else [f"dataset={dataset}", *KERNEL]
    return [*graph, f"active={strategy}", f"active.budgets=[{','.join(map(str, budgets))}]",
            f"seed={seed}", "runs=1", "progress=false", *([f"active.model={model}"] if model != "gp" else []), *extra]


def cell(dataset: str, strategy: str, seed: int, budgets: list[int], model: str, extra: list[str], env: dict) -> list[dict]:
    """One fresh ``gnngp run`` process: its rows, each with the process's wall-clock seconds."""
    overrides = command(dataset, strategy, seed, budgets, model, extra)
    where = {"dataset": dataset, "strategy": strategy, "seed": seed, "model": model, "command": "gnngp run " + " ".join(overrides)}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "gnngp_cli", "run", *overrides, f"hydra.run.dir={tmp}"],
                             env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        results = Path(tmp) / "results.csv"
        if out.returncode != 0 or not results.exists():
            errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
            message = errors[-1] if errors else (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
            return [{**where, "status": "error", "wall_seconds": wall, "error": message}]
        rows = pd.read_csv(results).to_dict("records")
    return [{**row, **where, "wall_seconds": wall} for row in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    parser.add_argument("--budgets", nargs="+", type=int, default=BUDGETS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--model", choices=["gp", "gcn"], default="gp", help="active.model: gcn trains the GCN on each budget's labels too")
    parser.add_argument("--extra", nargs="*", default=[], help="more gnngp run overrides for every cell")
    parser.add_argument("--out", default="outputs/bench/active.csv", help="the CSV (scripts/results/*.csv are the committed ones)")
    parser.add_argument("--smoke", action="store_true", help="cora, random and sigma_opt, budgets [10,20], seed 0, to a temporary CSV")
    parser.add_argument("--scale", action="store_true", help="the SCALE cells (low rank on large graphs), seed 0")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))   # a stopped benchmark stops its cell's process too (subprocess.run kills it)
    if args.smoke:
        args.datasets, args.strategies, args.budgets, args.seeds = SMOKE["datasets"], SMOKE["strategies"], SMOKE["budgets"], SMOKE["seeds"]
        args.out = str(Path(tempfile.mkdtemp(prefix="bench_active_")) / "active_smoke.csv")
    out = Path(args.out)
    have = read_rows(out, KEEP)   # another table's CSV, or a folder: refused before any work
    check_writable(out)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    plan = ([(label, strategy, 0, budgets) for label, (_, budgets, strategies) in SCALE.items() for strategy in strategies] if args.scale else
            [(dataset, strategy, seed, args.budgets) for dataset in args.datasets for strategy in args.strategies for seed in args.seeds])
    failed = 0
    for dataset, strategy, seed, budgets in plan:
        job = {"command": "gnngp run " + " ".join(command(dataset, strategy, seed, budgets, args.model, args.extra))}   # its settings all
        if measured(have, job):
            continue
        rows = cell(dataset, strategy, seed, budgets, args.model, args.extra, env)
        save_rows(out, rows, KEEP, replace=[job])
        failed += rows[-1]["status"] != "ok"
        last = rows[-1]
        print(f"{dataset} {strategy} seed {seed}: {last['status']}, {last['wall_seconds']:.1f} s wall"
              + (f", test {last['test']:.4f} at {last['budget']} labels, {last['selection_seconds']:.2f} s selection"
                 if last["status"] == "ok" else f": {last['error']}"), file=sys.stderr, flush=True)
    print(out)
    if failed:   # a CI job running the benchmark fails with its cells
        print(f"error: {failed} cell(s) failed; their rows in {out} hold status=error and the reason", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(guarded(main))
