"""The metric registry: every metric's state reduces over row groups (as on Dask's row blocks)
to the value of one group (as locally), whatever the split into groups; and the registry's
arithmetic equals the plain definitions."""
import math

import pytest
import torch

from gnngp_cli.metrics import METRICS, MetricInput, Scores, merge_scores


def prediction_for(metric, n: int = 90, columns: int = 4, seed: int = 0) -> MetricInput:
    """A random prediction of a task the metric fits (``columns`` nuggets), with variances."""
    g = torch.Generator().manual_seed(seed)
    classes = metric.classes or (3 if "classification" in metric.tasks else 1)
    if "classification" in metric.tasks:
        y = torch.randint(classes, (n,), generator=g)
        mean = torch.randn(n, columns, classes, generator=g, dtype=torch.float64) + torch.nn.functional.one_hot(y, classes)[:, None, :]
    else:
        y = torch.randn(n, generator=g, dtype=torch.float64) * 3 + 10
        mean = (y[:, None] + torch.randn(n, columns, generator=g, dtype=torch.float64))[:, :, None]
    variance = torch.rand(n, columns, generator=g, dtype=torch.float64) + 0.1
    if metric.probabilistic:   # class probabilities at one nugget, a third of the rows out of distribution
        mean, variance = mean[:, :1], variance[:, :1]
        ood = torch.rand(n, generator=g) < 0.33
        return MetricInput(mean, y, variance, noise=0.2, output_scale=1.5, probs=torch.softmax(mean[:, 0], 1), ood=ood)
    return MetricInput(mean, y, variance, noise=0.2, output_scale=1.5)


def rows(p: MetricInput, index: torch.Tensor) -> MetricInput:
    return MetricInput(p.mean[index], p.y[index], p.variance[index], p.noise, p.output_scale,
                      None if p.probs is None else p.probs[index], None if p.ood is None else p.ood[index])


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("cuts", [(30, 60), (1, 2), (0, 45)], ids=["thirds", "tiny groups", "an empty group"])
def test_a_state_reduced_over_row_groups_gives_the_value_of_one_group(name, cuts):
    metric = METRICS[name]
    p = prediction_for(metric)
    whole = metric.value(p)
    bounds = (0, *cuts, p.y.numel())
    parts = []
    for lo, hi in zip(bounds, bounds[1:]):
        scores = Scores()
        scores.add(name, metric, rows(p, torch.arange(lo, hi)))
        parts.append(scores)
    reduced = merge_scores(merge_scores(parts[0], parts[1]), parts[2]).value(name)    # a tree, as Dask's reduction
    torch.testing.assert_close(reduced, whole, rtol=1e-12, atol=1e-12)
    assert whole.numel() == p.columns


def test_the_registry_computes_the_plain_definitions():
    p = prediction_for(METRICS["accuracy"])
    assert METRICS["accuracy"].value(p).tolist() == (p.mean.argmax(2) == p.y[:, None]).double().mean(0).tolist()
    r = prediction_for(METRICS["r2"])
    sse = ((r.mean[:, :, 0] - r.y[:, None]) ** 2).sum(0)
    torch.testing.assert_close(METRICS["r2"].value(r), 1 - sse / ((r.y - r.y.mean()) ** 2).sum())
    var = r.output_scale * (r.variance + r.noise)
    err = (r.mean[:, :, 0] - r.y[:, None]) ** 2
    torch.testing.assert_close(METRICS["nlpd"].value(r), (0.5 * (torch.log(2 * math.pi * var) + err / var)).mean(0))
    torch.testing.assert_close(METRICS["coverage95"].value(r), (err <= 1.959963984540054 ** 2 * var).double().mean(0))
    right = p.mean.argmax(2) == p.y[:, None]
    torch.testing.assert_close(METRICS["var_correct"].value(p), (p.variance * right).sum(0) / right.sum(0))
    torch.testing.assert_close(METRICS["var_wrong"].value(p), (p.variance * ~right).sum(0) / (~right).sum(0))


def test_an_empty_split_is_nan_not_an_error():
    for name, metric in METRICS.items():
        p = prediction_for(metric)
        assert bool(torch.isnan(metric.value(rows(p, torch.arange(0)))).all()), name


def test_every_metric_pickles_as_it_is():
    """Dask sends the metrics to its workers: module-level functions (and partials of them) pickle
    with plain pickle; a lambda or a closure made distributed fall back to cloudpickle, and its
    failed first try once surfaced in a test as an unraisable error."""
    import pickle

    from gnngp_cli.metrics import METRICS

    for name, metric in METRICS.items():
        again = pickle.loads(pickle.dumps(metric))
        assert again.name == name and again.default("classification", 3) == metric.default("classification", 3)


def test_the_misclassification_auroc_and_ece_read_the_same_wrong_nodes():
    """Where the class probabilities reorder the posterior mean's close classes, the
    misclassification AUROC marks a node wrong by the probabilities' argmax, as ECE does
    (the calibration error bins each node's top probability and whether its argmax is the label),
    not by the mean's."""
    from gnngp_cli.metrics import misclassified

    g = torch.Generator().manual_seed(3)
    n, c = 400, 4
    y = torch.randint(c, (n,), generator=g)
    mean = torch.randn(n, 1, c, generator=g, dtype=torch.float64)
    probs = torch.softmax(mean[:, 0] + 0.8 * torch.randn(n, c, generator=g, dtype=torch.float64), 1)   # reorders some close classes
    p = MetricInput(mean, y, torch.rand(n, 1, generator=g, dtype=torch.float64) + 0.1, noise=0.2, output_scale=1.0, probs=probs)
    by_probs, by_mean = probs.argmax(1) != y, mean[:, 0].argmax(1) != y
    assert int((by_probs != by_mean).sum()) > 20                       # the two rules differ on this input
    assert torch.equal(misclassified(p), by_probs)
    state = METRICS["auroc_entropy"].partial(p)
    assert torch.equal(state["positive"].bool(), by_probs)
    # ECE's own accuracy: a perfectly calibrated-by-construction check, its wrong nodes are probs' argmax
    ece = float(METRICS["ece"].compute(METRICS["ece"].partial(p)))
    confidence = probs.amax(1)
    bins = torch.clamp((confidence * 15).ceil().long() - 1, 0, 14)
    expected = sum(abs(float((~by_probs[bins == b]).double().mean() - confidence[bins == b].mean())) * int((bins == b).sum()) / n
                   for b in range(15) if bool((bins == b).any()))
    assert abs(ece - expected) < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_ranking_and_calibration_arithmetic_equals_torchmetrics_and_scikit_learn(seed):
    """gnngp's ROC-AUC, AUPR, ECE and MCE (:mod:`gnngp_cli.metrics`: a few lines each, so that no run
    imports torchmetrics) are torchmetrics' and scikit-learn's, on scores with many ties and on
    probabilities with confidences exactly on the bins' edges and exactly 1."""
    tm = pytest.importorskip("torchmetrics.functional.classification")
    skm = pytest.importorskip("sklearn.metrics")
    from gnngp_cli.metrics import binary_auroc, binary_average_precision, calibration_error

    g = torch.Generator().manual_seed(seed)
    n = 500
    scores = torch.round(torch.rand(n, generator=g, dtype=torch.float64) * 20) / 20   # ties: 21 distinct values
    positive = torch.rand(n, generator=g) < 0.3
    for ours, theirs, sk in ((binary_auroc, tm.binary_auroc, skm.roc_auc_score),
                             (binary_average_precision, tm.binary_average_precision, skm.average_precision_score)):
        value = float(ours(scores, positive))
        assert value == pytest.approx(float(theirs(scores, positive.long(), thresholds=None)), abs=1e-6)
        assert value == pytest.approx(float(sk(positive.numpy(), scores.numpy())), abs=1e-12)
    c = 5
    probs = torch.softmax(3 * torch.randn(n, c, generator=g, dtype=torch.float64), 1)
    probs[:40] = torch.nn.functional.one_hot(torch.randint(c, (40,), generator=g), c).double()   # confidence exactly 1
    edge = torch.arange(40, 80)
    probs[edge] = 0.0
    probs[edge, 0] = torch.tensor([k / 15 for k in range(6, 14)], dtype=torch.float64).repeat(5)   # confidences on the edges
    probs[edge, 1] = 1 - probs[edge, 0]
    y = torch.randint(c, (n,), generator=g)
    for norm in ("l1", "max"):
        ours = float(calibration_error(probs, y, 15, norm))
        assert ours == pytest.approx(float(tm.multiclass_calibration_error(probs, y, num_classes=c, n_bins=15, norm=norm)), abs=1e-6)
    one_class = torch.ones(n, 1, dtype=torch.float64)   # training nodes of one class: the probability 1, right or wrong
    assert float(calibration_error(one_class, y, 15, "l1")) == pytest.approx(float((y != 0).double().mean()))
