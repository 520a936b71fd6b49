"""Monte-Carlo check of Theorem 1: wide random networks approach their GNNGP kernel.

For each width, sample random finite-width networks of the architecture (i.i.d. Gaussian
weights of the stated variances; Gaussian inputs with covariance ``C0``), estimate the output
covariance ``E[f f^T]`` over their output units and samples, and report its relative
Frobenius error against the analytic kernel. The error shrinks as the width grows.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .data import Adjacency, generate_csbm
from .kernels import BaseKernel, Block, KernelContext
from .kernels.blocks import NetworkSample


@dataclass
class WidthError:
    width: int
    samples: int
    relative_error: float


def gaussian_inputs_root(c0: torch.Tensor) -> torch.Tensor:
    """``L`` with ``L L^T = C0`` (eigenvalues clamped at 0), so ``L Z`` has covariance ``C0``."""
    w, v = torch.linalg.eigh((c0 + c0.T) / 2)
    return v * w.clamp_min(0).sqrt()


def monte_carlo_errors(network: Block, x: torch.Tensor, adjacency: Adjacency, base: BaseKernel,
                       widths: list[int], samples: int, seed: int = 0) -> tuple[torch.Tensor, list[WidthError]]:
    n = x.size(0)
    ctx = KernelContext(x, adjacency, base)
    exact = network(None, ctx, torch.arange(n)).dense()
    root = gaussian_inputs_root(base.block(x, x))
    errors = []
    for width in widths:
        generator = torch.Generator().manual_seed(seed)
        total = torch.zeros(n, n, dtype=x.dtype)
        for _ in range(samples):
            inputs = root @ torch.randn(n, width, generator=generator, dtype=x.dtype)
            out = network.network(None, NetworkSample(inputs, adjacency, width, generator))
            total += out @ out.T / out.size(1)
        estimate = total / samples
        errors.append(WidthError(width, samples, float(torch.linalg.norm(estimate - exact) / torch.linalg.norm(exact))))
    return exact, errors


def small_graph(num_nodes: int, avg_degree: float, num_features: int, seed: int):
    """A small csbm graph for the check (features scaled to unit average row norm)."""
    data = generate_csbm(num_nodes=num_nodes, avg_degree=avg_degree, num_classes=2, num_features=num_features, snr=1.0, seed=seed)
    x = data.x.double()
    return x / x.norm(dim=1).mean(), data.edge_index
