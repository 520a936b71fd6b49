"""Config schemas: the typed dataclasses Hydra composes and checks, and the specs they become.

The bottom of the package's layers: the registries (datasets, kernels, GNNs, metrics) import
these schemas and subclass them beside their code; this module imports none of them. Which
options exist (``dataset=cora``, ``model=gcngp_x``, ``compute=dask``) is the registries' say,
stored into Hydra's ConfigStore by :mod:`gnngp_cli.compose`; which values are possible is
checked by :mod:`gnngp_cli.config` before any work.

Once checked, a job's composed config is parsed once (:func:`gnngp_cli.config.parse`) into an
instance of these same dataclasses, frozen (:func:`freeze`): the job's *spec*. Below the job
layer nothing reads the config; kernels, data, GNNs, the GP's algebra and the backends read
their spec's typed fields. A changed spec is a new one (:func:`revised`), never an edit.
"""
from __future__ import annotations

import math
from dataclasses import FrozenInstanceError, dataclass, field, fields, is_dataclass, replace
from functools import lru_cache
from typing import Any, Optional

from omegaconf import II, MISSING

DEVICES = ("auto", "cpu", "cuda")
LANDMARK_POOLS = ("train", "all")   # landmarks.pool: where the low-rank kernels' landmarks are drawn
DTYPES = ("float32", "float64")
TASKS = ("classification", "regression")
METHODS = ("gp", "gnn")
FIT_METHODS = ("grid", "mll")   # fit=<method>: the nugget grid on validation, or the marginal likelihood
OPTIMIZERS = ("adam", "lbfgs")   # fit=mll
PROTOCOLS = ("none", "misclassification", "leave_out_classes", "feature_shift", "structural_shift", "random_split")   # protocol=<name>
CONFORMAL = ("none", "aps", "raps", "daps", "snaps", "tps")   # conformal=<score>: prediction sets (see gnngp_cli/conformal.py)
GNN_UNCERTAINTY = ("softmax", "temperature", "ensemble", "mc_dropout")   # gnn.uncertainty: a GNN's class probabilities
GNN_REGIMES = ("standard", "ntk")   # gnn.regime: how a GNN trains
GNN_PROPAGATION = ("sparse", "edges")   # gnn.propagation: how a layer reads its neighbours
GNN_RECIPES = ("paper", "platonov2023")   # gnn.recipe: the architecture and training protocol of a GNN baseline
SQRT_TENTH = math.sqrt(0.1)   # the paper's bias (kernels) and learning rate (GNNs) on regression sets


class Options:
    """The base of every config dataclass. Hydra composes and checks the dataclasses as configs;
    an instance that :func:`freeze` made is a spec: typed, and an assignment to it raises
    ``FrozenInstanceError``. (The dataclasses themselves stay unfrozen: OmegaConf makes a frozen
    dataclass's config read-only, and Hydra could then apply no override.)"""

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen_", False):
            raise FrozenInstanceError(f"cannot assign to {type(self).__name__}.{name}: a spec is frozen; make a new one with schema.revised")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.__dict__.get("_frozen_", False):
            raise FrozenInstanceError(f"cannot delete {type(self).__name__}.{name}: a spec is frozen")
        object.__delattr__(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        """An option that only some entries declare (an architecture's ``sigma_w``, a dataset's
        ``path``): its value, or ``default`` where this entry has no such field."""
        return getattr(self, name, default)

    @property
    def frozen(self) -> bool:
        return bool(self.__dict__.get("_frozen_", False))


def freeze(options: Any) -> Any:
    """``options`` (a dataclass instance of the schemas, and every one inside it) frozen in place
    and returned: a spec."""
    if isinstance(options, Options):
        for f in fields(options):
            freeze(getattr(options, f.name))
        object.__setattr__(options, "_frozen_", True)
    elif isinstance(options, (list, tuple)):
        for value in options:
            freeze(value)
    elif isinstance(options, dict):
        for value in options.values():
            freeze(value)
    return options


def revised(spec: Any, **changes: Any) -> Any:
    """A new spec: ``spec`` with ``changes`` (``dataclasses.replace``), frozen."""
    return freeze(replace(spec, **changes))


@dataclass
class DataConfig(Options):
    root: Optional[str] = None          # writable cache; default $GNNGP_DATA_ROOT or ~/.cache/gnngp
    mirror: Optional[str] = None        # read-only offline mirror (<Name>/raw/...); env GNNGP_DATA_MIRROR
    download: bool = True               # fetch a dataset that is in neither the cache nor the mirror (false: fail instead)
    download_timeout: float = 20.0      # seconds before a download attempt gives up
    verify: bool = True                 # check raw files against the published sha256 table (false: warn)
    shared_cache: bool = False          # trust caches (processed files, shards, node orders) that another user owns and no one else can write (a lab's read-only cache); group- or world-writable ones never
    order: str = "none"                 # none | rcm | metis: number the nodes so that neighbours sit close, for the graph product A Q (computed once per graph, cached under data.root/orders; rows, landmarks and results stay in the graph's own ids)


@dataclass
class DatasetConfig(Options):
    """What every dataset has; a dataset with settings of its own subclasses it."""

    name: str = MISSING                 # the dataset (set by dataset=<name>)
    task: Optional[str] = None          # override the inferred task (custom datasets)
    split_index: int = 0                # fixed split: geom-gcn (chameleon, squirrel), heterophily suite (0..9)
    split_seed: int = 0                 # random splits (crocodile, custom); csbm: its whole generated graph and split
    metric: Optional[str] = None        # accuracy | roc_auc | r2; default: roc_auc for two classes, accuracy, r2 for regression
    train_ratio: float = 0.1            # random splits: the share of nodes for training
    val_ratio: float = 0.1              # random splits: the share of nodes for validation
    hide_val: bool = False              # true: the validation nodes lose their labels (no validation set; needs fit=mll)
    center: bool = False                # subtract each feature's mean
    scale: bool = False                 # divide each feature by its standard deviation
    landmark_fraction: float = 1.0      # the landmark fraction 1/k low-rank kernels use on this dataset
    landmark_count: Optional[int] = None  # or an exact landmark count
    large: bool = False                 # too large for exact kernels: experiments use the low-rank twins


@dataclass
class BaseKernelConfig(Options):
    name: str = "linear"                # the input covariance C0: linear, polynomial, rbf, laplacian, arccos, sigmoid (not PSD)
    gamma: float = 1.0                  # rbf: exp(-gamma |x - x'|^2 / d), d the feature count
    c: float = 0.0                      # polynomial: (x.x' + c)^d
    d: float = 1.0                      # polynomial: the degree d of (x.x' + c)^d
    scale: float = 1.0                  # C0 reads sqrt(scale) x: linear C0 = scale x.x' (1/d matches weights N(0, s_w^2/d); the paper uses 1)


@dataclass
class GridConfig(Options):
    """A log-spaced grid: ``num`` values from ``min`` to ``max``."""

    min: float = 1e-2                   # the grid's smallest value
    max: float = 1e2                    # the grid's largest value
    num: int = 101                      # how many values, log-spaced from min to max


@dataclass
class KernelConfig(Options):
    """What every GP kernel has; each architecture subclasses it with its own parameters."""

    name: str = MISSING                 # the kernel (set by kernel=<name>)
    low_rank: bool = False              # the low-rank (Nystrom) twin on landmarks (set by kernel=<name>_x)
    layers: int = II("depth")           # layers of the kernel's network (default: depth)
    adjacency: Optional[str] = None     # sym or row; default per architecture
    base: BaseKernelConfig = field(default_factory=BaseKernelConfig)   # the input covariance C0 of the features
    gamma_search: bool = False          # choose base.gamma on validation over gamma_grid
    gamma_grid: GridConfig = field(default_factory=GridConfig)   # the values of base.gamma that gamma_search tries
    limit: str = "nngp"                 # the infinite-width limit: nngp (the network at initialisation) or ntk (its neural tangent kernel: trained by gradient descent)


@dataclass
class GNNConfig(Options):
    """What every GNN baseline has; a GNN with settings of its own subclasses it. ``null``
    settings take the defaults of :data:`gnngp_cli.gnn.TRAINING_DEFAULTS` for the dataset."""

    name: str = MISSING                 # the GNN (set by gnn=<name>)
    layers: int = II("depth")           # graph layers (default: depth)
    recipe: str = "paper"               # paper: the GNNGP paper's networks and training; platonov2023: Platonov et al. (ICLR 2023)'s residual networks with layer norm (gcn, sage)
    hidden: Optional[int] = None        # hidden units per layer; null: 256 (512 with gnn.recipe=platonov2023)
    dropout: Optional[float] = None     # dropout probability; null: 0.5 (0.2 with gnn.recipe=platonov2023)
    lr: Optional[float] = None          # null: 0.01, sqrt(0.1) on regression sets (3e-5 with gnn.recipe=platonov2023)
    weight_decay: float = 0.0           # Adam's weight decay (AdamW's with gnn.recipe=platonov2023)
    epochs: Optional[int] = None        # null: 100 (200 on crocodile, 10 on reddit; 1000 steps with gnn.recipe=platonov2023)
    batch_norm: Optional[bool] = None   # null: on for chameleon, squirrel, crocodile, arxiv
    batch_size: Optional[int] = None    # null: full batch (10240 on reddit); 0: full batch
    fanouts: Optional[list[int]] = None  # mini-batch neighbours per graph layer; -1 = all
    uncertainty: str = "softmax"        # class probabilities: softmax, temperature (scaled on validation), ensemble (of gnn.members models), mc_dropout (gnn.mc_samples passes)
    members: int = 5                    # gnn.uncertainty=ensemble: models trained with seeds seed, seed + 1000, ...
    mc_samples: int = 20                # gnn.uncertainty=mc_dropout: forward passes with dropout on
    propagation: str = "sparse"         # sparse: one cached sparse-matrix product per layer where the layer allows (GCN, GCNII, GIN, GraphSAGE; full batch and inference); edges: PyG's edge-wise messages
    regime: str = "standard"            # standard (Adam on the cross-entropy, the paper's) or ntk: full-batch gradient descent on the MSE in the NTK parameterisation, learning rate inference.learning_rate (gnn=gcn: the finite network of kernel=gcngp kernel.limit=ntk)


@dataclass
class LandmarksConfig(Options):
    fraction: float = II("dataset.landmark_fraction")   # each node of landmarks.pool is a landmark w.p. 1/fraction
    count: Optional[int] = II("dataset.landmark_count")  # or exactly this many nodes of landmarks.pool
    pool: str = "train"                 # train: landmarks among the training nodes (the paper's); all: among every node (Nystrom reads features, not labels)


@dataclass
class NuggetConfig(GridConfig):
    """Log grid of nuggets, each times the mean diagonal of K."""

    min: float = 1e-3                   # the smallest nugget, times the mean diagonal of K
    max: float = 10.0                   # the largest nugget, times the mean diagonal of K


@dataclass
class FitConfig(Options):
    """How GP hyperparameters are chosen (see gnngp_cli/gp/mll.py)."""

    method: str = "grid"                # grid: the nugget on the validation grid (the paper); mll: maximise the log marginal likelihood
    optimizer: str = "adam"             # mll: adam or lbfgs
    steps: int = 50                     # mll: optimiser steps
    lr: float = 0.05                    # mll: the optimiser's learning rate
    per_layer: bool = False             # mll: one sigma_w (sigma_b, ...) per layer
    learn: Optional[list[str]] = None   # mll: the fitted parameters; null: nugget, output_scale and every positive kernel parameter
    nugget: float = 0.1                 # mll: initial nugget, relative to the mean diagonal of K on the training nodes
    output_scale: Optional[float] = None  # mll: initial output scale; null: its maximum-likelihood value at the initial kernel
    log_every: int = 10                 # mll: a progress line every this many steps when not on a terminal (0: none)


@dataclass
class LikelihoodConfig(Options):
    """How a GP classifies (``likelihood=gaussian|dirichlet``; see gnngp_cli/gp/likelihoods.py)."""

    name: str = "gaussian"              # gaussian: regress one-hot labels (the paper); dirichlet: Milios et al. 2018's Dirichlet-based GP classification
    alpha: Optional[float] = None       # dirichlet: the pseudo-count alpha_eps every class gets; null: the value of alpha_grid of the lowest validation NLL
    alpha_grid: list[float] = field(default_factory=lambda: [0.001, 0.01, 0.1])   # dirichlet, alpha null: the values tried (0.01 is Milios et al.'s and GPyTorch's default)
    probabilities: str = "auto"         # class probabilities E[softmax(f / T)] of the latent Gaussian: mc (Monte Carlo, fixed seed), probit (closed form), auto (probit: as calibrated as mc on the citation sets, at a fraction of its cost)
    samples: int = 256                  # probabilities=mc: draws per node
    temperature: Optional[bool] = None  # fit the softmax temperature T and a factor on the latent variance on the validation NLL; null: on for gaussian, off for dirichlet


@dataclass
class InferenceConfig(Options):
    """Predictions along training time (gnngp_cli/gp/inference.py, TrainingTimes)."""

    time: Any = None                    # null: the GP posterior at the nugget chosen on validation; a training time t, inf (kernel regression), or a list of times, the best on validation chosen (early stopping)
    learning_rate: float = 1.0          # inference.time: eta of the full-batch gradient flow on the MSE loss 1/(2 n_train) sum ||f - y||^2


@dataclass
class ProtocolConfig(Options):
    """An uncertainty protocol (``protocol=<name>``; see gnngp_cli/data/protocols.py): the
    splits and the test nodes out of distribution, made from ``protocol.seed``."""

    name: str = "none"                  # none, misclassification, leave_out_classes, feature_shift, structural_shift
    seed: int = II("seed")              # the protocol's draws (left-out classes, perturbed nodes, the core's split); default: the job's seed (its runs share the split)
    left_out: Optional[int] = None      # leave_out_classes: how many classes leave training and validation; null: a third of them, at least 1
    share: float = 0.5                  # feature_shift: the share of test nodes whose features are perturbed
    perturbation: str = "noise"         # feature_shift: noise (features plus Gaussian noise of strength times each feature's std) or swap (another node's features)
    strength: float = 1.0               # feature_shift=noise: the noise's standard deviation, in units of each feature's std
    ordering: str = "pagerank"          # structural_shift: pagerank or personalised (PageRank from the top-degree node); the central half is in distribution
    shares: list[float] = field(default_factory=lambda: [0.3, 0.1, 0.1])   # structural_shift: train, validation and in-distribution test shares of all nodes (the rest is the OOD test)
    split: list[float] = field(default_factory=lambda: [0.2, 0.1])   # random_split: train and validation shares of all nodes, the rest the test (CF-GNN's and GETS's 20/10/70)


@dataclass
class ConformalConfig(Options):
    """Conformal prediction (``conformal=<score>``; see gnngp_cli/conformal.py): sets (intervals
    for regression) calibrated on a share of the test nodes, over many random splits."""

    name: str = "none"                  # none, aps, raps, daps, snaps, tps (regression: any score but none gives intervals)
    alpha: float = 0.1                  # the miscoverage: sets hold the true label with probability at least 1 - alpha
    splits: int = 100                   # random calibration/test splits of the test nodes (mean and std over them)
    calibration: float = 0.5            # the share of the test nodes each split calibrates on
    seed: int = II("seed")              # the splits' and APS's draws; default: the job's seed
    penalty: float = 0.01               # raps: the penalty per rank past kreg
    kreg: int = 1                       # raps: the ranks free of penalty
    neighbours: float = 0.5             # daps: the weight of the neighbours' mean score
    xi: float = 0.3333333333333333      # snaps: the weight of the neighbours' mean score
    mu: float = 0.3333333333333333      # snaps: the weight of the feature-similar nodes' mean score
    k: int = 20                         # snaps: the feature-similar nodes (cosine) per node


@dataclass
class ActiveConfig(Options):
    """Active learning (``active=<strategy>``; see gnngp_cli/job/active_job.py): labels bought one
    step at a time from a pool (every node but the test nodes), chosen by the strategy, the GP's
    posterior updated per label in closed form."""

    name: str = "none"                  # none, or the strategy: random, degree, pagerank, variance, entropy, v_opt, sigma_opt, eer, featprop, age
    budgets: list[int] = field(default_factory=lambda: [10, 20, 40, 80, 160])   # the label counts at which a row is written (increasing)
    initial: int = 0                    # random pool nodes labelled before the strategy chooses (seeded by active.seed)
    batch: int = 1                      # labels chosen per step: the batch's highest scores, then their rank-one updates (one rank-batch step)
    seed: int = II("seed")              # the random draws (the initial labels, random's picks, the landmarks); default: the job's seed
    model: str = "gp"                   # what predicts at each budget: gp (the GP's posterior mean); gcn: the GCN too (gnn=gcn's defaults, trained on the labels bought), its test metric in gcn_test
    nugget: float = 0.1                 # fit=grid: the fixed nugget, times the mean diagonal of K (no validation set chooses it); fit=mll chooses it on the labels so far
    epochs: Optional[int] = None        # the GCN's epochs (active=age, retrained per step, and active.model=gcn); null: gnn=gcn's default for the dataset


@dataclass
class VerifyConfig(Options):
    widths: list[int] = field(default_factory=lambda: [64, 128, 256, 512])   # hidden widths of the random networks
    seeds: int = 256                    # independent random networks per width (many narrow ones: the most power per second)
    resolution: float = 0.02            # a PASS needs a check that finds an error this large along the kernel four times in five: more networks are drawn until it does
    max_seeds: int = 2048               # at most this many networks per width drawn for resolution; a check that would need more is INCONCLUSIVE
    num_nodes: int = 40                 # nodes of the induced subgraph of the dataset
    unit_norm: bool = True              # divide the features by their mean row norm
    level: float = 0.01                 # FAIL when the test's p-value (or the slope interval) says so at this level
    bootstrap: int = 2000               # bootstrap resamples for the intervals
    activation_samples: int = 1_000_000  # Gaussian draws per activation map in the activation check (its error falls like 1/sqrt of them)
    oracle: bool = False                # sample the kernel's hand-written PyTorch Geometric network (gcngp, gatgp) instead of the one its blocks' own layers make


@dataclass
class TableConfig(Options):
    """How ``gnngp report`` lays out a paper table from its experiment's sweep."""

    title: str = ""                     # the table's title in the report
    rows: str = "dataset"               # dataset: a row per dataset, a column per model; gnn: a row per GNN and its kernel, columns per dataset


@dataclass
class ExperimentConfig(Options):
    name: Optional[str] = None          # set by experiment=<preset>
    stand_in: Optional[str] = None      # csbm: replace absent large datasets by a csbm graph of the same size
    table: Optional[TableConfig] = None  # the paper table this experiment's sweep fills (gnngp report)
    paper: bool = False                 # a preset of the paper's tables and figures (gnngp report fills them from its rows only)


@dataclass
class ComputeConfig(Options):
    """Where a GP job computes (``compute=local|dask|slurm``). ``local``: this process (today's
    path). ``dask`` and ``slurm``: every low-rank (``_x``) kernel and its GP on row blocks of a
    Dask cluster (see :mod:`gnngp_cli.backends.rowblocks`): a ``LocalCluster`` here, the scheduler at
    ``address``, or a ``dask_jobqueue.SLURMCluster``."""

    backend: str = "local"              # the backend (set by compute=<name>)
    product: str = "auto"               # A Q on this process: auto (tiled on the CPU past 2^26 output entries, torch's elsewhere), tiled (cache-tiled, numba), torch (torch's CSR product: MKL, cuSPARSE)
    workers: Any = "auto"               # LocalCluster workers (auto: this machine's usable cores); SLURM: worker processes per job (auto: 1)
    threads_per_worker: int = 1         # threads of each worker
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
class PartitionConfig(Options):
    rows: Any = "auto"                  # nodes per row block (auto: the largest block whose task fits a worker's memory, at most 100,000; gnngp partition: 100,000)
    out: Optional[str] = None           # gnngp partition: the folder to write (out=<dir>)


@dataclass
class LoggerConfig(Options):
    """Where ``logger=mlflow|tensorboard`` records each job (:mod:`gnngp_cli.cli.tracking`). A
    relative folder is read from the working directory, as ``hydra.run.dir`` is."""

    name: str = MISSING                 # mlflow or tensorboard (set by logger=<name>)
    tracking_uri: Optional[str] = None  # mlflow: a folder (its mlflow.db and artifacts) or an MLflow URI (http://host:5000, sqlite:///...)
    save_dir: Optional[str] = None      # tensorboard: the log dir; a subfolder per job
    experiment: str = "gnngp"           # mlflow: the experiment; tensorboard: a subfolder of save_dir


@dataclass
class RunConfig(Options):
    dataset: Any = None                 # a DatasetConfig subclass, chosen by dataset=<name>
    method: str = "gp"                  # gp: the GP kernel; gnn: the GNN (set by model=/kernel=/gnn=)
    depth: int = 2                      # layers of the kernel and of the GNN (kernel.layers, gnn.layers)
    kernel: Any = None                  # a KernelConfig subclass, chosen by kernel=<name>
    gnn: Any = None                     # a GNNConfig subclass, chosen by gnn=<name>
    landmarks: LandmarksConfig = field(default_factory=LandmarksConfig)   # the landmarks of low-rank (_x) kernels
    nugget: NuggetConfig = field(default_factory=NuggetConfig)   # the nugget grid chosen on validation (fit=grid)
    fit: FitConfig = field(default_factory=FitConfig)   # how GP hyperparameters are chosen (fit=grid|mll)
    likelihood: LikelihoodConfig = field(default_factory=LikelihoodConfig)   # how a GP classifies (likelihood=gaussian|dirichlet)
    inference: InferenceConfig = field(default_factory=InferenceConfig)   # inference.time: the mean of the infinitely wide network trained for time t (the NTK's with kernel.limit=ntk)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)   # an uncertainty protocol's splits and OOD nodes (protocol=<name>)
    conformal: ConformalConfig = field(default_factory=ConformalConfig)   # conformal prediction sets or intervals (conformal=<score>)
    active: ActiveConfig = field(default_factory=ActiveConfig)   # active learning: labels chosen by a strategy under budgets (active=<strategy>)
    data: DataConfig = field(default_factory=DataConfig)   # where datasets are read and cached
    seed: int = 0                       # the first run's seed (run r uses seed + r)
    runs: int = 1                       # runs with seeds seed, seed + 1, ... (mean and std in the summary)
    splits: Optional[str] = None        # all: run every fixed split of the dataset (mean and std over splits)
    repeat_deterministic: bool = True   # false: a GP without randomness runs once whatever runs says
    device: str = "auto"                # auto, cpu or cuda (env GNNGP_DEVICE sets the default)
    dtype: str = "float32"              # float32 or float64: the kernels' working precision
    max_memory_gb: Optional[float] = None   # refuse exact kernels above this; default half of the free memory
    results_file: str = "results.csv"  # a file name inside the run dir (move the run dir to write elsewhere)
    progress: bool = True               # epoch progress bar for GNNs (off when not on a terminal)
    resume: bool = False                # in a sweep dir: skip jobs whose results of the same overrides exist
    verify: VerifyConfig = field(default_factory=VerifyConfig)   # gnngp verify: the wide random networks
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)   # a paper preset (experiment=<name>)
    compute: ComputeConfig = field(default_factory=ComputeConfig)   # compute=local|dask|slurm
    partition: PartitionConfig = field(default_factory=PartitionConfig)   # gnngp partition: row blocks for compute=dask
    logger: Optional[LoggerConfig] = None   # logger=mlflow|tensorboard: record each job (the tracking extra)


def config_fields(cls: type) -> list[str]:
    """The keys of a config dataclass (for docs and tests)."""
    return [f.name for f in fields(cls)]


def field_descriptions(cls: type) -> dict[str, str]:
    """What each key of a config dataclass means: the comment written beside its field (or, for
    a field without one, on the comment lines just above it), in this class or the nearest
    base that declares the field. The comments in the schemas (here and in the registries'
    subclasses) are the one place a key is described; ``gnngp run --help`` prints them and a
    test checks that every key of the composed config has one."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if is_dataclass(klass):
            out.update({k: v for k, v in _own_descriptions(klass).items() if v})
    return out


@lru_cache(maxsize=None)
def _module_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines(keepends=True)


def _class_source(klass: type) -> Optional[str]:
    """The source of a top-level class, from its module's file: its ``class`` line and the
    indented lines below it (``inspect.getsource`` parses the whole module to find it, which
    made ``gnngp run --help`` slower than importing torch)."""
    import re
    import sys
    import textwrap

    path = getattr(sys.modules.get(klass.__module__), "__file__", None)
    if not path:
        return None
    try:
        lines = _module_lines(path)
    except OSError:
        return None
    start = next((i for i, line in enumerate(lines) if re.match(rf"\s*class {klass.__name__}\b", line)), None)
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    return textwrap.dedent("".join(lines[start:end]))


@lru_cache(maxsize=None)
def _own_descriptions(klass: type) -> dict[str, str]:
    """The comments of the fields ``klass`` itself declares (its source read once)."""
    import ast
    import io
    import tokenize

    source = _class_source(klass)
    if source is None:   # no source (a class made at run time): no descriptions
        return {}
    comments: dict[int, tuple[str, bool]] = {}   # line -> (text, whether the line holds only the comment)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.string.lstrip("#").strip(), not tok.line[:tok.start[1]].strip())
    body = next(node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)).body
    out = {}
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        beside = [comments[n][0] for n in range(node.lineno, node.end_lineno + 1) if n in comments and not comments[n][1]]
        above, n = [], node.lineno - 1
        while n in comments and comments[n][1]:
            above.insert(0, comments[n][0])
            n -= 1
        out[node.target.id] = " ".join(beside or above)
    return out
