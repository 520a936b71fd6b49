"""Hydra's own search and tracking: the extras they need, and the loggers as Hydra callbacks.

``hparams_search=<preset>`` (``gnngp_cli/conf/hparams_search``) runs Hydra's Optuna sweeper; a
job's value for it is the mean validation metric (:func:`gnngp_cli.cli.execute.objective`).
``logger=mlflow`` and ``logger=tensorboard`` (``gnngp_cli/conf/logger``) add a callback of this
module to ``hydra.callbacks``; when a job ends (``on_job_end``: a run, or each job of a sweep or
a search) it records, read back from the job's results file:

- the job's config, flattened (``dataset.name``, ``kernel.layers``...): MLflow params; for
  TensorBoard its overrides as hparams and the whole config as text;
- each row's numbers (``val``, ``test``, ``train``, ``kernel_seconds``, ``inference_seconds``,
  ``fit_seconds``, ``total_seconds``, ``peak_rss_mb``, ``landmarks``...), the step being the row
  (a run or a split), and ``val_mean``, ``test_mean`` over the job's good rows;
- the results CSV: an MLflow artifact (beside the job's ``config.yaml`` and ``overrides.yaml``), a
  TensorBoard text; the job's status (``ok``, ``error`` for an error row, ``failed`` for a job
  that raised) and first error as tags (MLflow) or text (TensorBoard).

MLflow, TensorBoard and Optuna are imported only once a command uses them, so that ``gnngp run``
starts as fast as without them. A missing extra, an unknown preset or a tracking store that
cannot be opened fails the command in one line before any job runs (:func:`check_extras`, and
the callbacks' constructors); a job that cannot be recorded later is a warning, never a lost sweep.
"""
from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError, GnngpError

log = logging.getLogger("gnngp")

# What each choice needs: (the extra, the modules it installs). An hparams_search preset needs the
# Optuna sweeper whatever its name.
NEEDS = {
    "hparams_search": ("search", ("optuna", "hydra_plugins.hydra_optuna_sweeper")),
    "logger=mlflow": ("tracking", ("mlflow",)),
    "logger=tensorboard": ("tracking", ("tensorboard",)),
}
GROUPS = ("hparams_search", "logger")
MULTIRUN = frozenset({"-m", "--multirun"})
SHOWN = frozenset({"--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help", "--resolve", "-p", "--package"})   # nothing runs
# Columns that number a row rather than measure it: the step of a metric, not a metric.
NOT_METRICS = frozenset({"run", "seed", "split_index", "split_count"})
MLFLOW_PARAM_CHARS = 6000   # MLflow's limit on a param's value
DEFAULT_MLFLOW = "outputs/mlruns"           # logger.tracking_uri=null
DEFAULT_TENSORBOARD = "outputs/tensorboard"   # logger.save_dir=null


class TrackingError(GnngpError):
    """A logger that cannot record: a missing extra, or a store that cannot be opened."""


def _missing(modules: Sequence[str]) -> list[str]:
    def absent(name: str) -> bool:
        try:
            return find_spec(name) is None
        except ImportError:   # its parent package is absent
            return True
    return [name for name in modules if absent(name)]


def require(what: str, key: str) -> None:
    """Raise a one-line :class:`TrackingError` naming the extra to install when a package that
    ``key`` (a key of :data:`NEEDS`) needs is not installed; ``what`` is the choice as typed."""
    extra, modules = NEEDS[key]
    missing = _missing(modules)
    if missing:
        raise TrackingError(f"{what} needs the {extra} extra ({', '.join(missing)} is not installed): pip install -e \".[{extra}]\"")


def group_options(group: str) -> list[str]:
    """The presets of ``hparams_search`` or ``logger``: the YAML files of its config folder."""
    from ..compose import config_dir

    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


def check_extras(overrides: Sequence[str]) -> None:
    """Before Hydra composes anything: every ``hparams_search=`` and ``logger=`` choice in the
    overrides is a preset (else one line with the closest and the valid ones), and its extra is
    installed (else one line naming ``pip install -e ".[<extra>]"``)."""
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS or value in ("null", ""):
            continue
        valid = group_options(key)
        if value not in valid:
            near = difflib.get_close_matches(value, valid, n=1, cutoff=0.5)
            hint = f"did you mean {key}={near[0]}? " if near else ""
            raise ConfigError(f"{key}={value} is not an option; {hint}valid: {', '.join(valid)}")
        require(f"{key}={value}", key if key == "hparams_search" else f"{key}={value}")
        if key == "hparams_search" and not SHOWN.intersection(overrides) and not MULTIRUN.intersection(overrides):
            raise ConfigError(f"hparams_search={value} runs a search of many jobs: add -m (gnngp run -m hparams_search={value} ...)")


# --------------------------------------------------------------------------------------------
# A job, as the loggers record it


@dataclass
class JobRecord:
    """What a logger records of one job (:func:`job_record`)."""

    name: str                           # the last folders of its path: <day>/<time> (a run), <day>/<time>/<job> (a sweep)
    output_dir: Path
    params: dict[str, str]              # the config, flattened: dataset.name -> cora
    overrides: list[str]                # as typed, and as a sweeper chose them (depth=3); the method as Hydra has it (model=)
    hparams: dict[str, Any]             # the overrides' keys with their composed values (TensorBoard's hparams)
    rows: list[dict[str, float]]        # each row's numbers
    status: str                         # ok, error (an error row) or failed (the job raised)
    error: str = ""
    results: Optional[Path] = None      # the results CSV, when the job wrote one
    tags: dict[str, str] = field(default_factory=dict)

    def means(self) -> dict[str, float]:
        """``val_mean`` and ``test_mean`` over the rows that have them."""
        out = {}
        for key in ("val", "test"):
            values = [row[key] for row in self.rows if key in row]
            if values:
                out[f"{key}_mean"] = sum(values) / len(values)
        return out


def flatten(node: Any, prefix: str = "") -> dict[str, str]:
    """A config as ``{"dataset.name": "cora", "nugget.num": "101", ...}``: strings as they are,
    other values as JSON (``null``, ``true``, ``[1, 2]``)."""
    out: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    else:
        out[prefix] = node if isinstance(node, str) else json.dumps(node)
    return out


def _job_config(config: DictConfig) -> dict:
    """The job's config without Hydra's own node, resolved where it can be."""
    keys = [k for k in config if k != "hydra"]
    try:
        return OmegaConf.to_container(OmegaConf.masked_copy(config, keys), resolve=True)
    except Exception:  # noqa: BLE001 - an interpolation that only resolves in a job: recorded as written
        return OmegaConf.to_container(OmegaConf.masked_copy(config, keys), resolve=False)


def row_numbers(row: dict[str, str]) -> dict[str, float]:
    """The measurements of a results row: every column that holds a finite number (the metrics,
    seconds, memory, the landmarks used), except those that number the row (run, seed, split)."""
    out = {}
    for key, value in row.items():
        if key in NOT_METRICS or value in (None, ""):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[key] = number
    return out


def job_record(config: DictConfig, job_return: Any) -> JobRecord:
    """The record of a job that ended: its config and overrides, and its rows read back from its
    results file (:mod:`gnngp_cli.results.rowfile`)."""
    from hydra.types import RunMode

    from ..compose import shown_override
    from ..results.resume import job_overrides, latest_job_rows
    from ..results.rowfile import NotAResultsFile, read_rows

    hydra = config.hydra
    output_dir = Path(hydra.runtime.output_dir)
    if hydra.mode == RunMode.MULTIRUN:   # <day>/<time>/<job>, as under multirun/
        sweep = Path(hydra.sweep.dir).absolute()
        name = f"{sweep.parent.name}/{sweep.name}/{os.path.relpath(output_dir.absolute(), sweep)}"
    else:
        name = f"{output_dir.absolute().parent.name}/{output_dir.name}"
    params = flatten(_job_config(config))
    overrides = list(job_return.overrides or hydra.overrides.task)
    hparams: dict[str, Any] = {}
    for override in json.loads(job_overrides(overrides)):   # the settings: not logger= or hparams_search= themselves
        key, _, value = override.lstrip("+~").partition("=")
        chosen = OmegaConf.select(config, key, default=None, throw_on_missing=False)
        shown = shown_override(f"{key}={value}").partition("=")[0]   # the method as the user spells it: kernel, gnn
        hparams[shown] = chosen if isinstance(chosen, (int, float, str, bool)) else value
    results = None
    for file_name in dict.fromkeys((str(config.get("results_file", "results.csv")), "results.csv")):
        if (output_dir / file_name).is_file():
            results = output_dir / file_name
            break
    rows: list[dict[str, str]] = []
    if results is not None:
        try:
            rows, _ = latest_job_rows(read_rows(results).rows)   # not an earlier job's of other overrides in the same folder
        except (OSError, NotAResultsFile) as err:
            log.warning("logger: could not read %s: %s", results, err)
    status, error = "ok", ""
    failed = getattr(job_return.status, "name", "") == "FAILED"
    if failed:   # the exception the job raised (JobReturn.return_value would raise it again)
        status, error = "failed", f"{type(job_return._return_value).__name__}: {job_return._return_value}"
    elif any(row.get("status") != "ok" for row in rows) or not rows:
        status = "error"
        error = next((row.get("error", "") for row in rows if row.get("status") != "ok"), "") or "the job wrote no results"
    first = rows[0] if rows else {}
    tags = {"status": status, "overrides": " ".join(shown_override(o) for o in overrides), "output_dir": str(output_dir),
            "dataset": first.get("dataset", ""), "method": first.get("method", "")}
    if hydra.mode == RunMode.MULTIRUN:
        tags.update(sweep_dir=str(hydra.sweep.dir), job=str(hydra.job.num))
    if error:
        tags["error"] = error[:5000]
    return JobRecord(name, output_dir, params, overrides, hparams, [row_numbers(row) for row in rows], status, error, results,
                     {k: v for k, v in tags.items() if v})


def _row_count(config: DictConfig) -> Optional[int]:
    """The rows of the job's results file now (``None``: none can be read): a job that adds none
    (a resumed job whose runs were done) has nothing to record."""
    from ..results.rowfile import NotAResultsFile, read_rows

    path = Path(config.hydra.runtime.output_dir) / str(config.get("results_file", "results.csv"))
    try:
        return len(read_rows(path).rows) if path.is_file() else 0
    except (OSError, NotAResultsFile):
        return None


def _experiment_name(experiment: Any, kind: str, folder: bool) -> None:
    """``logger.experiment``: a name, and for TensorBoard one folder of ``save_dir`` (``../x`` wrote
    outside it; an empty name was MLflow's "'NoneType' object has no attribute 'experiment_id'")."""
    name = "" if experiment is None else str(experiment)
    if not name.strip():
        raise TrackingError(f"logger.experiment is empty; give logger={kind} an experiment name (logger.experiment=gnngp, its default)")
    if folder and (Path(name).name != name or name in (".", "..")):
        raise TrackingError(f"logger.experiment={name} is a folder of logger.save_dir, so one name without '/' or '..' "
                            "(e.g. logger.experiment=cora_search)")
    most = 255 if folder else 500   # a folder name's bytes (TensorBoard); MLflow's experiment name (its 'name' limit)
    size = len(name.encode()) if folder else len(name)
    if size > most:   # MLflow said "'NoneType' object has no attribute 'experiment_id'", TensorBoard blamed logger.save_dir
        raise TrackingError(f"logger.experiment is {size:,} {'bytes' if folder else 'characters'} long ({name[:20]}...); "
                            f"{'a folder name' if folder else 'an MLflow experiment name'} holds at most {most}: give a shorter one")


def _folder(path: str, key: str) -> Path:
    """The folder of setting ``key``: ``~`` expanded, relative to the working directory (as
    ``hydra.run.dir``); an empty part (``/scratch//mlruns``, left by an unset shell variable) refused."""
    if "//" in path:
        raise TrackingError(f"{key}={path} has an empty part ('//'), as an unset shell variable leaves (e.g. $USER); give the folder in full")
    return Path(path).expanduser().absolute()


class Tracking(Callback):
    """A logger: ``on_job_end`` records the job (:class:`JobRecord`) with :meth:`record`. A
    failure to record is a warning: the job's results are in its folder whatever happens."""

    kind = ""

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._rows_before = _row_count(config)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        before = getattr(self, "_rows_before", None)
        if before and _row_count(config) == before and getattr(job_return.status, "name", "") != "FAILED":
            log.info("logger=%s: %s wrote no row (resume=true found its runs done): recorded when it ran, not again", self.kind,
                     config.hydra.runtime.output_dir)
            return
        try:
            record = job_record(config, job_return)
            self.record(record)
        except Exception as err:  # noqa: BLE001 - a tracking store gone away must not end a sweep
            log.warning("logger=%s could not record the job in %s: %s: %s", self.kind,
                        config.hydra.runtime.output_dir, type(err).__name__, str(err).splitlines()[0] if str(err) else "")
            return
        log.info("logger=%s: recorded %s (%s) in %s", self.kind, record.name, record.status, self.where())

    def record(self, record: JobRecord) -> None:
        raise NotImplementedError

    def where(self) -> str:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------
# MLflow


HTTP_SETTINGS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}   # MLflow's defaults: 7 retries (backoff to minutes), 120 s


def _unreachable(uri: str, timeout: float = 5.0) -> str:
    """Why a tracking server's host and port take no connection ('' when they do)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as err:
        return str(err)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return ""
    except OSError as err:
        return f"{parts.hostname}:{port} takes no connection ({err.strerror or err})"


def mlflow_store(tracking_uri: str) -> tuple[str, Optional[str]]:
    """``(tracking URI, artifact location)`` of ``logger.tracking_uri``: a URI (``http://host:5000``,
    ``sqlite:///path.db``, ``file:...``) as given, with MLflow's own artifact location; a folder as
    ``sqlite:///<folder>/mlflow.db``, with the artifacts in ``<folder>/artifacts`` (MLflow 3 keeps
    its plain-file store for old folders only)."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", tracking_uri):
        return tracking_uri, None
    folder = _folder(tracking_uri, "logger.tracking_uri")
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


class MLflowTracking(Tracking):
    """``logger=mlflow``: each job an MLflow run of ``experiment`` in the store at
    ``tracking_uri`` (:func:`mlflow_store`); its params, metrics, tags and artifacts as the module
    says. The store and experiment are opened here, so a wrong URI fails before any job."""

    kind = "mlflow"

    def __init__(self, tracking_uri: Optional[str] = None, experiment: str = "gnngp") -> None:
        require("logger=mlflow", "logger=mlflow")
        _experiment_name(experiment, "mlflow", folder=False)
        tracking_uri = tracking_uri or DEFAULT_MLFLOW
        self.tracking_uri, self.artifact_location = mlflow_store(str(tracking_uri))
        self.experiment = str(experiment)
        if self.tracking_uri.startswith("sqlite:"):
            missing = _missing(("sqlalchemy", "alembic"))
            if missing:
                raise TrackingError(f"logger=mlflow keeps its runs in SQLite ({self.tracking_uri}), which needs {', '.join(missing)}: "
                                    "pip install -e \".[tracking]\"")
        if self.tracking_uri.startswith(("http://", "https://")):
            unreachable = _unreachable(self.tracking_uri)
            if unreachable:   # MLflow retried a refused connection for minutes, silent, before its error
                raise TrackingError(f"logger=mlflow cannot reach logger.tracking_uri={tracking_uri}: {unreachable}; start the server "
                                    "(mlflow server ...) or give a folder (logger.tracking_uri=mlruns)")
            for name, value in HTTP_SETTINGS.items():   # a server gone during a sweep: a warning per job in seconds, not minutes
                os.environ.setdefault(name, value)
        try:
            if self.tracking_uri.startswith("sqlite:///"):
                Path(self.tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
            self.experiment_id = self._experiment_id()
        except Exception as err:  # noqa: BLE001 - MLflow's errors, told in one line
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise TrackingError(f"logger=mlflow cannot open logger.tracking_uri={tracking_uri} ({self.tracking_uri}): {first[:300]}") from None

    def _client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.tracking_uri)

    def _experiment_id(self) -> str:
        from mlflow.exceptions import MlflowException

        client = self._client()
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        try:
            return client.create_experiment(self.experiment, artifact_location=self.artifact_location)
        except MlflowException:   # created meanwhile by another job of the sweep
            return client.get_experiment_by_name(self.experiment).experiment_id

    def where(self) -> str:
        return f"{self.tracking_uri} (experiment {self.experiment})"

    def record(self, record: JobRecord) -> None:
        from mlflow.entities import Metric, Param, RunTag

        client = self._client()
        run = client.create_run(self.experiment_id, run_name=record.name,
                                tags={f"gnngp.{k}": v for k, v in record.tags.items()})
        run_id = run.info.run_id
        try:
            now = int(time.time() * 1000)
            params = [Param(k, v[:MLFLOW_PARAM_CHARS]) for k, v in record.params.items()]
            metrics = [Metric(k, v, now, step) for step, row in enumerate(record.rows) for k, v in row.items()]
            metrics += [Metric(k, v, now, 0) for k, v in record.means().items()]
            for start in range(0, len(params), 100):   # MLflow's batch limits: 100 params, 1000 metrics
                client.log_batch(run_id, params=params[start:start + 100])
            for start in range(0, len(metrics), 1000):
                client.log_batch(run_id, metrics=metrics[start:start + 1000])
            client.log_batch(run_id, tags=[RunTag("mlflow.note.content", f"gnngp job {record.name}: {record.status}")])
            for path in (record.results, record.output_dir / ".hydra" / "config.yaml", record.output_dir / ".hydra" / "overrides.yaml"):
                if path is not None and path.is_file():
                    client.log_artifact(run_id, str(path))
        except BaseException:
            client.set_terminated(run_id, "FAILED")
            raise
        client.set_terminated(run_id, "FINISHED" if record.status == "ok" else "FAILED")


# --------------------------------------------------------------------------------------------
# TensorBoard


class TensorBoardTracking(Tracking):
    """``logger=tensorboard``: each job a TensorBoard run in ``<save_dir>/<experiment>/<job name>``:
    its rows' numbers as scalars, its overrides as hparams (the HParams dashboard compares the
    jobs of a sweep), its config, overrides, status and results CSV as text."""

    kind = "tensorboard"

    def __init__(self, save_dir: Optional[str] = None, experiment: str = "gnngp") -> None:
        require("logger=tensorboard", "logger=tensorboard")
        save_dir = save_dir or DEFAULT_TENSORBOARD
        _experiment_name(experiment, "tensorboard", folder=True)
        self.save_dir = _folder(str(save_dir), "logger.save_dir") / str(experiment)
        try:
            self.save_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise TrackingError(f"logger=tensorboard cannot write logger.save_dir={save_dir}: {err.strerror or err}") from None

    def where(self) -> str:
        return str(self.save_dir)

    def record(self, record: JobRecord) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        folder, again = self.save_dir / record.name, 1
        while folder.exists() and any(folder.iterdir()):   # a rerun into one job folder, or another with its name: a run of its own,
            again += 1                                      # never two jobs' scalars in one run at the same steps
            folder = self.save_dir / f"{record.name}-{again}"
        if again > 1:
            log.info("logger=tensorboard: %s holds a run already (a rerun, or another job folder of that name); this one is %s",
                     self.save_dir / record.name, folder.name)
        writer = SummaryWriter(log_dir=str(folder))
        try:
            for step, row in enumerate(record.rows):
                for key, value in row.items():
                    writer.add_scalar(key, value, step)
            means = record.means()
            for key, value in means.items():
                writer.add_scalar(key, value, 0)
            config = "\n".join(f"    {k}: {v}" for k, v in record.params.items())
            writer.add_text("config", f"overrides: `{record.tags.get('overrides', '')}`\n\n{config}")
            writer.add_text("status", record.status + (f": {record.error}" if record.error else ""))
            if record.results is not None:
                writer.add_text("results.csv", "\n".join("    " + line for line in record.results.read_text().splitlines()))
            for summary in hparams(record.hparams, means):
                writer.file_writer.add_summary(summary)
        finally:
            writer.close()
