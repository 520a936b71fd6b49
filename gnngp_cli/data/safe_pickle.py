"""A restricted unpickler for the Planetoid raw files (``ind.<name>.{x,tx,allx,y,ty,ally,graph}``).

Those files are Python 2 pickles (read with ``encoding="latin1"``) of scipy CSR matrices, numpy
arrays and a ``defaultdict`` of adjacency lists. Only the globals those objects need may be
named by the pickle; any other global (``os.system``, ``builtins.eval``...) is refused before it
is resolved, so no code in a raw file ever runs.

A CSR matrix is unpickled by setting its arrays as the file gives them, unchecked, and scipy's
C routines (``todense``) trust them: an index out of range writes outside the dense array (a
segfault, or worse). Its structure is therefore checked here, digest or not (``data.verify=false``),
and the matrix rebuilt by scipy's own constructor from the checked arrays.
"""
from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any, BinaryIO, Optional

import numpy as np

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


MAX_DENSE_ENTRIES = 10**9   # a Planetoid matrix densified: PubMed's allx has 9.1 * 10^6 entries


def load_restricted(path: Path, f: Optional[BinaryIO] = None) -> Any:
    """Unpickle ``path`` (or ``f``, the file already open, named ``path`` in messages) admitting
    only numpy arrays, scipy CSR matrices (structure checked) and lists/dicts."""
    if f is None:
        with open(path, "rb") as own:
            item = PlanetoidUnpickler(own, path).load()
    else:
        item = PlanetoidUnpickler(f, path).load()
    return checked_csr(item, path) if _is_csr(item) else item


def _is_csr(item: Any) -> bool:
    import scipy.sparse as sp

    return isinstance(item, sp.spmatrix) or isinstance(item, getattr(sp, "sparray", ()))


def checked_csr(matrix: Any, path: Path):
    """``matrix`` (an unpickled CSR matrix) rebuilt from its arrays once they form a valid CSR
    structure of a sane shape; else a one-line :class:`DatasetError` naming ``path``."""
    import scipy.sparse as sp

    state = vars(matrix)
    problem = _csr_problem(state.get("_shape"), state.get("indptr"), state.get("indices"), state.get("data"))
    if problem is not None:
        raise DatasetError(f"raw file {path} holds a sparse matrix whose structure is broken ({problem}); it was not read: "
                           "delete it and fetch it again")
    return sp.csr_matrix((state["data"], state["indices"], state["indptr"]), shape=tuple(int(d) for d in state["_shape"]))


def _csr_problem(shape: Any, indptr: Any, indices: Any, data: Any) -> Optional[str]:
    """What is wrong with these CSR arrays, or ``None``: a shape of two non-negative integers at
    most :data:`MAX_DENSE_ENTRIES` dense; ``indptr`` of ``rows + 1`` non-decreasing integers from
    0; ``indices`` and ``data`` 1-D of one length, at least ``indptr[-1]``; every column index in
    ``[0, cols)``; numeric data."""
    if not isinstance(shape, tuple) or len(shape) != 2 or not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
        return f"shape {shape!r} is not two non-negative integers"
    rows, cols = (int(d) for d in shape)
    if rows * cols > MAX_DENSE_ENTRIES:
        return f"shape {rows:,} x {cols:,} is over {MAX_DENSE_ENTRIES:,} entries dense"
    for name, array in (("indptr", indptr), ("indices", indices), ("data", data)):
        if not isinstance(array, np.ndarray) or array.ndim != 1:
            return f"{name} is not a 1-D array"
    if not (np.issubdtype(indptr.dtype, np.integer) and np.issubdtype(indices.dtype, np.integer)):
        return f"indptr ({indptr.dtype}) and indices ({indices.dtype}) must be integers"
    if not (np.issubdtype(data.dtype, np.number) or data.dtype == np.bool_) or np.issubdtype(data.dtype, np.complexfloating):
        return f"data holds {data.dtype} values, not real numbers"
    if indptr.size != rows + 1:
        return f"indptr has {indptr.size} entries for {rows} rows (needs {rows + 1})"
    if indptr[0] != 0 or (indptr.size > 1 and (np.diff(indptr) < 0).any()):
        return "indptr does not rise from 0"
    if indices.size != data.size or int(indptr[-1]) > indices.size:
        return f"indptr ends at {int(indptr[-1])} but there are {indices.size} indices and {data.size} values"
    used = indices[: int(indptr[-1])]
    if used.size and (int(used.min()) < 0 or int(used.max()) >= cols):
        return f"a column index lies outside [0, {cols}) (from {int(used.min())} to {int(used.max())})"
    return None
