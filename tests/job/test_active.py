"""Active learning (active=<strategy>): the posterior updated per label equals a refit, the
design scores equal a brute-force recomputation, and the job's rows, API and refusals."""
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from gnngp_cli.api import NodeGP, compose, load_dataset
from gnngp_cli.config import validate
from gnngp_cli.errors import ConfigError, DatasetError, KernelError
from gnngp_cli.gp.strategies import STRATEGIES, Selection, choose
from gnngp_cli.gp.updates import LabelPosterior, Prior, log_marginal_likelihood, rebuilt
from gnngp_cli.metrics import macro_f1
from tests.helpers import in_process

N = 30


def graph_kernel(n: int = N, features: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A linear GCN kernel ``S X X^T S`` on a random graph of ``n`` nodes (``S``: the
    symmetric-normalised adjacency with self-loops) plus a small ridge, in float64, and its edges."""
    g = torch.Generator().manual_seed(seed)
    ring = torch.arange(n)
    extra = torch.randint(0, n, (2, n), generator=g)
    edges = torch.cat([torch.stack([ring, (ring + 1) % n]), extra], 1)
    edges = torch.cat([edges, edges.flip(0)], 1)
    a = torch.eye(n, dtype=torch.float64)
    a[edges[0], edges[1]] = 1.0
    d = a.sum(1).rsqrt()
    s = d[:, None] * a * d[None, :]
    x = torch.randn(n, features, generator=g, dtype=torch.float64)
    k = s @ x @ x.T @ s.T
    return k + 1e-3 * torch.eye(n, dtype=torch.float64), edges


def refit(k: torch.Tensor, labelled: list[int], y: torch.Tensor, noise: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The posterior mean and covariance of every node from scratch: ``K_XL (K_LL + s2 I)^{-1}``."""
    if not labelled:
        return torch.zeros(k.size(0), y.size(1), dtype=k.dtype), k.clone()
    idx = torch.tensor(labelled)
    system = k[idx][:, idx] + noise * torch.eye(len(labelled), dtype=k.dtype)
    cross = k[:, idx]
    mean = cross @ torch.linalg.solve(system, y[idx])
    cov = k - cross @ torch.linalg.solve(system, cross.T)
    return mean, cov


def roots() -> dict[str, tuple[torch.Tensor, Prior]]:
    """``(K, prior)`` pairs: an exact kernel held dense; a low-rank kernel ``Q Q^T`` of rank 8 held as its root."""
    k, _ = graph_kernel()
    q_low = torch.randn(N, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return {"exact": (k, Prior(dense=k)), "low_rank": (q_low @ q_low.T, Prior(root=q_low))}


@pytest.mark.parametrize("kind", ["exact", "low_rank"])
def test_posterior_updated_per_label_equals_a_refit(kind):
    """Rank-one steps, one label at a time: mean, variance and covariance as a refit on the same labels, to 1e-8."""
    k, q = roots()[kind]
    y = torch.nn.functional.one_hot(torch.arange(N) % 3, 3).double()
    noise = 0.05
    post = LabelPosterior(q, noise, 3, ("v_opt", "sigma_opt"), capacity=2)   # grown past its first room
    order = [4, 17, 0, 29, 11, 8, 22]
    for step, node in enumerate(order):
        post.label(node, y[node])
        mean, cov = refit(k, order[: step + 1], y, noise)
        assert torch.allclose(post.mean, mean, atol=1e-8, rtol=0)
        assert torch.allclose(post.variance, cov.diagonal(), atol=1e-8, rtol=0)
        assert torch.allclose(post.covariance(), cov, atol=1e-8, rtol=0)
    again = rebuilt(q, noise, 3, order, y[order])
    assert torch.allclose(again.mean, post.mean, atol=1e-10) and torch.allclose(again.variance, post.variance, atol=1e-10)


@pytest.mark.parametrize("kind", ["exact", "low_rank"])
def test_design_scores_equal_a_brute_force_recomputation(kind):
    """V- and Sigma-optimality of every candidate, kept up to date by the rank-one steps, equal the
    drop of the total variance and of the covariance sum over the unlabelled nodes that a refit with
    the candidate labelled gives, on a 30-node graph."""
    k, q = roots()[kind]
    y = torch.randn(N, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    noise = 0.1
    post = LabelPosterior(q, noise, 1, ("v_opt", "sigma_opt"))
    order = []
    for node in [3, 12, 25, 7]:
        post.label(node, y[node])
        order.append(node)
        _, cov = refit(k, order, y, noise)
        unlabelled = [u for u in range(N) if u not in order]
        u = torch.tensor(unlabelled)
        for j in unlabelled:
            _, after = refit(k, order + [j], y, noise)
            v_drop = (cov.diagonal()[u] - after.diagonal()[u]).sum()
            sigma_drop = cov[u][:, u].sum() - after[u][:, u].sum()
            assert float(post.v_opt()[j]) == pytest.approx(float(v_drop), abs=1e-8)
            assert float(post.sigma_opt()[j]) == pytest.approx(float(sigma_drop), abs=1e-8)


@pytest.mark.parametrize("kind", ["exact", "low_rank"])
def test_expected_errors_equal_a_refit_per_candidate_and_class(kind, monkeypatch):
    """eer's expected misclassifications of each candidate, from the closed-form step, equal those of a
    refit with the candidate labelled each class in turn, weighted by its class probabilities, on a
    30-node graph; computed a block of candidates at a time (blocks of 2 here) or all at once."""
    from gnngp_cli.gp import strategies
    from gnngp_cli.gp.probabilities import class_probabilities
    from gnngp_cli.gp.strategies import expected_errors

    k, q = roots()[kind]
    classes = 3
    y = torch.nn.functional.one_hot(torch.arange(N) % classes, classes).double()
    noise = 0.1
    post = LabelPosterior(q, noise, classes, ("sigma_opt",))
    order = [3, 12, 25, 7]
    for node in order:
        post.label(node, y[node])
    unlabelled = [u for u in range(N) if u not in order]
    candidates = torch.tensor(unlabelled)
    whole = expected_errors(post, candidates)
    monkeypatch.setattr(strategies, "ERROR_BLOCK", 2 * N * classes)
    assert torch.allclose(expected_errors(post, candidates), whole, atol=1e-12, rtol=0)
    now = class_probabilities(post.mean, post.variance, approx="probit")
    for i, j in enumerate(unlabelled):
        brute = 0.0
        for c in range(classes):
            target = torch.nn.functional.one_hot(torch.tensor(c), classes).double()
            after = rebuilt(q, noise, classes, order + [j], torch.cat([y[order], target[None]]))
            p = class_probabilities(after.mean, after.variance, approx="probit")
            others = [u for u in unlabelled if u != j]
            brute += float(now[j, c]) * float((1 - p[others].amax(1)).sum())
        assert float(whole[i]) == pytest.approx(brute, abs=1e-8)


def test_eer_labels_the_candidate_that_removes_the_most_expected_errors():
    """active=eer's step: among the open pool's candidates (the ERROR_CANDIDATES of highest
    Sigma-optimality), the node whose label removes the most expected misclassifications."""
    from gnngp_cli.gp.strategies import ERROR_CANDIDATES, expected_errors

    k, edges = graph_kernel()
    y = torch.nn.functional.one_hot(torch.arange(N) % 3, 3).double()
    post = LabelPosterior(Prior(dense=k), 0.05, 3, ("sigma_opt",))
    for node in (6, 20):
        post.label(node, y[node])
    pool = torch.ones(N, dtype=torch.bool)
    pool[:5] = False
    open_ids = (pool & post.unlabelled).nonzero().view(-1)
    assert open_ids.numel() < ERROR_CANDIDATES   # every open node a candidate here
    best = int(open_ids[torch.argmin(expected_errors(post, open_ids))])
    assert choose(STRATEGIES["eer"], Selection(post, edges, torch.Generator().manual_seed(0)), pool, 1) == [best]
    # what the memory check counts for its steps: four blocks of n x C entries a candidate, at most the candidates of a step
    # (a small graph's blocks are small), at least one candidate (arxiv's 169,343 x 40 is over ERROR_BLOCK)
    working = STRATEGIES["eer"].working
    assert working(60, 2) == 4 * ERROR_CANDIDATES * 60 * 2 and working(2708, 7) == 4 * ERROR_CANDIDATES * 2708 * 7
    assert working(169343, 40) == 4 * 169343 * 40


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_kernel_that_is_not_finite_is_refused_before_any_label(bad):
    from gnngp_cli.errors import KernelError

    k, _ = graph_kernel()
    k[3, 7] = bad
    q = torch.ones(N, 4, dtype=torch.float64)
    q[5, 1] = bad
    for prior in (dict(dense=k), dict(root=q)):
        with pytest.raises(KernelError, match="not finite"):
            Prior(**prior)


def test_strategies_choose_the_best_open_pool_node_and_random_is_seeded():
    k, edges = graph_kernel()
    q = Prior(dense=k)
    pool = torch.ones(N, dtype=torch.bool)
    pool[:5] = False   # test nodes: never chosen
    post = LabelPosterior(q, 0.01, 3, ("v_opt", "sigma_opt"))
    features = torch.randn(N, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    sel = Selection(post, edges, torch.Generator().manual_seed(0), features=features, target=3)
    for name, strategy in STRATEGIES.items():
        picked = choose(strategy, sel, pool, 3)
        assert len(picked) == 3 and all(p >= 5 for p in picked), name
    best = choose(STRATEGIES["variance"], sel, pool, 1)[0]
    assert best == int(torch.argmax(torch.where(pool, post.variance, torch.tensor(-1.0, dtype=torch.float64))))
    draws = [choose(STRATEGIES["random"], Selection(post, edges, torch.Generator().manual_seed(7)), pool, 4) for _ in range(2)]
    assert draws[0] == draws[1]


def test_featprop_takes_one_node_per_feature_cluster():
    """k-means on well-separated clusters: the nearest node of each centre, one per cluster, distinct."""
    from gnngp_cli.gp.strategies import kmeans_nearest

    g = torch.Generator().manual_seed(4)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]], dtype=torch.float64)
    x = torch.cat([c + 0.1 * torch.randn(20, 2, generator=g, dtype=torch.float64) for c in centres])
    chosen = kmeans_nearest(x, 3, torch.Generator().manual_seed(0))
    assert len(set(chosen)) == 3 and sorted(i // 20 for i in chosen) == [0, 1, 2]


def test_marginal_likelihood_over_nuggets_peaks_near_the_true_noise():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(200, 5, generator=g, dtype=torch.float64)
    f = q @ torch.randn(5, 2, generator=g, dtype=torch.float64)
    y = f + 0.5 * torch.randn(200, 2, generator=g, dtype=torch.float64)   # noise variance 0.25
    noises = torch.logspace(-3, 1, 41, dtype=torch.float64)
    best = float(noises[int(torch.argmax(log_marginal_likelihood(q @ q.T, y, noises)))])
    assert 0.1 < best < 0.6


def test_macro_f1_counts_every_class():
    y = torch.tensor([0, 0, 1, 1, 2])
    assert macro_f1(y, y, 3) == 1.0
    assert macro_f1(torch.tensor([0, 0, 0, 0, 0]), y, 3) == pytest.approx((2 * 2 / (5 + 2)) / 3)


def test_active_run_writes_a_row_per_budget(tmp_path):
    """gnngp run ... active=sigma_opt: one row per budget, the labels bought in order, cumulative selection time."""
    out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", "dataset=csbm", "dataset.num_nodes=200",
                     "kernel=gcngp", "active=sigma_opt", "active.budgets=[10,20]", "active.initial=2", "dtype=float64")
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    assert list(rows["budget"]) == [10, 20] and list(rows["labelled"]) == [10, 20]
    assert (rows["status"] == "ok").all() and (rows["strategy"] == "sigma_opt").all()
    assert rows["selection_seconds"].is_monotonic_increasing and rows["test"].between(0, 1).all() and rows["macro_f1_all"].between(0, 1).all()
    assert "active=sigma_opt at 20 labels" in out.stderr + out.stdout
    report = in_process("report", str(tmp_path / "run"), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Active learning" in text and "| sigma_opt | 1 | 10: " in text and (tmp_path / "report" / "active_learning.png").is_file()


def test_graph_strategies_read_the_edges_of_a_loaded_graph(tmp_path):
    """degree and PageRank read the edge list, which a run otherwise releases once the adjacency is built."""
    out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", "dataset=csbm", "dataset.num_nodes=200",
                     "kernel=gcngp_x", "landmarks.count=20", "active=pagerank", "active.budgets=[5]")
    assert out.returncode == 0, out.stderr
    assert list(pd.read_csv(tmp_path / "run" / "results.csv")["strategy"]) == ["pagerank"]


def test_a_new_strategy_is_one_registry_entry(tmp_path):
    """register_strategy alone makes active=<name> a config option that runs end to end."""
    from gnngp_cli.gp.strategies import Strategy, register_strategy

    register_strategy(Strategy("lowest_id", lambda sel: -torch.arange(sel.posterior.num_nodes, dtype=torch.float64), "the lowest node ids", static=True))
    try:
        out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", "dataset=csbm", "dataset.num_nodes=200",
                         "kernel=gcngp_x", "landmarks.count=20", "active=lowest_id", "active.budgets=[3]")
        assert out.returncode == 0, out.stderr
        nodes = json.loads(pd.read_csv(tmp_path / "run" / "results.csv")["extra"][0])["active"]["nodes"]
        assert nodes == sorted(nodes) and len(nodes) == 3
    finally:
        STRATEGIES.pop("lowest_id")
    register_strategy(Strategy("as_list", lambda sel: [-float(i) for i in range(sel.posterior.num_nodes)], "a list, not a tensor"))
    try:   # a list of one number per node is taken as a tensor
        out = in_process("run", f"hydra.run.dir={tmp_path / 'list'}", f"data.root={tmp_path / 'cache'}", "dataset=csbm", "dataset.num_nodes=200",
                         "kernel=gcngp_x", "landmarks.count=20", "active=as_list", "active.budgets=[3]")
        assert out.returncode == 0, out.stderr
    finally:
        STRATEGIES.pop("as_list")


@pytest.mark.parametrize("score, said", [
    (lambda sel: torch.zeros(3, dtype=torch.float64), "strategy broken scored a tensor of shape (3,); a strategy's score gives one number per node (200)"),
    (lambda sel: torch.full((sel.posterior.num_nodes,), math.nan, dtype=torch.float64), "strategy broken scored NaN on 40 of the 40 nodes a step may label"),
    (lambda sel: None, "strategy broken scored NoneType, not a tensor of one number per node"),   # AttributeError: 'NoneType' ... 'to'
    (lambda sel: torch.full((sel.posterior.num_nodes,), -math.inf), "strategy broken scored -inf on every node a step may label (40)"),
    (lambda sel: torch.zeros(sel.posterior.num_nodes, dtype=torch.complex64), "strategy broken scored torch.complex64 values"),
])
def test_a_registered_strategys_bad_scores_are_one_line(score, said, tmp_path):
    # a trial: torch's "The size of tensor a (2708) must match ... (3)", and all-NaN scores bought nodes 0, 1, 2
    from gnngp_cli.gp.strategies import Strategy, register_strategy

    register_strategy(Strategy("broken", score, "a strategy with a bug"))
    try:
        out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", "dataset=csbm", "dataset.num_nodes=200",
                         "kernel=gcngp_x", "landmarks.count=20", "active=broken", "active.budgets=[3]")
    finally:
        STRATEGIES.pop("broken")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and len(errors) == 1 and said in errors[0], out.stderr


def test_low_rank_active_run_with_mll_nugget(tmp_path):
    out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", "dataset=csbm", "dataset.num_nodes=200",
                     "kernel=gcngp_x", "landmarks.count=40", "active=v_opt", "active.budgets=[8,16]", "active.batch=4", "fit=mll",
                     "active.model=gcn")
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    assert list(rows["labelled"]) == [8, 16] and (rows["landmarks"] == 40).all() and (rows["fit"] == "mll").all()
    assert rows["gcn_test"].between(0, 1).all() and rows["gcn_macro_f1_all"].between(0, 1).all()   # active.model=gcn: the GCN on the same labels


def test_select_returns_the_nodes_in_order():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 4, generator=g)
    ring = torch.arange(40)
    from torch_geometric.data import Data

    data = Data(x=x, y=torch.arange(40) % 3, edge_index=torch.stack([ring, (ring + 1) % 40]))
    chosen = NodeGP(kernel="gcngp", dtype="float64").select(data, budget=6, strategy="variance", test=torch.arange(30, 40))
    assert len(chosen) == 6 and len(set(chosen)) == 6 and max(chosen) < 30
    batched = NodeGP(kernel="gcngp_x", dtype="float64").select(data, budget=6, strategy="v_opt", test=torch.arange(30, 40), batch=3, nugget=0.3)
    assert len(batched) == 6 and max(batched) < 30
    with pytest.raises(ConfigError, match=r'^strategy="sigmaopt" is not a strategy; did you mean strategy="sigma_opt"\?') as unknown:   # as select takes it
        NodeGP(kernel="gcngp").select(data, budget=6, strategy="sigmaopt", test=torch.arange(30, 40))
    assert "none" not in str(unknown.value)   # the command line's active=none is no strategy of select
    with pytest.raises(ConfigError) as unknown:   # (a trial: 'did you mean strategy="none"?', which select then refuses)
        NodeGP(kernel="gcngp").select(data, budget=6, strategy="nope", test=torch.arange(30, 40))
    assert "none" not in str(unknown.value) and "is not a strategy" in str(unknown.value)
    with pytest.raises(ConfigError, match=r"^batch=500 is more labels a step than the last budget 6; .* give batch of at most 6$"):
        NodeGP(kernel="gcngp").select(data, budget=6, batch=500, test=torch.arange(30, 40))   # (a trial: accepted, each step cut to the budgets)
    with pytest.raises(ConfigError, match=r'^strategy="none" chooses no labels; select needs a strategy, e.g. strategy="sigma_opt"$'):
        NodeGP(kernel="gcngp").select(data, budget=6, strategy="none", test=torch.arange(30, 40))
    with pytest.raises(ConfigError, match=r"^budget=5000: the budget 5000 is above the pool of 30 nodes .*use budgets of at most 30$"):
        NodeGP(kernel="gcngp").select(data, budget=5000, test=torch.arange(30, 40))   # named as select takes it, not active.budgets=[5000]
    with pytest.raises(ConfigError, match=r"^batch=0 must be at least 1"):
        NodeGP(kernel="gcngp").select(data, budget=6, batch=0, test=torch.arange(30, 40))
    with pytest.raises(ConfigError, match=r"^budget=0 must be at least 1 label, e.g. budget=40$"):   # an int, not active.budgets' list
        NodeGP(kernel="gcngp").select(data, budget=0, test=torch.arange(30, 40))
    with pytest.raises(ConfigError, match=r"^budget takes a whole number of labels, e.g. budget=40, not 10.5$"):
        NodeGP(kernel="gcngp").select(data, budget=10.5, test=torch.arange(30, 40))
    import numpy as np   # a whole number of numpy's or a one-entry integer tensor is its number (helper-54: refused as "not a whole number")

    assert NodeGP(kernel="gcngp", dtype="float64").select(data, budget=np.int64(6), strategy="variance", test=torch.arange(30, 40)) == chosen
    assert NodeGP(kernel="gcngp", dtype="float64").select(data, budget=torch.tensor(6), strategy="variance", test=torch.arange(30, 40)) == chosen
    with pytest.raises(ConfigError, match=r"^budget takes a whole number of labels, e.g. budget=40, not tensor\(6.5"):
        NodeGP(kernel="gcngp").select(data, budget=torch.tensor(6.5), test=torch.arange(30, 40))
    with pytest.raises(DatasetError, match=r"^the pool is empty: every one of the graph's 40 nodes is a test node"):
        NodeGP(kernel="gcngp").select(data, budget=6, test=torch.arange(40))
    data.y = torch.randn(40)   # regression: no class probabilities
    with pytest.raises(ConfigError, match='^strategy="entropy" reads class probabilities, and .* is a regression task; use strategy="variance"'):
        NodeGP(kernel="gcngp").select(data, budget=6, strategy="entropy", test=torch.arange(30, 40))


def test_a_graph_loaded_with_its_validation_labels_hidden_fits_with_fit_mll_and_is_refused_by_select():
    """load_dataset(hide_val=True) was refused by a fit it makes none of ("use fit=mll", which
    load_dataset does not take); the model's fit decides: fit=mll fits, select (whose pool holds
    the validation nodes: their hidden labels would be bought) refuses in one line."""
    data = load_dataset("csbm", num_nodes=200, hide_val=True)
    assert not bool(data.val_mask.any())
    assert 0 <= NodeGP(kernel="gcngp", fit="mll").fit(data).score() <= 1
    with pytest.raises(ConfigError, match="needs to choose the nugget"):
        NodeGP(kernel="gcngp").fit(data)
    with pytest.raises(ConfigError, match="dataset.hide_val=true has no place in an active run"):
        NodeGP(kernel="gcngp").select(data, budget=5)


def test_select_reads_every_nodes_label_and_no_training_mask(capfd):
    """An active run has no training set: a graph whose training mask is empty, or of one class,
    is no concern of select (no warning, no refusal); every node's label may be read (the nodes
    bought, the test nodes), so a node without a valid one is refused in one line, naming select."""
    from torch_geometric.data import Data

    ring = torch.arange(40)
    data = Data(x=torch.randn(40, 4, generator=torch.Generator().manual_seed(0)), y=torch.arange(40) % 3,
                edge_index=torch.stack([ring, (ring + 1) % 40]), train_mask=torch.zeros(40, dtype=torch.bool))
    data.train_mask[3] = True   # one training node: one class
    data.test_mask = torch.zeros(40, dtype=torch.bool)
    data.test_mask[30:] = True
    assert len(NodeGP(kernel="gcngp").select(data, budget=6)) == 6
    assert "every training node has class" not in capfd.readouterr().err
    data.y = data.y.clone()
    data.y[5] = -1   # an "unlabelled" pool node: select may buy it
    with pytest.raises(DatasetError, match=r"^y holds negative class ids \(node 5 has -1\).*select reads the label of every node it buys"):
        NodeGP(kernel="gcngp").select(data, budget=6)
    data.y = torch.randn(40, dtype=torch.float64)
    data.y[35] = float("nan")   # a test node's: scored, so read
    with pytest.raises(DatasetError, match=r"1 node has a NaN .*first: node 35.*reads every node's, as it may buy any node but the test ones "
                                           r"and scores the test nodes$"):
        NodeGP(kernel="gcngp").select(data, budget=6, strategy="variance")
    data.y = torch.arange(40) % 3
    data.train_mask = data.test_mask.clone()   # a training mask over the test nodes, and a validation mask too: neither is read
    data.val_mask = data.test_mask.clone()
    assert len(NodeGP(kernel="gcngp").select(data, budget=6)) == 6
    empty = data.clone()
    empty.test_mask = torch.zeros(40, dtype=torch.bool)   # no test node: the rows have nothing to be scored on
    with pytest.raises(DatasetError, match=r"^select needs the test nodes, .*give data.test_mask or select\(data, budget, test=...\) \(data.test_mask holds no node\)$"):
        NodeGP(kernel="gcngp").select(empty, budget=6)
    with pytest.raises(DatasetError, match=r"\(test= holds no node\)$"):
        NodeGP(kernel="gcngp").select(data, budget=6, test=[])
    with pytest.raises(ConfigError, match=r"above the pool of 30 nodes \(every node of the graph but its test nodes\)"):
        NodeGP(kernel="gcngp").select(data, budget=31)


def test_an_active_run_on_a_dataset_whose_training_mask_is_one_class_warns_nothing(tmp_path):
    """gnngp run ... active=...: the dataset's own training mask is not read (the labels are bought
    from the pool), so its one class is not warned of, in the log or in the rows."""
    import numpy as np

    folder = tmp_path / "mine"
    folder.mkdir()
    n = 60
    np.save(folder / "features.npy", np.random.default_rng(0).normal(size=(n, 4)))
    np.save(folder / "labels.npy", np.arange(n) % 3)
    (folder / "edges.csv").write_text("".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    masks = {"train_mask": np.arange(n) == 0, "val_mask": (np.arange(n) >= 40) & (np.arange(n) < 45), "test_mask": np.arange(n) >= 45}
    for name, mask in masks.items():   # one training node: one class
        np.save(folder / f"{name}.npy", mask)
    overlapping = tmp_path / "overlapping"   # training and validation masks over test nodes: an active run reads neither
    overlapping.mkdir()
    for name in ("features.npy", "labels.npy", "edges.csv", "test_mask.npy"):
        (overlapping / name).write_bytes((folder / name).read_bytes())
    np.save(overlapping / "train_mask.npy", np.arange(n) >= 50)
    np.save(overlapping / "val_mask.npy", (np.arange(n) >= 44) & (np.arange(n) < 50))
    for folder_, active, expected in ((overlapping, True, None), (overlapping, False, "training nodes overlap validation or test nodes")):
        out = in_process("run", f"hydra.run.dir={tmp_path / ('run_' + str(active))}", f"data.root={tmp_path / 'cache'}", "dataset=custom",
                         f"dataset.path={folder_}", "kernel=gcngp", *(["active=sigma_opt", "active.budgets=[5]"] if active else []))
        if expected is None:
            assert out.returncode == 0, out.stderr
        else:   # a run that reads the masks still refuses them, in one line
            assert out.returncode == 1 and expected in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", "dataset=custom", f"dataset.path={folder}",
                     "kernel=gcngp", "active=sigma_opt", "active.budgets=[5]")
    assert out.returncode == 0, out.stderr
    assert "every training node has class" not in out.stderr + out.stdout
    assert "every training node" not in pd.read_csv(tmp_path / "run" / "results.csv")["extra"].fillna("").str.cat()


BASE = ["dataset=csbm", "dataset.num_nodes=200", "kernel=gcngp"]


@pytest.mark.parametrize("overrides, message", [
    (["active=sigma_opt", "active.batch=-1"], "active.batch=-1 must be at least 1"),
    (["active=sigma_opt", "active.budgets=[20,10]"], "must increase"),
    (["active=sigma_opt", "active.budgets=[0,10]"], "label counts of at least 1"),
    (["active=sigma_opt", "active.initial=30", "active.budgets=[10,20]"], "active.initial=30 must be from 0 to the first budget 10"),
    (["active=random", "compute=dask"], "use compute=local"),
    (["active=random", "gnn=gcn"], "selects labels from a GP's posterior; use a GP kernel"),
    (["active=random", "likelihood=dirichlet"], "likelihood=dirichlet has no place in an active run"),
    (["active.batch=2"], "active.batch=2 has no effect on this run"),
    (["active.model=gcn"], "active.model=gcn has no effect on this run"),
    (["active=random", "active.model=gat"], "active.model='gat' is not valid"),
    (["active=random", "active.nugget=0.2", "fit=mll"], "active.nugget=0.2 has no effect on this run"),
    (["active=random", "fit.steps=10", "fit=mll"], "fit.steps=10 has no effect on this run"),
    (["active=age", "active.epochs=0"], "active.epochs=0 must be at least 1"),
    (["active=random", "active.epochs=5"], "active.epochs=5 has no effect on this run"),
    # the pool holds the validation nodes: hidden labels would be bought (helper-54: 500 of Cora's at a budget of 1,708, exit 0)
    (["active=random", "dataset.hide_val=true"], "dataset.hide_val=true has no place in an active run: .* drop dataset.hide_val"),
    # rbf's default: nothing on the command line to drop, so the message says what to set
    (["active=random", "kernel=rbf"], "set kernel.gamma_search=false"),
])
def test_bad_active_options_are_one_line_errors(overrides, message):
    base = [o.replace("kernel=gcngp", "kernel=gcngp_x") for o in BASE] if "compute=dask" in overrides else BASE
    base = [o for o in base if not o.startswith("kernel=")] if any(o.startswith(("gnn=", "kernel=")) for o in overrides) else base
    with pytest.raises(ConfigError, match=message):
        validate(compose([*base, *overrides]))


def test_unknown_strategy_lists_the_choices(tmp_path):
    out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", *BASE, "active=sigmaopt")
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1 and "did you mean active=sigma_opt" in errors[0] and "v_opt" in errors[0]


@pytest.mark.parametrize("overrides, message", [
    (["active=sigma_opt", "active.budgets=[10,500]"], "the budget 500 is above the pool"),
    (["active=sigma_opt", "active.budgets=[10,20]", "max_memory_gb=0.001"], "use the low-rank kernel \\(kernel=gcngp_x\\)"),
    (["kernel=gcngp_x", "landmarks.count=40", "active=v_opt", "active.budgets=[10,20]", "max_memory_gb=0.001"],
     "needs about .* at its peak .*use fewer landmarks \\(landmarks.count\\)"),
    (["kernel=gprgp", "active=sigma_opt", "active.budgets=[10]"], "kernel=gprgp chooses kernel.coefficients among candidates"),
])
def test_refusals_once_the_graph_is_loaded_are_one_line(tmp_path, overrides, message):
    own_kernel = any(o.startswith("kernel=") for o in overrides)
    base = [b for b in BASE if not (own_kernel and b.startswith("kernel="))]
    out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", *base, *overrides)
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and len(errors) == 1, out.stderr
    assert re.search(message, errors[0]), errors[0]


def test_age_score_ingredients_are_percentiles_on_a_toy_example():
    """AGE's percentiles (perc: the share of nodes strictly below; percd: strictly above), its weights
    (gamma ~ Beta(1, 1.005 - 0.9^t), alpha = beta = (1 - gamma) / 2) and its three ingredients apart."""
    from gnngp_cli.gp.strategies import age_scores, age_weights, percentile, percentile_closer

    values = torch.tensor([3.0, 1.0, 2.0, 2.0], dtype=torch.float64)
    assert percentile(values).tolist() == [0.75, 0.0, 0.25, 0.25]
    assert percentile_closer(values).tolist() == [0.0, 0.75, 0.25, 0.25]
    g = torch.Generator().manual_seed(0)
    early = [age_weights(0, g) for _ in range(200)]   # Beta(1, 0.005): gamma near 1, centrality first
    late = [age_weights(60, g) for _ in range(4000)]   # Beta(1, ~1.005): gamma ~ uniform, mean 1 / (1 + b)
    assert all(a == b and a + b + c == pytest.approx(1.0) for a, b, c in early + late)
    assert sum(c for _, _, c in early) / len(early) > 0.95
    assert sum(c for _, _, c in late) / len(late) == pytest.approx(1 / (1 + 1.005 - 0.9 ** 60), abs=0.02)
    # two classes: three sure nodes of each and one unsure node between, nearer the first cluster
    p = torch.tensor([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 3 + [[0.6, 0.4]], dtype=torch.float64)
    pagerank = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.05], dtype=torch.float64)
    entropy = age_scores(p, pagerank, (1.0, 0.0, 0.0), g)
    assert entropy.tolist() == pytest.approx([0.0] * 6 + [6 / 7])   # the unsure node: the highest entropy
    density = age_scores(p, pagerank, (0.0, 1.0, 0.0), g)           # centres [0.9, 0.1] and [0, 1]: the second cluster nearest
    assert density.tolist() == pytest.approx([1 / 7] * 3 + [4 / 7] * 3 + [0.0])
    centrality = age_scores(p, pagerank, (0.0, 0.0, 1.0), g)
    assert centrality.tolist() == pytest.approx([1 / 7, 2 / 7, 3 / 7, 4 / 7, 5 / 7, 6 / 7, 0.0])


def test_age_retrains_the_gcn_per_step_and_picks_distinct_pool_nodes(tmp_path):
    """active=age end to end: the GCN trained at each step inside the selection's seconds, distinct
    nodes from the pool only (never a test node); with no label yet, PageRank alone picks."""
    import gnngp_cli.job.active_job as active_job

    trained = []
    train_gnn = active_job.train_gnn

    def counted(options, data, *args, **kwargs):
        assert kwargs.get("last_epoch") is True   # no validation set: the model after its last epoch
        trained.append((int(data.train_mask.sum()), options.epochs, options.hidden))
        return train_gnn(options, data, *args, **kwargs)

    active_job.train_gnn = counted
    try:
        out = in_process("run", f"hydra.run.dir={tmp_path / 'run'}", f"data.root={tmp_path / 'cache'}", "dataset=csbm", "dataset.num_nodes=120",
                         "kernel=gcngp_x", "landmarks.count=20", "active=age", "active.budgets=[3,5]", "active.epochs=3")
    finally:
        active_job.train_gnn = train_gnn
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    assert list(rows["labelled"]) == [3, 5] and (rows["strategy"] == "age").all() and rows["selection_seconds"].is_monotonic_increasing
    nodes = json.loads(rows["extra"].iloc[-1])["active"]["nodes"]
    assert len(set(nodes)) == 5 and trained == [(k, 3, 16) for k in range(1, 5)]   # a GCN per step after the first label: active.epochs, AGE's 16 units
    from gnngp_cli.api import load_dataset
    from gnngp_cli.data.protocols import centrality

    data = load_dataset("csbm", num_nodes=120, data={"root": str(tmp_path / "cache")})
    test = torch.as_tensor(data.test_mask)
    assert not test[torch.tensor(nodes)].any()
    pagerank = centrality(data.edge_index, 120, "pagerank")
    assert nodes[0] == int(torch.argmax(torch.where(test, -1.0, pagerank)))


# --- a stopped selection keeps whole runs only, and resume runs the rest ---------------------------

STOP_DRIVER = r"""
import sys, time
from pathlib import Path

when, marker, results, slow_exit = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "slow-exit"
from gnngp_cli.job import active_job
choose = active_job.choose

def hanging(*args, **kwargs):   # a selection that hangs: the signal lands inside it
    if not marker.is_file() and (when == "first" or (results.is_file() and len(results.read_text().splitlines()) > 1)):
        marker.write_text("selecting")
        time.sleep(60)
    return choose(*args, **kwargs)
active_job.choose = hanging
if slow_exit:   # a clean-up that hangs: a second signal lands inside it
    from gnngp_cli.backends.local import LocalBackend
    close = LocalBackend.__exit__
    def slow(*args, **kwargs):
        marker.with_name("clean-up").write_text("clean-up started")
        time.sleep(60)
        return close(*args, **kwargs)
    LocalBackend.__exit__ = slow
from gnngp_cli.cli.main import main
main(sys.argv[5:])
"""

ACTIVE_RUNS = ["dataset=csbm", "dataset.num_nodes=200", "kernel=gcngp", "active=sigma_opt", "active.budgets=[10,20]", "active.initial=2",
               "runs=2", "dtype=float64"]


def _wait_for(proc, path, deadline: float) -> None:
    while time.time() < deadline and proc.poll() is None and not path.is_file():
        time.sleep(0.02)
    assert proc.poll() is None and path.is_file(), proc.communicate()[1][-3000:]


def _stopped_selection(tmp_path, when: str, sig: int, second: bool = False) -> tuple[subprocess.CompletedProcess, Path]:
    """``gnngp run active=sigma_opt runs=2`` stopped by ``sig`` inside a selection (``when``:
    ``first``, the first run's; ``second``, the second run's, once the first's rows are written);
    with ``second``, stopped again inside the clean-up that follows."""
    run_dir, marker = tmp_path / "run", tmp_path / "selecting"
    results = run_dir / "results.csv"
    proc = subprocess.Popen([sys.executable, "-c", STOP_DRIVER, when, str(marker), str(results), "slow-exit" if second else "-", "run",
                             *ACTIVE_RUNS, f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={run_dir}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 240
    _wait_for(proc, marker, deadline)
    proc.send_signal(sig)
    if second:
        _wait_for(proc, tmp_path / "clean-up", deadline)
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), results


def _one_error_line(done: subprocess.CompletedProcess, sig: int) -> str:
    assert done.returncode == 128 + sig and "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


def _whole_runs(rows: pd.DataFrame, runs: int) -> None:
    """Each run a row per budget, in order, each row at its budget: never a curve cut short."""
    assert rows["run"].tolist() == [r for r in range(runs) for _ in (10, 20)] and rows["budget"].tolist() == [10, 20] * runs
    assert (rows["labelled"] == rows["budget"]).all() and (rows["status"] == "ok").all()
    assert [len(json.loads(extra)["active"]["nodes"]) for extra in rows["extra"]] == rows["budget"].tolist()


@pytest.mark.paper  # a fresh process, then two runs in this one (10-20 s on the 2-core machine): runs in CI with -m paper
@pytest.mark.parametrize("sig, name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
def test_a_stop_midway_through_a_selection_keeps_whole_runs_and_resume_runs_the_rest(tmp_path, sig, name):
    """Stopped inside the second run's selection: the first run's learning curve is on disk whole,
    nothing of the second; the line counts runs, not rows; resume runs the second run alone, as
    an uninterrupted job does."""
    done, results = _stopped_selection(tmp_path, "second", sig)
    error = _one_error_line(done, sig)
    assert error.startswith(f"gnngp: error: stopped by {name}: the 1 run(s) finished in this job are in {results}"), error
    kept = pd.read_csv(results)
    _whole_runs(kept, 1)
    resume = ("run", *ACTIVE_RUNS, f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'run'}", "resume=true")
    again = in_process(*resume)
    assert again.returncode == 0, again.stderr
    assert "holds 1 finished run " in again.stderr + again.stdout
    table = pd.read_csv(results)
    _whole_runs(table, 2)
    assert table.iloc[:2].equals(kept)   # the kept rows, untouched
    whole = in_process("run", *ACTIVE_RUNS, f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'whole'}")
    assert whole.returncode == 0, whole.stderr
    assert table["extra"].tolist() == pd.read_csv(tmp_path / "whole" / "results.csv")["extra"].tolist()   # the same labels bought


@pytest.mark.paper  # a fresh process per stop (about 10 s on the 2-core machine): runs in CI with -m paper
def test_a_stop_in_the_first_runs_selection_keeps_no_row_and_claims_no_run(tmp_path):
    """Stopped before the first run reached its last budget: no row (its first budget's neither,
    which would stand for a finished run), and the line says so."""
    done, results = _stopped_selection(tmp_path, "first", signal.SIGTERM)
    error = _one_error_line(done, signal.SIGTERM)
    assert error.startswith("gnngp: error: stopped by SIGTERM: no run of this job had finished"), error
    assert not results.is_file() or pd.read_csv(results).empty


@pytest.mark.paper  # a fresh process and a clean-up that hangs until the second signal: runs in CI with -m paper
def test_a_second_signal_during_an_active_jobs_clean_up_keeps_the_whole_runs(tmp_path):
    done, results = _stopped_selection(tmp_path, "second", signal.SIGTERM, second=True)
    error = _one_error_line(done, signal.SIGTERM)
    assert "stopped by SIGTERM during the clean-up after SIGTERM: clean-up cut short" in error, error
    assert f"the 1 run(s) finished in this job are in {results}" in error, error
    _whole_runs(pd.read_csv(results), 1)


@pytest.fixture
def own_stops(monkeypatch):
    """A stop delivered in this process: the command's stop state and signal handlers put back after."""
    from gnngp_cli import stops

    monkeypatch.setattr(stops, "_STATE", stops._Stops())
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def test_a_stop_between_the_rows_of_a_run_waits_until_its_last_is_written(tmp_path, monkeypatch, own_stops):
    """A SIGTERM as the first budget's row is written is delivered after the run's last row: the
    file never holds a learning curve cut short (which resume would take for a finished run)."""
    from gnngp_cli.cli import execute

    append = execute.append_rows

    def stopped_after_the_first(path, rows, **kwargs):
        out = append(path, rows, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return out
    monkeypatch.setattr(execute, "append_rows", stopped_after_the_first)
    done = in_process("run", *ACTIVE_RUNS, f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 143 and "stopped by SIGTERM: the 1 run(s) finished" in done.stderr, done.stderr
    _whole_runs(pd.read_csv(tmp_path / "run" / "results.csv"), 1)


def test_resume_runs_again_a_learning_curve_cut_short(tmp_path):
    """A results file whose last run holds its first budget only (a process killed between its
    rows): resume keeps it aside and runs the job again, never taking the run for finished."""
    args = ("run", *ACTIVE_RUNS, f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert in_process(*args).returncode == 0
    results = tmp_path / "run" / "results.csv"
    whole = pd.read_csv(results)
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:4]))   # run 1 at budget 10 only
    again = in_process(*args, "resume=true")
    assert again.returncode == 0, again.stderr
    assert "its run 1 holds the budgets [10], not [10, 20] (a learning curve cut short); running it again" in again.stderr + again.stdout
    table = pd.read_csv(results)
    _whole_runs(table, 2)
    assert table["extra"].tolist() == whole["extra"].tolist()
    assert len(list((tmp_path / "run").glob("results.before-resume-*.csv"))) == 1


def test_the_gcn_of_an_active_run_is_the_model_after_its_last_epoch(tmp_path):
    """No validation set: the GCN trained on the labels bought is taken after its last epoch, no
    epoch evaluated before it (choosing the epoch on the labels themselves took the first that fitted
    them, a GCN barely trained); the best-epoch choice of a normal run is unchanged."""
    from dataclasses import replace

    from gnngp_cli.api import load_dataset
    from gnngp_cli.gnn import GNNS
    from gnngp_cli.gnn.training import train_gnn
    from gnngp_cli.runtime import Stopwatch

    data = load_dataset("csbm", num_nodes=120, data={"root": str(tmp_path / "cache")})
    mask = torch.zeros(120, dtype=torch.bool)
    mask[:6] = True
    data.train_mask, data.val_mask = mask, mask.clone()
    options = replace(GNNS["gcn"].config(name="gcn"), layers=2, epochs=30, hidden=16, lr=0.01, dropout=0.5, weight_decay=5e-4)
    watch = lambda: Stopwatch(torch.device("cpu"))   # noqa: E731
    last = train_gnn(options, data, torch.device("cpu"), 0, False, watch, last_epoch=True)
    best = train_gnn(options, data, torch.device("cpu"), 0, False, watch)
    assert last.best_epoch == 30 and last.history == []   # counted from 1, as gnn.epochs
    assert len(best.history) == 30 and best.best_epoch < 30   # the six labels are fitted early: the best-epoch rule stops there
    assert not torch.equal(last.outputs, best.outputs)


def test_a_nugget_swamped_by_float32_round_off_is_one_line_naming_float64():
    """A trial: active.nugget=1e-7 on Cora (float32) raised 'ValueError: math domain error' from a
    square root of a negative posterior variance after 469 labels, a traceback and an error row."""
    x = torch.randn(40, 2, generator=torch.Generator().manual_seed(0))
    k = (x @ x.T).float()   # rank 2: after two labels every variance is round-off
    post = LabelPosterior(Prior(dense=k), 1e-9, 1)
    with pytest.raises(KernelError, match=r"posterior variance came out .* below minus the nugget .* float32 round-off after \d+ labels .* use dtype=float64"):
        for node in range(40):
            post.label(node, torch.zeros(1))
    exact = LabelPosterior(Prior(dense=x.double() @ x.double().T), 1e-9, 1)
    for node in range(40):   # float64's round-off is far below it: every label taken
        exact.label(node, torch.zeros(1, dtype=torch.float64))


def test_a_regressions_prediction_is_centred_on_the_labels_bought():
    """A trial: chameleon (targets of mean 7.6), sigma_opt's test R^2 at 10 labels was -1.08, below
    the labels' own mean (-0.04): the zero-mean GP pulled the nodes far from them toward 0. The
    prediction is m + K_xL (K_LL + s2 I)^-1 (y_L - m) now, m the labels' mean, from the rank-one
    posterior of y beside a column of ones."""
    from gnngp_cli.job.active_job import centred, labels_bought

    g = torch.Generator().manual_seed(0)
    x = torch.randn(30, 4, generator=g, dtype=torch.float64)
    k = x @ x.T + 0.5
    y = 7.6 + 2.0 * torch.randn(30, generator=g, dtype=torch.float64)
    targets = torch.stack([y, torch.ones_like(y)], 1)
    post = LabelPosterior(Prior(dense=k), 0.1, 2)
    order = [3, 11, 17, 25]
    for node in order:
        post.label(node, targets[node])
    m = y[order].mean()
    L = torch.tensor(order)
    expected = m + k[:, L] @ torch.linalg.solve(k[L][:, L] + 0.1 * torch.eye(4, dtype=torch.float64), y[L] - m)
    torch.testing.assert_close(centred(post.mean, order, y)[:, 0], expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(labels_bought(targets, order, "regression")[:, 0], y[L] - m)


def test_a_kernels_own_warning_is_kept_in_an_active_runs_rows(data_overrides):
    """An adversary's trial: GATGP's depth warning (L>=4) was in a plain run's row but not in an
    active run's (only on the console)."""
    import json

    from gnngp_cli.api import run

    rows = run(["dataset=cora", "kernel=gatgp_x", "kernel.layers=4", "landmarks.count=50", "active=random", "active.budgets=[5]",
                "progress=false", *data_overrides])
    assert any("GATGP with L=4" in w for w in json.loads(rows[0]["extra"])["warnings"])


def test_selects_round_off_error_names_selects_own_arguments():
    """An adversary's trial: NodeGP.select's float32 round-off error named the command line's
    active.nugget, not select's nugget= or NodeGP's dtype."""
    from torch_geometric.data import Data

    from gnngp_cli import NodeGP

    x = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    ring = torch.arange(60)
    data = Data(x=x, y=torch.arange(60) % 3, edge_index=torch.stack([ring, (ring + 1) % 60]))
    with pytest.raises(KernelError, match=r'use NodeGP\(\.\.\., dtype="float64"\), or a larger nugget \(select\(\.\.\., nugget=\.\.\.\)'):
        NodeGP(kernel="gcngp").select(data, budget=50, strategy="random", nugget=1e-9, test=torch.arange(55, 60))
