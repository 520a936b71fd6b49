"""A second SIGTERM (or Ctrl-C) during the clean-up after the first stops that clean-up in
order: one ``gnngp: error:`` line saying what was kept, the finished rows on disk, exit
``128 + signal``, and no traceback, Dask noise or multiprocessing's "leaked semaphore" warning.

The clean-up is made slow on purpose (the backend's exit, or the cluster's close, waits 60 s
after leaving a marker file), so that the second signal lands inside it every time: the command
runs in a fresh process through a small driver that patches the one function, then calls
``gnngp``'s ``main``."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

DRIVER = r"""
import sys, time
from pathlib import Path

kind, marker = sys.argv[1], Path(sys.argv[2])

def slowly(original):
    def slow(*args, **kwargs):
        marker.write_text("clean-up started")
        time.sleep(60)   # a clean-up that hangs: the second signal lands here
        return original(*args, **kwargs)
    return slow

if kind == "local":
    from gnngp_cli.backends.local import LocalBackend
    LocalBackend.__exit__ = slowly(LocalBackend.__exit__)
else:
    from gnngp_cli.backends.rowblocks import cluster
    cluster.close_cluster = slowly(cluster.close_cluster)
from gnngp_cli.cli.main import main
main(sys.argv[3:])
"""

NOISE = ("Traceback", "leaked", "semaphore", "distributed.", "Exception ignored", "CancelledError")


def _stop_twice(tmp_path: Path, kind: str, overrides: list[str], sig: int) -> tuple[subprocess.CompletedProcess, pd.DataFrame, float]:
    """The job stopped by ``sig`` once its first row is written, and by ``sig`` again once its
    clean-up has started; the process, its rows, and the seconds from the second signal to its end."""
    run_dir, marker = tmp_path / "run", tmp_path / "cleanup-started"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, kind, str(marker), "run", *overrides, f"data.root={tmp_path / 'cache'}",
                             f"hydra.run.dir={run_dir}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    results = run_dir / "results.csv"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not (results.is_file() and len(results.read_text().splitlines()) > 1):
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    proc.send_signal(sig)
    while time.time() < deadline and proc.poll() is None and not marker.is_file():
        time.sleep(0.02)
    assert marker.is_file(), "the clean-up did not start"
    again = time.time()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), pd.read_csv(results), time.time() - again


def _assert_orderly(done: subprocess.CompletedProcess, rows: pd.DataFrame, seconds: float, sig: int, name: str) -> None:
    assert done.returncode == 128 + sig, done.stderr[-3000:]
    assert seconds < 30, f"the second signal took {seconds:.0f} s to end the process"   # the clean-up would have waited 60 s
    assert not any(word in done.stderr for word in NOISE), done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert f"stopped by {name} during the clean-up after {name}: clean-up cut short" in errors[0]
    assert f"the {len(rows)} run(s) finished in this job are in" in errors[0] and "resume=true" in errors[0]
    assert len(rows) >= 1 and (rows["status"] == "ok").all() and rows["run"].tolist() == list(range(len(rows)))


@pytest.mark.parametrize("sig, name", [(signal.SIGTERM, "SIGTERM"),
                                       pytest.param(signal.SIGINT, "Ctrl-C", marks=pytest.mark.paper)])   # the same path: one in the fast suite
def test_a_second_signal_during_a_local_jobs_clean_up_ends_it_in_one_line(tmp_path, sig, name):
    done, rows, seconds = _stop_twice(tmp_path, "local", ["dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp_x", "runs=100000",
                                                          "landmarks.count=16"], sig)
    _assert_orderly(done, rows, seconds, sig, name)


def test_the_command_leaves_the_signal_handlers_as_it_found_them_when_nothing_stopped_it():
    """In a notebook or a test, ``main`` in this process: without a stop, SIGTERM and SIGINT are
    handled as before it ran (a second Ctrl-C in a notebook must never end its kernel)."""
    from helpers import in_process

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert in_process("--version").returncode == 0
    assert in_process("run", "dataset=coraa").returncode == 1
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


@pytest.mark.paper  # a Dask cluster's start and stop: slow, runs in CI with -m paper
def test_a_second_sigterm_during_a_dask_jobs_clean_up_ends_it_in_one_line(tmp_path):
    done, rows, seconds = _stop_twice(tmp_path, "dask", ["dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp_x", "runs=100000",
                                                         "landmarks.count=16", "compute=dask", "compute.workers=1", "compute.dashboard=:0"],
                                      signal.SIGTERM)
    _assert_orderly(done, rows, seconds, signal.SIGTERM, "SIGTERM")
