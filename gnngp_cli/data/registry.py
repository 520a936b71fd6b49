"""The dataset registry: one entry per dataset, declared beside its loader.

An entry holds the dataset's display name (tables and figures), its loader
``load(cfg, store) -> Data`` and its typed config with the dataset's defaults (which become
the ``dataset=<name>`` option). Presets are further config options of a registered dataset
(e.g. ``csbm_1e6``, the csbm graph at 10^6 nodes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import ConfigError


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    display: str
    load: Callable[[Any, Any], Any]
    config: Any                           # a DatasetConfig (subclass) instance: the defaults
    stand_in: Optional[tuple] = None      # (nodes, edges, features, classes, train, val) of a csbm stand-in
    partition: Optional[Callable[..., Any]] = None   # partition(cfg, store, out, rows, source): row blocks streamed from raw files


DATASETS: dict[str, DatasetEntry] = {}
PRESETS: dict[str, Any] = {}              # option name -> config of a registered dataset


def register_dataset(name: str, display: str, load: Callable[[Any, Any], Any], config: Any,
                     stand_in: Optional[tuple] = None, partition: Optional[Callable[..., Any]] = None) -> None:
    """Add ``dataset=name``: ``load(cfg, store)`` returns its PyG ``Data``. ``partition(cfg,
    store, out, rows, source)``, when given, writes its row blocks (:mod:`.shards`) straight from
    the raw files, for graphs too large to load in one process (``compute=dask``)."""
    if config.name != name:
        raise ConfigError(f"dataset entry {name!r} has a config named {config.name!r}")
    DATASETS[name] = DatasetEntry(name, display, load, config, stand_in, partition)


def register_preset(option: str, config: Any) -> None:
    """Add ``dataset=option``: the registered dataset ``config.name`` with these settings."""
    PRESETS[option] = config


def display_name(name: str) -> str:
    entry = DATASETS.get(name)
    return entry.display if entry is not None else name


def _load_builtin() -> None:
    from . import custom, heterophily, papers100m, public, synthetic, wikipedia  # noqa: F401 - each registers its datasets


_load_builtin()
