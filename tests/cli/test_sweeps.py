"""Sweeps: a summary gathers every job, failed jobs become rows, resume skips finished jobs,
and the joblib and submitit launchers run for real."""
import json
import signal
import time

import pandas as pd
import pytest
from helpers import gnngp, gnngp_popen, in_process


def sweep(tmp_path, *args, status=0, fresh=False):
    """``gnngp run -m ARGS``: in this process, or in a fresh one (``fresh``: the launchers' own processes)."""
    command = gnngp if fresh else in_process
    out = command("run", "-m", *args, f"hydra.sweep.dir={tmp_path}")
    assert out.returncode == status, out.stderr
    return pd.read_csv(tmp_path / "summary.csv"), out


@pytest.mark.paper  # a sweep of processes (16 s): runs in CI with -m paper
def test_two_job_sweep_writes_a_summary(tmp_path):
    summary, out = sweep(tmp_path, "kernel=gcngp,gcngp_x")
    assert summary["method"].tolist() == ["GCNGP", "GCNGP-X"] and (summary["status"] == "ok").all()
    assert "sweep summary (2 rows, 0 failed)" in out.stderr + out.stdout


@pytest.mark.paper  # a sweep of processes (17 s): runs in CI with -m paper
def test_a_failing_job_is_a_row_and_the_others_survive(tmp_path):
    # a job that fails while running (options that parse, but more landmarks than the graph's training
    # nodes); a sweep with a refused option is refused whole before its first job (test_preflight.py)
    summary, out = sweep(tmp_path, "kernel=gcngp_x", "landmarks.count=10,100000", status=1)   # written first, then exit 1
    assert summary["status"].tolist() == ["ok", "error"]
    assert out.stderr.strip().splitlines()[-1] == f"gnngp: error: 1 of 2 jobs failed; their errors are rows of {tmp_path / 'summary.csv'}"
    assert "landmarks.count=100000 exceeds the 300 training nodes" in summary.loc[1, "error"]
    # the failed sweep is this command's, not the next one's: a later run in the same process succeeds
    after = in_process("run", "kernel=gcngp", f"hydra.run.dir={tmp_path / 'after'}")
    assert after.returncode == 0, after.stderr


def test_a_summary_that_cannot_be_written_fails_the_command(tmp_path):
    # Hydra turned the callback's IsADirectoryError into a warning: a sweep with a failed job exited 0
    (tmp_path / "summary.csv").mkdir()
    out = in_process("run", "-m", "kernel=gcngp_x", "landmarks.count=100000", f"hydra.sweep.dir={tmp_path}")
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1] == (
        f"gnngp: error: 1 of 1 jobs failed; their errors are rows of each job's results.csv in {tmp_path}; the sweep summary "
        f"{tmp_path / 'summary.csv'} could not be written (Is a directory); each job's results.csv holds its rows, and gnngp report "
        f"{tmp_path} reads them")


@pytest.mark.paper  # slow: runs in CI with -m paper
def test_resume_skips_finished_jobs_and_reruns_failed_ones(tmp_path):
    sweep(tmp_path, "kernel=gcngp,gcngp_x")
    first = pd.read_csv(tmp_path / "0" / "results.csv")
    pd.DataFrame([{"status": "error", "method": "GCNGP-X", "error": "killed"}]).to_csv(tmp_path / "1" / "results.csv", index=False)
    summary, out = sweep(tmp_path, "kernel=gcngp,gcngp_x", "resume=true")
    assert "already has results; skipping" in out.stderr + out.stdout
    assert pd.read_csv(tmp_path / "0" / "results.csv")["timestamp"].tolist() == first["timestamp"].tolist()
    assert summary["method"].tolist() == ["GCNGP", "GCNGP-X"] and (summary["status"] == "ok").all()
    kept = list((tmp_path / "1").glob("results.before-resume-*.csv"))  # the failed attempt is kept, not lost
    assert len(kept) == 1 and pd.read_csv(kept[0])["error"].tolist() == ["killed"]


def test_a_sweep_into_the_folder_of_a_larger_one_summarises_its_own_jobs_only(tmp_path):
    """A sweep of one job (resumed or not) into a folder where a sweep of two failed one: the
    summary and the exit status are the one job's, and the other folder, left as it was, is named."""
    summary, _ = sweep(tmp_path, "kernel=gcngp_x", "landmarks.count=10,100000", status=1)
    assert summary["status"].tolist() == ["ok", "error"]
    for extra in ([], ["resume=true"]):
        summary, out = sweep(tmp_path, "kernel=gcngp_x", "landmarks.count=10", *extra)   # exit 0: the failed job is not this sweep's
        assert set(summary["job"]) == {0} and (summary["status"] == "ok").all(), summary   # (a job's file keeps every run's rows)
        assert "1 job folder of an earlier sweep" in out.stderr + out.stdout and "(job 1) left out" in out.stderr + out.stdout
    assert (tmp_path / "1" / "results.csv").is_file()   # never removed


def test_a_sweep_of_other_settings_into_a_used_folder_summarises_its_own_rows_only(tmp_path):
    """A trial: 4 GCNGP jobs, then 2 GCNGP-X jobs into the same folder; jobs 0 and 1's files keep
    both sweeps' rows, and the second summary said '4 rows' for its 2 jobs, GCNGP's among them."""
    sweep(tmp_path, "kernel=gcngp", "seed=0,1")
    summary, out = sweep(tmp_path, "kernel=gcngp_x", "seed=0")
    assert summary["method"].tolist() == ["GCNGP-X"] and summary["job"].tolist() == [0]
    assert "sweep summary (1 row, 0 failed)" in out.stderr + out.stdout
    assert "holds 1 row of an earlier job with other overrides, left out" in out.stderr + out.stdout
    assert len(pd.read_csv(tmp_path / "0" / "results.csv")) == 2   # the file keeps both: nothing is lost
    # a job that does not read a key of the sweep records its rows without it (.hydra/overrides.yaml has it): still its rows
    summary, _ = sweep(tmp_path / "unread", "kernel=gcngp,ggp", "kernel.layers=3", "dataset.num_nodes=300")
    assert summary["method"].tolist() == ["GCNGP", "GGP"] and (summary["status"] == "ok").all()


@pytest.mark.paper  # slow: runs in CI with -m paper
@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_launchers_run_the_sweep(tmp_path, launcher):
    pytest.importorskip(f"hydra_plugins.hydra_{'joblib' if launcher == 'joblib' else 'submitit'}_launcher")  # the launchers extra
    extra = ["hydra.launcher.timeout_min=10"] if launcher == "submitit_local" else ["hydra.launcher.n_jobs=2"]
    summary, _ = sweep(tmp_path, f"hydra/launcher={launcher}", *extra, "kernel=gcngp,gcngp_x", fresh=True)
    assert sorted(summary["method"]) == ["GCNGP", "GCNGP-X"] and (summary["status"] == "ok").all()


def test_the_ready_slurm_launcher_config_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")  # the launchers extra
    out = in_process("run", "hydra/launcher=slurm", "--cfg", "hydra", "-p", "hydra.launcher")
    assert out.returncode == 0, out.stderr
    assert "partition: gpu" in out.stdout and "gpus_per_task: 1" in out.stdout and "SlurmLauncher" in out.stdout


def test_the_same_sweep_run_again_into_its_folder_summarises_this_sweeps_rows_once(tmp_path):
    """Without resume=true a sweep runs every run anew and appends it to the job's results.csv; its
    summary counted the earlier sweep's rows of the same overrides too (helper-53: 4 rows for 2
    jobs, job 0 run 0 twice). The earlier rows stay in results.csv."""
    sweep(tmp_path, "kernel=gcngp,gcngp_x", "dataset.num_nodes=300")
    for job in ("0", "1"):   # as an earlier sweep's: an hour before
        results = pd.read_csv(tmp_path / job / "results.csv")
        results["timestamp"] = (pd.to_datetime(results["timestamp"]) - pd.Timedelta(hours=1)).map(lambda t: t.isoformat())
        results.to_csv(tmp_path / job / "results.csv", index=False)
    summary, out = sweep(tmp_path, "kernel=gcngp,gcngp_x", "dataset.num_nodes=300")
    assert summary["job"].tolist() == [0, 1] and (summary["status"] == "ok").all()
    assert "sweep summary (2 rows, 0 failed)" in out.stderr + out.stdout
    assert "holds 1 row of an earlier sweep's run of this job, left out" in out.stderr + out.stdout
    assert len(pd.read_csv(tmp_path / "0" / "results.csv")) == 2   # nothing lost


def test_the_slurm_launcher_without_slurm_is_one_line_before_any_job(tmp_path, monkeypatch):
    """Without srun on the PATH, submitit's executor raised a 42-line traceback (helper-53): one line, no folder."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")  # the launchers extra
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm-here"))
    out = in_process("run", "-m", "hydra/launcher=slurm", f"hydra.sweep.dir={tmp_path / 'sweep'}", "kernel=gcngp,gcngp_x",
                     "dataset.num_nodes=300")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and len(errors) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "SLURM's srun is not on this machine's PATH" in errors[0] and "hydra/launcher=submitit_local" in errors[0]
    assert not (tmp_path / "sweep").exists()


def test_the_summary_shows_each_jobs_swept_values_and_the_log_the_method_as_typed(tmp_path):
    """Each line of a sweep's summary says what its job ran (the keys the sweep varied, as typed:
    kernel=, not Hydra's model=), and so do the launcher's log lines."""
    summary, out = sweep(tmp_path, "kernel=gcngp,gcngp_x", "kernel.layers=2")
    log = out.stderr + out.stdout
    assert summary["swept"].tolist() == ["kernel=gcngp", "kernel=gcngp_x"]   # kernel.layers=2 is every job's: not swept
    assert "#0 : kernel=gcngp kernel.layers=2" in log and "#1 : kernel=gcngp_x kernel.layers=2" in log
    assert "model=" not in log
    table = log[log.index("sweep summary"):]
    assert "kernel=gcngp_x" in table.splitlines()[3] and " swept " in table.splitlines()[1]


def test_a_sweep_summary_of_any_jobs_names_their_values(tmp_path):
    """The summary's swept values from the jobs' own overrides, a failed job's too; a search's
    best trial with its parameters and job."""
    import json

    from gnngp_cli.cli.sweep import best_trial, collect, console_table
    from gnngp_cli.results.rowfile import to_frame

    for job, (dataset, model, status) in enumerate((("cora", "gcngp", "ok"), ("citeseer", "gcngp_x", "ok"), ("citeseer", "gcn", None))):
        (tmp_path / str(job) / ".hydra").mkdir(parents=True)
        (tmp_path / str(job) / ".hydra" / "overrides.yaml").write_text(f"- dataset={dataset}\n- model={model}\n- runs=1\n")
        if status:
            pd.DataFrame([{"status": status, "dataset": dataset, "method": model.upper(), "val": 0.7 + job / 10, "test": 0.7,
                           "overrides": json.dumps([f"dataset={dataset}", f"model={model}", "runs=1"])}]).to_csv(tmp_path / str(job) / "results.csv", index=False)
    header, rows = collect(tmp_path)
    summary = to_frame(header, rows)
    assert summary["swept"].tolist() == ["dataset=cora kernel=gcngp", "dataset=citeseer kernel=gcngp_x", "dataset=citeseer gnn=gcn"]
    assert summary["status"].tolist() == ["ok", "ok", "error"] and "dataset=citeseer gnn=gcn" in console_table(summary)
    shown = console_table(summary)
    assert "NaN" not in shown and "nan" not in shown   # an ok row's error and a failed row's test are blank
    assert "strategy" not in shown and "labelled" not in shown   # no active run: no columns of one
    (tmp_path / "optimization_results.yaml").write_text("name: optuna\nbest_params:\n  model: gcngp_x\n  dataset: citeseer\nbest_value: 0.8\n")
    assert best_trial(tmp_path, {str(r["job"]): r["swept"] for r in rows}) == \
        "best trial: kernel=gcngp_x dataset=citeseer (validation metric 0.8000; job 1)"
    import time   # an adversary's: a plain sweep (or a later search) into the folder named an earlier search's best trial as its own
    assert best_trial(tmp_path, {str(r["job"]): r["swept"] for r in rows}, since=time.time() + 5) is None
    (tmp_path / "optimization_results.yaml").write_text("name: optuna\nbest_params: {}\nbest_value: 0.8\n")
    assert best_trial(tmp_path, {}) is None   # a search of no parameter: no 'best trial:  (...)' line


def test_an_active_sweeps_console_summary_names_the_strategy_and_labels_of_each_row():
    """A sweep of strategies (``-m active=random,sigma_opt``): a row per budget, told apart by the
    strategy and the labels bought; a GP job's row beside them leaves those cells blank."""
    from gnngp_cli.cli.sweep import console_table

    summary = pd.DataFrame([{"job": 0, "status": "ok", "dataset": "cora", "method": "GCNGP", "strategy": "random", "labelled": 10, "test": 0.5},
                            {"job": 0, "status": "ok", "dataset": "cora", "method": "GCNGP", "strategy": "random", "labelled": 20, "test": 0.6},
                            {"job": 1, "status": "ok", "dataset": "cora", "method": "GCNGP", "strategy": "sigma_opt", "labelled": 10, "test": 0.7},
                            {"job": 2, "status": "ok", "dataset": "cora", "method": "GCNGP", "test": 0.8}])
    lines = console_table(summary).splitlines()
    assert lines[0].split()[3:6] == ["method", "strategy", "labelled"]
    assert lines[2].split()[3:6] == ["GCNGP", "random", "20"] and lines[3].split()[3:6] == ["GCNGP", "sigma_opt", "10"]
    assert "nan" not in lines[4].lower() and lines[4].split()[3:5] == ["GCNGP", "0.8000"]


def test_a_sweep_stopped_in_a_later_job_names_the_jobs_before_it(tmp_path):
    """A trial: SIGTERM (or Ctrl-C) in job 2 of a sweep said only what job 2 had finished; jobs 0
    and 1 were whole on disk. The line names the sweep's folder and the jobs before this one."""
    proc = gnngp_popen("run", "-m", "dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp_x", "landmarks.count=16", "runs=1,2,100000",
                       "progress=false", f"hydra.sweep.dir={tmp_path}")
    results, deadline = tmp_path / "2" / "results.csv", time.time() + 120
    while time.time() < deadline and proc.poll() is None and not (results.is_file() and len(results.read_text().splitlines()) > 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    errors = [line for line in err.splitlines() if line.startswith("gnngp: error:")]
    assert proc.returncode == 128 + signal.SIGTERM and len(errors) == 1, err[-2000:]
    assert f"in {results} (job 2 of the sweep in {tmp_path}; jobs 0-1 before it are in their folders there)" in errors[0]
    assert "run the sweep again with resume=true" in errors[0]
    assert [len(pd.read_csv(tmp_path / str(job) / "results.csv")) for job in (0, 1)] == [1, 2]
    summary = pd.read_csv(tmp_path / "summary.csv")   # the stopped sweep's summary: its jobs as their folders hold them
    assert summary["job"].value_counts().sort_index().tolist()[:2] == [1, 2] and set(summary["job"]) >= {0, 1, 2}
    assert (summary[summary["job"] < 2]["status"] == "ok").all() and (summary[summary["job"] == 2]["status"] == "ok").sum() >= 1


def test_a_sweep_override_that_does_not_compose_is_one_line_before_any_job(tmp_path):
    """A trial: Hydra's warning (three lines, 'Callback Preflight.on_multirun_start raised ...')
    came first, then the jobs before the bad one ran, then the error. A fresh process: the
    warning reaches its stderr (in this one, pytest's capture)."""
    message = "could not be converted to Integer"
    out = gnngp("run", "-m", "dataset=csbm", "dataset.num_nodes=60", "kernel.layers=2,x", f"hydra.sweep.dir={tmp_path}")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and len(lines) == 1 and lines[0].startswith("gnngp: error:") and message in lines[0], out.stderr
    assert not (tmp_path / "0").exists()


@pytest.mark.parametrize("flag", ["--cfg", "--info"])
def test_a_sweep_beside_cfg_or_info_is_named(tmp_path, flag):
    """A trial: it said the overrides could not be applied, with hints on lists and fit.learn."""
    out = in_process("run", "-m", "dataset=csbm", flag, *(["job"] if flag == "--cfg" else []), f"hydra.sweep.dir={tmp_path}")
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and len(errors) == 1 and "-m runs a sweep, and --cfg, --info" in errors[0] and "fit.learn" not in errors[0]


def test_overrides_after_a_flag_are_read_as_overrides(tmp_path):
    """A trial: argparse takes the overrides as one run of words, so an override after --cfg job
    was 'unrecognized arguments' (its usage, exit 2), and one after --info was --info's choice."""
    out = in_process("run", "dataset=csbm", "--cfg", "job", "kernel=gcngp_x")
    assert out.returncode == 0 and "name: gcngp" in out.stdout and "low_rank: true" in out.stdout
    out = in_process("run", "--info", "dataset=csbm")
    assert out.returncode == 0 and "invalid choice" not in out.stderr
    done = in_process("run", "dataset=csbm", "dataset.num_nodes=60", "-m", "seed=1,2", f"hydra.sweep.dir={tmp_path}")
    assert done.returncode == 0 and (tmp_path / "1" / "results.csv").is_file()


def test_a_sweep_preset_without_m_or_any_of_its_keys_is_one_line(tmp_path):
    """A trial: `gnngp run experiment=table4` ran one job of the defaults (GCNGP on csbm), exit 0.
    One job of the preset, chosen by one of its swept keys, still runs without -m."""
    out = in_process("run", "experiment=table4", f"hydra.run.dir={tmp_path / 'a'}")
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and len(errors) == 1 and "experiment=table4 is a sweep of many jobs (over dataset, model): add -m" in errors[0]
    assert not (tmp_path / "a").exists()
    half = in_process("run", "experiment=table4", "kernel=gcngp", f"hydra.run.dir={tmp_path / 'h'}")   # the dataset left to csbm's default
    assert half.returncode == 1 and "giving each of its keys one value" in half.stderr
    assert in_process("run", "experiment=table4", "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp",
                      f"hydra.run.dir={tmp_path / 'b'}").returncode == 0


def test_a_stopped_resume_keeps_the_whole_sweep_in_its_summary(tmp_path):
    """A trial: a resumed sweep stopped in its first job wrote a summary of that job alone (the
    jobs not reached were called an earlier sweep's), or of none (a header alone). A stopped
    resume summarises every job folder; a stop before any job wrote a result leaves the summary."""
    from omegaconf import OmegaConf

    from gnngp_cli.cli import sweep

    assert in_process("run", "-m", "dataset=csbm", "dataset.num_nodes=60", "seed=1,2,3", f"hydra.sweep.dir={tmp_path}").returncode == 0
    whole = pd.read_csv(tmp_path / "summary.csv")
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "overrides": {"task": ["seed=1,2,3"]}, "sweeper": {}},
                               "resume": True, "results_file": "results.csv"})
    callback = sweep.SweepSummary()
    callback.on_multirun_start(config)   # as the resumed sweep starts: every folder is there already
    callback.on_multirun_end(config, stopped=True)
    again = pd.read_csv(tmp_path / "summary.csv")
    assert again["job"].tolist() == whole["job"].tolist() == [0, 1, 2] and again["swept"].tolist() == ["seed=1", "seed=2", "seed=3"]
    fresh = tmp_path / "other"
    (fresh / "0" / ".hydra").mkdir(parents=True)   # a job launched, stopped before writing
    (fresh / "summary.csv").write_text("job,swept,status\n0,seed=1,ok\n")
    config.hydra.sweep.dir, config.resume = str(fresh), False
    callback = sweep.SweepSummary()
    callback._before = {}
    callback.on_multirun_end(config, stopped=True)
    assert (fresh / "summary.csv").read_text() == "job,swept,status\n0,seed=1,ok\n"


def test_a_sweep_of_gnns_takes_their_shared_keys(tmp_path):
    """A trial: -m gnn=gcn,sgc gnn.epochs=1 was 'unknown key gnn.epochs; did you mean gnn=gcn
    (its gnn.epochs) ...', the command as typed (Hydra checks the sweep's other overrides against
    the default method, a kernel, before any job chooses a GNN)."""
    out = in_process("run", "-m", "dataset=csbm", "dataset.num_nodes=200", "gnn=gcn,sgc", "gnn.epochs=2", f"hydra.sweep.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["method"].tolist() == ["GCN", "SGC"] and (summary["status"] == "ok").all()
    assert all("gnn.epochs=2" in o for o in summary["overrides"])
    for job in ("0", "1"):   # each job's GNN read it: two epochs
        assert json.loads(pd.read_csv(tmp_path / job / "results.csv")["extra"].iloc[0])["epochs"] == 2


def test_a_job_that_wrote_no_row_is_named_by_its_dataset_and_method_in_the_summary(tmp_path):
    """A trial: a sweep stopped during its second job; that job's row in summary.csv (and the
    report's failed-runs table) read '? / ?', though its folder's config says pubmed and GCNGP."""
    from omegaconf import OmegaConf

    from gnngp_cli.api import compose
    from gnngp_cli.cli.sweep import collect

    job = tmp_path / "0" / ".hydra"
    job.mkdir(parents=True)
    OmegaConf.save(compose(["dataset=pubmed", "kernel=gcngp_x"]), job / "config.yaml")
    (job / "overrides.yaml").write_text("- dataset=pubmed\n- kernel=gcngp_x\n")
    (tmp_path / "1" / ".hydra").mkdir(parents=True)   # a folder without a config: its row goes without a name, as before
    _, rows = collect(tmp_path)
    assert (rows[0]["dataset"], rows[0]["method"], rows[0]["status"]) == ("pubmed", "GCNGP-X", "error")
    assert "dataset" not in rows[1] and rows[1]["status"] == "error"


def test_an_earlier_sweeps_rows_in_a_job_folder_are_not_this_jobs_result(tmp_path):
    """An adversary's trial: sweep A (kernel.layers=1,2) then sweep B (3,4) into one folder, B stopped
    before its job 0 wrote a row: B's summary showed job 0 'kernel.layers=3 ok, test 0.8258', A's row."""
    from gnngp_cli.cli.sweep import collect
    from gnngp_cli.results.resume import job_overrides, recorded_by
    from gnngp_cli.results.rowfile import to_text

    job = tmp_path / "0"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- dataset=csbm\n- kernel=gcngp_x\n- kernel.layers=3\n")
    earlier = job_overrides(["dataset=csbm", "kernel=gcngp_x", "kernel.layers=1"])
    (job / "results.csv").write_text(to_text(["status", "dataset", "method", "run", "test", "overrides"],
                                             [{"status": "ok", "dataset": "csbm", "method": "GCNGP-X", "run": 0, "test": 0.8258, "overrides": earlier}]))
    _, [row] = collect(tmp_path)
    assert row["status"] == "error" and "holds an earlier job's rows, of other overrides" in row["error"] and "test" not in row
    # the job's own rows: the settings they record are the job's (its overrides.yaml may hold more; runs aside)
    assert recorded_by(job_overrides(["kernel.layers=3", "runs=3"]), job_overrides(["dataset=csbm", "kernel.layers=3", "runs=5"]))
    assert not recorded_by(earlier, job_overrides(["dataset=csbm", "kernel=gcngp_x", "kernel.layers=3"]))
    assert recorded_by("rows of an older gnngp", job_overrides(["kernel.layers=3"]))   # overrides not JSON: not told apart


def test_a_job_a_stop_cut_short_after_some_splits_is_an_error_row_beside_its_kept_rows(tmp_path):
    """An adversary's trial: a splits=all sweep stopped after 1 of minesweeper's 10 splits wrote a
    summary of one 'ok' row (0 failed), and gnngp report read it as the job's result."""
    from gnngp_cli.cli.sweep import _cut_short

    from omegaconf import OmegaConf

    from gnngp_cli.api import compose

    (tmp_path / ".hydra").mkdir()
    OmegaConf.save(compose(["dataset=minesweeper", "kernel=gcngp_x", "runs=2"]), tmp_path / ".hydra" / "config.yaml")
    rows = [{"job": "0", "status": "ok", "dataset": "minesweeper", "method": "GCNGP-X", "run": 0, "split_index": 0, "split_count": 10}]
    [cut] = _cut_short(tmp_path, rows)
    assert cut["status"] == "error" and cut["error"] == "stopped after 1 of its 20 runs and splits; its rows are kept, and resume=true runs the rest"
    whole = [{**rows[0], "run": r, "split_index": s} for r in range(2) for s in range(10)]
    assert _cut_short(tmp_path, whole) == [] and _cut_short(tmp_path, []) == []
    # an adversary's: a deterministic GP job of runs=3 finished its one planned run, and was called cut short
    OmegaConf.save(compose(["dataset=csbm", "kernel=gcngp", "runs=3", "repeat_deterministic=false"]), tmp_path / ".hydra" / "config.yaml")
    assert _cut_short(tmp_path, [{**rows[0], "split_count": ""}]) == []
