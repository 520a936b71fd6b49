"""The metrics: one registry entry each, computed the same way on every backend.

A metric reads a :class:`MetricInput` of a group of nodes (posterior means, one column per
nugget of a grid; latent variances at the chosen nugget; the targets) and turns it into a
*state*: tensors that row groups reduce, added (counts, sums) or concatenated (the scores an
ROC curve ranks). The value comes from the whole state, once. So the same entry serves the
local backend (one group: every labelled node) and the Dask backend (one group per row block,
states reduced in a tree): a metric is never written twice.

Two kinds:

- ``score``: a dataset's metric (``dataset.metric``; by default ``accuracy``, ``roc_auc`` for
  two classes, ``r2`` for regression). Nuggets (and gamma, filters) are chosen on validation by
  it, and it is reported on the training, validation and test nodes;
- ``uncertainty``: a column of the test nodes at the chosen nugget, read from the posterior
  variance too, for every entry that fits the task (``nlpd``, ``coverage95``; ``var_correct``,
  ``var_wrong``).

A new metric is :func:`register_metric` beside its code (a test file will do): its
``partial``, the states it gathers instead of adding, and its ``compute``. Counts and sums are
one line each; the ranking metrics (ROC-AUC, AUPR) and the calibration errors (ECE, MCE) a few
(:func:`binary_auroc`, :func:`binary_average_precision`, :func:`calibration_error`), which the
tests check against torchmetrics and scikit-learn: importing torchmetrics (scipy.signal and
matplotlib with it) took longer than importing torch, in every process that scores a row.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch import Tensor

from .errors import ConfigError

Z95 = 1.959963984540054   # the 97.5% quantile of the standard normal: 95% central intervals


@dataclass(frozen=True)
class MetricInput:
    """What a metric reads of a group of ``n`` nodes: ``mean`` (``n x G x outputs``, a column
    per nugget), ``y`` (``n`` class ids or values) and, at the chosen nugget, the latent
    ``variance`` (``n x G``), the absolute nugget ``noise`` and the output scale ``s^2``
    (regression's predictive variance is ``s^2 (variance + noise)``)."""

    mean: Tensor
    y: Tensor
    variance: Optional[Tensor] = None
    noise: float = math.nan
    output_scale: float = math.nan
    probs: Optional[Tensor] = None      # class probabilities at the chosen nugget (``n x C``; classification's test rows)
    ood: Optional[Tensor] = None        # which rows are out of distribution (a protocol's test rows; ``None``: none are)

    @property
    def columns(self) -> int:
        return self.mean.size(1)

    @property
    def count(self) -> Tensor:
        return torch.tensor(float(self.y.numel()), dtype=torch.float64, device=self.y.device)

    def value(self) -> Tensor:
        """The predicted values of a regression (``n x G``, float64)."""
        return self.mean[:, :, 0].double()

    def predictive_variance(self) -> Tensor:
        return self.output_scale * (self.variance.double() + self.noise)

    def spread(self) -> Tensor:
        """The latent variance per row and column (``n x G``): averaged over the classes where
        each class has its own (the ``dirichlet`` likelihood, a GNN ensemble's members)."""
        return self.variance.double().mean(-1) if self.variance.dim() == 3 else self.variance.double()

    def in_distribution(self) -> Tensor:
        """The rows that are in distribution (every row without a protocol's OOD flags)."""
        return torch.ones_like(self.y, dtype=torch.bool) if self.ood is None else ~self.ood


State = dict[str, Tensor]


def _never(task: str, classes: int) -> bool:
    """A metric that is no task's default: every metric's functions are module-level, so a
    :class:`Metric` pickles as it is (Dask sends it to its workers; a lambda made it fall back
    to cloudpickle, and the failed first try once surfaced as an error in a test)."""
    return False


@dataclass(frozen=True)
class Metric:
    """One metric (see the module docstring). ``partial(prediction) -> state``; a state's
    entries named in ``gather`` are concatenated over row groups, the others added (``merge``
    overrides both); ``compute(state) -> value per column`` (NaN where undefined, e.g. an empty
    split). ``tasks`` and ``classes`` say where it applies; ``requires`` says so in an error."""

    name: str
    tasks: tuple[str, ...]
    partial: Callable[[MetricInput], State]
    compute: Callable[[State], Tensor]
    kind: str = "score"
    classes: Optional[int] = None
    gather: tuple[str, ...] = ()
    merge: Optional[Callable[[State, State], State]] = None
    default: Callable[[str, int], bool] = _never
    requires: str = ""
    probabilistic: bool = False   # reads class probabilities at the chosen nugget (``MetricInput.probs``): one column
    bounds: tuple[float, float] = (-math.inf, math.inf)   # every value it can take lies here (a row outside is damaged or forged)

    def applies(self, task: str, num_classes: int) -> bool:
        return task in self.tasks and (self.classes is None or num_classes == self.classes)

    def combine(self, a: State, b: State) -> State:
        """Two groups' states as one."""
        if self.merge is not None:
            return self.merge(a, b)
        return {key: torch.cat([a[key], b[key]]) if key in self.gather else a[key] + b[key] for key in a}

    def value(self, prediction: MetricInput) -> Tensor:
        """The metric of one prediction, per column (a state of one group)."""
        return self.compute(self.partial(prediction))


METRICS: dict[str, Metric] = {}


def register_metric(name: str, tasks: tuple[str, ...], partial: Callable[[MetricInput], State], compute: Callable[[State], Tensor], *,
                    kind: str = "score", classes: Optional[int] = None, gather: tuple[str, ...] = (),
                    merge: Optional[Callable[[State, State], State]] = None, default: Callable[[str, int], bool] = _never,
                    requires: str = "", probabilistic: bool = False, bounds: tuple[float, float] = (-math.inf, math.inf)) -> Metric:
    """Add a metric (``dataset.metric=name`` for a ``score`` metric; a result column for an ``uncertainty`` one)."""
    if kind not in ("score", "uncertainty"):
        raise ConfigError(f"metric {name!r}: kind={kind!r} is not valid; use score or uncertainty")
    METRICS[name] = Metric(name, tuple(tasks), partial, compute, kind, classes, tuple(gather), merge, default,
                           requires or f"a {' or '.join(tasks)} task", probabilistic, (float(bounds[0]), float(bounds[1])))
    return METRICS[name]


def score_metrics() -> list[Metric]:
    return [m for m in METRICS.values() if m.kind == "score"]


def uncertainty_metrics(task: str, num_classes: int) -> list[Metric]:
    """The ``uncertainty`` columns that fit a task."""
    return [m for m in METRICS.values() if m.kind == "uncertainty" and m.applies(task, num_classes)]


def default_metric(task: str, num_classes: int) -> str:
    for m in score_metrics():
        if m.default(task, num_classes):
            return m.name
    raise ConfigError(f"no metric is the default for a {task} task with {num_classes} classes; set dataset.metric")


def _describe(task: str, num_classes: int) -> str:
    return "a regression task" if task == "regression" else f"a {num_classes}-class task"


def resolve_metric(requested: Optional[str], task: str, num_classes: int, dataset: str) -> str:
    """The metric to report and to choose nuggets by: ``requested`` if it fits the task, else
    a one-line :class:`ConfigError`; ``None`` gives :func:`default_metric`."""
    if requested is None:
        return default_metric(task, num_classes)
    entry = METRICS.get(requested)
    if entry is None or entry.kind != "score":
        valid = ", ".join(m.name for m in score_metrics())
        raise ConfigError(f"dataset.metric={requested!r} is not a metric; use one of {valid}")
    if not entry.applies(task, num_classes):
        hint = " (or dataset.task=regression for a custom dataset)" if entry.tasks == ("regression",) else ""
        raise ConfigError(f"dataset.metric={requested} needs {entry.requires} but {dataset} is {_describe(task, num_classes)}; "
                          f"use dataset.metric={default_metric(task, num_classes)}{hint}")
    return requested


def score(name: str, outputs: Tensor, y: Tensor) -> float:
    """Metric ``name`` of one prediction ``outputs`` (``n x outputs``) of the targets ``y``."""
    return float(METRICS[name].value(MetricInput(outputs.reshape(outputs.size(0), 1, -1), y))[0])


def _ratio(total: Tensor, count: Tensor) -> Tensor:
    """``total / count``, NaN where nothing was counted."""
    return torch.where(count > 0, total / count.clamp_min(1), torch.full_like(total, math.nan))


# --- score metrics ---------------------------------------------------------------------------

def _accuracy(p: MetricInput) -> State:
    return {"correct": (p.mean.argmax(dim=2) == p.y[:, None]).double().sum(0), "count": p.count}


def _accuracy_value(s: State) -> Tensor:
    return _ratio(s["correct"], s["count"])


def _many_classes(task: str, classes: int) -> bool:
    return task == "classification" and classes != 2


register_metric("accuracy", ("classification",), _accuracy, _accuracy_value, default=_many_classes, requires="a classification task", bounds=(0, 1))


def positive_score(mean: Tensor) -> Tensor:
    """The positive-class score of two-class outputs (``... x 2``): ``out[..., 1] - out[..., 0]``."""
    if mean.size(-1) != 2:
        raise ConfigError(f"roc_auc needs two outputs per node (a two-class task), got {mean.size(-1)}; use dataset.metric=accuracy")
    return mean[..., 1] - mean[..., 0]


def _roc_auc_state(p: MetricInput) -> State:
    return {"scores": positive_score(p.mean).double(), "positive": (p.y == 1).to(torch.int8)}


def midranks(values: Tensor) -> Tensor:
    """The 1-based ranks of ``values`` (one dimension), tied values sharing the mean of their ranks."""
    order = torch.argsort(values)
    _, counts = torch.unique_consecutive(values[order], return_counts=True)
    mean_rank = torch.cumsum(counts, 0).double() - (counts - 1).double() / 2   # a group's last rank, less half its extent
    ranks = torch.empty(values.shape, dtype=torch.float64, device=values.device)
    ranks[order] = torch.repeat_interleave(mean_rank, counts)
    return ranks


def binary_auroc(scores: Tensor, positive: Tensor) -> Tensor:
    """The area under the ROC curve of ``scores`` (higher: positive) for the boolean labels
    ``positive``: the chance that a positive scores above a negative, ties counting half (the
    Mann-Whitney statistic with mean ranks; the trapezoids under the exact ROC curve, as
    torchmetrics' ``binary_auroc`` and scikit-learn's ``roc_auc_score`` give it). Both classes present."""
    n1 = int(positive.sum())
    n0 = positive.numel() - n1
    return (midranks(scores)[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)


def binary_average_precision(scores: Tensor, positive: Tensor) -> Tensor:
    """Average precision: ``sum_k (R_k - R_(k-1)) P_k`` over the distinct thresholds, highest first
    (no interpolation; torchmetrics' ``binary_average_precision`` and scikit-learn's
    ``average_precision_score``). Both classes present."""
    order = torch.argsort(scores, descending=True)
    ranked = scores[order]
    hits = torch.cumsum(positive[order].double(), 0)
    last = torch.cat([torch.nonzero(ranked[1:] != ranked[:-1]).view(-1), torch.tensor([ranked.numel() - 1], device=scores.device)])
    found = hits[last]   # the positives at or above each distinct threshold
    recall = found / found[-1]
    return (torch.diff(recall, prepend=recall.new_zeros(1)) * found / (last + 1)).sum()


def calibration_error(probs: Tensor, y: Tensor, bins: int, norm: str) -> Tensor:
    """ECE (``norm="l1"``: the bins' ``|accuracy - confidence|`` weighted by their share of the
    nodes) or MCE (``"max"``: the largest) of class probabilities ``probs`` (nodes x classes) for
    labels ``y``: each node's confidence its largest probability, right when its argmax is the
    label; ``bins`` equal-width bins ``[i/bins, (i+1)/bins)``, a confidence of exactly 1 in a bin of
    its own (torchmetrics' ``multiclass_calibration_error``)."""
    confidence, predicted = probs.max(1)
    right = (predicted == y).to(confidence.dtype)
    edges = torch.linspace(0, 1, bins + 1, dtype=confidence.dtype, device=confidence.device)
    index = torch.bucketize(confidence, edges, right=True) - 1

    def per_bin(values: Tensor) -> Tensor:
        return torch.zeros(bins + 1, dtype=values.dtype, device=values.device).index_add_(0, index, values)

    gap = (per_bin(right) - per_bin(confidence)).abs()   # count x |accuracy - confidence| of each bin
    if norm == "l1":
        return gap.sum() / confidence.numel()
    return (gap / per_bin(torch.ones_like(confidence)).clamp_min(1)).max()


def _roc_auc(s: State) -> Tensor:
    """ROC-AUC per column (:func:`binary_auroc`); NaN when a class is absent."""
    positive = s["positive"].bool()
    n1 = int(positive.sum())
    if n1 == 0 or n1 == positive.numel():
        return torch.full((s["scores"].size(1),), math.nan, dtype=torch.float64, device=positive.device)
    return torch.stack([binary_auroc(column, positive) for column in s["scores"].T]).double()


def _two_classes(task: str, classes: int) -> bool:
    return task == "classification" and classes == 2


register_metric("roc_auc", ("classification",), _roc_auc_state, _roc_auc, classes=2, gather=("scores", "positive"),
                default=_two_classes, requires="a two-class task", bounds=(0, 1))


def _r2_state(p: MetricInput) -> State:
    y = p.y.double()
    empty = y.numel() == 0
    mean = y.mean() if not empty else y.new_zeros(())
    residual = ((p.mean[:, :, 0] - p.y[:, None].to(p.mean.dtype)) ** 2).double().sum(0)   # in the prediction's precision
    return {"sse": residual, "count": p.count, "mean": mean, "m2": ((y - mean) ** 2).sum(),
            "low": y.new_full((), math.inf) if empty else y.min(), "high": y.new_full((), -math.inf) if empty else y.max()}


def _r2_merge(a: State, b: State) -> State:
    """Two groups' target moments as one (Chan et al.'s pairwise update: no cancellation)."""
    n = a["count"] + b["count"]
    delta = b["mean"] - a["mean"]
    share = torch.where(n > 0, b["count"] / n.clamp_min(1), torch.zeros_like(n))
    return {"sse": a["sse"] + b["sse"], "count": n, "mean": a["mean"] + delta * share,
            "m2": a["m2"] + b["m2"] + delta * delta * a["count"] * share,
            "low": torch.minimum(a["low"], b["low"]), "high": torch.maximum(a["high"], b["high"])}


def _r2(s: State) -> Tensor:
    """``1 - SSE / sum (y - mean y)^2``; NaN on constant targets (decided on the values: a
    rounded mean leaves ~1e-15 in the sum of squares)."""
    if not bool(s["high"] > s["low"]):
        return torch.full_like(s["sse"], math.nan)
    return 1 - s["sse"] / s["m2"]


def _regression(task: str, classes: int) -> bool:
    return task == "regression"


register_metric("r2", ("regression",), _r2_state, _r2, merge=_r2_merge, default=_regression,
                requires="a regression task", bounds=(-math.inf, 1))


# --- uncertainty: columns of the test nodes at the chosen nugget ---------------------------------

def _nlpd(p: MetricInput) -> State:
    var = p.predictive_variance()
    err = (p.value() - p.y.double()[:, None]) ** 2
    return {"total": (0.5 * (torch.log(2 * math.pi * var) + err / var)).sum(0), "count": p.count}


def _coverage(p: MetricInput) -> State:
    err = (p.value() - p.y.double()[:, None]) ** 2
    return {"total": (err <= Z95 ** 2 * p.predictive_variance()).double().sum(0), "count": p.count}


def _variance_where(correct: bool, p: MetricInput) -> State:
    right = p.mean.argmax(dim=2) == p.y[:, None]
    chosen = (right if correct else ~right) & p.in_distribution()[:, None]
    return {"total": (p.spread() * chosen).sum(0), "count": chosen.double().sum(0)}


def _mean_of(s: State) -> Tensor:
    return _ratio(s["total"], s["count"])


register_metric("nlpd", ("regression",), _nlpd, _mean_of, kind="uncertainty")         # test negative log predictive density
register_metric("coverage95", ("regression",), _coverage, _mean_of, kind="uncertainty", bounds=(0, 1))   # share of test targets in the 95% interval
register_metric("var_correct", ("classification",), functools.partial(_variance_where, True), _mean_of, kind="uncertainty")   # mean latent variance, right
register_metric("var_wrong", ("classification",), functools.partial(_variance_where, False), _mean_of, kind="uncertainty")    # ... and wrong predictions


# --- uncertainty from class probabilities (classification; see gnngp_cli.gp.probabilities) ----------
# Calibration reads the in-distribution test rows; detection (AUROC, AUPR) tells the
# out-of-distribution test rows of a protocol from the others, or, without one, the wrong
# predictions from the right ones (misclassification detection).

ECE_BINS = 15   # equal-width confidence bins of ECE and MCE (the common choice)


def _calibration_state(p: MetricInput) -> State:
    keep = p.in_distribution()
    if p.probs is None:   # a method without class probabilities (a GNN regression): nothing to score
        return {"probs": torch.zeros(0, 1, dtype=torch.float64), "y": torch.zeros(0, dtype=torch.long)}
    return {"probs": p.probs[keep].double(), "y": p.y[keep].long()}


def _nll(s: State) -> Tensor:
    n = s["y"].numel()
    if n == 0:
        return torch.full((1,), math.nan, dtype=torch.float64)
    picked = s["probs"][torch.arange(n, device=s["y"].device), s["y"]]
    return (-torch.log(picked.clamp_min(1e-300))).mean().view(1)


def _brier(s: State) -> Tensor:
    """The multi-class Brier score: ``sum_c (p_c - [y = c])^2``, averaged over nodes."""
    if s["y"].numel() == 0:
        return torch.full((1,), math.nan, dtype=torch.float64)
    one_hot = torch.nn.functional.one_hot(s["y"], s["probs"].size(1)).double()
    return ((s["probs"] - one_hot) ** 2).sum(1).mean().view(1)


def _calibration_error(norm: str, s: State) -> Tensor:
    if s["y"].numel() == 0:
        return torch.full((1,), math.nan, dtype=torch.float64)
    return calibration_error(s["probs"], s["y"], ECE_BINS, norm).double().view(1)


for _name, _compute, _bounds in (("nll", _nll, (0, math.inf)), ("brier", _brier, (0, 2)), ("ece", functools.partial(_calibration_error, "l1"), (0, 1)),
                                 ("mce", functools.partial(_calibration_error, "max"), (0, 1))):
    register_metric(_name, ("classification",), _calibration_state, _compute, kind="uncertainty", gather=("probs", "y"), probabilistic=True,
                    bounds=_bounds)

UNCERTAINTY_SCORES = ("variance", "entropy", "maxprob")   # higher: more uncertain (maxprob scores 1 - max p)


def entropy(p: Tensor) -> Tensor:
    """The entropy of each row of class probabilities."""
    return -(p * torch.log(p.clamp_min(1e-300))).sum(-1)


def uncertainty_score(p: MetricInput, name: str) -> Tensor:
    """One score per row (higher: more uncertain): the latent ``variance`` (NaN where the
    method has none), the ``entropy`` of the class probabilities, or ``1 - max p``."""
    if name == "variance":
        return p.spread()[:, 0] if p.variance is not None else torch.full((p.y.numel(),), math.nan, dtype=torch.float64)
    if p.probs is None:
        return torch.full((p.y.numel(),), math.nan, dtype=torch.float64)
    return entropy(p.probs.double()) if name == "entropy" else 1 - p.probs.double().amax(1)


def misclassified(p: MetricInput) -> Tensor:
    """The one rule for a wrong prediction among the uncertainty metrics: the argmax of the class
    probabilities differs from the label (as ECE and MCE read them: :func:`calibration_error`
    takes the probabilities' argmax), or of the posterior mean where a method has no
    probabilities. The accuracy columns read the mean's argmax (the paper's); the two differ
    only where the probabilities reorder close classes."""
    scores = p.probs if p.probs is not None else p.mean[:, 0, :]
    return scores.argmax(1) != p.y


def _detection_state(score: str, p: MetricInput) -> State:
    positive = p.ood if p.ood is not None else misclassified(p)
    return {"scores": uncertainty_score(p, score).double(), "positive": positive.to(torch.int8)}


def _detection(kind: str, s: State) -> Tensor:
    positive = s["positive"].bool()
    n1 = int(positive.sum())
    if n1 == 0 or n1 == positive.numel() or not bool(torch.isfinite(s["scores"]).all()):
        return torch.full((1,), math.nan, dtype=torch.float64)
    fn = binary_auroc if kind == "auroc" else binary_average_precision
    return fn(s["scores"], positive).double().view(1)


for _score in UNCERTAINTY_SCORES:
    for _kind in ("auroc", "aupr"):
        register_metric(f"{_kind}_{_score}", ("classification",), functools.partial(_detection_state, _score), functools.partial(_detection, _kind),
                        kind="uncertainty",
                        gather=("scores", "positive"), probabilistic=True, bounds=(0, 1))


@dataclass
class Scores:
    """States of several metrics, by label (e.g. ``val``, ``test``, ``nlpd``), reduced together."""

    states: dict[str, State] = field(default_factory=dict)
    metrics: dict[str, Metric] = field(default_factory=dict)   # label -> its metric (sent along to workers)

    def add(self, label: str, metric: Metric, prediction: MetricInput) -> None:
        self.states[label] = metric.partial(prediction)
        self.metrics[label] = metric

    def merged(self, other: "Scores") -> "Scores":
        return Scores({label: self.metrics[label].combine(state, other.states[label]) for label, state in self.states.items()},
                      dict(self.metrics))

    def value(self, label: str) -> Tensor:
        return self.metrics[label].compute(self.states[label])


def merge_scores(*parts: Scores) -> Scores:
    out = parts[0]
    for part in parts[1:]:
        out = out.merged(part)
    return out


def macro_f1(predicted: Tensor, y: Tensor, num_classes: int) -> float:
    """The macro-averaged F1 of the class ids ``predicted`` against ``y``: the mean over classes of
    ``2 TP / (2 TP + FP + FN)``, a class with neither a prediction nor a node counting 0 (as
    scikit-learn's ``f1_score(average="macro", labels=range(C))``: FeatProp's protocol)."""
    predicted, y = predicted.cpu().long(), y.cpu().long()
    hits = torch.bincount(y[predicted == y], minlength=num_classes).double()
    said = torch.bincount(predicted, minlength=num_classes).double()
    true = torch.bincount(y, minlength=num_classes).double()
    denominator = said + true
    f1 = torch.where(denominator > 0, 2 * hits / denominator.clamp_min(1), torch.zeros_like(hits))
    return float(f1[:num_classes].mean())
