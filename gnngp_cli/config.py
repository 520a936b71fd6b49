"""Typed configuration: dataclass schemas in Hydra's ConfigStore, validated before any work.

A wrong key or a wrong type fails when Hydra composes the config; an impossible value
(``layers < 1``, a negative sigma, a nugget grid with ``min >= max``...) fails in
:func:`validate`, before any data is loaded.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import II, OmegaConf

from .errors import ConfigError
from .kernels import ARCHITECTURES, BASE_KERNELS
from .metrics import METRICS

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
TASKS = ("classification", "regression")
METHODS = ("gp", "gnn")


@dataclass
class DataConfig:
    root: Optional[str] = None          # writable cache; default $GNNGP_DATA_ROOT or ~/.cache/gnngp
    mirror: Optional[str] = None        # read-only offline mirror (<Name>/raw/...); env GNNGP_DATA_MIRROR
    download: bool = True
    download_timeout: float = 20.0


@dataclass
class DatasetConfig:
    name: str = "csbm"
    task: Optional[str] = None          # override the inferred task (custom datasets)
    path: Optional[str] = None          # custom datasets: the folder with the files
    split_index: int = 0                # fixed split: geom-gcn (chameleon, squirrel), heterophily suite (0..9)
    metric: Optional[str] = None        # accuracy | roc_auc | r2; default: roc_auc for two classes, accuracy, r2 for regression
    split_seed: int = 0                 # random splits (crocodile, csbm, custom)
    train_ratio: float = 0.1
    val_ratio: float = 0.1
    center: bool = False
    scale: bool = False
    sigma_b: float = 0.0                # the bias sigma kernels use on this dataset
    landmark_fraction: float = 1.0      # the landmark fraction 1/k low-rank kernels use on this dataset
    landmark_count: Optional[int] = None  # or an exact landmark count
    large: bool = False                 # too large for exact kernels: experiments use the low-rank twins
    sage_sigma_w1: float = 0.0          # SAGE-GP's sigma_w1 on this dataset (sqrt(0.1) on Reddit)
    gnn_lr: float = 0.01                # GNN defaults on this dataset
    gnn_epochs: int = 100
    gnn_batch_norm: bool = False
    gnn_batch_size: Optional[int] = None
    # csbm generator
    num_nodes: int = 3000
    avg_degree: float = 10.0
    num_classes: int = 4
    homophily: float = 0.6
    num_features: int = 32
    snr: float = 0.3


@dataclass
class BaseKernelConfig:
    name: str = "linear"
    gamma: float = 1.0
    c: float = 0.0
    d: float = 1.0


@dataclass
class GridConfig:
    min: float = 1e-2
    max: float = 1e2
    num: int = 101


@dataclass
class KernelConfig:
    name: str = "gcngp"
    low_rank: bool = False
    layers: int = II("depth")
    sigma_w: float = 1.0
    sigma_b: float = II("dataset.sigma_b")
    alpha: float = 0.1                  # gcn2gp
    theta: float = 0.5                  # gcn2gp
    sigma_w1: float = II("dataset.sage_sigma_w1")  # sagegp
    sigma_w2: float = 1.0               # sagegp
    adjacency: Optional[str] = None     # sym or row; default per architecture
    base: BaseKernelConfig = field(default_factory=BaseKernelConfig)
    gamma_search: bool = False          # choose base.gamma on validation over gamma_grid
    gamma_grid: GridConfig = field(default_factory=GridConfig)
    first: Any = None                   # composed: blocks of layer 1
    hidden: Any = None                  # composed: blocks of layers 2..L
    coefficients: Any = None            # gprgp: filter [g0, g1, ...], or a list of them chosen on validation; null: the default grid


@dataclass
class GNNConfig:
    name: str = "gcn"
    layers: int = II("depth")
    hidden: int = 256
    dropout: float = 0.5
    lr: float = II("dataset.gnn_lr")
    weight_decay: float = 0.0
    epochs: int = II("dataset.gnn_epochs")
    batch_norm: bool = II("dataset.gnn_batch_norm")
    batch_size: Optional[int] = II("dataset.gnn_batch_size")   # null: full batch
    fanouts: Optional[list[int]] = None                           # mini-batch neighbours per layer; -1 = all
    alpha: float = 0.1                                             # gcn2; gprgnn's PageRank initialisation
    hops: int = 10                                                 # gprgnn: propagation steps K
    theta: float = 0.5                                             # gcn2


@dataclass
class LandmarksConfig:
    fraction: float = II("dataset.landmark_fraction")   # each training node is a landmark w.p. 1/fraction
    count: Optional[int] = II("dataset.landmark_count")  # or exactly this many training nodes


@dataclass
class NuggetConfig:
    min: float = 1e-3
    max: float = 10.0
    num: int = 101


@dataclass
class VerifyConfig:
    widths: list[int] = field(default_factory=lambda: [128, 512, 2048])
    samples: int = 20
    num_nodes: int = 30
    avg_degree: float = 4.0
    num_features: int = 8


@dataclass
class ExperimentConfig:
    name: Optional[str] = None          # set by experiment=<preset>
    stand_in: Optional[str] = None      # csbm: replace absent large datasets by a csbm graph of the same size


@dataclass
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    method: str = "gp"                  # gp: the GP kernel; gnn: the GNN (set by gnn=<name>)
    depth: int = 2                      # layers of the kernel and of the GNN (kernel.layers, gnn.layers)
    kernel: Optional[KernelConfig] = None
    gnn: GNNConfig = field(default_factory=GNNConfig)
    landmarks: LandmarksConfig = field(default_factory=LandmarksConfig)
    nugget: NuggetConfig = field(default_factory=NuggetConfig)
    data: DataConfig = field(default_factory=DataConfig)
    seed: int = 0
    runs: int = 1
    splits: Optional[str] = None        # all: run every fixed split of the dataset (mean and std over splits)
    repeat_deterministic: bool = True   # false: a GP without randomness runs once whatever runs says
    device: str = "auto"
    dtype: str = "float32"
    max_memory_gb: Optional[float] = None   # refuse exact kernels above this; default 80% of free memory
    results_file: str = "results.csv"
    progress: bool = True               # epoch progress bar for GNNs (off when not on a terminal)
    resume: bool = False                # in a sweep dir: skip jobs whose results already exist
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RunConfig)


def _choice(value: str, allowed, what: str) -> None:
    if value not in allowed:
        close = difflib.get_close_matches(str(value), list(allowed), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{what}={value!r} is not valid{hint}; use one of {', '.join(allowed)}")


def validate(cfg: Any) -> None:
    """Reject impossible values before any work starts (one-line :class:`ConfigError`)."""
    from .data import DATASETS

    _choice(str(cfg.dataset.name).lower(), DATASETS, "dataset")
    if cfg.dataset.task is not None:
        _choice(cfg.dataset.task, TASKS, "dataset.task")
    if cfg.dataset.metric is not None:
        _choice(cfg.dataset.metric, METRICS, "dataset.metric")
    if cfg.dataset.split_index < 0:
        raise ConfigError(f"dataset.split_index={cfg.dataset.split_index} is out of range; fixed splits are numbered from 0")
    if cfg.get("splits") is not None:
        _choice(str(cfg.splits), ("all",), "splits")
    for key in ("train_ratio", "val_ratio"):
        if not 0 <= cfg.dataset[key] <= 1:
            raise ConfigError(f"dataset.{key}={cfg.dataset[key]} must lie in [0, 1]")
    if cfg.dataset.train_ratio + cfg.dataset.val_ratio > 1:
        raise ConfigError("dataset.train_ratio + dataset.val_ratio must be at most 1")
    _choice(cfg.method, METHODS, "method")
    if cfg.method == "gnn":
        _validate_gnn(cfg.gnn)
    elif cfg.kernel is None:
        raise ConfigError("nothing to run: choose a GP kernel (kernel=gcngp) or a GNN (gnn=gcn)")
    else:
        _validate_kernel(cfg.kernel)
    _grid(cfg.nugget, "nugget")
    lm = cfg.landmarks
    if lm.count is not None and lm.count < 1:
        raise ConfigError(f"landmarks.count={lm.count} must be at least 1")
    if lm.count is None and lm.fraction < 1:
        raise ConfigError(f"landmarks.fraction={lm.fraction} must be >= 1 (each training node is a landmark with probability 1/fraction)")
    if cfg.runs < 1:
        raise ConfigError(f"runs={cfg.runs} must be at least 1")
    _choice(cfg.device, DEVICES, "device")
    _choice(cfg.dtype, DTYPES, "dtype")
    if not cfg.verify.widths or min(cfg.verify.widths) < 1 or cfg.verify.samples < 1 or cfg.verify.num_nodes < 2:
        raise ConfigError("verify.widths must be positive widths, verify.samples >= 1 and verify.num_nodes >= 2")
    if cfg.experiment.stand_in is not None:
        _choice(cfg.experiment.stand_in, ("csbm",), "experiment.stand_in")
    if cfg.max_memory_gb is not None and cfg.max_memory_gb <= 0:
        raise ConfigError(f"max_memory_gb={cfg.max_memory_gb} must be positive")


def _validate_kernel(k: Any) -> None:
    _choice(k.name, ARCHITECTURES, "kernel.name")
    _choice(k.base.name, BASE_KERNELS, "kernel.base.name")
    if k.adjacency is not None:
        _choice(k.adjacency, ("sym", "row"), "kernel.adjacency")
    if k.layers < 1:
        raise ConfigError(f"kernel.layers={k.layers} must be at least 1")
    for key in ("sigma_w", "sigma_b", "sigma_w1", "sigma_w2"):
        if k[key] < 0:
            raise ConfigError(f"kernel.{key}={k[key]} is negative; a standard deviation must be >= 0")
    if not 0 <= k.alpha <= 1 or k.theta < 0:
        raise ConfigError("kernel.alpha must lie in [0, 1] and kernel.theta must be >= 0")
    if k.base.gamma <= 0 and k.base.name in ("rbf", "laplacian"):
        raise ConfigError(f"kernel.base.gamma={k.base.gamma} must be positive for the {k.base.name} kernel")
    _grid(k.gamma_grid, "kernel.gamma_grid")
    if k.get("coefficients") is not None:
        from .kernels.filters import filter_grid

        filter_grid(OmegaConf.to_container(k.coefficients) if OmegaConf.is_config(k.coefficients) else k.coefficients)


def _validate_gnn(g: Any) -> None:
    from .gnn import GNN_LABELS

    _choice(g.name, GNN_LABELS, "gnn.name")
    for key in ("layers", "hidden", "epochs"):
        if g[key] < 1:
            raise ConfigError(f"gnn.{key}={g[key]} must be at least 1")
    if g.lr <= 0:
        raise ConfigError(f"gnn.lr={g.lr} must be positive")
    if not 0 <= g.dropout < 1 or g.weight_decay < 0:
        raise ConfigError("gnn.dropout must lie in [0, 1) and gnn.weight_decay must be >= 0")
    if g.batch_size is not None and g.batch_size < 1:
        raise ConfigError(f"gnn.batch_size={g.batch_size} must be at least 1 (or null for full batch)")
    if g.name in ("gprgnn", "h2gcn") and g.batch_size is not None:
        raise ConfigError(f"gnn={g.name} trains full batch only; set gnn.batch_size=null")
    if g.hops < 0:
        raise ConfigError(f"gnn.hops={g.hops} must be at least 0")
    graph_layers = 1 if g.name == "gin" else g.layers
    if g.fanouts is not None and len(g.fanouts) != graph_layers:
        raise ConfigError(f"gnn.fanouts has {len(g.fanouts)} entries but {g.name} has {graph_layers} graph layers; give one fanout per graph layer (-1 = all)")


def check_method_overrides(overrides: Any) -> None:
    """``kernel=...`` and ``gnn=...`` chosen together on the command line is an error (a GNN
    config otherwise replaces the default kernel)."""
    def chosen(group: str) -> bool:
        return any(not o.startswith("~") and o.lstrip("+").split("=")[0].split(".")[0] == group for o in overrides)

    def value(group: str) -> str:
        return next((o.split("=", 1)[1] for o in overrides if o.lstrip("+").split("=")[0] == group and "=" in o), "")

    if chosen("kernel") and chosen("gnn") and value("gnn") != "none":
        raise ConfigError("both kernel and gnn are set; choose one: kernel=<name> for a GP or gnn=<name> for a GNN")


def _grid(grid: Any, what: str) -> None:
    if grid.min <= 0:
        raise ConfigError(f"{what}.min={grid.min} must be positive (the grid is log-spaced)")
    if grid.min >= grid.max:
        raise ConfigError(f"{what}.min={grid.min} must be below {what}.max={grid.max}")
    if grid.num < 1:
        raise ConfigError(f"{what}.num={grid.num} must be at least 1")
