#!/usr/bin/env python
"""Closing the gap to the strong GNNs on the heterophily suite (issue 27): what the kernel side
can do that the GNN side does, each variant on every split of each dataset, against Platonov et
al.'s GCN and GraphSAGE (their results notebook; residual connections, layer norm, 1000 steps)
and, where they report none (chameleon_filtered), the package's own GCN over the same splits.

The variants (``VARIANTS``): the heterophily kernels as shipped (H2GCNGP-X: separate ego and
hop branches; GPRGP-X); more landmarks; the tangent kernel (``kernel.limit=ntk``, the network
trained by gradient descent instead of at initialisation); SAGEGP-X with the node's own weight
(``kernel.sigma_w1``: the separate ego embedding of SAGE and GAT-sep; the package default is 0,
the paper's); a residual kernel (``K <- K + s_w^2 A g(K) A^T``: the kernel of
``h <- h + W A relu(h)`` is the independent sum of its two branches, since the new weight is
independent of ``h``), and its ego-separated form (``h <- h + W1 relu(h) + W2 A relu(h)``:
``K <- K + s_w^2 (g(K) + A g(K) A^T)``, both weights at ``kernel.sigma_w``).
Variants of one family differ in depth or ego weight; the family's setting is the one with the
best mean validation metric over the splits (as Platonov et al. choose a network's depth). Each
run records the test metric (ROC-AUC on the binary sets, accuracy otherwise) and kernel +
inference seconds; the table gives each family's chosen setting, its test mean +- std
(``ddof=1``) over the splits run, and per dataset the best family's gap to the strong GCN and
whether it is within 0.02 (the suite's target). ``scripts/docs_benchmarks.py`` draws the same
table from the rows (page ``heterophily-gap``).

Rows are written as each run ends, and a rerun runs only what ``<out>.csv`` lacks.

    python scripts/bench_gap.py --datasets minesweeper tolokers chameleon_filtered --out outputs/bench/gap [--splits 0 1 ...] [--variants ...]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
from benchrun import guarded

RESIDUAL = ["kernel=composed_x", "kernel.first=[input,weight]", "kernel.hidden=[{add:[[{scale:1}],[relu,weight,conv]]}]"]
RESIDUAL_EGO = ["kernel=composed_x", "kernel.first=[input,weight]", "kernel.hidden=[{add:[[{scale:1}],[relu,weight],[relu,weight,conv]]}]"]
# variant -> (family, overrides). A family's settings are chosen as Platonov et al. choose a
# network's depth: the one with the best mean validation metric over the splits
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "GCNGP-X": ("GCNGP-X", ["kernel=gcngp_x"]),
    "H2GCNGP-X": ("H2GCNGP-X", ["kernel=h2gcngp_x"]),
    "H2GCNGP-X, NTK": ("H2GCNGP-X, NTK", ["kernel=h2gcngp_x", "kernel.limit=ntk"]),
    "GPRGP-X": ("GPRGP-X", ["kernel=gprgp_x"]),
    "SAGEGP-X": ("SAGEGP-X (sigma_w1=0, the default)", ["kernel=sagegp_x"]),
    **{f"SAGEGP-X, L={layers}, sigma_w1={w1}": ("SAGEGP-X with the ego weight", ["kernel=sagegp_x", f"kernel.layers={layers}", f"kernel.sigma_w1={w1}"])
       for layers in (2, 3, 4) for w1 in (0.5, 1.0, 2.0)},
    "SAGEGP-X, L=3, sigma_w1=1.0, NTK": ("SAGEGP-X with the ego weight, NTK", ["kernel=sagegp_x", "kernel.layers=3", "kernel.sigma_w1=1.0", "kernel.limit=ntk"]),
    **{f"residual GCNGP-X, L={layers}": ("residual GCNGP-X", [*RESIDUAL, f"kernel.layers={layers}"]) for layers in (2, 3, 4, 5, 6)},
    **{f"residual ego GCNGP-X, L={layers}": ("residual GCNGP-X with an ego branch", [*RESIDUAL_EGO, f"kernel.layers={layers}"]) for layers in (2, 3, 4, 5, 6)},
    # not run by default (--variants): 76.6 s on minesweeper's split 0 against 1.7 s with 300 landmarks, the same ROC-AUC
    "H2GCNGP-X, 1,000 landmarks": ("H2GCNGP-X, 1,000 landmarks", ["kernel=h2gcngp_x", "landmarks.count=1000"]),
}
DEFAULT_VARIANTS = [v for v in VARIANTS if v != "H2GCNGP-X, 1,000 landmarks"]
# Platonov et al.'s results notebook (x100): mean, std over their 10 splits, best depth
THEIRS = {("minesweeper", "GCN"): (89.75, 0.52), ("minesweeper", "GraphSAGE"): (93.51, 0.57),
          ("tolokers", "GCN"): (83.64, 0.67), ("tolokers", "GraphSAGE"): (82.43, 0.44)}
# the package's own GCN (paper recipe, 100 epochs) over chameleon_filtered's 10 splits
# (scripts/results/heterophily_chameleon_filtered_10splits.csv): their notebook has no chameleon_filtered row
OURS_GCN = {"chameleon_filtered": (39.57, 1.84)}


def per_variant(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and variant (with its family): the mean validation metric, the test mean and
    std over the splits run, their count and the mean seconds."""
    rows = rows.assign(family=rows["variant"].map(lambda v: VARIANTS[v][0]))
    return (rows.groupby(["dataset", "family", "variant"], sort=False)
            .agg(metric=("metric", "first"), val=("val", "mean"), mean=("test", "mean"), std=("test", "std"),
                 splits=("test", "size"), seconds=("seconds", "mean"))
            .reset_index())


def summarise(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per dataset and family: the variant with the best mean validation metric, its test mean
    +- std; per dataset the best family (by test mean, as a results table is read, and by
    validation) against the strong GCN."""
    by_variant = per_variant(rows)
    table = by_variant.loc[by_variant.groupby(["dataset", "family"], sort=False)["val"].idxmax()].reset_index(drop=True)
    checks = []
    for dataset, group in table.groupby("dataset", sort=False):
        best = group.loc[group["mean"].idxmax()]
        gcn, source = (THEIRS[(dataset, "GCN")], "Platonov et al.'s GCN") if (dataset, "GCN") in THEIRS else (OURS_GCN.get(dataset), "the package's GCN")
        if gcn is None:
            checks.append(f"- {dataset}: best {best['variant']} {best['mean']:.4f}; no GCN to compare with")
            continue
        gap = best["mean"] - gcn[0] / 100
        by_val = group.loc[group["val"].idxmax()]
        checks.append(f"- {dataset}: best {best['variant']} {best['mean']:.4f} +- {best['std']:.4f} over {best['splits']} splits against "
                      f"{source} {gcn[0] / 100:.4f}: {gap:+.4f}, target (within 0.02) **{'met' if gap >= -0.02 else 'missed'}**; "
                      f"chosen on validation among all families instead: {by_val['variant']}, {by_val['mean']:.4f} ({by_val['mean'] - gcn[0] / 100:+.4f})")
    return table, checks


def main() -> None:
    from gnngp_cli.api import compose   # here, not above: scripts/docs_benchmarks.py reads summarise without torch
    from gnngp_cli.cli.execute import run_job
    from gnngp_cli.job.loading import load_graph

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*", default=["minesweeper", "tolokers", "chameleon_filtered"])
    parser.add_argument("--variants", nargs="*", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument("--splits", nargs="*", type=int, default=list(range(10)))
    parser.add_argument("--out", default="outputs/bench/gap")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    csv = out.with_suffix(".csv")
    rows = pd.read_csv(csv).to_dict("records") if csv.exists() else []
    done = {(r["dataset"], r["variant"], int(r["split"])) for r in rows}
    for dataset in args.datasets:
        for split in args.splits:
            todo = [v for v in args.variants if (dataset, v, split) not in done]
            if not todo:
                continue
            base = [f"dataset={dataset}", f"dataset.split_index={split}", "progress=false"]
            prep = load_graph(compose(base))
            for variant in todo:
                start = time.perf_counter()
                row = run_job(compose([*base, *VARIANTS[variant][1]]), prep)[0]
                if row["status"] != "ok":
                    print(f"{dataset} split {split} {variant}: {row['status']} {row.get('error', '')}", file=sys.stderr, flush=True)
                    continue
                rows.append({"dataset": dataset, "variant": variant, "split": split, "metric": row["metric"], "val": row["val"],
                             "test": row["test"], "seconds": row["kernel_seconds"] + row["inference_seconds"],
                             "wall_seconds": time.perf_counter() - start})
                print(f"{dataset} split {split} {variant}: test {row['metric']} {row['test']:.4f} (val {row['val']:.4f}) "
                      f"in {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
                pd.DataFrame(rows).to_csv(csv, index=False)
    table, checks = summarise(pd.DataFrame(rows))
    lines = ["| dataset | family | chosen on validation | metric | val | test mean | std | splits | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.dataset} | {r.family} | {r.variant} | {r.metric} | {r.val:.4f} | {r.mean:.4f} | {'' if pd.isna(r.std) else f'{r.std:.4f}'} "
              f"| {r.splits} | {r.seconds:.1f} |" for r in table.itertuples(index=False)]
    out.with_suffix(".md").write_text("\n".join(lines + [""] + checks) + "\n")
    print("\n".join(lines + [""] + checks))


if __name__ == "__main__":
    sys.exit(guarded(main))
