"""A graph's node order (:mod:`gnngp_cli.graph.orders`), computed once and kept in the data cache."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import Tensor

from ..graph.orders import check_order, node_order
from ..progress import Progress
from .cache import load_failure, tensor_digest
from .files import atomic_write


def cached_order(edge_index: Tensor, num_nodes: int, method: str, folder: Path,
                 untrusted: Optional[Callable[[Path], Optional[str]]] = None) -> Optional[Tensor]:
    """:func:`node_order` of this graph, computed once and kept in ``folder`` under a name made of
    the method and a digest of the edge list (another graph, or the same dataset edited, gets its
    own file). The file is untrusted on reading: ``torch.load(weights_only=True)``, and a file
    that does not hold a permutation of the graph's nodes is computed again, with a warning.
    ``untrusted`` (:meth:`~gnngp_cli.data.store.DataStore.untrusted`) names a file another user
    could have written: it is neither read nor written, and the order is computed for this run."""
    if method == "none":
        return None
    digest = tensor_digest(edge_index.cpu())
    path = folder / f"order-{method}-{num_nodes}-{digest[:24]}.pt"
    distrusted = untrusted(path) if untrusted is not None else None
    if distrusted is not None:
        print(f"gnngp: warning: not trusting the cached node order: {distrusted}; computing the order for this run "
              "without reading or writing that file", file=sys.stderr)
        with Progress(f"ordering the {num_nodes:,} nodes by {method}"):
            return node_order(edge_index, num_nodes, method)
    if path.is_file():
        try:
            stored = torch.load(path, map_location="cpu", weights_only=True)
            order = stored.get("order") if isinstance(stored, dict) else None
            problem = "holds no order" if not isinstance(order, Tensor) else check_order(order, num_nodes)
        except Exception as err:  # noqa: BLE001 - any failure means: do not trust it, compute again
            problem, order = f"could not be loaded safely ({load_failure(err)})", None
        if problem is None and stored.get("edges") != digest:
            problem = "was not computed for this graph's edges"
        if problem is None:
            return order
        print(f"gnngp: warning: node order file {path} {problem}; computing the order again", file=sys.stderr)
    with Progress(f"ordering the {num_nodes:,} nodes by {method}"):
        order = node_order(edge_index, num_nodes, method)
    try:
        atomic_write(path, lambda f: torch.save({"order": order, "edges": digest}, f), binary=True)
    except (OSError, RuntimeError) as err:
        print(f"gnngp: warning: could not keep the node order in {path} ({err}); it is computed again on every run", file=sys.stderr)
    return order
