"""Landmark nodes of the low-rank (Nystrom) kernels: training nodes, chosen by seed."""
from __future__ import annotations

from typing import Optional

import torch

from ..errors import ConfigError


def choose_landmarks(train: torch.Tensor, fraction: float, count: Optional[int], seed: int, dataset: str) -> torch.Tensor:
    """Landmark node ids among the sorted training node ids ``train``: exactly ``count`` of
    them, or each one with probability ``1/fraction`` (all of them when ``fraction == 1``), seeded."""
    generator = torch.Generator().manual_seed(seed)
    if count is not None:
        if count > train.numel():
            raise ConfigError(f"landmarks.count={count} exceeds the {train.numel()} training nodes of {dataset}; use at most {train.numel()} or landmarks.fraction")
        return torch.sort(train[torch.randperm(train.numel(), generator=generator)[:count].to(train.device)])[0]
    if fraction == 1:
        return train
    keep = (torch.rand(train.numel(), generator=generator) < 1.0 / fraction).to(train.device)
    if not bool(keep.any()):
        raise ConfigError(f"landmarks.fraction={fraction:g} picked none of the {train.numel()} training nodes of {dataset}; use a smaller fraction or landmarks.count")
    return train[keep]
