"""A day in a notebook: ``NodeGP`` fitted and predicted many times in one process, and ``gnngp
run`` jobs run one after another in one process (the command's ``main``, as a notebook or a
driver script calls it), measuring after each what a leak would grow: resident memory, open
file descriptors, threads (the operating system's and Python's) and the entries of the
temporary folder.

    python scripts/soak_nodegp.py [--dataset cora] [--kernels gcngp,gcngp_x] [--fits 200] [--jobs 50] [--out soak_nodegp.csv]

Writes one CSV row per fit and per job (``what`` is ``fit`` or ``job``) and prints, for each
kernel and for the jobs, resident memory after the last fit over that after a tenth of them
(the must-hold: at most 1.05) and the other counts at both points (none may grow). A garbage
collection and glibc's ``malloc_trim`` run before each measurement (what the collector frees later,
and freed heap the allocator keeps, are no leak). The
dataset is read from ``GNNGP_DATA_MIRROR`` (Cora) or generated (``--dataset csbm``,
``--nodes``). ``tests/api/test_soak.py`` runs the same code, shorter, under ``-m paper``.
"""
from __future__ import annotations

import argparse
import csv
import gc
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

RSS_GROWTH = 1.05   # resident memory after fit N over that after fit N/10: the most allowed
COUNTED = ("fds", "threads", "python_threads", "temp_entries")   # counts that may not grow at all


def resources() -> dict:
    """What this process holds now: resident memory (MiB), open file descriptors, threads (the
    kernel's count and Python's) and the entries of the temporary folder (``tempfile.gettempdir()``)."""
    gc.collect()
    _trim()
    with open("/proc/self/statm") as f:
        rss_pages = int(f.read().split()[1])
    with open("/proc/self/status") as f:
        threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    return {"rss_mib": rss_pages * os.sysconf("SC_PAGE_SIZE") / 2**20, "fds": len(os.listdir("/proc/self/fd")),
            "threads": threads, "python_threads": threading.active_count(), "temp_entries": len(os.listdir(tempfile.gettempdir()))}


def _trim() -> None:
    """Freed heap handed back to the system (glibc's ``malloc_trim``; elsewhere nothing), so that
    resident memory is what the process holds: without it, Cora's exact kernel (a 2708 x 2708
    block per fit) left resident memory at 450 or about 480-500 MiB from one fit to the next,
    without a trend, as the allocator kept or returned the last fit's blocks."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def soak_fits(data, kernels: Iterable[str], fits: int, on_row: Optional[Callable[[dict], None]] = None, **settings) -> list[dict]:
    """``NodeGP(kernel, **settings).fit(data)``, then ``predict()`` and ``score()``, ``fits``
    times per kernel in this process; a row of :func:`resources` after each."""
    from gnngp_cli import NodeGP

    rows = []
    for kernel in kernels:
        for i in range(1, fits + 1):
            start = time.perf_counter()
            gp = NodeGP(kernel, **settings).fit(data)
            prediction = gp.predict()
            score = gp.score()
            del gp, prediction
            row = {"what": "fit", "kernel": kernel, "index": i, "score": score, "seconds": time.perf_counter() - start, **resources()}
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


def soak_jobs(overrides: list[str], jobs: int, folder: Path, on_row: Optional[Callable[[dict], None]] = None) -> list[dict]:
    """``gnngp run OVERRIDES seed=<i>`` ``jobs`` times in this process (the command's ``main``), each
    job in its own folder under ``folder``; a row of :func:`resources` after each. A job that
    exits with a non-zero status raises ``RuntimeError``."""
    from gnngp_cli.cli.main import main

    rows = []
    for i in range(1, jobs + 1):
        start = time.perf_counter()
        try:
            main(["run", *overrides, f"seed={i}", f"hydra.run.dir={folder / f'job-{i}'}"])
        except SystemExit as exit:
            if exit.code not in (0, None):
                raise RuntimeError(f"gnngp run job {i} exited {exit.code}") from None
        row = {"what": "job", "kernel": " ".join(overrides), "index": i, "score": float("nan"),
               "seconds": time.perf_counter() - start, **resources()}
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def growth(rows: list[dict]) -> dict:
    """For one series of rows (one kernel's fits, or the jobs): the row after the last and after
    a tenth of them, resident memory's ratio, and which counts grew between the two."""
    last = rows[-1]
    early = rows[max(len(rows) // 10, 1) - 1]
    return {"early": early, "last": last, "rss_ratio": last["rss_mib"] / early["rss_mib"],
            "grown": [key for key in COUNTED if last[key] > early[key]]}


def held(rows: list[dict]) -> tuple[bool, str]:
    """Whether a series holds the must-hold (resident memory within 5%, no count grown), and a line that says how."""
    g = growth(rows)
    early, last = g["early"], g["last"]
    counts = ", ".join(f"{key} {early[key]}->{last[key]}" for key in COUNTED)
    line = (f"{rows[0]['what']}s of {rows[0]['kernel']}: rss after {last['index']} / after {early['index']} = {g['rss_ratio']:.3f} "
            f"({early['rss_mib']:.0f} -> {last['rss_mib']:.0f} MiB); {counts}; {sum(r['seconds'] for r in rows):.0f} s")
    return g["rss_ratio"] <= RSS_GROWTH and not g["grown"], line


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--nodes", type=int, default=None, help="csbm: its node count")
    parser.add_argument("--kernels", default="gcngp,gcngp_x")
    parser.add_argument("--fits", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--out", default="soak_nodegp.csv")
    args = parser.parse_args(argv)

    from gnngp_cli import load_dataset

    private = Path(tempfile.mkdtemp(prefix="gnngp-soak-"))   # its own temporary folder: entries counted are this process's
    tempfile.tempdir = str(private)
    os.environ["TMPDIR"] = str(private)
    settings = {"num_nodes": args.nodes} if args.nodes else {}
    data = load_dataset(args.dataset, **settings)
    series, out = [], open(args.out, "w", newline="")
    writer = csv.DictWriter(out, ["what", "kernel", "index", "score", "seconds", "rss_mib", *COUNTED])
    writer.writeheader()

    def write(row: dict) -> None:
        writer.writerow(row)
        out.flush()

    for kernel in args.kernels.split(","):
        series.append(soak_fits(data, [kernel], args.fits, write))
    if args.jobs:
        dataset = [f"dataset={args.dataset}"] + ([f"dataset.num_nodes={args.nodes}"] if args.nodes else [])
        series.append(soak_jobs([*dataset, f"kernel={args.kernels.split(',')[-1]}"], args.jobs, Path(tempfile.mkdtemp(prefix="jobs-")), write))
    out.close()
    ok = True
    for rows in series:
        good, line = held(rows)
        ok &= good
        print(("PASS " if good else "FAIL ") + line)
    print(f"rows: {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
