#!/usr/bin/env python
"""Tangent-kernel benchmark: each kernel's NNGP (``kernel.limit=nngp``) and NTK (``kernel.limit=ntk``)
on the public splits, 2 layers, beside the numbers infinite-width-gnns (Cobanoglu 2023, the
``example-configs`` results files of yCobanoglu/infinite-width-gnns) reports for its GNNGP and GNTK
(and its GAT-GP and GAT-NTK beside the GAT kernels).

Each configuration runs twice in this process through the job code of ``gnngp run``; the second
run's seconds are written (the first pays PyTorch's one-time start-up, the same for every
configuration). Each row is saved to ``--out`` as it finishes, in place of that configuration's
earlier row (a rerun is one copy: ``scripts/benchcsv.py``); ``scripts/docs_benchmarks.py``
makes the docs page from it (kind ``ntk``).

``--ties FILE`` writes, for each GCNGP and GATGP cell (those set beside their numbers), its validation plateau: every
nugget of the grid that ties the best validation metric, with the test metric a run gives at
that one nugget (``nugget.min = nugget.max``, ``num=1``). When validation cannot tell a range of
nuggets apart, this says how much the test number could move within it.

``--gnns gcn gat --gnn-out FILE`` also trains the finite networks the kernels are limits of (the GCN
beside GCNGP, PyG's ``GATConv`` beside GATGP), each dataset's after its kernels in the same
process, with their defaults (100 epochs, full batch), and writes their test accuracy and seconds
(training + inference, data loading apart; a warm-up of one epoch first).

    python scripts/bench_ntk.py --out scripts/results/ntk.csv [--extra nugget.num=401] [--ties ties.csv]
                                [--gnns gcn gat --gnn-out scripts/results/ntk_gnn.csv]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gnngp_cli.api import NodeGP, compose, load_dataset, run
from gnngp_cli.errors import GnngpError

from benchcsv import check_writable, read_rows, save_rows
from benchrun import guarded

DATASETS = ["cora", "citeseer", "pubmed"]
KERNELS = ["gcngp", "gcngp_x", "gcn2gp", "gingp", "sagegp", "gatgp", "gatgp_x"]
# infinite-width-gnns's own results (2 layers, public splits): GNNGP and GNTK test accuracy (its GAT-GP and
# GAT-NTK for the GAT kernels, its GCN kernels for the others), and the seconds it reports (PubMed's GCN
# kernels, 115 s; GAT on Cora about 104 s and on CiteSeer about 140 s; the others are not given)
REFERENCE = {("gcn", "cora", "nngp"): 0.828, ("gcn", "cora", "ntk"): 0.825, ("gcn", "citeseer", "nngp"): 0.711,
             ("gcn", "citeseer", "ntk"): 0.719, ("gcn", "pubmed", "nngp"): 0.796, ("gcn", "pubmed", "ntk"): 0.794,
             ("gat", "cora", "nngp"): 0.794, ("gat", "cora", "ntk"): 0.790, ("gat", "citeseer", "nngp"): 0.712,
             ("gat", "citeseer", "ntk"): 0.713}
REFERENCED = ("gcngp", "gatgp")   # the kernels set beside their own numbers (the others get GCN's reference row only as context)
REFERENCE_SECONDS = {("gcngp", "pubmed"): 115.0, ("gatgp", "cora"): 104.0, ("gatgp", "citeseer"): 140.0}
KEEP = ["dataset", "method", "kernel", "limit", "metric", "test", "val", "nugget", "landmarks", "kernel_seconds", "inference_seconds",
        "total_seconds", "peak_rss_mb", "reference_test", "reference_seconds", "overrides", "status", "error"]


def measure(dataset: str, kernel: str, limit: str, extra: list[str]) -> dict:
    overrides = [f"dataset={dataset}", f"kernel={kernel}", f"kernel.limit={limit}", "progress=false", *extra]
    run(cfg=compose(overrides))                 # warm-up: PyTorch's one-time costs
    row = run(cfg=compose(overrides))[0]
    row["overrides"] = " ".join(overrides[1:])
    row["reference_test"] = REFERENCE.get(("gat" if kernel.startswith("gatgp") else "gcn", dataset, limit))
    row["reference_seconds"] = REFERENCE_SECONDS.get((kernel, dataset))
    return row


TIES_KEEP = ["dataset", "method", "kernel", "limit", "grid", "nugget", "val", "test", "chosen", "tied", "reference_test"]
GNN_KEEP = ["dataset", "gnn", "method", "test", "val", "layers", "train_seconds", "inference_seconds", "total_seconds", "peak_rss_mb",
            "overrides", "status", "error"]


def train_gnn(dataset: str, gnn: str, extra: list[str]) -> dict:
    """The finite network, trained with its defaults (a one-epoch warm-up first, for PyTorch's
    one-time costs and the layer's first call)."""
    overrides = [f"dataset={dataset}", f"gnn={gnn}", "progress=false", *extra]
    run(cfg=compose([*overrides, "gnn.epochs=1"]))
    row = run(cfg=compose(overrides))[0]
    row.update(gnn=gnn, overrides=" ".join(overrides[1:]))
    return row


def plateau(dataset: str, kernel: str, limit: str, extra: list[str]) -> list[dict]:
    """The nuggets of the cell's grid that tie its best validation metric, each with the test
    metric of a run at that one nugget (the first of them is the one the cell chose)."""
    settings = dict(o.split("=", 1) for o in extra)
    grid = int(settings.get("nugget.num", 101))
    curve = NodeGP(kernel=kernel, **{"kernel.limit": limit, "progress": False, **settings}).fit(load_dataset(dataset)).validation_curve
    best = max(curve["val"])
    tied = [n for n, v in zip(curve["nugget"], curve["val"]) if v == best]
    rest = [o for o in extra if not o.startswith("nugget.")]
    rows = []
    for i, nugget in enumerate(tied):
        one = [f"dataset={dataset}", f"kernel={kernel}", f"kernel.limit={limit}", "progress=false", *rest,
               f"nugget.min={nugget!r}", f"nugget.max={nugget!r}", "nugget.num=1"]
        row = run(cfg=compose(one))[0]
        rows.append({"dataset": dataset, "method": row["method"], "kernel": kernel, "limit": limit, "grid": grid, "nugget": nugget,
                     "val": row["val"], "test": row["test"], "chosen": i == 0, "tied": len(tied),
                     "reference_test": REFERENCE.get(("gat" if kernel.startswith("gatgp") else "gcn", dataset, limit))})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--kernels", nargs="+", default=KERNELS)
    parser.add_argument("--extra", nargs="*", default=[], help="overrides added to every run, e.g. nugget.num=401")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench/ntk.csv"), help="the CSV (scripts/results/ntk.csv is the committed one)")
    parser.add_argument("--ties", type=Path, default=None, help="also write each referenced cell's validation plateau here")
    parser.add_argument("--gnns", nargs="*", default=[], help="finite networks to train beside the kernels, e.g. gcn gat")
    parser.add_argument("--gnn-out", type=Path, default=None, help="where --gnns writes its rows")
    parser.add_argument("--gnn-set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for the --gnns runs only")
    args = parser.parse_args(argv)
    if args.gnns and args.gnn_out is None:
        parser.error("--gnns writes its rows to --gnn-out FILE; give one")
    from gnngp_cli.gnn import GNNS   # checked before the first kernel runs, not after a dataset's kernels

    unknown = [g for g in args.gnns if g not in GNNS]
    if unknown:
        parser.error(f"--gnns {' '.join(unknown)}: not a GNN; use some of {', '.join(sorted(GNNS))}")
    if not os.environ.get("GNNGP_DATA_MIRROR"):
        print("set GNNGP_DATA_MIRROR to the offline mirror (../shared/datasets)", file=sys.stderr)
        return 2
    for path, columns in ((args.out, KEEP), (args.ties, TIES_KEEP), (args.gnn_out, GNN_KEEP)):
        if path is not None:   # another table's CSV, a folder, a path that cannot be written: before any work
            read_rows(path, columns)
            check_writable(path)
    for dataset in args.datasets:
        for kernel in args.kernels:
            for limit in ("nngp", "ntk"):
                try:
                    row = measure(dataset, kernel, limit, args.extra)
                    print(f"{dataset} {row['method']}: test {row['test']:.4f} in {row['kernel_seconds'] + row['inference_seconds']:.2f} s",
                          flush=True)
                except GnngpError as err:   # e.g. an exact kernel refused for memory: a row that says why
                    row = {"status": "error", "dataset": dataset, "kernel": kernel, "limit": limit, "error": str(err).splitlines()[0],
                           "overrides": " ".join([f"kernel={kernel}", f"kernel.limit={limit}", "progress=false", *args.extra])}
                    print(f"{dataset} {kernel} {limit}: {row['error']}", flush=True)
                save_rows(args.out, [row], KEEP, replace=[{"dataset": dataset, "overrides": row["overrides"]}])
                if args.ties is not None and row.get("status") == "ok" and kernel in REFERENCED:
                    tied = plateau(dataset, kernel, limit, args.extra)
                    save_rows(args.ties, tied, TIES_KEEP, replace=[{"dataset": dataset, "kernel": kernel, "limit": limit, "grid": r["grid"]} for r in tied[:1]])
                    tests = [r["test"] for r in tied]
                    print(f"  {len(tied)} nuggets tie on validation; test {min(tests):.4f}-{max(tests):.4f}", flush=True)
        for gnn in args.gnns:
            try:
                row = train_gnn(dataset, gnn, args.gnn_set)
                print(f"{dataset} {row['method']}: test {row['test']:.4f} in {row['total_seconds']:.2f} s", flush=True)
            except GnngpError as err:
                row = {"status": "error", "dataset": dataset, "gnn": gnn, "error": str(err).splitlines()[0],
                       "overrides": " ".join([f"gnn={gnn}", "progress=false", *args.gnn_set])}
                print(f"{dataset} gnn={gnn}: {row['error']}", flush=True)
            save_rows(args.gnn_out, [row], GNN_KEEP, replace=[{"dataset": dataset, "overrides": row["overrides"]}])
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
