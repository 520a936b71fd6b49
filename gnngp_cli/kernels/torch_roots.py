"""Where a low-rank root lives: the operations the blocks apply to a root over every node.

A block is written once; the root ``Q`` it transforms is held by a backing. :class:`TorchRoots`
holds ``Q`` as one tensor in this process (``compute=local``); the row-block backing of
:mod:`gnngp_cli.backends.rowblocks` holds it as a Dask array of row blocks spread over a cluster. Both
implement the same seven operations, which are all a block needs beyond ``c Q`` (a scalar
product, which both kinds of array have):

| operation            | block        | formula                                       |
|----------------------|--------------|-----------------------------------------------|
| ``with_constant``    | Bias         | ``[Q, s_b 1]``                                |
| ``side_by_side``     | Add          | ``[Q1, Q2]``                                  |
| ``convolve``         | Conv         | ``A Q``                                       |
| ``activation_root``        | ReLU, erf, ...  | ``chol(g(Q Q^T))`` on the landmarks (Nystrom) |
| ``activation_tangent_root``| the same (NTK)  | ``chol(g'(Q Q^T) o P P^T)`` on the landmarks  |
| ``activation_roots``       | it, then weight | both, in one pass, ``+ g`` for the weight     |
| ``product_root``           | Product         | ``chol(Q1 Q1^T o Q2 Q2^T)`` on the landmarks  |

(``g``, ``g'``: the activation's expectations, :class:`~.activations.Activation`, ReLU's by default)

and ``layer_output``, the check of a named layer's output (a backing that computes lazily also
materialises the layer there).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import torch
from torch import Tensor

from .. import runtime
from ..progress import within
from .numerics import NystromFactor, check_kernel, nystrom_root
from .activations import RELU, Activation
from .value import FactoredRoot, Kernel, held


def activation_nystrom_rows(q: Tensor, q_a: Tensor, var_a: Tensor, factor: NystromFactor, is_landmark: Tensor, index: Tensor,
                            activation: Activation = RELU, factored: bool = False, into: Optional[Tensor] = None) -> Tensor:
    """Rows of ``chol(g(Q Q^T))`` from rows ``q`` of ``Q``: ``C[b, a] = g(Q_b Q[a]^T)`` with the
    variances ``diag Q_b Q_b^T`` and ``var_a``, then the factor of ``C[a, a]`` (``is_landmark``,
    ``index``: which rows are landmarks, and which; see :meth:`NystromFactor.apply`); with
    ``factored``, the rows of the left factor instead (:meth:`NystromFactor.left_rows`). Written
    into ``into`` where given (a row block of the root), ``g`` in place of ``Q_b Q[a]^T``: no
    block-sized temporary is allocated (each would be new pages of memory, zeroed by the system)."""
    var = (q * q).sum(1)
    if factored:
        cross = q @ q_a.T if into is None else torch.mm(q, q_a.T, out=into)
        return factor.left_rows(activation.expectation(cross, var, var_a, out=None if cross.requires_grad else cross), is_landmark, index)
    cross = q @ q_a.T
    return factor.apply(activation.expectation(cross, var, var_a, out=None if cross.requires_grad else cross), is_landmark, index, into)


def activation_tangent_cross(q: Tensor, p: Optional[Tensor], q_a: Tensor, p_a: Optional[Tensor], activation: Activation = RELU) -> Tensor:
    """``g'(Q_b Q_a^T) o (P_b P_a^T)``: rows ``b`` of the activation's tangent kernel on the landmark
    columns ``a``, from rows of the NNGP root ``Q`` and of the tangent root ``P`` (``None``: ``P``
    is ``Q``, as after a first layer, whose tangent kernel is its NNGP kernel)."""
    var, var_a = (q * q).sum(1), (q_a * q_a).sum(1)
    cross = q @ q_a.T
    return activation.derivative(cross, var, var_a) * (cross if p is None else p @ p_a.T)


def activation_pair_rows(q: Tensor, p: Optional[Tensor], q_a: Tensor, p_a: Optional[Tensor], var_a: Tensor,
                         with_kernel: bool, activation: Activation = RELU) -> tuple[Tensor, Tensor]:
    """Rows of ``g(K)`` and of ``g'(K) o Theta`` (plus ``g(K)`` with ``with_kernel``: the term of the
    weight that follows) on the landmark columns, reading ``Q Q[a]^T`` once; ``P`` may have no
    columns (a tangent kernel of 0), or be ``None``: ``P`` is ``Q`` (``Theta = K``, after a first
    layer), and ``P P[a]^T`` is that same product."""
    var = (q * q).sum(1)
    cross = q @ q_a.T
    if p is not None and p.size(1) == 0:
        g = activation.expectation(cross, var, var_a)
        return g, g.clone() if with_kernel else torch.zeros_like(g)
    if activation.both is None or (torch.is_grad_enabled() and (q.requires_grad or (p is not None and p.requires_grad))):
        g, dg = activation.expectation(cross, var, var_a), activation.derivative(cross, var, var_a)
    else:   # one pass over the cosines for both
        g, dg = activation.both(cross, var, var_a)
    tangent_cross = cross if p is None else p @ p_a.T
    theta = dg.mul_(tangent_cross) if not dg.requires_grad else dg * tangent_cross
    return g, theta + g if with_kernel else theta


def product_cross(q1: Tensor, q2: Tensor, q1_a: Tensor, q2_a: Tensor) -> Tensor:
    """``(Q1_b Q1_a^T) o (Q2_b Q2_a^T)``: rows ``b`` of the product kernel on the landmark columns ``a``."""
    return (q1 @ q1_a.T) * (q2 @ q2_a.T)


def by_row_blocks(root: Tensor, landmarks: Tensor, label: str, rows: Callable[[int, int, Tensor, Tensor], Any],
                  outputs: int = 1) -> Any:
    """A Nystrom root on ``landmarks`` over every node of ``root``, by row blocks into one output
    of a column per landmark: ``rows(start, stop, is_landmark, index, into)`` gives its rows
    ``start:stop`` (``is_landmark``: which of them are landmarks, ``index``: which landmarks; see
    :meth:`NystromFactor.apply`), written into ``into`` (those rows of the output; a tuple of them
    with ``outputs`` > 1) or returned to be copied there. With ``outputs`` > 1, that many roots at
    once (``rows`` gives a tuple), each its own contiguous tensor (a column slice of one would be
    copied by what reads it)."""
    n, r = root.size(0), landmarks.numel()
    position = torch.full((n,), -1, dtype=torch.long, device=root.device)
    position[landmarks] = torch.arange(r, device=root.device)
    outs = [root.new_empty(n, r) for _ in range(outputs)]
    blocks = list(runtime.row_blocks(n, r * outputs))
    for i, (start, stop) in enumerate(blocks):
        with within(f"{label} row block {i + 1} of {len(blocks)}"):
            block = position[start:stop]
            is_landmark = block >= 0
            into = tuple(out[start:stop] for out in outs)
            parts = rows(start, stop, is_landmark, block[is_landmark], into if outputs > 1 else into[0])
            for target, part in zip(into, parts if outputs > 1 else (parts,)):
                if part.data_ptr() != target.data_ptr():
                    target.copy_(part)
    return tuple(outs) if outputs > 1 else outs[0]


class RootBacking(Protocol):
    """What a backing of low-rank roots implements (see the module docstring)."""

    def with_constant(self, root: Any, value: float) -> Any: ...
    def side_by_side(self, roots: list) -> Any: ...
    def convolve(self, adjacency: Any, root: Any) -> Any: ...
    def activation_root(self, root: Any, landmarks: Tensor, activation: Activation = RELU) -> Any: ...
    def activation_tangent_root(self, root: Any, tangent: Any, landmarks: Tensor, activation: Activation = RELU) -> Any: ...
    def activation_roots(self, root: Any, tangent: Any, landmarks: Tensor, with_kernel: bool, kernel_root: bool = True,
                         activation: Activation = RELU) -> tuple[Any, Any]: ...
    def product_root(self, first: Any, second: Any, landmarks: Tensor) -> Any: ...
    def layer_output(self, k: Kernel, name: str) -> Kernel: ...


class TorchRoots:
    """Roots as tensors in this process (today's path, ``compute=local``). With ``factored``, a
    Nystrom step by row blocks gives its root as a :class:`~.value.FactoredRoot` ``(C[:, a], V s)``
    (its reader multiplies, or not: the GP reads only ``Q[rows] @ M``); the other operations take
    either kind, a factored input multiplied out a row block at a time where they read by row blocks."""

    def __init__(self, factored: bool = False):
        self.factored = factored

    def with_constant(self, root: Any, value: float) -> Any:
        """``[Q, value 1]`` (factored: ``[L, value 1]`` and ``right`` with a ``1`` below and right of it)."""
        if isinstance(root, FactoredRoot):
            right = root.right
            wider = right.new_zeros(right.size(0) + 1, right.size(1) + 1)
            wider[:-1, :-1] = right
            wider[-1, -1] = 1
            return FactoredRoot(self.with_constant(root.left, value), wider)
        column = root.new_ones(root.size(0), 1) * value   # value may be a tensor being fitted
        return torch.cat([root, column], dim=1)

    def side_by_side(self, roots: list) -> Tensor:
        """``[Q1, Q2, ...]``: the root of the sum of independent kernels."""
        return torch.cat([held(root) for root in roots], dim=1)

    def convolve(self, adjacency, root: Any) -> Any:
        """``A Q`` over every node (factored: ``(A L) right``)."""
        if isinstance(root, FactoredRoot):
            return FactoredRoot(adjacency.matmul(root.left), root.right)
        return adjacency.matmul(root)

    def activation_root(self, root: Any, landmarks: Tensor, activation: Activation = RELU) -> Any:
        """``chol(g(Q Q^T))``: ``g`` of ``Q Q[a]^T`` with the variances ``diag Q Q^T``, then the
        Nystrom root on the landmarks ``a``. Past ``runtime.ROW_BLOCK_ENTRIES``, without a gradient, the
        same by row blocks into one output (:func:`activation_nystrom_rows`, as the Dask backing),
        with ``factored`` kept as ``(C[:, a], V s)`` (:meth:`~.numerics.NystromFactor.left_rows`)."""
        n, r = root.size(0), landmarks.numel()
        if root.requires_grad or n * r <= runtime.ROW_BLOCK_ENTRIES:
            root = held(root)
            var = (root * root).sum(1)
            cross = activation.expectation(root @ root[landmarks].T, var, var[landmarks])
            return nystrom_root(cross, landmarks, "activation")
        q_a = held(root[landmarks])
        var_a = (q_a * q_a).sum(1)
        factor = NystromFactor.of(activation.expectation(q_a @ q_a.T, var_a, var_a), "activation")
        out = by_row_blocks(root, landmarks, activation.name,
                            lambda start, stop, is_landmark, index, into: activation_nystrom_rows(held(root[start:stop]), q_a, var_a, factor,
                                                                                                  is_landmark, index, activation, self.factored, into))
        return FactoredRoot(out, factor.right) if self.factored else out

    def activation_tangent_root(self, root: Tensor, tangent: Tensor, landmarks: Tensor, activation: Activation = RELU) -> Tensor:
        """The root of ``g'(Q Q^T) o P P^T`` (``P``: the tangent kernel's root): its columns on the
        landmarks ``a`` with the variances ``diag Q Q^T``, then the Nystrom root on ``a``. No
        columns stay none (a tangent kernel of 0)."""
        if tangent.size(1) == 0:
            return tangent
        n, r = root.size(0), landmarks.numel()
        same = tangent is root   # Theta = K: P P^T is Q Q^T, computed once
        root, tangent = held(root), held(tangent)   # a tangent kernel's roots are not kept factored: multiplied out here if one is
        tangent = root if same else tangent
        if tangent.requires_grad or root.requires_grad or n * r <= runtime.ROW_BLOCK_ENTRIES:
            return nystrom_root(activation_tangent_cross(root, None if same else tangent, root[landmarks], None if same else tangent[landmarks],
                                                         activation), landmarks, "activation (tangent)")
        q_a, p_a = root[landmarks], None if same else tangent[landmarks]
        factor = NystromFactor.of(activation_tangent_cross(q_a, p_a, q_a, p_a, activation), "activation (tangent)")
        return by_row_blocks(root, landmarks, f"{activation.name} tangent", lambda start, stop, is_landmark, index, into: factor.apply(
            activation_tangent_cross(root[start:stop], None if same else tangent[start:stop], q_a, p_a, activation), is_landmark, index, into))

    def activation_roots(self, root: Tensor, tangent: Tensor, landmarks: Tensor, with_kernel: bool,
                         kernel_root: bool = True, activation: Activation = RELU) -> tuple[Optional[Tensor], Tensor]:
        """``activation_root`` and ``activation_tangent_root`` in one pass over ``Q Q[a]^T`` (the tangent root
        of ``g'(Q Q^T) o P P^T + g(Q Q^T)`` with ``with_kernel``: a weight's own term, so that ``P``
        stays as wide as ``Q``; see :meth:`~.blocks.Elementwise.evaluate_with_weight`). Without
        ``kernel_root``, the tangent root alone (``None`` for ``g``'s)."""
        n, r = root.size(0), landmarks.numel()
        same = tangent is root   # Theta = K (after a first layer): P P[a]^T is Q Q[a]^T, computed once
        root = held(root)
        tangent = root if same else held(tangent)
        q_a, p_a = root[landmarks], None if same else tangent[landmarks]
        var_a = (q_a * q_a).sum(1)
        if tangent.requires_grad or root.requires_grad or n * r <= runtime.ROW_BLOCK_ENTRIES:
            g, theta = activation_pair_rows(root, None if same else tangent, q_a, p_a, var_a, with_kernel, activation)
            return (nystrom_root(g, landmarks, "activation") if kernel_root else None), nystrom_root(theta, landmarks, "activation (tangent)")
        g_a, theta_a = activation_pair_rows(q_a, p_a, q_a, p_a, var_a, with_kernel, activation)
        factors = NystromFactor.of(g_a, "activation") if kernel_root else None, NystromFactor.of(theta_a, "activation (tangent)")

        def rows(start, stop, is_landmark, index, into):
            g, theta = activation_pair_rows(root[start:stop], None if same else tangent[start:stop], q_a, p_a, var_a, with_kernel, activation)
            if not kernel_root:
                return factors[1].apply(theta, is_landmark, index, into)
            return factors[0].apply(g, is_landmark, index, into[0]), factors[1].apply(theta, is_landmark, index, into[1])

        if not kernel_root:
            return None, by_row_blocks(root, landmarks, f"{activation.name}'s tangent", rows)
        return by_row_blocks(root, landmarks, f"{activation.name} and its tangent", rows, outputs=2)

    def product_root(self, first: Tensor, second: Tensor, landmarks: Tensor) -> Tensor:
        """The root of ``Q1 Q1^T o Q2 Q2^T`` (an entrywise product of kernels): its columns on the
        landmarks ``a``, then the Nystrom root on ``a`` (by row blocks past ``runtime.ROW_BLOCK_ENTRIES``)."""
        n, r = first.size(0), landmarks.numel()
        first, second = held(first), held(second)
        q1_a, q2_a = first[landmarks], second[landmarks]
        if first.requires_grad or second.requires_grad or n * r <= runtime.ROW_BLOCK_ENTRIES:
            return nystrom_root(product_cross(first, second, q1_a, q2_a), landmarks, "product")
        factor = NystromFactor.of(product_cross(q1_a, q2_a, q1_a, q2_a), "product")
        return by_row_blocks(first, landmarks, "product", lambda start, stop, is_landmark, index, into: factor.apply(
            product_cross(first[start:stop], second[start:stop], q1_a, q2_a), is_landmark, index, into))

    def layer_output(self, k: Kernel, name: str) -> Kernel:
        """A named layer's output (and its tangent kernel), checked to be a valid covariance."""
        if k.root is not None or k.matrix is not None:   # past the last block that reads K, Theta alone
            check_kernel(k, name)
        if k.tangent is not None:
            check_kernel(k.tangent, f"{name} (tangent kernel)")
        return k


LOCAL_ROOTS = TorchRoots()
