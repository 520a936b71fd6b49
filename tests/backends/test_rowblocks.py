"""compute=dask: every low-rank kernel on row blocks of a Dask cluster gives the predictions of
compute=local; a killed worker is recomputed; papers100M's raw format streams into row blocks;
bad set-ups fail with one line."""
from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gnngp_cli.api import compose, run
from gnngp_cli.backends.local import LocalBackend
from gnngp_cli.backends.rowblocks.dask_backend import DaskBackend
from gnngp_cli.data import DataStore
from gnngp_cli.data import papers100m
from gnngp_cli.data.shards import load_part, read_meta, write_data
from gnngp_cli.errors import ComputeError, ConfigError, DatasetError, ResourceError
from gnngp_cli.job.gp_job import GPJob
from helpers import in_process

distributed = pytest.importorskip("distributed")


@pytest.fixture(autouse=True)
def on_the_cpu(monkeypatch):
    """The Dask backend computes on its workers' CPUs and refuses device=cuda; scripts/gpu_check.sh
    runs the suite with GNNGP_DEVICE=cuda, so these tests (and the local runs they compare) ask for the CPU."""
    monkeypatch.setenv("GNNGP_DEVICE", "cpu")

LOW_RANK = ["gcngp_x", "gcn2gp_x", "gingp_x", "sagegp_x", "ggp_x", "rbf_x", "composed_x"]
OWN = {"rbf_x": ["kernel.gamma_grid.num=3"], "composed_x": ["kernel.hidden=[relu,weight,conv,bias]"]}


@pytest.fixture(scope="module")
def client():
    """Three workers, as threads of this process (fast to start)."""
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def first_run(cfg, backend):
    """The first run of the job on ``backend`` and its labelled nodes' means (read while the job
    is open: on Dask from the run's root files, removed when it ends)."""
    with backend:
        run = GPJob(cfg, backend).run(0)
        return run, run.result.means().cpu().numpy()


def local_and_rowblocks(overrides: list[str], client, rows: int):
    """The local run and the row-block run of the same job, with their means."""
    common = [*overrides, "dtype=float64"]
    cfg = compose(common)
    local, local_means = first_run(cfg, LocalBackend(cfg))
    cfg = compose([*common, "compute=dask", f"partition.rows={rows}"])   # row blocks are Dask's (refused on a local run)
    dask_run, means = first_run(cfg, DaskBackend(cfg, client=client))
    return local, local_means, dask_run, means


def assert_same_predictions(local, local_means, dask_run, means) -> None:
    assert means.shape == local_means.shape
    assert np.abs(means - local_means).max() <= 1e-4 * np.abs(local_means).max()   # predictions within 1e-4 relative
    assert dask_run.result.nugget == pytest.approx(local.result.nugget)            # the same validation choice
    for key in ("train", "val", "test"):  # accuracy exactly; R^2 from merged moments to round-off
        assert dask_run.result.metrics[key] == pytest.approx(local.result.metrics[key], rel=1e-6, abs=1e-9)
    row = dask_run.row
    assert row["compute_backend"] == "dask" and row["workers"] == 3 and row["peak_worker_mb"] > 0


@pytest.mark.paper  # slow: the parity matrix (test_parity.py) covers every kernel on small graphs in the fast suite
@pytest.mark.parametrize("kernel", LOW_RANK)
def test_every_low_rank_kernel_on_cora_gives_the_local_predictions(kernel, client, data_overrides):
    assert_same_predictions(*local_and_rowblocks(["dataset=cora", f"kernel={kernel}", *OWN.get(kernel, []), *data_overrides], client, rows=1000))


@pytest.mark.paper  # slow: as above
@pytest.mark.parametrize("kernel", LOW_RANK)
def test_every_low_rank_kernel_on_a_small_csbm_gives_the_local_predictions(kernel, client, cache):
    overrides = ["dataset=csbm", "dataset.num_nodes=3000", "landmarks.count=64", f"kernel={kernel}", *OWN.get(kernel, []), f"data.root={cache}"]
    assert_same_predictions(*local_and_rowblocks(overrides, client, rows=700))


@pytest.mark.paper  # slow: as above
@pytest.mark.parametrize("limit", ["nngp", "ntk"])
def test_an_erf_network_on_row_blocks_gives_the_local_predictions(limit, client, cache):
    """The generic activation on row blocks: erf's expectations go to the workers with its roots."""
    overrides = ["dataset=csbm", "dataset.num_nodes=3000", "landmarks.count=64", "kernel=composed_x", "kernel.hidden=[erf,weight,conv,bias]",
                 f"kernel.limit={limit}", f"data.root={cache}"]
    assert_same_predictions(*local_and_rowblocks(overrides, client, rows=700))


# Every low-rank kernel on PubMed (GCNII's re-read input, GraphSAGE's addition, ... in several row blocks),
# GCNGP-X also on chameleon (a regression set: every kernel's regression path runs in the parity matrix),
# and GCN's tangent kernel at 10^5 nodes in 4 row blocks (its recursion runs GCN's NNGP chain beside the
# tangent one; GCNGP-X alone, GCNII and GraphSAGE there took 70 to 90 s each in the two-process suite of
# 2026-11-28, and run the same block operations as here and on PubMed)
LARGER = [("pubmed", kernel) for kernel in LOW_RANK] + [("chameleon", "gcngp_x"), ("csbm_1e5", "gcngp_x+ntk")]
VARIANTS = {"+ntk": ["kernel.limit=ntk"]}


@pytest.mark.paper
@pytest.mark.parametrize("dataset, kernel", LARGER, ids=["-".join(case) for case in LARGER])
def test_every_low_rank_kernel_on_larger_graphs_gives_the_local_predictions(dataset, kernel, client, data_overrides):
    sizes = {"pubmed": 5000, "chameleon": 1000, "csbm_1e5": 25_000}
    landmarks = [] if dataset == "pubmed" else ["landmarks.count=128"]   # PubMed: its 60 training nodes
    kernel, plus, variant = kernel.partition("+")
    local, local_means, dask_run, means = local_and_rowblocks(
        [f"dataset={dataset}", f"kernel={kernel}", *landmarks, *OWN.get(kernel, []), *VARIANTS.get(plus + variant, []), *data_overrides],
        client, rows=sizes[dataset])
    assert_same_predictions(local, local_means, dask_run, means)
    if dataset == "chameleon":  # regression: the uncertainty columns as today
        assert dask_run.row["nlpd"] == pytest.approx(local.result.uncertainty["nlpd"], rel=1e-4)
        assert dask_run.row["coverage95"] == pytest.approx(local.result.uncertainty["coverage95"], abs=1e-9)


def blocked_toy(tmp_path: Path, edge_index: torch.Tensor, x: torch.Tensor):
    """A graph sharded in row blocks of 10 nodes, and its features written as a root:
    ``(graph, store, folder of X's files, X read from them)``."""
    from torch_geometric.data import Data

    from gnngp_cli.backends.rowblocks.sharded_graph import ShardedGraph
    from gnngp_cli.backends.rowblocks.root_files import RootStore

    n = x.size(0)
    data = Data(x=x, y=torch.zeros(n, dtype=torch.long), edge_index=edge_index,
                train_mask=torch.ones(n, dtype=torch.bool), val_mask=torch.zeros(n, dtype=torch.bool), test_mask=torch.zeros(n, dtype=torch.bool))
    data.task, data.num_classes = "classification", 1
    meta = write_data(data, tmp_path / "shards", 10, "toy")
    graph = ShardedGraph(tmp_path / "shards", meta)
    store = RootStore(tmp_path / "roots")
    folder, q = store.folder_of(graph.features(np.float64), "X")
    return graph, store, folder, q


def test_the_blocked_product_reads_only_the_row_blocks_its_columns_touch(tmp_path, monkeypatch):
    """A graph of two disconnected halves: each output block reads only the source blocks of its own half."""
    from gnngp_cli.graph.operators import Adjacency
    from gnngp_cli.backends.rowblocks import sharded_graph as blocked
    from gnngp_cli.backends.rowblocks.root_files import read_block

    n = 40
    left = torch.tensor([[i, i + 1] for i in range(0, 19)] + [[i + 1, i] for i in range(0, 19)]).T
    edge_index = torch.cat([left, left + 20], dim=1)
    x = torch.randn(n, 3)
    graph, store, folder, q = blocked_toy(tmp_path, edge_index, x)
    read = []
    monkeypatch.setattr(blocked, "read_block", lambda path, mmap=False: read.append(int(Path(path).stem)) or read_block(path, mmap))
    out = graph.convolve(folder, "sym", q.shape[1], q.dtype)
    blocks = [out.blocks[b].compute(scheduler="sync") for b in range(4)]
    assert sorted(read) == [0, 0, 1, 1, 2, 2, 3, 3]                         # blocks 0, 1 read 0 and 1; blocks 2, 3 read 2 and 3
    ref = Adjacency.from_graph(edge_index, n, "sym", torch.float64, "cpu").matmul(x.double())
    assert np.allclose(np.concatenate(blocks), ref.numpy(), atol=1e-12)
    store.close()
    assert not (tmp_path / "roots").exists() or not any((tmp_path / "roots").iterdir())


@pytest.mark.parametrize("kind", ["sym", "row"])
def test_the_blocked_product_over_many_source_blocks_equals_the_whole_product(tmp_path, kind):
    """Every output block touches most of the 12 source blocks, as on a random graph."""
    from gnngp_cli.graph.operators import Adjacency

    n = 120
    g = torch.Generator().manual_seed(3)
    edge_index = torch.randint(n, (2, 900), generator=g)
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    x = torch.randn(n, 5, generator=g)
    graph, store, folder, q = blocked_toy(tmp_path, edge_index, x)
    out = graph.convolve(folder, kind, q.shape[1], q.dtype)
    ref = Adjacency.from_graph(edge_index, n, kind, torch.float64, "cpu").matmul(x.double())
    assert np.allclose(out.compute(scheduler="sync"), ref.numpy(), atol=1e-12)
    store.close()


def test_the_roots_of_a_killed_run_on_this_host_are_removed_by_the_next(tmp_path):
    """Only a folder whose marker proves gnngp made it (and whose process is gone, on this host)
    is removed: a user's run-* folder, an unmarked one of any age, or a marker that names
    another folder, is left alone."""
    import json
    import socket

    from gnngp_cli.backends.rowblocks.root_files import MARK, OWNER, RootStore

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    here = socket.gethostname()
    owners = {"run-killed": (here, int(gone.stdout), "run-killed"), "run-alive": (here, os.getpid(), "run-alive"),
              "run-elsewhere": ("another-host", int(gone.stdout), "run-elsewhere"),
              "run-copied-marker": (here, int(gone.stdout), "run-killed")}
    for name, (host, pid, folder) in owners.items():
        (tmp_path / name / "x").mkdir(parents=True)
        (tmp_path / name / OWNER).write_text(json.dumps({"made_by": MARK, "folder": folder, "host": host, "pid": pid}))
    (tmp_path / ".run-half-made.tmp").mkdir()                               # killed while it was made: its marker proves it
    (tmp_path / ".run-half-made.tmp" / OWNER).write_text(json.dumps({"made_by": MARK, "folder": "run-half-made", "host": here, "pid": int(gone.stdout)}))
    (tmp_path / "run-2024-important-experiment").mkdir()                   # a user's folder, two hours old, no marker
    (tmp_path / "run-2024-important-experiment" / "notes.txt").write_text("keep me")
    os.utime(tmp_path / "run-2024-important-experiment", (time.time() - 7200, time.time() - 7200))
    (tmp_path / "run-old-style").mkdir()                                    # an older gnngp's marker (no made_by): not proof
    (tmp_path / "run-old-style" / OWNER).write_text(json.dumps({"host": here, "pid": int(gone.stdout)}))
    store = RootStore(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["run-alive", "run-elsewhere", "run-copied-marker", "run-2024-important-experiment", "run-old-style",
                           store.folder.name])
    assert (tmp_path / "run-2024-important-experiment" / "notes.txt").read_text() == "keep me"
    marker = json.loads((store.folder / OWNER).read_text())
    assert marker == {"made_by": MARK, "folder": store.folder.name, "host": here, "pid": os.getpid(), "locked": True}
    store.close()
    assert not store.folder.exists()


def test_a_live_runs_roots_in_another_pid_namespace_are_never_removed(tmp_path):
    """An adversary's trial: a live run in another PID namespace with this host name (a container
    sharing the data volume) wrote process id 153, which this one saw as gone: its roots were
    removed mid-run ("the folder is gone", exit 1). A run holds its marker under flock for its
    life, and a marker that says so is removed only once that lock is free."""
    import fcntl
    import json
    import socket

    from gnngp_cli.backends.rowblocks.root_files import MARK, OWNER, RootStore

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    folder = tmp_path / "run-0123456789ab"
    (folder / "x").mkdir(parents=True)
    (folder / OWNER).write_text(json.dumps({"made_by": MARK, "folder": folder.name, "host": socket.gethostname(), "pid": int(gone.stdout),
                                            "locked": True}))
    held = os.open(folder / OWNER, os.O_RDONLY)   # the other namespace's live run: its process id means nothing here, its lock does
    fcntl.flock(held, fcntl.LOCK_EX)
    first = RootStore(tmp_path)
    assert folder.is_dir()
    second = RootStore(tmp_path)   # and a live run of this process: its own lock keeps it
    assert first.folder.is_dir()
    os.close(held)                 # that run ends (killed: the kernel lets its lock go)
    third = RootStore(tmp_path)
    assert not folder.exists() and first.folder.is_dir() and second.folder.is_dir()
    for store in (first, second, third):
        store.close()
    assert list(tmp_path.iterdir()) == []


def test_roots_folders_of_an_older_gnngp_are_one_warning_saying_how_to_remove_them(tmp_path, caplog):
    """docs/dask.md said an unmarked folder an hour old was removed; no run removes one (it may be
    a user's). Those named as gnngp names its folders are told of once, with the command."""
    import json
    import logging

    from gnngp_cli.backends.rowblocks.root_files import OWNER, RootStore

    (tmp_path / "run-0123456789ab" / "x").mkdir(parents=True)              # before owner.json existed
    (tmp_path / "run-aaaaaaaaaaaa").mkdir()                                 # an owner.json that proves nothing
    (tmp_path / "run-aaaaaaaaaaaa" / OWNER).write_text(json.dumps({"host": "h", "pid": 1}))
    (tmp_path / "run-2024-important-experiment").mkdir()                   # a user's: not named as gnngp names its folders
    os.utime(tmp_path / "run-0123456789ab", (time.time() - 7200, time.time() - 7200))
    with caplog.at_level(logging.WARNING, logger="gnngp"):
        stores = [RootStore(tmp_path), RootStore(tmp_path)]   # the next seed's store too: still one warning
    warned = [r.getMessage() for r in caplog.records if "no owner.json marker" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(f"2 roots folder(s) under {tmp_path} have no owner.json marker (an older gnngp made them), "
                                                     "so no run ever removes them")
    assert warned[0].endswith(f"delete them: rm -r {tmp_path / 'run-0123456789ab'} {tmp_path / 'run-aaaaaaaaaaaa'}")
    assert all((tmp_path / name).is_dir() for name in ("run-0123456789ab", "run-aaaaaaaaaaaa", "run-2024-important-experiment"))
    for store in stores:
        store.close()


def test_a_removal_cut_short_never_leaves_a_run_folder_without_its_marker(tmp_path, monkeypatch):
    """A second signal during the clean-up stopped rmtree after it had removed owner.json: an
    empty run-* folder was left, which every later run warned of as an older gnngp's. The folder
    is renamed to its hidden name first and its marker removed last; an empty hidden one is
    removed by a later run."""
    import dask.array as da

    from gnngp_cli.backends.rowblocks import root_files
    from gnngp_cli.backends.rowblocks.root_files import OWNER, RootStore

    store = RootStore(tmp_path)
    store.written(da.ones((40, 3), chunks=(10, 3)), "a root")
    real = root_files.shutil.rmtree

    def cut_short(path, ignore_errors=False):   # the last removal stops between the marker and the folder
        if Path(path).name.startswith(".run-"):
            (Path(path) / OWNER).unlink()
            raise KeyboardInterrupt
        real(path, ignore_errors=ignore_errors)
    monkeypatch.setattr(root_files.shutil, "rmtree", cut_short)
    with pytest.raises(KeyboardInterrupt):
        store.close()
    monkeypatch.setattr(root_files.shutil, "rmtree", real)
    assert list(tmp_path.glob("run-*")) == []
    left = list(tmp_path.glob(".run-*.tmp"))
    assert len(left) == 1 and list(left[0].iterdir()) == []
    os.utime(left[0], (time.time() - 120, time.time() - 120))
    RootStore(tmp_path).close()
    assert list(tmp_path.iterdir()) == []


def test_the_free_space_check_counts_the_last_runs_files_as_free(tmp_path):
    """A second run (the next seed) is checked after the first run's files are cleared."""
    import dask.array as da

    from gnngp_cli.backends.rowblocks.root_files import RootStore

    store = RootStore(tmp_path)
    store.written(da.ones((40, 3), chunks=(10, 3)), "a root")
    assert len(list(store.folder.rglob("*.npy"))) == 4
    store.check_room(0.0)
    assert list(store.folder.rglob("*.npy")) == []


def test_gathered_rows_keep_the_order_asked_for(tmp_path):
    import dask.array as da

    from gnngp_cli.backends.rowblocks.root_files import RootStore

    x = np.arange(60.0).reshape(20, 3)
    store = RootStore(tmp_path)
    nodes = np.array([17, 2, 9, 3])
    assert np.array_equal(store.gather_rows(da.from_array(x, chunks=(6, 3)), nodes, "x"), x[nodes])
    store.close()


def test_a_non_finite_root_is_one_line_naming_what(tmp_path):
    import dask.array as da

    from gnngp_cli.errors import KernelError
    from gnngp_cli.backends.rowblocks.root_files import RootStore

    store = RootStore(tmp_path)
    with pytest.raises(KernelError, match=r"^input layer: the kernel has NaN or infinite entries; lower the sigmas"):
        store.written(da.from_array(np.array([[1.0], [np.inf]]), chunks=(1, 1)), "input layer")
    store.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.paper  # slow: runs in CI with -m paper
def test_sigterm_midway_removes_the_runs_roots(tmp_path, cache):
    """SLURM ends a walltime with SIGTERM: the run stops and its roots' files go with it."""
    roots = tmp_path / "roots"
    proc = subprocess.Popen([sys.executable, "-m", "gnngp_cli", "run", "kernel=gcngp_x", "dataset.num_nodes=60000", "kernel.layers=6",
                             "landmarks.count=128", "compute=dask", "compute.workers=2", "compute.processes=false", "compute.dashboard=:0",
                             "partition.rows=10000", f"data.root={cache}", f"compute.roots_dir={roots}", f"hydra.run.dir={tmp_path / 'run'}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and not list(roots.glob("run-*/*/*.npy")):
        time.sleep(0.05)
    assert list(roots.glob("run-*/*/*.npy")), "the run wrote no roots in time"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "Traceback" not in out, out[-2000:]   # one line, as on Ctrl-C (it exited 143 silently)
    assert [line for line in out.splitlines() if line.startswith("gnngp: error:")] == [
        "gnngp: error: stopped by SIGTERM: no run of this job had finished; "
        f"run it again with resume=true and the same overrides (and hydra.run.dir={tmp_path / 'run'}) to run only the missing ones"]
    assert list(roots.iterdir()) == [], out[-2000:]


def _victim_pid(client) -> tuple[str, int]:
    pids = client.run(os.getpid)
    addr = sorted(pids)[0]
    return addr, pids[addr]


@pytest.mark.paper  # slow: runs in CI with -m paper
def test_a_worker_killed_midway_is_recomputed_with_an_unchanged_result(cache):
    overrides = ["dataset=csbm", "dataset.num_nodes=6000", "landmarks.count=64", "kernel=gcngp_x", "dtype=float64",
                 "partition.rows=1000", f"data.root={cache}", "compute=dask"]
    import dask

    with dask.config.set(scheduler="synchronous"):  # the same tasks, uninterrupted, in this process
        cfg = compose(overrides)
        expected = first_run(cfg, DaskBackend(cfg, cluster=False))[1]
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        addr, pid = _victim_pid(c)
        killed = threading.Event()

        def kill_when_busy():
            deadline = time.time() + 60
            while time.time() < deadline:
                held = c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.workers[addr].has_what) if addr in dask_scheduler.workers else 0)
                if held > 0:
                    os.kill(pid, signal.SIGKILL)
                    killed.set()
                    return
                time.sleep(0.02)

        watcher = threading.Thread(target=kill_when_busy)
        watcher.start()
        cfg = compose(overrides)
        means = first_run(cfg, DaskBackend(cfg, client=c))[1]
        watcher.join()
        assert killed.is_set()                                              # a worker died while the job held data on it
        assert pid not in c.run(os.getpid).values()
        np.testing.assert_allclose(means, expected, rtol=1e-12, atol=1e-12)


def write_papers_format(root: Path, n: int = 500, e: int = 2000, d: int = 8, classes: int = 5, seed: int = 0) -> None:
    """Small files in OGB's papers100M layout (directed citations, NaN labels off the split)."""
    rng = np.random.default_rng(seed)
    raw, split = root / papers100m.NAME / "raw", root / papers100m.NAME / "split" / "time"
    raw.mkdir(parents=True)
    split.mkdir(parents=True)
    edge_index = rng.integers(0, n, size=(2, e)).astype(np.int64)
    np.savez_compressed(raw / "data.npz", edge_index=edge_index, node_feat=rng.standard_normal((n, d)).astype(np.float32),
                        num_nodes_list=np.array([n]), num_edges_list=np.array([e]))
    labels = rng.integers(0, classes, size=(n, 1)).astype(np.float64)
    ids = rng.permutation(n)
    labelled = ids[: int(0.6 * n)]
    unlabelled = np.setdiff1d(np.arange(n), labelled)
    labels[unlabelled] = np.nan
    np.savez_compressed(raw / "node-label.npz", node_label=labels)
    parts = {"train": labelled[: int(0.3 * n)], "valid": labelled[int(0.3 * n): int(0.45 * n)], "test": labelled[int(0.45 * n):]}
    for key, part in parts.items():
        with gzip.open(split / f"{key}.csv.gz", "wt") as f:
            f.write("".join(f"{i}\n" for i in part))


def test_papers100m_raw_files_stream_into_the_row_blocks_of_the_loaded_graph(tmp_path, monkeypatch):
    write_papers_format(tmp_path / "mirror")
    monkeypatch.setattr(papers100m, "CHUNK", 97)                           # many chunks
    largest = []
    read = papers100m.NpyMember.read
    monkeypatch.setattr(papers100m.NpyMember, "read", lambda self, f, count: largest.append(count) or read(self, f, count))
    store = DataStore.from_config(str(tmp_path / "cache"), str(tmp_path / "mirror"), False)
    cfg = compose(["dataset=papers100m"])
    streamed = papers100m.partition(cfg.dataset, store, tmp_path / "streamed", 128, "")
    assert max(largest) <= 128 * 8                                          # never more than one row block or one edge chunk at once
    loaded = write_data(papers100m.load(cfg.dataset, store), tmp_path / "loaded", 128, "papers100m")
    assert (streamed.num_nodes, streamed.num_edges, streamed.num_classes) == (loaded.num_nodes, loaded.num_edges, loaded.num_classes)
    for b in range(streamed.num_blocks):
        for part in ("rows", "cols", "weights", "split", "deg", "x", "y", "mask"):
            assert np.array_equal(load_part(tmp_path / "streamed", b, part), load_part(tmp_path / "loaded", b, part)), (b, part)


def test_papers100m_on_row_blocks_gives_the_local_predictions(tmp_path, client):
    write_papers_format(tmp_path / "mirror", n=800, e=4000)
    overrides = ["dataset=papers100m", "kernel=gcngp_x", "landmarks.count=64", f"data.mirror={tmp_path / 'mirror'}", f"data.root={tmp_path / 'cache'}"]
    assert_same_predictions(*local_and_rowblocks(overrides, client, rows=300))


def test_cli_partition_writes_the_shards_a_run_reads(tmp_path, data_overrides):
    out = tmp_path / "shards"
    done = in_process("partition", "dataset=cora", f"out={out}", "partition.rows=1000", *data_overrides, f"hydra.run.dir={tmp_path / 'h'}")
    assert done.returncode == 0, done.stderr
    meta = read_meta(out)
    assert (meta.num_nodes, meta.rows, meta.num_blocks, meta.num_features) == (2708, 1000, 3, 1433)
    dask = ["dataset=cora", "kernel=gcngp_x", "compute=dask", "compute.workers=2", "compute.processes=false", "compute.dashboard=:0",
            f"compute.shards={out}", *data_overrides]
    rows = run([*dask, "dataset.metric=accuracy"])           # a setting of the run, not of the graph: the same shards
    assert rows[0]["test"] == pytest.approx(run(["dataset=cora", "kernel=gcngp_x", *data_overrides])[0]["test"], abs=0.002)
    with pytest.raises(DatasetError, match=r"holds cora written with dataset.center=False, not True \(this job's setting second\); partition it again"):
        run([*dask, "dataset.center=true"])                   # the shards' features are not this job's: refused, never used


def test_a_dask_run_tells_its_estimate_and_progress_in_the_log(tmp_path, cache, monkeypatch):
    """As a local run: the estimate line before computing (and in the row), and progress lines
    by layer and for the posterior where there is no terminal; then where the workers' time went."""
    from gnngp_cli import progress

    monkeypatch.setattr(progress, "INTERVAL", 0.01)   # what GNNGP_PROGRESS_SECONDS=0.01 sets when gnngp starts
    done = in_process("run", "kernel=gcngp_x", "dataset.num_nodes=3000", "landmarks.count=64",
                      "compute=dask", "compute.workers=2", "compute.processes=false", "compute.dashboard=:0", "partition.rows=1000",
                      f"data.root={cache}", f"hydra.run.dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    assert "GCNGP-X on csbm (compute=dask, 2 workers): ~" in text and "64 landmarks, roots of 3,000 x 67" in text
    assert "(compute=dask, 2 workers): 1/3 (33%) kernel" in text and "3/3 (100%) posterior done" in text
    assert "(compute=dask, 2 workers): worker seconds" in text   # where the time went (see the next test)
    import pandas as pd

    row = pd.read_csv(tmp_path / "results.csv").iloc[0]
    assert row["compute_backend"] == "dask" and 0 < row["estimated_gb"] < 5


def _nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _doze(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_the_time_summary_names_the_task_kinds_that_took_longest(client):
    """Since the run's start only: the shared cluster ran other jobs before (one of its own here,
    whatever ran before it in this test process)."""
    import dask

    from gnngp_cli.backends.rowblocks.cluster import task_times, time_summary

    dask.compute(dask.delayed(_doze, pure=True)(0.2))
    before = task_times(client)
    assert any("doze" in kind for kind in before), before                  # what ran before this run
    dask.compute(dask.delayed(_nap, pure=True)(0.6), dask.delayed(_nap, pure=True)(0.7))
    line = time_summary(client, since=before)
    assert re.fullmatch(r"worker seconds by action: compute 1\.\d; longest task kinds: nap \(compute 1\.\d\)", line), line


def test_exact_kernel_on_dask_names_its_low_rank_twin():
    with pytest.raises(ConfigError, match=r"exact kernels are not distributed.*kernel=gcn2gp_x"):
        run(["kernel=gcn2gp", "compute=dask"])


def test_worker_count_below_one_is_one_line():
    with pytest.raises(ConfigError, match=r"^compute.workers=0 must be at least 1$"):
        run(["kernel=gcngp_x", "compute=dask", "compute.workers=0"])


def test_a_roots_dir_that_cannot_be_written_is_one_line(tmp_path, cache):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ComputeError, match=r"cannot write the roots of this run into .*file.*; set compute.roots_dir to a writable folder"):
        run(["kernel=gcngp_x", "dataset.num_nodes=300", "compute=dask", "compute.processes=false", "compute.workers=1",
             "compute.dashboard=:0", f"data.root={cache}", f"compute.roots_dir={blocker}"])


def test_a_roots_dir_without_room_for_the_roots_is_refused_before_any_work(tmp_path, cache, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(2**30, 2**30 - 2**20, 2**20))   # 1 MiB free
    with pytest.raises(ComputeError, match=r"compute.roots_dir=.* has 1.0 MiB free and this run writes about 7.7 MiB of roots at its peak; free space"):
        run(["kernel=gcngp_x", "dataset.num_nodes=3000", "compute=dask", "compute.processes=false", "compute.workers=1",
             "compute.dashboard=:0", f"data.root={cache}", f"compute.roots_dir={tmp_path / 'roots'}"])
    assert list((tmp_path / "roots").iterdir()) == []                    # refused before any file was written


def test_a_dask_run_leaves_no_root_files_behind(tmp_path, cache):
    rows = run(["kernel=gcngp_x", "dataset.num_nodes=300", "compute=dask", "compute.processes=false", "compute.workers=2",
                "compute.dashboard=:0", f"data.root={cache}", f"compute.roots_dir={tmp_path / 'roots'}", "partition.rows=100"])
    assert rows[0]["status"] == "ok"
    assert list((tmp_path / "roots").iterdir()) == []                    # the run's folder is removed at its end


def test_a_graph_smaller_than_one_row_block_is_checked_at_its_own_size(tmp_path, data_overrides):
    """partition.rows (100,000 by default) is the most a block holds: Cora's one block has 2,708
    rows, and fits a 2 GB worker (it was refused as if it had 100,000)."""
    rows = run(["dataset=cora", "kernel=gcn2gp_x", "compute=dask", "compute.workers=2", "compute.processes=false",
                "compute.memory_limit=2GB", "compute.dashboard=:0", *data_overrides])
    assert rows[0]["status"] == "ok" and rows[0]["compute_backend"] == "dask"


def test_unreachable_scheduler_is_one_line():
    with pytest.raises(ComputeError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        run(["kernel=gcngp_x", "dataset.num_nodes=300", "compute=dask", "compute.address=tcp://127.0.0.1:9", "compute.connect_timeout=2"])


def test_worker_memory_below_one_row_block_asks_for_smaller_blocks(cache):
    common = ["kernel=gcngp_x", "compute=dask", "compute.workers=1", "compute.processes=false", "compute.dashboard=:0",
              "partition.rows=3000", f"data.root={cache}"]
    with pytest.raises(ResourceError, match=r"one row block of 3000 nodes needs .* use more, smaller row blocks \(partition.rows=\d+.* "
                                            r"or a larger compute.memory_limit \(at least [\d.]+ [KMG]iB a worker for these blocks\)$"):
        run([*common, "compute.memory_limit=40MB"])
    with pytest.raises(ResourceError, match=r"one row block of 3000 nodes needs .*; a larger compute.memory_limit \(at least"):
        run([*common, "compute.memory_limit=1MB"])      # blocks small enough would be under 1,000 rows: more memory is the fix


@pytest.mark.parametrize("setting, message", [
    ("compute.memory_limit=1KB", "compute.memory_limit=1KB is below the 512 MiB a worker process needs"),
    ("compute.workers=1000", "compute.workers=1000 starts 1000 worker processes on this machine's"),
    ("compute.memory_limit=-1GB", "compute.memory_limit=-1GB is negative; give a size"),       # an adversary's: 24 tracebacks
    ("compute.memory_limit=0.5", "compute.memory_limit=0.5 reads as 0 bytes, which is no limit"),   # silently no limit
    ("compute.memory_limit=0.4B", "compute.memory_limit=0.4B reads as 0 bytes, which is no limit"),   # (the adversary's trial of the fix)
    ("compute.spill_dir=/dev/null", "compute.spill_dir=/dev/null is not a folder"),            # NotADirectoryError's traceback
    ("compute.address=garbage", "compute.address=garbage is not a scheduler address (missing port number"),   # ValueError's
    ("compute.spill_dir=/etc/hostname/sub", "compute.spill_dir=/etc/hostname/sub lies under /etc/hostname, which is not a folder"),
    ("compute.spill_dir=/proc/gnngp-x", "compute.spill_dir=/proc/gnngp-x cannot be made ("),
    ("compute.address=ucx://localhost:8786", "compute.address=ucx://localhost:8786 is not a scheduler address"),   # no ucx: a TypeError
])
def test_a_local_cluster_that_cannot_run_is_refused_before_a_worker_starts(tmp_path, setting, message):
    """A trial: 1KB a worker restarted every worker forever (Dask's 95% rule); 1000 worker
    processes on 2 cores hung starting them. Both are one line, no worker started."""
    done = in_process("run", "kernel=gcngp_x", "dataset.num_nodes=300", "compute=dask", setting, f"hydra.run.dir={tmp_path}")
    errors = [line for line in done.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert done.returncode == 1 and len(errors) == 1 and message in errors[0] and "Traceback" not in done.stderr


def test_in_process_workers_below_this_process_memory_are_never_paused():
    """compute.processes=false: the workers are threads of this process, whose memory (hundreds of MB
    here) Dask reads as theirs; with a limit below it, Dask paused them for good once its monitor
    ticked, and a job waited forever (seen in the test above, under load). Tasks still run."""
    import time
    from types import SimpleNamespace

    from gnngp_cli.backends.rowblocks.cluster import dask_client

    c = SimpleNamespace(address=None, backend="dask", memory_limit="40MB", processes=False, workers=1, threads_per_worker=1,
                        spill_dir=None, dashboard=":0")
    with dask_client(c) as client:
        time.sleep(1.0)   # the memory monitor's ticks (every 100 ms)
        assert client.submit(lambda: 41 + 1).result(timeout=30) == 42
        assert all(w["memory_limit"] == 40_000_000 for w in client.scheduler_info(n_workers=-1)["workers"].values())   # still what sizes the blocks


def test_cli_error_for_an_exact_kernel_on_dask_is_one_line(tmp_path):   # end to end: a backend's refusal from the command
    done = in_process("run", "kernel=gcngp", "compute=dask", f"hydra.run.dir={tmp_path}")   # (a fresh process's: tests/cli/test_cli.py)
    assert done.returncode == 1
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert lines == ["gnngp: error: exact kernels are not distributed: kernel=gcngp with compute=dask; use its low-rank twin kernel=gcngp_x (Nystrom, with landmarks) or compute=local"]


def test_slurm_preset_writes_the_job_script_a_cluster_user_expects():
    from gnngp_cli.backends.rowblocks.cluster import slurm_cluster

    cfg = compose(["kernel=gcngp_x", "compute=slurm", "compute.queue=cpu", "compute.account=myproj", "compute.walltime=04:00:00",
                   "compute.cores=16", "compute.memory=64GB", "compute.workers=4", "compute.dashboard=:0", "compute.job_extra=['--constraint=amd']"])
    assert cfg.compute.backend == "slurm"
    cluster = slurm_cluster(cfg.compute)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    for line in ("#SBATCH -p cpu", "#SBATCH -A myproj", "#SBATCH -t 04:00:00", "#SBATCH --cpus-per-task=16", "#SBATCH --constraint=amd"):
        assert line in script, line
    assert "--nworkers 4" in script and "--nthreads 4" in script          # 4 workers of 4 threads share the 16 cores


def test_a_stand_in_says_so_on_row_blocks_as_locally(cache, tmp_path):
    """An absent dataset replaced by its csbm stand-in: the Dask row says so (stand_in was empty there)."""
    from gnngp_cli.data import DATASETS, register_dataset
    from gnngp_cli.errors import DatasetUnavailable
    from gnngp_cli.schema import DatasetConfig

    def absent(cfg, store):
        raise DatasetUnavailable("dataset 'faraway' is not in the cache or the mirror")

    register_dataset("faraway", "Faraway", absent, DatasetConfig(name="faraway"), stand_in=(400, 1200, 8, 3, 0.3, 0.2))
    try:
        common = ["dataset=faraway", "experiment.stand_in=csbm", "kernel=gcngp_x", "dtype=float64", f"data.root={tmp_path}"]
        local = run(common)[0]
        dask = run([*common, "compute=dask", "compute.workers=2", "compute.processes=false", "compute.dashboard=:0", "partition.rows=150"])[0]
    finally:
        DATASETS.pop("faraway")
    assert local["stand_in"].startswith("csbm stand-in (N=400") and dask["stand_in"] == local["stand_in"]
    assert dask["test"] == pytest.approx(local["test"], rel=1e-6) and dask["n_nodes"] == local["n_nodes"] == 400


@pytest.mark.parametrize("setting, message", [
    ("device=cuda", r"^compute=dask computes on its workers' CPUs; device=cuda runs with compute=local \(or use device=cpu\)$"),
    ("max_memory_gb=4", r"^max_memory_gb limits the exact kernels of compute=local; compute=dask sizes each task by compute.memory_limit"),
    ("fit=mll", r"^fit=mll needs gradients through the kernel on every node, which compute=dask does not compute; use fit=grid with"),
])
def test_what_the_row_block_backend_cannot_honour_is_refused_in_one_line(setting, message):
    with pytest.raises(ConfigError, match=message):
        run(["kernel=gcngp_x", "compute=dask", setting])


def test_fit_mll_on_dask_with_an_exact_kernel_is_refused_for_the_fit_first():
    """The exact kernel's refusal names its low-rank twin, which fit=mll on compute=dask would refuse in turn:
    the fit's refusal, whose fixes both run, comes first."""
    with pytest.raises(ConfigError, match=r"^fit=mll needs gradients through the kernel on every node"):
        run(["kernel=gcngp", "compute=dask", "fit=mll"])


def labelled_own_ids(shards: Path) -> np.ndarray:
    """The graph's own ids of the labelled nodes of row-block shards, in their position order."""
    from gnngp_cli.data.shards import read_ids

    meta = read_meta(shards)
    ids = []
    for b in range(meta.num_blocks):
        mask = np.asarray(load_part(shards, b, "mask"))
        ids.append(read_ids(shards, b, meta.block_start(b), mask.size, meta.order)[mask > 0])
    return np.concatenate(ids)


@pytest.mark.paper  # slow (a local and two Dask runs per order); the CLI's order runs are in test_products.py
@pytest.mark.parametrize("order", ["rcm", "metis"])
def test_shards_in_a_node_order_give_the_local_predictions_with_fewer_rows_read(order, client, cache, caplog):
    """data.order on compute=dask: the shards are numbered by the order, the landmarks are the
    local run's (drawn on the graph's own ids), every prediction is the local one, and a row
    block's A Q reads fewer rows of Q on a graph with communities (the log line says so)."""
    common = ["dataset=csbm", "dataset.num_nodes=3000", "dataset.homophily=0.95", "landmarks.count=64", "kernel=gcngp_x", f"data.root={cache}",
              "dtype=float64"]
    cfg = compose(common)
    local, local_means = first_run(cfg, LocalBackend(cfg))
    reads = {}
    for name in ("none", order):
        cfg = compose([*common, "compute=dask", "partition.rows=700", f"data.order={name}"])   # row blocks are Dask's
        caplog.clear()
        with caplog.at_level("INFO", logger="gnngp"):
            dask_run, means = first_run(cfg, DaskBackend(cfg, client=client))
        line = next(r.getMessage() for r in caplog.records if "a task reads" in r.getMessage())
        reads[name] = float(re.search(r"reads (\d+) rows of Q on average", line).group(1))
        assert f"data.order={name}" in line
        shards = Path(json.loads(dask_run.row["extra"])["shards"]) if isinstance(dask_run.row["extra"], str) else Path(dask_run.row["extra"]["shards"])
        own = labelled_own_ids(shards)
        assert (read_meta(shards).order, own.size) == (name, means.shape[0])
        assert_same_predictions(local, local_means, dask_run, means[np.argsort(own, kind="stable")])
    assert reads[order] < {"rcm": 1.0, "metis": 0.8}[order] * reads["none"], reads   # four communities, which METIS finds


def test_a_streamed_partition_refuses_a_node_order(tmp_path):
    with pytest.raises(ConfigError, match="data.order=rcm numbers the nodes of a graph loaded in one process; papers100m"):
        run(["dataset=papers100m", "kernel=gcngp_x", "compute=dask", "data.order=rcm", f"data.root={tmp_path}", "data.download=false"])


def test_tiled_product_is_refused_on_dask():
    with pytest.raises(ConfigError, match="compute.product=tiled applies to compute=local"):
        run(["dataset=cora", "kernel=gcngp_x", "compute=dask", "compute.product=tiled"])


def test_two_jobs_that_find_no_shards_partition_them_once(tmp_path, mirror, monkeypatch):
    """Two jobs (threads here; processes take the same ``flock``) that both find a dataset's cached
    shards missing: one writes them while the other waits, then reads what was written, instead of
    rewriting files the first is reading (a shard read short failed a CI run)."""
    from gnngp_cli.backends.rowblocks import dask_backend as backend

    calls = []
    write = backend.partition

    def slow_partition(*args, **kwargs):
        calls.append(threading.get_ident())
        time.sleep(0.3)   # the other job arrives while this one writes
        return write(*args, **kwargs)

    monkeypatch.setattr(backend, "partition", slow_partition)
    overrides = ["dataset=cora", "kernel=gcngp_x", "compute=dask", f"data.mirror={mirror}", f"data.root={tmp_path}"]
    cfgs = [compose(overrides) for _ in range(2)]   # a config each, as two jobs have (OmegaConf's objects are not for two threads)
    graphs, errors = [], []

    def job(cfg):
        try:
            graphs.append(backend.sharded_graph(cfg, DataStore.of(cfg.data)))
        except Exception as err:   # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=job, args=(cfg,)) for cfg in cfgs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(calls) == 1 and len(graphs) == 2
    assert graphs[0].meta == graphs[1].meta


def test_a_root_written_twice_is_read_back_both_times(tmp_path):
    """A root that is both K's and Theta's (after a first layer) is written once: asked again, the
    store gives the array read from its files, not the lazy graph that would compute it again."""
    import dask.array as da

    from gnngp_cli.backends.rowblocks.root_files import RootStore

    store = RootStore(tmp_path / "roots")
    q = da.from_array(np.arange(40.0).reshape(20, 2), chunks=(10, 2)) * 2.0
    first = store.written(q, "layer 1")
    assert store.written(q, "layer 1 (tangent kernel)") is first and first.name != q.name
    assert store.written(first, "again") is first
    np.testing.assert_array_equal(first.compute(), np.arange(40.0).reshape(20, 2) * 2.0)
    store.close()


def test_a_stop_while_the_cluster_starts_adds_no_traceback_after_its_line(monkeypatch):
    """A trial: SIGTERM while the workers started printed, after the stop's line, Dask's failed
    broadcasts, asyncio's 'Future exception was never retrieved' and distributed's exit hook's
    AssertionError (Status.init). After a stop those loggers are silent, and a cluster stopped
    while it started is not closed again at exit."""
    import atexit
    import logging
    from types import SimpleNamespace

    import distributed

    from gnngp_cli import stops
    from gnngp_cli.backends.rowblocks import cluster

    record = logging.LogRecord("distributed.scheduler", logging.ERROR, __file__, 1, "broadcast failed", None, None)
    assert cluster._silent_after_stop(record)   # no stop: Dask's errors are shown
    unregistered = []
    monkeypatch.setattr(atexit, "unregister", unregistered.append)

    def stopped_start(*args, **kwargs):
        stops._STATE.first = signal.SIGTERM   # the stop's handler ran while the workers started
        raise KeyboardInterrupt
    monkeypatch.setattr(distributed, "LocalCluster", stopped_start)
    c = SimpleNamespace(address=None, backend="dask", memory_limit="auto", processes=True, workers=1, threads_per_worker=1,
                        spill_dir=None, dashboard=":0")
    try:
        with pytest.raises(KeyboardInterrupt):
            with cluster.dask_client(c):
                pass
        assert not cluster._silent_after_stop(record)
        assert [f.__name__ for f in unregistered] == ["close_clusters"]
        assert all(cluster._silent_after_stop in logging.getLogger(name).filters for name in cluster.QUIET_AFTER_STOP)
    finally:
        stops._STATE.first = None


def test_a_joblib_sweep_of_local_dask_clusters_is_refused_before_any_job(tmp_path):
    """An adversary's trial: -m hydra/launcher=joblib with compute=dask was 8 KB of tracebacks
    (cannot find context for 'loky'; Nanny failed to start) and job folders without a row."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    done = in_process("run", "-m", "hydra/launcher=joblib", "kernel=gcngp_x", "compute=dask", "dataset.num_nodes=300", "dataset.split_seed=0,1",
                      "compute.workers=1", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    errors = [line for line in done.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert done.returncode == 1 and len(errors) == 1 and "which hydra/launcher=joblib's worker processes cannot start" in errors[0]
    assert "hydra.launcher.n_jobs=1" in errors[0] and not (tmp_path / "sweep").exists()
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")   # the adversary's trial of the fix: a search's trials were not checked
    done = in_process("run", "-m", "hparams_search=optuna", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "kernel=gcngp_x", "compute=dask",
                      "dataset.num_nodes=300", "compute.workers=1", "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path / 'search'}")
    assert done.returncode == 1 and "(the search's trials), which hydra/launcher=joblib's worker processes cannot start" in done.stderr


def test_a_slurm_cluster_that_cannot_start_is_one_line_before_any_job(tmp_path, monkeypatch):
    """An adversary's trial: compute=slurm without sbatch printed a FileNotFoundError traceback per
    submission, said 'submitted 4 SLURM jobs', then waited for workers until killed; a memory of
    32XB was a 90-line ValueError; a walltime of 'forever' went unchecked."""
    from types import SimpleNamespace

    from gnngp_cli.backends.rowblocks.cluster import check_slurm
    from gnngp_cli.errors import ConfigError

    c = SimpleNamespace(memory="32GB", walltime="01:00:00")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="compute=slurm submits SLURM jobs with sbatch, which is not on this machine's PATH"):
        check_slurm(c)
    (tmp_path / "sbatch").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "sbatch").chmod(0o755)
    check_slurm(c)
    for bad, said in ((SimpleNamespace(memory="32XB", walltime="01:00:00"), "compute.memory='32XB' is not a size"),
                      (SimpleNamespace(memory="32GB", walltime="forever"), "compute.walltime='forever' is not a SLURM time")):
        with pytest.raises(ConfigError, match=said):
            check_slurm(bad)
    for good in ("90", "1-00:00:00", "2-12", "30:00"):
        check_slurm(SimpleNamespace(memory="4GB", walltime=good))
