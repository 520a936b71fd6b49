"""The GP posterior over every node, updated one label at a time in closed form (active learning).

The prior covariance ``K`` is a :class:`Prior`: the dense ``n x n`` matrix of an exact kernel, or
the root ``Q`` (``n x m``, ``K = Q Q^T``) of a low-rank one (or of an exact kernel that is one,
e.g. a linear network's); the posterior reads it through three operations (a column, a product,
the diagonal), so one code path serves both. With the labelled nodes ``L``, their targets
``Y_L`` and the noise ``s2`` (the nugget times the mean of ``diag K``), the posterior is held
in node space:

    Sigma = K - S S^T,   mean = K_XL (K_LL + s2 I)^{-1} Y_L,

``S`` (``n x k``) one column per label so far. One more label ``i`` (target ``y``) is a
rank-one step, never a refit:

    s = K[:, i] - S S[i]^T  (= Sigma[:, i]),   d = s2 + s_i,
    S <- [S, s / sqrt(d)],  mean <- mean + s (y - mean_i) / d,  var <- var - s^2 / d,

which costs ``O(n k)`` for a dense kernel (a column is read, not computed) and ``O(n m + n k)``
for a root: never a pass over ``K`` itself, so a label on an exact kernel of ``n`` nodes costs
``k / n`` of one (the eigen-root form, ``Sigma = Q A Q^T``, multiplied the ``n x n`` root per
label). A batch of labels is that many rank-one steps, the same as one rank-``b`` step.

The scores of the optimal-design strategies are updated the same way, over the unlabelled
nodes ``U``:

- V-optimality (Ji & Han 2012): labelling ``j`` lowers the total predictive variance over
  ``U`` by ``w_j / (var_j + s2)``, ``w_j = sum_{u in U} Sigma_uj^2``;
- Sigma-optimality (Ma, Garnett & Schneider 2013): it lowers ``1^T Sigma_UU 1`` by
  ``r_j^2 / (var_j + s2)``, ``r_j = sum_{u in U} Sigma_uj``.

After the step at ``i`` (``Sigma' = Sigma - s s^T / d``; ``i`` leaves ``U``; ``s' = s s2 / d =
Sigma'[:, i]``):

    r_j <- r_j - s_j (1^T s_U) / d - s'_j,
    w_j <- w_j - 2 s_j t_j / d + s_j^2 (s_U^T s_U) / d^2 - s'_j^2,   t = Sigma[:, U] s_U,

``r`` in ``O(n)`` more, ``w`` in one product with ``K`` (``O(n^2)`` dense, ``O(n m)`` a root) and
``O(n k)``.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from ..errors import KernelError

TRACKED = ("v_opt", "sigma_opt")   # the design scores a posterior can keep up to date
GROWTH = 16                        # the labels a posterior's S has room for at first, unless told (it doubles when full)
SQUARES_BLOCK = 1 << 22            # Prior.squares of a dense kernel: the entries of one block of rows


class Prior:
    """The prior covariance ``K`` over every node: ``dense`` (``n x n``, symmetric) or ``root``
    (``Q``, ``n x m``, ``K = Q Q^T``), exactly one of them."""

    def __init__(self, dense: Optional[Tensor] = None, root: Optional[Tensor] = None):
        if (dense is None) == (root is None):
            raise ValueError("a Prior is a dense kernel or a root, exactly one")
        self.dense, self.root = dense, root
        self.held = dense if dense is not None else root   # whichever it is: its rows are the nodes
        if not math.isfinite(float(self.held.sum())):   # a NaN or an infinity anywhere makes the sum one (no n x n mask)
            raise KernelError("the kernel matrix holds values that are not finite; active learning needs a finite kernel")

    @property
    def num_nodes(self) -> int:
        return int(self.held.size(0))

    @property
    def dtype(self) -> torch.dtype:
        return self.held.dtype

    @property
    def device(self) -> torch.device:
        return self.held.device

    def column(self, i: int) -> Tensor:
        """``K[:, i]`` (a dense kernel's row ``i``: it is symmetric, and a row is contiguous)."""
        return self.dense[i] if self.dense is not None else self.root @ self.root[i]

    def product(self, v: Tensor) -> Tensor:
        """``K v``."""
        return self.dense @ v if self.dense is not None else self.root @ (self.root.T @ v)

    def diagonal(self) -> Tensor:
        return self.dense.diagonal().clone() if self.dense is not None else (self.root * self.root).sum(1)

    def squares(self) -> Tensor:
        """``sum_u K_uj^2`` for every node ``j`` (the V-optimality scores with no label)."""
        if self.dense is not None:   # K is symmetric: its rows' sums of squares, a block of rows at a time (no n x n temporary)
            step = max(1, SQUARES_BLOCK // max(self.num_nodes, 1))
            return torch.cat([(block * block).sum(1) for block in self.dense.split(step)])
        return ((self.root @ (self.root.T @ self.root)) * self.root).sum(1)

    def rows(self, rows: Tensor) -> Tensor:
        """``K[rows, :]`` (``len(rows) x n``)."""
        return self.dense[rows] if self.dense is not None else self.root[rows] @ self.root.T

    def block(self, rows: Tensor) -> Tensor:
        """``K[rows, rows]``."""
        if self.dense is not None:
            return self.dense[rows][:, rows]
        q = self.root[rows]
        return q @ q.T


class LabelPosterior:
    """The posterior under ``prior`` (a :class:`Prior`) with no label yet; :meth:`label` adds
    them (see the module docstring). ``noise``: ``s2``; ``outputs``: the target columns
    (classes, or 1); ``track``: which of :data:`TRACKED` scores to keep up to date;
    ``capacity``: the labels ``S`` has room for at first (it doubles when they are more)."""

    def __init__(self, prior: Prior, noise: float, outputs: int, track: tuple[str, ...] = (), capacity: int = GROWTH):
        if not noise > 0:
            raise KernelError(f"the noise variance {noise} must be positive")
        self.prior, self.noise = prior, float(noise)
        n = prior.num_nodes
        self.track = tuple(track)
        self.s = prior.held.new_zeros(max(int(capacity), 1), n)   # S^T, a row per label
        self.mean = self.s.new_zeros(n, outputs)
        self.variance = prior.diagonal()
        self.unlabelled = torch.ones(n, dtype=torch.bool, device=prior.device)
        self._open = self.s.new_ones(n)          # the unlabelled nodes as 1s (a dot product with it sums over U)
        self.labelled: list[int] = []
        if "sigma_opt" in self.track:
            self.sums = prior.product(self.s.new_ones(n))       # r = Sigma 1 (no label: K 1)
        if "v_opt" in self.track:
            self.squares = prior.squares()                      # w = sum_u Sigma_uj^2 (no label: of K)

    @property
    def num_nodes(self) -> int:
        return self.prior.num_nodes

    def _s(self) -> Tensor:
        """``S^T`` (``k x n``), a row per label so far."""
        return self.s[:len(self.labelled)]

    def label(self, node: int, target: Tensor) -> None:
        """The rank-one step of one more label: ``node`` with its ``target`` (``outputs`` values)."""
        if not bool(self.unlabelled[node]):
            raise KernelError(f"node {node} is labelled already")
        st = self._s()
        s = self.prior.column(node) - st[:, node].contiguous() @ st   # Sigma[:, node] (a contiguous vector: BLAS's fast path)
        variance = float(s[node])
        if variance < -self.noise:   # a variance is never negative: round-off of the steps so far has swamped this nugget
            raise KernelError(f"node {node}'s posterior variance came out {variance:.3g}, below minus the nugget ({self.noise:.3g}): "
                              f"{str(s.dtype).removeprefix('torch.')} round-off after {len(self.labelled):,} labels at this nugget; use "
                              + ("dtype=float64, or " if s.dtype != torch.float64 else "") + "a larger nugget (active.nugget; with fit=mll, nugget.min)")
        d = self.noise + max(variance, 0.0)   # round-off below 0: the variance it stands for
        residual = target.to(self.mean.dtype) - self.mean[node]
        torch.addmm(self.mean, s[:, None], residual[None], alpha=1.0 / d, out=self.mean)   # in place: no n x C temporary per label
        self.variance.addcmul_(s, s, value=-1.0 / d).clamp_(min=0)
        if "sigma_opt" in self.track:   # r -= s (1^T s_U) / d + s' (s' = s s2 / d)
            self.sums.add_(s, alpha=-(float(s @ self._open) + self.noise) / d)
        if "v_opt" in self.track:
            open_s = s * self._open                    # s_U (U still holding the node)
            after = s * (self.noise / d)               # s' = Sigma'[:, node]
            t = self.prior.product(open_s) - st.T @ (st @ open_s)   # Sigma[:, U] s_U
            self.squares += -2.0 * s * t / d + s * s * (float(open_s @ open_s) / d ** 2) - after * after
            self.squares.clamp_(min=0)
        k = len(self.labelled)
        if k == self.s.size(0):
            self.s = torch.cat([self.s, torch.zeros_like(self.s)], dim=0)
        self.s[k] = s / math.sqrt(d)
        self.unlabelled[node] = False
        self._open[node] = 0
        self.labelled.append(int(node))

    def v_opt(self) -> Tensor:
        """Each node's V-optimality score: the drop of the total variance over ``U`` were it labelled."""
        return self.squares / (self.variance + self.noise)

    def sigma_opt(self) -> Tensor:
        """Each node's Sigma-optimality score: the drop of ``1^T Sigma_UU 1`` were it labelled."""
        return self.sums * self.sums / (self.variance + self.noise)

    def rows(self, rows: Tensor) -> Tensor:
        """``Sigma[rows, :]`` (``len(rows) x n``): the posterior covariance of ``rows`` with every node."""
        st = self._s()
        return self.prior.rows(rows) - st[:, rows].T @ st

    def covariance(self, rows: Optional[Tensor] = None) -> Tensor:
        """``Sigma[rows, rows]`` (for small node sets: checks and inspection)."""
        rows = torch.arange(self.num_nodes, device=self.prior.device) if rows is None else rows
        st = self._s()[:, rows]
        return self.prior.block(rows) - st.T @ st


def rebuilt(prior: Prior, noise: float, outputs: int, labelled: list[int], targets: Tensor, track: tuple[str, ...] = (),
            capacity: int = GROWTH) -> LabelPosterior:
    """The posterior of ``labelled`` (in that order; ``targets``: their rows) at the noise
    ``noise``: its labels' steps again from none (a new nugget, chosen by the marginal
    likelihood, changes every step; done once per budget, never per label)."""
    posterior = LabelPosterior(prior, noise, outputs, track, max(capacity, len(labelled)))
    for node, target in zip(labelled, targets):
        posterior.label(node, target)
    return posterior


def log_marginal_likelihood(gram: Tensor, targets: Tensor, noises: Tensor) -> Tensor:
    """The log marginal likelihood of ``targets`` (``L x C``, each column a GP draw) under
    ``s (K_LL + s2 I)`` (``gram``: ``K_LL``) at each noise ``s2`` of ``noises``, the output scale
    ``s`` at its maximum-likelihood value ``y^T (K_LL + s2 I)^{-1} y / (L C)``; constants
    dropped. One eigendecomposition of ``K_LL`` serves every noise."""
    values, vectors = torch.linalg.eigh(0.5 * (gram + gram.T))
    values = values.clamp_min(0)
    projected = (vectors.T @ targets) ** 2                      # L x C
    n, c = targets.shape
    denominators = values[None, :] + noises[:, None]            # noises x L
    quadratic = (projected.sum(1)[None, :] / denominators).sum(1)
    log_det = torch.log(denominators).sum(1)
    return -0.5 * (n * c * torch.log(quadratic / (n * c)) + c * log_det)
