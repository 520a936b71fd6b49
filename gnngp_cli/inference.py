"""GP regression over a grid of nuggets, from one eigendecomposition.

Classification regresses one-hot targets and predicts the argmax; regression uses ``y``.
With ``b`` the training nodes and ``*`` the predicted ones, for each nugget ``eps`` (a grid
value times the mean diagonal of ``K``):

- exact:    mean ``K[*, b] (K[b, b] + eps I)^-1 y_b``,
            variance ``diag K[*, *] - diag K[*, b] (K[b, b] + eps I)^-1 K[b, *]``;
- low rank: mean ``Q[*] (Q[b]^T Q[b] + eps I)^-1 Q[b]^T y_b``,
            variance ``eps diag Q[*] (Q[b]^T Q[b] + eps I)^-1 Q[*]^T``.

``K[b, b] = V diag(w) V^T`` (or ``Q[b]^T Q[b]``) is decomposed once. With ``F = K[*, b]``
(or ``Q[*]``), the means for every grid value are one product ``F (V [coef / (w + eps)]_eps)``;
the nugget with the best validation metric is chosen (the smallest one on ties), by the metric
that is reported (:mod:`.metrics`: accuracy, ROC-AUC of the positive-class score
``mean[:, 1] - mean[:, 0]`` for two classes, or R^2), all grid values at once. Variances
need ``F V`` and are computed only where asked for (the test nodes, for the uncertainty
metrics).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch import Tensor

from . import metrics
from .errors import KernelError
from .kernels.blocks import Kernel, psd_tolerance

SPLITS = ("train", "val", "test")


def log_grid(low: float, high: float, num: int, dtype=torch.float64, device=None) -> Tensor:
    """``num`` log-spaced values from ``low`` to ``high`` (nuggets relative to the mean diagonal,
    or base-kernel gammas)."""
    return torch.logspace(math.log10(low), math.log10(high), num, dtype=dtype, device=device)


def metric_name(task: str) -> str:
    """The default metric of a task: ``accuracy`` (classification) or ``r2`` (regression);
    two-class tasks default to ``roc_auc`` (:func:`~gnngp_cli.metrics.default_metric`)."""
    return "accuracy" if task == "classification" else "r2"


def _metric(name: str) -> str:
    """A metric name, or a task name standing for its default metric."""
    return {"classification": "accuracy", "regression": "r2"}.get(name, name)


def metric(pred: Tensor, y: Tensor, name: str) -> float:
    """Metric ``name`` (``accuracy``, ``roc_auc``, ``r2``, or a task for its default) of one prediction."""
    return metric_curve(pred.reshape(pred.size(0), 1, -1), y, name)[0]


def metric_curve(preds: Tensor, y: Tensor, name: str) -> list[float]:
    """:func:`metric` of each of ``G`` predictions at once: ``preds`` is ``n x G x outputs``."""
    return metrics.metric_curve(preds, y, _metric(name))


@dataclass
class ValidationScore:
    val: float
    nugget: float
    val_curve: list[float]


@dataclass
class GPResult:
    task: str
    metric_name: str
    nugget: float                      # chosen grid value (relative)
    nugget_scale: float                # mean diagonal of K
    metrics: dict[str, float]
    val_curve: list[float]
    mean: Tensor                       # posterior mean on every node in ``nodes``
    variance_at: Callable[[Tensor], Tensor]  # latent posterior variance at the chosen nugget, at positions in ``nodes``
    nodes: Tensor
    uncertainty: dict[str, float] = field(default_factory=dict)

    @property
    def variance(self) -> Tensor:
        """Latent posterior variance on every node in ``nodes``."""
        return self.variance_at(torch.arange(self.nodes.numel(), device=self.nodes.device))


def _targets(y: Tensor, task: str, num_classes: int, dtype) -> Tensor:
    if task == "classification":
        return torch.nn.functional.one_hot(y, num_classes).to(dtype)
    return y.to(dtype).view(-1, 1)


def gp_predict(
    kernel: Kernel,
    y: Tensor,
    masks: dict[str, Tensor],
    task: str,
    num_classes: int,
    grid: Tensor,
    low_rank: bool,
    diagonal: Optional[Tensor] = None,
    validation_only: bool = False,
    metric_name: Optional[str] = None,
) -> "GPResult | ValidationScore":
    """Posterior mean and variance on the train/val/test nodes for every nugget in ``grid``.

    ``kernel`` holds ``K`` on rows covering the labelled nodes and columns covering the training
    nodes. ``diagonal`` is ``diag K`` on every node of the graph (by default the kernel's own,
    over its rows); the grid is relative to its mean. With
    ``validation_only`` only the best validation metric and its nugget are computed (for
    searches over kernel hyperparameters). ``metric_name`` (default: the task's) scores the
    nuggets on validation and the result."""
    scored_by = _metric(metric_name or task)
    device = y.device
    labelled = masks["train"] | masks["val"] | masks["test"]
    nodes = labelled.nonzero().view(-1)
    train = masks["train"].nonzero().view(-1)
    pos_nodes, pos_train, col_train = kernel.positions(nodes), kernel.positions(train), kernel.col_positions(train)
    values = kernel.root if kernel.root is not None else kernel.matrix
    dtype = values.dtype
    y_train = _targets(y[train], task, num_classes, dtype)
    node_variances = kernel.diagonal()[pos_nodes] if diagonal is None else diagonal[nodes]
    scale = float((kernel.diagonal() if diagonal is None else diagonal).mean())
    if not scale > 0:
        raise KernelError("the kernel is zero on every node (mean variance 0); check the features and sigmas")
    grid = grid.to(device=device, dtype=dtype)

    use_root = kernel.root is not None and (low_rank or kernel.root.size(1) <= train.numel())
    if use_root:
        q_train = kernel.root[pos_train]
        gram = q_train.T @ q_train
        w, v = torch.linalg.eigh((gram + gram.T) / 2)
        coef = v.T @ (q_train.T @ y_train)             # V^T Q[b]^T y_b
        features = kernel.root                         # F = Q
    else:
        if kernel.root is not None:
            features = kernel.root @ kernel.root[pos_train].T
        else:
            every_column = kernel.matrix.size(1) == train.numel() and torch.equal(col_train, torch.arange(train.numel(), device=device))
            features = kernel.matrix if every_column else kernel.matrix[:, col_train]
        k_train = features[pos_train]
        w, v = torch.linalg.eigh((k_train + k_train.T) / 2)
        coef = v.T @ y_train                           # V^T y_b

    def rows(pos: Tensor) -> Tensor:                   # F[pos]
        return features if torch.equal(pos, torch.arange(features.size(0), device=device)) else features[pos]
    if not bool(torch.isfinite(w).all()):
        raise KernelError("the kernel on the training nodes has NaN or infinite entries; check the features and sigmas")
    top = float(w[-1].clamp_min(0))
    if float(w[0]) < -psd_tolerance(dtype, w.numel()) * max(top, torch.finfo(dtype).tiny):
        raise KernelError(f"final layer: the kernel on the training nodes is not positive semi-definite (eigenvalue {float(w[0]):.3g} vs largest {top:.3g}); use a positive semi-definite base kernel or dtype=float64")
    w = w.clamp_min(0)

    index = {key: (masks[key][nodes]).nonzero().view(-1) for key in SPLITS}
    y_nodes = y[nodes]
    inv_grid = 1.0 / (w[:, None] + grid[None, :] * scale)                         # rank x grid
    weights = v @ (coef[:, None, :] * inv_grid[:, :, None]).reshape(w.numel(), -1)  # V [coef / (w + eps)] for every eps
    val_means = (rows(pos_nodes[index["val"]]) @ weights).view(index["val"].numel(), grid.numel(), -1)
    val_curve = metric_curve(val_means, y_nodes[index["val"]], scored_by)
    curve = torch.tensor(val_curve, dtype=torch.float64).nan_to_num(nan=-math.inf)
    best = int(torch.argmax(curve))
    if validation_only:
        return ValidationScore(float(curve[best]), float(grid[best]), val_curve)
    eps = grid[best] * scale
    inv = 1.0 / (w + eps)
    mean = rows(pos_nodes) @ (v @ (coef * inv[:, None]))

    def variance_at(index: Tensor) -> Tensor:
        proj = rows(pos_nodes[index]) @ v              # F V
        explained = (proj * proj * inv).sum(1)
        return (eps * explained if use_root else node_variances[index] - explained).clamp_min(0)

    scores = {key: metric(mean[index[key]], y_nodes[index[key]], scored_by) for key in SPLITS}
    result = GPResult(
        task=task,
        metric_name=scored_by,
        nugget=float(grid[best]),
        nugget_scale=scale,
        metrics=scores,
        val_curve=val_curve,
        mean=mean,
        variance_at=variance_at,
        nodes=nodes,
    )
    if task == "regression":
        scale2 = output_scale(y_train, coef, inv, float(eps), use_root)
    else:
        scale2 = float("nan")
    result.uncertainty = uncertainty_metrics(result, y_nodes, index["test"], float(eps), scale2)
    return result


def output_scale(y_train: Tensor, coef: Tensor, inv: Tensor, eps: float, root_form: bool) -> float:
    """Maximum-likelihood output scale ``s^2 = y_b^T (K_bb + eps I)^-1 y_b / n_b``.

    Dense form (``coef = V^T y_b``): ``sum coef^2 / (w + eps)``. Root form (``coef = V^T Q_b^T y_b``),
    by Woodbury ``(Q Q^T + eps I)^-1 = (I - Q (Q^T Q + eps I)^-1 Q^T) / eps``:
    ``(y^T y - sum coef^2 / (w + eps)) / eps``.
    """
    fitted = float((coef * coef * inv[:, None]).sum())
    quad = (float((y_train * y_train).sum()) - fitted) / eps if root_form else fitted
    return max(quad / y_train.size(0), torch.finfo(torch.float64).tiny)


def uncertainty_metrics(result: GPResult, y_nodes: Tensor, test: Tensor, eps: float, scale2: float) -> dict[str, float]:
    """Regression: test negative log predictive density and 95% interval coverage, with
    predictive variance ``s^2 (var_f + eps)`` (``s^2`` from :func:`output_scale`).
    Classification: mean latent variance of correct and of wrong test predictions."""
    if test.numel() == 0:
        return {}
    var = result.variance_at(test)
    if result.task == "classification":
        correct = result.mean[test].argmax(1) == y_nodes[test]
        return {
            "var_correct": float(var[correct].mean()) if bool(correct.any()) else float("nan"),
            "var_wrong": float(var[~correct].mean()) if bool((~correct).any()) else float("nan"),
        }
    pred_var = scale2 * (var + eps)
    err = (result.mean[test].view(-1) - y_nodes[test]) ** 2
    nlpd = 0.5 * (torch.log(2 * math.pi * pred_var) + err / pred_var)
    coverage = (err <= (1.959963984540054 ** 2) * pred_var).double().mean()
    return {"nlpd": float(nlpd.mean()), "coverage95": float(coverage), "output_scale": scale2}
