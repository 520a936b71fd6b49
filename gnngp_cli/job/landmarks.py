"""Landmark nodes of the low-rank (Nystrom) kernels, chosen by seed from ``landmarks.pool``:
the training nodes (the paper's choice), or every node (the Nystrom step reads features, never
labels, so an unlabelled node is as good a landmark as a labelled one)."""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import ConfigError


def landmark_pool(pool: str, train: torch.Tensor, num_nodes: int, called: str = "training nodes") -> tuple[torch.Tensor, str]:
    """The sorted node ids landmarks are drawn from, and what they are called in an error:
    ``train`` (the job's labelled set ``train``, ``called`` so: the training nodes, an active
    run's pool nodes) or every node."""
    if pool == "all":
        return torch.arange(num_nodes, device=train.device), "nodes"
    return train, called


def choose_landmarks(train: torch.Tensor, fraction: float, count: Optional[int], seed: int, dataset: str,
                     what: str = "training nodes") -> torch.Tensor:
    """Landmark node ids among the sorted node ids ``train`` (``what`` they are: training nodes,
    or every node with ``landmarks.pool=all``): exactly ``count`` of them, or each one with
    probability ``1/fraction`` (all of them when ``fraction == 1``), seeded."""
    generator = torch.Generator().manual_seed(seed)
    fix = "landmarks.fraction" if what == "nodes" else "landmarks.fraction, or landmarks.pool=all (landmarks among every node)"
    if count is not None:
        if count > train.numel():
            raise ConfigError(f"landmarks.count={count} exceeds the {train.numel()} {what} of {dataset}; use at most {train.numel()} or {fix}")
        return torch.sort(train[torch.randperm(train.numel(), generator=generator)[:count].to(train.device)])[0]
    if fraction == 1:
        return train
    keep = (torch.rand(train.numel(), generator=generator) < 1.0 / fraction).to(train.device)
    if not bool(keep.any()):
        raise ConfigError(f"landmarks.fraction={fraction:g} picked none of the {train.numel()} {what} of {dataset}; use a smaller fraction or landmarks.count")
    return train[keep]
