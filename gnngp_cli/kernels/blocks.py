"""Kernel building blocks (the paper's Table 3), each written once for both backings.

A block maps a :class:`~.value.Kernel` to a kernel. In exact mode (``ctx.landmarks is None``)
a root is an exact factor (e.g. the linear input ``X``), kept until a nonlinearity needs the
matrix, and every block works only on the rows and columns that the prediction needs: a graph
convolution widens each set to the graph neighbours, nothing else does. In step with these
node sets the same network runs on a pair set that holds the diagonal of every node (see
:mod:`.pairs`); each kernel value carries those pair values, so a ReLU on a rectangular block
reads its rows' variances from its input. In low-rank mode the root is the recursive Nystrom
factor ``Q`` over all nodes, and the activation re-factorises it on the landmark nodes, so no
N x N matrix is ever formed. The root's operations go through ``ctx.roots`` (see :mod:`.torch_roots`),
so the same blocks run on a tensor in this process or on row blocks of a Dask cluster.

| block                | network          | kernel               | low rank                   |
|----------------------|------------------|----------------------|----------------------------|
| Input                | X <- X0          | K <- C0              | Q <- chol(C0)              |
| Bias(s_b)            | X + b            | K + s_b^2 11^T       | [Q, s_b 1]                 |
| Scale(c) / Weight    | c X / X W        | c^2 K / s_w^2 K      | c Q / s_w Q                |
| MixedWeight(a, b)    | X (a I + b W)    | (a^2 + b^2 s_w^2) K  | sqrt(a^2 + b^2 s_w^2) Q    |
| Conv                 | A X              | A K A^T              | A Q                        |
| ReLU                 | relu(X)          | g(K)                 | chol(g(Q Q^T)) on landmarks|
| Add(f1, f2)          | f1(X) + f2(X)    | K1 + K2              | [Q1, Q2]                   |
| Product(f1, f2)      | f1(X) o f2(X)    | K1 o K2              | chol(Q1Q1^T o Q2Q2^T) (Nys)|

What a new block implements, and why:

- ``__call__(k, ctx, nodes, cols)`` (always): the kernel operation on the node sets, for a
  matrix and for a root (low rank: ``nodes is None``, a root over every node).
- ``on_pairs(k, ctx, pairs)`` (always): the same operation on a pair set, for the diagonal of
  every node that the exact prediction needs.
- ``support(nodes, ctx)`` and ``pair_support(pairs, ctx)``: only when the output on a node (a
  pair) reads other nodes (pairs) of the input, as a graph convolution does; the defaults say
  "the same nodes". ``root_form``: only when the output stops being a root while the input is
  one (a nonlinearity) or becomes one from nothing (the input layer).
- ``peak_elements``: only when the block holds a dense matrix larger than its output (the memory
  check reads it).
- ``tangent_terms``: only when the block has parameters (a weight adds its own gradient's term,
  its output ``(None, OUTPUT)``; a mixed weight ``(Scale(b s_w), KERNEL)``) or its tangent rule is
  not its own operation on ``Theta`` (the input layer: none). A nonlinearity overrides ``tangent`` and ``tangent_on_pairs`` (the ReLU: ``g'(K) o Theta``).
  :class:`Tangent` runs a network with these rules and outputs its neural tangent kernel.

``Serial`` and ``Add`` compose blocks; they plan each block's node and pair sets and run both
evaluations in step (:meth:`Block.evaluate`), so they need neither ``on_pairs`` nor more.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import torch
from torch import Tensor

from ..graph.operators import Adjacency
from ..errors import ConfigError, KernelError
from ..progress import within
from . import layers
from .activations import RELU, Activation
from .context import KernelContext
from .numerics import psd_tolerance
from .pairs import Pairs, PairValues, conv_terms, root_on_pairs
from .value import Kernel, Nodes


TANGENT, KERNEL, OUTPUT = "tangent", "kernel", "output"   # what a term of a tangent rule reads (Block.tangent_terms)


def union(sets: Sequence[Nodes]) -> Nodes:
    real = [s for s in sets if s is not None]
    if len(real) < len(sets):
        return None
    return torch.unique(torch.cat(real)) if real else None


def is_constant(value, constant: float) -> bool:
    """Whether a block parameter is the plain number ``constant`` (a tensor parameter, e.g. one
    being fitted, never is: its block must stay in the autograd graph)."""
    return not isinstance(value, Tensor) and value == constant


def node_count(nodes: Nodes, ctx: KernelContext) -> int:
    return ctx.num_nodes if nodes is None else nodes.numel()


class Block:
    """A network operation and its kernel operation. ``support(nodes)`` says which input
    nodes the output on ``nodes`` depends on; ``__call__(k, ctx, nodes, cols)`` maps the input
    kernel ``k`` (held on the support of the rows and of the columns) to the output kernel
    on the rows ``nodes`` and the columns ``cols`` (a subset of the rows; ``None``: square)."""

    propagates = False   # reads the graph (a convolution, a filter): a node's output depends on its neighbours'

    def layer(self, shape: "layers.Shape") -> "layers.Layer":
        """This block's network operation at a finite width (:mod:`.layers`): the layer of the
        wide random network whose infinite-width kernel this block's kernel map is."""
        raise ConfigError(f"the block {type(self).__name__} has no finite layer, so its composition has no network to check")

    def evaluate(self, k: Optional[Kernel], ctx: KernelContext, nodes: Nodes, cols: Nodes = None,
                 pairs: Optional[Pairs] = None) -> Kernel:
        """``__call__`` on the node sets and, with ``pairs``, ``on_pairs`` on the pair values
        that ``k`` carries: the output carries its own pair values (or none)."""
        out = self(k, ctx, nodes, cols)
        carried = self.on_pairs(None if k is None else k.pairs, ctx, pairs) if pairs is not None else None
        out = replace(out, pairs=carried)
        if not ctx.tangent:
            return out
        theta = self.tangent(k, out, ctx, nodes, cols)
        if pairs is not None:
            theta = replace(theta, pairs=self.tangent_on_pairs(k, out, ctx, pairs))
        return replace(out, tangent=theta)

    def evaluate_taken(self, box: list, ctx: KernelContext) -> Kernel:
        """:meth:`evaluate` over every node without pairs, on an input that the list ``box`` alone
        holds (emptied here). A low-rank tangent evaluation through a block whose tangent rule is
        its own operation on ``Theta`` (a graph convolution, a bias, a scaling) releases the input's
        root once the output's is made, before the tangent's: three ``N x r`` roots alive, not four
        (the peak of a Reddit-sized tangent kernel). Any other block evaluates as usual."""
        k = box.pop()
        if not (ctx.tangent and separable(self) and k.tangent is not None) or frozen(self, ctx):
            return self.evaluate(k, ctx, None)
        theta_in = k.tangent
        out = self(k, ctx, None)
        if same_value(theta_in, k):   # Theta = K: its image is the output, computed once
            return replace(out, pairs=None, tangent=Kernel(out.nodes, matrix=out.matrix, root=out.root))
        del k   # the input's root goes, unless the output is it
        theta = self(theta_in, ctx, None)
        del theta_in
        return replace(out, pairs=None, tangent=Kernel(theta.nodes, matrix=theta.matrix, root=theta.root))

    # The tangent kernel (see Tangent): ``Theta`` beside ``K``, on the same node and pair sets.
    def tangent_terms(self) -> list[tuple["Block", str]]:
        """The block's tangent rule, as terms summed: ``(f, TANGENT)`` is ``f`` applied to the
        incoming tangent kernel, ``(f, KERNEL)`` to the incoming NNGP kernel (the gradient of
        the block's own parameters), ``(None, OUTPUT)`` the block's own output ``K`` (a weight's
        gradient term, ``s_w^2 K_in``, is what the weight outputs: read, not computed again). The
        default, ``Theta <- f(Theta)``, is a block without parameters (``A Theta A^T``, ``c^2 Theta``)
        or a bias (``Theta + s_b^2``: its gradient adds what it adds to ``K``). A weight adds its
        NNGP term, an input layer has no terms (0)."""
        return [(self, TANGENT)]

    def frozen_terms(self) -> list[tuple["Block", str]]:
        """The tangent rule with this block's own parameters not trained: what it does to the
        incoming ``Theta`` alone (a block without parameters: its rule)."""
        return self.tangent_terms()

    def rule(self, ctx: KernelContext) -> list[tuple["Block", str]]:
        """:meth:`tangent_terms`, or :meth:`frozen_terms` where ``ctx.trained`` leaves this block out."""
        return self.frozen_terms() if frozen(self, ctx) else self.tangent_terms()

    def tangent(self, k: Kernel, out: Kernel, ctx: KernelContext, nodes: Nodes, cols: Nodes = None) -> Kernel:
        """``Theta`` on the node sets, by :meth:`tangent_terms` (``out``: this block's ``K``)."""
        parts = [out if source == OUTPUT or (f is self and source == TANGENT and same_value(k.tangent, k))   # Theta = K: f(Theta) is the output
                 else f(k.tangent if source == TANGENT else k, ctx, nodes, cols) for f, source in self.rule(ctx)]
        return sum_kernels(parts, ctx, cols) if parts else zero_like(out)

    def tangent_on_pairs(self, k: Optional[Kernel], out: Kernel, ctx: KernelContext, pairs: Pairs):
        """``Theta`` on ``pairs``, by :meth:`tangent_terms`, from the pair values ``k`` and its
        tangent carry."""
        parts = [out.pairs if source == OUTPUT else f.on_pairs(k.tangent.pairs if source == TANGENT else k.pairs, ctx, pairs)
                 for f, source in self.rule(ctx)]
        return _add_pair_values(parts, ctx, pairs) if parts else zero_like(out.pairs)

    def support(self, nodes: Nodes, ctx: KernelContext) -> Nodes:
        return nodes

    def peak_elements(self, nodes: Nodes, ctx: KernelContext, cols: Nodes = None) -> int:
        """Largest dense matrix (entries) this block may hold in exact mode."""
        return node_count(nodes, ctx) * node_count(nodes if cols is None else cols, ctx)

    def __call__(self, k: Optional[Kernel], ctx: KernelContext, nodes: Nodes, cols: Nodes = None) -> Kernel:
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

    def plan_pairs(self, root_in: bool, ctx: KernelContext, pairs: Pairs) -> None:
        """Form, as :meth:`evaluate` on ``pairs`` would, every pair set inside this block (a
        leaf has none of its own: its parent plans its input pairs); raises
        :class:`~.pairs.PatternTooLarge` where the evaluation would, before any block runs."""


class Input(Block):
    """``X <- X0``: ``K <- C0``; low rank ``Q <- chol(C0)``."""

    def support(self, nodes, ctx):
        return torch.empty(0, dtype=torch.long, device=ctx.device)

    def peak_elements(self, nodes, ctx, cols=None):
        return 0 if ctx.base.is_linear and not ctx.dense_input else super().peak_elements(nodes, ctx, cols)

    def __call__(self, k, ctx, nodes, cols=None):
        return ctx.input_kernel(nodes, cols)

    def pair_support(self, pairs, ctx):
        return None

    def root_form(self, root_in, ctx):
        return ctx.base.is_linear

    def on_pairs(self, k, ctx, pairs):
        if ctx.base.is_linear:
            return Kernel(None, root=ctx.features)
        return PairValues(pairs, ctx.base_on_pairs(pairs))

    def tangent_terms(self):
        return []   # no parameters before the input layer: Theta = 0

    def layer(self, shape):
        return layers.InputLayer(shape)


@dataclass
class Scale(Block):
    """``X <- c X``: ``K <- c^2 K``; low rank ``Q <- c Q``. A weight ``X W`` with
    ``W ~ N(0, s_w^2 / d)`` is ``Scale(s_w)``. Parameters may be 0-dimensional tensors (fitted
    by marginal likelihood; see :mod:`gnngp_cli.gp.mll`), as in :class:`Bias` and :class:`MixedWeight`."""

    factor: float

    def peak_elements(self, nodes, ctx, cols=None):
        return 0

    def __call__(self, k, ctx, nodes, cols=None):
        if is_constant(self.factor, 1):
            return k
        if k.root is not None:
            return replace(k, root=k.root * self.factor)
        return replace(k, matrix=k.matrix * self.factor ** 2)

    def on_pairs(self, k, ctx, pairs):
        if isinstance(k, Kernel):
            return Kernel(None, root=k.root * self.factor)
        return PairValues(k.pairs, k.values * self.factor ** 2)

    def layer(self, shape):
        return layers.ScaleLayer(self.factor, shape)


class Weight(Scale):
    """``X <- X W``, ``W_ij ~ N(0, sigma_w^2 / d)``: ``K <- sigma_w^2 K``; low rank ``sigma_w Q``."""

    def __init__(self, sigma_w: float):
        super().__init__(sigma_w)

    def tangent_terms(self):
        """``Theta <- s_w^2 Theta + s_w^2 K``: the incoming tangent kernel, and the weight's own
        gradient, which is the weight's output."""
        return [(self, TANGENT), (None, OUTPUT)]

    def frozen_terms(self):
        return [(self, TANGENT)]

    def layer(self, shape):
        return layers.owned(layers.WeightLayer(self.factor, shape), self)


class MixedWeight(Scale):
    """``X <- X (a I + b W)``: ``K <- (a^2 + b^2 sigma_w^2) K``; low rank ``sqrt(a^2 + b^2 sigma_w^2) Q``."""

    def __init__(self, a: float, b: float, sigma_w: float):
        square = a * a + b * b * sigma_w * sigma_w
        super().__init__(square.sqrt() if isinstance(square, Tensor) else math.sqrt(square))
        self.a, self.b, self.sigma_w = a, b, sigma_w

    def tangent_terms(self):
        """``Theta <- (a^2 + b^2 s_w^2) Theta + b^2 s_w^2 K`` (the identity part has no parameter)."""
        return [(Scale(self.factor), TANGENT), (Scale(self.b * self.sigma_w), KERNEL)]

    def frozen_terms(self):
        return [(Scale(self.factor), TANGENT)]

    def layer(self, shape):
        return layers.owned(layers.MixedWeightLayer(self.a, self.b, self.sigma_w, shape), self)


@dataclass
class Bias(Block):
    """``X <- X + b``, ``b ~ N(0, s_b^2)``: ``K <- K + s_b^2 11^T``; low rank ``[Q, s_b 1]``."""

    sigma_b: float

    def peak_elements(self, nodes, ctx, cols=None):
        return 0

    def __call__(self, k, ctx, nodes, cols=None):
        if is_constant(self.sigma_b, 0):
            return k
        if k.root is not None:
            return replace(k, root=ctx.roots.with_constant(k.root, self.sigma_b))
        return replace(k, matrix=k.matrix + self.sigma_b ** 2)

    def on_pairs(self, k, ctx, pairs):
        if isinstance(k, Kernel):
            return self(k, ctx, None)
        return k if is_constant(self.sigma_b, 0) else PairValues(k.pairs, k.values + self.sigma_b ** 2)

    def frozen_terms(self):
        return [(Scale(1.0), TANGENT)]   # Theta unchanged: the bias's gradient is its own term

    def layer(self, shape):
        return layers.owned(layers.BiasLayer(self.sigma_b, shape), self)


class Conv(Block):
    """``X <- A X``: ``K <- A K A^T``; low rank ``Q <- A Q``. ``A`` is the context's adjacency
    (:meth:`operator` names another, e.g. H2GCN's hop operators)."""

    propagates = True

    def operator(self, adjacency: Adjacency) -> Adjacency:
        """The sparse operator this convolution applies, given the graph's normalised adjacency."""
        return adjacency

    def dense_operator(self, graph: Any) -> Tensor:
        """The same operator on a small graph, dense (the check graph's, :mod:`.layers`)."""
        return graph.dense()

    def layer(self, shape):
        return layers.OperatorLayer(self.dense_operator, shape)

    def support(self, nodes, ctx):
        return None if nodes is None else self.operator(ctx.adjacency).neighbours(nodes)

    def peak_elements(self, nodes, ctx, cols=None):
        return node_count(nodes, ctx) * node_count(self.support(nodes if cols is None else cols, ctx), ctx)

    def __call__(self, k, ctx, nodes, cols=None):
        op = self.operator(ctx.adjacency)
        if nodes is None:
            if k.root is None:
                raise KernelError("a dense kernel over every node is not supported; use the exact mode with node sets")
            return Kernel(None, root=ctx.roots.convolve(op, k.root))
        a = op.block(nodes, k.nodes)
        if k.root is not None:
            return Kernel(nodes, root=torch.sparse.mm(a, k.root), cols=cols)
        with within("A K"):
            half = torch.sparse.mm(a, k.matrix)  # A[nodes] K, |nodes| x |input columns|
        with within("(A K) A^T"):
            half = half.T.contiguous()   # (A K)^T, the untransposed copy released before the product: one block fewer at the peak
            if cols is None:
                return Kernel(nodes, matrix=torch.sparse.mm(a, half))  # A (A K)^T = A K A^T
            a_cols = op.block(cols, k.nodes if k.cols is None else k.cols)
            return Kernel(nodes, matrix=torch.sparse.mm(a_cols, half).T, cols=cols)  # (A_c (A_r K)^T)^T

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


class Elementwise(Block):
    """``X <- phi(X)`` for an elementwise activation ``phi``: ``K <- g(K)``; low rank
    ``Q <- chol(g(Q Q^T))`` on the landmarks; its tangent kernel ``Theta <- g'(K) o Theta``.
    ``g`` and ``g'`` are the activation's Gaussian expectations (:class:`~.activations.Activation`),
    the only thing that tells one activation from another here and in the root operations."""

    activation: Activation = RELU

    def __init__(self, activation: Optional[Activation] = None):
        if activation is not None:
            self.activation = activation

    def layer(self, shape):
        return layers.ActivationLayer(self.activation.function, shape)

    def evaluate(self, k, ctx, nodes, cols=None, pairs=None):
        """As every block's; with a tangent kernel, ``K``'s block and pair moments are read once
        for ``g`` and ``g'`` (kept for this evaluation only; without, nothing is kept)."""
        self._memo = {} if ctx.tangent else None
        try:
            return super().evaluate(k, ctx, nodes, cols, pairs)
        finally:
            self._memo = None

    def _remember(self, key: tuple, compute):
        memo = getattr(self, "_memo", None)
        if memo is None:
            return compute()
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    def __call__(self, k, ctx, nodes, cols=None):
        if ctx.low_rank:
            return Kernel(None, root=ctx.roots.activation_root(k.root, ctx.landmarks, self.activation))
        moments = self._block_moments(k, ctx)
        if ctx.observe is not None:
            ctx.observe(self, moments[0])
        return Kernel(k.nodes, matrix=self.activation.expectation(*moments), cols=k.cols)

    def _block_moments(self, k: Kernel, ctx: KernelContext) -> tuple[Tensor, Tensor, Tensor]:
        """The input block ``K[rows, cols]`` and its variances on the rows and on the columns."""
        return self._remember(("block", id(k)), lambda: (k.dense(), *self._variances(k, ctx)))

    @staticmethod
    def _variances(k: Kernel, ctx: KernelContext) -> tuple[Tensor, Tensor]:
        """``K_xx`` on the rows and on the columns of the input block."""
        if k.root is not None or k.square:
            var = k.diagonal().clone()
        else:
            var = k.variances(k.nodes, ctx.num_nodes)
            if var is None:
                raise KernelError("internal: a rectangular kernel block needs the variances of a pair evaluation; use exact_kernel")
        return var, var if k.square else var[k.positions(k.cols)]

    def tangent(self, k, out, ctx, nodes, cols=None):
        """``Theta <- g'(K) o Theta`` (``g'``: the expectation of the activation's derivative; the
        ReLU's is the arc-cosine kernel of order 0); low rank the Nystrom root of ``g'(Q Q^T) o P P^T`` on the landmarks."""
        theta = k.tangent
        if ctx.low_rank:
            return Kernel(None, root=ctx.roots.activation_tangent_root(k.root, theta.root, ctx.landmarks, self.activation))
        if is_zero(theta):
            return zero_like(out)
        return Kernel(k.nodes, matrix=self.activation.derivative(*self._block_moments(k, ctx)) * theta.dense(), cols=k.cols)

    def fuses(self, following: Optional[Block], ctx: KernelContext, pairs: Optional[Pairs]) -> bool:
        """Whether this activation and the weight ``following`` it run as one step
        (:meth:`evaluate_with_weight`): low rank, with a tangent kernel, no pair set."""
        return ctx.low_rank and ctx.tangent and pairs is None and type(following) is Weight

    def evaluate_with_weight(self, k: Kernel, ctx: KernelContext, weight: "Weight", kernel: bool = True) -> Kernel:
        """Low rank with a tangent kernel, this activation then ``weight``: ``K <- s_w^2 g(K)`` and
        ``Theta <- s_w^2 (g'(K) o Theta + g(K))``, the weight's own term factorised with the activation's
        in one pass over ``Q Q[a]^T`` (``activation_roots``), so that ``P`` stays as wide as ``Q``
        (``[s_w P, s_w Q]`` side by side doubled it at every layer; at Reddit's size that passed the
        machine's memory). The same kernels as the two blocks one after the other, up to the
        Nystrom step: one root of the sum instead of the roots of its terms side by side. Without
        ``kernel`` (no block after the weight reads ``K``), ``Theta``'s root alone: the output
        carries no ``K`` (see :meth:`Serial._evaluate`)."""
        q, p = ctx.roots.activation_roots(k.root, k.tangent.root, ctx.landmarks, with_kernel=True, kernel_root=kernel, activation=self.activation)
        if q is None:
            return Kernel(None, tangent=Kernel(None, root=p if is_constant(weight.factor, 1) else p * weight.factor))
        if is_constant(weight.factor, 1):
            return Kernel(None, root=q, tangent=Kernel(None, root=p))
        if isinstance(q, Tensor) and not (q.requires_grad or p.requires_grad or isinstance(weight.factor, Tensor)):
            q.mul_(weight.factor)   # fresh roots, scaled where they lie: two more N x r copies were the peak at Reddit's size
            p.mul_(weight.factor)
            return Kernel(None, root=q, tangent=Kernel(None, root=p))
        return Kernel(None, root=q * weight.factor, tangent=Kernel(None, root=p * weight.factor))

    def pair_support(self, pairs, ctx):
        return pairs.with_diagonal(ctx.num_nodes)

    def root_form(self, root_in, ctx):
        return False

    def _pair_moments(self, k, ctx: KernelContext, pairs: Pairs) -> tuple[Tensor, Tensor, Tensor]:
        """``K`` on ``pairs``, and the variances of their rows and of their columns."""
        return self._remember(("pairs", id(k), id(pairs)), lambda: self._read_pair_moments(k, ctx, pairs))

    def _read_pair_moments(self, k, ctx: KernelContext, pairs: Pairs) -> tuple[Tensor, Tensor, Tensor]:
        n = ctx.num_nodes
        support = self.pair_support(pairs, ctx)
        values = root_on_pairs(k.root, support) if isinstance(k, Kernel) else k.on(support, n)
        check_variances(values[support.rows == support.cols])
        cov = values[support.lookup(pairs.rows, pairs.cols, n)]
        return cov, values[support.lookup(pairs.rows, pairs.rows, n)], values[support.lookup(pairs.cols, pairs.cols, n)]

    def on_pairs(self, k, ctx, pairs):
        return PairValues(pairs, self.activation.expectation_entries(*self._pair_moments(k, ctx, pairs)))

    def tangent_on_pairs(self, k, out, ctx, pairs):
        theta = k.tangent.pairs
        if is_zero(theta):
            return zero_like(out.pairs)
        values = root_on_pairs(theta.root, pairs) if isinstance(theta, Kernel) else theta.on(pairs, ctx.num_nodes)
        return PairValues(pairs, self.activation.derivative_entries(*self._pair_moments(k.pairs, ctx, pairs)) * values)


class ReLU(Elementwise):
    """``X <- relu(X)``: ``K <- g(K)``, ``g`` the arc-cosine kernel of order 1."""

    activation = RELU


class Serial(Block):
    """Blocks applied in order, as in the network: ``Serial(f, g)(X) = g(f(X))``.
    A named serial (e.g. ``"layer 2"``) checks that its output is a valid covariance."""

    def __init__(self, *blocks: Block, name: Optional[str] = None):
        self.blocks = [b for b in blocks if b is not None]
        self.name = name

    def layer(self, shape):
        return layers.SerialLayer(self.blocks, shape)

    def _plan(self, nodes: Nodes, cols: Nodes, ctx: KernelContext) -> list[tuple[Nodes, Nodes]]:
        """The rows and columns each block must output, first block first."""
        wanted = [(nodes, cols)]
        for block in reversed(self.blocks[1:]):
            rows, columns = wanted[-1]
            wanted.append((block.support(rows, ctx), None if columns is None else block.support(columns, ctx)))
        return wanted[::-1]

    def _forms(self, root_in: bool, ctx: KernelContext) -> list[bool]:
        """Whether each block's input is a full-node root, given whether this one's is."""
        forms = []
        for block in self.blocks:
            forms.append(root_in)
            root_in = block.root_form(root_in, ctx)
        return forms

    def _pair_plan(self, root_in: bool, ctx: KernelContext, pairs: Pairs) -> list[Pairs]:
        """The pairs each block must output, first block first. A block whose input is a
        full-node root needs no pairs (``None``): it gets ``pairs`` and returns a root."""
        wanted = [pairs]
        for block, block_root_in in zip(reversed(self.blocks[1:]), reversed(self._forms(root_in, ctx)[1:])):
            wanted.append(None if block_root_in or wanted[-1] is None else block.pair_support(wanted[-1], ctx))
        return [w if w is not None else pairs for w in reversed(wanted)]

    def plan_pairs(self, root_in, ctx, pairs):
        for block, form, wanted in zip(self.blocks, self._forms(root_in, ctx), self._pair_plan(root_in, ctx, pairs)):
            block.plan_pairs(form, ctx, wanted)

    def support(self, nodes, ctx):
        for block in reversed(self.blocks):
            nodes = block.support(nodes, ctx)
        return nodes

    def peak_elements(self, nodes, ctx, cols=None):
        return max((b.peak_elements(r, ctx, c) for b, (r, c) in zip(self.blocks, self._plan(nodes, cols, ctx))), default=0)

    def __call__(self, k, ctx, nodes, cols=None):
        return self.evaluate(k, ctx, nodes, cols)

    def evaluate(self, k, ctx, nodes, cols=None, pairs=None):
        if self.name is None:
            return self._evaluate(k, ctx, nodes, cols, pairs)
        with within(self.name):   # progress lines say which layer a long step is in
            return self._evaluate(k, ctx, nodes, cols, pairs)

    def evaluate_taken(self, box, ctx):
        """Over every node: each block's input handed on as its own (see :meth:`Block.evaluate_taken`)."""
        if self.name is None:
            return self._evaluate(None, ctx, None, None, None, box)
        with within(self.name):
            return self._evaluate(None, ctx, None, None, None, box)

    def _evaluate(self, k, ctx, nodes, cols, pairs, box: Optional[list] = None):
        if box:
            k = box.pop()
        plan = self._plan(nodes, cols, ctx)
        root_in = k is None or k.pairs is None or isinstance(k.pairs, Kernel)
        pair_plan = self._pair_plan(root_in, ctx, pairs) if pairs is not None else [None] * len(self.blocks)
        fused = False
        for i, (block, (rows, columns), out_pairs) in enumerate(zip(self.blocks, plan, pair_plan)):
            if fused:   # the weight that the ReLU before it ran with
                fused = False
                continue
            if k is not None and tangent_only(k):   # no block from here on reads K: each maps Theta as its own kernel
                theta, k = [k.tangent], None
                k = Kernel(None, tangent=block.evaluate_taken(theta, replace(ctx, tangent=False, last_kernel_reader=None)))
                continue
            if k is not None:  # the previous block's planned output is this block's support
                need = plan[i - 1] if i else (block.support(rows, ctx), None if columns is None else block.support(columns, ctx))
                k = k.restrict(*need)
            following = self.blocks[i + 1] if i + 1 < len(self.blocks) else None
            if isinstance(block, Elementwise) and k is not None and block.fuses(following, ctx, out_pairs):
                last = following is ctx.last_kernel_reader
                k, fused = block.evaluate_with_weight(k, ctx, following, kernel=not last), True
                continue
            if k is not None and rows is None and out_pairs is None and k.nodes is None and k.root is not None:
                taken, k = [k], None   # a root over every node that no one else holds: the block may release it
                k = block.evaluate_taken(taken, ctx)
            else:
                k = block.evaluate(k, ctx, rows, columns, out_pairs)
            if block is ctx.last_kernel_reader and k.nodes is None and k.root is not None and k.pairs is None:
                k = Kernel(None, tangent=k.tangent)   # K read by no block after this one: released, Theta goes on alone
        if self.name is not None:
            k = ctx.roots.layer_output(k, self.name)
            if ctx.on_layer is not None:
                ctx.on_layer(self.name)
        return k

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


class Add(Block):
    """Independent addition ``X <- f1(X) + f2(X)``: ``K <- K1 + K2``; low rank ``[Q1, Q2]``."""

    def __init__(self, *branches: Block):
        self.branches = branches

    def layer(self, shape):
        return layers.SumLayer(self.branches, shape)

    def support(self, nodes, ctx):
        return union([b.support(nodes, ctx) for b in self.branches])

    def peak_elements(self, nodes, ctx, cols=None):
        branches = max(b.peak_elements(nodes, ctx, cols) for b in self.branches)
        if not self._forms(ctx):
            return branches
        formed = node_count(self.support(nodes, ctx), ctx) * node_count(self.support(nodes if cols is None else cols, ctx), ctx)
        return branches + formed   # the input formed once (a root input; a matrix input is counted where it was made)

    def __call__(self, k, ctx, nodes, cols=None):
        return self.evaluate(k, ctx, nodes, cols)

    def _forms(self, ctx: KernelContext) -> bool:
        """Whether every branch turns a root input into a matrix (so it is formed here once)."""
        return not any(b.root_form(True, ctx) for b in self.branches)

    def _formed_once(self, k: Optional[Kernel], ctx: KernelContext) -> Optional[Kernel]:
        """Exact mode: a root input that every branch turns into a matrix, formed here once
        rather than in each branch (GATGP's first layer formed ``X X^T`` in every product)."""
        if k is not None and k.nodes is not None and k.root is not None and self._forms(ctx):
            return k.as_matrix()
        return k

    def _branch_outputs(self, k, ctx, nodes, cols, pairs, noun: str = "branch") -> list[Kernel]:
        """Each branch evaluated on its own support of the input (formed once where every branch would form it)."""
        k = self._formed_once(k, ctx)
        parts = []
        for i, branch in enumerate(self.branches):
            branch_in = None if k is None else k.restrict(branch.support(nodes, ctx), None if cols is None else branch.support(cols, ctx))
            with within(f"{noun} {i + 1} of {len(self.branches)}"):
                parts.append(branch.evaluate(branch_in, ctx, nodes, cols, pairs))
        return parts

    def evaluate(self, k, ctx, nodes, cols=None, pairs=None):
        parts = self._branch_outputs(k, ctx, nodes, cols, pairs)
        out = replace(sum_kernels(parts, ctx, cols), pairs=_add_pair_values([p.pairs for p in parts], ctx, pairs) if pairs is not None else None)
        if not ctx.tangent:
            return out
        theta = sum_kernels([p.tangent for p in parts], ctx, cols)   # Theta <- Theta_1 + Theta_2: independent parameters
        if pairs is not None:
            theta = replace(theta, pairs=_add_pair_values([p.tangent.pairs for p in parts], ctx, pairs))
        return replace(out, tangent=theta)

    def pair_support(self, pairs, ctx):
        parts = [p for p in (b.pair_support(pairs, ctx) for b in self.branches) if p is not None]
        return Pairs.union(parts, ctx.num_nodes) if parts else None

    def root_form(self, root_in, ctx):
        return all(b.root_form(root_in, ctx) for b in self.branches)

    def plan_pairs(self, root_in, ctx, pairs):
        for branch in self.branches:
            branch.plan_pairs(root_in, ctx, pairs)


class Product(Add):
    """``X <- f1(X) o f2(X)``, the product of two branches that are independent at infinite width
    (an attention score times the message it weighs: the score is a random projection of the
    features, uncorrelated with any one of them): ``K <- K1 o K2``; low rank the Nystrom root of
    ``Q1 Q1^T o Q2 Q2^T`` on the landmarks. Its tangent kernel follows the product rule,
    ``Theta <- Theta_1 o K2 + K1 o Theta_2``."""

    def layer(self, shape):
        return layers.ProductLayer(self.branches, shape)

    def peak_elements(self, nodes, ctx, cols=None):
        held = node_count(nodes, ctx) * node_count(nodes if cols is None else cols, ctx)
        return super().peak_elements(nodes, ctx, cols) + 2 * held   # both factors beside the product

    def root_form(self, root_in, ctx):
        return False

    def evaluate(self, k, ctx, nodes, cols=None, pairs=None):
        if len(self.branches) != 2:
            raise KernelError("internal: a product block has two branches")
        first, second = self._branch_outputs(k, ctx, nodes, cols, pairs, "factor")
        out = multiply_kernels(first, second, ctx, cols)
        if pairs is not None:
            out = replace(out, pairs=_multiply_pair_values(first.pairs, second.pairs, ctx, pairs))
        if not ctx.tangent:
            return out
        terms = [(first.tangent, second), (first, second.tangent)]   # the product rule
        theta = sum_kernels([multiply_kernels(a, b, ctx, cols) for a, b in terms], ctx, cols)
        if pairs is not None:
            theta = replace(theta, pairs=_add_pair_values([_multiply_pair_values(a.pairs, b.pairs, ctx, pairs) for a, b in terms], ctx, pairs))
        return replace(out, tangent=theta)


def multiply_kernels(first: Kernel, second: Kernel, ctx: KernelContext, cols: Nodes) -> Kernel:
    """``K1 o K2`` on the same node sets: the matrices multiplied entrywise, or (low rank, roots
    over every node) the Nystrom root of ``Q1 Q1^T o Q2 Q2^T`` on the landmarks. A zero factor (a
    root with no columns) gives a zero kernel in the other's form."""
    if is_zero(first) or is_zero(second):
        return zero_like(first if is_zero(first) else second)
    if first.nodes is None and ctx.low_rank:
        return Kernel(None, root=ctx.roots.product_root(first.root, second.root, ctx.landmarks))
    return Kernel(first.nodes, matrix=first.dense() * second.dense(), cols=cols)


def _multiply_pair_values(first, second, ctx: KernelContext, pairs: Pairs) -> PairValues:
    """``K1 o K2`` on ``pairs``, from each factor's pair values (or full-node root)."""
    def on(value) -> Tensor:
        return root_on_pairs(value.root, pairs) if isinstance(value, Kernel) else value.on(pairs, ctx.num_nodes)
    return PairValues(pairs, on(first) * on(second))


class Tangent(Block):
    """The neural tangent kernel ``Theta`` of ``network``: the limit of ``J(x) J(x')^T`` for the
    network trained by gradient descent on every weight and bias, in the NTK parameterisation
    (``W = s_w / sqrt(d) w``, ``w ~ N(0, 1)`` the trained parameter). ``network`` runs unchanged
    with ``ctx.tangent`` set: each block carries ``Theta`` beside ``K`` by its tangent rule
    (:meth:`Block.tangent_terms`; the ReLU's in :meth:`ReLU.tangent`), on the same node sets, pair
    sets and landmarks, and this block outputs ``Theta`` (with its pair values; with
    ``ctx.keep_nngp``, with ``K`` as its ``nngp``)."""

    def __init__(self, network: Block):
        self.network = network

    def layer(self, shape):
        return self.network.layer(shape)   # the network it differentiates

    def _inner(self, ctx: KernelContext, nodes: Nodes, pairs: Optional[Pairs]) -> KernelContext:
        """The network's context: with the tangent kernel and, low rank over every node when ``K``
        is not kept beside ``Theta``, the last block that reads ``K`` (after it, ``Theta`` alone:
        a GCN's last ReLU factorises and convolves one root, not two)."""
        if ctx.tangent:
            return ctx
        drops = ctx.low_rank and nodes is None and pairs is None and not ctx.keep_nngp
        return replace(ctx, tangent=True, last_kernel_reader=last_kernel_reader(self.network) if drops else None)

    def support(self, nodes, ctx):
        return self.network.support(nodes, ctx)

    def peak_elements(self, nodes, ctx, cols=None):
        return 2 * self.network.peak_elements(nodes, ctx, cols)   # Theta beside K, block by block

    def __call__(self, k, ctx, nodes, cols=None):
        return self.evaluate(k, ctx, nodes, cols)

    def evaluate(self, k, ctx, nodes, cols=None, pairs=None):
        inner = self._inner(ctx, nodes, pairs)
        both = self.network.evaluate(k, inner, nodes, cols, pairs)
        if inner is not ctx and ctx._input is None:
            ctx._input = inner._input   # the input layer's root, as the next evaluation on ``ctx`` would compute it
        return replace(both.tangent, nngp=replace(both, tangent=None)) if ctx.keep_nngp else both.tangent

    def pair_support(self, pairs, ctx):
        return self.network.pair_support(pairs, ctx)

    def root_form(self, root_in, ctx):
        return self.network.root_form(root_in, ctx)

    def plan_pairs(self, root_in, ctx, pairs):
        self.network.plan_pairs(root_in, ctx, pairs)


def children(block: Block) -> list[Block]:
    """The blocks a composite block is made of (none for a leaf)."""
    if isinstance(block, Serial):
        return list(block.blocks)
    if isinstance(block, Add):
        return list(block.branches)
    if isinstance(block, Tangent):
        return [block.network]
    return []


def frozen(block: Block, ctx: KernelContext) -> bool:
    """Whether ``ctx.trained`` leaves ``block``'s own parameters out of the tangent kernel."""
    return ctx.trained is not None and id(block) not in ctx.trained


def trained_blocks(block: Block) -> list[Block]:
    """The blocks with parameters of their own (weights, mixed weights, biases with ``s_b > 0``),
    each once, in composition order: the parts of a tangent kernel (``ctx.trained``), and, in
    the same order, the owners of a network's parameters (:func:`~.layers.owned`)."""
    found: list[Block] = []

    def walk(b: Block) -> None:
        if children(b):
            for child in children(b):
                walk(child)
        elif has_parameters(b) and all(b is not seen for seen in found):
            found.append(b)

    walk(block)
    return found


def separable(block: Block) -> bool:
    """Whether ``block``'s tangent rule is its own operation on ``Theta`` and reads no ``K`` (a
    convolution, a bias, a scaling without parameters; a serial of such)."""
    if isinstance(block, Serial):
        return all(separable(b) for b in block.blocks)
    return (type(block).evaluate is Block.evaluate and type(block).tangent is Block.tangent
            and block.tangent_terms() == [(block, TANGENT)])


def last_kernel_reader(network: Block) -> Optional[Block]:
    """The last block, in the order of the network's serial compositions, that is not
    :func:`separable`: the blocks after it read only ``Theta``, so a tangent kernel that does not
    keep ``K`` needs no ``K`` past it."""
    leaves: list[Block] = []

    def walk(block: Block) -> None:
        if isinstance(block, Serial):
            for b in block.blocks:
                walk(b)
        else:
            leaves.append(block)

    def occurrences(block: Block, of: Block) -> int:
        return (block is of) + sum(occurrences(child, of) for child in children(block))

    walk(network)
    last = next((b for b in reversed(leaves) if not separable(b)), None)
    return last if last is not None and occurrences(network, last) == 1 else None   # a block used twice: K is kept


def tangent_only(k: Kernel) -> bool:
    """Whether ``k`` carries ``Theta`` alone (past :func:`last_kernel_reader`)."""
    return k.root is None and k.matrix is None and k.tangent is not None


def reads_graph(block: Block) -> bool:
    """Whether any block in ``block`` reads the graph: if none does (an RBF kernel, an MLP's), a
    node's kernel row depends on no other node's, and every labelled row is one rectangle."""
    return block.propagates or any(reads_graph(child) for child in children(block))


def has_parameters(block: Block) -> bool:
    """Whether ``block`` trains anything (a weight, or a bias with ``s_b > 0``): without, its
    tangent kernel is 0."""
    if children(block):
        return any(has_parameters(child) for child in children(block))
    if isinstance(block, Bias):
        return not is_constant(block.sigma_b, 0)
    return any(source in (KERNEL, OUTPUT) for _, source in block.tangent_terms())


def _add_pair_values(parts: list, ctx: KernelContext, pairs: Pairs):
    """The sum of independent branches on ``pairs``: roots side by side while every branch is
    a full-node root, else the values summed."""
    if all(isinstance(p, Kernel) for p in parts):
        return Kernel(None, root=torch.cat([p.root for p in parts], dim=1))
    return PairValues(pairs, sum(root_on_pairs(p.root, pairs) if isinstance(p, Kernel) else p.on(pairs, ctx.num_nodes) for p in parts))


def sum_kernels(parts: list[Kernel], ctx: KernelContext, cols: Nodes) -> Kernel:
    """The sum of kernels on the same node sets: roots side by side while every part is a
    root, else the matrices summed (what each part carries beside is dropped). Roots with no
    columns (a tangent kernel of 0) add nothing and are left out, so that a first weight's
    ``Theta = 0 + K`` is ``K``'s own root, which the blocks after it then compute once
    (see :func:`same_value`)."""
    if len(parts) > 1:
        parts = [p for p in parts if not is_zero(p)] or parts[:1]
    if len(parts) == 1:
        return Kernel(parts[0].nodes, matrix=parts[0].matrix, root=parts[0].root, cols=cols)
    if all(p.root is not None for p in parts):
        return Kernel(parts[0].nodes, root=ctx.roots.side_by_side([p.root for p in parts]), cols=cols)
    total = parts[0].dense()
    for p in parts[1:]:
        total = total + p.dense()
    return Kernel(parts[0].nodes, matrix=total, cols=cols)


def same_value(theta: Kernel, k: Kernel) -> bool:
    """Whether the tangent kernel ``theta`` is the NNGP kernel ``k`` itself (the same root or
    matrix object on the same nodes: after a first layer, ``Theta = K``), so that a block without
    parameters maps both to one output instead of computing it twice."""
    stored = k.root if k.root is not None else k.matrix
    return (stored is not None and (theta.root if k.root is not None else theta.matrix) is stored
            and theta.nodes is k.nodes and theta.cols is k.cols)


def zero_like(value):
    """The zero kernel in the form of ``value`` (a root with no columns, a zero matrix, zero pair values)."""
    if isinstance(value, PairValues):
        return PairValues(value.pairs, torch.zeros_like(value.values))
    if value.root is not None:
        return Kernel(value.nodes, root=value.root[:, :0], cols=value.cols)
    return Kernel(value.nodes, matrix=torch.zeros_like(value.matrix), cols=value.cols)


def is_zero(value) -> bool:
    """Whether ``value`` is a root with no columns (the tangent kernel before any parameter)."""
    return isinstance(value, Kernel) and value.root is not None and value.root.shape[1] == 0


def check_variances(values: Tensor) -> None:
    """Fail loudly when an activation's input has a negative variance beyond round-off."""
    if values.numel() and float(values.min()) < -psd_tolerance(values.dtype, 1) * max(float(values.abs().max()), torch.finfo(values.dtype).tiny):
        raise KernelError(f"the kernel has a negative variance ({float(values.min()):.3g}) before an activation; it is not positive semi-definite")


def branch_count(block: Block, low_rank: bool = False) -> int:
    """The most branches of an independent addition in ``block``: a low-rank root is that many
    roots side by side there (1 without an :class:`Add`). A tangent kernel's ``Theta`` sits beside
    ``K``: 4 dense blocks' worth in exact mode; low rank (``low_rank``), ``P`` beside ``Q``, each step
    releasing its input's root once its output is made (:meth:`Block.evaluate_taken`), 2 roots'
    worth (the measurements: docs/benchmarks, the tangent-kernel page); a network with an addition
    or a product keeps 4 (their branches share the input, which no step releases). The memory
    estimates read it."""
    if isinstance(block, Tangent):
        inner = branch_count(block.network, low_rank)
        return (2 if low_rank and inner == 1 else 4) * inner
    inner = max([1, *(branch_count(b, low_rank) for b in children(block))])
    if isinstance(block, Product):   # both factors' roots and their two N x r products beside the root it builds
        return max(4, inner)
    return max(len(block.branches), inner) if isinstance(block, Add) else inner


def dense_branch_count(block: Block) -> int:
    """:func:`branch_count` for the exact (dense) estimate, which multiplies the largest block a
    network plans (:meth:`Block.peak_elements`) by the blocks alive beside it per entry
    (:func:`~gnngp_cli.job.estimate.dense_factor`). A network with a :class:`Product` counts as one
    branch, in both limits: the product's planned elements already hold its input, both factors
    and the product, and the tangent kernel's ``Theta`` terms are planned beside ``K``. A tangent
    kernel's planned elements hold ``Theta`` beside ``K`` too (:meth:`Tangent.peak_elements`), so
    it counts each branch's pair until they are summed (``2 B``), at least the four of one chain;
    counting ``4 B`` on top put H2GCN's estimate past twice its peak (scripts/bench_memory.py)."""
    if _has_product(block):
        return 1
    if isinstance(block, Tangent):
        return max(4, 2 * dense_branch_count(block.network))
    return branch_count(block)


def _has_product(block: Block) -> bool:
    return isinstance(block, Product) or any(_has_product(b) for b in children(block))


def graph_operators(block: Block, adjacency: Adjacency) -> list[Adjacency]:
    """Every sparse operator the convolutions in ``block`` apply, built on first use (H2GCN's
    hop operators: the exact 2-hop one of a dense graph is tens of millions of entries, and its
    build peaks at several times that). The memory estimates build them first, so that what
    their build peaks at and what they hold are measured, not guessed."""
    if isinstance(block, Conv):
        return [block.operator(adjacency)]
    return [op for child in children(block) for op in graph_operators(child, adjacency)]
