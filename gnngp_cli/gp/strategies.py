"""The active-learning strategies (``active=<name>``): a registry, one entry per strategy.

Each strategy scores every node; a step labels the ``active.batch`` highest-scoring nodes of
the pool that are not labelled yet (ties: the lowest node id). A new strategy is one
:func:`register_strategy` call here: the config group ``active=<name>``, its checks and the
report read this registry.

| strategy    | score of a node                                                                    |
|-------------|------------------------------------------------------------------------------------|
| random      | a uniform draw (seeded by ``active.seed``): a random sample of the pool             |
| degree      | its degree in the graph                                                             |
| pagerank    | its PageRank (damping 0.85)                                                         |
| variance    | the GP's posterior variance                                                         |
| entropy     | the entropy of its class probabilities (probit approximation of the posterior)      |
| v_opt       | V-optimality: the drop of the total predictive variance over the unlabelled nodes   |
| sigma_opt   | Sigma-optimality: the drop of the sum of the predictive covariance over them        |

The GP strategies read the posterior as it stands after the labels so far
(:class:`~gnngp_cli.gp.updates.RootPosterior`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from ..data.protocols import centrality
from .updates import RootPosterior


@dataclass
class Selection:
    """What a strategy reads: the posterior so far, the graph's edges and a seeded generator."""

    posterior: RootPosterior
    edge_index: Tensor
    generator: torch.Generator
    static: Optional[Tensor] = None     # a strategy's scores that never change (degree, PageRank), computed once


@dataclass(frozen=True)
class Strategy:
    name: str
    score: Callable[[Selection], Tensor]
    description: str
    tracks: tuple[str, ...] = ()        # the design scores the posterior keeps up to date for it (gnngp_cli.gp.updates.TRACKED)
    classifies: bool = False            # reads class probabilities: a classification task only
    static: bool = False                # its scores do not depend on the labels (computed once)


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> None:
    STRATEGIES[strategy.name] = strategy


def _random(sel: Selection) -> Tensor:
    return torch.rand(sel.posterior.num_nodes, generator=sel.generator, dtype=torch.float64)


def _degree(sel: Selection) -> Tensor:
    n = sel.posterior.num_nodes
    src = sel.edge_index[0].cpu()
    return torch.zeros(n, dtype=torch.float64).index_add_(0, src, torch.ones_like(src, dtype=torch.float64))


def _pagerank(sel: Selection) -> Tensor:
    return centrality(sel.edge_index, sel.posterior.num_nodes, "pagerank")


def _variance(sel: Selection) -> Tensor:
    return sel.posterior.variance


def class_entropy(mean: Tensor, variance: Tensor) -> Tensor:
    """The entropy of ``softmax(f)`` for ``f ~ N(mean, variance)`` by the probit approximation
    ``p = softmax(mean / sqrt(1 + pi variance / 8))``."""
    p = torch.softmax(mean.double() / torch.sqrt(1 + math.pi * variance.double().clamp_min(0)[:, None] / 8), dim=1)
    return -(p * torch.log(p.clamp_min(1e-300))).sum(1)


def _entropy(sel: Selection) -> Tensor:
    return class_entropy(sel.posterior.mean, sel.posterior.variance)


register_strategy(Strategy("random", _random, "a uniform random sample of the pool (seeded by active.seed)", static=False))
register_strategy(Strategy("degree", _degree, "the nodes of highest degree", static=True))
register_strategy(Strategy("pagerank", _pagerank, "the nodes of highest PageRank", static=True))
register_strategy(Strategy("variance", _variance, "the largest posterior variance"))
register_strategy(Strategy("entropy", _entropy, "the largest entropy of the class probabilities", classifies=True))
register_strategy(Strategy("v_opt", lambda sel: sel.posterior.v_opt(),
                           "V-optimality (Ji & Han 2012): the most total predictive variance removed", tracks=("v_opt",)))
register_strategy(Strategy("sigma_opt", lambda sel: sel.posterior.sigma_opt(),
                           "Sigma-optimality (Ma, Garnett & Schneider 2013): the most predictive covariance removed", tracks=("sigma_opt",)))


def choose(strategy: Strategy, sel: Selection, pool: Tensor, count: int) -> list[int]:
    """The ``count`` highest-scoring nodes among ``pool`` (a boolean mask) not labelled yet,
    best first (ties: the lowest id)."""
    if strategy.static:
        if sel.static is None:
            sel.static = strategy.score(sel).to(torch.float64).cpu()
        scores = sel.static
    else:
        scores = strategy.score(sel).to(torch.float64).cpu()
    open_nodes = (pool.cpu() & sel.posterior.unlabelled.cpu()).nonzero().view(-1)
    ranked = open_nodes[torch.argsort(-scores[open_nodes], stable=True)]
    return [int(v) for v in ranked[:count]]
