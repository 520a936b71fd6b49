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
import math
import operator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from .. import runtime
from ..errors import KernelError
from ..kernels.numerics import psd_tolerance, symmetric_eigh
from ..metrics import Metric, MetricInput, Scores, merge_scores

SPLITS = ("train", "val", "test")


def log_grid(low: float, high: float, num: int, dtype=torch.float64, device=None) -> Tensor:
    """``num`` log-spaced values from ``low`` to ``high`` (nuggets relative to the mean diagonal,
    or base-kernel gammas)."""
    return torch.logspace(math.log10(low), math.log10(high), num, dtype=dtype, device=device)


def regression_targets(y: Tensor, task: str, num_classes: int, dtype: torch.dtype) -> Tensor:
    """``Y``: one-hot columns (classification; the paper regresses them) or ``y`` as one column."""
    if task == "classification":
        return torch.nn.functional.one_hot(y, num_classes).to(dtype)
    return y.to(dtype).view(-1, 1)


@dataclass(frozen=True)
class TrainingStatistics:
    """What the posterior needs, reduced over row groups (see the module docstring).
    ``strategy``: ``exact`` (``gram = K[b, b]``, ``rhs = y_b``) or ``low_rank``
    (``gram = Q[b]^T Q[b]``, ``rhs = Q[b]^T y_b``)."""

    strategy: str
    gram: Tensor
    rhs: Tensor
    yy: float
    n_train: int
    diagonal_sum: float
    num_nodes: int
    class_grams: Optional[Tensor] = None   # low rank, per-class likelihoods: ``Q[b, c]^T Q[b, c]`` of each class's training rows (C x r x r)
    column_sum: Optional[Tensor] = None    # ... and ``Q[b]^T 1``
    cross: Optional[Tensor] = None         # a tangent kernel's NNGP ``K`` on the training rows (the covariance along training time):
                                           # exact ``K[b, b]``; low rank ``P[b]^T Q[b]`` (``Theta = P P^T``, ``K = Q Q^T``)

    @property
    def scale(self) -> float:
        """The mean of ``diag K`` over every node: the nugget grid is relative to it."""
        return self.diagonal_sum / self.num_nodes

    def __add__(self, other: "TrainingStatistics") -> "TrainingStatistics":
        """Two row groups' statistics as one (low rank: the Gram matrices of disjoint rows add)."""
        return replace(self, gram=self.gram + other.gram, rhs=self.rhs + other.rhs, yy=self.yy + other.yy,
                       n_train=self.n_train + other.n_train, diagonal_sum=self.diagonal_sum + other.diagonal_sum,
                       class_grams=None if self.class_grams is None else self.class_grams + other.class_grams,
                       column_sum=None if self.column_sum is None else self.column_sum + other.column_sum,
                       cross=None if self.cross is None else self.cross + other.cross)


def low_rank_statistics(q: Tensor, train: Tensor, y_train: Tensor, num_nodes: int, diagonal_sum: Optional[float] = None,
                        per_class: bool = False, nngp: Optional[Tensor] = None) -> TrainingStatistics:
    """The statistics of a root ``Q`` held on some rows (``train``: the training rows among them,
    ``y_train`` their targets); ``num_nodes``: the graph's node count; ``diagonal_sum``: the sum
    of ``diag K`` where the caller has it (default: over ``Q``'s rows, ``||Q||^2``); with
    ``per_class`` (one-hot ``y_train``), each class's Gram matrix and ``Q[b]^T 1`` too; with
    ``nngp`` (the NNGP kernel's root on the same rows, ``q`` a tangent kernel's), their cross Gram matrix."""
    q_train = q[train]
    if diagonal_sum is None:
        diagonal_sum = float((q * q).sum().double())
    class_grams = column_sum = None
    if per_class:
        own = y_train > 0
        class_grams = torch.stack([q_train[own[:, c]].T @ q_train[own[:, c]] for c in range(y_train.size(1))])
        column_sum = q_train.sum(0)
    return TrainingStatistics("low_rank", q_train.T @ q_train, q_train.T @ y_train, float((y_train * y_train).sum()),
                              int(train.numel()), diagonal_sum, num_nodes, class_grams, column_sum,
                              None if nngp is None else q_train.T @ nngp[train])


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


@dataclass(frozen=True)
class TrainingTimes:
    """Predictions along training time (``inference.time``), in place of a nugget: the mean of
    the infinitely wide network trained by full-batch gradient flow on the MSE loss
    ``1/(2 n_b) sum_b ||f_b - y_b||^2`` with learning rate ``eta`` for time ``t`` (Jacot et al. 2018;
    Lee et al. 2019). neural-tangents' ``predict.gradient_descent_mse`` divides the loss by
    ``n_b x outputs`` instead: its time ``t`` is ours times the number of outputs. With the tangent kernel
    ``Theta`` (``kernel.limit=ntk``) and the prior mean 0,

        f_t(*) = Theta[*, b] Theta[b, b]^-1 (I - exp(-eta t Theta[b, b] / n_b)) y_b,

    the posterior mean with the spectral filter ``phi_t(w) = (1 - exp(-rate t w)) / w``
    (``rate = eta / n_b``; ``rate t`` at ``w = 0``) on the eigenvalues ``w`` that the nugget grid
    decomposes anyway (low rank: those of ``Q[b]^T Q[b]``, the nonzero ones of ``Q[b] Q[b]^T``).
    ``t = inf`` is kernel regression, ``phi = 1 / w`` (0 on the null space: eigenvalues below
    round-off of the largest). ``times``: one value (0-dimensional) or a grid."""

    times: Tensor
    rate: float

    def __getitem__(self, index) -> "TrainingTimes":
        return TrainingTimes(self.times[index], self.rate)

    def numel(self) -> int:
        return self.times.numel()

    def filter(self, w: Tensor) -> Tensor:
        """``phi_t(w)``: ``rank`` values for one time, ``rank x G`` for a grid."""
        t = self.times.to(device=w.device, dtype=w.dtype)
        ws, ts = (w[:, None], t[None, :]) if t.dim() else (w, t)
        cutoff = psd_tolerance(w.dtype, w.numel()) * float(w.max().clamp_min(0)) if w.numel() else 0.0
        positive, finite = ws > cutoff, torch.isfinite(ts)
        safe_w = torch.where(positive, ws, 1.0)
        finite_t = torch.where(finite, ts, 0.0)
        on_range = torch.where(finite, -torch.expm1(-self.rate * finite_t * safe_w) / safe_w, 1 / safe_w)   # 1/w at t = inf
        on_null = self.rate * finite_t                                                                   # 0 at t = inf
        return torch.where(positive, on_range, on_null)


def spectral_filter(w: Tensor, eps) -> Tensor:
    """``phi(w)`` on the Gram matrix's eigenvalues: ``1 / (w + eps)`` for a nugget (a grid of them:
    ``rank x G``), or a training time's filter (:class:`TrainingTimes`)."""
    if isinstance(eps, TrainingTimes):
        return eps.filter(w)
    return 1.0 / (w[:, None] + eps[None, :]) if eps.dim() else 1.0 / (w + eps)


def _rows(features: Tensor, pos: Tensor) -> Tensor:
    """``features[pos]`` (no copy when ``pos`` is every row in order)."""
    every = pos.numel() == features.size(0) and torch.equal(pos, torch.arange(features.size(0), device=pos.device))
    return features if every else features[pos]


class Posterior:
    """The GP posterior over a nugget grid, from one eigendecomposition of the training Gram
    matrix ``V diag(w) V^T`` and ``coef = V^T rhs``: at nugget ``eps`` the mean of rows with
    prediction features ``F`` is ``F V (coef / (w + eps))``. The two strategies differ in what
    ``F``, the Gram matrix and the variance are. A posterior holds no rows: the same object
    predicts every row group (on Dask it is sent to the workers once)."""

    def __init__(self, stats: TrainingStatistics):
        w, v = gram_eigh(stats.gram)
        if not bool(torch.isfinite(w).all()):
            raise KernelError("the kernel on the training nodes has NaN or infinite entries; check the features and sigmas")
        top = float(w[-1].clamp_min(0))
        if float(w[0]) < -psd_tolerance(w.dtype, w.numel()) * max(top, torch.finfo(w.dtype).tiny):
            raise KernelError(f"final layer: the kernel on the training nodes is not positive semi-definite (eigenvalue {float(w[0]):.3g} vs largest {top:.3g}); use a positive semi-definite base kernel or dtype=float64")
        self.w, self.v = w.clamp_min(0), v
        self.coef = v.T @ stats.rhs
        self.yy, self.n_train = stats.yy, stats.n_train
        self.cross = self.project_cross(stats.cross)

    @staticmethod
    def quadratic_and_logdet(values: Tensor, y: Tensor, nu: Tensor) -> tuple[Tensor, Tensor]:
        """``(tr(Y^T (K_bb + nu I)^-1 Y), log|K_bb + nu I|)`` in float64 at one nugget ``nu``,
        differentiably (the marginal likelihood's solve, :mod:`.mll`): ``values`` is what this
        strategy reads of the training rows (``K_bb``, or the root ``Q_b``)."""
        raise NotImplementedError

    def project_cross(self, cross: Optional[Tensor]) -> Optional[Tensor]:
        """The NNGP kernel's training block in the Gram matrix's eigenbasis, for the covariance
        along training time (``None``: the NNGP is the kernel itself)."""
        return None

    def grid_means(self, features: Tensor, pos: Tensor, nuggets: Tensor) -> Tensor:
        """Means at the rows ``pos`` of ``features`` for every nugget at once: ``len(pos) x G x outputs``."""
        inv = spectral_filter(self.w, nuggets)                                              # rank x G
        weights = self.v @ (self.coef[:, None, :] * inv[:, :, None]).reshape(self.w.numel(), -1)
        return (_rows(features, pos) @ weights).view(pos.numel(), nuggets.numel(), self.coef.size(1))  # an empty set too (fit=mll)

    def mean(self, features: Tensor, pos: Tensor, eps: Tensor) -> Tensor:
        inv = spectral_filter(self.w, eps)
        return _rows(features, pos) @ (self.v @ (self.coef * inv[:, None]))

    def explained(self, features: Tensor, pos: Tensor, eps: Tensor) -> Tensor:
        """``||F[pos] V (w + eps)^-1/2||^2`` per row; by row blocks past ``runtime.ROW_BLOCK_ENTRIES``
        (the variance of every node of a Reddit-sized GCNGP-X held three ``N x r`` temporaries)."""
        inv = 1.0 / (self.w + eps)

        def rows(at: Tensor) -> Tensor:
            proj = _rows(features, at) @ self.v
            return (proj * proj * inv).sum(1)

        return self._by_row_blocks(pos, self.w.numel(), rows, features)

    def variance(self, features: Tensor, pos: Tensor, eps: Tensor, prior: Optional[Tensor]) -> Tensor:
        """Latent posterior variance at the rows ``pos`` (``prior``: ``diag K`` there, exact only)."""
        raise NotImplementedError

    def time_variance(self, features: Tensor, nngp: Optional[Tensor], pos: Tensor, times: TrainingTimes, prior: Optional[Tensor]) -> Tensor:
        """The variance at the rows ``pos`` of the infinitely wide network's output after training
        time ``times`` (one time), over its random initialisation (Lee et al. 2019, eq. 16): with
        ``A = Theta[b, b]^-1 (I - exp(-eta t Theta[b, b] / n_b)) = V phi_t(w) V^T``,

            diag K[*, *] - 2 diag K[*, b] A Theta[b, *] + diag Theta[*, b] A K[b, b] A Theta[b, *].

        ``features`` are the tangent kernel's rows, ``nngp`` the NNGP kernel's rows read the same
        way (``None``: the kernel is the NNGP, whose last layer alone trains: ``Theta = K``);
        ``prior``: ``diag K`` at ``pos`` (exact only). By row blocks, as :meth:`explained`."""
        raise NotImplementedError

    def _by_row_blocks(self, pos: Tensor, width: int, fn: Callable[[Tensor], Tensor], like: Tensor) -> Tensor:
        """``fn(rows)`` per row of ``pos``, by row blocks past ``runtime.ROW_BLOCK_ENTRIES`` entries of ``width``."""
        if pos.numel() * width <= runtime.ROW_BLOCK_ENTRIES:
            return fn(pos)
        out = like.new_empty(pos.numel())
        for start, stop in runtime.row_blocks(pos.numel(), width):
            out[start:stop] = fn(pos[start:stop])
        return out

    def output_scale(self, eps: Tensor) -> float:
        """Maximum-likelihood output scale ``s^2 = y_b^T (K_bb + eps I)^-1 y_b / n_b``."""
        raise NotImplementedError

    def fitted(self, eps: Tensor) -> float:
        inv = 1.0 / (self.w + eps)
        return float((self.coef * self.coef * inv[:, None]).sum())


class ExactPosterior(Posterior):
    """Exact: ``F = K[*, b]``, ``K[b, b] = V w V^T``, ``coef = V^T y_b``;
    variance ``diag K[*, *] - diag F (K[b, b] + eps I)^-1 F^T``."""

    @staticmethod
    def quadratic_and_logdet(values, y, nu):
        """``K_bb + nu I = L L^T`` (Cholesky): ``|L^-1 Y|^2`` and ``2 sum log diag L``."""
        n = y.size(0)
        y = y.to(device=values.device, dtype=torch.float64)
        k = values.double()
        k = (k + k.T) / 2 + nu * torch.eye(n, dtype=k.dtype, device=k.device)
        chol, info = torch.linalg.cholesky_ex(k)
        if int(info):
            raise KernelError("K_bb + nu I is not positive definite")
        alpha = torch.linalg.solve_triangular(chol, y, upper=False)
        return (alpha * alpha).sum(), 2 * torch.log(torch.diagonal(chol)).sum()

    def variance(self, features, pos, eps, prior):
        return (prior - self.explained(features, pos, eps)).clamp_min(0)

    def project_cross(self, cross):
        return None if cross is None else self.v.T @ cross @ self.v   # V^T K[b, b] V

    def time_variance(self, features, nngp, pos, times, prior):
        phi = times.filter(self.w)

        def rows(at: Tensor) -> Tensor:
            proj = _rows(features, at) @ self.v
            b = proj * phi                                     # Theta[*, b] A in the eigenbasis
            if nngp is None:                                   # K = Theta: V^T K[b, b] V = diag(w)
                return (proj * b).sum(1).mul(-2) + (b * b * self.w).sum(1)
            h = _rows(nngp, at) @ self.v                       # K[*, b] V
            return (h * b).sum(1).mul(-2) + ((b @ self.cross) * b).sum(1)

        return (prior + self._by_row_blocks(pos, self.w.numel(), rows, features)).clamp_min(0)

    def output_scale(self, eps):
        return max(self.fitted(eps) / self.n_train, torch.finfo(torch.float64).tiny)


class LowRankPosterior(Posterior):
    """Low rank (``K = Q Q^T``): ``F = Q``, ``Q[b]^T Q[b] = V w V^T``, ``coef = V^T Q[b]^T y_b``;
    variance ``eps diag Q[*] (Q[b]^T Q[b] + eps I)^-1 Q[*]^T``."""

    @staticmethod
    def quadratic_and_logdet(values, y, nu):
        """Woodbury and the determinant lemma on ``Q_b^T Q_b + nu I = L L^T`` (``r x r``):
        ``(|Y|^2 - |L^-1 Q_b^T Y|^2) / nu`` and ``(n - r) log nu + 2 sum log diag L``."""
        n = y.size(0)
        y = y.to(device=values.device, dtype=torch.float64)
        q = values.double()
        r = q.size(1)
        m = q.T @ q + nu * torch.eye(r, dtype=q.dtype, device=q.device)
        chol, info = torch.linalg.cholesky_ex(m)
        if int(info):
            raise KernelError("Q_b^T Q_b + nu I is not positive definite")
        projected = torch.linalg.solve_triangular(chol, q.T @ y, upper=False)   # L^-1 Q_b^T Y
        return ((y * y).sum() - (projected * projected).sum()) / nu, (n - r) * torch.log(nu) + 2 * torch.log(torch.diagonal(chol)).sum()

    def variance(self, features, pos, eps, prior):
        return (eps * self.explained(features, pos, eps)).clamp_min(0)

    def project_cross(self, cross):
        return None if cross is None else self.v.T @ cross   # V^T P[b]^T Q[b]

    def time_variance(self, features, nngp, pos, times, prior):
        """With ``Theta = P P^T`` and ``K = Q Q^T``, ``||Q[*] - P[*] V phi V^T P[b]^T Q[b]||^2`` per row
        (for the NNGP, ``Q = P``: ``||P[*] V (1 - w phi)||^2``, which vanishes at ``t = inf`` where the
        rank-``r`` kernel is pinned by at least ``r`` training nodes)."""
        phi = times.filter(self.w)

        def rows(at: Tensor) -> Tensor:
            proj = _rows(features, at) @ self.v
            if nngp is None:
                return (proj * (1 - self.w * phi)).square().sum(1)
            return (_rows(nngp, at) - (proj * phi) @ self.cross).square().sum(1)

        return self._by_row_blocks(pos, self.w.numel() + (0 if nngp is None else nngp.size(1)), rows, features)

    def output_scale(self, eps):
        """By Woodbury ``(Q Q^T + eps I)^-1 = (I - Q (Q^T Q + eps I)^-1 Q^T) / eps``:
        ``(y^T y - sum coef^2 / (w + eps)) / eps``."""
        quad = (self.yy - self.fitted(eps)) / float(eps)
        return max(quad / self.n_train, torch.finfo(torch.float64).tiny)


def strategy_of(kernel: Any, n_train: int, low_rank: bool) -> type[Posterior]:
    """The strategy of a kernel held on the training rows: low rank for a root of a low-rank
    kernel, or of fewer columns than rows (Woodbury is then the cheaper solve); else exact."""
    root = getattr(kernel, "root", None)
    return LowRankPosterior if root is not None and (low_rank or root.size(1) < n_train) else ExactPosterior


def posterior_for(stats: TrainingStatistics) -> Posterior:
    if not stats.scale > 0:
        raise KernelError("the kernel is zero on every node (mean variance 0); check the features and sigmas")
    return (LowRankPosterior if stats.strategy == "low_rank" else ExactPosterior)(stats)


@dataclass
class RowGroup:
    """Labelled rows held together (every labelled node locally, one row block on Dask):
    ``features`` (rows of ``F``), and per split the positions of its nodes among them, their
    targets and, for the exact strategy, their prior variances ``diag K``."""

    features: Tensor
    positions: dict[str, Tensor]
    targets: dict[str, Tensor]
    prior: Optional[dict[str, Tensor]] = None
    ood: Optional[Tensor] = None   # which test rows a protocol made out of distribution (aligned with positions["test"])
    nngp: Optional[Tensor] = None  # a tangent kernel's NNGP rows, read as ``features`` are (the covariance along training time)
    nngp_prior: Optional[dict[str, Tensor]] = None   # ... and their ``diag K`` per split (exact only)

    def in_distribution(self, key: str) -> Tensor:
        """A mask of the split's rows that are in distribution."""
        n = self.positions[key].numel()
        if key != "test" or self.ood is None:
            return torch.ones(n, dtype=torch.bool, device=self.positions[key].device)
        return ~self.ood

    def labelled(self) -> Tensor:
        """Positions of every labelled row, in node order."""
        return torch.sort(torch.cat([self.positions[key] for key in SPLITS]))[0]

    def variance(self, posterior: "Posterior", eps, key: Optional[str] = None) -> Tensor:
        """The latent posterior variance of the split ``key``'s rows (``None``: every labelled row,
        in node order) at the nugget ``eps``, or after the training time ``eps``
        (:class:`TrainingTimes`; the prior is then the NNGP kernel's)."""
        keys = SPLITS if key is None else (key,)
        timed = isinstance(eps, TrainingTimes)
        priors = (self.nngp_prior if self.nngp is not None else self.prior) if timed else self.prior
        pos = torch.cat([self.positions[k] for k in keys])
        prior = None if priors is None else torch.cat([priors[k] for k in keys])
        if key is None:
            order = torch.argsort(pos)
            pos, prior = pos[order], None if prior is None else prior[order]
        if timed:
            return posterior.time_variance(self.features, self.nngp, pos, eps, prior)
        return posterior.variance(self.features, pos, eps, prior)


def validation_scores(group: RowGroup, posterior: Posterior, nuggets: Tensor, metric: Metric, split: str = "val") -> Scores:
    """The state of ``metric`` on the validation rows (or ``split``'s), one column per nugget."""
    scores = Scores()
    pos = group.positions[split]
    scores.add(split, metric, MetricInput(posterior.grid_means(group.features, pos, nuggets), group.targets[split]))
    return scores


@dataclass(frozen=True)
class ProbabilityRule:
    """How a classification's test rows get class probabilities (:mod:`gnngp_cli.gp.probabilities`):
    the approximation, its samples, the temperature, and the factor on the latent variance."""

    approx: str = "mc"
    samples: int = 256
    temperature: float = 1.0
    variance_scale: float = 1.0

    def probabilities(self, mean: Tensor, variance: Tensor, temperature: Optional[float] = None) -> Tensor:
        from .probabilities import class_probabilities

        t = self.temperature if temperature is None else temperature
        return class_probabilities(mean, variance.double() * self.variance_scale, self.approx, self.samples, t)


ONE = torch.ones(1, dtype=torch.float64)   # the temperature 1 alone


def temperature_nll(group: RowGroup, posterior: Posterior, eps: Tensor, rule: ProbabilityRule, temperatures: Optional[Tensor] = None) -> Tensor:
    """The summed validation NLL at each temperature (default: of
    :data:`~gnngp_cli.gp.probabilities.TEMPERATURES`), by the rule's approximation: the one the test
    rows get (``likelihood.probabilities=auto`` keeps Monte Carlo to graphs where its 61 passes
    over the validation rows cost little)."""
    from .probabilities import TEMPERATURES, nll_by_temperature

    mean = posterior.mean(group.features, group.positions["val"], eps)
    variance = group.variance(posterior, eps, "val").double() * rule.variance_scale
    return nll_by_temperature(mean, variance, group.targets["val"], rule.approx, rule.samples,   # the approximation the test rows get
                              TEMPERATURES if temperatures is None else temperatures)


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
    return torch.cat([
        reduce(partial(validation_scores, posterior=posterior, nuggets=nuggets[start:start + step], metric=metric, split=split),
               merge_scores).value(split).double().cpu()
        for start in range(0, nuggets.numel(), step)
    ])


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
            nll = float(reduce(partial(temperature_nll, posterior=posterior, eps=nuggets[best], rule=rule, temperatures=ONE), add_tensors)[0])
            if chosen and not nll < chosen["nll"]:
                continue
            chosen = dict(nll=nll)
        chosen.update(likelihood=candidate, posterior=posterior, val_curve=val_curve, best=best)
    likelihood, posterior, val_curve, best = chosen["likelihood"], chosen["posterior"], chosen["val_curve"], chosen["best"]
    if validation_only:
        return float(val_curve[best])
    eps = nuggets[best]
    output_scale = (1.0 if times is not None else posterior.output_scale(eps)) if task == "regression" else math.nan
    rule = None
    if task == "classification" and uncertainty and likelihood is not None:
        rule = ProbabilityRule(likelihood.approximation(stats.num_nodes, stats.rhs.size(1)), likelihood.samples, 1.0,
                               1.0 if times is not None else likelihood.variance_scale(posterior, eps, stats.rhs.size(1)))
        if likelihood.temperature:
            from .probabilities import best_temperature

            rule = replace(rule, temperature=best_temperature(reduce(partial(temperature_nll, posterior=posterior, eps=eps, rule=rule), add_tensors)))
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
    return GPResult(nugget_value, eps, metrics, columns, val_curve, posterior, reduce, rule, curve, scored)
