"""Shared test helpers: the ``gnngp`` command in a fresh process (:func:`gnngp`, the end-to-end
tests) or in this one (:func:`in_process`, everything else: no torch import per call), and small
graphs written in the custom format."""
import contextlib
import io
import os
import subprocess
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

GNNGP = [sys.executable, "-m", "gnngp_cli.cli"]   # the installed command's code, as ``gnngp`` runs it


def gnngp(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    """``gnngp ARGS`` in a fresh process, as a user runs it (``env``: variables added to this
    process's). Each call pays Python's start and the torch import (2-4 s): for the end-to-end
    tests of the command itself; :func:`in_process` runs the same ``main`` without them."""
    return subprocess.run([*GNNGP, *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)


def gnngp_popen(*args, cwd=None, env=None, **kwargs) -> subprocess.Popen:
    """``gnngp ARGS`` started in a fresh process (pipes for stdout and stderr), left running."""
    return subprocess.Popen([*GNNGP, *args], cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kwargs)


@contextlib.contextmanager
def _environment(env=None, cwd=None):
    """``env`` added to ``os.environ`` and ``cwd`` as the working folder, both restored after."""
    if env is None and cwd is None:
        yield
        return
    saved, here = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)


def write_graph(folder: Path, n: int = 60, labels=None, features=None, masks=None, seed: int = 0) -> Path:
    """``edges.csv``, ``features.npy``, ``labels.npy`` and optionally the three masks."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, n, (3 * n, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]   # no self-loop (a listed one is left out with a warning)
    (folder / "edges.csv").write_text("".join(f"{a},{b}\n" for a, b in pairs))
    np.save(folder / "features.npy", rng.normal(size=(n, 4)) if features is None else features)
    np.save(folder / "labels.npy", rng.normal(size=n) if labels is None else labels)
    for name, mask in (masks or {}).items():
        np.save(folder / f"{name}.npy", mask)
    return folder


def write_ring(folder: Path, labels, features: int = 3) -> Path:
    """A custom graph of ``len(labels)`` nodes on a ring (``edges.csv``), normal features and the labels given."""
    folder.mkdir(parents=True, exist_ok=True)
    n = len(labels)
    np.save(folder / "features.npy", np.random.default_rng(0).normal(size=(n, features)))
    np.save(folder / "labels.npy", np.asarray(labels))
    (folder / "edges.csv").write_text("".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    return folder


def split_masks(n: int, train=(0, 30), val=(30, 45), test=(45, 60)) -> dict:
    out = {}
    for name, (a, b) in (("train_mask", train), ("val_mask", val), ("test_mask", test)):
        mask = np.zeros(n, bool)
        mask[a:b] = True
        out[name] = mask
    return out


def in_process(*args, env=None, cwd=None) -> SimpleNamespace:
    """The ``gnngp`` command's ``main`` in this process (the installed command's code, without a
    Python start-up per call): ``returncode``, ``stdout``, ``stderr``, as :func:`gnngp` gives them
    (``env``: variables added for the call; ``cwd``: its working folder). An exception that escapes
    (a traceback a user would see) fails the test."""
    from gnngp_cli.cli.main import main

    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    with _environment(env, cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(list(args))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
        except BaseException:  # noqa: BLE001 - what a user would see as a traceback
            raise AssertionError(f"a traceback escaped gnngp {' '.join(args)}: {traceback.format_exc()}") from None
    return SimpleNamespace(returncode=code, stdout=stdout.getvalue(), stderr=stderr.getvalue())


def run(tmp_path: Path, *args, run_dir: Path | None = None):
    """``gnngp run`` (:func:`in_process`); returns (exit status, stderr, last row or None, error lines)."""
    run_dir = run_dir or tmp_path / "run"
    out = in_process("run", f"hydra.run.dir={run_dir}", f"data.root={tmp_path / 'cache'}", *args)
    results = run_dir / "results.csv"
    row = pd.read_csv(results).iloc[-1] if results.is_file() else None
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, out.stderr, row, errors


def local_and_dask_rows(overrides: list[str]) -> tuple[dict, dict]:
    """The first run's row of a GP job with ``overrides``, computed locally and on an in-process
    Dask cluster of 2 workers (``compute=dask``)."""
    import distributed

    from gnngp_cli.api import compose
    from gnngp_cli.backends.local import LocalBackend
    from gnngp_cli.backends.rowblocks.dask_backend import DaskBackend
    from gnngp_cli.job.gp_job import GPJob

    cfg = compose([o for o in overrides if not o.startswith("partition.")])   # row blocks are Dask's (refused on a local run)
    with LocalBackend(cfg) as backend:
        local = GPJob(cfg, backend).run(0).row
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        cfg = compose([*overrides, "compute=dask"])
        with DaskBackend(cfg, client=client) as backend:
            dask = GPJob(cfg, backend).run(0).row
    return local, dask
