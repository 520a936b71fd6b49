"""compute=dask's defaults (issue 49): row blocks sized from the workers' memory
(``partition.rows=auto``), a LocalCluster worker per usable core (``compute.workers=auto``), the
dashboard line once, and workers that exit without being killed at the end of a run."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time

import pytest

from gnngp_cli.api import compose, run
from gnngp_cli.backends.rowblocks import cluster
from gnngp_cli.errors import ConfigError, ResourceError
from helpers import gnngp

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

# 3,000 csbm nodes (32 features), 64 landmarks, 2 layers, float32: a row of a task is
# (64 + 2 + 1) x 4 bytes x 6 blocks = 1,608 bytes; half of a 5 MB worker holds 1,554 rows.
SMALL = ["kernel=gcngp_x", "dataset.num_nodes=3000", "landmarks.count=64"]
THREADS = ["compute=dask", "compute.processes=false", "compute.workers=2", "compute.dashboard=:0"]
# Threads of this process: the workers' memory monitor would measure the whole test process
# against their tiny limit and pause them; the limits still size the blocks.
NO_MONITOR = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
              "distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}


@pytest.fixture(autouse=True)
def on_the_cpu(monkeypatch):
    monkeypatch.setenv("GNNGP_DEVICE", "cpu")


def test_auto_rows_are_the_largest_block_that_fits_a_workers_memory_and_equal_local(cache, tmp_path):
    """A 5 MB worker takes blocks of 1,500 nodes (1,554 rounded down to two digits); the old
    default of 100,000 (here the whole graph of 3,000) was refused. The result is compute=local's."""
    assert compose(SMALL).partition.rows == "auto"
    local = run([*SMALL, f"data.root={cache}"])[0]
    with dask.config.set(NO_MONITOR):
        rows = run([*SMALL, *THREADS, "compute.memory_limit=5MB", f"data.root={cache}", f"compute.roots_dir={tmp_path}"])
    row = rows[0]
    assert row["status"] == "ok" and json.loads(row["extra"])["row_block"] == 1500
    assert (row["test"], row["val"], row["nugget"]) == pytest.approx((local["test"], local["val"], local["nugget"]), rel=1e-4)


def test_an_explicit_row_block_too_large_is_refused_in_one_line_naming_the_rows_that_fit(cache):
    with pytest.raises(ResourceError) as refused, dask.config.set(NO_MONITOR):
        run([*SMALL, *THREADS, "compute.memory_limit=5MB", "partition.rows=3000", f"data.root={cache}"])
    text = str(refused.value)
    assert "\n" not in text
    assert text.startswith("one row block of 3000 nodes needs about 4.6 MiB of worker memory, more than the half of a worker's 4.8 MiB")
    assert "GiB" not in text   # 5MB was "0.00 GiB" three times
    assert "use more, smaller row blocks (partition.rows=1500 or auto, or gnngp partition ... partition.rows=1500)" in text


def test_auto_rows_refuse_in_one_line_only_where_no_block_fits(cache):
    with pytest.raises(ResourceError) as refused, dask.config.set(NO_MONITOR):
        run([*SMALL, *THREADS, "compute.memory_limit=1MB", f"data.root={cache}"])
    text = str(refused.value)
    assert "\n" not in text
    assert text.startswith("no row block of 1,000 nodes or more fits a worker's 976.6 KiB")
    assert "use a larger compute.memory_limit (at least 3.4 MiB a worker) or fewer landmarks" in text and "GiB" not in text


@pytest.mark.parametrize("value", ["0", "many", "true"])
def test_counts_that_are_not_auto_or_at_least_one_are_one_line(value):
    with pytest.raises(ConfigError, match=r"^(compute.workers=\S+ (must be at least 1|is not a count; use a whole number or auto))$"):
        run(["kernel=gcngp_x", "compute=dask", f"compute.workers={value}"])


def test_default_workers_are_the_usable_cores():
    c = compose(["kernel=gcngp_x", "compute=dask"]).compute
    assert c.workers == "auto"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert cluster.usable_cores() == cores and cluster.worker_count(c) == cores
    assert cluster.worker_count(compose(["kernel=gcngp_x", "compute=dask", "compute.workers=3"]).compute) == 3   # a number is honoured
    assert cluster.worker_count(compose(["kernel=gcngp_x", "compute=slurm"]).compute) == 1


def test_a_dask_run_starts_a_worker_per_core_by_default(cache, tmp_path):
    rows = run([*SMALL, "compute=dask", "compute.processes=false", "compute.dashboard=:0", f"data.root={cache}",
                f"compute.roots_dir={tmp_path}"])
    assert rows[0]["status"] == "ok" and rows[0]["workers"] == len(os.sched_getaffinity(0))


class SlowExit(distributed.WorkerPlugin):
    """A worker that takes 4.5 s to close (a worker freeing much memory on a loaded machine)."""

    name = "slow-exit"

    async def teardown(self, worker):
        await asyncio.sleep(4.5)   # past the 4 s that cluster.close() alone gives a worker


def test_a_worker_slow_to_exit_is_not_killed(caplog):
    """``cluster.close()`` alone gave each worker 4 s, then killed it: "Worker process still
    alive after 4.0 seconds, killing" (one per worker at every exit of the 10^6-node run)."""
    c = compose(["kernel=gcngp_x", "compute=dask", "compute.workers=1", "compute.dashboard=:0"]).compute
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="distributed"):
        with cluster.dask_client(c) as client:
            client.register_plugin(SlowExit())
    assert "still alive" not in caplog.text and "killing" not in caplog.text
    assert time.perf_counter() - start < 60


def test_a_dask_run_prints_the_dashboard_once_and_kills_no_worker(tmp_path, cache):
    out = gnngp("run", *SMALL, "compute=dask", "compute.workers=2", "compute.dashboard=:0", f"data.root={cache}",
                f"compute.roots_dir={tmp_path / 'roots'}", f"hydra.run.dir={tmp_path / 'run'}")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert text.count("Dask dashboard: http") == 1
    assert "still alive" not in text and "killing" not in text


def test_a_row_block_is_the_same_task_whether_computed_whole_or_through_a_gather(tmp_path):
    """The scheduler warned "Detected different `run_spec`" in a CI run: Dask's linear fusion
    renames a fused chain and leaves each old key as an alias of it, and which chain it fuses
    depends on the keys a compute asks for, so one key named two tasks. With the client's
    settings nothing is renamed: a key shared by two graphs is the same task in both."""
    import numpy as np
    import torch
    from dask._task_spec import Alias
    from dask.array.optimization import optimize
    from dask.core import flatten
    from torch_geometric.data import Data

    from gnngp_cli.backends.rowblocks.sharded_graph import ShardedGraph
    from gnngp_cli.data.shards import write_data

    n = 30
    data = Data(x=torch.randn(n, 4), y=torch.zeros(n, dtype=torch.long), edge_index=torch.tensor([[0, 1], [1, 0]]),
                train_mask=torch.ones(n, dtype=torch.bool), val_mask=torch.zeros(n, dtype=torch.bool), test_mask=torch.zeros(n, dtype=torch.bool))
    data.task, data.num_classes = "classification", 1
    graph = ShardedGraph(tmp_path / "shards", write_data(data, tmp_path / "shards", 10, "toy"))

    def renamed(array) -> set:
        """The keys of ``array``'s optimised graph that its own graph does not have (fused chains'
        new names), and those that became an alias of one."""
        own = dict(array.__dask_graph__())
        done = dict(optimize(array.__dask_graph__(), list(flatten(array.__dask_keys__()))))
        return {k for k, task in done.items() if k not in own or (isinstance(task, Alias) and not isinstance(own[k], Alias))}

    def graphs():
        x = graph.features(np.float32)
        return x, x[np.array([3, 17])], x.astype(np.float64), graph.labels()[graph.masks() == 1]

    assert any(renamed(a) for a in graphs()), "Dask no longer renames what it fuses: this test no longer tests it"
    with dask.config.set(cluster.SAME_KEY_SAME_TASK):
        assert not any(renamed(a) for a in graphs())


def test_compute_dask_without_the_dask_extra_is_one_line(monkeypatch):
    """A package installed without its dask extra: compute=dask names what to install, before any
    work, where it was ModuleNotFoundError's traceback."""
    import importlib.util

    from gnngp_cli.backends import backend_for
    from gnngp_cli.config import parse

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("dask", "distributed") else real(name, *a))
    with pytest.raises(ConfigError, match=r"^compute=dask needs dask and distributed, which are not installed; install gnngp with the dask extra"):
        backend_for(parse(compose(["dataset=csbm", "kernel=gcngp_x", "compute=dask"])))


def test_only_the_record_of_distributeds_unset_future_race_is_dropped():
    """distributed's ``sync``: a first stop (KeyboardInterrupt) that lands before its coroutine has
    made its future makes its cancel raise NameError on the loop's thread, which tornado logs with a
    traceback (a CI run's second-signal test saw it once); that record alone is dropped."""
    import logging
    import sys

    from gnngp_cli.backends.rowblocks.cluster import _unset_future_race

    def record(error):
        try:
            raise error
        except Exception:
            info = sys.exc_info()
        return logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "Exception in callback", None, info)

    race = NameError("cannot access free variable 'future' where it is not associated with a value in enclosing scope")
    assert not _unset_future_race(record(race))
    assert _unset_future_race(record(NameError("name 'x' is not defined")))
    assert _unset_future_race(record(ValueError("'future'")))
    assert _unset_future_race(logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "no error", None, None))
