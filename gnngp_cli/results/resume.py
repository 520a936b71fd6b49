"""Resume a job or a sweep: which runs already hold a result of exactly their current settings.

Every result row records the job's overrides (``overrides``: a JSON list, sorted, without
``resume`` itself), its run index and, with ``splits=all``, its split and how many there are.
A job writes each run's row as the run finishes, so a job that was stopped (Ctrl-C, SIGTERM, a
lost node) keeps its finished runs. With ``resume=true``:

- a results file whose rows are all ``ok``, all written with the overrides the job has now
  (or with those and fewer ``runs``: run ``r``'s seed is ``seed + r`` whatever ``runs`` says),
  keeps them, and the job runs only the runs that are missing (none: the job is skipped);
- a file with a failed row, rows of other settings, malformed rows, rows of a custom graph whose
  files have changed since (their digest, ``data_digest``), or an active run's learning curve
  cut short (rows of some of its budgets only: a process killed between its rows, which are
  written together) is kept aside whole in
  ``<stem>.before-resume-<time>.csv`` (out of the summary), and the job runs from the start;
- so is a file that another user could have written (it or its folder is group- or
  world-writable, or owned by another user: :mod:`~gnngp_cli.data.trust`), with a warning naming
  it and the fix: rows it holds are not taken as finished runs.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

from ..data.trust import untrusted
from .rowfile import NotAResultsFile, RowFile, aside_path, read_rows

Key = tuple[Optional[int], int]   # (split index with splits=all, else None; run index)


NOT_SETTINGS = ("resume", "logger", "hparams_search", "progress")   # how a job is run, shown, recorded or chosen: never what it computes


def job_overrides(overrides: Sequence[str]) -> str:
    """The job's settings as recorded in its rows: its overrides, sorted, those of
    :data:`NOT_SETTINGS` (and ``logger.*``) left out; a search's trial keeps the values it chose."""
    def setting(override: str) -> bool:
        key = override.lstrip("+~").split("=", 1)[0]
        return key not in NOT_SETTINGS and not key.startswith("logger.")
    return json.dumps(sorted(o for o in overrides if setting(o)))


@dataclass
class Resume:
    """What a results file already holds for a job: ``done`` runs (keys), the fixed splits'
    count that its rows recorded (``splits=all``), and why (``why``: for the log)."""

    why: str
    done: set[Key] = field(default_factory=set)
    split_count: Optional[int] = None
    kept: Optional[RowFile] = None   # the file's rows, when they are the job's own: kept, and the rest run
    distrusted: bool = False         # the file or its folder could have been written by another user: a warning, not a log line

    @property
    def usable(self) -> bool:
        return self.kept is not None

    def missing(self, runs: int, every_split: bool) -> Optional[int]:
        """How many runs are still to run (``None``: unknown until the data says how many splits)."""
        if every_split:
            if self.split_count is None:
                return None
            return sum((s, r) not in self.done for s in range(self.split_count) for r in range(runs))
        return sum((None, r) not in self.done for r in range(runs))


def resume_state(results: Path, overrides: Sequence[str], every_split: bool, budgets: Optional[Sequence[int]] = None,
                 data_digest: Optional[str] = None) -> Resume:
    """What ``results`` holds for a job with ``overrides`` (see the module docstring); ``budgets``:
    an active job's, whose every run is a row per budget, in order; ``data_digest``: a custom
    graph's files' now (:func:`~gnngp_cli.data.custom.files_digest`), which its rows must have
    recorded (files written again at the same path: every run runs again)."""
    if not os.path.lexists(results):
        return Resume("no results yet")
    distrusted = untrusted(results, Path(results).parent)
    if distrusted is not None:
        return Resume(f"not trusting its rows as finished runs: {distrusted}", distrusted=True)
    try:
        found = read_rows(results)
    except (OSError, NotAResultsFile):
        return Resume("its results file is unreadable")
    if found.problems:
        return Resume("its results file has malformed rows")
    rows = found.rows
    if not rows:
        return Resume("its results file holds no rows")
    if any(row["status"] != "ok" for row in rows):
        return Resume("its last attempt failed")
    if "overrides" not in found.header:
        return Resume("its results do not record their settings (written by an older gnngp)")
    current = job_overrides(overrides)
    recorded = {row.get("overrides", "") for row in rows}
    if recorded != {current} and not all(more_runs_of(before, current) or more_runs_of(current, before) for before in recorded):
        before = sorted(recorded - {current})[0]   # (fewer runs than before: the runs asked for are among its rows, kept whole)
        return Resume(f"its settings changed (was {_show(before)}, now {_show(current)})")
    if data_digest is not None:
        before = {str(row.get("data_digest") or "") for row in rows}
        if before != {data_digest}:
            was = sorted(before - {data_digest})[0] or "not recorded"
            return Resume(f"its rows were computed on other versions of the graph's files (digest {was}, now {data_digest or 'unreadable'})")
    try:
        keys: list[Key] = [(int(float(row["split_index"])) if every_split else None, int(float(row.get("run") or 0))) for row in rows]
        counts = {int(float(row["split_count"])) for row in rows if row.get("split_count")}
        curves: dict[Key, list[int]] = {}
        for key, row in zip(keys, rows) if budgets is not None else ():
            curves.setdefault(key, []).append(int(float(row["budget"])))
    except (KeyError, ValueError):
        return Resume("its rows do not say which run (or split, or budget) they are")
    planned = list(budgets or ())
    cut = next(((key, curve) for key, curve in curves.items() if curve != planned), None)
    if cut is not None:
        return Resume(f"its run {cut[0][1]} holds the budgets {cut[1]}, not {planned} (a learning curve cut short)")
    fewer = recorded != {current} and all(more_runs_of(before, current) for before in recorded)
    why = "its rows were computed with the same overrides" + ("" if recorded == {current} else " and fewer runs" if fewer else " and more runs")
    return Resume(why, set(keys), max(counts) if counts else None, kept=found)


def _runs_and_rest(recorded: str) -> tuple[Optional[int], list[str]]:
    """A row's recorded overrides (a JSON list) as its ``runs`` (1 when not set; ``None`` when
    not a number) and the others."""
    try:
        items = [str(o) for o in json.loads(recorded)] if recorded else []
    except ValueError:
        return None, [recorded]
    runs = [o.partition("=")[2] for o in items if o.lstrip("+~").partition("=")[0] == "runs"]
    rest = [o for o in items if o.lstrip("+~").partition("=")[0] not in ("runs", *NOT_SETTINGS)]   # (rows of an older gnngp recorded progress=)
    try:
        return (int(runs[-1]) if runs else 1), rest
    except ValueError:
        return None, rest


def more_runs_of(before: str, now: str) -> bool:
    """Whether overrides ``now`` are ``before`` with as many runs or more (``runs=3`` then
    ``runs=5``): run ``r`` has seed ``seed + r`` whatever ``runs`` says, so the rows of the runs
    ``before`` ran are the first rows of ``now``'s, and resume runs only the ones added."""
    if before == now:
        return True
    runs_before, rest_before = _runs_and_rest(before)
    runs_now, rest_now = _runs_and_rest(now)
    return runs_before is not None and runs_now is not None and rest_before == rest_now and runs_before <= runs_now


def recorded_by(recorded: str, job: str) -> bool:
    """Whether rows that record the overrides ``recorded`` can be those of the job of overrides
    ``job`` (both as :func:`job_overrides` writes them): each setting a row records is the job's
    (the job's ``.hydra/overrides.yaml`` may hold more of them; ``runs`` aside: run ``r`` is
    run ``r`` whatever ``runs`` says). Unreadable overrides, of an older gnngp: not told apart."""
    if not recorded or not job:
        return True
    try:
        json.loads(recorded), json.loads(job)
    except ValueError:
        return True
    _, rows = _runs_and_rest(recorded)
    _, ours = _runs_and_rest(job)
    settings = {o.lstrip("+~").partition("=")[0]: o.lstrip("+~").partition("=")[2] for o in ours}
    return all(settings.get(o.lstrip("+~").partition("=")[0]) == o.lstrip("+~").partition("=")[2] for o in rows)


def latest_job_rows(rows: list[dict]) -> tuple[list[dict], int]:
    """The rows of a results file that its last job wrote, and how many it holds besides: those of
    the overrides its last row records (:func:`more_runs_of`: a resume that added runs keeps the
    earlier runs' rows); a folder used again by a job of other overrides holds that job's rows too
    (a sweep into the same sweep dir, ``hydra.run.dir`` given twice)."""
    recorded = rows[-1].get("overrides") if rows else None
    kept = [row for row in rows if not recorded or not row.get("overrides") or more_runs_of(row["overrides"], recorded)]
    return kept, len(rows) - len(kept)


def set_aside(results: Path) -> Path:
    """Rename an earlier attempt's results out of the way (kept, never deleted)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    aside = aside_path(results, "before-resume", stamp)
    os.replace(results, aside)
    return aside


def _show(recorded: str) -> str:
    """Recorded overrides as the user spells them (``kernel=gcngp``, not Hydra's ``model=gcngp``)."""
    from ..compose import shown_override

    try:
        return " ".join(shown_override(str(o)) for o in json.loads(recorded)) or "no overrides"
    except (ValueError, TypeError):
        return recorded
