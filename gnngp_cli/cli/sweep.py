"""Sweep summary: a Hydra callback that gathers every job's results into one table."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import pandas as pd

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ..data.files import atomic_write
from ..results.resume import job_overrides

log = logging.getLogger("gnngp")


@dataclass
class SweepOutcome:
    """What the last sweep of this process left: the ``gnngp`` command exits 1 when a job failed."""

    path: Path
    jobs: int
    failed: int


LAST_SWEEP: Optional[SweepOutcome] = None


def collect(sweep_dir: Path, results_file: str = "results.csv") -> tuple[list[str], list[dict]]:
    """The header and rows of every job's results under ``sweep_dir``, each with its ``job``:
    a job folder without results (it died before writing) becomes an error row; a results
    file with malformed rows gives its good rows, an error row naming the file, and a warning.
    Never raises on a bad file."""
    from ..results.rowfile import COLUMNS, NotAResultsFile, ordered_columns, read_rows

    header, rows = [], []
    for job in sorted((p for p in sweep_dir.iterdir() if p.is_dir() and (p / ".hydra").is_dir()), key=_job_order):
        path = job / results_file
        try:
            found = read_rows(path)
        except (OSError, NotAResultsFile) as err:
            rows.append({"job": job.name, "status": "error", "error": f"no results ({type(err).__name__}); the job did not finish",
                         "overrides": _overrides(job)})
            continue
        header = ordered_columns(header, found.header)
        rows += [{"job": job.name, **row} for row in found.rows]
        if found.problems:
            log.warning("%s has malformed rows, left out of the summary: %s", path, found.shown_problems())
            rows.append({"job": job.name, "status": "error", "error": f"malformed rows in {path}: {found.shown_problems()}",
                         "overrides": _overrides(job)})
    return ["job", *(ordered_columns(header, ["status", "error", "overrides"]) if rows else COLUMNS)], rows


def _job_order(path: Path):
    return (0, int(path.name)) if path.name.isdigit() else (1, path.name)


def _overrides(job: Path) -> str:
    """The job's overrides, recorded as in its result rows (:func:`~gnngp_cli.results.resume.job_overrides`)."""
    try:
        return job_overrides([line.strip("- \n") for line in (job / ".hydra" / "overrides.yaml").read_text().splitlines()])
    except OSError:
        return ""


def console_table(summary: pd.DataFrame) -> str:
    show = [c for c in ("job", "status", "dataset", "method", "run", "test", "val", "total_seconds", "error") if c in summary.columns]
    return summary[show].to_string(index=False, float_format=lambda v: f"{v:.4f}")


class SweepSummary(Callback):
    """``on_multirun_end``: write ``summary.csv`` in the sweep dir and print it."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        from ..results.rowfile import to_frame, to_text   # here, not at the top: Hydra imports this callback for every command

        header, rows = collect(sweep_dir, config.get("results_file", "results.csv"))
        path = sweep_dir / "summary.csv"
        atomic_write(path, lambda f: f.write(to_text(header, rows)))   # a reader never sees half a summary
        summary = to_frame(header, rows)
        failed = int((summary.get("status") != "ok").sum()) if len(summary) else 0
        log.info("sweep summary (%d rows, %d failed): %s\n%s", len(summary), failed, path, console_table(summary))
        global LAST_SWEEP
        jobs = summary.groupby("job")["status"].apply(lambda s: bool((s != "ok").any())) if len(summary) else []
        LAST_SWEEP = SweepOutcome(path, int(len(jobs)), int(sum(jobs)))
