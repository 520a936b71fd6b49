"""Trust, section 3: no NaN is ever reported as a result. NaN or infinite targets and grid
bounds are one-line errors before any computation; a row whose metric is not a number is an
error row with the reason, never ``ok``."""
import math

import numpy as np
import pytest
import torch

from gnngp_cli.api import compose
from gnngp_cli.config import validate
from gnngp_cli.errors import ConfigError
from gnngp_cli.results.invariants import checked_rows
from gnngp_cli.metrics import METRICS, MetricInput

from helpers import run, split_masks, write_graph


@pytest.mark.parametrize("node, value", [(3, np.nan), (50, np.inf), (40, -np.inf)])   # a training, a test, a validation node
def test_nan_or_infinite_regression_target_at_a_labelled_node_is_refused_before_computing(tmp_path, node, value):
    labels = np.random.default_rng(0).normal(size=60)
    labels[node] = value
    folder = write_graph(tmp_path / "g", labels=labels, masks=split_masks(60))
    code, _, row, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1
    assert f"1 labelled node has a NaN or infinite regression target (first: node {node})" in errors[0]
    assert row["status"] == "error" and math.isnan(row.get("kernel_seconds", float("nan")))  # nothing was computed


def test_a_nan_target_without_mask_files_names_the_mask_files_that_would_leave_it_out(tmp_path):
    """With no mask files the random split puts every node in a mask: "leave those nodes out of the
    masks" named masks the user never gave (helper-53)."""
    labels = np.random.default_rng(0).normal(size=60)
    labels[7] = np.nan
    folder = write_graph(tmp_path / "g", labels=labels)
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1
    assert "a split drawn by dataset.train_ratio and val_ratio puts every node in one" in errors[0]
    assert "train_mask, val_mask and test_mask files" in errors[0]


def test_a_nan_target_outside_every_split_is_not_used_and_accepted(tmp_path):
    labels = np.random.default_rng(0).normal(size=60)
    labels[59] = np.nan
    folder = write_graph(tmp_path / "g", labels=labels, masks=split_masks(60, test=(45, 59)))
    code, _, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 0 and row["status"] == "ok" and math.isfinite(row["test"])


@pytest.mark.parametrize("override, message", [
    ("nugget.max=inf", "nugget.max=inf is not a finite number"),
    ("nugget.min=nan", "nugget.min=nan is not a finite number"),
    ("kernel.sigma_w=nan", "kernel.sigma_w=nan is not a finite number"),
])
def test_non_finite_settings_are_one_line_errors(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose([override]))
    code, _, row, errors = run(tmp_path, override)
    assert code == 1 and len(errors) == 1 and message in errors[0]
    assert row is None   # refused before any work: nothing written


@pytest.mark.parametrize("value, n", [(0.1, 7), (0.7, 15), (2.5, 15), (1 / 3, 12345)])
def test_r2_of_constant_targets_is_nan_whatever_the_rounding_of_their_mean(value, n):
    """The mean of n copies of 0.1 in float32 is not 0.1: sum (y - mean)^2 was 4e-16, not 0, and
    R^2 came out as -1.8e14 (on CUDA, whose reductions round differently, also for 2.5)."""
    y = torch.full((n,), value, dtype=torch.float32)
    assert math.isnan(METRICS["r2"].value(MetricInput(torch.zeros(n, 2, 1), y))[0])
    assert METRICS["r2"].value(MetricInput(torch.zeros(n, 1, 1), y + torch.arange(n) * 1e-3))[0] < 0


def test_a_row_whose_metric_is_nan_becomes_an_error_row_with_the_reason(tmp_path):
    """Constant test targets: R^2 is undefined. The run must not report status=ok with NaN."""
    labels = np.random.default_rng(0).normal(size=60)
    labels[45:60] = 2.5
    folder = write_graph(tmp_path / "g", labels=labels, masks=split_masks(60))
    code, _, row, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1
    assert row["status"] == "error"
    assert "the test r2 is nan, not a number (R^2 is undefined when the targets of a split are constant" in row["error"]
    assert "the test r2 is nan" in errors[0]


def test_invariant_on_rows():
    rows = [
        {"status": "ok", "metric": "accuracy", "val": 0.5, "test": 0.7},
        {"status": "ok", "metric": "accuracy", "val": float("inf"), "test": 0.7},
        {"status": "ok", "metric": "r2", "val": 0.1, "test": None},
        {"status": "error", "metric": "r2", "val": float("nan"), "test": float("nan"), "error": "earlier"},
    ]
    checked = checked_rows(rows)
    assert [r["status"] for r in checked] == ["ok", "error", "error", "error"]
    assert "the val accuracy is inf" in checked[1]["error"] and "the test r2 is None" in checked[2]["error"]
    assert checked[3]["error"] == "earlier"
