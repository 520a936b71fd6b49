"""Hand-written networks, apart from the blocks: the independent oracles of ``gnngp verify``.

Every kernel's wide network is derived from its own blocks (:mod:`gnngp_cli.kernels.layers`), so a
wrong *composition* (a block left out, two swapped) would give a kernel and a network that agree
with each other. These networks are written from the architectures' definitions with PyTorch
Geometric's layers instead, and the check samples them for their kernels with
``verify.oracle=true`` (the tests do both): GCN (``GCNConv``) and GAT with linear attention.
Each weight is drawn ``N(0, s^2 / fan_in)``, each bias ``N(0, s_b^2)`` (:func:`~gnngp_cli.kernels.layers.draw`).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..kernels.layers import draw


def draw_linear(lin: nn.Module, sigma: float, generator: torch.Generator, sigma_b: float = 0.0) -> None:
    """``W ~ N(0, sigma^2 / fan_in)`` (PyTorch stores ``W^T``: out x in), ``b ~ N(0, sigma_b^2)``."""
    draw(lin.weight, sigma / math.sqrt(lin.weight.size(1)), generator)
    draw(getattr(lin, "bias", None), sigma_b, generator)


class GCNNetwork(nn.Module):
    """GCN: ``X_1 = A X W_1 + b_1``, ``X_l = A relu(X_{l-1}) W_l + b_l`` (``GCNConv``)."""

    adjacency = None
    layers_text = "GCNConv (the PyG oracle)"
    trains = True

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, **_):
        super().__init__()
        from torch_geometric.nn import GCNConv

        dims = [in_dim] + [width] * layers
        self.convs = nn.ModuleList(GCNConv(dims[l], dims[l + 1], normalize=False) for l in range(layers))
        self.sigma_w, self.sigma_b = sigma_w, sigma_b

    def redraw(self, generator):
        for conv in self.convs:
            draw_linear(conv.lin, self.sigma_w, generator)
            draw(conv.bias, self.sigma_b, generator)

    def forward(self, x, graph):
        h = x
        for l, conv in enumerate(self.convs):
            h = conv(torch.relu(h) if l else h, graph.adj_t)
        return h


class GATNetwork(nn.Module):
    """GAT with linear attention (``GATConv`` without the softmax), one head per feature and an
    output projection over the heads: ``H = phi(X) W_l``, ``M_ic = sum_j A_ij (a_dst^c . H_i + a_src^c . H_j) H_jc``,
    ``X <- M W_o + b_l`` on the check's adjacency (``phi``: LeakyReLU, none before the first layer),
    ``a^c ~ N(0, s_a^2 / width)``, ``W_o ~ N(0, 1 / width)``; plain torch on the sparse ``adj_t``.
    Heads grow with the width and ``W_o`` sums them, as in the infinite-attention limit (Hron et
    al. 2020): one head's output is a random score times a Gaussian, the projected sum of many is
    Gaussian. With ``projection=False`` no ``W_o`` (a network whose kernel is only approximately
    the package's at ``L >= 2``)."""

    adjacency = None
    layers_text = "linear-attention GAT layers, a head per feature and an output projection (the plain-torch oracle on adj_t)"
    trains = True

    def __init__(self, in_dim: int, width: int, layers: int, sigma_w: float, sigma_b: float, sigma_a: float, slope: float,
                 projection: bool = True, **_):
        super().__init__()
        dims = [in_dim] + [width] * layers
        self.lins = nn.ModuleList(nn.Linear(dims[l], dims[l + 1], bias=False) for l in range(layers))
        self.targets = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))   # a_dst^c (the receiver), a row per feature c
        self.sources = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))   # a_src^c (the neighbour)
        self.outputs = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers if projection else 0))   # W_o
        self.biases = nn.ParameterList(nn.Parameter(torch.empty(width)) for _ in range(layers))
        self.sigma_w, self.sigma_b, self.sigma_a, self.slope = sigma_w, sigma_b, sigma_a, slope

    def redraw(self, generator):
        for l, lin in enumerate(self.lins):
            draw_linear(lin, self.sigma_w, generator)
            draw_linear(self.targets[l], self.sigma_a, generator)
            draw_linear(self.sources[l], self.sigma_a, generator)
            if self.outputs:
                draw_linear(self.outputs[l], 1.0, generator)
            draw(self.biases[l], self.sigma_b, generator)

    def forward(self, x, graph):
        h = x
        for l, lin in enumerate(self.lins):
            h = lin(torch.nn.functional.leaky_relu(h, self.slope) if l else h)
            receiver, neighbour = self.targets[l](h), self.sources[l](h)   # a_dst^c . H_i, a_src^c . H_j
            h = receiver * torch.sparse.mm(graph.adj_t, h) + torch.sparse.mm(graph.adj_t, neighbour * h)
            if self.outputs:
                h = self.outputs[l](h)
            h = h + self.biases[l]
        return h


ORACLES = {"gcngp": GCNNetwork, "gatgp": GATNetwork}   # kernel -> its hand-written network
