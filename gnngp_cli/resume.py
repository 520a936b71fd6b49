"""Resume a sweep: which jobs already hold a result of exactly their current settings.

Every result row records the job's overrides (``overrides``: a JSON list, sorted, without
``resume`` itself). With ``resume=true``, a job is skipped only when its results file holds
rows, all ``ok``, all written with the overrides the job has now; a job whose settings changed,
or whose last attempt failed, runs again, and its old rows are kept aside in
``<stem>.before-resume-<time>.csv`` (out of the summary).
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import pandas as pd


def job_overrides(overrides: Sequence[str]) -> str:
    """The job's settings as recorded in its rows: its overrides, sorted, ``resume`` left out."""
    return json.dumps(sorted(o for o in overrides if o.lstrip("+~").split("=", 1)[0] != "resume"))


def resume_decision(results: Path, overrides: Sequence[str]) -> tuple[bool, str]:
    """``(skip, why)`` for a job whose results go to ``results``."""
    if not results.is_file():
        return False, "no results yet"
    try:
        table = pd.read_csv(results)
    except (OSError, ValueError):
        return False, "its results file is unreadable"
    if len(table) == 0 or not bool((table.get("status", "ok") == "ok").all()):
        return False, "its last attempt failed"
    if "overrides" not in table.columns:
        return False, "its results do not record their settings (written by an older gnngp)"
    recorded = set(table["overrides"].fillna("").astype(str))
    current = job_overrides(overrides)
    if recorded != {current}:
        before = sorted(recorded - {current})[0]
        return False, f"its settings changed (was {_show(before)}, now {_show(current)})"
    return True, "its rows were computed with the same overrides"


def set_aside(results: Path) -> Path:
    """Rename an earlier attempt's results out of the way (kept, never deleted)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    aside = results.with_name(f"{results.stem}.before-resume-{stamp}{results.suffix}")
    os.replace(results, aside)
    return aside


def _show(recorded: str) -> str:
    try:
        return " ".join(json.loads(recorded)) or "no overrides"
    except ValueError:
        return recorded
