#!/usr/bin/env python
"""Peak memory and time of ``gnngp run dataset=reddit kernel=gcngp_x`` on a graph of Reddit's
full size, in the real raw format, and where the peak comes from.

Writes ``<root>/Reddit/raw/reddit_data.npz`` (232,965 nodes, 602 float32 features, 41 classes,
PyG's split sizes: 153,431 train, 23,831 val, 55,703 test) and ``reddit_graph.npz`` (a scipy
COO adjacency with about 114.6M directed edges: random undirected pairs, mirrored), as the DGL
archive that PyG's ``Reddit`` reads holds them. The graph is random (the features carry the
class, so the accuracy is above chance but means nothing); its size is Reddit's. The raw files
are not the published ones, so the run needs ``data.verify=false``; nothing here downloads.

Then, each in its own process: the default run twice (the first builds the processed cache from
the raw files, the second reads the cache, as every later run does), with the peak resident
memory from ``/usr/bin/time -v`` and the results row; and with ``--phases``, one cached run in
process with a sampler thread that reads the resident memory every 50 ms and the phase it is in
(loading, normalised adjacency, each block of the kernel, GP inference).

    python scripts/bench_reddit.py --root /tmp/reddit_full [--phases] [--edges 114615892]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from benchrun import guarded

NODES, FEATURES, CLASSES = 232_965, 602, 41
SPLIT = (153_431, 23_831, 55_703)
EDGES = 114_615_892


def write(root: Path, nodes: int, edges: int, seed: int = 0) -> Path:
    """The two raw files, in the DGL archive's format (skipped when present)."""
    import scipy.sparse as sp

    raw = root / "Reddit" / "raw"
    if (raw / "reddit_graph.npz").is_file() and (raw / "reddit_data.npz").is_file():
        return raw
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    label = rng.integers(0, CLASSES, nodes)
    centres = rng.standard_normal((CLASSES, FEATURES)).astype(np.float32)
    feature = rng.standard_normal((nodes, FEATURES), dtype=np.float32) + centres[label]
    types = np.concatenate([np.full(s, t) for s, t in zip(np.array(SPLIT) * nodes // NODES, (1, 2, 3))])
    types = np.concatenate([types, np.full(nodes - types.size, 3)])
    rng.shuffle(types)
    np.savez(raw / "reddit_data.npz", feature=feature, label=label, node_types=types)
    del feature
    half = edges // 2
    row = rng.integers(0, nodes, half, dtype=np.int32)
    col = rng.integers(0, nodes, half, dtype=np.int32)
    keep = row != col
    row, col = row[keep], col[keep]
    both_rows, both_cols = np.concatenate([row, col]), np.concatenate([col, row])
    del row, col, keep
    graph = sp.coo_matrix((np.ones(both_rows.size, dtype=np.float32), (both_rows, both_cols)), shape=(nodes, nodes))
    sp.save_npz(raw / "reddit_graph.npz", graph, compressed=False)
    return raw


def timed_run(root: Path, overrides: list[str]) -> dict:
    """One ``gnngp run`` in its own process: wall seconds, peak RSS (``/usr/bin/time -v``) and its row."""
    out = root / "runs" / f"run-{time.time_ns()}"
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "gnngp_cli", "run", "dataset=reddit", "kernel=gcngp_x",
           f"data.root={root}", "data.mirror=null", "data.verify=false", "data.download=false", "progress=false",
           f"hydra.run.dir={out}", *overrides]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    rows = list(out.glob("results.csv"))
    row = {}
    if rows:
        import pandas as pd

        row = pd.read_csv(rows[0]).iloc[0].to_dict()
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
    return {"rc": done.returncode, "wall_s": wall, "peak_gb": int(peak.group(1)) / 2**20 if peak else float("nan"), "row": row}


def phases(root: Path, overrides: list[str]) -> list[tuple[str, float, float]]:
    """``(phase, seconds, peak GB)`` of one in-process run, phase by phase."""
    from gnngp_cli.api import compose, run
    from gnngp_cli.job import gp_job as gp, loading
    from gnngp_cli.kernels import blocks

    state = {"phase": "start", "since": time.perf_counter()}
    table: dict[str, list[float]] = {}
    stop = threading.Event()

    def rss() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30

    def sample() -> None:
        while not stop.is_set():
            entry = table.setdefault(state["phase"], [0.0, 0.0])
            entry[1] = max(entry[1], rss())
            time.sleep(0.05)

    def enter(name: str) -> None:   # the memory at a phase's both ends too: a phase shorter than a sample's 50 ms read 0.00 GB
        now, held = time.perf_counter(), rss()
        entry = table.setdefault(state["phase"], [0.0, 0.0])
        entry[0], entry[1] = entry[0] + now - state["since"], max(entry[1], held)
        table.setdefault(name, [0.0, 0.0])[1] = max(table.get(name, [0.0, 0.0])[1], held)
        state["phase"], state["since"] = name, now

    def labelled(name: str, fn):
        def wrapper(*args, **kwargs):
            before = state["phase"]
            enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                enter(before)
        return wrapper

    loading.load_dataset = labelled("load the dataset", loading.load_dataset)
    # the adjacency as a job gets it: built, or read from the data cache (the cached form since 2026-11-30)
    loading.LoadedGraph.adjacency = labelled("normalised adjacency (built or read from the cache)", loading.LoadedGraph.adjacency)
    for name in ("Input", "Weight", "Scale", "Bias", "Conv", "Elementwise"):   # ReLU's __call__ is Elementwise's, Weight's Scale's
        cls = getattr(blocks, name)
        if "__call__" in vars(cls):
            cls.__call__ = labelled(f"block {'ReLU (Nystrom)' if name == 'Elementwise' else name}", cls.__call__)
    gp.predict = labelled("GP inference", gp.predict)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    cfg = compose(["dataset=reddit", "kernel=gcngp_x", f"data.root={root}", "data.mirror=null", "data.verify=false",
                   "data.download=false", "progress=false", *overrides])
    row = run(cfg=cfg)[0]
    enter("end")
    stop.set()
    thread.join()
    print(f"in-process run: test {row['test']:.4f}, kernel {row['kernel_seconds']:.1f} s, inference {row['inference_seconds']:.1f} s", file=sys.stderr)
    return [(name, secs, peak) for name, (secs, peak) in table.items() if name != "end"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("/tmp/reddit_full"))
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--edges", type=int, default=EDGES)
    parser.add_argument("--phases", action="store_true", help="also the in-process breakdown by phase")
    parser.add_argument("--only-phases", action="store_true", help="only the breakdown (the cache must exist)")
    parser.add_argument("--runs", type=int, default=2, help="timed runs in their own processes (the first builds the cache if absent)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    start = time.perf_counter()
    write(args.root, args.nodes, args.edges)
    print(f"raw files in {args.root}/Reddit/raw ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    results = {}
    if not args.only_phases:
        cached = (args.root / "Reddit" / "processed" / "gnngp.pt").is_file()
        for i in range(args.runs):
            name = "cached run" if cached or i else "first run (raw files -> processed cache)"
            result = timed_run(args.root, args.overrides)
            results[f"{i}: {name}"] = result
            row = result["row"]
            print(f"{name}: rc {result['rc']}, wall {result['wall_s']:.0f} s, peak RSS {result['peak_gb']:.2f} GB; "
                  f"load {row.get('load_seconds', float('nan')):.1f} s, kernel {row.get('kernel_seconds', float('nan')):.1f} s, "
                  f"inference {row.get('inference_seconds', float('nan')):.1f} s, estimate {row.get('estimated_gb')} GB, "
                  f"landmarks {row.get('landmarks')}, test {row.get('test')}", flush=True)
    if args.phases or args.only_phases:
        print("| phase | seconds | peak RSS in the phase (GB) |\n|---|---:|---:|")
        for name, secs, peak in phases(args.root, args.overrides):
            print(f"| {name} | {secs:.1f} | {peak:.2f} |", flush=True)
    (args.root / "bench_reddit.json").write_text(json.dumps({k: {**v, "row": {c: str(x) for c, x in v["row"].items()}} for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    sys.exit(guarded(main))
