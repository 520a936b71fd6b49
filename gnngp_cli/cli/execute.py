"""A job as ``gnngp run`` runs it: the method on its backend, every fixed split with
``splits=all``, and its rows written as its runs finish (and error rows for what failed)."""
from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Optional, Sequence

import torch
from omegaconf import DictConfig

from ..backends import LocalBackend, backend_for
from ..config import check_results_file, needs_validation, parse
from ..data.custom import files_digest
from ..data.files import held_for_job
from ..errors import ConfigError, GnngpError, ResourceError
from ..readers import active_run, unread_options
from ..results.invariants import checked_rows
from ..job.active_job import run_active
from ..job.gnn_job import run_gnn
from ..job.gp_job import planned_runs, run_gp
from ..job.loading import LoadedGraph, load_graph
from ..results.rows import console_row, console_summary, error_row
from ..results.writing import ResultsNotWritten, append_rows, read_only, summary_line
from ..results.resume import Resume, job_overrides, resume_state, set_aside
from ..results.rowfile import refused_job
from ..schema import RunConfig, revised
from ..stops import signals_held, stop_signal, stopped_by_signals, telling_kept

OnRun = Callable[[list[dict]], None]   # a finished run's rows (a row per budget of an active run, per uncertainty of a GNN's)

log = logging.getLogger("gnngp")


def out_of_memory(err: RuntimeError) -> bool:
    """A failed allocation that torch reports as ``RuntimeError`` (its CPU allocator: "can't
    allocate memory"), not a bug."""
    text = str(err)
    return "can't allocate memory" in text or "DefaultCPUAllocator" in text


def memory_advice(cfg: Any) -> str:
    """What to change after running out of memory, for this job: a low-rank kernel only to a job
    whose kernel is exact; fewer landmarks (or row blocks on Dask) to one already low rank; a
    smaller network or mini-batches to a GNN."""
    if cfg.method == "gnn":
        options = ["fewer hidden units (gnn.hidden)", "mini-batches (gnn.batch_size)"]
    elif not cfg.kernel.low_rank:
        options = [f"the low-rank kernel (kernel={cfg.kernel.name}_x)"]
    else:
        options = ["fewer landmarks (a smaller landmarks.count, or a larger landmarks.fraction)"]
        options += ["row blocks on a Dask cluster (compute=dask)"] if cfg.compute.backend == "local" else []
    options += ["dtype=float32"] if cfg.get("dtype") == "float64" else []
    told = options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"
    return ("the kernel is low rank already: use " if cfg.method != "gnn" and cfg.kernel.low_rank else "use ") + told


class TrialFailed(GnngpError):
    """A job of a search (``hparams_search=...``) with no validation metric to give its sweeper."""


def _run_dir_given() -> bool:
    """Whether the command gave ``hydra.run.dir`` (its folder named, not a new dated one)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return any(str(o).startswith("hydra.run.dir=") for o in HydraConfig.get().overrides.hydra)
    except Exception:  # noqa: BLE001 - no Hydra run (the Python API): not given
        return False


def objective(rows: Sequence[dict], searched: bool = False) -> float:
    """What a sweeper maximises (``hparams_search=optuna``): the job's validation metric, the mean
    over its runs and splits. A job with no row, an error row or a row without a validation number
    has none: NaN, or with ``searched`` (a sweeper that optimises the value) :class:`TrialFailed`,
    which Optuna's sweeper records as a failed trial and goes on (NaN it cannot take: optuna 2.10
    refuses the value, and hydra-optuna-sweeper 1.3 then fails telling it as a failed trial, which
    ends the search). The job's rows, error row included, are written before; the sweep's summary
    counts the job as failed."""
    values = [row.get("val") for row in rows]
    if rows and all(row.get("status") == "ok" for row in rows) and all(isinstance(v, (int, float)) for v in values):
        value = float(sum(values) / len(values))
        if value == value:
            return value
    if searched:
        error = next((str(row.get("error", "")) for row in rows if row.get("status") != "ok"), "")
        raise TrialFailed(f"no validation metric ({error or 'no row with a val number'}); a failed trial")
    return float("nan")


def run_once(spec: RunConfig, graph: Optional[LoadedGraph] = None, on_run: Optional[OnRun] = None,
             skip: Collection[int] = ()) -> tuple[list[dict], Optional[int]]:
    """One job on one split (the runs in ``skip`` left out): its rows, and how many fixed
    splits its dataset has."""
    if spec.method == "gnn":
        if spec.compute.backend != "local":
            raise ConfigError(f"compute={spec.compute.backend} runs GP kernels; GNN baselines run with compute=local")
        graph = graph or load_graph(spec)
        return run_gnn(spec, graph, on_run, skip), graph.info().num_splits
    backend = LocalBackend(spec, graph) if graph is not None else backend_for(spec)
    rows = (run_active if spec.active.name != "none" else run_gp)(spec, backend, on_run, skip)
    return rows, backend.info.num_splits


def run_job(cfg: Any, graph: Optional[LoadedGraph] = None, on_run: Optional[OnRun] = None, resume: Optional[Resume] = None,
            unread: str = "refuse") -> list[dict]:
    """One job: a GNN if ``gnn`` is set, else a GP kernel on the backend of ``compute``; on
    every fixed split with ``splits=all`` (rows then carry ``split_index`` and ``split_count``;
    the console summary gives the mean and std over them). ``graph``: data already loaded
    (``compute=local``). Each run's rows go to ``on_run`` together as the run finishes; the runs ``resume``
    holds are not run again. ``cfg``, the composed config, is parsed here into the job's spec
    (:func:`~gnngp_cli.config.parse`), once: all below reads the spec; ``unread="reset"`` (a job
    of a sweep) runs an option this job would not read at its default, with a warning."""
    spec = parse(cfg, unread=unread)
    every = spec.splits == "all"
    done = resume.done if resume is not None else set()
    planned = planned_runs(spec)

    def skip(split: Optional[int]) -> set[int]:
        return {r for r in range(planned) if (split, r) in done}

    first = int(spec.dataset.split_index) if every else None
    count = resume.split_count if resume is not None else None
    rows: list[dict] = []
    if len(skip(first)) < planned or (every and count is None):
        with _naming_split(first if every else None, count):
            rows, count = run_once(spec, graph, on_run, skip(first))
    if not every:
        return rows
    if count is None:
        raise ConfigError(f"splits=all needs a dataset with fixed splits; {spec.dataset.name} has none: use runs=N or dataset.split_seed")
    for index in range(count):
        if index != first and len(skip(index)) < planned:
            split_spec = revised(spec, dataset=revised(spec.dataset, split_index=index))
            with _naming_split(index, count):
                rows += run_once(split_spec, None, on_run, skip(index))[0]
    return rows


@contextmanager
def _naming_split(index: Optional[int], count: Optional[int]) -> Iterator[None]:
    """A ``splits=all`` job's error names the split it stopped at (the splits before it kept,
    ``resume=true`` reruns from it): 'the validation set is empty' said no more."""
    try:
        yield
    except GnngpError as err:
        if index is None or str(err).startswith("split "):
            raise
        try:
            named = type(err)(f"split {index}{f' of {count}' if count else ''}: {err}")
        except Exception:  # noqa: BLE001 - an error type of other arguments: raised as it is
            raise err from None
        raise named from None


def read_overrides(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """``overrides`` but those this job does not read (a sweep's ``landmarks.pool=all`` in its
    exact-kernel job, which runs at the default and says so): the settings its rows record. A
    config that cannot be checked keeps them all (its error row says why)."""
    try:
        ignored = {item.key for item in unread_options(cfg, "run")}
    except Exception:  # noqa: BLE001 - validate() reports a broken config; the overrides are then recorded as typed
        return list(overrides)
    return [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in ignored]


def execute(cfg: DictConfig, out_dir: Path, multirun: bool, overrides: Sequence[str] = ()) -> list[dict]:
    """Run a job and write its rows to ``<out_dir>/results.csv``, each as its run finishes (a
    stopped job keeps its finished runs; Ctrl-C and SIGTERM end it with one line saying how many).
    A :class:`GnngpError` becomes one console line and an error row; in a single run the
    process then exits 1. Every row records the job's overrides; a row whose metric is not a
    number is an error row (:mod:`~gnngp_cli.results.invariants`). With ``resume=true`` the runs the
    results file already holds are not run again (:mod:`~gnngp_cli.results.resume`). Returns the job's
    rows: those kept from before, then this job's (a sweeper's value, :func:`objective`)."""
    try:
        check_results_file(cfg.results_file)
        results = out_dir / cfg.results_file
    except ConfigError:   # validate() reports it; the error row stays in the run dir
        results = out_dir / "results.csv"
    if read_only(results):   # made read-only by its owner: not replaced by a writable copy
        print(f"gnngp: error: {results} is read-only (mode {results.stat().st_mode & 0o777:o}), and a run adds its rows to it; "
              f"make it writable (chmod u+w {results}) or give another {'hydra.sweep.dir' if multirun else 'hydra.run.dir'}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
        return []
    resuming = bool(cfg.get("resume", False))
    with held_for_job(results, exclusive=resuming) as free:   # jobs adding rows side by side, or one resuming alone
        if not free:
            other = (f"another gnngp job is adding rows to {results} now, and resume=true would run its runs again: wait for it to end "
                     "and run this again") if resuming else \
                    (f"a gnngp job is resuming from {results} now (it has read the runs the file holds): wait for it to end or give another "
                     f"{'hydra.sweep.dir' if multirun else 'hydra.run.dir'}")
            print(f"gnngp: error: {other}", file=sys.stderr)
            if not multirun:
                raise SystemExit(1)
            refused_job(out_dir, other)   # a sweep's summary counts the job as failed, not the other job's rows as its own
            return []
        refused_job(out_dir, None)
        return _execute_held(cfg, out_dir, results, multirun, overrides)


def _execute_held(cfg: DictConfig, out_dir: Path, results: Path, multirun: bool, overrides: Sequence[str]) -> list[dict]:
    """:func:`execute`'s job, with its results file held for it (read-only checked)."""
    if multirun:   # what this job of a sweep does not read runs at its default (parse's unread="reset"): not recorded as its setting
        overrides = read_overrides(cfg, overrides)
    recorded = job_overrides(overrides)
    every = cfg.get("splits") == "all"
    resume, kept = None, []
    if cfg.get("resume", False):
        digest = files_digest(cfg.dataset.get("path")) if str(cfg.dataset.get("name")) == "custom" else None
        resume = resume_state(results, overrides, every, [int(b) for b in cfg.active.budgets] if active_run(cfg) else None, digest)
        if resume.usable:
            missing = resume.missing(planned_runs(cfg), every)
            if missing == 0:
                log.info("resume: %s already has results; skipping this job (every run is there; %s)", results, resume.why)
                return resume.kept.frame().to_dict("records")
            kept = resume.kept.frame().to_dict("records")
            log.info("resume: %s holds %d finished run%s (%s); running the %s", results, len(resume.done), "" if len(resume.done) == 1 else "s", resume.why,
                     f"{missing} missing" if missing is not None else "missing ones")
        elif os.path.lexists(results):  # an earlier attempt: keep its rows aside, out of the summary
            (log.warning if resume.distrusted else log.info)("resume: %s: %s; running it again (earlier rows kept in %s)", results,
                                                             resume.why, set_aside(results).name)
            resume = None
        else:
            resume = None
            if not multirun and _run_dir_given():   # the stopped run's folder, given: it wrote no row before it stopped
                log.info("resume=true: %s holds no results (the run stopped before its first run finished, or never ran here); every run runs",
                         out_dir)
            elif not multirun:   # a single run's folder is new each time unless hydra.run.dir names the earlier one
                log.warning("resume=true: %s holds no results, so nothing is resumed and every run runs; to resume a run, give its "
                            "folder: hydra.run.dir=<the folder the stopped run wrote, e.g. outputs/<day>/<time>>", out_dir)

    def write(rows: list[dict]) -> None:
        try:
            append_rows(results, [{**row, "overrides": recorded} for row in rows], fallback_dir=out_dir)
        except ResultsNotWritten as err:
            print(f"gnngp: error: {err}", file=sys.stderr)
            if not multirun:
                raise SystemExit(1) from None

    finished: list[dict] = []
    validation = needs_validation(cfg)

    def on_run(rows: list[dict]) -> None:
        rows = checked_rows(rows, validation=validation)
        with signals_held():   # a run's rows on disk and counted together: a stop never splits a run, nor tells one run fewer than the file holds
            write(rows)
            finished.extend(rows)
        for row in rows:
            log.info(summary_line(console_row(row)))

    def kept_now() -> str:   # runs, not rows: an active run writes a row per budget
        runs = len({(row.get("split_index"), row.get("run")) for row in finished})
        before = f", beside the {len(resume.done)} kept from before" if kept and resume is not None else ""
        return (f"the {runs} run(s) finished in this job are in {results}{before}" if finished else
                f"no run of this job had finished{before.replace(', beside', ' (beside') + ' in ' + str(results) + ')' if kept else ''}")

    try:
        with stopped_by_signals(), telling_kept(lambda: kept_now() + "; run it again with resume=true to run only the missing ones"):
            run_job(cfg, on_run=on_run, resume=resume, unread="reset" if multirun else "refuse")   # preflight refused what no job of a sweep reads
    except KeyboardInterrupt as err:   # Ctrl-C, or SIGTERM (Stopped): the finished runs are on disk
        name, status = stop_signal(err)
        earlier = ""   # a sweep's job: the jobs numbered before it have folders (and rows) of their own, which this job's line would not say
        if multirun and out_dir.name.isdigit() and int(out_dir.name) > 0 and _jobs_in_turn():
            number = int(out_dir.name)
            earlier = (f" (job {number} of the sweep in {out_dir.parent}; job{'s 0-' if number > 1 else ' '}{number - 1} before it "
                       f"{'are' if number > 1 else 'is'} in {'their folders' if number > 1 else 'its folder'} there)")
        print(f"gnngp: error: stopped by {name}: {kept_now()}{earlier}; "
              f"run {'the sweep' if multirun else 'it'} again with resume=true and the same overrides "
              f"({f'and hydra.sweep.dir={out_dir.parent}' if multirun else f'and hydra.run.dir={out_dir}'}) to run only the missing ones",
              file=sys.stderr)
        raise SystemExit(status) from None
    except (GnngpError, MemoryError, torch.cuda.OutOfMemoryError, RuntimeError) as err:
        if isinstance(err, RuntimeError) and not isinstance(err, torch.cuda.OutOfMemoryError) and not out_of_memory(err):
            raise
        if not isinstance(err, GnngpError):
            err = ResourceError(f"out of memory ({err}); {memory_advice(cfg)}")
        row = failed_run_row(cfg, err, every, resume, finished)
        write([row])
        print(f"gnngp: error: {err}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
        return [*finished, row]
    except Exception as err:  # a bug, not bad input: keep the traceback, and in a sweep the other jobs
        row = failed_run_row(cfg, err, every, resume, finished)
        write([row])
        if not multirun:
            raise
        log.exception("job failed")
        return [*finished, row]
    rows = kept + finished
    over_runs = console_summary(rows)
    if over_runs:
        log.info(over_runs)
    log.info("results: %s", results)
    failed = [row for row in finished if row.get("status") != "ok"]
    if failed:
        print(f"gnngp: error: {failed[0]['error'].split(': ', 1)[-1]}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
    return rows


def failed_run_row(cfg: Any, err: BaseException, every: bool, resume: Optional[Resume], finished: list[dict]) -> dict:
    """The error row of a job that stopped at a run: the run it stopped at (the first that neither
    ``resume`` kept nor this job finished) and that run's seed (``seed + run``), so that a later run
    of that seed is known to replace it and no other's; with ``splits=all``, no seed (a split's)."""
    row = error_row(cfg, err)
    if every:
        row.pop("seed", None)
        return row
    done = {key[1] for key in resume.done} if resume is not None else set()
    ran = {int(float(r["run"])) for r in finished if str(r.get("run", "")).strip() not in ("", "nan")}
    try:
        run = next(r for r in range(planned_runs(cfg)) if r not in done and r not in ran)
        row.update(run=run, seed=int(cfg.seed) + run)
    except Exception:  # noqa: BLE001 - every run there (a failure after them) or a broken config: the job's seed stands
        pass
    return row


def _jobs_in_turn() -> bool:
    """Whether the sweep's launcher runs its jobs one after another (Hydra's basic launcher): then
    the jobs numbered before a stopped one are finished; joblib's run beside it, stopped too."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return "BasicLauncher" in str(HydraConfig.get().launcher.get("_target_", ""))
    except Exception:  # noqa: BLE001 - no Hydra config (a job run from Python): say nothing of other jobs
        return False
