"""Composing a run's config: the registries' entries as Hydra config options, the method's
spellings on the command line, and the composed config itself.

The schema of each method and dataset is declared once, beside its code, in a registry entry:
kernels in :mod:`gnngp_cli.kernels.architectures`, GNNs in :mod:`gnngp_cli.gnn`, datasets in the
loader modules of :mod:`gnngp_cli.data`. :func:`register_configs` turns every entry into a
config option, so the choices on the command line, their typed keys and their defaults all come
from the registries:

- ``model=<name>``: a GP kernel (``gcngp``, and its low-rank twin ``gcngp_x``) or a GNN (``gcn``);
  ``kernel=<name>`` and ``gnn=<name>`` on the command line are the same choice, spelled for
  the kind of method (see :func:`method_overrides`);
- ``dataset=<name>``;
- ``active=<strategy>``: the active-learning strategies (:data:`gnngp_cli.gp.strategies.STRATEGIES`), and ``none``;
- ``compute=<name>``: the backends' options, handed down by the caller (the backends sit
  above this layer: :data:`gnngp_cli.backends.BACKENDS`).
"""
from __future__ import annotations

import copy
import functools
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from .data.datasets import DATASETS, PRESETS
from .errors import ConfigError
from .gnn import GNNS
from .kernels import ACTIVATIONS, BLOCK_NAMES, KERNELS
from .gp.likelihoods import LIKELIHOODS
from .gp.strategies import STRATEGIES
from .metrics import METRICS
from .schema import CONFORMAL, FIT_METHODS, PROTOCOLS, ActiveConfig, ComputeConfig, ConformalConfig, FitConfig, LikelihoodConfig, ProtocolConfig, RunConfig


def config_dir() -> Path:
    """The configs shipped inside the package (``gnngp_cli/conf``). A user's own config folder
    is added with Hydra's search path: ``hydra.searchpath=[file:///path/to/my_conf]``."""
    return Path(__file__).resolve().parent / "conf"


def read_yaml(path: Path) -> dict:
    """A YAML config file (an experiment preset) as plain Python, uncomposed."""
    return OmegaConf.to_container(OmegaConf.load(path))


_LAST_COMPUTE: dict = {}   # the compute options registered last (compose without them reuses them)


def registries() -> dict[str, dict]:
    """The registries a plugin adds to (gnngp_cli.plugins), by the kind of entry they hold, and the
    names composed kernels' blocks take (``kernel block``: an activation may not take one)."""
    return {"dataset": DATASETS, "dataset preset": PRESETS, "kernel": KERNELS, "GNN": GNNS, "likelihood": LIKELIHOODS, "strategy": STRATEGIES,
            "metric": METRICS, "activation": ACTIVATIONS, "kernel block": dict.fromkeys(BLOCK_NAMES)}


def register_configs(compute: Mapping[str, ComputeConfig]) -> None:
    """The schema and one config option per registry entry: ``model/<kernel>``,
    ``model/<kernel>_x``, ``model/<gnn>``, ``dataset/<name>``, and ``compute/<name>`` for each
    backend option in ``compute``."""
    from hydra.core.config_store import ConfigStore

    # ${pid:} in run and sweep dirs: two runs started in the same microsecond still differ
    OmegaConf.register_new_resolver("pid", os.getpid, replace=True, use_cache=True)
    _LAST_COMPUTE["options"] = dict(compute)
    share_config_store(ConfigStore)
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigSource

    # the source classes Hydra uses: its plugin scan imports its core plugins' modules anew (new classes)
    sources = {source.__name__: source for source in Plugins.instance().discover(ConfigSource)}
    keep_package_configs(sources["FileConfigSource"], sources["ImportlibResourcesConfigSource"])
    from omegaconf import _utils, base

    keep_parsed_interpolations((base, _utils))
    from hydra._internal import defaults_list

    skip_unused_interpolation_maps(defaults_list)
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    embed_loaded_configs(ConfigLoaderImpl)
    cs = ConfigStore.instance()
    # storing every option makes and validates about 60 structured configs (0.6 s, most of a
    # compose): done again only when a registry entry or a compute option is not the one stored
    # (entries are frozen: a changed one is a new object; the entries themselves are kept and
    # compared by identity, so a freed entry's address reused by a new one is not mistaken for it)
    held = [(name, entry) for table in (KERNELS, GNNS, DATASETS, PRESETS, STRATEGIES, compute) for name, entry in table.items()]
    stored = _REGISTERED.get(id(cs))
    if stored is not None and len(stored) == len(held) and all(a == c and b is d for (a, b), (c, d) in zip(stored, held)):
        return
    _GENERATION["stored"] += 1   # what a composed config was made from has changed: none composed before is handed out again
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
    for method in FIT_METHODS:
        cs.store(group="fit", name=method, node=FitConfig(method=method))
    for name in LIKELIHOODS:
        cs.store(group="likelihood", name=name, node=LikelihoodConfig(name=name))
    for name in PROTOCOLS:
        cs.store(group="protocol", name=name, node=ProtocolConfig(name=name))
    for name in CONFORMAL:
        cs.store(group="conformal", name=name, node=ConformalConfig(name=name))
    for name in ("none", *STRATEGIES):
        cs.store(group="active", name=name, node=ActiveConfig(name=name))
    for name, options in compute.items():
        cs.store(group="compute", name=name, node=options)
    _REGISTERED[id(cs)] = held


def share_config_store(store_class: type) -> None:
    """Every Hydra compose deep-copies its config repository (``CachingConfigRepository``, so that
    setting up the sources never changes the original), and with it the ``ConfigStore`` singleton that
    its structured source holds: every option stored above, copied at each compose (the largest part
    of a compose, and of the test suites' time; the changelog has the numbers). The store is only read
    there (``ConfigStore.load`` copies the node it hands out), so a copy of it is the store itself, as
    Hydra's own fix has it (hydra PR 2928: the source reads ``ConfigStore.instance()`` at each use)."""
    if "__deepcopy__" not in vars(store_class):
        store_class.__deepcopy__ = lambda self, memo: self


_SOURCES: dict = {}   # a config file of the package's or of Hydra's -> the ConfigResult parsed from it (keep_package_configs)


def keep_package_configs(file_source: type, package_source: type) -> None:
    """Every Hydra compose reads and parses each YAML file it composes (its own ``hydra/*.yaml``
    and the package's ``conf/*.yaml``) again: parsing one is six times a copy of it. The
    files shipped with gnngp (``file_source``: Hydra's ``FileConfigSource``, for the package's
    ``conf`` folder, the file's size and modification time in the key) and with Hydra or its
    plugins (``package_source``: ``ImportlibResourcesConfigSource``, installed packages) are
    parsed once a process, and each load gets its own copy (Hydra changes what it loads: it
    takes the defaults list out). A user's config folder (``hydra.searchpath``) is read each time."""
    from hydra.plugins.config_source import ConfigResult

    ours = str(config_dir()) + os.sep
    for source, key_of in ((file_source, lambda self, full: _file_key(full, ours)),
                           (package_source, lambda self, full: (self.path, full) if self.path.split(".")[0] in ("hydra", "hydra_plugins") else None)):
        if getattr(source.load_config, "kept_by_gnngp", False):
            continue

        def load_config(self, config_path: str, _original=source.load_config, _key_of=key_of) -> ConfigResult:
            key = _key_of(self, os.path.join(str(self.path), self._normalize_file_name(config_path)))
            if key is None:
                return _original(self, config_path)
            if key not in _SOURCES:
                _SOURCES[key] = _original(self, config_path)
            kept = _SOURCES[key]
            return ConfigResult(provider=kept.provider, path=kept.path, config=copy.deepcopy(kept.config), header=dict(kept.header))

        load_config.kept_by_gnngp = True
        source.load_config = load_config


def _file_key(full: str, folder: str) -> Optional[tuple]:
    """A config file under ``folder`` (the package's ``conf``) and its size and modification time
    (an edited file is a new key); ``None`` for any other file, or one that is not there."""
    full = os.path.realpath(full)
    if not full.startswith(folder):
        return None
    try:
        stat = os.stat(full)
    except OSError:
        return None
    return full, stat.st_mtime_ns, stat.st_size


def keep_parsed_interpolations(modules: Sequence[Any]) -> None:
    """OmegaConf parses an interpolation's text (``${seed}``, with its ANTLR grammar) each time it
    resolves or checks one: a compose, a check of the options and a run each resolve the same few
    dozen texts many times, and the parse is most of it. The parse tree of a text is the same each
    time (the tokens keep their own text; resolving only reads the tree), so each module's ``parse``
    (``omegaconf.base``, ``omegaconf._utils``) keeps the trees of the texts it has parsed (the last
    4,096); a text that does not parse raises each time, as before."""
    for module in modules:
        if not getattr(module.parse, "kept_by_gnngp", False):
            kept = functools.lru_cache(maxsize=4096)(module.parse)
            kept.kept_by_gnngp = True
            module.parse = kept


def skip_unused_interpolation_maps(module: Any) -> None:
    """Hydra builds, for every config it expands (a score a compose), a config of the choices made so far
    (``_create_interpolation_map``) that only a defaults entry naming an interpolation
    (``model: ${...}``) reads; it is built whether or not one does, and it was the largest single
    part of a compose. No config shipped with gnngp or Hydra has such an entry, so the map is built
    only for a defaults list that holds one (a user's config may); for any other it is ``None``,
    which nothing reads."""
    original = module._create_interpolation_map
    if getattr(original, "kept_by_gnngp", False):
        return

    def create_interpolation_map(overrides, defaults_list, self_added):
        if any(not d.is_self() and not d.is_override() and d.is_interpolation() for d in defaults_list):
            return original(overrides, defaults_list, self_added)
        return None

    create_interpolation_map.kept_by_gnngp = True
    module._create_interpolation_map = create_interpolation_map


def embed_loaded_configs(loader_class: type) -> None:
    """Hydra puts each config it loads under its package (``dataset``, ``model``...) in a new
    config (``_embed_result_config``), and the assignment deep-copies it, though the config was
    loaded for this compose alone (every source hands out its own copy: ``ConfigStore.load``,
    :func:`keep_package_configs`). The config is put there as it is, as Hydra's own merge of the
    embedded configs does (``no_deepcopy_set_nodes``); a config already placed somewhere (the same
    file embedded under two packages) is copied as before."""
    original = loader_class.__dict__["_embed_result_config"].__func__
    if getattr(original, "kept_by_gnngp", False):
        return
    from omegaconf import Container
    from omegaconf import flag_override   # the helper Hydra's composition itself uses

    def embed_result_config(ret, package_override):
        package = ret.header["package"] if package_override is None else package_override
        if package is None or package == "" or not isinstance(ret.config, Container) or ret.config._get_parent() is not None:
            return original(ret, package_override)
        cfg = OmegaConf.create()
        with flag_override(cfg, "no_deepcopy_set_nodes", True):
            OmegaConf.update(cfg, package, ret.config, merge=False)
        ret = copy.copy(ret)
        ret.config = cfg
        return ret

    embed_result_config.kept_by_gnngp = True
    loader_class._embed_result_config = staticmethod(embed_result_config)


def skip_unset_mode(hydra_class: type) -> None:
    """Hydra's app composes the whole config once only to read ``hydra.mode`` (``Hydra.get_mode``,
    ``None`` when unset), then composes it again to run. No config shipped with gnngp or Hydra sets
    ``hydra.mode``; so when the command line neither sets it nor adds a config folder of the
    user's (``hydra.searchpath``, ``--config-dir``, ``--config-path``), the mode is ``None`` without that compose
    (then ``-m`` chooses, as Hydra does)."""
    if getattr(hydra_class.get_mode, "kept_by_gnngp", False):
        return
    original = hydra_class.get_mode
    ours = {("hydra", "pkg://hydra.conf"), ("main", str(config_dir())), ("main", f"file://{config_dir()}"), ("schema", "structured://")}

    def get_mode(self, config_name, overrides):
        shipped = all((entry.provider, entry.path) in ours for entry in self.config_loader.get_search_path().get_path())
        named = any(o.lstrip("+~").split("=", 1)[0] in ("hydra", "hydra.mode", "hydra.searchpath") for o in overrides)
        return None if shipped and not named else original(self, config_name, overrides)

    get_mode.kept_by_gnngp = True
    hydra_class.get_mode = get_mode


_REGISTERED: dict = {}   # the config store's id -> the registries' entries it holds (register_configs)
_GENERATION = {"stored": 0}   # how many times register_configs has stored the options (a key of the composed configs kept)
_COMPOSED: "OrderedDict[tuple, DictConfig]" = OrderedDict()   # the configs composed last (compose), a copy of one handed out per call
COMPOSED_KEPT = 256


CHOSEN_NAMES = {"kernel.name": "kernel", "model.name": "kernel", "gnn.name": "gnn", "dataset.name": "dataset"}   # a choice's name, not a key


def method_overrides(overrides: Sequence[str]) -> list[str]:
    """Command-line overrides with ``kernel=<name>`` and ``gnn=<name>`` spelled as the one
    method choice ``model=<name>`` (a sweep ``kernel=a,b`` too). ``kernel`` and ``gnn`` chosen
    together is an error; ``gnn=none`` is no choice."""
    chosen = {}
    out = []
    for o in overrides:
        key, sep, value = o.partition("=")
        named = key.lstrip("+~")
        if sep and named in CHOSEN_NAMES:   # the section's other keys stayed the default choice's: a row labelled RBF ran GCNGP's
            group = CHOSEN_NAMES[named]
            raise ConfigError(f"{named} is set by {group}=<name>, which brings its own settings with it; give {group}={value}")
        if sep and key in ("kernel", "gnn"):
            chosen[key] = value
            if not (key == "gnn" and value == "none"):
                out.append(f"model={value}")
            continue
        out.append(o)
    if "kernel" in chosen and chosen.get("gnn", "none") != "none":
        raise ConfigError("both kernel and gnn are set; choose one: kernel=<name> for a GP or gnn=<name> for a GNN (a sweep of both: "
                          f"gnngp run -m model={chosen['kernel']},{chosen['gnn']})")
    if sum(1 for o in out if o.partition("=")[0] == "model") > 1:
        given = [o for o in overrides if o.partition("=")[0] in ("model", "kernel", "gnn") and o != "gnn=none"]
        values = ",".join(g.partition("=")[2] for g in given)   # spelled as one choice takes them all: model= where kernels and GNNs mix
        raise ConfigError(f"the method is chosen twice ({' and '.join(given)}); keep one (a sweep of both: gnngp run -m "
                          f"{method_key(values)}={values})")
    swept = next((o.partition("=")[2] for o in out if o.partition("=")[0] == "model" and ("," in o or "(" in o)), None)
    if swept is not None and method_key(swept) != "kernel":
        # a sweep of GNNs: Hydra checks the other overrides against the default method (a kernel, which has no gnn section)
        # before any job chooses a GNN, so gnn.epochs=1 was an unknown key; '+' adds it there, and each job's own GNN reads it
        out = [f"+{o}" if o.startswith("gnn.") else o for o in out]
    return out


SWEEP_FUNCTIONS = frozenset({"choice", "range", "interval", "int", "float", "str", "bool", "tag", "log", "glob", "sort", "shuffle",
                             "reverse", "json_str", "extend_list"})


def method_key(value: str) -> str:
    """How the user spells the method choice ``value`` (a name, a sweep of names, an Optuna
    ``choice(...)``): ``kernel`` when every name is a GP kernel (or its ``_x`` twin), ``gnn`` when
    every one is a GNN, else ``model``."""
    import re

    names = [n for n in re.findall(r"[A-Za-z0-9_.-]+", value) if n not in SWEEP_FUNCTIONS]
    if names and all(n in KERNELS or (n.endswith("_x") and n[:-2] in KERNELS) for n in names):
        return "kernel"
    if names and all(n in GNNS for n in names):
        return "gnn"
    return "model"


def shown_override(override: str) -> str:
    """An override as the user spells it: Hydra's internal ``model=<name>`` as ``kernel=<name>``
    (a GP kernel) or ``gnn=<name>`` (a GNN), the inverse of :func:`method_overrides`; any other as it is."""
    prefix = override[:len(override) - len(override.lstrip("+~"))]
    key, sep, value = override[len(prefix):].partition("=")
    if key != "model" or not sep:
        return override
    return f"{prefix}{method_key(value)}={value}"


def compose(overrides: Sequence[str], compute: Optional[Mapping[str, ComputeConfig]] = None, config_name: str = "config",
            config_path: Optional[Path] = None) -> DictConfig:
    """The composed, typed config for these Hydra overrides (no output dir is created).
    ``compute``: the ``compute=`` options (the backends' registry, a layer above); ``None``: the
    ones registered last in this process, else ``local`` alone (a reader of rows, such as the
    report, asks only the defaults of the other groups)."""
    if compute is None:
        compute = _LAST_COMPUTE.get("options") or {"local": ComputeConfig(backend="local")}
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    overrides = method_overrides(list(overrides))
    register_configs(compute)
    # The package's own configs, composed with the same overrides from the same registry options, are the
    # same config: kept (the last COMPOSED_KEPT), and each call gets its own copy (a deep copy: 3 ms; a
    # compose: 190 ms, most of a fitted NodeGP's set-up and of many tests). Not with a config folder of the
    # caller's or a hydra.* override (a search path may name files edited between two calls).
    key = None if config_path is not None or any(o.lstrip("+~").startswith("hydra") for o in overrides) else (
        _GENERATION["stored"], config_name, tuple(overrides))
    if key is not None and key in _COMPOSED:
        _COMPOSED.move_to_end(key)
        return copy.deepcopy(_COMPOSED[key])
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_path or config_dir()), version_base=None):
        cfg = hydra_compose(config_name=config_name, overrides=overrides)
    if key is not None:
        _COMPOSED[key] = copy.deepcopy(cfg)
        while len(_COMPOSED) > COMPOSED_KEPT:
            _COMPOSED.popitem(last=False)
    return cfg
