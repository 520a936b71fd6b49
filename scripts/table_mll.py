#!/usr/bin/env python
"""The README's fit=mll table: the paper's protocol (nugget on the validation grid), fit=mll,
and fit=mll with no validation labels at all (dataset.hide_val=true), for gcngp and gcngp_x
on Cora, CiteSeer, PubMed, chameleon and squirrel, in one process (one run).

Prints a Markdown table (test accuracy, or R^2 on chameleon and squirrel) with the mean over
the five datasets, and checks the issue's bar: fit=mll's mean at most 0.01 below the grid's,
and no NaN. Writes every row to a CSV.

    python scripts/table_mll.py --out outputs/mll/table_mll.csv [overrides such as fit.steps=100]
    python scripts/table_mll.py --from-csv a.csv b.csv     # render rows measured earlier (e.g. in parts; a cell in
                                                           # several parts: the last part's row, e.g. a rerun of a failed job)
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import pandas as pd

from gnngp_cli.api import run
from gnngp_cli.errors import GnngpError

from benchcsv import check_writable
from benchrun import guarded

DATASETS = ["cora", "citeseer", "pubmed", "chameleon", "squirrel"]
KERNELS = ["gcngp", "gcngp_x"]
PROTOCOLS = {"grid": ["fit=grid"], "mll": ["fit=mll"], "mll, no val labels": ["fit=mll", "dataset.hide_val=true"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/mll/table_mll.csv")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--kernels", nargs="+", default=KERNELS)
    parser.add_argument("--from-csv", nargs="+", help="render these CSVs instead of running")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every job (e.g. fit.steps=100)")
    args = parser.parse_args()
    if args.from_csv:
        parts = []
        for path in args.from_csv:
            try:
                part = pd.read_csv(path)
            except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
                parser.error(f"--from-csv {path} cannot be read ({str(err).splitlines()[0]})")
            if not {"dataset", "kernel", "protocol", "test"} <= set(part.columns):
                parser.error(f"--from-csv {path} is not a table_mll.py CSV (it needs the columns dataset, kernel, protocol, test)")
            parts.append(part)
        # a cell in several parts (a rerun of a failed job, the same file twice): the last part's row, once
        table = pd.concat(parts, ignore_index=True).drop_duplicates(["dataset", "kernel", "protocol"], keep="last")
        datasets = [d for d in args.datasets if d in set(table["dataset"])]
        raise SystemExit(0 if render(table, datasets, args.kernels) else 1)
    rows = []
    out = Path(args.out)
    check_writable(out)   # before minutes of work
    for dataset in args.datasets:
        for kernel in args.kernels:
            for protocol, overrides in PROTOCOLS.items():
                try:
                    row = run([f"dataset={dataset}", f"kernel={kernel}", "runs=1", *overrides, *args.overrides])[0]
                except GnngpError as err:   # e.g. a divergent fit: the cell says so, the table goes on
                    row = {"dataset": dataset, "kernel": kernel, "status": "error", "error": str(err), "test": float("nan")}
                    print(f"{kernel:8s} {dataset:10s} {protocol:20s} error: {err}", file=sys.stderr, flush=True)
                row["protocol"] = protocol
                rows.append(row)
                if row.get("status") == "error":
                    pd.DataFrame(rows).to_csv(out, index=False)
                    continue
                fitted = {k[7:]: round(v, 4) for k, v in row.items() if k.startswith("fitted_")}
                print(f"{kernel:8s} {dataset:10s} {protocol:20s} test {row['test']:.4f} val {row['val']:.4f} "
                      f"({row['total_seconds']:.1f} s) {fitted}", file=sys.stderr, flush=True)
                pd.DataFrame(rows).to_csv(out, index=False)   # after every job, so a long table can be read as it goes
    raise SystemExit(0 if render(pd.DataFrame(rows), args.datasets, args.kernels) else 1)


def _failure(failed: pd.DataFrame, dataset: str, protocol: str) -> str:
    """The cell of a job that raised (e.g. ``diverged at step 10``), else ``not run``."""
    if (dataset, protocol) not in failed.index:
        return "not run"
    match = re.search(r"diverged at step \d+", str(failed.loc[(dataset, protocol), "error"]))
    return match.group(0) if match else "error"


def render(table: pd.DataFrame, datasets: list[str], kernels: list[str]) -> bool:
    """Print one Markdown table per kernel and the verdict on the bar; True when it is met."""
    ok = True
    for kernel in kernels:
        ours = table[table["kernel"] == kernel]
        error = ours["status"].eq("error") if "status" in ours else pd.Series(False, index=ours.index)
        failed = ours[error].set_index(["dataset", "protocol"])
        part = ours[~error].pivot(index="dataset", columns="protocol", values="test").reindex(datasets)
        part = part.reindex(columns=list(PROTOCOLS))
        measured = ours[~error].set_index(["dataset", "protocol"])["test"]
        print(f"\n{kernel} (test accuracy; R^2 on chameleon and squirrel)\n")
        print("| dataset | " + " | ".join(PROTOCOLS) + " |")
        print("|---|" + "---:|" * len(PROTOCOLS))
        for dataset, values in part.iterrows():
            cells = [f"{v:.4f}" if (dataset, p) in measured.index else _failure(failed, dataset, p) for p, v in values.items()]
            print(f"| {dataset} | " + " | ".join(cells) + " |")
        complete = [d for d in part.index if all((d, p) in measured.index for p in PROTOCOLS)]
        means = part.loc[complete].mean()
        print(f"| **mean ({len(complete)})** | " + " | ".join(f"**{v:.4f}**" for v in means) + " |")
        gap = means["grid"] - means["mll"]
        nan = bool(measured.isna().any())
        for (dataset, protocol), err in failed.get("error", pd.Series(dtype=object)).items():
            print(f"- {kernel} on {dataset}, {protocol}: {err}")
        verdict = "meets" if gap <= 0.01 and not nan and failed.empty else "MISSES"   # a failed fit is no result
        ok &= verdict == "meets"
        print(f"\n{kernel}: fit=mll mean {means['mll']:.4f} vs grid {means['grid']:.4f} over {len(complete)} datasets "
              f"(grid - mll = {gap:+.4f}); NaN: {nan}; {verdict} the bar (at most 0.01 below, never NaN)")
    if not all(math.isfinite(v) for v in table.loc[table.get("status", pd.Series("ok", index=table.index)) != "error", "test"]):
        print("some test metric is NaN", file=sys.stderr)
    return ok


if __name__ == "__main__":
    sys.exit(guarded(main))
