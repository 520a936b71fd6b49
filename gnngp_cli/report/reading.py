"""Result rows read back for a report: every ``results.csv`` and ``summary.csv`` under some
folders, the latest row of each rerun, and the paper's own numbers."""
from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable, Optional

import numpy as np
import pandas as pd

from ..results.rowfile import FALLBACK_FILE, SET_ASIDE_FILE, NotAResultsFile, read_rows  # fallback rows: read; set aside: named, not read
from .settings import annotate, overrides

KEY = ["dataset", "stand_in", "n_nodes", "method", "layers", "landmark_fraction", "seed", "split_index", "split", "settings", "group"]
# (split: the split's own words, "random 0.1/0.1, seed 2": runs on other split seeds are runs, not copies of one)


def paper_values() -> pd.DataFrame:
    with resources.files("gnngp_cli.paper").joinpath("paper_values.csv").open() as f:
        return pd.read_csv(f)


def known_deviations() -> pd.DataFrame:
    with resources.files("gnngp_cli.paper").joinpath("known_deviations.csv").open() as f:
        return pd.read_csv(f)


RESULT_FILES = ("results.csv", "summary.csv")


def _store_copy(path: Path) -> Optional[Path]:
    """The MLflow store ``path`` is a copy of a job's rows in (``logger=mlflow`` keeps each job's
    ``results.csv`` as ``<store>/artifacts/<run id>/artifacts/results.csv``, the store a folder
    holding ``mlflow.db``), else ``None``."""
    parts = path.parts
    if len(parts) < 5 or parts[-2] != "artifacts" or parts[-4] != "artifacts":
        return None
    store = path.parents[3]
    return store if (store / "mlflow.db").is_file() else None


def result_files(folders: Iterable[Path], say: Optional[Callable[[str], None]] = None) -> list[Path]:
    """The results.csv and summary.csv files below ``folders``, sorted per folder. The copies of
    an MLflow store below a folder given are left out: the job folders' own rows are the runs, and
    a job folder deleted would come back through its copy; a store given itself (or a folder inside
    one) is read. ``say``: told a note of each, once per folder (the report's read; not its recount)."""
    found = []
    for folder in folders:
        folder = Path(folder)
        stores: dict[bool, list[Path]] = {False: [], True: []}   # read or not -> the store of each copy
        aside = []
        for path in _csv_files(folder):
            if path.name not in RESULT_FILES and not FALLBACK_FILE.fullmatch(path.name):
                if SET_ASIDE_FILE.fullmatch(path.name):
                    aside.append(path)
                continue
            store = _store_copy(path)
            read = store is None or store == folder or store in folder.parents
            if store is not None:
                stores[read].append(store)
            if read:
                found.append(path)
                if say and FALLBACK_FILE.fullmatch(path.name):
                    say(f"gnngp: note: read {path}: rows a job could not write into its results.csv (a full disk, a folder made "
                        "read-only), kept there instead")
        if say and aside:   # resume's earlier attempts and unreadable files: never rows of their own in a report, but never silent
            say(f"gnngp: note: {len(aside)} file(s) of rows set aside under {folder} are not read ({aside[0]}"
                f"{', ...' if len(aside) > 1 else ''}): an earlier attempt that resume=true kept aside (results.before-resume-*), or a "
                "file that did not read as results (results.malformed-*); rename one to results.csv in a folder of its own to read it")
        for read, shown in stores.items():
            if say and shown:
                copies = f"{len(shown)} cop{'y' if len(shown) == 1 else 'ies'} of job results"
                say("gnngp: note: " + (f"read {copies} that the MLflow store {shown[0]} keeps (a job whose folder was deleted since is among "
                                       "them)" if read else f"left out {copies} in the MLflow store {shown[0]}; the job folders' own rows "
                                       "are read (give the store's folder to read its copies)"))
    return found


def _csv_files(folder: Path) -> list[Path]:
    """The CSV files below ``folder``, sorted, following links to folders (a run folder linked in
    from elsewhere is read; pathlib's rglob skipped it), each real folder once (a link back up is
    no loop)."""
    found, seen = [], set()
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        found += [Path(root) / name for name in files if name.endswith(".csv")]
    return sorted(found)


def read_results(folders: Iterable[Path]) -> pd.DataFrame:
    """Every row of every results.csv / summary.csv below ``folders``; reruns deduplicated (the
    latest of the same dataset, stand-in, method, depth, landmark fraction, seed, split and settings).
    Each row is checked as it is read (:mod:`gnngp_cli.results.rowfile`): malformed rows are left out,
    and a file that is not a regular file (a FIFO would block) or cannot be read is skipped,
    each with a warning naming the file. What was left out or read from elsewhere is also in the
    frame's ``attrs["notes"]`` (the report's own page says it too, not the console alone)."""
    frames, notes = [], []

    def tell(line: str) -> None:
        print(line, file=sys.stderr)
        notes.append(line)

    for path in result_files(folders, say=tell):
        try:
            found = read_rows(path)
        except (OSError, NotAResultsFile) as err:
            tell(f"gnngp: warning: skipped {path}: {err}")
            continue
        if "verdict" in found.header:   # gnngp verify -m's summary: checks of kernels against networks, no result rows
            tell(f"gnngp: note: skipped {path}: a gnngp verify sweep's summary (its checks; gnngp report reads gnngp run's rows)")
            continue
        if found.problems:
            tell(f"gnngp: warning: {path}: left out {len(found.problems)} malformed row(s) ({found.shown_problems()}); "
                 f"{len(found.rows)} good row{'' if len(found.rows) == 1 else 's'} read")
        elif not found.rows:
            tell(f"gnngp: warning: {path} holds no rows (a header alone)")
        if found.rows:
            frame = found.frame()
            if path.name == "summary.csv" and "job" in frame.columns:   # a sweep's rows of job folders deleted since are not results any more
                there = frame["job"].astype(str).map(lambda job: (path.parent / job).is_dir())
                if there.any() and not there.all():   # (none there: a summary kept or sent on its own, read whole)
                    gone = sorted(set(frame.loc[~there, "job"].astype(str)))
                    tell(f"gnngp: note: {path}: left out {int((~there).sum())} row(s) of job folder(s) no longer there "
                         f"({', '.join(gone[:10])}{', ...' if len(gone) > 10 else ''})")
                    frame = frame[there]
                stale = (frame["status"].fillna("ok") != "ok") & frame["job"].astype(str).map(lambda job: _ran_since(path, job))
                if stale.any():   # a failed or stopped job run again since (resume=true after a kill -9 left this summary)
                    tell(f"gnngp: note: {path}: left out {int(stale.sum())} error row(s) of job(s) run again since it was written "
                         f"({', '.join(sorted(set(frame.loc[stale, 'job'].astype(str)))[:10])}); their folders' results.csv are read")
                    frame = frame[~stale]
            frames.append(frame.assign(_file=str(path)))
    if not frames:
        return pd.DataFrame(columns=[*KEY, "status", "test", "val", "timestamp", "differs", "off_preset", "experiment", "task", "metric", "error"])
    rows = pd.concat(frames, ignore_index=True)
    for column in [*KEY, "status", "test", "val", "train", "timestamp", "total_seconds", "n_nodes", "n_edges", "landmarks", "error", "metric",
                   "experiment", "task", "extra", "sigma_w", "sigma_b", "device", "dtype", "split_index", "overrides", "fit",
                   "compute_backend", "kernel_seconds", "inference_seconds", "fit_seconds", "precompute_seconds", "train_seconds", "peak_rss_mb",
                   "peak_cuda_mb"]:
        if column not in rows.columns:
            rows[column] = np.nan
    rows["status"] = rows["status"].fillna("ok")
    rows["stand_in"] = rows["stand_in"].fillna("").astype(str)
    rows["split"] = (rows["split"] if "split" in rows.columns else pd.Series("", index=rows.index)).fillna("").astype(str)
    rows["layers"] = pd.to_numeric(rows["layers"], errors="coerce").fillna(2)
    rows["landmark_fraction"] = pd.to_numeric(rows["landmark_fraction"], errors="coerce")
    rows["seed"] = pd.to_numeric(rows["seed"], errors="coerce").fillna(-1)
    rows["split_index"] = pd.to_numeric(rows["split_index"], errors="coerce").fillna(rows.apply(_split_index, axis=1))
    rows = annotate(rows.drop(columns=["settings"]))
    rows = rows.sort_values("timestamp", na_position="first", kind="stable")
    ok = rows[rows["status"] == "ok"]
    _warn_of_copies_that_differ(ok)
    ok = ok.drop_duplicates(subset=KEY, keep="last")
    errors = rows[rows["status"] != "ok"].drop_duplicates(subset=["dataset", "method", "layers", "group", "seed"], keep="last")   # a seed's failure each
    superseded = _superseded(errors, ok)
    if superseded.any():   # an error that a later run of the same settings (and seed) replaced: the run is its ok row now
        tell(f"gnngp: note: left out {int(superseded.sum())} error row(s) that a later run of the same settings and seed replaced "
             f"(first: {errors.loc[superseded, 'dataset'].iloc[0]} {errors.loc[superseded, 'method'].iloc[0]})")
        errors = errors[~superseded]
    out = pd.concat([ok, errors], ignore_index=True).drop(columns="_file")
    out.attrs["notes"] = notes
    return out


def _superseded(errors: pd.DataFrame, ok: pd.DataFrame) -> pd.Series:
    """Which ``errors`` rows an ``ok`` row of the same dataset, method, depth, settings and seed
    (any seed where the error recorded none) written later replaced (an error without a
    timestamp, a sweep summary's stopped job, is not known to be earlier: kept)."""
    later: dict[tuple, list[tuple[float, str]]] = {}
    for key, seed, stamp in zip(zip(ok["dataset"], ok["method"], ok["layers"], ok["group"]), ok["seed"], ok["timestamp"].fillna("").astype(str)):
        later.setdefault(key, []).append((seed, stamp))
    return pd.Series([bool(str(when)) and any((seed < 0 or s == seed) and stamp > str(when) for s, stamp in later.get(key, ()))
                      for key, seed, when in zip(zip(errors["dataset"], errors["method"], errors["layers"], errors["group"]), errors["seed"],
                                                 errors["timestamp"].fillna(""))], index=errors.index, dtype=bool)


def _ran_since(summary: Path, job: str) -> bool:
    """Whether the job folder ``job`` of the sweep whose summary is ``summary`` wrote results after it."""
    try:
        return (summary.parent / job / "results.csv").stat().st_mtime > summary.stat().st_mtime
    except OSError:
        return False


def _split_index(row: pd.Series) -> float:
    """The split a row without a ``split_index`` (a run of one split; only ``splits=all`` writes
    the column) ran on: its ``dataset.split_index`` override, else 0, the default: so that it is
    one key with the same split of a ``splits=all`` run (which it was counted beside, twice)."""
    typed = overrides(row) or {}
    value = pd.to_numeric(typed.get("dataset.split_index", 0), errors="coerce")
    return 0.0 if pd.isna(value) else float(value)


def _warn_of_copies_that_differ(ok: pd.DataFrame) -> None:
    """A row of the same key and timestamp in two files is a copy; a copy whose numbers differ
    was edited, and which one the report keeps (the file read last) is the order of the folders
    given: say so, once, naming the first such row and both files."""
    same = ok[ok.duplicated(subset=[*KEY, "timestamp"], keep=False)]
    clashes = [group for _, group in same.groupby([*KEY, "timestamp"], dropna=False, sort=False)
               if pd.to_numeric(group["test"], errors="coerce").nunique(dropna=False) > 1]
    if not clashes:
        return
    count, group = len(clashes), clashes[0]
    shown = "; ".join(f"{t} in {f}" for t, f in zip(group["test"], group["_file"]))
    print(f"gnngp: warning: {count} result row(s) appear in more than one file with the same timestamp and a different test value (first: "
          f"{group['dataset'].iloc[0]} / {group['method'].iloc[0]} seed {group['seed'].iloc[0]}: {shown}); the file read last is kept, "
          "so the order of the folders decides: remove the copy you do not mean", file=sys.stderr)


def default_depth(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["layers"] == 2]


def preset_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows a paper preset ran with nothing else changed (:func:`.settings.off_preset`): what the
    paper's tables and figures are made from."""
    return rows[rows["off_preset"].fillna("") == ""]


def preset(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows a paper preset ran with a table's own settings (see :mod:`.settings`)."""
    ran = preset_runs(rows)
    return ran[ran["differs"].fillna("") == ""]
