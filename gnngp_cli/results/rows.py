"""Result rows: the columns every job writes, whatever its method and backend."""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Iterable, Optional

import torch

from ..version import __version__
from ..errors import GnngpError
from ..gnn import GNNS
from ..config import training_times
from ..data.custom import files_digest
from ..kernels import KERNELS
from ..kernels.architectures import kernel_label
from ..runtime import resolve_device, take_warmup_seconds


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def method_names(spec: Any) -> tuple[str, str]:
    """``(label, config name)`` of the job's method, e.g. ``("GCNGP-X", "gcngp_x")`` or ``("GCN", "gcn")``."""
    if spec.method == "gnn":
        return GNNS[spec.gnn.name].label if spec.gnn.name in GNNS else spec.gnn.name, spec.gnn.name
    if spec.kernel is not None:
        return kernel_label(spec.kernel.name, spec.kernel.low_rank, spec.kernel.get("limit", "nngp")), spec.kernel.name + ("_x" if spec.kernel.low_rank else "")
    return "?", "?"


def base_row(spec: Any) -> dict:
    """The columns every row has; ``kernel`` is the GP kernel's config name (empty for a GNN)
    and ``device`` the device the job resolved to (``cuda`` for ``device=auto`` with a GPU)."""
    label, name = method_names(spec)
    try:
        device = str(resolve_device(spec.device))
    except GnngpError:
        device = str(spec.device)
    return {
        "status": "ok", "dataset": str(spec.dataset.name).lower(), "method": label, "kernel": name if spec.method != "gnn" else "",
        "device": device, "dtype": spec.dtype, "version": __version__,
        "protocol": "" if spec.protocol.name == "none" else str(spec.protocol.name),
        "conformal": "" if spec.conformal.name == "none" else str(spec.conformal.name),
        "limit": str(spec.kernel.get("limit", "nngp")) if spec.method != "gnn" and spec.kernel is not None else "",
    }


def graph_columns(info: Any, load_seconds: float, spec: Any, run: int) -> dict:
    """The columns a row takes from the graph it ran on (:class:`~gnngp_cli.job.backend_interface.GraphInfo`); with
    ``splits=all``, the split's index and how many fixed splits there are (``resume`` reads them)."""
    every = {"split_index": int(spec.dataset.split_index or 0), "split_count": int(info.num_splits or 0)} if spec.get("splits") == "all" else {}
    if str(spec.dataset.name) == "custom":   # files of the user's that may be written again at the same path: resume and the report tell them apart
        every["data_digest"] = getattr(info, "data_digest", "") or files_digest(spec.dataset.get("path"))   # as read (a backend that read them elsewhere: now)
    return dict(task=info.task, run=run, n_nodes=int(info.num_nodes), n_edges=int(info.num_edges), load_seconds=load_seconds,
                warmup_seconds=take_warmup_seconds(), split=info.split, stand_in=info.stand_in, experiment=spec.experiment.name or "", timestamp=now(), **every)


def with_extra(row: dict, **entries: Any) -> dict:
    """``row`` with ``entries`` added to its ``extra`` JSON."""
    row["extra"] = json.dumps({**json.loads(row.get("extra") or "{}"), **entries})
    return row


def run_settings(spec: Any, fitted: Iterable[str] = ()) -> dict:
    """What a GP row records beside its columns so the report can tell a preset's runs from
    others: the nugget grid and the kernel's own numeric parameters (``sigma_w1``, ``alpha``...),
    except what ``fit=mll`` fitted instead (``fitted``: their names; the grid's nuggets are then
    not used either): those are in the row's ``fitted_*`` columns."""
    entry = KERNELS[spec.kernel.name]
    fitted = {name.rpartition("_")[0] if name.rpartition("_")[2].isdigit() else name for name in fitted}   # sigma_w_2 (one per layer) is sigma_w
    params = {k: v for k, v in entry.arguments(spec.kernel).items()
              if k != "layers" and k not in fitted and isinstance(v, (int, float)) and not isinstance(v, bool)}
    times = training_times(spec)
    if times is not None:   # inference.time: the times (and the rate) replace the nugget grid
        grid = {"times": [t if math.isfinite(t) else "inf" for t in times], "learning_rate": float(spec.inference.learning_rate)}   # strict JSON
    elif spec.fit.method == "mll":
        grid = {}
    else:
        grid = {"nugget_grid": [float(spec.nugget.min), float(spec.nugget.max), int(spec.nugget.num)]}
    return {**grid, **params, **pool_setting(spec)}


def pool_setting(spec: Any) -> dict:
    """``{"landmark_pool": ...}`` for a low-rank kernel whose landmarks are not the default
    pool's (a row's ``extra``, so the report keeps such runs apart), else nothing."""
    return {"landmark_pool": str(spec.landmarks.pool)} if spec.kernel.low_rank and spec.landmarks.pool != "train" else {}


def dataset_label(name: str, stand_in: str) -> str:
    """The dataset as the console names it: ``arxiv (csbm stand-in)`` for a stand-in."""
    return f"{str(name).lower()} ({stand_in.split(' (')[0]})" if stand_in else str(name).lower()


def error_row(spec: Any, err: BaseException) -> dict:
    try:
        row = {**base_row(spec), "experiment": str(spec.experiment.name or "")}   # a preset's failed cell names its preset
    except Exception:  # noqa: BLE001 - the config itself may be what is broken
        row = {"status": "error", "version": __version__}
    row.update(status="error", error=f"{type(err).__name__}: {err}".replace("\n", " "), timestamp=now())
    try:   # the depth and seed it ran with: a depth sweep's failed cells are told apart by their columns, not only by their overrides
        model = spec.kernel if spec.method != "gnn" else spec.gnn
        row.update(layers=int(model.layers), seed=int(spec.seed))
    except Exception:  # noqa: BLE001 - a broken config: the row says what it can
        pass
    return row


def console_row(row: dict) -> dict:
    """The row as the console shows it: a stand-in says so beside the dataset name."""
    stand_in = row.get("stand_in") or ""
    return {**row, "dataset": dataset_label(row["dataset"], stand_in)} if isinstance(stand_in, str) and stand_in else row


def console_summary(rows: list[dict]) -> Optional[str]:
    ok = [r for r in rows if r.get("status") == "ok"]
    at = ""
    budgets = {int(r["budget"]) for r in ok if isinstance(r.get("budget"), (int, float)) and r["budget"] == r["budget"]}
    if budgets:   # active runs: a row per budget, each told; the summary is of the last budget (gnngp report draws the curves)
        ok = [r for r in ok if r.get("budget") == max(budgets)]
        at = f" at {max(budgets)} labels (active={ok[0].get('strategy')})" if ok else ""
    if len(ok) < 2:
        return None
    test = torch.tensor([r["test"] for r in ok], dtype=torch.float64)
    splits = len({r["split_index"] for r in ok if "split_index" in r})
    over = f"{splits} splits" + (f" ({len(ok)} runs)" if len(ok) != splits else "") if splits else f"{len(ok)} runs"
    same = ""
    fixed = all(isinstance(r.get("kernel"), str) and r["kernel"] and (r.get("landmarks") == 0 or r.get("landmark_fraction") == 1)
                for r in ok)   # an exact kernel, or every training node a landmark (gnngp_cli.job.gp_job.deterministic)
    if fixed and not splits and not budgets and len({r["test"] for r in ok}) == 1:   # a user's question: why is the spread 0?
        same = ("; the same in every run: an exact kernel (or every training node a landmark) on one split draws nothing at random "
                "(repeat_deterministic=false runs it once; another split: dataset.split_seed=<n>, or splits=all on a dataset with fixed splits)")
    return (f"{ok[0]['method']} on {console_row(ok[0])['dataset']} over {over}{at}: test {ok[0]['metric']} "
            f"{float(test.mean()):.4f} +- {float(test.std()):.4f}{same}")
