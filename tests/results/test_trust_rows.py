"""Trust, section 2: no row is ever lost. Concurrent writers keep every row; run dirs do not
collide; a malformed results file is moved aside; an unwritable target sends the rows to a
named fallback; resume reruns a job whose settings changed; temporaries of killed writers are
cleaned; files honour the umask."""
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from gnngp_cli.data import DataStore
from gnngp_cli.data.files import remove_stale_temporaries
from gnngp_cli.results.writing import ResultsNotWritten, append_rows
from helpers import gnngp_popen, in_process

OK = {"status": "ok", "dataset": "cora", "method": "GCNGP", "metric": "accuracy", "test": 0.5, "timestamp": "2026-11-27T00:00:00+00:00"}
SMALL = ["dataset.num_nodes=200", "kernel=gcngp_x"]


def gnngp(*args, cwd=None):
    """``gnngp run ARGS`` started in a fresh process, left running (runs at once, side by side)."""
    return gnngp_popen("run", *args, cwd=cwd)


def _append_many(path: str, writer: int, count: int) -> None:
    for i in range(count):
        append_rows(Path(path), [{**OK, "writer": writer, "i": i}])


def test_four_processes_appending_fifty_rows_each_keep_all_two_hundred(tmp_path):
    path = tmp_path / "results.csv"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    table = pd.read_csv(path)
    assert len(table) == 200
    assert sorted(zip(table["writer"], table["i"])) == [(w, i) for w in range(4) for i in range(50)]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.paper  # slow end to end: runs with the paper tests, keeping the fast suite within its 10 minutes
def test_four_cli_runs_sharing_a_run_dir_keep_every_row(tmp_path):
    runs = [gnngp(*SMALL, f"seed={s}", f"hydra.run.dir={tmp_path}") for s in range(4)]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    table = pd.read_csv(tmp_path / "results.csv")
    assert sorted(table["seed"]) == [0, 1, 2, 3] and (table["status"] == "ok").all()


@pytest.mark.paper  # four processes at once: CI runs it with -m paper, off the fast suite
def test_runs_started_together_get_their_own_run_dirs(tmp_path):
    runs = [gnngp(*SMALL, f"seed={s}", cwd=tmp_path) for s in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    files = sorted((tmp_path / "outputs").glob("*/*/results.csv"))
    assert len(files) == 2 and files[0].parent != files[1].parent
    assert sorted(len(pd.read_csv(f)) for f in files) == [1, 1]
    for f in files:  # the dir name ends with microseconds and the pid
        stamp, pid = f.parent.name.rsplit("-", 1)
        assert pid.isdigit() and len(stamp.split("-")[-1]) == 6


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe garbage \x81\n\x00", b'status,test\nok,"unclosed\n'])
def test_a_malformed_results_file_is_moved_aside_and_the_new_rows_written(tmp_path, capfd, content):
    path = tmp_path / "results.csv"
    path.write_bytes(content)
    append_rows(path, [OK])
    assert pd.read_csv(path)["test"].tolist() == [0.5]
    aside = list(tmp_path.glob("results.malformed-*.csv"))
    assert len(aside) == 1 and aside[0].read_bytes() == content
    warning = [line for line in capfd.readouterr().err.splitlines() if line.startswith("gnngp: warning:")]
    assert len(warning) == 1 and str(aside[0]) in warning[0]


def test_rows_for_an_unwritable_target_go_to_a_named_fallback(tmp_path):
    target = tmp_path / "results.csv"
    target.mkdir()  # a folder where the file should be: it cannot be replaced
    with pytest.raises(ResultsNotWritten) as err:
        append_rows(target, [{**OK, "test": 0.7}, {**OK, "test": 0.8}], fallback_dir=tmp_path)
    fallback = Path(str(err.value).split("written to ")[1].split(" instead")[0])
    assert fallback.parent == tmp_path and pd.read_csv(fallback)["test"].tolist() == [0.7, 0.8]
    assert "could not write results to" in str(err.value) and "\n" not in str(err.value)


def test_cli_with_an_unwritable_results_file_names_the_fallback_in_one_line(tmp_path):
    (tmp_path / "results.csv").mkdir()
    run = in_process("run", *SMALL, f"hydra.run.dir={tmp_path}")
    err = run.stderr
    assert run.returncode == 1 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("gnngp: error:")]
    assert len(lines) == 1 and "rows were written to" in lines[0]
    fallback = Path(lines[0].split("written to ")[1].split(" instead")[0])
    assert fallback.parent == tmp_path and pd.read_csv(fallback)["status"].tolist() == ["ok"]


@pytest.mark.parametrize("name", ["../escape.csv", "/tmp/abs.csv", "sub/results.csv"])
def test_results_file_is_confined_to_the_run_dir(tmp_path, name):
    run = in_process("run", f"results_file={name}", f"hydra.run.dir={tmp_path}")
    err = run.stderr
    assert run.returncode == 1 and "Traceback" not in err
    assert f"gnngp: error: results_file='{name}' must be a file name inside the run dir" in err
    assert not (tmp_path.parent / "escape.csv").exists()


@pytest.mark.paper  # slow end to end: runs with the paper tests, keeping the fast suite within its 10 minutes
def test_resume_reruns_a_job_whose_overrides_changed(tmp_path):
    def sweep(*args):
        out = in_process("run", "-m", *args, f"hydra.sweep.dir={tmp_path}")
        assert out.returncode == 0, out.stderr
        return pd.read_csv(tmp_path / "summary.csv"), out.stdout + out.stderr

    sweep("kernel=gcngp_x", "dataset.num_nodes=200")
    summary, log = sweep("kernel=gcngp_x", "dataset.num_nodes=240", "resume=true")
    # kernel= is recorded as the one method choice it spells, model= (the log says it as typed)
    assert "its settings changed (was dataset.num_nodes=200 kernel=gcngp_x, now dataset.num_nodes=240 kernel=gcngp_x)" in log
    assert summary["n_nodes"].tolist() == [240] and summary["status"].tolist() == ["ok"]
    assert json.loads(summary.loc[0, "overrides"]) == ["dataset.num_nodes=240", "model=gcngp_x"]
    kept = list((tmp_path / "0").glob("results.before-resume-*.csv"))
    assert len(kept) == 1 and pd.read_csv(kept[0])["n_nodes"].tolist() == [200]
    _, log = sweep("kernel=gcngp_x", "dataset.num_nodes=240", "resume=true")
    assert "already has results; skipping" in log


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    path = tmp_path / "results.csv"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname().replace(".", "_")
    stale = tmp_path / f".results.csv.{host}.{dead.pid}.abcd1234.tmp"
    live = tmp_path / f".results.csv.{host}.{os.getpid()}.abcd1234.tmp"
    old_style = tmp_path / ".results.csv.k2j3h4.tmp"  # mkstemp naming of earlier versions
    for p in (stale, live, old_style):
        p.write_text("half a row")
    os.utime(old_style, (time.time() - 3600, time.time() - 3600))
    append_rows(path, [OK])
    assert not stale.exists() and not old_style.exists() and live.exists()
    assert remove_stale_temporaries(path) == []


def test_results_and_cached_raw_files_honour_the_umask(tmp_path, mirror):
    old = os.umask(0o022)
    try:
        append_rows(tmp_path / "results.csv", [OK])
        store = DataStore.from_config(str(tmp_path / "cache"), str(mirror))
        folder = store.fetch("Cora", ["raw/ind.cora.y"])
    finally:
        os.umask(old)
    assert (tmp_path / "results.csv").stat().st_mode & 0o777 == 0o644
    assert (folder / "raw" / "ind.cora.y").stat().st_mode & 0o777 == 0o644


def test_runs_that_cannot_differ_say_why_their_spread_is_zero():
    """A trial: runs=4 of an exact kernel gave 0.9235 +- 0.0000 without a word."""
    from gnngp_cli.results.rows import console_summary

    exact = [{"status": "ok", "method": "GCNGP", "dataset": "csbm", "metric": "accuracy", "kernel": "gcngp", "landmarks": 0, "test": 0.9235}] * 3
    assert "the same in every run: an exact kernel (or every training node a landmark) on one split draws nothing" in console_summary(exact)
    assert "the same in every run" in console_summary([{**row, "kernel": "gcngp_x", "landmarks": 270, "landmark_fraction": 1.0} for row in exact])
    varied = [{**exact[0], "test": t} for t in (0.9, 0.91)]   # a spread, or a low-rank kernel's same values by chance: no word
    assert "the same in every run" not in console_summary(varied)
    assert "the same in every run" not in console_summary([{**row, "kernel": "gcngp_x", "landmarks": 30} for row in exact])


def test_a_read_only_results_file_is_refused_not_replaced(tmp_path):
    """A trial: a results.csv made read-only (0444) by its owner was replaced by a writable copy
    with the new rows, without a word."""
    args = ["run", "dataset=csbm", "dataset.num_nodes=300", "progress=false", f"hydra.run.dir={tmp_path}"]
    assert in_process(*args).returncode == 0
    results = tmp_path / "results.csv"
    before = results.read_bytes()
    results.chmod(0o444)
    try:
        out = in_process(*args)
        assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith(f"gnngp: error: {results} is read-only (mode 444)")
        assert results.read_bytes() == before and results.stat().st_mode & 0o777 == 0o444
    finally:
        results.chmod(0o644)


def test_a_read_only_results_file_in_a_sweep_is_a_failed_job(tmp_path):
    """A helper's trial: the job refused its read-only results.csv, and the summary counted the
    file's old rows as the job's, ok, exit 0."""
    args = ["run", "-m", "dataset=csbm", "dataset.num_nodes=300", "seed=0,1", "progress=false", f"hydra.sweep.dir={tmp_path}"]
    assert in_process(*args).returncode == 0
    (tmp_path / "1" / "results.csv").chmod(0o444)
    try:
        out = in_process(*args)
        assert out.returncode == 1 and "1 of 2 jobs failed" in out.stderr, out.stderr[-2000:]
        summary = pd.read_csv(tmp_path / "summary.csv")
        job = summary[summary["job"] == 1]   # (job 0's file holds both sweeps' rows: the same settings, run again)
        assert job["status"].tolist() == ["error"] and "is read-only: the job did not run" in job["error"].iloc[0]
        assert (summary[summary["job"] == 0]["status"] == "ok").all()
    finally:
        (tmp_path / "1" / "results.csv").chmod(0o644)


def test_resume_with_more_runs_keeps_the_runs_done_and_runs_the_added_ones(tmp_path):
    """A trial: runs=3 then runs=5 resume=true ran all five again ("its settings changed"). Run r's
    seed is seed + r whatever runs says: the first three are kept, runs 3 and 4 run, and the
    sweep's summary lists all five; fewer runs than before runs nothing and keeps the rows whole."""
    common = ("run", "-m", "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp", f"hydra.sweep.dir={tmp_path}")
    assert in_process(*common, "runs=3").returncode == 0
    first = pd.read_csv(tmp_path / "0" / "results.csv")
    out = in_process(*common, "runs=5", "resume=true")
    log = (tmp_path / "0" / "gnngp.log").read_text()
    assert out.returncode == 0 and "holds 3 finished runs (its rows were computed with the same overrides and fewer runs); running the 2 missing" in log
    after = pd.read_csv(tmp_path / "0" / "results.csv")
    assert after["run"].tolist() == [0, 1, 2, 3, 4] and after["timestamp"].tolist()[:3] == first["timestamp"].tolist()
    assert pd.read_csv(tmp_path / "summary.csv")["run"].tolist() == [0, 1, 2, 3, 4]
    # fewer runs than before: the runs asked for are among its rows, kept whole (they were set aside and computed again, and the
    # rows set aside left the report)
    fewer = in_process(*common, "runs=2", "resume=true")
    assert fewer.returncode == 0 and "every run is there; its rows were computed with the same overrides and more runs" in fewer.stderr + fewer.stdout
    assert pd.read_csv(tmp_path / "0" / "results.csv")["timestamp"].tolist() == after["timestamp"].tolist()
    assert not list((tmp_path / "0").glob("results.before-resume-*"))


def test_a_file_made_read_only_during_a_run_is_not_replaced_and_a_files_mode_and_link_are_kept(tmp_path):
    """An adversary's trial: results.csv made read-only (chmod a-w) while a run of 4 went on came
    back writable (rw-r--r--) with 4 rows; a chmod 600 file became 644 at the next append; a
    symlinked results.csv became a regular file, its target never written."""
    path = tmp_path / "results.csv"
    append_rows(path, [{"status": "ok", "dataset": "csbm", "method": "GCNGP", "run": 0, "test": 0.9}])
    path.chmod(0o444)
    with pytest.raises(ResultsNotWritten, match="was made read-only during the run"):
        append_rows(path, [{"status": "ok", "dataset": "csbm", "method": "GCNGP", "run": 1, "test": 0.9}], fallback_dir=tmp_path)
    assert (path.stat().st_mode & 0o777) == 0o444 and len(pd.read_csv(path)) == 1
    path.chmod(0o600)
    append_rows(path, [{"status": "ok", "dataset": "csbm", "method": "GCNGP", "run": 1, "test": 0.9}])
    assert (path.stat().st_mode & 0o777) == 0o600 and len(pd.read_csv(path)) == 2
    link = tmp_path / "job" / "results.csv"
    link.parent.mkdir()
    link.symlink_to(path)
    append_rows(link, [{"status": "ok", "dataset": "csbm", "method": "GCNGP", "run": 2, "test": 0.9}])
    assert link.is_symlink() and pd.read_csv(path)["run"].tolist() == [0, 1, 2]


def test_a_resume_beside_a_live_job_on_its_file_is_refused_and_a_job_beside_a_resume_too(tmp_path):
    """An adversary's trial: two resume=true processes on one run folder at once both ran the
    missing runs (each run's rows twice; the next resume set the file aside as a learning curve
    "cut short"). A job holds its results file for its life: jobs adding rows share it (four runs
    side by side keep every row), a resuming job holds it alone, and the other is refused in one
    line, the rows already there kept."""
    from gnngp_cli.data.files import held_for_job

    common = ("run", "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp", f"hydra.run.dir={tmp_path}")
    assert in_process(*common).returncode == 0
    before = (tmp_path / "results.csv").read_bytes()
    with held_for_job(tmp_path / "results.csv", exclusive=False) as free:   # a job adding its rows, in another process
        assert free
        out = in_process(*common, "runs=2", "resume=true")
        assert out.returncode == 1 and "Traceback" not in out.stderr
        lines = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
        assert lines == [f"gnngp: error: another gnngp job is adding rows to {tmp_path / 'results.csv'} now, and resume=true would run "
                         "its runs again: wait for it to end and run this again"]
        assert in_process(*common, "seed=1").returncode == 0   # jobs adding rows side by side: as before
    assert (tmp_path / "results.csv").read_bytes().startswith(before) and len(pd.read_csv(tmp_path / "results.csv")) == 2
    with held_for_job(tmp_path / "results.csv", exclusive=True) as free:   # a resuming job
        assert free
        out = in_process(*common, "seed=2")
        assert out.returncode == 1 and "a gnngp job is resuming from" in out.stderr and "give another hydra.run.dir" in out.stderr
    assert len(pd.read_csv(tmp_path / "results.csv")) == 2
    # a job's hold ends with it: a resume afterwards runs
    out = in_process(*common, "runs=2", "resume=true")
    assert out.returncode == 0, out.stderr


def test_a_sweeps_job_refused_by_the_hold_is_a_failed_job_in_its_summary_not_the_other_jobs_rows(tmp_path, monkeypatch):
    """An adversary's trial: a resumed sweep beside a live one on the same folder: each refused the
    other's job, both exited 0 with '0 failed', and one summary counted the other sweep's unfinished
    rows as its job's. The refused job is an error row of its sweep's summary, and the sweep exits 1."""
    from gnngp_cli.data.files import held_for_job

    common = ("run", "-m", "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp", "seed=0,1", f"hydra.sweep.dir={tmp_path}")
    assert in_process(*common).returncode == 0
    with held_for_job(tmp_path / "0" / "results.csv", exclusive=False):   # another sweep's job 0, adding rows
        out = in_process(*common, "runs=2", "resume=true")
    assert out.returncode == 1 and "1 of 2 jobs failed" in out.stderr and "Traceback" not in out.stderr
    summary = pd.read_csv(tmp_path / "summary.csv", keep_default_na=False)
    job0 = summary[summary["job"] == 0]
    assert job0["status"].tolist() == ["error"] and job0["error"].iloc[0].startswith("the job did not run: another gnngp job is adding rows to")
    assert (summary[summary["job"] == 1]["status"] == "ok").all()
    # the next sweep (another sweep id) reads no note of the earlier one's: its job 0 ran and is ok; a run in the folder
    # beside a refused sweep does not remove that sweep's note (helper-58: its summary read the run's rows as its job's)
    out = in_process(*common, "runs=2", "resume=true")
    assert out.returncode == 0, out.stderr
    assert (pd.read_csv(tmp_path / "summary.csv", keep_default_na=False)["status"] == "ok").all()
    from gnngp_cli.results.rowfile import SWEEP_ENV, refused_job, refusal

    note = (tmp_path / "0" / ".gnngp-refused").read_text()
    monkeypatch.setenv(SWEEP_ENV, "another")
    refused_job(tmp_path / "0", None)
    assert (tmp_path / "0" / ".gnngp-refused").read_text() == note and refusal(tmp_path / "0", "another") is None


def test_the_hold_is_taken_where_its_file_cannot_be_written(tmp_path, capfd):
    """An adversary's trial: a folder named .results.csv.jobs (or another user's file there) could
    not be opened to write, and the job ran unguarded without a word: two resumes both ran the
    missing runs. It is opened to read (flock takes that), or the job warns that it runs unguarded."""
    from gnngp_cli.data.files import held_for_job

    (tmp_path / ".results.csv.jobs").mkdir()
    with held_for_job(tmp_path / "results.csv", exclusive=True) as first:
        with held_for_job(tmp_path / "results.csv", exclusive=True) as second:
            assert first and not second
    fifo = tmp_path / "fifo" / "results.csv"   # helper-58: a FIFO there (not writable) blocked the job for ever
    fifo.parent.mkdir()
    os.mkfifo(fifo.parent / ".results.csv.jobs", 0o444)
    os.chmod(fifo.parent, 0o555)   # (root writes anyway: the read-only open is forced below)
    real_open = os.open

    def no_write(path, flags, *args):
        if str(path).endswith(".jobs") and flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    import gnngp_cli.data.files as files
    files.os.open = no_write
    try:
        with held_for_job(fifo, exclusive=True) as free:
            assert free
    finally:
        files.os.open = real_open
        os.chmod(fifo.parent, 0o755)
    assert "not a regular file or folder" in capfd.readouterr().err
    missing = tmp_path / "gone" / "results.csv"   # a folder that is not there: nothing to hold, said
    with held_for_job(missing, exclusive=True) as free:
        assert free
    assert "the job runs unguarded" in capfd.readouterr().err
