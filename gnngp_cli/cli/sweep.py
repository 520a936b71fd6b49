"""Sweep summary: a Hydra callback that gathers every job's results into one table."""
from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    import pandas as pd

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ..data.files import atomic_write
from ..results.resume import job_overrides, recorded_by
from ..results.rowfile import SWEEP_ENV

log = logging.getLogger("gnngp")


@dataclass
class SweepOutcome:
    """What the last sweep of this process left: the ``gnngp`` command exits 1 when a job failed."""

    path: Path
    jobs: int
    failed: int
    unwritten: str = ""   # why summary.csv could not be written (a full disk, a folder in its place): the command fails too


LAST_SWEEP: Optional[SweepOutcome] = None
RUNNING: Optional[tuple] = None   # (the SweepSummary, the sweep's config) from its start to its end: a stopped sweep's summary


def summarise_stopped(stopped: bool = True) -> None:
    """A sweep stopped part way (Ctrl-C, SIGTERM): write ``summary.csv`` of the jobs it ran, the
    stopped one as its folder holds it (its finished runs, or none), as its end would have.
    ``stopped=False``: a sweep its sweeper ended without calling the callbacks' end (Optuna's,
    when every trial failed), summarised as an ended one."""
    if RUNNING is None:
        return
    callback, config = RUNNING
    try:
        callback.on_multirun_end(config, stopped=stopped)
    except Exception as err:   # the stop's own line follows; the job folders are as they were
        log.warning("no summary.csv of the %s sweep: %s", "stopped" if stopped else "failed", err)


def job_folders(sweep_dir: Path) -> list[Path]:
    """The job folders of ``sweep_dir`` (those with Hydra's ``.hydra``), in job order."""
    return sorted((p for p in sweep_dir.iterdir() if p.is_dir() and (p / ".hydra").is_dir()), key=_job_order)


_UNSEEN = object()   # a job folder that was not there when the sweep started


def _stamp(job: Path) -> Optional[int]:
    """When Hydra last wrote the job's ``.hydra`` files (each launch of the job writes them anew)."""
    try:
        return (job / ".hydra" / "overrides.yaml").stat().st_mtime_ns
    except OSError:
        return None


def collect(sweep_dir: Path, results_file: str = "results.csv", swept_keys: Sequence[str] = (),
            jobs: Optional[Sequence[Path]] = None, since: Optional[float] = None, sweep_id: Optional[str] = None) -> tuple[list[str], list[dict]]:
    """The header and rows of every job's results under ``sweep_dir`` (or of ``jobs`` only), each
    with its ``job``: a job folder without results (it died before writing) becomes an error row;
    a results file with malformed rows gives its good rows, an error row naming the file, and a
    warning. ``since`` (a sweep run again without ``resume=true``, which runs every run anew): the
    rows written before it (seconds since the epoch) are an earlier sweep's, left out. ``sweep_id``:
    the sweep's (:data:`~gnngp_cli.results.rowfile.SWEEP_ENV`), whose jobs refused by another job's hold
    left a note (an error row). Never raises on a bad file."""
    from ..results.resume import latest_job_rows
    from ..results.rowfile import COLUMNS, NotAResultsFile, ordered_columns, read_rows, refusal
    from ..results.writing import read_only

    header, rows = [], []
    jobs = job_folders(sweep_dir) if jobs is None else list(jobs)
    swept = swept_values({job.name: _overrides(job) for job in jobs}, swept_keys)
    for job in jobs:
        path = job / results_file
        why = refusal(job, sweep_id)
        if why is not None:   # refused by the job (another job held its results file): the rows there are that job's
            rows.append({"job": job.name, "swept": swept[job.name], **_identity(job), "status": "error", "overrides": _overrides(job),
                         "error": f"the job did not run: {why}"})
            continue
        try:
            found = read_rows(path)
        except (OSError, NotAResultsFile) as err:
            rows.append({"job": job.name, "swept": swept[job.name], **_identity(job), "status": "error",
                         "error": f"no results ({type(err).__name__}); the job did not finish", "overrides": _overrides(job)})
            continue
        if read_only(path):   # refused by the job (gnngp_cli.cli.execute): it ran nothing, and its rows are another run's
            rows.append({"job": job.name, "swept": swept[job.name], "status": "error", "overrides": _overrides(job),
                         "error": f"{path} is read-only: the job did not run (make it writable, then resume=true)"})
            continue
        header = ordered_columns(header, found.header)
        # this job's rows: those of the overrides its last row records (a row records the overrides its job reads, which
        # .hydra/overrides.yaml may hold more of); an earlier sweep's job of other overrides in the same folder wrote the others
        kept, left = latest_job_rows(found.rows)   # (a resume that added runs: the earlier runs' rows too)
        fresh = kept if since is None else [row for row in kept if not _written_before(row, since)]
        if len(fresh) < len(kept):   # the same job run again into its folder: the earlier sweep's rows of the same overrides (counted twice)
            earlier = len(kept) - len(fresh)
            log.info("summary: %s holds %d row%s of an earlier sweep's run of this job, left out", path, earlier, "s" if earlier > 1 else "")
            kept = fresh
            if not kept:
                rows.append({"job": job.name, "swept": swept[job.name], **_identity(job), "status": "error", "overrides": _overrides(job),
                             "error": f"no results (its {results_file} holds an earlier sweep's rows only); the job did not finish"})
                continue
        if kept and not recorded_by(str(kept[-1].get("overrides") or ""), _overrides(job)):   # an earlier sweep's job in this folder:
            rows.append({"job": job.name, "swept": swept[job.name], **_identity(job), "status": "error",   # this one wrote no row
                         "error": f"no results (its {results_file} holds an earlier job's rows, of other overrides); the job did not finish",
                         "overrides": _overrides(job)})
            continue
        if left:
            log.info("summary: %s holds %d row%s of an earlier job with other overrides, left out", path, left, "s" if left > 1 else "")
        rows += [{"job": job.name, "swept": swept[job.name], **row} for row in kept]
        if found.problems:
            log.warning("%s has malformed rows, left out of the summary: %s", path, found.shown_problems())
            rows.append({"job": job.name, "swept": swept[job.name], "status": "error",
                         "error": f"malformed rows in {path}: {found.shown_problems()}", "overrides": _overrides(job)})
    return ["job", "swept", *(ordered_columns(header, ["status", "error", "overrides"]) if rows else COLUMNS)], rows


def _written_before(row: dict, since: float) -> bool:
    """Whether a result row's ``timestamp`` (whole seconds, UTC) is before ``since``; a row without one
    (an older gnngp's) is not."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(row.get("timestamp") or "")).timestamp() < int(since)
    except ValueError:
        return False


CHECK_COLUMNS = ("kernel", "method", "layers", "dataset", "widths", "relative_error", "noise_ratio", "slope", "p_value", "shift",
                 "detectable", "verdict", "seconds")   # a gnngp verify sweep's summary: a row per job, its widest width's error


def collect_checks(sweep_dir: Path, swept_keys: Sequence[str] = (), jobs: Optional[Sequence[Path]] = None) -> tuple[list[str], list[dict]]:
    """A ``gnngp verify -m`` sweep's summary: a row per job from its ``verify.csv`` (the rows of
    the job's last check: a folder used again keeps earlier checks' rows), ``ok`` for a PASS and
    ``error`` for a FAIL, an error row, or no file. Never raises on a bad file."""
    import pandas as pd

    jobs = job_folders(sweep_dir) if jobs is None else list(jobs)
    swept = swept_values({job.name: _overrides(job) for job in jobs}, swept_keys)
    rows = []
    for job in jobs:
        head = {"job": job.name, "swept": swept[job.name]}
        try:
            table = pd.read_csv(job / "verify.csv", keep_default_na=False)
            last = table[table["timestamp"].astype(str) == str(table["timestamp"].iloc[-1])]
        except Exception as err:  # noqa: BLE001 - a missing, empty or damaged file: the job's row says so
            rows.append({**head, "status": "error", "error": f"no verify.csv that reads ({type(err).__name__}); the job did not finish",
                         "overrides": _overrides(job)})
            continue
        widest = last.iloc[-1].to_dict()
        row = {**head, **{c: widest.get(c, "") for c in CHECK_COLUMNS if c != "widths"}, "overrides": widest.get("overrides", "")}
        if "width" in last.columns:
            row["widths"] = " ".join(str(w) for w in last["width"] if str(w) != "")
        verdict = str(widest.get("verdict", ""))
        row["status"] = "ok" if verdict == "PASS" else "error"
        row["error"] = "" if verdict == "PASS" else str(widest.get("error") or "") or f"verdict {verdict or 'missing'}"
        rows.append(row)
    return ["job", "swept", "status", *CHECK_COLUMNS, "error", "overrides"], rows


def swept_values(overrides: dict[str, str], keys_given: Sequence[str] = ()) -> dict[str, str]:
    """Each job's values of the keys the sweep varied, as the user spells them: ``dataset=citeseer
    kernel=gcngp_x``; a sweep of one job, its overrides. The keys varied: those of ``keys_given``
    (``key=values``: a sweep's lists, a search's parameters, :func:`swept_keys`) and any whose
    value is not the same in every job. ``overrides``: job -> its recorded overrides (a JSON
    list, :func:`_overrides`)."""
    import json

    from ..compose import shown_override

    parsed = {}
    for job, recorded in overrides.items():
        try:
            items = json.loads(recorded) if recorded else []
        except ValueError:
            items = []
        parsed[job] = {shown_override(str(o)).partition("=")[0].lstrip("+~"): shown_override(str(o)) for o in items}
    keys = {key for items in parsed.values() for key in items}
    declared = {shown_override(f"{key}={value}").partition("=")[0] for key, value in
                ((k.lstrip("+~"), v) for k, _, v in (str(x).partition("=") for x in keys_given))}
    varied = {key for key in keys if key in declared or len({items.get(key) for items in parsed.values()}) > 1}
    alone = len(parsed) == 1 and not declared   # a sweep of one job, and no key declared swept: its overrides
    return {job: " ".join(o for key, o in sorted(items.items()) if key in varied or alone) for job, items in parsed.items()}


def swept_keys(config: DictConfig) -> list[str]:
    """What the sweep was told to vary, as ``key=values``: the overrides with a sweep's values
    (``model=gcngp,gcngp_x``, ``depth=range(1,4)``) and the sweeper's own parameters (a search's)."""
    out = []
    for override in config.hydra.overrides.get("task", []) or []:
        key, sep, value = str(override).partition("=")
        if sep and ("," in value or value.rstrip().endswith(")")) and not value.lstrip().startswith(("[", "{", "'", '"')):
            out.append(override)
    params = config.hydra.sweeper.get("params") if "params" in config.hydra.sweeper else None
    if params:
        out += [f"{key}={value}" for key, value in params.items()]
    return out


def _job_order(path: Path):
    return (0, int(path.name)) if path.name.isdigit() else (1, path.name)


def _identity(job: Path) -> dict:
    """The dataset and method a job's composed config (``.hydra/config.yaml``) names: the row of a
    job that wrote none says what it was (a stopped sweep's report read ``? / ?``); none if unreadable."""
    from omegaconf import OmegaConf

    from ..results.rows import method_names

    try:
        cfg = OmegaConf.load(job / ".hydra" / "config.yaml")
        return {"dataset": str(cfg.dataset.name).lower(), "method": method_names(cfg)[0]}
    except Exception:  # noqa: BLE001 - a folder's files are whatever was left there: the row goes without
        return {}


def _overrides(job: Path) -> str:
    """The job's overrides, recorded as in its result rows (:func:`~gnngp_cli.results.resume.job_overrides`)."""
    try:
        return job_overrides([line.strip("- \n") for line in (job / ".hydra" / "overrides.yaml").read_text().splitlines()])
    except OSError:
        return ""


def console_table(summary: pd.DataFrame) -> str:
    """The summary's main columns (an active-learning sweep's strategy and labels bought, a row per
    budget, where it has them); an empty cell (an ok row's error, a failed row's test) is blank, not NaN."""
    import pandas as pd   # here, not at the top: Hydra imports this callback for every command
    optional = ("swept", "strategy", "labelled", "error")
    main = ("job", "swept", "status", "dataset", "method", "strategy", "labelled", "run", "test", "val", "total_seconds", "error")
    if "verdict" in summary.columns:   # gnngp verify's
        main = ("job", "swept", "status", "method", "verdict", "relative_error", "p_value", "error")
    show = [c for c in main if c in summary.columns and not (c in optional and summary[c].isna().all())]
    table = summary[show].astype(object)
    for column in show:
        table[column] = ["" if pd.isna(v) else f"{v:.4f}" if isinstance(v, float) and column in ("test", "val", "total_seconds", "relative_error", "p_value")
                         else int(v) if isinstance(v, float) and v.is_integer() else v for v in summary[column]]
    return table.to_string(index=False)


def _cut_short(job: Path, rows: list[dict]) -> list[dict]:
    """An error row for a job a stop cut short after some of its runs (or splits) finished: its
    ``ok`` rows alone read as a whole job (a splits=all job with 1 of its 10 splits, "ok"); none
    for a job with every run, or none."""
    from omegaconf import OmegaConf

    from ..job.gp_job import planned_runs

    done = {(str(r.get("run", "")), str(r.get("split_index", ""))) for r in rows if r.get("status") == "ok"}
    if not done:
        return []
    try:   # the runs the job planned: a deterministic GP kernel's one run, whatever runs= says (unless repeat_deterministic)
        planned = planned_runs(OmegaConf.load(job / ".hydra" / "config.yaml"))
    except Exception:  # noqa: BLE001 - a summary never fails on a job's config file
        return []
    splits = max((int(float(r["split_count"])) for r in rows if str(r.get("split_count", "")).strip() not in ("", "nan")), default=1)
    expected = planned * splits
    if len(done) >= expected:
        return []
    what = "runs" if splits == 1 else "runs and splits" if planned > 1 else "splits"
    ok = next(r for r in rows if r.get("status") == "ok")
    return [{"job": job.name, "swept": ok.get("swept", ""), "dataset": ok.get("dataset", ""), "method": ok.get("method", ""), "status": "error",
             "overrides": ok.get("overrides", ""),
             "error": f"stopped after {len(done)} of its {expected} {what}; its rows are kept, and resume=true runs the rest"}]


def best_trial(sweep_dir: Path, swept: dict[str, str], since: Optional[float] = None) -> Optional[str]:
    """The best trial of a search (Hydra's Optuna sweeper writes ``optimization_results.yaml``):
    its parameters as the user spells them, its value, and the jobs that ran them; ``None`` for a
    plain sweep, a search of no parameter, and a file older than ``since`` (this sweep's start: an
    earlier search's in the same folder, whose best trial is no job of this sweep)."""
    from omegaconf import OmegaConf

    from ..compose import shown_override

    path = sweep_dir / "optimization_results.yaml"
    try:
        if not path.is_file() or (since is not None and path.stat().st_mtime < since):
            return None
    except OSError:
        return None
    try:
        found = OmegaConf.to_container(OmegaConf.load(path))
    except Exception:  # noqa: BLE001 - a summary never fails on the sweeper's file
        return None
    params = found.get("best_params") if isinstance(found, dict) else None
    if not isinstance(params, dict) or not params:
        return None
    shown = [shown_override(f"{k}={v}") for k, v in params.items()]
    jobs = [job for job, values in swept.items() if set(shown) <= set(values.split())]
    value = found.get("best_value")
    value = f"{value:.4f}" if isinstance(value, float) else str(value)
    return f"best trial: {' '.join(shown)} (validation metric {value}" + (f"; job {', '.join(jobs)}" if jobs else "") + ")"


class SweepSummary(Callback):
    """``on_multirun_end``: write ``summary.csv`` in the sweep dir and print it. Only this sweep's
    jobs: a folder that held another sweep (``resume=true`` into it, or the same folder given
    again) keeps that sweep's other job folders, which ``on_multirun_start`` notes as they are."""

    def __init__(self, command: str = "run") -> None:
        self.command = command   # gnngp verify's jobs write verify.csv (collect_checks), gnngp run's results.csv (collect)
        self._before: Optional[dict[str, Optional[int]]] = None
        self._searching, self._started = True, None   # on_multirun_start's: a search, and when it started (best_trial)
        self._id: Optional[str] = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global RUNNING
        sweep_dir = Path(config.hydra.sweep.dir)
        self._before = {job.name: _stamp(job) for job in job_folders(sweep_dir)} if sweep_dir.is_dir() else {}
        self._searching = not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper")
        self._started = time.time() - 1.0   # (a file system's coarse mtime)
        self._id = os.environ[SWEEP_ENV] = uuid.uuid4().hex   # its jobs' notes of a refusal name it (a process id may be reused)
        RUNNING = (self, config)

    def on_multirun_end(self, config: DictConfig, stopped: bool = False, **kwargs: Any) -> None:
        """``stopped``: the sweep was stopped part way (:func:`summarise_stopped`): a resumed
        sweep's jobs not reached yet are its own (their folders hold what resume keeps), and a
        stop before any job of it finished a run leaves an earlier ``summary.csv`` as it was."""
        global RUNNING
        RUNNING = None
        if os.environ.get(SWEEP_ENV) == self._id:   # its jobs have run: a run after it in this process is none of its
            os.environ.pop(SWEEP_ENV, None)
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        from ..results.rowfile import to_frame, to_text   # here, not at the top: Hydra imports this callback for every command

        ours, others = [], []
        resumed = stopped and bool(config.get("resume", False))
        for job in job_folders(sweep_dir):   # a folder this sweep launched was written anew (or is new)
            if resumed or self._before is None or self._before.get(job.name, _UNSEEN) != _stamp(job):
                ours.append(job)
            else:
                others.append(job.name)
        written = "verify.csv" if self.command == "verify" else config.get("results_file", "results.csv")   # what each job writes
        if stopped and not any((job / written).is_file() for job in ours):
            log.info("summary: no job of the stopped sweep had written a result; %s left as it was", sweep_dir / "summary.csv")
            return
        if others:
            log.info("summary: %d job folder%s of an earlier sweep in %s (job %s) left out: this sweep did not run %s",
                     len(others), "s" if len(others) > 1 else "", sweep_dir, ", ".join(others[:10]) + (", ..." if len(others) > 10 else ""),
                     "them" if len(others) > 1 else "it")
        if self.command == "verify":
            header, rows = collect_checks(sweep_dir, swept_keys(config), jobs=ours)
        else:
            fresh = not config.get("resume", False) and self._started is not None   # every run anew: rows from before are another sweep's
            header, rows = collect(sweep_dir, written, swept_keys(config), jobs=ours, since=self._started + 1.0 if fresh else None,
                                   sweep_id=self._id)
        if stopped:   # a job the stop reached before its first run finished: said so, not "did not finish"
            rows = [{**row, "error": "stopped before a run of it finished; resume=true runs it"}
                    if row.get("status") == "error" and str(row.get("error", "")).startswith("no results (") else row for row in rows]
            rows += [row for job in ours for row in _cut_short(job, [r for r in rows if r.get("job") == job.name])]
        path = sweep_dir / "summary.csv"
        summary = to_frame(header, rows)
        failed = int((summary["status"] != "ok").sum()) if len(summary) else 0
        global LAST_SWEEP
        jobs = summary.groupby("job")["status"].apply(lambda s: bool((s != "ok").any())) if len(summary) else []
        LAST_SWEEP = SweepOutcome(path, int(len(jobs)), int(sum(jobs)))   # before the write: a summary that fails fails the command
        try:
            atomic_write(path, lambda f: f.write(to_text(header, rows)))   # a reader never sees half a summary
        except OSError as err:   # Hydra turns a callback's exception into a warning: the exit status would say nothing
            LAST_SWEEP.unwritten = (f"the sweep summary {path} could not be written ({err.strerror or err}); each job's "
                                    f"{written} holds its rows, and gnngp report {sweep_dir} reads them")
            path = Path(f"each job's {written} in {sweep_dir}")
        log.info("sweep summary (%d row%s, %d failed): %s\n%s", len(summary), "" if len(summary) == 1 else "s", failed, path,
                 console_table(summary) if len(summary) else "")
        best = best_trial(sweep_dir, {str(row["job"]): str(row.get("swept") or "") for row in rows}, self._started) if self._searching else None
        if best:
            log.info("search summary: %s", best)
        LAST_SWEEP.path = path
