"""Conformal prediction (issue 47): the scores against their definitions, the coverage
guarantee on exchangeable data, the GP and GNN rows (every backend for the scores that run
there), the random 20/10/70 protocol, and bad settings in one line."""
from __future__ import annotations

import itertools
import json
import math

import pytest
import torch
from helpers import local_and_dask_rows, run

from gnngp_cli.api import compose
from gnngp_cli.backends.local import LocalBackend
from gnngp_cli.conformal import (Calibration, aps_scores, class_ranks, class_scores, conformal_columns, neighbour_mean,
                                 prediction_intervals, prediction_sets, similar_mean, threshold_rank, thresholds)
from gnngp_cli.job.gp_job import GPJob
from gnngp_cli.job.loading import load_graph

CSBM = ["dataset=csbm", "dataset.num_nodes=400", "dataset.num_classes=4", "dataset.train_ratio=0.3", "dataset.val_ratio=0.2"]


def _probs(n: int, classes: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(2 * torch.randn(n, classes, generator=g, dtype=torch.float64), 1)


# --- the scores, by their definitions ------------------------------------------------------

def test_aps_and_raps_scores_are_their_definitions_node_by_node():
    probs, u = _probs(12, 5), torch.rand(12, dtype=torch.float64)
    scores, ranks = aps_scores(probs, u), class_ranks(probs)
    for i, c in itertools.product(range(12), range(5)):
        above = sum(float(p) for p in probs[i] if p > probs[i, c])
        assert float(scores[i, c]) == pytest.approx(above + float(u[i] * probs[i, c]), abs=1e-12)
        assert int(ranks[i, c]) == 1 + sum(1 for p in probs[i] if p > probs[i, c])
    cal = Calibration("raps", penalty=0.2, kreg=2)
    raps = class_scores(cal, probs)
    base = class_scores(Calibration("aps"), probs)
    torch.testing.assert_close(raps, base + 0.2 * (ranks - 2).clamp_min(0).double())
    torch.testing.assert_close(class_scores(Calibration("tps"), probs), 1 - probs)


def test_the_graph_scores_diffuse_over_neighbours_and_similar_features():
    scores = torch.arange(10, dtype=torch.float64).view(5, 2)
    edges = torch.tensor([[0, 1, 1, 2, 3, 3], [1, 0, 2, 1, 3, 3]])   # 0-1-2 a path, 3 a self loop only, 4 alone
    spread = neighbour_mean(scores, edges, 5)
    torch.testing.assert_close(spread[1], (scores[0] + scores[2]) / 2)
    torch.testing.assert_close(spread[0], scores[1])
    torch.testing.assert_close(spread[3], scores[3])   # a self loop is no neighbour: its own score
    torch.testing.assert_close(spread[4], scores[4])
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.5, 0.5]])
    similar = similar_mean(scores, x, 1)
    torch.testing.assert_close(similar[0], scores[1])
    torch.testing.assert_close(similar[2], scores[3])
    probs = _probs(5, 2)
    daps = class_scores(Calibration("daps", neighbours=0.5), probs, edges)
    aps = class_scores(Calibration("aps"), probs)
    torch.testing.assert_close(daps, 0.5 * aps + 0.5 * neighbour_mean(aps, edges, 5))
    snaps = class_scores(Calibration("snaps", xi=0.25, mu=0.5, k=1), probs, edges, x)
    torch.testing.assert_close(snaps, 0.25 * aps + 0.25 * neighbour_mean(aps, edges, 5) + 0.5 * similar_mean(aps, x, 1))


def test_the_threshold_is_the_finite_sample_quantile():
    scores = torch.arange(1.0, 11.0, dtype=torch.float64)[None]   # m = 10 calibration scores 1..10
    assert float(thresholds(Calibration("tps", alpha=0.1), scores)[0]) == 10.0    # ceil(11 * 0.9) = 10th
    assert float(thresholds(Calibration("tps", alpha=0.3), scores)[0]) == 8.0     # ceil(11 * 0.7) = 8th
    assert math.isinf(float(thresholds(Calibration("tps", alpha=0.05), scores)[0]))   # 11th of 10: every class
    assert threshold_rank(9, 0.7) == 3   # 10 * 0.3 is 3.0000000000000004 in floating point: not the 4th


def test_splits_are_drawn_by_chunks_with_the_same_numbers():
    """The splits are drawn a chunk at a time (memory bounded whatever conformal.splits): the
    columns do not depend on the chunk size."""
    import gnngp_cli.conformal as conformal

    probs = _probs(500, 5)
    y = probs.argmax(1)
    scores = class_scores(Calibration("aps"), probs)
    whole = prediction_sets(Calibration("aps", splits=40), scores, y)
    saved = conformal.SPLIT_ENTRIES
    try:
        conformal.SPLIT_ENTRIES = 500 * 5 * 3   # 3 splits per chunk
        chunked = prediction_sets(Calibration("aps", splits=40), scores, y)
    finally:
        conformal.SPLIT_ENTRIES = saved
    assert chunked == pytest.approx(whole, rel=1e-12)


@pytest.mark.parametrize("score", ["aps", "raps", "tps"])
def test_coverage_holds_on_exchangeable_nodes_and_sets_shrink_as_alpha_grows(score):
    """Labels drawn from the model's own probabilities: the sets cover 1 - alpha of the test
    nodes (the guarantee is at least 1 - alpha, at most 1 - alpha + 1/(m + 1) on average)."""
    probs = _probs(4000, 6, seed=1)
    y = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(2)).view(-1)
    small = prediction_sets(Calibration(score, alpha=0.2), class_scores(Calibration(score), probs), y)
    out = prediction_sets(Calibration(score, alpha=0.1), class_scores(Calibration(score), probs), y)
    assert 0.895 <= out["coverage"] <= 0.91, out
    assert 0.795 <= small["coverage"] <= 0.81, small
    assert small["set_size"] < out["set_size"] and out["coverage_std"] > 0
    assert 0 < out["singleton_hit"] <= out["coverage"]


def test_intervals_cover_and_scale_with_the_predictive_sd():
    g = torch.Generator().manual_seed(3)
    sd = torch.rand(5000, generator=g, dtype=torch.float64) + 0.5
    mean = torch.randn(5000, generator=g, dtype=torch.float64)
    y = mean + sd * torch.randn(5000, generator=g, dtype=torch.float64)
    out = prediction_intervals(Calibration("aps", alpha=0.1), mean, y, sd)
    assert 0.895 <= out["coverage"] <= 0.91
    assert out["interval_width"] == pytest.approx(2 * 1.6449 * float(sd.mean()), rel=0.03)   # q near the normal's 95% quantile
    residual = prediction_intervals(Calibration("aps", alpha=0.1), mean, y)   # no sd: one width for every node
    assert 0.895 <= residual["coverage"] <= 0.91 and residual["interval_width_std"] >= 0


def test_the_splits_are_seeded_and_need_both_sides():
    probs = _probs(300, 4)
    y = probs.argmax(1)
    ids = torch.arange(300)
    a = conformal_columns(Calibration("aps", seed=5), ids, y, probs=probs)
    b = conformal_columns(Calibration("aps", seed=5), ids, y, probs=probs)
    c = conformal_columns(Calibration("aps", seed=6), ids, y, probs=probs)
    assert a == b and a != c
    few = conformal_columns(Calibration("aps", calibration=0.001), ids, y, probs=probs)   # no calibration node: no columns, a warning
    assert "coverage" not in few and "conformal.calibration=0.001 leaves 0 of the 300 test nodes" in few["warning"]
    one = conformal_columns(Calibration("aps"), ids[:1], y, probs=probs)
    assert "use more test nodes" in one["warning"] and "calibration=0.5" not in one["warning"].split("use")[1]


# --- the rows ------------------------------------------------------------------------------

def _gp_row(overrides: list[str]) -> dict:
    cfg = compose(overrides)
    with LocalBackend(cfg) as backend:
        return GPJob(cfg, backend).run(0).row


@pytest.mark.parametrize("kernel, score", [("gcngp", "daps"), ("gcngp_x", "aps"), ("gcngp", "snaps"), ("gcngp_x", "raps")])
def test_a_gp_row_has_the_conformal_columns(kernel, score, cache):
    row = _gp_row([*CSBM, f"kernel={kernel}", f"conformal={score}", "conformal.splits=50", f"data.root={cache}"])
    assert row["conformal"] == score and row["conformal_alpha"] == 0.1
    assert 0.8 <= row["coverage"] <= 1 and 1 <= row["set_size"] <= 4 and 0 <= row["singleton_hit"] <= row["coverage"]
    assert row["conformal_seconds"] >= 0 and row["coverage_std"] >= 0


def test_graph_scores_read_every_node_the_others_the_test_nodes(cache, monkeypatch):
    """The evaluation nodes get the same probabilities and labels whether every node is
    predicted from the kernel (the graph scores) or the labelled ones come through the row
    groups (the others)."""
    import gnngp_cli.job.conformal_rows as rows

    seen = {}

    def capture(cal, evaluation, y, probs=None, **_):
        seen[cal.score] = (probs[evaluation], y[evaluation])
        return {}

    monkeypatch.setattr(rows, "conformal_columns", capture)
    for score in ("daps", "aps"):
        _gp_row([*CSBM, "kernel=gcngp", f"conformal={score}", f"data.root={cache}"])
    assert seen["daps"][0].size(0) == 200   # the test nodes of 400 (30% train, 20% validation)
    torch.testing.assert_close(seen["daps"][0], seen["aps"][0], rtol=1e-5, atol=1e-6)
    assert torch.equal(seen["daps"][1], seen["aps"][1])


def test_a_regression_row_has_conformal_intervals(tmp_path, mirror):
    code, stderr, row, errors = run(tmp_path, "dataset=chameleon", "kernel=gcngp_x", "conformal=aps", "conformal.splits=20",
                                    f"data.mirror={mirror}")
    assert code == 0, stderr[-2000:]
    assert row["conformal"] == "aps" and 0.8 <= row["coverage"] <= 1 and row["interval_width"] > 0
    assert "set_size" not in row


def test_too_few_test_nodes_keep_the_row_with_a_warning(cache):
    row = _gp_row(["dataset=csbm", "dataset.num_nodes=40", "dataset.train_ratio=0.5", "dataset.val_ratio=0.475", "kernel=gcngp",
                   "conformal=aps", f"data.root={cache}"])
    assert row["status"] == "ok" and math.isfinite(row["test"]) and "coverage" not in row
    assert any("no conformal columns" in w for w in json.loads(row["extra"])["warnings"])


def test_a_refusal_in_the_conformal_step_keeps_the_row(cache, monkeypatch):
    from gnngp_cli.errors import ResourceError

    def refuse(*args, **kwargs):
        raise ResourceError("the exact GCNGP kernel on csbm needs about 9 GiB but the limit is 8 GiB")

    monkeypatch.setattr(LocalBackend, "prediction_rows", refuse)
    row = _gp_row([*CSBM, "kernel=gcngp", "conformal=daps", f"data.root={cache}"])
    assert row["status"] == "ok" and math.isfinite(row["test"]) and "coverage" not in row and row["conformal"] == "daps"
    assert any("no conformal columns: the exact GCNGP kernel" in w for w in json.loads(row["extra"])["warnings"])


def test_a_gnn_row_has_the_conformal_columns(cache):
    from gnngp_cli.job.gnn_job import run_gnn

    cfg = compose([*CSBM, "gnn=gcn", "gnn.epochs=30", "conformal=daps", "conformal.splits=30", f"data.root={cache}"])
    row = run_gnn(cfg)[0]
    assert row["conformal"] == "daps" and 0.8 <= row["coverage"] <= 1 and row["set_size"] >= 1


def test_the_random_split_protocol_draws_20_10_70_from_its_seed(cache):
    cfg = compose([*CSBM, "kernel=gcngp", "protocol=random_split", f"data.root={cache}"])
    data = load_graph(cfg).data
    counts = [int(data[f"{k}_mask"].sum()) for k in ("train", "val", "test")]
    assert counts == [80, 40, 280]
    assert not bool((data.train_mask & data.val_mask).any() | (data.val_mask & data.test_mask).any() | (data.train_mask & data.test_mask).any())
    again = load_graph(cfg).data
    other = load_graph(compose([*CSBM, "kernel=gcngp", "protocol=random_split", "protocol.seed=1", f"data.root={cache}"])).data
    assert torch.equal(again.train_mask, data.train_mask) and not torch.equal(other.train_mask, data.train_mask)


@pytest.mark.paper   # a Dask cluster: with the slow tests
def test_conformal_on_dask_gives_the_local_columns(cache):
    pytest.importorskip("distributed")
    common = [*CSBM, "kernel=gcngp_x", "landmarks.count=40", "dtype=float64", "partition.rows=150", "conformal=raps",
              "protocol=misclassification", f"data.root={cache}"]
    local, dask = local_and_dask_rows(common)
    for key in ("coverage", "coverage_std", "set_size", "set_size_std", "singleton_hit"):
        assert dask[key] == pytest.approx(local[key], rel=1e-9, abs=1e-12), key


# --- bad settings: one line, before any work -------------------------------------------------

@pytest.mark.parametrize("args, words", [
    ([*CSBM, "kernel=gcngp", "conformal=apss"], "did you mean conformal=aps?"),
    ([*CSBM, "kernel=gcngp", "conformal=aps", "conformal.alpha=1.5"], "conformal.alpha=1.5 must be above 0 and below 1"),
    ([*CSBM, "kernel=gcngp", "conformal=aps", "conformal.splits=0"], "conformal.splits=0"),
    ([*CSBM, "kernel=gcngp", "conformal=snaps", "conformal.xi=0.8", "conformal.mu=0.5"], "xi + mu at most 1"),
    ([*CSBM, "kernel=gcngp", "conformal=daps", "conformal.neighbours=2"], "conformal.neighbours=2.0 is a weight: give a value in [0, 1]"),
    ([*CSBM, "kernel=gcngp_x", "conformal=daps", "compute=dask"], "use compute=local, or conformal=aps"),
    ([*CSBM, "kernel=gcngp", "conformal=aps", "protocol=random_split", "protocol.split=[0.8,0.3]"], "sum below 1"),
    ([*CSBM, "kernel=gcngp", "conformal=aps", "conformal.splits=99999999999999999999"], "conformal.splits="),
    ([*CSBM, "kernel=gcngp", "conformal=aps", "conformal.splits=10000000"], "from 1 to 1,000,000"),
    ([*CSBM, "kernel=gcngp", "conformal=aps", "conformal.seed=99999999999999999999"], "conformal.seed="),
    ([*CSBM, "kernel=gcngp", "conformal=aps", "conformal.seed=-5"], "conformal.seed=-5 must be an integer from 0"),
    ([*CSBM, "kernel=gcngp", "conformal=raps", "conformal.kreg=99999999999999999999"], "conformal.kreg="),
])
def test_bad_conformal_settings_fail_in_one_line(args, words, tmp_path):
    code, stderr, row, errors = run(tmp_path, *args)
    assert code != 0 and len(errors) == 1 and words in errors[0], stderr[-800:]
    assert row is None


def test_nodegp_rows_carry_the_conformal_columns(cache):
    from gnngp_cli.api import NodeGP, load_dataset

    data = load_dataset("csbm", **{"dataset.num_nodes": 400, "dataset.num_classes": 4}, train_ratio=0.3, val_ratio=0.2, data={"root": str(cache)})
    row = NodeGP("gcngp_x", conformal="raps", **{"conformal.splits": 20}).fit(data).row
    assert row["conformal"] == "raps" and 0.8 <= row["coverage"] <= 1


def test_the_report_tables_the_conformal_columns_of_the_runs():
    import pandas as pd

    from gnngp_cli.report.uncertainty import conformal_table

    rows = pd.DataFrame([{"status": "ok", "dataset": "cora", "protocol": "", "method": "GCNGP", "likelihood": "gaussian", "uncertainty": "",
                          "conformal": "daps", "conformal_alpha": 0.1, "test": 0.8, "coverage": c, "set_size": s, "singleton_hit": 0.7,
                          "conformal_seconds": 0.2} for c, s in ((0.90, 1.5), (0.92, 1.7))]
                        + [{"status": "ok", "dataset": "cora", "method": "GCN", "conformal": "", "test": 0.8}])
    text = conformal_table(rows)
    lines = [line for line in text.splitlines() if line.startswith("| Cora")]
    assert len(lines) == 1 and "| daps | 0.1 | - | 2 |" in lines[0] and "0.910 +- 0.014" in lines[0] and "1.600 +- 0.141" in lines[0]
    assert conformal_table(rows[rows["conformal"] == ""]) == "" and "(*)" not in text
    few = rows.assign(extra=json.dumps({"warnings": ["conformal.calibration=0.5 calibrates each split on 4 of the 8 test nodes, and "
                                                     "conformal.alpha=0.1 needs at least 9: every set holds every class"]}))
    marked = conformal_table(few)   # a trial: the report showed sets of every class without a word
    assert "| Cora (*) |" in marked and "(*) too few calibration nodes for alpha" in marked


def test_the_report_never_averages_runs_of_different_conformal_settings():
    import pandas as pd

    from gnngp_cli.report.uncertainty import conformal_table

    rows = pd.DataFrame([{"status": "ok", "dataset": "cora", "protocol": "", "method": "GCNGP", "likelihood": "gaussian", "conformal": "daps",
                          "conformal_alpha": 0.1, "test": 0.8, "coverage": 0.9, "set_size": s, "singleton_hit": 0.6, "conformal_seconds": 0.1,
                          "group": json.dumps({"conformal": "daps", "conformal.neighbours": nb})} for nb, s in ((0.0, 2.1), (0.95, 1.6))])
    lines = [line for line in conformal_table(rows).splitlines() if line.startswith("| Cora")]
    assert len(lines) == 2 and any("conformal.neighbours=0.95" in line for line in lines)


# --- an adversarial pass (issue 50): malformed and extreme values, one line or a warning -----

@pytest.mark.parametrize("settings, words", [
    ({"alpha": 0.0}, "conformal.alpha=0.0 must be above 0 and below 1"),
    ({"alpha": 1.0}, "conformal.alpha=1.0 must be above 0 and below 1"),
    ({"alpha": -0.1}, "conformal.alpha=-0.1 must be above 0 and below 1"),
    ({"alpha": math.nan}, "conformal.alpha=nan is not a finite number"),
    ({"alpha": math.inf}, "conformal.alpha=inf is not a finite number"),
    ({"calibration": 1.0}, "conformal.calibration=1.0 must be above 0 and below 1"),
    ({"calibration": math.nan}, "conformal.calibration=nan is not a finite number"),
    ({"splits": 0}, "conformal.splits=0 must be an integer from 1"),
    ({"splits": 2.5}, "conformal.splits=2.5 must be an integer from 1"),
    ({"seed": -1}, "conformal.seed=-1 must be an integer from 0"),
    ({"penalty": -1.0}, "conformal.penalty=-1.0 must be at least 0"),
    ({"kreg": -1}, "conformal.kreg=-1 must be an integer from 0"),
    ({"k": 0}, "conformal.k=0 must be an integer from 1"),
    ({"neighbours": math.nan}, "conformal.neighbours=nan is not a finite number"),
])
def test_a_calibration_made_in_python_checks_its_values_in_one_line(settings, words):
    """The ranges the config checks are the calibration's own: one made directly (the job's, an
    API caller's) refuses a value the config would, never a traceback deep in a split."""
    from gnngp_cli.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        Calibration("aps", **settings)
    assert str(refused.value).startswith(words) and "\n" not in str(refused.value), str(refused.value)


@pytest.mark.parametrize("override, words", [
    ("conformal.alpha=0", "conformal.alpha=0.0 must be above 0 and below 1"), ("conformal.alpha=1", "conformal.alpha=1.0 must be above 0 and below 1"),
    ("conformal.alpha=-0.5", "conformal.alpha=-0.5 must be above 0 and below 1"), ("conformal.alpha=nan", "conformal.alpha=nan is not a finite number"),
    ("conformal.calibration=1", "conformal.calibration=1.0 must be above 0 and below 1"), ("conformal.kreg=-1", "conformal.kreg=-1 must be an integer"),
])
def test_extreme_conformal_values_are_one_line_before_any_work(override, words):
    from gnngp_cli.config import parse
    from gnngp_cli.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        parse(compose([*CSBM, "kernel=gcngp", "conformal=raps", override]))
    assert str(refused.value).startswith(words), str(refused.value)


N = 60


def _columns(cal=None, **kwargs):
    return conformal_columns(cal or Calibration("aps", splits=10), torch.arange(N), **kwargs)


@pytest.mark.parametrize("case, words", [
    ("label past the classes", "a test label (7) is no class of the 3 predicted"),
    ("negative label", "a test label (-1) is no class of the 3 predicted"),   # it indexed the last class's score
    ("fractional labels", "the test labels are not whole class ids"),
    ("NaN probabilities", "1 nodes have non-finite class probabilities"),
    ("NaN means", f"{N} test nodes have non-finite predicted means"),
    ("infinite deviations", f"{N} test nodes have non-finite predictive deviations"),
    ("NaN targets", "1 test nodes have non-finite targets"),
    ("a calibration share that takes every node", "conformal.calibration=0.999 leaves 60 of the 60 test nodes for calibration and 0 to test"),
])
def test_predictions_that_give_no_sets_keep_the_row_with_a_warning(case, words):
    """Inputs that once indexed another class's score, compared NaN false with every threshold
    (coverage 0 or NaN widths in the row) or ended in an IndexError: no columns, and a warning
    saying why; the row keeps its results (add_conformal)."""
    probs, y = _probs(N, 3), torch.randint(0, 3, (N,), generator=torch.Generator().manual_seed(1))
    target, mean = torch.randn(N, dtype=torch.float64), torch.zeros(N, dtype=torch.float64)
    if case == "label past the classes":
        out = _columns(y=torch.where(torch.arange(N) == 5, 7, y), probs=probs)
    elif case == "negative label":
        out = _columns(y=torch.where(torch.arange(N) == 5, -1, y), probs=probs)
    elif case == "fractional labels":
        out = _columns(y=y.double() + 0.5, probs=probs)
    elif case == "NaN probabilities":
        out = _columns(y=y, probs=torch.where(torch.arange(N)[:, None] == 2, math.nan, probs))
    elif case == "NaN means":
        out = _columns(y=target, mean=torch.full((N,), math.nan))
    elif case == "infinite deviations":
        out = _columns(y=target, mean=mean, sd=torch.full((N,), math.inf))
    elif case == "NaN targets":
        out = _columns(y=torch.where(torch.arange(N) == 3, math.nan, target), mean=mean)
    else:
        out = _columns(Calibration("aps", calibration=0.999), y=y, probs=probs)
    assert "coverage" not in out and out["warning"].startswith("no conformal columns: ") and words in out["warning"], out


def test_inputs_that_do_not_cover_the_evaluation_nodes_are_one_line():
    from gnngp_cli.errors import ConfigError, DatasetError

    probs, y = _probs(N, 3), torch.zeros(N, dtype=torch.long)
    with pytest.raises(DatasetError, match=r"an evaluation node id \(99\) lies past the 60 nodes predicted"):
        conformal_columns(Calibration("aps"), torch.tensor([0, 1, 99]), y, probs=probs)
    with pytest.raises(DatasetError, match="lies past the 10 nodes predicted"):
        conformal_columns(Calibration("aps"), torch.arange(N), y[:10], probs=probs)
    with pytest.raises(ConfigError, match="conformal=snaps averages scores over the nodes of the most similar features, and none were given"):
        conformal_columns(Calibration("snaps"), torch.arange(N), y, probs=probs, edge_index=torch.tensor([[0, 1], [1, 0]]))


def test_a_gnn_rows_conformal_refusal_is_a_warning_as_a_gps_is():
    from types import SimpleNamespace

    from gnngp_cli.job.conformal_rows import gnn_conformal

    data = SimpleNamespace(test_mask=torch.ones(N, dtype=torch.bool), y=torch.zeros(N, dtype=torch.long), edge_index=torch.tensor([[0], [1]]),
                           x=None)
    out = gnn_conformal(Calibration("snaps"), data, torch.device("cpu"), _probs(N, 3), torch.zeros(N, 3))
    assert "coverage" not in out and out["warning"].startswith("no conformal columns: conformal=snaps averages scores"), out


def test_two_lines_that_would_read_the_same_show_the_setting_that_tells_them_apart():
    """dtype, device and experiment are left out of a line's settings to keep it short; two lines
    whose cells would then read the same (a float32 and a float64 run) show them."""
    import pandas as pd

    from gnngp_cli.report.uncertainty import conformal_table, table

    def row(group, **extra):
        return {"status": "ok", "dataset": "cora", "protocol": "", "method": "GCNGP", "likelihood": "gaussian", "conformal": "aps",
                "conformal_alpha": 0.1, "test": 0.8, "coverage": 0.9, "set_size": 1.5, "singleton_hit": 0.6, "conformal_seconds": 0.1,
                "ece": 0.05, "total_seconds": 1.0, "group": json.dumps(group), **extra}

    rows = pd.DataFrame([row({}), row({"dtype": "float64"}, test=0.81), row({"dtype": "float64", "kernel.layers": 3}, test=0.7)])
    for text in (table(rows), conformal_table(rows)):
        lines = [line for line in text.splitlines() if line.startswith("| Cora")]
        assert len(lines) == 3 and len(set(lines)) == 3, lines
        assert sum("dtype=float64" in line for line in lines) == 1, lines   # where it tells two lines apart; the 3-layer line needs it not
    one = pd.DataFrame([row({"dtype": "float64"})])
    assert "dtype" not in table(one) and "dtype" not in conformal_table(one)   # alone, a line stays short


def test_too_few_calibration_nodes_for_alpha_are_said_and_one_split_has_no_spread():
    """A trial: 4 calibration nodes at alpha 0.1 gave sets of every class, silently; one split's
    coverage_std was 0 (a spread of one value). The first is a warning naming the count needed
    (1/alpha - 1 = 9), the second a blank cell."""
    probs = _probs(400, 4, seed=5)
    y = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(6)).view(-1)
    nodes = torch.arange(400)
    few = conformal_columns(Calibration("aps", alpha=0.1, calibration=0.02, splits=5), nodes, y, probs=probs)   # 8 a split
    assert few["set_size"] == 4 and "on 8 of the 400 test nodes, and conformal.alpha=0.1 needs at least 9" in few["warning"]
    enough = conformal_columns(Calibration("aps", alpha=0.1, calibration=0.0225, splits=5), nodes, y, probs=probs)   # 9 a split
    assert "warning" not in enough and enough["set_size"] < 4
    one = conformal_columns(Calibration("aps", alpha=0.1, splits=1), nodes, y, probs=probs)
    assert math.isnan(one["coverage_std"]) and math.isnan(one["set_size_std"]) and 0 < one["coverage"] <= 1


def test_snaps_k_above_the_graph_is_said_with_both_warnings():
    """conformal.k above the other nodes was clamped silently (SNAPS then averages over every
    node, which is another score than the one asked for): a warning naming the most k can be,
    beside the calibration warning when both apply."""
    probs = _probs(60, 3, seed=2)
    y = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(3)).view(-1)
    features = torch.randn(60, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    edges = torch.tensor([[i for i in range(59)] + [i + 1 for i in range(59)], [i + 1 for i in range(59)] + [i for i in range(59)]])
    nodes = torch.arange(20, 60)
    fits = conformal_columns(Calibration("snaps", k=59, splits=3), nodes, y, probs=probs, edge_index=edges, features=features)
    assert "warning" not in fits
    above = conformal_columns(Calibration("snaps", k=500, splits=3), nodes, y, probs=probs, edge_index=edges, features=features)
    assert "conformal.k=500 is above the 59 other nodes" in above["warning"] and "at most 59" in above["warning"]
    assert above["set_size"] == fits["set_size"]   # the clamp's score: k = 59
    both = conformal_columns(Calibration("snaps", k=500, splits=3, calibration=0.1), nodes, y, probs=probs, edge_index=edges, features=features)
    assert both["warning"].count("; conformal.k=500") == 1 and "needs at least 9" in both["warning"]


def test_a_rows_peak_memory_counts_its_conformal_splits():
    """A trial: conformal.splits=10^6 took the process to 4.16 GB while the row's peak_rss_mb read
    309 MB, measured before the splits ran."""
    from gnngp_cli.job.conformal_rows import add_conformal
    from gnngp_cli.runtime import peak_rss_mb

    row = add_conformal({"peak_rss_mb": 1.0}, {"conformal": "aps", "coverage": 0.9})
    assert row["peak_rss_mb"] >= peak_rss_mb() - 1 and row["peak_rss_mb"] > 1.0
    assert add_conformal({"peak_rss_mb": 1.0}, {})["peak_rss_mb"] == 1.0   # no conformal columns: the row as it was
