"""Progress where there is no terminal: a log line at least every interval, for GNN epochs
(loss and validation metric), kernel layers and the RBF gamma search (their share of the total)."""
import logging
import os
import subprocess
import sys
import time

from gnngp_cli.progress import Progress


def test_a_step_longer_than_the_interval_still_gets_lines(caplog):
    caplog.set_level(logging.INFO, logger="gnngp")
    with Progress("kernel GCNGP on cora", total=4, interval=0.05) as progress:
        progress.step(1, "layer 1")
        time.sleep(0.35)      # one long step: the heartbeat speaks for it
        progress.step(4, "layer 2")
    lines = [r.getMessage() for r in caplog.records]
    beats = [line for line in lines if "1/4 (25%) layer 1" in line]
    assert len(beats) >= 3 and all("elapsed" in line for line in beats)
    assert lines[-1].startswith("kernel GCNGP on cora: done in")


def test_quiet_when_disabled_or_short(caplog):
    caplog.set_level(logging.INFO, logger="gnngp")
    with Progress("short", total=2, interval=5.0) as progress:
        progress.step(2)
    with Progress("off", total=2, interval=0.01, enabled=False) as progress:
        time.sleep(0.05)
        progress.step(2)
    assert not caplog.records


def gnngp(*args):
    env = {**os.environ, "GNNGP_PROGRESS_SECONDS": "0.001"}   # stderr is a pipe here, as in CI or SLURM
    return subprocess.run([sys.executable, "-m", "gnngp_cli.cli", "run", *args], capture_output=True, text=True, env=env, timeout=600)


def test_gnn_epochs_log_loss_and_validation_metric_without_a_terminal(tmp_path):
    out = gnngp("gnn=gcn", "gnn.epochs=3", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    epochs = [line for line in (out.stdout + out.stderr).splitlines() if "GCN training: " in line and "epochs" in line]
    assert any("3/3 (100%) epochs, loss " in line and ", val " in line for line in epochs), epochs


def test_kernel_layers_and_gamma_search_log_their_share(tmp_path):
    out = gnngp("kernel=rbf", "kernel.gamma_search=true", "kernel.gamma_grid.num=3", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "RBF on csbm: " in text and "gamma 3 of 3" in text and "(100%)" in text
