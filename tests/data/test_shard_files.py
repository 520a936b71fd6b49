"""Shards that are not what gnngp partition wrote, even with their digests recomputed: one line,
before any task is built or any root indexed; a stop while a Dask job opens leaves no roots
folder; and two more inputs of the issue's list that once ended in tracebacks."""
import json
from pathlib import Path

import numpy as np
import pytest

from gnngp_cli.api import compose
from gnngp_cli.data import generate_csbm
from gnngp_cli.data.shards import block_dir, meta_digest, read_meta, sha256, write_data
from gnngp_cli.errors import DatasetError

from helpers import in_process, write_ring

ROWS = 100


@pytest.fixture
def shards(tmp_path) -> Path:
    out = tmp_path / "shards"
    write_data(generate_csbm(num_nodes=300, num_features=4, seed=0), out, ROWS, "csbm")
    return out


def rewrite(root: Path, edit) -> None:
    """Edit ``meta.json``'s fields and recompute its digest as gnngp partition computes it."""
    raw = json.loads((root / "meta.json").read_text())
    edit(raw)
    raw["meta_digest"] = meta_digest(raw)
    (root / "meta.json").write_text(json.dumps(raw))


@pytest.mark.parametrize("edit, message", [
    (lambda raw: raw.update(num_nodes=10**9), r"says 1,000,000,000 nodes in row blocks of 100, so 10,000,000 row blocks, and .* holds 3"),
    (lambda raw: raw.update(num_nodes=299), r"so 99 in the last row block, and its x.npy holds 100"),
    (lambda raw: raw.update(rows=0), r"rows=0 is not a whole number of at least 1"),
    (lambda raw: raw.update(num_nodes="300"), r"num_nodes='300' is not a whole number"),
    (lambda raw: raw.update(warnings="none"), r"warnings='none' is not a list"),
])
def test_a_meta_json_that_does_not_match_its_blocks_is_one_line(shards, edit, message):
    rewrite(shards, edit)
    with pytest.raises(DatasetError, match=message):
        read_meta(shards)


def test_a_meta_json_holding_a_list_is_one_line(shards):
    (shards / "meta.json").write_text("[1, 2]")
    with pytest.raises(DatasetError, match="does not hold gnngp shards"):
        read_meta(shards)


def test_a_cols_file_naming_a_row_past_its_source_block_is_one_line(shards, tmp_path):
    from gnngp_cli.backends.rowblocks.root_files import block_path
    from gnngp_cli.backends.rowblocks.sharded_graph import _block_product

    cols = np.load(block_dir(shards, 0) / "cols.npy")
    cols[0] = 10**6
    np.save(block_dir(shards, 0) / "cols.npy", cols)
    rewrite(shards, lambda raw: raw["digests"].update({"block-000000/cols.npy": sha256(block_dir(shards, 0) / "cols.npy")}))
    sources = tmp_path / "q"
    sources.mkdir()
    for b in range(3):
        np.save(block_path(str(sources), b), np.ones((ROWS, 2)))
    with pytest.raises(DatasetError, match=r"cols.npy names column 1000000 of source block 0, which has 100 rows"):
        _block_product(str(shards), 0, "sym", ROWS, 2, np.float64, str(sources))


def test_a_stop_while_a_dask_job_opens_removes_its_roots_folder(shards, tmp_path, monkeypatch):
    """The issue's hang ended in SIGTERM with ``roots/run-*`` left: a stop raised after the graph
    was read (building its collections) skipped the clean-up."""
    from gnngp_cli.backends.rowblocks.dask_backend import DaskBackend, dataset_source
    from gnngp_cli.backends.rowblocks.sharded_graph import ShardedGraph
    from gnngp_cli.config import parse

    def stopped(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(ShardedGraph, "labels", stopped)
    roots = tmp_path / "roots"
    cfg = compose(["dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp_x", "compute=dask", f"compute.shards={shards}",
                   f"compute.roots_dir={roots}", f"data.root={tmp_path / 'cache'}"])
    rewrite(shards, lambda raw: raw.update(source=dataset_source(parse(cfg))))   # written from this job's settings
    with pytest.raises(KeyboardInterrupt):
        DaskBackend(cfg, cluster=False).__enter__()
    assert not [p for p in roots.iterdir() if p.name.startswith(("run-", ".run-"))]


@pytest.mark.parametrize("args, message", [
    (("run", "="), "gnngp: error: "),
    (("verify", "verify.widths=[1000000,2000000]"), "gnngp: error: verify.widths: a network of width 2,000,000 .* use widths up to"),
])
def test_inputs_that_once_gave_tracebacks_are_one_line(tmp_path, args, message):
    import re

    out = in_process(*args, f"hydra.run.dir={tmp_path / 'run'}")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1 and re.match(message, lines[0]), out.stderr


def test_the_warnings_stored_with_cached_shards_are_said_on_every_run_that_reads_them(tmp_path, capsys):
    """A custom graph whose class ids are {1, 2} is renumbered with a warning when it is loaded and
    partitioned; a later run reads the cached shards without loading it and says the warning
    again, once (it was kept for the rows only). Shards given with compute.shards say it too."""
    from gnngp_cli.backends.rowblocks.dask_backend import sharded_graph
    from gnngp_cli.data import DataStore

    graph = write_ring(tmp_path / "graph", np.arange(40) % 2 + 1)
    cfg = compose(["dataset=custom", f"dataset.path={graph}", "kernel=gcngp_x", "compute=dask", f"data.root={tmp_path / 'cache'}"])
    said = "has class ids 1..2, not 0..1"
    for run in range(3):   # partitioned, then cached twice
        sharded = sharded_graph(cfg, DataStore.of(cfg.data))
        err = capsys.readouterr().err
        assert err.count(said) == 1, (run, err)
        assert len(sharded.meta.warnings) == 1   # and kept for the rows
    root = sharded.root
    given = compose(["dataset=custom", f"dataset.path={graph}", "kernel=gcngp_x", "compute=dask", f"compute.shards={root}",
                     f"data.root={tmp_path / 'cache'}"])
    sharded_graph(given, DataStore.of(given.data))
    assert capsys.readouterr().err.count(said) == 1


def test_shards_of_files_that_changed_since_are_partitioned_again_or_refused(tmp_path, caplog):
    """A trial: the cached shards of a custom graph were keyed by its settings alone, so a run
    after its labels file changed read the old graph (the same accuracy, exit 0; locally another).
    The shards record the files they were written from; cached ones of files that changed since
    are written again with a warning, and shards given with compute.shards are refused in one
    line. A file copied again with the same bytes (a new modification time) changes nothing."""
    import os
    from gnngp_cli.backends.rowblocks.dask_backend import sharded_graph, stale_problem
    from gnngp_cli.data import DataStore
    from gnngp_cli.data.shards import load_part

    n = 40
    graph = write_ring(tmp_path / "graph", np.arange(n) % 2)
    cfg = compose(["dataset=custom", f"dataset.path={graph}", "kernel=gcngp_x", "compute=dask", f"data.root={tmp_path / 'cache'}"])
    first = sharded_graph(cfg, DataStore.of(cfg.data))
    assert {Path(p).name for p, *_ in first.meta.inputs} == {"edges.csv", "features.npy", "labels.npy", "graph"}   # its files, and the folder
    assert load_part(first.root, 0, "y").tolist() == (np.arange(n) % 2).tolist()
    labels = (graph / "labels.npy").read_bytes()
    (graph / "labels.npy").unlink()
    (graph / "labels.npy").write_bytes(labels)   # the same bytes, a new modification time
    os.utime(graph / "labels.npy", ns=(1, 1))
    with caplog.at_level("WARNING", logger="gnngp"):
        again = sharded_graph(cfg, DataStore.of(cfg.data))
    assert "hold the graph of other files" not in caplog.text and again.root == first.root
    np.save(graph / "labels.npy", 1 - np.arange(n) % 2)   # another graph
    with caplog.at_level("WARNING", logger="gnngp"):
        fresh = sharded_graph(cfg, DataStore.of(cfg.data))
    assert f"hold the graph of other files ({graph / 'labels.npy'} changed since they were written from it)" in caplog.text
    assert load_part(fresh.root, 0, "y").tolist() == (1 - np.arange(n) % 2).tolist()
    assert sharded_graph(cfg, DataStore.of(cfg.data)).meta.inputs == fresh.meta.inputs   # written again: reused from now on
    given = compose(["dataset=custom", f"dataset.path={graph}", "kernel=gcngp_x", "compute=dask", f"compute.shards={fresh.root}",
                     f"data.root={tmp_path / 'cache'}"])
    np.save(graph / "labels.npy", np.zeros(n, dtype=np.int64) + np.arange(n) % 2)
    np.save(graph / "features.npy", np.ones((n, 3)))
    with pytest.raises(DatasetError, match=r"compute.shards=.* holds the graph of other files: .*(features|labels).npy and 1 more changed "
                                           r"since they were written from it; write the shards again with gnngp partition"):
        sharded_graph(given, DataStore.of(given.data))
    unverified = compose(["dataset=custom", f"dataset.path={graph}", "kernel=gcngp_x", "compute=dask", f"compute.shards={fresh.root}",
                          f"data.root={tmp_path / 'cache'}", "data.verify=false"])
    assert sharded_graph(unverified, DataStore.of(unverified.data)).root == fresh.root   # as they are, when asked
    # a trial of the fix: features.npy replaced by a features.npz, and masks added, read the old graph (only recorded files were compared)
    latest = sharded_graph(cfg, DataStore.of(cfg.data))
    (graph / "features.npy").unlink()
    np.savez(graph / "features.npz", np.zeros((n, 3)))
    assert stale_problem(latest.meta).endswith("features.npy and 1 more changed since they were written from it")   # and the folder's list
    renewed = sharded_graph(cfg, DataStore.of(cfg.data))
    for name in ("train_mask", "val_mask", "test_mask"):
        np.save(graph / f"{name}.npy", np.arange(n) % 3 == ["train_mask", "val_mask", "test_mask"].index(name))
    assert stale_problem(renewed.meta).endswith("graph (its files) changed since they were written from it")
