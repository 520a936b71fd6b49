"""A job's seconds in a fresh process, as a user runs ``gnngp run``, against the same job as the
third job of a sweep in one process (what the benchmark scripts that time many jobs in one warm
process report).

Each round runs, for each cell, ``gnngp run <cell>`` (a fresh process) and then
``gnngp run -m <cell> seed=0,1,2`` (three jobs of one sweep; the basic launcher runs them in one
process), and reads from their results rows the kernel and inference seconds (``fit_seconds``
too where a run fits) and the fresh run's ``warmup_seconds`` (the process's one-time start-up,
timed apart from the job). Rounds interleave the cells, so a busy machine slows both alike.
The ratio fresh / third of the medians is the check: at most 1.5 (issue 49).

    python scripts/bench_fresh.py [--rounds 3] [--out scripts/results/fresh_vs_sweep.csv]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from benchcsv import check_writable
from benchrun import at_least, guarded

CELLS = [
    ["dataset=cora", "kernel=gcngp"],
    ["dataset=cora", "kernel=gcngp_x"],
    ["dataset=citeseer", "kernel=sagegp"],
    ["dataset=pubmed", "kernel=gcngp_x"],
    ["dataset=pubmed", "kernel=gcngp", "kernel.limit=ntk"],
]


def seconds(row: pd.Series) -> float:
    """The job's own seconds: kernel and inference (and a fit's)."""
    fit = row.get("fit_seconds", float("nan"))
    return float(row["kernel_seconds"] + row["inference_seconds"] + (0.0 if pd.isna(fit) else fit))


def gnngp(args: list[str], env: dict) -> None:
    out = subprocess.run([sys.executable, "-m", "gnngp_cli", "run", *args], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"gnngp run {' '.join(args)} failed:\n{out.stderr[-2000:]}")


def one_round(cell: list[str], folder: Path, env: dict) -> dict:
    fresh_dir, sweep_dir = folder / "fresh", folder / "sweep"
    gnngp([*cell, f"hydra.run.dir={fresh_dir}"], env)
    gnngp(["-m", *cell, "seed=0,1,2", f"hydra.sweep.dir={sweep_dir}"], env)
    fresh = pd.read_csv(fresh_dir / "results.csv").iloc[0]
    jobs = [pd.read_csv(sweep_dir / str(j) / "results.csv").iloc[0] for j in range(3)]
    return {"fresh": seconds(fresh), "warmup": float(fresh["warmup_seconds"]), "first_of_sweep": seconds(jobs[0]),
            "third_of_sweep": seconds(jobs[2]), "sweep_warmups": [float(j["warmup_seconds"]) for j in jobs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--out", default="fresh_vs_sweep.csv")
    args = parser.parse_args()
    check_writable(Path(args.out))   # before minutes of work
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    measured: dict[str, list[dict]] = {" ".join(c): [] for c in CELLS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for i, cell in enumerate(CELLS):
                measured[" ".join(cell)].append(one_round(cell, Path(tmp) / f"{r}-{i}", env))
                print(f"round {r + 1}/{args.rounds}: {' '.join(cell)}: {measured[' '.join(cell)][-1]}", file=sys.stderr, flush=True)
    rows = []
    for cell, got in measured.items():
        med = {k: statistics.median(g[k] for g in got) for k in ("fresh", "warmup", "first_of_sweep", "third_of_sweep")}
        rows.append({"cell": cell, "rounds": len(got), "fresh_seconds": round(med["fresh"], 3), "warmup_seconds": round(med["warmup"], 3),
                     "first_of_sweep_seconds": round(med["first_of_sweep"], 3), "third_of_sweep_seconds": round(med["third_of_sweep"], 3),
                     "ratio": round(med["fresh"] / med["third_of_sweep"], 2),
                     "later_jobs_warmup": max(w for g in got for w in g["sweep_warmups"][1:])})
    table = pd.DataFrame(rows)
    table.to_csv(args.out, index=False)
    print(table.to_string(index=False))


if __name__ == "__main__":
    sys.exit(guarded(main))
