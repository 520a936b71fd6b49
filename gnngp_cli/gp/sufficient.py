"""The sufficient statistics a backend hands the GP posterior, reduced over row groups: those of the
training rows (:class:`TrainingStatistics`; see :mod:`.inference` for the formulas), the
regression targets, and the decomposition of the training Gram matrix."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Optional

import torch
from torch import Tensor

from .. import runtime
from ..kernels.numerics import symmetric_eigh
from ..kernels.value import FactoredRoot, held

SPLITS = ("train", "val", "test")


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
    decomposed: Optional[tuple[Tensor, Tensor, Tensor]] = None   # ``(gram, w, V)``: ``gram``'s decomposition where the statistics
                                                                 # took it (:func:`factored_statistics`); read only for that same ``gram``
    projected: Optional["ProjectedRoot"] = None   # the root with rows kept projected onto that ``V`` (:func:`factored_statistics`)

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
                       cross=None if self.cross is None else self.cross + other.cross, decomposed=None, projected=None)


GRAM_BLOCKS = 4           # column blocks of a Gram matrix: the blocks on and above the diagonal, 10 of 16 products
GRAM_BLOCK_MIN = 256      # below this many columns a block, one product (a small one gains nothing from the split)


def gram(q: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """``q^T q`` from the products of ``q``'s column blocks on and above the diagonal, the others
    their transposes: ``(k + 1) / 2k`` of one product's flops (5/8 at 4 blocks; a symmetric rank-k
    update that torch does not offer). Equal to ``q.T @ q`` to round-off. Into ``out`` where given."""
    r = q.size(1)
    if r < GRAM_BLOCKS * GRAM_BLOCK_MIN:
        return q.T @ q if out is None else torch.mm(q.T, q, out=out)
    edges = [round(i * r / GRAM_BLOCKS) for i in range(GRAM_BLOCKS + 1)]
    out = q.new_empty(r, r) if out is None else out
    for i in range(GRAM_BLOCKS):
        rows = slice(edges[i], edges[i + 1])
        for j in range(i, GRAM_BLOCKS):
            cols = slice(edges[j], edges[j + 1])
            out[rows, cols] = q[:, rows].T @ q[:, cols]
            if j > i:
                out[cols, rows] = out[rows, cols].T
    return out


def low_rank_statistics(q: Tensor, train: Tensor, y_train: Tensor, num_nodes: int, diagonal_sum: Optional[float] = None,
                        per_class: bool = False, nngp: Optional[Tensor] = None, keep: Optional[Tensor] = None) -> TrainingStatistics:
    """The statistics of a root ``Q`` held on some rows (``train``: the training rows among them,
    ``y_train`` their targets); ``num_nodes``: the graph's node count; ``diagonal_sum``: the sum
    of ``diag K`` where the caller has it (default: over ``Q``'s rows, ``||Q||^2``); with
    ``per_class`` (one-hot ``y_train``), each class's Gram matrix and ``Q[b]^T 1`` too; with
    ``nngp`` (the NNGP kernel's root on the same rows, ``q`` a tangent kernel's), their cross Gram matrix.
    A :class:`~gnngp_cli.kernels.value.FactoredRoot` ``Q = L R`` is read as ``L``'s statistics with
    ``R`` on their small sides (:func:`factored_statistics`; ``keep``: the rows it may keep projected)."""
    if isinstance(q, FactoredRoot):
        if nngp is None:
            return factored_statistics(q, train, y_train, num_nodes, diagonal_sum, per_class, keep)
        q = held(q)
    q_train = q[train]
    if diagonal_sum is None:
        diagonal_sum = float((q * q).sum().double())
    class_grams = column_sum = None
    if per_class:
        own = y_train > 0
        class_grams = torch.stack([gram(q_train[own[:, c]]) for c in range(y_train.size(1))])
        column_sum = q_train.sum(0)
    return TrainingStatistics("low_rank", gram(q_train), q_train.T @ y_train, float((y_train * y_train).sum()),
                              int(train.numel()), diagonal_sum, num_nodes, class_grams, column_sum,
                              None if nngp is None else q_train.T @ nngp[train])


class ProjectedRoot(FactoredRoot):
    """A factored root ``Q = L R`` with the rows ``index`` (positions, sorted) kept projected onto a
    basis ``V``: ``rows[i] = Q[index[i]] V``. :func:`factored_statistics` forms them for the nugget
    scale (``||Q_i||^2 = ||Q_i V||^2``, ``V`` orthogonal), and the posterior's variance pass reads
    them where its basis is that ``V`` (:meth:`~.posterior.Posterior.explained`) instead of forming
    them again. Anything else reads it as the factored root it is."""

    __slots__ = ("index", "basis", "rows")

    def __init__(self, root: FactoredRoot, index: Tensor, basis: Tensor, rows: Tensor):
        super().__init__(root.left, root.right)
        self.index, self.basis, self.rows = index, basis, rows

    def locations(self, pos: Tensor, basis: Tensor) -> Optional[Tensor]:
        """Where the positions ``pos`` sit among the kept rows, if every one does and ``basis`` is
        the one they were projected onto; else ``None``."""
        if basis is not self.basis or not pos.numel():
            return None
        at = torch.searchsorted(self.index, pos).clamp_max(self.index.numel() - 1)
        return at if bool(torch.equal(self.index[at], pos)) else None


def factored_statistics(q: FactoredRoot, train: Tensor, y_train: Tensor, num_nodes: int, diagonal_sum: Optional[float] = None,
                        per_class: bool = False, keep: Optional[Tensor] = None) -> TrainingStatistics:
    """:func:`low_rank_statistics` of ``Q = L R`` without forming ``Q``: ``Q[b]^T Q[b] = R^T (L[b]^T L[b]) R``,
    ``Q[b]^T y_b = R^T (L[b]^T y_b)``, and ``||Q||^2 = sum (R^T L^T L) o R^T``, ``L^T L`` the training rows'
    Gram matrix plus the other rows' (each ``N r^2 / 2`` operations where ``L R`` would cost ``N r^2``).
    ``R`` weighs ``L``'s small directions up (a Nystrom step's ``V D^-1/2``), so ``L``'s Gram matrices are
    taken about their rows' mean and joined to ``R`` in float64 (:func:`centred_gram`); rows are read a
    block at a time, never copied whole. ``keep``: positions (sorted) of rows the posterior will read
    again (the validation and test nodes): where they take at most half of ``L``'s memory, the
    training Gram matrix is decomposed here (``decomposed``, which the posterior then takes) and
    those rows projected onto its eigenbasis, ``Q[keep] V`` (``projected``), give their share of
    ``||Q||^2`` in place of their Gram matrix (each ``N r^2`` operations, then their variances for
    free); the other rows' share is read from their Gram matrix."""
    left, right = q.left, q.right
    wide = right.double()
    g_train, rhs, total = centred_gram(left, train, y_train)

    def joined(g: Tensor, wide_g: Optional[Tensor] = None) -> Tensor:   # (R^T g) R, in that order
        return ((wide.T @ g if wide_g is None else wide_g) @ wide).to(left.dtype)

    def share(wide_g: Tensor) -> float:   # sum (L^T L) o (R R^T) = sum (R^T L^T L) o R^T: those rows' share of ||Q||^2
        return float((wide_g * wide.T).sum())

    wide_g = wide.T @ g_train
    gram = joined(g_train, wide_g)
    decomposed = projected = None
    if diagonal_sum is None:
        rest = torch.ones(left.size(0), dtype=torch.bool, device=left.device)
        rest[train] = False
        kept = 0.0
        if keep is not None and keep.numel() and 2 * keep.numel() * right.size(1) <= left.numel():
            decomposed = (gram, *gram_eigh(gram))
            rows = project_rows(left, keep, right @ decomposed[2])
            kept = float(torch.linalg.vecdot(rows, rows).double().sum())   # ||Q_i V||^2 per row (no temporary of the rows' size), summed in float64
            projected = ProjectedRoot(q, keep, decomposed[2], rows)
            rest[keep] = False
        others = rest.nonzero().view(-1)
        diagonal_sum = share(wide_g) + kept + (share(wide.T @ centred_gram(left, others)[0]) if others.numel() else 0.0)
    class_grams = column_sum = None
    if per_class:
        own = y_train > 0
        class_grams = torch.stack([joined(centred_gram(left, train[own[:, c]])[0]) for c in range(y_train.size(1))])
        column_sum = (total @ wide).to(left.dtype)
    return TrainingStatistics("low_rank", gram, (wide.T @ rhs).to(left.dtype), float((y_train * y_train).sum()),
                              int(train.numel()), diagonal_sum, num_nodes, class_grams, column_sum, decomposed=decomposed, projected=projected)


class RowProjection:
    """``rows[pos] @ m`` for the row blocks of one pass, into buffers taken at its first (largest)
    block and reused: a new block each time would be new pages of memory, zeroed by the system.
    Every row in order is read without a gather. What a call returns is overwritten by the next."""

    def __init__(self, rows: Tensor, m: Tensor):
        self.rows, self.m = rows, m
        self.picked: Optional[Tensor] = None
        self.out: Optional[Tensor] = None

    def __call__(self, pos: Tensor, out: Optional[Tensor] = None) -> Tensor:
        """The product for the rows ``pos``: into ``out`` where given, else into the pass's buffer."""
        k, picked = pos.numel(), self.rows
        if not every_row(self.rows, pos):
            if self.picked is None:
                self.picked = self.rows.new_empty(k, self.rows.size(1))
            picked = torch.index_select(self.rows, 0, pos, out=self.picked[:k])
        return torch.mm(picked, self.m, out=self.into(out, k, picked, self.m.size(1)))

    def into(self, out: Optional[Tensor], k: int, like: Tensor, width: int) -> Tensor:
        """``out`` where given, else the first ``k`` rows of the pass's output buffer (taken at the first call)."""
        if out is not None:
            return out
        if self.out is None:
            self.out = like.new_empty(k, width)
        return self.out[:k]


def every_row(rows: Any, pos: Tensor) -> bool:
    """Whether ``pos`` is every row of ``rows`` in order."""
    return pos.numel() == rows.size(0) and torch.equal(pos, torch.arange(rows.size(0), device=pos.device))


def project_rows(rows: Tensor, index: Tensor, m: Tensor) -> Tensor:
    """``rows[index] @ m`` by row blocks into one tensor (:class:`RowProjection`)."""
    out = rows.new_empty(index.numel(), m.size(1))
    project = RowProjection(rows, m)
    for start, stop in runtime.row_blocks(index.numel(), max(rows.size(1), m.size(1))):
        project(index[start:stop], out=out[start:stop])
    return out


RHS_ROWS = 1024   # rows of a block taken to float64 at a time for the right-hand side (a small temporary, reused by the allocator)


def centred_gram(rows: Tensor, index: Tensor, y: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor], Tensor]:
    """``rows[index]^T rows[index]`` in float64 in one pass of row blocks, each block less a centre ``c``
    (the first block's mean, held in the rows' dtype), then ``c s^T + s c^T - n c c^T`` added (``s``: the
    rows' sum): a kernel's cross block has one large common direction, whose rounding would otherwise
    swamp the small ones. With ``y`` (a row of targets per index), ``rows[index]^T y`` too, in float64
    the same way; and ``s`` (float64). The row blocks and each block's Gram matrix are written into
    buffers taken once (a new block each time would be new pages of memory, zeroed by the system)."""
    n, width = index.numel(), rows.size(1)
    g = torch.zeros(width, width, dtype=torch.float64, device=rows.device)
    total = torch.zeros(width, dtype=torch.float64, device=rows.device)
    rhs = None if y is None else torch.zeros(width, y.size(1), dtype=torch.float64, device=rows.device)
    centre = block_buffer = gram_buffer = None
    for start, stop in runtime.row_blocks(n, width):
        if block_buffer is None:
            block_buffer, gram_buffer = rows.new_empty(stop - start, width), rows.new_empty(width, width)
        block = torch.index_select(rows, 0, index[start:stop], out=block_buffer[:stop - start])
        sums = block.sum(0)
        total += sums.double()
        if centre is None:
            centre = sums / block.size(0)
        block.sub_(centre)
        g += gram(block, out=gram_buffer)
        if y is not None:   # (l - c)^T y in float64 (n r outputs: a small product), a few rows at a time; c 1^T y added below
            for at in range(0, block.size(0), RHS_ROWS):
                rhs += block[at:at + RHS_ROWS].double().T @ y[start + at:min(start + at + RHS_ROWS, stop)].double()
    if centre is None:
        return g, rhs, total
    c = centre.double()
    if y is not None:
        rhs += torch.outer(c, y.double().sum(0))
    return g + torch.outer(c, total) + torch.outer(total, c) - n * torch.outer(c, c), rhs, total


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
