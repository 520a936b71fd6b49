"""Metrics of predictions: accuracy of the argmax (classification) and R^2 (regression), for
one prediction or a whole nugget grid of them at once."""
from __future__ import annotations

from torch import Tensor


def metric_name(task: str) -> str:
    """The metric reported for a task: ``accuracy`` (classification) or ``r2`` (regression)."""
    return "accuracy" if task == "classification" else "r2"


def metric(pred: Tensor, y: Tensor, task: str) -> float:
    """Accuracy of the argmax (classification) or R^2 (regression); NaN on an empty split."""
    if y.numel() == 0:  # e.g. no validation set under fit=mll
        return float("nan")
    return metric_curve(pred.reshape(pred.size(0), 1, -1), y, task)[0]


def metric_curve(preds: Tensor, y: Tensor, task: str) -> list[float]:
    """:func:`metric` of each of ``G`` predictions at once: ``preds`` is ``n x G x outputs``."""
    if y.numel() == 0:
        return [float("nan")] * preds.size(1)
    if task == "classification":
        return (preds.argmax(dim=2) == y[:, None]).double().mean(0).tolist()
    resid = ((preds[:, :, 0] - y[:, None].to(preds.dtype)) ** 2).double().sum(0)
    total = float(((y - y.mean()) ** 2).sum())
    return (1 - resid / total).tolist() if total > 0 else [float("nan")] * preds.size(1)
