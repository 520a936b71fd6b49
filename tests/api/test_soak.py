"""A day in a notebook, shortened: ``NodeGP`` fitted and predicted many times in one process
(exact and low rank), and ``gnngp run`` jobs one after another in one process, grow neither
resident memory (after fit N within 5% of after fit N/10) nor open file descriptors, threads or
the temporary folder's entries. The code is ``scripts/soak_nodegp.py``'s, whose full run (200
fits of each kernel on Cora, 50 jobs) is measured by hand (docs/python-api.md)."""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def soak_module():
    spec = importlib.util.spec_from_file_location("soak_nodegp", ROOT / "scripts" / "soak_nodegp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def private_tempdir(tmp_path, monkeypatch):
    """A temporary folder of this test's own: the entries counted are what the fits leave."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


@pytest.mark.paper  # many fits in one process: runs in CI with -m paper
def test_many_fits_and_jobs_in_one_process_grow_no_resource(tmp_path, private_tempdir):
    from gnngp_cli import load_dataset

    soak = soak_module()
    data = load_dataset("csbm", num_nodes=300)
    series = [soak.soak_fits(data, [kernel], 6, landmarks={"count": 16} if kernel.endswith("_x") else {}) for kernel in ("gcngp", "gcngp_x")]
    series.append(soak.soak_jobs(["dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp_x", f"data.root={tmp_path / 'cache'}"], 4,
                                 tmp_path / "jobs"))
    for rows in series:
        held, line = soak.held(rows)
        assert held, line
        assert all(row["score"] == row["score"] for row in rows if row["what"] == "fit"), line   # every fit scored
