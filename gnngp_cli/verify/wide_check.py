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
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

import torch
from torch import Tensor, nn

from ..data import Adjacency
from ..errors import ConfigError, KernelError
from ..kernels import KERNELS, BaseKernel, Block, KernelContext
from ..kernels.blocks import trained_blocks
from .activation_check import SAMPLES, Observed, activation_shifts
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


def weight_scales(network: nn.Module, unit: Optional[int] = None) -> Tensor:
    """Control variates of one random network: each drawn parameter's realised scale,
    ``mean(p^2) / std^2 - 1``, and with ``unit`` each weight's row of that output unit's
    (``mean(W[unit]^2) / std^2 - 1``). Each has mean 0 whatever the kernel (it reads only the
    draws), and the network's kernel moves with them: a regression on them removes that part of
    the Monte-Carlo noise (:func:`~.statistics.shift_test`)."""
    scales = []
    for p in network.parameters():
        std = getattr(p, "draw_std", None)
        if not std:
            continue
        q = p.detach().double() ** 2 / std ** 2
        scales.append(q.mean() - 1)
        if unit is not None and p.dim() == 2 and p.size(0) > unit:
            scales.append(q[unit].mean() - 1)
    return torch.stack(scales) if scales else torch.zeros(0, dtype=torch.float64)


def parameter_parts(network: nn.Module) -> list[list[tuple[Tensor, float]]]:
    """The network's trained parameters (with the standard deviation each was drawn with,
    ``ntk_std``) grouped by the block that owns them, in the order of
    :func:`~gnngp_cli.kernels.blocks.trained_blocks`: the parts of its tangent kernel. A network
    not made of blocks (an oracle): one group."""
    trained = {id(p) for p in network.parameters() if getattr(p, "ntk_std", None)}
    composition = getattr(network, "composition", None)
    if composition is None:
        return [[(p, float(p.ntk_std)) for p in network.parameters() if id(p) in trained]]
    index = {id(block): i for i, block in enumerate(trained_blocks(composition))}
    parts: list[list[tuple[Tensor, float]]] = [[] for _ in index]
    for module in network.modules():
        owner = getattr(module, "block", None)
        for p in module.parameters() if owner is not None else ():   # a layer of one block: its own linear map or bias
            if id(p) in trained:
                parts[index[id(owner)]].append((p, float(p.ntk_std)))
    return parts


JACOBIAN_BYTES = 2 ** 30   # the most one batched backward pass holds of the Jacobian (a GAT at width 4096 holds 16 GB)
JACOBIAN_COLUMNS = 2 ** 21   # the Jacobian's columns converted to float64 at a time


def _jacobian_groups(parameters: Sequence[Tensor], n: int) -> list[list[int]]:
    """The parameters' indices in groups whose ``n``-row Jacobian holds at most ``JACOBIAN_BYTES``
    (one group where all fit; a parameter larger than that alone)."""
    groups, size = [[]], 0
    for k, p in enumerate(parameters):
        nbytes = n * p.numel() * p.element_size()
        if groups[-1] and size + nbytes > JACOBIAN_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(k)
        size += nbytes
    return groups


class _LinearTaps:
    """While entered, records each call of the network's ``nn.Linear`` maps whose weight is trained:
    its input ``M`` and output ``Y``. A weight's tangent kernel is then ``<M^T G_i, M^T G_j>`` =
    ``sum_ab (M M^T)_ab (G_i G_j^T)_ab`` with ``G_i = dy_i / dY``: from ``Y``'s gradients
    (``n x rows x width``), never the ``n x width^2`` Jacobian (16 GB for a GAT at width 4096)."""

    def __init__(self, network: nn.Module, trained: set[int]):
        self.modules = [m for m in network.modules() if isinstance(m, nn.Linear) and id(m.weight) in trained]
        self.calls: dict[int, list[tuple[Tensor, Tensor]]] = {id(m.weight): [] for m in self.modules}
        self.handles: list = []

    def __enter__(self) -> "_LinearTaps":
        for m in self.modules:
            calls = self.calls[id(m.weight)]
            self.handles.append(m.register_forward_hook(lambda module, args, out, calls=calls: calls.append((args[0], out))))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()

    def once(self) -> dict[int, tuple[Tensor, Tensor]]:
        """The weights called exactly once (a weight shared among calls: its own Jacobian), each with
        its call's ``(M, Y)``."""
        return {key: calls[0] for key, calls in self.calls.items() if len(calls) == 1}


def empirical_ntk(network: nn.Module, x: Tensor, graph: CheckGraph, generator: torch.Generator) -> tuple[Tensor, int]:
    """The empirical tangent kernel ``J J^T`` of one random network for one output unit (drawn by
    ``generator``), float64: ``(1 + P) x n x n``, the whole kernel and then its ``P`` parts, each
    block's parameters' own ``J_p J_p^T`` (:func:`parameter_parts`; one part: the whole alone).
    ``J`` is the Jacobian of that unit with respect to every trained parameter in the NTK
    parameterisation (each parameter's gradient times the standard deviation it was drawn with,
    ``ntk_std``, :func:`gnngp_cli.kernels.layers.draw`). One unit, not an average over units:
    the lazy-training reading needs each unit's tangent kernel to converge, and an average can
    converge where the units do not (a GAT without its output projection). One batched backward
    pass (a row per node) gives each linear map's output gradients (its weight's part from them,
    :class:`_LinearTaps`) and the other parameters' Jacobians, more passes where those would hold
    more than ``JACOBIAN_BYTES``. Returns the kernels and the unit."""
    parts = parameter_parts(network)
    trained = [(p, std, i) for i, part in enumerate(parts) for p, std in part]
    with _LinearTaps(network, {id(p) for p, _, _ in trained}) as taps:
        out = network(x, graph)
    unit = int(torch.randint(out.size(1), (1,), generator=generator))
    y = out[:, unit]
    n = y.numel()
    theta = torch.zeros(len(parts), n, n, dtype=torch.float64)
    factored = taps.once()
    linear = [k for k, (p, _, _) in enumerate(trained) if id(p) in factored]
    direct = [k for k, (p, _, _) in enumerate(trained) if id(p) not in factored]
    groups = _jacobian_groups([trained[k][0] for k in direct], n)
    for g, group in enumerate(groups if trained else []):
        taken = [direct[k] for k in group]
        outputs = [factored[id(trained[k][0])][1] for k in linear] if g == 0 else []
        grads = torch.autograd.grad(y, outputs + [trained[k][0] for k in taken], grad_outputs=torch.eye(n, dtype=y.dtype),
                                    is_grads_batched=True, allow_unused=True, retain_graph=g + 1 < len(groups))
        for grad, k in zip(grads[:len(outputs)], linear):
            if grad is not None:
                _, std, i = trained[k]
                m = factored[id(trained[k][0])][0].detach()
                m = m.reshape(-1, m.size(-1)).double()   # the rows the map read: M, and its outputs' gradients G
                gy = grad.reshape(n, m.size(0), -1).double()
                weighted = torch.matmul(m @ m.T, gy)   # (M M^T) G_j for every j: one batched product
                theta[i] += std ** 2 * (gy.reshape(n, -1) @ weighted.reshape(n, -1).T)   # sum_ac G_i,ac [(M M^T) G_j]_ac: one GEMM
        for grad, k in zip(grads[len(outputs):], taken):
            if grad is not None:
                _, std, i = trained[k]
                for columns in grad.reshape(n, -1).split(JACOBIAN_COLUMNS, dim=1):   # in float64 a slice at a time
                    row = columns.double() * std
                    theta[i] += row @ row.T
        del grads
    whole = theta.sum(0, keepdim=True)
    return (whole if len(parts) == 1 else torch.cat([whole, theta])), unit


@dataclass
class Draws:
    """What the sampled networks give, per width: ``deviations[w]`` (``S x P x n*n``: ``K_ws - K``,
    the whole kernel and a tangent kernel's parts) and ``covariates[w]`` (``S x m``: each
    network's :func:`weight_scales`)."""

    deviations: dict[int, Tensor]
    covariates: dict[int, Tensor]

    def joined(self, more: "Draws") -> "Draws":
        """These networks and ``more`` (new draws at the same widths)."""
        return Draws({w: torch.cat([d, more.deviations[w]]) for w, d in self.deviations.items()},
                     {w: torch.cat([c, more.covariates[w]]) for w, c in self.covariates.items()})

    def against(self, kernels: Tensor, sampled_with: Tensor) -> "Draws":
        """The same networks measured from other analytic kernels (a planted error)."""
        shift = (sampled_with.reshape(-1, *sampled_with.shape[-2:]) - kernels.reshape(-1, *kernels.shape[-2:])).reshape(1, -1, sampled_with.shape[-1] ** 2)
        return Draws({w: d + shift[:, :d.size(1)] for w, d in self.deviations.items()}, self.covariates)


DIVERGED = 1e6   # a network whose covariance exceeds the kernel's largest entry this many times has diverged, though finite in float32


def sample_deviations(check: Check, kernels: Tensor, widths: list[int], seeds: int, seed: int,
                      progress: Callable[[int], None] = lambda width: None, start: int = 0) -> Draws:
    """``K_ws - K`` for ``seeds`` independent networks at each width (the networks numbered
    ``start``, ``start + 1``, ...: more of them are new draws): ``K_ws`` the output
    covariance ``f f^T / w``, or with ``check.limit = ntk`` one output unit's empirical tangent
    kernel and its parts (:func:`empirical_ntk`); ``kernels`` the analytic ones (``P x n x n``,
    or one ``n x n``); with each network's control variates (:class:`Draws`). Networks whose
    outputs overflow their dtype or diverge (:data:`DIVERGED`) are refused in one line: a
    covariance of infinities says nothing of the kernel."""
    kernels = kernels.reshape(-1, *kernels.shape[-2:])
    scale = float(kernels[0].abs().max())
    fixed = None if is_random(check.base.name) else check.inputs(0, torch.Generator())
    deviations, covariates = {}, {}
    for width in widths:
        progress(width)
        in_dim = fixed.size(1) if fixed is not None else min(width, check.graph.num_nodes)
        network = None
        rows, scales, overflowed = [], [], 0
        for s in range(start, start + seeds):
            generator = torch.Generator().manual_seed(unit_seed(seed, width, s))
            x = fixed if fixed is not None else check.inputs(width, generator)
            if network is None or x.size(1) != in_dim:
                in_dim = x.size(1)
                network = wide_network(check.network, in_dim, width, check.params, NETWORK_DTYPE, check.oracle)
            network.redraw(generator)
            if check.limit == "ntk":
                sample, unit = empirical_ntk(network, x.to(NETWORK_DTYPE), check.graph, generator)
            else:
                with torch.no_grad():
                    f = network(x.to(NETWORK_DTYPE), check.graph).double()
                sample, unit = (f @ f.T / f.size(1))[None], None
            sample = sample[:kernels.size(0)]   # an oracle's network has no parts: the whole alone
            overflowed += not bool(torch.isfinite(sample).all()) or float(sample.abs().max()) > DIVERGED * scale
            rows.append((sample - kernels[:sample.size(0)]).reshape(sample.size(0), -1))
            scales.append(weight_scales(network, unit))
        if overflowed:
            fits = [w for w in widths if w > width]
            raise KernelError(f"{overflowed} of the {seeds} random networks of width {width} overflow {str(NETWORK_DTYPE).replace('torch.', '')} "
                              f"(outputs beyond its range, or covariances over {DIVERGED:.0e} times the kernel's largest entry), so their covariance says nothing "
                              f"of the kernel (which is finite); check fewer layers (kernel.layers), or leave the width out"
                              + (f" (verify.widths=[{','.join(map(str, fits))}])" if len(fits) >= 2 else ""))
        deviations[width], covariates[width] = torch.stack(rows), torch.stack(scales)
    return Draws(deviations, covariates)


def run_check(check: Check, kernel: Tensor, widths: list[int], seeds: int, seed: int = 0, bootstrap: int = 2000,
              level: float = 0.01, progress: Callable[[int], None] = lambda width: None, names: Sequence[str] = (),
              observed: Sequence[Observed] = (), activation_samples: int = SAMPLES, resolution: Optional[float] = None,
              max_seeds: Optional[int] = None, more: Callable[[int], None] = lambda count: None) -> CheckResult:
    """Sample, then summarise: errors, intervals, slope and verdict. ``kernel``: the analytic
    kernel (``n x n``), or it and its parts (``1 + P x n x n``, named ``names``); ``observed``: the
    activation blocks the analytic kernel read, whose maps the activation check
    (:mod:`.activation_check`) tests with ``activation_samples`` Gaussian draws a map, in the
    verdict beside the networks'. With ``resolution``, a PASS must find an error of that size
    along the kernel four times in five: a check whose first ``seeds`` networks find only larger
    ones draws more a width (``more`` is told how many), as many as those say it needs (the
    detectable size falls as one over their square root; a quarter more for the estimate's own
    noise), up to ``max_seeds``, and then judges every network drawn; the two looks each at half
    the level (a FAIL of the first networks at half the level is said at once). One still short
    of the resolution is INCONCLUSIVE."""
    start = time.perf_counter()
    draws = sample_deviations(check, kernel, widths, seeds, seed, progress)
    norm = float(torch.linalg.norm(kernel.reshape(-1, *kernel.shape[-2:])[0]))
    extra = activation_shifts(observed, check.limit == "ntk", seed, activation_samples)

    def summary(draws: Draws, level: float = level):
        return summarise(draws.deviations, kernel, bootstrap, level, torch.Generator().manual_seed(seed), names, draws.covariates, extra)

    rows, verdict = summary(draws)
    if resolution is not None and verdict.shift.detectable > resolution:   # too weak to see the resolution: more networks
        # two looks at the networks, each at half the level: a right kernel FAILs at most the level's share of runs in all
        first_rows, first = summary(draws, level / 2)
        needed = _networks(seeds, first.shift.detectable, resolution)   # as the last look tests
        if needed <= (max_seeds if max_seeds is not None else needed):
            if first.rejected:   # a plain error: said from the first networks
                return CheckResult(first_rows, first, norm, time.perf_counter() - start)
            more(math.ceil(needed) - seeds)
            draws = draws.joined(sample_deviations(check, kernel, widths, math.ceil(needed) - seeds, seed, progress, start=seeds))
            rows, verdict = summary(draws, level / 2)
        if not verdict.rejected and verdict.shift.detectable > resolution:
            drawn = rows[0].seeds
            half = verdict if drawn > seeds else first   # the networks more would need, judged as the last look is (half the level)
            wanted = math.ceil(_networks(drawn, half.shift.detectable, resolution))
            verdict = replace(verdict, passed=False, inconclusive=True, reason=(
                f"no error was found, but with {drawn} networks a width this check finds one four times in five only from "
                f"{100 * verdict.shift.detectable:.1f}% along the kernel, not the {100 * resolution:g}% it is asked to see (verify.resolution): "
                f"it would need about {wanted:,} networks a width; give verify.max_seeds={wanted} (time grows with them)"
                + (f", or accept a coarser check with verify.resolution={math.ceil(1000 * verdict.shift.detectable) / 1000:g}"
                   if verdict.shift.detectable < 0.999 else " or wider verify.widths")))
    return CheckResult(rows, verdict, norm, time.perf_counter() - start)


def _networks(drawn: int, detectable: float, resolution: float) -> float:
    """The networks a width that find ``resolution`` where ``drawn`` find ``detectable`` (it falls as one over
    their square root), a quarter more for that estimate's own noise; at most 10^12 (no overflow)."""
    return drawn * min(detectable / resolution, 1e6) ** 2 * 1.25


def analytic_kernel(network: Block, features: Tensor, edge_index: Tensor, adjacency: str, base: BaseKernel,
                    trained: Optional[frozenset] = None, observe: Optional[Callable] = None) -> Tensor:
    """The package's kernel ``K`` on every node of the (small) graph, in float64; with
    ``trained`` (block ids) a tangent kernel's part: the gradients of those blocks' parameters
    alone; ``observe(block, K)`` is told each activation block's input."""
    n = features.size(0)
    adj = Adjacency.from_graph(edge_index, n, adjacency, features.dtype, "cpu")
    ctx = KernelContext(features, adj, base, trained=trained, observe=observe)
    return network(None, ctx, torch.arange(n)).dense()


def tangent_parts(network: Block, features: Tensor, edge_index: Tensor, adjacency: str, base: BaseKernel) -> tuple[list[str], list[Tensor]]:
    """A tangent kernel's parts, one per block with parameters (:func:`trained_blocks`): their
    names (``weight 1``, ``bias 1``, ... in composition order) and kernels (they sum to the whole)."""
    names, kernels, counts = [], [], {}
    for block in trained_blocks(network):
        kind = type(block).__name__.lower()
        counts[kind] = counts.get(kind, 0) + 1
        names.append(f"{kind} {counts[kind]}")
        kernels.append(analytic_kernel(network, features, edge_index, adjacency, base, frozenset({id(block)})))
    return names, kernels
