#!/usr/bin/env python
"""Uncertainty benchmark: GCNGP and GCNGP-X (gaussian and dirichlet likelihoods) against the four
GCN baselines (softmax, temperature scaling, a 5-GCN ensemble, MC dropout) under the protocols
of ``protocol=`` (misclassification, leave-out classes, feature shift, structural shift).

For each dataset, protocol and seed the graph is loaded once with the protocol's splits (made
from the seed); the GP jobs and the GCN run on it as ``gnngp run`` runs them (the same job
code). The four GCN rows come from one training of the ensemble: its first member is the model
that softmax, temperature scaling and MC dropout read, and each row's seconds are its own
method's (the members it trained, its own inference). Regression sets (``--regression``) run
the GPs without a protocol: their uncertainty is NLPD and the 95% coverage. Each job's rows are
saved to ``--out`` as it finishes (a stopped run keeps them), in place of that job's earlier rows
(a rerun is one copy: ``scripts/benchcsv.py``); ``scripts/docs_benchmarks.py`` makes the docs
page from it (kind ``uncertainty``).

    python scripts/bench_uncertainty.py --datasets cora citeseer --seeds 0 1 2 3 4 --out scripts/results/uncertainty.csv
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

DATASETS = ["cora", "citeseer", "pubmed", "chameleon_filtered", "tolokers", "minesweeper"]
PROTOCOLS = ["misclassification", "leave_out_classes", "feature_shift", "structural_shift"]
GPS = [("gcngp", "gaussian"), ("gcngp", "dirichlet"), ("gcngp_x", "gaussian"), ("gcngp_x", "dirichlet")]
GNN_UNCERTAINTY = ["softmax", "temperature", "ensemble", "mc_dropout"]
KEEP = ["status", "dataset", "protocol", "seed", "method", "kernel", "likelihood", "uncertainty", "metric", "test", "test_ood", "val",
        "nll", "brier", "ece", "mce", "auroc_variance", "auroc_entropy", "auroc_maxprob", "aupr_variance", "aupr_entropy", "aupr_maxprob",
        "nlpd", "coverage95", "temperature", "alpha", "nugget", "landmarks", "kernel_seconds", "train_seconds", "inference_seconds",
        "total_seconds", "peak_rss_mb", "error"]


def cell(dataset: str, protocol: str, seed: int, gnn: bool, out: Path, kernels: list[str], skip: bool) -> None:
    """One dataset, protocol and seed (:func:`benchcsv.run_cell`): a GP job per kernel and
    likelihood, and the GCN's four rows."""
    base = [f"dataset={dataset}", f"protocol={protocol}", f"seed={seed}", "progress=false"]
    where = {"dataset": dataset, "protocol": protocol, "seed": seed}
    jobs = [({**where, "kernel": kernel, "likelihood": likelihood}, (kernel, likelihood)) for kernel, likelihood in GPS if kernel in kernels]
    if gnn:
        jobs.append(({**where, "method": "GCN"}, None))

    def run(graph, what):
        if what is None:   # the GCN's four rows, from one training of the ensemble
            if graph.data.task != "classification":
                return None
            return run_gnn(compose([*base, "gnn=gcn", "gnn.uncertainty=ensemble"]), graph, uncertainties=GNN_UNCERTAINTY)
        kernel, likelihood = what
        if likelihood == "dirichlet" and graph.data.task != "classification":
            return None
        return run_job(compose([*base, f"kernel={kernel}", f"likelihood={likelihood}"]), graph)

    # e.g. leave-out classes on a two-class set: the graph does not load, its reason once
    if run_cell(out, KEEP, where, jobs, lambda: load_graph(compose([*base, "kernel=gcngp"])), run, skip, {"protocol": protocol, "seed": seed}):
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
    parser.add_argument("--skip-done", action="store_true", help="skip the jobs (a kernel and likelihood, or the GCN, of a dataset, protocol and seed) --out holds measured")
    args = parser.parse_args()
    if not os.environ.get("GNNGP_DATA_MIRROR"):
        print("note: GNNGP_DATA_MIRROR is unset; datasets must already be in the cache", file=sys.stderr)
    out = Path(args.out)
    read_rows(out, KEEP)   # another table's CSV, or a folder: refused before any work
    check_writable(out)
    for dataset in args.datasets:
        for protocol in args.protocols:
            for seed in args.seeds:
                cell(dataset, protocol, seed, not args.no_gnn, out, args.kernels, args.skip_done)
    for dataset in args.regression:
        for seed in args.seeds:
            cell(dataset, "none", seed, False, out, args.kernels, args.skip_done)

if __name__ == "__main__":
    sys.exit(guarded(main))
