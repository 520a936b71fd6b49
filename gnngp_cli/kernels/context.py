"""What the blocks read: the features, the normalised adjacency, the base kernel, the
landmarks (low rank), and caches that a search over base-kernel parameters shares."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from ..graph.operators import Adjacency, sparse_beta_quiet
from .base import BaseKernel
from .numerics import nystrom_root
from .torch_roots import LOCAL_ROOTS, RootBacking
from .value import Kernel, Nodes


@dataclass
class KernelContext:
    """What the blocks read: features ``X``, the normalised adjacency ``A``, the base
    kernel ``C0`` and, in low-rank mode, the landmark node ids ``a``."""

    features: Tensor
    adjacency: Adjacency
    base: BaseKernel = field(default_factory=BaseKernel)
    landmarks: Optional[Tensor] = None
    pair_budget: Optional[int] = None  # most (pair, neighbour, neighbour) terms one pair evaluation may hold; None: automatic
    roots: RootBacking = LOCAL_ROOTS   # where low-rank roots live (see .roots): this process, or row blocks on a cluster
    dense_input: bool = False  # exact mode: a linear C0 as the cached matrix X X^T, not the root X (fitting evaluates it every step)
    on_layer: Optional[Callable[[str], None]] = None  # told each named layer as it completes (progress lines)
    tangent: bool = False  # carry the neural tangent kernel beside the NNGP (set by blocks.Tangent for its network)
    keep_nngp: bool = False  # a tangent kernel's output keeps the NNGP kernel beside it (Kernel.nngp: the covariance along training time)
    last_kernel_reader: Any = None  # set by blocks.Tangent over every node (low rank, K not kept): the block after which no block reads K, so only Theta goes on
    observe: Optional[Callable[[Any, Tensor], None]] = None  # exact mode: told each activation block and the dense K it reads (gnngp verify's activation check)
    trained: Optional[frozenset] = None  # exact mode: ids of the blocks whose own parameters the tangent kernel differentiates (None: every block's; gnngp verify's parts)
    _input: Optional[Kernel] = None
    _statistics: dict = field(default_factory=dict)
    _derived: dict = field(default_factory=dict)

    def with_base(self, base: BaseKernel) -> "KernelContext":
        """The same context with another base kernel (e.g. the next gamma of a search); the
        base kernel's parameter-free pairwise statistics are shared, not recomputed."""
        return replace(self, base=base, _input=None)

    def base_block(self, rows: Nodes, cols: Nodes) -> Tensor:
        """``C0[rows, cols]`` (``None`` = every node), from a cached pairwise statistic."""
        def compute() -> Tensor:
            xa = self.features if rows is None else self.features[rows]
            xb = self.features if cols is None else self.features[cols]
            return self.base.statistic(xa, xb, self.sparse_features if rows is None else None)

        return self.base.from_statistic(self._statistic("block", rows, cols, compute))

    def base_on_pairs(self, pairs: Any, chunk: int = 4096) -> Tensor:
        """``C0(x_r, x_c)`` for every pair of ``pairs`` (e.g. each node with itself: the diagonal
        of an exact kernel), from a cached statistic, as :meth:`base_block`'s."""
        def compute() -> Tensor:
            x = self.features
            out = x.new_empty(len(pairs))
            for start in range(0, len(pairs), chunk):
                r, c = pairs.rows[start:start + chunk], pairs.cols[start:start + chunk]
                out[start:start + chunk] = self.base.pair_statistic(x[r], x[c])
            return out

        return self.base.from_statistic(self._statistic("pairs", pairs.rows, pairs.cols, compute))

    def _statistic(self, kind: str, rows: Nodes, cols: Nodes, compute: Callable[[], Tensor]) -> Tensor:
        """The base kernel's parameter-free statistic on a node block or a pair set (``kind``),
        kept (one of each kind at a time) for the next evaluation on the same nodes: the next
        gamma of a search reads it, not the features again."""
        cached = self._statistics.get(kind)
        if cached is None or cached[0] != self.base.statistic_name or not _same_nodes(cached[1], rows) or not _same_nodes(cached[2], cols):
            self._statistics.pop(kind, None)   # the one kept is released before the next is made
            cached = (self.base.statistic_name, rows, cols, compute())
            self._statistics[kind] = cached
        return cached[3]

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
    def device(self) -> torch.device:
        return self.features.device

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
            if self.base.is_linear and not self.dense_input:
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


def _same_nodes(a: Nodes, b: Nodes) -> bool:
    """Whether two node sets are the same (``None``: every node)."""
    if a is b:
        return True
    return a is not None and b is not None and a.numel() == b.numel() and torch.equal(a, b)
