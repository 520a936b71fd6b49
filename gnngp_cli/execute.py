"""A job as ``gnngp run`` runs it: the method on its backend, every fixed split with
``splits=all``, and its rows written (and error rows for what failed)."""
from __future__ import annotations

import copy
import logging
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
from omegaconf import DictConfig

from .backends import LocalBackend, backend_for
from .config import check_results_file, needs_validation, validate
from .errors import ConfigError, GnngpError, ResourceError
from .invariants import checked_rows
from .job.gnn import run_gnn
from .job.gp import run_gp
from .job.loading import LoadedGraph, load_graph
from .job.rows import console_row, console_summary, error_row
from .results import ResultsNotWritten, append_rows, summary_line
from .resume import job_overrides, resume_decision, set_aside

log = logging.getLogger("gnngp")


def run_once(cfg: Any, graph: Optional[LoadedGraph] = None) -> tuple[list[dict], Optional[int]]:
    """One job on one split: its rows, and how many fixed splits its dataset has."""
    if cfg.method == "gnn":
        if cfg.compute.backend != "local":
            raise ConfigError(f"compute={cfg.compute.backend} runs GP kernels; GNN baselines run with compute=local")
        graph = graph or load_graph(cfg)
        return run_gnn(cfg, graph), graph.info().num_splits
    backend = LocalBackend(cfg, graph) if graph is not None else backend_for(cfg)
    rows = run_gp(cfg, backend)
    return rows, backend.info.num_splits


def run_job(cfg: Any, graph: Optional[LoadedGraph] = None) -> list[dict]:
    """One job: a GNN if ``gnn`` is set, else a GP kernel on the backend of ``compute``; on
    every fixed split with ``splits=all`` (rows then carry ``split_index``; the console summary
    gives the mean and std over them). ``graph``: data already loaded (``compute=local``)."""
    validate(cfg)
    rows, count = run_once(cfg, graph)
    if cfg.get("splits") != "all":
        return rows
    if count is None:
        raise ConfigError(f"splits=all needs a dataset with fixed splits; {cfg.dataset.name} has none: use runs=N or dataset.split_seed")
    by_split = {cfg.dataset.split_index: rows}
    for index in range(count):
        if index not in by_split:
            split_cfg = copy.deepcopy(cfg)
            split_cfg.dataset.split_index = index
            by_split[index] = run_once(split_cfg)[0]
    out = []
    for index in sorted(by_split):
        for row in by_split[index]:
            row["split_index"] = index
        out += by_split[index]
    return out


def execute(cfg: DictConfig, out_dir: Path, multirun: bool, overrides: Sequence[str] = ()) -> list[dict]:
    """Run a job and write its rows to ``<out_dir>/results.csv``. A :class:`GnngpError`
    becomes one console line and an error row; in a single run the process then exits 1.
    Every row records the job's overrides; a row whose metric is not a number is an error row
    (:mod:`~gnngp_cli.invariants`)."""
    try:
        check_results_file(cfg.results_file)
        results = out_dir / cfg.results_file
    except ConfigError:   # validate() reports it; the error row stays in the run dir
        results = out_dir / "results.csv"
    recorded = job_overrides(overrides)
    if cfg.get("resume", False) and multirun:
        skip, why = resume_decision(results, overrides)
        if skip:
            log.info("resume: %s already has results; skipping this job (%s)", results, why)
            return []
        if results.is_file():  # an earlier attempt: keep its rows aside, out of the summary
            log.info("resume: %s: %s; running it again (earlier rows kept in %s)", results, why, set_aside(results).name)

    def write(rows: list[dict]) -> None:
        try:
            append_rows(results, [{**row, "overrides": recorded} for row in rows], fallback_dir=out_dir)
        except ResultsNotWritten as err:
            print(f"gnngp: error: {err}", file=sys.stderr)
            if not multirun:
                raise SystemExit(1) from None

    try:
        rows = checked_rows(run_job(cfg), validation=needs_validation(cfg))
    except (GnngpError, MemoryError, torch.cuda.OutOfMemoryError) as err:
        if not isinstance(err, GnngpError):
            err = ResourceError(f"out of memory ({err}); use a low-rank kernel (e.g. kernel=gcngp_x), fewer landmarks or dtype=float32")
        row = error_row(cfg, err)
        write([row])
        print(f"gnngp: error: {err}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
        return [row]
    except Exception as err:  # a bug, not bad input: keep the traceback, and in a sweep the other jobs
        row = error_row(cfg, err)
        write([row])
        if not multirun:
            raise
        log.exception("job failed")
        return [row]
    write(rows)
    for row in rows:
        log.info(summary_line(console_row(row)))
    over_runs = console_summary(rows)
    if over_runs:
        log.info(over_runs)
    log.info("results: %s", results)
    failed = [row for row in rows if row.get("status") != "ok"]
    if failed:
        print(f"gnngp: error: {failed[0]['error'].split(': ', 1)[-1]}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
    return rows
