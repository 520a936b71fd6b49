#!/usr/bin/env python
"""Issue 15's tables from the results.csv files that scripts/gpu_check.sh writes (one call on a
CUDA machine): the paper check on CUDA, CPU/GPU ratios, GCN against the GPs, the 10^6-node csbm
and the kernel zoo on Cora. Every time is the row's ``total_seconds`` (device-synchronised kernel
+ inference for a GP, training + inference for a GNN; data loading excluded), the median over
the job's runs.

    python scripts/gpu_report.py RUNS [OUT]   # OUT (default RUNS): results_all.csv (every row),
                                              # gpu_table.csv, gpu_report.md; exit 1 on a FAIL
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from gnngp_cli.paper import __file__ as paper_init

FIVE = ["cora", "citeseer", "pubmed", "chameleon", "squirrel"]
DISPLAY = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed", "chameleon": "Chameleon", "squirrel": "Squirrel"}
TOLERANCE = 0.002    # the paper's numbers on CUDA, as on the CPU
SAME = 1e-4          # a test metric on CUDA against the CPU's, same job


def load(runs: Path, out: Path) -> pd.DataFrame:
    """Every row under ``runs`` (written to ``out/results_all.csv``), ``part`` naming its stage."""
    frames = [pd.read_csv(p).assign(part=p.relative_to(runs).parts[0]) for p in sorted(runs.rglob("results.csv"))]
    if not frames:
        raise SystemExit(f"gpu_report: no results.csv under {runs}")
    rows = pd.concat(frames, ignore_index=True)
    rows.to_csv(out / "results_all.csv", index=False)
    bad = rows[rows["status"] != "ok"]
    for _, r in bad.iterrows():
        print(f"FAIL error row: {r['dataset']} {r['method']} on {r['device']}: {r['error']}")
    rows = rows[rows["status"] == "ok"].copy()
    rows["name"] = rows["kernel"].fillna("").astype(str).where(rows["kernel"].notna(), rows["method"].str.lower())
    return rows, len(bad)


def paper_value(dataset: str, method: str) -> float:
    table = pd.read_csv(Path(paper_init).with_name("paper_values.csv"))
    hit = table[(table["table"] == "table4") & (table["row"] == DISPLAY[dataset]) & (table["column"] == method)]
    return float(hit["value"].iloc[0]) if len(hit) else float("nan")


def median(rows: pd.DataFrame, part: str, dataset: str, name: str, device: str) -> tuple[float, float, float]:
    """(test metric, median seconds, peak CUDA MiB) of one method on one device."""
    hit = rows[(rows["part"] == part) & (rows["dataset"] == dataset) & (rows["name"] == name) & (rows["device"] == device)]
    if hit.empty:
        return float("nan"), float("nan"), float("nan")
    return float(hit["test"].iloc[0]), float(hit["total_seconds"].median()), float(hit["peak_cuda_mb"].max())


def main() -> int:
    runs = Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/gpu_check_runs")
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else runs
    out.mkdir(parents=True, exist_ok=True)
    rows, errors = load(runs, out)
    table, fails = [], errors
    lines = ["# gnngp on CUDA (scripts/gpu_check.sh)", ""]
    card = out / "env.txt"
    if card.exists():
        lines += ["```", card.read_text().strip(), "```", ""]

    lines += ["## GCNGP and GCNGP-X on the paper's datasets: CUDA against the paper and against the CPU (same call)", "",
              "| dataset | kernel | test on CUDA | paper | test on CPU | CPU s | CUDA s | CPU/GPU | peak CUDA MiB | check |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for dataset in FIVE:
        for name, label in (("gcngp", "GCNGP"), ("gcngp_x", "GCNGP-X")):
            test, gpu_s, peak = median(rows, "five", dataset, name, "cuda")
            cpu_test, cpu_s, _ = median(rows, "five", dataset, name, "cpu")
            paper = paper_value(dataset, label)
            ok = abs(test - paper) <= TOLERANCE + 1e-9 and abs(test - cpu_test) <= SAME
            fails += not ok
            table.append(dict(part="paper", dataset=dataset, method=label, test_cuda=test, paper=paper, test_cpu=cpu_test,
                              cpu_seconds=cpu_s, cuda_seconds=gpu_s, cpu_over_gpu=cpu_s / gpu_s, peak_cuda_mb=peak, check="PASS" if ok else "FAIL"))
            lines.append(f"| {DISPLAY[dataset]} | {label} | {test:.4f} | {paper:.4f} | {cpu_test:.4f} | {cpu_s:.3f} | {gpu_s:.3f} "
                         f"| {cpu_s / gpu_s:.1f}x | {peak:.0f} | {'PASS' if ok else 'FAIL'} |")

    lines += ["", "## GCN (100 epochs) against the GPs, all on CUDA in the same process", "",
              "| dataset | GCN test | GCN s | GCNGP s | GCN/GCNGP | GCNGP-X s | GCN/GCNGP-X | GCN on CPU s |", "|---|---|---|---|---|---|---|---|"]
    for dataset in FIVE:
        gcn_test, gcn_s, gcn_peak = median(rows, "five", dataset, "gcn", "cuda")
        _, gcn_cpu_s, _ = median(rows, "five", dataset, "gcn", "cpu")
        _, exact_s, _ = median(rows, "five", dataset, "gcngp", "cuda")
        _, low_s, _ = median(rows, "five", dataset, "gcngp_x", "cuda")
        table.append(dict(part="gcn", dataset=dataset, method="GCN", test_cuda=gcn_test, cuda_seconds=gcn_s, cpu_seconds=gcn_cpu_s,
                          gcn_over_gcngp=gcn_s / exact_s, gcn_over_gcngp_x=gcn_s / low_s, peak_cuda_mb=gcn_peak))
        lines.append(f"| {DISPLAY[dataset]} | {gcn_test:.4f} | {gcn_s:.3f} | {exact_s:.3f} | {gcn_s / exact_s:.0f}x | {low_s:.3f} "
                     f"| {gcn_s / low_s:.0f}x | {gcn_cpu_s:.3f} |")

    csbm = rows[rows["part"] == "csbm"]
    lines += ["", "## GCNGP-X on the 10^6-node csbm, CUDA", ""]
    for _, r in csbm.iterrows():
        table.append(dict(part="csbm", dataset=r["dataset"], method=r["method"], test_cuda=r["test"], cuda_seconds=r["total_seconds"],
                          peak_cuda_mb=r["peak_cuda_mb"], n_nodes=r["n_nodes"], n_edges=r["n_edges"], load_seconds=r["load_seconds"]))
        lines.append(f"- {int(r['n_nodes']):,} nodes, {int(r['n_edges']):,} edges: test {r['test']:.4f}, kernel {r['kernel_seconds']:.2f} s "
                     f"+ inference {r['inference_seconds']:.2f} s = {r['total_seconds']:.2f} s (data generation and transfer "
                     f"{r['load_seconds']:.1f} s, excluded), torch.cuda.max_memory_allocated {r['peak_cuda_mb']:.0f} MiB, host peak RSS {r['peak_rss_mb']:.0f} MiB")
    if csbm.empty:
        fails += 1
        lines.append("- FAIL: no row")

    zoo = rows[rows["part"] == "zoo"]
    lines += ["", "## Every kernel of the zoo on Cora: CUDA against the CPU (same call)", "",
              "| kernel | test on CPU | test on CUDA | CPU s | CUDA s | check |", "|---|---|---|---|---|---|"]
    for name in sorted(zoo["name"].unique()):
        test, gpu_s, peak = median(rows, "zoo", "cora", name, "cuda")
        cpu_test, cpu_s, _ = median(rows, "zoo", "cora", name, "cpu")
        ok = abs(test - cpu_test) <= SAME
        fails += not ok
        table.append(dict(part="zoo", dataset="cora", method=name, test_cuda=test, test_cpu=cpu_test, cpu_seconds=cpu_s,
                          cuda_seconds=gpu_s, peak_cuda_mb=peak, check="PASS" if ok else "FAIL"))
        lines.append(f"| {name} | {cpu_test:.4f} | {test:.4f} | {cpu_s:.3f} | {gpu_s:.3f} | {'PASS' if ok else 'FAIL'} |")

    pd.DataFrame(table).to_csv(out / "gpu_table.csv", index=False)
    lines += ["", f"{fails} FAIL(s), {errors} error row(s)"]
    (out / "gpu_report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if fails else 0


if __name__ == "__main__":
    raise SystemExit(main())
