"""The likelihoods of a GP job (``likelihood=gaussian|dirichlet``): how targets become the
posterior, and how the posterior becomes class probabilities.

- ``gaussian`` (the default; the paper's): one-hot targets regressed with one nugget ``eps``, the
  posterior of :mod:`.inference` as it is. Class probabilities are ``E[softmax(f / T)]`` with
  ``f`` the latent Gaussian at the chosen nugget (its variance times the maximum-likelihood
  output scale of one column), and ``T`` the temperature of the lowest validation NLL.
- ``dirichlet``: Dirichlet-based GP classification (Milios et al., NeurIPS 2018; GPyTorch's
  ``DirichletClassificationLikelihood``). Each class ``c`` is a GP regression of the
  transformed targets ``log(alpha_i) - s_i / 2`` with per-node noise ``s_i = log(1 / alpha_i + 1)``,
  ``alpha_i = alpha + [y_i = c]``, so the noise of a node depends on whether ``c`` is its class.
  A shared constant prior mean (the mean of every transformed target, in closed form) is
  taken off. The grid's value ``eps`` scales the noise, ``K + eps D_c``: it is the inverse of
  the kernel's amplitude, chosen on validation as the nugget is. With ``d = D_c^-1/2``:

  - exact: ``K + eps D = D^1/2 (d K d + eps I) D^1/2``: the Gram matrix ``d K[b, b] d``, the
    right-hand side ``d y_c``, and ``d V`` in place of ``V``, so ``F = K[*, b]`` is read as is;
  - low rank: ``Q[b]^T D^-1 Q[b] = Q[b]^T Q[b] / s_n + (1 / s_p - 1 / s_n) Q[b, c]^T Q[b, c]``
    from the per-class Gram matrices a backend sums over its row blocks
    (:class:`~.inference.TrainingStatistics`' ``class_grams``), a Woodbury solve of rank ``r``.

  One eigendecomposition per class then serves the whole grid. The latent variance is the
  model's (the kernel times ``1 / eps``); probabilities are ``E[softmax(f)]`` (``T = 1``, or a
  fitted one with ``likelihood.temperature=true``). The pseudo-count ``alpha`` sets how
  confident the targets are (Milios et al. choose it by cross-validation): with
  ``likelihood.alpha=null`` each value of ``likelihood.alpha_grid`` gets its nugget chosen on
  the validation metric, and the one of the lowest validation NLL is kept.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import Tensor

from ..errors import ConfigError
from .posterior import ExactPosterior, LowRankPosterior, Posterior, posterior_for
from .sufficient import TrainingStatistics

LIKELIHOODS: dict[str, type["Likelihood"]] = {}   # likelihood=<name>: each registered class, by its name


def register_likelihood(cls: type["Likelihood"]) -> type["Likelihood"]:
    """Register a likelihood class under its ``name`` (a ``likelihood=`` option); a decorator."""
    LIKELIHOODS[cls.name] = cls
    return cls


@dataclass(frozen=True)
class Likelihood:
    """A job's likelihood: how the targets become the posterior, and the posterior class
    probabilities. Each kind is a registered subclass (:func:`register_likelihood`); what they
    share: the probability rule (``approx``, ``samples``) and whether a temperature is fitted on
    validation (``temperature``)."""

    name: ClassVar[str] = ""
    classifies: ClassVar[bool] = False   # only for classification tasks (a regression's uncertainty is its nlpd and coverage)
    per_class: ClassVar[bool] = False    # the posterior needs per-class statistics (each class its own noise)
    approx: str = "auto"
    samples: int = 256
    temperature: bool = True
    temperature_by_default: ClassVar[bool] = True   # likelihood.temperature=null fits a temperature

    @classmethod
    def from_spec(cls, spec: Any) -> "Likelihood":
        """The likelihood of a job's ``likelihood`` spec (:class:`~gnngp_cli.schema.LikelihoodConfig`)."""
        kind = LIKELIHOODS[str(spec.name)]
        return kind(**kind.options(spec))

    @classmethod
    def options(cls, spec: Any) -> dict:
        """This kind's fields from the spec (``temperature: null``: this kind's default)."""
        temperature = spec.temperature if spec.temperature is not None else cls.temperature_by_default
        return dict(approx=str(spec.probabilities), samples=int(spec.samples), temperature=bool(temperature))

    def approximation(self, num_nodes: int, classes: int) -> str:
        """``mc`` or ``probit``: ``auto`` is ``probit`` on every graph (as well calibrated as
        ``mc`` on the citation sets, at a fraction of its cost: see :mod:`.probabilities`)."""
        return "probit" if self.approx == "auto" else self.approx

    def candidates(self) -> list["Likelihood"]:
        """One likelihood per value chosen on validation (``[self]`` when there is no choice)."""
        return [self]

    def posterior(self, stats: TrainingStatistics) -> Posterior:
        raise NotImplementedError

    def variance_scale(self, posterior: Posterior, eps: Tensor, outputs: int) -> float:
        """What multiplies the posterior's latent variance to give the probabilities' Gaussian."""
        raise NotImplementedError

    def columns(self) -> dict:
        """This likelihood's own result columns (the chosen value of what it chooses)."""
        return {}


@register_likelihood
@dataclass(frozen=True)
class GaussianLikelihood(Likelihood):
    """One-hot targets regressed with one nugget (the paper's): the posterior of :mod:`.inference` as it is."""

    name: ClassVar[str] = "gaussian"

    def posterior(self, stats: TrainingStatistics) -> Posterior:
        return posterior_for(stats)

    def variance_scale(self, posterior: Posterior, eps: Tensor, outputs: int) -> float:
        """The output scale of one one-hot column."""
        return posterior.output_scale(eps) / max(outputs, 1)


@register_likelihood
@dataclass(frozen=True)
class DirichletLikelihood(Likelihood):
    """Dirichlet-based GP classification (the module docstring); ``alphas``: the pseudo-counts
    tried, the one of the lowest validation NLL kept."""

    name: ClassVar[str] = "dirichlet"
    classifies: ClassVar[bool] = True
    per_class: ClassVar[bool] = True
    temperature_by_default: ClassVar[bool] = False
    alphas: tuple[float, ...] = (0.01,)

    @classmethod
    def options(cls, spec: Any) -> dict:
        alphas = (float(spec.alpha),) if spec.alpha is not None else tuple(float(a) for a in spec.alpha_grid)
        return {**super().options(spec), "alphas": alphas}

    @property
    def alpha(self) -> float:
        return self.alphas[0]

    def candidates(self) -> list["Likelihood"]:
        return [self] if len(self.alphas) == 1 else [replace(self, alphas=(a,)) for a in self.alphas]

    def posterior(self, stats: TrainingStatistics) -> Posterior:
        return DirichletPosterior(stats, self.alpha)

    def variance_scale(self, posterior: Posterior, eps: Tensor, outputs: int) -> float:
        """1: the latent variance is already the model's."""
        return 1.0

    def columns(self) -> dict:
        return {"alpha": self.alpha}


def dirichlet_targets(labels: Tensor, num_classes: int, alpha: float, dtype=torch.float64) -> tuple[Tensor, Tensor]:
    """The transformed targets and their noise variances, ``n x C`` each (as GPyTorch's
    ``DirichletClassificationLikelihood`` makes them, transposed)."""
    a = torch.full((labels.numel(), num_classes), alpha, dtype=torch.float64, device=labels.device)
    a[torch.arange(labels.numel(), device=labels.device), labels] += 1.0
    noise = torch.log(1.0 / a + 1.0)
    return (torch.log(a) - noise / 2).to(dtype), noise.to(dtype)


def _levels(alpha: float, num_classes: int) -> tuple[float, float, float, float]:
    """``(s_p, s_n, r_p, r_n)``: the noise of a node in its own class and in another, and their
    transformed targets less the shared prior mean."""
    s_p, s_n = math.log(1 / (1 + alpha) + 1), math.log(1 / alpha + 1)
    t_p, t_n = math.log(1 + alpha) - s_p / 2, math.log(alpha) - s_n / 2
    mean = (t_p + (num_classes - 1) * t_n) / num_classes
    return s_p, s_n, t_p - mean, t_n - mean


class DirichletPosterior:
    """One posterior per class (see the module docstring); the same interface as
    :class:`~.inference.Posterior`, with a latent variance per class (``n x C``)."""

    def __init__(self, stats: TrainingStatistics, alpha: float):
        classes = stats.rhs.size(1)
        if classes < 2:
            raise ConfigError("likelihood=dirichlet classifies: it needs a classification task with at least two classes; use likelihood=gaussian")
        s_p, s_n, r_p, r_n = _levels(alpha, classes)
        self.shift = (math.log(1 + alpha) - s_p / 2 + (classes - 1) * (math.log(alpha) - s_n / 2)) / classes
        self.heads: list[Posterior] = []
        self.exact = stats.strategy == "exact"
        if self.exact:
            labels = stats.rhs.argmax(1)
        elif stats.class_grams is None or stats.column_sum is None:
            raise ConfigError("likelihood=dirichlet: this backend's statistics have no per-class Gram matrices")
        for c in range(classes):
            if self.exact:
                own = labels == c
                level = lambda a, b: torch.where(own, torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))  # noqa: E731
                d = level(s_p, s_n).rsqrt().to(stats.gram.dtype)   # in float64 first: where() with Python floats rounds to float32
                y = level(r_p, r_n).to(stats.gram.dtype)
                head = ExactPosterior(replace(stats, gram=d[:, None] * stats.gram * d[None, :], rhs=(d * y)[:, None]))
                head.v = d[:, None] * head.v
            else:
                gram = stats.gram / s_n + (1 / s_p - 1 / s_n) * stats.class_grams[c]
                rhs = (r_n / s_n) * stats.column_sum + (r_p / s_p - r_n / s_n) * stats.rhs[:, c]
                head = LowRankPosterior(replace(stats, gram=gram, rhs=rhs[:, None]))
            self.heads.append(head)

    def grid_means(self, features: Tensor, pos: Tensor, nuggets: Tensor) -> Tensor:
        return torch.cat([h.grid_means(features, pos, nuggets) for h in self.heads], dim=2) + self.shift

    def mean(self, features: Tensor, pos: Tensor, eps: Tensor) -> Tensor:
        return torch.cat([h.mean(features, pos, eps) for h in self.heads], dim=1) + self.shift

    def variance(self, features: Tensor, pos: Tensor, eps: Tensor, prior) -> Tensor:
        """The latent variance of each class (``n x C``): the kernel's amplitude is ``1 / eps``."""
        return torch.stack([h.variance(features, pos, eps, prior) for h in self.heads], dim=1) / eps

    def output_scale(self, eps: Tensor) -> float:
        return math.nan
