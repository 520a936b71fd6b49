"""Shared fixtures: the offline dataset mirror (read-only) and a writable cache."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mirror_dir() -> Path | None:
    for candidate in (os.environ.get("GNNGP_DATA_MIRROR"), ROOT.parent / "shared" / "datasets"):
        if candidate and Path(candidate, "Cora", "raw").is_dir():
            return Path(candidate)
    return None


if os.environ.get("PYTEST_XDIST_WORKER"):   # one of several test processes (pytest -n): a thread each, not one per core each
    # and so the processes it starts (gnngp in a fresh process, a launcher's or Dask's workers): two OpenMP
    # threads beside the other test process wait for each other, spinning
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def mirror() -> Path:
    path = mirror_dir()
    if path is None:
        pytest.skip("no dataset mirror: set GNNGP_DATA_MIRROR to a folder with Cora/raw, ...")
    return path


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    env = os.environ.get("GNNGP_DATA_ROOT")
    return Path(env) if env else tmp_path_factory.mktemp("gnngp-cache")


@pytest.fixture
def data_overrides(mirror, cache) -> list[str]:
    return [f"data.mirror={mirror}", f"data.root={cache}"]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Tests never reach the network: a download attempt fails at once, as offline."""
    from gnngp_cli.data import store

    def offline(url, dst, timeout_s):
        raise OSError(f"network disabled in tests ({url})")

    monkeypatch.setattr(store, "_download", offline)


# The longest tests (about 8 s or more each on the 2-core machine, `pytest --durations`), longest
# first, run before the others: xdist hands tests to its two workers in collection order, so a long
# test collected last leaves one worker idle while the other finishes it.
LONGEST_FIRST = (
    "test_mini_batch_training_on_regression_with_batch_norm",
    "test_resume_of_splits_all_runs_only_the_missing_splits",
    "test_gcn_tangent_kernel_passes_against_empirical_ntks_and_planted_errors_fail",
    "test_the_estimate_is_within_2x_of_the_measured_peak",
    "test_report_of_real_grid_mll_and_dask_runs_on_cora",
    "test_gcn_for_100_epochs_on_cora_reaches_the_paper",
    "test_a_stopped_job_keeps_its_finished_runs_and_resume_runs_only_the_missing",
    "test_help_cfg_report_and_config_errors_import_neither_torch_geometric_nor_ogb",
    "test_every_tangent_kernel_passes_at_two_layers",
    "test_every_low_rank_kernel_on_larger_graphs_gives_the_local_predictions",
    "test_fit_mll_increases_the_objective_and_adam_and_lbfgs_agree",
    "test_launchers_run_the_sweep",
    "test_the_memory_estimate_is_within_2x_of_the_measured_peak",
    "test_each_refusal_is_one_line_from_the_cli_and_an_error_row",
    "test_a_worker_slow_to_exit_is_not_killed",
    "test_a_dask_run_prints_the_dashboard_once_and_kills_no_worker",
    "test_each_gnn_beats_the_majority_class_after_a_few_epochs",
)


def pytest_collection_modifyitems(config, items):
    """The tests of LONGEST_FIRST before the others, in its order (a stable sort: the same order in every worker)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.originalname, len(LONGEST_FIRST)))
