"""Which result rows may fill a table cell: those run with the preset's own settings.

A cell of Table 4 or 5 is the paper's method on the paper's dataset with the paper's settings,
which are this package's defaults for that dataset: depth 2; for a GNN the training epochs of
``TRAINING_DEFAULTS`` (100; 200 on crocodile; 10 on Reddit); for a GP kernel its parameters
(``sigma_w``, ``sigma_b``, ``sigma_w1``, ...) as the kernel's config and its defaults per task and
dataset resolve them, the nugget grid of ``NuggetConfig`` and, for a low-rank kernel, the
dataset's landmark fraction (``landmarks.count`` is not the preset's). :func:`annotate` gives
every row a ``settings`` key (what it recorded, for telling reruns apart) and a ``differs``
description, empty when the row matches; a setting a row did not record (rows written before it
was recorded) is not held against it.
"""
from __future__ import annotations

import json
import math
from dataclasses import fields
from typing import Any

import pandas as pd

from ..config import method_defaults
from ..data.registry import DATASETS
from ..gnn import GNNS
from ..kernels.architectures import KERNELS, kernel_label
from ..schema import KernelConfig, NuggetConfig

PRESET_DEPTH = 2
KERNEL_COMMON = {f.name for f in fields(KernelConfig)}
NUGGET_GRID = [NuggetConfig.min, NuggetConfig.max, NuggetConfig.num]
OUTCOMES = {"gamma", "best_epoch"}   # what a run chose, not how it was set up


def _kernel_by_label() -> dict[str, tuple[str, bool]]:
    return {kernel_label(name, low_rank): (name, low_rank) for name in KERNELS for low_rank in (False, True)}


def default_fraction(dataset: str) -> float:
    """The landmark fraction the low-rank kernels use on ``dataset`` by default (its registry entry)."""
    return float(DATASETS[dataset].config.landmark_fraction) if dataset in DATASETS else 1.0


def expected(dataset: str, method: str, task: str) -> dict[str, Any]:
    """The preset's settings for ``method`` (a label) on ``dataset``: setting -> value."""
    gnn = next((entry for entry in GNNS.values() if entry.label == method), None)
    if gnn is not None:
        return {"layers": PRESET_DEPTH, "epochs": method_defaults(gnn.defaults, dataset, task).get("epochs")}
    found = _kernel_by_label().get(method)
    if found is None:
        return {"layers": PRESET_DEPTH}
    name, low_rank = found
    entry = KERNELS[name]
    params = {f.name: getattr(entry.config(name=name), f.name) for f in fields(entry.config) if f.name not in KERNEL_COMMON}
    params.update({k: v for k, v in method_defaults(entry.defaults, dataset, task).items() if k in params})
    out = {"layers": PRESET_DEPTH, "nugget_grid": NUGGET_GRID, **{k: v for k, v in params.items() if isinstance(v, (int, float))}}
    if low_rank:
        out["landmark_fraction"] = default_fraction(dataset)
    return out


def _extra(row: pd.Series) -> dict:
    try:
        value = json.loads(row.get("extra")) if isinstance(row.get("extra"), str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def recorded(row: pd.Series) -> dict[str, Any]:
    """The settings a row recorded (columns, and the ``extra`` JSON), by setting name."""
    extra = _extra(row)
    out = {}
    for key in ("layers", "sigma_w", "sigma_b"):
        value = pd.to_numeric(row.get(key), errors="coerce")
        if not pd.isna(value):
            out[key] = float(value)
    fraction = pd.to_numeric(row.get("landmark_fraction"), errors="coerce")
    if not pd.isna(fraction):
        out["landmark_fraction"] = float(fraction)
    elif str(row.get("method", "")).endswith("-X") and not pd.isna(pd.to_numeric(row.get("landmarks"), errors="coerce")):
        out["landmark_fraction"] = "landmarks.count"
    for key, value in extra.items():
        if key not in OUTCOMES:
            out[key] = value
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)
    except (TypeError, ValueError):
        return a == b


def differences(row: pd.Series) -> str:
    """``"epochs 3 (preset 100); layers 4 (preset 2)"``, or ``""`` when the row matches."""
    want = expected(str(row.get("dataset")), str(row.get("method")), str(row.get("task") or "classification"))
    have = recorded(row)
    out = []
    for key, value in want.items():
        if value is None or key not in have:
            continue
        if not _same(have[key], value):
            out.append(f"{key} {_show(have[key])} (preset {_show(value)})")
    return "; ".join(out)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def annotate(rows: pd.DataFrame) -> pd.DataFrame:
    """Add ``settings`` (what each row recorded, as canonical JSON) and ``differs``."""
    rows = rows.copy()
    if rows.empty:
        rows["settings"], rows["differs"] = pd.Series(dtype=str), pd.Series(dtype=str)
        return rows
    rows["settings"] = [json.dumps(recorded(r), sort_keys=True, default=str) for _, r in rows.iterrows()]
    rows["differs"] = [differences(r) if r.get("status", "ok") == "ok" else "" for _, r in rows.iterrows()]
    return rows


def left_out(rows: pd.DataFrame, cells: set[tuple[str, str]]) -> list[str]:
    """One line per (dataset, method) cell: the rows kept out of it and the setting that differs."""
    lines = []
    apart = rows[(rows["status"] == "ok") & (rows["differs"] != "")]
    for (dataset, method), group in apart.groupby(["dataset", "method"], sort=True):
        if (dataset, method) not in cells:
            continue
        reasons = group["differs"].value_counts()
        lines.append(f"- {DATASETS[dataset].display if dataset in DATASETS else dataset} / {method}: "
                     + "; ".join(f"{n} row{'s' if n > 1 else ''} with {why}" for why, n in reasons.items()))
    return lines
