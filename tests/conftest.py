"""Shared fixtures: the offline dataset mirror (read-only) and a writable cache."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mirror_dir() -> Path | None:
    for candidate in (os.environ.get("GNNGP_DATA_MIRROR"), ROOT.parent / "shared" / "datasets"):
        if candidate and Path(candidate, "Cora", "raw").is_dir():
            return Path(candidate)
    return None


if os.environ.get("PYTEST_XDIST_WORKER"):   # one of several test processes (pytest -n): a thread each, not one per core each
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def mirror() -> Path:
    path = mirror_dir()
    if path is None:
        pytest.skip("no dataset mirror: set GNNGP_DATA_MIRROR to a folder with Cora/raw, ...")
    return path


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    env = os.environ.get("GNNGP_DATA_ROOT")
    return Path(env) if env else tmp_path_factory.mktemp("gnngp-cache")


@pytest.fixture
def data_overrides(mirror, cache) -> list[str]:
    return [f"data.mirror={mirror}", f"data.root={cache}"]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Tests never reach the network: a download attempt fails at once, as offline."""
    from gnngp_cli.data import store

    def offline(url, dst, timeout_s):
        raise OSError(f"network disabled in tests ({url})")

    monkeypatch.setattr(store, "_download", offline)
