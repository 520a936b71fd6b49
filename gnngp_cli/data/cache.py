"""The processed cache: a dataset's tensors built once from its verified raw files.

``<root>/<Name>/processed/gnngp.pt`` holds a plain dict ``{"format", "raw", "tensors"}``: the
sha256 of every raw file it was built from and a dict of tensors. It is read with
``torch.load(weights_only=True)`` only (no global may be named, so no code in it can run); a
file that fails that load, or was built from other raw files, is rebuilt from the raw files.
PyG's and OGB's own processed files (``data.pt``, ``pre_transform.pt``, ``geometric_data_processed.pt``)
are never read: their loaders fall back to ``weights_only=False``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Mapping

import torch

from .files import atomic_write

FORMAT = 1
PROCESSED = "processed/gnngp.pt"


def cached_tensors(folder: Path, raw_digests: Mapping[str, str], build: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The tensors cached in ``folder/processed/gnngp.pt`` if they were built from exactly
    ``raw_digests``, else ``build()`` (written to the cache when it is writable)."""
    path = folder / PROCESSED
    if path.is_file():
        try:
            stored = torch.load(path, map_location="cpu", weights_only=True)
            if _valid(stored) and stored["raw"] == dict(raw_digests):
                return stored["tensors"]
        except Exception as err:  # noqa: BLE001 - any failure means: do not trust it, rebuild
            print(f"gnngp: warning: processed file {path} could not be loaded safely ({type(err).__name__}: "
                  f"{str(err).splitlines()[0][:200] if str(err) else ''}); rebuilding it from the verified raw files", file=sys.stderr)
    tensors = build()
    try:
        atomic_write(path, lambda f: torch.save({"format": FORMAT, "raw": dict(raw_digests), "tensors": tensors}, f), binary=True)
    except OSError as err:  # a read-only cache still serves its raw files
        print(f"gnngp: warning: could not write the processed cache {path} ({err.strerror or err}); the dataset is rebuilt on every run", file=sys.stderr)
    return tensors


def _valid(stored: object) -> bool:
    return (
        isinstance(stored, dict) and stored.get("format") == FORMAT and isinstance(stored.get("raw"), dict)
        and isinstance(stored.get("tensors"), dict) and all(isinstance(v, torch.Tensor) for v in stored["tensors"].values())
    )
