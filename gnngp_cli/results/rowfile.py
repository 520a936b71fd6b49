"""Results files as text: the columns gnngp writes, every row read back checked against them.

A row is what :mod:`gnngp_cli.results.writing` writes: a ``status`` of ``ok`` or ``error``; an ``ok`` row
names its dataset and method and has a number for its test metric; an ``error`` row says why. Integer columns hold integers, number columns numbers (or nothing).
No field holds a line break or a NUL byte (gnngp writes none: error texts are one line), so a
row that does came from damage: a cut file, an unterminated quote that swallowed the next row,
bytes written over it. :func:`read_rows` returns the good rows and a description of each bad
one; writers and readers decide what to do with them (a writer moves the whole file aside, the
report skips the rows and says so). Values are written as Python prints them, so an integer
column stays an integer however many rows leave it empty.
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

COLUMNS = [
    "status", "dataset", "method", "kernel", "task", "metric", "train", "val", "test",
    "nugget", "layers", "sigma_w", "sigma_b", "landmarks", "landmark_fraction", "seed", "run", "stand_in", "experiment",
    "n_nodes", "n_edges", "load_seconds", "warmup_seconds", "kernel_seconds", "precompute_seconds", "train_seconds", "inference_seconds", "total_seconds",
    "peak_rss_mb", "peak_cuda_mb", "compute_backend", "workers", "peak_worker_mb", "device", "dtype", "split", "split_index", "split_count",
    "nlpd", "coverage95", "var_correct", "var_wrong", "protocol", "likelihood", "uncertainty", "alpha", "temperature", "test_ood",
    "nll", "brier", "ece", "mce", "auroc_variance", "auroc_entropy", "auroc_maxprob", "aupr_variance", "aupr_entropy", "aupr_maxprob",
    "conformal", "conformal_alpha", "coverage", "coverage_std", "set_size", "set_size_std", "singleton_hit", "singleton_hit_std",
    "interval_width", "interval_width_std", "conformal_seconds",
    "strategy", "budget", "labelled", "macro_f1_all", "selection_seconds", "gcn_test", "gcn_macro_f1_all", "gcn_seconds",
    "limit", "time", "extra", "error", "version", "timestamp", "overrides",
]
INTEGERS = frozenset({"layers", "landmarks", "seed", "run", "n_nodes", "n_edges", "workers", "split_index", "split_count", "budget", "labelled"})
NUMBERS = frozenset({
    "train", "val", "test", "nugget", "sigma_w", "sigma_b", "landmark_fraction", "load_seconds", "warmup_seconds", "kernel_seconds", "precompute_seconds", "train_seconds",
    "inference_seconds", "total_seconds", "fit_seconds", "estimated_gb", "peak_rss_mb", "peak_cuda_mb", "peak_worker_mb",
    "nlpd", "coverage95", "var_correct", "var_wrong", "alpha", "temperature", "test_ood",
    "nll", "brier", "ece", "mce", "auroc_variance", "auroc_entropy", "auroc_maxprob", "aupr_variance", "aupr_entropy", "aupr_maxprob",
    "conformal_alpha", "coverage", "coverage_std", "set_size", "set_size_std", "singleton_hit", "singleton_hit_std",
    "interval_width", "interval_width_std", "conformal_seconds",
    "time", "macro_f1_all", "selection_seconds", "gcn_test", "gcn_macro_f1_all", "gcn_seconds",
})
STATUSES = ("ok", "error")
REQUIRED_OK = ("dataset", "method", "test")   # what a result is; metric and timestamp are absent from some older rows
MAX_BYTES = 1 << 30   # a results file past 1 GiB is not one gnngp wrote


@dataclass
class RowFile:
    """A results file read back: its header, its good rows (text, as written) and what is wrong
    with the others (``problems``: one short line each)."""

    path: Path
    header: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def frame(self):
        """The good rows as a pandas table, typed as ``pandas.read_csv`` types the file."""
        return to_frame(self.header, self.rows)

    def shown_problems(self, limit: int = 3) -> str:
        more = len(self.problems) - limit
        return "; ".join(self.problems[:limit]) + (f"; and {more} more" if more > 0 else "")


FALLBACK_PREFIX = "results.fallback-"                  # rows a job could not write into its results file: <prefix><time>-<pid>.csv
FALLBACK_FILE = re.compile(re.escape(FALLBACK_PREFIX) + r".+\.csv")
SET_ASIDE = ("before-resume", "malformed")            # why a results file was moved aside, whole: resume's earlier attempt, rows gnngp does not write
SET_ASIDE_FILE = re.compile(r"results\.(" + "|".join(SET_ASIDE) + r")-.+\.csv")


def aside_path(path: Path, why: str, stamp: str) -> Path:
    """Where a results file is moved aside (kept whole, never deleted): ``<stem>.<why>-<stamp><suffix>``,
    ``why`` one of :data:`SET_ASIDE`."""
    return path.with_name(f"{path.stem}.{why}-{stamp}{path.suffix}")


REFUSED = ".gnngp-refused"   # a job folder's note that a sweep's job was refused there (another job held its results file)
SWEEP_ENV = "GNNGP_SWEEP_ID"  # the sweep a job belongs to (set by the sweep as it starts; its launchers' workers inherit it)


def refused_job(folder: Path, why: Optional[str]) -> None:
    """Leave in ``folder`` the note that this sweep's job there was refused (``why``), or, with
    ``None`` (its job that runs there), remove this sweep's earlier note: the sweep's summary reads
    it (:func:`refusal`); another sweep's or run's job in the folder neither reads nor removes it."""
    import json

    sweep = os.environ.get(SWEEP_ENV, "")
    note = folder / REFUSED
    if not sweep:   # a single run: its refusal is its exit status
        return
    try:
        if why is not None:
            note.write_text(json.dumps({"sweep": sweep, "why": why.replace("\n", " ")}) + "\n")
        elif _note_of(note, sweep) is not None:
            note.unlink(missing_ok=True)
    except OSError:   # a folder that takes no file: the console line said it
        pass


def refusal(folder: Path, sweep: Optional[str]) -> Optional[str]:
    """Why the job of sweep ``sweep`` in ``folder`` was refused, or ``None``."""
    return _note_of(folder / REFUSED, sweep) if sweep else None


def _note_of(note: Path, sweep: str) -> Optional[str]:
    import json

    try:
        found = json.loads(note.read_text())
        return str(found["why"]) if found.get("sweep") == sweep else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


class NotAResultsFile(ValueError):
    """The path is not a regular file that can be read as a results file (a FIFO, a folder, too large)."""


def _check_value(column: str, value: str) -> Optional[str]:
    if "\n" in value or "\r" in value or "\x00" in value:
        return f"{column} holds a line break or NUL byte"
    if value == "":
        return None
    if column in INTEGERS:
        try:
            int(value)
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                return f"{column}={value[:40]!r} is not an integer"
            if not (math.isfinite(number) and number == int(number)):   # 5.0 (an older gnngp's pandas) reads as 5
                return f"{column}={value[:40]!r} is not an integer"
    elif column in NUMBERS:
        try:
            float(value)
        except ValueError:
            return f"{column}={value[:40]!r} is not a number"
    return None


RANGE_SLACK = 1e-6   # float32 arithmetic may put an accuracy of 1 at 1.0000001


def _out_of_range(row: Mapping[str, str]) -> Optional[str]:
    """A metric value outside what its metric can take (:attr:`gnngp_cli.metrics.Metric.bounds`):
    ``train``, ``val`` and ``test`` of the row's ``metric`` (a row without one: the range of every
    score metric of its ``task``), and the uncertainty columns (``ece``, ``nll``...). An
    accuracy of -5 is no result gnngp wrote."""
    from ..metrics import METRICS

    named = METRICS.get(row.get("metric", ""))
    scores = [named] if named is not None else [m for m in METRICS.values() if m.kind == "score" and row.get("task", "") in ("", *m.tasks)]
    ranges = [(column, " or ".join(m.name for m in scores), (min(m.bounds[0] for m in scores), max(m.bounds[1] for m in scores)))
              for column in ("train", "val", "test")] if scores else []
    ranges += [(column, column, METRICS[column].bounds) for column in row if column in METRICS and METRICS[column].kind == "uncertainty"]
    for column, name, (low, high) in ranges:
        value = row.get(column, "")
        number = float(value) if value else math.nan
        if number < low - RANGE_SLACK or number > high + RANGE_SLACK:
            return f"{column}={value} is outside the range of {name}, [{low:g}, {high:g}]"
    return None


def check_row(row: Mapping[str, str]) -> Optional[str]:
    """What is wrong with one row read back (``None``: nothing)."""
    status = row.get("status", "")
    if status not in STATUSES:
        return f"status={status[:40]!r} is not one of {', '.join(STATUSES)}"
    for column, value in row.items():
        problem = _check_value(column, value)
        if problem:
            return problem
    if status == "ok":
        missing = [c for c in REQUIRED_OK if not row.get(c)]
        if missing:
            return f"an ok row without {', '.join(missing)}"
        if not math.isfinite(float(row["test"])):   # gnngp writes a metric that is not a number as an error row
            return f"an ok row whose test is {row['test']}"
        return _out_of_range(row)
    elif not row.get("error"):
        return "an error row without its error"
    return None


def read_rows(path: Path) -> RowFile:
    """The rows of ``path`` (see the module docstring). Raises :class:`NotAResultsFile` for a
    path that is not a regular file (a FIFO would block the reader) or is over ``MAX_BYTES``,
    and ``OSError`` when it cannot be read."""
    path = Path(path)
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotAResultsFile(f"{path} is not a regular file")
    if info.st_size > MAX_BYTES:
        raise NotAResultsFile(f"{path} is {info.st_size / 2**30:.1f} GiB, larger than any results file gnngp writes")
    with open(path, "rb") as f:
        raw = f.read()
    out = RowFile(path)
    if b"\x00" in raw:
        out.problems.append(f"NUL bytes from offset {raw.index(bytes(1))}")
    if raw.startswith(b"\xef\xbb\xbf"):   # a byte-order mark, as a spreadsheet saving UTF-8 writes one
        raw = raw[3:]
    try:
        text, undecoded = raw.decode("utf-8"), False
    except UnicodeDecodeError:   # the rows holding such bytes are left out, each named (the others are read)
        text, undecoded = raw.decode("utf-8", errors="replace"), True
    if not text.strip():
        out.problems.append("it is empty")
        return out
    records = csv.reader(io.StringIO(text.replace("\x00", ""), newline=""))
    try:
        header = next(records)
    except (StopIteration, csv.Error) as err:
        out.problems.append(f"no header ({err})")
        return out
    if undecoded and any("\ufffd" in name for name in header):
        out.problems.append("its header has bytes that are not UTF-8")
        return out
    if "status" not in header or len(set(header)) != len(header):
        out.problems.append("its header is not a results header (no status column, or a column twice)")
        return out
    out.header = header
    row_number, last_good, last_bad = 1, False, False
    while True:
        try:
            record = next(records)
        except StopIteration:
            break
        except csv.Error as err:
            out.problems.append(f"row {row_number + 1}: {err}")
            break
        row_number += 1
        last_good = last_bad = False
        if not record:
            continue
        if len(record) != len(header):
            out.problems.append(f"row {row_number}: {len(record)} fields, the header has {len(header)}")
            last_bad = True
            continue
        row = dict(zip(header, record))
        problem = "bytes that are not UTF-8" if undecoded and any("\ufffd" in value for value in record) else check_row(row)
        if problem:
            out.problems.append(f"row {row_number}: {problem}")
            last_bad = True
        else:
            for column in INTEGERS.intersection(row):   # 5.0, as an older gnngp's pandas wrote it, is kept as 5
                if "." in row[column] or "e" in row[column].lower():
                    row[column] = str(int(float(row[column])))
            out.rows.append(row)
            last_good = True
    if not text.endswith("\n"):   # gnngp ends every row with a line end: a last line without one was cut,
        if last_good:              # even where what is left still parses (a number cut short)
            out.rows.pop()
            out.problems.append(f"row {row_number}: cut short (no line end; a file edited by hand ends its last row with a line break)")
        elif last_bad:             # one row, one problem: the one found, and why
            out.problems[-1] += ", cut short (no line end)"
    return out


def text_value(value: Any) -> str:
    """A value as a results file holds it: nothing for None and NaN, integers as integers."""
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return repr(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:   # numpy / torch scalars
        return text_value(value.item())
    return str(value)


def ordered_columns(*headers: Iterable[str]) -> list[str]:
    """The union of ``headers``: the known columns in their order, then the others in the order met."""
    seen: list[str] = []
    for header in headers:
        for column in header:
            if column not in seen:
                seen.append(column)
    return [c for c in COLUMNS if c in seen] + [c for c in seen if c not in COLUMNS]


def to_text(header: list[str], rows: Iterable[Mapping[str, Any]]) -> str:
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([text_value(row.get(column)) for column in header])
    return out.getvalue()


def to_frame(header: list[str], rows: Iterable[Mapping[str, Any]]):
    """Rows as a pandas table, typed as ``pandas.read_csv`` types the file they make."""
    import pandas as pd

    if not header:
        return pd.DataFrame()
    return pd.read_csv(io.StringIO(to_text(header, rows)))
