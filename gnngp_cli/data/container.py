"""The graph container every loader returns: PyG's ``Data`` interface without PyG.

Importing ``torch_geometric`` costs more than importing torch itself (its package import pulls in
``torch._dynamo``), and a GP run on the embedded csbm graph or on a custom graph needs none of
it. :class:`GraphData` holds the same fields by the same names (``x``, ``y``, ``edge_index``,
the masks, ``task``, ``num_classes``, ``split``, ``stand_in``), read as attributes or items, with
``num_nodes``, ``num_features`` and ``to(device)``, so code written for a PyG ``Data`` reads it
unchanged. Every loader returns one (Planetoid's, Reddit's and the wikipedia sets' files are read
as PyG's dataset classes read them, into it); :meth:`GraphData.to_pyg` gives PyG's own ``Data``
of the same fields, for PyG's transforms and utilities.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

import torch


class GraphData:
    """Named tensors and attributes of one graph (see the module docstring)."""

    def __init__(self, num_nodes: Optional[int] = None, **fields: Any):
        self.__dict__["_num_nodes"] = num_nodes
        for key, value in fields.items():
            setattr(self, key, value)

    def __getitem__(self, key: str) -> Any:
        try:
            return self.__dict__[key]
        except KeyError:
            raise KeyError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__ and not key.startswith("_")

    def keys(self) -> list[str]:
        return [k for k in self.__dict__ if not k.startswith("_")]

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter((k, self.__dict__[k]) for k in self.keys())

    @property
    def num_nodes(self) -> int:
        if self._num_nodes is not None:
            return int(self._num_nodes)
        if getattr(self, "x", None) is not None:
            return int(self.x.size(0))
        edge_index = getattr(self, "edge_index", None)
        return int(edge_index.max()) + 1 if edge_index is not None and edge_index.numel() else 0

    @num_nodes.setter
    def num_nodes(self, value: int) -> None:
        self.__dict__["_num_nodes"] = value

    @property
    def num_features(self) -> int:
        x = getattr(self, "x", None)
        return 0 if x is None else (1 if x.dim() == 1 else int(x.size(1)))

    def to(self, device: Any) -> "GraphData":
        """Move every tensor to ``device`` (in place, like PyG's ``Data.to``); returns self."""
        for key, value in list(self):
            if isinstance(value, torch.Tensor):
                self.__dict__[key] = value.to(device)
        return self

    def cpu(self) -> "GraphData":
        return self.to("cpu")

    def to_pyg(self) -> Any:
        """PyG's ``Data`` with these fields (the tensors shared, not copied), for PyG's own
        transforms and utilities (``NormalizeFeatures``, ``to_networkx``, ``subgraph``); a
        ``NodeGP`` fitted on it runs as on this graph."""
        from torch_geometric.data import Data

        return Data(**dict(self))

    def __repr__(self) -> str:
        parts = [f"{k}={list(v.shape)}" if isinstance(v, torch.Tensor) else f"{k}={v!r}" for k, v in self]
        return f"GraphData({', '.join(parts)})"
