"""The Python API: the same configs, checks and GP job as ``gnngp run``, from a notebook.

    >>> from gnngp_cli import NodeGP, load_dataset
    >>> data = load_dataset("cora")                  # the graph `gnngp run dataset=cora` uses
    >>> gp = NodeGP(kernel="gcngp").fit(data)       # the nugget chosen on data.val_mask
    >>> round(gp.score(), 4)                         # accuracy on data.test_mask
    0.828
    >>> pred = gp.predict()                          # every node: mean, variance, probabilities

Settings are the command line's keys, as keyword arguments: ``NodeGP(kernel="gcngp_x",
landmarks={"count": 100}, dtype="float64")``, or with the dotted key spelled ``__``
(``kernel__layers=3``) or given in a mapping (``**{"nugget.num": 51}``). A mistake raises
:class:`~gnngp_cli.errors.ConfigError` (a :class:`~gnngp_cli.errors.GnngpError`) whose message is
the line ``gnngp run`` prints. :func:`run` runs a whole job from command-line overrides and
returns its rows.
"""
from __future__ import annotations

import copy
import logging
import numbers
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

import torch
from omegaconf import DictConfig

from .backends import compute_options, plugin_registries
from .backends.local import LocalBackend
from .cli.messages import check_group_choices, one_line, spellings
from .compose import compose as compose_config
from .config import check_switches, needs_validation, parse, reads_training_set, training_times, validate
from .data.container import GraphData
from .data.custom import SELF_LOOPS_LEFT_OUT, untrained_note
from .data.protocols import DRAWS_SPLIT
from .data.labels import class_ids, label_text, untrained_classes, whole_number_floats
from .graph.operators import make_undirected, without_self_loops
from .errors import ConfigError, DatasetError, GnngpError, KernelError, NotFittedError, NotSavedError, ResourceError
from .cli.execute import run_job
from .results.invariants import checked_rows
from .job.gp_job import GPJob, GPRun
from .job.loading import adopt_graph, load_graph
from .gnn import GNNS
from .kernels import KERNELS
from .kernels.planner import exact_kernel
from .kernels.value import held
from .metrics import MetricInput
from .metrics import Scores
from .plugins import load_plugins

log = logging.getLogger("gnngp")

__all__ = ["ConfigError", "DatasetError", "GnngpError", "NodeGP", "NotFittedError", "NotSavedError", "Prediction", "ResourceError", "compose", "load_dataset", "run"]

Nodes = Union[torch.Tensor, Sequence[int], None]
KERNEL_MATRIX_ENTRIES = 10**8  # kernel_matrix is for small sets: at most this many entries


def overrides_of(settings: Mapping[str, Any]) -> list[str]:
    """Keyword settings as command-line overrides: ``{"landmarks": {"count": 100}}`` and
    ``{"landmarks__count": 100}`` and ``{"landmarks.count": 100}`` are ``landmarks.count=100``;
    ``None`` is ``null``, booleans ``true``/``false``, lists ``[a,b]``, a mapping in a list ``{k:v}``
    (a composed kernel's blocks: ``kernel__first=["input", "weight", "conv", {"scale": 0.5}]``)."""
    out = []
    for key, value in settings.items():
        key = key.replace("__", ".")
        if isinstance(value, Mapping):
            out += overrides_of({f"{key}.{k}": v for k, v in value.items()})
        else:
            out.append(f"{key}={_value(value, key)}")
    return out


def _parsed(value: str) -> Any:
    """An override's value as YAML reads it (``3`` and ``3.0`` are one number), or the text."""
    import yaml

    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


JOB_DATASET_KEYS = ("metric", "hide_val", "landmark_fraction", "landmark_count", "large")   # dataset keys the job reads (the rest, the loader)

RUN_ONLY = {   # keys of gnngp run's job (its runs, files and commands) that a NodeGP, one fit in this process, never reads
    "active": "a NodeGP buys labels with gp.select(data, budget=..., strategy=...)",
    **{key: "a NodeGP fits one run in this process and writes no file; gnngp_cli.api.run([...]) runs a whole job and returns its rows"
       for key in ("runs", "splits", "resume", "results_file", "repeat_deterministic", "logger")},
    **{key: f"it is read by gnngp {key}" for key in ("verify", "partition")},
    "hparams_search": "a search is a sweep of gnngp run -m hparams_search=...",
    "hydra": "Hydra's own settings (output folders, sweeps) are gnngp run's; a NodeGP writes no file",
    "learning_curve": "a learning curve (inference.time) is rows of gnngp run; a NodeGP predicts the posterior at the chosen nugget",
}


def _check_bare_keys(settings: Mapping[str, Any]) -> None:
    """A bare keyword that is not a key of the run config but is one of a group's
    (``NodeGP(layers=2)``: the kernel's) says how to pass it, rather than guessing a top-level
    key by its spelling."""
    from dataclasses import MISSING, fields, is_dataclass

    from .schema import RunConfig

    groups = {"kernel": {f.name for entry in KERNELS.values() for f in fields(entry.config)}}
    groups.update({f.name: {g.name for g in fields(f.default_factory)} for f in fields(RunConfig)
                   if f.default_factory is not MISSING and is_dataclass(f.default_factory)})
    top = {f.name for f in fields(RunConfig)} | {"model", "gnn"}   # model=<name>, gnn=<name>: the run's choices (NodeGP says what to do with them)
    for key in settings:
        owner = next((group for group, keys in groups.items() if key in keys), None)
        if "." not in key and "__" not in key and key not in top and owner is not None:
            mapping = "" if owner == "kernel" else f"{owner}={{\"{key}\": ...}}, "   # kernel= is the kernel's name
            raise ConfigError(f"{key} is a key of {owner}, not of the run: pass it as {owner}__{key}=..., "
                              f"{mapping}or **{{\"{owner}.{key}\": ...}}")


def _value(value: Any, key: str) -> str:
    if hasattr(value, "tolist") and type(value).__module__.split(".")[0] in ("numpy", "torch"):   # an array, a tensor, a numpy number
        value = value.tolist()   # as the Python number or list it holds (a 0-d tensor: its number)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value(v, key) for v in value) + "]"
    if isinstance(value, Mapping):   # inside a list (a composed kernel's {scale: 0.5}): Hydra's inline mapping, not Python's repr
        return "{" + ",".join(f"{k}:{_value(v, key)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and "${" in value:   # Hydra would resolve it against the config, or fail deep inside OmegaConf
        raise ConfigError(f"{key}={value!r}: a setting takes a value, and ${{...}} is an interpolation of the command line's config; "
                          f"give the value itself")
    return str(value)


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The composed, typed config of these overrides, as ``gnngp run`` composes it (no output
    folder is made); a mistake raises :class:`ConfigError` with the command line's one line."""
    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        wrong = overrides if isinstance(overrides, str) else next(o for o in overrides if not isinstance(o, str))
        raise ConfigError(f"overrides are a list of strings key=value, as on the command line (e.g. [\"dataset=cora\", \"kernel=gcngp\"]); "
                          f"got {wrong!r}")
    load_plugins(plugin_registries())   # other packages' registry entries (gnngp_cli.plugins), as gnngp run loads them
    overrides = list(overrides)
    for override in overrides:   # the command line's words that are no override: Hydra's lexer error, otherwise
        if override.startswith("-"):
            sweep = ", and a sweep is the command's: gnngp run -m key=a,b" if override in ("-m", "--multirun") else ""
            raise ConfigError(f"{override} is an option of the command, not an override; these take one job's overrides (key=value){sweep}")
        if "=" not in override and not override.startswith("~"):   # ~key deletes a key: Hydra's, without a value
            command = f"; gnngp {override} is a command of its own" if override in ("run", "verify", "report", "partition") else ""
            raise ConfigError(f"{override!r} is not an override key=value (e.g. \"dataset=cora\"){command}")
    spelled = spellings(overrides)
    check_group_choices(overrides)   # (a group chosen twice is the command line's refusal: a script's list gives its defaults first)
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        composed = compose_config(overrides, compute_options(), config_name)
        check_switches(composed, overrides)   # as the command line's preflight: likelihood.temperature=2 is no switch
        return composed
    except (HydraException, OmegaConfBaseException) as err:
        said = one_line(err, spelled)
        if "add --multirun" in said:   # Hydra's advice is the command's: these compose one job
            said = said.replace("3. To sweep over it, add --multirun to your command line",
                                "3. a sweep of its values is the command's: gnngp run -m (these compose one job)")
        raise ConfigError(said) from None
    except (ValueError, AssertionError) as err:   # Hydra's and OmegaConf's own, applying an override: compute.job_extra._=0 (a list
        # indexed by a name) is int('_'); fit.learn.dj0=0 (a key under null) an assertion
        raise ConfigError(f"the overrides could not be applied ({str(err).splitlines()[0] if str(err).strip() else type(err).__name__}); "
                          "a list is indexed by a number (verify.widths.0=256), a key is set only under a mapping (not under fit.learn, "
                          "which is null or a list), and gnngp run --cfg job shows the keys") from None


def run(overrides: Sequence[str] = (), cfg: Optional[DictConfig] = None) -> list[dict]:
    """Run one job (GP kernel or GNN) in-process and return its result rows (no CSV is written);
    a row whose metric is not a number is an error row, as in ``gnngp run``."""
    cfg = cfg if cfg is not None else compose(overrides)
    return checked_rows(run_job(cfg), validation=needs_validation(cfg))


def load_dataset(name: str, **settings: Any):
    """The graph ``gnngp run dataset=<name>`` runs on, as gnngp's ``GraphData`` (PyG ``Data``'s
    fields; ``.to_pyg()`` gives PyG's own), with its ``train_mask``, ``val_mask`` and ``test_mask``,
    ``task``, ``num_classes`` and ``metric``. ``settings`` are the command line's keys; a key of
    the dataset may be given bare: ``load_dataset("chameleon", split_index=3)``, or
    ``data={"mirror": "/data/mirror"}``. :class:`NodeGP` fitted on it composes the same config
    as ``gnngp run`` with these settings."""
    from .data.datasets import DATASETS, option_dataset
    from .schema import DatasetConfig, RunConfig, config_fields

    load_plugins(plugin_registries())   # a plugin's dataset and its keys, before they are checked
    named = next((k for k in settings if k.replace("__", ".") in ("dataset", "dataset.name", "name")), None)
    if named is not None:   # the name is load_dataset's first argument: the setting replaced it silently
        raise ConfigError(f"load_dataset takes the dataset's name once, as its first argument (load_dataset({name!r})); drop {named}={settings[named]!r}")
    own = DATASETS.get(option_dataset(name) or "")   # csbm's num_nodes too, not only the common keys
    dataset_keys = set(config_fields(type(own.config) if own is not None else DatasetConfig))
    top = set(config_fields(RunConfig))
    graph_keys = ("dataset", "data", "protocol", "seed", "device", "dtype", "max_memory_gb", "experiment")
    method = [k for k in settings if k.replace("__", ".").split(".")[0] in (top | {"model"}) - set(graph_keys) and k not in dataset_keys]
    if method:   # carried into NodeGP's config with the graph, it would set the model behind the user's back
        key = method[0].replace("__", ".").split(".")[0]
        where = (RUN_ONLY[key] if key in RUN_ONLY else 'give the kernel to the model: NodeGP(kernel="gcngp")' if method[0] in ("kernel", "model")
                 else "a GNN baseline runs with gnngp run gnn=<name>, or run([\"gnn=<name>\", ...])" if key == "gnn"
                 else f"give it to the model: NodeGP(kernel=..., {method[0]}=...)")
        raise ConfigError(f"load_dataset takes the graph's settings ({', '.join(graph_keys)} and the dataset's own keys), not "
                          f"{method[0]}; {where}")
    unknown = [k for k in settings if "." not in k and "__" not in k and k not in dataset_keys | top]   # a dotted key (dataset.num_nodes): the config's own check
    if unknown:   # the nearest among the dataset's keys too (split_idx: split_index, not the top level's splits)
        from .cli.messages import closest

        near = closest(unknown[0], dataset_keys | top)
        raise ConfigError(f"unknown setting {unknown[0]}; {f'did you mean {near}? ' if near else ''}the keys of dataset={name}: "
                          f"{', '.join(sorted(dataset_keys))}, or a key of gnngp run (gnngp run --cfg job shows them)")
    scoped = {(f"dataset.{k}" if k in dataset_keys and k not in top else k): v for k, v in settings.items()}
    overrides = [f"dataset={name}", *overrides_of(scoped)]
    # hide_val: checked against the model's fit where NodeGP composes it (fit=mll, select), not against a fit the graph's load makes none of
    cfg = compose([*overrides, "fit=mll"] if scoped.get("dataset.hide_val") is True else overrides)
    if cfg.method == "gnn":
        raise ConfigError("load_dataset takes dataset settings, not a GNN; give the model to NodeGP")
    data = load_graph(cfg).data
    data.gnngp_overrides = overrides   # what NodeGP composes with, so that it runs what gnngp run runs
    data.gnngp_edges = edge_fingerprint(data.edge_index)   # as loaded: an edge list changed since is the caller's own (_adopt)
    return data


@dataclass
class Prediction:
    """What :meth:`NodeGP.predict` returns for ``nodes`` (in the order asked): the posterior
    ``mean`` (``n x classes``: the one-hot regression's, for classification; ``n`` for
    regression), the latent posterior ``variance`` (``n``: the variance of each output, the one
    ``gnngp run``'s ``var_correct``/``var_wrong`` average; ``n x classes`` with
    ``likelihood=dirichlet``, a variance per class), and for classification the class
    ``probabilities`` (``n x classes``: ``E[softmax(f / T)]`` of the latent Gaussian, as the
    run's ``nll``/``ece`` columns read them, with its fitted temperature) and ``labels`` (the
    argmax of the mean). For regression,
    ``predictive_variance = output_scale * (variance + noise)``, the variance of a new observation.
    ``mean`` and ``variance`` are in the run's ``dtype`` (float32 by default), ``probabilities`` and
    ``predictive_variance`` in float64 (their sums and logarithms read small differences)."""

    nodes: torch.Tensor
    mean: torch.Tensor
    variance: torch.Tensor
    probabilities: Optional[torch.Tensor] = None
    labels: Optional[torch.Tensor] = None
    predictive_variance: Optional[torch.Tensor] = None


class NodeGP:
    """A GP with a GNN kernel on the nodes of one graph, fitted as ``gnngp run`` fits it: the
    same composed and validated config, the same job (:class:`~gnngp_cli.job.gp_job.GPJob`: landmarks,
    the candidates chosen on validation, ``fit=mll``, the nugget chosen on the validation nodes),
    on this process's device (``compute=local``).

    ``kernel``: a kernel name of ``gnngp run kernel=...`` (``gcngp``, ``gcngp_x``, ``sagegp``...);
    ``settings``: the command line's keys (see the module docstring)."""

    def __init__(self, kernel: str = "gcngp", **settings: Any):
        load_plugins(plugin_registries())   # a plugin's kernel and its keys, before they are checked
        if not isinstance(kernel, str):
            raise ConfigError(f"kernel takes a kernel's name (kernel=\"gcngp_x\"), not {type(kernel).__name__}; "
                              "give its keys apart: kernel__layers=3 or **{\"kernel.layers\": 3}")
        self.kernel = kernel
        _check_bare_keys(settings)
        self.settings = overrides_of(settings)
        given = {}
        for key, _, value in (o.partition("=") for o in self.settings):
            if key in given and _parsed(given[key]) != _parsed(value):   # kernel__layers=4 beside **{"kernel.layers": 3}: one dropped
                raise ConfigError(f"{key} is given twice ({given[key]} and {value}, spelled two ways); give it once")
            given[key] = value
        for key in given:
            top = key.split(".")[0]
            if top in RUN_ONLY:
                raise ConfigError(f"{key} is an option of gnngp run, not of NodeGP: {RUN_ONLY[top]}")
        if "gnn" in given or ("model" in given and given["model"] in GNNS):
            typed, name = ("gnn", given["gnn"]) if "gnn" in given else ("model", given["model"])
            raise ConfigError(f"NodeGP is a GP and takes a kernel (kernel=\"gcngp\"), not {typed}={name}; a GNN baseline runs with "
                              f"gnngp run gnn={name}, or run([\"gnn={name}\", ...]) from gnngp_cli.api")
        if "model" in given:
            raise ConfigError(f"NodeGP takes its kernel as kernel=..., not model=; use NodeGP(kernel=\"{given['model']}\")")
        if "dataset" in given:
            raise ConfigError("NodeGP takes its graph in fit(data), not dataset=...; load a dataset with load_dataset(name, ...)")
        loaded = [key for key in given if key.startswith("dataset.") and key.split(".")[1] not in JOB_DATASET_KEYS]
        if loaded:   # read by the loader, before the graph is NodeGP's: given here, it was dropped silently (dataset.task on Cora)
            key = loaded[0]
            own = "; a graph of your own: integer y classifies, floating y regresses" if key == "dataset.task" else ""
            where = "load_dataset(name)" if key == "dataset.name" else f"load_dataset(name, {key.split('.', 1)[1]}=...)"
            raise ConfigError(f"{key} is read when a graph is loaded, and NodeGP takes its graph loaded, in fit(data): give it to "
                              f"{where}{own}")
        self.config = compose([f"kernel={kernel}", *self.settings])   # checked now: a typo fails here, not at fit (a switch's value too)
        try:
            validate(self.config)
        except ConfigError as err:   # a key only select reads (fit=mll's nugget grid, searched per budget) is kept; fit refuses it
            if "has no effect" not in str(err):
                raise
            try:
                validate(compose([f"kernel={kernel}", *self.settings, "active=sigma_opt"]))
            except ConfigError:
                raise err from None
        if self.config.method == "gnn":
            raise ConfigError(f"NodeGP takes a GP kernel, and {kernel} is a GNN; use gnngp run gnn={kernel} for the GNN baseline")
        if self.config.compute.backend != "local":
            raise ConfigError(f"NodeGP computes in this process (compute=local); for compute={self.config.compute.backend} use gnngp run")
        self._run: Optional[GPRun] = None

    def clone(self) -> "NodeGP":
        """A new, unfitted ``NodeGP`` of the same kernel and settings (scikit-learn's ``clone``)."""
        twin = object.__new__(NodeGP)
        twin.kernel, twin.settings, twin.config, twin._run = self.kernel, list(self.settings), copy.deepcopy(self.config), None
        return twin

    def __copy__(self) -> "NodeGP":
        """A shallow copy (the fit shared, as ``copy.copy`` of any object): a refit of either replaces its own."""
        twin = object.__new__(NodeGP)
        twin.__dict__.update(self.__dict__)
        twin.settings = list(self.settings)   # its own list: a setting added to one is not the other's
        return twin

    def __getstate__(self) -> dict:
        """An unfitted ``NodeGP`` pickles (its kernel and settings); a fitted one holds its graph and
        kernel in this process's backend, and is refused in one line instead of failing inside torch."""
        if self._run is not None:
            raise NotSavedError("a fitted NodeGP is not pickled or deep-copied (it holds its graph and kernel in this process); "
                                "keep what you need (gp.predict(...), gp.row), or gp.clone() for an unfitted copy to fit again")
        return dict(self.__dict__)

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, data: Any, train: Nodes = None, val: Nodes = None, test: Nodes = None) -> "NodeGP":
        """Fit on ``data`` (a PyG ``Data`` with ``x``, ``edge_index`` and ``y``): its
        ``train_mask``/``val_mask``/``test_mask``, or the node indices ``train``, ``val`` and
        ``test`` given here (which replace the masks). Integer ``y`` is classification, floating
        ``y`` regression. Returns ``self``; :attr:`row` is the result row ``gnngp run`` writes."""
        graph_overrides = list(getattr(data, "gnngp_overrides", None) or [])
        own = not graph_overrides
        if own:
            graph_overrides = ["dataset=custom"]
        config = compose([*graph_overrides, f"kernel={self.kernel}", *self.settings])
        if training_times(config) is not None:
            raise ConfigError("NodeGP predicts the GP posterior (a mean and a variance at the chosen nugget); inference.time is for "
                              "gnngp run and its rows: drop inference.time here")
        note = KERNELS[config.kernel.name].note
        if note is not None and note(config.kernel):   # as gnngp run warns (e.g. GATGP from 4 layers)
            log.warning(note(config.kernel))
        drawn = str(config.protocol.name)
        if drawn in DRAWS_SPLIT and any(v is not None for v in (train, val, test)):   # the protocol's split replaced them silently
            raise ConfigError(f"fit's train=, val= and test= set the split, and protocol={drawn} draws a split of its own; give one "
                              "of them (drop the indices, or the protocol)")
        graph = _adopt(data, train, val, test, own, config, fitting=True)
        spec = parse(config)   # the job's spec, once (the graph's task written in by _adopt)
        backend = LocalBackend(spec, graph)
        with backend:
            run = next(GPJob(spec, backend).runs())
        checked = checked_rows([run.row], validation=needs_validation(config), test=not getattr(graph.data, "unscored", False))[0]
        if checked["status"] != "ok":   # as gnngp run's error row: a NaN test or validation metric is no result
            raise DatasetError(checked["error"].removeprefix("ResultError: "))
        # all or nothing: a fit that fails leaves the earlier fit whole (its backend and run belong together), or none
        self.config, self._backend, self._run = config, backend, run
        return self

    @property
    def row(self) -> dict:
        """The result row of the fit: the columns of ``gnngp run``'s ``results.csv``."""
        return self._fitted().row

    @property
    def classes(self) -> Optional[torch.Tensor]:
        """The class id in ``data.y`` of each column of the predictions (``None`` for
        regression): ``gp.classes[pred.labels]`` are predicted labels as ``y`` spells them. A
        graph's own class ids that are not ``0..C-1`` (``{1, 2}``, a label ``10**6``) are
        renumbered ``0..C-1`` in sorted order, with a warning; ``arange(C)`` otherwise."""
        self._fitted()
        info = self._backend.info
        if info.task != "classification":
            return None
        classes = getattr(self._backend.data, "classes", None)
        return classes.cpu() if classes is not None else torch.arange(info.num_classes)

    @property
    def nugget(self) -> float:
        """The chosen nugget (relative to the kernel's mean diagonal, as the row's ``nugget``)."""
        return self._fitted().result.nugget

    @property
    def validation_curve(self) -> dict[str, list[float]]:
        """The validation metric at each nugget the fit scored: ``{"nugget": [...], "val": [...]}``,
        the nuggets relative to the kernel's mean diagonal (as :attr:`nugget`, which is the curve's
        best, the smallest on ties); with ``fit=mll``, the one fitted nugget. A plateau of ties
        shows how finely validation can tell nuggets apart."""
        result = self._fitted().result
        return {"nugget": result.grid.tolist(), "val": result.val_curve.tolist()}

    # -- active learning ---------------------------------------------------------------------
    def select(self, data: Any, budget: int, strategy: str = "sigma_opt", test: Nodes = None, batch: int = 1, initial: int = 0,
               nugget: Optional[float] = None) -> list[int]:
        """The ``budget`` nodes to label, in the order ``strategy`` buys them (``active=<strategy>``
        of ``gnngp run``: the kernel computed once, the posterior updated per label, never refitted),
        from the pool of every node of ``data`` but its test nodes (``data.test_mask``, or the node
        indices ``test``, which replace it; one of them is needed: the rows are scored on them).
        ``data``'s labels are read for the nodes bought (the posterior's mean; the GP strategies'
        variances do not depend on them).
        ``batch``: labels chosen per step (``active.batch``); ``initial``: random pool nodes
        labelled first (``active.initial``, seeded by the NodeGP's ``seed``); ``nugget``: the fixed
        nugget the labels are chosen at (``active.nugget``). With ``fit="mll"`` they are chosen at
        ``fit.nugget``, and the nugget of the ``nugget`` grid's highest marginal likelihood of the
        labels bought is chosen after them: ``gnngp run``'s active rows re-choose it at each budget
        and go on from it, but ``select`` has one budget, so its whole order is chosen at ``fit.nugget``.
        The kernel's settings are this NodeGP's. Returns the node ids, e.g. ``NodeGP(kernel="gcngp_x").select(load_dataset("cora"), budget=40)``."""
        counts = {}
        for name, value in (("budget", budget), ("batch", batch), ("initial", initial)):
            if isinstance(value, torch.Tensor) and value.numel() == 1 and not (value.is_floating_point() or value.is_complex()) and value.dtype != torch.bool:
                value = int(value.item())   # a 0-d or one-entry integer tensor: its number
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                counts[name] = int(value)   # numpy's integers too (np.int64(20))
            else:
                raise ConfigError(f"{name} takes a whole number of labels, e.g. {name}={ {'budget': 40, 'batch': 1, 'initial': 0}[name]}, not {value!r}")
        budget, batch, initial = counts["budget"], counts["batch"], counts["initial"]
        if budget < 1:
            raise ConfigError(f"budget={budget} must be at least 1 label, e.g. budget=40")
        if not isinstance(strategy, str):
            raise ConfigError(f"strategy takes a strategy's name (strategy=\"sigma_opt\"), not {type(strategy).__name__}")
        from .cli.messages import closest
        from .gp.strategies import STRATEGIES

        if strategy not in STRATEGIES and strategy != "none":   # none (the command line's "no active learning") is no strategy: never suggested
            near = closest(strategy, STRATEGIES)
            hint = f'did you mean strategy="{near}"? ' if near else ""
            raise ConfigError(f'strategy="{strategy}" is not a strategy; {hint}valid: {", ".join(sorted(STRATEGIES))}')
        if strategy == "none":
            raise ConfigError('strategy="none" chooses no labels; select needs a strategy, e.g. strategy="sigma_opt"')
        named = {f"active.budgets=[{budget}]": f"budget={budget}", "active.budgets": "budget", "active.batch": "batch",
                 "active.initial": "initial", "active.nugget": "nugget"}   # an error names the arguments as select takes them
        try:
            return self._select(data, budget, strategy, test, batch, initial, nugget)
        except ConfigError as err:
            text = str(err)
            for key, argument in named.items():
                text = text.replace(key, argument)
            if not getattr(data, "gnngp_overrides", None):   # a graph of the caller's own, which gnngp calls dataset=custom
                text = text.replace("every node of custom but", "every node of the graph but").replace("and custom is a", "and the graph is a")
            raise ConfigError(re.sub(r"\bactive=(\w+)", r'strategy="\1"', text)) from None   # the strategy as select takes it
        except KernelError as err:   # float32 round-off under the nugget: its fixes as select and NodeGP take them
            raise KernelError(str(err).replace("(active.nugget; with fit=mll, nugget.min)", '(select(..., nugget=...); with fit="mll", nugget__min)')
                              .replace("use dtype=float64", 'use NodeGP(..., dtype="float64")')) from None

    def _select(self, data: Any, budget: int, strategy: str, test: Nodes, batch: int, initial: int, nugget: Optional[float]) -> list[int]:
        from .job.active_job import ActiveJob

        graph_overrides = list(getattr(data, "gnngp_overrides", None) or [])
        own = not graph_overrides
        if own:
            graph_overrides = ["dataset=custom"]
        config = compose([*graph_overrides, f"kernel={self.kernel}", *self.settings, f"active={strategy}", f"active.budgets=[{budget}]",
                          f"active.batch={batch}", f"active.initial={initial}", "runs=1",
                          *([f"active.nugget={_value(nugget, 'nugget')}"] if nugget is not None else [])])
        validate(config)
        train = val = None
        needs_test = ("select needs the test nodes, which are never bought and on which the rows are scored: "
                      "give data.test_mask or select(data, budget, test=...)")
        if test is None and getattr(data, "test_mask", None) is not None and not bool(torch.as_tensor(data.test_mask).any()):
            raise DatasetError(f"{needs_test} (data.test_mask holds no node)")
        if own or test is not None:   # a graph of the caller's own, or test nodes given: the pool (as training nodes) is every node but the test ones
            if test is None and getattr(data, "test_mask", None) is None:
                raise DatasetError(needs_test)
            held = _node_ids(test if test is not None else torch.as_tensor(data.test_mask).cpu(), int(torch.as_tensor(data.x).size(0)), "test")
            if not held.numel():
                raise DatasetError(f"{needs_test} (test= holds no node)")
            train = torch.ones(int(torch.as_tensor(data.x).size(0)), dtype=torch.bool).index_fill_(0, held, False)
            if not bool(train.any()):
                raise DatasetError(f"the pool is empty: every one of the graph's {train.numel():,} nodes is a test node (never bought); "
                                   "give fewer test nodes (test=... or data.test_mask)")
            val = torch.zeros_like(train)
        graph = _adopt(data, train, val, test, own, config)
        spec = parse(config)
        backend = LocalBackend(spec, graph)
        with backend:
            run = next(ActiveJob(spec, backend).runs())
        return run.order

    # -- prediction --------------------------------------------------------------------------
    def predict(self, nodes: Nodes = None) -> Prediction:
        """The posterior at ``nodes`` (a boolean mask or node indices; default: every node)."""
        run, backend = self._fitted(), self._backend
        ids = self._ids(nodes)
        evaluated = run.evaluated
        try:
            features, prior = backend.prediction_rows(evaluated.kernel, ids, evaluated.arch, evaluated.ctx)
        except ResourceError as err:   # an exact kernel evaluated again on nodes it does not hold: fewer at a time may fit
            train = backend.train_ids()
            try:
                backend.check_exact_memory(evaluated.arch, evaluated.ctx, train, train)
            except ResourceError:
                raise err from None
            raise ResourceError(f"{err}; or predict fewer of these {ids.numel():,} nodes at a time (predict(nodes) on parts of them)") from None
        posterior, eps = run.result.posterior, run.result.eps
        at = torch.arange(ids.numel(), device=ids.device)
        mean = posterior.mean(features, at, eps)
        variance = posterior.variance(features, at, eps, prior)
        if backend.info.task == "regression":
            scale = posterior.output_scale(eps)
            return Prediction(ids, mean[:, 0], variance, predictive_variance=scale * (variance.double() + float(eps)))
        return Prediction(ids, mean, variance, run.result.rule.probabilities(mean, variance), mean.argmax(1))

    def score(self, nodes: Nodes = None) -> float:
        """The run's metric (accuracy, ROC-AUC or R^2, as ``gnngp run`` reports it) on ``nodes``
        (default: the test nodes, but a protocol's OOD ones, as the row's ``test``); the true values are the graph's ``y`` there."""
        run = self._fitted()
        ids = self._ids(nodes) if nodes is not None else self._backend._nodes("test")
        ood = getattr(self._backend.data, "ood_mask", None)
        if nodes is None and ood is not None:   # the test metric reads the in-distribution test nodes, as the row's does
            ids = ids[~ood[ids]]
        if not ids.numel():   # a metric of no node is no number
            raise DatasetError("score: nodes= holds no node; give a boolean mask with some True entry, or node indices" if nodes is not None
                               else "score: the graph has no test node to score; give nodes=")
        unlabelled = getattr(self._backend.data, "unlabelled", None)
        if unlabelled is not None and bool(unlabelled[ids.cpu()].any()):   # a negative class id, a NaN target: no truth to score against
            first = int(ids.cpu()[unlabelled[ids.cpu()]][0])
            raise DatasetError(f"score: node {first} has no label in y (a negative class id, or a target that is NaN or infinite); "
                               "give nodes with labels")
        if run.row["metric"] == "roc_auc" and torch.unique(self._backend.data.y[ids]).numel() < 2:   # no pair to rank
            raise DatasetError(f"score: the {ids.numel():,} node(s) given hold one class only, and ROC-AUC ranks nodes of both classes; "
                               "give nodes of both")
        mean = self.predict(ids).mean
        mean = mean[:, None] if mean.dim() == 1 else mean
        from .metrics import METRICS

        metric = METRICS[run.row["metric"]]
        scores = Scores()
        scores.add("score", metric, MetricInput(mean[:, None, :], self._backend.data.y[ids]))
        value = float(scores.value("score")[0])
        if value != value:   # R^2 of one node or of constant targets: no number, as a fit's NaN metric is no result
            raise DatasetError(f"score: the {run.row['metric']} of the {ids.numel():,} node(s) given is not a number (R^2 needs at least "
                               "two nodes whose targets differ); give more nodes")
        return value

    def kernel_matrix(self, rows: Nodes, cols: Nodes = None) -> torch.Tensor:
        """``K[rows, cols]`` of the fitted kernel (its chosen candidate and fitted values; the
        low-rank kernel's ``Q[rows] Q[cols]^T``), for small node sets."""
        run, backend = self._fitted(), self._backend
        rows = self._ids(rows)
        cols = rows if cols is None else self._ids(cols)
        if rows.numel() * cols.numel() > KERNEL_MATRIX_ENTRIES:
            raise ResourceError(f"kernel_matrix of {rows.numel():,} x {cols.numel():,} nodes is over {KERNEL_MATRIX_ENTRIES:,} entries; "
                                "ask for smaller node sets (predict gives means and variances of any number of nodes)")
        evaluated = run.evaluated
        if evaluated.ctx.low_rank:
            root = evaluated.kernel.kernel
            return held(root.root[root.positions(rows)]) @ held(root.root[root.positions(cols)]).T   # a factored root: its rows multiplied out
        union, inverse = torch.unique(torch.cat([rows, cols]), return_inverse=True)
        backend.check_exact_memory(evaluated.arch, evaluated.ctx, union, union)
        kernel, _ = exact_kernel(evaluated.arch.network, evaluated.ctx, union, union,
                                 before_square=lambda every: backend.check_exact_memory(evaluated.arch, evaluated.ctx, every, None))
        dense = kernel.dense()
        return dense[inverse[: rows.numel()]][:, inverse[rows.numel():]]

    # -- helpers -----------------------------------------------------------------------------
    def _fitted(self) -> GPRun:
        if self._run is None:
            raise NotFittedError("this NodeGP is not fitted; call gp.fit(data) first")
        return self._run

    def _ids(self, nodes: Nodes) -> torch.Tensor:
        n, device = self._backend.info.num_nodes, self._backend.device
        if nodes is None:
            return torch.arange(n, device=device)
        return _node_ids(nodes, n, "nodes").to(device)


def _node_ids(nodes: Any, n: int, what: str) -> torch.Tensor:
    """Node indices from a boolean mask of ``n`` entries or a sequence of indices in ``[0, n)``.
    A mask is boolean: an integer tensor of ``n`` zeros and ones (``mask.long()``, a 0/1 uint8
    mask) could be either, and read as indices it would name nodes 0 and 1 only, so it is
    refused; give ``mask.bool()`` or the indices ``mask.nonzero().view(-1)``."""
    try:
        ids = torch.as_tensor(nodes)
    except (TypeError, ValueError, RuntimeError):
        raise DatasetError(f"{what}: give a boolean mask or node indices (a tensor, array or list), not {type(nodes).__name__}") from None
    if ids.dtype == torch.bool:
        if ids.dim() == 2 and ids.size(0) == n:   # PyG's several splits side by side (WikipediaNetwork's ten)
            raise DatasetError(f"{what}: a mask of shape {tuple(ids.shape)} holds {ids.size(1)} splits side by side; pick one: "
                               f"{what}[:, 0] (or load_dataset(name, split_index=...) for a dataset's own splits)")
        if ids.numel() != n:
            raise DatasetError(f"{what}: a mask of {ids.numel()} entries for a graph of {n} nodes; give one entry per node, or node indices")
        return ids.nonzero().view(-1)
    if ids.numel() == 0 and ids.dim() == 1:   # an empty list (torch reads [] as float32): no node
        return torch.zeros(0, dtype=torch.long)
    if ids.is_floating_point() or ids.is_complex() or ids.dim() > 1:
        raise DatasetError(f"{what}: give a boolean mask or a 1-D tensor of node indices (got {ids.dtype}, shape {tuple(ids.shape)})")
    ids = ids.view(-1).long()
    if ids.numel() == n and bool(((ids == 0) | (ids == 1)).all()):
        raise DatasetError(f"{what}: {n} integers that are all 0 or 1, for a graph of {n} nodes, could be a mask or node indices; "
                           f"give a boolean mask ({what}.bool()) or the node indices ({what}.nonzero().view(-1))")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
        raise DatasetError(f"{what}: node indices must lie in [0, {n}) (got {int(ids.min())}..{int(ids.max())})")
    return ids


def _features(x: Any) -> torch.Tensor:
    """``data.x`` as the job reads it: a dense 2-D real tensor, one row per node (a numpy array
    is converted; a tensor that requires grad is detached: the GP does not differentiate it)."""
    import numpy as np

    if isinstance(x, np.ndarray):
        if x.dtype == np.object_:
            raise DatasetError("x is a numpy array of Python objects; give numbers: a torch tensor or numpy array of shape [N, F]")
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise DatasetError(f"x must be a tensor of shape [N, F] (one row of features per node), not {type(x).__name__}")
    if x.layout != torch.strided:
        raise DatasetError(f"x is a sparse tensor ({x.layout}); give a dense one: data.x = data.x.to_dense()")
    if x.device.type == "meta":   # shapes without values: Tensor.item() deep in the job
        raise DatasetError("x is on the meta device (a shape with no values); give the features themselves: a CPU or CUDA tensor")
    if x.is_complex():
        raise DatasetError(f"x holds complex numbers ({x.dtype}); gnngp needs real features: give the real and imaginary parts "
                           "as separate columns, torch.cat([x.real, x.imag], 1)")
    if x.dim() != 2:
        fix = "; for one feature per node give x.view(-1, 1)" if x.dim() == 1 else "; flatten each node's features: x.flatten(1)" if x.dim() > 2 else ""
        raise DatasetError(f"x must be 2-D, one row of features per node (shape [N, F]), got shape {tuple(x.shape)}{fix}")
    x = x.detach()
    return x.clone() if x.is_floating_point() else x.float()   # the features as fitted: a later x.mul_(0) is not the fit's (kernel_matrix)


def _targets(y: torch.Tensor, task: str, labelled: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, Optional[torch.Tensor], Optional[str]]:
    """``y`` of a graph of the caller's own as the job's targets: regression targets as given;
    class ids (non-negative integers) renumbered ``0..C-1`` where they are not
    (:func:`~gnngp_cli.data.labels.class_ids`), with the given id of each class and the note
    that says so. ``labelled``: the nodes whose labels the job reads (the masks' nodes), where
    a negative id elsewhere marks a node without a label (PyG's ``-1``), never a class; ``None``:
    every node's (``select`` reads the label of every node it buys)."""
    if y.dtype == torch.bool:
        raise DatasetError("y is boolean; give integer class ids (data.y = data.y.long()) for classification, or floats for regression")
    if y.is_complex():
        raise DatasetError(f"y holds complex numbers ({y.dtype}); give integer class ids, or real numbers for regression")
    if task == "regression" or not y.numel():
        return y, None, None
    if y.is_floating_point():
        raise DatasetError("y holds real numbers but the task is classification; give integer class ids, or floats for regression")
    unlabelled = y < 0
    if bool(unlabelled.any()):
        inside = unlabelled if labelled is None else unlabelled & labelled.to(y.device)
        if bool(inside.any()):
            first = int(inside.nonzero()[0])
            read = ("a negative id marks a node without a label, and may stand on nodes outside train, val and test only"
                    if labelled is not None else "select reads the label of every node it buys, any node but the test ones, and of the test nodes")
            raise DatasetError(f"y holds negative class ids (node {first} has {int(y[first])}); class ids are non-negative integers "
                               f"({read}); give this node its class id, or leave it out of the nodes given")
        y = y.masked_fill(unlabelled, int(y[~unlabelled].min()) if bool((~unlabelled).any()) else 0)   # never read: not a class of its own
    ids, classes, note = class_ids(y.cpu().numpy(), "y")
    note = None if note is None else f"{note}; gp.classes maps a prediction's class back to its id in y"
    return torch.from_numpy(ids).to(y.device), torch.from_numpy(classes), note


def edge_fingerprint(edge_index: torch.Tensor) -> tuple:
    """An edge list's shape and two order-free sums of its edges' keys (wrapping int64 arithmetic):
    the same for a copy, a clone or the tensor moved to another device, another for edges added,
    dropped or rewired, however written (torch, numpy, ``.data``)."""
    keys = edge_index[0].long() * 1_000_003 + edge_index[1].long()
    return tuple(edge_index.shape), int(keys.sum()), int((keys * keys).sum())


def _edges_changed(data: Any) -> bool:
    """Whether a graph :func:`load_dataset` returned holds other edges than it loaded."""
    loaded = getattr(data, "gnngp_edges", None)
    return loaded is not None and edge_fingerprint(torch.as_tensor(data.edge_index)) != loaded


def _adopt(data: Any, train: Nodes, val: Nodes, test: Nodes, own: bool, cfg: DictConfig, fitting: bool = False):
    """``data`` as the job's graph: a graph of the caller's own gets gnngp's fields (masks, task,
    class count, an undirected edge list, float features), as a custom dataset would."""
    if data is None or isinstance(data, (Mapping, torch.Tensor, list, tuple, str)):   # "the graph has no x" would be untrue of a dict that has one
        fix = ("; Data(**mapping) makes one of a dict" if isinstance(data, Mapping) else
               f"; load_dataset({data!r}) loads a dataset by its name" if isinstance(data, str) else "")
        raise DatasetError(f"fit and select take a graph as PyG's torch_geometric.data.Data (x, edge_index, y), not {type(data).__name__}{fix}")
    for key in ("x", "edge_index", "y"):
        if getattr(data, key, None) is None:
            raise DatasetError(f"the graph has no {key}; NodeGP.fit needs x (features), edge_index and y (targets)")
    x = _features(data.x)
    n = int(x.size(0))
    edge_index, y = torch.as_tensor(data.edge_index), torch.as_tensor(data.y)
    if y.dim() >= 1 and y.size(0) != n:   # before the masks, whose indices would be named out of range against x's rows
        raise DatasetError(f"the graph's features ({n:,} rows of x) and targets ({y.size(0):,} values of y) disagree on the node count")
    weighted = [key for key in ("edge_weight", "edge_attr") if getattr(data, key, None) is not None]
    read_as = []   # what the graph's edges were read as: logged, and kept in the rows' warnings as a dataset's are
    if weighted and own:
        read_as.append(f"the graph's {' and '.join(weighted)} {'are' if len(weighted) > 1 else 'is'} not read: gnngp's kernels read the graph as unweighted "
                       "(its normalised adjacency, kernel.adjacency)")
    if edge_index.is_floating_point() or edge_index.is_complex() or edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise DatasetError(f"edge_index must be an integer tensor of shape [2, E] (got {edge_index.dtype}, shape {tuple(edge_index.shape)})"
                           + ("; transpose it: edge_index.t()" if edge_index.dim() == 2 and edge_index.size(1) == 2 else ""))
    if not (y.dim() == 1 or (y.dim() == 2 and y.size(1) == 1)):
        several = ("gnngp's regression has one target per node: fit one NodeGP per column, y[:, j]" if y.is_floating_point()
                   else "for one-hot labels give the class ids: y.argmax(1)")
        raise DatasetError(f"y must hold one target per node, of shape [N] or [N, 1] (got shape {tuple(y.shape)}); {several}")
    given = {"train_mask": train, "val_mask": val, "test_mask": test}
    masks = {}
    for key, nodes in given.items():
        if str(cfg.protocol.name) in DRAWS_SPLIT and all(v is None and getattr(data, k, None) is None for k, v in given.items()):
            # the protocol draws the split anew and reads no mask of the graph's: every node in one of three placeholder sets, so
            # that every node's label is checked, as any node may be drawn into any set
            masks[key] = torch.arange(n) % 3 == ("train_mask", "val_mask", "test_mask").index(key)
            continue
        if nodes is None and getattr(data, key, None) is None and fitting and (key == "test_mask" or (key == "val_mask" and not needs_validation(cfg))):
            masks[key] = torch.zeros(n, dtype=torch.bool)   # none: no test metric (predict every node), or fit=mll's nugget, chosen without one
            continue
        if nodes is None and getattr(data, key, None) is None:
            mll = ("; or NodeGP(fit=\"mll\"), whose nugget is chosen by the marginal likelihood of the training labels, with no validation set"
                   if key == "val_mask" and fitting else "")
            raise DatasetError(f"the graph has no {key}; give data.{key} or the node indices, e.g. gp.fit(data, {key.split('_')[0]}=...){mll}")
        ids = (_node_ids(nodes, n, key.replace("_mask", "")) if nodes is not None     # given here: named train, val, test
               else _node_ids(torch.as_tensor(data[key]).cpu(), n, key))              # the graph's own mask
        masks[key] = torch.zeros(n, dtype=torch.bool).index_fill_(0, ids, True)
    edited = not own and _edges_changed(data)
    if edited:   # a loaded graph whose edges the caller changed: read as a graph of their own's are
        read_as.append("the graph's edge_index changed after load_dataset: it is made undirected and its self-loops left out, as a graph of "
                       "your own's is")
    if own or edited:
        edge_index, loops = without_self_loops(make_undirected(edge_index.cpu(), n))
        if loops:
            read_as.append(f"the graph's edge_index links {loops:,} node{'s' if loops > 1 else ''} to {'themselves' if loops > 1 else 'itself'}; "
                           f"{SELF_LOOPS_LEFT_OUT}")
    for note in read_as:
        log.warning(note)
    if not own and not any(v is not None for v in given.values()):
        graph = copy.copy(data)   # the caller's graph is never changed (a float copy of x, the device, a protocol's masks), and
        graph.x, graph.edge_index = x, edge_index.clone()   # what score() reads is the graph as fitted: y and the masks copied
        for key in ("y", *given):
            graph[key] = torch.as_tensor(data[key]).clone()
        if read_as:
            graph.warnings = [*(getattr(data, "warnings", None) or []), *read_as]
        return adopt_graph(cfg, graph)
    y = y.view(-1).detach().clone()   # the labels as fitted: score() reads them, whatever the caller changes since
    task = str(getattr(data, "task", "") or ("regression" if y.is_floating_point() else "classification"))
    notes = []
    if task == "regression" and not getattr(data, "task", None) and whole_number_floats(y.cpu().double().numpy()):
        notes.append("y is floating point, so this is regression (metric r2), though every value is a whole number; "
                     "for classification give integer class ids: data.y = data.y.long()")
    labelled = (masks["train_mask"] | masks["val_mask"] | masks["test_mask"]) if reads_training_set(cfg) else None
    unlabelled = y < 0 if task == "classification" and not y.is_floating_point() else ~y.isfinite() if y.is_floating_point() else None
    y, classes, renumbered = _targets(y, task, labelled)
    notes += [renumbered] if renumbered else []
    if task == "classification" and y.numel():
        untrained = untrained_classes(y, masks["train_mask"].to(y.device), (masks["val_mask"] | masks["test_mask"]).to(y.device))
        if untrained:   # as a custom dataset's warning: the class is never predicted
            notes.append(untrained_note([label_text(classes[c].item()) for c in untrained], " of y"))
    for note in notes:
        log.warning(note)
    graph = GraphData(x=x, y=y, edge_index=edge_index, **masks)
    graph.task, graph.num_classes = task, 0 if classes is None else int(classes.numel())
    graph.classes = classes
    graph.unlabelled = unlabelled.cpu() if unlabelled is not None and bool(unlabelled.any()) else None   # score refuses them
    graph.name = str(getattr(data, "name", "") or cfg.dataset.name)
    graph.split = "given" if any(v is not None for v in given.values()) else str(getattr(data, "split", "masks"))
    graph.stand_in = ""
    graph.unscored = not bool(masks["test_mask"].any())
    graph.warnings = [*(getattr(data, "warnings", None) or []), *read_as, *notes]   # kept in the row's warnings
    cfg.dataset.task = task
    return adopt_graph(cfg, graph)
