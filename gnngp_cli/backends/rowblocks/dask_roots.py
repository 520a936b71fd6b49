"""The row-block backing of a low-rank root: ``Q`` as a Dask array chunked by row blocks.

The blocks of :mod:`gnngp_cli.kernels.blocks` are the same objects as in the local path; only
the context differs. :class:`RowBlockContext` holds the features as a Dask array and
:class:`DaskRoots` implements the root operations of :mod:`gnngp_cli.kernels.torch_roots` on row
blocks:

- ``c Q``, ``[Q, s_b 1]``, ``[Q1, Q2]``: row-local, one task per row block;
- ``A Q``: ``Q`` written to row-block files (:mod:`.root_files`), then the blocked sparse-dense
  product of :meth:`~.sharded_graph.ShardedGraph.convolve` reads from them;
- the Nystrom steps (input layer, ReLU and a product of kernels): the landmark rows ``Q[a]`` (``Na x r``, small) are
  gathered to the client, ``C[a, a] = V D V^T`` is factorised there
  (:class:`~gnngp_cli.kernels.numerics.NystromFactor`, the same numerics as the local root),
  and each row block computes ``C[b, a]`` and applies the factor on its own rows;
- a named layer's output is written to row-block files and checked to be finite, so the next
  layer starts from it instead of recomputing it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ...errors import KernelError
from ...kernels.context import KernelContext
from ...kernels.numerics import NystromFactor
from ...kernels.activations import RELU, Activation
from ...kernels.torch_roots import activation_nystrom_rows, activation_pair_rows, activation_tangent_cross, product_cross
from ...kernels.value import Kernel
from .sharded_graph import ShardedGraph, task_block
from .root_files import RootStore


def map_rows(q, fn, width: int, *shared: Any):
    """``fn(q_b, start, *shared)`` on every row block ``q_b`` of ``q`` (rows from ``start``),
    each returning ``rows x width``; ``shared`` values are sent once, not once per task."""
    import dask
    import dask.array as da

    if q.ndim == 2 and q.numblocks[1] != 1:
        q = q.rechunk({1: -1})
    shared = [dask.delayed(s, pure=True) if not isinstance(s, (int, float, str)) else s for s in shared]
    blocks, start = [], 0
    for q_b, rows in zip(q.to_delayed().ravel(), q.chunks[0]):
        out = dask.delayed(fn, pure=True)(q_b, start, *shared)
        blocks.append(task_block(out, fn.__name__.lstrip("_"), (rows, width), q.dtype))
        start += rows
    return da.concatenate(blocks, axis=0)


def _with_constant(q_b: np.ndarray, start: int, value: float) -> np.ndarray:
    return np.concatenate([q_b, np.full((q_b.shape[0], 1), value, dtype=q_b.dtype)], axis=1)


def _landmark_rows(landmarks: np.ndarray, start: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(is_landmark, index)`` of the landmarks among rows ``[start, start + rows)``."""
    lo, hi = np.searchsorted(landmarks, [start, start + rows])
    is_landmark = torch.zeros(rows, dtype=torch.bool)
    is_landmark[torch.from_numpy(landmarks[lo:hi] - start)] = True
    return is_landmark, torch.arange(int(lo), int(hi))


def _activation_nystrom(q_b: np.ndarray, start: int, q_a: torch.Tensor, var_a: torch.Tensor, factor: NystromFactor, landmarks: np.ndarray,
                        activation: Activation) -> np.ndarray:
    """Rows of ``chol(g(Q Q^T))``: ``C[b, a] = g(Q_b Q[a]^T)``, then the factor."""
    q = torch.from_numpy(np.ascontiguousarray(q_b))
    return activation_nystrom_rows(q, q_a, var_a, factor, *_landmark_rows(landmarks, start, q.size(0)), activation).numpy()


def _activation_tangent_nystrom(qp_b: np.ndarray, start: int, width: int, q_a: torch.Tensor, p_a: torch.Tensor, factor: NystromFactor,
                                landmarks: np.ndarray, activation: Activation) -> np.ndarray:
    """Rows of ``chol(g'(Q Q^T) o P P^T)`` from rows of ``[Q, P]`` (``Q``: the first ``width``
    columns; ``p_a`` None: ``P`` is ``Q``): ``C[b, a] = g'(Q_b Q[a]^T) o P_b P[a]^T``, then the factor."""
    qp = torch.from_numpy(np.ascontiguousarray(qp_b))
    cross = activation_tangent_cross(qp[:, :width], None if p_a is None else qp[:, width:], q_a, p_a, activation)
    return factor.apply(cross, *_landmark_rows(landmarks, start, qp.size(0))).numpy()


def _activation_pair_nystrom(qp_b: np.ndarray, start: int, width: int, q_a: torch.Tensor, p_a: torch.Tensor, var_a: torch.Tensor,
                             factors: tuple, with_kernel: bool, landmarks: np.ndarray, activation: Activation) -> np.ndarray:
    """Rows of ``[chol(g(Q Q^T)), chol(g'(Q Q^T) o P P^T (+ g))]`` from rows of ``[Q, P]`` (``Q``: the
    first ``width`` columns; ``p_a`` None: ``P`` is ``Q``, the rows are ``Q``'s alone), ``Q Q[a]^T`` read
    once (see :func:`activation_pair_rows`)."""
    qp = torch.from_numpy(np.ascontiguousarray(qp_b))
    g, theta = activation_pair_rows(qp[:, :width], None if p_a is None else qp[:, width:], q_a, p_a, var_a, with_kernel, activation)
    rows = _landmark_rows(landmarks, start, qp.size(0))
    if factors[0] is None:   # the tangent root alone (no block after reads K)
        return factors[1].apply(theta, *rows).numpy()
    return torch.cat([factors[0].apply(g, *rows), factors[1].apply(theta, *rows)], dim=1).numpy()


def _product_nystrom(qq_b: np.ndarray, start: int, width: int, q1_a: torch.Tensor, q2_a: torch.Tensor, factor: NystromFactor,
                     landmarks: np.ndarray) -> np.ndarray:
    """Rows of ``chol(Q1 Q1^T o Q2 Q2^T)`` from rows of ``[Q1, Q2]`` (``Q1``: the first ``width``
    columns): ``C[b, a] = (Q1_b Q1[a]^T) o (Q2_b Q2[a]^T)``, then the factor."""
    qq = torch.from_numpy(np.ascontiguousarray(qq_b))
    cross = product_cross(qq[:, :width], qq[:, width:], q1_a, q2_a)
    return factor.apply(cross, *_landmark_rows(landmarks, start, qq.size(0))).numpy()


def _base_nystrom(x_b: np.ndarray, start: int, base: Any, x_a: torch.Tensor, factor: NystromFactor, landmarks: np.ndarray) -> np.ndarray:
    """Rows of ``chol(C0)``: ``C0[b, a]`` from the features, then the factor."""
    x = torch.from_numpy(np.ascontiguousarray(x_b))
    return factor.apply(base.block(x, x_a), *_landmark_rows(landmarks, start, x.size(0))).numpy()


class DaskRoots:
    """Root operations on row blocks (see the module docstring); roots that are read again are
    kept in ``store``."""

    def __init__(self, graph: ShardedGraph, store: RootStore):
        self.graph, self.store = graph, store

    def with_constant(self, root, value: float):
        return map_rows(root, _with_constant, root.shape[1] + 1, float(value))

    def side_by_side(self, roots: list):
        import dask.array as da

        return da.concatenate(roots, axis=1).rechunk({1: -1})

    def convolve(self, adjacency, root):
        return adjacency.matmul(root)

    def _at_landmarks(self, root, ids: np.ndarray, what: str) -> tuple[Any, torch.Tensor]:
        """``root`` written to row-block files (read again: each block maps to its rows) and its
        landmark rows ``root[ids]`` gathered into this process; ``what`` names it in errors."""
        root = self.store.written(root, what)
        return root, torch.from_numpy(self.store.gather_rows(root, ids, what))

    def activation_root(self, root, landmarks: torch.Tensor, activation: Activation = RELU):
        ids = landmarks.numpy()
        root, q_a = self._at_landmarks(root, ids, f"the {activation.name}'s input")
        var_a = (q_a * q_a).sum(1)
        factor = NystromFactor.of(activation.expectation(q_a @ q_a.T, var_a, var_a), "activation")
        return map_rows(root, _activation_nystrom, ids.size, q_a, var_a, factor, ids, activation)

    def activation_tangent_root(self, root, tangent, landmarks: torch.Tensor, activation: Activation = RELU):
        """The activation's tangent root (see :meth:`gnngp_cli.kernels.torch_roots.TorchRoots.activation_tangent_root`):
        ``Q[a]`` and ``P[a]`` gathered, ``C[a, a]`` factorised here, each row block of ``[Q, P]``
        maps to its rows of the root."""
        if tangent.shape[1] == 0:
            return tangent
        ids = landmarks.numpy()
        same = tangent is root   # Theta = K: one root written and read
        root, q_a = self._at_landmarks(root, ids, f"the {activation.name}'s input")
        tangent, p_a = (root, None) if same else self._at_landmarks(tangent, ids, f"the {activation.name}'s tangent input")
        factor = NystromFactor.of(activation_tangent_cross(q_a, p_a, q_a, p_a, activation), "activation (tangent)")
        rows = root if same else self.side_by_side([root, tangent])
        return map_rows(rows, _activation_tangent_nystrom, ids.size, root.shape[1], q_a, p_a, factor, ids, activation)

    def activation_roots(self, root, tangent, landmarks: torch.Tensor, with_kernel: bool, kernel_root: bool = True,
                         activation: Activation = RELU):
        """The activation's root and tangent root in one pass (see :meth:`gnngp_cli.kernels.torch_roots.TorchRoots.activation_roots`):
        ``Q[a]`` and ``P[a]`` gathered, both factors made here, each row block of ``[Q, P]`` maps to
        its rows of ``[Q', P']`` (of ``P'`` alone without ``kernel_root``: ``None`` for ``Q'``)."""
        ids = landmarks.numpy()
        same = tangent is root   # Theta = K (after a first layer): one root written and read, P P[a]^T is Q Q[a]^T
        root, q_a = self._at_landmarks(root, ids, f"the {activation.name}'s input")
        if same:
            p_a = None
        elif tangent.shape[1]:
            tangent, p_a = self._at_landmarks(tangent, ids, f"the {activation.name}'s tangent input")
        else:
            p_a = q_a[:, :0]
        var_a = (q_a * q_a).sum(1)
        g_a, theta_a = activation_pair_rows(q_a, p_a, q_a, p_a, var_a, with_kernel, activation)
        factors = NystromFactor.of(g_a, "activation") if kernel_root else None, NystromFactor.of(theta_a, "activation (tangent)")
        both = map_rows(self.side_by_side([root, tangent]) if not same and tangent.shape[1] else root, _activation_pair_nystrom,
                        (2 if kernel_root else 1) * ids.size, root.shape[1], q_a, p_a, var_a, factors, with_kernel, ids, activation)
        return (both[:, :ids.size], both[:, ids.size:]) if kernel_root else (None, both)

    def product_root(self, first, second, landmarks: torch.Tensor):
        """The root of ``Q1 Q1^T o Q2 Q2^T`` (see :meth:`gnngp_cli.kernels.torch_roots.TorchRoots.product_root`):
        ``Q1[a]`` and ``Q2[a]`` gathered, ``C[a, a]`` factorised here, each row block of ``[Q1, Q2]``
        maps to its rows of the root."""
        ids = landmarks.numpy()
        first, q1_a = self._at_landmarks(first, ids, "a product's first factor")
        second, q2_a = self._at_landmarks(second, ids, "a product's second factor")
        factor = NystromFactor.of(product_cross(q1_a, q2_a, q1_a, q2_a), "product")
        return map_rows(self.side_by_side([first, second]), _product_nystrom, ids.size, first.shape[1], q1_a, q2_a, factor, ids)

    def layer_output(self, k: Kernel, name: str) -> Kernel:
        tangent = k.tangent
        if tangent is not None and tangent.root.shape[1]:
            tangent = replace(tangent, root=self.store.written(tangent.root, f"{name} (tangent kernel)"))
        return replace(k, root=None if k.root is None else self.store.written(k.root, name), tangent=tangent)


@dataclass
class BlockAdjacency:
    """The normalised adjacency of a sharded graph, as the blocks see it: ``A Q`` by row blocks,
    ``Q`` read from its files in ``store`` (written first if it is not there yet). ``edges``:
    the shards of another operator (:meth:`operator`), normalised as ``kind`` says."""

    graph: ShardedGraph
    kind: str
    store: RootStore
    edges: Optional[Path] = None

    @property
    def num_nodes(self) -> int:
        return self.graph.meta.num_nodes

    def operator(self, name: str) -> "BlockAdjacency":
        """Another operator on the graph (H2GCN's ``hop1``, ``hop2``), sharded alike and
        normalised symmetrically, as :meth:`gnngp_cli.graph.operators.Adjacency.operator` is."""
        return BlockAdjacency(self.graph, "sym", self.store, self.graph.operator(name, self.store))

    def matmul(self, q):
        folder, q = self.store.folder_of(q, "a graph convolution's input")
        return self.graph.convolve(folder, self.kind, q.shape[1], q.dtype, self.edges)


@dataclass
class RowBlockContext(KernelContext):
    """A :class:`~gnngp_cli.kernels.context.KernelContext` whose features and roots are row
    blocks on a Dask cluster (low rank only: ``landmarks`` must be set)."""

    graph: Optional[ShardedGraph] = None
    dtype: Any = torch.float32
    _gathered: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return self.graph.meta.num_nodes

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def input_kernel(self, nodes, cols=None) -> Kernel:
        """``Q0`` over every node: ``X`` itself for a linear ``C0`` with no more features than
        landmarks, else the Nystrom root of ``C0`` on the landmarks (see the module docstring).

        ``X`` is read from the shards and a Nystrom root is written to row-block files, as every
        layer may read ``Q0`` again (GCNII's initial residual does)."""
        if nodes is not None or self.landmarks is None:
            raise KernelError("internal: the row-block backing computes low-rank roots over every node only")
        if self._input is None:
            x = self.features
            ids = self.landmarks.numpy()
            if self.base.is_linear and ids.size >= x.shape[1]:
                self._input = Kernel(None, root=x)   # read from the shards whenever a step needs it
            else:
                if "x_a" not in self._gathered:
                    self._gathered["x_a"] = torch.from_numpy(self.graph.gather_rows(x, ids))
                x_a = self._gathered["x_a"]
                factor = NystromFactor.of(self.base.block(x_a, x_a), "input layer")
                self._input = Kernel(None, root=self.roots.store.written(map_rows(x, _base_nystrom, ids.size, self.base, x_a, factor, ids),
                                                                         "input layer"))
        return self._input
