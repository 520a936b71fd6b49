"""Kernel building blocks (the paper's Table 3), each written once for both backings.

A :class:`Kernel` holds ``K`` over a node set either as the matrix ``K[nodes, nodes]`` or
as a root ``R`` with ``K = R R^T``. In exact mode (``ctx.landmarks is None``) a root is an
exact factor (e.g. the linear input ``X``), kept until a nonlinearity needs the matrix, and
every block works only on the nodes that the prediction needs: a graph convolution widens
that set to the graph neighbours, nothing else does. In low-rank mode the root is the
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
from typing import Optional, Sequence

import torch
from torch import Tensor

from ..data.graph import Adjacency
from ..errors import KernelError
from .base import BaseKernel
from .relu import relu_expectation

Nodes = Optional[Tensor]  # sorted global node ids; None means every node


def psd_tolerance(dtype: torch.dtype, n: int) -> float:
    """Relative round-off allowance for eigenvalues of an ``n x n`` kernel block."""
    return max(1e-10, 50 * torch.finfo(dtype).eps * max(n, 1) ** 0.5)


@dataclass(frozen=True)
class Kernel:
    """A covariance over ``nodes``: ``matrix = K[nodes, nodes]`` or ``root`` with ``K = R R^T``."""

    nodes: Nodes
    matrix: Optional[Tensor] = None
    root: Optional[Tensor] = None

    @property
    def size(self) -> int:
        return (self.root if self.root is not None else self.matrix).size(0)

    def positions(self, nodes: Tensor) -> Tensor:
        """Row positions of global ``nodes`` in this kernel."""
        if self.nodes is None:
            return nodes
        pos = torch.searchsorted(self.nodes, nodes)
        if bool((pos >= self.nodes.numel()).any()) or not torch.equal(self.nodes[pos.clamp_max(self.nodes.numel() - 1)], nodes):
            raise ValueError("requested nodes are not held by this kernel")
        return pos

    def restrict(self, nodes: Nodes) -> "Kernel":
        if nodes is None or self.nodes is None or nodes.numel() == self.nodes.numel():
            return self
        pos = self.positions(nodes)
        if self.root is not None:
            return Kernel(nodes, root=self.root[pos])
        return Kernel(nodes, matrix=self.matrix[pos][:, pos])

    def dense(self) -> Tensor:
        return self.matrix if self.matrix is not None else self.root @ self.root.T

    def diagonal(self) -> Tensor:
        if self.root is not None:
            return (self.root * self.root).sum(1)
        return torch.diagonal(self.matrix)


@dataclass
class KernelContext:
    """What the blocks read: features ``X``, the normalised adjacency ``A``, the base
    kernel ``C0`` and, in low-rank mode, the landmark node ids ``a``."""

    features: Tensor
    adjacency: Adjacency
    base: BaseKernel = field(default_factory=BaseKernel)
    landmarks: Optional[Tensor] = None
    _input: Optional[Kernel] = None

    @property
    def low_rank(self) -> bool:
        return self.landmarks is not None

    @property
    def num_nodes(self) -> int:
        return self.features.size(0)

    def input_kernel(self, nodes: Nodes) -> Kernel:
        """``C0`` on ``nodes`` (exact), or its Nystrom root ``Q0`` on every node (low rank).

        Low rank, linear ``C0`` with no more features than landmarks: ``Q0 = X`` exactly.
        """
        if not self.low_rank:
            x = self.features if nodes is None else self.features[nodes]
            if self.base.is_linear:
                return Kernel(nodes, root=x)
            return Kernel(nodes, matrix=self.base.block(x, x))
        if self._input is None:
            x = self.features
            if self.base.is_linear and self.landmarks.numel() >= x.size(1):
                self._input = Kernel(None, root=x)
            else:
                cross = self.base.block(x, x[self.landmarks])
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
    root = (cross @ eigvecs) * smoothed_inv
    root[landmarks] = eigvecs * sqrt_d
    return root


def check_kernel(k: Kernel, where: str) -> None:
    """Fail loudly (never silently NaN) if a layer's kernel is not a covariance."""
    values = k.root if k.root is not None else k.matrix
    if not bool(torch.isfinite(values).all()):
        raise KernelError(f"{where}: the kernel has NaN or infinite entries; lower the sigmas or the depth, or use dtype=float64")
    if k.matrix is None:
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


class Block:
    """A network operation and its kernel operation. ``support(nodes)`` says which input
    nodes the output on ``nodes`` depends on; ``__call__(k, ctx, nodes)`` maps the input
    kernel ``k`` (held on ``support(nodes)``) to the output kernel on ``nodes``."""

    def support(self, nodes: Nodes, ctx: KernelContext) -> Nodes:
        return nodes

    def peak_elements(self, nodes: Nodes, ctx: KernelContext) -> int:
        """Largest dense matrix (entries) this block may hold in exact mode."""
        n = ctx.num_nodes if nodes is None else nodes.numel()
        return n * n

    def __call__(self, k: Optional[Kernel], ctx: KernelContext, nodes: Nodes) -> Kernel:
        raise NotImplementedError


class Input(Block):
    """``X <- X0``: ``K <- C0``; low rank ``Q <- chol(C0)``."""

    def support(self, nodes, ctx):
        return torch.empty(0, dtype=torch.long, device=ctx.features.device)

    def peak_elements(self, nodes, ctx):
        return 0 if ctx.base.is_linear else super().peak_elements(nodes, ctx)

    def __call__(self, k, ctx, nodes):
        return ctx.input_kernel(nodes)


@dataclass
class Scale(Block):
    """``X <- c X``: ``K <- c^2 K``; low rank ``Q <- c Q``. A weight ``X W`` with
    ``W ~ N(0, s_w^2 / d)`` is ``Scale(s_w)``."""

    factor: float

    def peak_elements(self, nodes, ctx):
        return 0

    def __call__(self, k, ctx, nodes):
        if k.root is not None:
            return replace(k, root=k.root * self.factor)
        return replace(k, matrix=k.matrix * self.factor ** 2)


def Weight(sigma_w: float) -> Scale:
    """``X <- X W``, ``W_ij ~ N(0, sigma_w^2 / d)``: ``K <- sigma_w^2 K``."""
    return Scale(sigma_w)


def MixedWeight(a: float, b: float, sigma_w: float) -> Scale:
    """``X <- X (a I + b W)``: ``K <- (a^2 + b^2 sigma_w^2) K``."""
    return Scale(math.sqrt(a * a + b * b * sigma_w * sigma_w))


@dataclass
class Bias(Block):
    """``X <- X + b``, ``b ~ N(0, s_b^2)``: ``K <- K + s_b^2 11^T``; low rank ``[Q, s_b 1]``."""

    sigma_b: float

    def peak_elements(self, nodes, ctx):
        return 0

    def __call__(self, k, ctx, nodes):
        if self.sigma_b == 0:
            return k
        if k.root is not None:
            column = torch.full((k.size, 1), self.sigma_b, dtype=k.root.dtype, device=k.root.device)
            return replace(k, root=torch.cat([k.root, column], dim=1))
        return replace(k, matrix=k.matrix + self.sigma_b ** 2)


class Conv(Block):
    """``X <- A X``: ``K <- A K A^T``; low rank ``Q <- A Q``."""

    def support(self, nodes, ctx):
        return None if nodes is None else ctx.adjacency.neighbours(nodes)

    def peak_elements(self, nodes, ctx):
        n_out = ctx.num_nodes if nodes is None else nodes.numel()
        n_in = ctx.num_nodes if nodes is None else self.support(nodes, ctx).numel()
        return n_out * n_in

    def __call__(self, k, ctx, nodes):
        if nodes is None:
            if k.root is None:
                raise KernelError("a dense kernel over every node is not supported; use the exact mode with node sets")
            return Kernel(None, root=ctx.adjacency.matmul(k.root))
        a = ctx.adjacency.block(nodes, k.nodes)
        if k.root is not None:
            return Kernel(nodes, root=torch.sparse.mm(a, k.root))
        half = torch.sparse.mm(a, k.matrix)  # A K, |nodes| x |support|
        return Kernel(nodes, matrix=torch.sparse.mm(a, half.T.contiguous()))  # A (A K)^T = A K A^T


class ReLU(Block):
    """``X <- relu(X)``: ``K <- g(K)``; low rank ``Q <- chol(g(Q Q^T))`` on the landmarks."""

    def __call__(self, k, ctx, nodes):
        if ctx.low_rank:
            q = k.root
            var = (q * q).sum(1)
            cross = relu_expectation(q @ q[ctx.landmarks].T, var, var[ctx.landmarks])
            return Kernel(None, root=nystrom_root(cross, ctx.landmarks, "activation"))
        matrix = k.dense()
        var = torch.diagonal(matrix).clone()
        return Kernel(k.nodes, matrix=relu_expectation(matrix, var, var))


class Serial(Block):
    """Blocks applied in order, as in the network: ``Serial(f, g)(X) = g(f(X))``.
    A named serial (e.g. ``"layer 2"``) checks that its output is a valid covariance."""

    def __init__(self, *blocks: Block, name: Optional[str] = None):
        self.blocks = [b for b in blocks if b is not None]
        self.name = name

    def _plan(self, nodes: Nodes, ctx: KernelContext) -> list[Nodes]:
        """The node set each block must output, last block first."""
        wanted = [nodes]
        for block in reversed(self.blocks[1:]):
            wanted.append(block.support(wanted[-1], ctx))
        return wanted[::-1]

    def support(self, nodes, ctx):
        for block in reversed(self.blocks):
            nodes = block.support(nodes, ctx)
        return nodes

    def peak_elements(self, nodes, ctx):
        return max((b.peak_elements(n, ctx) for b, n in zip(self.blocks, self._plan(nodes, ctx))), default=0)

    def __call__(self, k, ctx, nodes):
        for block, out_nodes in zip(self.blocks, self._plan(nodes, ctx)):
            if k is not None:
                k = k.restrict(block.support(out_nodes, ctx))
            k = block(k, ctx, out_nodes)
        if self.name is not None:
            check_kernel(k, self.name)
        return k


class Add(Block):
    """Independent addition ``X <- f1(X) + f2(X)``: ``K <- K1 + K2``; low rank ``[Q1, Q2]``."""

    def __init__(self, *branches: Block):
        self.branches = branches

    def support(self, nodes, ctx):
        return union([b.support(nodes, ctx) for b in self.branches])

    def peak_elements(self, nodes, ctx):
        return max(b.peak_elements(nodes, ctx) for b in self.branches)

    def __call__(self, k, ctx, nodes):
        parts = [branch(None if k is None else k.restrict(branch.support(nodes, ctx)), ctx, nodes) for branch in self.branches]
        if all(p.root is not None for p in parts):
            return Kernel(parts[0].nodes, root=torch.cat([p.root for p in parts], dim=1))
        total = parts[0].dense()
        for p in parts[1:]:
            total = total + p.dense()
        return Kernel(parts[0].nodes, matrix=total)
