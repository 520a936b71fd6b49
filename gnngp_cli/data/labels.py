"""Class labels as gnngp reads them, for every entry point (``dataset=custom`` and the Python
API's own graphs): class ids are 0..C-1, and whole-number floats are a question, not a guess.

A label file or ``y`` may name its classes by any non-negative whole numbers. The task is set by
the classes that are there: ``{1, 2}`` is two classes (ROC-AUC), not three with an empty class 0
(accuracy); ``{0, 1, 7}`` is three, not eight (NLL and ECE over three columns); a label ``10^6``
is one class, not a one-hot target a million columns wide.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import DatasetError

CLASS_LIKE_VALUES = 100   # floating-point targets with at most this many distinct whole values look like class ids


def class_ids(labels: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray, Optional[str]]:
    """``labels`` (non-negative whole numbers, one per node) as class ids ``0..C-1``, and the
    ``C`` distinct ids in sorted order (class ``c`` is ``distinct[c]`` as given). Ids that already
    are ``0..C-1`` are kept; any others are renumbered, and the third value is the note that says
    how (``None`` when kept),
    for the caller to warn with and to keep in the result row's warnings. Sorting is
    ``O(n log n)`` in the node count; nothing is allocated per class id, however large."""
    distinct, inverse = np.unique(labels, return_inverse=True)   # before any cast: 2^64 - 1 would wrap to -1
    ids = inverse.reshape(-1).astype(np.int64)
    count = int(distinct.size)
    if count == 0 or (distinct[0] == 0 and distinct[-1] == count - 1):
        return ids, distinct, None
    shown = ", ".join(f"{label_text(old)}->{new}" for new, old in enumerate(distinct[:6])) + (", ..." if count > 6 else "")
    note = (f"{where} has class ids {label_text(distinct[0])}..{label_text(distinct[-1])}, not 0..{count - 1}; treating its {count} distinct ids "
            f"as classes 0..{count - 1} in sorted order ({shown})")
    return ids, distinct, note


def published_class_count(labels, where: str, name: str, published: int) -> int:
    """The class count of a named dataset's labels (non-negative class ids), which must lie
    within its ``published`` classes: a raw file with a larger id (an edited or another file;
    Reddit's has no published digest) made a one-hot target as wide as that id (a label of 10^6 on
    2,000 nodes allocated 23 GB before the kernel's estimate)."""
    if len(labels) == 0:
        return 0
    top, low = int(labels.max()), int(labels.min())
    if low < 0 or top >= published:
        wrong = low if low < 0 else top
        raise DatasetError(f"{where} holds the class id {wrong}, and {name} has {published} classes (0..{published - 1}); the file is not "
                           f"{name}'s: delete it and fetch it again")
    return top + 1


def whole_number_floats(labels: np.ndarray) -> bool:
    """Floating-point labels whose finite values are all whole numbers, few distinct ones (NaN
    beside them, for nodes without a label, or not): class ids saved as floats, most likely,
    which gnngp would read as regression targets."""
    if not np.issubdtype(labels.dtype, np.floating) or labels.size == 0:
        return False
    finite = labels[np.isfinite(labels)]   # NaN: a node without a label (a class id saved as a float beside it is still one)
    return finite.size > 0 and bool((finite == np.round(finite)).all()) and np.unique(finite).size <= CLASS_LIKE_VALUES


def label_text(value) -> str:
    """A label as a message shows it: a whole-number float as the integer it is (``2.0`` -> ``2``),
    any other float as ``%g`` (``1.5``, ``inf``), anything else as ``str``."""
    if isinstance(value, (float, np.floating)):
        return f"{value:.0f}" if np.isfinite(value) and value == int(value) else f"{value:g}"
    return str(value)


def untrained_classes(y, train_mask, scored_mask) -> list[int]:
    """The class ids (of ``y``, a tensor of class ids) that scored nodes hold and no training node
    does: a class the GP or a GNN is never shown is never predicted, and its nodes are all errors."""
    import torch

    trained = set(torch.unique(y[train_mask]).tolist())
    return sorted(set(torch.unique(y[scored_mask]).tolist()) - trained)
