"""Kernel building blocks (the paper's Table 3), each written once for both backings.

A :class:`Kernel` holds ``K`` on row and column node sets either as the matrix
``K[nodes, cols]`` or as a root ``R`` with ``K = R R^T``. In exact mode (``ctx.landmarks is
None``) a root is an exact factor (e.g. the linear input ``X``), kept until a nonlinearity
needs the matrix, and every block works only on the rows and columns that the prediction
needs (the labelled by the training nodes): a graph convolution widens each set to the graph
neighbours, nothing else does. A ReLU on a rectangle reads its rows' variances from the pair
evaluation (:func:`exact_kernel`). In low-rank mode the root is the
recursive Nystrom factor ``Q`` over all nodes, and the activation re-factorises it on the
landmark nodes, so no N x N matrix is ever formed.

| block                | network          | kernel               | low rank                   |
|----------------------|------------------|----------------------|----------------------------|
| Input                | X <- X0          | K <- C0              | Q <- chol(C0)              |
| Bias(s_b)            | X + b            | K + s_b^2 11^T       | [Q, s_b 1]                 |
| Scale(c) / Weight    | c X / X W        | c^2 K / s_w^2 K      | c Q / s_w Q                |
| MixedWeight(a, b)    | X (a I + b W)    | (a^2 + b^2 s_w^2) K  | sqrt(a^2 + b^2 s_w^2) Q    |
| Conv                 | A X              | A K A^T              | A Q                        |
| ReLU                 | relu(X)          | g(K)                 | chol(g(Q Q^T)) on landmarks|
| Add(f1, f2)          | f1(X) + f2(X)    | K1 + K2              | [Q1, Q2]                   |
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

import torch
from torch import Tensor

from ..data.graph import Adjacency, sparse_beta_quiet
from ..errors import KernelError
from .base import BaseKernel
from .pairs import Pairs, PairValues, PatternTooLarge, base_on_pairs, conv_terms, root_on_pairs
from .relu import relu_expectation, relu_expectation_entries

Nodes = Optional[Tensor]  # sorted global node ids; None means every node


def psd_tolerance(dtype: torch.dtype, n: int) -> float:
    """Relative round-off allowance for eigenvalues of an ``n x n`` kernel block."""
    return max(1e-10, 50 * torch.finfo(dtype).eps * max(n, 1) ** 0.5)


@dataclass(frozen=True)
class Kernel:
    """A covariance block with rows ``nodes`` and columns ``cols`` (a subset of the rows;
    ``None``: the rows, a square block): ``matrix = K[nodes, cols]``, or ``root`` over the rows
    with ``K = R R^T``. ``nodes = None`` means every node."""

    nodes: Nodes
    matrix: Optional[Tensor] = None
    root: Optional[Tensor] = None
    cols: Nodes = None

    @property
    def size(self) -> int:
        return (self.root if self.root is not None else self.matrix).size(0)

    @property
    def square(self) -> bool:
        return self.cols is None

    def positions(self, nodes: Tensor) -> Tensor:
        """Row positions of global ``nodes`` in this kernel."""
        return _find(self.nodes, nodes)

    def col_positions(self, nodes: Tensor) -> Tensor:
        """Column positions of global ``nodes``: in ``matrix``, or rows of ``root``."""
        return _find(self.cols if self.matrix is not None and self.cols is not None else self.nodes, nodes)

    def restrict(self, nodes: Nodes, cols: Nodes = None) -> "Kernel":
        """This kernel on the rows ``nodes`` and the columns ``cols`` (``None``: square),
        each a subset of what it holds."""
        if cols is not None and nodes is not None and cols.numel() == nodes.numel():
            cols = None  # columns are a subset of the rows: equal sizes mean equal sets
        same_rows = nodes is None or self.nodes is None or nodes.numel() == self.nodes.numel()
        if self.root is not None:
            root = self.root if same_rows else self.root[self.positions(nodes)]
            return Kernel(self.nodes if same_rows else nodes, root=root, cols=cols)
        if same_rows and cols is None and self.cols is None:
            return self
        rows = self.nodes if same_rows else nodes
        matrix = self.matrix if same_rows else self.matrix[self.positions(nodes)]
        out_cols = rows if cols is None else cols
        held_cols = self.nodes if self.cols is None else self.cols
        if out_cols is not None and (held_cols is None or out_cols.numel() != held_cols.numel()):
            matrix = matrix[:, self.col_positions(out_cols)]
        return Kernel(rows, matrix=matrix, cols=cols)

    def dense(self) -> Tensor:
        """``K[nodes, cols]`` as a matrix."""
        if self.matrix is not None:
            return self.matrix
        right = self.root if self.cols is None else self.root[self.positions(self.cols)]
        return self.root @ right.T

    def diagonal(self) -> Tensor:
        """``K_xx`` on the rows (a rectangular matrix block holds no diagonal)."""
        if self.root is not None:
            return (self.root * self.root).sum(1)
        if self.cols is not None:
            raise ValueError("a rectangular kernel block holds no diagonal")
        return torch.diagonal(self.matrix)


def _find(held: Nodes, nodes: Tensor) -> Tensor:
    """Positions of global ``nodes`` in the sorted ids ``held`` (``None``: every node)."""
    if held is None:
        return nodes
    pos = torch.searchsorted(held, nodes)
    if bool((pos >= held.numel()).any()) or not torch.equal(held[pos.clamp_max(held.numel() - 1)], nodes):
        raise ValueError("requested nodes are not held by this kernel")
    return pos


@dataclass
class KernelContext:
    """What the blocks read: features ``X``, the normalised adjacency ``A``, the base
    kernel ``C0`` and, in low-rank mode, the landmark node ids ``a``."""

    features: Tensor
    adjacency: Adjacency
    base: BaseKernel = field(default_factory=BaseKernel)
    landmarks: Optional[Tensor] = None
    pair_budget: Optional[int] = None  # most (pair, neighbour, neighbour) terms one pair evaluation may hold; None: automatic
    _input: Optional[Kernel] = None
    _statistics: dict = field(default_factory=dict)
    _variances: dict = field(default_factory=dict)
    _derived: dict = field(default_factory=dict)

    def with_base(self, base: BaseKernel) -> "KernelContext":
        """The same context with another base kernel (e.g. the next gamma of a search); the
        base kernel's parameter-free pairwise statistics are shared, not recomputed."""
        return replace(self, base=base, _input=None, _variances={})

    def record_variances(self, block: "Block", nodes: Tensor, values: Tensor) -> None:
        """Keep ``K_xx`` on ``nodes`` of ``block``'s input, as a pair evaluation found it."""
        if values.numel() and float(values.min()) < -psd_tolerance(values.dtype, 1) * max(float(values.abs().max()), torch.finfo(values.dtype).tiny):
            raise KernelError(f"the kernel has a negative variance ({float(values.min()):.3g}) before an activation; it is not positive semi-definite")
        held = self._variances.get(id(block))
        if held is None:
            held = self._variances[id(block)] = values.new_full((self.num_nodes,), math.nan)
        held[nodes] = values

    def recorded_variances(self, block: "Block", nodes: Tensor) -> Tensor:
        """``K_xx`` on ``nodes`` of ``block``'s input from an earlier pair evaluation."""
        held = self._variances.get(id(block))
        values = None if held is None else held[nodes]
        if values is None or bool(torch.isnan(values).any()):
            raise KernelError("internal: a rectangular kernel block needs the variances of a pair evaluation first; use exact_kernel")
        return values

    def base_block(self, rows: Nodes, cols: Nodes) -> Tensor:
        """``C0[rows, cols]`` (``None`` = every node), from a cached pairwise statistic."""
        key = (self.base.statistic_name, id(rows), id(cols))
        cached = self._statistics.get(key)
        if cached is None or cached[0] is not rows or cached[1] is not cols:
            xa = self.features if rows is None else self.features[rows]
            xb = self.features if cols is None else self.features[cols]
            self._statistics.clear()  # hold one statistic at a time
            cached = (rows, cols, self.base.statistic(xa, xb, self.sparse_features if rows is None else None))
            self._statistics[key] = cached
        return self.base.from_statistic(cached[2])

    @property
    def sparse_features(self) -> Optional[Tensor]:
        """``X`` as a sparse CSR matrix when at most 10% of it is non-zero (bag-of-words
        features), for faster products with every node; else ``None``."""
        if "sparse" not in self._derived:
            x = self.features
            sparse = x.numel() > 0 and int(torch.count_nonzero(x)) <= 0.1 * x.numel()
            with sparse_beta_quiet():
                self._derived["sparse"] = x.to_sparse_csr() if sparse else None
        return self._derived["sparse"]

    @property
    def every_node(self) -> Tensor:
        """The ids of every node, one tensor per context and its copies (so the base kernel's
        statistic cached for it is found again, e.g. by the next gamma of a search)."""
        if "every_node" not in self._derived:
            self._derived["every_node"] = torch.arange(self.num_nodes, device=self.features.device)
        return self._derived["every_node"]

    @property
    def pair_limit(self) -> int:
        """The pair budget; automatically ``min(4e7, N^2 (0.1 + d / 1e4))`` for ``d`` features:
        about what one square evaluation over every node costs (the features' Gram matrix and
        the layers), in pair terms, as measured on Cora and CiteSeer; beyond it that is cheaper."""
        if self.pair_budget is not None:
            return self.pair_budget
        n, d = self.features.shape
        return int(min(40_000_000, n * n * (0.1 + d / 1e4)))

    @property
    def low_rank(self) -> bool:
        return self.landmarks is not None

    @property
    def num_nodes(self) -> int:
        return self.features.size(0)

    def input_kernel(self, nodes: Nodes, cols: Nodes = None) -> Kernel:
        """``C0[nodes, cols]`` (exact), or its Nystrom root ``Q0`` on every node (low rank).

        Low rank, linear ``C0`` with no more features than landmarks: ``Q0 = X`` exactly.
        """
        if not self.low_rank:
            x = self.features if nodes is None else self.features[nodes]
            if self.base.is_linear:
                return Kernel(nodes, root=x, cols=cols)
            return Kernel(nodes, matrix=self.base_block(nodes, nodes if cols is None else cols), cols=cols)
        if self._input is None:
            x = self.features
            if self.base.is_linear and self.landmarks.numel() >= x.size(1):
                self._input = Kernel(None, root=x)
            else:
                cross = self.base_block(None, self.landmarks)
                self._input = Kernel(None, root=nystrom_root(cross, self.landmarks, "input layer"))
        return self._input


def nystrom_root(cross: Tensor, landmarks: Tensor, where: str) -> Tensor:
    """``chol(C) = C[:, a] C[a, a]^{-1/2}`` from ``cross = C[:, a]``.

    Symmetric eigendecomposition ``C[a, a] = V D V^T``; eigenvalues are clamped at 0 and
    those below ``1e-4`` times the largest get the smoothed inverse ``sqrt(D) / (1e-4 D_max)``
    rather than being dropped. Landmark rows are ``V sqrt(D)`` exactly, so ``Q[a] Q[a]^T``
    reproduces ``C[a, a]``. Raises :class:`KernelError` if ``C[a, a]`` is indefinite beyond
    round-off.
    """
    block = cross[landmarks]
    block = (block + block.T) / 2
    eigvals, eigvecs = torch.linalg.eigh(block)
    top = eigvals[-1].clamp_min(0)
    if not bool(torch.isfinite(eigvals).all()):
        raise KernelError(f"{where}: the kernel on the landmarks has NaN or infinite entries; check the features and sigmas")
    if eigvals[0] < -psd_tolerance(block.dtype, block.size(0)) * max(float(top), torch.finfo(block.dtype).tiny):
        raise KernelError(
            f"{where}: the kernel is not positive semi-definite (eigenvalue {float(eigvals[0]):.3g} vs largest {float(top):.3g}); "
            "use a positive semi-definite base kernel (e.g. kernel.base.name=linear) or float64"
        )
    sqrt_d = eigvals.clamp_min(0).sqrt()
    floor = torch.clamp_min(top * 1e-4, torch.finfo(block.dtype).tiny)
    smoothed_inv = sqrt_d / eigvals.clamp_min(floor)
    others = torch.ones(cross.size(0), dtype=torch.bool, device=cross.device)
    others[landmarks] = False
    root = torch.empty_like(cross)
    root[others] = (cross[others] @ eigvecs) * smoothed_inv
    root[landmarks] = eigvecs * sqrt_d
    return root


def check_kernel(k: Kernel, where: str) -> None:
    """Fail loudly (never silently NaN) if a layer's kernel is not a covariance."""
    values = k.root if k.root is not None else k.matrix
    if values.numel() and not (math.isfinite(float(values.amax())) and math.isfinite(float(values.amin()))):  # NaN propagates; no temporaries
        raise KernelError(f"{where}: the kernel has NaN or infinite entries; lower the sigmas or the depth, or use dtype=float64")
    if k.matrix is None or not k.square:  # a rectangular block's variances are checked by the pair evaluation
        return
    diag = torch.diagonal(k.matrix)
    scale = float(diag.abs().max()) if diag.numel() else 0.0
    tol = psd_tolerance(k.matrix.dtype, k.size) * max(scale, torch.finfo(k.matrix.dtype).tiny)
    if float(diag.min()) < -tol:
        raise KernelError(f"{where}: the kernel has a negative variance ({float(diag.min()):.3g}); it is not positive semi-definite")
    s = diag.clamp_min(0).sqrt()
    excess = (k.matrix.abs() - s[:, None] * s[None, :]).max()
    if float(excess) > tol:
        raise KernelError(f"{where}: the kernel breaks |K_xy| <= sqrt(K_xx K_yy) by {float(excess):.3g}; it is not positive semi-definite")


def union(sets: Sequence[Nodes]) -> Nodes:
    real = [s for s in sets if s is not None]
    if len(real) < len(sets):
        return None
    return torch.unique(torch.cat(real)) if real else None


def node_count(nodes: Nodes, ctx: KernelContext) -> int:
    return ctx.num_nodes if nodes is None else nodes.numel()


class Block:
    """A network operation and its kernel operation. ``support(nodes)`` says which input
    nodes the output on ``nodes`` depends on; ``__call__(k, ctx, nodes, cols)`` maps the input
    kernel ``k`` (held on the support of the rows and of the columns) to the output kernel
    on the rows ``nodes`` and the columns ``cols`` (a subset of the rows; ``None``: square)."""

    def support(self, nodes: Nodes, ctx: KernelContext) -> Nodes:
        return nodes

    def peak_elements(self, nodes: Nodes, ctx: KernelContext, cols: Nodes = None) -> int:
        """Largest dense matrix (entries) this block may hold in exact mode."""
        return node_count(nodes, ctx) * node_count(nodes if cols is None else cols, ctx)

    def __call__(self, k: Optional[Kernel], ctx: KernelContext, nodes: Nodes, cols: Nodes = None) -> Kernel:
        raise NotImplementedError

    def network(self, h: Tensor, sim: "NetworkSample") -> Tensor:
        """The finite-width network operation on hidden features ``h`` (nodes x width)."""
        raise NotImplementedError

    # Evaluation on a pair set (see .pairs). The input ``k`` is a full-node root ``Kernel``
    # while the network is linear, else ``PairValues``.
    def pair_support(self, pairs: Pairs, ctx: KernelContext) -> Optional[Pairs]:
        """The input pairs the output on ``pairs`` depends on (``None``: no input needed)."""
        return pairs

    def root_form(self, root_in: bool, ctx: KernelContext) -> bool:
        """Whether the output is a full-node root, given whether the input is."""
        return root_in

    def on_pairs(self, k, ctx: KernelContext, pairs: Pairs):
        raise NotImplementedError


@dataclass
class NetworkSample:
    """One random finite-width network: i.i.d. Gaussian weights of the blocks' variances.
    ``inputs`` is the Gaussian input layer, shared by every ``Input`` block of the network."""

    inputs: Tensor
    adjacency: Adjacency
    width: int
    generator: torch.Generator

    def gaussian(self, rows: int, cols: int) -> Tensor:
        return torch.randn(rows, cols, generator=self.generator, dtype=self.inputs.dtype)


class Input(Block):
    """``X <- X0``: ``K <- C0``; low rank ``Q <- chol(C0)``."""

    def support(self, nodes, ctx):
        return torch.empty(0, dtype=torch.long, device=ctx.features.device)

    def peak_elements(self, nodes, ctx, cols=None):
        return 0 if ctx.base.is_linear else super().peak_elements(nodes, ctx, cols)

    def __call__(self, k, ctx, nodes, cols=None):
        return ctx.input_kernel(nodes, cols)

    def network(self, h, sim):
        return sim.inputs

    def pair_support(self, pairs, ctx):
        return None

    def root_form(self, root_in, ctx):
        return ctx.base.is_linear

    def on_pairs(self, k, ctx, pairs):
        if ctx.base.is_linear:
            return Kernel(None, root=ctx.features)
        return PairValues(pairs, base_on_pairs(ctx, pairs))


@dataclass
class Scale(Block):
    """``X <- c X``: ``K <- c^2 K``; low rank ``Q <- c Q``. A weight ``X W`` with
    ``W ~ N(0, s_w^2 / d)`` is ``Scale(s_w)``."""

    factor: float

    def peak_elements(self, nodes, ctx, cols=None):
        return 0

    def __call__(self, k, ctx, nodes, cols=None):
        if self.factor == 1:
            return k
        if k.root is not None:
            return replace(k, root=k.root * self.factor)
        return replace(k, matrix=k.matrix * self.factor ** 2)

    def network(self, h, sim):
        return h * self.factor

    def on_pairs(self, k, ctx, pairs):
        if isinstance(k, Kernel):
            return Kernel(None, root=k.root * self.factor)
        return PairValues(k.pairs, k.values * self.factor ** 2)


class Weight(Scale):
    """``X <- X W``, ``W_ij ~ N(0, sigma_w^2 / d)``: ``K <- sigma_w^2 K``; low rank ``sigma_w Q``."""

    def __init__(self, sigma_w: float):
        super().__init__(sigma_w)

    def network(self, h, sim):
        return h @ sim.gaussian(h.size(1), sim.width) * (self.factor / math.sqrt(h.size(1)))


class MixedWeight(Scale):
    """``X <- X (a I + b W)``: ``K <- (a^2 + b^2 sigma_w^2) K``; low rank ``sqrt(a^2 + b^2 sigma_w^2) Q``."""

    def __init__(self, a: float, b: float, sigma_w: float):
        super().__init__(math.sqrt(a * a + b * b * sigma_w * sigma_w))
        self.a, self.b, self.sigma_w = a, b, sigma_w

    def network(self, h, sim):
        return self.a * h + h @ sim.gaussian(h.size(1), h.size(1)) * (self.b * self.sigma_w / math.sqrt(h.size(1)))


@dataclass
class Bias(Block):
    """``X <- X + b``, ``b ~ N(0, s_b^2)``: ``K <- K + s_b^2 11^T``; low rank ``[Q, s_b 1]``."""

    sigma_b: float

    def peak_elements(self, nodes, ctx, cols=None):
        return 0

    def __call__(self, k, ctx, nodes, cols=None):
        if self.sigma_b == 0:
            return k
        if k.root is not None:
            column = torch.full((k.size, 1), self.sigma_b, dtype=k.root.dtype, device=k.root.device)
            return replace(k, root=torch.cat([k.root, column], dim=1))
        return replace(k, matrix=k.matrix + self.sigma_b ** 2)

    def network(self, h, sim):
        return h + self.sigma_b * sim.gaussian(1, h.size(1)) if self.sigma_b else h

    def on_pairs(self, k, ctx, pairs):
        if isinstance(k, Kernel):
            return self(k, ctx, None)
        return PairValues(k.pairs, k.values + self.sigma_b ** 2) if self.sigma_b else k


class Conv(Block):
    """``X <- A X``: ``K <- A K A^T``; low rank ``Q <- A Q``. ``A`` is the context's adjacency
    (:meth:`operator` names another, e.g. H2GCN's hop operators)."""

    def operator(self, adjacency: Adjacency) -> Adjacency:
        """The sparse operator this convolution applies, given the graph's normalised adjacency."""
        return adjacency

    def support(self, nodes, ctx):
        return None if nodes is None else self.operator(ctx.adjacency).neighbours(nodes)

    def peak_elements(self, nodes, ctx, cols=None):
        return node_count(nodes, ctx) * node_count(self.support(nodes if cols is None else cols, ctx), ctx)

    def __call__(self, k, ctx, nodes, cols=None):
        op = self.operator(ctx.adjacency)
        if nodes is None:
            if k.root is None:
                raise KernelError("a dense kernel over every node is not supported; use the exact mode with node sets")
            return Kernel(None, root=op.matmul(k.root))
        a = op.block(nodes, k.nodes)
        if k.root is not None:
            return Kernel(nodes, root=torch.sparse.mm(a, k.root), cols=cols)
        half = torch.sparse.mm(a, k.matrix)  # A[nodes] K, |nodes| x |input columns|
        if cols is None:
            return Kernel(nodes, matrix=torch.sparse.mm(a, half.T.contiguous()))  # A (A K)^T = A K A^T
        a_cols = op.block(cols, k.nodes if k.cols is None else k.cols)
        return Kernel(nodes, matrix=torch.sparse.mm(a_cols, half.T.contiguous()).T, cols=cols)  # (A_c (A_r K)^T)^T

    def network(self, h, sim):
        return self.operator(sim.adjacency).matmul(h)

    def pair_support(self, pairs, ctx):
        _, j, k, _ = conv_terms(pairs, ctx, self.operator(ctx.adjacency))
        return Pairs.make(j, k, ctx.num_nodes)

    def on_pairs(self, k, ctx, pairs):
        op = self.operator(ctx.adjacency)
        if isinstance(k, Kernel):
            return Kernel(None, root=op.matmul(k.root))
        pair_id, j, kk, w = conv_terms(pairs, ctx, op)
        out = torch.zeros(len(pairs), dtype=k.values.dtype, device=k.values.device)
        out.index_add_(0, pair_id, w * k.values[k.pairs.lookup(j, kk, ctx.num_nodes)])
        return PairValues(pairs, out)


class ReLU(Block):
    """``X <- relu(X)``: ``K <- g(K)``; low rank ``Q <- chol(g(Q Q^T))`` on the landmarks."""

    def __call__(self, k, ctx, nodes, cols=None):
        if ctx.low_rank:
            q = k.root
            var = (q * q).sum(1)
            cross = relu_expectation(q @ q[ctx.landmarks].T, var, var[ctx.landmarks])
            return Kernel(None, root=nystrom_root(cross, ctx.landmarks, "activation"))
        if k.root is not None or k.square:
            var = k.diagonal().clone()
        else:
            var = ctx.recorded_variances(self, k.nodes)
        var_cols = var if k.square else var[k.positions(k.cols)]
        return Kernel(k.nodes, matrix=relu_expectation(k.dense(), var, var_cols), cols=k.cols)

    def network(self, h, sim):
        return torch.relu(h)

    def pair_support(self, pairs, ctx):
        return pairs.with_diagonal(ctx.num_nodes)

    def root_form(self, root_in, ctx):
        return False

    def on_pairs(self, k, ctx, pairs):
        n = ctx.num_nodes
        support = self.pair_support(pairs, ctx)
        values = root_on_pairs(k.root, support) if isinstance(k, Kernel) else k.on(support, n)
        diagonal = support.rows == support.cols
        ctx.record_variances(self, support.rows[diagonal], values[diagonal])
        cov = values[support.lookup(pairs.rows, pairs.cols, n)]
        var_rows = values[support.lookup(pairs.rows, pairs.rows, n)]
        var_cols = values[support.lookup(pairs.cols, pairs.cols, n)]
        return PairValues(pairs, relu_expectation_entries(cov, var_rows, var_cols))


class Serial(Block):
    """Blocks applied in order, as in the network: ``Serial(f, g)(X) = g(f(X))``.
    A named serial (e.g. ``"layer 2"``) checks that its output is a valid covariance."""

    def __init__(self, *blocks: Block, name: Optional[str] = None):
        self.blocks = [b for b in blocks if b is not None]
        self.name = name

    def _plan(self, nodes: Nodes, cols: Nodes, ctx: KernelContext) -> list[tuple[Nodes, Nodes]]:
        """The rows and columns each block must output, first block first."""
        wanted = [(nodes, cols)]
        for block in reversed(self.blocks[1:]):
            rows, columns = wanted[-1]
            wanted.append((block.support(rows, ctx), None if columns is None else block.support(columns, ctx)))
        return wanted[::-1]

    def support(self, nodes, ctx):
        for block in reversed(self.blocks):
            nodes = block.support(nodes, ctx)
        return nodes

    def peak_elements(self, nodes, ctx, cols=None):
        return max((b.peak_elements(r, ctx, c) for b, (r, c) in zip(self.blocks, self._plan(nodes, cols, ctx))), default=0)

    def __call__(self, k, ctx, nodes, cols=None):
        plan = self._plan(nodes, cols, ctx)
        for i, (block, (rows, columns)) in enumerate(zip(self.blocks, plan)):
            if k is not None:  # the previous block's planned output is this block's support
                need = plan[i - 1] if i else (block.support(rows, ctx), None if columns is None else block.support(columns, ctx))
                k = k.restrict(*need)
            k = block(k, ctx, rows, columns)
        if self.name is not None:
            check_kernel(k, self.name)
        return k

    def network(self, h, sim):
        for block in self.blocks:
            h = block.network(h, sim)
        return h

    def pair_support(self, pairs, ctx):
        for block in reversed(self.blocks):
            if pairs is None:
                return None
            pairs = block.pair_support(pairs, ctx)
        return pairs

    def root_form(self, root_in, ctx):
        for block in self.blocks:
            root_in = block.root_form(root_in, ctx)
        return root_in

    def on_pairs(self, k, ctx, pairs):
        # which blocks receive a root (no pairs needed), then the pairs each must output
        root_in, forms = k is None or isinstance(k, Kernel), []
        for block in self.blocks:
            forms.append(root_in)
            root_in = block.root_form(root_in, ctx)
        wanted = [pairs]
        for block, block_root_in in zip(reversed(self.blocks[1:]), reversed(forms[1:])):
            wanted.append(None if block_root_in or wanted[-1] is None else block.pair_support(wanted[-1], ctx))
        for block, out_pairs in zip(self.blocks, reversed(wanted)):
            k = block.on_pairs(k, ctx, out_pairs if out_pairs is not None else pairs)
        return k


class Add(Block):
    """Independent addition ``X <- f1(X) + f2(X)``: ``K <- K1 + K2``; low rank ``[Q1, Q2]``."""

    def __init__(self, *branches: Block):
        self.branches = branches

    def support(self, nodes, ctx):
        return union([b.support(nodes, ctx) for b in self.branches])

    def peak_elements(self, nodes, ctx, cols=None):
        return max(b.peak_elements(nodes, ctx, cols) for b in self.branches)

    def __call__(self, k, ctx, nodes, cols=None):
        def branch_input(branch: Block) -> Optional[Kernel]:
            if k is None:
                return None
            return k.restrict(branch.support(nodes, ctx), None if cols is None else branch.support(cols, ctx))

        parts = [branch(branch_input(branch), ctx, nodes, cols) for branch in self.branches]
        if all(p.root is not None for p in parts):
            return Kernel(parts[0].nodes, root=torch.cat([p.root for p in parts], dim=1), cols=cols)
        total = parts[0].dense()
        for p in parts[1:]:
            total = total + p.dense()
        return Kernel(parts[0].nodes, matrix=total, cols=cols)

    def network(self, h, sim):
        return sum(branch.network(h, sim) for branch in self.branches)

    def pair_support(self, pairs, ctx):
        parts = [p for p in (b.pair_support(pairs, ctx) for b in self.branches) if p is not None]
        return Pairs.union(parts, ctx.num_nodes) if parts else None

    def root_form(self, root_in, ctx):
        return all(b.root_form(root_in, ctx) for b in self.branches)

    def on_pairs(self, k, ctx, pairs):
        parts = [b.on_pairs(k, ctx, pairs) for b in self.branches]
        if all(isinstance(p, Kernel) for p in parts):
            return Kernel(None, root=torch.cat([p.root for p in parts], dim=1))
        return PairValues(pairs, sum(root_on_pairs(p.root, pairs) if isinstance(p, Kernel) else p.on(pairs, ctx.num_nodes) for p in parts))


def pair_diagonal(network: Block, ctx: KernelContext) -> Tensor:
    """``diag K`` on every node by pair evaluation on the nodes' local neighbourhoods; it also
    records each activation's input variances in ``ctx``. Raises :class:`PatternTooLarge` when a
    graph convolution needs more terms than ``ctx.pair_limit``."""
    out = network.on_pairs(None, ctx, Pairs.diagonal(ctx.every_node))
    if isinstance(out, Kernel):
        return (out.root * out.root).sum(1)
    return out.values


def exact_kernel(
    network: Block, ctx: KernelContext, rows: Tensor, cols: Tensor,
    before_square: Callable[[Tensor], None] = lambda nodes: None,
) -> tuple[Kernel, Tensor]:
    """``K[rows, cols]`` (``cols`` a subset of ``rows``) and ``diag K`` on every node, exactly.

    The pair evaluation gives the diagonal and the activations' input variances, so the
    node-set evaluation only forms rectangular blocks: the supports of ``rows`` by those of
    ``cols``. When ``rows`` are every node, or the pair evaluation would exceed the pair limit
    (a deep network, or a small graph where it costs more), one square evaluation over every
    node gives both, after ``before_square(nodes)`` (e.g. a memory check that raises).
    """
    if rows.numel() < ctx.num_nodes:
        try:
            diagonal = pair_diagonal(network, ctx)
            return network(None, ctx, rows, cols), diagonal
        except PatternTooLarge:
            pass
    everything = ctx.every_node
    before_square(everything)
    full = network(None, ctx, everything)
    return full.restrict(rows, cols), full.diagonal()
