"""A restricted unpickler for the Planetoid raw files (``ind.<name>.{x,tx,allx,y,ty,ally,graph}``).

Those files are Python 2 pickles (read with ``encoding="latin1"``) of scipy CSR matrices, numpy
arrays and a ``defaultdict`` of adjacency lists. Only the globals those objects need may be
named by the pickle; any other global (``os.system``, ``builtins.eval``...) is refused before it
is resolved, so no code in a raw file ever runs.
"""
from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

from ..errors import DatasetError

# (module, name) as written in the pickle; numpy/scipy moved modules between versions
ALLOWED_GLOBALS = frozenset({
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),       # protocol 5 arrays (files re-saved by Python 3)
    ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"),                        # protocol 2 bytes written by Python 3
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("scipy.sparse.csr", "csr_matrix"),
    ("scipy.sparse._csr", "csr_matrix"),
    ("collections", "defaultdict"),
    ("__builtin__", "list"),
    ("builtins", "list"),
})


class UnsafePickle(DatasetError):
    """A raw pickle that names a global outside :data:`ALLOWED_GLOBALS`."""


class PlanetoidUnpickler(pickle.Unpickler):
    def __init__(self, file, path: Path):
        super().__init__(file, encoding="latin1")
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED_GLOBALS:
            raise UnsafePickle(
                f"raw file {self.path} names {module}.{name}, which a Planetoid file never holds (only numpy arrays, "
                f"scipy CSR matrices and adjacency lists); it was not loaded: delete it and fetch it again"
            )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*scipy.sparse.csr.*")
            warnings.filterwarnings("ignore", ".*numpy.core.*")
            return super().find_class(module, name)


def load_restricted(path: Path) -> Any:
    """Unpickle ``path`` admitting only numpy arrays, scipy CSR matrices and lists/dicts."""
    with open(path, "rb") as f:
        return PlanetoidUnpickler(f, path).load()
