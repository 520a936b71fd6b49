"""The GNN registry: one entry per baseline, declared beside its model."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from ..schema import SQRT_TENTH, GNNConfig

# The paper's training settings for every GNN, per task or dataset (see config.method_defaults).
TRAINING_DEFAULTS = {
    "*": {"lr": 0.01, "epochs": 100, "batch_norm": False, "hidden": 256, "dropout": 0.5},
    "regression": {"lr": SQRT_TENTH, "batch_norm": True},
    "arxiv": {"batch_norm": True},
    "crocodile": {"epochs": 200},
    "reddit": {"epochs": 10, "batch_size": 10240},   # mini-batch training, as in the paper
}

# gnn.recipe=platonov2023: the settings of Platonov et al. (ICLR 2023)'s train.py for every dataset
# (hidden 512, dropout 0.2, AdamW at lr 3e-5 without weight decay, 1000 full-batch steps, no batch norm)
RECIPE_DEFAULTS = {
    "platonov2023": {"*": {"lr": 3e-5, "epochs": 1000, "batch_norm": False, "hidden": 512, "dropout": 0.2, "batch_size": 0}},
}


def gnn_defaults(entry: "GNNEntry", recipe: str) -> Mapping[str, Mapping[str, Any]]:
    """The training defaults a GNN's ``null`` settings take: its entry's table, or its recipe's;
    a table without ``hidden`` or ``dropout`` for every dataset takes the paper's."""
    table = entry.defaults if recipe == "paper" else RECIPE_DEFAULTS[recipe]
    shape = {key: TRAINING_DEFAULTS["*"][key] for key in ("hidden", "dropout")}
    return {**table, "*": {**shape, **table.get("*", {})}}


@dataclass(frozen=True)
class GNNEntry:
    """One GNN baseline: its model class, typed config, label, default sampling fanouts per
    graph layer (``None``: every neighbour) and training defaults per task or dataset."""

    name: str
    label: str
    model: type
    config: type
    fanouts: Optional[list] = None
    graph_layers: Callable[[int], int] = lambda layers: layers
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: TRAINING_DEFAULTS)
    check: Optional[Callable[[Any, int], None]] = None   # check(options, hidden): the entry's own options (a one-line ConfigError)
    row_batches: bool = False   # no graph layers, yet gnn.batch_size trains on mini-batches of rows of its precomputed features (SIGN)


GNNS: dict[str, GNNEntry] = {}


def register_gnn(name: str, label: str, config: type = GNNConfig, fanouts: Optional[list] = None,
                 graph_layers: Callable[[int], int] = lambda layers: layers,
                 defaults: Optional[Mapping[str, Mapping[str, Any]]] = None, check: Optional[Callable[[Any, int], None]] = None,
                 row_batches: bool = False):
    """Class decorator: add a :class:`GNN` subclass as ``gnn=name``; ``check(options, hidden)``
    refuses impossible values of its own options (``hidden``: the hidden width, its default filled);
    ``row_batches``: a model without graph layers that trains on mini-batches of rows of its
    precomputed features."""
    def add(model: type) -> type:
        GNNS[name] = GNNEntry(name, label, model, config, fanouts, graph_layers, defaults or TRAINING_DEFAULTS, check, row_batches)
        return model
    return add
