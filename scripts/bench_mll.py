#!/usr/bin/env python
"""Benchmark: the time of fit=mll (50 steps by default) against the paper's grid protocol, on
PubMed with the exact gcngp kernel, in one process (one run, so one machine state).

Each protocol runs ``--repeats`` times, alternating, after one warm-up run of each; the time
of a run is its ``total_seconds`` (kernel + fit + inference wall seconds, device
synchronised; data loading apart). Prints the medians and their ratio, and exits 1 when the
ratio exceeds the bar (20x).

    python scripts/bench_mll.py [--dataset pubmed] [--kernel gcngp] [--steps 50] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys

from gnngp_cli.api import compose
from gnngp_cli.cli.execute import run_job
from gnngp_cli.job.loading import load_graph
from benchrun import at_least, guarded

BAR = 20.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="pubmed")
    parser.add_argument("--kernel", default="gcngp")
    parser.add_argument("--steps", type=at_least(1), default=50)
    parser.add_argument("--repeats", type=at_least(1), default=3)
    args = parser.parse_args()
    configs = {
        "grid": compose([f"dataset={args.dataset}", f"kernel={args.kernel}", "fit=grid"]),
        "mll": compose([f"dataset={args.dataset}", f"kernel={args.kernel}", "fit=mll", f"fit.steps={args.steps}", "fit.log_every=0"]),
    }
    prep = load_graph(configs["grid"])  # the dataset is loaded once, outside the timings
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    rows = {}
    for repeat in range(args.repeats + 1):
        for name, cfg in configs.items():
            row = run_job(cfg, prep)[0]
            rows[name] = row
            if repeat:  # the first round warms up
                seconds[name].append(row["total_seconds"])
    grid, mll = statistics.median(seconds["grid"]), statistics.median(seconds["mll"])
    ratio = mll / grid
    print(f"{args.kernel} on {args.dataset}, {args.repeats} runs each (median wall seconds, kernel + fit + inference):")
    print(f"  grid protocol: {grid:.2f} s   test {rows['grid']['test']:.4f}")
    print(f"  fit=mll, {args.steps} steps: {mll:.2f} s (fit {rows['mll']['fit_seconds']:.2f} s)   test {rows['mll']['test']:.4f}")
    print(f"  ratio {ratio:.1f}x (bar: at most {BAR:g}x) -> {'ok' if ratio <= BAR else 'TOO SLOW'}")
    sys.exit(0 if ratio <= BAR else 1)


if __name__ == "__main__":
    sys.exit(guarded(main))
