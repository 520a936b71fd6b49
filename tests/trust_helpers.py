"""Small graphs written in the custom format, and the CLI as a user runs it (trust tests)."""
import os
import subprocess
import sys
from pathlib import Path

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


def run(tmp_path: Path, *args, run_dir: Path | None = None):
    """``gnngp run`` in a subprocess; returns (returncode, stderr, last row or None, error lines)."""
    run_dir = run_dir or tmp_path / "run"
    out = subprocess.run([*GNNGP, f"hydra.run.dir={run_dir}", f"data.root={tmp_path / 'cache'}", *args],
                         capture_output=True, text=True, timeout=600, env=os.environ)
    results = run_dir / "results.csv"
    row = pd.read_csv(results).iloc[-1] if results.is_file() else None
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, out.stderr, row, errors
