"""The check of a report against the paper: the deterministic GP cells that differ from the
paper's value beyond a tolerance, unless a known deviation explains them (the cell within the
tolerance of the value the deviation documents, its ``ours``)."""
from __future__ import annotations

import math
from typing import Iterable

from .reading import known_deviations
from .tables import Cell, Table


def checked(cell: Cell, exclude: set[str]) -> bool:
    """Whether the paper check covers ``cell``: a deterministic GP cell with a paper value, not
    a stand-in, on a dataset not excluded (``--exclude``)."""
    return cell.deterministic and not math.isnan(cell.paper) and not cell.stand_in and cell.dataset not in exclude


def check_paper(tables: list[Table], tolerance: float, exclude: Iterable[str] = ()) -> tuple[list[Cell], list[tuple[Cell, str]], list[Cell], list[Cell]]:
    """The checked cells (:func:`checked`) that differ from the paper by more than ``tolerance`` at the paper's 4-decimal precision:
    (unexplained, known with their explanation, failed: an error row and no result, not run: no row at all)."""
    known = known_deviations()
    exclude = set(exclude)
    unexplained, explained, failed, not_run = [], [], [], []
    for table in tables:
        for cell in table.cells.values():
            if not checked(cell, exclude):
                continue
            if not cell.n:
                (failed if cell.error else not_run).append(cell)
                continue
            if round(abs(cell.diff), 4) <= tolerance:
                continue
            match = known[(known["table"] == cell.table) & (known["row"] == cell.row) & (known["column"] == cell.column)]
            # a known deviation explains its documented value only: a cell that moved from it is unexplained, as any other
            if len(match) and round(abs(cell.mean - float(match["ours"].iloc[0])), 4) <= tolerance:
                explained.append((cell, str(match["explanation"].iloc[0])))
            else:
                unexplained.append(cell)
    return unexplained, explained, failed, not_run
