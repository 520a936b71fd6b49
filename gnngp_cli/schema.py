"""Config schemas: the typed dataclasses Hydra composes and checks, and nothing else.

The bottom of the package's layers: the registries (datasets, kernels, GNNs, metrics) import
these schemas and subclass them beside their code; this module imports none of them. Which
options exist (``dataset=cora``, ``model=gcngp_x``, ``compute=dask``) is the registries' say,
stored into Hydra's ConfigStore by :mod:`gnngp_cli.compose`; which values are possible is
checked by :mod:`gnngp_cli.config` before any work.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from omegaconf import II, MISSING

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
TASKS = ("classification", "regression")
METHODS = ("gp", "gnn")
OPTIMIZERS = ("adam", "lbfgs")   # fit=mll
SQRT_TENTH = math.sqrt(0.1)   # the paper's bias (kernels) and learning rate (GNNs) on regression sets


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
    """A log-spaced grid: ``num`` values from ``min`` to ``max``."""

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
class NuggetConfig(GridConfig):
    """Log grid of nuggets, each times the mean diagonal of K."""

    min: float = 1e-3
    max: float = 10.0


@dataclass
class FitConfig:
    """How GP hyperparameters are chosen (see gnngp_cli/job/fit.py)."""

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
class TableConfig:
    """How ``gnngp report`` lays out a paper table from its experiment's sweep."""

    title: str = ""
    rows: str = "dataset"               # dataset: a row per dataset, a column per model; gnn: a row per GNN and its kernel, columns per dataset


@dataclass
class ExperimentConfig:
    name: Optional[str] = None          # set by experiment=<preset>
    stand_in: Optional[str] = None      # csbm: replace absent large datasets by a csbm graph of the same size
    table: Optional[TableConfig] = None  # the paper table this experiment's sweep fills (gnngp report)


@dataclass
class ComputeConfig:
    """Where a GP job computes (``compute=local|dask|slurm``). ``local``: this process (today's
    path). ``dask`` and ``slurm``: every low-rank (``_x``) kernel and its GP on row blocks of a
    Dask cluster (see :mod:`gnngp_cli.backends.rowblocks`): a ``LocalCluster`` here, the scheduler at
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
    max_memory_gb: Optional[float] = None   # refuse exact kernels above this; default half of the free memory
    results_file: str = "results.csv"  # a file name inside the run dir (move the run dir to write elsewhere)
    progress: bool = True               # epoch progress bar for GNNs (off when not on a terminal)
    resume: bool = False                # in a sweep dir: skip jobs whose results of the same overrides exist
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    compute: ComputeConfig = field(default_factory=ComputeConfig)   # compute=local|dask|slurm
    partition: PartitionConfig = field(default_factory=PartitionConfig)


def config_fields(cls: type) -> list[str]:
    """The keys of a config dataclass (for docs and tests)."""
    return [f.name for f in fields(cls)]
