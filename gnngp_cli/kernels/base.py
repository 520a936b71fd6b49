"""Base kernels ``C0`` on the input features (the network's input layer)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

BASE_KERNELS = ("linear", "polynomial", "rbf", "laplacian", "arccos", "sigmoid")


@dataclass(frozen=True)
class BaseKernel:
    """``C0(x, x')``. Parameters: ``gamma`` (rbf, laplacian, sigmoid), ``c`` (polynomial,
    sigmoid) and ``d`` (polynomial).

    - linear: ``x . x'``
    - polynomial: ``(x . x' + c)^d``
    - rbf: ``exp(-gamma ||x - x'||_2^2)``
    - laplacian: ``exp(-gamma ||x - x'||_1)``
    - arccos: ``1 - arccos(cos(x, x')) / pi`` (order-0 arc-cosine; a zero vector has cosine 0)
    - sigmoid: ``tanh(gamma x . x' + c)`` (not positive semi-definite in general)
    """

    name: str = "linear"
    gamma: float = 1.0
    c: float = 0.0
    d: float = 1.0

    @property
    def is_linear(self) -> bool:
        return self.name == "linear"

    def block(self, xa: Tensor, xb: Tensor) -> Tensor:
        """``C0[a, b]`` for feature rows ``xa`` and ``xb``."""
        if self.name == "linear":
            return xa @ xb.T
        if self.name == "polynomial":
            return (xa @ xb.T + self.c) ** self.d
        if self.name == "rbf":
            sq = (xa * xa).sum(1, keepdim=True) + (xb * xb).sum(1) - 2 * xa @ xb.T
            return torch.exp(-self.gamma * sq.clamp_min_(0))
        if self.name == "laplacian":
            return torch.exp(-self.gamma * torch.cdist(xa, xb, p=1))
        if self.name == "arccos":
            na = xa.norm(dim=1, keepdim=True)
            nb = xb.norm(dim=1, keepdim=True)
            cos = (xa @ xb.T) / (na * nb.T).clamp_min(torch.finfo(xa.dtype).tiny)
            return 1 - torch.arccos(cos.clamp_(-1, 1)) / math.pi
        if self.name == "sigmoid":
            return torch.tanh(self.gamma * xa @ xb.T + self.c)
        raise ValueError(f"unknown base kernel {self.name!r}; use one of {BASE_KERNELS}")

    def on_pairs(self, xa: Tensor, xb: Tensor) -> Tensor:
        """``C0(xa[i], xb[i])`` for matching rows (the entries of :meth:`block`'s diagonal)."""
        dot = (xa * xb).sum(1)
        if self.name == "linear":
            return dot
        if self.name == "polynomial":
            return (dot + self.c) ** self.d
        if self.name == "rbf":
            return torch.exp(-self.gamma * ((xa - xb) ** 2).sum(1))
        if self.name == "laplacian":
            return torch.exp(-self.gamma * (xa - xb).abs().sum(1))
        if self.name == "arccos":
            cos = dot / (xa.norm(dim=1) * xb.norm(dim=1)).clamp_min(torch.finfo(xa.dtype).tiny)
            return 1 - torch.arccos(cos.clamp(-1, 1)) / math.pi
        if self.name == "sigmoid":
            return torch.tanh(self.gamma * dot + self.c)
        raise ValueError(f"unknown base kernel {self.name!r}; use one of {BASE_KERNELS}")
