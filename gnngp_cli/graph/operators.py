"""Graph preprocessing shared by the kernels and the GNN baselines.

One normalisation function, sparse throughout:
    symmetric  A_hat = (I + D)^-1/2 (I + A) (I + D)^-1/2
    row        A_hat = (I + D)^-1 (I + A)
The unit self-loop is added on top of any self-loop already in the edge list and the
weights are summed, as in the GNNGP paper's code.

H2GCN's neighbourhood operators (Zhu et al., NeurIPS 2020), shared by the H2GCN-GP kernel
and the H2GCN baseline (:meth:`Adjacency.operator`). With ``A`` the graph's adjacency without
self-loops (binary, undirected):

- 1-hop set ``N1(v) = {u != v : A_vu = 1}`` (``hop1``);
- 2-hop set ``N2(v) = {u != v : (A^2)_vu > 0, A_vu = 0}`` (``hop2``): nodes reachable in two
  steps and not in one, and never ``v`` itself (H2GCN's "exactly two hops");

each normalised symmetrically by its own degrees, ``A_i <- D_i^-1/2 A_i D_i^-1/2`` with
``D_i = diag(|N_i(v)|)`` (no self-loops added; a node with an empty set gets a zero row).

The edge-list helpers (:func:`coalesce`, :func:`make_undirected`) are plain torch and give the
same edges in the same order as ``torch_geometric.utils.coalesce`` / ``to_undirected`` (rows,
then columns, ascending; ``tests/data/test_graph.py`` compares them), so that nothing here imports
torch_geometric, whose import alone costs more than torch's.
"""
from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager
from typing import Optional

import torch
from torch import Tensor

from .. import runtime
from ..errors import ConfigError
from ..progress import Progress, within
from .orders import positions
from .sparse_product import TiledProduct, tiled_unavailable, tiles_pay

_TOLD: list = []   # the tiled product's unavailability, once told

NORMALISATIONS = ("sym", "row")


@contextmanager
def sparse_beta_quiet():
    """Silence PyTorch's warnings that sparse CSR support is in beta and that its invariant checks
    are off (known and accepted here: the operators are built from checked edges)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*[Ss]parse.*")
        yield


def coalesce(edge_index: Tensor, edge_weight: Optional[Tensor], num_nodes: int) -> tuple[Tensor, Optional[Tensor]]:
    """Sort edges by (row, column) and merge duplicates, summing their weights."""
    return coalesce_keys(edge_index[0] * num_nodes + edge_index[1], edge_weight, num_nodes)


def coalesce_keys(key: Tensor, edge_weight: Optional[Tensor], num_nodes: int) -> tuple[Tensor, Optional[Tensor]]:
    """:func:`coalesce` of the edges whose sort keys are ``key = row * N + col``.

    Pass ``key`` without keeping a reference (``coalesce_keys(a * n + b, ...)``): it is freed
    once sorted. At most the sorted keys, their order and the output (4 int64 per edge) are alive
    at once; a graph without duplicate edges (the usual case) skips ``unique``'s two arrays. On
    a Reddit-sized graph (115M edges) an int64 per edge is 0.9 GB."""
    key, order = torch.sort(key)
    if edge_weight is None:
        del order
    if key.numel() > 1 and bool((key[1:] == key[:-1]).any()):
        key, inverse = torch.unique_consecutive(key, return_inverse=True)
        summed = None
        if edge_weight is not None:
            summed = torch.zeros(key.numel(), dtype=edge_weight.dtype, device=edge_weight.device)
            summed.index_add_(0, inverse, edge_weight[order])
        del inverse
    else:
        summed = edge_weight[order] if edge_weight is not None else None
    if edge_weight is not None:
        del order
    out = torch.empty(2, key.numel(), dtype=key.dtype, device=key.device)
    torch.div(key, num_nodes, rounding_mode="floor", out=out[0])
    torch.remainder(key, num_nodes, out=out[1])
    return out, summed


def make_undirected(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Symmetrise and coalesce an edge list (duplicates merged, self-loops kept once)."""
    row, col = edge_index
    return coalesce_keys(torch.cat([row * num_nodes + col, col * num_nodes + row]), None, num_nodes)[0]


def without_self_loops(edge_index: Tensor) -> tuple[Tensor, int]:
    """The edge list without its self-loops, and how many nodes it linked to themselves: ``I + A``
    adds each node's unit self-loop, and a listed one on top would weigh its own features twice
    (Planetoid's graphs and PyG's GCN normalisation have one)."""
    loops = edge_index[0] == edge_index[1]
    count = int(loops.sum())
    return (edge_index[:, ~loops] if count else edge_index), count


def normalized_adjacency(
    edge_index: Tensor,
    num_nodes: int,
    kind: str = "sym",
    edge_weight: Optional[Tensor] = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """Return ``(edge_index, edge_weight)`` of the normalised adjacency with unit self-loops.

    ``kind="sym"``: ``(I+D)^-1/2 (I+A) (I+D)^-1/2``; ``kind="row"``: ``(I+D)^-1 (I+A)``.
    Degrees are taken over rows of ``I + A``; an isolated node keeps its unit loop, so no
    degree is ever zero and no NaN can appear.
    """
    if kind not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {kind!r}; use one of {NORMALISATIONS}")
    ones = torch.ones(num_nodes, dtype=dtype, device=edge_index.device)
    weight = ones.new_ones(edge_index.size(1)) if edge_weight is None else edge_weight.to(dtype)
    edge_index, edge_weight = coalesce_keys(_keys_with_loops(edge_index, num_nodes), torch.cat([weight, ones]), num_nodes)
    del weight
    row, col = edge_index
    deg = torch.zeros(num_nodes, dtype=dtype, device=edge_index.device).index_add_(0, row, edge_weight)
    if kind == "sym":
        inv_sqrt = deg.pow(-0.5)
        edge_weight = inv_sqrt[row] * edge_weight * inv_sqrt[col]
    else:
        edge_weight = edge_weight / deg[row]
    return edge_index, edge_weight


def normalised_parts(edge_index: Tensor, num_nodes: int, kind: str, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    """``(crow, col, weight)``: :func:`normalized_adjacency` in CSR arrays (its entries are in
    row-major order), on the device of ``edge_index``."""
    ei, weight = normalized_adjacency(edge_index, num_nodes, kind, dtype=dtype)
    crow = row_pointers(ei[0], num_nodes)
    col = ei[1].clone()   # its own storage: the row ids (8 bytes an entry) are released with ei
    del ei
    return crow, col, weight


def _keys_with_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Sort keys ``row * N + col`` of the edges followed by the self-loops ``(i, i)``, in one
    array (no concatenated copy of the edge list)."""
    e = edge_index.size(1)
    key = torch.empty(e + num_nodes, dtype=torch.long, device=edge_index.device)
    torch.mul(edge_index[0], num_nodes, out=key[:e])
    key[:e] += edge_index[1]
    torch.mul(torch.arange(num_nodes, device=edge_index.device), num_nodes + 1, out=key[e:])
    return key


class Adjacency:
    """A normalised sparse adjacency ``A`` with the operations the kernels need: its entries
    as a COO list (``edge_index``, ``edge_weight``) and as CSR (built on first use, sharing the
    column and weight arrays when the list is in row-major order)."""

    def __init__(self, edge_index: Optional[Tensor], edge_weight: Tensor, num_nodes: int, csr: Optional[Tensor] = None,
                 product: str = "torch", order: Optional[Tensor] = None):
        self._coo = edge_index
        self._weight = edge_weight
        self.dtype = edge_weight.dtype
        self.num_entries = edge_weight.numel()
        self.num_nodes = num_nodes
        self._csr = csr
        self._operators: dict[str, "Adjacency"] = {}
        self.product = product          # A Q by torch's CSR product, the tiled one, or auto (see matmul)
        self.order = order              # a node order the product runs in (data.order), or None
        self._tiled: Optional[TiledProduct] = None
        self._permuted: Optional[Tensor] = None   # P A P^T in CSR, for torch's product under an order

    def operator(self, name: str) -> "Adjacency":
        """Another operator on this graph, built once: H2GCN's ``hop1`` or ``hop2`` (see the
        module docstring), from this adjacency's edges (its self-loops dropped)."""
        if name not in OPERATORS:
            raise ValueError(f"unknown graph operator {name!r}; use one of {', '.join(OPERATORS)}")
        if name not in self._operators:
            with sparse_beta_quiet(), Progress(f"building the {name} operator of {self.num_nodes:,} nodes"):   # minutes on a dense graph
                edges = OPERATORS[name](self.edge_index, self.num_nodes)
                self._operators[name] = symmetric_normalised(edges, self.num_nodes, self.dtype)
                self._operators[name].product, self._operators[name].order = self.product, self.order
        return self._operators[name]

    @classmethod
    def from_graph(cls, edge_index: Tensor, num_nodes: int, kind: str, dtype: torch.dtype, device,
                   product: str = "torch", order: Optional[Tensor] = None) -> "Adjacency":
        """The normalised adjacency of a graph (:func:`normalised_parts`, then :meth:`from_parts`).
        ``product`` and ``order``: how :meth:`matmul` runs (``compute.product``, ``data.order``)."""
        return cls.from_parts(*normalised_parts(edge_index.to(device), num_nodes, kind, dtype), num_nodes, product, order)

    @classmethod
    def from_parts(cls, crow: Tensor, col: Tensor, weight: Tensor, num_nodes: int, product: str = "torch",
                   order: Optional[Tensor] = None) -> "Adjacency":
        """The adjacency of the CSR arrays ``(crow, col, weight)`` (:func:`normalised_parts`, or the
        same read back from the data cache). Past ``ROW_BLOCK_ENTRIES`` entries only its CSR form
        is held (the COO rows, 8 bytes an entry, are rebuilt when asked for: 0.9 GB on a
        Reddit-sized graph, where the low-rank kernels need only ``A Q``); below, its COO list too."""
        if weight.numel() <= runtime.ROW_BLOCK_ENTRIES:
            rows = torch.repeat_interleave(torch.arange(num_nodes, device=crow.device), crow.diff())
            return cls(torch.stack([rows, col]), weight, num_nodes, product=product, order=order)
        with sparse_beta_quiet():
            matrix = torch.sparse_csr_tensor(crow, col, weight, (num_nodes, num_nodes), check_invariants=False)
            return cls(None, weight, num_nodes, matrix, product, order)

    @property
    def edge_weight(self) -> Tensor:
        """The entries' weights, in the order of :attr:`edge_index` (rebuilt from the tiled layout
        when it replaced the CSR arrays)."""
        if self._weight is None:
            self._weight = self._csr_form().values()
        return self._weight

    @property
    def edge_index(self) -> Tensor:
        """``(2, E)`` row and column ids in CSR order (rebuilt from the CSR form when only it is held)."""
        if self._coo is not None:
            return self._coo
        if self._csr is None:        # released for the tiled layout: rebuilt from it
            self._csr = self._tiled_csr()
        crow, col = self._csr.crow_indices(), self._csr.col_indices()
        row = torch.repeat_interleave(torch.arange(self.num_nodes, device=crow.device), crow.diff())
        return torch.stack([row, col])

    def csr_parts(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(crow, col, weight)`` of ``A`` in CSR order."""
        self._csr_form()
        return self._csr.crow_indices(), self._csr.col_indices(), self._csr.values()

    def matmul(self, dense: Tensor) -> Tensor:
        """``A @ dense`` for all nodes (sparse CSR product). Past ``ROW_BLOCK_ENTRIES`` output
        entries, by row blocks of ``A`` written into one output: the product allocates a
        temporary the size of its result (3 GB for a Reddit-sized GCNGP-X root), now a block's.

        With ``product="tiled"``, or ``"auto"`` on the CPU past ``ROW_BLOCK_ENTRIES`` output
        entries on a graph dense enough (:func:`~.sparse_product.tiles_pay`), the cache-tiled product
        of :mod:`.sparse_product` instead (about 2.2x faster on a Reddit-sized graph); its layout
        replaces the CSR arrays, which are rebuilt if something else asks for them. Under an
        ``order``, the product runs on ``P A P^T``."""
        if self._tiled_for(dense):
            return self._tiled_product().matmul(dense)
        if self.order is not None:
            return self._permuted_matmul(dense)
        csr = self._csr_form()
        width = dense.size(1) if dense.dim() == 2 else 1
        if self.num_nodes * width <= runtime.ROW_BLOCK_ENTRIES or dense.requires_grad or dense.dim() != 2:
            return torch.sparse.mm(csr, dense)
        crow, col, weight = csr.crow_indices(), csr.col_indices(), csr.values()
        out = dense.new_empty(self.num_nodes, width)
        blocks = list(runtime.row_blocks(self.num_nodes, width))
        for i, (start, stop) in enumerate(blocks):
            lo, hi = int(crow[start]), int(crow[stop])
            with sparse_beta_quiet():
                rows = torch.sparse_csr_tensor(crow[start:stop + 1] - lo, col[lo:hi], weight[lo:hi], (stop - start, self.num_nodes),
                                               check_invariants=False)
            with within(f"A Q row block {i + 1} of {len(blocks)}"):
                out[start:stop] = torch.sparse.mm(rows, dense)
        return out

    def _csr_form(self) -> Tensor:
        """``A`` in CSR (built, or rebuilt from the tiled layout, on first use)."""
        if self._csr is None:
            self._csr = self._tiled_csr() if self._coo is None else coo_to_csr(self.edge_index, self.edge_weight, (self.num_nodes, self.num_nodes))
        return self._csr

    def _tiled_csr(self) -> Tensor:
        row, col, weight = self._tiled.coo()
        return coo_to_csr(torch.stack([row, col]), weight, (self.num_nodes, self.num_nodes))

    def _tiled_for(self, dense: Tensor) -> bool:
        """Whether ``A @ dense`` takes the tiled product (see :meth:`matmul`)."""
        if self.product == "torch" or dense.dim() != 2 or dense.requires_grad or dense.device.type != "cpu":
            return False
        if dense.dtype not in (torch.float32, torch.float64) or dense.dtype != self.dtype:
            return False
        if self.product == "auto" and (self.num_nodes * dense.size(1) <= runtime.ROW_BLOCK_ENTRIES or not tiles_pay(self.num_entries, self.num_nodes)):
            return False
        why = tiled_unavailable()
        if why and self.product == "tiled":
            raise ConfigError(f"compute.product=tiled needs numba's kernels, and {why}; pip install numba, or use compute.product=torch")
        if why and not _TOLD:
            _TOLD.append(why)
            print(f"gnngp: warning: the tiled graph product cannot run ({why}); torch's product runs instead (slower on large graphs)",
                  file=sys.stderr)
        return not why

    def _tiled_product(self) -> TiledProduct:
        """The tiled layout of ``A`` (built once). A graph held only in CSR gives its CSR arrays
        up for it (the layout holds 8 bytes per entry and 12 per listed row, the CSR 12 per entry)."""
        if self._tiled is None:
            crow, col, weight = self.csr_parts()
            with Progress(f"laying out the {weight.numel():,} entries of A by source tiles"):
                self._tiled = TiledProduct.build(crow, col, weight, self.num_nodes, self.order)
            if self._coo is None:
                self._csr = self._weight = None
        return self._tiled

    def _permuted_matmul(self, dense: Tensor) -> Tensor:
        """``A @ dense`` by torch's product on ``P A P^T``: ``dense``'s rows read through the
        order and the result's written back through it, by column chunks of at most
        ``ROW_BLOCK_ENTRIES`` entries (so the reordered copies stay a chunk's)."""
        if self._permuted is None:
            pos = positions(self.order)
            row, col = self.edge_index
            self._permuted = coo_to_csr(torch.stack([pos[row], pos[col]]), self.edge_weight, (self.num_nodes, self.num_nodes))
        order = self.order.to(dense.device)
        if dense.requires_grad:   # fit=mll: a differentiable scatter back through the order
            out = torch.sparse.mm(self._permuted, dense[order])
            return torch.zeros_like(out).index_copy(0, order, out)
        out = dense.new_empty(dense.shape)
        step = max(1, runtime.ROW_BLOCK_ENTRIES // max(self.num_nodes, 1))
        for start in range(0, dense.size(1), step):
            stop = min(start + step, dense.size(1))
            out[order, start:stop] = torch.sparse.mm(self._permuted, dense[order, start:stop].contiguous())
        return out

    def neighbours(self, nodes: Tensor) -> Tensor:
        """Sorted ids of every node reachable in one step from ``nodes`` (``nodes`` included)."""
        mask = torch.zeros(self.num_nodes, dtype=torch.bool, device=self.edge_index.device)
        mask[nodes.to(mask.device)] = True   # ids from the host index a graph on the GPU too
        row, col = self.edge_index
        reach = torch.zeros_like(mask)
        reach[col[mask[row]]] = True
        return (reach | mask).nonzero().view(-1)

    def block(self, rows: Tensor, cols: Tensor) -> Tensor:
        """The sparse block ``A[rows][:, cols]`` (CSR); ``cols`` must hold every neighbour of ``rows``."""
        pos_row = torch.full((self.num_nodes,), -1, dtype=torch.long, device=rows.device)
        pos_col = torch.full_like(pos_row, -1)
        pos_row[rows] = torch.arange(rows.numel(), device=rows.device)
        pos_col[cols] = torch.arange(cols.numel(), device=rows.device)
        r, c = self.edge_index
        keep = pos_row[r] >= 0
        r, c, w = pos_row[r[keep]], pos_col[c[keep]], self.edge_weight[keep]
        if bool((c < 0).any()):
            raise ValueError("column set misses neighbours of the requested rows")
        return coo_to_csr(torch.stack([r, c]), w, (rows.numel(), cols.numel()))


def row_pointers(rows: Tensor, num_rows: int) -> Tensor:
    """CSR row pointers ``crow`` of entries whose (sorted) row ids are ``rows``."""
    crow = torch.zeros(num_rows + 1, dtype=torch.long, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=num_rows), 0)
    return crow


def csr_order(row: Tensor, col: Tensor, shape: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """``(crow, order)``: the CSR row pointers of the COO entries ``(row, col)`` and the
    permutation that puts them in CSR (row-major) order."""
    order = torch.argsort(row * shape[1] + col)
    return row_pointers(row, shape[0]), order


def coo_to_csr(index: Tensor, weight: Tensor, shape: tuple[int, int]) -> Tensor:
    """A CSR matrix from coalesced-or-not COO entries, built without COO coalescing. Entries
    already in row-major order (a normalised adjacency: :func:`coalesce` sorts them) are not
    sorted again, and the matrix shares their column and weight arrays instead of copying them."""
    row, col = index[0], index[1]
    if _row_major(row, col):
        with sparse_beta_quiet():
            return torch.sparse_csr_tensor(row_pointers(row, shape[0]), col, weight, shape, check_invariants=False)
    crow, order = csr_order(row, col, shape)
    with sparse_beta_quiet():
        return torch.sparse_csr_tensor(crow, col[order], weight[order], shape, check_invariants=False)


def _row_major(row: Tensor, col: Tensor) -> bool:
    """Whether the entries are sorted by row, then column."""
    if row.numel() < 2:
        return True
    step = row[1:] - row[:-1]
    return bool((step >= 0).all()) and bool(((step > 0) | (col[1:] >= col[:-1])).all())


def one_hop_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The 1-hop set as an undirected, coalesced edge list without self-loops."""
    from torch_geometric.utils import remove_self_loops, to_undirected   # when used: importing gnngp stays light
    edge_index, _ = remove_self_loops(edge_index)
    return to_undirected(edge_index, num_nodes=num_nodes)


def two_hop_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The exact 2-hop set (reachable in two steps, not in one, not the node itself)."""
    from torch_geometric.utils import coalesce

    one = one_hop_edges(edge_index, num_nodes)
    if one.numel() == 0:
        return one
    ones = torch.ones(one.size(1), dtype=torch.float32, device=one.device)
    a = torch.sparse_coo_tensor(one, ones, (num_nodes, num_nodes), check_invariants=False).coalesce()
    with sparse_beta_quiet():
        reach = torch.sparse.mm(a, a).coalesce().indices()
    keys = reach[0] * num_nodes + reach[1]
    excluded = torch.cat([one[0] * num_nodes + one[1], torch.arange(num_nodes, device=one.device) * (num_nodes + 1)])
    keep = ~torch.isin(keys, excluded)
    return coalesce(reach[:, keep], num_nodes=num_nodes)


def symmetric_normalised(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> Adjacency:
    """``D^-1/2 M D^-1/2`` of the binary matrix ``M`` with the given edges (no self-loops added)."""
    row, col = edge_index
    deg = torch.bincount(row, minlength=num_nodes).to(dtype)
    inv_sqrt = torch.where(deg > 0, deg.clamp_min(1).pow(-0.5), torch.zeros_like(deg))
    return Adjacency(edge_index, inv_sqrt[row] * inv_sqrt[col], num_nodes)


OPERATORS = {"hop1": one_hop_edges, "hop2": two_hop_edges}   # the edges of each operator, before normalisation


def h2gcn_operators(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> tuple[Adjacency, Adjacency]:
    """``(A1, A2)``: the normalised 1-hop and exact 2-hop operators of H2GCN."""
    return (symmetric_normalised(one_hop_edges(edge_index, num_nodes), num_nodes, dtype),
            symmetric_normalised(two_hop_edges(edge_index, num_nodes), num_nodes, dtype))
