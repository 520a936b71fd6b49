"""The paper's tables and figures as the experiment configs lay them out
(``gnngp_cli/conf/experiment/*.yaml``): which datasets, models and depths each sweeps, and, for
a table, its title and rows (``experiment.table``). Nothing is declared again here: a method's
label, a dataset's display name and whether its kernel runs low rank come from the registries."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional


from ..compose import config_dir, read_yaml
from ..data.datasets import DATASETS
from ..gnn import GNNS
from ..kernels import KERNELS
from ..kernels.architectures import kernel_label


@dataclass(frozen=True)
class Experiment:
    name: str
    datasets: tuple[str, ...]
    models: tuple[str, ...]
    depths: tuple[int, ...] = ()
    table: dict = field(default_factory=dict)   # experiment.table: title, rows
    low_rank: Any = None                         # the experiment's kernel.low_rank (${dataset.large}: low rank on large datasets)
    sweeps: tuple[str, ...] = ()                 # the keys its sweep sets (hydra.sweeper.params), its parents' included

    def low_rank_on(self, dataset: str) -> bool:
        """Whether the experiment runs its kernels low rank on ``dataset``."""
        if isinstance(self.low_rank, str) and "dataset.large" in self.low_rank:
            return bool(DATASETS[dataset].config.large) if dataset in DATASETS else False
        return bool(self.low_rank)


def _values(value: Any) -> tuple[str, ...]:
    return tuple(v.strip() for v in str(value).split(",") if v.strip()) if value is not None else ()


@lru_cache(maxsize=None)
def experiment(name: str) -> Experiment:
    """The experiment ``name`` as its YAML sweeps it (an experiment it lists in ``defaults`` first)."""
    raw = read_yaml(config_dir() / "experiment" / f"{name}.yaml")
    merged: dict = {}
    for parent in raw.get("defaults", []) or []:
        if isinstance(parent, str) and (config_dir() / "experiment" / f"{parent}.yaml").is_file():
            base = experiment(parent)
            merged.update(datasets=base.datasets, models=base.models, depths=base.depths, low_rank=base.low_rank, sweeps=base.sweeps)
    params = (raw.get("hydra", {}) or {}).get("sweeper", {}).get("params", {}) or {}
    merged["sweeps"] = tuple(sorted({*merged.get("sweeps", ()), *params}))
    if "dataset" in params:
        merged["datasets"] = _values(params["dataset"])
    if "model" in params:
        merged["models"] = _values(params["model"])
    if "depth" in params:
        merged["depths"] = tuple(int(d) for d in _values(params["depth"]))
    if "low_rank" in (raw.get("kernel") or {}):
        merged["low_rank"] = raw["kernel"]["low_rank"]
    return Experiment(name, merged.get("datasets", ()), merged.get("models", ()), merged.get("depths", ()),
                      dict((raw.get("experiment") or {}).get("table") or {}), merged.get("low_rank"), merged["sweeps"])


def names() -> list[str]:
    """The paper's presets (``conf/experiment/*.yaml`` with ``experiment.paper: true``), by name:
    the others (the uncertainty protocols, ``ntk``) fill no paper table or figure."""
    return sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml") if _is_paper(p))


@lru_cache(maxsize=None)
def _is_paper(path: Path) -> bool:
    return bool((read_yaml(path).get("experiment") or {}).get("paper"))


def tables() -> list[Experiment]:
    """The experiments that fill a paper table (those with ``experiment.table``), by name."""
    return [e for e in (experiment(n) for n in names()) if e.table]


def is_gnn(model: str) -> bool:
    return model in GNNS


def model_label(model: str, low_rank: Optional[bool] = None) -> str:
    """The row label of a model option: ``GCN``, ``GCNGP``, ``GCNGP-X`` (``gcngp_x``, or
    ``gcngp`` with ``low_rank``)."""
    if model in GNNS:
        return GNNS[model].label
    name, twin = (model[:-2], True) if model.endswith("_x") and model[:-2] in KERNELS else (model, False)
    return kernel_label(name, twin or bool(low_rank))


def display(dataset: str) -> str:
    return DATASETS[dataset].display if dataset in DATASETS else dataset


def gnn_methods() -> set[str]:
    return {entry.label for entry in GNNS.values()}
