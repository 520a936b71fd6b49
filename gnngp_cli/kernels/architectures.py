"""GNNGP kernels as compositions of blocks, each written like its network layer.

``L`` is the number of layers; ``g`` the ReLU expectation; ``C0`` the base kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import ConfigError
from .blocks import Add, Bias, Block, Conv, Input, MixedWeight, ReLU, Scale, Serial, Weight
from .filters import HopConv, Poly, filter_coefficients


@dataclass(frozen=True)
class Architecture:
    """A kernel recipe: the blocks, the adjacency normalisation and display names."""

    name: str
    label: str
    network: Block
    adjacency: str = "sym"


def gcn(layers: int, sigma_w: float, sigma_b: float, **_) -> Block:
    """GCN ``X <- A relu(X) W + b`` (no activation before the first layer):
    ``K <- s_w^2 A C0 A^T + s_b^2``, then ``L-1`` times ``K <- s_w^2 A g(K) A^T + s_b^2``."""
    first = Serial(Input(), Weight(sigma_w), Conv(), Bias(sigma_b), name="layer 1")
    hidden = [Serial(ReLU(), Weight(sigma_w), Conv(), Bias(sigma_b), name=f"layer {l}") for l in range(2, layers + 1)]
    return Serial(first, *hidden)


def gcn2(layers: int, sigma_w: float, alpha: float = 0.1, theta: float = 0.5, **_) -> Block:
    """GCNII without bias, ``X <- ((1-alpha) A relu(X) + alpha X0)((1-beta_l) I + beta_l W)``,
    ``beta_l = log(theta / l + 1)``: ``K <- s_w^2 A g(C0) A^T``, then for ``l = 1..L-1``
    ``K <- ((1-beta_l)^2 + beta_l^2 s_w^2) ((1-alpha)^2 A g(K) A^T + alpha^2 C0)``."""
    first = Serial(Input(), ReLU(), Conv(), Weight(sigma_w), name="layer 1")
    hidden = []
    for l in range(1, layers):
        beta = math.log(theta / l + 1)
        residual = Add(Serial(ReLU(), Conv(), Scale(1 - alpha)), Serial(Input(), Scale(alpha)))
        hidden.append(Serial(residual, MixedWeight(1 - beta, beta, sigma_w), name=f"layer {l + 1}"))
    return Serial(first, *hidden)


def gin(layers: int, sigma_w: float, sigma_b: float, **_) -> Block:
    """GIN (eps = 0): aggregation then an MLP: ``K <- s_w^2 A C0 A^T + s_b^2``, then ``L-1``
    times ``K <- s_w^2 g(K) + s_b^2``."""
    first = Serial(Input(), Conv(), Weight(sigma_w), Bias(sigma_b), name="layer 1")
    hidden = [Serial(ReLU(), Weight(sigma_w), Bias(sigma_b), name=f"layer {l}") for l in range(2, layers + 1)]
    return Serial(first, *hidden)


def sage(layers: int, sigma_w1: float, sigma_w2: float, **_) -> Block:
    """GraphSAGE, mean aggregation, ``X <- relu(X) W1 + A relu(X) W2``:
    ``K <- s_w1^2 C0 + s_w2^2 A C0 A^T``, then ``L-1`` times ``K <- s_w1^2 g(K) + s_w2^2 A g(K) A^T``."""
    def mix() -> Block:
        return Add(Weight(sigma_w1), Serial(Conv(), Weight(sigma_w2)))

    first = Serial(Input(), mix(), name="layer 1")
    hidden = [Serial(ReLU(), mix(), name=f"layer {l}") for l in range(2, layers + 1)]
    return Serial(first, *hidden)


# GPRGP's default filter grid, chosen on validation (kernel.coefficients overrides it): no
# propagation, low-pass A and I + A, high-pass I - A, and the degree-2 low- and high-pass mixes.
GPR_FILTER_GRID = ((1.0,), (0.0, 1.0), (1.0, 1.0), (1.0, -1.0), (1.0, 1.0, 1.0), (1.0, -1.0, 1.0))


def gprgp(layers: int, sigma_w: float, sigma_b: float, coefficients: Any = None, **_) -> Block:
    """GPR-GNN: an MLP ``H = relu(X W1 + b1) W2 + b2`` (``L`` layers), then the filter
    ``Z = sum_k g_k A^k H``: ``K <- s_w^2 C0 + s_b^2``, ``L-1`` times ``K <- s_w^2 g(K) + s_b^2``,
    then one polynomial block ``K <- P K P^T``, ``P = sum_k g_k A^k`` (signed ``g`` allowed)."""
    first = Serial(Input(), Weight(sigma_w), Bias(sigma_b), name="layer 1")
    hidden = [Serial(ReLU(), Weight(sigma_w), Bias(sigma_b), name=f"layer {l}") for l in range(2, layers + 1)]
    coefficients = GPR_FILTER_GRID[0] if coefficients is None else filter_coefficients(coefficients, "kernel.coefficients")
    return Serial(first, *hidden, Serial(Poly(coefficients), name="propagation"))


def h2gcn(layers: int, sigma_w: float, sigma_b: float, **_) -> Block:
    """H2GCN with ``L`` rounds: ego embedding ``r0 = relu(X W + b)``, rounds
    ``r_k = [A1 r_(k-1), A2 r_(k-1)]``, a linear readout of ``[r0, r1, ..., r_L]``. ``A1``, ``A2``:
    the normalised 1-hop and exact 2-hop operators (:mod:`gnngp_cli.data.hops`). The
    concatenation holds one block per path of hops (``r2 = [A1 A1 r0, A2 A1 r0, A1 A2 r0,
    A2 A2 r0]``), each read out by its own weights: an independent addition over the paths,
    ``K0 = g(s_w^2 C0 + s_b^2)``, ``K = s_w^2 (K0 + H(K0) + H(H(K0)) + ... + H^L(K0))`` with
    ``H(K) = A1 K A1^T + A2 K A2^T``."""
    ego = Serial(Input(), Weight(sigma_w), Bias(sigma_b), ReLU(), name="ego")
    paths: list[tuple[int, ...]] = [()]
    frontier: list[tuple[int, ...]] = [()]
    for _ in range(layers):
        frontier = [path + (hop,) for path in frontier for hop in (1, 2)]
        paths += frontier
    readout = Add(*[Serial(*[HopConv(hop) for hop in path], Weight(sigma_w)) for path in paths])
    return Serial(ego, Serial(readout, name="readout"))


def ggp(**_) -> Block:
    """GGP baseline: ``K = A C0 A^T`` (polynomial ``C0`` by default)."""
    return Serial(Input(), Conv(), name="layer 1")


def rbf(**_) -> Block:
    """No graph: ``K = C0`` (an RBF ``C0`` by default)."""
    return Serial(Input(), name="input")


def _block_from_spec(spec: Any, params: Mapping[str, float]) -> Block:
    """One block from config: ``input``, ``relu``, ``conv``, ``weight``, ``bias``, or a
    one-key mapping ``{scale: c}``, ``{weight: s_w}``, ``{bias: s_b}``, ``{mixed: [a, b]}``,
    ``{add: [[blocks...], [blocks...]]}``, ``{poly: [g0, g1, ...]}`` (the filter ``sum_k g_k A^k``)."""
    if isinstance(spec, str):
        simple = {
            "input": Input, "relu": ReLU, "conv": Conv,
            "weight": lambda: Weight(params["sigma_w"]), "bias": lambda: Bias(params["sigma_b"]),
        }
        if spec not in simple:
            raise ConfigError(f"unknown kernel block '{spec}'; use input, relu, conv, weight, bias, or {{scale|weight|bias|mixed|add|poly: ...}}")
        return simple[spec]()
    if isinstance(spec, Mapping) and len(spec) == 1:
        (key, value), = spec.items()
        try:
            if key == "scale":
                return Scale(float(value))
            if key == "weight":
                return Weight(float(value))
            if key == "bias":
                return Bias(float(value))
            if key == "mixed":
                a, b = value
                return MixedWeight(float(a), float(b), params["sigma_w"])
            if key == "poly":
                return Poly(filter_coefficients(value))
            if key == "add":
                return Add(*[Serial(*[_block_from_spec(s, params) for s in branch]) for branch in value])
        except (TypeError, ValueError) as err:
            raise ConfigError(f"kernel block {{{key}: {value}}} is malformed ({err})") from err
    raise ConfigError(f"kernel block {spec!r} is malformed; use a block name or a one-key mapping such as {{scale: 0.5}}")


def composed(layers: int, first: Any, hidden: Any, **params) -> Block:
    """An architecture written in config: ``first`` (list of blocks) once, then ``hidden``
    (list of blocks) ``L-1`` times."""
    if not first:
        raise ConfigError("kernel=composed needs kernel.first, a list of blocks starting with input")
    stack = [Serial(*[_block_from_spec(s, params) for s in first], name="layer 1")]
    for l in range(2, layers + 1):
        if not hidden:
            raise ConfigError("kernel=composed with kernel.layers > 1 needs kernel.hidden, a list of blocks")
        stack.append(Serial(*[_block_from_spec(s, params) for s in hidden], name=f"layer {l}"))
    return Serial(*stack)


def kernel_label(name: str, low_rank: bool) -> str:
    """The method label of a kernel config, e.g. ``GCNGP`` or ``GCNGP-X`` (the low-rank twin)."""
    label = ARCHITECTURES[name][0] if name in ARCHITECTURES else name
    return label + ("-X" if low_rank else "")


ARCHITECTURES: dict[str, tuple[str, Callable[..., Block], str]] = {
    # name: (label, builder, adjacency normalisation)
    "gcngp": ("GCNGP", gcn, "sym"),
    "gcn2gp": ("GCNIIGP", gcn2, "sym"),
    "gingp": ("GINGP", gin, "sym"),
    "sagegp": ("GraphSAGEGP", sage, "row"),
    "gprgp": ("GPRGP", gprgp, "sym"),
    "h2gcngp": ("H2GCNGP", h2gcn, "sym"),
    "ggp": ("GGP", ggp, "row"),
    "rbf": ("RBF", rbf, "sym"),
    "composed": ("ComposedGP", composed, "sym"),
}
