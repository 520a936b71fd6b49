#!/usr/bin/env python
"""Conformal prediction and calibration benchmark: GP kernels against GCN under the random
20/10/70 split of CF-GNN and GETS (``protocol=random_split``), seeds 0-4.

For each dataset and seed the graph is loaded once with the seed's split; every GP job and the
GCN run on it as ``gnngp run`` runs them (the same job code), once per conformal score
(``--scores``, default ``aps daps``; the GCN trains once per score, with the same seed, so its
two rows read the same model). Each row has the test metric, ECE/NLL/Brier (the GCN's after
temperature scaling on validation: ``gnn.uncertainty=temperature``), the conformal columns
(coverage, set size, singleton hits: mean and std over ``conformal.splits`` calibration/test
splits of the test nodes) and ``conformal_seconds``. Each job's rows are saved to ``--out`` as it
finishes, in place of that job's earlier rows (a rerun is one copy: ``scripts/benchcsv.py``);
``scripts/docs_benchmarks.py`` makes the docs page from it (kind ``conformal``).

    python scripts/bench_conformal.py --datasets cora citeseer pubmed chameleon_filtered tolokers --out scripts/results/conformal.csv
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gnngp_cli.api import compose
from gnngp_cli.cli.execute import run_job
from gnngp_cli.job.gnn_job import run_gnn
from gnngp_cli.job.loading import load_graph

from benchcsv import check_writable, read_rows, run_cell
from benchrun import guarded

DATASETS = ["cora", "citeseer", "pubmed", "chameleon_filtered", "tolokers"]
GPS = [("gcngp", "gaussian"), ("gcngp_x", "gaussian"), ("gcngp", "dirichlet")]
KEEP = ["status", "dataset", "protocol", "seed", "method", "kernel", "likelihood", "uncertainty", "metric", "test", "val", "nll",
        "brier", "ece", "temperature", "conformal", "conformal_alpha", "coverage", "coverage_std", "set_size", "set_size_std",
        "singleton_hit", "singleton_hit_std", "interval_width", "conformal_seconds", "kernel_seconds", "train_seconds",
        "inference_seconds", "total_seconds", "peak_rss_mb", "n_nodes", "error"]


def cell(dataset: str, seed: int, scores: list[str], gps: list[tuple[str, str]], gnn: bool, out: Path, splits: int, skip: bool) -> None:
    """One dataset and seed (:func:`benchcsv.run_cell`): a GP job per kernel, likelihood and
    score, and the GCN per score."""
    base = [f"dataset={dataset}", "protocol=random_split", f"seed={seed}", "progress=false"]
    where = {"dataset": dataset, "seed": seed}
    jobs = [({**where, "kernel": kernel, "likelihood": likelihood, "conformal": score}, (score, kernel, likelihood))
            for score in scores for kernel, likelihood in gps] + ([({**where, "method": "GCN", "conformal": score}, (score, None, None)) for score in scores] if gnn else [])

    def run(graph, what):
        score, kernel, likelihood = what
        conformal = [f"conformal={score}", f"conformal.splits={splits}"]
        if kernel is None:   # the GCN, trained once per score with the same seed: its two rows read one model
            uncertainty = "temperature" if graph.data.task == "classification" else "softmax"
            return run_gnn(compose([*base, "gnn=gcn", f"gnn.uncertainty={uncertainty}", *conformal]), graph)
        if likelihood != "gaussian" and graph.data.task != "classification":
            return None
        return run_job(compose([*base, f"kernel={kernel}", f"likelihood={likelihood}", *conformal]), graph)

    if run_cell(out, KEEP, where, jobs, lambda: load_graph(compose([*base, "kernel=gcngp"])), run, skip, {"seed": seed, "protocol": "random_split"}):
        print(f"{dataset} seed {seed}: done", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/bench/conformal.csv")
    parser.add_argument("--datasets", nargs="*", default=DATASETS)
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--scores", nargs="*", default=["aps", "daps"])
    parser.add_argument("--kernels", nargs="*", default=[f"{k}:{lk}" for k, lk in GPS], help="kernel:likelihood pairs")
    parser.add_argument("--splits", type=int, default=100, help="conformal.splits")
    parser.add_argument("--no-gnn", action="store_true")
    parser.add_argument("--skip-done", action="store_true", help="skip the jobs (a kernel and likelihood, or the GCN, of a dataset, seed and score) --out holds measured")
    args = parser.parse_args()
    if not os.environ.get("GNNGP_DATA_MIRROR"):
        print("note: GNNGP_DATA_MIRROR is unset; datasets must already be in the cache", file=sys.stderr)
    if args.splits < 1:
        parser.error(f"--splits {args.splits}: give at least 1 calibration/test split of the test nodes (conformal.splits)")
    gps = []
    for pair in args.kernels:
        kernel, _, likelihood = pair.partition(":")
        if not kernel or likelihood not in ("gaussian", "dirichlet"):
            parser.error(f"--kernels {pair}: give kernel:likelihood pairs, the likelihood gaussian or dirichlet (e.g. gcngp:gaussian)")
        gps.append((kernel, likelihood))
    out = Path(args.out)
    read_rows(out, KEEP)   # another table's CSV, or a folder: refused before any work
    check_writable(out)
    for dataset in args.datasets:
        for seed in args.seeds:
            cell(dataset, seed, args.scores, gps, not args.no_gnn, out, args.splits, args.skip_done)

if __name__ == "__main__":
    sys.exit(guarded(main))
