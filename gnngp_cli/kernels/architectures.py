"""GNNGP kernels as compositions of blocks, each written like its network layer.

``L`` is the number of layers; ``g`` the ReLU expectation; ``C0`` the base kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

from ..errors import ConfigError
from .blocks import Add, Bias, Block, Conv, Input, MixedWeight, ReLU, Scale, Serial, Weight


@dataclass(frozen=True)
class Architecture:
    """A kernel recipe: the blocks, the adjacency normalisation and display names."""

    name: str
    label: str
    network: Block
    adjacency: str = "sym"


Value = Union[float, Any]  # a number, or a 0-dimensional tensor being fitted (see gnngp_cli.fit)


def at_layer(value: Union[Value, Sequence[Value]], layer: int) -> Value:
    """A parameter of layer ``layer`` (1-based): ``value`` itself, or its entry when a list
    gives one value per layer (``fit.per_layer=true``)."""
    return value[layer - 1] if isinstance(value, (list, tuple)) else value


def gcn(layers: int, sigma_w: float, sigma_b: float, **_) -> Block:
    """GCN ``X <- A relu(X) W + b`` (no activation before the first layer):
    ``K <- s_w^2 A C0 A^T + s_b^2``, then ``L-1`` times ``K <- s_w^2 A g(K) A^T + s_b^2``."""
    first = Serial(Input(), Weight(at_layer(sigma_w, 1)), Conv(), Bias(at_layer(sigma_b, 1)), name="layer 1")
    hidden = [Serial(ReLU(), Weight(at_layer(sigma_w, l)), Conv(), Bias(at_layer(sigma_b, l)), name=f"layer {l}")
              for l in range(2, layers + 1)]
    return Serial(first, *hidden)


def gcn2(layers: int, sigma_w: float, alpha: float = 0.1, theta: float = 0.5, **_) -> Block:
    """GCNII without bias, ``X <- ((1-alpha) A relu(X) + alpha X0)((1-beta_l) I + beta_l W)``,
    ``beta_l = log(theta / l + 1)``: ``K <- s_w^2 A g(C0) A^T``, then for ``l = 1..L-1``
    ``K <- ((1-beta_l)^2 + beta_l^2 s_w^2) ((1-alpha)^2 A g(K) A^T + alpha^2 C0)``."""
    first = Serial(Input(), ReLU(), Conv(), Weight(at_layer(sigma_w, 1)), name="layer 1")
    hidden = []
    for l in range(1, layers):
        beta = math.log(theta / l + 1)
        residual = Add(Serial(ReLU(), Conv(), Scale(1 - alpha)), Serial(Input(), Scale(alpha)))
        hidden.append(Serial(residual, MixedWeight(1 - beta, beta, at_layer(sigma_w, l + 1)), name=f"layer {l + 1}"))
    return Serial(first, *hidden)


def gin(layers: int, sigma_w: float, sigma_b: float, **_) -> Block:
    """GIN (eps = 0): aggregation then an MLP: ``K <- s_w^2 A C0 A^T + s_b^2``, then ``L-1``
    times ``K <- s_w^2 g(K) + s_b^2``."""
    first = Serial(Input(), Conv(), Weight(at_layer(sigma_w, 1)), Bias(at_layer(sigma_b, 1)), name="layer 1")
    hidden = [Serial(ReLU(), Weight(at_layer(sigma_w, l)), Bias(at_layer(sigma_b, l)), name=f"layer {l}")
              for l in range(2, layers + 1)]
    return Serial(first, *hidden)


def sage(layers: int, sigma_w1: float, sigma_w2: float, **_) -> Block:
    """GraphSAGE, mean aggregation, ``X <- relu(X) W1 + A relu(X) W2``:
    ``K <- s_w1^2 C0 + s_w2^2 A C0 A^T``, then ``L-1`` times ``K <- s_w1^2 g(K) + s_w2^2 A g(K) A^T``."""
    def mix(l: int) -> Block:
        return Add(Weight(at_layer(sigma_w1, l)), Serial(Conv(), Weight(at_layer(sigma_w2, l))))

    first = Serial(Input(), mix(1), name="layer 1")
    hidden = [Serial(ReLU(), mix(l), name=f"layer {l}") for l in range(2, layers + 1)]
    return Serial(first, *hidden)


def ggp(**_) -> Block:
    """GGP baseline: ``K = A C0 A^T`` (polynomial ``C0`` by default)."""
    return Serial(Input(), Conv(), name="layer 1")


def rbf(**_) -> Block:
    """No graph: ``K = C0`` (an RBF ``C0`` by default)."""
    return Serial(Input(), name="input")


def _block_from_spec(spec: Any, params: Mapping[str, float]) -> Block:
    """One block from config: ``input``, ``relu``, ``conv``, ``weight``, ``bias``, or a
    one-key mapping ``{scale: c}``, ``{weight: s_w}``, ``{bias: s_b}``, ``{mixed: [a, b]}``,
    ``{add: [[blocks...], [blocks...]]}``."""
    if isinstance(spec, str):
        simple = {
            "input": Input, "relu": ReLU, "conv": Conv,
            "weight": lambda: Weight(params["sigma_w"]), "bias": lambda: Bias(params["sigma_b"]),
        }
        if spec not in simple:
            raise ConfigError(f"unknown kernel block '{spec}'; use input, relu, conv, weight, bias, or {{scale|weight|bias|mixed|add: ...}}")
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
    def layer_params(l: int) -> dict:
        return {key: at_layer(value, l) for key, value in params.items()}

    stack = [Serial(*[_block_from_spec(s, layer_params(1)) for s in first], name="layer 1")]
    for l in range(2, layers + 1):
        if not hidden:
            raise ConfigError("kernel=composed with kernel.layers > 1 needs kernel.hidden, a list of blocks")
        stack.append(Serial(*[_block_from_spec(s, layer_params(l)) for s in hidden], name=f"layer {l}"))
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
    "ggp": ("GGP", ggp, "row"),
    "rbf": ("RBF", rbf, "sym"),
    "composed": ("ComposedGP", composed, "sym"),
}
