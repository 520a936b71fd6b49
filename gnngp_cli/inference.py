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
the nugget with the best validation metric is chosen (the smallest one on ties). Variances
need ``F V`` and are computed only where asked for (the test nodes, for the uncertainty
metrics).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import Tensor

from .errors import KernelError
from . import runtime
from .kernels.numerics import psd_tolerance, symmetric_eigh
from .kernels.value import Kernel
from .metrics import metric, metric_curve
from .metrics import metric_name as task_metric

SPLITS = ("train", "val", "test")


def log_grid(low: float, high: float, num: int, dtype=torch.float64, device=None) -> Tensor:
    """``num`` log-spaced values from ``low`` to ``high`` (nuggets relative to the mean diagonal,
    or base-kernel gammas)."""
    return torch.logspace(math.log10(low), math.log10(high), num, dtype=dtype, device=device)


@dataclass
class ValidationScore:
    val: float
    nugget: float
    val_curve: list[float]
    eps: Optional[Tensor] = None       # the chosen nugget times the mean diagonal, in the kernel's dtype


def gram_eigh(gram: Tensor) -> tuple[Tensor, Tensor]:
    """``gram = V diag(w) V^T``. A Gram matrix whose columns are orthogonal to the round-off of
    their products (every ``|G_ij| <= eps sqrt(n) sqrt(G_ii G_jj)``) is diagonal, and its
    decomposition is its sorted diagonal: e.g. ``Q[b]^T Q[b]`` of a Nystrom root whose landmarks
    are the training nodes, ``sqrt(D) V^T V sqrt(D) = D`` (RBF-X on squirrel: largest such ratio
    1.5e-6 against 6e-6; it saved a 2,496 x 2,496 eigendecomposition per gamma of its search)."""
    n = gram.size(0)
    d = torch.diagonal(gram).detach()
    if n and bool((d >= 0).all()):
        scale = torch.where(d > 0, d.rsqrt(), torch.zeros((), dtype=d.dtype, device=d.device))
        off = (gram.detach() * scale[:, None] * scale[None, :]).abs()
        off.fill_diagonal_(0)
        if float(off.amax()) <= torch.finfo(gram.dtype).eps * math.sqrt(n):
            w, order = torch.sort(torch.diagonal(gram))
            return w, torch.eye(n, dtype=gram.dtype, device=gram.device)[:, order]
    return symmetric_eigh(gram)


class Posterior:
    """The GP posterior over a nugget grid, from one eigendecomposition of the training Gram
    matrix ``V diag(w) V^T``. With ``F`` the prediction features of the labelled nodes and
    ``coef`` the projected targets, the mean at nugget ``eps`` is ``F V (coef / (w + eps))``.
    The two strategies differ in what ``F``, the Gram matrix and the variance are."""

    def __init__(self, features: Tensor, gram: Tensor, coef_source: Tensor):
        w, v = gram_eigh(gram)
        if not bool(torch.isfinite(w).all()):
            raise KernelError("the kernel on the training nodes has NaN or infinite entries; check the features and sigmas")
        top = float(w[-1].clamp_min(0))
        if float(w[0]) < -psd_tolerance(w.dtype, w.numel()) * max(top, torch.finfo(w.dtype).tiny):
            raise KernelError(f"final layer: the kernel on the training nodes is not positive semi-definite (eigenvalue {float(w[0]):.3g} vs largest {top:.3g}); use a positive semi-definite base kernel or dtype=float64")
        self.features, self.w, self.v = features, w.clamp_min(0), v
        self.coef = v.T @ coef_source

    def rows(self, pos: Tensor) -> Tensor:
        """``F[pos]`` (no copy when ``pos`` is every row in order)."""
        f = self.features
        return f if pos.numel() == f.size(0) and torch.equal(pos, torch.arange(f.size(0), device=pos.device)) else f[pos]

    def grid_means(self, pos: Tensor, nuggets: Tensor) -> Tensor:
        """Means at the rows ``pos`` for every nugget at once: ``len(pos) x G x outputs``."""
        inv = 1.0 / (self.w[:, None] + nuggets[None, :])                                   # rank x G
        weights = self.v @ (self.coef[:, None, :] * inv[:, :, None]).reshape(self.w.numel(), -1)
        return (self.rows(pos) @ weights).view(pos.numel(), nuggets.numel(), self.coef.size(1))  # an empty set too (fit=mll)

    def mean(self, pos: Tensor, eps: float) -> Tensor:
        inv = 1.0 / (self.w + eps)
        return self.rows(pos) @ (self.v @ (self.coef * inv[:, None]))

    def explained(self, pos: Tensor, eps: float) -> Tensor:
        """``||F[pos] V (w + eps)^-1/2||^2`` per row; by row blocks past ``runtime.ROW_BLOCK_ENTRIES``
        (the variance of every node of a Reddit-sized GCNGP-X held three ``N x r`` temporaries)."""
        inv = 1.0 / (self.w + eps)
        if pos.numel() * self.w.numel() <= runtime.ROW_BLOCK_ENTRIES:
            proj = self.rows(pos) @ self.v
            return (proj * proj * inv).sum(1)
        out = self.features.new_empty(pos.numel())
        for start, stop in runtime.row_blocks(pos.numel(), self.w.numel()):
            proj = self.features[pos[start:stop]] @ self.v
            out[start:stop] = (proj * proj * inv).sum(1)
        return out

    def variance(self, pos: Tensor, eps: float) -> Tensor:
        """Latent posterior variance at the rows ``pos``."""
        raise NotImplementedError

    def output_scale(self, y_train: Tensor, eps: float) -> float:
        """Maximum-likelihood output scale ``s^2 = y_b^T (K_bb + eps I)^-1 y_b / n_b``."""
        raise NotImplementedError

    def fitted(self, eps: float) -> float:
        inv = 1.0 / (self.w + eps)
        return float((self.coef * self.coef * inv[:, None]).sum())


class ExactPosterior(Posterior):
    """Exact: ``F = K[*, b]``, ``K[b, b] = V w V^T``, ``coef = V^T y_b``;
    variance ``diag K[*, *] - diag F (K[b, b] + eps I)^-1 F^T``."""

    def __init__(self, features: Tensor, pos_train: Tensor, y_train: Tensor, node_variances: Tensor):
        super().__init__(features, features[pos_train], y_train)
        self.node_variances = node_variances

    def variance(self, pos, eps):
        return (self.node_variances[pos] - self.explained(pos, eps)).clamp_min(0)

    def output_scale(self, y_train, eps):
        return max(self.fitted(eps) / y_train.size(0), torch.finfo(torch.float64).tiny)


class LowRankPosterior(Posterior):
    """Low rank (``K = Q Q^T``): ``F = Q``, ``Q[b]^T Q[b] = V w V^T``, ``coef = V^T Q[b]^T y_b``;
    variance ``eps diag Q[*] (Q[b]^T Q[b] + eps I)^-1 Q[*]^T``."""

    def __init__(self, root: Tensor, pos_train: Tensor, y_train: Tensor):
        q_train = root[pos_train]
        super().__init__(root, q_train.T @ q_train, q_train.T @ y_train)

    def variance(self, pos, eps):
        return (eps * self.explained(pos, eps)).clamp_min(0)

    def output_scale(self, y_train, eps):
        """By Woodbury ``(Q Q^T + eps I)^-1 = (I - Q (Q^T Q + eps I)^-1 Q^T) / eps``:
        ``(y^T y - sum coef^2 / (w + eps)) / eps``."""
        quad = (float((y_train * y_train).sum()) - self.fitted(eps)) / eps
        return max(quad / y_train.size(0), torch.finfo(torch.float64).tiny)


def posterior(kernel: Kernel, train: Tensor, y_train: Tensor, node_variances: Tensor, low_rank: bool) -> Posterior:
    """The strategy for ``kernel``: low rank when it is a root of rank at most the training
    set's size (always for the Nystrom kernels), else exact on ``K[labelled, training]``."""
    pos_train = kernel.positions(train)
    if kernel.root is not None and (low_rank or kernel.root.size(1) <= train.numel()):
        return LowRankPosterior(kernel.root, pos_train, y_train)
    if kernel.root is not None:
        features = kernel.root @ kernel.root[pos_train].T
    else:
        col_train = kernel.col_positions(train)
        every_column = kernel.matrix.size(1) == train.numel() and torch.equal(col_train, torch.arange(train.numel(), device=col_train.device))
        features = kernel.matrix if every_column else kernel.matrix[:, col_train]
    return ExactPosterior(features, pos_train, y_train, node_variances)


@dataclass
class GPResult:
    task: str
    metric_name: str
    nugget: float                      # chosen grid value (relative)
    nugget_scale: float                # mean diagonal of K
    metrics: dict[str, float]
    val_curve: list[float]
    mean: Tensor                       # posterior mean on every node in ``nodes``
    nodes: Tensor
    posterior: Posterior
    positions: Tensor                  # rows of ``nodes`` in the posterior's features
    eps: Tensor                        # the absolute nugget: ``nugget * nugget_scale``
    uncertainty: dict[str, float] = field(default_factory=dict)

    def variance_at(self, index: Tensor) -> Tensor:
        """Latent posterior variance at the chosen nugget, at positions ``index`` in ``nodes``."""
        return self.posterior.variance(self.positions[index], self.eps)

    @property
    def variance(self) -> Tensor:
        """Latent posterior variance on every node in ``nodes``."""
        return self.variance_at(torch.arange(self.nodes.numel(), device=self.nodes.device))


def _targets(y: Tensor, task: str, num_classes: int, dtype) -> Tensor:
    if task == "classification":
        return torch.nn.functional.one_hot(y, num_classes).to(dtype)
    return y.to(dtype).view(-1, 1)


@dataclass
class _Problem:
    """The labelled nodes, their split indices and the posterior for one kernel."""

    nodes: Tensor
    positions: Tensor
    index: dict
    y_nodes: Tensor
    y_train: Tensor
    scale: float
    posterior: Posterior


def _problem(kernel: Kernel, y: Tensor, masks: dict[str, Tensor], task: str, num_classes: int,
             low_rank: bool, diagonal: Optional[Tensor]) -> _Problem:
    labelled = masks["train"] | masks["val"] | masks["test"]
    nodes = labelled.nonzero().view(-1)
    train = masks["train"].nonzero().view(-1)
    values = kernel.root if kernel.root is not None else kernel.matrix
    y_train = _targets(y[train], task, num_classes, values.dtype)
    positions = kernel.positions(nodes)
    node_variances = kernel.diagonal()[positions] if diagonal is None else diagonal[nodes]
    scale = float((kernel.diagonal() if diagonal is None else diagonal).mean())
    if not scale > 0:
        raise KernelError("the kernel is zero on every node (mean variance 0); check the features and sigmas")
    # the exact posterior's variances are indexed by position in ``nodes``
    post = posterior(kernel, train, y_train, _by_row(node_variances, positions, kernel), low_rank)
    index = {key: (masks[key][nodes]).nonzero().view(-1) for key in SPLITS}
    return _Problem(nodes, positions, index, y[nodes], y_train, scale, post)


def _by_row(node_variances: Tensor, positions: Tensor, kernel: Kernel) -> Tensor:
    """``diag K`` of the labelled nodes laid out by the kernel's rows (rows of no labelled node: 0)."""
    out = node_variances.new_zeros(kernel.size)
    out[positions] = node_variances
    return out


def _choose_nugget(p: _Problem, task: str, grid: Tensor) -> ValidationScore:
    """The nugget with the best validation metric (the smallest one on ties); ``task`` is the
    task or the metric to score by (:mod:`.metrics`)."""
    grid = grid.to(device=p.nodes.device, dtype=p.y_train.dtype)
    val = p.index["val"]
    val_curve = metric_curve(p.posterior.grid_means(p.positions[val], grid * p.scale), p.y_nodes[val], task)
    curve = torch.tensor(val_curve, dtype=torch.float64).nan_to_num(nan=-math.inf)
    best = int(torch.argmax(curve))
    return ValidationScore(float(curve[best]), float(grid[best]), val_curve, grid[best] * p.scale)


def validation_score(kernel: Kernel, y: Tensor, masks: dict[str, Tensor], task: str, num_classes: int,
                     grid: Tensor, low_rank: bool, diagonal: Optional[Tensor] = None,
                     metric_name: Optional[str] = None) -> ValidationScore:
    """The best validation metric over the nugget grid and its nugget (for searches over kernel
    hyperparameters): the means on the validation nodes only."""
    return _choose_nugget(_problem(kernel, y, masks, task, num_classes, low_rank, diagonal), metric_name or task, grid)


def gp_predict(
    kernel: Kernel,
    y: Tensor,
    masks: dict[str, Tensor],
    task: str,
    num_classes: int,
    grid: Tensor,
    low_rank: bool,
    diagonal: Optional[Tensor] = None,
    metric_name: Optional[str] = None,
) -> GPResult:
    """Posterior mean and variance on the train/val/test nodes at the nugget of ``grid`` with
    the best validation metric.

    ``kernel`` holds ``K`` on rows covering the labelled nodes and columns covering the training
    nodes. ``diagonal`` is ``diag K`` on every node of the graph (by default the kernel's own,
    over its rows); the grid is relative to its mean. ``metric_name`` (default: the task's)
    scores the nuggets on validation and the result: accuracy, ROC-AUC of the positive-class
    score ``mean[:, 1] - mean[:, 0]`` for two classes, or R^2 (:mod:`.metrics`)."""
    scored_by = task_metric(metric_name or task)
    p = _problem(kernel, y, masks, task, num_classes, low_rank, diagonal)
    score = _choose_nugget(p, scored_by, grid)
    eps = score.eps
    mean = p.posterior.mean(p.positions, eps)
    metrics = {key: metric(mean[p.index[key]], p.y_nodes[p.index[key]], scored_by) for key in SPLITS}
    result = GPResult(task=task, metric_name=scored_by, nugget=score.nugget, nugget_scale=p.scale, metrics=metrics,
                      val_curve=score.val_curve, mean=mean, nodes=p.nodes, posterior=p.posterior, positions=p.positions, eps=eps)
    scale2 = p.posterior.output_scale(p.y_train, float(eps)) if task == "regression" else float("nan")
    result.uncertainty = uncertainty_metrics(result, p.y_nodes, p.index["test"], float(eps), scale2)
    return result


def uncertainty_metrics(result: GPResult, y_nodes: Tensor, test: Tensor, eps: float, scale2: float) -> dict[str, float]:
    """Regression: test negative log predictive density and 95% interval coverage, with
    predictive variance ``s^2 (var_f + eps)`` (``s^2`` from :meth:`Posterior.output_scale`).
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
