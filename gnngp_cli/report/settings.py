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

A row serves a paper table or figure only when it was run *by* a paper preset (``experiment=table4``
...) with nothing else changed (:func:`preset_run`): the grid fit (not ``fit=mll``), the local
backend (not ``compute=dask``), and no override beyond the keys the preset sweeps and the
:data:`NEUTRAL` ones, which change neither a result nor what it measures.
"""
from __future__ import annotations

import json
import math
from dataclasses import fields
from functools import lru_cache
from typing import Any, Collection, Optional

import pandas as pd
import yaml

from ..compose import config_dir, method_key, read_yaml, shown_override
from ..config import method_defaults
from ..data.datasets import DATASETS
from ..gnn import GNNS
from ..kernels.architectures import KERNELS, LIMITS, kernel_label
from ..schema import KernelConfig, NuggetConfig
from .layouts import experiment, names, tables

# overrides that change neither a row's numbers nor what they measure: where data and outputs
# live, what the console shows, how many seeds run (a cell counts them), resuming, stand-ins
# (marked in the cell)
NEUTRAL = frozenset({"seed", "runs", "repeat_deterministic", "max_memory_gb", "results_file", "progress", "resume",
                     "experiment", "experiment.stand_in"})
NEUTRAL_GROUPS = ("data.", "hydra.")
AVERAGED = frozenset({"seed", "runs", "splits", "dataset.split_index", "dataset.split_seed", "repeat_deterministic"})
MODEL_KEYS = frozenset({"model", "kernel", "gnn"})   # kernel=<name> and gnn=<name> are spellings of model=<name>
# What the paper's protocol leaves open: it searches RBF's gamma "over [1e-2, 1e2]", not over a
# number of values, so a preset row searched over another number of log-spaced values in that
# range still follows it (the CI reproduction job searches chameleon's and squirrel's over 26)
OPEN_IN_PAPER = frozenset({"kernel.gamma_grid.num"})

PRESET_DEPTH = 2
KERNEL_COMMON = {f.name for f in fields(KernelConfig)}
NUGGET_GRID = [NuggetConfig.min, NuggetConfig.max, NuggetConfig.num]
OUTCOMES = {"gamma", "best_epoch", "reliability", "probabilities", "variance_factor", "coefficients", "warnings", "curve"}   # what a run
# chose, fitted or measured, not how it was set up (a fitted variance_factor kept a rerun apart from its copy, and a run apart from its seed's)
PLAIN = {"likelihood": "gaussian", "protocol": "", "uncertainty": "softmax", "conformal": ""}   # columns that are settings, with their plain values


def _kernel_by_label() -> dict[str, tuple[str, bool]]:
    return {kernel_label(name, low_rank, limit): (name, low_rank) for name in KERNELS for low_rank in (False, True) for limit in LIMITS}


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


def overrides(row: pd.Series) -> Optional[dict[str, str]]:
    """The overrides a row's job was run with (its ``overrides`` column), key -> value;
    ``None`` when the row did not record them (rows written before they were recorded)."""
    raw = row.get("overrides")
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        items = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(items, list):
        return None
    out = {}
    for item in items:
        key, _, value = str(item).partition("=")
        out[key.lstrip("+~")] = value
    return out


def neutral(key: str) -> bool:
    return key in NEUTRAL or key.startswith(NEUTRAL_GROUPS)


def _text(value: Any, default: str) -> str:
    return default if value is None or (isinstance(value, float) and math.isnan(value)) or str(value) == "" else str(value)


def off_preset(row: pd.Series) -> str:
    """Why a row may not serve a paper table or figure, ``""`` when it may: it was run by a paper
    preset (its ``experiment``) with the grid fit, the local backend, and no override beyond the
    keys the preset sweeps, the model's, what the paper leaves open (:data:`OPEN_IN_PAPER`) and
    :func:`neutral` ones."""
    name = _text(row.get("experiment"), "")
    if name not in names():
        return "not run by a paper preset" + (f" (experiment={name})" if name else "")
    reasons = [f"{key}={value}" for key, value, default in (("fit", row.get("fit"), "grid"), ("compute", row.get("compute_backend"), "local"))
               if _text(value, default) != default]
    typed = overrides(row) or {}
    swept = set(experiment(name).sweeps)
    reasons += [shown_override(f"{key}={value}") for key, value in sorted(typed.items())
                if not (neutral(key) or key in swept or key in OPEN_IN_PAPER or (key in MODEL_KEYS and "model" in swept))
                and f"{key}={value}" not in reasons and not _typed_default(typed, key, value)]
    return ", ".join(reasons)


GROUP_CHOICES = ("dataset", "model", "compute", "fit", "likelihood", "protocol", "conformal", "active", "experiment", "learning_curve")   # config groups


@lru_cache(maxsize=None)
def default_choices() -> dict[str, str]:
    """The config groups' default options (``config.yaml``'s defaults list): ``{"fit": "grid", ...}``."""
    out = {}
    for entry in read_yaml(config_dir() / "config.yaml").get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                out[key.replace("optional ", "").replace("override ", "").strip()] = _canonical(value)
    return out


def _parse(text: str) -> Any:
    """An override's value as Hydra reads it: ``2`` and ``2.0`` a number, ``true`` a boolean,
    ``null`` None, ``[1,2]`` a list; any other text as it is (``on`` and ``yes`` are words to Hydra)."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            pass
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if text.strip().startswith("["):
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            return text
        return value if isinstance(value, list) else text
    return text


def _canonical(value: Any) -> str:
    """One spelling of a value: ``2``, ``2.0`` and ``02`` are ``2``; ``[1,2]`` and ``[1, 2]`` are ``[1, 2]``;
    a float keeps every digit (``0.1234567`` is not ``0.1234568``)."""
    if isinstance(value, str):
        value = _parse(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_canonical(v)}" for k, v in sorted(value.items())) + "}"
    return str(value)


def _method(typed: dict[str, str]) -> Optional[str]:
    """The row's method option (``model=``, ``kernel=`` or ``gnn=``), ``None`` when it took the default."""
    return next((typed[k] for k in ("model", "kernel", "gnn") if k in typed and typed[k] not in ("", "none")), None)


def spelled(typed: dict[str, str]) -> dict[str, str]:
    """A row's overrides in one spelling: values canonical (:func:`_canonical`), ``depth`` as the
    layers it sets (``kernel.layers`` of a GP, ``gnn.layers`` of a GNN, unless the row sets those
    itself), a config group's default option left out (``likelihood=gaussian``, ``protocol=none``)."""
    method = _method(typed)
    layers = "gnn.layers" if method is not None and method_key(method) == "gnn" else "kernel.layers"
    out = {}
    for key, value in typed.items():
        if key == "depth" and layers not in typed:
            key = layers
        if key in GROUP_CHOICES and key not in ("dataset", "model") and _canonical(value) == default_choices().get(key):
            continue
        out[key] = value if key in GROUP_CHOICES or key in MODEL_KEYS else _canonical(value)
    return out


@lru_cache(maxsize=256)
def _baseline(choices: tuple[str, ...]):
    """The composed config of these group choices alone (``dataset=cora``, ``model=gcngp``...),
    ``None`` when it does not compose (an option that no longer exists, a user's own config)."""
    from ..compose import compose

    try:
        return compose(list(choices))
    except Exception:  # noqa: BLE001 - the report never fails on a row's settings: the override is kept
        return None


_ABSENT = object()


def is_default(typed: dict[str, str], key: str, value: str) -> bool:
    """Whether ``key=value`` (canonical) is what the row's dataset, method and other group
    choices compose to anyway, so that typing it changes nothing (``kernel.layers=2``)."""
    method = _method(typed)
    choices = [f"{k}={typed[k]}" for k in GROUP_CHOICES if k in typed and k != "model"] + ([f"model={method}"] if method else [])
    config = _baseline(tuple(sorted(choices)))
    if config is None:
        return False
    from omegaconf import OmegaConf

    try:
        found = OmegaConf.select(config, key, default=_ABSENT, throw_on_missing=False)
        if OmegaConf.is_config(found):
            found = OmegaConf.to_container(found, resolve=True)
    except Exception:  # noqa: BLE001 - an interpolation that resolves only in a job: not known to be the default
        return False
    return found is not _ABSENT and _canonical(found) == value


def _typed_default(typed: dict[str, str], key: str, value: str) -> bool:
    """Whether the override ``key=value`` sets what the row composes to anyway (:func:`is_default`),
    in whichever spelling (``depth=2``, ``kernel.layers=2.0``)."""
    if key in GROUP_CHOICES or key in MODEL_KEYS:
        return key in default_choices() and _canonical(value) == default_choices()[key] and key not in ("dataset", "model")
    spelled_key = next((k for k, v in spelled({key: value, **{k: typed[k] for k in MODEL_KEYS if k in typed}}).items()
                        if k not in MODEL_KEYS), key)
    return is_default(typed, spelled_key, _canonical(value))


def group_settings(row: pd.Series, everywhere: frozenset = frozenset()) -> dict[str, str]:
    """The settings that tell a row's group of runs from another's (:mod:`.runs`): its overrides
    but the dataset (unless a config of the user's own) and model (a table's rows), what only varies runs (:data:`AVERAGED`: seeds,
    splits) and what changes no result (:func:`neutral`: paths, console, resuming), with its
    fit, backend, device, dtype and (a custom graph) its files' digest. A row that recorded no overrides: its recorded settings.

    Its effective settings, not their spelling (:func:`spelled`): an override that sets what the
    row's dataset and method compose to anyway (``kernel.layers=2``, :func:`is_default`) is left
    out, so the run is in the group of the runs that did not type it. ``everywhere``: the
    ``(key, value)`` overrides every row read has, which need no such check."""
    typed = overrides(row)
    if typed is None:
        out = {key: _show(value) for key, value in recorded(row).items()}
    else:
        out = {key: value for key, value in spelled(typed).items()
               if key not in MODEL_KEYS | {"dataset"} and key not in AVERAGED and (not neutral(key) or key.startswith("experiment"))
               and ((key, value) in everywhere or key in GROUP_CHOICES or not is_default(typed, key, value))}
        own = typed.get("dataset")
        if own is not None and own not in DATASETS:   # a config of the user's own (dataset=cora_std), or a shipped preset (csbm_1e3: csbm
            out["dataset"] = own   # of 1,000 nodes): its settings are not in the row, so its name tells its runs from those of its base dataset
    failed_gnn = _text(row.get("status"), "ok") != "ok" and not _text(row.get("kernel"), "") and _text(row.get("method"), "") in {g.label for g in GNNS.values()}
    if not failed_gnn and (_text(row.get("kernel"), "") or "fit" in out or "compute" in out
                           or pd.isna(pd.to_numeric(row.get("train_seconds"), errors="coerce"))):   # (a GNN's error row has no train_seconds)
        out["fit"] = out.get("fit") or _text(row.get("fit"), "grid")               # a GP's: a GNN has neither
        out["compute"] = out.get("compute") or _text(row.get("compute_backend"), "local")
    for key in ("device", "dtype", "data_digest"):   # data_digest: a custom graph's files, which may be written again at one path
        if key not in out and _text(row.get(key), ""):
            out[key] = _text(row.get(key), "")
    return out


def extra_of(row: pd.Series) -> dict:
    """A row's `extra` column as a dict (empty when missing or malformed)."""
    try:
        value = json.loads(row.get("extra")) if isinstance(row.get("extra"), str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def recorded(row: pd.Series) -> dict[str, Any]:
    """The settings a row recorded (columns, and the ``extra`` JSON), by setting name."""
    extra = extra_of(row)
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
    for key, plain in PLAIN.items():   # a likelihood, a protocol, a GNN's probabilities other than the plain ones
        value = _text(row.get(key), "")
        if value and value != plain:
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
    """Add ``settings`` (what each row recorded, as canonical JSON), ``differs`` (from the table's
    preset), ``off_preset`` (:func:`off_preset`) and ``group`` (:func:`group_settings`, as JSON)."""
    rows = rows.copy()
    if rows.empty:
        for column in ("settings", "differs", "off_preset", "group"):
            rows[column] = pd.Series(dtype=str)
        return rows
    rows["settings"] = [json.dumps(recorded(r), sort_keys=True, default=str) for _, r in rows.iterrows()]
    rows["differs"] = [differences(r) if r.get("status", "ok") == "ok" else "" for _, r in rows.iterrows()]
    rows["off_preset"] = [off_preset(r) for _, r in rows.iterrows()]
    typed = [overrides(r) for _, r in rows.iterrows()]
    pairs = [set(spelled(t).items()) for t in typed if t is not None]
    everywhere = frozenset(set.intersection(*pairs)) if pairs else frozenset()
    rows["group"] = [json.dumps(group_settings(r, everywhere), sort_keys=True) for _, r in rows.iterrows()]
    return rows


def left_out(rows: pd.DataFrame) -> list[str]:
    """One line per (dataset, method) of the rows a paper preset ran that its tables and figures
    leave out, and why: an override beyond the preset's (``fit=mll``, ``compute=dask``...) or, for
    a table's preset, a setting that differs from the table's."""
    ran = rows[(rows["status"] == "ok") & rows["experiment"].fillna("").astype(str).isin(names())]
    tabled = ran["experiment"].isin([e.name for e in tables()])   # a figure's sweep (depth, landmarks) is its own
    why = ran["off_preset"].where(ran["off_preset"] != "", ran["differs"].where(tabled, ""))
    lines = []
    for (dataset, method), reasons in why[why != ""].groupby([ran["dataset"], ran["method"]], sort=True):
        lines.append(f"- {DATASETS[dataset].display if dataset in DATASETS else dataset} / {method}: "
                     + "; ".join(f"{n} row{'s' if n > 1 else ''} with {reason}" for reason, n in reasons.value_counts().items()))
    return lines


def setting_labels(groups: pd.Series, apart: Collection[str] = ()) -> list[str]:
    """Each row's settings that differ among the rows read (its group of settings,
    :func:`group_settings`, as JSON), but the keys ``apart`` (what the caller tells apart itself:
    an active run's strategy, budgets and seed; a learning curve's times and learning rate), as
    ``key=value, ...``; empty where every row has the same."""
    parsed = {g: {k: v for k, v in json.loads(g).items() if k not in apart} for g in groups.unique()}
    keys = sorted({k for g in parsed.values() for k in g})
    varying = [k for k in keys if len({str(g.get(k)) for g in parsed.values()}) > 1]
    return [", ".join(f"{k}={parsed[g][k]}" for k in varying if k in parsed[g]) for g in groups]
