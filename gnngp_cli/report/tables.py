"""The paper's tables from result rows, laid out as their experiment configs say
(:mod:`.layouts`): each cell ours (mean and std over seeds) beside the paper's value."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from ..kernels import KERNELS
from .layouts import Experiment, display, gnn_methods, is_gnn, model_label
from .reading import default_depth, preset, preset_runs
from .settings import default_fraction


def _stats(values: pd.Series) -> tuple[float, float, int]:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return math.nan, math.nan, 0
    return float(values.mean()), float(values.std()) if len(values) > 1 else math.nan, int(len(values))


def _fmt(mean: float, std: float) -> str:
    if math.isnan(mean):
        return ""
    return f"{mean:.4f}" + (f" +- {std:.4f}" if not math.isnan(std) else "")


@dataclass
class Cell:
    table: str
    row: str
    column: str
    mean: float = math.nan
    std: float = math.nan
    n: int = 0
    paper: float = math.nan
    paper_std: float = math.nan
    paper_note: str = ""
    stand_in: str = ""
    deterministic: bool = False
    error: str = ""
    dataset: str = ""
    method: str = ""
    gnn: bool = False

    @property
    def diff(self) -> float:
        return self.mean - self.paper

    def markdown(self) -> str:
        if self.paper_note == "OOM" and self.n == 0:
            return "OOM (paper)" + (f"; ours: {self.error[:60]}" if self.error else "")
        ours = _fmt(self.mean, self.std) or ("error" if self.error else "–")
        if self.stand_in and self.n:
            ours += " (stand-in)"
        if math.isnan(self.paper):
            return ours
        paper = _fmt(self.paper, self.paper_std)
        diff = f", {self.diff:+.4f}" if self.n else ""
        return f"{ours} (paper {paper}{diff})"


@dataclass
class Table:
    name: str
    title: str
    rows: list[str]
    columns: list[str]
    cells: dict = field(default_factory=dict)

    @property
    def filled(self) -> bool:
        """Whether any cell has a result or an error row (a preset's run)."""
        return any(c.n or c.error for c in self.cells.values())

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([
            {"row": c.row, "column": c.column, "ours_mean": c.mean, "ours_std": c.std, "runs": c.n, "paper": c.paper,
             "paper_std": c.paper_std, "diff": c.diff if c.n and not math.isnan(c.paper) else math.nan,
             "stand_in": c.stand_in, "deterministic": c.deterministic, "error": c.error}
            for c in self.cells.values()
        ])

    def markdown(self) -> str:
        lines = [f"# {self.title}", "", "| | " + " | ".join(self.columns) + " |", "|---" * (len(self.columns) + 1) + "|"]
        for r in self.rows:
            lines.append(f"| {r} | " + " | ".join(self.cells[(r, c)].markdown() for c in self.columns) + " |")
        lines += ["", "Cells: ours as mean +- std over seeds (paper value, ours minus paper). Accuracy; R^2 on Chameleon, Squirrel, Crocodile."]
        return "\n".join(lines) + "\n"

    def fill(self, row: str, column: str, dataset: str, method: str, low_rank: bool, rows: pd.DataFrame, paper: pd.DataFrame) -> None:
        """The cell of ``method`` (a label) on ``dataset``: its rows run with the preset's settings
        at depth 2 (a low-rank kernel's with the dataset's landmark fraction), or its error."""
        ok, bad = preset(default_depth(rows[rows["status"] == "ok"])), preset_runs(rows[rows["status"] != "ok"])
        picked = ok[(ok["dataset"] == dataset) & (ok["method"] == method)]
        failed = bad[(bad["dataset"] == dataset) & (bad["method"] == method)]
        gnn = method in gnn_methods()
        if low_rank:
            picked = picked[picked["landmark_fraction"].fillna(1.0) == default_fraction(dataset)]
        deterministic = not gnn and (not low_rank or default_fraction(dataset) == 1.0)
        ref = paper[(paper["table"] == self.name) & (paper["row"] == row) & (paper["column"] == column)]
        mean, std, n = _stats(picked["test"])
        cell = Cell(self.name, row, column, mean, std, n, deterministic=deterministic, dataset=dataset, method=method, gnn=gnn)
        if len(ref):
            cell.paper = float(ref["value"].iloc[0]) if not pd.isna(ref["value"].iloc[0]) else math.nan
            cell.paper_std = float(ref["std"].iloc[0]) if not pd.isna(ref["std"].iloc[0]) else math.nan
            cell.paper_note = "" if pd.isna(ref["note"].iloc[0]) else str(ref["note"].iloc[0])
        cell.stand_in = next((s for s in picked["stand_in"] if s), "")
        if n == 0 and len(failed):
            cell.error = str(failed["error"].iloc[-1])
        self.cells[(row, column)] = cell


def by_dataset(exp: Experiment, rows: pd.DataFrame, paper: pd.DataFrame) -> Table:
    """A row per dataset of the sweep, a column per model (Table 4)."""
    methods = [(model_label(m), m.endswith("_x")) for m in exp.models]
    table = Table(exp.name, exp.table.get("title", exp.name), [display(d) for d in exp.datasets], [label for label, _ in methods])
    for dataset in exp.datasets:
        for label, low_rank in methods:
            table.fill(display(dataset), label, dataset, label, low_rank, rows, paper)
    return table


def by_architecture(exp: Experiment, rows: pd.DataFrame, paper: pd.DataFrame) -> Table:
    """A row per GNN of the sweep with its kernel (the kernel entry's ``gnn``); per dataset a
    column for the GNN and one for the kernel, ``GNNGP-X`` where the experiment runs it low rank (Table 5)."""
    gnns = [m for m in exp.models if is_gnn(m)]
    pairs = [(g, k) for g in gnns for k in exp.models if k in KERNELS and KERNELS[k].gnn == g]
    columns = [f"{display(d)} {kind}" for d in exp.datasets for kind in ("GNN", "GNNGP-X" if exp.low_rank_on(d) else "GNNGP")]
    table = Table(exp.name, exp.table.get("title", exp.name), [model_label(g) for g, _ in pairs], columns)
    for gnn, kernel in pairs:
        for dataset in exp.datasets:
            low = exp.low_rank_on(dataset)
            table.fill(model_label(gnn), f"{display(dataset)} GNN", dataset, model_label(gnn), False, rows, paper)
            table.fill(model_label(gnn), f"{display(dataset)} {'GNNGP-X' if low else 'GNNGP'}", dataset, model_label(kernel, low), low, rows, paper)
    return table


LAYOUTS = {"dataset": by_dataset, "gnn": by_architecture}


def build(exp: Experiment, rows: pd.DataFrame, paper: pd.DataFrame) -> Table:
    rows_by = exp.table.get("rows", "dataset")
    if rows_by not in LAYOUTS:
        raise ValueError(f"experiment {exp.name}: experiment.table.rows={rows_by!r} is not a layout; use one of {', '.join(LAYOUTS)}")
    return LAYOUTS[rows_by](exp, rows, paper)
