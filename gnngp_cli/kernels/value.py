"""The kernel value: a covariance block on node sets, as a matrix or as a root.

Like neural-tangents' ``Kernel``, which carries ``cov1`` beside ``nngp``, a :class:`Kernel`
carries what its readers need beside the block itself: ``pairs``, the same covariance on a
pair set that holds the diagonal of every node (from the pair evaluation that runs in step with
the node-set evaluation, see :mod:`.planner`). So a ReLU on a rectangular block reads its rows'
variances from its own input.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import torch
from torch import Tensor

Nodes = Optional[Tensor]  # sorted global node ids; None means every node


class FactoredRoot:
    """A root held as two factors, ``Q = left @ right`` (``left``: a row per node; ``right``: a small
    square-or-wider matrix), never multiplied out over every node unless a reader needs ``Q`` itself.

    A Nystrom step's root is ``C[:, a] V s`` (:class:`~.numerics.NystromFactor`): kept as
    ``(C[:, a], V s)``, the convolution, the weight and the bias that follow it apply to the left
    factor or to the right one, and the GP reads ``Q`` only as ``Q[rows] @ M`` and its Gram matrix,
    where ``right`` joins the small side (:func:`~gnngp_cli.gp.sufficient.low_rank_statistics`).
    That saves the ``N x m x m`` product of the last Nystrom step. What reads ``Q`` any other way
    calls :func:`held` (a row block's worth at a time where it reads by row blocks). The factors are
    never written in place: a weight's output shares ``left`` with its input."""

    __slots__ = ("left", "right")

    def __init__(self, left: Tensor, right: Tensor):
        self.left, self.right = left, right

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.left.size(0), self.right.size(1)))

    def size(self, dim: Optional[int] = None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def dtype(self) -> torch.dtype:
        return self.left.dtype

    @property
    def device(self) -> torch.device:
        return self.left.device

    @property
    def requires_grad(self) -> bool:
        return False

    def new_empty(self, *size: Any) -> Tensor:
        return self.left.new_empty(*size)

    def __getitem__(self, rows: Any) -> Any:
        """Rows (still factored); an index of rows and columns reads ``Q`` itself."""
        if isinstance(rows, tuple):
            return self.multiplied()[rows]
        return FactoredRoot(self.left[rows], self.right)

    def __matmul__(self, other: Tensor) -> Tensor:
        return self.left @ (self.right @ other)

    def __mul__(self, factor: Any) -> "FactoredRoot":
        return FactoredRoot(self.left, self.right * factor)

    __rmul__ = __mul__

    def multiplied(self) -> Tensor:
        """``left @ right``, a new tensor (the factors may be shared: a weight's output shares ``left``)."""
        return self.left @ self.right


def held(root: Any) -> Any:
    """``Q`` itself: a :class:`FactoredRoot` multiplied out (see :meth:`FactoredRoot.multiplied`), anything else as it is."""
    return root.multiplied() if isinstance(root, FactoredRoot) else root


@dataclass(frozen=True)
class Kernel:
    """A covariance block with rows ``nodes`` and columns ``cols`` (a subset of the rows;
    ``None``: the rows, a square block): ``matrix = K[nodes, cols]``, or ``root`` over the rows
    with ``K = R R^T``. ``nodes = None`` means every node. ``pairs``, when known, is ``K`` on a
    pair set that covers the diagonal of every node: a :class:`~.pairs.PairValues`, or a
    full-node root :class:`Kernel` while the network is linear. ``tangent``, in a tangent-kernel
    evaluation (see :class:`~.blocks.Tangent`), is the neural tangent kernel ``Theta`` of the same
    network on the same nodes, a :class:`Kernel` with its own ``pairs``. ``nngp``, on the tangent
    kernel a :class:`~.blocks.Tangent` block outputs when ``ctx.keep_nngp`` is set, is the NNGP
    kernel ``K`` of the same network on the same nodes (the covariance along training time reads both)."""

    nodes: Nodes
    matrix: Optional[Tensor] = None
    root: Optional[Tensor] = None
    cols: Nodes = None
    pairs: Any = None
    tangent: Optional["Kernel"] = None
    nngp: Optional["Kernel"] = None

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
        each a subset of what it holds (``pairs`` are kept whole; ``tangent`` and ``nngp`` are restricted alike)."""
        if self.nngp is not None:
            return replace(replace(self, nngp=None).restrict(nodes, cols), nngp=self.nngp.restrict(nodes, cols))
        tangent = None if self.tangent is None else self.tangent.restrict(nodes, cols)
        if cols is not None and nodes is not None and cols.numel() == nodes.numel():
            cols = None  # columns are a subset of the rows: equal sizes mean equal sets
        same_rows = nodes is None or self.nodes is None or nodes.numel() == self.nodes.numel()
        if self.root is not None:
            root = self.root if same_rows else self.root[self.positions(nodes)]
            return Kernel(self.nodes if same_rows else nodes, root=root, cols=cols, pairs=self.pairs, tangent=tangent)
        if same_rows and cols is None and self.cols is None:
            return self if tangent is self.tangent else replace(self, tangent=tangent)
        rows = self.nodes if same_rows else nodes
        matrix = self.matrix if same_rows else self.matrix[self.positions(nodes)]
        out_cols = rows if cols is None else cols
        held_cols = self.nodes if self.cols is None else self.cols
        if out_cols is not None and (held_cols is None or out_cols.numel() != held_cols.numel()):
            matrix = matrix[:, self.col_positions(out_cols)]
        return Kernel(rows, matrix=matrix, cols=cols, pairs=self.pairs, tangent=tangent)

    def dense(self) -> Tensor:
        """``K[nodes, cols]`` as a matrix."""
        if self.matrix is not None:
            return self.matrix
        root = held(self.root)
        right = root if self.cols is None else root[self.positions(self.cols)]
        return root @ right.T

    def as_matrix(self) -> "Kernel":
        """This kernel with its block held as a matrix (a root's product formed once, for readers
        that would each form it), its tangent kernel alike unless that is a root with no columns (0)."""
        tangent = self.tangent
        if tangent is not None and not (tangent.root is not None and tangent.root.shape[1] == 0):
            tangent = tangent.as_matrix()
        if self.root is None:
            return self if tangent is self.tangent else replace(self, tangent=tangent)
        return replace(self, matrix=self.dense(), root=None, tangent=tangent)

    def diagonal(self) -> Tensor:
        """``K_xx`` on the rows (a rectangular matrix block reads it from :meth:`variances`)."""
        if self.root is not None:
            root = held(self.root)
            return (root * root).sum(1)
        if self.cols is not None:
            raise ValueError("a rectangular kernel block holds no diagonal; use variances()")
        return torch.diagonal(self.matrix)

    def variances(self, nodes: Tensor, num_nodes: int) -> Optional[Tensor]:
        """``K_xx`` on the global ``nodes`` from the pair values this kernel carries (``None``
        without them); ``num_nodes`` is the graph's node count."""
        from .pairs import Pairs, root_on_pairs

        if self.pairs is None:
            return None
        if isinstance(self.pairs, Kernel):
            return root_on_pairs(self.pairs.root, Pairs.diagonal(nodes))
        return self.pairs.on(Pairs.diagonal(nodes), num_nodes)


def _find(held: Nodes, nodes: Tensor) -> Tensor:
    """Positions of global ``nodes`` in the sorted ids ``held`` (``None``: every node)."""
    if held is None:
        return nodes
    pos = torch.searchsorted(held, nodes)
    if bool((pos >= held.numel()).any()) or not torch.equal(held[pos.clamp_max(held.numel() - 1)], nodes):
        raise ValueError("requested nodes are not held by this kernel")
    return pos
