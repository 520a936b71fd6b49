"""What a result row must satisfy before it is reported as ``ok``.

A metric that is NaN or infinite is never a result: such a row becomes an error row that says
which metric and why (R^2 is undefined on constant targets; any metric is NaN when the
predictions are). Its values stay in the row for diagnosis.
"""
from __future__ import annotations

import math
from typing import Iterable


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def checked_rows(rows: Iterable[dict], validation: bool = True, test: bool = True) -> list[dict]:
    """``rows`` with every ``ok`` row whose validation or test metric is not finite turned into
    an error row with the reason. ``validation=False``: the job read no validation labels
    (``fit=mll``, which runs without them), so a NaN ``val`` is by design and only ``test`` is
    checked (:func:`~gnngp_cli.config.needs_validation`); ``test=False``: the graph has no test
    node (``NodeGP.fit`` without one, to predict), so a NaN ``test`` is by design."""
    splits = (("test",) if test else ()) + (("val",) if validation else ())
    out = []
    for row in rows:
        if row.get("status") == "ok":
            bad = [split for split in splits if not _finite(row.get(split))]
            if bad:
                metric = row.get("metric", "metric")
                why = ("R^2 is undefined when the targets of a split are constant, and NaN when the predictions are not finite"
                       if metric == "r2" else "ROC-AUC is undefined when a split's nodes hold one class only, and NaN when the predictions "
                       "are not finite" if metric == "roc_auc" else "the predictions are not finite")
                row = {**row, "status": "error",
                       "error": f"ResultError: the {' and '.join(bad)} {metric} is {', '.join(str(row.get(s)) for s in bad)}, not a number ({why}); this row is not a result"}
        out.append(row)
    return out
