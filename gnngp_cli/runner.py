"""The experiment runner: one Hydra job = load a dataset, compute a kernel, predict, write rows."""
from __future__ import annotations

import copy
import json
import logging
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf

from . import __version__
from .config import check_method_overrides, validate
from .data import Adjacency, DataStore, load_dataset
from .errors import ConfigError, GnngpError, ResourceError
from .gnn import GNN_LABELS, train_gnn
from .inference import GPResult, gp_predict, log_grid
from .kernels import ARCHITECTURES, BaseKernel, KernelContext
from .kernels.blocks import exact_kernel
from .kernels.architectures import GPR_FILTER_GRID, Architecture, kernel_label
from .kernels.filters import filter_grid
from .metrics import resolve_metric
from .results import append_rows, summary_line
from .runtime import Stopwatch, available_bytes, peak_cuda_mb, peak_rss_mb, resolve_device

log = logging.getLogger("gnngp")

BYTES_PER_ENTRY_FACTOR = 4  # a dense block plus the temporaries of the ReLU expectation and products


def architecture(kcfg: Any, coefficients: Optional[tuple[float, ...]] = None) -> Architecture:
    """The kernel's blocks built from its config (``coefficients``: gprgp's filter, one of
    :func:`filter_choices`)."""
    _, builder, adjacency = ARCHITECTURES[kcfg.name]
    params = {key: kcfg[key] for key in ("layers", "sigma_w", "sigma_b", "alpha", "theta", "sigma_w1", "sigma_w2")}
    if kcfg.name == "gprgp":
        params["coefficients"] = coefficients if coefficients is not None else filter_choices(kcfg)[0]
    if kcfg.name == "composed":
        params.update(first=OmegaConf.to_container(kcfg.first) if kcfg.first is not None else None,
                      hidden=OmegaConf.to_container(kcfg.hidden) if kcfg.hidden is not None else None)
    return Architecture(
        name=kcfg.name,
        label=kernel_label(kcfg.name, kcfg.low_rank),
        network=builder(**params),
        adjacency=kcfg.adjacency or adjacency,
    )


def filter_choices(kcfg: Any) -> list[Optional[tuple[float, ...]]]:
    """The filters a gprgp kernel chooses from on validation: ``kernel.coefficients`` (one filter
    or a list), else :data:`GPR_FILTER_GRID`; ``[None]`` for kernels without a filter."""
    if kcfg.name != "gprgp":
        return [None]
    value = kcfg.get("coefficients")
    if value is None:
        return list(GPR_FILTER_GRID)
    return filter_grid(OmegaConf.to_container(value) if OmegaConf.is_config(value) else value)


def choose_landmarks(train_mask: torch.Tensor, fraction: float, count: Optional[int], seed: int, dataset: str) -> torch.Tensor:
    """Landmark node ids among the training nodes: exactly ``count`` of them, or each one
    with probability ``1/fraction`` (all of them when ``fraction == 1``), seeded."""
    train = train_mask.nonzero().view(-1)
    generator = torch.Generator().manual_seed(seed)
    if count is not None:
        if count > train.numel():
            raise ConfigError(f"landmarks.count={count} exceeds the {train.numel()} training nodes of {dataset}; use at most {train.numel()} or landmarks.fraction")
        return torch.sort(train[torch.randperm(train.numel(), generator=generator)[:count].to(train.device)])[0]
    if fraction == 1:
        return train
    keep = (torch.rand(train.numel(), generator=generator) < 1.0 / fraction).to(train.device)
    if not bool(keep.any()):
        raise ConfigError(f"landmarks.fraction={fraction:g} picked none of the {train.numel()} training nodes of {dataset}; use a smaller fraction or landmarks.count")
    return train[keep]


@dataclass
class Prepared:
    data: Any
    device: torch.device
    dtype: torch.dtype
    load_seconds: float


def prepare(cfg: Any) -> Prepared:
    """Validate, pick the device, and load the dataset (timed apart from the method)."""
    validate(cfg)
    device = resolve_device(cfg.device)
    dtype = getattr(torch, cfg.dtype)
    store = DataStore.from_config(cfg.data.root, cfg.data.mirror, cfg.data.download, cfg.data.download_timeout)
    watch = Stopwatch(device)
    with watch.measure():
        data = load_dataset(cfg.dataset, store, cfg.experiment.stand_in).to(device)
    data.metric = resolve_metric(cfg.dataset.get("metric"), data.task, data.num_classes, str(cfg.dataset.name).lower())
    return Prepared(data, device, dtype, watch.seconds)


def check_exact_memory(arch: Architecture, ctx: KernelContext, target: torch.Tensor, train: Optional[torch.Tensor], dtype: torch.dtype, cfg: Any) -> None:
    """Refuse, before computing, an exact kernel whose dense blocks ``K[target, train]``
    (``train=None``: square) would not fit."""
    need = arch.network.peak_elements(target, ctx, train) * torch.finfo(dtype).bits // 8 * BYTES_PER_ENTRY_FACTOR
    limit = cfg.max_memory_gb * 2**30 if cfg.max_memory_gb is not None else 0.8 * available_bytes(ctx.features.device)
    if need > limit:
        raise ResourceError(
            f"the exact {arch.label} kernel on {cfg.dataset.name} needs about {need / 2**30:.1f} GiB but {limit / 2**30:.1f} GiB are available; "
            f"use the low-rank kernel (kernel={arch.name}_x)" + (" or dtype=float32" if dtype == torch.float64 else "")
        )


def gp_run(cfg: Any, prep: Prepared, run: int) -> tuple[GPResult, dict]:
    """One GP run (seed ``cfg.seed + run``): kernel, then nugget-grid inference; for kernels
    with ``gamma_search`` the base kernel's gamma is also chosen on validation."""
    data, device, dtype = prep.data, prep.device, prep.dtype
    seed = cfg.seed + run
    kcfg = cfg.kernel
    filters = filter_choices(kcfg)
    arch = architecture(kcfg, filters[0])
    adjacency = Adjacency.from_graph(data.edge_index, data.num_nodes, arch.adjacency, dtype, device)
    features = data.x.to(dtype)
    masks = {"train": data.train_mask, "val": data.val_mask, "test": data.test_mask}
    landmarks = choose_landmarks(data.train_mask, cfg.landmarks.fraction, cfg.landmarks.count, seed, cfg.dataset.name) if kcfg.low_rank else None
    target = (data.train_mask | data.val_mask | data.test_mask).nonzero().view(-1)
    train = data.train_mask.nonzero().view(-1)
    grid = log_grid(cfg.nugget.min, cfg.nugget.max, cfg.nugget.num, dtype=dtype, device=device)
    gammas = (
        log_grid(kcfg.gamma_grid.min, kcfg.gamma_grid.max, kcfg.gamma_grid.num).tolist()
        if kcfg.gamma_search else [kcfg.base.gamma]
    )
    kernel_watch, inference_watch = Stopwatch(device), Stopwatch(device)
    ctx = KernelContext(features, adjacency, BaseKernel(kcfg.base.name, kcfg.base.gamma, kcfg.base.c, kcfg.base.d), landmarks)

    def evaluate(gamma: float, coefficients, validation_only: bool):
        nonlocal ctx, arch
        arch = architecture(kcfg, coefficients)
        ctx = ctx.with_base(BaseKernel(kcfg.base.name, float(gamma), kcfg.base.c, kcfg.base.d))
        if not kcfg.low_rank:
            check_exact_memory(arch, ctx, target, train, dtype, cfg)
        with kernel_watch.measure():
            if kcfg.low_rank:
                kernel = arch.network(None, ctx, None)
                diagonal = kernel.diagonal()
            else:  # K[labelled nodes, training nodes]
                kernel, diagonal = exact_kernel(arch.network, ctx, target, train,
                                                before_square=lambda nodes: check_exact_memory(arch, ctx, nodes, None, dtype, cfg))
        with inference_watch.measure():
            return gp_predict(kernel, data.y, masks, data.task, data.num_classes, grid, kcfg.low_rank,
                              diagonal, validation_only=validation_only, metric_name=data.metric)

    gamma, coefficients = kcfg.base.gamma, filters[0]
    choices = [(g, f) for f in filters for g in gammas]
    if len(choices) > 1:  # score every (gamma, filter) on validation, then predict with the best (the first on ties)
        scores = [evaluate(g, f, validation_only=True).val for g, f in choices]
        gamma, coefficients = choices[max(range(len(choices)), key=lambda i: (scores[i], -i))]
    result = evaluate(gamma, coefficients, validation_only=False)
    extra = {"gamma": gamma} if kcfg.gamma_search else {}
    if coefficients is not None:
        extra["coefficients"] = list(coefficients)
    timing = {
        "kernel_seconds": kernel_watch.seconds,
        "inference_seconds": inference_watch.seconds,
        "landmarks": int(landmarks.numel()) if landmarks is not None else 0,
        "seed": seed,
        "extra": json.dumps(extra),
    }
    return result, timing


def method_names(cfg: Any) -> tuple[str, str]:
    """``(label, config name)`` of the job's method, e.g. ``("GCNGP-X", "gcngp_x")`` or ``("GCN", "gcn")``."""
    if cfg.method == "gnn":
        return GNN_LABELS.get(cfg.gnn.name, cfg.gnn.name), cfg.gnn.name
    if cfg.kernel is not None:
        return kernel_label(cfg.kernel.name, cfg.kernel.low_rank), cfg.kernel.name + ("_x" if cfg.kernel.low_rank else "")
    return "?", "?"


def base_row(cfg: Any) -> dict:
    label, name = method_names(cfg)
    return {
        "status": "ok", "dataset": str(cfg.dataset.name).lower(), "method": label, "kernel": name,
        "device": cfg.device, "dtype": cfg.dtype, "version": __version__,
    }


def finish_row(row: dict, cfg: Any, prep: Prepared, run: int) -> dict:
    data = prep.data
    row.update(
        task=data.task, run=run, n_nodes=int(data.num_nodes), n_edges=int(data.edge_index.size(1)),
        load_seconds=prep.load_seconds, device=str(prep.device), split=getattr(data, "split", ""),
        stand_in=getattr(data, "stand_in", ""), experiment=cfg.experiment.name or "",
        peak_rss_mb=peak_rss_mb(), peak_cuda_mb=peak_cuda_mb(prep.device),
        timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    return row


def deterministic(cfg: Any) -> bool:
    """A GP job without randomness: an exact kernel, or every training node a landmark."""
    lm = cfg.landmarks
    return not cfg.kernel.low_rank or (lm.count is None and lm.fraction == 1)


def run_gp(cfg: Any, prep: Optional[Prepared] = None) -> list[dict]:
    """All runs of a GP job; returns one row per run (one run only for a deterministic kernel
    when ``repeat_deterministic`` is false)."""
    prep = prep or prepare(cfg)
    rows = []
    runs = 1 if deterministic(cfg) and not cfg.repeat_deterministic else cfg.runs
    for run in range(runs):
        result, timing = gp_run(cfg, prep, run)
        row = base_row(cfg)
        row.update(
            metric=result.metric_name, **{k: result.metrics[k] for k in ("train", "val", "test")},
            nugget=result.nugget, layers=cfg.kernel.layers, sigma_w=cfg.kernel.sigma_w, sigma_b=cfg.kernel.sigma_b,
            landmark_fraction=cfg.landmarks.fraction if cfg.kernel.low_rank else None,
            **timing, **result.uncertainty,
        )
        row["total_seconds"] = row["kernel_seconds"] + row["inference_seconds"]
        rows.append(finish_row(row, cfg, prep, run))
    return rows


def run_gnn(cfg: Any, prep: Optional[Prepared] = None) -> list[dict]:
    """All runs of a GNN job (seeds ``seed .. seed+runs-1``); one row per run."""
    prep = prep or prepare(cfg)
    g = cfg.gnn
    rows = []
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        for run in range(cfg.runs):
            result = train_gnn(g, prep.data, prep.device, cfg.seed + run, cfg.progress, lambda: Stopwatch(prep.device))
            row = base_row(cfg)
            row.update(
                metric=prep.data.metric,
                **result.metrics, layers=g.layers, seed=cfg.seed + run,
                train_seconds=result.train_seconds, inference_seconds=result.inference_seconds,
                total_seconds=result.train_seconds + result.inference_seconds,
                extra=json.dumps({"best_epoch": result.best_epoch, "epochs": g.epochs, "lr": g.lr, "hidden": g.hidden,
                                  "batch_size": g.batch_size, "batch_norm": g.batch_norm}),
            )
            rows.append(finish_row(row, cfg, prep, run))
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
    return rows


def run_job(cfg: Any) -> list[dict]:
    """One job: a GNN if ``gnn`` is set, else a GP kernel; on every fixed split with ``splits=all``."""
    if cfg.get("splits") == "all":
        return run_splits(cfg)
    return run_gnn(cfg) if cfg.method == "gnn" else run_gp(cfg)


def run_splits(cfg: Any) -> list[dict]:
    """``splits=all``: the job on each fixed split ``0 .. num_splits-1`` of the dataset (rows
    carry ``split_index``); the console summary gives the mean and std over them."""
    first = prepare(cfg)
    count = getattr(first.data, "num_splits", None)
    if count is None:
        raise ConfigError(f"splits=all needs a dataset with fixed splits (chameleon, squirrel, the heterophily suite); {cfg.dataset.name} has none: use runs=N or dataset.split_seed")
    rows = []
    for index in range(count):
        split_cfg = copy.deepcopy(cfg)
        split_cfg.dataset.split_index = index
        prep = first if index == cfg.dataset.split_index else prepare(split_cfg)
        split_rows = run_gnn(split_cfg, prep) if cfg.method == "gnn" else run_gp(split_cfg, prep)
        for row in split_rows:
            row["split_index"] = index
        rows += split_rows
    return rows


def error_row(cfg: Any, err: BaseException) -> dict:
    try:
        row = base_row(cfg)
    except Exception:  # noqa: BLE001 - the config itself may be what is broken
        row = {"status": "error", "version": __version__}
    row.update(status="error", error=f"{type(err).__name__}: {err}".replace("\n", " "),
               timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return row


def finished(results: Path) -> bool:
    """Whether a job's results file holds rows and no error row."""
    if not results.is_file():
        return False
    try:
        table = pd.read_csv(results)
    except (OSError, ValueError):
        return False
    return len(table) > 0 and bool((table.get("status", "ok") == "ok").all())


def console_summary(rows: list[dict]) -> Optional[str]:
    ok = [r for r in rows if r.get("status") == "ok"]
    if len(ok) < 2:
        return None
    test = torch.tensor([r["test"] for r in ok], dtype=torch.float64)
    splits = len({r["split_index"] for r in ok if "split_index" in r})
    over = f"{splits} splits" + (f" ({len(ok)} runs)" if len(ok) != splits else "") if splits else f"{len(ok)} runs"
    return f"{ok[0]['method']} on {ok[0]['dataset']} over {over}: test {ok[0]['metric']} {float(test.mean()):.4f} +- {float(test.std()):.4f}"


def execute(cfg: DictConfig, out_dir: Path, multirun: bool, overrides: Sequence[str] = ()) -> list[dict]:
    """Run a job and write its rows to ``<out_dir>/results.csv``. A :class:`GnngpError`
    becomes one console line and an error row; in a single run the process then exits 1."""
    results = out_dir / cfg.results_file
    if cfg.get("resume", False) and multirun:
        if finished(results):
            log.info("resume: %s already has results; skipping this job", results)
            return []
        if results.is_file():  # a failed earlier attempt: keep its rows aside, out of the summary
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
            results.rename(results.with_name(f"{results.stem}.before-resume-{stamp}.csv"))
    try:
        check_method_overrides(overrides)
        rows = run_job(cfg)
    except (GnngpError, MemoryError, torch.cuda.OutOfMemoryError) as err:
        if not isinstance(err, GnngpError):
            err = ResourceError(f"out of memory ({err}); use a low-rank kernel (e.g. kernel=gcngp_x), fewer landmarks or dtype=float32")
        row = error_row(cfg, err)
        append_rows(results, [row])
        print(f"gnngp: error: {err}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
        return [row]
    except Exception as err:  # a bug, not bad input: keep the traceback, and in a sweep the other jobs
        row = error_row(cfg, err)
        append_rows(results, [row])
        if not multirun:
            raise
        log.exception("job failed")
        return [row]
    append_rows(results, rows)
    for row in rows:
        log.info(summary_line(row))
    over_runs = console_summary(rows)
    if over_runs:
        log.info(over_runs)
    log.info("results: %s", results)
    return rows
