"""The low-rank GP posterior on row blocks: the same posterior, nugget grid, validation choice,
metrics and uncertainty columns as :mod:`gnngp_cli.inference`, with nothing of ``N`` rows on
the client.

With ``Q_b`` the rows of block ``b`` and ``t`` its training rows, tree reductions give
``Q^T Q = sum_b Q_b[t]^T Q_b[t]`` and ``Q^T y = sum_b Q_b[t]^T y_b[t]`` (``r x r`` and
``r x outputs``), the mean diagonal ``sum_b ||Q_b||^2 / N`` (the nugget scale) and ``y^T y``.
The client decomposes ``Q^T Q = V w V^T`` once (:class:`~gnngp_cli.inference.LowRankPosterior`'s
numerics). Each block then predicts its own labelled rows and returns only sums: correct
predictions (or squared residuals and target moments) per nugget of the grid, and the sums of
the uncertainty columns; the client turns the sums into the same metrics.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..data.shards import TEST, TRAIN, VAL
from ..errors import KernelError
from ..inference import SPLITS, LowRankPosterior, Posterior, ValidationScore
from ..metrics import metric_name
from .graph import tree_reduce

BITS = {"train": TRAIN, "val": VAL, "test": TEST}
Z95 = 1.959963984540054


class RowBlockPosterior(LowRankPosterior):
    """:class:`LowRankPosterior` from the reduced ``Q^T Q`` and ``Q^T y``; ``features`` is set per
    row block by :meth:`on_rows` (the variance and the means are then the local formulas)."""

    def __init__(self, gram: Tensor, rhs: Tensor):
        Posterior.__init__(self, None, gram, rhs)

    def on_rows(self, q_b: Tensor) -> "RowBlockPosterior":
        out = copy.copy(self)
        out.features = q_b
        return out


def _targets(y_b: np.ndarray, task: str, num_classes: int, dtype: torch.dtype) -> Tensor:
    y = torch.from_numpy(np.asarray(y_b))
    if task == "classification":
        return torch.nn.functional.one_hot(y, num_classes).to(dtype)
    return y.to(dtype).view(-1, 1)


def _gram_part(q_b: np.ndarray, y_b: np.ndarray, mask_b: np.ndarray, task: str, num_classes: int) -> dict:
    q = torch.from_numpy(np.ascontiguousarray(q_b))
    train = torch.from_numpy(np.nonzero(np.asarray(mask_b) & TRAIN)[0])
    y = _targets(np.asarray(y_b)[train.numpy()], task, num_classes, q.dtype)
    qt = q[train]
    return {"gram": qt.T @ qt, "rhs": qt.T @ y, "yy": float((y * y).sum()), "n_train": int(train.numel()),
            "diag": float((q * q).sum().double())}


def _add(*parts: dict) -> dict:
    out = dict(parts[0])
    for p in parts[1:]:
        for key, value in p.items():
            out[key] = out[key] + value
    return out


def _split_sums(pred: Tensor, y: Tensor, task: str) -> Tensor:
    """Per prediction of a grid (``n x G x outputs``): correct counts (classification) or
    ``[squared residual]`` sums (regression), as float64 ``G``."""
    if task == "classification":
        return (pred.argmax(dim=2) == y[:, None]).double().sum(0)
    return ((pred[:, :, 0] - y[:, None].to(pred.dtype)) ** 2).double().sum(0)


def _moments(y: Tensor) -> Tensor:
    y = y.double()
    return torch.stack([torch.tensor(float(y.numel()), dtype=torch.float64), y.sum(), (y * y).sum()])


def _curve_part(q_b: np.ndarray, y_b: np.ndarray, mask_b: np.ndarray, post: RowBlockPosterior, nuggets: Tensor, task: str) -> dict:
    val = torch.from_numpy(np.nonzero(np.asarray(mask_b) & VAL)[0])
    y = torch.from_numpy(np.asarray(y_b))[val]
    if val.numel() == 0:
        return {"val": torch.zeros(nuggets.numel(), dtype=torch.float64), "val_moments": _moments(y)}
    p = post.on_rows(torch.from_numpy(np.ascontiguousarray(q_b)))
    return {"val": _split_sums(p.grid_means(val, nuggets), y, task), "val_moments": _moments(y)}


def _final_part(q_b: np.ndarray, y_b: np.ndarray, mask_b: np.ndarray, post: RowBlockPosterior, eps: Tensor, scale2: float, task: str) -> dict:
    mask = np.asarray(mask_b)
    p = post.on_rows(torch.from_numpy(np.ascontiguousarray(q_b)))
    y_all = torch.from_numpy(np.asarray(y_b))
    out = {}
    for key in SPLITS:
        rows = torch.from_numpy(np.nonzero(mask & BITS[key])[0])
        y = y_all[rows]
        mean = p.mean(rows, eps)
        out[key] = _split_sums(mean[:, None, :], y, task)
        out[f"{key}_moments"] = _moments(y)
        if key == "test":
            var = p.variance(rows, eps)
            if task == "classification":
                correct = mean.argmax(1) == y
                out["uncertainty"] = torch.tensor([float(var[correct].double().sum()), float(correct.sum()),
                                                   float(var[~correct].double().sum()), float((~correct).sum())], dtype=torch.float64)
            else:
                pred_var = scale2 * (var + eps)
                err = (mean.view(-1) - y) ** 2
                nlpd = 0.5 * (torch.log(2 * math.pi * pred_var) + err / pred_var)
                covered = (err <= (Z95 ** 2) * pred_var).double()
                out["uncertainty"] = torch.tensor([float(nlpd.double().sum()), float(covered.sum()), float(rows.numel())], dtype=torch.float64)
    return out


def _means_part(q_b: np.ndarray, mask_b: np.ndarray, post: RowBlockPosterior, eps: Tensor) -> np.ndarray:
    rows = torch.from_numpy(np.nonzero(np.asarray(mask_b) & (TRAIN | VAL | TEST))[0])
    return post.on_rows(torch.from_numpy(np.ascontiguousarray(q_b))).mean(rows, eps).numpy()


def _metric(sums: Tensor, moments: Tensor, task: str) -> Tensor:
    """The metric per grid value from the summed parts (as :func:`~gnngp_cli.metrics.metric_curve`)."""
    n = float(moments[0])
    if n == 0:
        return torch.full_like(sums, float("nan"))
    if task == "classification":
        return sums / n
    total = float(moments[2]) - float(moments[1]) ** 2 / n
    return 1 - sums / total if total > 0 else torch.full_like(sums, float("nan"))


@dataclass
class RowBlockResult:
    """What the runner reads from a GP result (as :class:`~gnngp_cli.inference.GPResult`)."""

    task: str
    metric_name: str
    nugget: float
    nugget_scale: float
    metrics: dict[str, float]
    val_curve: list[float]
    posterior: RowBlockPosterior
    eps: Tensor
    uncertainty: dict[str, float] = field(default_factory=dict)
    _blocks: Any = None

    @property
    def val(self) -> float:
        return self.metrics["val"]

    def means(self) -> np.ndarray:
        """Posterior means of the labelled nodes in node order, gathered to the client (for
        inspection and tests on graphs that fit; the run itself never gathers them). Read from
        the root's files: call it before the run that made it ends (its roots are then removed)."""
        import dask

        q, masks = self._blocks
        parts = [dask.delayed(_means_part)(q_b, m_b, self.posterior, self.eps) for q_b, m_b in zip(q.to_delayed().ravel(), masks.to_delayed().ravel())]
        return np.concatenate(dask.compute(*parts), axis=0)


def row_block_predict(root, labels, masks, task: str, num_classes: int, num_nodes: int, grid: Tensor,
                      validation_only: bool = False) -> Any:
    """Nugget-grid GP prediction from the row-blocked root ``root`` (``Q``, a Dask array chunked by
    row blocks and read three times: written to files, not computed, see :mod:`.store`),
    ``labels`` and ``masks`` (chunked alike). Returns a :class:`ValidationScore`
    (``validation_only``) or a :class:`RowBlockResult`."""
    import dask

    if root.numblocks[1] != 1:
        root = root.rechunk({1: -1})
    dtype = torch.float64 if root.dtype == np.float64 else torch.float32
    blocks = list(zip(root.to_delayed().ravel(), labels.to_delayed().ravel(), masks.to_delayed().ravel()))
    stats = tree_reduce([dask.delayed(_gram_part, pure=True)(q, y, m, task, num_classes) for q, y, m in blocks], _add).compute()
    scale = stats["diag"] / num_nodes
    if not scale > 0:
        raise KernelError("the kernel is zero on every node (mean variance 0); check the features and sigmas")
    post = RowBlockPosterior(stats["gram"], stats["rhs"])
    shared = dask.delayed(post, pure=True)
    nuggets = grid.to(dtype=dtype) * scale
    curve_parts = tree_reduce([dask.delayed(_curve_part, pure=True)(q, y, m, shared, nuggets, task) for q, y, m in blocks], _add).compute()
    val_curve = _metric(curve_parts["val"], curve_parts["val_moments"], task).tolist()
    curve = torch.tensor(val_curve, dtype=torch.float64).nan_to_num(nan=-math.inf)
    best = int(torch.argmax(curve))
    grid = grid.to(dtype=dtype)
    eps = grid[best] * scale
    if validation_only:
        return ValidationScore(float(curve[best]), float(grid[best]), val_curve, eps)
    scale2 = float("nan")
    if task == "regression":
        quad = (stats["yy"] - post.fitted(eps)) / eps
        scale2 = max(float(quad) / stats["n_train"], torch.finfo(torch.float64).tiny)
    final = tree_reduce([dask.delayed(_final_part, pure=True)(q, y, m, shared, eps, scale2, task) for q, y, m in blocks], _add).compute()
    metrics = {key: float(_metric(final[key], final[f"{key}_moments"], task)[0]) for key in SPLITS}
    uncertainty: dict[str, float] = {}
    u = final["uncertainty"]
    if task == "classification" and float(u[1] + u[3]) > 0:
        uncertainty = {"var_correct": float(u[0] / u[1]) if u[1] > 0 else float("nan"),
                       "var_wrong": float(u[2] / u[3]) if u[3] > 0 else float("nan")}
    elif task == "regression" and float(u[2]) > 0:
        uncertainty = {"nlpd": float(u[0] / u[2]), "coverage95": float(u[1] / u[2]), "output_scale": scale2}
    return RowBlockResult(task, metric_name(task), float(grid[best]), scale, metrics, val_curve, post, eps, uncertainty,
                          _blocks=(root, masks))
