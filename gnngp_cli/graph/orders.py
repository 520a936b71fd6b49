"""Node orders that give the graph product locality (``data.order=none|rcm|metis``).

An *order* (``data.order=rcm|metis``) renumbers the nodes so that neighbours sit close
(:func:`node_order`): the product then runs on ``P A P^T`` and maps back (``A Q = P^T (P A P^T)
(P Q)``), reading each slice of ``Q`` through the order and writing each slice of the result
back through it, so landmarks, rows and results stay in the graph's own ids.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from ..errors import ConfigError

ORDERS = ("none", "rcm", "metis")


def node_order(edge_index: Tensor, num_nodes: int, method: str, seed: int = 0) -> Optional[Tensor]:
    """A renumbering of the nodes (position -> node id) that puts neighbours close:
    ``rcm``, reverse Cuthill-McKee (scipy) on the symmetrised graph; ``metis``, METIS k-way
    parts of about 4,096 nodes (pymetis), nodes sorted by part then id. ``none``: ``None``."""
    if method not in ORDERS:
        raise ConfigError(f"unknown data.order {method!r}; use one of {', '.join(ORDERS)}")
    if method == "none":
        return None
    if num_nodes < 3:   # nothing to order (and METIS cannot split fewer nodes)
        return torch.arange(num_nodes, dtype=torch.int64)
    import scipy.sparse as sp

    row, col = edge_index.cpu().numpy()
    keep = row != col
    ones = np.ones(int(keep.sum()), dtype=np.int8)
    graph = sp.csr_matrix((ones, (row[keep], col[keep])), shape=(num_nodes, num_nodes))
    graph = (graph + graph.T).tocsr()
    if method == "rcm":
        from scipy.sparse.csgraph import reverse_cuthill_mckee

        return torch.from_numpy(reverse_cuthill_mckee(graph, symmetric_mode=True).astype(np.int64))
    try:
        import pymetis
    except ImportError as err:
        raise ConfigError("data.order=metis needs pymetis, which is not installed; pip install pymetis, or use data.order=rcm") from err
    parts = max(2, math.ceil(num_nodes / 4096))
    options = pymetis.Options(seed=seed)
    _, membership = pymetis.part_graph(parts, xadj=graph.indptr, adjncy=graph.indices, options=options)
    membership = np.asarray(membership, dtype=np.int64)
    return torch.from_numpy(np.lexsort((np.arange(num_nodes), membership)).astype(np.int64))


def positions(order: Tensor) -> Tensor:
    """The inverse of an order: each node id's position (``positions(order)[order[k]] == k``)."""
    pos = torch.empty_like(order)
    pos[order] = torch.arange(order.numel(), dtype=order.dtype, device=order.device)
    return pos


def check_order(order: Tensor, num_nodes: int) -> Optional[str]:
    """Why ``order`` is not a permutation of ``0..num_nodes-1`` (``None``: it is)."""
    if order.dim() != 1 or order.numel() != num_nodes or order.dtype != torch.int64:
        return f"holds {tuple(order.shape)} {order.dtype} ids, not {num_nodes} int64 node ids"
    if num_nodes and (int(order.min()) < 0 or int(order.max()) >= num_nodes):
        return "holds ids outside the graph"
    if num_nodes and not bool((torch.bincount(order, minlength=num_nodes) == 1).all()):
        return "names some node twice"
    return None
