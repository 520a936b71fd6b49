"""Result rows: one CSV per job, written atomically, never losing rows already there.

Writers of the same file take turns (an inter-process ``flock``), each reading, appending and
renaming under the lock, so concurrent runs sharing a run dir keep every row. An existing file
that cannot be parsed is moved aside (and named in a warning); rows that cannot be written to
their target go to a fallback file, named in the error.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping, Optional

import pandas as pd

from .data.files import atomic_write, locked
from .errors import GnngpError

COLUMNS = [
    "status", "dataset", "method", "kernel", "task", "metric", "train", "val", "test",
    "nugget", "layers", "sigma_w", "sigma_b", "landmarks", "landmark_fraction", "seed", "run", "stand_in", "experiment",
    "n_nodes", "n_edges", "load_seconds", "kernel_seconds", "train_seconds", "inference_seconds", "total_seconds",
    "peak_rss_mb", "peak_cuda_mb", "compute_backend", "workers", "peak_worker_mb", "device", "dtype", "split", "split_index",
    "nlpd", "coverage95", "var_correct", "var_wrong", "extra", "error", "version", "timestamp", "overrides",
]


class ResultsNotWritten(GnngpError):
    """The rows could not be written to their target; they are in a fallback file."""


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")


def _read_existing(path: Path) -> Optional[pd.DataFrame]:
    """The rows already in ``path``; a file that is not a readable CSV (0 bytes, garbage, cut)
    is renamed ``<stem>.malformed-<time>.csv`` with a warning, and ``None`` returned."""
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as err:  # EmptyDataError is a ValueError
        aside = path.with_name(f"{path.stem}.malformed-{_stamp()}{path.suffix}")
        os.replace(path, aside)
        print(f"gnngp: warning: {path} was not a readable CSV ({type(err).__name__}); moved it to {aside} and started a new file", file=sys.stderr)
        return None


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    return table[[c for c in COLUMNS if c in table.columns] + [c for c in table.columns if c not in COLUMNS]]


def _write_table(path: Path, table: pd.DataFrame) -> None:
    atomic_write(path, lambda f: table.to_csv(f, index=False))


def append_rows(path: Path, rows: Iterable[Mapping], fallback_dir: Optional[Path] = None) -> pd.DataFrame:
    """Append ``rows`` to the CSV at ``path`` under an inter-process lock, via a temporary file
    and an atomic rename, so that an interrupted run leaves the old file whole and never a half
    row, and concurrent writers lose nothing. When ``path`` cannot be written, the rows go to
    ``<fallback_dir, else the temp dir>/results.fallback-<time>-<pid>.csv`` and
    :class:`ResultsNotWritten` names it."""
    new = pd.DataFrame(list(rows))
    try:
        with locked(path):
            old = _read_existing(path)
            table = _ordered(new if old is None else pd.concat([old, new], ignore_index=True))
            _write_table(path, table)
        return table
    except OSError as err:
        reason = f"{type(err).__name__}: {err.strerror or err}"
    for folder in ([fallback_dir] if fallback_dir is not None else []) + [Path(tempfile.gettempdir())]:
        fallback = folder / f"results.fallback-{_stamp()}-{os.getpid()}.csv"
        try:
            _write_table(fallback, _ordered(new))
        except OSError:
            continue
        raise ResultsNotWritten(f"could not write results to {path} ({reason}); the {len(new)} rows were written to {fallback} instead")
    print(_ordered(new).to_csv(index=False), file=sys.stderr)   # nowhere to write: the rows go to the console
    raise ResultsNotWritten(f"could not write results to {path} ({reason}) nor to a fallback file; the {len(new)} rows are printed above")


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
