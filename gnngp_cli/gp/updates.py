"""The GP posterior over every node, updated one label at a time in closed form (active learning).

The kernel is held as a root: ``K = Q Q^T`` with ``Q`` of ``n x m`` (a low-rank kernel's Nystrom
root, ``m`` its width; an exact kernel's eigen-root, :func:`dense_root`, ``m <= n``), so one
code path serves both. With the labelled nodes ``L``, their targets ``Y_L`` and the noise
``s2`` (the nugget times the mean of ``diag K``), the posterior is that of the weights
``w ~ N(0, I_m)`` of ``f = Q w`` (Woodbury on the factor):

    A = (I + Q_L^T Q_L / s2)^{-1},   mean = Q A Q_L^T Y_L / s2,   Sigma = Q A Q^T.

One more label ``i`` (``q = Q[i]``, target ``y``) is a rank-one step, never a refit:

    c = A q,  s = Q c = Sigma[:, i],  d = s2 + q^T c,
    A <- A - c c^T / d,  mean <- mean + s (y - mean_i) / d,  var <- var - s^2 / d.

``A`` is never formed: it is ``I - W W^T`` with one column ``c / sqrt(d)`` of ``W`` (``m x k``)
per label so far, so ``A v = v - W (W^T v)`` costs ``O(m k)`` and a label ``O(n m + m k)``: one
pass over the root (``O(n^2)`` for an exact kernel, ``O(n m)`` for a low-rank one), where an
``m x m`` matrix would be read and written several times per label (and be ``n x n`` for an
exact kernel). A batch of labels is that many rank-one steps, the same as one rank-``b`` step.

The scores of the optimal-design strategies are updated the same way, over the unlabelled
nodes ``U`` (``G = Q_U^T Q_U``, ``g = Q_U^T 1``):

- V-optimality (Ji & Han 2012): labelling ``j`` lowers the total predictive variance over
  ``U`` by ``w_j / (var_j + s2)``, ``w_j = sum_{u in U} Sigma_uj^2 = q_j^T A G A q_j``;
- Sigma-optimality (Ma, Garnett & Schneider 2013): it lowers ``1^T Sigma_UU 1`` by
  ``r_j^2 / (var_j + s2)``, ``r_j = sum_{u in U} Sigma_uj = q_j^T A g``.

After the step at ``i`` (``A' = A - c c^T / d``; ``i`` leaves ``U``; ``s' = s s2 / d = Q A' q``):

    r_j <- r_j - s_j (c^T g) / d - s'_j,
    w_j <- w_j - 2 s_j (q_j^T A G c) / d + s_j^2 (c^T G c) / d^2 - s'_j^2,

with ``G c = Q_U^T s_U`` (``G`` is never formed either), each ``O(n m + m k)``.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from ..errors import KernelError

TRACKED = ("v_opt", "sigma_opt")   # the design scores a posterior can keep up to date
EIGEN_FLOOR = 1e-12                 # dense_root: eigenvalues below this times the largest are the kernel's null space


def dense_root(kernel: Tensor) -> Tensor:
    """``Q`` with ``Q Q^T = K`` for a dense symmetric PSD ``K`` (``n x n``): ``V sqrt(lambda)`` of
    its eigendecomposition, the null space (eigenvalues below :data:`EIGEN_FLOOR` times the
    largest; a rounding's negative ones among them) left out, so ``m`` is the kernel's rank."""
    kernel = 0.5 * (kernel + kernel.T)
    values, vectors = torch.linalg.eigh(kernel)
    top = float(values.max()) if values.numel() else 0.0
    if not math.isfinite(top):
        raise KernelError("the kernel matrix holds values that are not finite; active learning needs a finite kernel")
    keep = values > EIGEN_FLOOR * max(top, 0.0)
    return vectors[:, keep] * values[keep].sqrt()


class RootPosterior:
    """The posterior of ``f = Q w`` (see the module docstring) with no label yet; :meth:`label`
    adds them. ``root``: ``Q`` (``n x m``); ``noise``: ``s2``; ``outputs``: the target columns
    (classes, or 1); ``track``: which of :data:`TRACKED` scores to keep up to date."""

    def __init__(self, root: Tensor, noise: float, outputs: int, track: tuple[str, ...] = ()):
        if not noise > 0:
            raise KernelError(f"the noise variance {noise} must be positive")
        self.root, self.noise = root, float(noise)
        n, m = root.shape
        self.track = tuple(track)
        self.w = root.new_zeros(m, 16)      # A = I - W[:, :k] W[:, :k]^T, a column per label (grown by doubling)
        self.mean = root.new_zeros(n, outputs)
        self.variance = (root * root).sum(1)
        self.unlabelled = torch.ones(n, dtype=torch.bool, device=root.device)
        self.labelled: list[int] = []
        if "sigma_opt" in self.track:
            self.column_sum = root.sum(0)                       # g = Q_U^T 1
            self.sums = root @ self.column_sum                  # r = Q A g (A = I)
        if "v_opt" in self.track:
            self.squares = ((root @ (root.T @ root)) * root).sum(1)   # w = diag(Q A G A Q^T) (A = I, G = Q^T Q)

    def _a(self, v: Tensor) -> Tensor:
        """``A v`` (``A = I - W W^T``, ``W`` the labels' columns so far)."""
        w = self.w[:, :len(self.labelled)]
        return v - w @ (w.T @ v)

    @property
    def num_nodes(self) -> int:
        return int(self.root.size(0))

    def label(self, node: int, target: Tensor) -> None:
        """The rank-one step of one more label: ``node`` with its ``target`` (``outputs`` values)."""
        if not bool(self.unlabelled[node]):
            raise KernelError(f"node {node} is labelled already")
        q = self.root[node]
        c = self._a(q)
        s = self.root @ c
        d = self.noise + float(q @ c)
        residual = target.to(self.mean.dtype) - self.mean[node]
        self.mean.addr_(s, residual, alpha=1.0 / d)   # in place: no n x C temporary per label
        self.variance -= s * s / d
        self.variance.clamp_(min=0)
        after = s * (self.noise / d)                            # s' = Q A' q
        if "sigma_opt" in self.track:
            self.sums -= s * (float(c @ self.column_sum) / d) + after
            self.column_sum -= q
        if "v_opt" in self.track:
            gc = self.root.T @ (s * self.unlabelled)            # G c = Q_U^T s_U (U still holding the node)
            agc = self.root @ self._a(gc)
            self.squares += -2.0 * s * agc / d + s * s * (float(c @ gc) / d ** 2) - after * after
            self.squares.clamp_(min=0)
        k = len(self.labelled)
        if k == self.w.size(1):
            self.w = torch.cat([self.w, torch.zeros_like(self.w)], dim=1)
        self.w[:, k] = c / math.sqrt(d)
        self.unlabelled[node] = False
        self.labelled.append(int(node))

    def v_opt(self) -> Tensor:
        """Each node's V-optimality score: the drop of the total variance over ``U`` were it labelled."""
        return self.squares / (self.variance + self.noise)

    def sigma_opt(self) -> Tensor:
        """Each node's Sigma-optimality score: the drop of ``1^T Sigma_UU 1`` were it labelled."""
        return self.sums * self.sums / (self.variance + self.noise)

    def covariance(self, rows: Optional[Tensor] = None) -> Tensor:
        """``Sigma[rows, rows]`` (for small node sets: checks and inspection)."""
        q = self.root if rows is None else self.root[rows]
        qw = q @ self.w[:, :len(self.labelled)]
        return q @ q.T - qw @ qw.T


def rebuilt(root: Tensor, noise: float, outputs: int, labelled: list[int], targets: Tensor, track: tuple[str, ...] = ()) -> RootPosterior:
    """The posterior of ``labelled`` (in that order; ``targets``: their rows) at the noise
    ``noise``: its labels' steps again from none (a new nugget, chosen by the marginal
    likelihood, changes every step; done once per budget, never per label)."""
    posterior = RootPosterior(root, noise, outputs, track)
    for node, target in zip(labelled, targets):
        posterior.label(node, target)
    return posterior


def log_marginal_likelihood(root_labelled: Tensor, targets: Tensor, noises: Tensor) -> Tensor:
    """The log marginal likelihood of ``targets`` (``L x C``, each column a GP draw) under
    ``s (Q_L Q_L^T + s2 I)`` at each noise ``s2`` of ``noises``, the output scale ``s`` at its
    maximum-likelihood value ``y^T (K_LL + s2 I)^{-1} y / (L C)``; constants dropped. One
    eigendecomposition of ``K_LL`` serves every noise."""
    gram = root_labelled @ root_labelled.T
    values, vectors = torch.linalg.eigh(0.5 * (gram + gram.T))
    values = values.clamp_min(0)
    projected = (vectors.T @ targets) ** 2                      # L x C
    n, c = targets.shape
    denominators = values[None, :] + noises[:, None]            # noises x L
    quadratic = (projected.sum(1)[None, :] / denominators).sum(1)
    log_det = torch.log(denominators).sum(1)
    return -0.5 * (n * c * torch.log(quadratic / (n * c)) + c * log_det)
