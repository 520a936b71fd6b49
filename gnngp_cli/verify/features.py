"""Input feature maps for the wide-network check: ``Phi`` with ``Phi Phi^T = C0`` (exactly or
in expectation), computed from the features by their own route, never by the package's
:class:`~gnngp_cli.kernels.BaseKernel`.

- linear ``C0 = x . x'``: ``Phi = X`` (exact);
- polynomial ``(x . x' + c)^d``, integer ``d``: the explicit degree-``d`` monomials of
  ``z = [x, sqrt(c)]`` with multinomial weights, ``Phi(x) . Phi(x') = (z . z')^d`` (exact);
- rbf ``exp(-gamma ||x - x'||^2)``: random Fourier features ``sqrt(2/D) cos(x Omega + u)``,
  ``Omega ~ N(0, 2 gamma)``, ``u ~ U[0, 2 pi)`` (Rahimi and Recht, 2007);
- laplacian ``exp(-gamma ||x - x'||_1)``: the same with ``Omega ~ Cauchy(0, gamma)``;
- arccos ``1 - theta / pi``: ``sqrt(2/D) H(x Omega)``, ``Omega ~ N(0, 1)``, ``H`` the step
  (``H(0) = 1/2``, so a zero vector has ``C0 = 1/2`` against everything, as the kernel's
  cosine 0 gives).

Random maps take ``D`` (the network's width) features, so their Monte-Carlo error shrinks with
the width like the network's own. Gaussian weights are rotation invariant, so the network reads
``Phi`` through :func:`span_coordinates` (``n`` columns at most) without changing its output
distribution.
"""
from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from ..errors import ConfigError

FEATURE_MAPS = ("linear", "polynomial", "rbf", "laplacian", "arccos")


def check_base(name: str, d: float) -> None:
    """Refuse base kernels without a feature map, before any work."""
    if name not in FEATURE_MAPS:
        raise ConfigError(f"gnngp verify has no network input for the {name} base kernel (not a covariance of random features); "
                          f"use kernel.base.name={' or '.join(FEATURE_MAPS)}")
    if name == "polynomial" and (d != int(d) or d < 1):
        raise ConfigError(f"gnngp verify builds the polynomial base kernel from explicit features, which need an integer degree >= 1; "
                          f"kernel.base.d={d:g} is not")


def is_random(name: str) -> bool:
    return name in ("rbf", "laplacian", "arccos")


def explicit_polynomial(x: Tensor, c: float, degree: int) -> Tensor:
    """Monomials of ``z = [x, sqrt(c)]`` of total degree ``degree``, each times the square root
    of its multinomial coefficient, so that ``Phi(x) . Phi(x') = (x . x' + c)^degree``."""
    z = torch.cat([x, torch.full((x.size(0), 1), math.sqrt(c), dtype=x.dtype)], 1) if c else x
    columns = []
    for combo in itertools.combinations_with_replacement(range(z.size(1)), degree):
        counts = torch.bincount(torch.tensor(combo), minlength=z.size(1))
        coefficient = math.factorial(degree) / math.prod(math.factorial(int(k)) for k in counts)
        columns.append(math.sqrt(coefficient) * torch.prod(z[:, list(combo)], dim=1))
    return torch.stack(columns, 1)


def feature_map(x: Tensor, name: str, gamma: float, c: float, d: float, num_features: int, generator: torch.Generator) -> Tensor:
    """``Phi`` (``n x D``) for the base kernel ``name``; random maps draw ``num_features``
    features from ``generator``."""
    check_base(name, d)
    if name == "linear":
        return x
    if name == "polynomial":
        # reduce x to coordinates in its row span first (exact: only x . x' enters)
        return explicit_polynomial(span_coordinates(x), c, int(d))
    dim = x.size(1)
    if name == "rbf":
        omega = torch.randn(dim, num_features, generator=generator, dtype=x.dtype) * math.sqrt(2 * gamma)
    elif name == "laplacian":
        uniform = torch.rand(dim, num_features, generator=generator, dtype=x.dtype)
        omega = gamma * torch.tan(math.pi * (uniform - 0.5))
    else:  # arccos
        omega = torch.randn(dim, num_features, generator=generator, dtype=x.dtype)
        return math.sqrt(2 / num_features) * torch.heaviside(x @ omega, torch.tensor(0.5, dtype=x.dtype))
    phase = torch.rand(num_features, generator=generator, dtype=x.dtype) * (2 * math.pi)
    return math.sqrt(2 / num_features) * torch.cos(x @ omega + phase)


def span_coordinates(phi: Tensor) -> Tensor:
    """``Phi`` in an orthonormal basis of its row span: ``R`` (``n x r``, ``r <= n``) with
    ``R R^T = Phi Phi^T`` to round-off (``Phi`` itself when it has at most ``n`` columns)."""
    if phi.size(1) <= phi.size(0):
        return phi
    u, s, _ = torch.linalg.svd(phi, full_matrices=False)
    return u * s
