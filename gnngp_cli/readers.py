"""Which runs read each option, declared once per key; and the refusal of an option that a run
would not read (refuse, never ignore).

Every key of the schemas (:mod:`gnngp_cli.schema`) has one entry in :data:`READERS`: the runs
that read it (``reads(cfg, command)``), named in words for the message. A key whose value differs
from the one the run would use without it (its default, for the chosen kernel, GNN and groups)
and that the run does not read is refused in one line (:func:`unread_options`); a key left at
its default never is. A key added with ``+`` that no schema has (``+kernel.layer=3``) is refused
too (:func:`unknown_keys`). A test walks the schemas and fails for a key without an entry, so a
new option says which runs read it.

``command`` is the command the config is parsed for: ``run`` (``gnngp run`` and the Python API),
``verify`` or ``partition``. ``gnngp verify`` and ``gnngp partition`` check the keys of their
own (``verify.*``, ``partition.*``), which ``gnngp run`` never reads; ``gnngp verify`` refuses
too the keys only ``gnngp run`` reads (:data:`RUN_ONLY`: ``runs``, ``nugget.*``, ``fit=mll``...),
and ``gnngp partition`` every key but the graph's and its own (:data:`PARTITION_READS`).
The other method's section (``kernel.*`` on a GNN run, ``gnn.*`` on a GP run, which a ``+``
addition or a preset puts there) is read by no run of it; the landmark defaults of a dataset
(``dataset.landmark_*``) only by the low-rank kernels that take them.
"""
from __future__ import annotations

import difflib
import fnmatch
import os
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Callable, Optional

from omegaconf import DictConfig, OmegaConf

from .data.datasets import DATASETS, PRESETS
from .errors import ConfigError
from .gp.strategies import STRATEGIES
from .gnn import GNNS
from .kernels import BASE_READS, KERNELS
from .schema import (ActiveConfig, ComputeConfig, ConformalConfig, FitConfig, GridConfig, LikelihoodConfig, ProtocolConfig, RunConfig,
                     config_fields)

COMMANDS = ("run", "verify", "partition")


@dataclass(frozen=True)
class Reader:
    """The keys ``keys`` (dotted; ``*`` matches a registry entry's own options) and the runs that
    read them: ``reads(cfg, command)``; ``who`` names those runs, ``fix`` what to set instead."""

    keys: tuple[str, ...]
    reads: Callable[[Any, str], bool]
    who: str
    fix: str = ""
    commands: tuple[str, ...] = ("run",)   # the commands this entry is checked on (the others read only their own keys)
    own: Optional[Callable[[Any, str], bool]] = None   # a pattern's entry: whether the run reads the entry's own option of this name


def _every(cfg: Any, command: str) -> bool:
    return True


def _gp(cfg: Any) -> bool:
    return cfg.method == "gp" and cfg.kernel is not None


def _kernel_reads(word: str) -> Callable[[Any, str], bool]:
    """A common kernel key that some kernels do not read (:attr:`KernelEntry.ignores`)."""
    return lambda cfg, command: _gp(cfg) and word not in KERNELS[cfg.kernel.name].ignores


def active_run(cfg: Any) -> bool:
    """Whether a composed config is an active-learning run (``active=<strategy>``)."""
    return cfg.get("active") is not None and cfg.active.name != "none"


def _retrains(cfg: Any) -> bool:   # a strategy that trains the GCN at each step (active=age)
    strategy = STRATEGIES.get(cfg.active.name)
    return strategy is not None and strategy.retrains


def _follows_depth(section: Any) -> bool:
    """Whether ``section`` (``kernel`` or ``gnn``) takes its ``layers`` from ``depth`` (its
    default ``${depth}``), not from a value of its own (``kernel.layers=2`` beside ``depth=3``)."""
    if not OmegaConf.is_config(section) or "layers" not in section:
        return True
    node = section._get_node("layers")
    return OmegaConf.is_interpolation(section, "layers") and "depth" in str(node._value())


def _depth_read(cfg: Any, command: str) -> bool:
    """``depth``: read by the GCN an active run trains (active=age, active.model=gcn), and by a
    GNN's or kernel's layers where they are not set themselves."""
    if active_run(cfg) and (cfg.active.model == "gcn" or _retrains(cfg)):
        return True
    if cfg.method == "gnn":
        return cfg.gnn is None or _follows_depth(cfg.gnn)
    return _kernel_reads("layers")(cfg, command) and _follows_depth(cfg.kernel)


def _grid_nugget(cfg: Any, command: str) -> bool:   # the nugget grid: fit=grid, without inference.time; an active run's fit=mll
    if active_run(cfg):
        return _gp(cfg) and cfg.fit.method == "mll"
    return _gp(cfg) and cfg.fit.method == "grid" and (cfg.get("inference") is None or cfg.inference.time is None)


def _mll(cfg: Any, command: str) -> bool:   # an active run's fit=mll chooses the nugget alone, on the grid: no optimiser
    return _gp(cfg) and cfg.fit.method == "mll" and not active_run(cfg)


def _mll_start(cfg: Any, command: str) -> bool:   # fit.nugget: the fit's start, or an active run's nugget before its first label
    return _gp(cfg) and cfg.fit.method == "mll"


def _low_rank(cfg: Any, command: str) -> bool:
    return _gp(cfg) and bool(cfg.kernel.low_rank)


def _base_reads(word: str) -> Callable[[Any, str], bool]:
    def reads(cfg: Any, command: str) -> bool:
        if not _gp(cfg) or word not in BASE_READS.get(cfg.kernel.base.name, ()):
            return False
        searched = word == "gamma" and cfg.kernel.gamma_search and cfg.fit.method == "grid"   # the grid's gammas replace it
        return not searched
    return reads


def _protocol(*names: str) -> Callable[[Any, str], bool]:
    return lambda cfg, command: cfg.protocol.name in names


def _conformal(*names: str) -> Callable[[Any, str], bool]:
    return lambda cfg, command: cfg.conformal.name != "none" and (not names or cfg.conformal.name in names)


def _cluster(*backends: str) -> Callable[[Any, str], bool]:
    return lambda cfg, command: cfg.compute.backend in backends and (cfg.method == "gp" or command != "run")


def _keys(section: str, cls: type, *names: str) -> tuple[str, ...]:
    return tuple(f"{section}.{name}" for name in (names or config_fields(cls)))


LOW_RANK_FIX = "drop it, or use the low-rank twin {low_rank}"   # {low_rank}: this run's kernel=<name>_x
SLURM_KEYS = ("queue", "account", "walltime", "cores", "memory", "jobs", "job_extra", "worker_timeout")
PROTOCOLS_WITH_SEED = ("leave_out_classes", "feature_shift", "structural_shift", "random_split")

READERS: tuple[Reader, ...] = (
    # read by every run (their values are checked in gnngp_cli.config: a dataset's split keys, inference.*, data.order ...)
    Reader(("method", "seed", "runs", "repeat_deterministic", "splits", "device", "results_file", "progress", "resume", "logger", "compute.backend",
            "fit.method", "likelihood.name", "protocol.name", "conformal.name", "active.name", "inference.time", "inference.learning_rate",
            "experiment.name", "experiment.stand_in", "experiment.table", "experiment.table.title", "experiment.table.rows",
            "experiment.paper",
            "logger.name", "logger.experiment",
            "data.root", "data.mirror", "data.download", "data.download_timeout", "data.verify", "data.order", "data.shared_cache",
            "dataset.name", "dataset.task", "dataset.split_index", "dataset.split_seed", "dataset.metric", "dataset.train_ratio",
            "dataset.val_ratio", "dataset.hide_val", "dataset.center", "dataset.scale", "dataset.large",
            "dataset.*",   # a dataset's own options (csbm's num_nodes, custom's path): its loader reads them
            "gnn.name", "gnn.layers", "gnn.recipe", "gnn.hidden", "gnn.dropout", "gnn.lr", "gnn.weight_decay", "gnn.epochs",
            "gnn.batch_norm", "gnn.batch_size", "gnn.fanouts", "gnn.uncertainty", "gnn.propagation", "gnn.regime",
            "gnn.*",   # a GNN's own options (GAT's heads): its network reads them
            "kernel.name", "kernel.low_rank", "kernel.base.name", "kernel.base.scale", "kernel.gamma_search", "kernel.limit"),
           _every, "every run"),
    Reader(("logger.tracking_uri",), lambda cfg, command: cfg.logger.name == "mlflow", "logger=mlflow", "drop it"),
    Reader(("logger.save_dir",), lambda cfg, command: cfg.logger.name == "tensorboard", "logger=tensorboard", "drop it"),
    Reader(("depth",), lambda cfg, command: _depth_read(cfg, command),
           "the GNNs and the kernels with layers (not rbf, ggp), where gnn.layers or kernel.layers does not set them",
           "drop it (or the gnn.layers / kernel.layers beside it, which it would set)"),
    Reader(("kernel.layers",), _kernel_reads("layers"), "the kernels with layers (not rbf, ggp)", "drop it"),
    Reader(("kernel.adjacency",), _kernel_reads("adjacency"), "the kernels that read the graph (not rbf)", "drop it"),
    Reader(("kernel.*",), lambda cfg, command: _gp(cfg), "the kernel configurations whose blocks use it", "drop it",
           own=lambda cfg, name: _own_parameter_read(cfg, name)),   # a kernel's own parameters: all but those its configuration leaves out
    Reader(("kernel.base.gamma",), _base_reads("gamma"),
           "the base kernels rbf, laplacian and sigmoid, without kernel.gamma_search (fit=grid's search replaces it)",
           "drop it, or set kernel.base.name to one of those"),
    Reader(("kernel.base.c",), _base_reads("c"), "the base kernels polynomial and sigmoid", "drop it"),
    Reader(("kernel.base.d",), _base_reads("d"), "the polynomial base kernel", "drop it"),
    Reader(_keys("kernel.gamma_grid", GridConfig), lambda cfg, command: _gp(cfg) and cfg.kernel.gamma_search and cfg.fit.method == "grid",
           "a gamma search (kernel.gamma_search=true with fit=grid)", "drop it, or set kernel.gamma_search=true"),
    Reader(("dtype",), lambda cfg, command: _gp(cfg), "GP kernels (a GNN trains in float32)", "drop it"),
    Reader(("max_memory_gb",), lambda cfg, command: True, "every run", "drop it"),   # a GNN's weights and activations are checked too
    Reader(("landmarks.fraction",), lambda cfg, command: _low_rank(cfg, command) and cfg.landmarks.count is None,
           "low-rank kernels (kernel=<name>_x) without landmarks.count", LOW_RANK_FIX),
    Reader(("landmarks.count",), _low_rank, "low-rank kernels (kernel=<name>_x)", LOW_RANK_FIX),
    Reader(("landmarks.pool",), _low_rank, "low-rank kernels (kernel=<name>_x)", LOW_RANK_FIX),
    # a dataset's landmark defaults, which landmarks.* take unless set (a value the dataset's entry or a preset of it has is its default)
    Reader(("dataset.landmark_fraction",), lambda cfg, command: _low_rank(cfg, command) and cfg.landmarks.count is None
           and cfg.landmarks.fraction == cfg.dataset.landmark_fraction,
           "low-rank kernels (kernel=<name>_x) without landmarks.count or landmarks.fraction", LOW_RANK_FIX),
    Reader(("dataset.landmark_count",), lambda cfg, command: _low_rank(cfg, command) and cfg.landmarks.count == cfg.dataset.landmark_count,
           "low-rank kernels (kernel=<name>_x) without landmarks.count", LOW_RANK_FIX),
    Reader(_keys("nugget", GridConfig), _grid_nugget, "GP kernels with fit=grid and no inference.time (active runs: with fit=mll)", "drop it"),
    Reader(tuple(f"fit.{name}" for name in config_fields(FitConfig) if name not in ("method", "nugget")), _mll,
           "fit=mll outside active learning (an active run's fit=mll chooses the nugget on the nugget grid, with no optimiser)",
           "drop it, or set fit=mll"),
    Reader(("fit.nugget",), _mll_start, "fit=mll", "drop it, or set fit=mll"),
    Reader(_keys("active", ActiveConfig, "budgets", "initial", "batch", "seed", "model"), lambda cfg, command: active_run(cfg),
           "active learning (active=<strategy>)", "drop it, or choose a strategy: active=sigma_opt"),
    Reader(("active.epochs",), lambda cfg, command: active_run(cfg) and (cfg.active.model == "gcn" or _retrains(cfg)),
           "active learning that trains a GCN (active=age, or active.model=gcn)", "drop it, or set active.model=gcn"),
    Reader(("active.nugget",), lambda cfg, command: active_run(cfg) and cfg.fit.method == "grid",
           "active learning with fit=grid (the fixed nugget; fit=mll chooses it on the labels so far)", "drop it"),
    Reader(("likelihood.alpha",), lambda cfg, command: _gp(cfg) and cfg.likelihood.name == "dirichlet", "likelihood=dirichlet",
           "drop it, or set likelihood=dirichlet"),
    Reader(("likelihood.alpha_grid",), lambda cfg, command: _gp(cfg) and cfg.likelihood.name == "dirichlet" and cfg.likelihood.alpha is None,
           "likelihood=dirichlet without likelihood.alpha", "drop it, or set likelihood=dirichlet"),
    Reader(("likelihood.probabilities", "likelihood.temperature"), lambda cfg, command: _gp(cfg),
           "GP kernels (a GNN's probabilities are set by gnn.uncertainty)", "drop it"),
    Reader(("likelihood.samples",), lambda cfg, command: _gp(cfg) and cfg.likelihood.probabilities == "mc",
           "GP kernels with likelihood.probabilities=mc", "drop it, or set likelihood.probabilities=mc"),
    Reader(("gnn.members",), lambda cfg, command: cfg.method == "gnn" and cfg.gnn.uncertainty == "ensemble", "gnn.uncertainty=ensemble",
           "drop it, or set gnn.uncertainty=ensemble"),
    Reader(("gnn.mc_samples",), lambda cfg, command: cfg.method == "gnn" and cfg.gnn.uncertainty == "mc_dropout",
           "gnn.uncertainty=mc_dropout", "drop it, or set gnn.uncertainty=mc_dropout"),
    Reader(("protocol.seed",), _protocol(*PROTOCOLS_WITH_SEED), f"protocol={', '.join(PROTOCOLS_WITH_SEED)}", "drop it"),
    Reader(("protocol.left_out",), _protocol("leave_out_classes"), "protocol=leave_out_classes", "drop it"),
    Reader(("protocol.share", "protocol.perturbation"), _protocol("feature_shift"), "protocol=feature_shift", "drop it"),
    Reader(("protocol.strength",), lambda cfg, command: cfg.protocol.name == "feature_shift" and cfg.protocol.perturbation == "noise",
           "protocol=feature_shift with protocol.perturbation=noise", "drop it"),
    Reader(("protocol.ordering", "protocol.shares"), _protocol("structural_shift"), "protocol=structural_shift", "drop it"),
    Reader(("protocol.split",), _protocol("random_split"), "protocol=random_split", "drop it"),
    Reader(_keys("conformal", ConformalConfig, "alpha", "splits", "calibration", "seed"), _conformal(), "conformal=<score>", "drop it"),
    Reader(("conformal.penalty", "conformal.kreg"), _conformal("raps"), "conformal=raps", "drop it"),
    Reader(("conformal.neighbours",), _conformal("daps"), "conformal=daps", "drop it"),
    Reader(("conformal.xi", "conformal.mu", "conformal.k"), _conformal("snaps"), "conformal=snaps", "drop it"),
    Reader(("compute.product",), lambda cfg, command: _gp(cfg) and cfg.compute.backend == "local",
           "GP kernels with compute=local (a row block is multiplied by scipy's product)", "drop it"),
    Reader(tuple(f"compute.{name}" for name in config_fields(ComputeConfig) if name not in ("backend", "product", *SLURM_KEYS)),
           _cluster("dask", "slurm"), "compute=dask and compute=slurm (GP kernels)", "drop it, or set compute=dask"),
    Reader(tuple(f"compute.{name}" for name in SLURM_KEYS), _cluster("slurm"), "compute=slurm (GP kernels)", "drop it, or set compute=slurm"),
    Reader(("partition.rows",), lambda cfg, command: command == "partition" or _cluster("dask", "slurm")(cfg, command),
           "gnngp partition, and GP kernels on compute=dask or compute=slurm", "drop it, or set compute=dask", COMMANDS),
    Reader(("partition.out",), lambda cfg, command: command == "partition", "gnngp partition (out=<dir>)", "drop it", COMMANDS),
    Reader(tuple(f"verify.{name}" for name in config_fields(RunConfig.__dataclass_fields__["verify"].default_factory)),
           lambda cfg, command: command == "verify", "gnngp verify", "drop it, or run gnngp verify", COMMANDS),
)


def reader_of(key: str) -> Optional[Reader]:
    """The entry of ``key``: the one naming it, else one whose pattern (``kernel.*``) matches it."""
    for reader in READERS:
        if key in reader.keys:
            return reader
    for reader in READERS:
        if any("*" in pattern and fnmatch.fnmatchcase(key, pattern) for pattern in reader.keys):
            return reader
    return None


def _own_parameter_read(cfg: Any, name: str) -> bool:
    """A kernel's own parameter ``name``: read unless its entry's ``used`` leaves it out for this
    configuration (``composed`` without a bias block does not read ``sigma_b``)."""
    entry = KERNELS[cfg.kernel.name]
    if entry.used is None or name not in {p.name for p in entry.parameters}:
        return True
    return name in set(entry.used(OmegaConf.to_object(cfg.kernel) if OmegaConf.is_config(cfg.kernel) else cfg.kernel))


# the keys only gnngp run reads: gnngp verify checks a kernel against wide networks on a
# subgraph of the dataset (its kernel.*, dataset.*, data.*, protocol.*, experiment.stand_in, seed,
# device and max_memory_gb), and runs no GP, no GNN and no sweep of runs; it logs to no tracker
# (logger), prints each width as it samples it whatever progress says, and reads no paper preset's
# table (experiment.name, .table, .paper)
RUN_ONLY = ("runs", "repeat_deterministic", "splits", "resume", "results_file", "dtype", "method", "nugget.*", "landmarks.*", "fit.*",
            "likelihood.*", "conformal.*", "inference.*", "compute.*", "gnn.*", "kernel.low_rank", "kernel.gamma_search",
            "kernel.gamma_grid.*", "dataset.landmark_fraction", "dataset.landmark_count", "active.*", "progress", "logger", "logger.*",
            "experiment.name", "experiment.table", "experiment.table.*", "experiment.paper")


def run_only(key: str) -> bool:
    """Whether ``key`` is read by ``gnngp run`` alone (:data:`RUN_ONLY`), never by ``gnngp verify``."""
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in RUN_ONLY)


# the keys gnngp partition reads: it writes a dataset's graph as row blocks (the graph's keys, where
# its files are, the memory bound of a generated graph, its own partition.*) and builds no kernel
# operator, fits no GP and trains no GNN. method follows kernel= or gnn=, whose sections are told
PARTITION_READS = ("method", "dataset.*", "data.*", "experiment.stand_in", "max_memory_gb", "partition.*")
PARTITION_MODEL = "gcngp"   # config.yaml's model: the kernel section gnngp partition takes as its default


def partition_skips(key: str) -> bool:
    """Whether ``gnngp partition`` never reads ``key``, a key of ``gnngp run`` (and of ``gnngp
    verify``); ``verify.*``, read only by ``gnngp verify``, is told by its :data:`READERS` entry."""
    if key.startswith("verify."):
        return False
    return run_only(key) or not any(fnmatch.fnmatchcase(key, pattern) for pattern in PARTITION_READS)


def other_command_skips(key: str, command: str) -> bool:
    """Whether ``key`` is one of ``gnngp run``'s that ``command`` (``verify``, ``partition``) never reads."""
    return command == "verify" and run_only(key) or command == "partition" and partition_skips(key)


def other_method(cfg: Any, key: str) -> bool:
    """Whether ``key`` lies in the section of the method this run is not (``kernel.*`` on a GNN
    run, ``gnn.*`` on a GP run): no such run reads it."""
    return key.split(".", 1)[0] == OTHER_METHOD.get(cfg.method) and "." in key


def reads(cfg: Any, key: str, command: str = "run") -> bool:
    """Whether a run of ``cfg`` (for ``command``) reads ``key``."""
    if other_command_skips(key, command):
        return False
    if command != "partition" and other_method(cfg, key):
        return False
    reader = reader_of(key)
    if reader is None:
        raise ConfigError(f"{key} says nothing of which runs read it (gnngp_cli/readers.py READERS)")
    if command not in reader.commands:
        return True   # another command's key: that command checks it
    if reader.own is not None and key not in reader.keys:
        return bool(reader.reads(cfg, command)) and reader.own(cfg, key.split(".", 1)[1])
    return bool(reader.reads(cfg, command))


def leaf_keys(cls: type, prefix: str = "") -> list[str]:
    """The dotted keys of a schema dataclass, nested dataclasses walked (for the test, and the defaults)."""
    out = []
    for f in fields(cls):
        default = f.default_factory() if callable(f.default_factory) else f.default
        if is_dataclass(default):
            out += leaf_keys(type(default), f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def defaults_of(cfg: DictConfig, command: str = "run") -> RunConfig:
    """The options this run would have with none set: the schema's defaults (plain dataclasses,
    unresolved) with the run's own choices: the kernel or GNN entry's config, the groups' names
    (for ``gnngp verify``, the groups only ``gnngp run`` reads keep the schema's: ``fit=mll`` is set)."""
    if command == "verify":
        defaults = RunConfig(method=cfg.method, protocol=ProtocolConfig(name=cfg.protocol.name))
    elif command == "partition":   # every group keeps the schema's, the method config.yaml's; device: as config.yaml resolves it
        defaults = RunConfig(method=cfg.method, device=os.environ.get("GNNGP_DEVICE") or "auto")
        if _gp(cfg):
            defaults.kernel = KERNELS[PARTITION_MODEL].config(name=PARTITION_MODEL, low_rank=False)
        return defaults
    else:
        defaults = RunConfig(method=cfg.method, fit=FitConfig(method=cfg.fit.method), likelihood=LikelihoodConfig(name=cfg.likelihood.name),
                             protocol=ProtocolConfig(name=cfg.protocol.name), conformal=ConformalConfig(name=cfg.conformal.name),
                             compute=ComputeConfig(backend=cfg.compute.backend),
                             active=ActiveConfig(name=cfg.active.name) if cfg.get("active") is not None else ActiveConfig())
    if _gp(cfg):
        low_rank = bool(cfg.kernel.low_rank) and command != "verify"   # gnngp verify checks the exact kernel: a _x twin is set
        defaults.kernel = KERNELS[cfg.kernel.name].config(name=cfg.kernel.name, low_rank=low_rank)
    if cfg.method == "gnn" and cfg.gnn is not None:
        defaults.gnn = GNNS[cfg.gnn.name].config(name=cfg.gnn.name)
    return defaults


DATASET_DEFAULTS = ("dataset.landmark_fraction", "dataset.landmark_count")   # dataset keys whose default is the dataset entry's


def _dataset_default(tree: dict, key: str) -> Any:
    """The default of a dataset key of :data:`DATASET_DEFAULTS`: the dataset entry's value, or
    the run's own where a preset of that dataset (``dataset=csbm_1e5``) has it."""
    name, field = str(_value(tree, "dataset.name")).lower(), key.split(".", 1)[1]
    entry = DATASETS.get(name)
    if entry is None:
        return _value(tree, key)
    value = _value(tree, key)
    presets = [getattr(p, field, None) for p in PRESETS.values() if str(getattr(p, "name", "")).lower() == name]
    return value if value in presets else getattr(entry.config, field, None)


def _default(defaults: RunConfig, tree: dict, key: str) -> Any:
    """The default of ``key`` for this run; an interpolated default (``kernel.layers: ${depth}``)
    is the run's own value of the key it names (a dataset's own keys: the run's dataset). In the
    other method's section (``kernel.*`` on a GNN run), nothing, but ``kernel.low_rank``: the
    dataset's ``large``, as a preset that sweeps GPs and GNNs sets it for its GP jobs (experiment=table5)."""
    if key in DATASET_DEFAULTS:
        return _dataset_default(tree, key)
    if key.startswith("dataset."):
        return _value(tree, key)
    if key.split(".", 1)[0] == OTHER_METHOD.get(defaults.method):
        return _value(tree, "dataset.large") if key == "kernel.low_rank" else None
    node: Any = defaults
    for part in key.split("."):
        node = getattr(node, part, None)
    if isinstance(node, str) and node.startswith("${") and node.endswith("}"):
        return _value(tree, node[2:-1])
    return node


def _value(tree: dict, key: str) -> Any:
    """``key`` of the resolved config ``tree`` (plain Python; ``None`` where it has no such key)."""
    node: Any = tree
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def set_options(cfg: DictConfig, command: str = "run") -> dict[str, tuple[Any, Any]]:
    """The keys whose value differs from the run's default (:func:`defaults_of`): ``key -> (value, default)``."""
    defaults = defaults_of(cfg, command)
    tree = OmegaConf.to_container(cfg, resolve=True)   # resolved once: a select per key parses each interpolation again
    out = {}
    for key in _present_keys(cfg):
        default = _default(defaults, tree, key)
        value = _value(tree, key)
        if value != default and not (isinstance(default, (list, tuple)) and isinstance(value, list) and list(default) == value):
            out[key] = (value, default)
    return out


OTHER_METHOD = {"gp": "gnn", "gnn": "kernel"}   # the section of the method a run is not


def _present_keys(cfg: DictConfig, prefix: str = "", untyped: bool = False) -> list[str]:
    """The keys of ``cfg``, nested schemas walked; in the other method's section (``kernel`` on a
    GNN run: untyped, what a preset or a ``+`` addition put there), every key of its mappings."""
    out = []
    for key in cfg.keys():
        if not prefix and key == "hydra":
            continue
        child = cfg._get_node(key)
        live = isinstance(child, DictConfig) and not child._is_none() and not child._is_missing()
        other = untyped or (not prefix and key == OTHER_METHOD.get(cfg.get("method")))
        if live and (is_dataclass(OmegaConf.get_type(child)) or other):
            out += _present_keys(child, f"{prefix}{key}.", other)
        else:
            out.append(f"{prefix}{key}")
    return out


@dataclass(frozen=True)
class Unread:
    """An option set to a value the run would not read."""

    key: str
    value: Any
    default: Any
    said: str                           # what is wrong: the key, its value, and the runs that read it
    fix: str                            # what to do instead

    @property
    def message(self) -> str:
        return f"{self.said}; {self.fix}"


def _method_words(cfg: Any) -> str:
    if cfg.method == "gnn" and cfg.gnn is not None:
        return f"gnn={cfg.gnn.name}"
    if _gp(cfg):
        return f"kernel={cfg.kernel.name}{'_x' if cfg.kernel.low_rank else ''}"
    return f"method={cfg.method}"


def _shown(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def unread_options(cfg: DictConfig, command: str = "run") -> list[Unread]:
    """The options of ``cfg`` set to a value (not the default) that a run of it would not read,
    each with its one-line message."""
    out = []
    for key, (value, default) in set_options(cfg, command).items():
        if reads(cfg, key, command):
            continue
        shown = f"{key}={_shown(value)}"
        if key == "kernel.low_rank" and command == "verify" and value:   # kernel=gcngp_x, as the user typed it
            out.append(Unread(key, value, default, f"kernel={cfg.kernel.name}_x is a low-rank kernel, and gnngp verify checks an exact "
                              "kernel against wide random networks", f"use kernel={cfg.kernel.name}"))
            continue
        if other_command_skips(key, command):
            who = "gnngp run" if run_only(key) else "gnngp run and gnngp verify"
            out.append(Unread(key, value, default, f"{shown} has no effect on gnngp {command}: it is read only by {who}", OTHER_COMMAND_FIX[command]))
            continue
        if other_method(cfg, key):
            out.append(Unread(key, value, default, *_other_method_words(cfg, shown)))
            continue
        reader = reader_of(key)
        run = f"gnngp {command}" if command != "run" and reader.commands == COMMANDS else f"this run ({_method_words(cfg)})"
        said = f"{shown} has no effect on {run}: it is read only by {reader.who}"
        fix = reader.fix.format(low_rank=f"kernel={cfg.kernel.name}_x" if _gp(cfg) else "kernel=<name>_x")
        if reader.fix == LOW_RANK_FIX and _gp(cfg) and cfg.kernel.low_rank:   # the twin already: only dropping it helps
            fix = "drop it"
        if key.startswith("fit.") and active_run(cfg) and _gp(cfg) and cfg.fit.method == "mll":   # fit=mll already: its optimiser is not an active run's
            fix = "drop it"
        out.append(Unread(key, value, default, said, fix if fix and command == "run" else "drop it"))
    return out


OTHER_COMMAND_FIX = {
    "verify": "drop it (gnngp verify checks a kernel against wide random networks; it fits no GP and trains no GNN)",
    "partition": "drop it (gnngp partition writes a dataset's graph as row blocks; it builds no kernel, fits no GP and trains no GNN)",
}


def _other_method_words(cfg: Any, shown: str) -> tuple[str, str]:
    """What is wrong with ``shown`` (a key of the other method's section) and the fix: the twin
    of this run's method, where it has one (gnn=gcn and kernel=gcngp)."""
    run = f"this run ({_method_words(cfg)})"
    if cfg.method == "gnn":
        twins = [name for name, entry in KERNELS.items() if cfg.gnn is not None and entry.gnn == cfg.gnn.name]
        return (f"{shown} has no effect on {run}: a GNN reads no kernel option; they are read only by GP kernels (kernel=<name>)",
                "drop it" + (f", or run the GP kernel of the same architecture, kernel={twins[0]}" if twins else ""))
    twin = KERNELS[cfg.kernel.name].gnn if _gp(cfg) and cfg.kernel.name in KERNELS else None
    return (f"{shown} has no effect on {run}: a GP kernel reads no GNN option; they are read only by GNNs (gnn=<name>)",
            "drop it" + (f", or run the GNN of the same architecture, gnn={twin}" if twin else ""))


def unknown_keys(cfg: DictConfig) -> None:
    """A key of ``cfg`` that its schema has not (``+kernel.layer=3``, ``+foo=bar``: Hydra adds
    it): one line naming it and the nearest key, as an unknown key without ``+`` is told."""
    def walk(node: DictConfig, path: str) -> None:
        schema = OmegaConf.get_type(node)
        known = [f.name for f in fields(schema)] if is_dataclass(schema) else None
        for key in node.keys():
            if not path and key == "hydra":
                continue
            full = f"{path}{key}"
            if known is not None and key not in known:
                near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.5)
                hint = f"did you mean {path}{near[0]}? " if near else ""
                where = f" of {path[:-1]}" if path else ""
                raise ConfigError(f"unknown key {full} (a + addition adds only keys the schema has); {hint}keys{where}: {', '.join(known)}")
            child = node._get_node(key)
            if isinstance(child, DictConfig) and not child._is_none() and not child._is_missing():
                walk(child, full + ".")
    if OmegaConf.is_config(cfg):
        walk(cfg, "")
