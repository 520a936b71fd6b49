#!/usr/bin/env python
"""Uncertainty benchmark: GCNGP and GCNGP-X (gaussian and dirichlet likelihoods) against the four
GCN baselines (softmax, temperature scaling, a 5-GCN ensemble, MC dropout) under the protocols
of ``protocol=`` (misclassification, leave-out classes, feature shift, structural shift).

For each dataset, protocol and seed the graph is loaded once with the protocol's splits (made
from the seed); the GP jobs and the GCN run on it as ``gnngp run`` runs them (the same job
code). The four GCN rows come from one training of the ensemble: its first member is the model
that softmax, temperature scaling and MC dropout read, and each row's seconds are its own
method's (the members it trained, its own inference). Regression sets (``--regression``) run
the GPs without a protocol: their uncertainty is NLPD and the 95% coverage. Rows are appended
to ``--out`` as each finishes (a stopped run keeps them); ``scripts/docs_benchmarks.py`` makes the
docs page from it (kind ``uncertainty``).

    python scripts/bench_uncertainty.py --datasets cora citeseer --seeds 0 1 2 3 4 --out scripts/results/uncertainty.csv
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from gnngp_cli.api import compose
from gnngp_cli.errors import GnngpError
from gnngp_cli.cli.execute import run_job
from gnngp_cli.job.gnn_job import run_gnn
from gnngp_cli.job.loading import load_graph

DATASETS = ["cora", "citeseer", "pubmed", "chameleon_filtered", "tolokers", "minesweeper"]
PROTOCOLS = ["misclassification", "leave_out_classes", "feature_shift", "structural_shift"]
GPS = [("gcngp", "gaussian"), ("gcngp", "dirichlet"), ("gcngp_x", "gaussian"), ("gcngp_x", "dirichlet")]
GNN_UNCERTAINTY = ["softmax", "temperature", "ensemble", "mc_dropout"]
KEEP = ["status", "dataset", "protocol", "seed", "method", "kernel", "likelihood", "uncertainty", "metric", "test", "test_ood", "val",
        "nll", "brier", "ece", "mce", "auroc_variance", "auroc_entropy", "auroc_maxprob", "aupr_variance", "aupr_entropy", "aupr_maxprob",
        "nlpd", "coverage95", "temperature", "alpha", "nugget", "landmarks", "kernel_seconds", "train_seconds", "inference_seconds",
        "total_seconds", "peak_rss_mb", "error"]


def append(out: Path, rows: list[dict]) -> None:
    frame = pd.DataFrame(rows).reindex(columns=KEEP)
    frame.to_csv(out, mode="a", header=not out.exists(), index=False)


def error_row(dataset: str, protocol: str, seed: int, method: str, err: Exception) -> dict:
    return {"status": "error", "dataset": dataset, "protocol": protocol, "seed": seed, "method": method, "error": str(err).splitlines()[0]}


def done(out: Path) -> set:
    """The cells ``out`` holds whole (the last row a cell writes is its GCN's or its last GP's)."""
    if not out.exists():
        return set()
    rows = pd.read_csv(out)
    return {(r.dataset, r.protocol, int(r.seed), str(r.method)) for r in rows.itertuples() if isinstance(r.method, str)}


def cell(dataset: str, protocol: str, seed: int, gnn: bool, out: Path, kernels: list[str]) -> None:
    base = [f"dataset={dataset}", f"protocol={protocol}", f"seed={seed}", "progress=false"]
    try:
        graph = load_graph(compose([*base, "kernel=gcngp"]))
    except GnngpError as err:   # e.g. leave-out classes on a two-class set: the reason, once
        append(out, [error_row(dataset, protocol, seed, "", err)])
        print(f"{dataset} {protocol} {seed}: {err}", file=sys.stderr)
        return
    for kernel, likelihood in GPS:
        if kernel not in kernels or (likelihood == "dirichlet" and graph.data.task != "classification"):
            continue
        try:
            rows = run_job(compose([*base, f"kernel={kernel}", f"likelihood={likelihood}"]), graph)
        except GnngpError as err:
            rows = [error_row(dataset, protocol, seed, kernel, err)]
        append(out, [{**r, "protocol": protocol, "seed": seed} for r in rows])
    if gnn and graph.data.task == "classification":
        try:
            rows = run_gnn(compose([*base, "gnn=gcn", "gnn.uncertainty=ensemble"]), graph, uncertainties=GNN_UNCERTAINTY)
        except GnngpError as err:
            rows = [error_row(dataset, protocol, seed, "gcn", err)]
        append(out, [{**r, "protocol": protocol, "seed": seed} for r in rows])
    print(f"{dataset} {protocol} seed {seed}: done", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/bench/uncertainty.csv")
    parser.add_argument("--datasets", nargs="*", default=DATASETS)
    parser.add_argument("--protocols", nargs="*", default=PROTOCOLS)
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--regression", nargs="*", default=[], help="regression sets: the GPs' NLPD and coverage, no protocol")
    parser.add_argument("--no-gnn", action="store_true", help="the GP rows only")
    parser.add_argument("--kernels", nargs="*", default=["gcngp", "gcngp_x"], help="the GP kernels (e.g. gcngp_x alone on the large sets)")
    parser.add_argument("--skip-done", action="store_true", help="skip the cells whose last row (the GCN's, or the last GP's) is in --out")
    args = parser.parse_args()
    if not os.environ.get("GNNGP_DATA_MIRROR"):
        print("note: GNNGP_DATA_MIRROR is unset; datasets must already be in the cache", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    finished = done(out) if args.skip_done else set()
    last = "GCN" if not args.no_gnn else ("GCNGP-X" if "gcngp_x" in args.kernels else "GCNGP")
    for dataset in args.datasets:
        for protocol in args.protocols:
            for seed in args.seeds:
                if (dataset, protocol, seed, last) not in finished:
                    cell(dataset, protocol, seed, not args.no_gnn, out, args.kernels)
    for dataset in args.regression:
        for seed in args.seeds:
            cell(dataset, "none", seed, False, out, args.kernels)


if __name__ == "__main__":
    main()
