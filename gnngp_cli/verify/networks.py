"""Random finite-width networks whose infinite-width output covariance is a GNNGP kernel.

The built-in architectures are stacks of the PyTorch Geometric layers that the GNN baselines
use (``GCNConv``, ``GCN2Conv``, ``GINConv``, ``SAGEConv``; ``SimpleConv`` for GGP's plain
aggregation), wired as each kernel's docstring in :mod:`gnngp_cli.kernels.architectures`
states; ``kernel=composed`` is interpreted block by block in plain torch. Nothing here reads
the kernel's blocks. Every weight matrix is drawn ``N(0, s^2 / fan_in)`` and every bias
``N(0, s_b^2)``, fresh for each sample (:meth:`WideNetwork.redraw`).

The input ``X`` is ``sqrt(D) Phi`` for a feature map with ``Phi Phi^T = C0`` (see
:mod:`.features`), so a first weight ``N(0, s_w^2 / D)`` gives pre-activations of covariance
``s_w^2 C0``. With ``kernel.base.scale = 1/d`` and a linear ``C0`` this is the standard
initialisation on the raw features.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import torch
from torch import Tensor, nn
from torch_geometric.nn import GCN2Conv, GCNConv, GINConv, SAGEConv, SimpleConv

from ..errors import ConfigError
from .graph import CheckGraph


def _draw(param: Optional[Tensor], std: float, generator: torch.Generator) -> None:
    if param is not None:
        with torch.no_grad():
            param.copy_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * std)


def _draw_linear(lin: nn.Module, sigma: float, generator: torch.Generator, sigma_b: float = 0.0) -> None:
    """``W ~ N(0, sigma^2 / fan_in)`` (PyTorch stores ``W^T``: out x in), ``b ~ N(0, sigma_b^2)``."""
    _draw(lin.weight, sigma / math.sqrt(lin.weight.size(1)), generator)
    _draw(getattr(lin, "bias", None), sigma_b, generator)


class WideNetwork(nn.Module):
    """A network of width ``width`` on inputs of ``in_dim`` features; ``forward`` returns the
    ``n x width`` output units. ``adjacency``: the only normalisation its layers can express
    (``None``: any)."""

    adjacency: Optional[str] = None

    def redraw(self, generator: torch.Generator) -> None:
        raise NotImplementedError

    def forward(self, x: Tensor, graph: CheckGraph) -> Tensor:
        raise NotImplementedError


class GCNNetwork(WideNetwork):
    """GCN: ``X_1 = A X W_1 + b_1``, ``X_l = A relu(X_{l-1}) W_l + b_l`` (``GCNConv``)."""

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, **_):
        super().__init__()
        dims = [in_dim] + [width] * layers
        self.convs = nn.ModuleList(GCNConv(dims[l], dims[l + 1], normalize=False) for l in range(layers))
        self.sigma_w, self.sigma_b = sigma_w, sigma_b

    def redraw(self, generator):
        for conv in self.convs:
            _draw_linear(conv.lin, self.sigma_w, generator)
            _draw(conv.bias, self.sigma_b, generator)

    def forward(self, x, graph):
        h = x
        for l, conv in enumerate(self.convs):
            h = conv(torch.relu(h) if l else h, graph.adj_t)
        return h


class GCN2Network(WideNetwork):
    """GCNII: ``X_0 = X W_in`` (covariance ``C0``), ``X_1 = A relu(X_0) W`` (``GCNConv``), then
    ``X_{l+1} = ((1-alpha) A relu(X_l) + alpha X_0)((1-beta_l) I + beta_l W_l)`` (``GCN2Conv``,
    layer ``l``, ``beta_l = log(theta / l + 1)``)."""

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, alpha: float, theta: float, **_):
        super().__init__()
        self.pre = nn.Linear(in_dim, width, bias=False)
        self.first = GCNConv(width, width, normalize=False, bias=False)
        self.convs = nn.ModuleList(GCN2Conv(width, alpha, theta, layer=l, normalize=False) for l in range(1, layers))
        self.sigma_w = sigma_w

    def redraw(self, generator):
        _draw_linear(self.pre, 1.0, generator)
        _draw_linear(self.first.lin, self.sigma_w, generator)
        for conv in self.convs:  # weight1 is used as X @ W: in x out
            _draw(conv.weight1, self.sigma_w / math.sqrt(conv.weight1.size(0)), generator)

    def forward(self, x, graph):
        x0 = self.pre(x)
        h = self.first(torch.relu(x0), graph.adj_t)
        for conv in self.convs:
            h = conv(torch.relu(h), x0, graph.adj_t)
        return h


class GINNetwork(WideNetwork):
    """GIN (one aggregation, then an L-layer MLP): ``GINConv(MLP, eps=-1)`` on the weighted
    adjacency, so the aggregation is ``A X`` and no extra self term is added:
    ``X_1 = (A X) W_1 + b_1``, ``X_l = relu(X_{l-1}) W_l + b_l``."""

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, **_):
        super().__init__()
        dims = [in_dim] + [width] * layers
        mlp: list[nn.Module] = []
        for l in range(layers):
            if l:
                mlp.append(nn.ReLU())
            mlp.append(nn.Linear(dims[l], dims[l + 1]))
        self.conv = GINConv(nn.Sequential(*mlp), eps=-1.0)
        self.sigma_w, self.sigma_b = sigma_w, sigma_b

    def redraw(self, generator):
        for lin in self.conv.nn:
            if isinstance(lin, nn.Linear):
                _draw_linear(lin, self.sigma_w, generator, self.sigma_b)

    def forward(self, x, graph):
        return self.conv(x, graph.adj_t)


class SAGENetwork(WideNetwork):
    """GraphSAGE (mean aggregation over the neighbours and the node itself, no bias):
    ``X_1 = X W1 + A X W2``, ``X_l = relu(X_{l-1}) W1 + A relu(X_{l-1}) W2`` (``SAGEConv``;
    ``lin_r`` is ``W1``, ``lin_l`` is ``W2``)."""

    adjacency = "row"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w1: float, sigma_w2: float, **_):
        super().__init__()
        dims = [in_dim] + [width] * layers
        self.convs = nn.ModuleList(SAGEConv(dims[l], dims[l + 1], aggr="mean", bias=False) for l in range(layers))
        self.sigma_w1, self.sigma_w2 = sigma_w1, sigma_w2

    def redraw(self, generator):
        for conv in self.convs:
            _draw_linear(conv.lin_r, self.sigma_w1, generator)
            _draw_linear(conv.lin_l, self.sigma_w2, generator)

    def forward(self, x, graph):
        h = x
        for l, conv in enumerate(self.convs):  # the mean over the edges with self-loops includes the node
            h = conv(torch.relu(h) if l else h, graph.loops_t)
        return h


class GGPNetwork(WideNetwork):
    """GGP: a random linear readout of the features, then one aggregation: ``A X W``
    (``SimpleConv`` with the normalised edge weights)."""

    def __init__(self, in_dim: int, width: int, **_):
        super().__init__()
        self.readout = nn.Linear(in_dim, width, bias=False)
        self.conv = SimpleConv(aggr="sum")

    def redraw(self, generator):
        _draw_linear(self.readout, 1.0, generator)

    def forward(self, x, graph):
        return self.conv(self.readout(x), graph.adj_t)


class FeatureNetwork(WideNetwork):
    """No graph (the RBF baseline): a random linear readout ``X W`` of the features."""

    def __init__(self, in_dim: int, width: int, **_):
        super().__init__()
        self.readout = nn.Linear(in_dim, width, bias=False)

    def redraw(self, generator):
        _draw_linear(self.readout, 1.0, generator)

    def forward(self, x, graph):
        return self.readout(x)


class ComposedNetwork(WideNetwork):
    """A ``kernel=composed`` architecture as a plain torch network, block by block:

    ``input``: ``X_0 = X W_0`` (width ``width``, covariance ``C0``, one draw shared by every
    ``input``); ``relu``; ``conv``: ``A H`` (dense ``A``); ``weight`` / ``{weight: s}``:
    ``H W``, ``W ~ N(0, s^2 / fan_in)``; ``bias`` / ``{bias: s}``: ``H + b``;
    ``{scale: c}``: ``c H``; ``{mixed: [a, b]}``: ``H (a I + b W)``, ``W ~ N(0, s_w^2 / fan_in)``;
    ``{add: [[...], [...]]}``: the branches' outputs summed (independent draws per branch).
    Layer 1 is ``first``, layers ``2..L`` are ``hidden``.
    """

    def __init__(self, in_dim: int, width: int, layers: int, first: Any, hidden: Any, sigma_w: float, sigma_b: float, **_):
        super().__init__()
        self.in_dim, self.width = in_dim, width
        self.program = [first] + [hidden] * (layers - 1)
        self.sigma_w, self.sigma_b = sigma_w, sigma_b
        self.generator: Optional[torch.Generator] = None

    def redraw(self, generator):
        self.generator = generator  # weights are drawn as the blocks run: each block once per sample

    def _gaussian(self, rows: int, cols: int, std: float, like: Tensor) -> Tensor:
        return torch.randn(rows, cols, generator=self.generator, dtype=like.dtype) * std

    def _run(self, blocks: Any, h: Optional[Tensor], state: dict) -> Tensor:
        for spec in blocks:
            h = self._block(spec, h, state)
        return h

    def _block(self, spec: Any, h: Optional[Tensor], state: dict) -> Tensor:
        if isinstance(spec, Mapping):
            (key, value), = spec.items()
            if key == "add":
                return sum(self._run(branch, h, state) for branch in value)
            if key == "scale":
                return float(value) * h
            if key == "weight":
                return h @ self._gaussian(h.size(1), self.width, float(value) / math.sqrt(h.size(1)), h)
            if key == "bias":
                return h + self._gaussian(1, h.size(1), float(value), h)
            if key == "mixed":
                a, b = (float(v) for v in value)
                return a * h + b * (h @ self._gaussian(h.size(1), h.size(1), self.sigma_w / math.sqrt(h.size(1)), h))
        elif spec == "input":
            if "x0" not in state:
                x = state["x"]
                state["x0"] = x @ self._gaussian(x.size(1), self.width, 1 / math.sqrt(x.size(1)), x)
            return state["x0"]
        elif spec == "relu":
            return torch.relu(h)
        elif spec == "conv":
            return state["a"] @ h
        elif spec in ("weight", "bias"):
            return self._block({spec: self.sigma_w if spec == "weight" else self.sigma_b}, h, state)
        raise ConfigError(f"kernel block {spec!r} has no network in gnngp verify; use input, relu, conv, weight, bias, scale, mixed or add")

    def forward(self, x, graph):
        if self.generator is None:
            raise RuntimeError("call redraw(generator) before running a composed network")
        state = {"x": x, "a": graph.dense()}
        h = None
        for blocks in self.program:
            h = self._run(blocks, h, state)
        return h


NETWORKS: dict[str, type[WideNetwork]] = {
    "gcngp": GCNNetwork,
    "gcn2gp": GCN2Network,
    "gingp": GINNetwork,
    "sagegp": SAGENetwork,
    "ggp": GGPNetwork,
    "rbf": FeatureNetwork,
    "composed": ComposedNetwork,
}


def check_network(name: str, adjacency: str) -> None:
    """Refuse, before any work, a kernel without a network or with a normalisation its layers
    cannot express."""
    if name not in NETWORKS:
        raise ConfigError(f"gnngp verify has no network for kernel={name}; use one of {', '.join(NETWORKS)}")
    needed = NETWORKS[name].adjacency
    if needed is not None and adjacency != needed:
        raise ConfigError(f"the {name} network's aggregation (mean over the neighbours and the node) is the {needed}-normalised "
                          f"adjacency; use kernel.adjacency={needed} with gnngp verify")


def wide_network(name: str, in_dim: int, width: int, params: Mapping[str, Any], dtype: torch.dtype) -> WideNetwork:
    """The network of kernel ``name`` (``params``: the kernel config's layers and sigmas)."""
    if name not in NETWORKS:
        raise ConfigError(f"gnngp verify has no network for kernel={name}; use one of {', '.join(NETWORKS)}")
    return NETWORKS[name](in_dim=in_dim, width=width, **params).to(dtype)
