"""Uncertainty protocols (``protocol=<name>``): a loaded graph's splits and test nodes made into
one of the node-classification uncertainty benchmarks, reproducibly from ``protocol.seed``.

Every protocol keeps the three splits; the test split may gain nodes that are *out of
distribution* (``data.ood_mask``). Scores then read them apart: the test metric and the
calibration columns (ECE, NLL, Brier) the in-distribution test nodes, the detection columns
(AUROC, AUPR) every test node, with the OOD ones as positives (without OOD nodes, the wrong
predictions are the positives: misclassification detection).

| protocol              | what changes                                                                     |
|-----------------------|----------------------------------------------------------------------------------|
| ``misclassification`` | nothing: the detection columns tell wrong test predictions from right ones        |
| ``leave_out_classes`` | ``left_out`` classes, drawn by the seed, leave training and validation; their      |
|                       | test nodes are OOD; the other classes are renumbered ``0..C'-1`` (Stadler et al.,  |
|                       | NeurIPS 2021, "leave-out classes"; at least 3 classes)                            |
| ``feature_shift``     | a ``share`` of the test nodes, drawn by the seed, get perturbed features (Gaussian|
|                       | noise of ``strength`` times each feature's std, or another node's features): OOD   |
| ``structural_shift``  | nodes ordered by PageRank (or personalised PageRank): the central half is split    |
|                       | into train/validation/test by ``shares`` of all nodes, the periphery is the OOD    |
|                       | test (Bazhenov et al., 2023)                                                      |
| ``random_split``      | the splits only: ``split`` shares of the labelled nodes (default 20% train, 10%    |
|                       | validation, the rest the test; CF-GNN's and GETS's protocol), drawn by the seed;   |
|                       | no node is OOD (classification and regression)                                    |

A protocol that would leave no class, no training node or no OOD node is refused in one line.
"""
from __future__ import annotations

import copy
import json
from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError

PERTURBATIONS = ("noise", "swap")
ORDERINGS = ("pagerank", "personalised")


DRAWS_SPLIT = ("random_split", "structural_shift")   # the protocols that draw a graph's train, validation and test nodes anew


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _refuse_regression(data: Any, name: str, dataset: str) -> None:
    if data.task != "classification":
        raise ConfigError(f"protocol={name} scores class probabilities, and {dataset} is a regression task; "
                          "use protocol=none (its uncertainty is the nlpd and coverage95 columns)")


def protocol_key(protocol: Any) -> str:
    """What a protocol's draws depend on, as one string (a graph records the one applied to it)."""
    keys = ("name", "seed", "left_out", "share", "perturbation", "strength", "ordering", "shares", "split")
    return json.dumps({k: (list(getattr(protocol, k)) if k in ("shares", "split") else getattr(protocol, k)) for k in keys}, sort_keys=True)


def apply_protocol(data: Any, protocol: Any, dataset: str) -> Any:
    """``data`` with ``protocol``'s protocol applied (see the module docstring), as a shallow copy
    (the caller's graph is left as it was); ``data.ood_mask`` is set (all false for ``none`` and
    ``misclassification``). A graph that already went through this protocol (the Python API's
    ``load_dataset(..., protocol=...)`` then ``NodeGP.fit``) is returned as it is; through another, refused."""
    name, key = str(protocol.name), protocol_key(protocol)
    applied = getattr(data, "protocol_key", None)
    if applied is not None:
        if applied == key or name == "none":
            return data
        raise ConfigError(f"this graph already went through protocol={json.loads(applied)['name']} with other settings; "
                          "load it again (load_dataset) to apply another protocol")
    data = copy.copy(data)
    data.ood_mask = torch.zeros(int(data.num_nodes), dtype=torch.bool, device=data.y.device)
    if name == "none":
        return data
    data.protocol_key = key
    if name == "random_split":
        random_split(data, protocol, dataset)
        data.protocol = name
        return data
    _refuse_regression(data, name, dataset)
    if name == "leave_out_classes":
        leave_out_classes(data, protocol, dataset)
    elif name == "feature_shift":
        feature_shift(data, protocol, dataset)
    elif name == "structural_shift":
        structural_shift(data, protocol, dataset)
    data.protocol = name
    return data


def random_split(data: Any, protocol: Any, dataset: str) -> None:
    """New train/validation/test masks: ``protocol.split`` shares of the nodes with a label, drawn by the seed."""
    y = data.y
    labelled = ~torch.isnan(y.double()) if data.task == "regression" else (y >= 0) & (y < int(data.num_classes))
    nodes = labelled.nonzero().view(-1)
    order = nodes[torch.randperm(nodes.numel(), generator=_generator(protocol.seed)).to(nodes.device)]
    n_train, n_val = (int(round(share * nodes.numel())) for share in protocol.split)
    if n_train < 1 or n_val < 1 or n_train + n_val >= nodes.numel():
        raise ConfigError(f"protocol.split={list(protocol.split)} of {dataset}'s {nodes.numel()} labelled nodes leaves {n_train} training, "
                          f"{n_val} validation and {nodes.numel() - n_train - n_val} test nodes; each needs at least one (e.g. [0.2, 0.1])")
    for key, part in (("train", order[:n_train]), ("val", order[n_train:n_train + n_val]), ("test", order[n_train + n_val:])):
        mask = torch.zeros(int(data.num_nodes), dtype=torch.bool, device=y.device)
        mask[part] = True
        data[f"{key}_mask"] = mask
    data.split = f"random {protocol.split[0]:g}/{protocol.split[1]:g}, seed {int(protocol.seed)}"


def leave_out_classes(data: Any, protocol: Any, dataset: str) -> None:
    classes = int(data.num_classes)
    if classes < 3:
        raise ConfigError(f"protocol=leave_out_classes needs at least 3 classes (one left out, two kept), and {dataset} has {classes}; "
                          "use protocol=feature_shift, structural_shift or misclassification")
    count = protocol.left_out if protocol.left_out is not None else max(1, classes // 3)
    if not 1 <= count <= classes - 2:
        raise ConfigError(f"protocol.left_out={count} must leave out at least 1 of {dataset}'s {classes} classes and keep at least 2; "
                          f"use 1 to {classes - 2}")
    device = data.y.device
    left = torch.randperm(classes, generator=_generator(protocol.seed))[:count].to(device)
    out = torch.isin(data.y, left)
    if not bool((data.test_mask & out).any()):
        raise ConfigError(f"protocol=leave_out_classes left out classes {sorted(left.tolist())} of {dataset}, which have no test node, so "
                          "nothing is out of distribution; use another protocol.seed or a larger protocol.left_out")
    had_val = bool(data.val_mask.any())
    data.train_mask = data.train_mask & ~out
    data.val_mask = data.val_mask & ~out
    if not bool(data.train_mask.any()):
        raise ConfigError(f"protocol=leave_out_classes left no training node on {dataset}; use a smaller protocol.left_out")
    if had_val and not bool(data.val_mask.any()):
        raise ConfigError(f"protocol=leave_out_classes left no validation node on {dataset} (the nugget is chosen on them); "
                          "use another protocol.seed or a smaller protocol.left_out")
    kept = torch.ones(classes, dtype=torch.bool, device=device)
    kept[left] = False
    renumber = torch.full((classes,), classes - count, dtype=torch.long, device=device)   # OOD nodes: one past the kept classes
    renumber[kept] = torch.arange(classes - count, device=device)
    data.y = renumber[data.y]
    data.num_classes = classes - count
    data.ood_mask = data.test_mask & out
    data.left_out = sorted(left.tolist())


def _draw_share(nodes: Tensor, share: float, seed: int, what: str, dataset: str) -> Tensor:
    count = int(round(share * nodes.numel()))
    if not 1 <= count < nodes.numel():
        raise ConfigError(f"protocol.share={share:g} of {dataset}'s {nodes.numel()} test nodes makes {count} {what}; "
                          "it must leave at least one node on each side (e.g. protocol.share=0.5)")
    return nodes[torch.randperm(nodes.numel(), generator=_generator(seed))[:count].to(nodes.device)]


def feature_shift(data: Any, protocol: Any, dataset: str) -> None:
    if protocol.perturbation not in PERTURBATIONS:
        raise ConfigError(f"protocol.perturbation={protocol.perturbation!r} is not one; use {' or '.join(PERTURBATIONS)}")
    test = data.test_mask.nonzero().view(-1)
    shifted = _draw_share(test, float(protocol.share), protocol.seed, "perturbed nodes", dataset)
    x = data.x.clone()
    gen = _generator(int(protocol.seed) + 1)
    if protocol.perturbation == "noise":
        std = x.float().std(0, keepdim=True)
        noise = torch.randn(shifted.numel(), x.size(1), generator=gen).to(x.device, torch.float32)
        x[shifted] = (x[shifted].float() + float(protocol.strength) * std * noise).to(x.dtype)
    else:   # another node's features (never the node's own)
        n = int(data.num_nodes)
        offset = torch.randint(1, n, (shifted.numel(),), generator=gen).to(x.device)
        x[shifted] = data.x[(shifted + offset) % n]
    data.x = x
    data.ood_mask[shifted] = True


def centrality(edge_index: Tensor, num_nodes: int, ordering: str = "pagerank", damping: float = 0.85, steps: int = 100) -> Tensor:
    """PageRank of every node (``personalised``: restarting at the node of highest degree), by
    power iteration on the graph's edges (dangling nodes restart too), on the CPU in float64 (a
    GPU's atomic adds would sum in another order and could swap nodes of equal rank)."""
    src, dst = edge_index[0].cpu(), edge_index[1].cpu()
    degree = torch.zeros(num_nodes, dtype=torch.float64, device=src.device).index_add_(0, src, torch.ones_like(src, dtype=torch.float64))
    if ordering == "personalised":
        restart = torch.zeros(num_nodes, dtype=torch.float64, device=src.device)
        restart[int(torch.argmax(degree))] = 1.0
    else:
        restart = torch.full((num_nodes,), 1.0 / num_nodes, dtype=torch.float64, device=src.device)
    rank = restart.clone()
    inv = torch.where(degree > 0, 1.0 / degree.clamp_min(1), torch.zeros_like(degree))
    for _ in range(steps):
        spread = torch.zeros_like(rank).index_add_(0, dst, (rank * inv)[src])
        dangling = float(rank[degree == 0].sum())
        rank = (1 - damping) * restart + damping * (spread + dangling * restart)
    return rank


def structural_shift(data: Any, protocol: Any, dataset: str) -> None:
    if protocol.ordering not in ORDERINGS:
        raise ConfigError(f"protocol.ordering={protocol.ordering!r} is not one; use {' or '.join(ORDERINGS)}")
    shares = [float(s) for s in protocol.shares]
    n = int(data.num_nodes)
    rank = centrality(data.edge_index, n, protocol.ordering)
    order = torch.argsort(-rank, stable=True).to(data.y.device)   # the most central first, ties by node id
    counts = [int(round(s * n)) for s in shares]
    core = order[: sum(counts)]
    periphery = order[sum(counts):]
    if min(counts) < 1 or periphery.numel() < 1:
        raise ConfigError(f"protocol.shares={shares} of {dataset}'s {n} nodes leave a split or the OOD periphery empty; "
                          "use shares that sum below 1, e.g. [0.3, 0.1, 0.1]")
    core = torch.sort(core)[0]   # by id, then the seeded draw: the split depends on the seed and the core's members only
    core = core[torch.randperm(core.numel(), generator=_generator(protocol.seed)).to(core.device)]
    masks = []
    start = 0
    for count in counts:
        mask = torch.zeros(n, dtype=torch.bool, device=data.y.device)
        mask[core[start:start + count]] = True
        masks.append(mask)
        start += count
    data.train_mask, data.val_mask, id_test = masks
    data.ood_mask = torch.zeros(n, dtype=torch.bool, device=data.y.device)
    data.ood_mask[periphery] = True
    data.test_mask = id_test | data.ood_mask
