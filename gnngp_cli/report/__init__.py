"""``gnngp report DIR...``: the user's own runs, and the paper's tables and figures, ours beside theirs.

Reads every ``results.csv`` and ``summary.csv`` under the given folders (only those), keeps the
latest row of each rerun (same dataset, stand-in, method, depth, landmark fraction, seed, split
and settings), and writes ``runs.{md,csv}`` (:mod:`.runs`: every run, grouped by the settings
that tell them apart), then, from the rows a paper preset ran with its own settings
(:func:`.settings.off_preset`), each paper table an experiment config lays out
(``table4.{md,csv}``, ``table5.{md,csv}``), ``figure1..4.png``, ``correlation_map.png``, ``learning_curves.png`` (:mod:`.curves`), ``active_learning.png`` (:mod:`.active`), and a
``report.md`` that holds the runs' tables and links the rest. Partial results, missing columns
and error rows are expected and never fatal.

- :mod:`.layouts`: the tables and figures as the experiment configs lay them out;
- :mod:`.reading`: result rows read back, the paper's values;
- :mod:`.settings`: which rows were run with a preset's own settings, and each row's group;
- :mod:`.runs`: the tables of the user's own runs;
- :mod:`.tables`, :mod:`.figures`: the tables and the figures;
- :mod:`.paper_check`: the check against the paper.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from . import layouts
from . import active
from . import curves as learning
from ..errors import ConfigError, DatasetError
from ..data.files import atomic_write
from ..results.writing import ResultsNotWritten
from .paper_check import check_paper, checked
from .figures import FIGURE3_NOTE, correlation_map, figure1, figure2, figure3, figure4
from .reading import paper_values, preset_runs, read_results, result_files
from .runs import frame as runs_frame
from .runs import own_runs
from .settings import left_out
from .tables import build
from .uncertainty import reliability
from .uncertainty import conformal_table
from .uncertainty import table as uncertainty_table

FIGURES = {"figure1": figure1, "figure2": figure2, "figure3": figure3, "figure4": figure4}
# the files of report.md's sections that rows may or may not make: an earlier report's are removed first
SECTION_FILES = ("correlation_map.png", "learning_curves.png", "active_learning.png", "uncertainty.md", "reliability.png", "conformal.md")
SHOWN = 12   # missing cells named in report.md (the table shows every one)
MEANING = ("One table per task: a line per dataset, method and group of settings, the mean +- std over its runs and splits; "
           "runs with different settings are never averaged together. Active-learning rows (a row per budget) are in their own "
           "section below.")

CURVE_MEANING = ("The rows that recorded the metric along training time: a GP with several inference.time values (the "
                 "infinitely wide network's mean after training for time t; with kernel.limit=ntk the trained network's limit) and a "
                 "GNN trained with gnn.regime=ntk (the finite network after t gradient steps at the same learning rate); the dashed "
                 "level is t = inf, kernel regression.")

ACTIVE_MEANING = ("The active runs (`active=<strategy>`): the test metric at each budget of labels bought from the pool (every "
                  "node but the test nodes), a line per strategy, the mean over seeds (band: one standard deviation); the macro-F1 "
                  "over every node averaged over the budgets is FeatProp's summary.")

UNCERTAINTY_MEANING = ("The runs that scored class probabilities (GP likelihoods, GNN uncertainty): test metric, calibration "
                      "(ECE with 15 bins, MCE, NLL, Brier; in-distribution test nodes) and AUROC of telling wrong predictions "
                      "(or a protocol's OOD nodes) apart by each score, mean +- std over the runs; regression runs: the mean "
                      "negative log predictive density of the test targets (NLPD) and the share inside their 95% intervals.")
CONFORMAL_MEANING = ("The runs with conformal prediction (`conformal=<score>`): the coverage of the prediction sets (regression: "
                     "intervals) on the test nodes, their mean size, the share of sets that are the true label alone, and the "
                     "conformal step's seconds; each the mean over the calibration/test splits, then mean +- std over the runs.")

__all__ = ["FIGURE3_NOTE", "check_paper", "paper_values", "read_results", "write_report"]


def write_report(folders: list[Path], out: Path, tolerance: Optional[float] = None, exclude: Iterable[str] = (),
                 require_all: bool = False) -> int:
    """Write the report of the rows under ``folders`` to ``out``: first the user's own runs
    (``runs.md``, ``runs.csv``), then the paper's tables and figures made from the rows a paper
    preset ran with nothing else changed (a table only where such rows are). With ``tolerance``,
    return 1 when a checked cell of those tables (a deterministic GP cell, not a stand-in, its
    dataset not in ``exclude``) deviates from the paper unexplained or has only an error row, or
    when no row was run by a paper preset. A checked cell that was not run is listed as such; with
    ``require_all`` (the reproduction job's check) it fails too."""
    if tolerance is not None:   # before anything is written: the datasets of the paper's tables, from their presets
        known = sorted({dataset for exp in layouts.tables() for dataset in exp.datasets})
        unknown = sorted(set(exclude) - set(known))
        if unknown:
            raise ConfigError(f"--exclude {','.join(unknown)}: not a dataset of the paper's tables; choose among {', '.join(known)}")
    rows = read_results(folders)
    if rows.empty:   # before anything is written or removed: an earlier report in out stays as it was
        where = ", ".join(str(f) for f in folders)
        what = ("no results.csv or summary.csv" if not result_files(folders)
                else "every results file was skipped, held no rows or only malformed ones: the lines above say which")
        raise DatasetError(f"no result rows under {where} ({what}); nothing written, {out} left as it was; "
                           "give the folders gnngp run wrote, e.g. outputs multirun")
    created, stage = not out.exists(), None
    try:
        stage = _stage(out)
        status = _write(rows, folders, stage, tolerance, exclude, require_all)
        _publish(stage, out)
    except OSError as err:   # a full disk, a read-only folder: the earlier report in out stays whole
        raise ResultsNotWritten(f"could not write the report to {out} ({err.strerror or type(err).__name__}); {out} left as it was; "
                                "free space there or give another --out") from None
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if created and out.is_dir() and not any(out.iterdir()):   # made for this report, which failed
            out.rmdir()
    return status


def report_files() -> list[str]:
    """Every file name a report may write (the tables, figures and sections that rows may or may not make)."""
    return (["report.md", "runs.md", "runs.csv"] + [f"{t.name}{suffix}" for t in layouts.tables() for suffix in (".md", ".csv")]
            + [f"{f}.png" for f in FIGURES] + list(SECTION_FILES))


def _stage(out: Path) -> Path:
    """A new hidden folder inside ``out`` (made if need be), so on ``out``'s own file system, that
    the report is written into first."""
    if out.exists() and not out.is_dir():
        raise ResultsNotWritten(f"--out {out} is a file, not a folder; give a folder, e.g. --out outputs/report")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for left in out.glob(".writing-*-*"):   # a report killed (-9) before its clean-up: its process is gone
            if left.is_dir() and not _alive(left.name.split("-")[1]):
                shutil.rmtree(left, ignore_errors=True)
        return Path(tempfile.mkdtemp(prefix=f".writing-{os.getpid()}-", dir=out))
    except OSError as err:
        raise ResultsNotWritten(f"--out {out}: cannot write there ({err.strerror or type(err).__name__}); "
                                "give a folder you can write, e.g. --out outputs/report") from None


def _alive(pid: str) -> bool:
    """Whether the process ``pid`` (a staging folder's writer) still runs; unknown: yes."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (ValueError, PermissionError, OSError):
        return True
    return True


MANIFEST = ".gnngp-report"   # in --out: the files the last report wrote there (JSON), the only ones a report replaces or removes


def _earlier(out: Path) -> Optional[set[str]]:
    """The files an earlier report wrote in ``out``, as its manifest lists them; ``None`` without a
    manifest that reads as one (none, a copy of the folder that left the dotfile behind, a file
    edited into something else): then no file there is taken for a report's."""
    try:
        names = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return {str(name) for name in names} if isinstance(names, list) else None


def _publish(stage: Path, out: Path) -> None:
    """The staged report moved into ``out`` a file at a time (each move whole: a rename in one file
    system), then what an earlier report wrote there and these rows did not make again removed;
    other files in ``out`` are left alone, and a file of a report's name that no earlier report
    wrote (the user's own ``report.md``) refuses the report before anything moves."""
    made = {p.name for p in stage.iterdir()}
    taken = sorted(name for name in made | {MANIFEST} if (out / name).is_dir())
    if taken:   # before anything moves: a rename onto a folder fails, and the report would be half new
        raise ResultsNotWritten(f"--out {out}: {', '.join(taken)} there {'is a folder' if len(taken) == 1 else 'are folders'}; "
                                f"move {'it' if len(taken) == 1 else 'them'} or give another --out; {out} left as it was")
    listed = _earlier(out)
    earlier = listed or set()
    yours = sorted(name for name in made if (out / name).exists() and name not in earlier)
    if yours:
        them = "it" if len(yours) == 1 else "them"
        why = (f"not written by a gnngp report (its list of what it wrote, {MANIFEST}, does not name {them})" if listed is not None else
               f"not known to be a gnngp report's: there is no {MANIFEST} (a report's list of what it wrote, which a report before "
               f"2026-12-02 or a copy of its folder without dotfiles lacks)")
        raise ResultsNotWritten(f"--out {out}: {', '.join(yours)} there {'is' if len(yours) == 1 else 'are'} {why}, and the report would "
                                f"replace {them}; move {them} (or delete {them}, if an earlier report wrote {them}) or give another --out; "
                                f"{out} left as it was")
    for name in sorted(made):
        os.replace(stage / name, out / name)
    for name in report_files():
        if name not in made and name in earlier:
            (out / name).unlink(missing_ok=True)
    atomic_write(out / MANIFEST, lambda f: f.write(json.dumps(sorted(made))))


def _write(rows, folders: list[Path], out: Path, tolerance: Optional[float], exclude: Iterable[str], require_all: bool) -> int:
    """The report of ``rows`` into the empty folder ``out`` (:func:`write_report`)."""
    ok, failed = int((rows["status"] == "ok").sum()), int((rows["status"] != "ok").sum())
    lines = ["# gnngp report", "", f"Results read from: {', '.join(str(f) for f in folders)} ({ok} result rows, {failed} error rows).", ""]
    notes = rows.attrs.get("notes", [])
    if notes:   # rows left out, files set aside, rows read from a fallback: on the page, not the console alone
        lines += ["What the read left out or took from elsewhere:", ""] + [f"- {note.removeprefix('gnngp: ').removeprefix('note: ')}" for note in notes] + [""]
    own = own_runs(rows)
    runs_frame(own).to_csv(out / "runs.csv", index=False)
    bought = active.points(rows)
    own_md = ("\n".join(t.markdown() for t in own) if own else
              "Only active-learning rows: see Active learning below.\n" if not bought.empty else "No result rows under these folders.\n")
    (out / "runs.md").write_text("# Your runs\n\n" + MEANING + "\n\n" + own_md)
    lines += ["## Your runs", "", MEANING + " ([csv](runs.csv))", "", own_md]
    points = learning.curves(rows)
    if not points.empty:   # learning curves: the GP's mean along training time beside the finite network's
        why = learning.draw(points, out / "learning_curves.png")
        lines += ["## Learning curves", "", CURVE_MEANING, "", learning.table(points),
                  f"Figure: not drawn: {why}" if why else "![learning curves](learning_curves.png)", ""]
    if not bought.empty:   # active runs: the test metric against the labels bought, a line per strategy
        why = active.draw(bought, out / "active_learning.png")
        lines += ["## Active learning", "", ACTIVE_MEANING, "", active.table(bought),
                  f"Figure: not drawn: {why}" if why else "![active learning](active_learning.png)", ""]
    calibration = uncertainty_table(rows)
    if calibration:   # runs that scored class probabilities: calibration, detection, reliability diagrams
        (out / "uncertainty.md").write_text("# Uncertainty\n\n" + UNCERTAINTY_MEANING + "\n\n" + calibration)
        why, note = reliability(rows, out / "reliability.png")
        lines += ["## Uncertainty", "", UNCERTAINTY_MEANING + " ([md](uncertainty.md))", "", calibration,
                  f"Reliability diagrams: not drawn: {why}" if why else f"Reliability diagrams {note}: ![reliability](reliability.png)", ""]
    sets = conformal_table(rows)
    if sets:   # runs with conformal=<score>: coverage and the size of the sets (or intervals)
        (out / "conformal.md").write_text("# Conformal prediction\n\n" + CONFORMAL_MEANING + "\n\n" + sets)
        lines += ["## Conformal prediction", "", CONFORMAL_MEANING + " ([md](conformal.md))", "", sets, ""]
    paper_rows = preset_runs(rows)
    status = 0
    if paper_rows.empty:
        lines += ["## The paper's tables and figures", "", "No row was run by a paper preset (`gnngp run -m experiment=table4`, "
                  "table5, figure1..figure4) with the preset's own settings, so no paper table or figure is made.", ""]
        apart = left_out(rows)
        if apart:
            lines += ["Rows a preset ran with other settings:", ""] + apart
        if tolerance is not None:
            lines += ["", "## Check against the paper", "", "- FAIL: no row to check (none was run by a paper preset with its own settings)."]
            status = 1
        (out / "report.md").write_text("\n".join(lines) + "\n")
        return status
    paper = paper_values()
    every = [build(exp, rows, paper) for exp in layouts.tables()]   # the paper check reads them all: a table no row filled is not run
    tables = [t for t in every if t.filled]
    for table in tables:
        table.frame().to_csv(out / f"{table.name}.csv", index=False)
        (out / f"{table.name}.md").write_text(table.markdown())
    skipped = {}
    for name, draw in FIGURES.items():
        try:
            reason = draw(rows, out / f"{name}.png")
        except (ValueError, KeyError, TypeError) as err:  # a malformed column never kills the report
            reason = f"could not be drawn ({type(err).__name__}: {err})"
        if reason:
            skipped[name] = reason
            (out / f"{name}.png").unlink(missing_ok=True)
    correlation_map(out / "correlation_map.png")
    lines += ["## The paper's tables (rows a paper preset ran with its own settings)", ""]
    lines += [f"- [{t.title.split(':')[0]}]({t.name}.md) ([csv]({t.name}.csv))" for t in tables] or ["- none: the preset rows fill no table cell"]
    lines += ["", "## The paper's figures", ""]
    notes = {"figure3": FIGURE3_NOTE}
    for name in FIGURES:
        lines.append(f"- {name}: " + (f"not drawn: {skipped[name]}" if name in skipped else f"![{name}]({name}.png)"))
        if name in notes and name not in skipped:
            lines.append(f"  Note: {notes[name]}")
    lines += ["- correlation map (appendix): ![correlation map](correlation_map.png)", "", "## Missing and stand-ins", ""]
    for table in tables:
        missing = [c for c in table.cells.values() if c.n == 0 and c.paper_note != "OOM"]
        if missing:
            shown = "; ".join(f"{c.row} / {c.column}" + (f" (error: {c.error[:120]})" if c.error else "") for c in missing[:SHOWN])
            lines.append(f"- {table.name}: no data for {len(missing)} of {len(table.cells)} cells: {shown}" + ("; ..." if len(missing) > SHOWN else "")
                         + (f" ({table.name}.md has them all)" if len(missing) > SHOWN else ""))
        stand_ins = [c for c in table.cells.values() if c.stand_in and c.n]
        if stand_ins:
            lines.append(f"- {table.name}: stand-ins for " + "; ".join(f"{c.row} / {c.column}: {c.stand_in}" for c in stand_ins))
        single = [c for c in table.cells.values() if c.n == 1 and c.gnn]
        if single:
            lines.append(f"- {table.name}: GNN cells from a single seed (the paper reports 5): " + "; ".join(f"{c.row} / {c.column}" for c in single))
    apart = left_out(rows)
    if apart:
        lines += ["", "## Rows a preset ran that its tables and figures leave out", ""]
        lines += ["Only rows run by a preset with its own settings fill its cells; these were run otherwise (they are in Your runs):", ""] + apart
    if tolerance is not None:
        exclude = sorted(set(exclude))
        unexplained, explained, failed, not_run = check_paper(every, tolerance, exclude)
        lines += ["", f"## Check against the paper (deterministic GP cells, tolerance {tolerance}"
                  + (f"; excluded: {', '.join(exclude)}" if exclude else "") + ("; every cell required" if require_all else "") + ")", ""]
        lines += [f"- FAIL {c.table} {c.row} / {c.column}: ours {c.mean:.4f}, paper {c.paper:.4f} ({c.diff:+.4f})" for c in unexplained]
        lines += [f"- FAIL {c.table} {c.row} / {c.column}: error row: {c.error[:160]}" for c in failed]
        if require_all:
            lines += [f"- FAIL {c.table} {c.row} / {c.column}: no result" for c in not_run]
        lines += [f"- known deviation {c.table} {c.row} / {c.column}: ours {c.mean:.4f}, paper {c.paper:.4f} ({c.diff:+.4f}). {why}" for c, why in explained]
        count = sum(1 for t in every for c in t.cells.values() if checked(c, set(exclude)))
        lines.append(f"- {count - len(not_run)} deterministic cells checked, {len(unexplained)} unexplained deviations, {len(failed)} error rows, "
                     f"{len(not_run)} not run, {len(explained)} known.")
        if not_run and not require_all:
            lines.append(f"- not run, so not checked ({len(not_run)}; `--require-all` fails on them): "
                         + "; ".join(f"{c.table} {c.row} / {c.column}" for c in not_run))
        status = 1 if unexplained or failed or (require_all and not_run) else 0
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return status
