"""Peak memory of every kernel on every mirrored dataset and on the csbm stand-ins, beside the
estimate each run prints before computing.

One process per dataset loads it once and runs each kernel in turn; before each kernel it hands
freed memory back to the system (``malloc_trim``) and resets the process's peak resident memory
(``/proc/self/clear_refs``, Linux), so a kernel's peak is its own plus what the process holds
with the dataset loaded, as in a ``gnngp run`` of that kernel alone. Exact kernels on the
stand-ins are refused by design (their dense blocks do not fit) and are not run.

    python scripts/bench_memory.py [--datasets cora,citeseer,...] [--kernels gcngp,...] [--out memory.csv]

Writes a CSV and prints a Markdown table: dataset, kernel, estimate (GB), measured peak (GB),
their ratio and the kernel + inference seconds. Needs GNNGP_DATA_MIRROR for the real datasets.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path

MIRRORED = ["cora", "citeseer", "pubmed", "chameleon", "squirrel"]
STAND_INS = ["arxiv", "reddit"]
KERNELS = ["gcngp", "gcn2gp", "gingp", "sagegp", "ggp", "rbf"]


def _hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM")


def _reset_peak() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def one_dataset(dataset: str, kernels: list[str], stand_in: bool) -> list[dict]:
    """Run in a child process: every kernel on one dataset."""
    from gnngp_cli.api import compose
    from gnngp_cli.execute import run_job
    from gnngp_cli.job.loading import load_graph

    rows = []
    overrides = [f"dataset={dataset}", "runs=1"] + (["experiment.stand_in=csbm"] if stand_in else [])
    prep = None
    for kernel in kernels:
        extra = ["kernel.gamma_search=false"] if kernel.startswith("rbf") else []   # the search repeats the same kernel: same peak
        cfg = compose([*overrides, f"kernel={kernel}", *extra])
        if prep is None:
            prep = load_graph(cfg)
        _reset_peak()
        try:
            row = run_job(cfg, prep)[0]
            rows.append({"dataset": dataset + (" (csbm stand-in)" if stand_in else ""), "kernel": kernel,
                         "estimated_gb": row["estimated_gb"], "peak_gb": round(_hwm_bytes() / 2**30, 3),
                         "seconds": round(row["kernel_seconds"] + row["inference_seconds"], 2), "landmarks": row["landmarks"]})
        except Exception as err:  # noqa: BLE001 - a refused or failed case is a row too
            rows.append({"dataset": dataset, "kernel": kernel, "error": f"{type(err).__name__}: {err}"[:200]})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(MIRRORED + STAND_INS))
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--out", default="bench_memory.csv")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        dataset, stand_in, kernels = json.loads(args.child)
        print(json.dumps(one_dataset(dataset, kernels, stand_in)))
        return
    import pandas as pd

    base = args.kernels.split(",")
    rows = []
    for dataset in args.datasets.split(","):
        stand_in = dataset in STAND_INS
        kernels = [k + "_x" for k in base] if stand_in else [k for k in base] + [k + "_x" for k in base]
        out = subprocess.run([sys.executable, __file__, "--child", json.dumps([dataset, stand_in, kernels])], capture_output=True, text=True)
        if out.returncode != 0:
            rows.append({"dataset": dataset, "error": out.stderr.strip().splitlines()[-1][:200] if out.stderr.strip() else "failed"})
            continue
        rows += json.loads(out.stdout.strip().splitlines()[-1])
        pd.DataFrame(rows).to_csv(args.out, index=False)
    table = pd.DataFrame(rows)
    if "peak_gb" in table:
        table["ratio"] = (table["estimated_gb"] / table["peak_gb"]).round(2)
    table.to_csv(args.out, index=False)
    columns = [c for c in ("dataset", "kernel", "landmarks", "estimated_gb", "peak_gb", "ratio", "seconds", "error") if c in table]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("" if pd.isna(r[c]) else str(r[c]) for c in columns) + " |" for _, r in table.iterrows()]
    print("\n".join(lines))
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
