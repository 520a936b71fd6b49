"""The GP posterior strategies over a nugget grid (exact, low rank), their filters (a nugget,
or a training time), and the labelled rows they read (:class:`RowGroup`); the formulas are in
:mod:`.inference`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from .. import runtime
from ..errors import KernelError
from ..kernels.numerics import psd_tolerance
from ..kernels.value import FactoredRoot
from .sufficient import SPLITS, ProjectedRoot, RowProjection, TrainingStatistics, every_row, gram, gram_eigh


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
    return features if every_row(features, pos) else features[pos]


def _reader(features: Any, v: Tensor) -> tuple[Tensor, Tensor]:
    """``(rows, m)`` with ``rows[pos] @ m == features[pos] @ v``: a factored root ``L R`` is read as ``L``
    with ``R v`` (formed once, not per row block), anything else as it is."""
    if isinstance(features, FactoredRoot):
        return features.left, features.right @ v
    return features, v


class _Projection(RowProjection):
    """``features[pos] @ v`` for the row blocks of one pass (:class:`~.sufficient.RowProjection`, a
    factored root read through :func:`_reader`); rows that a :class:`~.sufficient.ProjectedRoot` keeps
    projected onto ``v`` are copied from there."""

    def __init__(self, features: Any, v: Tensor):
        super().__init__(*_reader(features, v))
        self.features, self.v = features, v

    def __call__(self, pos: Tensor, out: Optional[Tensor] = None) -> Tensor:
        kept = self.features.locations(pos, self.v) if isinstance(self.features, ProjectedRoot) else None
        if kept is None:
            return super().__call__(pos, out)
        rows = self.features.rows
        return torch.index_select(rows, 0, kept, out=self.into(out, pos.numel(), rows, rows.size(1)))


class Posterior:
    """The GP posterior over a nugget grid, from one eigendecomposition of the training Gram
    matrix ``V diag(w) V^T`` and ``coef = V^T rhs``: at nugget ``eps`` the mean of rows with
    prediction features ``F`` is ``F V (coef / (w + eps))``. The two strategies differ in what
    ``F``, the Gram matrix and the variance are. A posterior holds no rows: the same object
    predicts every row group (on Dask it is sent to the workers once)."""

    def __init__(self, stats: TrainingStatistics):
        w, v = stats.decomposed[1:] if stats.decomposed is not None and stats.decomposed[0] is stats.gram else gram_eigh(stats.gram)
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
        project = _Projection(features, self.v)

        def rows(at: Tensor) -> Tensor:
            proj = project(at)
            return proj.mul_(proj).mul_(inv).sum(1)

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
        m = gram(q) + nu * torch.eye(r, dtype=q.dtype, device=q.device)
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
        source, by = _reader(features, self.v)

        def rows(at: Tensor) -> Tensor:
            proj = _rows(source, at) @ by
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
