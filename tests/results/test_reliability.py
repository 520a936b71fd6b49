"""Reliability, round two: each case an adversarial pass found (issue 29) as a regression test.
Nothing silently wrong (a changed processed cache, damaged results files, underflowing grids,
float64 custom features), nothing lost (interrupted jobs keep their finished runs; no user folder
is deleted), and one line instead of a traceback."""
from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from gnngp_cli.api import compose
from gnngp_cli.data import DataStore, load_dataset
from gnngp_cli.data.cache import PROCESSED
from gnngp_cli.errors import ConfigError
from gnngp_cli.results.writing import ResultsNotWritten, append_rows
from gnngp_cli.results.rowfile import check_row, read_rows

from helpers import in_process, run, split_masks, write_graph


def load(name, mirror, root):
    cfg = compose([f"dataset={name}"])
    return load_dataset(cfg.dataset, DataStore.from_config(str(root), str(mirror) if mirror else None))


# --- the processed cache is checked as strictly as the raw files ---------------------------------

def test_edited_labels_in_the_processed_cache_are_refused_and_rebuilt(mirror, tmp_path, capfd):
    """70 training labels changed inside gnngp.pt, saved as a plain tensor dict again: the
    tensors' digests no longer match, the file is rebuilt from the verified raw files."""
    cache = tmp_path / "cache"
    clean = load("cora", mirror, cache)
    path = cache / "Cora" / PROCESSED
    stored = torch.load(path, weights_only=True)
    stored["tensors"]["y"][:70] = (stored["tensors"]["y"][:70] + 1) % 7
    torch.save(stored, path)
    capfd.readouterr()
    again = load("cora", mirror, cache)
    err = capfd.readouterr().err
    assert f"the cache file {path} (the dataset) was changed after it was written (y no longer match" in err and "rebuilding it" in err
    assert torch.equal(again.y, clean.y) and torch.equal(again.x, clean.x)
    assert torch.equal(torch.load(path, weights_only=True)["tensors"]["y"], clean.y)   # the rebuilt file is the clean one


def test_one_flipped_byte_in_the_processed_cache_is_refused_and_rebuilt(mirror, tmp_path, capfd):
    cache = tmp_path / "cache"
    clean = load("cora", mirror, cache)
    path = cache / "Cora" / PROCESSED
    raw = bytearray(path.read_bytes())
    labels = clean.y.numpy().tobytes()
    at = bytes(raw).find(labels)
    assert at > 0
    raw[at + 89 * 8] ^= 1   # node 89's label, as the report did
    path.write_bytes(bytes(raw))
    capfd.readouterr()
    again = load("cora", mirror, cache)
    err = capfd.readouterr().err
    assert str(path) in err and "rebuilding it from the verified raw files" in err
    assert torch.equal(again.y, clean.y)


@pytest.mark.paper  # a fresh process under a file-size limit: CI runs it with -m paper
def test_a_full_disk_while_the_processed_cache_is_written_is_one_warning(tmp_path, mirror):
    """torch.save raises RuntimeError (not OSError) when a write stops short. A file-size limit
    (RLIMIT_FSIZE, SIGXFSZ ignored) lets the raw files in and stops the 15 MB cache file: the
    run warns in one line, computes from the raw files, and writes its row."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))
    done = subprocess.run([sys.executable, "-m", "gnngp_cli", "run", "dataset=cora", "kernel=gcngp_x", f"data.root={tmp_path / 'cache'}",
                           f"data.mirror={mirror}", f"hydra.run.dir={tmp_path / 'out'}"], preexec_fn=limit, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "could not write the processed cache" in line]
    assert len(warning) == 1 and "likely a full disk" in warning[0] and "Traceback" not in done.stderr
    assert list((tmp_path / "cache" / "Cora" / "processed").iterdir()) == []   # no half file left
    assert pd.read_csv(tmp_path / "out" / "results.csv")["status"].tolist() == ["ok"]


@pytest.mark.paper  # two fresh processes under a file-size limit: CI runs it with -m paper
def test_a_run_folder_or_log_that_cannot_be_written_is_one_line(tmp_path):
    """An adversary's trial: a file-size limit while Hydra wrote .hydra/config.yaml was a 20-line
    traceback; a gnngp.log that could not grow printed a '--- Logging error ---' traceback per line."""
    def limit(size):
        def apply():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        return apply
    command = [sys.executable, "-m", "gnngp_cli", "run", "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp"]
    done = subprocess.run([*command, f"hydra.run.dir={tmp_path / 'a'}"], preexec_fn=limit(1), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("gnngp: error: could not write the run's folder (File too large")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "gnngp.log").write_text("x" * 5000)
    done = subprocess.run([*command, f"hydra.run.dir={tmp_path / 'b'}"], preexec_fn=limit(5120), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Logging error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("a log line could not be written to") == 1
    assert pd.read_csv(tmp_path / "b" / "results.csv")["status"].tolist() == ["ok"]


# --- results files: every row read back is checked ------------------------------------------------

def _two_good_rows(tmp_path: Path) -> Path:
    code, err, _, _ = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp_x", "runs=2", "seed=5")
    assert code == 0, err
    return tmp_path / "run" / "results.csv"


def _cut_300(text: str) -> str:
    return text[:-300]


def _last_row_40(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:-1]) + lines[-1][:40]


def _unterminated(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:2]) + 'ok,"unterminated\n' + "".join(lines[2:])


def _nul_bytes(text: str) -> str:
    return text + "\x00" * 4096


DAMAGES = {"cut 300 bytes": _cut_300, "last row cut to 40 characters": _last_row_40,
           "an unterminated quote before row 3": _unterminated, "4096 NUL bytes": _nul_bytes}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_results_file_is_moved_aside_whole_and_the_new_rows_start_a_fresh_file(tmp_path, damage):
    path = _two_good_rows(tmp_path)
    damaged = DAMAGES[damage](path.read_text())
    path.write_text(damaged)
    code, err, _, _ = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp_x", "seed=7")
    assert code == 0, err
    aside = list(path.parent.glob("results.malformed-*.csv"))
    assert len(aside) == 1 and aside[0].read_text() == damaged          # the damaged file, byte for byte
    warning = [line for line in err.splitlines() if line.startswith("gnngp: warning:") and "results" in line]
    assert len(warning) == 1 and str(path) in warning[0] and str(aside[0]) in warning[0]
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith("ok,csbm,")         # the new row alone, never beside a damaged one
    table = pd.read_csv(path)
    assert table["seed"].tolist() == [7] and str(table["seed"].dtype) == "int64"


def test_integer_columns_stay_integers_when_rows_are_appended(tmp_path):
    path = _two_good_rows(tmp_path)
    code, err, _, _ = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", "gnn=gcn", "gnn.epochs=2", "seed=9")
    assert code == 0, err
    header, *rows = path.read_text().splitlines()
    columns = header.split(",")
    for column in ("seed", "run", "layers", "n_nodes", "landmarks"):
        values = [row.split(",")[columns.index(column)] for row in rows]
        assert all("." not in v for v in values), (column, values)   # 5, never 5.0 (the GNN row has no landmarks)
    assert pd.read_csv(path)["seed"].tolist() == [5, 6, 9]


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_report_leaves_out_malformed_rows_and_names_the_file(tmp_path, damage):
    path = _two_good_rows(tmp_path)
    path.write_text(DAMAGES[damage](path.read_text()))
    out = in_process("report", str(tmp_path / "run"), "--out", str(tmp_path / "report"))
    assert out.returncode == 0, out.stderr
    warning = [line for line in out.stderr.splitlines() if line.startswith("gnngp: warning:")]
    assert len(warning) == 1 and str(path) in warning[0] and "malformed" in warning[0]


def test_check_row_refuses_what_gnngp_never_writes():
    good = {"status": "ok", "dataset": "cora", "method": "GCNGP", "metric": "accuracy", "test": "0.828", "timestamp": "t", "seed": "5"}
    assert check_row(good) is None
    assert check_row({**good, "seed": "5.0"}) is None                   # an older gnngp's pandas wrote integers so
    for bad, why in (({"status": "maybe"}, "status="), ({"seed": "five"}, "not an integer"), ({"seed": "5.5"}, "not an integer"),
                     ({"test": "high"}, "not a number"), ({"test": ""}, "without test"), ({"dataset": "co\nra"}, "line break"),
                     ({"method": ""}, "without method")):
        assert why in check_row({**good, **bad}), bad
    assert "without its error" in check_row({"status": "error", "error": ""})


def test_the_report_skips_a_fifo_instead_of_blocking(tmp_path):
    folder = tmp_path / "runs" / "a"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "results.csv")
    done = subprocess.run([sys.executable, "-m", "gnngp_cli", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr   # nothing read: one line, and no report written over an earlier one
    assert f"gnngp: warning: skipped {folder / 'results.csv'}: {folder / 'results.csv'} is not a regular file" in done.stderr
    assert "every results file was skipped" in done.stderr and not (tmp_path / "report").exists()


def test_appending_to_a_fifo_sends_the_rows_to_a_fallback_file(tmp_path):
    os.mkfifo(tmp_path / "results.csv")
    with pytest.raises(ResultsNotWritten, match="is not a regular file.*rows were written to"):
        append_rows(tmp_path / "results.csv", [{"status": "error", "error": "x"}], fallback_dir=tmp_path)


# --- an interrupted job keeps its finished runs, and resume runs only the missing ones -------------

SLOW_RUNS = ["dataset=pubmed", "kernel=gcngp_x", "runs=6", "kernel.layers=8", "dtype=float64", "repeat_deterministic=true"]


def as_from_a_shell() -> None:
    """A shell starts a job with SIGINT at its default; a suite started in the background
    (``bash .ci/run &``) has it ignored, and Python then keeps it ignored: the job would not stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop_after(tmp_path: Path, rows: int, sig: int, mirror: Path) -> tuple[subprocess.CompletedProcess, Path]:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "gnngp_cli", "run", *SLOW_RUNS, f"data.mirror={mirror}", f"hydra.run.dir={run_dir}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_shell)
    results = run_dir / "results.csv"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if results.is_file() and len(results.read_text().splitlines()) > rows:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), results


@pytest.mark.paper  # slow end to end: runs with the paper tests, keeping the fast suite within its 10 minutes
@pytest.mark.parametrize("sig, name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
def test_a_stopped_job_keeps_its_finished_runs_and_resume_runs_only_the_missing(tmp_path, sig, name, mirror):
    done, results = _stop_after(tmp_path, 2, sig, mirror)
    assert done.returncode == 128 + sig, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("gnngp: error:")]
    kept = pd.read_csv(results)
    assert len(errors) == 1 and f"stopped by {name}: the {len(kept)} run(s) finished in this job are in {results}" in errors[0]
    assert 2 <= len(kept) < 6 and kept["run"].tolist() == list(range(len(kept))) and (kept["status"] == "ok").all()
    resume = ("run", *SLOW_RUNS, f"data.mirror={mirror}", f"hydra.run.dir={tmp_path / 'run'}", "resume=true")
    again = in_process(*resume)   # the resumes are not about processes: in this one
    assert again.returncode == 0, again.stderr
    assert f"holds {len(kept)} finished runs" in again.stderr + again.stdout
    table = pd.read_csv(results)
    assert table["run"].tolist() == list(range(6)) and table["seed"].tolist() == list(range(6))
    assert table.iloc[:len(kept)].equals(kept)                       # the kept rows, untouched
    third = in_process(*resume)
    assert third.returncode == 0 and "already has results; skipping this job" in third.stderr + third.stdout
    assert len(pd.read_csv(results)) == 6


@pytest.mark.paper  # slow end to end: runs with the paper tests, keeping the fast suite within its 10 minutes
def test_resume_of_splits_all_runs_only_the_missing_splits(tmp_path, mirror):
    """A splits=all job on chameleon (10 fixed splits) that kept splits 0..3: resume runs 4..9."""
    args = ["dataset=chameleon", "kernel=gcngp_x", "landmarks.count=200", "splits=all", f"data.mirror={mirror}"]   # resume, not accuracy: few landmarks
    code, err, _, _ = run(tmp_path, *args)
    assert code == 0, err
    results = tmp_path / "run" / "results.csv"
    full = pd.read_csv(results)
    assert full["split_index"].tolist() == list(range(10)) and full["split_count"].tolist() == [10] * 10
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:5]))                          # as if stopped after four splits
    code, err, _, _ = run(tmp_path, *args, "resume=true")
    assert code == 0, err
    assert "holds 4 finished runs" in (tmp_path / "run" / "gnngp.log").read_text()
    again = pd.read_csv(results)
    assert again["split_index"].tolist() == list(range(10))
    assert again["test"].tolist() == pytest.approx(full["test"].tolist(), abs=1e-6)


# --- the nugget grid: counted, refused when it cannot fit, scored by chunks -----------------------

def test_a_nugget_grid_that_cannot_fit_is_refused_before_any_work(tmp_path):
    code, err, _, errors = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", "nugget.num=100000000", "max_memory_gb=1")
    assert code == 1 and len(errors) == 1
    assert "nugget.num=100,000,000 needs about" in errors[0] and "for the grid alone, and the limit is 1.0 GiB" in errors[0]


def test_the_estimate_counts_a_large_grid(tmp_path):
    code, err, row, _ = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", "nugget.num=1000000")
    assert code == 0, err
    assert "a nugget grid of 1,000,000 values" in (tmp_path / "run" / "gnngp.log").read_text()


def test_a_grid_scored_by_chunks_chooses_what_one_pass_chooses(monkeypatch, data_overrides):
    """The same job with chunks of 128 nuggets (ROW_BLOCK_ENTRIES shrunk) and in one pass."""
    from gnngp_cli import runtime
    from gnngp_cli.backends import LocalBackend
    from gnngp_cli.job.gp_job import GPJob

    def first(cfg):
        backend = LocalBackend(cfg)
        with backend:
            out = next(GPJob(cfg, backend).runs())
            return out.row, out.result.val_curve
    cfg = compose(["dataset=cora", "kernel=gcngp_x", "nugget.num=1000", "dtype=float64", *data_overrides])   # float32 products of other shapes round apart
    one_row, one_curve = first(cfg)
    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 1000)
    chunked_row, chunked_curve = first(cfg)
    assert torch.equal(one_curve, chunked_curve)
    assert (chunked_row["nugget"], chunked_row["test"]) == (one_row["nugget"], one_row["test"])


@pytest.mark.parametrize("args, message", [
    (["nugget.min=1e-300", "nugget.max=1e-290"], "nugget.min=1e-300 underflows in dtype=float32"),
    (["nugget.min=1e-310", "nugget.max=1e-290", "dtype=float64"], "nugget.min=1e-310 underflows in dtype=float64"),
    (["nugget.max=1e39"], "nugget.max=1e+39 overflows in dtype=float32"),
])
def test_a_grid_that_underflows_or_overflows_is_refused(tmp_path, args, message):
    code, _, _, errors = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", *args)
    assert code == 1 and len(errors) == 1 and message in errors[0]


# --- custom graphs -------------------------------------------------------------------------------

def test_float64_custom_features_keep_every_digit(tmp_path):
    """A column 1 + k*1e-9 (60 distinct values) stays 60 values with dtype=float64."""
    features = np.ones((60, 2))
    features[:, 0] += np.arange(60) * 1e-9
    folder = write_graph(tmp_path / "g", features=features, labels=np.arange(60) % 3, masks=split_masks(60))
    from gnngp_cli.job.loading import load_graph

    cfg = compose(["dataset=custom", f"dataset.path={folder}", "kernel=gcngp", "dtype=float64"])
    graph = load_graph(cfg)
    assert graph.data.x.dtype == torch.float64 and torch.unique(graph.data.x[:, 0]).numel() == 60
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}", "kernel=gcngp", "dtype=float64")
    assert code == 0 and row["status"] == "ok", err


def test_a_custom_graphs_files_written_again_are_run_again_on_resume_and_a_line_of_their_own_in_the_report(tmp_path):
    """A practitioner's trial: labels.npy written again (permuted) at the same dataset.path, then
    resume=true: 'skipping this job', the old 0.8700 kept (the right answer 0.1853); the report
    mixed rows of the old and new files at one path. A row records its files' digest."""
    from gnngp_cli.report import write_report

    folder = write_graph(tmp_path / "g", labels=np.arange(60) % 3, masks=split_masks(60))
    args = ("dataset=custom", f"dataset.path={folder}", "kernel=gcngp", "resume=true")
    code, err, first, _ = run(tmp_path, *args)
    assert code == 0 and len(first["data_digest"]) == 16, err
    code, err, _, _ = run(tmp_path, *args)   # the same files: skipped
    assert code == 0 and len(pd.read_csv(tmp_path / "run" / "results.csv")) == 1
    np.save(folder / "labels.npy", np.random.default_rng(1).permutation(np.arange(60) % 3))
    code, err, again, _ = run(tmp_path, *args)
    assert code == 0 and again["data_digest"] != first["data_digest"], err
    log = (tmp_path / "run" / "gnngp.log").read_text()
    assert f"its rows were computed on other versions of the graph's files (digest {first['data_digest']}, now {again['data_digest']})" in log
    assert len(list((tmp_path / "run").glob("results.before-resume-*.csv"))) == 1
    (tmp_path / "old").mkdir()   # both versions' rows, read together: two lines, not one of two runs
    next((tmp_path / "run").glob("results.before-resume-*.csv")).rename(tmp_path / "old" / "results.csv")
    write_report([tmp_path / "run", tmp_path / "old"], tmp_path / "r")
    runs = pd.read_csv(tmp_path / "r" / "runs.csv")
    assert runs["runs"].tolist() == [1, 1] and sorted(runs["test_mean"]) == sorted([first["test"], again["test"]])


def test_a_custom_graphs_digest_is_of_the_files_as_they_were_read(tmp_path, monkeypatch):
    """An adversary's trial: labels.npy written again while the kernel was computed; the row
    recorded the new files' digest beside a test accuracy of the old ones (0.925, where the new
    files give 0.33), and resume=true kept it. The digest is taken as the files are read; files
    that change while they are read are one line."""
    from gnngp_cli.data import custom
    from gnngp_cli.job.loading import load_graph

    folder = write_graph(tmp_path / "g", labels=np.arange(60) % 3, masks=split_masks(60))
    cfg = compose(["dataset=custom", f"dataset.path={folder}", "kernel=gcngp"])
    read = custom.files_digest(str(folder))
    graph = load_graph(cfg)
    np.save(folder / "labels.npy", np.random.default_rng(1).permutation(np.arange(60) % 3))
    assert graph.info().data_digest == read != custom.files_digest(str(folder))
    assert custom.files_digest(str(tmp_path / "nothing here")) == ""
    real = custom._read_labels

    def rewritten(path):   # the labels written again between the digest and the read
        labels = real(path)
        np.save(folder / "labels.npy", np.arange(60) % 2)
        return labels

    monkeypatch.setattr(custom, "_read_labels", rewritten)
    with pytest.raises(Exception, match=re.escape(f"the files of {folder} changed while they were read; run again once they are written")):
        load_graph(cfg)


def test_an_empty_custom_graph_is_one_line(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    np.save(folder / "features.npy", np.zeros((0, 5)))
    np.save(folder / "labels.npy", np.zeros(0, dtype=np.int64))
    (folder / "edges.csv").write_text("source,target\n")
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and "has no rows: the graph has no nodes" in errors[0]


def test_an_edge_id_past_64_bits_is_one_line(tmp_path):
    folder = write_graph(tmp_path / "g", labels=np.arange(60) % 3)
    (folder / "edges.csv").write_text(f"0,1\n2,{2**64 + 1}\n")
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and "has a node id beyond 64-bit integers" in errors[0]


# --- settings that overflowed deep inside ----------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["fit=mll", "fit.lr=1e300"], "fit.lr=1e+300 must be positive and at most 1000"),
    (["seed=18446744073709551616"], "seed=18446744073709551616 must be an integer from 0 to"),
    (["seed=-1"], "gnngp: error: seed=-1 must be an integer from 0 to"),   # named as typed, not as conformal.seed or active.seed (which default to it)
    (["seed=-1", "active=random", "active.budgets=[10]"], "gnngp: error: seed=-1 must be an integer from 0 to"),
    (["seed=18446744073709551615"], "seed=18446744073709551615 must be an integer from 0 to"),
    (["seed=9223372036854775807", "runs=2"], "(the runs use seed..seed+1)"),
])
def test_settings_that_overflowed_are_one_line(tmp_path, args, message):
    code, _, _, errors = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", "kernel=gcngp_x", *args)
    assert code == 1 and len(errors) == 1 and message in errors[0]


# --- the GPyTorch kernel checks what the CLI checks ------------------------------------------------

def _gpytorch_kernel(**kwargs):
    pytest.importorskip("gpytorch")
    from torch_geometric.data import Data

    from gnngp_cli.gpytorch import GNNGPKernel

    g = torch.Generator().manual_seed(0)
    data = kwargs.pop("data", None) or Data(x=torch.randn(60, 5, generator=g), edge_index=torch.randint(0, 60, (2, 200), generator=g))
    return GNNGPKernel("gcngp", data, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"landmarks": [0, 5, -1]}, "landmark -1 is outside [0, 60)"),
    ({"landmarks": [0, 5, 60]}, "landmark 60 is outside [0, 60)"),
    ({"landmarks": [0, 5, 5]}, "landmarks name a node twice"),
    ({"landmarks": [0.0, 5.0]}, "landmarks must be a 1-D list or tensor of integer node ids"),
    ({"landmarks": []}, "landmarks is empty"),
    ({"layers": 0}, "kernel.layers=0 must be at least 1"),
    ({"sigma_w": -1.0}, "kernel.sigma_w=-1.0 is negative"),
])
def test_the_gpytorch_kernel_refuses_what_the_cli_refuses(kwargs, message):
    with pytest.raises(ConfigError) as err:
        _gpytorch_kernel(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("edit, message", [
    (lambda d: setattr(d, "edge_index", torch.tensor([[0], [500]])), "data.edge_index names node 500, outside [0, 60)"),
    (lambda d: setattr(d, "edge_index", torch.tensor([[0], [-3]])), "data.edge_index names node -3"),
    (lambda d: setattr(d, "x", d.x[:50]), "data.x has 50 rows but the graph has 60 nodes"),
    (lambda d: setattr(d, "edge_index", torch.ones(2, 5, dtype=torch.bool)), "a 2 x E integer tensor of node ids"),
    (lambda d: setattr(d, "x", torch.zeros(60, 0)), "at least one feature"),
])
def test_the_gpytorch_kernel_refuses_a_graph_that_does_not_fit(edit, message):
    pytest.importorskip("gpytorch")
    from torch_geometric.data import Data

    data = Data(x=torch.randn(60, 5), edge_index=torch.randint(0, 60, (2, 200)), num_nodes=60)
    edit(data)
    with pytest.raises(ConfigError, match=re.escape(message)):
        _gpytorch_kernel(data=data)


# --- nothing outside gnngp's own folders is deleted: see test_rowblocks (roots sweep) --------------

def test_a_dask_workers_heartbeat_traceback_at_shutdown_is_dropped():
    import logging

    from gnngp_cli.backends.rowblocks.cluster import _NoTaskTracebacks

    keep = _NoTaskTracebacks().filter
    record = logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, "Failed to communicate with scheduler during heartbeat.", (), None)
    assert not keep(record)
    assert keep(logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, "Worker memory limit exceeded", (), None))


def test_the_clients_interrupted_gather_traceback_is_dropped():
    """asyncio's record of the gather a SIGTERM left (AllExit) printed a traceback before the one line."""
    import logging

    from gnngp_cli.backends.rowblocks.cluster import _NoStoppedGathers

    keep = _NoStoppedGathers().filter
    message = "Task exception was never retrieved\nfuture: <Task finished name='Task-199' coro=<Client._gather.<locals>.wait()> exception=AllExit()>"
    assert not keep(logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, (), None))
    other = "Task exception was never retrieved\nfuture: <Task finished exception=ValueError()>"
    assert keep(logging.LogRecord("asyncio", logging.ERROR, __file__, 1, other, (), None))


# --- shards (compute=dask) are checked as the processed cache is ----------------------------------

DASK = ["compute=dask", "compute.workers=1", "compute.processes=false", "compute.dashboard=:0"]


def _edit_features(path: Path) -> None:
    x = np.load(path)
    x[3, 5] += 1.0
    np.save(path, x)


def test_a_changed_shard_given_by_the_user_is_refused_in_one_line(tmp_path, mirror):
    shards = tmp_path / "shards"
    out = in_process("partition", "dataset=cora", f"out={shards}", "partition.rows=1000", f"data.root={tmp_path / 'cache'}",
                     f"data.mirror={mirror}", f"hydra.run.dir={tmp_path / 'p'}")
    assert out.returncode == 0, out.stderr
    _edit_features(shards / "block-000001" / "x.npy")
    code, _, row, errors = run(tmp_path, "dataset=cora", "kernel=gcngp_x", *DASK, f"compute.shards={shards}", f"data.mirror={mirror}")
    assert code == 1 and len(errors) == 1
    assert f"shard file {shards / 'block-000001' / 'x.npy'} (sha256" in errors[0] and "changed since gnngp partition wrote it" in errors[0]


def test_a_changed_cached_shard_is_partitioned_again(tmp_path, mirror):
    code, err, first, _ = run(tmp_path, "dataset=cora", "kernel=gcngp_x", *DASK, f"data.mirror={mirror}")
    assert code == 0, err
    cached = next((tmp_path / "cache" / "shards").glob("cora-*"))
    _edit_features(cached / "block-000000" / "x.npy")   # one block of 100,000 rows (partition.rows' default)
    code, err, again, _ = run(tmp_path, "dataset=cora", "kernel=gcngp_x", *DASK, f"data.mirror={mirror}", run_dir=tmp_path / "again")
    assert code == 0, err
    assert "changed since they were written" in (tmp_path / "again" / "gnngp.log").read_text()
    assert again["test"] == first["test"] and again["val"] == first["val"]


# --- second look (an adversarial pass over the fixes above) ----------------------------------------

def test_a_renamed_tensor_in_the_processed_cache_is_refused_and_rebuilt(mirror, tmp_path, capfd):
    """A flipped bit in a tensor's name changes it in both dicts (the name is stored once): the
    manifest, a digest of names and digests held as its own string, catches it."""
    cache = tmp_path / "cache"
    clean = load("cora", mirror, cache)
    path = cache / "Cora" / PROCESSED
    stored = torch.load(path, weights_only=True)
    stored["tensors"]["Y"] = stored["tensors"].pop("y")
    stored["digests"]["Y"] = stored["digests"].pop("y")
    torch.save(stored, path)
    capfd.readouterr()
    again = load("cora", mirror, cache)
    assert "its tensor names or digests are not the ones written" in capfd.readouterr().err
    assert torch.equal(again.y, clean.y)


@pytest.mark.parametrize("edit, why", [(lambda s: s.pop("digests"), "is not a gnngp cache of format"),
                                       (lambda s: s.update(raw={}), "was built from other raw files")])
def test_a_processed_cache_that_cannot_be_used_is_rebuilt_with_a_warning(mirror, tmp_path, capfd, edit, why):
    cache = tmp_path / "cache"
    load("cora", mirror, cache)
    path = cache / "Cora" / PROCESSED
    stored = torch.load(path, weights_only=True)
    edit(stored)
    torch.save(stored, path)
    capfd.readouterr()
    load("cora", mirror, cache)
    assert why in capfd.readouterr().err


def test_a_row_with_bytes_that_are_not_utf8_is_left_out_and_the_others_read(tmp_path):
    """A trial: the report said the row was left out, then showed it with a replacement character."""
    path = tmp_path / "results.csv"
    path.write_bytes(b"status,dataset,method,test,seed\nok,cora,GC\xffNGP,0.8,0\nok,cora,GCNGP,0.7,1\n")
    found = read_rows(path)
    assert found.problems == ["row 2: bytes that are not UTF-8"] and [r["seed"] for r in found.rows] == ["1"]
    path.write_bytes(b"status,dat\xffaset,method,test,seed\nok,cora,GCNGP,0.8,0\n")
    found = read_rows(path)
    assert found.problems == ["its header has bytes that are not UTF-8"] and found.rows == []


def test_a_last_line_cut_short_is_one_problem(tmp_path):
    """A trial: a last row cut mid-way was two problems (its field count, then no line end)."""
    path = tmp_path / "results.csv"
    path.write_text("status,dataset,method,test,seed\nok,cora,GCNGP,0.8,0\nok,cora,GC")
    found = read_rows(path)
    assert found.problems == ["row 3: 3 fields, the header has 5, cut short (no line end)"] and len(found.rows) == 1
    path.write_text("status,dataset,method,test,seed\nok,cora,GCNGP,0.8,0\nok,cora,GCNGP,0.7,1")   # parses, yet cut
    found = read_rows(path)
    assert found.problems == ["row 3: cut short (no line end; a file edited by hand ends its last row with a line break)"]
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes() + b"\n")   # a spreadsheet's byte-order mark: the header is read as the header
    found = read_rows(path)
    assert found.problems == [] and len(found.rows) == 2


def test_an_ok_row_whose_test_is_not_a_number_is_malformed_and_old_integers_are_kept_as_integers(tmp_path):
    path = tmp_path / "results.csv"
    row = "ok,cora,GCNGP,{test},5.0\n"
    path.write_text("status,dataset,method,test,seed\n" + row.format(test="0.8"))
    found = read_rows(path)
    assert not found.problems and found.rows[0]["seed"] == "5"
    path.write_text("status,dataset,method,test,seed\n" + row.format(test="inf"))
    assert "an ok row whose test is inf" in read_rows(path).problems[0]


@pytest.mark.parametrize("name", ["gnngp.log", "results", ".hidden.csv", "summary.csv"])
def test_a_results_file_that_is_not_a_csv_of_its_own_is_refused(tmp_path, name):
    code, _, _, errors = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", f"results_file={name}")
    assert code == 1 and len(errors) == 1 and "must be a .csv file name of its own" in errors[0]


def test_a_results_file_name_too_long_is_one_line(tmp_path):
    code, _, _, errors = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", f"results_file={'y' * 300}.csv")
    assert code == 1 and len(errors) == 1 and "is 304 bytes long; give a name of at most 200" in errors[0]


@pytest.mark.parametrize("first", ["1.5,2", "1e1,2", "nan,2"])
def test_a_first_edge_row_of_numbers_is_data_not_a_header(tmp_path, first):
    folder = write_graph(tmp_path / "g", labels=np.arange(60) % 3)
    (folder / "edges.csv").write_text(first + "\n0,1\n")
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and "non-integer node id" in errors[0]


def test_class_ids_past_int64_are_renumbered_not_wrapped(tmp_path):
    labels = (np.arange(60) % 3).astype(np.uint64)
    labels[labels == 2] = np.iinfo(np.uint64).max
    folder = write_graph(tmp_path / "g", labels=labels)
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}", "kernel=gcngp")
    assert code == 0 and row["status"] == "ok", err
    assert "treating its 3 distinct ids as classes 0..2" in err


def test_labels_of_two_columns_are_refused(tmp_path):
    folder = write_graph(tmp_path / "g", labels=np.zeros((30, 2), dtype=np.int64))
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and "holds an array of shape (30, 2)" in errors[0]


@pytest.mark.parametrize("kwargs, message", [
    ({"landmarks": [2**63]}, "landmarks must be integer node ids of the graph"),
    ({"landmarks": ["a"]}, "landmarks must be integer node ids of the graph"),
    ({"dtype": torch.int64}, "dtype=torch.int64 is not a float dtype"),
    ({"layers": 10**30}, "is more than 10,000"),
    ({"sigma_w": float("inf")}, "kernel.sigma_w=inf is not a finite number"),
])
def test_the_gpytorch_kernel_refuses_more_bad_settings(kwargs, message):
    with pytest.raises(ConfigError) as err:
        _gpytorch_kernel(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_kernel_layers_past_ten_thousand_are_refused(tmp_path):
    code, _, _, errors = run(tmp_path, "dataset=csbm", "dataset.num_nodes=60", "kernel.layers=1000000000")
    assert code == 1 and len(errors) == 1 and "kernel.layers=1000000000 is more than 10,000" in errors[0]


def test_an_edited_shard_meta_is_refused_and_partition_never_writes_over_a_users_folder(tmp_path, mirror):
    shards = tmp_path / "shards"
    common = [f"data.root={tmp_path / 'cache'}", f"data.mirror={mirror}", f"hydra.run.dir={tmp_path / 'p'}"]
    assert in_process("partition", "dataset=cora", f"out={shards}", *common).returncode == 0
    assert in_process("partition", "dataset=cora", f"out={shards}", *common).returncode == 0   # its own shards: written again
    meta = json.loads((shards / "meta.json").read_text())
    meta["task"] = "regression"
    (shards / "meta.json").write_text(json.dumps(meta))
    code, _, _, errors = run(tmp_path, "dataset=cora", "kernel=gcngp_x", *DASK, f"compute.shards={shards}", f"data.mirror={mirror}")
    assert code == 1 and len(errors) == 1 and "meta.json (its fields are not the ones written" in errors[0]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    out = in_process("partition", "dataset=cora", f"out={mine}", *common)
    assert out.returncode == 1 and f"{mine} holds files gnngp partition did not write (notes.txt)" in out.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_changed_operator_shard_is_written_again(tmp_path, mirror):
    args = ["dataset=cora", "kernel=h2gcngp_x", *DASK, f"data.mirror={mirror}"]
    code, err, first, _ = run(tmp_path, *args)
    assert code == 0, err
    cols = next((tmp_path / "cache" / "shards").glob("cora-*")) / "operators" / "hop2" / "block-000000" / "cols.npy"
    np.save(cols, np.load(cols)[::-1].copy())
    code, err, again, _ = run(tmp_path, *args, run_dir=tmp_path / "again")
    assert code == 0, err
    assert "the hop2 operator's shards" in (tmp_path / "again" / "gnngp.log").read_text()
    assert again["test"] == first["test"]


def _torch_loaded(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("sig, name", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_a_stop_while_gnngp_imports_is_one_line(tmp_path, sig, name):
    proc = subprocess.Popen([sys.executable, "-m", "gnngp_cli", "run", "dataset=csbm", f"hydra.run.dir={tmp_path}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_shell)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not _torch_loaded(proc.pid):
        time.sleep(0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")
    assert proc.returncode == 128 + sig and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line.startswith("gnngp: error:")][0].startswith(f"gnngp: error: stopped by {name}")


@pytest.mark.paper  # slow (15-20 s): runs in CI with -m paper
def test_ctrl_c_at_the_terminal_stops_a_dask_run_in_one_line(tmp_path, mirror):
    """A terminal's Ctrl-C signals the process group: the worker processes too (each printed a
    KeyboardInterrupt traceback). They start with SIGINT ignored; the client stops them."""
    proc = subprocess.Popen([sys.executable, "-m", "gnngp_cli", "run", "dataset=cora", "kernel=gcngp_x", "runs=20", "repeat_deterministic=true",
                             "compute=dask", "compute.workers=1", "compute.dashboard=:0", f"data.mirror={mirror}",
                             f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'run'}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=as_from_a_shell)
    results = tmp_path / "run" / "results.csv"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not (results.is_file() and len(results.read_text().splitlines()) > 1):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert "gnngp: error: stopped by Ctrl-C: the" in err


def test_a_stop_while_a_row_is_written_waits_until_it_is_counted():
    """A signal while a finished run's row is written and counted is delivered after both: the
    stop's line never tells one run fewer than the results file holds."""
    from gnngp_cli.stops import Stopped, signals_held, stopped_by_signals

    done = []
    with pytest.raises(Stopped), stopped_by_signals():
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("written")
            done.append("counted")
        done.append("after")
    assert done == ["written", "counted"]


def test_progress_is_no_setting_that_resume_reruns_for(tmp_path):
    """A trial: runs=3 progress=false, then resume=true without progress=false (or the reverse),
    said 'its settings changed' and ran every run again; progress= only shows the run."""
    import json

    from gnngp_cli.results.resume import job_overrides, more_runs_of

    older = json.dumps(sorted(["dataset=cora", "model=gcngp", "progress=false", "runs=3"]))   # a row of an older gnngp
    now = job_overrides(["dataset=cora", "model=gcngp", "runs=3", "resume=true"])
    assert "progress" not in job_overrides(["dataset=cora", "progress=false"]) and more_runs_of(older, now)
    run = tmp_path / "run"
    first = in_process("run", "dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp", "runs=2", "progress=false", f"hydra.run.dir={run}")
    assert first.returncode == 0, first.stderr
    again = in_process("run", "dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp", "runs=2", "resume=true", f"hydra.run.dir={run}")
    assert again.returncode == 0 and "skipping this job (every run is there" in again.stdout + again.stderr, again.stderr
    fresh = in_process("run", "dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp", "runs=2", "resume=true", f"hydra.run.dir={tmp_path / 'new'}")
    # the folder named (hydra.run.dir) holds nothing: said so, not "give its folder", which the command did (an adversary's)
    assert fresh.returncode == 0 and f"resume=true: {tmp_path / 'new'} holds no results (the run stopped before" in fresh.stdout + fresh.stderr
