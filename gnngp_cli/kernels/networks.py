"""Random finite-width networks whose infinite-width output covariance is a GNNGP kernel: each
kernel's registry entry carries its network (``network=``), which ``gnngp verify`` samples.

The built-in architectures are stacks of the PyTorch Geometric layers that the GNN baselines
use (``GCNConv``, ``GCN2Conv``, ``GINConv``, ``SAGEConv``; ``SimpleConv`` for GGP's plain
aggregation and the GPR-GNN filter), wired as each kernel's docstring in
:mod:`gnngp_cli.kernels.architectures` states; H2GCN's rounds and ``kernel=composed`` are
written in plain torch on the dense operators of the check's graph. Nothing here reads the
kernel's blocks. Every weight matrix is drawn ``N(0, s^2 / fan_in)`` and every bias
``N(0, s_b^2)``, fresh for each sample (:meth:`WideNetwork.redraw`). PyTorch Geometric is
imported when a network is built, not with the kernels.

A network reads its graph (the check's subgraph, :class:`gnngp_cli.verify.subgraph.CheckGraph`)
through ``adj_t``, ``loops_t``, ``dense()`` and ``hop_operators()``.

The input ``X`` is ``sqrt(D) Phi`` for a feature map with ``Phi Phi^T = C0`` (see
:mod:`gnngp_cli.verify.features`), so a first weight ``N(0, s_w^2 / D)`` gives pre-activations of covariance
``s_w^2 C0``. With ``kernel.base.scale = 1/d`` and a linear ``C0`` this is the standard
initialisation on the raw features.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import torch
from torch import Tensor, nn

from ..errors import ConfigError


def _draw(param: Optional[Tensor], std: float, generator: torch.Generator, trained: bool = True) -> None:
    """``param ~ N(0, std^2)``. A trained parameter (every weight and bias of the kernel's
    network; not a feature map that stands for the input covariance) keeps ``std`` as
    ``param.ntk_std``: in the NTK parameterisation ``param = std w`` with ``w ~ N(0, 1)`` trained,
    so its gradient in ``w`` is its gradient times ``std`` (:func:`gnngp_cli.verify.wide_check.empirical_ntk`)."""
    if param is not None:
        with torch.no_grad():
            param.copy_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * std)
        param.ntk_std = std if trained else None


def _draw_linear(lin: nn.Module, sigma: float, generator: torch.Generator, sigma_b: float = 0.0, trained: bool = True) -> None:
    """``W ~ N(0, sigma^2 / fan_in)`` (PyTorch stores ``W^T``: out x in), ``b ~ N(0, sigma_b^2)``."""
    _draw(lin.weight, sigma / math.sqrt(lin.weight.size(1)), generator, trained)
    _draw(getattr(lin, "bias", None), sigma_b, generator, trained)


class WideNetwork(nn.Module):
    """A network of width ``width`` on inputs of ``in_dim`` features; ``forward`` returns the
    ``n x width`` output units. ``adjacency``: the only normalisation its layers can express
    (``None``: any); ``layers_text``: what it is made of (the verify command says so)."""

    adjacency: Optional[str] = None
    layers_text: str = ""
    trains: bool = True   # its weights are parameters (drawn by redraw) that an empirical NTK differentiates

    def redraw(self, generator: torch.Generator) -> None:
        raise NotImplementedError

    def forward(self, x: Tensor, graph: Any) -> Tensor:
        raise NotImplementedError


class GCNNetwork(WideNetwork):
    """GCN: ``X_1 = A X W_1 + b_1``, ``X_l = A relu(X_{l-1}) W_l + b_l`` (``GCNConv``)."""

    layers_text = "GCNConv"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, **_):
        super().__init__()
        from torch_geometric.nn import GCNConv

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

    layers_text = "GCNConv + GCN2Conv"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, alpha: float, theta: float, **_):
        super().__init__()
        from torch_geometric.nn import GCN2Conv, GCNConv

        self.pre = nn.Linear(in_dim, width, bias=False)
        self.first = GCNConv(width, width, normalize=False, bias=False)
        self.convs = nn.ModuleList(GCN2Conv(width, alpha, theta, layer=l, normalize=False) for l in range(1, layers))
        self.sigma_w = sigma_w

    def redraw(self, generator):
        _draw_linear(self.pre, 1.0, generator, trained=False)   # X_0: the input covariance C0, no parameter of the kernel
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

    layers_text = "GINConv"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, **_):
        super().__init__()
        from torch_geometric.nn import GINConv

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
    layers_text = "SAGEConv"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w1: float, sigma_w2: float, **_):
        super().__init__()
        from torch_geometric.nn import SAGEConv

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


class GATNetwork(WideNetwork):
    """GAT with linear attention (``GATConv`` without the softmax), one head per output feature:
    ``H = phi(X) W_l``, ``X_ic <- sum_j A_ij (a_dst^c . H_i + a_src^c . H_j) H_jc + b_lc`` on the check's
    adjacency (``phi``: LeakyReLU, none before the first layer), ``a^c ~ N(0, s_a^2 / width)``; plain
    torch on the sparse ``adj_t``. Heads grow with the width, as in the infinite-attention limit
    (Hron et al. 2020): with one head shared by every feature, its scores multiply all of them
    alike, and the output covariance is random at any width (its mean is the same kernel)."""

    layers_text = "linear-attention GAT layers, a head per feature (plain torch on adj_t)"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, sigma_a: float, slope: float, **_):
        super().__init__()
        dims = [in_dim] + [width] * layers
        self.lins = nn.ModuleList(nn.Linear(dims[l], dims[l + 1], bias=False) for l in range(layers))
        self.targets = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))   # a_dst^c (the receiver), a row per feature c
        self.sources = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))   # a_src^c (the neighbour)
        self.biases = nn.ParameterList(nn.Parameter(torch.empty(width)) for _ in range(layers))
        self.sigma_w, self.sigma_b, self.sigma_a, self.slope = sigma_w, sigma_b, sigma_a, slope

    def redraw(self, generator):
        for l, lin in enumerate(self.lins):
            _draw_linear(lin, self.sigma_w, generator)
            _draw_linear(self.targets[l], self.sigma_a, generator)
            _draw_linear(self.sources[l], self.sigma_a, generator)
            _draw(self.biases[l], self.sigma_b, generator)

    def forward(self, x, graph):
        h = x
        for l, lin in enumerate(self.lins):
            h = lin(torch.nn.functional.leaky_relu(h, self.slope) if l else h)
            receiver, neighbour = self.targets[l](h), self.sources[l](h)   # a_dst^c . H_i, a_src^c . H_j
            h = receiver * torch.sparse.mm(graph.adj_t, h) + torch.sparse.mm(graph.adj_t, neighbour * h) + self.biases[l]
        return h


class GGPNetwork(WideNetwork):
    """GGP: a random linear readout of the features, then one aggregation: ``A X W``
    (``SimpleConv`` with the normalised edge weights)."""

    layers_text = "SimpleConv"

    def __init__(self, in_dim: int, width: int, **_):
        super().__init__()
        from torch_geometric.nn import SimpleConv

        self.readout = nn.Linear(in_dim, width, bias=False)
        self.conv = SimpleConv(aggr="sum")

    def redraw(self, generator):
        _draw_linear(self.readout, 1.0, generator, trained=False)   # a feature map: GGP has no trained parameter

    def forward(self, x, graph):
        return self.conv(self.readout(x), graph.adj_t)


class FeatureNetwork(WideNetwork):
    """No graph (the RBF baseline): a random linear readout ``X W`` of the features."""

    layers_text = "a linear readout"

    def __init__(self, in_dim: int, width: int, **_):
        super().__init__()
        self.readout = nn.Linear(in_dim, width, bias=False)

    def redraw(self, generator):
        _draw_linear(self.readout, 1.0, generator, trained=False)   # a feature map: RBF has no trained parameter

    def forward(self, x, graph):
        return self.readout(x)


def polynomial_filter(coefficients: list[float], h: Tensor, a: Tensor) -> Tensor:
    """``sum_k g_k A^k H`` by Horner's rule, ``A`` dense."""
    out = coefficients[-1] * h
    for g in reversed(coefficients[:-1]):
        out = a @ out + g * h
    return out


class GPRNetwork(WideNetwork):
    """GPR-GNN: an MLP ``X_1 = X W_1 + b_1``, ``X_l = relu(X_(l-1)) W_l + b_l``, then the filter
    ``Z = sum_k g_k A^k X_L`` (``SimpleConv`` with the normalised edge weights, by Horner's rule)."""

    layers_text = "an MLP, then a SimpleConv filter"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, coefficients: Any, **_):
        super().__init__()
        from torch_geometric.nn import SimpleConv

        dims = [in_dim] + [width] * layers
        self.lins = nn.ModuleList(nn.Linear(dims[l], dims[l + 1]) for l in range(layers))
        self.conv = SimpleConv(aggr="sum")
        self.coefficients = [float(g) for g in coefficients]
        self.sigma_w, self.sigma_b = sigma_w, sigma_b

    def redraw(self, generator):
        for lin in self.lins:
            _draw_linear(lin, self.sigma_w, generator, self.sigma_b)

    def forward(self, x, graph):
        h = x
        for l, lin in enumerate(self.lins):
            h = lin(torch.relu(h) if l else h)
        out = self.coefficients[-1] * h
        for g in reversed(self.coefficients[:-1]):
            out = self.conv(out, graph.adj_t) + g * h
        return out


def hop_paths(rounds: int) -> list[tuple[int, ...]]:
    """H2GCN's blocks as paths of hops: ``()`` (the ego embedding), then every sequence of 1- and
    2-hop steps of length ``1 .. rounds`` (``2^(rounds+1) - 1`` paths in all)."""
    paths: list[tuple[int, ...]] = [()]
    frontier: list[tuple[int, ...]] = [()]
    for _ in range(rounds):
        frontier = [path + (hop,) for path in frontier for hop in (1, 2)]
        paths += frontier
    return paths


class H2GCNNetwork(WideNetwork):
    """H2GCN: the ego embedding ``r0 = relu(X W_e + b_e)``, ``L`` rounds ``r_k = [A1 r_(k-1), A2 r_(k-1)]``
    (the normalised 1-hop and exact 2-hop operators, dense), and a readout of
    ``[r0, r1, ..., r_L]``: the concatenation holds one block per path of hops
    (``r_p = A_(p_k) ... A_(p_1) r0``), each read out by its own weights
    ``W_p ~ N(0, s_w^2 / width)``, ``Z = sum_p r_p W_p``. (One readout matrix over the whole
    concatenation, ``N(0, s_w^2 / fan_in)`` with ``fan_in = (2^(L+1) - 1) width`` as in the
    paper, would give the kernel divided by ``2^(L+1) - 1``.)"""

    layers_text = "H2GCN rounds on the dense 1- and 2-hop operators"

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, **_):
        super().__init__()
        self.ego = nn.Linear(in_dim, width)
        self.paths = hop_paths(layers)
        self.readouts = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in self.paths)
        self.sigma_w, self.sigma_b = sigma_w, sigma_b

    def redraw(self, generator):
        _draw_linear(self.ego, self.sigma_w, generator, self.sigma_b)
        for readout in self.readouts:
            _draw_linear(readout, self.sigma_w, generator)

    def forward(self, x, graph):
        operators = dict(zip((1, 2), (a.to(x.dtype) for a in graph.hop_operators())))
        rounds = {(): torch.relu(self.ego(x))}
        for path in self.paths[1:]:
            rounds[path] = operators[path[-1]] @ rounds[path[:-1]]
        return sum(readout(rounds[path]) for path, readout in zip(self.paths, self.readouts))


class ComposedNetwork(WideNetwork):
    """A ``kernel=composed`` architecture as a plain torch network, block by block:

    ``input``: ``X_0 = X W_0`` (width ``width``, covariance ``C0``, one draw shared by every
    ``input``); ``relu``; ``conv``: ``A H`` (dense ``A``); ``weight`` / ``{weight: s}``:
    ``H W``, ``W ~ N(0, s^2 / fan_in)``; ``bias`` / ``{bias: s}``: ``H + b``;
    ``{scale: c}``: ``c H``; ``{mixed: [a, b]}``: ``H (a I + b W)``, ``W ~ N(0, s_w^2 / fan_in)``;
    ``{poly: [g0, g1, ...]}``: ``sum_k g_k A^k H``;
    ``{add: [[...], [...]]}``: the branches' outputs summed (independent draws per branch).
    Layer 1 is ``first``, layers ``2..L`` are ``hidden``.
    """

    layers_text = "plain torch blocks"
    trains = False   # weights drawn as the blocks run, not parameters: its tangent kernel is checked in the tests only

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
            if key == "poly":
                return polynomial_filter([float(g) for g in (value if isinstance(value, (list, tuple)) else [value])], h, state["a"])
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
        raise ConfigError(f"kernel block {spec!r} has no network in gnngp verify; use input, relu, conv, weight, bias, scale, mixed, add or poly")

    def forward(self, x, graph):
        if self.generator is None:
            raise RuntimeError("call redraw(generator) before running a composed network")
        state = {"x": x, "a": graph.dense()}
        h = None
        for blocks in self.program:
            h = self._run(blocks, h, state)
        return h
