"""Evaluation metrics, each computed for ``G`` predictions at once (one per nugget of a grid).

- ``accuracy``: the share of nodes whose argmax output is their class;
- ``roc_auc`` (two-class tasks): the area under the ROC curve of the positive-class score
  ``s = out[:, 1] - out[:, 0]`` (for the GP: the posterior mean of the one-hot regression, class 1
  minus class 0; for a GNN: the logit difference, which ranks nodes as the softmax does). By
  the Mann-Whitney identity, with ``R_i`` the rank of ``s_i`` among all scores (ties get the
  average of their ranks, as scikit-learn's ``roc_auc_score``), ``n1`` positives and ``n0``
  negatives: ``AUC = (sum_{y_i = 1} R_i - n1 (n1 + 1) / 2) / (n1 n0)``;
- ``r2`` (regression): ``1 - sum (y - f)^2 / sum (y - mean y)^2``.

The metric of a dataset is ``roc_auc`` for a two-class task, ``accuracy`` for more classes and
``r2`` for regression, unless ``dataset.metric`` says otherwise (:func:`resolve_metric`).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .errors import ConfigError

METRICS = ("accuracy", "roc_auc", "r2")


def default_metric(task: str, num_classes: int) -> str:
    if task == "regression":
        return "r2"
    return "roc_auc" if num_classes == 2 else "accuracy"


def resolve_metric(requested: Optional[str], task: str, num_classes: int, dataset: str) -> str:
    """The metric to report and to choose nuggets by: ``requested`` if it fits the task, else
    a one-line :class:`ConfigError`; ``None`` gives :func:`default_metric`."""
    if requested is None:
        return default_metric(task, num_classes)
    if requested == "roc_auc" and (task != "classification" or num_classes != 2):
        kind = "a regression task" if task != "classification" else f"a {num_classes}-class task"
        raise ConfigError(f"dataset.metric=roc_auc needs a two-class task but {dataset} is {kind}; use dataset.metric={default_metric(task, num_classes)}")
    if requested == "accuracy" and task != "classification":
        raise ConfigError(f"dataset.metric=accuracy needs a classification task but {dataset} is a regression task; use dataset.metric=r2")
    if requested == "r2" and task != "regression":
        raise ConfigError(f"dataset.metric=r2 needs a regression task but {dataset} is a classification task; use dataset.metric={default_metric(task, num_classes)} (or dataset.task=regression for a custom dataset)")
    return requested


def average_ranks(scores: Tensor) -> Tensor:
    """1-based ranks of each column of ``scores`` (n x G) along the nodes; tied scores share
    the average of the ranks they span."""
    n = scores.size(0)
    ordered, order = torch.sort(scores, dim=0, stable=True)
    position = torch.arange(n, device=scores.device)[:, None].expand_as(ordered)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    ends = torch.ones_like(starts)
    ends[:-1] = starts[1:]
    first = torch.cummax(torch.where(starts, position, torch.zeros_like(position)), dim=0).values
    last = n - 1 - torch.cummax(torch.where(ends, n - 1 - position, torch.zeros_like(position)).flip(0), dim=0).values.flip(0)
    ranks = torch.empty_like(scores, dtype=torch.float64)
    ranks.scatter_(0, order, (first + last).double() / 2 + 1)
    return ranks


def roc_auc_curve(scores: Tensor, positive: Tensor) -> list[float]:
    """ROC-AUC of each column of ``scores`` (n x G) for the boolean labels ``positive``
    (``nan`` when one class is absent)."""
    positive = positive.bool()
    n1 = int(positive.sum())
    n0 = positive.numel() - n1
    if n1 == 0 or n0 == 0:
        return [float("nan")] * scores.size(1)
    ranks = average_ranks(scores)
    return ((ranks[positive].sum(0) - n1 * (n1 + 1) / 2) / (n1 * n0)).tolist()


def roc_auc(scores: Tensor, positive: Tensor) -> float:
    """ROC-AUC of one score vector (see :func:`roc_auc_curve`)."""
    return roc_auc_curve(scores.reshape(-1, 1), positive.reshape(-1))[0]


def positive_score(outputs: Tensor) -> Tensor:
    """The positive-class score of two-class outputs (``... x 2``): ``out[..., 1] - out[..., 0]``."""
    if outputs.size(-1) != 2:
        raise ConfigError(f"roc_auc needs two outputs per node (a two-class task), got {outputs.size(-1)}; use dataset.metric=accuracy")
    return outputs[..., 1] - outputs[..., 0]


TASK_METRICS = {"classification": "accuracy", "regression": "r2"}


def metric_name(task: str) -> str:
    """The metric a task reports when no other is chosen: ``accuracy`` or ``r2`` (the dataset's
    own choice, e.g. ``roc_auc`` for two classes, is :func:`resolve_metric`'s)."""
    return TASK_METRICS.get(task, task)


def metric(pred: Tensor, y: Tensor, name: str) -> float:
    """Metric ``name`` (or a task, for its metric) of one prediction; NaN on an empty split."""
    if y.numel() == 0:  # e.g. no validation set under fit=mll
        return float("nan")
    return metric_curve(pred.reshape(pred.size(0), 1, -1), y, name)[0]


def metric_curve(preds: Tensor, y: Tensor, name: str) -> list[float]:
    """Metric ``name`` (or a task, for its metric) of each of ``G`` predictions at once:
    ``preds`` is ``n x G x outputs``."""
    name = metric_name(name)
    if y.numel() == 0:
        return [float("nan")] * preds.size(1)
    if name == "accuracy":
        return (preds.argmax(dim=2) == y[:, None]).double().mean(0).tolist()
    if name == "roc_auc":
        return roc_auc_curve(positive_score(preds), y == 1)
    if name != "r2":
        raise ConfigError(f"unknown metric {name!r}; use one of {', '.join(METRICS)}")
    if bool(y.max() == y.min()):  # constant targets: R^2 is undefined. Tested on the values, not on
        return [float("nan")] * preds.size(1)   # sum (y - mean)^2 > 0: the rounded mean leaves ~1e-15 there
    resid = ((preds[:, :, 0] - y[:, None].to(preds.dtype)) ** 2).double().sum(0)
    y = y.double()
    total = float(((y - y.mean()) ** 2).sum())
    return (1 - resid / total).tolist()
