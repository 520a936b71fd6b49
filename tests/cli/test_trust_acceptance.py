"""Trust, section 5: nothing doubtful is accepted silently. Overlapping validation and test
masks and complex features are errors; boolean features are binary features; a single training
class is a warning carried into the row; a huge integer label does not become a
million-class problem; sweep workers die with the process that launched them."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import GNNGP, run, split_masks, write_graph


def test_overlapping_validation_and_test_masks_are_an_error(tmp_path):
    masks = split_masks(60, val=(30, 48), test=(45, 60))
    folder = write_graph(tmp_path / "g", masks=masks)
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1
    assert "3 nodes are in both the validation and the test set (first: node 45)" in errors[0]


def test_complex_features_are_an_error(tmp_path):
    features = np.random.default_rng(0).normal(size=(60, 4)) + 1j
    folder = write_graph(tmp_path / "g", features=features)
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and "holds complex numbers (complex128)" in errors[0]


def test_boolean_features_are_binary_features(tmp_path):
    rng = np.random.default_rng(0)
    binary = rng.random((60, 4)) < 0.5
    labels = rng.integers(0, 3, 60)
    as_bool = write_graph(tmp_path / "b", features=binary, labels=labels)
    as_float = write_graph(tmp_path / "f", features=binary.astype(np.float64), labels=labels)
    code_b, _, row_b, _ = run(tmp_path, "dataset=custom", f"dataset.path={as_bool}", run_dir=tmp_path / "rb")
    code_f, _, row_f, _ = run(tmp_path, "dataset=custom", f"dataset.path={as_float}", run_dir=tmp_path / "rf")
    assert code_b == code_f == 0
    assert (row_b["val"], row_b["test"], row_b["nugget"]) == (row_f["val"], row_f["test"], row_f["nugget"])


def test_a_single_training_class_is_a_warning_carried_into_the_row(tmp_path):
    labels = np.zeros(60, np.int64)
    folder = write_graph(tmp_path / "g", labels=labels)
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 0 and row["status"] == "ok"
    warning = "every training node has class 0: every prediction is that class"
    assert f"gnngp: warning: dataset 'custom': {warning}" in err
    assert any(warning in w for w in json.loads(row["extra"])["warnings"])
    code, _, dask, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}", "kernel=gcngp_x", "compute=dask", "compute.workers=1",
                           "compute.processes=false", "compute.dashboard=:0", "device=cpu", run_dir=tmp_path / "dask")
    assert code == 0 and any(warning in w for w in json.loads(dask["extra"])["warnings"])          # the shards carry it too


def test_a_label_of_a_million_does_not_make_a_million_classes(tmp_path):
    """Reproduced: one integer label 10^6 among 0..2 on 60 nodes made 10^6+1 one-hot columns
    (5.6 GB, 42 s of inference). Ids that are not 0..C-1 are renumbered, with a warning."""
    labels = np.random.default_rng(1).integers(0, 3, 60)
    labels[3] = 10**6
    folder = write_graph(tmp_path / "g", labels=labels)
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 0 and row["status"] == "ok"
    assert "has class ids 0..1000000, not 0..3; treating its 4 distinct ids as classes 0..3 in sorted order" in err
    assert "dataset.task=regression" in err
    # on a GPU the one-hot matrix lives in CUDA memory, and the host's RSS holds the CUDA libraries (2.2 GB on an H100)
    assert row["peak_rss_mb"] < (2000 if row["device"] == "cpu" else 4000) and row["peak_cuda_mb"] < 500 and row["inference_seconds"] < 5


def test_contiguous_class_ids_are_kept(tmp_path):
    from gnngp_cli.api import compose
    from gnngp_cli.data import DataStore, load_dataset

    labels = np.random.default_rng(1).integers(0, 3, 60)
    folder = write_graph(tmp_path / "g", labels=labels)
    cfg = compose(["dataset=custom", f"dataset.path={folder}"])
    data = load_dataset(cfg.dataset, DataStore(tmp_path))
    assert data.num_classes == 3 and np.array_equal(data.y.numpy(), labels)


@pytest.mark.parametrize("given, compact", [((1, 2), (0, 1)), ((0, 1, 7), (0, 1, 2))])
def test_class_ids_that_are_not_0_to_c_minus_1_are_renumbered_and_the_task_kept(tmp_path, given, compact):
    """{1, 2} made three classes (accuracy instead of ROC-AUC) and {0, 1, 7} eight (NLL and ECE
    over empty columns): the distinct ids are the classes, renumbered in sorted order, with a
    warning kept in the row; the row equals the one of the ids 0..C-1."""
    picks = np.random.default_rng(2).integers(0, len(given), 60)
    rows, errs = {}, {}
    for name, ids in (("given", given), ("compact", compact)):
        folder = write_graph(tmp_path / name, labels=np.asarray(ids)[picks])
        code, errs[name], rows[name], _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}", run_dir=tmp_path / f"run-{name}")
        assert code == 0 and rows[name]["status"] == "ok", errs[name]
    renumbered = f"treating its {len(given)} distinct ids as classes 0..{len(given) - 1} in sorted order"
    assert renumbered in errs["given"] and "treating" not in errs["compact"]          # said
    assert any(renumbered in w for w in json.loads(rows["given"]["extra"])["warnings"])   # and recorded
    assert not any("class ids" in w for w in json.loads(rows["compact"]["extra"]).get("warnings", []))   # (a nugget on its grid's edge may be)
    assert rows["given"]["metric"] == ("roc_auc" if len(given) == 2 else "accuracy")
    for column in ("metric", "val", "test", "nugget", "nll", "ece"):
        assert rows["given"][column] == rows["compact"][column], column


def test_whole_number_float_labels_warn_that_the_task_is_regression(tmp_path):
    """As the Python API warns: class ids saved as floats are read as regression targets."""
    labels = np.random.default_rng(1).integers(0, 3, 60).astype(np.float64)
    folder = write_graph(tmp_path / "g", labels=labels)
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 0 and row["metric"] == "r2"
    warning = [line for line in err.splitlines() if line.startswith("gnngp: warning: label file")]
    assert len(warning) == 1 and "so this is regression (metric r2), though every value is a whole number" in warning[0]
    assert "set dataset.task=classification" in warning[0]
    assert any("whole number" in w for w in json.loads(row["extra"])["warnings"])
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}", "dataset.task=regression", run_dir=tmp_path / "said")
    assert code == 0 and "whole number" not in err   # the task said: no question left


def test_float_class_ids_with_nan_on_unlabelled_nodes_warn_too_and_classification_names_the_nans(tmp_path):
    """A trial's labels.npy: 0.0/1.0/2.0 with NaN on the nodes outside the masks ran as regression
    without a word (the warning wanted every value finite), and dataset.task=classification then
    said 'non-negative integer class ids' without naming the NaNs."""
    labels = np.random.default_rng(1).integers(0, 3, 60).astype(np.float64)
    masks = split_masks(60, train=(0, 20), val=(20, 30), test=(30, 40))
    labels[40:] = np.nan   # 20 nodes in no mask
    folder = write_graph(tmp_path / "g", labels=labels, masks=masks)
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 0 and row["metric"] == "r2"
    warning = [line for line in err.splitlines() if line.startswith("gnngp: warning: label file")]
    assert len(warning) == 1 and "though every value (and NaN on 20 nodes) is a whole number" in warning[0], err
    code, err, row, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}", "dataset.task=classification", run_dir=tmp_path / "c")
    assert code == 1 and len(errors) == 1 and "has NaN on 20 nodes, and classification needs a class id for every node" in errors[0], err
    labels[40:] = 0   # any id outside the masks: it runs
    folder = write_graph(tmp_path / "ids", labels=labels.astype(np.int64), masks=masks)
    code, err, row, _ = run(tmp_path, "dataset=custom", f"dataset.path={folder}", run_dir=tmp_path / "ids-run")
    assert code == 0 and row["status"] == "ok" and row["metric"] == "accuracy", err


def _children(pid):
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid):
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.paper  # slow: runs in CI with -m paper
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find the workers")
def test_joblib_workers_exit_when_the_sweep_process_is_killed(tmp_path):
    sweep = subprocess.Popen([*GNNGP, "run", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "gnn=gcn",
                              "gnn.epochs=100000000", "progress=false", "dataset.num_nodes=300", "seed=0,1",
                              f"hydra.sweep.dir={tmp_path}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        deadline = time.time() + 300
        while time.time() < deadline and len(list(tmp_path.glob("*/.hydra"))) < 2:
            time.sleep(0.5)
        time.sleep(2)
        workers = _children(sweep.pid)
        assert len(workers) >= 2   # two loky workers (and their resource trackers)
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        deadline = time.time() + 20
        while time.time() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.5)
        assert not [w for w in workers if _alive(w)]
    finally:
        if sweep.poll() is None:
            sweep.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
