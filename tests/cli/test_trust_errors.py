"""Trust, section 4: documented inputs that used to raise tracebacks now give one line:
empty validation or test sets, unreadable mask files, a read-only data root or output dir,
and a raw pickle of the wrong type."""
import os
import pickle
import shutil

import numpy as np
import pytest

from gnngp_cli.api import compose
from gnngp_cli.config import validate
from gnngp_cli.data import DataStore, load_dataset
from gnngp_cli.errors import ConfigError, DatasetError

from helpers import in_process, run, split_masks, write_graph

ROOT = os.geteuid() == 0   # permission bits do not stop root: those variants are skipped


def test_val_ratio_zero_is_refused_up_front(tmp_path):
    with pytest.raises(ConfigError, match="dataset.val_ratio=0 leaves no validation nodes"):
        validate(compose(["dataset.val_ratio=0"]))
    code, _, row, errors = run(tmp_path, "dataset.val_ratio=0")
    assert code == 1 and len(errors) == 1 and "dataset.val_ratio=0 leaves no validation nodes" in errors[0]
    assert row is None   # refused before any work: nothing written


def test_ratios_leaving_no_test_nodes_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="leaves no test nodes"):
        validate(compose(["dataset.train_ratio=0.6", "dataset.val_ratio=0.4"]))


@pytest.mark.parametrize("empty, message", [("val", "the validation set is empty"), ("test", "the test set is empty")])
def test_empty_validation_or_test_mask_from_files_is_one_line(tmp_path, empty, message):
    masks = split_masks(60)
    masks[f"{empty}_mask"][:] = False
    folder = write_graph(tmp_path / "g", masks=masks)
    code, _, row, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and message in errors[0]
    assert f"its {empty}_mask selects no node" in errors[0] and "ratio" not in errors[0]   # (an adversary's: the ratios, unread, were named)


def test_tiny_graph_whose_rounded_split_is_empty_is_one_line(tmp_path):
    folder = write_graph(tmp_path / "g", n=6)
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}", "dataset.val_ratio=0.05")
    assert code == 1 and len(errors) == 1 and "dataset.val_ratio=0.05 of the 6 nodes of" in errors[0]   # said as the rounding it is
    assert "rounds to no validation node" in errors[0] and "dataset.val_ratio of at least 0.167" in errors[0]


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("kind", ["empty", "pickled", "garbage", "float"])
def test_bad_mask_files_are_one_line_naming_the_file(tmp_path, kind):
    folder = write_graph(tmp_path / "g", masks=split_masks(60))
    path = folder / "val_mask.npy"
    marker = tmp_path / "ran"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "pickled":
        np.save(path, np.array([Payload(marker)] * 60, dtype=object), allow_pickle=True)
    elif kind == "garbage":
        path.write_bytes(b"\x93NUMPY garbage")
    else:
        np.save(path, np.linspace(0, 1, 60))
    code, _, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and f"mask file {path}" in errors[0]
    assert not marker.exists()


def test_read_only_data_root_is_one_line(tmp_path, mirror):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    code, _, _, errors = run(tmp_path, "dataset=cora", f"data.mirror={mirror}", f"data.root={blocker / 'cache'}")
    assert code == 1 and len(errors) == 1
    assert f"the data cache {blocker / 'cache'} cannot be written" in errors[0] and "set data.root" in errors[0]


@pytest.mark.skipif(ROOT, reason="root ignores permission bits")
def test_read_only_data_root_by_permissions(tmp_path, mirror):
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        with pytest.raises(DatasetError, match="cannot be written"):
            load_dataset(compose(["dataset=cora"]).dataset, DataStore.from_config(str(cache), str(mirror)))
    finally:
        cache.chmod(0o755)


def test_read_only_output_dir_is_one_line(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    out = in_process("run", f"hydra.run.dir={blocker / 'out'}")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1 and f"the output folder {blocker / 'out'} cannot be created" in errors[0]


@pytest.mark.parametrize("multirun", [False, True])
def test_an_output_folder_name_too_long_is_one_line(tmp_path, multirun):
    long = "x" * 300   # a sweep's overrides pasted into the folder name: stat raised ENAMETOOLONG
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    out = in_process("run", *(["-m"] if multirun else []), f"{key}={tmp_path / long / 'run'}")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1 and "has a part of 300 bytes" in errors[0] and "shorter folder name" in errors[0]


@pytest.mark.parametrize("command", ["report", "report-out"])
def test_a_path_too_long_outside_a_run_is_one_line(tmp_path, command):
    long = tmp_path / ("y" * 300)
    args = {"report": ("report", str(long)), "report-out": ("report", str(tmp_path), "--out", str(long / "r")),
            "partition": ("partition", "dataset=csbm", "dataset.num_nodes=60", f"out={long / 'p'}")}[command]
    if command == "report-out":   # rows to report, so that the report reaches its --out
        assert in_process("run", "dataset=csbm", "dataset.num_nodes=60", f"hydra.run.dir={tmp_path / 'run'}").returncode == 0
    out = in_process(*args)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1 and "a path is too long for the file system" in errors[0]


@pytest.mark.parametrize("out, message", [("afile", "is a file, not a folder"), ("loop", "cannot be followed"),
                                          ("y" * 300 + "/p", "has a part of 300 bytes")])
def test_partition_out_that_cannot_be_a_folder_is_one_line_before_any_work(tmp_path, out, message):
    """A trial: out=<a file> and out=<a link that loops> were tracebacks from deep in the writer,
    and a name too long printed Hydra's 'Error executing job' first and left a folder made."""
    (tmp_path / "afile").write_text("mine")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    done = in_process("partition", "dataset=csbm", "dataset.num_nodes=60", f"out={tmp_path / out}", cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1 and message in lines[0], done.stderr
    assert (tmp_path / "afile").read_text() == "mine" and not (tmp_path / "outputs").exists()


@pytest.mark.skipif(ROOT, reason="root ignores permission bits")
def test_read_only_output_dir_by_permissions(tmp_path):
    out_dir = tmp_path / "ro"
    out_dir.mkdir()
    out_dir.chmod(0o555)
    try:
        out = in_process("run", f"hydra.run.dir={out_dir / 'run'}")
    finally:
        out_dir.chmod(0o755)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "is not writable" in out.stderr


@pytest.mark.parametrize("part, obj, message", [
    ("graph", [[1, 2], [0]], "ind.cora.graph holds a list, not the adjacency dict"),
    ("x", {"a": 1}, "ind.cora.x holds a dict, not the 2-D numeric feature matrix"),
    ("ally", np.arange(5), "ind.cora.ally holds a ndarray, not the 2-D numeric one-hot label matrix"),
])
def test_raw_pickle_of_the_wrong_type_is_one_line(mirror, tmp_path, part, obj, message):
    bad = tmp_path / "mirror"
    shutil.copytree(mirror / "Cora", bad / "Cora")
    with open(bad / "Cora" / "raw" / f"ind.cora.{part}", "wb") as f:
        pickle.dump(obj, f, protocol=2)
    code, _, _, errors = run(tmp_path, "dataset=cora", f"data.mirror={bad}", "data.verify=false")
    assert code == 1 and len(errors) == 1 and message in errors[0]


def test_an_interpolation_that_does_not_resolve_is_one_line(tmp_path):
    """seed=${foo} printed Hydra's callback warning, its report and the OmegaConf message twice."""
    out = in_process("run", "seed=${foo}", f"hydra.run.dir={tmp_path / 'run'}")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1 and not (tmp_path / "run").exists()
    assert lines[0].startswith("gnngp: error: seed=${foo}: ") and "Interpolation key 'foo' not found; an interpolation ${...} must name a key" in lines[0]
    removed = in_process("run", "~dataset", f"hydra.run.dir={tmp_path / 'run'}")   # not landmarks.fraction, which reads dataset
    assert removed.returncode == 1 and removed.stderr.strip() == "gnngp: error: no dataset chosen (dataset is null, e.g. by ~dataset); use dataset=<name>"


@pytest.mark.parametrize("args, advice", [
    (["kernel=gcngp"], "use the low-rank kernel (kernel=gcngp_x)"),
    (["kernel=gcngp_x"], "the kernel is low rank already: use fewer landmarks (a smaller landmarks.count, or a larger landmarks.fraction) or row blocks on a Dask cluster (compute=dask)"),
    (["gnn=gcn"], "use fewer hidden units (gnn.hidden) or mini-batches (gnn.batch_size)"),
])
def test_out_of_memory_advice_fits_the_job(tmp_path, monkeypatch, args, advice):
    """A low-rank job that ran out of memory was told to use a low-rank kernel."""
    from gnngp_cli.cli import execute

    def exhausted(*_, **__):
        raise MemoryError("test: no memory left")

    monkeypatch.setattr(execute, "run_job", exhausted)
    code, _, row, errors = run(tmp_path, *args)
    assert code == 1 and len(errors) == 1 and row["status"] == "error"
    assert errors[0] == f"gnngp: error: out of memory (test: no memory left); {advice}"
    assert ("low-rank kernel" in errors[0]) == (args == ["kernel=gcngp"])


def test_an_output_folder_where_nothing_can_be_made_is_one_line():
    """/proc passes ``os.access`` for root but takes no folder: found by making one, before Hydra
    would fail with a traceback (the newcomer's trial ran as root)."""
    import os

    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    out = in_process("run", "hydra.run.dir=/proc/gnngp-out")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1 and "the output folder /proc/gnngp-out cannot be created: /proc is not writable" in errors[0]


def test_a_mirror_that_is_not_a_folder_stops_only_a_run_that_needs_a_file_from_it(tmp_path):
    """An adversary's trial: GNNGP_DATA_MIRROR=/nonexistent stopped the default csbm run (no files
    needed) and a Cora run whose files were all in the cache."""
    from helpers import in_process

    env = {"GNNGP_DATA_MIRROR": str(tmp_path / "no-such-mirror"), "GNNGP_DATA_ROOT": str(tmp_path / "cache")}
    done = in_process("run", "dataset.num_nodes=300", "progress=false", f"hydra.run.dir={tmp_path / 'a'}", env=env)
    assert done.returncode == 0, done.stderr
    needs = in_process("run", "dataset=cora", "data.download=false", f"hydra.run.dir={tmp_path / 'b'}", env=env)
    errors = [line for line in needs.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert needs.returncode == 1 and len(errors) == 1 and f"data mirror {tmp_path / 'no-such-mirror'} is not a directory, and " in errors[0]


def test_an_empty_training_mask_is_its_one_line_without_a_warning_naming_every_class_first(tmp_path):
    """A newcomer's trial: an all-False train_mask.npy printed 'classes 0, 1, 2 ... have validation
    or test nodes but no training node' just before the error that the training set is empty."""
    masks = split_masks(60)
    masks["train_mask"][:] = False
    folder = write_graph(tmp_path / "g", labels=__import__("numpy").arange(60) % 3, masks=masks)
    code, stderr, _, errors = run(tmp_path, "dataset=custom", f"dataset.path={folder}")
    assert code == 1 and len(errors) == 1 and "the training set is empty; its train_mask selects no node" in errors[0]
    assert "no training node" not in stderr
