#!/usr/bin/env python
"""Conformal prediction and calibration benchmark: GP kernels against GCN under the random
20/10/70 split of CF-GNN and GETS (``protocol=random_split``), seeds 0-4.

For each dataset and seed the graph is loaded once with the seed's split; every GP job and the
GCN run on it as ``gnngp run`` runs them (the same job code), once per conformal score
(``--scores``, default ``aps daps``; the GCN trains once per score, with the same seed, so its
two rows read the same model). Each row has the test metric, ECE/NLL/Brier (the GCN's after
temperature scaling on validation: ``gnn.uncertainty=temperature``), the conformal columns
(coverage, set size, singleton hits: mean and std over ``conformal.splits`` calibration/test
splits of the test nodes) and ``conformal_seconds``. Rows are appended to ``--out`` as each
finishes; ``scripts/docs_benchmarks.py`` makes the docs page from it (kind ``conformal``).

    python scripts/bench_conformal.py --datasets cora citeseer pubmed chameleon_filtered tolokers --out scripts/results/conformal.csv
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from gnngp_cli.api import compose
from gnngp_cli.cli.execute import run_job
from gnngp_cli.errors import GnngpError
from gnngp_cli.job.gnn_job import run_gnn
from gnngp_cli.job.loading import load_graph

DATASETS = ["cora", "citeseer", "pubmed", "chameleon_filtered", "tolokers"]
GPS = [("gcngp", "gaussian"), ("gcngp_x", "gaussian"), ("gcngp", "dirichlet")]
KEEP = ["status", "dataset", "protocol", "seed", "method", "kernel", "likelihood", "uncertainty", "metric", "test", "val", "nll",
        "brier", "ece", "temperature", "conformal", "conformal_alpha", "coverage", "coverage_std", "set_size", "set_size_std",
        "singleton_hit", "singleton_hit_std", "interval_width", "conformal_seconds", "kernel_seconds", "train_seconds",
        "inference_seconds", "total_seconds", "peak_rss_mb", "n_nodes", "error"]


def append(out: Path, rows: list[dict]) -> None:
    pd.DataFrame(rows).reindex(columns=KEEP).to_csv(out, mode="a", header=not out.exists(), index=False)


def error_row(dataset: str, seed: int, method: str, score: str, err: Exception) -> dict:
    return {"status": "error", "dataset": dataset, "protocol": "random_split", "seed": seed, "method": method, "conformal": score,
            "error": str(err).splitlines()[0]}


def done(out: Path) -> set:
    if not out.exists():
        return set()
    rows = pd.read_csv(out)
    return {(r.dataset, int(r.seed)) for r in rows.itertuples() if r.method == "GCN" and r.conformal == "daps"}


def cell(dataset: str, seed: int, scores: list[str], gps: list[tuple[str, str]], gnn: bool, out: Path, splits: int) -> None:
    base = [f"dataset={dataset}", "protocol=random_split", f"seed={seed}", "progress=false", f"conformal.splits={splits}"]
    try:
        graph = load_graph(compose([*base, "kernel=gcngp"]))
    except GnngpError as err:
        append(out, [error_row(dataset, seed, "", "", err)])
        return
    for score in scores:
        for kernel, likelihood in gps:
            if likelihood != "gaussian" and graph.data.task != "classification":
                continue
            try:
                rows = run_job(compose([*base, f"kernel={kernel}", f"likelihood={likelihood}", f"conformal={score}"]), graph)
            except GnngpError as err:
                rows = [error_row(dataset, seed, kernel, score, err)]
            append(out, [{**r, "seed": seed} for r in rows])
        if gnn:
            uncertainty = "temperature" if graph.data.task == "classification" else "softmax"
            try:
                rows = run_gnn(compose([*base, "gnn=gcn", f"gnn.uncertainty={uncertainty}", f"conformal={score}"]), graph)
            except GnngpError as err:
                rows = [error_row(dataset, seed, "gcn", score, err)]
            append(out, [{**r, "seed": seed} for r in rows])
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
    parser.add_argument("--skip-done", action="store_true", help="skip the cells whose GCN daps row is in --out")
    args = parser.parse_args()
    if not os.environ.get("GNNGP_DATA_MIRROR"):
        print("note: GNNGP_DATA_MIRROR is unset; datasets must already be in the cache", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    finished = done(out) if args.skip_done else set()
    gps = [tuple(pair.split(":")) for pair in args.kernels]
    for dataset in args.datasets:
        for seed in args.seeds:
            if (dataset, seed) not in finished:
                cell(dataset, seed, args.scores, gps, not args.no_gnn, out, args.splits)


if __name__ == "__main__":
    main()
