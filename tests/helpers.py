"""Small graphs written in the custom format, and the CLI as a user runs it (trust tests)."""
import contextlib
import io
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

GNNGP = [sys.executable, "-m", "gnngp_cli.cli", "run"]


def write_graph(folder: Path, n: int = 60, labels=None, features=None, masks=None, seed: int = 0) -> Path:
    """``edges.csv``, ``features.npy``, ``labels.npy`` and optionally the three masks."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, n, (3 * n, 2))
    (folder / "edges.csv").write_text("".join(f"{a},{b}\n" for a, b in pairs))
    np.save(folder / "features.npy", rng.normal(size=(n, 4)) if features is None else features)
    np.save(folder / "labels.npy", rng.normal(size=n) if labels is None else labels)
    for name, mask in (masks or {}).items():
        np.save(folder / f"{name}.npy", mask)
    return folder


def split_masks(n: int, train=(0, 30), val=(30, 45), test=(45, 60)) -> dict:
    out = {}
    for name, (a, b) in (("train_mask", train), ("val_mask", val), ("test_mask", test)):
        mask = np.zeros(n, bool)
        mask[a:b] = True
        out[name] = mask
    return out


def in_process(*args) -> SimpleNamespace:
    """The ``gnngp`` command's ``main`` in this process (the installed command's code, without a
    Python start-up per call): ``returncode``, ``stdout``, ``stderr``. An exception that escapes
    (a traceback a user would see) fails the test."""
    from gnngp_cli.cli import main

    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
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
