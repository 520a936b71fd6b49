"""The experiment runner: one Hydra job = load a dataset, compute a kernel, predict, write rows."""
from __future__ import annotations

import copy
import json
import logging
import sys
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
from omegaconf import DictConfig, OmegaConf

from . import __version__
from .config import check_results_file, needs_validation, resolve_method_defaults, validate
from .data import Adjacency, DataStore, load_dataset
from .errors import ConfigError, GnngpError, ResourceError
from .estimate import Estimate, dense_factor, gp_estimate
from .fit import FitResult, fit_hyperparameters, targets
from .gnn import GNNS, train_gnn
from .inference import GPResult, gp_predict, log_grid, validation_score
from .invariants import checked_rows
from .kernels import BaseKernel, KernelContext
from .kernels.architectures import GPR_FILTER_GRID, KERNELS, Architecture, kernel_label
from .kernels.blocks import branch_count
from .kernels.filters import filter_grid
from .kernels.planner import exact_kernel, pair_plan_fits
from .metrics import resolve_metric
from .progress import Progress
from .results import ResultsNotWritten, append_rows, summary_line
from .resume import job_overrides, resume_decision, set_aside
from .runtime import Stopwatch, current_rss_bytes, memory_limit_bytes, peak_cuda_mb, peak_rss_mb, resolve_device, start_job

log = logging.getLogger("gnngp")


def architecture(kcfg: Any, values: Optional[dict] = None) -> Architecture:
    """The kernel's blocks built from its config; ``values`` replace configured parameters
    (e.g. fitted ones: numbers, tensors, or per-layer lists; see :mod:`.fit`)."""
    return KERNELS[kcfg.name].architecture(kcfg, values)


def choose_landmarks(train_mask: torch.Tensor, fraction: float, count: Optional[int], seed: int, dataset: str) -> torch.Tensor:
    """Landmark node ids among the training nodes: exactly ``count`` of them, or each one
    with probability ``1/fraction`` (all of them when ``fraction == 1``), seeded."""
    return landmarks_among(train_mask.nonzero().view(-1), fraction, count, seed, dataset)


def landmarks_among(train: torch.Tensor, fraction: float, count: Optional[int], seed: int, dataset: str) -> torch.Tensor:
    """:func:`choose_landmarks` from the sorted training node ids."""
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
    """A loaded dataset on its device, shared by the runs of a job (or by several jobs, as the
    benchmarks do), with the normalised adjacencies built from it."""

    data: Any
    device: torch.device
    dtype: torch.dtype
    load_seconds: float
    num_edges: int = 0
    keep_edges: bool = True        # False: a GP job that owns the data drops its edge list once A is built
    _adjacencies: dict = field(default_factory=dict)

    def adjacency(self, kind: str) -> Adjacency:
        """The normalised adjacency of this kind (built once). When the job owns the data
        (``keep_edges`` false) the loaded edge list is released after the build: the kernels read
        only ``A`` (1.8 GB on a Reddit-sized graph)."""
        if kind not in self._adjacencies:
            if self.data.edge_index is None:
                raise RuntimeError(f"the edge list was released before the {kind!r} adjacency was built")
            self._adjacencies[kind] = Adjacency.from_graph(self.data.edge_index, self.data.num_nodes, kind, self.dtype, self.device)
            if not self.keep_edges:
                self.data.edge_index = None
        return self._adjacencies[kind]


def prepare(cfg: Any) -> Prepared:
    """Validate, pick the device, and load the dataset (timed apart from the method)."""
    validate(cfg)
    device = resolve_device(cfg.device)
    start_job(device)
    dtype = getattr(torch, cfg.dtype)
    store = DataStore.from_config(cfg.data.root, cfg.data.mirror, cfg.data.download, cfg.data.download_timeout, cfg.data.verify)
    watch = Stopwatch(device)
    with watch.measure():
        data = load_dataset(cfg.dataset, store, cfg.experiment.stand_in, validation=needs_validation(cfg)).to(device)
    if cfg.dataset.hide_val:  # no validation labels at all (fit=mll)
        data.val_mask = torch.zeros_like(data.val_mask)
    resolve_method_defaults(cfg, data.task)
    data.metric = resolve_metric(cfg.dataset.get("metric"), data.task, data.num_classes, str(cfg.dataset.name).lower())
    return Prepared(data, device, dtype, watch.seconds, int(data.edge_index.size(1)))


def reuse(cfg: Any, prep: Optional[Prepared]) -> Prepared:
    """``prep`` (data loaded for another job on the same dataset, as the benchmarks share it)
    for this job's config, validated and with its method defaults filled; else :func:`prepare`."""
    if prep is None:
        return prepare(cfg)
    validate(cfg)
    resolve_method_defaults(cfg, prep.data.task)
    return prep


def check_exact_memory(arch: Architecture, ctx: KernelContext, target: torch.Tensor, train: Optional[torch.Tensor], dtype: torch.dtype, cfg: Any) -> None:
    """Refuse, before computing, an exact kernel whose dense blocks ``K[target, train]``
    (``train=None``: square) would not fit."""
    need = arch.network.peak_elements(target, ctx, train) * torch.finfo(dtype).bits // 8 * dense_factor(branch_count(arch.network))
    limit = memory_limit_bytes(cfg.max_memory_gb, ctx.features.device)
    if need > limit:
        raise ResourceError(
            f"the exact {arch.label} kernel on {cfg.dataset.name} needs about {need / 2**30:.1f} GiB but the limit is {limit / 2**30:.1f} GiB "
            f"(max_memory_gb; default half of the free memory); use the low-rank kernel (kernel={arch.name}_x)"
            + (" or dtype=float32" if dtype == torch.float64 else "") + ", or raise max_memory_gb if the memory is yours"
        )


def estimate_run(arch: Architecture, ctx: KernelContext, data: Any, num_edges: int, target: torch.Tensor, train: torch.Tensor,
                 landmarks: Optional[torch.Tensor], dtype: torch.dtype, layers: int) -> Estimate:
    """The run's peak memory and time class (:mod:`gnngp_cli.estimate`), before computing."""
    dense = 0
    if landmarks is None:
        square = target.numel() >= data.num_nodes or not pair_plan_fits(arch.network, ctx)
        nodes = ctx.every_node if square else target
        dense = arch.network.peak_elements(nodes, ctx, None if square else train)
    return gp_estimate(
        rss_now=current_rss_bytes(), peak_now=peak_rss_mb() * 2**20, num_nodes=int(data.num_nodes), num_edges=num_edges,
        num_features=int(data.x.size(1)), n_train=int(train.numel()), n_labelled=int(target.numel()),
        layers=layers, bytes_per_entry=torch.finfo(dtype).bits // 8,
        landmarks=None if landmarks is None else int(landmarks.numel()), dense_elements=int(dense),
        branches=branch_count(arch.network),
        input_nystrom=landmarks is not None and not (ctx.base.is_linear and landmarks.numel() >= data.x.size(1)),
    )


def gp_run(cfg: Any, prep: Prepared, run: int) -> tuple[GPResult, dict]:
    """One GP run (seed ``cfg.seed + run``): kernel, then nugget-grid inference; for kernels
    with ``gamma_search`` the base kernel's gamma is also chosen on validation. With
    ``fit=mll`` the hyperparameters are first fitted on the training nodes (:mod:`.fit`), then
    the posterior uses them and the fitted nugget (a one-value grid)."""
    data, device, dtype = prep.data, prep.device, prep.dtype
    seed = cfg.seed + run
    kcfg = cfg.kernel
    filters = filter_choices(kcfg)   # gprgp: the filters chosen from on validation; else [None]
    arch = architecture(kcfg, filter_values(filters[0]))
    adjacency = prep.adjacency(arch.adjacency)
    features = data.x.to(dtype)
    if kcfg.base.scale != 1:  # C0 reads sqrt(scale) x (linear: scale x.x')
        features = features * kcfg.base.scale ** 0.5
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
    estimate = estimate_run(arch, ctx, data, prep.num_edges, target, train, landmarks, dtype, int(kcfg.layers))
    log.info(estimate.line(arch.label, dataset_label(cfg.dataset.name, data)))
    layers = int(kcfg.layers)
    progress = Progress(f"{arch.label} on {dataset_label(cfg.dataset.name, data)}", total=layers * len(gammas))
    done = {"layers": 0, "gamma": 0}

    def tell(name: str) -> None:
        step = done["gamma"] * layers + min(done["layers"], layers)
        progress.step(step, f"kernel {name}" + (f", gamma {done['gamma'] + 1} of {len(gammas)}" if len(gammas) > 1 else ""))

    def on_layer(name: str) -> None:
        done["layers"] += 1
        tell(name + " done")

    ctx = replace(ctx, on_layer=on_layer)
    fitted: Optional[FitResult] = None
    if cfg.fit.method == "mll":
        if not kcfg.low_rank:
            check_exact_memory(arch, ctx, train, None, dtype, cfg)
        fitted = fit_hyperparameters(kcfg, cfg.fit, lambda values: architecture(kcfg, values).network, ctx,
                                     targets(data.y[train], data.task, data.num_classes), train, cfg.progress)
        log.info(fitted.summary())
        arch = architecture(kcfg, fitted.network_values())
        gammas = [fitted.base(ctx.base).gamma]

    def evaluate(gamma: float, coefficients, validation_only: bool):  # the kernel at this gamma (and filter), then the posterior
        nonlocal ctx, arch
        if len(filters) > 1:
            arch = architecture(kcfg, filter_values(coefficients))
        done["layers"] = 0
        tell("starting")
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
        done["layers"] = layers
        tell("inference")
        with inference_watch.measure():
            nuggets = grid if fitted is None else (  # the fitted nugget, relative to the mean diagonal as the grid's are
                torch.tensor([fitted.nugget], dtype=dtype, device=device) / diagonal.mean())
            predict = validation_score if validation_only else gp_predict
            return predict(kernel, data.y, masks, data.task, data.num_classes, nuggets, kcfg.low_rank, diagonal,
                           metric_name=data.metric)

    gamma, coefficients = gammas[0], filters[0]
    choices = [(g, f) for f in filters for g in gammas]
    with progress:
        if len(choices) > 1:  # score every (gamma, filter) on validation, then predict with the best (the first on ties)
            scores = []
            for i, (g, f) in enumerate(choices):
                done["gamma"] = i % len(gammas)
                scores.append(evaluate(g, f, validation_only=True).val)
            gamma, coefficients = choices[max(range(len(choices)), key=lambda i: (scores[i], -i))]
            done["gamma"] = len(gammas) - 1
        result = evaluate(gamma, coefficients, validation_only=False)
    timing = {
        "estimated_gb": round(estimate.gb, 3),
        "kernel_seconds": kernel_watch.seconds,
        "inference_seconds": inference_watch.seconds,
        "landmarks": int(landmarks.numel()) if landmarks is not None else 0,
        "seed": seed,
        "extra": json.dumps({**({"gamma": gamma} if kcfg.gamma_search and fitted is None else {}),
                             **({"coefficients": list(coefficients)} if coefficients is not None else {}), **run_settings(cfg)}),
        "fit": cfg.fit.method,
    }
    if fitted is not None:
        timing.update(fit_seconds=fitted.seconds, **fitted.row())
    return result, timing


def filter_choices(kcfg: Any) -> list:
    """The filters a gprgp kernel chooses from on validation: ``kernel.coefficients`` (one filter
    or a list), else :data:`GPR_FILTER_GRID`; ``[None]`` for kernels without a filter."""
    if "coefficients" not in kcfg:
        return [None]
    value = kcfg.coefficients
    if value is None:
        return list(GPR_FILTER_GRID)
    return filter_grid(OmegaConf.to_container(value) if OmegaConf.is_config(value) else value)


def filter_values(coefficients) -> Optional[dict]:
    """The builder's argument for one filter choice (``None``: a kernel without a filter)."""
    return None if coefficients is None else {"coefficients": coefficients}


def dataset_label(name: str, data: Any) -> str:
    """The dataset as the console names it: ``arxiv (csbm stand-in)`` for a stand-in."""
    stand_in = getattr(data, "stand_in", "")
    return f"{str(name).lower()} ({stand_in.split(' (')[0]})" if stand_in else str(name).lower()


def run_settings(cfg: Any) -> dict:
    """What a GP row records beside its columns so the report can tell a preset's runs from
    others: the nugget grid and the kernel's own numeric parameters (``sigma_w1``, ``alpha``...)."""
    entry = KERNELS[cfg.kernel.name]
    params = {k: v for k, v in entry.parameters(cfg.kernel).items() if k != "layers" and isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {"nugget_grid": [float(cfg.nugget.min), float(cfg.nugget.max), int(cfg.nugget.num)], **params}


def method_names(cfg: Any) -> tuple[str, str]:
    """``(label, config name)`` of the job's method, e.g. ``("GCNGP-X", "gcngp_x")`` or ``("GCN", "gcn")``."""
    if cfg.method == "gnn":
        return GNNS[cfg.gnn.name].label if cfg.gnn.name in GNNS else cfg.gnn.name, cfg.gnn.name
    if cfg.kernel is not None:
        return kernel_label(cfg.kernel.name, cfg.kernel.low_rank), cfg.kernel.name + ("_x" if cfg.kernel.low_rank else "")
    return "?", "?"


def base_row(cfg: Any) -> dict:
    """The columns every row has; ``kernel`` is the GP kernel's config name (empty for a GNN)
    and ``device`` the device the job resolved to (``cuda`` for ``device=auto`` with a GPU)."""
    label, name = method_names(cfg)
    try:
        device = str(resolve_device(cfg.device))
    except GnngpError:
        device = str(cfg.device)
    return {
        "status": "ok", "dataset": str(cfg.dataset.name).lower(), "method": label, "kernel": name if cfg.method != "gnn" else "",
        "device": device, "dtype": cfg.dtype, "version": __version__,
    }


def finish_row(row: dict, cfg: Any, prep: Prepared, run: int) -> dict:
    data = prep.data
    row.update(
        task=data.task, run=run, n_nodes=int(data.num_nodes), n_edges=prep.num_edges,
        load_seconds=prep.load_seconds, device=str(prep.device), split=getattr(data, "split", ""),
        stand_in=getattr(data, "stand_in", ""), experiment=cfg.experiment.name or "",
        peak_rss_mb=peak_rss_mb(), peak_cuda_mb=peak_cuda_mb(prep.device), compute_backend="local", workers=1,
        timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    if getattr(data, "warnings", None):  # e.g. a single training class: the row says so
        row["extra"] = json.dumps({**json.loads(row.get("extra") or "{}"), "warnings": list(data.warnings)})
    return row


def deterministic(cfg: Any) -> bool:
    """A GP job without randomness: an exact kernel, or every training node a landmark."""
    lm = cfg.landmarks
    return not cfg.kernel.low_rank or (lm.count is None and lm.fraction == 1)


def warn_not_wide_limit(kcfg: Any) -> None:
    """GCNIIGP from L = 3 on is the paper's recursion, not the limit of wide GCNII networks:
    the identity mapping passes rectified, non-Gaussian features to the next ReLU."""
    if kcfg.name == "gcn2gp" and kcfg.layers >= 3:
        log.warning("GCNIIGP with L=%d is the paper's kernel recursion, not the wide-network limit of GCNII: from L=3 on the "
                    "identity mapping passes rectified, non-Gaussian features to the next ReLU (gnngp verify kernel=gcn2gp "
                    "kernel.layers=3 fails)", kcfg.layers)


def run_gp(cfg: Any, prep: Optional[Prepared] = None) -> list[dict]:
    """All runs of a GP job; returns one row per run (one run only for a deterministic kernel
    when ``repeat_deterministic`` is false)."""
    if cfg.compute.backend != "local":  # low-rank kernels on row blocks of a Dask cluster
        from .rowblocks.run import run_gp_rowblocks

        return run_gp_rowblocks(cfg)
    owned = prep is None
    prep = reuse(cfg, prep)
    prep.keep_edges = not owned   # data loaded for this job alone: its edge list goes once A is built
    warn_not_wide_limit(cfg.kernel)
    rows = []
    runs = 1 if deterministic(cfg) and not cfg.repeat_deterministic else cfg.runs
    for run in range(runs):
        result, timing = gp_run(cfg, prep, run)
        row = base_row(cfg)
        row.update(
            metric=result.metric_name, **{k: result.metrics[k] for k in ("train", "val", "test")},
            nugget=result.nugget, layers=cfg.kernel.layers, sigma_w=cfg.kernel.get("sigma_w"), sigma_b=cfg.kernel.get("sigma_b"),
            landmark_fraction=cfg.landmarks.fraction if cfg.kernel.low_rank and cfg.landmarks.count is None else None,
            **timing, **result.uncertainty,
        )
        row["total_seconds"] = row["kernel_seconds"] + row["inference_seconds"] + row.get("fit_seconds", 0.0)
        rows.append(finish_row(row, cfg, prep, run))
    return rows


def run_gnn(cfg: Any, prep: Optional[Prepared] = None) -> list[dict]:
    """All runs of a GNN job (seeds ``seed .. seed+runs-1``); one row per run."""
    prep = reuse(cfg, prep)
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


def console_row(row: dict) -> dict:
    """The row as the console shows it: a stand-in says so beside the dataset name."""
    stand_in = row.get("stand_in") or ""
    return {**row, "dataset": f"{row['dataset']} ({stand_in.split(' (')[0]})"} if isinstance(stand_in, str) and stand_in else row


def console_summary(rows: list[dict]) -> Optional[str]:
    ok = [r for r in rows if r.get("status") == "ok"]
    if len(ok) < 2:
        return None
    test = torch.tensor([r["test"] for r in ok], dtype=torch.float64)
    splits = len({r["split_index"] for r in ok if "split_index" in r})
    over = f"{splits} splits" + (f" ({len(ok)} runs)" if len(ok) != splits else "") if splits else f"{len(ok)} runs"
    return f"{ok[0]['method']} on {console_row(ok[0])['dataset']} over {over}: test {ok[0]['metric']} {float(test.mean()):.4f} +- {float(test.std()):.4f}"


def execute(cfg: DictConfig, out_dir: Path, multirun: bool, overrides: Sequence[str] = ()) -> list[dict]:
    """Run a job and write its rows to ``<out_dir>/results.csv``. A :class:`GnngpError`
    becomes one console line and an error row; in a single run the process then exits 1.
    Every row records the job's overrides; a row whose metric is not a number is an error row
    (:mod:`~gnngp_cli.invariants`)."""
    try:
        check_results_file(cfg.results_file)
        results = out_dir / cfg.results_file
    except ConfigError:   # validate() reports it; the error row stays in the run dir
        results = out_dir / "results.csv"
    recorded = job_overrides(overrides)
    if cfg.get("resume", False) and multirun:
        skip, why = resume_decision(results, overrides)
        if skip:
            log.info("resume: %s already has results; skipping this job (%s)", results, why)
            return []
        if results.is_file():  # an earlier attempt: keep its rows aside, out of the summary
            log.info("resume: %s: %s; running it again (earlier rows kept in %s)", results, why, set_aside(results).name)

    def write(rows: list[dict]) -> None:
        try:
            append_rows(results, [{**row, "overrides": recorded} for row in rows], fallback_dir=out_dir)
        except ResultsNotWritten as err:
            print(f"gnngp: error: {err}", file=sys.stderr)
            if not multirun:
                raise SystemExit(1) from None

    try:
        rows = checked_rows(run_job(cfg), validation=needs_validation(cfg))
    except (GnngpError, MemoryError, torch.cuda.OutOfMemoryError) as err:
        if not isinstance(err, GnngpError):
            err = ResourceError(f"out of memory ({err}); use a low-rank kernel (e.g. kernel=gcngp_x), fewer landmarks or dtype=float32")
        row = error_row(cfg, err)
        write([row])
        print(f"gnngp: error: {err}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
        return [row]
    except Exception as err:  # a bug, not bad input: keep the traceback, and in a sweep the other jobs
        row = error_row(cfg, err)
        write([row])
        if not multirun:
            raise
        log.exception("job failed")
        return [row]
    write(rows)
    for row in rows:
        log.info(summary_line(console_row(row)))
    over_runs = console_summary(rows)
    if over_runs:
        log.info(over_runs)
    log.info("results: %s", results)
    failed = [row for row in rows if row.get("status") != "ok"]
    if failed:
        print(f"gnngp: error: {failed[0]['error'].split(': ', 1)[-1]}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
    return rows
