"""Start-up cost of the ``gnngp`` command against ``python -c "import torch"``, in one run.

Each round runs, in turn: the baseline ``python -c "import torch"``, ``gnngp run --help`` and
the default ``gnngp run`` (GCN-GP on the embedded csbm graph), each a fresh process, and reads
the default run's compute time (data generation, kernel and inference seconds) from its results
row. Rounds interleave the three so a busy machine slows all alike; the medians give:

- help ratio = help / baseline (target <= 1.5);
- run ratio = run / (baseline + compute) (target <= 2).

It also lists what each command imported of torch_geometric, ogb, pandas and matplotlib
(``python -X importtime``), and checks that a joblib worker of a sweep does not import
torch_geometric either.

    python scripts/bench_startup.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from benchrun import guarded

HEAVY = ("torch_geometric", "ogb", "pandas", "matplotlib")


CPU: list[float] = []   # CPU seconds (user + system) of the last timed command


def timed(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of ``cmd``; its CPU seconds go to ``CPU`` (steadier on a shared machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return wall, out


def imported(cmd: list[str], env: dict) -> list[str]:
    """Top-level packages among HEAVY that ``cmd`` (a ``python -m`` command) imports."""
    out = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, env=env)
    names = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in out.stderr.splitlines() if line.startswith("import time:")}
    return sorted(n for n in HEAVY if n in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    python = sys.executable
    gnngp = [python, "-m", "gnngp_cli.cli.main"]
    tmp = Path(tempfile.mkdtemp(prefix="gnngp-bench-startup-"))
    base, helps, runs, computes = [], [], [], []
    cpu = {"base": [], "help": [], "run": []}
    for i in range(args.rounds):
        base.append(timed([python, "-c", "import torch"], env)[0])
        cpu["base"].append(CPU[-1])
        helps.append(timed([*gnngp, "run", "--help"], env)[0])
        cpu["help"].append(CPU[-1])
        seconds, _ = timed([*gnngp, "run", f"hydra.run.dir={tmp / str(i)}"], env)
        runs.append(seconds)
        cpu["run"].append(CPU[-1])
        row = pd.read_csv(tmp / str(i) / "results.csv").iloc[-1]
        computes.append(float(row["load_seconds"] + row["kernel_seconds"] + row["inference_seconds"]))
    b, h, r, c = (statistics.median(v) for v in (base, helps, runs, computes))
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end, Python {platform.python_version()}",
        "rounds": args.rounds,
        "baseline_import_torch_s": round(b, 2), "help_s": round(h, 2), "run_s": round(r, 2), "run_compute_s": round(c, 2),
        "help_ratio": round(h / b, 2), "help_target": 1.5,
        "run_ratio": round(r / (b + c), 2), "run_target": 2.0,
        "cpu_seconds": {k: round(statistics.median(v), 2) for k, v in cpu.items()},
        "cpu_help_ratio": round(statistics.median(cpu["help"]) / statistics.median(cpu["base"]), 2),
        "imports": {
            "run --help": imported([*gnngp, "run", "--help"], env),
            "run --cfg job": imported([*gnngp, "run", "--cfg", "job"], env),
            "run (csbm)": imported([*gnngp, "run", f"hydra.run.dir={tmp / 'imports'}"], env),
            "report": imported([*gnngp, "report", str(tmp), "--out", str(tmp / "report")], env),
        },
    }
    # joblib's workers are fresh processes that inherit PYTHONPROFILEIMPORTTIME and our stderr
    worker = subprocess.run([*gnngp, "run", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "kernel=gcngp,gcngp_x",
                             f"hydra.sweep.dir={tmp / 'sweep'}"], capture_output=True, text=True, env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    lines = [line for line in worker.stderr.splitlines() if line.startswith("import time:")]
    report["joblib_sweep"] = {
        "rc": worker.returncode,
        "processes_importing_torch": sum(1 for line in lines if line.rsplit("|", 1)[-1].strip() == "torch"),
        "processes_importing_torch_geometric": sum(1 for line in lines if line.rsplit("|", 1)[-1].strip() == "torch_geometric"),
    }
    print(json.dumps(report, indent=2))
    ok = report["help_ratio"] <= 1.5 and report["run_ratio"] <= 2.0
    print("targets met" if ok else "targets NOT met")


if __name__ == "__main__":
    sys.exit(guarded(main))
