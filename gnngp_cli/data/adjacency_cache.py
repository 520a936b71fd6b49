"""A graph's normalised adjacency (:func:`~gnngp_cli.graph.operators.normalised_parts`), built once
and kept in the data cache, checked like the processed cache (:func:`.cache.cached_file`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import torch
from torch import Tensor

from ..graph.operators import normalised_parts
from ..progress import Progress
from .cache import cached_file, tensor_digest

FOLDER = "adjacency"   # under the data root, beside the datasets' folders and the node orders


def adjacency_path(root: Path, edge_index: Tensor, num_nodes: int, kind: str, dtype: torch.dtype) -> tuple[Path, str]:
    """The file that keeps this graph's adjacency of ``kind`` in ``dtype``, named by a digest of the
    edge list (another graph, or the same dataset edited, gets its own file), and that digest."""
    digest = tensor_digest(edge_index.cpu())
    name = f"{kind}-{str(dtype).removeprefix('torch.')}-{num_nodes}-{digest[:24]}.pt"
    return root / FOLDER / name, digest


def cached_adjacency(edge_index: Tensor, num_nodes: int, kind: str, dtype: torch.dtype, root: Path,
                     untrusted: Optional[Callable[[Path], Optional[str]]] = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(crow, col, weight)`` of the normalised adjacency of ``kind``: read from the data cache
    under ``root`` when a file there was built from exactly these edges and its tensors match the
    digests stored with them; else built (on the device of ``edge_index``) and written there. A
    file that fails the check is rebuilt with a warning naming it, as a processed dataset is; one
    that ``untrusted`` names is neither read nor written. The arrays come back on the CPU."""
    path, digest = adjacency_path(root, edge_index, num_nodes, kind, dtype)
    built_from = {"edges": digest, "kind": kind, "dtype": str(dtype), "num_nodes": str(num_nodes)}

    def build() -> dict[str, Tensor]:
        with Progress(f"normalising the adjacency of {num_nodes:,} nodes ({kind})"):
            crow, col, weight = normalised_parts(edge_index, num_nodes, kind, dtype)
        return {"crow": crow.cpu(), "col": col.cpu(), "weight": weight.cpu()}

    parts = cached_file(path, built_from, build, untrusted, what="the normalised adjacency from the edge list", source="the edge list",
                        derived=True, mapped=True)   # its three arrays live and go together: mapped, not copied
    return parts["crow"], parts["col"], parts["weight"]
