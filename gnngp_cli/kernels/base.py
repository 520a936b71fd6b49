"""Base kernels ``C0`` on the input features (the network's input layer)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

# Each base kernel and the parameters that fit=mll may learn (positive, on a log scale): the
# polynomial's offset c (its degree d is an integer), the bandwidth gamma of rbf and laplacian.
# The sigmoid kernel is not positive semi-definite in general, so nothing of it is fitted.
BASE_KERNELS: dict[str, tuple[str, ...]] = {
    "linear": (), "polynomial": ("c",), "rbf": ("gamma",), "laplacian": ("gamma",), "arccos": (), "sigmoid": (),
}
# The parameters each base kernel reads (kernel.base.gamma, c, d); the others are ignored by it.
BASE_READS: dict[str, tuple[str, ...]] = {
    "linear": (), "polynomial": ("c", "d"), "rbf": ("gamma",), "laplacian": ("gamma",), "arccos": (), "sigmoid": ("gamma", "c"),
}


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

    def with_values(self, values: dict) -> "BaseKernel":
        """This kernel with some of its parameters replaced (``gamma``, ``c``; e.g. fitted ones)."""
        return BaseKernel(self.name, values.get("gamma", self.gamma), values.get("c", self.c), self.d)

    @property
    def is_linear(self) -> bool:
        return self.name == "linear"

    @property
    def statistic_name(self) -> str:
        """The parameter-free pairwise statistic the kernel is a function of."""
        return {"rbf": "sqeuclidean", "laplacian": "cityblock", "arccos": "cosine"}.get(self.name, "dot")

    def statistic(self, xa: Tensor, xb: Tensor, xa_sparse: Optional[Tensor] = None) -> Tensor:
        """The pairwise statistic ``S[a, b]``: ``x . x'``, ``||x - x'||_2^2``, ``||x - x'||_1`` or
        the cosine. ``xa_sparse``, if given, is ``xa`` as a sparse matrix, used for the products."""
        if self.name not in BASE_KERNELS:
            raise ValueError(f"unknown base kernel {self.name!r}; use one of {', '.join(BASE_KERNELS)}")
        name = self.statistic_name
        if name == "cityblock":
            return torch.cdist(xa, xb, p=1)
        dot = (xa if xa_sparse is None else xa_sparse) @ xb.T
        if name == "sqeuclidean":
            sq = (xa * xa).sum(1, keepdim=True) + (xb * xb).sum(1) - 2 * dot
            return sq.clamp_min_(0)
        if name == "cosine":
            norms = xa.norm(dim=1, keepdim=True) * xb.norm(dim=1, keepdim=True).T
            return (dot / norms.clamp_min(torch.finfo(xa.dtype).tiny)).clamp_(-1, 1)
        return dot

    def from_statistic(self, stat: Tensor) -> Tensor:
        """``C0`` from its statistic, entry by entry."""
        if self.name == "linear":
            return stat
        if self.name == "polynomial":
            return (stat + self.c) ** self.d
        if self.name in ("rbf", "laplacian"):
            # values below the smallest normal number are set to 0: a subnormal entry makes every
            # product it enters take x86's slow path (squirrel's RBF-X search: the Nystrom root's
            # product 0.75 s a gamma instead of 0.15 s); the change is below 1e-37, absolute
            k = torch.exp(-self.gamma * stat)
            return torch.where(k < torch.finfo(k.dtype).tiny, torch.zeros((), dtype=k.dtype, device=k.device), k)
        if self.name == "arccos":
            return 1 - torch.arccos(stat) / math.pi
        return torch.tanh(self.gamma * stat + self.c)  # sigmoid

    def block(self, xa: Tensor, xb: Tensor) -> Tensor:
        """``C0[a, b]`` for feature rows ``xa`` and ``xb``."""
        return self.from_statistic(self.statistic(xa, xb))

    def pair_statistic(self, xa: Tensor, xb: Tensor) -> Tensor:
        """The statistic of ``C0(xa[i], xb[i])`` for matching rows (:meth:`statistic`'s diagonal entries;
        :meth:`from_statistic` of it is ``C0`` on the pairs)."""
        name = self.statistic_name
        if name == "sqeuclidean":
            stat = ((xa - xb) ** 2).sum(1)
        elif name == "cityblock":
            stat = (xa - xb).abs().sum(1)
        elif name == "cosine":
            stat = ((xa * xb).sum(1) / (xa.norm(dim=1) * xb.norm(dim=1)).clamp_min(torch.finfo(xa.dtype).tiny)).clamp(-1, 1)
        else:
            stat = (xa * xb).sum(1)
        return stat
