"""One rule for refusals: options that the job's spec refuses (:func:`gnngp_cli.config.parse`)
are one line and exit 1 before Hydra makes a folder, for a single run and for every job of a
sweep; what goes wrong while running is an error row in the job's folder."""
import pandas as pd
import pytest

from helpers import in_process


def test_a_refused_option_writes_nothing(tmp_path):
    for args in (["kernel.limit=bogus"], ["likelihood=dirichlet", "fit=mll"], ["kernel.layers=0"]):
        out = in_process("run", *args, f"hydra.run.dir={tmp_path / 'run'}")
        errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
        assert out.returncode == 1 and len(errors) == 1 and "Traceback" not in out.stderr, out.stderr
        assert not (tmp_path / "run").exists(), args   # no folder, no error row


def test_a_sweep_with_a_refused_job_is_refused_before_its_first_job(tmp_path):
    sweep = tmp_path / "sweep"
    out = in_process("run", "-m", "kernel=gcngp,gcngp_x", "kernel.limit=nngp,bogus", f"hydra.sweep.dir={sweep}")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and len(errors) == 1, out.stderr
    assert "kernel.limit='bogus' is not valid" in errors[0] and "(sweep job 1: kernel=gcngp kernel.limit=bogus)" in errors[0]
    assert not sweep.exists()   # not even the sweep folder: no job ran


def test_an_error_found_while_running_is_a_row(tmp_path):
    out = in_process("run", "dataset=custom", f"dataset.path={tmp_path / 'absent'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1
    row = pd.read_csv(tmp_path / "run" / "results.csv").iloc[-1]
    assert row["status"] == "error" and "absent" in row["error"]


def test_a_search_is_refused_for_an_option_it_does_not_choose_and_an_empty_sweep_is_refused(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    out = in_process("run", "-m", "hparams_search=optuna", "kernel.limit=bogus", f"hydra.sweep.dir={tmp_path / 'search'}")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and errors == ["gnngp: error: kernel.limit='bogus' is not valid; use one of nngp, ntk "
                                              "(the options a search does not choose)"], out.stderr
    assert not (tmp_path / "search").exists()   # not 20 trials, each an error row
    out = in_process("run", "-m", "kernel.limit=glob(zzz*)", f"hydra.sweep.dir={tmp_path / 'empty'}")
    assert out.returncode == 1 and "gnngp: error: the sweep has no jobs" in out.stderr and not (tmp_path / "empty").exists()


def test_a_search_of_a_preset_that_sweeps_a_dataset_names_the_preset_not_an_override_never_typed(tmp_path):
    """An adversary's trial: -m experiment=learning_curve hparams_search=optuna said 'run one search
    per value (dataset=cora ...)'; the user typed no dataset=: the preset sweeps it."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    out = in_process("run", "-m", "experiment=learning_curve", "hparams_search=optuna", f"hydra.sweep.dir={tmp_path / 's'}")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and errors and errors[0].startswith("gnngp: error: experiment=learning_curve sweeps dataset=")
    assert not (tmp_path / "s").exists()


def test_a_kernel_the_backend_does_not_run_is_refused_before_the_job_writes_a_row(tmp_path):
    """An adversary's trial: compute=dask kernel=gcngp into a run folder of good rows appended an
    error row there (the backend's refusal came from inside the job)."""
    assert in_process("run", "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp_x", f"hydra.run.dir={tmp_path}").returncode == 0
    out = in_process("run", "dataset=csbm", "dataset.num_nodes=60", "compute=dask", "kernel=gcngp", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith("gnngp: error: exact kernels are not distributed")
    assert pd.read_csv(tmp_path / "results.csv")["status"].tolist() == ["ok"]


def test_a_preset_that_names_another_kernel_is_refused(tmp_path):
    """An adversary's trial: an experiment preset of one's own (hydra.searchpath) setting
    kernel.name=rbf ran GCNGP's settings in a row labelled RBF, exit 0."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text("# @package _global_\nkernel:\n  name: rbf\n")
    out = in_process("run", "dataset=csbm", "dataset.num_nodes=60", "experiment=mine", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                     f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith(
        "gnngp: error: kernel.name=rbf is set in a config while kernel=gcngp is chosen")
    assert not (tmp_path / "run" / "results.csv").exists()


def test_a_preset_that_names_another_dataset_is_refused(tmp_path):
    """An adversary's trial: a preset of one's own setting dataset.name=cora under dataset=csbm ran
    Cora with csbm's dataset settings, exit 0."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text("# @package _global_\ndataset:\n  name: cora\n")
    out = in_process("run", "dataset=csbm", "experiment=mine", f"hydra.searchpath=[file://{tmp_path / 'conf'}]", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith(
        "gnngp: error: dataset.name=cora is set in a config while dataset=csbm is chosen")
