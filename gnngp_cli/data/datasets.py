"""The dataset registry: one entry per dataset, declared beside its loader.

An entry holds the dataset's display name (tables and figures), its loader
``load(options, store) -> Data``, its typed config with the dataset's defaults (which become the
``dataset=<name>`` option), its kind of split and the published digests of its raw files.
Presets are further config options of a registered dataset (e.g. ``csbm_1e6``, the csbm graph
at 10^6 nodes). Nothing here imports a loader: each loader module registers its datasets, and
the package imports them all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from ..errors import ConfigError

# public: the one split the dataset comes with; fixed: numbered splits (dataset.split_index,
# splits=all); seeded: a split of fixed proportions drawn by dataset.split_seed; random: a split
# by dataset.train_ratio and dataset.val_ratio, drawn by dataset.split_seed
SPLIT_KINDS = ("public", "fixed", "seeded", "random")
SPLIT_READS = {"public": (), "fixed": ("split_index",), "seeded": ("split_seed",), "random": ("split_seed", "train_ratio", "val_ratio")}
SPLIT_WORDS = {"public": "the one it comes with", "fixed": "numbered (dataset.split_index)", "seeded": "drawn by dataset.split_seed in fixed proportions",
               "random": "by dataset.train_ratio and dataset.val_ratio, drawn by dataset.split_seed"}


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    display: str
    load: Callable[[Any, Any], Any]
    config: Any                           # a DatasetConfig (subclass) instance: the defaults
    stand_in: Optional[tuple] = None      # (nodes, edges, features, classes, train, val) of a csbm stand-in
    partition: Optional[Callable[..., Any]] = None   # partition(options, store, out, rows, source): row blocks streamed from raw files
    split: str = "public"                 # one of SPLIT_KINDS
    digests: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # <Name>/raw/<file> -> accepted digests (see .digests)
    memory: Optional[Callable[[Any], float]] = None   # memory(options): peak bytes its load allocates, told before it loads (a generated graph)
    reads: Optional[Callable[[Any], tuple[float, str]]] = None   # reads(options): (peak bytes, what) its files declare, checked before they are read


DATASETS: dict[str, DatasetEntry] = {}
PRESETS: dict[str, Any] = {}              # option name -> config of a registered dataset


def register_dataset(name: str, display: str, load: Callable[[Any, Any], Any], config: Any,
                     stand_in: Optional[tuple] = None, partition: Optional[Callable[..., Any]] = None, *,
                     split: str = "public", digests: Optional[Mapping[str, tuple[str, ...]]] = None,
                     memory: Optional[Callable[[Any], float]] = None, reads: Optional[Callable[[Any], tuple[float, str]]] = None) -> None:
    """Add ``dataset=name``: ``load(options, store)`` returns its PyG ``Data``. ``partition(options,
    store, out, rows, source)``, when given, writes its row blocks (:mod:`.shards`) straight from
    the raw files, for graphs too large to load in one process (``compute=dask``). ``split``: its
    kind of split (:data:`SPLIT_KINDS`); ``digests``: the published digests of its raw files;
    ``memory(options)``: the bytes its load allocates at its peak, checked against the memory
    limit before it loads (a generated graph, whose size is a setting); ``reads(options)``: the
    bytes its files declare they expand to and what they are, checked the same way before they
    are read (a user's files: a small compressed file may hold a huge array)."""
    if config.name != name:
        raise ConfigError(f"dataset entry {name!r} has a config named {config.name!r}")
    if split not in SPLIT_KINDS:
        raise ConfigError(f"dataset entry {name!r}: split={split!r} is not a kind of split; use one of {', '.join(SPLIT_KINDS)}")
    DATASETS[name] = DatasetEntry(name, display, load, config, stand_in, partition, split, dict(digests or {}), memory, reads)


def register_preset(option: str, config: Any) -> None:
    """Add ``dataset=option``: the registered dataset ``config.name`` with these settings."""
    PRESETS[option] = config


def option_dataset(option: str) -> Optional[str]:
    """The registered dataset the option ``dataset=option`` loads (a preset's base: ``csbm_1e3`` is
    ``csbm``), or ``None`` (no shipped option: a dataset config of one's own)."""
    if option in PRESETS:
        return str(PRESETS[option].name)
    return option if option in DATASETS else None


def display_name(name: str) -> str:
    entry = DATASETS.get(name)
    return entry.display if entry is not None else name
