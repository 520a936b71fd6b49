"""Refusals before any work: a Hydra callback that parses each job's composed config into its
spec (:func:`~gnngp_cli.config.parse`) before Hydra makes an output folder. A refused option is
one line ``gnngp: error: ...`` and exit 1, and nothing is written: no run folder for a single
run, no sweep folder for a sweep of the basic sweeper (every job of it is composed and checked
first, and a sweep of no job is refused). Errors found while running (a missing file, memory, a
kernel that fails) are error rows in the job's folder, as are the refusals of a trial whose values
a search sweeper chooses as it goes (``hparams_search=...``: its trials are not known before it
starts; the options it does not search are checked before it starts)."""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException


NO_OUT = "gnngp partition needs the folder to write: out=<dir>"


def path_too_long(path: Path, room: int = 0) -> str:
    """Why ``path`` is too long for the file system ('' when it is not): a part above the 255
    bytes of a file name (stat raises ENAMETOOLONG), or the whole above 4,096 less ``room``
    (the bytes of the files a job writes in it)."""
    import os

    path = Path(path).expanduser().absolute()
    longest = max(path.parts, key=lambda part: len(os.fsencode(part)))
    if len(os.fsencode(longest)) > 255:
        return (f"has a part of {len(os.fsencode(longest))} bytes ({longest[:40]}...), above the 255 a file name may have; "
                "give a shorter folder name")
    total = len(os.fsencode(str(path)))
    if total > 4095 - room:
        files = " (less room for the files written in it)" if room else ""
        return f"is a path of {total:,} bytes, above the 4,096 the file system takes{files}; give a shorter one"
    return ""


def out_folder_problem(out: str) -> str:
    """Why ``out`` cannot be the folder ``gnngp partition`` writes ('' when it can be): a file, a
    link that loops, a name or a path too long for the file system."""
    path = Path(out).expanduser()
    too_long = path_too_long(path)
    if too_long:
        return too_long
    try:
        path.resolve(strict=False)
    except (RuntimeError, OSError) as err:   # a symbolic link that loops
        return f"cannot be followed ({getattr(err, 'strerror', None) or err}); give a folder, not a link that loops"
    if path.exists() and not path.is_dir():
        return "is a file, not a folder; give the folder to write the row blocks into (a new one, or one gnngp partition wrote)"
    return ""


class JobDoesNotCompose(BaseException):
    """A sweep job whose overrides do not compose (the command line says it in one line). Not an
    ``Exception``: Hydra's callbacks turn those into warnings and go on."""

    def __init__(self, error: BaseException, job: str) -> None:
        super().__init__(str(error))
        self.error, self.job = error, job


def _refuse(message: str, job: str = "") -> None:
    where = f" (sweep job {job})" if job[:1].isdigit() else f" ({job})" if job else ""
    print(f"gnngp: error: {message}{where}", file=sys.stderr)
    raise SystemExit(1)   # not an Exception: Hydra's callbacks turn those into warnings


def check(config: DictConfig, job: str = "", command: str = "run", unread: str = "refuse") -> DictConfig:
    """Parse ``config`` (a composed config with its ``hydra`` node) as the job will; a
    :class:`~gnngp_cli.errors.GnngpError` refuses the command. ``unread="allow"``: an option
    the job would not read is left to the caller (a sweep's). Returns the job's config."""
    from ..config import check_switches, parse
    from ..errors import ConfigError, GnngpError

    task = copy.deepcopy(config)   # as Hydra gives it to the job: the hydra node removed
    with read_write(task), open_dict(task):
        task.pop("hydra", None)
    try:
        chosen = OmegaConf.select(config, "hydra.runtime.choices.model", default=None)
        named = task.get("kernel", {}).get("name") if task.get("method") == "gp" else task.get("gnn", {}).get("name")
        if chosen is not None and named is not None and str(chosen).removesuffix("_x") != str(named):
            # a preset (or a config of one's own) that set the section's name: the section's other keys stayed the chosen option's
            key = "kernel" if task.get("method") == "gp" else "gnn"
            raise ConfigError(f"{key}.name={named} is set in a config while {key}={chosen} is chosen, so the run would mix the two; choose "
                              f"it with {key}={named} (in a preset: defaults: [override /model: {named}]) and drop {key}.name")
        option = OmegaConf.select(config, "hydra.runtime.choices.dataset", default=None)
        if option is not None and task.get("dataset") is not None:   # a shipped option's name against the one a config set
            from ..data.datasets import option_dataset

            expected = option_dataset(option)   # (None: a config of one's own, whose name is its own)
            if expected is not None and str(task.dataset.get("name")).lower() != str(expected):
                raise ConfigError(f"dataset.name={task.dataset.get('name')} is set in a config while dataset={option} is chosen, so the run "
                                  f"would read one dataset with the other's settings; choose it with dataset={task.dataset.get('name')} "
                                  "and drop dataset.name")
        given = OmegaConf.select(config, "hydra.overrides.task", default=None)   # as typed: an element ${oc.env:X} is not resolved here
        check_switches(task, OmegaConf.to_container(given, resolve=False) if given is not None else [])
        spec = parse(task, command, unread)
        if command == "run" and spec.compute.backend == "local":   # device=cuda without a GPU: refused before a run folder is made
            from ..runtime import resolve_device

            resolve_device(str(spec.device))
        elif command == "run" and spec.method == "gp":   # a kernel the backend does not run (an exact kernel on compute=dask): before
            from ..backends import backend_for          # the job, which wrote an error row into a results.csv of good rows
            from ..job.gp_job import refuse_on
            from ..kernels import KERNELS

            if spec.kernel.name in KERNELS:
                refuse_on(backend_for(spec), spec)
    except GnngpError as err:
        _refuse(str(err), job)
    return task


def unread_in_sweep(tasks: list[tuple[str, DictConfig]], command: str = "run") -> None:
    """A sweep's jobs (``(label, config)``): an option set to a value that no job of the sweep
    reads is refused, in the words of the first job; one that some job reads runs, and each job
    that does not read it keeps its default with a warning (``-m kernel=gcngp,rbf kernel.layers=3``:
    the rbf jobs have no layers)."""
    from ..readers import set_options, unread_options

    read, first = set(), {}
    for label, task in tasks:
        unread = {item.key: item for item in unread_options(task, command)}
        read |= set(set_options(task, command)) - set(unread)
        for key, item in unread.items():
            first.setdefault(key, (label, item))
    for key, (label, item) in first.items():
        if key not in read:
            _refuse(f"{item.said}, and no job of the sweep reads it; {item.fix}", label)


def sweep_jobs(config: DictConfig) -> list[list[str]] | None:
    """The overrides of every job of a basic-sweeper sweep, as Hydra's basic sweeper lists them;
    ``None`` for another sweeper (a search chooses its values as it goes)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    loader = GlobalHydra.instance().config_loader()
    params = config.hydra.sweeper.get("params") or {}
    arguments = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(arguments)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


SEARCH_NOT = ("dataset", "dataset.split_index", "dataset.train_ratio", "dataset.val_ratio", "dataset.metric", "dataset.hide_val", "splits",
              "runs")   # and any *seed: what a search must not choose on validation (a ratio, the metric or hidden labels too: each
# trial would be judged on a validation set, or by a metric, of its own)


def search_problem(config: DictConfig, task: DictConfig) -> str:
    """Why a search sweeper cannot run as set ('' when it can): a trial count or parallel jobs
    below 1, a failure rate outside 0..1 (Optuna's sweeper divided by zero, or asserted), a study
    database (Optuna 2.10 cannot open one under SQLAlchemy 2), a dataset, seed, runs or splits
    among what it would choose (in its space, or a comma list), and an active-learning run, which
    has no validation metric to maximise (every trial "failed" after its work)."""
    sweeper = config.hydra.sweeper
    for key in ("n_trials", "n_jobs"):
        value = sweeper.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return f"hydra.sweeper.{key}={value} must be a whole number of at least 1"
    rate = sweeper.get("max_failure_rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1):
        return f"hydra.sweeper.max_failure_rate={rate} must be between 0 and 1 (the share of trials that may fail; the presets' 1.0: any)"
    storage = sweeper.get("storage")
    if storage:   # optuna 2.10's database storage needs SQLAlchemy 1.x; the tracking extra's MLflow store (alembic) needs 2.x
        return (f"hydra.sweeper.storage={storage}: the sweeper's Optuna 2.10 (hydra-optuna-sweeper needs optuna<3) cannot open a "
                "database under SQLAlchemy 2, which MLflow's store needs; leave it out: each trial's rows are in its folder, and "
                "resume=true continues a stopped search")
    searched = [(str(k), str(v)) for k, v in (sweeper.get("params") or {}).items()]   # the search space, the preset's and the user's
    given = [str(o).lstrip("+~").partition("=")[::2] for o in config.hydra.overrides.task]   # a comma list is a choice Optuna searches too
    typed = {k for k, _ in given} | {k.removeprefix("hydra.sweeper.params.") for k, _ in given}
    preset = next((v for k, v in given if k == "experiment"), None)
    for key, value in [*searched, *((k, v) for k, v in given if "," in v and not v.strip().startswith(("[", "{", "'", '"')))]:
        if (key in SEARCH_NOT or key.endswith("seed")) and preset and key not in typed:   # the preset's own sweep, not the user's
            return (f"experiment={preset} sweeps {key}={value}, which a search would choose on validation like a setting; a preset "
                    f"runs with -m alone (gnngp run -m experiment={preset}); a search is its own command (hparams_search=optuna and "
                    "the settings to search)")
        if key in SEARCH_NOT or key.endswith("seed"):
            one = value.split(",")[0] if "(" not in value else "<one value>"
            return (f"{key}={value} in a search would be searched like a setting, and the best trial's {key} chosen on validation "
                    f"(a result that says nothing of the others); run one search per value ({key}={one} ...)")
    if task.dataset.get("hide_val"):
        return ("a search maximises each trial's validation metric, and dataset.hide_val=true hides the validation labels (every trial "
                "would run, then have none); drop hparams_search=, or dataset.hide_val")
    active = task.get("active")
    if active is not None and str(active.get("name", "none")) != "none":
        return (f"a search maximises each trial's validation metric, and active={active.name} has none (its labels are bought, "
                "with no validation set); drop hparams_search=, or sweep strategies with -m active=...")
    return ""


def launcher_problem(config: DictConfig, tasks: list[tuple[str, Any]]) -> str:
    """Why the sweep's launcher cannot run its jobs ('' when it can): joblib's loky processes
    running jobs that each start a local Dask cluster of worker processes, whose nannies cannot
    start from a loky process (``cannot find context for 'loky'``: every job a traceback, no row);
    ``hydra/launcher=slurm`` where SLURM's ``srun`` is not on the PATH (submitit's traceback)."""
    import shutil

    launcher = config.hydra.get("launcher") or {}
    if "SlurmLauncher" in str(launcher.get("_target_", "")) and shutil.which("srun") is None:
        return ("hydra/launcher=slurm submits the jobs to a SLURM cluster, and SLURM's srun is not on this machine's PATH; run from "
                "a SLURM login node, or sweep here: hydra/launcher=submitit_local or joblib, or leave hydra/launcher out (the jobs in turn)")
    if "Joblib" not in str(launcher.get("_target_", "")) or launcher.get("n_jobs") == 1:
        return ""
    local = [label for label, task in tasks if task.compute.backend == "dask" and task.compute.processes and not task.compute.address]
    if not local:
        return ""
    return (f"compute=dask starts a cluster of worker processes in each job ({local[0]}), which hydra/launcher=joblib's worker "
            "processes cannot start; run the jobs in turn (leave out hydra/launcher=joblib: each job has the cluster's workers), or set "
            "hydra.launcher.n_jobs=1, or compute.processes=false (threads), or compute.address=<a running scheduler>")


class Preflight(Callback):
    """``on_run_start``: the job's config parsed; ``on_multirun_start``: every job's, for the
    basic sweeper. Both before Hydra makes a folder. ``command``: the command parsed for (``run``,
    ``verify``, ``partition``: each reads options of its own)."""

    def __init__(self, command: str = "run") -> None:
        self.command = command

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        task = check(config, command=self.command)
        if self.command == "partition" and not task.partition.get("out"):   # before Hydra makes the run's folder
            _refuse(NO_OUT)
        if self.command == "partition":
            problem = out_folder_problem(str(task.partition.out))
            if problem:
                _refuse(f"out={task.partition.out} {problem}")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra.core.global_hydra import GlobalHydra

        from ..compose import shown_override

        jobs = sweep_jobs(config)
        if jobs is None:   # a search: its values come as it goes, but the options it does not search are parsed now (an
            task = check(config, "the options a search does not choose", self.command, "allow")   # option its trials may read: each trial's warning)
            problem = search_problem(config, task) or launcher_problem(config, [("the search's trials", task)])
            if problem:
                _refuse(problem)
            return
        if not jobs:
            _refuse("the sweep has no jobs (a sweep value that expands to nothing, e.g. glob(*) matching no option); "
                    "give at least one value to each swept key")
        loader = GlobalHydra.instance().config_loader()
        tasks = []
        for index, overrides in enumerate(jobs):
            label = f"{index}: {' '.join(shown_override(o) for o in overrides)}"
            try:
                composed = loader.load_sweep_config(config, list(overrides))
            except (HydraException, OmegaConfBaseException) as err:   # an unknown key: one line now (Hydra warned, then ran the jobs
                raise JobDoesNotCompose(err, label) from None           # before it, then failed)
            tasks.append((label, check(composed, label, self.command, "allow")))
        unread_in_sweep(tasks, self.command)
        problem = launcher_problem(config, [(f"job {label}", task) for label, task in tasks])
        if problem:
            _refuse(problem)
