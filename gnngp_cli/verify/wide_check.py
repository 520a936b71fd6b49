"""The wide-network check (Theorem 1): sample random finite-width networks on a small real graph
and compare their output covariance with the analytic kernel.

``Check`` holds what the networks read: the subgraph's features and edges, the network's
name and parameters, and the base kernel whose feature map feeds them. The analytic kernel is
computed separately (:func:`analytic_kernel`, the package's blocks) and passed in, so a test can
hand in a deliberately wrong kernel and watch the check fail.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor, nn

from ..data import Adjacency
from ..errors import ConfigError
from ..kernels import KERNELS, BaseKernel, Block, KernelContext
from .oracles import ORACLES
from .features import feature_map, is_random, span_coordinates
from .subgraph import CheckGraph
from .statistics import Verdict, WidthSummary, summarise


NETWORK_DTYPE = torch.float32  # the networks' precision: far below the Monte-Carlo noise, 4x faster draws than float64


@dataclass(frozen=True)
class BaseSpec:
    """The base kernel the network's input features stand for (``kernel.base``)."""

    name: str = "linear"
    gamma: float = 1.0
    c: float = 0.0
    d: float = 1.0


@dataclass
class Check:
    """A network family on a graph: ``network`` (a kernel name) with ``params`` (layers,
    sigmas, ...), reading ``features`` through the feature map of ``base``."""

    features: Tensor
    graph: CheckGraph
    network: str
    params: dict
    base: BaseSpec = field(default_factory=BaseSpec)
    limit: str = "nngp"   # nngp: the output covariance f f^T / w; ntk: the empirical tangent kernel J J^T
    oracle: bool = False  # sample the kernel's hand-written network (verify.oracles) instead of its blocks' own layers

    def inputs(self, width: int, generator: torch.Generator) -> Tensor:
        """The network input ``sqrt(D) Phi`` in span coordinates (``Phi Phi^T = C0``)."""
        phi = span_coordinates(feature_map(self.features, self.base.name, self.base.gamma, self.base.c, self.base.d, width, generator))
        return phi * math.sqrt(phi.size(1))


@dataclass
class CheckResult:
    widths: list[WidthSummary]
    verdict: Verdict
    kernel_norm: float
    seconds: float


def wide_network(kernel: str, in_dim: int, width: int, params: dict, dtype: torch.dtype, oracle: bool = False) -> nn.Module:
    """The wide network of kernel ``kernel``, built from the kernel config's arguments ``params``:
    the one its blocks' layers make (:meth:`~gnngp_cli.kernels.architectures.KernelEntry.network`),
    or with ``oracle`` its hand-written network (:data:`~.oracles.ORACLES`)."""
    if kernel not in KERNELS:
        raise ConfigError(f"gnngp verify: kernel={kernel} is not registered; use one of {', '.join(KERNELS)}")
    if oracle:
        if kernel not in ORACLES:
            raise ConfigError(f"verify.oracle=true samples a hand-written network, and kernel={kernel} has none; "
                              f"use verify.oracle=false (its blocks' own network), or kernel={' or kernel='.join(ORACLES)}")
        return ORACLES[kernel](in_dim=in_dim, width=width, **params).to(dtype)
    return KERNELS[kernel].network(params, in_dim, width).to(dtype)


def unit_seed(seed: int, width: int, sample: int) -> int:
    """An independent seed for network ``sample`` of width ``width``."""
    return (seed * 1_000_003 + width * 7_919 + sample * 104_729) % (2**63 - 1)


def empirical_ntk(network: nn.Module, x: Tensor, graph: CheckGraph, generator: torch.Generator) -> Tensor:
    """The empirical tangent kernel ``J J^T`` of one random network (float64, ``n x n``): ``J`` the
    Jacobian of the output's random projection ``f v / sqrt(w)`` (``v ~ N(0, I)``; its mean over
    ``v`` is the tangent kernel averaged over the ``w`` output units) with respect to every trained
    parameter in the NTK parameterisation: each parameter's gradient times the standard deviation
    it was drawn with (``ntk_std``, :func:`gnngp_cli.kernels.layers.draw`). One backward pass per
    node; the Jacobian is held per parameter (``n`` rows)."""
    trained = [(p, float(p.ntk_std)) for p in network.parameters() if getattr(p, "ntk_std", None)]
    out = network(x, graph)
    v = torch.randn(out.size(1), generator=generator, dtype=out.dtype) / math.sqrt(out.size(1))
    y = out @ v
    n = y.numel()
    rows = [torch.empty(n, p.numel(), dtype=p.dtype) for p, _ in trained]
    for i in range(n):
        grads = torch.autograd.grad(y[i], [p for p, _ in trained], retain_graph=i < n - 1, allow_unused=True)
        for row, grad, (_, std) in zip(rows, grads, trained):
            row[i] = 0 if grad is None else grad.reshape(-1) * std
    theta = torch.zeros(n, n, dtype=torch.float64)
    for row in rows:
        theta += (row @ row.T).double()
    return theta


def sample_deviations(check: Check, kernel: Tensor, widths: list[int], seeds: int, seed: int,
                      progress: Callable[[int], None] = lambda width: None) -> dict[int, Tensor]:
    """``K_ws - K`` (flattened) for ``seeds`` independent networks at each width: ``K_ws`` the
    output covariance ``f f^T / w``, or with ``check.limit = ntk`` the empirical tangent kernel."""
    fixed = None if is_random(check.base.name) else check.inputs(0, torch.Generator())
    deviations = {}
    for width in widths:
        progress(width)
        in_dim = fixed.size(1) if fixed is not None else min(width, check.graph.num_nodes)
        network = None
        rows = []
        for s in range(seeds):
            generator = torch.Generator().manual_seed(unit_seed(seed, width, s))
            x = fixed if fixed is not None else check.inputs(width, generator)
            if network is None or x.size(1) != in_dim:
                in_dim = x.size(1)
                network = wide_network(check.network, in_dim, width, check.params, NETWORK_DTYPE, check.oracle)
            network.redraw(generator)
            if check.limit == "ntk":
                sample = empirical_ntk(network, x.to(NETWORK_DTYPE), check.graph, generator)
            else:
                with torch.no_grad():
                    f = network(x.to(NETWORK_DTYPE), check.graph).double()
                sample = f @ f.T / f.size(1)
            rows.append((sample - kernel).reshape(-1))
        deviations[width] = torch.stack(rows)
    return deviations


def run_check(check: Check, kernel: Tensor, widths: list[int], seeds: int, seed: int = 0, bootstrap: int = 2000,
              level: float = 0.01, progress: Callable[[int], None] = lambda width: None) -> CheckResult:
    """Sample, then summarise: errors, intervals, slope and verdict."""
    start = time.perf_counter()
    deviations = sample_deviations(check, kernel, widths, seeds, seed, progress)
    norm = float(torch.linalg.norm(kernel))
    rows, verdict = summarise(deviations, norm, bootstrap, level, torch.Generator().manual_seed(seed))
    return CheckResult(rows, verdict, norm, time.perf_counter() - start)


def analytic_kernel(network: Block, features: Tensor, edge_index: Tensor, adjacency: str, base: BaseKernel) -> Tensor:
    """The package's kernel ``K`` on every node of the (small) graph, in float64."""
    n = features.size(0)
    adj = Adjacency.from_graph(edge_index, n, adjacency, features.dtype, "cpu")
    ctx = KernelContext(features, adj, base)
    return network(None, ctx, torch.arange(n)).dense()
