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


# The adversarial trials' cases, kept as regression tests (docs/reliability.md): crafted and tampered
# files, payloads, kills and signals, concurrent writers, full disks, options without effect,
# malformed overrides, generated configs and graphs, long sessions. `python -m pytest -m trust` reruns
# them as one suite (the paper-marked ones among them too).
TRUST_FILES = (
    "cli/test_trust_acceptance.py", "cli/test_trust_errors.py", "cli/test_trust_nan.py", "cli/test_options_read.py",
    "cli/test_config_properties.py", "cli/test_preflight.py", "data/test_trust_loading.py", "data/test_trust_ownership.py",
    "data/test_custom_properties.py", "data/test_shard_files.py", "results/test_trust_rows.py", "results/test_reliability.py",
    "results/test_second_signal.py", "api/test_soak.py",
)
TRUST_TESTS = {   # ... and those among other tests of their layer
    "job/test_conformal.py": ("test_bad_conformal_settings_fail_in_one_line", "test_a_calibration_made_in_python_checks_its_values_in_one_line",
                              "test_extreme_conformal_values_are_one_line_before_any_work", "test_predictions_that_give_no_sets_keep_the_row_with_a_warning",
                              "test_inputs_that_do_not_cover_the_evaluation_nodes_are_one_line", "test_a_gnn_rows_conformal_refusal_is_a_warning_as_a_gps_is",
                              "test_a_refusal_in_the_conformal_step_keeps_the_row", "test_too_few_test_nodes_keep_the_row_with_a_warning"),
    "job/test_active.py": ("test_bad_active_options_are_one_line_errors", "test_unknown_strategy_lists_the_choices",
                           "test_refusals_once_the_graph_is_loaded_are_one_line",
                           "test_a_stop_midway_through_a_selection_keeps_whole_runs_and_resume_runs_the_rest",
                           "test_a_stop_in_the_first_runs_selection_keeps_no_row_and_claims_no_run",
                           "test_a_second_signal_during_an_active_jobs_clean_up_keeps_the_whole_runs",
                           "test_a_stop_between_the_rows_of_a_run_waits_until_its_last_is_written", "test_resume_runs_again_a_learning_curve_cut_short"),
    "data/test_data.py": ("test_truncated_pickle_is_named", "test_planetoid_files_disagreeing_on_node_count_are_named", "test_corrupt_musae_files_are_named",
                          "test_arxiv_with_wrong_node_count_is_named", "test_truncated_reddit_file_is_named", "test_csbm_rejects_impossible_parameters",
                          "test_custom_bad_inputs_name_the_file", "test_a_sparse_feature_file_of_broken_structure_is_refused_before_it_is_densified",
                          "test_custom_missing_folder"),
    "backends/test_rowblocks.py": ("test_the_roots_of_a_killed_run_on_this_host_are_removed_by_the_next",
                                   "test_roots_folders_of_an_older_gnngp_are_one_warning_saying_how_to_remove_them", "test_a_non_finite_root_is_one_line_naming_what",
                                   "test_sigterm_midway_removes_the_runs_roots", "test_a_worker_killed_midway_is_recomputed_with_an_unchanged_result",
                                   "test_a_roots_dir_that_cannot_be_written_is_one_line", "test_a_roots_dir_without_room_for_the_roots_is_refused_before_any_work",
                                   "test_a_dask_run_leaves_no_root_files_behind", "test_unreachable_scheduler_is_one_line",
                                   "test_worker_memory_below_one_row_block_asks_for_smaller_blocks",
                                   "test_what_the_row_block_backend_cannot_honour_is_refused_in_one_line", "test_worker_count_below_one_is_one_line"),
}


def pytest_collection_modifyitems(config, items):
    """Marks the adversarial cases ``trust`` (:data:`TRUST_FILES`); then the tests of LONGEST_FIRST
    before the others, in its order (a stable sort: the same order in every worker)."""
    here = Path(__file__).parent
    trusted = {str(here / name) for name in TRUST_FILES}
    missing = [name for name in TRUST_FILES if not (here / name).exists()]
    missing += [f"{name}::{test}" for name, tests in TRUST_TESTS.items() for test in tests
                if f"def {test}(" not in (here / name).read_text(encoding="utf-8")]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py TRUST_FILES/TRUST_TESTS name tests that do not exist: {missing}")
    named = {str(here / name): set(tests) for name, tests in TRUST_TESTS.items()}
    for item in items:
        path = str(item.path)
        if path in trusted or item.originalname in named.get(path, ()):
            item.add_marker(pytest.mark.trust)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.originalname, len(LONGEST_FIRST)))
