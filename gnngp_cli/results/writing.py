"""Result rows: one CSV per job, written atomically, never losing rows already there.

Writers of the same file take turns (an inter-process ``flock``), each reading, appending and
renaming under the lock, so concurrent runs sharing a run dir keep every row. The rows already
there are read back and checked (:mod:`gnngp_cli.results.rowfile`: types, status, required fields);
a file with any malformed row is moved aside whole, and the new rows start a fresh file, with
one warning naming both. The rows kept are written back as they were read (integers stay
integers). Rows that cannot be written to their target go to a fallback file, named in the error.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping, Optional

from ..data.files import atomic_write, locked
from ..errors import GnngpError
from .rowfile import COLUMNS, FALLBACK_PREFIX, NotAResultsFile, aside_path, ordered_columns, read_rows, to_text

__all__ = ["COLUMNS", "ResultsNotWritten", "append_rows", "summary_line"]

class ResultsNotWritten(GnngpError):
    """The rows could not be written to their target; they are in a fallback file."""


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")


def _read_existing(path: Path) -> tuple[list[str], list[dict]]:
    """The header and rows already in ``path`` (``[], []`` when there is none). A file with any
    row that is not one gnngp writes (cut, garbage, NUL bytes, a quote that swallowed the next
    row, a wrong type) is renamed ``<stem>.malformed-<time>.csv``, whole, with a warning naming
    both files: its good rows are there, not lost, and never mixed with damaged ones."""
    if not os.path.lexists(path):
        return [], []
    try:
        found = read_rows(path)
    except NotAResultsFile as err:
        raise OSError(f"{err}; results go to a regular file") from None
    if not found.problems:
        return found.header, found.rows
    aside = aside_path(path, "malformed", _stamp())
    os.replace(path, aside)
    print(f"gnngp: warning: {path} held rows gnngp does not write ({found.shown_problems()}); moved the whole file to {aside} "
          f"({len(found.rows)} good rows kept there) and started a new {path.name}", file=sys.stderr)
    return [], []


def _write_table(path: Path, header: list[str], rows: list[Mapping], mode: Optional[int] = None) -> None:
    text = to_text(header, rows)
    atomic_write(path, lambda f: f.write(text), mode=mode)


def read_only(path: Path) -> bool:
    """Whether ``path`` is a file its owner made read-only (no owner write bit): a run neither
    appends to it nor replaces it with a writable copy."""
    return path.is_file() and not path.stat().st_mode & 0o200


def append_rows(path: Path, rows: Iterable[Mapping], fallback_dir: Optional[Path] = None) -> list[dict]:
    """Append ``rows`` to the CSV at ``path`` under an inter-process lock, via a temporary file
    and an atomic rename, so that an interrupted run leaves the old file whole and never a half
    row, and concurrent writers lose nothing. When ``path`` cannot be written, the rows go to
    ``<fallback_dir, else the temp dir>/results.fallback-<time>-<pid>.csv`` and
    :class:`ResultsNotWritten` names it. Returns every row of the file, old then new."""
    new = [dict(row) for row in rows]
    new_header = ordered_columns(("status", "error"), *(row.keys() for row in new))   # error: empty in an ok row, always a column
    if path.is_symlink() and path.exists():   # a link to a results file elsewhere: that file is appended to, the link kept
        path = Path(os.path.realpath(path))
    try:
        with locked(path):
            if read_only(path):   # made read-only during the run (the job checked it before): never replaced by a writable copy
                raise PermissionError(f"{path} was made read-only during the run (its owner's write bit is off)")
            mode = path.stat().st_mode & 0o7777 if path.is_file() else None
            header, old = _read_existing(path)
            header = ordered_columns(header, new_header)
            _write_table(path, header, old + new, mode)   # the file's own permissions (chmod 600), not a new one's
        return old + new
    except OSError as err:
        reason = f"{type(err).__name__}: {err.strerror or err}"
    for folder in ([fallback_dir] if fallback_dir is not None else []) + [Path(tempfile.gettempdir())]:
        fallback = folder / f"{FALLBACK_PREFIX}{_stamp()}-{os.getpid()}.csv"
        try:
            _write_table(fallback, new_header, new)
        except OSError:
            continue
        raise ResultsNotWritten(f"could not write results to {path} ({reason}); the {len(new)} rows were written to {fallback} instead")
    print(to_text(new_header, new), file=sys.stderr)   # nowhere to write: the rows go to the console
    raise ResultsNotWritten(f"could not write results to {path} ({reason}) nor to a fallback file; the {len(new)} rows are printed above")


def summary_line(row: Mapping) -> str:
    """One console line for a result row."""
    if row.get("status") != "ok":
        return f"{row.get('method', '?')} on {row.get('dataset', '?')}: FAILED: {row.get('error')}"
    def fmt(v):
        return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"
    split = f"split {row['split_index']}, " if row.get("split_index") is not None and row.get("split_count") else ""
    head = f"{row['method']} on {row['dataset']} ({split}run {row['run']}, seed {row['seed']}): test {row['metric']} {fmt(row['test'])} (val {fmt(row['val'])}, train {fmt(row['train'])}"
    if not _missing(row.get("budget")):   # an active run: one row per budget
        f1 = f", macro-F1 over all nodes {fmt(row.get('macro_f1_all'))}" if not _missing(row.get("macro_f1_all")) else ""
        return (f"{row['method']} on {row['dataset']} ({split}run {row['run']}, seed {row['seed']}), active={row['strategy']} at "
                f"{row['labelled']} labels: test {row['metric']} {fmt(row['test'])}{f1}, nugget {row['nugget']:.3g}; "
                f"{row['kernel_seconds']:.2f} s kernel + {row['selection_seconds']:.2f} s selection on {row['device']}")
    if "train_seconds" in row:   # SGC, SIGN: the graph's propagation read once, before training
        precompute = f"{row['precompute_seconds']:.2f} s precompute + " if not _missing(row.get("precompute_seconds")) else ""
        return head + f") in {precompute}{row['train_seconds']:.2f} s training + {row['inference_seconds']:.2f} s inference on {row['device']}"
    stages = f"{row['kernel_seconds']:.2f} s kernel + {row['inference_seconds']:.2f} s inference on {row['device']}"
    fitted = [key[len("fitted_"):] for key in row if key.startswith("fitted_") and not _missing(row[key])]
    if row.get("fit") == "mll" and fitted:   # the values the run used are the fitted ones: each said once, and the fit's time
        used = ", ".join(f"nugget {_number(row['nugget'])} (times K's mean diagonal)" if name == "nugget"   # the mll line said the absolute
                         else f"{name} {_number(row['fitted_' + name])}" for name in fitted)
        return head + f"; fitted by mll and used: {used}) in {float(row.get('fit_seconds') or 0.0):.2f} s fit + {stages}"
    if not _missing(row.get("time")):   # inference.time: the training time replaces the nugget
        return head + f", training time {row['time']:.3g}) in {stages}"
    return head + f", nugget {row['nugget']:.3g}) in {stages}"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value) -> str:
    """A fitted value for the console: ``0.202``, ``12.96``, ``[0.91, 0.87]`` per layer."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)
