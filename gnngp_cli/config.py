"""The spec parser: checks of a composed config against the registries, before any work; the
job's spec made from it once (:func:`parse`); and the method defaults that depend on the dataset.

A wrong key or a wrong type fails when Hydra composes the config (:mod:`gnngp_cli.compose`); an
impossible value (``layers < 1``, a negative sigma, a nugget grid with ``min >= max``...) fails
in :func:`validate`, before any data is loaded, as a one-line :class:`ConfigError`. The checked
config becomes the job's frozen spec (:func:`parse`), which is what everything below the job
reads. A method setting left ``null`` takes the method's default for the dataset
(:func:`with_method_defaults`, a new spec once the data is loaded and its task known). The schemas are
in :mod:`gnngp_cli.schema`; what a value may be comes from the registry entries (a kernel's
parameter ranges, a dataset's split kind, the metrics).
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import asdict, fields
from typing import Any, Iterator, Mapping, Optional

from omegaconf import OmegaConf

from .graph.orders import ORDERS
from .graph.sparse_product import PRODUCTS
from .data.datasets import DATASETS, SPLIT_READS, SPLIT_WORDS
from .errors import ConfigError
from .gnn import GNNS
from .gp.likelihoods import LIKELIHOODS
from .gp.strategies import STRATEGIES
from .gnn.baselines import gnn_defaults
from .kernels import BASE_KERNELS, BASE_READS, KERNELS, LIMITS
from .kernels.architectures import KERNEL_COMMON
from .conformal import check_values as check_conformal_values
from .metrics import score_metrics
from .readers import COMMANDS, active_run, unknown_keys, unread_options
from .schema import KernelConfig, RunConfig, freeze, revised
from .schema import CONFORMAL, DEVICES, DTYPES, LANDMARK_POOLS, GNN_PROPAGATION, GNN_RECIPES, GNN_REGIMES, GNN_UNCERTAINTY, InferenceConfig, NuggetConfig, METHODS, OPTIMIZERS, PROTOCOLS, TASKS


def check_results_file(name: str) -> None:
    """``results_file`` is confined to the job's run dir: a plain file name, no folders."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or os.path.isabs(name):
        raise ConfigError(f"results_file={name!r} must be a file name inside the run dir (e.g. results.csv); "
                          "to write results elsewhere, set hydra.run.dir (or hydra.sweep.dir) to that folder")
    if not name.endswith(".csv") or name.startswith(".") or name == "summary.csv":   # never the job's log, Hydra's files or a sweep's summary
        raise ConfigError(f"results_file={name!r} must be a .csv file name of its own (e.g. results.csv, mine.csv); "
                          "the run dir also holds the job's log and a sweep folder its summary.csv")
    if len(os.fsencode(name)) > 200:   # 255 a file name may have, less the '.before-resume-<time>' a resume sets aside
        raise ConfigError(f"results_file={name[:40]}... is {len(os.fsencode(name))} bytes long; give a name of at most 200 (e.g. results.csv)")


SYNONYMS = {"gpu": "cuda", "cuda:0": "cuda", "double": "float64", "float": "float32", "single": "float32", "fp64": "float64", "fp32": "float32"}


def _choice(value: str, allowed, what: str) -> None:
    if value not in allowed:
        close = ([SYNONYMS[str(value).lower()]] if SYNONYMS.get(str(value).lower()) in allowed else
                 difflib.get_close_matches(str(value), list(allowed), n=1) or difflib.get_close_matches(str(value).lower(), list(allowed), n=1))
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{what}={value!r} is not valid{hint}; use one of {', '.join(allowed)}")


UNREAD = ("refuse", "allow")   # validate(unread=...): an option the run would not read is refused, or left to the caller


SWITCH_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0", "null", "")   # OmegaConf's spellings of a boolean (2 and -2 it read as true)


def check_switches(cfg: Any, overrides: Any) -> None:
    """A switch (a boolean key) given anything but ``true`` or ``false``: one line. OmegaConf
    reads any integer as one (``likelihood.temperature=2`` was "true": a temperature fitted;
    ``data.shared_cache=2`` trusted a shared cache)."""
    from omegaconf import BooleanNode, OmegaConf

    for override in overrides or ():
        key, sep, value = str(override).partition("=")
        key = key.lstrip("+")
        if not sep or key.startswith(("~", "hydra.")):
            continue
        try:
            parent_key, _, leaf = key.rpartition(".")
            parent = OmegaConf.select(cfg, parent_key) if parent_key else cfg
            node = parent._get_node(leaf) if hasattr(parent, "_get_node") else None
        except Exception:  # noqa: BLE001 - a key the config does not hold: the config's own check names it
            continue
        if isinstance(node, BooleanNode) and value.strip().strip("'\"").lower() not in SWITCH_WORDS:
            what = (" (true: a temperature is fitted on the validation nodes; false: none)" if key == "likelihood.temperature" else "")
            raise ConfigError(f"{key}={value}: {key} is a switch, true or false{what}; give {key}=true or {key}=false")


def validate(cfg: Any, command: str = "run", unread: str = "refuse") -> None:
    """Reject impossible values before any work starts (one-line :class:`ConfigError`): a key no
    schema has (``+foo=bar``), an impossible value, and (``unread="refuse"``) an option set to a
    value that a run of ``command`` would not read (:mod:`gnngp_cli.readers`). A spec
    (:func:`parse`) was checked when it was made."""
    if isinstance(cfg, RunConfig) and cfg.frozen:
        return
    _choice(command, COMMANDS, "command")
    _choice(unread, UNREAD, "unread")
    unknown_keys(cfg)
    removed_keys(cfg)
    if cfg.dataset is None:   # before the interpolations that read it (landmarks.fraction=${dataset.landmark_fraction})
        raise ConfigError("no dataset chosen (dataset is null, e.g. by ~dataset); use dataset=<name>")
    resolvable(cfg)
    no_missing(cfg)
    sections(cfg)
    _choice(str(cfg.dataset.name).lower(), DATASETS, "dataset")
    if cfg.dataset.task is not None:
        _choice(cfg.dataset.task, TASKS, "dataset.task")
    for key in ("train_ratio", "val_ratio"):
        if not 0 <= getattr(cfg.dataset, key) <= 1:
            raise ConfigError(f"dataset.{key}={getattr(cfg.dataset, key)} must lie in [0, 1]")
    finite_numbers(cfg)
    if OmegaConf.is_config(cfg) and "depth" in cfg and not 1 <= cfg.depth <= MAX_LAYERS:   # named as typed, not as kernel.layers
        raise ConfigError(f"depth={cfg.depth} must be from 1 to {MAX_LAYERS:,} (the layers of the kernel and of the GNN)")
    if cfg.dataset.get("metric") is not None:
        _choice(cfg.dataset.metric, [m.name for m in score_metrics()], "dataset.metric")
    if cfg.dataset.split_index < 0:
        raise ConfigError(f"dataset.split_index={cfg.dataset.split_index} is out of range; fixed splits are numbered from 0")
    entry = DATASETS[str(cfg.dataset.name).lower()]
    reads = SPLIT_READS[entry.split] + (("split_seed",) if cfg.experiment.stand_in and entry.stand_in else ())   # a stand-in's generator seed
    for key in ("split_index", "split_seed", "train_ratio", "val_ratio"):   # a split setting this dataset's split never reads
        if key not in reads and getattr(cfg.dataset, key) != getattr(entry.config, key):
            readers = ", ".join(name for name, e in DATASETS.items() if key in SPLIT_READS[e.split])
            raise ConfigError(f"dataset.{key}={getattr(cfg.dataset, key)} does not apply to {entry.name}, whose split is {SPLIT_WORDS[entry.split]}; "
                              f"drop it (it applies to {readers})")
    if cfg.get("splits") is not None:
        if str(cfg.splits) != "all":
            one = str(cfg.splits).strip()
            pick = (f"; one split is dataset.split_index={one} (splits=all runs every fixed split)" if one.isdigit()
                    else "; splits=all runs every fixed split of the dataset, dataset.split_index=<k> one of them (default 0)")
            raise ConfigError(f"splits={cfg.splits!r} is not valid: it takes only all{pick}")
        if entry.split != "fixed":
            fixed = ", ".join(name for name, e in DATASETS.items() if e.split == "fixed")
            fix = "; another split is dataset.split_seed=<seed>" if "split_seed" in SPLIT_READS[entry.split] else "; drop splits=all"
            raise ConfigError(f"splits=all needs a dataset with numbered fixed splits ({fixed}); the split of {cfg.dataset.name} is "
                              f"{SPLIT_WORDS[entry.split]}{fix}")
        if cfg.dataset.split_index != entry.config.split_index:   # every split runs: the one named would be ignored, silently
            raise ConfigError(f"splits=all runs every split of {entry.name}, and dataset.split_index={cfg.dataset.split_index} names one; "
                              f"give one of them: splits=all, or dataset.split_index={cfg.dataset.split_index} alone")
    if entry.split == "random":   # split by dataset.train_ratio and dataset.val_ratio
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
        validate_kernel(cfg.kernel)
    if cfg.runs < 1:
        raise ConfigError(f"runs={cfg.runs} must be at least 1")
    _seeds(cfg)   # before the sections whose seeds default to it (conformal.seed, active.seed): a bad seed is named as the user typed it
    _grid(cfg.nugget, "nugget", cfg.dtype)
    _validate_fit(cfg)
    _validate_uncertainty(cfg)
    _validate_conformal(cfg)
    _validate_times(cfg)
    _validate_active(cfg)
    lm = cfg.landmarks
    if lm.count is not None and lm.count < 1:
        raise ConfigError(f"landmarks.count={lm.count} must be at least 1")
    if lm.count is None and lm.fraction < 1:
        raise ConfigError(f"landmarks.fraction={lm.fraction} must be >= 1 (each node of landmarks.pool is a landmark with probability 1/fraction)")
    _choice(lm.pool, LANDMARK_POOLS, "landmarks.pool")
    _paths(cfg)
    if cfg.device == "" and os.environ.get("GNNGP_DEVICE") == "":   # set but empty (GNNGP_DEVICE= in a script): unset, so auto
        cfg.device = "auto"
    if cfg.device not in DEVICES and os.environ.get("GNNGP_DEVICE") == cfg.device:   # the default from the environment: named as such
        near = SYNONYMS.get(str(cfg.device).lower())
        hint = f" (did you mean '{near}'?)" if near in DEVICES else ""
        raise ConfigError(f"the environment variable GNNGP_DEVICE={cfg.device!r} (the default of device) is not valid{hint}; set it to one of "
                          f"{', '.join(DEVICES)}, or unset it")
    if str(cfg.device).startswith("cuda:"):   # one GPU of several: the process sees those CUDA_VISIBLE_DEVICES lists, first as cuda
        raise ConfigError(f"device={cfg.device} is not a choice: gnngp runs on one GPU, device=cuda; pick which with "
                          f"CUDA_VISIBLE_DEVICES={cfg.device.partition(':')[2]} gnngp run ... device=cuda")
    _choice(cfg.device, DEVICES, "device")
    _choice(cfg.dtype, DTYPES, "dtype")
    v = cfg.verify
    if len(v.widths) < 2 or min(v.widths) < 1 or len(set(v.widths)) < len(v.widths):
        raise ConfigError(f"verify.widths={list(v.widths)} must hold at least two different positive widths (for the slope)")
    for key, ok, need in (("seeds", v.seeds >= 2, "at least 2"), ("num_nodes", v.num_nodes >= 2, "at least 2"),
                          ("bootstrap", v.bootstrap >= 100, "at least 100"), ("activation_samples", v.activation_samples >= 1000, "at least 1000"),
                          ("level", 0 < v.level < 1, "between 0 and 1, e.g. 0.01 (the default)"),
                          ("resolution", 0 < v.resolution < 1, "between 0 and 1, e.g. 0.02 (the default: an error of 2% along the kernel)"),
                          ("max_seeds", 2 <= v.max_seeds <= 1_000_000, "between 2 and 1000000 (below verify.seeds: none drawn beyond them)")):
        if not ok:
            raise ConfigError(f"verify.{key}={getattr(v, key)} must be {need}")
    if v.activation_samples % 2:   # drawn in antithetic pairs
        raise ConfigError(f"verify.activation_samples={v.activation_samples} must be even (the draws come in antithetic pairs, z and -z); "
                          f"give verify.activation_samples={v.activation_samples + 1}")
    if cfg.experiment.stand_in is not None:
        _choice(cfg.experiment.stand_in, ("csbm",), "experiment.stand_in")
    check_results_file(cfg.results_file)
    if cfg.max_memory_gb is not None and cfg.max_memory_gb <= 0:
        raise ConfigError(f"max_memory_gb={cfg.max_memory_gb} must be positive")
    _validate_compute(cfg)
    if unread == "refuse" and OmegaConf.is_config(cfg):
        found = unread_options(cfg, command)
        if found:
            raise ConfigError(found[0].message)


def check_steps(times: list[float], epochs: Optional[int]) -> None:
    """The training times a GNN records (``gnn.regime=ntk``): whole gradient steps from 1 to
    ``gnn.epochs`` (unchecked above while the epochs are left to the dataset's default)."""
    for t in times:
        if not (math.isfinite(t) and t == int(t) and t >= 1) or (epochs is not None and t > epochs):
            raise ConfigError(f"inference.time={t:g}: a GNN records whole gradient steps from 1 to gnn.epochs"
                              + (f"={epochs}" if epochs is not None else "") + "; use whole numbers in that range (or raise gnn.epochs)")


def training_times(cfg: Any) -> Optional[list[float]]:
    """``inference.time`` as a list of times (``None``: the nugget grid); raises a one-line
    :class:`ConfigError` for anything but non-negative numbers and ``inf``."""
    value = cfg.inference.get("time") if cfg.get("inference") is not None else None
    if value is None:
        return None
    plain = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    items = list(plain) if isinstance(plain, (list, tuple)) else [plain]
    items = [math.inf if isinstance(item, str) and item.strip().lower() in ("inf", "+inf", ".inf", "infinity") else item for item in items]   # YAML reads inf as a word
    if not items:
        raise ConfigError("inference.time=[] holds no time; use a number, inf, a list of them, or null (the nugget grid)")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not item >= 0:   # NaN too
            raise ConfigError(f"inference.time={plain!r} is not a training time or a list of them; use numbers >= 0 and inf "
                              "(kernel regression), e.g. inference.time=100 or inference.time=[1,10,100,inf]")
    return sorted({float(item) for item in items})   # in order: on a tie of the validation metric, the earliest time


def _validate_times(cfg: Any) -> None:
    """``inference.*``: predictions along training time replace the nugget of a Gaussian GP."""
    if cfg.get("inference") is None:
        return
    if not (cfg.inference.learning_rate > 0 and math.isfinite(cfg.inference.learning_rate)):
        raise ConfigError(f"inference.learning_rate={cfg.inference.learning_rate} must be a positive number (e.g. inference.learning_rate=1)")
    times = training_times(cfg)
    ntk_gnn = cfg.method == "gnn" and cfg.gnn.regime == "ntk"
    if times is None:
        if cfg.inference.learning_rate != InferenceConfig.learning_rate and not ntk_gnn:
            raise ConfigError(f"inference.learning_rate={cfg.inference.learning_rate:g} is the rate of training along inference.time, which is "
                              "not set: add inference.time (e.g. inference.time=[1,10,100,inf]), or drop inference.learning_rate")
        return
    if cfg.method != "gnn":
        changed = [f"nugget.{key}={getattr(cfg.nugget, key)}" for key in ("min", "max", "num") if getattr(cfg.nugget, key) != getattr(NuggetConfig, key)]
        if changed:
            raise ConfigError(f"inference.time replaces the nugget grid, so {changed[0]} would be ignored: drop it, or inference.time")
    if cfg.method == "gnn":
        if cfg.gnn.regime != "ntk":
            raise ConfigError("inference.time is a GP kernel's training time, or the steps a GNN records with gnn.regime=ntk; "
                              "drop inference.time, or set gnn.regime=ntk")
        check_steps(training_times(cfg), cfg.gnn.epochs)
        return
    if cfg.fit.method == "mll":
        raise ConfigError("inference.time replaces the nugget that fit=mll fits; use fit=grid with inference.time")
    if cfg.likelihood.name != "gaussian":
        raise ConfigError(f"inference.time is gradient flow on the MSE loss (the Gaussian likelihood); drop likelihood={cfg.likelihood.name}")


def _validate_compute(cfg: Any) -> None:
    """The counts of ``compute`` (which backends exist, and what each runs, is the backends' say)."""
    c = cfg.compute
    _choice(c.product, PRODUCTS, "compute.product")
    _choice(cfg.data.order, ORDERS, "data.order")
    if c.product == "tiled" and cfg.device == "cuda":
        raise ConfigError("compute.product=tiled runs on the CPU; on a GPU use compute.product=auto (cuSPARSE), or device=cpu")
    if cfg.method == "gnn" and (cfg.data.order != "none" or c.product == "tiled"):
        setting = f"data.order={cfg.data.order}" if cfg.data.order != "none" else "compute.product=tiled"
        raise ConfigError(f"{setting} applies to the GP kernels' graph product; a GNN's layers use PyG's own: drop it")
    if c.backend != "local" and c.product == "tiled":
        raise ConfigError(f"compute.product=tiled applies to compute=local; compute={c.backend} multiplies each row block by scipy's "
                          "product (data.order=rcm|metis gives its blocks locality): drop compute.product")
    _count_or_auto(cfg.partition.rows, "partition.rows")
    _count_or_auto(c.workers, "compute.workers")
    for key in ("threads_per_worker", "jobs", "cores"):
        if getattr(c, key) < 1:
            raise ConfigError(f"compute.{key}={getattr(c, key)} must be at least 1")


def _count_or_auto(value: Any, key: str) -> None:
    """``auto`` or a whole number of at least 1 (``partition.rows``, ``compute.workers``)."""
    if value == "auto":
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}={value} is not a count; use a whole number or auto")
    if value < 1:
        raise ConfigError(f"{key}={value} must be at least 1")


MAX_LAYERS = 10_000


def removed_keys(cfg: Any, path: str = "") -> None:
    """Every key of the schema is in ``cfg`` (refuse, never ignore): ``~nugget`` removes what every
    run reads; one line naming the key and the fix. (A key the schema has not, added with ``+``:
    :func:`~gnngp_cli.readers.unknown_keys`.)"""
    from omegaconf import DictConfig

    if not isinstance(cfg, DictConfig) or cfg._is_none() or cfg._is_missing():
        return
    kind = OmegaConf.get_type(cfg)
    if kind is None or not hasattr(kind, "__dataclass_fields__"):
        return
    names = [f.name for f in fields(kind)]
    present = [str(k) for k in cfg.keys()]
    for name in names:
        if name not in present:
            where = f"{path}.{name}" if path else name
            raise ConfigError(f"{where} was removed (~{where}), but the run reads it; drop ~{where} "
                              f"(a key left out keeps its default; set it with {where}=<value>)")
    for name in names:
        removed_keys(cfg._get_node(name), f"{path}.{name}" if path else name)


def sections(cfg: Any) -> None:
    """``dataset``, ``kernel`` and ``gnn`` (the groups whose schema depends on the choice) each hold
    a configuration or nothing: a value put in their place (``++kernel=${active.batch}``) is one
    line, not an ``AttributeError`` from the first check that reads a key of it."""
    if not OmegaConf.is_config(cfg):
        return
    for key in ("dataset", "kernel", "gnn"):
        value = cfg.get(key)
        if value is not None and not OmegaConf.is_dict(value):
            raise ConfigError(f"{key}={value!r} is not a {key} configuration; choose one by its name, {key}=<name> "
                              f"(gnngp run --help lists them)")


def no_missing(cfg: Any) -> None:
    """No value is OmegaConf's ``???`` (a value that must be given: ``dataset.name=???``): else one
    line naming the key, not an OmegaConf traceback from whichever reader meets it first."""
    if not OmegaConf.is_config(cfg):
        return
    missing = sorted(k for k in OmegaConf.missing_keys(cfg) if not str(k).startswith("hydra"))
    if missing:
        raise ConfigError(f"{missing[0]}=??? is a value left to give (??? marks a required value); give {missing[0]} a value "
                          f"(gnngp run --cfg job shows its default), or drop the override that set it to ???")


def resolvable(cfg: Any) -> None:
    """Every interpolation of ``cfg`` resolves (``seed=${foo}`` names no key): else one line,
    here, not an OmegaConf traceback from whichever reader meets it first."""
    import copy

    from omegaconf.errors import InterpolationResolutionError

    if not OmegaConf.is_config(cfg):
        return
    try:
        OmegaConf.to_container(cfg, resolve=True)
    except InterpolationResolutionError as err:
        where = f"{err.full_key}: " if getattr(err, "full_key", None) else ""
        absent = re.search(r"Interpolation key '([^']+)' not found", str(err))
        written = _written_with(cfg, "${" + absent.group(1) + "}") if absent else None
        if written is not None:   # the key whose value names the absent one (seed=${foo}), not the first key to read it (protocol.seed=${seed})
            where = f"{written[0]}={written[1]}: "
        unset = re.search(r"Environment variable '([^']+)' not found", str(err))
        if unset:   # ${oc.env:NAME}: the variable, not a key of the config, is what is missing
            raise ConfigError(f"{where}the environment variable {unset.group(1)} is not set, and ${{oc.env:{unset.group(1)}}} reads it; set it "
                              f"(export {unset.group(1)}=...), give a default (${{oc.env:{unset.group(1)},<default>}}), or give the value itself") from None
        raise ConfigError(f"{where}{str(err.msg if hasattr(err, 'msg') else err).splitlines()[0]}; an interpolation ${{...}} must name a key "
                          "of the config (gnngp run --cfg job shows them); or give the value itself") from None
    _typed_interpolations(copy.deepcopy(cfg))


def _interpolations(node: Any, path: str = "") -> Iterator[tuple[str, Any, Any, Any]]:
    """``(key path, parent, key, node)`` of every interpolation under ``node``, depth first in key
    order, as written (none resolved); containers that are none or missing are not entered."""
    from omegaconf import DictConfig, ListConfig

    for key in list(node.keys()) if isinstance(node, DictConfig) else range(len(node)):
        where = f"{path}.{key}" if path and isinstance(node, DictConfig) else f"{path}[{key}]" if path else str(key)
        child = node._get_node(key)
        if OmegaConf.is_interpolation(node, key):
            yield where, node, key, child
        elif isinstance(child, (DictConfig, ListConfig)) and not child._is_none() and not child._is_missing():
            yield from _interpolations(child, where)


def _written_with(cfg: Any, needle: str) -> Optional[tuple[str, str]]:
    """``(key, value as written)`` of the first interpolation whose written value holds ``needle``."""
    return next(((where, str(child._value())) for where, _, _, child in _interpolations(cfg) if needle in str(child._value())), None)


def _typed_interpolations(cfg: Any) -> None:
    """Each interpolation's value assigned to its typed key, as if given there: a value of the
    wrong type (``likelihood.alpha_grid=${compute.memory}``, a string into a list) is one line
    naming the key, not a ``TypeError`` deep in a later check."""
    from omegaconf.errors import OmegaConfBaseException

    for where, node, key, child in _interpolations(cfg):
        written = child._value()
        try:
            value = node[key]
            node[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        except OmegaConfBaseException as err:
            why = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(f"{where}={written}: {why}; an interpolation ${{...}} must name a key whose value {where} can hold "
                              "(gnngp run --cfg job shows the keys and their values); or give the value itself") from None


def validate_kernel(k: Any) -> None:
    """A kernel config's checks, as ``gnngp run`` makes them (also for :class:`~gnngp_cli.gpytorch.GNNGPKernel`)."""
    _choice(k.name, KERNELS, "kernel.name")
    _choice(k.base.name, BASE_KERNELS, "kernel.base.name")
    _choice(k.get("limit", "nngp"), LIMITS, "kernel.limit")
    if k.adjacency is not None:
        _choice(k.adjacency, ("sym", "row"), "kernel.adjacency")
    if k.layers < 1:
        raise ConfigError(f"kernel.layers={k.layers} must be at least 1")
    if k.layers > MAX_LAYERS:
        raise ConfigError(f"kernel.layers={k.layers} is more than {MAX_LAYERS:,}; each layer is a pass over the graph (the paper's depth sweep, Figure 3, stops at 12)")
    if k.base.scale <= 0:
        raise ConfigError(f"kernel.base.scale={k.base.scale} must be positive (C0 reads sqrt(scale) x; 1/d matches weights N(0, s_w^2/d))")
    if k.base.gamma <= 0 and k.base.name in ("rbf", "laplacian"):
        raise ConfigError(f"kernel.base.gamma={k.base.gamma} must be positive for the {k.base.name} kernel")
    if k.base.name == "polynomial" and not (float(k.base.d) >= 1 and float(k.base.d).is_integer()):   # (x.x' + c)^d: PSD for whole d >= 1
        raise ConfigError(f"kernel.base.d={k.base.d:g} is not a polynomial kernel's degree: give a whole number of at least 1 "
                          "(d=0 is a constant kernel; a fractional or negative power of x.x' + c is not a covariance)")
    if k.gamma_search and "gamma" not in BASE_READS[k.base.name]:
        readers = ", ".join(name for name, reads in BASE_READS.items() if "gamma" in reads)
        raise ConfigError(f"kernel.gamma_search=true searches the base kernel's gamma, but kernel.base.name={k.base.name} has none; "
                          f"use kernel.gamma_search=false, or a base kernel with a gamma ({readers})")
    _grid(k.gamma_grid, "kernel.gamma_grid")   # gammas are float64 (the base kernel's parameter)
    KERNELS[k.name].validate(OmegaConf.to_object(k) if OmegaConf.is_config(k) else k)   # its parameters' ranges, its candidates: on the typed options


def reads_training_set(cfg: Any) -> bool:
    """Whether a job fits on the dataset's training nodes (``train_mask``): every job but an
    active-learning run, which buys its labels from the pool (every node but the test ones)."""
    return not active_run(cfg)


def needs_validation(cfg: Any) -> bool:
    """Whether a job chooses something on the validation set: a GNN (early stopping) or a GP
    with ``fit=grid`` (the nugget, and gamma with ``gamma_search``). ``fit=mll`` never reads
    it, so it runs without validation labels (``dataset.val_ratio=0`` or ``dataset.hide_val=true``);
    nor does one training time (``inference.time=t``), unless the kernel chooses a value of its own."""
    if cfg.method == "gnn":
        return True
    if active_run(cfg):   # labels bought from the pool: no validation set
        return False
    try:
        times = training_times(cfg) if cfg.get("inference") is not None else None
    except ConfigError:   # validate() says what is wrong with it
        times = None
    if times is not None and len(times) == 1:
        entry = KERNELS.get(cfg.kernel.name) if cfg.kernel is not None else None
        chooses = cfg.kernel is not None and (cfg.kernel.get("gamma_search") or (entry is not None and any(
            len(candidates) > 1 for candidates in entry.candidates(cfg.kernel).values())))
        return bool(chooses)
    return cfg.fit.method == "grid"


def _validate_uncertainty(cfg: Any) -> None:
    """``likelihood``, ``protocol`` and a GNN's ``uncertainty``: their values, and the
    combinations that cannot run (what needs the dataset's task is checked once it is loaded)."""
    lk, p = cfg.likelihood, cfg.protocol
    _choice(lk.name, LIKELIHOODS, "likelihood")
    _choice(lk.probabilities, ("auto", "mc", "probit"), "likelihood.probabilities")
    alphas = [lk.alpha] if lk.alpha is not None else list(lk.alpha_grid)
    if not alphas or not all(a > 0 for a in alphas):
        raise ConfigError(f"likelihood.alpha={lk.alpha} and likelihood.alpha_grid={list(lk.alpha_grid)}: the Dirichlet pseudo-counts must be positive "
                          "and at least one given (e.g. likelihood.alpha=0.01, Milios et al.'s)")
    if lk.samples < 1:
        raise ConfigError(f"likelihood.samples={lk.samples} must be at least 1 (e.g. 256)")
    if cfg.method == "gnn" and lk.name != "gaussian":
        raise ConfigError(f"likelihood={lk.name} is a GP's; a GNN's class probabilities are set by gnn.uncertainty (softmax, temperature, ensemble, mc_dropout)")
    if lk.name == "dirichlet" and cfg.fit.method == "mll":
        raise ConfigError("likelihood=dirichlet chooses its noise scale on the validation grid (fit=grid); fit=mll fits the Gaussian likelihood: "
                          "use likelihood=gaussian with fit=mll, or fit=grid")
    _choice(p.name, PROTOCOLS, "protocol")
    _choice(p.perturbation, ("noise", "swap"), "protocol.perturbation")
    _choice(p.ordering, ("pagerank", "personalised"), "protocol.ordering")
    if p.name not in ("none", "misclassification") and cfg.compute.backend != "local":
        raise ConfigError(f"protocol={p.name} changes the splits and features of the loaded graph, which compute={cfg.compute.backend} reads "
                          "from its row blocks; use compute=local (protocol=misclassification runs on every backend)")
    if p.name == "structural_shift" and cfg.get("splits") == "all":
        raise ConfigError("protocol=structural_shift draws its own split from the graph's PageRank, so splits=all would run the same split "
                          "again and again; drop splits=all and sweep seeds instead (seed=0,1,2,3,4)")
    if not 0 < p.share < 1:
        raise ConfigError(f"protocol.share={p.share} must be above 0 and below 1 (e.g. 0.5)")
    if not p.strength > 0:
        raise ConfigError(f"protocol.strength={p.strength} must be positive (e.g. 1.0: noise of each feature's std)")
    if p.left_out is not None and p.left_out < 1:
        raise ConfigError(f"protocol.left_out={p.left_out} must be at least 1 (or null: a third of the classes)")
    if len(p.shares) != 3 or min(p.shares) <= 0 or sum(p.shares) >= 1:
        raise ConfigError(f"protocol.shares={list(p.shares)} must be three positive shares (train, validation, in-distribution test) "
                          "that sum below 1, e.g. [0.3, 0.1, 0.1]")
    if len(p.split) != 2 or min(p.split) <= 0 or sum(p.split) >= 1:
        raise ConfigError(f"protocol.split={list(p.split)} must be two positive shares (train, validation) that sum below 1, "
                          "the rest the test, e.g. [0.2, 0.1]")
    if p.name == "random_split" and cfg.get("splits") == "all":
        raise ConfigError("protocol=random_split draws its own split from protocol.seed, so splits=all would run the same split again and "
                          "again; drop splits=all and sweep seeds instead (seed=0,1,2,3,4)")




def _validate_conformal(cfg: Any) -> None:
    """``conformal``: the score, its parameters, and what cannot run with it."""
    c = cfg.conformal
    _choice(c.name, CONFORMAL, "conformal")
    check_conformal_values(c)   # the ranges, declared once with the calibration that reads them
    if c.name in ("daps", "snaps"):
        if cfg.method == "gp" and cfg.compute.backend != "local":
            raise ConfigError(f"conformal={c.name} diffuses every node's scores over the graph in one process, and compute={cfg.compute.backend} "
                              "keeps the nodes in row blocks; use compute=local, or conformal=aps, raps or tps (these run on every backend; "
                              "on a regression task every score gives the same intervals)")
        if cfg.method == "gp" and cfg.get("inference") is not None and cfg.inference.time is not None:
            raise ConfigError(f"conformal={c.name} diffuses every node's scores, and inference.time predicts the labelled nodes only; "
                              "use conformal=aps, raps or tps with inference.time")
    if c.name != "none" and cfg.method == "gnn" and cfg.gnn is not None and cfg.gnn.get("regime") == "ntk":
        raise ConfigError("conformal needs the GNN's class probabilities or predictions, and gnn.regime=ntk records a learning curve instead; "
                          "drop gnn.regime=ntk or conformal")


ACTIVE_MODELS = ("gp", "gcn")   # active.model: what predicts from the labels bought


def _validate_active(cfg: Any) -> None:
    """``active``: the strategy, the budgets and the combinations an active run refuses (what needs
    the loaded graph, a budget above the pool and entropy on a regression task, is checked once
    it is loaded: :mod:`gnngp_cli.job.active_job`)."""
    a = cfg.get("active")
    if a is None:
        return
    _choice(a.name, ("none", *STRATEGIES), "active")
    if a.name == "none":
        return
    budgets = list(a.budgets)
    if not budgets or any(b < 1 for b in budgets):
        raise ConfigError(f"active.budgets={budgets} must be label counts of at least 1 (e.g. [10,20,40,80,160])")
    if any(later <= earlier for earlier, later in zip(budgets, budgets[1:])):
        raise ConfigError(f"active.budgets={budgets} must increase (a row is written as each is reached), e.g. [10,20,40,80,160]")
    if a.batch < 1:
        raise ConfigError(f"active.batch={a.batch} must be at least 1 (the labels chosen per step)")
    if a.batch > budgets[-1]:   # every step cut to the budgets: a batch that size is never chosen
        raise ConfigError(f"active.batch={a.batch} is more labels a step than the last budget {budgets[-1]}; a step stops at each budget, "
                          f"so give active.batch of at most {budgets[-1]}")
    if not 0 <= a.initial <= budgets[0]:
        raise ConfigError(f"active.initial={a.initial} must be from 0 to the first budget {budgets[0]} (the random labels count toward it)")
    if not 0 <= a.seed <= SEED_MAX:
        raise ConfigError(f"active.seed={a.seed} must be an integer from 0 to {SEED_MAX:,}")
    _choice(a.model, ACTIVE_MODELS, "active.model")
    if a.get("epochs") is not None and a.epochs < 1:
        raise ConfigError(f"active.epochs={a.epochs} must be at least 1 (the GCN's training epochs)")
    if not a.nugget > 0:
        raise ConfigError(f"active.nugget={a.nugget} must be positive (the noise, times the mean diagonal of K; e.g. 0.1)")
    if cfg.method != "gp":
        raise ConfigError(f"active={a.name} selects labels from a GP's posterior; use a GP kernel (kernel=gcngp or kernel=gcngp_x), not gnn={cfg.gnn.name}")
    if cfg.compute.backend != "local":
        raise ConfigError(f"active={a.name} updates the posterior over every node in this process, and compute={cfg.compute.backend} keeps "
                          "the nodes in row blocks; use compute=local (a low-rank kernel, kernel=<name>_x, selects on large graphs)")
    if cfg.dataset.hide_val:   # the pool is every node but the test nodes: a hidden validation label would be bought all the same
        raise ConfigError(f"dataset.hide_val=true has no place in an active run: it reads no validation set, and its pool (every node but the "
                          f"test nodes) holds the validation nodes, whose labels it buys; drop dataset.hide_val, or drop active={a.name}")
    others = [(cfg.get("inference") is not None and cfg.inference.time is not None, "inference.time", "drop inference.time"),
              (cfg.likelihood.name != "gaussian", f"likelihood={cfg.likelihood.name}", "use likelihood=gaussian"),
              (cfg.conformal.name != "none", f"conformal={cfg.conformal.name}", f"drop conformal={cfg.conformal.name}"),
              (cfg.protocol.name != "none", f"protocol={cfg.protocol.name}", f"drop protocol={cfg.protocol.name}"),
              (bool(cfg.kernel is not None and cfg.kernel.gamma_search), "kernel.gamma_search=true",   # rbf's default: nothing to drop
               "set kernel.gamma_search=false (the kernel's gamma fixed: kernel.base.gamma)"),
              (bool(cfg.kernel is not None and cfg.kernel.get("limit", "nngp") != "nngp"),
               f"kernel.limit={cfg.kernel.get('limit') if cfg.kernel is not None else ''}", "use kernel.limit=nngp")]
    for present, what, fix in others:
        if present:
            raise ConfigError(f"{what} has no place in an active run (the Gaussian posterior at one nugget, updated per label, the split's test "
                              f"nodes held out); {fix}, or drop active={a.name}")


def _validate_fit(cfg: Any) -> None:
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
    if not 0 < f.lr <= LR_MAX:
        raise ConfigError(f"fit.lr={f.lr:g} must be positive and at most {LR_MAX:g} (e.g. fit.lr=0.05)")
    if not f.nugget > 0:
        raise ConfigError(f"fit.nugget={f.nugget} is the initial nugget, learned on a log scale: it must be positive (e.g. fit.nugget=0.1)")
    if f.output_scale is not None and not f.output_scale > 0:
        raise ConfigError(f"fit.output_scale={f.output_scale} is the initial output scale, learned on a log scale: it must be positive (or null)")
    if f.log_every < 0:
        raise ConfigError(f"fit.log_every={f.log_every} must be >= 0")
    k = cfg.kernel
    learns_gamma = "gamma" in BASE_KERNELS[k.base.name] and (f.learn is None or "gamma" in f.learn)
    if k.gamma_search and not learns_gamma:   # fit=mll learns gamma instead of searching it on validation
        why, fix = (("fit.learn leaves gamma out", "add gamma to fit.learn, ") if "gamma" in BASE_KERNELS[k.base.name] else
                    (f"it cannot learn the {k.base.name} kernel's gamma", ""))
        raise ConfigError(f"kernel.gamma_search=true: fit=mll learns the base kernel's gamma instead of searching it on validation, but {why}; "
                          f"{fix}set kernel.gamma_search=false to keep kernel.base.gamma, or use fit=grid")


RECIPE_NETWORKS = {"platonov2023": ("gcn", "sage")}   # the networks a recipe other than the paper's defines
NTK_STANDARD = {"dropout": 0.0, "batch_norm": False}   # gnn.regime=ntk: what a null dropout or batch norm is (a dataset's recipe's are not)


def _validate_gnn(g: Any) -> None:
    _choice(g.name, GNNS, "gnn.name")
    _choice(g.recipe, GNN_RECIPES, "gnn.recipe")
    for key in ("layers", "hidden", "epochs"):
        if getattr(g, key) is not None and getattr(g, key) < 1:
            raise ConfigError(f"gnn.{key}={getattr(g, key)} must be at least 1")
    if g.layers is not None and g.layers > MAX_LAYERS:   # as depth: 100,000 layers grew to 5.9 GB over minutes, silent
        raise ConfigError(f"gnn.layers={g.layers:,} is above the {MAX_LAYERS:,} a network may have; use fewer layers")
    if g.lr is not None and not 0 < g.lr <= LR_MAX:
        raise ConfigError(f"gnn.lr={g.lr:g} must be positive and at most {LR_MAX:g} (e.g. gnn.lr=0.01)")
    if g.dropout is not None and not 0 <= g.dropout < 1:
        raise ConfigError(f"gnn.dropout={g.dropout:g} must lie in [0, 1) (e.g. gnn.dropout=0.5)")
    if not g.weight_decay >= 0:
        raise ConfigError(f"gnn.weight_decay={g.weight_decay:g} must be >= 0 (e.g. gnn.weight_decay=5e-4)")
    if g.recipe != "paper":
        networks = RECIPE_NETWORKS[g.recipe]
        if g.name not in networks:
            raise ConfigError(f"gnn.recipe={g.recipe} defines the networks {', '.join(networks)}, not gnn={g.name}; "
                              f"use gnn={' or gnn='.join(networks)}, or gnn.recipe=paper")
        for key, fine, fix in (("batch_size", not g.batch_size, "null"), ("propagation", g.propagation == "sparse", "sparse"),
                               ("regime", g.regime == "standard", "standard")):
            if not fine:
                raise ConfigError(f"gnn.recipe={g.recipe} trains full batch on the sparse operator with AdamW (its protocol); "
                                  f"gnn.{key}={getattr(g, key)} has no place there: set gnn.{key}={fix}, or gnn.recipe=paper")
    if g.batch_size is not None and g.batch_size < 0:
        raise ConfigError(f"gnn.batch_size={g.batch_size} must be at least 1 (0 or null: full batch)")
    graph_layers = GNNS[g.name].graph_layers(g.layers)
    if graph_layers == 0 and g.batch_size and not GNNS[g.name].row_batches:
        raise ConfigError(f"gnn={g.name} trains full batch only; set gnn.batch_size=0 (full batch)")
    _choice(g.regime, GNN_REGIMES, "gnn.regime")
    _choice(g.propagation, GNN_PROPAGATION, "gnn.propagation")
    common = gnn_defaults(GNNS[g.name], g.recipe)["*"]   # what a null hidden or dropout becomes
    hidden = g.hidden if g.hidden is not None else common["hidden"]
    dropout = g.dropout if g.dropout is not None else NTK_STANDARD["dropout"] if g.regime == "ntk" else common["dropout"]
    if g.regime == "ntk":
        standard = {"gnn": (g.name == "gcn", "gnn=gcn"), "gnn.dropout": (dropout == 0, "gnn.dropout=0"),
                    "gnn.batch_norm": (not g.batch_norm, "gnn.batch_norm=false"), "gnn.batch_size": (not g.batch_size, "gnn.batch_size=0"),
                    "gnn.weight_decay": (g.weight_decay == 0, "gnn.weight_decay=0"), "gnn.uncertainty": (g.uncertainty == "softmax", "gnn.uncertainty=softmax")}
        for key, (fine, fix) in standard.items():
            if not fine:
                raise ConfigError(f"gnn.regime=ntk trains the finite network of kernel=gcngp kernel.limit=ntk (full batch, plain gradient descent); "
                                  f"{key}={(dropout if key == 'gnn.dropout' else getattr(g, key.removeprefix('gnn.'))) if key != 'gnn' else g.name} has no place there: set {fix}")
    if GNNS[g.name].check is not None:   # the entry's own options (GAT's heads, GPR-GNN's hops)
        GNNS[g.name].check(g, hidden)
    if g.fanouts is not None and not graph_layers:   # SGC, SIGN: the graph read once before training, no neighbour sampled
        raise ConfigError(f"gnn={g.name} reads the graph once before training and samples no neighbours; drop gnn.fanouts")
    if g.fanouts is not None and len(g.fanouts) != graph_layers:
        raise ConfigError(f"gnn.fanouts has {len(g.fanouts)} entries but {g.name} has {graph_layers} graph layers; give one fanout per graph layer (-1 = all)")
    if g.fanouts is not None and any(f < -1 for f in g.fanouts):
        raise ConfigError(f"gnn.fanouts={list(g.fanouts)}: a fanout is how many neighbours a node samples per graph layer, 0 or more, or -1 for all of them")
    if g.fanouts is not None and not g.batch_size:   # full-batch training reads every neighbour: the fanouts were dropped silently
        raise ConfigError("gnn.fanouts samples neighbours for mini-batch training, and this run trains full batch; give gnn.batch_size=N "
                          "with it, or drop gnn.fanouts")
    _choice(g.uncertainty, GNN_UNCERTAINTY, "gnn.uncertainty")
    if g.uncertainty == "ensemble" and g.members < 2:
        raise ConfigError(f"gnn.members={g.members}: an ensemble needs at least 2 models (e.g. 5)")
    if g.uncertainty == "mc_dropout" and g.mc_samples < 2:
        raise ConfigError(f"gnn.mc_samples={g.mc_samples}: MC dropout needs at least 2 passes (e.g. 20)")
    if g.uncertainty == "mc_dropout" and dropout == 0:
        raise ConfigError("gnn.uncertainty=mc_dropout needs a positive gnn.dropout (e.g. 0.5): with none, every pass is the same")


PATH_KEYS = ("data.root", "data.mirror", "dataset.path", "compute.roots_dir", "compute.shards", "compute.spill_dir", "partition.out")


def _paths(cfg: Any) -> None:
    """A folder setting with an empty part (``/scratch//roots``) came from an unset shell
    variable (``/scratch/$USER/roots`` without ``USER``): refused, never made."""
    for key in PATH_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        if isinstance(value, str) and empty_part(value):
            raise ConfigError(f"{key}={value} has an empty part ('//'), as an unset shell variable leaves (e.g. $USER); "
                              "give the folder in full")
    for key, variable in PATH_ENVIRONMENT.items():   # a null key reads its folder from the environment
        value = os.environ.get(variable, "")
        if OmegaConf.select(cfg, key, default=None) is None and empty_part(value):
            raise ConfigError(f"the environment variable {variable}={value} (the default of {key}) has an empty part ('//'), as an unset "
                              "shell variable leaves (e.g. $USER); give the folder in full")


PATH_ENVIRONMENT = {"data.root": "GNNGP_DATA_ROOT", "data.mirror": "GNNGP_DATA_MIRROR"}


def empty_part(path: str) -> bool:
    """Whether a folder has an empty part (``/scratch//roots``; a URL's ``scheme://`` aside)."""
    return "//" in path.split("://")[-1]


SEED_MAX = 2**63 - 1   # seeds are non-negative 64-bit integers: a negative one would wrap onto a large one (-1 is 2^64 - 1)


def _seeds(cfg: Any) -> None:
    """``seed`` (and ``seed + runs - 1``, the last run's) and ``dataset.split_seed`` in ``0..2^63-1``."""
    last = SEED_MAX - (int(cfg.runs) - 1)
    if not 0 <= cfg.seed <= last:
        raise ConfigError(f"seed={cfg.seed} must be an integer from 0 to {last:,}" + (f" (the runs use seed..seed+{cfg.runs - 1})" if cfg.runs > 1 else "")
                          + "; a negative seed would draw the same landmarks as a large one")
    split_seed = cfg.dataset.get("split_seed")
    if split_seed is not None and not 0 <= split_seed <= SEED_MAX:
        raise ConfigError(f"dataset.split_seed={split_seed} must be an integer from 0 to {SEED_MAX:,}")


LR_MAX = 1e3   # past this no optimiser step is meaningful, and 1e300 overflows the optimiser's float arithmetic


INFINITE_ALLOWED = ("inference.time",)   # settings where inf means something (training to convergence)


def finite_numbers(cfg: Any, prefix: str = "") -> None:
    """No setting may be NaN or infinite (a nugget grid up to inf gives NaN predictions), but
    those of :data:`INFINITE_ALLOWED`; ``prefix`` names the config's place (``kernel`` for a
    kernel config alone)."""
    def walk(node: Any, path: str) -> None:
        if path in INFINITE_ALLOWED:
            return   # checked by its own validation
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
        walk({k: v for k, v in tree.items() if k != "hydra"}, prefix)


# The smallest and largest normal numbers of each dtype (numpy's finfo, without importing torch here).
DTYPE_RANGE = {"float32": (1.1754943508222875e-38, 3.4028234663852886e38), "float64": (2.2250738585072014e-308, 1.7976931348623157e308)}


def _grid(grid: Any, what: str, dtype: str = "float64") -> None:
    """A log-spaced grid: finite, positive, increasing (or one value: ``min == max`` with
    ``num=1``), and every value a normal number of
    ``dtype`` (a nugget of 1e-300 is 0 in float32, and 1e-320 is 0 in float64's arithmetic once
    it is scaled by the kernel's diagonal: it would pick a value outside the grid)."""
    if not (math.isfinite(grid.min) and math.isfinite(grid.max)):
        raise ConfigError(f"{what}.min={grid.min} and {what}.max={grid.max} must be finite numbers")
    if grid.min <= 0:
        raise ConfigError(f"{what}.min={grid.min} must be positive (the grid is log-spaced)")
    if grid.min > grid.max or (grid.min == grid.max and grid.num != 1):
        raise ConfigError(f"{what}.min={grid.min} must be below {what}.max={grid.max} "
                          f"(or equal to it with {what}.num=1, for that one value)")
    if grid.num < 1:
        raise ConfigError(f"{what}.num={grid.num} must be at least 1")
    if grid.num == 1 and grid.min != grid.max:
        raise ConfigError(f"{what}.num=1 is one value, but {what}.min={grid.min} and {what}.max={grid.max} differ; "
                          f"set both to that value, or {what}.num >= 2 for a grid between them")
    tiny, huge = DTYPE_RANGE.get(str(dtype), DTYPE_RANGE["float64"])
    if grid.min < tiny * 1e6:
        raise ConfigError(f"{what}.min={grid.min:g} underflows in dtype={dtype} (its smallest normal number is {tiny:.3g}, and the grid is "
                          f"scaled by the kernel's mean diagonal); use {what}.min >= {tiny * 1e6:.0e}" + (" or dtype=float64" if dtype == "float32" else ""))
    if grid.max > huge / 1e6:
        raise ConfigError(f"{what}.max={grid.max:g} overflows in dtype={dtype} (its largest number is {huge:.3g}, and the grid is scaled by "
                          f"the kernel's mean diagonal); use {what}.max <= {huge / 1e6:.0e}" + (" or dtype=float64" if dtype == "float32" else ""))


def method_defaults(table: Mapping[str, Mapping[str, Any]], dataset: str, task: str) -> dict:
    """A method's defaults for a dataset from its table: ``"*"`` for every dataset, then the
    task's entry (``"regression"``), then the dataset's own entry; the later wins."""
    out: dict = {}
    for key in ("*", task, dataset):
        out.update(table.get(key, {}))
    return out


def parse(cfg: Any, command: str = "run", unread: str = "refuse") -> RunConfig:
    """The job's spec: the composed config, checked (:func:`validate`), as a frozen instance of
    its schema dataclasses (:mod:`gnngp_cli.schema`). Made once per job, by the job's entry (the
    command line, the Python API, ``gnngp verify``); a spec given again is returned as it is.
    ``unread="reset"``: an option set to a value this run would not read (a job of a sweep whose
    other jobs read it) is a warning, and the spec holds its default, the value the run uses."""
    if isinstance(cfg, RunConfig):   # typed already: a spec is returned; an unfrozen instance is checked as a config first
        if cfg.frozen:
            return cfg
        validate(OmegaConf.structured(cfg), command, unread)
        return freeze(cfg)
    if unread == "reset":
        validate(cfg, command, "allow")
        cfg = reset_unread(cfg, command)
    else:
        validate(cfg, command, unread)
    return freeze(OmegaConf.to_object(cfg))


def reset_unread(cfg: Any, command: str = "run") -> Any:
    """``cfg`` (a copy) with each option this run would not read set back to its default, each
    told in a warning (a sweep's job: another job of the sweep reads it)."""
    import copy
    import logging

    from omegaconf import open_dict, read_write

    found = unread_options(cfg, command)
    if not found:
        return cfg
    cfg = copy.deepcopy(cfg)
    for item in found:
        logging.getLogger("gnngp").warning("%s; this job of the sweep runs with its default %s=%s (other jobs of the sweep read it)",
                                           item.said, item.key, "null" if item.default is None else item.default)
        with read_write(cfg), open_dict(cfg):
            OmegaConf.update(cfg, item.key, item.default, merge=False)
    return cfg


def with_method_defaults(spec: RunConfig, task: str) -> RunConfig:
    """The spec with the method's ``null`` settings given their defaults for the loaded dataset
    (its task is known only then, e.g. for a custom graph); explicit values are kept. A new
    spec: nothing is written back."""
    if spec.method == "gnn":
        name, node, table = "gnn", spec.gnn, gnn_defaults(GNNS[spec.gnn.name], spec.gnn.recipe)
    else:
        name, node, table = "kernel", spec.kernel, KERNELS[spec.kernel.name].defaults
    names = {f.name for f in fields(node)}
    filled = {key: value for key, value in method_defaults(table, str(spec.dataset.name).lower(), task).items()
              if key in names and getattr(node, key) is None}
    if name == "gnn" and node.regime == "ntk":   # the plain network the tangent kernel is the limit of, whatever the dataset's recipe
        filled.update({key: value for key, value in NTK_STANDARD.items() if key in filled})   # (chameleon's batch norm froze it)
    return revised(spec, **{name: revised(node, **filled)}) if filled else spec



def kernel_spec(architecture: str, task: str = "classification", **settings: Any) -> KernelConfig:
    """The frozen kernel spec of ``kernel=<architecture>`` as a run parses it (its entry's config and its
    defaults for ``task``, at two layers) with ``settings`` applied: ``layers``, ``adjacency``,
    the architecture's own parameters (``sigma_w``, ``alpha``, ``coefficients``...), ``base``
    (the base kernel's name), ``gamma``, ``c``, ``d``."""
    if architecture not in KERNELS:
        stem = str(architecture).removesuffix("_x")
        if stem in KERNELS:   # the command line's low-rank twin: here the landmarks make it
            raise ConfigError(f"architecture '{architecture}' is not known: the low-rank twin of kernel={architecture} is "
                              f"architecture '{stem}' with landmarks=<node ids> (a tensor of the landmark nodes)")
        close = difflib.get_close_matches(str(architecture), list(KERNELS), n=1)
        raise ConfigError(f"architecture '{architecture}' is not known{f' (did you mean {close[0]!r}?)' if close else ''}; "
                          f"use one of {', '.join(KERNELS)}")
    entry = KERNELS[architecture]
    defaults = entry.config(name=architecture)
    own = [f.name for f in fields(defaults) if f.name not in KERNEL_COMMON]
    base = asdict(defaults.base)
    base.update({key: settings.pop(key) for key in ("gamma", "c", "d") if key in settings})
    if "base" in settings:
        base["name"] = settings.pop("base")
    cfg = {"name": architecture, "low_rank": False, "layers": 2, "adjacency": None, "base": base, "gamma_search": False,
           "gamma_grid": asdict(defaults.gamma_grid),
           **{key: getattr(defaults, key) for key in own}}
    for key, value in method_defaults(entry.defaults, "*", task).items():
        if cfg.get(key) is None:
            cfg[key] = value
    unknown = set(settings) - set(cfg)
    if unknown:
        raise ConfigError(f"GNNGPKernel('{architecture}') got unknown settings {sorted(unknown)}; "
                          f"use some of {sorted(set(cfg) - {'name', 'base', 'low_rank', 'gamma_search'})} and base, gamma, c, d")
    cfg.update(settings)
    try:
        out = OmegaConf.structured(type(defaults))   # typed: a value of the wrong type is refused as on the command line
        out.merge_with(cfg)
    except Exception as err:  # noqa: BLE001 - OmegaConf's validation errors, in one line
        raise ConfigError(f"GNNGPKernel('{architecture}'): {str(err).splitlines()[0]}") from None
    finite_numbers(out, "kernel")
    validate_kernel(out)
    return freeze(OmegaConf.to_object(out))
