"""``gnngp report``: tables and figures of the paper from result CSVs, ours beside theirs.

Reads every ``results.csv`` and ``summary.csv`` under the given folders, keeps the latest row
of each rerun (same dataset, stand-in, method, depth, landmark fraction and seed), and writes
each paper table an experiment config lays out (``table4.{md,csv}``, ``table5.{md,csv}``),
``figure1..4.png``, ``correlation_map.png`` and a ``report.md`` that links them and lists what
is missing. Partial results, missing columns and error rows are expected and never fatal.

- :mod:`.layouts`: the tables and figures as the experiment configs lay them out;
- :mod:`.reading`: result rows read back, the paper's values;
- :mod:`.settings`: which rows were run with a preset's own settings;
- :mod:`.tables`, :mod:`.figures`: the tables and the figures;
- :mod:`.check`: the check against the paper.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from . import layouts
from .check import check_paper, checked
from .figures import FIGURE3_NOTE, correlation_map, figure1, figure2, figure3, figure4
from .reading import paper_values, read_results
from .settings import left_out
from .tables import build

__all__ = ["FIGURE3_NOTE", "check_paper", "paper_values", "read_results", "write_report"]


def write_report(folders: list[Path], out: Path, tolerance: Optional[float] = None, exclude: Iterable[str] = ()) -> int:
    """Write every table and figure to ``out``; with ``tolerance``, return 1 when a checked cell
    (a deterministic GP cell, not a stand-in, its dataset not in ``exclude``) deviates from the
    paper unexplained, or has no result (missing, or only an error row)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = read_results(folders)
    paper = paper_values()
    tables = [build(exp, rows, paper) for exp in layouts.tables()]
    for table in tables:
        table.frame().to_csv(out / f"{table.name}.csv", index=False)
        (out / f"{table.name}.md").write_text(table.markdown())
    figures = {"figure1": figure1, "figure2": figure2, "figure3": figure3, "figure4": figure4}
    skipped = {}
    for name, draw in figures.items():
        try:
            reason = draw(rows, out / f"{name}.png")
        except (ValueError, KeyError, TypeError) as err:  # a malformed column never kills the report
            reason = f"could not be drawn ({type(err).__name__}: {err})"
        if reason:
            skipped[name] = reason
            (out / f"{name}.png").unlink(missing_ok=True)
    correlation_map(out / "correlation_map.png")
    lines = ["# gnngp report", "", f"Results read from: {', '.join(str(f) for f in folders)} ({int((rows['status'] == 'ok').sum())} result rows, {int((rows['status'] != 'ok').sum())} error rows).", ""]
    lines += ["## Tables", ""] + [f"- [{t.title.split(':')[0]}]({t.name}.md) ([csv]({t.name}.csv))" for t in tables] + ["", "## Figures", ""]
    notes = {"figure3": FIGURE3_NOTE}
    for name in figures:
        lines.append(f"- {name}: " + (f"not drawn: {skipped[name]}" if name in skipped else f"![{name}]({name}.png)"))
        if name in notes and name not in skipped:
            lines.append(f"  Note: {notes[name]}")
    lines += ["- correlation map (appendix): ![correlation map](correlation_map.png)", "", "## Missing and stand-ins", ""]
    for table in tables:
        missing = [c for c in table.cells.values() if c.n == 0 and c.paper_note != "OOM"]
        if missing:
            lines.append(f"- {table.name}: no data for " + "; ".join(f"{c.row} / {c.column}" + (f" (error: {c.error[:120]})" if c.error else "") for c in missing))
        stand_ins = [c for c in table.cells.values() if c.stand_in and c.n]
        if stand_ins:
            lines.append(f"- {table.name}: stand-ins for " + "; ".join(f"{c.row} / {c.column}: {c.stand_in}" for c in stand_ins))
        single = [c for c in table.cells.values() if c.n == 1 and c.gnn]
        if single:
            lines.append(f"- {table.name}: GNN cells from a single seed (the paper reports 5): " + "; ".join(f"{c.row} / {c.column}" for c in single))
    apart = left_out(rows, {(c.dataset, c.method) for table in tables for c in table.cells.values()})
    if apart:
        lines += ["", "## Rows left out of the tables (not the preset's settings)", ""]
        lines += ["Only rows run with a preset's own settings fill its cells; these were run otherwise:", ""] + apart
    status = 0
    if tolerance is not None:
        exclude = sorted(set(exclude))
        unexplained, explained, absent = check_paper(tables, tolerance, exclude)
        lines += ["", f"## Check against the paper (deterministic GP cells, tolerance {tolerance}"
                  + (f"; excluded: {', '.join(exclude)}" if exclude else "") + ")", ""]
        lines += [f"- FAIL {c.table} {c.row} / {c.column}: ours {c.mean:.4f}, paper {c.paper:.4f} ({c.diff:+.4f})" for c in unexplained]
        lines += [f"- FAIL {c.table} {c.row} / {c.column}: " + (f"error row: {c.error[:160]}" if c.error else "no result")
                  for c in absent]
        lines += [f"- known deviation {c.table} {c.row} / {c.column}: ours {c.mean:.4f}, paper {c.paper:.4f} ({c.diff:+.4f}). {why}" for c, why in explained]
        count = sum(1 for t in tables for c in t.cells.values() if checked(c, set(exclude)))
        lines.append(f"- {count} deterministic cells checked, {len(unexplained)} unexplained deviations, {len(absent)} without a result, {len(explained)} known.")
        status = 1 if unexplained or absent else 0
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return status
