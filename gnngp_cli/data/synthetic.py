"""The contextual stochastic block model (csbm): a synthetic graph generated in O(N + M).

Labels are balanced over ``num_classes``. Each of ``N * avg_degree / 2`` undirected edges
picks a uniform source node and, with probability ``homophily``, a uniform target of the
same class, otherwise of a uniformly chosen other class; self-loops and duplicates are
dropped, so the edge homophily is close to ``homophily``. Features are
``x = mu[y] + noise`` with class means ``mu_c ~ N(0, snr^2 / d I)`` and noise
``N(0, 1/d I)``: ``snr`` is the signal-to-noise ratio of each coordinate.
No N x N object is ever formed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from ..schema import DatasetConfig
from ..errors import DatasetError
from .container import GraphData as Data
from ..graph.operators import coalesce
from .datasets import register_dataset, register_preset
from .wikipedia import random_split


def generate_csbm(
    num_nodes: int = 3000,
    avg_degree: float = 10.0,
    num_classes: int = 4,
    homophily: float = 0.6,
    num_features: int = 32,
    snr: float = 0.3,
    seed: int = 0,
    train_ratio: float = 0.1,
    val_ratio: float = 0.1,
) -> Data:
    if num_nodes < num_classes or num_classes < 2:
        raise DatasetError(f"csbm needs num_classes >= 2 and num_nodes >= num_classes (got num_nodes={num_nodes}, num_classes={num_classes}); "
                           + ("set dataset.num_classes >= 2" if num_classes < 2 else "set dataset.num_nodes >= dataset.num_classes"))
    for key, value, ok, need in (("homophily", homophily, 0.0 <= homophily <= 1.0, "from 0 to 1"), ("avg_degree", avg_degree, avg_degree >= 0, ">= 0"),
                                 ("num_features", num_features, num_features >= 1, "at least 1"), ("snr", snr, snr >= 0, ">= 0")):
        if not ok:   # (NaN fails each test)
            raise DatasetError(f"dataset.{key}={value:g} must be {need}; csbm needs 0 <= homophily <= 1, avg_degree >= 0, "
                               "num_features >= 1 and snr >= 0")
    g = torch.Generator().manual_seed(seed)
    y = (torch.arange(num_nodes) % num_classes)[torch.randperm(num_nodes, generator=g)]
    order = torch.argsort(y)
    counts = torch.bincount(y, minlength=num_classes)
    starts = torch.cumsum(counts, 0) - counts

    m = int(round(num_nodes * avg_degree / 2))
    src = torch.randint(num_nodes, (m,), generator=g)
    same = torch.rand(m, generator=g) < homophily
    shift = torch.randint(1, num_classes, (m,), generator=g)
    target_class = torch.where(same, y[src], (y[src] + shift) % num_classes)
    offset = (torch.rand(m, generator=g) * counts[target_class]).long().clamp_max(counts[target_class] - 1)
    dst = order[starts[target_class] + offset]
    del same, shift, target_class, offset

    keep = src != dst  # no self-loops
    edge_index = torch.stack([src[keep], dst[keep]])
    edge_index = coalesce(torch.cat([edge_index, edge_index.flip(0)], dim=1), None, num_nodes)[0]

    means = torch.randn(num_classes, num_features, generator=g) * (snr / num_features ** 0.5)
    x = torch.randn(num_nodes, num_features, generator=g).mul_(1.0 / num_features ** 0.5).add_(means[y])

    data = Data(x=x, y=y, edge_index=edge_index)
    for key, mask in random_split(num_nodes, train_ratio, val_ratio, seed).items():
        data[f"{key}_mask"] = mask
    data.task, data.num_classes = "classification", num_classes
    data.split = f"random {train_ratio}/{val_ratio}, seed {seed}"
    return data


def edge_homophily(edge_index: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of edges whose endpoints share a label."""
    return float((y[edge_index[0]] == y[edge_index[1]]).float().mean())


@dataclass
class CSBMConfig(DatasetConfig):
    """The csbm generator's settings (defaults: the embedded graph of the default run)."""

    name: str = "csbm"
    num_nodes: int = 3000               # nodes of the generated graph
    avg_degree: float = 10.0            # mean degree
    num_classes: int = 4                # classes (blocks of the stochastic block model)
    homophily: float = 0.6              # the share of edges within a class
    num_features: int = 32              # Gaussian features per node
    snr: float = 0.3                    # the class means' separation against the features' noise


def _csbm(options, store) -> Data:
    return generate_csbm(options.num_nodes, options.avg_degree, options.num_classes, options.homophily, options.num_features, options.snr,
                         options.split_seed, options.train_ratio, options.val_ratio)


BYTES_PER_NODE = 320     # labels, their order, the split's masks and the generator's per-node temporaries
BYTES_PER_EDGE = 110     # per generated edge: its ends and the draws that place it (int64), then both directions coalesced


def csbm_bytes(options) -> float:
    """Peak bytes :func:`generate_csbm` allocates: per node, :data:`BYTES_PER_NODE` and its
    features twice (float32, and the class means added); per edge (``N avg_degree / 2``),
    :data:`BYTES_PER_EDGE`. Measured (peak RSS less before): 10^6 nodes of degree 10 and 32
    features 0.76 GB (estimated 1.06), 2 10^6 1.53 GB (2.1), degree 2 0.39 GB (0.66), 4 features 0.83 GB (0.83)."""
    n = int(options.num_nodes)
    return n * (BYTES_PER_NODE + 8.0 * int(options.num_features)) + n * float(options.avg_degree) / 2 * BYTES_PER_EDGE


register_dataset("csbm", "csbm", _csbm, CSBMConfig(), split="random", memory=csbm_bytes)
# the size ladder of figure 2 (10^3..10^6 nodes, average degree 10, 10% training nodes)
for _exp, _landmarks in ((3, 100), (4, 500), (5, 500), (6, 500)):
    register_preset(f"csbm_1e{_exp}", CSBMConfig(num_nodes=10 ** _exp, landmark_count=_landmarks, large=_exp >= 5))
# figure 4's landmark sweep offline: Reddit-like split proportions (0.66/0.10/0.24)
register_preset("csbm_landmarks", CSBMConfig(num_nodes=100_000, num_features=64, num_classes=8, train_ratio=0.66, val_ratio=0.10, large=True))
