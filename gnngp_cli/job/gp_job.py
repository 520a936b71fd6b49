"""The GP job, written once for every backend.

One job is one kernel on one dataset, ``runs`` seeds. Each run (:meth:`GPJob.run`):

1. landmarks among the training nodes (low-rank kernels), seeded;
2. the candidates chosen among: the kernel entry's ``choices`` (GPRGP's filters) and, with
   ``kernel.gamma_search`` under ``fit=grid``, the base kernel's gamma grid;
3. with ``fit=mll``, the hyperparameters fitted on the training nodes for each candidate
   (:mod:`gnngp_cli.gp.mll`), and the candidate of the highest marginal likelihood kept;
4. for each candidate, the kernel (the backend evaluates it), the posterior from the reduced
   statistics and the validation metric over the nugget grid; the best candidate and nugget
   (the first on ties), then the train/val/test metrics and the test columns at them;
5. one result row: the same columns whatever the backend, plus the backend's own.

The backend (:mod:`.backend_interface`) is handed in; this module never asks which one it is.
"""
from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Collection, Iterator, Optional

import torch

from ..config import parse, training_times, with_method_defaults
from ..readers import active_run
from ..conformal import Calibration
from ..errors import ConfigError, ResourceError
from ..kernels import KERNELS, BaseKernel
from ..schema import NuggetConfig
from ..metrics import METRICS, resolve_metric, uncertainty_metrics
from ..progress import Progress
from ..runtime import Stopwatch, current_rss_bytes, memory_limit_bytes
from .backend_interface import Backend
from ..gp.mll import FitResult, check_learn, fit_hyperparameters, plan_parameters
from .estimate import fit_evaluations, Estimate, grid_bytes, grid_seconds, monte_carlo_bytes, monte_carlo_seconds, size_text
from ..gp.probabilities import CHUNK_ENTRIES as PROBABILITY_CHUNK, TEMPERATURES
from ..gp.inference import GRID_CHUNK_MIN, GPResult, best_index, chunk_rows, grid_chunk, log_grid, predict
from ..gp.posterior import TrainingTimes
from .conformal_rows import add_conformal, gp_conformal
from .landmarks import choose_landmarks, landmark_pool
from ..gp.likelihoods import Likelihood
from ..results.rows import base_row, graph_columns, run_settings, with_extra

log = logging.getLogger("gnngp")

NOUNS = {"gamma": "gamma", "coefficients": "filter"}   # how progress lines name a candidate


def candidates(kspec: Any, mll: bool) -> list[dict]:
    """Every combination of the values chosen among (see the module docstring), the last
    named varying fastest; ``[{}]`` when nothing is chosen."""
    axes = dict(KERNELS[kspec.name].candidates(kspec))
    if kspec.gamma_search and not mll:  # fit=mll learns gamma instead (when the base kernel has one)
        axes["gamma"] = log_grid(kspec.gamma_grid.min, kspec.gamma_grid.max, kspec.gamma_grid.num).tolist()
    return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


def plain(value: Any) -> Any:
    """A candidate's value as rows and logs write it (a filter's tuple as a list)."""
    return list(value) if isinstance(value, tuple) else value


def shown(choice: dict) -> str:
    return ", ".join(f"{k}={plain(v)}" for k, v in choice.items())


def deterministic(spec: Any) -> bool:
    """A GP job without randomness: an exact kernel, or every training node a landmark."""
    lm = spec.landmarks
    return not spec.kernel.low_rank or (lm.count is None and lm.fraction == 1)


def planned_runs(spec: Any) -> int:
    """How many runs a job makes on each split: ``runs``, but one for a deterministic GP kernel
    unless ``repeat_deterministic`` (a GNN's and an active run's seeds draw their weights and
    labels). One definition for the job, ``resume=true`` and a stopped sweep's summary."""
    if spec.method == "gnn" or active_run(spec):
        return int(spec.runs)
    return 1 if deterministic(spec) and not spec.repeat_deterministic else int(spec.runs)


def evaluated(candidates: int) -> int:
    """Kernel evaluations of a search over ``candidates``: each on validation, then the chosen
    one again (one alone is evaluated once)."""
    return candidates + (1 if candidates > 1 else 0)


@dataclass
class GPRun:
    """One run of a GP job: its row, the chosen candidate, the posterior at the chosen nugget
    (whose means and variances of the labelled nodes are read through the backend, while the
    job is open: for inspection and tests on graphs that fit; a run never gathers them), and
    the fit."""

    row: dict
    choice: dict
    result: GPResult
    fitted: Optional[FitResult] = None
    evaluated: Optional["Evaluated"] = None   # the chosen kernel as the backend holds it: what predicts other nodes (the Python API)


@dataclass
class Evaluated:
    """The chosen candidate's kernel: its architecture, the context it was evaluated in (fitted
    base kernel included) and the kernel as the backend holds it."""

    arch: Any
    ctx: Any
    kernel: Any


class KernelJob:
    """A job of one kernel on an open backend: the spec parsed with the method's defaults for the
    backend's task, the kernel's registry entry, and the metric resolved from the backend's graph
    (what a GP job and an active-learning job both start from)."""

    def __init__(self, spec: Any, backend: Backend):
        info = backend.info
        self.spec = with_method_defaults(parse(spec), info.task)
        self.backend = backend
        self.kspec = self.spec.kernel
        self.entry = KERNELS[self.kspec.name]
        dataset = self.spec.dataset
        self.metric = METRICS[info.metric or resolve_metric(dataset.get("metric"), info.task, info.num_classes, str(dataset.name).lower())]

    def kernel_notes(self) -> list[str]:
        """The kernel's own warning for these settings (GATGP's depth), as a row keeps it; none for most."""
        note = self.entry.note(self.kspec) if self.entry.note is not None else None
        return [note] if note else []


class GPJob(KernelJob):
    """The runs of one GP job on an open backend (see the module docstring)."""

    def __init__(self, spec: Any, backend: Backend):
        super().__init__(spec, backend)
        info, spec = backend.info, self.spec
        self.uncertainty = uncertainty_metrics(info.task, info.num_classes)
        self.likelihood = Likelihood.from_spec(spec.likelihood)
        if self.likelihood.classifies and info.task != "classification":
            raise ConfigError(f"likelihood={self.likelihood.name} classifies, and {spec.dataset.name} is a regression task; use likelihood=gaussian "
                              "(a regression's uncertainty is the nlpd and coverage95 columns)")
        self.calibration = Calibration.from_spec(spec.conformal)
        self.mll = spec.fit.method == "mll"
        if self.mll:   # what the fit learns, checked once the dataset's defaults are filled in, before any kernel work
            plan_parameters(self.kspec, spec.fit)

    @property
    def count(self) -> int:
        return planned_runs(self.spec)

    def runs(self, skip: Collection[int] = ()) -> Iterator[GPRun]:
        """Each run in turn, but those in ``skip`` (finished before: ``resume``)."""
        for index in range(self.count):
            if index not in skip:
                yield self.run(index)

    def run(self, index: int) -> GPRun:
        spec, kspec, backend = self.spec, self.kspec, self.backend
        seed = spec.seed + index
        train = backend.train_ids()
        landmarks = None
        if kspec.low_rank:   # sorted: a backend whose training ids come in another order (shards in a data.order) draws the same set
            pool, what = landmark_pool(spec.landmarks.pool, train, backend.info.num_nodes)
            landmarks = torch.sort(choose_landmarks(pool, spec.landmarks.fraction, spec.landmarks.count, seed, spec.dataset.name, what))[0]
        choices = candidates(kspec, self.mll)
        base = BaseKernel(kspec.base.name, kspec.base.gamma, kspec.base.c, kspec.base.d)
        arch = self.entry.architecture(kspec, {k: v for k, v in choices[0].items() if k != "gamma"})
        ctx = backend.context(arch.adjacency, base, landmarks, kspec.base.scale)
        if training_times(spec) is not None:   # a tangent kernel keeps its NNGP kernel: the covariance along training time reads both
            ctx = replace(ctx, keep_nngp=True)
        estimate = self.with_grid(backend.estimate(arch, ctx, landmarks, self.mll), landmarks, int(train.numel()))
        planned = 1 + fit_evaluations(spec.fit.steps, len(choices)) if self.mll else evaluated(len(choices))   # mll: each candidate fitted, then the chosen one run
        estimate = estimate.times(planned)
        if landmarks is not None:   # as the exact kernel's, before its estimate and warning
            def peak_at(count: int) -> float:   # the same estimate for the first ``count`` landmarks (the refusal's fix)
                fewer = landmarks[:count]
                at = backend.context(arch.adjacency, base, fewer, kspec.base.scale)
                return self.with_grid(backend.estimate(arch, at, fewer, self.mll), fewer, int(train.numel())).times(planned).reach * 2**30

            self.check_low_rank_memory(estimate, arch.label, int(landmarks.numel()), ctx, peak_at)
        log.info(estimate.line(arch.label, backend.where))
        long = estimate.long_warning(arch.label, backend.where) if index == 0 else None
        if long:
            log.warning(long)

        fitted = None
        if self.mll:
            fitted, chosen = self.fit(ctx, choices, train)
            choices = [chosen]
            base = fitted.base(base)

        layers = int(kspec.layers)
        evaluations = evaluated(len(choices))
        progress = Progress(f"{arch.label} on {backend.where}", total=evaluations * (layers + 1))
        done = {"evaluation": 0, "layers": 0, "candidate": ""}

        def tell(label: str) -> None:   # a kernel's named layers may be more than kspec.layers (GPRGP): clamped
            progress.step(done["evaluation"] * (layers + 1) + min(done["layers"], layers), label + done["candidate"])

        def on_layer(name: str) -> None:
            done["layers"] += 1
            tell(f"kernel {name} done")

        ctx = replace(ctx, on_layer=on_layer)
        kernel_watch, inference_watch = Stopwatch(ctx.device), Stopwatch(ctx.device)
        grid = log_grid(spec.nugget.min, spec.nugget.max, spec.nugget.num, dtype=backend.dtype, device=ctx.device)

        def evaluate(choice: dict, validation_only: bool):
            nonlocal ctx
            values = {**(fitted.network_values() if fitted is not None else {}), **{k: v for k, v in choice.items() if k != "gamma"}}
            arch = self.entry.architecture(kspec, values)
            ctx = ctx.with_base(base.with_values({"gamma": choice["gamma"]}) if "gamma" in choice else base)
            done["layers"] = 0
            tell("kernel starting")
            with kernel_watch.measure():
                kernel = backend.evaluate(arch, ctx)
            last["evaluated"] = Evaluated(arch, ctx, kernel)
            done["layers"] = layers
            tell("posterior")
            with inference_watch.measure():
                out = self.infer(kernel, grid, fitted, validation_only)
            done["evaluation"], done["layers"] = done["evaluation"] + 1, 0
            tell("posterior done")
            return out

        chosen, last = choices[0], {}
        with progress:
            if len(choices) > 1:  # score every candidate on validation, then predict with the best (the first on ties)
                scores = []
                for i, choice in enumerate(choices):
                    done["candidate"] = f", {'/'.join(NOUNS.get(k, k) for k in choice)} {i + 1} of {len(choices)}"
                    scores.append(evaluate(choice, validation_only=True))
                chosen = choices[best_index(scores)]
                done["candidate"] = ""
            result = evaluate(chosen, validation_only=False)
        run = self.finish(index, seed, chosen, landmarks, estimate, fitted, result, kernel_watch, inference_watch)
        run.evaluated = last["evaluated"]
        add_conformal(run.row, gp_conformal(self.calibration, backend, result, run.evaluated, backend.info.task))
        return run

    def check_low_rank_memory(self, estimate: Estimate, label: str, landmarks: int, ctx: Any,
                              peak_at: Optional[Callable[[int], float]] = None) -> None:
        """Refuse, before any kernel work, a low-rank run whose estimated peak (the process's, its
        root and its blocks: :meth:`estimate`) is above the memory limit, as an exact kernel's is
        refused; the root files of compute=dask are checked against their folder's room instead.
        The fix names a landmark count that fits: first as if the peak were linear in the count,
        then smaller until ``peak_at(count)`` (the same estimate at that count) is within the limit
        (a kernel of several roots, composed_x, grows faster). When no count of 10 or more fits (of
        fewer than 11 landmarks, no count at all), the fix names the process's own memory instead."""
        if estimate.on_disk:
            return
        limit = memory_limit_bytes(self.spec.max_memory_gb, ctx.features.device)
        need = estimate.reach * 2**30   # this run's own peak: an earlier job's in this process does not count
        if need <= limit:
            return
        now = current_rss_bytes()
        fewer = int(landmarks * max(limit - now, 0) / max(need - now, 1) * 0.9)
        while peak_at is not None and fewer >= 1 and peak_at(fewer) > 0.95 * limit:   # every count named is one that fits
            fewer = int(fewer * 0.7)
        float32 = " or dtype=float32" if self.backend.dtype == torch.float64 else ""
        if max(1, min(10, landmarks - 1)) <= fewer < landmarks:
            fix = f"use fewer landmarks (landmarks.count={fewer:,} or below){float32}, or raise max_memory_gb if the memory is yours"
        else:   # the graph and the libraries take the limit already: no landmark count fits
            fix = f"raise max_memory_gb if the memory is yours (this process holds {size_text(now)} already: the graph and its libraries)"
        raise ResourceError(f"the low-rank {label} kernel on {self.backend.where} needs about {size_text(need)} at its peak "
                            f"({estimate.detail}), and the limit is {size_text(limit)} (max_memory_gb; default half of the free "
                            f"memory); {fix}")

    def with_grid(self, estimate: Estimate, landmarks: Optional[torch.Tensor], n_train: int) -> Estimate:
        """The estimate with the nugget grid counted (:func:`~.estimate.grid_bytes`); a grid that
        would not fit in this process's memory limit is refused here, before any kernel work."""
        if self.mll:   # the fitted nugget: one value
            return estimate
        info, num = self.backend.info, int(self.spec.nugget.num)
        rank = int(landmarks.numel()) if landmarks is not None else n_train   # the root's width is about the landmarks' count
        outputs = info.num_classes if info.task == "classification" else 1
        chunk = min(num, grid_chunk(rank, info.num_nodes, n_train, outputs))
        b = torch.finfo(self.backend.dtype).bits // 8
        rows = chunk_rows(rank, info.num_nodes, n_train)
        need = grid_bytes(num, b, chunk * rows * outputs) if num > GRID_CHUNK_MIN else 0.0
        limit = memory_limit_bytes(self.spec.max_memory_gb, torch.device("cpu"))
        estimate = self.with_probabilities(estimate, limit, outputs)
        if self.likelihood.per_class and info.task == "classification":   # a posterior per class, two alive while alpha is chosen
            alive = 2 if len(self.likelihood.candidates()) > 1 else 1
            per_class = info.num_classes * rank * rank * b * (3 * alive + (1 if landmarks is not None else 0))
            if current_rss_bytes() + per_class > limit:
                raise ResourceError(f"likelihood=dirichlet holds a posterior per class ({info.num_classes} of rank {rank:,}): about "
                                    f"{size_text(per_class)}, and the limit is {size_text(limit)} (max_memory_gb); use fewer landmarks, "
                                    "one likelihood.alpha (e.g. likelihood.alpha=0.01), or likelihood=gaussian")
            estimate = estimate.with_memory(per_class, f"{info.num_classes} per-class posteriors")   # on Dask: in this process, beside the root files
        if need and current_rss_bytes() + need > limit:
            raise ResourceError(f"nugget.num={num:,} needs about {size_text(need)} for the grid alone, and the limit is {size_text(limit)} "
                                "(max_memory_gb; default half of the free memory); lower nugget.num (the default grid, "
                                f"{NuggetConfig.num} values from {NuggetConfig.min:g} to {NuggetConfig.max:g} times the kernel's mean "
                                "diagonal, is fine enough for most uses)")
        return estimate.with_grid(need / 2**30, num, grid_seconds(num, rows, rank, outputs))

    def with_probabilities(self, estimate: Estimate, limit: float, classes: int) -> Estimate:
        """The estimate with Monte-Carlo class probabilities counted (``likelihood.probabilities=mc``:
        :func:`~.estimate.monte_carlo_bytes`, bounded by every node); refused here, before any
        kernel work, when they would not fit in this process's memory limit."""
        info, likelihood = self.backend.info, self.likelihood
        if info.task != "classification" or likelihood.approximation(info.num_nodes, classes) != "mc":
            return estimate
        samples = int(likelihood.samples)
        need = monte_carlo_bytes(samples, classes, info.num_nodes, PROBABILITY_CHUNK)
        if current_rss_bytes() + need > limit:
            raise ResourceError(f"likelihood.samples={samples:,} Monte-Carlo draws of {classes} classes need about {size_text(need)} for the "
                                f"class probabilities alone, and the limit is {size_text(limit)} (max_memory_gb; default half of the free "
                                "memory); lower likelihood.samples (default 256), or use likelihood.probabilities=probit")
        passes = (len(TEMPERATURES) if likelihood.temperature else 0) + 1   # the temperature on validation, then the test rows
        return estimate.with_memory(need, f"{samples:,} Monte-Carlo draws").plus(monte_carlo_seconds(samples, classes, info.num_nodes, passes))

    def fit(self, ctx: Any, choices: list[dict], train: torch.Tensor) -> tuple[FitResult, dict]:
        """``fit=mll`` for each candidate; the fit of the highest marginal likelihood and its candidate."""
        y_train = self.backend.train_targets()
        fits = []
        for choice in choices:
            def build(values: dict, choice: dict = choice):
                return self.entry.architecture(self.kspec, {**values, **choice}).network
            result = fit_hyperparameters(self.kspec, self.spec.fit, build, ctx, y_train, train, self.spec.progress)
            log.info(result.summary() + (f" ({shown(choice)})" if choice else ""))
            fits.append(result)
        best = best_index([f.objective for f in fits])
        fitted = fits[best]
        fitted.seconds = sum(f.seconds for f in fits)
        if len(choices) > 1:
            log.info(f"fit=mll keeps {shown(choices[best])}: "
                     f"the highest marginal likelihood of {len(choices)} candidates")
        return fitted, choices[best]

    def infer(self, kernel: Any, grid: torch.Tensor, fitted: Optional[FitResult], validation_only: bool):
        """The posterior of an evaluated kernel (:func:`~gnngp_cli.gp.inference.predict`) from the backend's
        statistics and row groups: the fitted nugget, or the grid's best on validation."""
        backend = self.backend
        stats = backend.statistics(kernel)
        times = training_times(self.spec)
        if times is not None:   # inference.time: the learning rate per training node (the MSE loss is their mean)
            times = TrainingTimes(torch.tensor(times, dtype=torch.float64), float(self.spec.inference.learning_rate) / max(stats.n_train, 1))
        return predict(stats, partial(backend.reduce, kernel), grid, self.metric, self.uncertainty, backend.info.task,
                       None if fitted is None else fitted.nugget, validation_only, self.likelihood, times)

    def finish(self, index, seed, choice, landmarks, estimate, fitted, result: GPResult, kernel_watch, inference_watch) -> GPRun:
        spec, kspec, backend = self.spec, self.kspec, self.backend
        recorded = {k: plain(v) for k, v in choice.items()}
        row = base_row(spec)
        row.update(
            metric=self.metric.name, **result.metrics, nugget=result.nugget, layers=kspec.layers,
            sigma_w=kspec.get("sigma_w"), sigma_b=kspec.get("sigma_b"),
            landmark_fraction=spec.landmarks.fraction if kspec.low_rank and spec.landmarks.count is None else None,
            estimated_gb=round(estimate.gb, 3), kernel_seconds=kernel_watch.seconds, inference_seconds=inference_watch.seconds,
            landmarks=int(landmarks.numel()) if landmarks is not None else 0, seed=seed,
            extra=json.dumps({**recorded, **run_settings(spec, fitted.values if fitted is not None else ())}), fit=spec.fit.method,
            likelihood=self.likelihood.name if backend.info.task == "classification" else "",
            **{k: v for k, v in result.uncertainty.items() if k != "reliability"},
        )
        if "reliability" in result.uncertainty:   # the test rows' reliability diagram (gnngp report draws it)
            with_extra(row, reliability=result.uncertainty["reliability"])
        if result.rule is not None:
            with_extra(row, probabilities=result.rule.approx, variance_factor=result.rule.variance_factor)
        if result.curve is not None:   # the metric at every training time (gnngp report draws the learning curve)
            with_extra(row, curve=result.curve)
        if fitted is not None:
            row.update(fit_seconds=fitted.seconds, **fitted.row())
        row["total_seconds"] = row["kernel_seconds"] + row["inference_seconds"] + row.get("fit_seconds", 0.0)
        row.update(graph_columns(backend.info, backend.load_seconds, spec, index))
        columns = backend.columns()
        with_extra(row, **columns.pop("extra", {}))
        row.update(columns)
        fit_warnings = list(fitted.warnings) if fitted is not None else []
        said = [*backend.info.warnings, *self.kernel_notes(), *fit_warnings, *result.warnings]
        if said:  # e.g. a single training class, a temperature on its grid's edge
            with_extra(row, warnings=said)
        return GPRun(row, choice, result, fitted)


def refuse_on(backend: Backend, spec: Any) -> None:
    """What ``backend`` cannot run of the GP job ``spec``, in one line before any work (the
    command line's preflight asks it too, before the job writes a row)."""
    if spec.fit.method == "mll" and not backend.supports_fit:   # before the backend's own refusals: their fix (a low-rank twin) would not lift it
        raise ConfigError(f"fit=mll needs gradients through the kernel on every node, which compute={backend.name} does not compute; "
                          f"use fit=grid with compute={backend.name}, or fit=mll with compute=local")
    backend.refuse(spec, KERNELS[spec.kernel.name])


def run_gp(spec: Any, backend: Backend, on_run: Optional[Callable[[list[dict]], Any]] = None, skip: Collection[int] = ()) -> list[dict]:
    """All runs of a GP job on ``backend``; one row per run (one run only for a deterministic
    kernel when ``repeat_deterministic`` is false), each handed to ``on_run`` as it finishes
    (so a stopped job keeps its finished runs); the runs in ``skip`` are not run. Unsupported
    combinations are refused, in one line, before the backend loads anything."""
    spec = parse(spec)
    entry = KERNELS[spec.kernel.name]
    refuse_on(backend, spec)
    if spec.fit.method == "mll":
        check_learn(spec.kernel, spec.fit)
    if entry.note is not None and entry.note(spec.kernel):
        log.warning(entry.note(spec.kernel))
    rows = []
    with backend:
        for run in GPJob(spec, backend).runs(skip):
            rows.append(run.row)
            if on_run is not None:
                on_run([run.row])
    return rows
