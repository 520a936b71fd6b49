"""Conformal prediction: prediction sets (classification) and intervals (regression) with a
coverage guarantee, from any method's predictions: a GP's class probabilities or predictive
variance, a GNN's softmax. Nothing is trained; the guarantee needs only that the calibration
and test nodes are exchangeable.

A *score* says how poorly a label fits a node (larger: worse), for every node and class
(``n x C``, from the class probabilities ``p``):

| ``conformal=`` | score of class ``y`` at node ``i``                                                  |
|----------------|--------------------------------------------------------------------------------------|
| ``tps``        | ``1 - p_iy`` (threshold prediction sets; Sadinle et al. 2019, TorchCP's ``THR``)      |
| ``aps``        | the probability of the classes ranked above ``y``, plus ``u_i p_iy`` with ``u_i``     |
|                | uniform on [0, 1] (randomised adaptive prediction sets; Romano et al. 2020)           |
| ``raps``       | ``aps`` plus ``penalty * max(0, rank - kreg)``, ``rank`` the 1-based rank of ``y``    |
|                | (regularised APS; Angelopoulos et al. 2021)                                           |
| ``daps``       | ``(1 - neighbours) aps + neighbours * (mean aps of the node's neighbours)``           |
|                | (diffusion APS; Zargarbashi et al. 2023); a node without neighbours keeps its own     |
| ``snaps``      | ``(1 - xi - mu) aps + xi * (neighbours' mean) + mu * (mean over the ``k`` nodes of the |
|                | most similar features, by cosine)`` (Song et al. 2024)                                |

The graph scores (``daps``, ``snaps``) read every node's scores, so the method predicts every
node (a GP's exact kernel is then evaluated on every row, not only the labelled ones).

Calibration: the *evaluation nodes* (the test nodes; a protocol's out-of-distribution ones
excepted) are split ``splits`` times at random (seeded) into a calibration share and a test
share. With ``m`` calibration scores of the true labels, the threshold ``q`` is the
``ceil((m + 1)(1 - alpha))``-th smallest (every class when that exceeds ``m``), and a test node's
set is every class whose score is at most ``q``. Per split: ``coverage`` (the share of test
nodes whose set holds their label), ``set_size`` (the mean number of classes in a set) and
``singleton_hit`` (the share of test nodes whose set is their label alone); the row has their
mean over the splits and their standard deviation (``*_std``).

Regression: the score is ``|y - mean| / sd`` (``sd`` the predictive standard deviation; 1 for a
method without one, the absolute residual), and the interval ``mean +- q sd``: ``coverage`` and
``interval_width`` (its mean width), per split as above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from .errors import ConfigError, DatasetError
from .runtime import release_freed_memory

SCORES = ("aps", "raps", "daps", "snaps", "tps")   # conformal=<name>; none: no conformal columns
GRAPH_SCORES = ("daps", "snaps")                   # read every node's scores and the graph
SPLIT_ENTRIES = 1 << 24                            # splits x test nodes x classes compared at once
SPLITS_MAX = 10**6    # conformal.splits: past this the mean's Monte-Carlo error is below any difference worth a row
COUNT_MAX = 2**31 - 1  # conformal.kreg and conformal.k: ranks and node counts
SEED_MAX = 2**63 - 1   # conformal.seed: a torch generator's seed


def check_values(c) -> None:
    """The values of a ``conformal`` config or a :class:`Calibration` (any object with its
    fields): each out of its range is a one-line :class:`ConfigError` naming ``conformal.<key>``."""
    def finite(key: str) -> float:
        value = getattr(c, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):   # a tensor's 0.1 read as float32 is not the level asked
            raise ConfigError(f"conformal.{key} takes a Python number (e.g. {key}=0.1), not {type(value).__name__}; give float(value)")
        if not math.isfinite(value):
            raise ConfigError(f"conformal.{key}={value} is not a finite number; give a finite value")
        return value

    def whole(key: str, low: int, high: int, example: str) -> None:
        value = getattr(c, key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"conformal.{key}={value} must be an integer from {low:,} to {high:,} ({example})")

    if not 0 < finite("alpha") < 1:
        raise ConfigError(f"conformal.alpha={c.alpha} must be above 0 and below 1 (e.g. 0.1: sets that hold the label 90% of the time)")
    whole("splits", 1, SPLITS_MAX, "e.g. 100, or 1,000 for a mean with a third of the Monte-Carlo error")
    whole("seed", 0, SEED_MAX, "e.g. 0")
    if not 0 < finite("calibration") < 1:
        raise ConfigError(f"conformal.calibration={c.calibration} must be above 0 and below 1 (the share of test nodes to calibrate on, e.g. 0.5)")
    if finite("penalty") < 0:
        raise ConfigError(f"conformal.penalty={c.penalty} must be at least 0 (e.g. 0.01)")
    whole("kreg", 0, COUNT_MAX, "e.g. 1")
    neighbours, xi, mu = finite("neighbours"), finite("xi"), finite("mu")
    if not 0 <= neighbours <= 1:   # daps's weight
        raise ConfigError(f"conformal.neighbours={neighbours} is a weight: give a value in [0, 1] (e.g. 0.5)")
    if not (xi >= 0 and mu >= 0 and xi + mu <= 1):   # snaps's two weights
        raise ConfigError(f"conformal.xi={xi} and conformal.mu={mu} are weights: each at least 0, xi + mu at most 1 (e.g. 1/3 and 1/3)")
    whole("k", 1, COUNT_MAX, "e.g. 20 feature-similar nodes")


@dataclass(frozen=True)
class Calibration:
    """What conformal prediction reads of a job's spec (``conformal.*``)."""

    score: str
    alpha: float = 0.1
    splits: int = 100
    calibration: float = 0.5
    seed: int = 0
    penalty: float = 0.01
    kreg: int = 1
    neighbours: float = 0.5
    xi: float = 1 / 3
    mu: float = 1 / 3
    k: int = 20

    def __post_init__(self) -> None:
        if self.score not in SCORES:
            raise ConfigError(f"conformal={self.score!r} is not a score; use one of {', '.join(SCORES)}")
        check_values(self)

    @classmethod
    def from_spec(cls, spec) -> Optional["Calibration"]:
        """The calibration of a ``conformal`` spec, or ``None`` for ``conformal=none``."""
        if spec is None or spec.name == "none":
            return None
        return cls(str(spec.name), float(spec.alpha), int(spec.splits), float(spec.calibration), int(spec.seed),
                   float(spec.penalty), int(spec.kreg), float(spec.neighbours), float(spec.xi), float(spec.mu), int(spec.k))

    @property
    def reads_graph(self) -> bool:
        return self.score in GRAPH_SCORES


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def aps_scores(probs: Tensor, u: Tensor) -> Tensor:
    """Randomised APS scores of every class (``n x C``): the probability of the classes ranked
    above it plus ``u`` (one uniform per node) times its own."""
    order = torch.argsort(probs, dim=1, descending=True, stable=True)
    ranked = torch.gather(probs, 1, order)
    above = torch.cumsum(ranked, dim=1) - ranked                  # the classes ranked strictly above
    scores = torch.empty_like(probs)
    scores.scatter_(1, order, above + u[:, None] * ranked)
    return scores


def class_ranks(probs: Tensor) -> Tensor:
    """The 1-based rank of every class by probability (``n x C``; 1: the most probable)."""
    order = torch.argsort(probs, dim=1, descending=True, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(1, probs.size(1) + 1, device=probs.device).expand_as(order).contiguous())
    return ranks


def neighbour_mean(scores: Tensor, edge_index: Tensor, num_nodes: int) -> Tensor:
    """Each node's mean of ``scores`` over its neighbours in ``edge_index`` (its own where it has none)."""
    src, dst = edge_index[0].long(), edge_index[1].long()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    total = torch.zeros_like(scores).index_add_(0, dst, scores[src])
    degree = torch.zeros(num_nodes, dtype=scores.dtype, device=scores.device).index_add_(0, dst, torch.ones_like(dst, dtype=scores.dtype))
    alone = degree == 0
    out = total / degree.clamp_min(1)[:, None]
    out[alone] = scores[alone]
    return out


def similar_mean(scores: Tensor, features: Tensor, k: int, rows: int = 4096) -> Tensor:
    """Each node's mean of ``scores`` over the ``k`` other nodes whose features are most similar
    (cosine), by blocks of ``rows`` nodes."""
    n = features.size(0)
    k = min(k, n - 1)
    if k < 1:
        return scores.clone()
    unit = torch.nn.functional.normalize(features.double(), dim=1)
    out = torch.empty_like(scores)
    for start in range(0, n, rows):
        sim = unit[start:start + rows] @ unit.T
        sim[torch.arange(sim.size(0)), torch.arange(start, start + sim.size(0))] = -math.inf   # not itself
        top = sim.topk(k, dim=1).indices
        out[start:start + rows] = scores[top].mean(1)
    return out


def class_scores(cal: Calibration, probs: Tensor, edge_index: Optional[Tensor] = None, features: Optional[Tensor] = None) -> Tensor:
    """The non-conformity score of every node and class (``n x C``, float64) by ``cal.score``
    (see the module docstring). ``probs``: every node's class probabilities for the graph
    scores, else those of the nodes scored; ``edge_index``/``features``: the graph's."""
    probs = probs.double()
    if cal.score == "tps":
        return 1 - probs
    u = torch.rand(probs.size(0), generator=_generator(cal.seed), dtype=torch.float64).to(probs.device)
    scores = aps_scores(probs, u)
    if cal.score == "raps":
        return scores + cal.penalty * (class_ranks(probs) - cal.kreg).clamp_min(0).double()
    if cal.score in GRAPH_SCORES:
        if edge_index is None:
            raise ConfigError(f"conformal={cal.score} diffuses scores over the graph's edges, and none were given")
        if cal.score == "snaps" and features is None:
            raise ConfigError("conformal=snaps averages scores over the nodes of the most similar features, and none were given")
        spread = neighbour_mean(scores, edge_index, probs.size(0))
        if cal.score == "daps":
            return (1 - cal.neighbours) * scores + cal.neighbours * spread
        similar = similar_mean(scores, features, cal.k)
        return (1 - cal.xi - cal.mu) * scores + cal.xi * spread + cal.mu * similar
    return scores


def calibration_size(cal: Calibration, n: int) -> Optional[int]:
    """The calibration nodes of each split of ``n`` evaluation nodes, or ``None`` when a split
    would leave no calibration or no test node."""
    m = int(round(cal.calibration * n))
    return m if 1 <= m < n else None


def _split_chunks(cal: Calibration, n: int, rows_per_split: int, device):
    """``(start, calibration, test)`` positions of the splits, a chunk of them at a time
    (``chunk x m`` and ``chunk x (n - m)``, about :data:`SPLIT_ENTRIES` entries of
    ``rows_per_split`` each), drawn in turn from one seeded generator."""
    m = calibration_size(cal, n)
    generator = _generator((cal.seed + 1) % 2**63)   # apart from the APS draws' (the seed's own)
    step = max(1, SPLIT_ENTRIES // max(n * rows_per_split, 1))
    for start in range(0, cal.splits, step):
        perms = torch.argsort(torch.rand(min(step, cal.splits - start), n, generator=generator), dim=1).to(device)
        yield start, perms[:, :m], perms[:, m:]
        del perms
        release_freed_memory()   # each chunk's temporaries handed back: the process stays at one chunk's size, whatever the splits


def threshold_rank(m: int, alpha: float) -> int:
    """``ceil((m + 1)(1 - alpha))``, rounded first to 9 decimals so that ``1 - alpha``'s round-off
    (``1 - 0.7 = 0.30000000000000004``) does not raise it by one."""
    return math.ceil(round((m + 1) * (1 - alpha), 9))


def thresholds(cal: Calibration, calibration_scores: Tensor) -> Tensor:
    """The conformal threshold of each split from its calibration scores (``splits x m``):
    the :func:`threshold_rank`-th smallest, or infinity when that exceeds ``m``."""
    m = calibration_scores.size(1)
    rank = threshold_rank(m, cal.alpha)
    if rank > m:
        return torch.full((calibration_scores.size(0),), math.inf, dtype=torch.float64, device=calibration_scores.device)
    return torch.kthvalue(calibration_scores, rank, dim=1).values


def _summary(name: str, per_split: Tensor) -> dict[str, float]:
    """The mean over the splits, and their spread (none of one split: a blank cell, not 0)."""
    values = per_split.double()
    return {name: float(values.mean()), f"{name}_std": float(values.std(unbiased=False)) if values.numel() > 1 else math.nan}


def prediction_sets(cal: Calibration, scores: Tensor, y: Tensor) -> dict[str, float]:
    """Coverage, set size and singleton hits over the splits of the evaluation nodes, from
    their class scores (``n x C``) and labels ``y``."""
    n, classes = scores.shape
    own = scores[torch.arange(n, device=scores.device), y]
    coverage, size, hit = [], [], []
    for _, cal_pos, test_pos in _split_chunks(cal, n, classes, scores.device):
        q = thresholds(cal, own[cal_pos])
        sets = scores[test_pos] <= q[:, None, None]               # splits x test x C
        covered = own[test_pos] <= q[:, None]
        count = sets.sum(2)
        coverage.append(covered.double().mean(1))
        size.append(count.double().mean(1))
        hit.append((covered & (count == 1)).double().mean(1))
    return {**_summary("coverage", torch.cat(coverage)), **_summary("set_size", torch.cat(size)),
            **_summary("singleton_hit", torch.cat(hit))}


def prediction_intervals(cal: Calibration, mean: Tensor, y: Tensor, sd: Optional[Tensor] = None) -> dict[str, float]:
    """Coverage and mean width of the intervals ``mean +- q sd`` over the splits of the
    evaluation nodes (``sd`` ``None``: 1, the absolute residual)."""
    mean, y = mean.double().view(-1), y.double().view(-1)
    sd = torch.ones_like(mean) if sd is None else sd.double().view(-1).clamp_min(torch.finfo(torch.float64).tiny)
    scores = (y - mean).abs() / sd
    coverage, width = [], []
    for _, cal_pos, test_pos in _split_chunks(cal, mean.numel(), 1, mean.device):
        q = thresholds(cal, scores[cal_pos])
        coverage.append((scores[test_pos] <= q[:, None]).double().mean(1))
        width.append((2 * q[:, None] * sd[test_pos]).mean(1))
    return {**_summary("coverage", torch.cat(coverage)), **_summary("interval_width", torch.cat(width))}


def conformal_columns(cal: Calibration, evaluation: Tensor, y: Tensor, *, probs: Optional[Tensor] = None, mean: Optional[Tensor] = None,
                      sd: Optional[Tensor] = None, edge_index: Optional[Tensor] = None, features: Optional[Tensor] = None) -> dict:
    """A row's conformal columns. Classification: ``probs`` (every node's, or for the graph
    scores at least every node of the graph; rows indexed by node id) and the evaluation nodes'
    ids ``evaluation``; regression: ``mean`` and ``sd`` of every node. ``y``: every node's target.
    Too few evaluation nodes for a split (``conformal.calibration`` leaves none on a side): the
    columns are empty and ``warning`` says why (the row keeps its other results)."""
    out = {"conformal": cal.score, "conformal_alpha": cal.alpha}
    n = int(evaluation.numel())
    if calibration_size(cal, n) is None:
        m = int(round(cal.calibration * n))
        fix = "more test nodes (a larger test split)" if n < 2 else "conformal.calibration=0.5"
        return {**out, "warning": f"no conformal columns: conformal.calibration={cal.calibration:g} leaves {m} of the {n} test nodes "
                                  f"for calibration and {n - m} to test, and a split needs at least one of each; use {fix}"}
    predicted = probs if probs is not None else mean
    if predicted is None:
        raise ConfigError("conformal columns need class probabilities (classification) or predicted means (regression), and neither was given")
    rows = min(int(predicted.size(0)), int(y.size(0)), *(() if sd is None else (int(sd.size(0)),)))
    if int(evaluation.min()) < 0 or int(evaluation.max()) >= rows:
        raise DatasetError(f"conformal: an evaluation node id ({int(evaluation.max())}) lies past the {rows:,} nodes predicted; the "
                           "predictions and targets must cover every evaluation node")
    problem = _unusable(cal, evaluation, y, probs, mean, sd)
    if problem is not None:
        return {**out, "warning": f"no conformal columns: {problem}"}
    m = calibration_size(cal, n)
    if threshold_rank(m, cal.alpha) > m:   # the rule's answer, every class (an infinite interval), said, not silent
        need = math.ceil(round((1 - cal.alpha) / cal.alpha, 9))
        out["warning"] = (f"conformal.calibration={cal.calibration:g} calibrates each split on {m} of the {n} test nodes, and "
                          f"conformal.alpha={cal.alpha:g} needs at least {need}: every set holds every class (every interval is "
                          f"infinite); use a larger conformal.calibration or conformal.alpha")
    if probs is not None:
        if cal.score == "snaps" and features is not None and cal.k > int(features.size(0)) - 1:   # similar_mean's clamp, said
            said = (f"conformal.k={cal.k} is above the {int(features.size(0)) - 1:,} other nodes of the graph: SNAPS averages each "
                    f"node's score over all of them; use conformal.k of at most {max(int(features.size(0)) - 1, 1):,}")
            out["warning"] = f"{out['warning']}; {said}" if "warning" in out else said
        scores = class_scores(cal, probs, edge_index, features)
        return {**out, **prediction_sets(cal, scores[evaluation], y[evaluation].long())}
    return {**out, **prediction_intervals(cal, mean[evaluation], y[evaluation], None if sd is None else sd[evaluation])}


def _unusable(cal: Calibration, evaluation: Tensor, y: Tensor, probs: Optional[Tensor], mean: Optional[Tensor], sd: Optional[Tensor]) -> Optional[str]:
    """Why the evaluation nodes' predictions give no conformal columns (``None``: they do): a
    label that is no class of the probabilities (it would index another class's score), or a
    prediction or target that is not finite (its score would be NaN, and every comparison false)."""
    target = y[evaluation]
    if probs is not None:
        classes = int(probs.size(1))
        if target.is_floating_point() and not bool((target == target.round()).all()):
            return "the test labels are not whole class ids, and conformal prediction sets need classes"
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= classes):
            wrong = int(target.min()) if int(target.min()) < 0 else int(target.max())
            return f"a test label ({wrong}) is no class of the {classes} predicted; prediction sets need every label among 0..{classes - 1}"
        scored = probs if cal.reads_graph else probs[evaluation]   # the graph scores mix every node's
        bad = int((~torch.isfinite(scored)).any(1).sum())
        if bad:
            return f"{bad:,} nodes have non-finite class probabilities (NaN or inf); a score of them compares false with any threshold"
        return None
    for what, values in (("targets", target), ("predicted means", mean[evaluation]), ("predictive deviations", None if sd is None else sd[evaluation])):
        if values is not None and not bool(torch.isfinite(values).all()):
            bad = int((~torch.isfinite(values)).sum())
            return f"{bad:,} test nodes have non-finite {what} (NaN or inf); an interval of them would have no width or no coverage"
    return None
