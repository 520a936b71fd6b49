"""Exact evaluation planning: which node sets and pair sets the prediction needs, and when
one square evaluation over every node is cheaper.

The GP reads ``K[labelled, training]`` and ``diag K`` on every node. The node-set evaluation
forms only rectangular blocks (the supports of the rows by those of the columns); the pair
evaluation, run in step with it (:meth:`~.blocks.Block.evaluate`), gives the diagonal of every
node on the nodes' local neighbourhoods and, through the kernel values, the variances each
activation needs on its rows.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from torch import Tensor

from .base import BaseKernel
from .blocks import Block, reads_graph
from .context import KernelContext
from .pairs import Pairs, PairValues, PatternTooLarge
from .value import Kernel


def _diagonal(k: Kernel, ctx: KernelContext) -> Tensor:
    """``diag K`` on every node from the pair values ``k`` carries."""
    if isinstance(k.pairs, Kernel):
        return (k.pairs.root * k.pairs.root).sum(1)
    return k.pairs.values


def nngp_diagonal(kernel: Kernel, ctx: KernelContext) -> Tensor:
    """``diag K`` on every node of the NNGP kernel that :func:`exact_kernel` keeps beside a tangent kernel."""
    return _diagonal(kernel.nngp, ctx)


def pair_diagonal(network: Block, ctx: KernelContext) -> Tensor:
    """``diag K`` on every node by pair evaluation on the nodes' local neighbourhoods (no node
    rows). Raises :class:`PatternTooLarge` when a graph convolution needs more terms than
    ``ctx.pair_limit``."""
    none = ctx.every_node[:0]
    return _diagonal(network.evaluate(None, ctx, none, None, Pairs.diagonal(ctx.every_node)), ctx)


def square_first(network: Block, ctx: KernelContext, rows: Tensor) -> bool:
    """Whether :func:`exact_kernel` goes straight to the square over every node: the rows are
    every node and the network reads the graph (a network that reads none is one rectangle
    whatever its rows). The memory estimate reads the same rule, with :func:`pair_plan_fits`."""
    return rows.numel() >= ctx.num_nodes and reads_graph(network)


def pair_plan_fits(network: Block, ctx: KernelContext) -> bool:
    """Whether the pair evaluation of every node's diagonal stays within ``ctx.pair_limit``
    (else :func:`exact_kernel` evaluates one square block over every node): the plan only, no
    block runs. The memory estimate reads it before computing."""
    pairs = Pairs.diagonal(ctx.every_node)
    try:  # planned as the evaluation does, nested layers included: no pairs while an input is a root
        network.plan_pairs(True, ctx, pairs)
    except PatternTooLarge:
        return False
    return True


def exact_kernel(
    network: Block, ctx: KernelContext, rows: Tensor, cols: Tensor,
    before_square: Callable[[Tensor], None] = lambda nodes: None,
) -> tuple[Kernel, Tensor]:
    """``K[rows, cols]`` (``cols`` a subset of ``rows``) and ``diag K`` on every node, exactly.

    The node-set evaluation forms only rectangular blocks, with the pair evaluation in step
    (the diagonal, and the activations' variances). When ``rows`` are every node, or the pair
    evaluation would exceed the pair limit (a deep network, or a small graph where it costs
    more; found while planning, before any block runs), one square evaluation over every node
    gives both, after ``before_square(nodes)`` (e.g. a memory check that raises). A network that
    reads no graph (RBF) is always the rectangle (squirrel, every node labelled: half the square's
    entries, 5,201 x 2,496 against 5,201 x 5,201, for each gamma of the search). A tangent
    kernel's ``nngp`` (``ctx.keep_nngp``) comes restricted alike, its diagonal on every node as
    its pair values (:func:`nngp_diagonal`).
    """
    if not square_first(network, ctx, rows):
        try:
            kernel = network.evaluate(None, ctx, rows, cols, Pairs.diagonal(ctx.every_node))
            return kernel, _diagonal(kernel, ctx)
        except PatternTooLarge:
            pass
    everything = ctx.every_node
    before_square(everything)
    full = network(None, ctx, everything)
    kernel = full.restrict(rows, cols)
    if full.nngp is not None:   # the NNGP kernel kept beside a tangent kernel: its diagonal as the pair evaluation gives it
        kernel = replace(kernel, nngp=replace(kernel.nngp, pairs=PairValues(Pairs.diagonal(everything), full.nngp.diagonal().clone())))
    return kernel, full.diagonal().clone()   # copies: a view of the diagonal would keep the square block alive


PROBE_NODES, PROBE_LANDMARKS = 48, 16   # the graph and landmarks on which low_rank_width evaluates a network


def low_rank_width(network: Block, base: BaseKernel, adjacency: str) -> float:
    """How many landmarks' worth of columns the low-rank root of ``network`` has over every node
    (GCN: 1; an addition of two branches: 2; GATGP's tangent kernel: 4), measured by evaluating
    it, with the run's base kernel and normalisation, on a random graph of ``PROBE_NODES`` nodes with
    ``PROBE_LANDMARKS`` landmarks (milliseconds), because a root's width follows from each block's
    low-rank rule (a Nystrom step: the landmarks; an addition: its branches side by side; a
    tangent kernel's product rule: one term per factor), which the memory estimate reads (its
    last root, the Gram matrix and eigendecomposition of the inference)."""
    import torch

    from ..graph.operators import Adjacency

    g = torch.Generator().manual_seed(0)
    ring = torch.arange(PROBE_NODES)
    edges = torch.cat([torch.stack([ring, (ring + 1) % PROBE_NODES]), torch.randint(0, PROBE_NODES, (2, PROBE_NODES), generator=g)], 1)
    edges = torch.cat([edges, edges.flip(0)], 1)
    features = torch.randn(PROBE_NODES, 3 * PROBE_LANDMARKS, generator=g, dtype=torch.float64)
    probe = KernelContext(features, Adjacency.from_graph(edges, PROBE_NODES, adjacency, torch.float64, "cpu"), base,
                          torch.arange(PROBE_LANDMARKS))
    root = network(None, probe, None).root
    # to the nearest quarter: a bias's constant column is not a landmark's worth (GATGP-X's tangent root: 4 m + 1)
    return max(1.0, round(4 * root.shape[1] / PROBE_LANDMARKS) / 4) if root is not None else 1.0
