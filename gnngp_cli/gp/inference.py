"""GP regression over a grid of nuggets, from statistics every backend reduces the same way.

Classification regresses one-hot targets and predicts the argmax; regression uses ``y``.
With ``b`` the training nodes and ``*`` the predicted ones, for each nugget ``eps`` (a grid
value times the mean diagonal of ``K``):

- exact:    mean ``K[*, b] (K[b, b] + eps I)^-1 y_b``,
            variance ``diag K[*, *] - diag K[*, b] (K[b, b] + eps I)^-1 K[b, *]``;
- low rank: mean ``Q[*] (Q[b]^T Q[b] + eps I)^-1 Q[b]^T y_b``,
            variance ``eps diag Q[*] (Q[b]^T Q[b] + eps I)^-1 Q[*]^T``.

A backend hands over :class:`TrainingStatistics`: the Gram matrix of the training rows
(``K[b, b]``, or ``Q[b]^T Q[b]``), the right-hand sides (``y_b``, or ``Q[b]^T y_b``), ``y_b^T y_b``
and the sum of ``diag K`` over every node; row blocks add them up. One posterior strategy
(:class:`ExactPosterior`, :class:`LowRankPosterior`) decomposes the Gram matrix once,
``V diag(w) V^T``; with ``F`` the prediction features of some rows (``K[*, b]``, or ``Q[*]``) the
means for every grid value are one product ``F (V [coef / (w + eps)]_eps)``. Then metrics
(:mod:`gnngp_cli.metrics`) score a :class:`RowGroup` of labelled rows at a time (every
labelled node locally, one row block on Dask) into states that reduce alike: the nugget with
the best validation metric is chosen (the smallest one on ties), and the train, validation and
test metrics and the test columns (NLPD, coverage, variances) are read at it.
"""
from __future__ import annotations

import functools
import logging
import math
import operator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from .. import runtime
from ..errors import KernelError, grid_edge
from ..metrics import Metric, MetricInput, Scores, merge_scores
from .posterior import Posterior, RowGroup, TrainingTimes, posterior_for
from .sufficient import SPLITS, TrainingStatistics

log = logging.getLogger("gnngp")


def log_grid(low: float, high: float, num: int, dtype=torch.float64, device=None) -> Tensor:
    """``num`` log-spaced values from ``low`` to ``high`` (nuggets relative to the mean diagonal,
    or base-kernel gammas)."""
    return torch.logspace(math.log10(low), math.log10(high), num, dtype=dtype, device=device)


def validation_scores(group: RowGroup, posterior: Posterior, nuggets: Tensor, metric: Metric, split: str = "val") -> Scores:
    """The state of ``metric`` on the validation rows (or ``split``'s), one column per nugget."""
    scores = Scores()
    pos = group.positions[split]
    scores.add(split, metric, MetricInput(posterior.grid_means(group.features, pos, nuggets), group.targets[split]))
    return scores


@dataclass(frozen=True)
class ProbabilityRule:
    """How a classification's test rows get class probabilities (:mod:`gnngp_cli.gp.probabilities`):
    the approximation, its samples, the temperature, the likelihood's factor on the latent
    variance (``variance_scale``) and the one fitted with the temperature (``variance_factor``)."""

    approx: str = "mc"
    samples: int = 256
    temperature: float = 1.0
    variance_scale: float = 1.0
    variance_factor: float = 1.0

    def probabilities(self, mean: Tensor, variance: Tensor, temperature: Optional[float] = None) -> Tensor:
        from .probabilities import class_probabilities

        t = self.temperature if temperature is None else temperature
        return class_probabilities(mean, variance.double() * (self.variance_scale * self.variance_factor), self.approx, self.samples, t)


ONE = torch.ones(1, dtype=torch.float64)   # the temperature 1 (or the variance factor 1) alone


def temperature_nll(group: RowGroup, posterior: Posterior, eps: Tensor, rule: ProbabilityRule, temperatures: Optional[Tensor] = None,
                    factors: Optional[Tensor] = None) -> Tensor:
    """The summed validation NLL at each factor on the latent variance (rows; default: the rule's
    alone) and temperature (columns; default: of :data:`~gnngp_cli.gp.probabilities.TEMPERATURES`),
    by the rule's approximation: the one the test rows get."""
    from .probabilities import TEMPERATURES, nll_grid

    mean = posterior.mean(group.features, group.positions["val"], eps)
    variance = group.variance(posterior, eps, "val").double() * (rule.variance_scale * rule.variance_factor)
    return nll_grid(mean, variance, group.targets["val"], rule.approx, rule.samples,   # the approximation the test rows get
                    TEMPERATURES if temperatures is None else temperatures, ONE if factors is None else factors)


def validation_latents(group: RowGroup, posterior: Posterior, eps: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The validation rows' latent means, variances (float64) and labels: what the temperature's
    fit reads, gathered once (as :meth:`GPResult.means` gathers the labelled rows)."""
    pos = group.positions["val"]
    return posterior.mean(group.features, pos, eps), group.variance(posterior, eps, "val").double(), group.targets["val"]


def concatenate_each(*parts: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return tuple(torch.cat(column) for column in zip(*parts))


def add_tensors(*parts: Tensor) -> Tensor:
    return functools.reduce(operator.add, parts)


def final_scores(group: RowGroup, posterior: Posterior, eps: Tensor, metric: Metric, uncertainty: list[Metric], output_scale: float,
                 rule: Optional[ProbabilityRule] = None) -> Scores:
    """At the chosen nugget: ``metric`` on each split (the test split's in-distribution rows),
    and the ``uncertainty`` columns on the test rows (with ``rule``, from class probabilities)."""
    scores = Scores()
    labelled = group.labelled()
    means = posterior.mean(group.features, labelled, eps)   # one product (no copy of F when every row is labelled)
    for key in SPLITS:
        pos = group.positions[key]
        mean = means[torch.searchsorted(labelled, pos)]
        if key == "test" and uncertainty:
            variance = group.variance(posterior, eps, key)
            probs = rule.probabilities(mean, variance) if rule is not None else None
            noise = 0.0 if isinstance(eps, TrainingTimes) else eps   # a network's output after training: no observation noise
            prediction = MetricInput(mean[:, None, :], group.targets[key], variance[:, None], noise, output_scale, probs, group.ood)
            for column in uncertainty:
                scores.add(column.name, column, prediction)
        keep = group.in_distribution(key)
        scores.add(key, metric, MetricInput(mean[keep][:, None, :], group.targets[key][keep]))
        if key == "test" and group.ood is not None:   # the metric on the OOD test rows, where their labels are classes the GP predicts
            y_ood = group.targets[key][group.ood]
            if bool((y_ood < mean.size(1)).all()):
                scores.add("test_ood", metric, MetricInput(mean[group.ood][:, None, :], y_ood))
    return scores


def labelled_means(group: RowGroup, posterior: Posterior, eps: Tensor) -> Tensor:
    """Posterior means of the group's labelled rows, in node order."""
    return posterior.mean(group.features, group.labelled(), eps)


def labelled_variances(group: RowGroup, posterior: Posterior, eps: Tensor) -> Tensor:
    """Latent posterior variances of the group's labelled rows, in node order."""
    return group.variance(posterior, eps)


def validation_curve(posterior: Posterior, stats: TrainingStatistics, reduce: "Reduce", nuggets: Tensor, metric: Metric,
                     split: str = "val") -> Tensor:
    """The validation metric (or ``split``'s) at each nugget (float64, on the CPU), scored by chunks of the grid (:func:`grid_chunk`)."""
    step = grid_chunk(stats.gram.size(0), stats.num_nodes, stats.n_train, stats.rhs.size(1))
    curve = torch.empty(nuggets.numel(), dtype=torch.float64)   # filled in place: no piece per chunk kept, no copy to join them
    for start in range(0, nuggets.numel(), step):
        curve[start:start + step] = reduce(partial(validation_scores, posterior=posterior, nuggets=nuggets[start:start + step], metric=metric,
                                                   split=split), merge_scores).value(split)
    return curve


def time_curve(posterior: Posterior, stats: TrainingStatistics, reduce: "Reduce", times: TrainingTimes, metric: Metric, val_curve: Tensor) -> dict:
    """The metric on each split at every training time of ``times`` (a learning curve, as
    ``gnngp report`` draws it): ``{"t": [...], "train": [...], "val": [...], "test": [...]}``, inf as "inf"."""
    curve = {"t": [float(t) if math.isfinite(t) else "inf" for t in times.times.tolist()], "val": val_curve.tolist()}
    for split in ("train", "test"):
        curve[split] = validation_curve(posterior, stats, reduce, times, metric, split).tolist()
    return curve


def best_index(curve) -> int:
    """The best value of a validation curve (a list or tensor; NaN counts as the worst; the first on ties)."""
    return int(torch.argmax(torch.as_tensor(curve, dtype=torch.float64).nan_to_num(nan=-math.inf)))


GRID_CHUNK_MIN = 128   # grid values scored at once, at least: every default grid (101) is one pass over the row groups


def grid_chunk(rank: int, num_nodes: int, n_train: int, outputs: int) -> int:
    """How many nuggets of a grid are scored in one pass over the row groups: the posterior's
    weights (``rank x chunk x outputs``) and a group's validation means (at most the nodes
    outside the training set, ``x chunk x outputs``) stay within ``runtime.ROW_BLOCK_ENTRIES``
    entries, or the chunk is ``GRID_CHUNK_MIN``, whichever is larger. A grid of 10^8 nuggets on a
    small graph then goes by passes of about 10^6, instead of holding 10^8-wide products at once."""
    return max(GRID_CHUNK_MIN, runtime.ROW_BLOCK_ENTRIES // (chunk_rows(rank, num_nodes, n_train) * max(outputs, 1)))


def chunk_rows(rank: int, num_nodes: int, n_train: int) -> int:
    """The rows of the largest product of a grid chunk: the posterior's rank, or the nodes
    outside the training set (a bound on a group's validation nodes)."""
    return max(rank, num_nodes - n_train, 1)


def concatenate(*parts: Tensor) -> Tensor:
    return torch.cat(parts)


Reduce = Callable[[Callable[[RowGroup], Any], Callable[..., Any]], Any]   # reduce(fn, combine): fn over the row groups, combined


@dataclass
class GPResult:
    """The posterior at the chosen nugget: ``nugget`` (a grid value, relative to the mean
    diagonal of ``K``; ``eps`` absolute), the metric on each split, the test columns, the
    validation curve over the grid; the labelled nodes' means and variances on demand, through
    the ``reduce`` of the row groups they came from."""

    nugget: float
    eps: Tensor
    metrics: dict[str, float]
    uncertainty: dict[str, float]
    val_curve: Tensor          # the validation metric at each nugget of the grid (float64, on the CPU)
    posterior: Posterior
    reduce: Reduce = field(repr=False)
    rule: Optional[ProbabilityRule] = None   # classification: how class probabilities were read (the fitted temperature)
    curve: Optional[dict] = None             # inference.time with several times: the metric on each split at each (time_curve)
    grid: Optional[Tensor] = None            # the nuggets val_curve scored, relative to the mean diagonal (float64, CPU); None for times
    warnings: list[str] = field(default_factory=list)   # what the row's extra records under "warnings" (a temperature on its grid's edge)

    def means(self) -> Tensor:
        """Posterior means of the labelled nodes, in node order."""
        return self.reduce(partial(labelled_means, posterior=self.posterior, eps=self.eps), concatenate)

    def variances(self) -> Tensor:
        """Latent posterior variances of the labelled nodes, in node order."""
        return self.reduce(partial(labelled_variances, posterior=self.posterior, eps=self.eps), concatenate)


def predict(stats: TrainingStatistics, reduce: Reduce, grid: Tensor, metric: Metric, uncertainty: list[Metric], task: str,
            nugget: Optional[float] = None, validation_only: bool = False, likelihood: Any = None,
            times: Optional[TrainingTimes] = None):
    """GP regression from ``stats`` over the row groups of ``reduce``: the nugget of ``grid``
    (relative to the mean diagonal; ``nugget``: one absolute value instead, e.g. fitted) with
    the best validation ``metric``, and at it the metric on each split and the ``uncertainty``
    columns (:class:`GPResult`); with ``validation_only``, the best validation value alone. The
    grid is scored by chunks (:func:`grid_chunk`): one pass for any usual grid. ``likelihood``
    (:class:`~.likelihoods.Likelihood`; default the Gaussian one) makes the posterior and,
    for classification, the class probabilities of the test columns and the temperature
    fitted on validation. With ``times`` (:class:`TrainingTimes`), the training time of the best
    validation metric instead of the nugget (the smallest on ties: early stopping); the
    uncertainty columns then read the trained network's output variance over its initialisation
    (:meth:`Posterior.time_variance`: no nugget, no output scale)."""
    if times is not None:
        nuggets = times
    else:
        nuggets = grid * stats.scale if nugget is None else torch.tensor([nugget], dtype=grid.dtype, device=grid.device)
    if not stats.scale > 0:   # before the grid: a nugget grid of a zero kernel is all zeros, and the cause is the kernel
        raise KernelError("the kernel is zero on every node (mean variance 0); check the features and sigmas "
                          "(a sigma of 0 before every path, e.g. kernel.sigma_w=0, zeroes it)")
    if times is None and not bool(torch.isfinite(nuggets).all() & (nuggets > 0).all()):
        raise KernelError(f"the nugget grid times the kernel's mean diagonal ({stats.scale:.3g}) leaves nuggets that are 0 or not finite "
                          f"in {str(grid.dtype).replace('torch.', '')}; narrow nugget.min and nugget.max toward 1e-3..10, or use dtype=float64")
    chosen = {}
    candidates = likelihood.candidates() if likelihood is not None else [None]
    for candidate in (candidates[:1] if validation_only else candidates):
        posterior = None   # the last candidate's, unless kept in ``chosen``: freed before the next is built
        posterior = candidate.posterior(stats) if candidate is not None else posterior_for(stats)
        val_curve = validation_curve(posterior, stats, reduce, nuggets, metric)
        best = best_index(val_curve)
        if len(candidates) > 1 and not validation_only:   # the Dirichlet's alpha: the lowest validation NLL at its nugget
            rule = ProbabilityRule(candidate.approximation(stats.num_nodes, stats.rhs.size(1)), candidate.samples)
            nll = float(reduce(partial(temperature_nll, posterior=posterior, eps=nuggets[best], rule=rule, temperatures=ONE), add_tensors)[0, 0])
            if chosen and not nll < chosen["nll"]:
                continue
            chosen = dict(nll=nll)
        chosen.update(likelihood=candidate, posterior=posterior, val_curve=val_curve, best=best)
    likelihood, posterior, val_curve, best = chosen["likelihood"], chosen["posterior"], chosen["val_curve"], chosen["best"]
    if validation_only:
        return float(val_curve[best])
    eps = nuggets[best]
    output_scale = (1.0 if times is not None else posterior.output_scale(eps)) if task == "regression" else math.nan
    rule, warnings = None, []
    if nugget is None and times is None and grid.numel() > 2 and int(best) in (0, grid.numel() - 1):   # as a temperature on its edge
        low = int(best) == 0
        warnings.append(grid_edge("the nugget chosen on validation", float(grid[best]), float(grid[0]), float(grid[-1]),
                                  f"widen the grid (nugget.{'min' if low else 'max'}={float(grid[best]) * (0.01 if low else 100):g})",
                                  " times the kernel's mean diagonal"))
        log.warning(warnings[-1])
    if task == "classification" and uncertainty and likelihood is not None:
        rule = ProbabilityRule(likelihood.approximation(stats.num_nodes, stats.rhs.size(1)), likelihood.samples, 1.0,
                               1.0 if times is not None else likelihood.variance_scale(posterior, eps, stats.rhs.size(1)))
        if likelihood.temperature:   # the temperature and the factor on the latent variance, on the validation NLL
            from .probabilities import TEMPERATURES, best_fit, fit_temperature, nll_grid, on_edge

            mean, variance, y = reduce(partial(validation_latents, posterior=posterior, eps=eps), concatenate_each)
            variance = variance * rule.variance_scale
            t, factor = fit_temperature(partial(nll_grid, mean, variance, y, "probit", 1))   # by the probit form, whatever the test rows get
            rule = replace(rule, temperature=t, variance_factor=factor)
            if rule.approx != "probit":   # Monte Carlo: the temperature again at that factor, by the draws the test rows get
                rule = replace(rule, temperature=best_fit(nll_grid(mean, variance * factor, y, rule.approx, rule.samples), factors=ONE)[0])
            if on_edge(t):
                warnings.append(grid_edge("the temperature fitted on validation", t, float(TEMPERATURES[0]), float(TEMPERATURES[-1]),
                                          "the probabilities (ece, nll) may be miscalibrated; check the posterior means' scale, "
                                          "or compare with likelihood.temperature=false"))
                log.warning(warnings[-1])
    final = reduce(partial(final_scores, posterior=posterior, eps=eps, metric=metric, uncertainty=uncertainty, output_scale=output_scale,
                           rule=rule), merge_scores)
    metrics = {key: float(final.value(key)[0]) for key in SPLITS}
    columns = {column.name: float(final.value(column.name)[0]) for column in uncertainty}
    if task == "regression" and times is None:
        columns["output_scale"] = output_scale
    if times is not None:
        columns["time"] = float(eps.times)
    if rule is not None:
        columns["temperature"] = rule.temperature
    if likelihood is not None:
        columns.update(likelihood.columns())
    if "test_ood" in final.states:
        columns["test_ood"] = float(final.value("test_ood")[0])
    if rule is not None and "ece" in final.states:   # the reliability diagram's bins, from the rows ECE read
        from .probabilities import reliability_bins

        state = final.states["ece"]
        columns["reliability"] = reliability_bins(state["probs"], state["y"])
    nugget_value = math.nan if times is not None else float(nuggets[best] / stats.scale)
    curve = time_curve(posterior, stats, reduce, times, metric, val_curve) if times is not None and times.numel() > 1 else None
    scored = None if times is not None else (nuggets / stats.scale).double().cpu()
    return GPResult(nugget_value, eps, metrics, columns, val_curve, posterior, reduce, rule, curve, scored, warnings)
