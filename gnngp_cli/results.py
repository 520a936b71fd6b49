"""Result rows: one CSV per job, written atomically, never losing rows already there."""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

COLUMNS = [
    "status", "dataset", "method", "kernel", "task", "metric", "train", "val", "test",
    "nugget", "layers", "sigma_w", "sigma_b", "landmarks", "landmark_fraction", "seed", "run", "stand_in", "experiment",
    "n_nodes", "n_edges", "load_seconds", "kernel_seconds", "train_seconds", "inference_seconds", "total_seconds",
    "peak_rss_mb", "peak_cuda_mb", "device", "dtype", "split", "split_index",
    "nlpd", "coverage95", "var_correct", "var_wrong", "extra", "error", "version", "timestamp",
]


def append_rows(path: Path, rows: Iterable[Mapping]) -> pd.DataFrame:
    """Append ``rows`` to the CSV at ``path`` via a temporary file and an atomic rename,
    so that an interrupted run leaves the old file whole and never a half row."""
    new = pd.DataFrame(list(rows))
    if path.is_file():
        new = pd.concat([pd.read_csv(path), new], ignore_index=True)
    columns = [c for c in COLUMNS if c in new.columns] + [c for c in new.columns if c not in COLUMNS]
    new = new[columns]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            new.to_csv(f, index=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return new


def summary_line(row: Mapping) -> str:
    """One console line for a result row."""
    if row.get("status") != "ok":
        return f"{row.get('method', '?')} on {row.get('dataset', '?')}: FAILED: {row.get('error')}"
    def fmt(v):
        return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"
    head = f"{row['method']} on {row['dataset']} (run {row['run']}, seed {row['seed']}): test {row['metric']} {fmt(row['test'])} (val {fmt(row['val'])}, train {fmt(row['train'])}"
    if "train_seconds" in row:
        return head + f") in {row['train_seconds']:.2f} s training + {row['inference_seconds']:.2f} s inference on {row['device']}"
    return head + f", nugget {row['nugget']:.3g}) in {row['kernel_seconds']:.2f} s kernel + {row['inference_seconds']:.2f} s inference on {row['device']}"
