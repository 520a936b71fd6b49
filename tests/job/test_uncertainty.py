"""Uncertainty (issue 24): the Dirichlet likelihood, class probabilities, calibration and
detection metrics, the protocols' splits, the GCN baselines' probabilities, and bad input."""
from __future__ import annotations

import math

import pytest
import torch
from helpers import local_and_dask_rows, run

from gnngp_cli.api import compose
from gnngp_cli.backends.local import LocalBackend
from gnngp_cli.data.protocols import centrality
from gnngp_cli.job.gp_job import GPJob
from gnngp_cli.gp.posterior import ExactPosterior, LowRankPosterior
from gnngp_cli.gp.sufficient import TrainingStatistics, low_rank_statistics
from gnngp_cli.gp.likelihoods import DirichletPosterior, dirichlet_targets
from gnngp_cli.job.loading import load_graph
from gnngp_cli.metrics import METRICS, MetricInput
from gnngp_cli.gp.probabilities import class_probabilities
from gnngp_cli.metrics import entropy

CSBM = ["dataset=csbm", "dataset.num_nodes=400", "dataset.num_classes=4", "dataset.train_ratio=0.3", "dataset.val_ratio=0.2"]


# --- the Dirichlet likelihood --------------------------------------------------------------

def test_dirichlet_targets_and_noise_are_gpytorchs():
    gpytorch = pytest.importorskip("gpytorch")
    labels = torch.tensor([0, 2, 1, 2, 0, 3])
    for alpha in (0.01, 0.1):
        lk = gpytorch.likelihoods.DirichletClassificationLikelihood(labels, alpha_epsilon=alpha, dtype=torch.float64)
        targets, noise = dirichlet_targets(labels, 4, alpha)
        torch.testing.assert_close(targets, lk.transformed_targets.T, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(noise, lk.noise.T if lk.noise.dim() == 2 else lk.second_noise_covar.noise.T, rtol=1e-12, atol=1e-12)


def _dense_dirichlet(k: torch.Tensor, train: torch.Tensor, labels: torch.Tensor, classes: int, alpha: float, eps: float):
    """The Dirichlet GP's means and latent variances by a direct solve (the definition)."""
    targets, noise = dirichlet_targets(labels, classes, alpha)
    shift = float(targets.mean())   # the shared prior mean (balanced labels: every class's mean target)
    means, variances = [], []
    kbb = k[train][:, train]
    for c in range(classes):
        system = kbb + eps * torch.diag(noise[:, c])
        means.append(k[:, train] @ torch.linalg.solve(system, targets[:, c] - shift) + shift)
        variances.append((torch.diagonal(k) - (k[:, train] * torch.linalg.solve(system, k[train]).T).sum(1)) / eps)
    return torch.stack(means, 1), torch.stack(variances, 1)


def test_dirichlet_posterior_is_the_direct_solve_exact_and_low_rank():
    torch.manual_seed(0)
    n, r, classes, alpha, eps = 30, 12, 3, 0.05, 0.3
    q = torch.randn(n, r, dtype=torch.float64)
    k = q @ q.T
    train = torch.arange(0, n, 2)
    labels = torch.arange(train.numel()) % classes
    one_hot = torch.nn.functional.one_hot(labels, classes).double()
    direct_mean, direct_var = _dense_dirichlet(k, train, labels, classes, alpha, eps)
    every = torch.arange(n)
    e = torch.tensor(eps, dtype=torch.float64)
    exact = DirichletPosterior(TrainingStatistics("exact", k[train][:, train], one_hot, 0.0, train.numel(), float(k.trace()), n), alpha)
    features = k[:, train]
    torch.testing.assert_close(exact.mean(features, every, e), direct_mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(exact.variance(features, every, e, torch.diagonal(k)), direct_var, rtol=1e-7, atol=1e-8)
    low = DirichletPosterior(low_rank_statistics(q, train, one_hot, n, per_class=True), alpha)
    torch.testing.assert_close(low.mean(q, every, e), direct_mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(low.variance(q, every, e, None), direct_var, rtol=1e-7, atol=1e-8)
    grid = low.grid_means(q, every, torch.tensor([eps, 2 * eps], dtype=torch.float64))
    torch.testing.assert_close(grid[:, 0], direct_mean, rtol=1e-8, atol=1e-8)


def test_low_rank_statistics_per_class_add_over_row_blocks():
    torch.manual_seed(1)
    q = torch.randn(40, 5, dtype=torch.float64)
    y = torch.nn.functional.one_hot(torch.arange(40) % 3, 3).double()
    whole = low_rank_statistics(q, torch.arange(40), y, 40, per_class=True)
    parts = low_rank_statistics(q[:17], torch.arange(17), y[:17], 40, per_class=True) + \
        low_rank_statistics(q[17:], torch.arange(23), y[17:], 40, per_class=True)
    for key in ("gram", "rhs", "class_grams", "column_sum"):
        torch.testing.assert_close(getattr(parts, key), getattr(whole, key))
    torch.testing.assert_close(whole.class_grams.sum(0), whole.gram)


def test_the_gaussian_posteriors_are_unchanged_by_a_per_class_statistics():
    q = torch.randn(20, 4, dtype=torch.float64)
    y = torch.nn.functional.one_hot(torch.arange(20) % 2, 2).double()
    a = LowRankPosterior(low_rank_statistics(q, torch.arange(10), y[:10], 20))
    b = LowRankPosterior(low_rank_statistics(q, torch.arange(10), y[:10], 20, per_class=True))
    eps = torch.tensor(0.1, dtype=torch.float64)
    torch.testing.assert_close(a.mean(q, torch.arange(20), eps), b.mean(q, torch.arange(20), eps))
    assert isinstance(ExactPosterior, type)


# --- probabilities -------------------------------------------------------------------------

@pytest.mark.parametrize("approx", ["mc", "probit"])
@pytest.mark.parametrize("shared", [True, False])
def test_probabilities_sum_to_one_and_follow_the_mean(approx, shared):
    torch.manual_seed(2)
    mean = torch.randn(50, 5, dtype=torch.float64) * 3
    variance = torch.rand(50, dtype=torch.float64) if shared else torch.rand(50, 5, dtype=torch.float64)
    for t in (0.1, 1.0, 10.0):
        p = class_probabilities(mean, variance, approx, 128, t)
        assert p.shape == (50, 5) and bool((p >= 0).all())
        torch.testing.assert_close(p.sum(1), torch.ones(50, dtype=torch.float64))
    point = class_probabilities(mean, torch.zeros(50, dtype=torch.float64), approx, 64)
    torch.testing.assert_close(point, torch.softmax(mean, 1), rtol=1e-10, atol=1e-12)   # no variance: the softmax
    wide = class_probabilities(mean, torch.full((50,), 100.0, dtype=torch.float64), approx, 256)
    assert float(entropy(wide).mean()) > float(entropy(point).mean())   # more variance: flatter


def test_monte_carlo_probabilities_do_not_depend_on_the_rows_computed_together():
    mean, variance = torch.randn(30, 3, dtype=torch.float64), torch.rand(30, dtype=torch.float64)
    whole = class_probabilities(mean, variance, "mc", 64)
    torch.testing.assert_close(torch.cat([class_probabilities(mean[:11], variance[:11], "mc", 64),
                                          class_probabilities(mean[11:], variance[11:], "mc", 64)]), whole)


# --- metrics against hand-computed values --------------------------------------------------

def _prediction(probs, y, ood=None, variance=None):
    probs = torch.tensor(probs, dtype=torch.float64)
    y = torch.tensor(y)
    return MetricInput(torch.log(probs)[:, None, :], y, variance, probs=probs, ood=ood)


def test_nll_brier_ece_mce_by_hand():
    p = _prediction([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]], [0, 1, 1, 0])
    nll = -(math.log(0.9) + math.log(0.4) + math.log(0.7) + math.log(0.8)) / 4
    brier = (2 * 0.1 ** 2 + 2 * 0.6 ** 2 + 2 * 0.3 ** 2 + 2 * 0.2 ** 2) / 4
    # confidences 0.9 (right), 0.6 (wrong), 0.7 (right), 0.8 (right): one per 15-bin, |acc - conf| each
    gaps = [abs(1 - 0.9), abs(0 - 0.6), abs(1 - 0.7), abs(1 - 0.8)]
    assert float(METRICS["nll"].value(p)[0]) == pytest.approx(nll)
    assert float(METRICS["brier"].value(p)[0]) == pytest.approx(brier)
    assert float(METRICS["ece"].value(p)[0]) == pytest.approx(sum(gaps) / 4, abs=1e-6)
    assert float(METRICS["mce"].value(p)[0]) == pytest.approx(max(gaps), abs=1e-6)


def test_detection_auroc_and_aupr_by_hand_and_calibration_reads_in_distribution_rows():
    ood = torch.tensor([False, False, True, True])
    p = _prediction([[0.9, 0.1], [0.8, 0.2], [0.55, 0.45], [0.7, 0.3]], [0, 0, 1, 1], ood=ood)
    # 1 - max p: 0.1, 0.2, 0.45, 0.3: the OOD rows score highest: AUROC 1, AUPR 1
    assert float(METRICS["auroc_maxprob"].value(p)[0]) == pytest.approx(1.0)
    assert float(METRICS["aupr_maxprob"].value(p)[0]) == pytest.approx(1.0)
    assert float(METRICS["nll"].value(p)[0]) == pytest.approx(-(math.log(0.9) + math.log(0.8)) / 2)   # ID rows only
    flipped = _prediction([[0.55, 0.45], [0.7, 0.3], [0.9, 0.1], [0.8, 0.2]], [0, 0, 1, 1], ood=ood)
    assert float(METRICS["auroc_maxprob"].value(flipped)[0]) == pytest.approx(0.0)
    # misclassification detection (no OOD rows): wrong rows 1 and 2 (scores 0.4, 0.3) among 0.1, 0.2
    mis = _prediction([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]], [0, 1, 0, 0])
    assert float(METRICS["auroc_maxprob"].value(mis)[0]) == pytest.approx(1.0)
    assert math.isnan(float(METRICS["auroc_variance"].value(mis)[0]))   # no variance: NaN, never a made-up number


# --- protocols -----------------------------------------------------------------------------

def _graph(protocol: str, seed: int, *more: str, cache=None):
    return load_graph(compose([*CSBM, "kernel=gcngp", f"protocol={protocol}", f"seed={seed}", *more, f"data.root={cache}"])).data


@pytest.mark.paper   # 15 graphs loaded: with the slow tests (the fast suite is near its budget)
@pytest.mark.parametrize("protocol", ["leave_out_classes", "feature_shift", "structural_shift"])
def test_protocol_splits_are_disjoint_reproducible_and_seeded(protocol, cache):
    a, b = _graph(protocol, 3, cache=cache), _graph(protocol, 3, cache=cache)
    others = [_graph(protocol, seed, cache=cache) for seed in (4, 5, 6)]
    masks = [a.train_mask, a.val_mask, a.test_mask]
    assert int(sum(m.long() for m in masks).max()) == 1                     # disjoint
    assert bool(a.ood_mask.any()) and not bool((a.ood_mask & ~a.test_mask).any())   # OOD nodes are test nodes
    for key in ("train_mask", "val_mask", "test_mask", "ood_mask"):
        assert torch.equal(a[key], b[key])                                   # the same seed: the same split
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    drawn = "train_mask" if protocol == "structural_shift" else "ood_mask"   # the periphery is the graph's; the core's split is drawn
    assert any(not torch.equal(a[drawn], other[drawn]) for other in others)   # another seed: another draw
    if protocol == "leave_out_classes":
        assert a.num_classes == 3 and int(a.y[a.train_mask | a.val_mask].max()) < 3
        assert bool((a.y[a.ood_mask] == 3).all()) and not bool((a.y[a.test_mask & ~a.ood_mask] == 3).any())


def test_structural_shift_trains_on_the_central_half():
    data = _graph("structural_shift", 0, cache=None)
    rank = centrality(data.edge_index, int(data.num_nodes))
    assert float(rank[data.train_mask].min()) >= float(rank[data.ood_mask].max())
    assert int(data.ood_mask.sum()) == 200 and int(data.train_mask.sum()) == 120


def test_a_gp_under_leave_out_classes_scores_seen_classes_and_detects_the_others(cache):
    cfg = compose([*CSBM, "kernel=gcngp", "protocol=leave_out_classes", "likelihood=dirichlet", f"data.root={cache}"])
    backend = LocalBackend(cfg)
    with backend:
        row = GPJob(cfg, backend).run(0).row
    assert row["protocol"] == "leave_out_classes" and row["likelihood"] == "dirichlet"
    assert 0.5 < row["test"] <= 1 and 0.5 < row["auroc_entropy"] <= 1 and 0 <= row["ece"] <= 1
    assert "test_ood" not in row   # the left-out classes have no prediction to score


# --- exact = low rank, local = Dask ---------------------------------------------------------

def test_dirichlet_exact_equals_low_rank_with_every_training_node_a_landmark_on_a_linear_kernel(cache):
    """A linear kernel (SGC-like ``composed``: no ReLU) whose landmarks, every training node, are
    as many as the features has an exact low-rank root ``A^2 X``; the exact kernel, whose root
    (features + bias) is wider than the 32 training nodes, goes the exact strategy's way
    (``K[*, b]``, whitened per class). The two give the same posterior to round-off."""
    rows = {}
    for kernel in ("composed", "composed_x"):
        cfg = compose([*CSBM[:3], "dataset.train_ratio=0.08", "dataset.val_ratio=0.2", f"kernel={kernel}", "kernel.sigma_b=1.0", "likelihood=dirichlet",
                       "dtype=float64", f"data.root={cache}"])
        backend = LocalBackend(cfg)
        with backend:
            rows[kernel] = GPJob(cfg, backend).run(0)
    exact, low = rows["composed"], rows["composed_x"]
    assert exact.result.posterior.exact and not low.result.posterior.exact   # the two strategies
    assert exact.row["nugget"] == pytest.approx(low.row["nugget"])
    for key in ("test", "nll", "ece", "brier", "auroc_variance", "alpha"):
        assert exact.row[key] == pytest.approx(low.row[key], rel=1e-6, abs=1e-9), key


@pytest.mark.paper   # a Dask cluster: with the slow tests
def test_dirichlet_on_dask_gives_the_local_row(cache):
    pytest.importorskip("distributed")
    common = [*CSBM, "kernel=gcngp_x", "likelihood=dirichlet", "landmarks.count=40", "dtype=float64", "partition.rows=150",
              "protocol=misclassification", f"data.root={cache}"]
    local, dask = local_and_dask_rows(common)
    for key in ("test", "val", "nugget", "alpha", "nll", "brier", "ece", "mce", "auroc_variance", "auroc_entropy", "aupr_maxprob"):
        assert dask[key] == pytest.approx(local[key], rel=1e-6, abs=1e-9), key


# --- the GCN baselines ------------------------------------------------------------------------

@pytest.mark.paper   # five GCN trainings: with the slow tests
def test_the_four_gcn_baselines_from_one_training(cache):
    from gnngp_cli.job.gnn_job import run_gnn

    cfg = compose([*CSBM, "gnn=gcn", "gnn.epochs=20", "gnn.hidden=16", "gnn.uncertainty=ensemble", "gnn.members=3", "protocol=feature_shift",
                   "progress=false", f"data.root={cache}"])   # gnn.members is read with the ensemble (mc_dropout: its default samples)
    rows = {r["uncertainty"]: r for r in run_gnn(cfg, uncertainties=["softmax", "temperature", "ensemble", "mc_dropout"])}
    assert set(rows) == {"softmax", "temperature", "ensemble", "mc_dropout"}
    assert rows["softmax"]["test"] == rows["temperature"]["test"]          # the same model, rescaled
    assert rows["temperature"]["nll"] <= rows["softmax"]["nll"] + 0.05      # fitted on validation
    assert math.isnan(rows["softmax"]["auroc_variance"]) and not math.isnan(rows["ensemble"]["auroc_variance"])
    assert rows["ensemble"]["train_seconds"] > rows["softmax"]["train_seconds"]
    assert json_members(rows["ensemble"]) == 3
    for row in rows.values():
        assert 0 <= row["ece"] <= 1 and 0 <= row["auroc_entropy"] <= 1 and "test_ood" in row


def json_members(row) -> int:
    import json

    return json.loads(row["extra"])["members"]


# --- bad input: one line, before any work ---------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["dataset=chameleon", "kernel=gcngp", "likelihood=dirichlet"], "regression task; use likelihood=gaussian"),
    (["dataset=chameleon", "kernel=gcngp", "protocol=feature_shift"], "regression task; use protocol=none"),
    (["dataset=minesweeper", "kernel=gcngp_x", "protocol=leave_out_classes"], "needs at least 3 classes"),
    ([*CSBM, "kernel=gcngp", "protocol=leave_out_classes", "protocol.left_out=3"], "keep at least 2"),
    ([*CSBM, "kernel=gcngp", "protocol=feature_shift", "protocol.share=0.001"], "leave at least one node on each side"),
    ([*CSBM, "kernel=gcngp", "protocol=structural_shift", "protocol.shares=[0.5,0.3,0.3]"], "sum below 1"),
    ([*CSBM, "kernel=gcngp_x", "protocol=feature_shift", "compute=dask"], "use compute=local"),
    ([*CSBM, "gnn=gcn", "likelihood=dirichlet"], "gnn.uncertainty"),
    ([*CSBM, "kernel=gcngp", "likelihood=dirichlet", "fit=mll"], "fit=grid"),
    ([*CSBM, "kernel=gcngp", "likelihood=student"], "likelihood"),
    ([*CSBM, "gnn=gcn", "gnn.uncertainty=ensemble", "gnn.members=1"], "at least 2 models"),
    ([*CSBM, "gnn=gcn", "gnn.uncertainty=mc_dropout", "gnn.mc_samples=0"], "at least 2 passes"),
    (["dataset=chameleon_filtered", "kernel=gcngp_x", "protocol=structural_shift", "splits=all"], "drop splits=all"),
])
def test_bad_uncertainty_settings_fail_in_one_line(args, words, tmp_path, mirror):
    code, stderr, row, errors = run(tmp_path, *args, f"data.mirror={mirror}")
    assert code != 0 and len(errors) == 1 and words in errors[0], stderr[-800:]
    assert "Traceback" not in stderr


# --- a protocol applied once; the metric of the graph as loaded -------------------------------

def test_a_protocol_is_applied_once_and_the_callers_graph_is_left_alone(cache):
    from gnngp_cli.api import NodeGP, load_dataset

    settings = {"dataset.num_nodes": 400, "dataset.num_classes": 3, "train_ratio": 0.3, "val_ratio": 0.2, "data": {"root": str(cache)}}
    plain = load_dataset("csbm", **settings)
    y, train = plain.y.clone(), plain.train_mask.clone()
    shifted = load_dataset("csbm", protocol="leave_out_classes", **settings)
    assert shifted.num_classes == 2 and torch.equal(plain.y, y) and torch.equal(plain.train_mask, train)
    gp = NodeGP("gcngp").fit(shifted)                 # the same protocol again: nothing more happens
    assert gp.row["metric"] == "accuracy"             # the metric of the 3-class graph, as the GCN rows have it
    assert gp.score() == gp.row["test"]               # the in-distribution test nodes, as the row
    assert shifted.num_classes == 2 and gp.row["protocol"] == "leave_out_classes"
    with pytest.raises(Exception, match="already went through protocol=leave_out_classes"):
        NodeGP("gcngp", protocol="feature_shift").fit(shifted)


def test_a_gnn_runs_rows_are_handed_over_together_so_a_stop_never_splits_them(cache):
    """A GNN run with several ways of reading its probabilities hands its rows over together (the
    command line writes them in one append with signals held): a SIGTERM as the run's rows are
    handed over stops the job after the whole run, never between its rows (a results file would
    hold a run cut short)."""
    import os
    import signal

    from gnngp_cli.job.gnn_job import run_gnn

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop()

    cfg = compose([*CSBM, "gnn=gcn", "gnn.epochs=2", "gnn.hidden=8", "runs=2", "progress=false", f"data.root={cache}"])
    handed: list[dict] = []

    def on_run(rows):
        handed.extend(rows)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Stop):
            run_gnn(cfg, on_run=on_run, uncertainties=["softmax", "temperature"])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert [r["uncertainty"] for r in handed] == ["softmax", "temperature"] and {r["run"] for r in handed} == {0}
