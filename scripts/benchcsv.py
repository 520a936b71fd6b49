"""The benchmark CSVs the scripts keep as they run, and resume from: one definition of how their
rows are read and written.

A benchmark's CSV is its table: the columns the script keeps (``columns``), one row per
measurement; a cell (one job of the benchmark) is named by the values of some of them (dataset,
seed, kernel, ...). Rows are saved after every cell, so a stopped benchmark keeps what it measured:

- :func:`save_rows` replaces the rows of the cells it is given and keeps every other row, so a rerun of a cell is one copy, never a duplicate that a docs page would count
  twice; the file is rewritten whole and atomically (a temporary file moved over it), under a
  lock on its folder, so a stopped write leaves the earlier file and two benchmarks writing one
  CSV take turns instead of losing or interleaving rows;
- :func:`read_rows` reads a CSV back, refusing in one line a file that is not this table (a
  folder, a column the script does not write; one it lacks, an older version's, reads empty), and
  leaving out, with a note, a last line cut short by a
  write of an older version that stopped part way;
- :func:`run_cell` runs one cell of a benchmark whose jobs share a loaded graph (conformal,
  uncertainty): the jobs ``--out`` holds measured skipped, the graph loaded once, each job's
  rows saved as it finishes, an error a row of its own.
"""
from __future__ import annotations

import fcntl
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import pandas as pd


class BenchCsvError(SystemExit):
    """A benchmark CSV that cannot be read or written: the script stops with this one line."""

    def __init__(self, message: str):
        super().__init__(f"{Path(sys.argv[0]).name}: error: {message}")


def read_rows(out: Path, columns: Sequence[str]) -> pd.DataFrame:
    """The rows ``out`` holds, with ``columns`` (none when it does not exist or is empty)."""
    out = Path(out)
    if out.is_dir():
        raise BenchCsvError(f"--out {out} is a folder; give a CSV file's path")
    if not out.exists() or out.stat().st_size == 0:
        return pd.DataFrame(columns=list(columns))
    try:
        text = out.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise BenchCsvError(f"--out {out} cannot be read ({getattr(err, 'strerror', None) or err}); give another --out") from None
    lines = text.splitlines(keepends=True)
    header = [name.strip() for name in lines[0].rstrip("\r\n").split(",")]
    foreign = [c for c in header if c not in columns]
    if foreign or not header or header == [""]:   # a column this table has not: another script's CSV (one it lacks: an older version's)
        raise BenchCsvError(f"--out {out} holds another table's rows (columns this script does not write: "
                            f"{', '.join(foreign[:4]) or 'none, an empty header'}); give this script its own --out")
    if len(lines) > 1 and not lines[-1].endswith("\n"):   # a write that stopped part way through its last row, or an editor's file
        import csv

        fields = next(csv.reader([lines[-1]]), [])
        if len(fields) == len(header):   # a whole row that lacks only its newline: kept
            lines[-1] += "\n"
        else:
            print(f"note: {out}'s last line was cut short (a write that stopped); it is left out, and its cell runs again", file=sys.stderr)
            lines = lines[:-1]
    from io import StringIO

    try:
        return pd.read_csv(StringIO("".join(lines))).reindex(columns=list(columns))
    except (pd.errors.ParserError, ValueError) as err:
        raise BenchCsvError(f"--out {out} is not a CSV this script can read ({str(err).splitlines()[0]}); give another --out") from None


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Held while ``out`` is read and rewritten: another benchmark writing a CSV of its folder waits
    its turn (the folder is locked, not a file: the CSV is replaced, and a lock file would litter)."""
    handle = os.open(out.parent, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)   # closing releases the lock


def save_rows(out: Path, rows: Iterable[dict], columns: Sequence[str], replace: Sequence[Mapping]) -> None:
    """``rows`` into ``out`` in place of its rows of ``replace`` (each a mapping of column to
    value: the old rows that match one of them in every column given, a cell's rows run again, its
    error rows included), where the first of them stood, else after every row; the file rewritten
    atomically under its lock."""
    out = Path(out)
    new = pd.DataFrame(list(rows)).reindex(columns=list(columns))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with _locked(out):
            old = read_rows(out, columns)
            hit = matching(old, replace) if len(old) else pd.Series(False, index=old.index)
            at = int(hit.to_numpy().argmax()) if bool(hit.any()) else len(old)   # a cell run again keeps its place
            parts = [old.iloc[:at][~hit.iloc[:at]], new, old.iloc[at:][~hit.iloc[at:]]]
            table = pd.concat([part for part in parts if len(part)], ignore_index=True) if any(len(p) for p in parts) else new
            handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
            try:
                with os.fdopen(handle, "w", newline="") as stream:
                    table.reindex(columns=list(columns)).to_csv(stream, index=False)
                os.replace(temporary, out)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
    except OSError as err:
        raise BenchCsvError(f"cannot write --out {out} ({err.strerror or err}); give a writable path") from None


def matching(frame: pd.DataFrame, cells: Sequence[Mapping]) -> pd.Series:
    """Which rows of ``frame`` match one of ``cells`` (every column a cell names holds its value)."""
    hit = pd.Series(False, index=frame.index)
    for cell in cells:
        here = pd.Series(True, index=frame.index)
        for column, value in cell.items():
            here &= frame[column].map(_text) == _text(value)
        hit |= here
    return hit


def measured(frame: pd.DataFrame, cell: Mapping) -> bool:
    """Whether ``frame`` holds an ``ok`` row of ``cell`` (a cell's rows are saved together: one is
    all of them); an error row is not a measurement, and its cell runs again."""
    return bool((matching(frame, [cell]) & (frame["status"] == "ok")).any()) if len(frame) else False


def spellings(cell: Mapping) -> list[Mapping]:
    """The ways rows of ``cell`` record it: a GP job of the gaussian likelihood writes its name on a
    classification set and none on a regression set (no likelihood there), so both are the cell."""
    if cell.get("likelihood") == "gaussian":
        return [cell, {**cell, "likelihood": ""}]
    return [cell]


def _text(value) -> str:
    """A value as a CSV read back and a row just measured both spell it (``1`` and ``1.0``, an
    empty cell and ``None`` alike)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def check_writable(out: Path) -> None:
    """Before minutes of work: ``out`` can be written (its folder made, a file there created)."""
    out = Path(out)
    if out.is_dir():
        raise BenchCsvError(f"--out {out} is a folder; give a CSV file's path")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".probe"):
            pass
    except OSError as err:
        raise BenchCsvError(f"cannot write --out {out} ({err.strerror or err}); give a writable path") from None


def error_row(cell: Mapping, err: Exception) -> dict:
    """The row of a job (or a cell's graph) that failed: its key and the error's first line."""
    return {**cell, "status": "error", "error": str(err).splitlines()[0]}


def run_cell(out: Path, columns: Sequence[str], where: Mapping, jobs: Sequence[tuple[Mapping, Any]], load: Callable[[], Any],
             run: Callable[[Any, Any], Optional[list[dict]]], skip: bool, stamp: Optional[Mapping] = None) -> bool:
    """One cell of a benchmark: ``jobs`` (each its key, the columns its rows are found by, and
    what ``run`` reads) on the graph ``load()`` gives, loaded once. ``skip``: a job ``out`` holds
    measured is not run. Each job's rows (``run(graph, what)``; ``None``: the job does not apply
    to this graph) are saved as it finishes, with ``stamp``'s columns, in place of that job's
    earlier rows; a job's :class:`~gnngp_cli.errors.GnngpError` is its error row, and a graph that
    does not load is the cell's one error row (its key ``where``, no kernel or method), replaced
    when the cell runs again. Whether it ran its jobs: False when ``out`` held them all measured
    or the graph did not load."""
    from gnngp_cli.errors import GnngpError

    loading = {**where, "method": "", "kernel": "", "status": "error"}
    have = read_rows(out, columns) if skip else None
    jobs = [(job, what) for job, what in jobs if have is None or not any(measured(have, key) for key in spellings(job))]
    if not jobs:
        return False
    try:
        graph = load()
    except GnngpError as err:
        save_rows(out, [error_row({**where, **(stamp or {}), "method": ""}, err)], columns, replace=[loading])
        print(f"{' '.join(str(v) for v in where.values())}: {str(err).splitlines()[0]}", file=sys.stderr)
        return False
    for job, what in jobs:
        try:
            rows = run(graph, what)
        except GnngpError as err:
            rows = [error_row({**job, **(stamp or {})}, err)]
        if rows is None:
            continue
        save_rows(out, [{**r, **(stamp or {})} for r in rows], columns, replace=[*spellings(job), loading])
    return True
