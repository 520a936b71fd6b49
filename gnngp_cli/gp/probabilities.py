"""Class probabilities from a Gaussian over the latent outputs, and the temperature fitted on validation.

A GP predicts, for each node, a Gaussian over its ``C`` latent outputs: the means and the
latent variances (one shared variance with the ``gaussian`` likelihood, one per class with the
``dirichlet`` one). The class probabilities are ``E[softmax(f / T)]`` under it, by one of two
standard approximations:

- ``mc``: the mean of ``softmax`` over ``S`` samples ``f = mu + sqrt(var) z``. The ``S x C``
  standard normal draws ``z`` come from a fixed seed and are the same for every node, so a
  node's probabilities do not depend on which rows are computed with it (the Dask backend's row
  blocks give the local numbers);
- ``probit``: the closed form ``softmax(mu / sqrt(1 + pi var / 8))`` (MacKay's probit
  approximation, applied per class).

The temperature ``T`` (``1`` unless fitted) and a factor ``k`` on the latent variance (``1``
unless fitted) are the pair of :data:`TEMPERATURES` x :data:`VARIANCE_FACTORS` with the lowest
validation negative log likelihood (Guo et al., 2017's temperature scaling, by grid search, so
row groups reduce it like any metric): the probabilities of ``N(mu, k var)`` at ``T``. The
temperature alone divides the whole Gaussian, ``f / T``, and cannot change the ratio of the means
to the standard deviation: where the latent variance is wide against the means' gaps between
classes (GATGP on Cora: median top-2 gap 0.094, median sd 0.24; a trained network's variance over
its initialisation) no temperature made the probabilities confident, and the search ran to the
grid's floor with a test ECE of 0.43-0.47. The pair is fitted by the probit form, coarse to fine
(:func:`fit_temperature`: 98 of the 732 pairs, in two products); with ``mc`` the temperature is then fitted again at the chosen
factor by the draws the test rows get (a temperature searched on one form and applied to the
other made the test NLL of a Dirichlet GP on Cora 2.1 instead of 0.75: at small T the draws become
hard votes). Temperatures within :data:`FLAT` of the lowest NLL count as ties, the one nearest
``T = 1`` taken (toward ``T = 0`` the probit's ``sqrt(T^2 + pi k var / 8)`` is the variance's
alone, a flat curve). A temperature on the grid's first or last value is written to the log and
the row's ``warnings``. ``likelihood.probabilities=auto`` is ``probit``: on Cora, CiteSeer and
PubMed its test ECE and NLL match Monte Carlo's (both fitted as above), and the fit and the test
probabilities cost a few milliseconds where Monte Carlo's took 0.1 to 5 s. The GNN baselines'
temperature uses the same grid on their logits (no variance, no factor).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch
from torch import Tensor

APPROXIMATIONS = ("mc", "probit")
TEMPERATURES = torch.logspace(-3, 2, 61, dtype=torch.float64)   # the grid a temperature is fitted on
# the factors on the latent variance fitted with the temperature: 0 (the mean alone), then 1e-4..10 by half decades
VARIANCE_FACTORS = torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(-4, 1, 11, dtype=torch.float64)])
ONE = torch.ones(1, dtype=torch.float64)   # the variance as it is (or the temperature 1) alone
FLAT = 1e-3   # best_fit: temperatures within this fraction of the lowest validation NLL are ties
SAMPLE_SEED = 0
CHUNK_ENTRIES = 1 << 24   # rows x samples x classes drawn at once
# the smallest exponent taken: exp of a shifted draw below it is (much) less than round-off beside
# the largest class's exp(0) = 1, and a subnormal result of exp takes the CPU's slow path (many
# times the time of a normal one at small temperatures)
EXP_FLOOR = math.log(torch.finfo(torch.float64).tiny) + 8.0


def draws(samples: int, classes: int, device=None) -> Tensor:
    """The ``samples x classes`` standard normal draws every node shares (a fixed seed)."""
    generator = torch.Generator().manual_seed(SAMPLE_SEED)
    return torch.randn(samples, classes, generator=generator, dtype=torch.float64).to(device)


def _spread(mean: Tensor, variance: Optional[Tensor]) -> Tensor:
    """The latent variances as ``n x C`` (a shared variance broadcast; none: zero)."""
    if variance is None:
        return torch.zeros_like(mean)
    variance = variance.to(mean.dtype).clamp_min(0)
    return variance[:, None].expand_as(mean) if variance.dim() == 1 else variance


def _shifted_draws(mean: Tensor, var: Tensor, samples: int):
    """``(start, g)`` per chunk of rows: the draws ``f = mean + sqrt(var) z`` of the rows from
    ``start`` as ``C x rows x S``, each draw less its largest class (``softmax(f / T)`` is then
    ``exp(g / T)`` over its sum, without overflow, for every ``T > 0``). Classes first: a softmax
    over a last dimension of a few classes is several times slower per entry than the same
    operations on whole ``rows x S`` slabs."""
    n, c = mean.shape
    z = draws(samples, c, mean.device).T.contiguous()   # C x S
    step = max(1, CHUNK_ENTRIES // max(samples * c, 1))
    for start in range(0, n, step):
        mu, sd = mean[start:start + step].T, var[start:start + step].sqrt().T   # C x rows
        g = mu[:, :, None] + sd[:, :, None] * z[:, None, :]
        yield start, g.sub_(g.amax(0, keepdim=True))


def class_probabilities(mean: Tensor, variance: Optional[Tensor], approx: str = "mc", samples: int = 256,
                        temperature: float = 1.0) -> Tensor:
    """``E[softmax(f / T)]`` for ``f ~ N(mean, variance)`` per node (``mean``: ``n x C``;
    ``variance``: ``n`` or ``n x C``, or ``None`` for a point prediction): ``n x C`` float64 rows
    that sum to one (see the module docstring)."""
    mean = mean.double()
    var = _spread(mean, variance)
    if variance is None or approx == "probit":   # f / T ~ N(mean / T, var / T^2)
        return torch.softmax(mean / temperature / torch.sqrt(1 + math.pi * var / (8 * temperature ** 2)), dim=1)
    out = mean.new_empty(mean.shape)
    for start, g in _shifted_draws(mean, var, samples):
        e = g.div_(temperature).clamp_(min=EXP_FLOOR).exp_()
        out[start:start + g.size(1)] = (e / e.sum(0)).mean(2).T
    return out


def nll_grid(mean: Tensor, variance: Optional[Tensor], y: Tensor, approx: str, samples: int,
             temperatures: Tensor = TEMPERATURES, factors: Tensor = ONE) -> Tensor:
    """The summed negative log likelihood of the labels ``y`` at each variance factor (rows) and
    temperature (columns): the probabilities of ``N(mean, factor x variance)`` at ``T``
    (float64, ``len(factors) x len(temperatures)``). Probit: every temperature of a factor in one
    ``T x rows x C`` product (by row chunks). Monte Carlo: the shifted draws of a factor are made
    once for every temperature, and each temperature needs only the sum over classes and the
    label's own entry, instead of a softmax of every draw per temperature (kept clear of
    subnormal results of exp, see EXP_FLOOR)."""
    out = torch.zeros(factors.numel(), temperatures.numel(), dtype=torch.float64, device=mean.device)
    if y.numel() == 0:
        return out
    mean = mean.double()
    var = _spread(mean, variance)
    t = temperatures.to(device=mean.device, dtype=torch.float64)
    if variance is None or approx == "probit":   # softmax(mean / sqrt(T^2 + pi factor var / 8)), factors x T x rows x C at once
        k = factors.to(device=mean.device, dtype=torch.float64)[:, None, None, None] * (math.pi / 8)
        shared = variance is None or variance.dim() == 1   # one variance per row: the scale is a row's, and so is the largest class
        step = max(1, CHUNK_ENTRIES // max(out.numel() * mean.size(1), 1))
        for start in range(0, mean.size(0), step):
            mu, v, own = mean[start:start + step], var[start:start + step], y[start:start + step, None]
            if shared:   # the label's entry from the rows' own scale: no gather from the whole product
                d = mu - mu.amax(1, keepdim=True)
                r = torch.rsqrt(t[None, :, None] ** 2 + k[..., 0] * v[None, None, :, 0])   # factors x T x rows
                label = (d.gather(1, own)[:, 0] * r).clamp_(min=EXP_FLOOR)
                g = d * r[..., None]
            else:
                g = mu / torch.sqrt(t[None, :, None, None] ** 2 + k * v)
                g = g.sub_(g.amax(3, keepdim=True))
                label = g.gather(3, own.expand(*g.shape[:3], 1))[..., 0].clamp_(min=EXP_FLOOR)
            total = g.clamp_(min=EXP_FLOOR).exp_().sum(3).log_()   # clear of subnormal results of exp (a log_softmax at small T took 40x)
            out -= label.sub_(total).clamp_min_(math.log(1e-300)).sum(2)
        return out
    for row, factor in enumerate(factors.tolist()):
        for start, g in _shifted_draws(mean, var * factor, samples):
            rows = g.size(1)
            own = g[y[start:start + rows], torch.arange(rows, device=g.device)]   # rows x S: the label's shifted draw
            buffer = torch.empty_like(g)
            for i, temperature in enumerate(t.tolist()):
                total = torch.mul(g, 1 / temperature, out=buffer).clamp_(min=EXP_FLOOR).exp_().sum(0)
                p = (own / temperature).clamp_(min=EXP_FLOOR).exp_().div_(total).mean(1)
                out[row, i] -= torch.log(p.clamp_min(1e-300)).sum()
    return out


def nll_by_temperature(mean: Tensor, variance: Optional[Tensor], y: Tensor, approx: str, samples: int,
                       temperatures: Tensor = TEMPERATURES) -> Tensor:
    """The summed negative log likelihood of the labels ``y`` at each temperature (float64), of
    the variance as it is (:func:`nll_grid`'s one row)."""
    return nll_grid(mean, variance, y, approx, samples, temperatures)[0]


def best_temperature(nll: Tensor, temperatures: Tensor = TEMPERATURES) -> float:
    """The temperature of the lowest summed NLL (the first on ties; ``1`` when nothing was scored)."""
    if not bool(torch.isfinite(nll).any()) or float(nll.abs().sum()) == 0:
        return 1.0
    return float(temperatures[int(torch.argmin(nll.nan_to_num(nan=math.inf)))])


def best_fit(nll: Tensor, temperatures: Tensor = TEMPERATURES, factors: Tensor = VARIANCE_FACTORS) -> tuple[float, float]:
    """``(temperature, variance factor)`` of the lowest summed NLL of :func:`nll_grid` (the first
    factor on ties). Along the chosen factor's row, temperatures within :data:`FLAT` (relative) of
    its lowest NLL are ties, and the one nearest ``T = 1`` is taken: where the variance sets the
    probabilities, the NLL is flat in ``T`` toward 0 (``sqrt(T^2 + pi var / 8)`` is the variance's
    alone), and the smallest grid value would be an artefact of round-off. ``(1, 1)`` when nothing
    was scored."""
    if not bool(torch.isfinite(nll).any()) or float(nll.abs().sum()) == 0:
        return 1.0, 1.0
    clean = nll.nan_to_num(nan=math.inf)
    row = int(torch.argmin(clean)) // clean.size(1)
    curve = clean[row]
    ties = torch.nonzero(curve <= curve.min() + FLAT * curve.min().abs()).flatten()
    nearest = ties[int(torch.argmin(temperatures[ties].log().abs()))]
    return float(temperatures[nearest]), float(factors[row])


COARSE_TEMPERATURES = torch.arange(0, TEMPERATURES.numel(), 6)   # fit_temperature's first pass: every half decade of T
COARSE_FACTORS = torch.tensor([0, 1, 3, 5, 7, 9, 11])             # ... and 0, then every decade of the factor
FINE = 3   # its second pass: the temperatures within this many grid steps of the first's, at the factors beside its (half decades)


def fit_temperature(score: Callable[[Tensor, Tensor], Tensor]) -> tuple[float, float]:
    """``(temperature, variance factor)`` of :func:`best_fit` over :data:`TEMPERATURES` x
    :data:`VARIANCE_FACTORS`, coarse to fine: ``score(temperatures, factors)`` (the summed
    validation NLL of :func:`nll_grid`, reduced over the row groups) on every half decade of T
    and decade of the factor (77 pairs), then on the full grid around the best of them (at most
    21): 98 pairs instead of 732. The NLL is smooth in both; where it is flat along the factor the
    pair found may be up to about 0.5% above the full grid's lowest NLL (synthetic cases; none on
    the Cora and PubMed posteriors measured), well within the validation NLL's sampling noise."""
    coarse = score(TEMPERATURES[COARSE_TEMPERATURES], VARIANCE_FACTORS[COARSE_FACTORS])
    if not bool(torch.isfinite(coarse).any()) or float(coarse.abs().sum()) == 0:
        return 1.0, 1.0
    t, k = best_fit(coarse, TEMPERATURES[COARSE_TEMPERATURES], VARIANCE_FACTORS[COARSE_FACTORS])   # ties toward T = 1 here too
    ti, ki = TEMPERATURES.tolist().index(t), VARIANCE_FACTORS.tolist().index(k)
    ts = torch.arange(max(ti - FINE, 0), min(ti + FINE, TEMPERATURES.numel() - 1) + 1)
    ks = torch.arange(max(ki - 1, 0), min(ki + 1, VARIANCE_FACTORS.numel() - 1) + 1)
    return best_fit(score(TEMPERATURES[ts], VARIANCE_FACTORS[ks]), TEMPERATURES[ts], VARIANCE_FACTORS[ks])


def on_edge(temperature: float, temperatures: Tensor = TEMPERATURES) -> bool:
    """Whether a fitted temperature is the grid's first or last value (the best may lie beyond)."""
    return temperature in (float(temperatures[0]), float(temperatures[-1]))


def reliability_bins(probs: Tensor, y: Tensor, bins: int = 15) -> dict[str, list]:
    """A reliability diagram's data: per equal-width confidence bin, the node count, the mean
    confidence and the accuracy (``None`` in empty bins), of the rows ``probs`` with labels ``y``."""
    confidence, predicted = probs.double().max(1)
    right = (predicted == y).double()
    index = torch.clamp((confidence * bins).long(), max=bins - 1)
    count = torch.bincount(index, minlength=bins).double()
    conf = torch.zeros(bins, dtype=torch.float64).index_add_(0, index.cpu(), confidence.cpu())
    acc = torch.zeros(bins, dtype=torch.float64).index_add_(0, index.cpu(), right.cpu())
    count = count.cpu()
    return {"count": [int(c) for c in count.tolist()],
            "confidence": [float(c / n) if n else None for c, n in zip(conf.tolist(), count.tolist())],
            "accuracy": [float(a / n) if n else None for a, n in zip(acc.tolist(), count.tolist())]}
