"""Typed configuration: dataclass schemas in Hydra's ConfigStore, validated before any work.

The schema of each method and dataset is declared once, beside its code, in a registry entry:
kernels in :mod:`gnngp_cli.kernels.architectures`, GNNs in :mod:`gnngp_cli.gnn`, datasets in the
loader modules of :mod:`gnngp_cli.data`. :func:`register_configs` turns every entry into a
config option, so the choices on the command line, their typed keys and their defaults all come
from the registries:

- ``model=<name>``: a GP kernel (``gcngp``, and its low-rank twin ``gcngp_x``) or a GNN (``gcn``);
  ``kernel=<name>`` and ``gnn=<name>`` on the command line are the same choice, spelled for
  the kind of method (see :func:`method_overrides`);
- ``dataset=<name>``.

A wrong key or a wrong type fails when Hydra composes the config; an impossible value
(``layers < 1``, a negative sigma, a nugget grid with ``min >= max``...) fails in
:func:`validate`, before any data is loaded. A method setting left ``null`` takes the method's
default for the dataset (:func:`resolve_method_defaults`, after the data is loaded).
"""
from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Optional, Sequence

from omegaconf import II, MISSING, OmegaConf

from .errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
TASKS = ("classification", "regression")
METHODS = ("gp", "gnn")
SQRT_TENTH = math.sqrt(0.1)   # the paper's bias (kernels) and learning rate (GNNs) on regression sets
RANDOM_SPLIT_DATASETS = ("csbm", "custom")   # split by dataset.train_ratio / dataset.val_ratio


@dataclass
class DataConfig:
    root: Optional[str] = None          # writable cache; default $GNNGP_DATA_ROOT or ~/.cache/gnngp
    mirror: Optional[str] = None        # read-only offline mirror (<Name>/raw/...); env GNNGP_DATA_MIRROR
    download: bool = True
    download_timeout: float = 20.0
    verify: bool = True                 # check raw files against the published sha256 table (false: warn)


@dataclass
class DatasetConfig:
    """What every dataset has; a dataset with settings of its own subclasses it."""

    name: str = MISSING
    task: Optional[str] = None          # override the inferred task (custom datasets)
    split_index: int = 0                # fixed split: geom-gcn (chameleon, squirrel), heterophily suite (0..9)
    split_seed: int = 0                 # random splits (crocodile, csbm, custom)
    metric: Optional[str] = None        # accuracy | roc_auc | r2; default: roc_auc for two classes, accuracy, r2 for regression
    train_ratio: float = 0.1
    val_ratio: float = 0.1
    hide_val: bool = False              # true: the validation nodes lose their labels (no validation set; needs fit=mll)
    center: bool = False
    scale: bool = False
    landmark_fraction: float = 1.0      # the landmark fraction 1/k low-rank kernels use on this dataset
    landmark_count: Optional[int] = None  # or an exact landmark count
    large: bool = False                 # too large for exact kernels: experiments use the low-rank twins


@dataclass
class BaseKernelConfig:
    name: str = "linear"
    gamma: float = 1.0
    c: float = 0.0
    d: float = 1.0
    scale: float = 1.0                  # C0 reads sqrt(scale) x: linear C0 = scale x.x' (1/d matches weights N(0, s_w^2/d); the paper uses 1)


@dataclass
class GridConfig:
    min: float = 1e-2
    max: float = 1e2
    num: int = 101


@dataclass
class KernelConfig:
    """What every GP kernel has; each architecture subclasses it with its own parameters."""

    name: str = MISSING
    low_rank: bool = False
    layers: int = II("depth")
    adjacency: Optional[str] = None     # sym or row; default per architecture
    base: BaseKernelConfig = field(default_factory=BaseKernelConfig)
    gamma_search: bool = False          # choose base.gamma on validation over gamma_grid
    gamma_grid: GridConfig = field(default_factory=GridConfig)


@dataclass
class GNNConfig:
    """What every GNN baseline has; a GNN with settings of its own subclasses it. ``null``
    settings take the defaults of :data:`gnngp_cli.gnn.TRAINING_DEFAULTS` for the dataset."""

    name: str = MISSING
    layers: int = II("depth")
    hidden: int = 256
    dropout: float = 0.5
    lr: Optional[float] = None          # null: 0.01, sqrt(0.1) on regression sets
    weight_decay: float = 0.0
    epochs: Optional[int] = None        # null: 100 (200 on crocodile, 10 on reddit)
    batch_norm: Optional[bool] = None   # null: on for chameleon, squirrel, crocodile, arxiv
    batch_size: Optional[int] = None    # null: full batch (10240 on reddit); 0: full batch
    fanouts: Optional[list[int]] = None  # mini-batch neighbours per graph layer; -1 = all


@dataclass
class LandmarksConfig:
    fraction: float = II("dataset.landmark_fraction")   # each training node is a landmark w.p. 1/fraction
    count: Optional[int] = II("dataset.landmark_count")  # or exactly this many training nodes


@dataclass
class NuggetConfig:
    """Log grid of nuggets, each times the mean diagonal of K."""

    min: float = 1e-3
    max: float = 10.0
    num: int = 101


@dataclass
class FitConfig:
    """How GP hyperparameters are chosen (see gnngp_cli/fit.py)."""

    method: str = "grid"                # grid: the nugget on the validation grid (the paper); mll: maximise the log marginal likelihood
    optimizer: str = "adam"             # mll: adam or lbfgs
    steps: int = 50
    lr: float = 0.05
    per_layer: bool = False             # mll: one sigma_w (sigma_b, ...) per layer
    learn: Optional[list[str]] = None   # mll: the fitted parameters; null: nugget, output_scale and every positive kernel parameter
    nugget: float = 0.1                 # mll: initial nugget, relative to the mean diagonal of K on the training nodes
    output_scale: Optional[float] = None  # mll: initial output scale; null: its maximum-likelihood value at the initial kernel
    log_every: int = 10                 # mll: a progress line every this many steps when not on a terminal (0: none)


@dataclass
class VerifyConfig:
    widths: list[int] = field(default_factory=lambda: [128, 256, 512, 1024])
    seeds: int = 16                     # independent random networks per width
    num_nodes: int = 40                 # nodes of the induced subgraph of the dataset
    unit_norm: bool = True              # divide the features by their mean row norm
    level: float = 0.01                 # FAIL when the test's p-value (or the slope interval) says so at this level
    bootstrap: int = 2000               # bootstrap resamples for the intervals


@dataclass
class ExperimentConfig:
    name: Optional[str] = None          # set by experiment=<preset>
    stand_in: Optional[str] = None      # csbm: replace absent large datasets by a csbm graph of the same size


COMPUTE_BACKENDS = ("local", "dask", "slurm")


@dataclass
class ComputeConfig:
    """Where a GP job computes (``compute=local|dask|slurm``). ``local``: this process (today's
    path). ``dask`` and ``slurm``: every low-rank (``_x``) kernel and its GP on row blocks of a
    Dask cluster (see :mod:`gnngp_cli.rowblocks`): a ``LocalCluster`` here, the scheduler at
    ``address``, or a ``dask_jobqueue.SLURMCluster``."""

    backend: str = "local"
    workers: int = 4                    # LocalCluster workers; SLURM: worker processes per job
    threads_per_worker: int = 1
    memory_limit: str = "auto"          # per LocalCluster worker, e.g. 3GB (auto: this machine's memory / workers)
    spill_dir: Optional[str] = None     # the workers' local folder, where Dask spills what exceeds their memory (default: Dask's temporary folder)
    processes: bool = True              # LocalCluster workers as processes (false: threads of this process)
    address: Optional[str] = None       # an existing scheduler, e.g. tcp://host:8786: no cluster is started
    connect_timeout: float = 10.0       # seconds to reach compute.address
    shards: Optional[str] = None        # row blocks written by gnngp partition (default: partitioned into the data cache)
    dashboard: str = ":8787"            # dashboard address of a started cluster (:0 any free port)
    roots_dir: Optional[str] = None     # where the run writes its roots as row-block files, seen by every worker (default: <data.root>/roots)
    queue: Optional[str] = None         # SLURM partition
    account: Optional[str] = None       # SLURM account
    walltime: str = "02:00:00"          # per SLURM job
    cores: int = 8                      # per SLURM job
    memory: str = "32GB"                # per SLURM job (shared by its workers)
    jobs: int = 4                       # SLURM jobs to submit
    job_extra: list[str] = field(default_factory=list)   # further #SBATCH lines, e.g. ["--constraint=cpu"]
    worker_timeout: float = 600.0       # seconds to wait for the first SLURM worker


@dataclass
class PartitionConfig:
    rows: int = 100_000                 # nodes per row block
    out: Optional[str] = None           # gnngp partition: the folder to write (out=<dir>)


@dataclass
class RunConfig:
    dataset: Any = None                 # a DatasetConfig subclass, chosen by dataset=<name>
    method: str = "gp"                  # gp: the GP kernel; gnn: the GNN (set by model=/kernel=/gnn=)
    depth: int = 2                      # layers of the kernel and of the GNN (kernel.layers, gnn.layers)
    kernel: Any = None                  # a KernelConfig subclass, chosen by kernel=<name>
    gnn: Any = None                     # a GNNConfig subclass, chosen by gnn=<name>
    landmarks: LandmarksConfig = field(default_factory=LandmarksConfig)
    nugget: NuggetConfig = field(default_factory=NuggetConfig)
    fit: FitConfig = field(default_factory=FitConfig)
    data: DataConfig = field(default_factory=DataConfig)
    seed: int = 0
    runs: int = 1
    splits: Optional[str] = None        # all: run every fixed split of the dataset (mean and std over splits)
    repeat_deterministic: bool = True   # false: a GP without randomness runs once whatever runs says
    device: str = "auto"
    dtype: str = "float32"
    max_memory_gb: Optional[float] = None   # refuse exact kernels above this; default 80% of free memory
    results_file: str = "results.csv"  # a file name inside the run dir (move the run dir to write elsewhere)
    progress: bool = True               # epoch progress bar for GNNs (off when not on a terminal)
    resume: bool = False                # in a sweep dir: skip jobs whose results of the same overrides exist
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    compute: ComputeConfig = field(default_factory=ComputeConfig)   # compute=local|dask|slurm
    partition: PartitionConfig = field(default_factory=PartitionConfig)


def register_configs() -> None:
    """The schema and one config option per registry entry: ``model/<kernel>``,
    ``model/<kernel>_x``, ``model/<gnn>`` and ``dataset/<name>``."""
    from hydra.core.config_store import ConfigStore

    from .data.registry import DATASETS, PRESETS
    from .gnn import GNNS
    from .kernels.architectures import KERNELS

    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RunConfig)
    for name, entry in KERNELS.items():
        for low_rank in (False, True):
            cs.store(group="model", name=name + ("_x" if low_rank else ""), package="_global_",
                     node={"method": "gp", "kernel": entry.config(name=name, low_rank=low_rank), "gnn": None})
    for name, entry in GNNS.items():
        cs.store(group="model", name=name, package="_global_", node={"method": "gnn", "gnn": entry.config(name=name), "kernel": None})
    for name, entry in DATASETS.items():
        cs.store(group="dataset", name=name, node=entry.config)
    for option, preset in PRESETS.items():
        cs.store(group="dataset", name=option, node=preset)
    cs.store(group="fit", name="grid", node=FitConfig(method="grid"))
    cs.store(group="fit", name="mll", node=FitConfig(method="mll"))
    cs.store(group="compute", name="local", node=ComputeConfig(backend="local"))
    cs.store(group="compute", name="dask", node=ComputeConfig(backend="dask"))
    cs.store(group="compute", name="slurm", node=ComputeConfig(backend="slurm", workers=1))

    # ${pid:} in run and sweep dirs: two runs started in the same microsecond still differ
    OmegaConf.register_new_resolver("pid", os.getpid, replace=True, use_cache=True)


def method_overrides(overrides: Sequence[str]) -> list[str]:
    """Command-line overrides with ``kernel=<name>`` and ``gnn=<name>`` spelled as the one
    method choice ``model=<name>`` (a sweep ``kernel=a,b`` too). ``kernel`` and ``gnn`` chosen
    together is an error; ``gnn=none`` is no choice."""
    chosen = {}
    out = []
    for o in overrides:
        key, sep, value = o.partition("=")
        if sep and key in ("kernel", "gnn"):
            chosen[key] = value
            if not (key == "gnn" and value == "none"):
                out.append(f"model={value}")
            continue
        out.append(o)
    if "kernel" in chosen and chosen.get("gnn", "none") != "none":
        raise ConfigError("both kernel and gnn are set; choose one: kernel=<name> for a GP or gnn=<name> for a GNN")
    if sum(1 for o in out if o.partition("=")[0] == "model") > 1:
        raise ConfigError("the method is chosen twice (model=, kernel= or gnn=); choose one")
    return out


def check_results_file(name: str) -> None:
    """``results_file`` is confined to the job's run dir: a plain file name, no folders."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or os.path.isabs(name):
        raise ConfigError(f"results_file={name!r} must be a file name inside the run dir (e.g. results.csv); "
                          "to write results elsewhere, set hydra.run.dir (or hydra.sweep.dir) to that folder")


def _choice(value: str, allowed, what: str) -> None:
    if value not in allowed:
        close = difflib.get_close_matches(str(value), list(allowed), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{what}={value!r} is not valid{hint}; use one of {', '.join(allowed)}")


def validate(cfg: Any) -> None:
    """Reject impossible values before any work starts (one-line :class:`ConfigError`)."""
    from .data.registry import DATASETS

    if cfg.dataset is None:
        raise ConfigError("no dataset chosen; use dataset=<name>")
    _choice(str(cfg.dataset.name).lower(), DATASETS, "dataset")
    if cfg.dataset.task is not None:
        _choice(cfg.dataset.task, TASKS, "dataset.task")
    for key in ("train_ratio", "val_ratio"):
        if not 0 <= cfg.dataset[key] <= 1:
            raise ConfigError(f"dataset.{key}={cfg.dataset[key]} must lie in [0, 1]")
    _finite_numbers(cfg)
    if cfg.dataset.get("metric") is not None:
        from .metrics import METRICS

        _choice(cfg.dataset.metric, METRICS, "dataset.metric")
    if cfg.dataset.split_index < 0:
        raise ConfigError(f"dataset.split_index={cfg.dataset.split_index} is out of range; fixed splits are numbered from 0")
    if cfg.get("splits") is not None:
        _choice(str(cfg.splits), ("all",), "splits")
    if str(cfg.dataset.name).lower() in RANDOM_SPLIT_DATASETS:
        if cfg.dataset.val_ratio == 0 and needs_validation(cfg):
            raise ConfigError("dataset.val_ratio=0 leaves no validation nodes, and the nugget (and a GNN's epoch) is chosen on them; use a positive dataset.val_ratio, or fit=mll")
        if cfg.dataset.train_ratio + cfg.dataset.val_ratio >= 1:
            raise ConfigError(f"dataset.train_ratio + dataset.val_ratio = {cfg.dataset.train_ratio + cfg.dataset.val_ratio:g} leaves no test nodes; keep it below 1")
    if cfg.dataset.train_ratio + cfg.dataset.val_ratio > 1:
        raise ConfigError("dataset.train_ratio + dataset.val_ratio must be at most 1")
    _choice(cfg.method, METHODS, "method")
    if cfg.method == "gnn":
        if cfg.gnn is None:
            raise ConfigError("method=gnn but no GNN is chosen; use gnn=<name>")
        _validate_gnn(cfg.gnn)
    elif cfg.kernel is None:
        raise ConfigError("nothing to run: choose a GP kernel (kernel=gcngp) or a GNN (gnn=gcn)")
    else:
        _validate_kernel(cfg.kernel)
    _grid(cfg.nugget, "nugget")
    _validate_fit(cfg)
    lm = cfg.landmarks
    if lm.count is not None and lm.count < 1:
        raise ConfigError(f"landmarks.count={lm.count} must be at least 1")
    if lm.count is None and lm.fraction < 1:
        raise ConfigError(f"landmarks.fraction={lm.fraction} must be >= 1 (each training node is a landmark with probability 1/fraction)")
    if cfg.runs < 1:
        raise ConfigError(f"runs={cfg.runs} must be at least 1")
    _choice(cfg.device, DEVICES, "device")
    _choice(cfg.dtype, DTYPES, "dtype")
    v = cfg.verify
    if len(v.widths) < 2 or min(v.widths) < 1 or len(set(v.widths)) < len(v.widths):
        raise ConfigError(f"verify.widths={list(v.widths)} must hold at least two different positive widths (for the slope)")
    if v.seeds < 2 or v.num_nodes < 2 or v.bootstrap < 100 or not 0 < v.level < 1:
        raise ConfigError("verify.seeds must be >= 2, verify.num_nodes >= 2, verify.bootstrap >= 100 and 0 < verify.level < 1")
    if cfg.experiment.stand_in is not None:
        _choice(cfg.experiment.stand_in, ("csbm",), "experiment.stand_in")
    check_results_file(cfg.results_file)
    if cfg.max_memory_gb is not None and cfg.max_memory_gb <= 0:
        raise ConfigError(f"max_memory_gb={cfg.max_memory_gb} must be positive")
    _validate_compute(cfg)


def _validate_compute(cfg: Any) -> None:
    c = cfg.compute
    _choice(c.backend, COMPUTE_BACKENDS, "compute.backend")
    if cfg.partition.rows < 1:
        raise ConfigError(f"partition.rows={cfg.partition.rows} must be at least 1")
    if c.backend == "local":
        return
    if cfg.method == "gnn":
        raise ConfigError(f"compute={c.backend} runs GP kernels; GNN baselines run with compute=local")
    if not cfg.kernel.low_rank:
        raise ConfigError(f"exact kernels are not distributed: kernel={cfg.kernel.name} with compute={c.backend}; use its low-rank twin "
                          f"kernel={cfg.kernel.name}_x (Nystrom, with landmarks) or compute=local")
    for key in ("workers", "threads_per_worker", "jobs", "cores"):
        if getattr(c, key) < 1:
            raise ConfigError(f"compute.{key}={getattr(c, key)} must be at least 1")


def _validate_kernel(k: Any) -> None:
    from .kernels import BASE_KERNELS
    from .kernels.architectures import KERNELS

    _choice(k.name, KERNELS, "kernel.name")
    _choice(k.base.name, BASE_KERNELS, "kernel.base.name")
    if k.adjacency is not None:
        _choice(k.adjacency, ("sym", "row"), "kernel.adjacency")
    if k.layers < 1:
        raise ConfigError(f"kernel.layers={k.layers} must be at least 1")
    for key in ("sigma_w", "sigma_b", "sigma_w1", "sigma_w2"):
        if k.get(key) is not None and k[key] < 0:
            raise ConfigError(f"kernel.{key}={k[key]} is negative; a standard deviation must be >= 0")
    if k.base.scale <= 0:
        raise ConfigError(f"kernel.base.scale={k.base.scale} must be positive (C0 reads sqrt(scale) x; 1/d matches weights N(0, s_w^2/d))")
    if k.base.gamma <= 0 and k.base.name in ("rbf", "laplacian"):
        raise ConfigError(f"kernel.base.gamma={k.base.gamma} must be positive for the {k.base.name} kernel")
    _grid(k.gamma_grid, "kernel.gamma_grid")
    KERNELS[k.name].validate(k)


def needs_validation(cfg: Any) -> bool:
    """Whether a job chooses something on the validation set: a GNN (early stopping) or a GP
    with ``fit=grid`` (the nugget, and gamma with ``gamma_search``). ``fit=mll`` never reads
    it, so it runs without validation labels (``dataset.val_ratio=0`` or ``dataset.hide_val=true``)."""
    return cfg.method == "gnn" or cfg.fit.method == "grid"


def _validate_fit(cfg: Any) -> None:
    from .fit import LEARNABLE, OPTIMIZERS

    f = cfg.fit
    _choice(f.method, ("grid", "mll"), "fit.method")
    if cfg.dataset.hide_val and needs_validation(cfg):
        raise ConfigError("dataset.hide_val=true leaves no validation labels, which this job needs to choose the nugget (or to stop a GNN); use fit=mll with a GP kernel")
    if f.method == "grid":
        return
    if cfg.method == "gnn":
        raise ConfigError("fit=mll fits the hyperparameters of a GP kernel; use it with kernel=<name>, not gnn=<name>")
    _choice(f.optimizer, OPTIMIZERS, "fit.optimizer")
    if f.steps < 1:
        raise ConfigError(f"fit.steps={f.steps} must be at least 1")
    if not f.lr > 0:
        raise ConfigError(f"fit.lr={f.lr} must be positive")
    if not f.nugget > 0:
        raise ConfigError(f"fit.nugget={f.nugget} is the initial nugget, learned on a log scale: it must be positive (e.g. fit.nugget=0.1)")
    if f.output_scale is not None and not f.output_scale > 0:
        raise ConfigError(f"fit.output_scale={f.output_scale} is the initial output scale, learned on a log scale: it must be positive (or null)")
    for name in f.learn or []:
        _choice(name, LEARNABLE, "fit.learn entry")
    if f.log_every < 0:
        raise ConfigError(f"fit.log_every={f.log_every} must be >= 0")


def _validate_gnn(g: Any) -> None:
    from .gnn import GNNS

    _choice(g.name, GNNS, "gnn.name")
    for key in ("layers", "hidden", "epochs"):
        if g[key] is not None and g[key] < 1:
            raise ConfigError(f"gnn.{key}={g[key]} must be at least 1")
    if g.lr is not None and g.lr <= 0:
        raise ConfigError(f"gnn.lr={g.lr} must be positive")
    if not 0 <= g.dropout < 1 or g.weight_decay < 0:
        raise ConfigError("gnn.dropout must lie in [0, 1) and gnn.weight_decay must be >= 0")
    if g.batch_size is not None and g.batch_size < 0:
        raise ConfigError(f"gnn.batch_size={g.batch_size} must be at least 1 (0 or null: full batch)")
    graph_layers = GNNS[g.name].graph_layers(g.layers)
    if graph_layers == 0 and g.batch_size:
        raise ConfigError(f"gnn={g.name} trains full batch only; set gnn.batch_size=null")
    if g.get("hops") is not None and g.hops < 0:
        raise ConfigError(f"gnn.hops={g.hops} must be at least 0")
    if g.fanouts is not None and len(g.fanouts) != graph_layers:
        raise ConfigError(f"gnn.fanouts has {len(g.fanouts)} entries but {g.name} has {graph_layers} graph layers; give one fanout per graph layer (-1 = all)")


def _finite_numbers(cfg: Any) -> None:
    """No setting may be NaN or infinite (a nugget grid up to inf gives NaN predictions)."""
    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")
        elif isinstance(node, float) and not math.isfinite(node):
            raise ConfigError(f"{path}={node} is not a finite number; give a finite value")
    try:
        tree = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else None
    except Exception:  # noqa: BLE001 - an unresolvable value is reported by the checks below
        tree = None
    if tree is not None:
        walk({k: v for k, v in tree.items() if k != "hydra"}, "")


def _grid(grid: Any, what: str) -> None:
    if not (math.isfinite(grid.min) and math.isfinite(grid.max)):
        raise ConfigError(f"{what}.min={grid.min} and {what}.max={grid.max} must be finite numbers")
    if grid.min <= 0:
        raise ConfigError(f"{what}.min={grid.min} must be positive (the grid is log-spaced)")
    if grid.min >= grid.max:
        raise ConfigError(f"{what}.min={grid.min} must be below {what}.max={grid.max}")
    if grid.num < 1:
        raise ConfigError(f"{what}.num={grid.num} must be at least 1")


def method_defaults(table: Mapping[str, Mapping[str, Any]], dataset: str, task: str) -> dict:
    """A method's defaults for a dataset from its table: ``"*"`` for every dataset, then the
    task's entry (``"regression"``), then the dataset's own entry; the later wins."""
    out: dict = {}
    for key in ("*", task, dataset):
        out.update(table.get(key, {}))
    return out


def resolve_method_defaults(cfg: Any, task: str) -> None:
    """Fill the method's ``null`` settings with its defaults for the loaded dataset (its task
    is known only then, e.g. for a custom graph). Explicit values are kept."""
    from .gnn import GNNS
    from .kernels.architectures import KERNELS

    node, entry = (cfg.gnn, GNNS[cfg.gnn.name]) if cfg.method == "gnn" else (cfg.kernel, KERNELS[cfg.kernel.name])
    for key, value in method_defaults(entry.defaults, str(cfg.dataset.name).lower(), task).items():
        if key in node and node[key] is None:
            node[key] = value


def config_fields(cls: type) -> list[str]:
    """The keys of a config dataclass (for docs and tests)."""
    return [f.name for f in fields(cls)]
