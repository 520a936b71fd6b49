"""Progress where there is no terminal: a log line at least every interval, for GNN epochs
(loss and validation metric), kernel layers and the RBF gamma search (their share of the total)."""
import logging
import time

import pytest
from helpers import in_process

from gnngp_cli import progress
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


def test_a_stage_ended_by_a_signal_or_an_error_says_stopped_not_done(caplog):
    # a trial: SIGTERM's job logged "GCNGP on cora: done in 37s" right before "stopped by SIGTERM: no run ... had finished"
    caplog.set_level(logging.INFO, logger="gnngp")
    with pytest.raises(KeyboardInterrupt), Progress("GCNGP on cora", total=4, interval=0.05) as progress:
        progress.step(1, "layer 1")
        time.sleep(0.12)
        raise KeyboardInterrupt
    lines = [r.getMessage() for r in caplog.records]
    assert lines[-1].startswith("GCNGP on cora: stopped after") and not any("done in" in line for line in lines)


def test_quiet_when_disabled_or_short(caplog):
    caplog.set_level(logging.INFO, logger="gnngp")
    with Progress("short", total=2, interval=5.0) as progress:
        progress.step(2)
    with Progress("off", total=2, interval=0.01, enabled=False) as progress:
        time.sleep(0.05)
        progress.step(2)
    assert not caplog.records


@pytest.fixture
def gnngp(monkeypatch):
    """``gnngp run`` in this process, its stderr not a terminal (as in CI or SLURM), with a line
    every millisecond (what GNNGP_PROGRESS_SECONDS=0.001 sets when the command starts)."""
    monkeypatch.setattr(progress, "INTERVAL", 0.001)
    return lambda *args: in_process("run", *args)


def test_gnn_epochs_log_loss_and_validation_metric_without_a_terminal(tmp_path, gnngp):
    out = gnngp("gnn=gcn", "gnn.epochs=3", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    epochs = [line for line in (out.stdout + out.stderr).splitlines() if "GCN training: " in line and "epochs" in line]
    assert any("3/3 (100%) epochs, loss " in line and ", val " in line for line in epochs), epochs


def test_kernel_layers_and_gamma_search_log_their_share(tmp_path, gnngp):
    out = gnngp("kernel=rbf", "kernel.gamma_search=true", "kernel.gamma_grid.num=3", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "RBF on csbm: " in text and "gamma 3 of 3" in text and "(100%)" in text


def stage_lines(caplog, prefix):
    return [(r.created, r.getMessage()) for r in caplog.records if r.getMessage().startswith(prefix)]


def test_a_long_step_says_where_it_is_inside_at_a_bounded_rate(caplog):
    from gnngp_cli.progress import within

    caplog.set_level(logging.INFO, logger="gnngp")
    with Progress("kernel H2GCNGP on x", total=3, interval=0.05) as progress:
        progress.step(1, "kernel ego done")
        with within("readout"):
            for path in range(1, 4):
                with within(f"branch {path} of 3"):
                    time.sleep(0.2)
    lines = stage_lines(caplog, "kernel H2GCNGP on x: 1/3")
    texts = [text for _, text in lines]
    for path in range(1, 4):   # the line moves with the work
        assert any(f"kernel ego done [readout > branch {path} of 3]" in text for text in texts), texts
    gaps = [b - a for (a, _), (b, _) in zip(lines, lines[1:-1])]   # the last is the closing line
    assert gaps and min(gaps) >= 0.045, gaps                       # never more often than the interval
    assert len(lines) <= 0.6 / 0.05 + 2


def test_outside_a_stage_within_does_nothing_and_an_inner_stage_speaks_for_its_time(caplog):
    from gnngp_cli.progress import within

    caplog.set_level(logging.INFO, logger="gnngp")
    with within("nothing open"):
        pass
    with Progress("outer", total=2, interval=0.05):
        with Progress("building the hop2 operator", interval=0.05):
            time.sleep(0.3)
    outer = [text for _, text in stage_lines(caplog, "outer:")]
    inner = [text for _, text in stage_lines(caplog, "building the hop2 operator:")]
    assert len(inner) >= 3 and len(outer) <= 3, (outer, inner)   # the outer stage: only its closing lines (and one at most around the switch)
    assert not any("nothing open" in r.getMessage() for r in caplog.records)


def test_an_h2gcn_kernel_on_a_small_graph_reports_each_path_of_its_readout(tmp_path, monkeypatch, caplog):
    """H2GCNGP-X on a small csbm graph, each sparse product slowed down and the interval forced
    low: the kernel's one long step (the readout over 7 paths of hops) logs lines that name the
    path being computed, and no two lines of the stage come closer than the interval."""
    from gnngp_cli import progress as progress_module
    from gnngp_cli.api import compose
    from gnngp_cli.graph.operators import Adjacency
    from gnngp_cli.cli.execute import run_job

    interval = 0.05
    monkeypatch.setattr(progress_module, "INTERVAL", interval)
    matmul = Adjacency.matmul

    def slow(self, dense):
        time.sleep(0.12)
        return matmul(self, dense)

    monkeypatch.setattr(Adjacency, "matmul", slow)
    caplog.set_level(logging.INFO, logger="gnngp")
    cfg = compose(["kernel=h2gcngp_x", "dataset.num_nodes=300", "landmarks.count=20", "nugget.num=5"])
    row = run_job(cfg)[0]
    assert row["status"] == "ok"
    lines = stage_lines(caplog, "H2GCNGP-X on csbm: ")
    texts = [text for _, text in lines]
    paths = {p for p in range(1, 8) if any(f"[readout > branch {p} of 7]" in text for text in texts)}
    assert len(paths) >= 5, texts      # most of the 7 paths named while they run (each takes 0.12 s or more)
    assert texts[-1].startswith("H2GCNGP-X on csbm: done in")
    beats = lines[:-2]                 # the stage's closing line and "done in" come when it ends
    gaps = [b - a for (a, _), (b, _) in zip(beats, beats[1:])]
    assert gaps and min(gaps) >= interval * 0.9, gaps   # never more often than the interval


def test_a_stage_without_steps_says_only_how_long(caplog):
    caplog.set_level(logging.INFO, logger="gnngp")
    with Progress("building the hop2 operator of 300 nodes", interval=0.05):
        time.sleep(0.12)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("building the hop2 operator of 300 nodes: 0s elapsed") and lines[-1].endswith("done in 0s"), lines
