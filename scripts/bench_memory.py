"""Peak memory of every kernel (every entry of the kernel registry, exact and low rank, in both
limits: the NNGP and, for a kernel with trained parameters, the tangent kernel) on every
mirrored dataset, the heterophily ones included, and of the low-rank kernels on the csbm
stand-ins, beside the estimate each run prints before computing.

One process per dataset loads it once and runs each kernel in turn; before each kernel it drops
the adjacencies and graph operators the last one built (a kernel builds its own, as a lone run
does), hands freed memory back to the system (``malloc_trim``) and resets the process's peak
resident memory (``/proc/self/clear_refs``, Linux), so a kernel's peak is its own plus what the
process holds with the dataset loaded, as in a ``gnngp run`` of that kernel alone. Exact kernels
on the stand-ins are refused by design (their dense blocks do not fit) and are not run; a case
in ``SKIPPED`` is a row that says why it was not run. A kernel's choice on validation that
repeats the same kernel is cut to the case of the largest peak (``CASE``): RBF without its gamma
search, GPRGP with the widest filter of its grid. A case that a run refuses by default for its
memory (``max_memory_gb``: half the free memory) is measured with the limit raised (``LIMIT``).

    python scripts/bench_memory.py [--datasets cora,citeseer,...] [--kernels gcngp,...] [--out memory.csv]

Writes a CSV and prints a Markdown table: dataset, kernel, limit, estimate (GB), measured peak (GB),
their ratio (estimate / peak) and the kernel + inference seconds. Needs GNNGP_DATA_MIRROR for
the real datasets; a dataset absent from the mirror (crocodile's features) is a row saying so.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from benchrun import guarded

MIRRORED = ["cora", "citeseer", "pubmed", "chameleon", "squirrel", "crocodile", "chameleon_filtered", "minesweeper", "tolokers"]
STAND_INS = ["arxiv", "reddit"]
# the same kernel repeated over a choice on validation: the case of the largest peak only
CASE = {"rbf": ["kernel.gamma_search=false"], "gprgp": ["kernel.coefficients=[1,-1,1]"]}
# the bench measures what a run refuses by default (max_memory_gb: half the free memory)
LIMIT = {("pubmed", "h2gcngp"): ["max_memory_gb=20"]}
SKIPPED = {
    ("tolokers", "h2gcngp"): "not run: exact A2 K A2^T with the 45M-entry 2-hop operator is ~4e12 flops (hours on this machine)",
    ("squirrel", "h2gcngp_x"): "not run: roots 7 x 2,496 = 17,472 wide on 5,201 nodes; the eigendecomposition of their 17,472^2 Gram matrix "
                               "(its estimate: ~9 GB, hours) would crowd the machine's other work",
    ("arxiv", "h2gcngp_x"): "not run: roots 7 x 1,858 = 13,006 wide on 169,343 nodes, 8 GB each (its estimate: ~22 GB, hours)",
}


def kernel_names() -> list[str]:
    """Every kernel of the registry (exact names; the low-rank twins add ``_x``)."""
    from gnngp_cli.kernels import KERNELS

    return list(KERNELS)


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


def has_tangent_kernel(kernel: str) -> bool:
    """Whether ``kernel.limit=ntk`` applies: a kernel with trained parameters (a weight or a bias)."""
    from gnngp_cli.api import compose
    from gnngp_cli.errors import ConfigError
    from gnngp_cli.kernels import KERNELS

    cfg = compose([f"kernel={kernel}", "kernel.limit=ntk"])
    try:
        KERNELS[cfg.kernel.name].architecture(cfg.kernel)
    except ConfigError:
        return False
    return True


def one_dataset(dataset: str, kernels: list[list[str]], stand_in: bool) -> list[dict]:
    """Run in a child process: every (kernel, limit) on one dataset."""
    from gnngp_cli.api import compose
    from gnngp_cli.cli.execute import run_job
    from gnngp_cli.job.loading import load_graph

    rows = []
    overrides = [f"dataset={dataset}", "runs=1"] + (["experiment.stand_in=csbm"] if stand_in else [])
    label = dataset + (" (csbm stand-in)" if stand_in else "")
    try:
        prep = load_graph(compose([*overrides, f"kernel={kernels[0][0]}"]))
    except Exception as err:  # noqa: BLE001 - an absent dataset is one row
        return [{"dataset": label, "error": f"{type(err).__name__}: {err}"[:200]}]
    for kernel, limit in kernels:
        if (dataset, kernel) in SKIPPED:
            rows.append({"dataset": label, "kernel": kernel, "limit": limit, "error": SKIPPED[(dataset, kernel)]})
            continue
        cfg = compose([*overrides, f"kernel={kernel}", f"kernel.limit={limit}", *CASE.get(kernel.removesuffix("_x"), []),
                       *LIMIT.get((dataset, kernel), [])])
        try:
            graph = replace(prep, _adjacencies={})   # the adjacency and its operators built anew, as in a lone run
            _reset_peak()
            row = run_job(cfg, graph)[0]
            rows.append({"dataset": label, "kernel": kernel, "limit": limit,
                         "estimated_gb": row["estimated_gb"], "peak_gb": round(_hwm_bytes() / 2**30, 3),
                         "seconds": round(row["kernel_seconds"] + row["inference_seconds"], 2), "landmarks": row["landmarks"]})
        except Exception as err:  # noqa: BLE001 - a refused or failed case is a row too
            rows.append({"dataset": label, "kernel": kernel, "limit": limit, "error": f"{type(err).__name__}: {err}"[:200]})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(MIRRORED + STAND_INS))
    parser.add_argument("--kernels", default=None, help="comma-separated kernels (default: every kernel of the registry)")
    parser.add_argument("--limits", default="nngp,ntk", help="comma-separated limits (ntk: for the kernels with trained parameters)")
    parser.add_argument("--out", default="bench_memory.csv")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        dataset, stand_in, kernels = json.loads(args.child)
        print(json.dumps(one_dataset(dataset, kernels, stand_in)))
        return
    import pandas as pd
    from gnngp_cli.cli.messages import closest
    from gnngp_cli.data.datasets import DATASETS

    base = args.kernels.split(",") if args.kernels else kernel_names()
    limits = args.limits.split(",")
    for flag, given, valid in (("--kernels", base, kernel_names()), ("--limits", limits, ["nngp", "ntk"]),
                               ("--datasets", args.datasets.split(","), list(DATASETS))):
        wrong = [name for name in given if name not in valid]
        if wrong:   # a typo wrote a row per case with its error and exited 0
            near = closest(wrong[0], valid)
            parser.error(f"{flag}: {wrong[0]} is not one of them{f'; did you mean {near}?' if near else ''} (valid: {', '.join(valid)})")
    cases = [(k, limit) for limit in limits for k in base if limit == "nngp" or has_tangent_kernel(k)]
    rows = []
    for dataset in args.datasets.split(","):
        stand_in = dataset in STAND_INS
        kernels = [(k + "_x", limit) for k, limit in cases] if stand_in else [*cases, *[(k + "_x", limit) for k, limit in cases]]
        out = subprocess.run([sys.executable, __file__, "--child", json.dumps([dataset, stand_in, kernels])], stdout=subprocess.PIPE, text=True)
        if out.returncode != 0:   # each row went to stderr as it finished
            rows.append({"dataset": dataset, "error": f"the process failed (exit status {out.returncode}); its rows are on stderr"})
            continue
        rows += json.loads(out.stdout.strip().splitlines()[-1])
        pd.DataFrame(rows).to_csv(args.out, index=False)
    table = pd.DataFrame(rows)
    if "peak_gb" in table:
        table["ratio"] = (table["estimated_gb"] / table["peak_gb"]).round(2)
    table.to_csv(args.out, index=False)
    columns = [c for c in ("dataset", "kernel", "limit", "landmarks", "estimated_gb", "peak_gb", "ratio", "seconds", "error") if c in table]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("" if pd.isna(r[c]) else str(r[c]) for c in columns) + " |" for _, r in table.iterrows()]
    print("\n".join(lines))
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(guarded(main))
