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
| eer         | expected error reduction: the drop of the expected misclassifications over them, the label drawn from the node's class probabilities (:func:`expected_errors`) |
| featprop    | FeatProp's selection (Wu et al. 2019): k-means with k = the budget on the pool's propagated features ``S^2 X``, the pool node nearest each centre (earlier labels kept; the GP, not a GCN, predicts) |
| age         | AGE (Cai, Zheng & Chang 2017): ``alpha P(entropy) + beta P(density) + gamma P(PageRank)`` of the GCN retrained on the labels so far (:func:`age_scores`) |

The GP strategies read the posterior as it stands after the labels so far
(:class:`~gnngp_cli.gp.updates.LabelPosterior`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch import Tensor

from ..data.protocols import centrality
from ..errors import ConfigError
from ..graph.operators import normalized_adjacency
from .probabilities import class_probabilities
from .updates import LabelPosterior


@dataclass
class Selection:
    """What a strategy reads: the posterior so far, the graph's edges and a seeded generator."""

    posterior: LabelPosterior
    edge_index: Tensor
    generator: torch.Generator
    static: Optional[Tensor] = None     # a strategy's scores that never change (degree, PageRank), computed once
    features: Optional[Tensor] = None   # the nodes' features (featprop)
    propagated: Optional[Tensor] = None  # featprop: S^2 X, computed once
    target: int = 0                     # the budget the current steps fill (featprop clusters the pool into that many)
    planned: dict = field(default_factory=dict)   # a budget's planned nodes (featprop), computed once per budget
    classifier: Optional[Callable[[Tensor], Tensor]] = None   # age: the labelled node ids -> the class probabilities over every node of a GCN trained on them (the job supplies it)
    open: Optional[Tensor] = None       # the nodes a step may label (the pool's unlabelled ones, a mask), set by choose before it scores


@dataclass(frozen=True)
class Strategy:
    name: str
    score: Callable[[Selection], Tensor]
    description: str
    tracks: tuple[str, ...] = ()        # the design scores the posterior keeps up to date for it (gnngp_cli.gp.updates.TRACKED)
    classifies: bool = False            # reads class probabilities: a classification task only
    static: bool = False                # its scores do not depend on the labels (computed once)
    plans: bool = False                 # chooses a set per budget (featprop) instead of scoring nodes
    reads_features: bool = False        # reads the nodes' features (featprop)
    retrains: bool = False              # trains the GCN on the labels so far at each step (age): the job supplies Selection.classifier
    reads_posterior: bool = False       # scores from the GP's posterior (variance, entropy, v_opt, sigma_opt, eer): a "GP strategy"
    working: Optional[Callable[[int, int], int]] = None   # (nodes, classes) -> the float64 entries a step's scores work in at most, beyond the posterior (eer's blocks)
    gcn: dict = field(default_factory=dict)   # a retraining strategy's GCN settings over gnn=gcn's defaults (age: AGE's 16 hidden units)


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
    ``p = softmax(mean / sqrt(1 + pi variance / 8))``
    (:func:`~gnngp_cli.gp.probabilities.class_probabilities`)."""
    p = class_probabilities(mean, variance, approx="probit")
    return -(p * torch.log(p.clamp_min(1e-300))).sum(1)


ERROR_CANDIDATES = 200     # eer: the open nodes of highest Sigma-optimality whose expected errors a step computes
ERROR_BLOCK = 1 << 22      # eer: the entries (candidates x nodes x classes) one block of that computation holds


def error_block(nodes: int, classes: int) -> int:
    """The candidates of one block of :func:`expected_errors`: as many as ``ERROR_BLOCK`` entries
    hold (one at least), and no more than a step scores."""
    return min(ERROR_CANDIDATES, max(1, ERROR_BLOCK // max(nodes * classes, 1)))


def expected_errors(posterior: LabelPosterior, candidates: Tensor, now: Optional[Tensor] = None) -> Tensor:
    """For each node ``j`` of ``candidates``: the expected misclassifications over the unlabelled
    nodes but ``j`` once ``j`` is labelled, ``sum_c p_jc sum_{u in U, u != j} (1 - max_k p'_uk)``,
    ``p`` the class probabilities now (the probit approximation:
    :func:`~gnngp_cli.gp.probabilities.class_probabilities`) and ``p'`` those of the posterior with ``j``
    labelled ``c`` (Zhu, Lafferty & Ghahramani 2003's expected risk, on the GP's posterior).

    The label's rank-one step gives ``p'`` in closed form (:class:`~gnngp_cli.gp.updates.LabelPosterior`:
    ``mean' = mean + g (e_c - mean_j)``, ``var' = var - s^2 / d``, ``s = Sigma[:, j]``,
    ``d = s2 + var_j``, ``g = s / d``). The probit's logits ``z' = r mean'``, ``r = (1 + pi
    var' / 8)^(-1/2)``, are ``a + t e_c`` with ``a = r (mean - g mean_j)`` and ``t = r g`` the
    same for every class ``c``: with ``P = softmax(a)``, ``log sum_k exp z'_k = logsumexp(a) +
    log1p(P_c (e^t - 1))`` and ``max_k z'_k = max(max_{k != c} a_k, a_c + t)``, for every ``c`` at
    once: a candidate costs ``O(n C)``, not ``O(n C^2)``; a block of candidates at a time, in at
    most four arrays of the block's ``n x C`` entries a candidate (:data:`STRATEGIES`' ``working``).
    ``now``: the class probabilities now, where the caller has them."""
    mean, variance = posterior.mean.double(), posterior.variance.double()
    n, classes = mean.shape
    now = class_probabilities(mean, variance, approx="probit") if now is None else now
    counted = posterior.unlabelled.to(torch.float64)
    out = []
    for chunk in candidates.split(error_block(n, classes)):
        column = posterior.rows(chunk).double()                      # s = Sigma[j, :] of each candidate j
        gain = column / (posterior.noise + variance[chunk])[:, None]  # g = s / d
        scale = torch.rsqrt(1 + math.pi * (variance[None] - gain * column).clamp_min(0) / 8)   # from var' (the same for every c)
        del column
        lift = gain * scale                                           # t: what e_c adds to z'_c
        base = (mean[None] - gain[:, :, None] * mean[chunk][:, None, :]) * scale[:, :, None]   # a: z' but e_c's term
        del gain, scale
        if classes > 1:   # the largest a_k but a_c: the second largest where a_c is the largest (before the softmax's array:
            largest = base.topk(2, dim=2)   # with two classes the two largest are two arrays of a block's size)
            other = torch.where(largest.indices[:, :, :1] == torch.arange(classes, device=base.device), largest.values[:, :, 1:], largest.values[:, :, :1])
            del largest
        else:
            other = torch.full_like(base, -math.inf)
        peak = base.amax(dim=2, keepdim=True)
        shares = (base - peak).exp_()                                 # softmax(a) below, from exp(a - max a): torch's softmax and
        norm = shares.sum(dim=2, keepdim=True)                        # logsumexp over a last dim of C classes are slow
        total = norm.log().add_(peak)                                 # log sum_k exp a_k
        del peak
        shift = shares.div_(norm).mul_(torch.expm1(lift)[:, :, None]).log1p_()   # log sum_k exp z'_k - log sum_k exp a_k
        del shares, norm
        lifted = base.add_(lift[:, :, None])                          # z'_c = a_c + t (base's storage: a is read no more)
        top = torch.maximum(other, lifted, out=other).sub_(total).sub_(shift).exp_().clamp_max_(1.0)   # max_k p'_uk, for each label c
        del lifted, shift
        weight = counted.expand(chunk.numel(), n).clone()
        weight[torch.arange(chunk.numel(), device=weight.device), chunk] = 0   # j itself is labelled then
        out.append(torch.einsum("bnc,bn,bc->b", top.neg_().add_(1.0), weight, now[chunk]))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64, device=mean.device)


def _error_reduction(sel: Selection) -> Tensor:
    """The expected misclassifications removed by labelling each candidate (:func:`expected_errors`):
    the ``ERROR_CANDIDATES`` open nodes of highest Sigma-optimality; every other node ``-inf``. With
    no label yet the posterior knows no class (every node's probabilities are uniform, and what a
    first label would "correct" is the zero prior mean's arbitrary argmax): Sigma-optimality's scores
    alone, as AGE starts from PageRank alone."""
    post = sel.posterior
    if not post.labelled:
        return post.sigma_opt()
    open_mask = (sel.open if sel.open is not None else post.unlabelled).to(post.unlabelled.device)
    ids = open_mask.nonzero().view(-1)
    ids = ids[torch.argsort(-post.sigma_opt()[ids], stable=True)[:ERROR_CANDIDATES]]
    counted = post.unlabelled.to(torch.float64)
    now = class_probabilities(post.mean, post.variance, approx="probit")
    errors_now = ((1 - now.amax(1)) * counted).sum()
    scores = torch.full((post.num_nodes,), -math.inf, dtype=torch.float64, device=ids.device)
    scores[ids] = errors_now - expected_errors(post, ids, now)
    return scores


def _entropy(sel: Selection) -> Tensor:
    return class_entropy(sel.posterior.mean, sel.posterior.variance)


register_strategy(Strategy("random", _random, "a uniform random sample of the pool (seeded by active.seed)", static=False))
register_strategy(Strategy("degree", _degree, "the nodes of highest degree", static=True))
register_strategy(Strategy("pagerank", _pagerank, "the nodes of highest PageRank", static=True))
register_strategy(Strategy("variance", _variance, "the largest posterior variance", reads_posterior=True))
register_strategy(Strategy("entropy", _entropy, "the largest entropy of the class probabilities", classifies=True, reads_posterior=True))
register_strategy(Strategy("v_opt", lambda sel: sel.posterior.v_opt(),
                           "V-optimality (Ji & Han 2012): the most total predictive variance removed", tracks=("v_opt",), reads_posterior=True))
register_strategy(Strategy("sigma_opt", lambda sel: sel.posterior.sigma_opt(),
                           "Sigma-optimality (Ma, Garnett & Schneider 2013): the most predictive covariance removed", tracks=("sigma_opt",),
                           reads_posterior=True))
register_strategy(Strategy("eer", _error_reduction,
                           "expected error reduction (Zhu, Lafferty & Ghahramani 2003): the most expected misclassifications removed",
                           tracks=("sigma_opt",), classifies=True, reads_posterior=True,
                           working=lambda nodes, classes: 4 * error_block(nodes, classes) * nodes * classes))   # four blocks of n x C a candidate
register_strategy(Strategy("featprop", lambda sel: torch.zeros(sel.posterior.num_nodes, dtype=torch.float64),   # plans a set instead (choose)
                           "FeatProp's selection (Wu et al. 2019): k-means on propagated features, the node nearest each centre",
                           plans=True, reads_features=True))


FEATPROP_HOPS = 2          # S^2 X, FeatProp's propagation
KMEANS_STEPS = 30          # Lloyd's iterations (k-means++ start, seeded)


def propagated(sel: Selection) -> Tensor:
    """``S^2 X``: the features propagated twice by the symmetric-normalised adjacency with self-loops."""
    n = sel.posterior.num_nodes
    index, weight = normalized_adjacency(sel.edge_index.cpu(), n, "sym", dtype=torch.float64)
    operator = torch.sparse_coo_tensor(index, weight, (n, n), check_invariants=False).coalesce()
    x = sel.features.cpu().double()
    for _ in range(FEATPROP_HOPS):
        x = torch.sparse.mm(operator, x)
    return x


def kmeans_centres(x: Tensor, k: int, generator: torch.Generator) -> Tensor:
    """The ``k`` centres of k-means on the rows of ``x`` (k-means++ start, ``KMEANS_STEPS`` Lloyd steps)."""
    n = x.size(0)
    k = min(k, n)
    squares = (x * x).sum(1)
    centres = [int(torch.randint(n, (1,), generator=generator))]
    nearest = squares - 2 * x @ x[centres[0]] + squares[centres[0]]
    for _ in range(1, k):   # k-means++: the next centre drawn with probability ~ its squared distance to the nearest one
        weights = nearest.clamp_min(0)
        pick = int(torch.multinomial(weights / weights.sum(), 1, generator=generator)) if float(weights.sum()) > 0 else int(torch.randint(n, (1,), generator=generator))
        centres.append(pick)
        nearest = torch.minimum(nearest, squares - 2 * x @ x[pick] + squares[pick])
    c = x[centres].clone()
    for _ in range(KMEANS_STEPS):
        distance = squares[:, None] - 2 * x @ c.T + (c * c).sum(1)[None, :]
        assign = distance.argmin(1)
        counts = torch.bincount(assign, minlength=k).double()
        sums = torch.zeros_like(c).index_add_(0, assign, x)
        c = torch.where(counts[:, None] > 0, sums / counts.clamp_min(1)[:, None], c)
    return c


def squared_distances(x: Tensor, centres: Tensor) -> Tensor:
    """``||x_i - c_j||^2`` for every row ``i`` of ``x`` and centre ``j``."""
    return ((x * x).sum(1)[:, None] - 2 * x @ centres.T + (centres * centres).sum(1)[None, :]).clamp_min(0)


def kmeans_nearest(x: Tensor, k: int, generator: torch.Generator) -> list[int]:
    """The rows of ``x`` nearest the ``k`` centres of k-means (:func:`kmeans_centres`), one per
    centre, distinct, in the order of the centres."""
    distance = squared_distances(x, kmeans_centres(x, k, generator))
    chosen: list[int] = []
    for j in range(distance.size(1)):   # each centre's nearest row not chosen yet
        for row in torch.argsort(distance[:, j], stable=True).tolist():
            if row not in chosen:
                chosen.append(row)
                break
    return chosen


def _featprop(sel: Selection, pool: Tensor) -> list[int]:
    """The budget's planned nodes: the pool's nearest to the k-means centres of ``S^2 X`` (k = the budget)."""
    if sel.target not in sel.planned:
        if sel.propagated is None:
            sel.propagated = propagated(sel)
        ids = pool.cpu().nonzero().view(-1)
        sel.planned[sel.target] = [int(ids[i]) for i in kmeans_nearest(sel.propagated[ids], sel.target, sel.generator)]
    return sel.planned[sel.target]


AGE_HIDDEN = 16   # AGE's GCN (Kipf & Welling's two layers of 16 hidden units), retrained at every step
AGE_BASEF = 0.9   # AGE's schedule base (its code's basef for Cora and CiteSeer): gamma ~ Beta(1, 1.005 - AGE_BASEF^t)


def percentile(values: Tensor) -> Tensor:
    """AGE's ``perc``: for each node, the fraction of all nodes whose value is strictly smaller
    (``P_i = |{j : v_j < v_i}| / n``; equal values share a percentile)."""
    ordered = torch.sort(values)[0]
    return torch.searchsorted(ordered, values, right=False).to(torch.float64) / values.numel()


def percentile_closer(values: Tensor) -> Tensor:
    """AGE's ``percd`` (for distances, where smaller is better): the fraction of all nodes whose
    value is strictly larger (``|{j : v_j > v_i}| / n``)."""
    ordered = torch.sort(values)[0]
    return (values.numel() - torch.searchsorted(ordered, values, right=True)).to(torch.float64) / values.numel()


def age_weights(labels: int, generator: torch.Generator) -> tuple[float, float, float]:
    """AGE's time-varying weights after ``labels`` labels: ``gamma ~ Beta(1, 1.005 - basef^t)`` (drawn by
    the inverse CDF of ``Beta(1, b)``, ``1 - U^(1/b)``, from ``generator``), ``alpha = beta = (1 - gamma) / 2``:
    centrality first, the GCN's entropy and density as it learns."""
    b = 1.005 - AGE_BASEF ** labels
    u = float(torch.rand(1, generator=generator, dtype=torch.float64))
    gamma = 1.0 - u ** (1.0 / b)
    return (1.0 - gamma) / 2, (1.0 - gamma) / 2, gamma


def age_scores(probabilities: Tensor, pagerank: Tensor, weights: tuple[float, float, float], generator: torch.Generator) -> Tensor:
    """AGE's score of every node: ``alpha P(H(p_i)) + beta Pd(min_j ||p_i - c_j||) + gamma P(PageRank_i)``,
    ``p_i`` the GCN's class probabilities, ``c_j`` the centres of k-means on them (k = the classes),
    ``P`` :func:`percentile` and ``Pd`` :func:`percentile_closer` over every node."""
    p = probabilities.double()
    entropy = -(p * torch.log(p.clamp_min(1e-300))).sum(1)
    density = squared_distances(p, kmeans_centres(p, p.size(1), generator)).min(1)[0]
    alpha, beta, gamma = weights
    return alpha * percentile(entropy) + beta * percentile_closer(density) + gamma * percentile(pagerank)


def _age(sel: Selection) -> Tensor:
    """AGE: the GCN retrained on the labels so far (``sel.classifier``); with none yet, PageRank's percentile alone."""
    if sel.static is None:
        sel.static = centrality(sel.edge_index, sel.posterior.num_nodes, "pagerank")
    labelled = (~sel.posterior.unlabelled.cpu()).nonzero().view(-1)
    if labelled.numel() == 0:
        return percentile(sel.static)
    probabilities = sel.classifier(labelled).cpu()
    return age_scores(probabilities, sel.static, age_weights(int(labelled.numel()), sel.generator), sel.generator)


register_strategy(Strategy("age", _age, "AGE (Cai, Zheng & Chang 2017): entropy, density and centrality of the GCN retrained per step",
                           classifies=True, retrains=True, gcn={"hidden": AGE_HIDDEN}))


def _scores(strategy: Strategy, sel: Selection) -> Tensor:
    """The strategy's scores as a float64 tensor on the CPU (a list or an array is taken as one)."""
    scores = strategy.score(sel)
    try:
        scores = torch.as_tensor(scores)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError(f"strategy {strategy.name} scored {type(scores).__name__}, not a tensor of one number per node "
                          f"({type(err).__name__}: {err}): docs/extending.md") from None
    if scores.is_complex() or scores.dtype == torch.bool:
        raise ConfigError(f"strategy {strategy.name} scored {scores.dtype} values; a strategy's score is a real number per node")
    return scores.to(torch.float64).cpu()


def _check_scores(strategy: Strategy, scores: Tensor, open_mask: Tensor) -> None:
    """A strategy's scores are one number per node, none of them NaN where a step may label: a
    registered strategy's bug is one line naming it, not a shape error of torch's or a silent
    choice of the lowest ids (every NaN ties)."""
    if scores.dim() != 1 or scores.numel() != open_mask.numel():
        raise ConfigError(f"strategy {strategy.name} scored a tensor of shape {tuple(scores.shape)}; a strategy's score gives one number "
                          f"per node ({open_mask.numel():,}): docs/extending.md")
    if bool(open_mask.any()) and bool((scores[open_mask] == -math.inf).all()):   # nothing to choose: the lowest ids, silently
        raise ConfigError(f"strategy {strategy.name} scored -inf on every node a step may label ({int(open_mask.sum()):,}); "
                          "a strategy scores at least one of them above -inf")
    bad = open_mask & scores.isnan()
    if bool(bad.any()):
        raise ConfigError(f"strategy {strategy.name} scored NaN on {int(bad.sum()):,} of the {int(open_mask.sum()):,} nodes a step may "
                          f"label (first: node {int(bad.nonzero()[0])}); a strategy's score is a number for every node")


def choose(strategy: Strategy, sel: Selection, pool: Tensor, count: int) -> list[int]:
    """The ``count`` highest-scoring nodes among ``pool`` (a boolean mask) not labelled yet,
    best first (ties: the lowest id)."""
    if strategy.plans:   # a set planned per budget: its nodes not labelled yet, then (were they all) the pool's first open ones
        open_mask = pool.cpu() & sel.posterior.unlabelled.cpu()
        planned = [node for node in _featprop(sel, pool) if bool(open_mask[node])]
        if len(planned) < count:
            planned += [int(v) for v in open_mask.nonzero().view(-1) if int(v) not in planned][:count - len(planned)]
        return planned[:count]
    open_mask = pool.cpu() & sel.posterior.unlabelled.cpu()
    sel.open = open_mask
    if strategy.static:
        if sel.static is None:
            sel.static = _scores(strategy, sel)
        scores = sel.static
    else:
        scores = _scores(strategy, sel)
    _check_scores(strategy, scores, open_mask)
    if count == 1:   # one label (the default): the first maximum, an O(n) pass, not a sort
        best = int(torch.argmax(scores.masked_fill(~open_mask, -math.inf)))
        if bool(open_mask[best]):
            return [best]
    open_nodes = open_mask.nonzero().view(-1)
    ranked = open_nodes[torch.argsort(-scores[open_nodes], stable=True)]
    return [int(v) for v in ranked[:count]]
