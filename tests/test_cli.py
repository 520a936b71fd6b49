"""End to end: the installed ``gnngp`` command, as a user runs it."""
import os
import subprocess
import sys

import pandas as pd
import pytest

GNNGP = [sys.executable, "-m", "gnngp_cli.cli"]


def gnngp(*args, cwd=None, env=None):
    return subprocess.run([*GNNGP, *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=600)


def test_default_run_on_embedded_csbm_writes_results(tmp_path):
    out = gnngp("run", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(tmp_path / "results.csv")
    assert rows.loc[0, "status"] == "ok" and rows.loc[0, "method"] == "GCNGP" and rows.loc[0, "dataset"] == "csbm"
    assert rows.loc[0, "test"] > 0.8
    for column in ("kernel_seconds", "inference_seconds", "load_seconds", "peak_rss_mb", "nugget", "timestamp", "version"):
        assert column in rows.columns
    assert "GCNGP on csbm" in out.stderr + out.stdout


def test_cora_through_the_mirror_reproduces_the_paper(tmp_path, data_overrides):
    out = gnngp("run", "dataset=cora", "kernel=gcngp", *data_overrides, f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    row = pd.read_csv(tmp_path / "results.csv").iloc[0]
    assert abs(row["test"] - 0.8280) <= 0.002 and row["n_nodes"] == 2708


def test_rerun_into_the_same_dir_appends_and_keeps_rows(tmp_path):
    for _ in range(2):
        assert gnngp("run", "kernel=gcngp_x", "runs=2", f"hydra.run.dir={tmp_path}").returncode == 0
    rows = pd.read_csv(tmp_path / "results.csv")
    assert len(rows) == 4 and rows["run"].tolist() == [0, 1, 0, 1] and rows["seed"].tolist() == [0, 1, 0, 1]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["kernel.layers=0"], "gnngp: error: kernel.layers=0 must be at least 1"),
        (["dataset=reddit", "data.download=false"], "gnngp: error: dataset 'Reddit' is not available"),
        (["kernel=gcngp_x", "landmarks.count=100000"], "gnngp: error: landmarks.count=100000 exceeds the 300 training nodes"),
        (["dataset=custom"], "gnngp: error: dataset=custom needs dataset.path=<dir>"),
        (["max_memory_gb=0.000001"], "gnngp: error: the exact GCNGP kernel on csbm needs about"),
        (["fit=mll", "kernel=ggp"], "gnngp: error: fit=mll needs a kernel with a trainable parameter"),
    ],
)
def test_bad_input_is_one_line_without_traceback(tmp_path, args, message):
    out = gnngp("run", *args, f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path}", env={"GNNGP_DATA_MIRROR": ""})
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1 and errors[0].startswith(message), out.stderr
    row = pd.read_csv(tmp_path / "results.csv").iloc[-1]
    assert row["status"] == "error" and message.split("error: ")[1][:20] in row["error"]


def test_help_and_cfg_job():
    help_out = gnngp("run", "--help")
    assert help_out.returncode == 0 and "dataset" in help_out.stdout and "kernel" in help_out.stdout
    cfg = gnngp("run", "dataset=cora", "kernel=gcngp_x", "--cfg", "job")
    assert cfg.returncode == 0 and "low_rank: true" in cfg.stdout and "name: cora" in cfg.stdout
    top = gnngp()
    assert top.returncode == 0 and "usage: gnngp" in top.stdout


def test_multirun_sweep_over_any_key(tmp_path):
    out = gnngp("run", "-m", "kernel=gcngp,gcngp_x", "kernel.layers=1,2", f"hydra.sweep.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    rows = pd.concat([pd.read_csv(p) for p in sorted(tmp_path.glob("*/results.csv"))])
    assert len(rows) == 4 and set(rows["method"]) == {"GCNGP", "GCNGP-X"} and set(rows["layers"]) == {1, 2}


def test_verify_prints_error_by_width(tmp_path):
    out = gnngp("verify", "kernel=gingp", "verify.widths=[64,128,256,1024]", "verify.seeds=8", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    table = pd.read_csv(tmp_path / "verify.csv")
    assert table["width"].tolist() == [64, 128, 256, 1024]
    assert table["relative_error"].iloc[-1] < table["relative_error"].iloc[0]
    assert "relative Frobenius error" in out.stdout and "verdict: PASS" in out.stdout
