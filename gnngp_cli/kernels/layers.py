"""The finite layers of the blocks: each block's network operation at a finite width, so that an
architecture's composition yields its wide random network as well as its kernel (in the manner of
neural-tangents' ``stax``, where a layer is its init, apply and kernel together).

A block says which layer it is (:meth:`gnngp_cli.kernels.blocks.Block.layer`); this module holds
the layers, and :class:`BlockNetwork` is the network of a whole composition, which
``gnngp verify`` samples against the kernel of the same composition. The layers compute with
plain torch on the check graph's operators (:class:`gnngp_cli.verify.subgraph.CheckGraph`, built
with PyTorch Geometric's normalisation, apart from the package's): nothing here reads a block's
kernel map, so an error in one is caught by the other.

Every weight matrix is drawn ``N(0, s^2 / fan_in)`` and every bias ``N(0, s_b^2)``, fresh for each
sample (:meth:`BlockNetwork.redraw`); a trained parameter keeps its standard deviation as
``ntk_std`` (the NTK parameterisation, read by :func:`gnngp_cli.verify.wide_check.empirical_ntk`).

The input ``X`` (``D`` features: ``sqrt(D) Phi`` with ``Phi Phi^T = C0``) flows *raw* through the
linear operations that precede the first weight (a convolution, a filter, a scaling): a weight
then reads the ``D`` features (``N(0, s_w^2 / D)``: the pre-activation covariance ``s_w^2 C0``),
and any other operation first maps them to ``width`` units by one feature map ``X W0``,
``W0 ~ N(0, 1 / D)``, shared by the whole network (GCNII's initial residual reads the same
``X0``), which is no trained parameter.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
from torch import Tensor, nn


def draw(param: Optional[Tensor], std: float, generator: torch.Generator, trained: bool = True) -> None:
    """``param ~ N(0, std^2)``; a trained parameter keeps ``std`` as ``param.ntk_std``: in the NTK
    parameterisation ``param = std w`` with ``w ~ N(0, 1)`` trained, so its gradient in ``w`` is its
    gradient times ``std``."""
    if param is not None:
        with torch.no_grad():
            param.copy_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * std)
        param.ntk_std = std if trained else None
        param.draw_std = std   # what it was drawn with (gnngp verify's control variates)


def owned(layer: "Layer", block: Any) -> "Layer":
    """``layer`` marked as made by ``block``: its parameters are that block's (a tangent kernel's
    part, :func:`~gnngp_cli.kernels.blocks.trained_blocks`)."""
    layer.block = block
    return layer


@dataclass(frozen=True)
class Shape:
    """What flows into a layer: the input's feature count ``in_dim``, the network's ``width``, and
    whether the features are still the raw input (``in_dim`` columns) or ``width`` units."""

    in_dim: int
    width: int
    raw: bool = False

    @property
    def columns(self) -> int:
        return self.in_dim if self.raw else self.width

    def units(self) -> "Shape":
        return Shape(self.in_dim, self.width, False)


@dataclass
class Flow:
    """The features between two layers (``raw``: still the input's ``D`` columns)."""

    h: Tensor
    raw: bool


class Layer(nn.Module):
    """A block's finite layer: ``forward(flow, state) -> flow``; ``out`` is the shape it gives."""

    out: Shape

    def draw(self, generator: torch.Generator) -> None:
        """Draw this layer's own random weights (its sub-layers are drawn by the network)."""


def units(flow: Flow, state: dict) -> Tensor:
    """The features as ``width`` units: raw input through the network's feature map ``X W0``."""
    return flow.h @ state["feature_map"] if flow.raw else flow.h


class InputLayer(Layer):
    """``X <- X0``: the raw input features."""

    def __init__(self, shape: Shape):
        super().__init__()
        self.out = Shape(shape.in_dim, shape.width, True)

    def forward(self, flow: Optional[Flow], state: dict) -> Flow:
        return Flow(state["x"], True)


class ScaleLayer(Layer):
    """``X <- c X`` (raw input stays raw: a linear map)."""

    def __init__(self, factor: Any, shape: Shape):
        super().__init__()
        self.factor, self.out = float(factor), shape

    def forward(self, flow, state):
        return Flow(self.factor * flow.h, flow.raw)


class WeightLayer(Layer):
    """``X <- X W``, ``W ~ N(0, s^2 / fan_in)`` (on raw input, ``fan_in = D``)."""

    def __init__(self, sigma: Any, shape: Shape):
        super().__init__()
        self.sigma = float(sigma)
        self.linear = nn.Linear(shape.columns, shape.width, bias=False)
        self.out = shape.units()

    def draw(self, generator):
        draw(self.linear.weight, self.sigma / math.sqrt(self.linear.weight.size(1)), generator)

    def forward(self, flow, state):
        return Flow(self.linear(flow.h), False)


class MixedWeightLayer(Layer):
    """``X <- X (a I + b W)``, ``W ~ N(0, s_w^2 / width)``."""

    def __init__(self, a: Any, b: Any, sigma: Any, shape: Shape):
        super().__init__()
        self.a, self.b, self.sigma = float(a), float(b), float(sigma)
        self.linear = nn.Linear(shape.width, shape.width, bias=False)
        self.out = shape.units()

    def draw(self, generator):
        draw(self.linear.weight, self.sigma / math.sqrt(self.linear.weight.size(1)), generator)

    def forward(self, flow, state):
        h = units(flow, state)
        return Flow(self.a * h + self.b * self.linear(h), False)


class BiasLayer(Layer):
    """``X <- X + b``, ``b ~ N(0, s_b^2)``."""

    def __init__(self, sigma: Any, shape: Shape):
        super().__init__()
        self.sigma = float(sigma)
        self.bias = nn.Parameter(torch.empty(shape.width))
        self.out = shape.units()

    def draw(self, generator):
        draw(self.bias, self.sigma, generator, trained=self.sigma != 0)

    def forward(self, flow, state):
        return Flow(units(flow, state) + self.bias, False)


class OperatorLayer(Layer):
    """``X <- P X`` for a linear graph operator ``P`` of the check graph (``operator(graph)``, a
    dense ``n x n`` tensor); raw input stays raw."""

    def __init__(self, operator: Callable[[Any], Tensor], shape: Shape):
        super().__init__()
        self.operator, self.out = operator, shape

    def forward(self, flow, state):
        return Flow(self.operator(state["graph"]).to(flow.h.dtype) @ flow.h, flow.raw)


def polynomial(coefficients: Sequence[float]) -> Callable[[Any], Tensor]:
    """The dense filter ``P = sum_k g_k A^k`` of the check graph (Horner's rule)."""
    def operator(graph: Any) -> Tensor:
        a = graph.dense()
        out = coefficients[-1] * torch.eye(a.size(0), dtype=a.dtype)
        for g in reversed(coefficients[:-1]):
            out = a @ out + g * torch.eye(a.size(0), dtype=a.dtype)
        return out
    return operator


class ActivationLayer(Layer):
    """``X <- phi(X)`` elementwise (ReLU, LeakyReLU)."""

    def __init__(self, function: Callable[[Tensor], Tensor], shape: Shape):
        super().__init__()
        self.function, self.out = function, shape.units()

    def forward(self, flow, state):
        return Flow(self.function(units(flow, state)), False)


class SerialLayer(Layer):
    """The layers of the blocks in order."""

    def __init__(self, blocks: Sequence[Any], shape: Shape):
        super().__init__()
        layers = []
        for block in blocks:
            layers.append(block.layer(shape))
            shape = layers[-1].out
        self.layers, self.out = nn.ModuleList(layers), shape

    def forward(self, flow, state):
        for layer in self.layers:
            flow = layer(flow, state)
        return flow


class SumLayer(Layer):
    """Independent branches on the same input (each its own weights), summed."""

    def __init__(self, branches: Sequence[Any], shape: Shape):
        super().__init__()
        self.branches = nn.ModuleList(block.layer(shape) for block in branches)
        raw = all(branch.out.raw for branch in self.branches)
        self.out = Shape(shape.in_dim, shape.width, raw)

    def combine(self, outputs: list[Tensor]) -> Tensor:
        return sum(outputs[1:], outputs[0])

    def forward(self, flow, state):
        flows = [branch(flow, state) for branch in self.branches]
        if self.out.raw:
            return Flow(self.combine([f.h for f in flows]), True)
        return Flow(self.combine([units(f, state) for f in flows]), False)


class ProductLayer(SumLayer):
    """Independent branches on the same input, multiplied elementwise (an attention score times
    the message it weighs)."""

    def __init__(self, branches: Sequence[Any], shape: Shape):
        super().__init__(branches, shape)
        self.out = shape.units()

    def combine(self, outputs: list[Tensor]) -> Tensor:
        out = outputs[0]
        for other in outputs[1:]:
            out = out * other
        return out


class BlockNetwork(nn.Module):
    """The random network of width ``width`` of a block composition (the blocks' layers), on
    inputs of ``in_dim`` features; ``forward(x, graph)`` gives the ``n x width`` output units. A
    tangent kernel's composition (:class:`~gnngp_cli.kernels.blocks.Tangent`) is the network it
    differentiates."""

    adjacency: Optional[str] = None   # any normalisation: the check graph is built with the kernel's own
    layers_text = "the blocks' own layers"

    def __init__(self, block: Any, in_dim: int, width: int):
        super().__init__()
        self.composition = block   # the blocks it is made of (not a module)
        self.body = block.layer(Shape(in_dim, width, True))
        self.feature_map = nn.Linear(in_dim, width, bias=False)   # X W0: the input as width units (no trained parameter)
        self.trains = any(isinstance(m, (WeightLayer, MixedWeightLayer)) or (isinstance(m, BiasLayer) and m.sigma != 0)
                          for m in self.body.modules())   # what an empirical tangent kernel differentiates

    def redraw(self, generator: torch.Generator) -> None:
        draw(self.feature_map.weight, 1 / math.sqrt(self.feature_map.weight.size(1)), generator, trained=False)
        for module in self.body.modules():
            if isinstance(module, Layer):
                module.draw(generator)

    def forward(self, x: Tensor, graph: Any) -> Tensor:
        state = {"x": x, "graph": graph, "feature_map": self.feature_map.weight.T}
        return units(self.body(None, state), state)
