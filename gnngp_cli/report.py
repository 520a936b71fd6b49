"""``gnngp report``: tables and figures of the paper from result CSVs, ours beside theirs.

Reads every ``results.csv`` and ``summary.csv`` under the given folders, keeps the latest row
of each rerun (same dataset, stand-in, method, depth, landmark fraction and seed), and writes
``table4.{md,csv}``, ``table5.{md,csv}``, ``figure1..4.png``, ``correlation_map.png`` and a
``report.md`` that links them and lists what is missing. Partial results, missing columns and
error rows are expected and never fatal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Iterable, Optional

import numpy as np
import pandas as pd

from .data.registry import DATASETS
from .gnn import GNNS
from .kernels.architectures import KERNELS
from .report_settings import annotate, default_fraction, left_out

TABLE4_DATASETS = ["cora", "citeseer", "pubmed", "arxiv", "reddit", "chameleon", "squirrel", "crocodile"]
DISPLAY = {name: DATASETS[name].display for name in TABLE4_DATASETS}
TABLE4_METHODS = ["GCN", "GCNGP", "GCNGP-X", "RBF", "RBF-X", "GGP", "GGP-X"]
TABLE5_ARCHS = {GNNS[gnn].label: (GNNS[gnn].label, KERNELS[gp].label) for gnn, gp in (("gcn", "gcngp"), ("gcn2", "gcn2gp"), ("gin", "gingp"), ("sage", "sagegp"))}
TABLE5_DATASETS = {name: (DATASETS[name].display, DATASETS[name].config.large) for name in ("pubmed", "arxiv", "reddit")}
KEY = ["dataset", "stand_in", "n_nodes", "method", "layers", "landmark_fraction", "seed", "settings"]
GNN_METHODS = {entry.label for entry in GNNS.values()}


def paper_values() -> pd.DataFrame:
    with resources.files("gnngp_cli.paper").joinpath("paper_values.csv").open() as f:
        return pd.read_csv(f)


def known_deviations() -> pd.DataFrame:
    with resources.files("gnngp_cli.paper").joinpath("known_deviations.csv").open() as f:
        return pd.read_csv(f)


def read_results(folders: Iterable[Path]) -> pd.DataFrame:
    """Every row of every results.csv / summary.csv below ``folders``; reruns deduplicated."""
    frames = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.csv")):
            if path.name not in ("results.csv", "summary.csv"):
                continue
            try:
                frames.append(pd.read_csv(path))
            except (OSError, ValueError, pd.errors.ParserError):
                continue
    if not frames:
        return pd.DataFrame(columns=[*KEY, "status", "test", "timestamp", "differs"])
    rows = pd.concat(frames, ignore_index=True)
    for column in [*KEY, "status", "test", "val", "train", "timestamp", "total_seconds", "n_nodes", "n_edges", "landmarks", "error", "metric",
                   "experiment", "task", "extra", "sigma_w", "sigma_b", "device", "dtype"]:
        if column not in rows.columns:
            rows[column] = np.nan
    rows["status"] = rows["status"].fillna("ok")
    rows["stand_in"] = rows["stand_in"].fillna("").astype(str)
    rows["layers"] = pd.to_numeric(rows["layers"], errors="coerce").fillna(2)
    rows["landmark_fraction"] = pd.to_numeric(rows["landmark_fraction"], errors="coerce")
    rows["seed"] = pd.to_numeric(rows["seed"], errors="coerce").fillna(-1)
    rows = annotate(rows.drop(columns=["settings"]))
    rows = rows.sort_values("timestamp", na_position="first", kind="stable")
    ok = rows[rows["status"] == "ok"].drop_duplicates(subset=KEY, keep="last")
    errors = rows[rows["status"] != "ok"].drop_duplicates(subset=["dataset", "method", "layers"], keep="last")
    return pd.concat([ok, errors], ignore_index=True)


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
    rows: list[str]
    columns: list[str]
    cells: dict = field(default_factory=dict)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([
            {"row": c.row, "column": c.column, "ours_mean": c.mean, "ours_std": c.std, "runs": c.n, "paper": c.paper,
             "paper_std": c.paper_std, "diff": c.diff if c.n and not math.isnan(c.paper) else math.nan,
             "stand_in": c.stand_in, "deterministic": c.deterministic, "error": c.error}
            for c in self.cells.values()
        ])

    def markdown(self, title: str) -> str:
        lines = [f"# {title}", "", "| | " + " | ".join(self.columns) + " |", "|---" * (len(self.columns) + 1) + "|"]
        for r in self.rows:
            lines.append(f"| {r} | " + " | ".join(self.cells[(r, c)].markdown() for c in self.columns) + " |")
        lines += ["", "Cells: ours as mean +- std over seeds (paper value, ours minus paper). Accuracy; R^2 on Chameleon, Squirrel, Crocodile."]
        return "\n".join(lines) + "\n"


def _cell(table: str, row: str, column: str, picked: pd.DataFrame, failed: pd.DataFrame, paper: pd.DataFrame, deterministic: bool) -> Cell:
    ref = paper[(paper["table"] == table) & (paper["row"] == row) & (paper["column"] == column)]
    mean, std, n = _stats(picked["test"])
    cell = Cell(table, row, column, mean, std, n, deterministic=deterministic)
    if len(ref):
        cell.paper = float(ref["value"].iloc[0]) if not pd.isna(ref["value"].iloc[0]) else math.nan
        cell.paper_std = float(ref["std"].iloc[0]) if not pd.isna(ref["std"].iloc[0]) else math.nan
        cell.paper_note = "" if pd.isna(ref["note"].iloc[0]) else str(ref["note"].iloc[0])
    cell.stand_in = next((s for s in picked["stand_in"] if s), "")
    if n == 0 and len(failed):
        cell.error = str(failed["error"].iloc[-1])
    return cell


def _rows_for(ok: pd.DataFrame, bad: pd.DataFrame, dataset: str, method: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The result rows and the error rows of one dataset and method."""
    return (ok[(ok["dataset"] == dataset) & (ok["method"] == method)],
            bad[(bad["dataset"] == dataset) & (bad["method"] == method)])


def _default_depth(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["layers"] == 2]


def _preset(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows run with their preset's own settings (see :mod:`.report_settings`)."""
    return rows[rows["differs"].fillna("") == ""]


def table4(rows: pd.DataFrame, paper: pd.DataFrame) -> Table:
    table = Table("table4", list(DISPLAY.values()), TABLE4_METHODS)
    ok, bad = _preset(_default_depth(rows[rows["status"] == "ok"])), rows[rows["status"] != "ok"]
    for key, title in DISPLAY.items():
        for method in TABLE4_METHODS:
            picked, failed = _rows_for(ok, bad, key, method)
            if method.endswith("-X"):
                picked = picked[picked["landmark_fraction"].fillna(1.0) == default_fraction(key)]
            deterministic = method not in GNN_METHODS and (not method.endswith("-X") or default_fraction(key) == 1.0)
            table.cells[(title, method)] = _cell("table4", title, method, picked, failed, paper, deterministic)
            table.cells[(title, method)].dataset = key
    return table


def table5(rows: pd.DataFrame, paper: pd.DataFrame) -> Table:
    columns = [f"{title} {kind}" for title, large in TABLE5_DATASETS.values() for kind in ("GNN", "GNNGP-X" if large else "GNNGP")]
    table = Table("table5", list(TABLE5_ARCHS), columns)
    ok, bad = _preset(_default_depth(rows[rows["status"] == "ok"])), rows[rows["status"] != "ok"]
    for arch, (gnn, gp) in TABLE5_ARCHS.items():
        for key, (title, large) in TABLE5_DATASETS.items():
            for kind, method in (("GNN", gnn), ("GNNGP-X" if large else "GNNGP", gp + ("-X" if large else ""))):
                picked, failed = _rows_for(ok, bad, key, method)
                if large and kind != "GNN":
                    picked = picked[picked["landmark_fraction"].fillna(1.0) == default_fraction(key)]
                table.cells[(arch, f"{title} {kind}")] = _cell("table5", arch, f"{title} {kind}", picked, failed, paper, kind == "GNNGP")
                table.cells[(arch, f"{title} {kind}")].dataset = key
    return table


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _major_labels_only(ax) -> None:
    """Label only the decades of log axes (minor labels collide)."""
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def figure1(rows: pd.DataFrame, path: Path) -> Optional[str]:
    """Total time of each Table 4 method normalised by GCN's time on the same dataset: a log
    axis with GCN's reference line at 1 and every bar's value printed on it, so a bar at 0.45
    reads as 0.45 wherever the axis starts. Only rows with the preset's settings count."""
    ok = _preset(_default_depth(rows[rows["status"] == "ok"]))
    times = ok.groupby(["dataset", "method"])["total_seconds"].mean().unstack()
    if "GCN" not in times.columns or times["GCN"].dropna().empty:
        return "no GCN timing to normalise by"
    ratio = times.div(times["GCN"], axis=0).dropna(how="all")
    ratio = ratio[[m for m in TABLE4_METHODS if m in ratio.columns]].dropna(subset=["GCN"])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(ratio.columns)
    for i, method in enumerate(ratio.columns):
        values = ratio[method].to_numpy()
        x = np.arange(len(ratio)) + i * width
        ax.bar(x, values, width, label=method)
        for xi, v in zip(x, values):
            if np.isfinite(v):
                ax.text(xi, v, f"{v:.2g}", ha="center", va="bottom", fontsize=6, rotation=90)
    stand_ins = set(ok[ok["stand_in"].astype(bool)]["dataset"])
    ax.set_xticks(np.arange(len(ratio)) + 0.4 - width / 2, [DISPLAY.get(d, d) + ("\n(csbm stand-in)" if d in stand_ins else "") for d in ratio.index])
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    finite = ratio.to_numpy(dtype=float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    ax.set_ylim(min(finite.min(), 1.0) / 3, max(finite.max(), 1.0) * 5)
    _every_decade(ax, "y")
    ax.set_ylabel("time / GCN time (log; dashed: GCN = 1)")
    ax.set_title("Figure 1: running time normalised by GCN")
    ax.legend(ncol=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def _every_decade(ax, which: str) -> None:
    """A labelled major tick at every power of ten of a log axis, and no minor labels."""
    from matplotlib.ticker import LogFormatterSciNotation, LogLocator, NullFormatter

    for axis in ([ax.xaxis] if which == "x" else [ax.yaxis] if which == "y" else [ax.xaxis, ax.yaxis]):
        axis.set_major_locator(LogLocator(base=10, numticks=100))
        axis.set_major_formatter(LogFormatterSciNotation(base=10, labelOnlyBase=True))
        axis.set_minor_locator(LogLocator(base=10, subs=np.arange(2, 10) * 0.1, numticks=100))
        axis.set_minor_formatter(NullFormatter())


FIGURE2_METHODS = ["GCN", "GCNGP", "GCNGP-X"]


def figure2(rows: pd.DataFrame, path: Path) -> Optional[str]:
    """Time against graph size M + N on log-log axes, every decade labelled. Each method's
    slope is fitted over one family of runs (the same experiment, depth, device and dtype: the
    largest such family), with its number of runs; a negative slope is not a scaling law and is
    not printed as one."""
    ok = rows[(rows["status"] == "ok") & rows["method"].isin(FIGURE2_METHODS)].copy()
    ok["size"] = pd.to_numeric(ok["n_nodes"], errors="coerce") + pd.to_numeric(ok["n_edges"], errors="coerce")
    ok = _default_depth(ok).dropna(subset=["size", "total_seconds"])
    if ok.empty:
        return "no timed GCN/GCNGP/GCNGP-X rows"
    for column in ("experiment", "device", "dtype"):
        ok[column] = ok[column].fillna("").astype(str)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for method in [m for m in FIGURE2_METHODS if m in set(ok["method"])]:
        group = ok[ok["method"] == method]
        families = group.groupby(["experiment", "device", "dtype"])
        key = max(families.groups, key=lambda k: (families.get_group(k)["size"].nunique(), len(families.get_group(k))))
        family = families.get_group(key)
        points = family.groupby("size")["total_seconds"].mean()
        others = group.drop(family.index)
        line = ax.scatter(points.index, points.to_numpy(), label=f"{method} ({key[0] or 'runs'}, {len(points)} sizes)")
        if len(others):
            ax.scatter(others["size"], others["total_seconds"], marker="x", color=line.get_facecolor()[0], alpha=0.5,
                       label=f"{method}, other runs (not fitted)")
        if len(points) < 3:
            continue
        x, y = np.log10(points.index.to_numpy(float)), np.log10(points.to_numpy(float))
        slope, intercept = np.polyfit(x, y, 1)
        if slope <= 0:
            ax.plot([], [], " ", label=f"{method}: slope not shown (fit over {len(points)} runs is negative: constant costs dominate)")
            continue
        xs = np.linspace(x.min(), x.max(), 20)
        ax.plot(10 ** xs, 10 ** (slope * xs + intercept), color=line.get_facecolor()[0], label=f"{method} slope {slope:.2f} ({len(points)} runs)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _every_decade(ax, "both")
    lo, hi = ok["size"].min(), ok["size"].max()
    ax.set_xlim(10 ** np.floor(np.log10(lo)), 10 ** np.ceil(np.log10(hi) + 1e-9))
    ax.set_xlabel("graph size M + N (directed edges + nodes)")
    ax.set_ylabel("time (s)")
    ax.set_title("Figure 2: scalability")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


FIGURE3_NOTE = ("GCNIIGP at L >= 3 is the paper's kernel recursion, not the wide-network limit of GCNII: the identity mapping "
                "passes rectified, non-Gaussian features to the next ReLU (gnngp verify kernel=gcn2gp kernel.layers=3 fails).")


def figure3(rows: pd.DataFrame, path: Path) -> Optional[str]:
    """Accuracy against depth on PubMed for GCN, GCNGP, GCNII and GCNIIGP (captioned with
    :data:`FIGURE3_NOTE`)."""
    ok = rows[(rows["status"] == "ok") & (rows["dataset"] == "pubmed") & rows["method"].isin(["GCN", "GCNGP", "GCNII", "GCNIIGP"])]
    if ok["layers"].nunique() < 2:
        return "fewer than two depths on PubMed"
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, group in ok.groupby("method"):
        stats = group.groupby("layers")["test"].agg(["mean", "std"]).fillna(0)
        ax.errorbar(stats.index, stats["mean"], yerr=stats["std"], marker="o", capsize=3, label=method)
    ax.set_xlabel("depth L")
    ax.set_ylabel("test accuracy")
    ax.set_title("Figure 3: depth on PubMed")
    ax.legend()
    fig.text(0.01, 0.01, "Note: " + FIGURE3_NOTE, fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def figure4(rows: pd.DataFrame, path: Path) -> Optional[str]:
    """GCNGP-X test metric and time against the number of landmarks."""
    ok = rows[(rows["status"] == "ok") & (rows["method"] == "GCNGP-X")].dropna(subset=["landmark_fraction"])
    ok = ok[ok.groupby("dataset")["landmark_fraction"].transform("nunique") >= 2]
    if ok.empty:
        return "no landmark sweep (GCNGP-X at two or more landmark fractions)"
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    gcn = rows[(rows["status"] == "ok") & (rows["method"] == "GCN")]
    for dataset, group in ok.groupby("dataset"):
        stats = group.groupby("landmark_fraction").agg(landmarks=("landmarks", "mean"), test=("test", "mean"), seconds=("total_seconds", "mean")).sort_values("landmarks")
        label = DISPLAY.get(dataset, dataset) + (" (stand-in)" if group["stand_in"].astype(bool).any() else "")
        line, = left.plot(stats["landmarks"], stats["test"], marker="o", label=label)
        reference = gcn[gcn["dataset"] == dataset]["test"]
        if len(reference):
            left.axhline(reference.mean(), color=line.get_color(), linestyle=":", label=f"GCN on {label}")
        right.plot(stats["landmarks"], stats["seconds"], marker="o", label=label)
    for ax, ylabel in ((left, "test metric"), (right, "time (s)")):
        ax.set_xscale("log")
        _major_labels_only(ax)
        ax.set_xlabel("landmarks")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    right.set_yscale("log")
    fig.suptitle("Figure 4: landmarks")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def correlation_map(path: Path) -> None:
    """The appendix's correlation map ``f(rho) = (sin t + (pi - t) cos t) / pi``, ``rho = cos t``."""
    plt = _plt()
    rho = np.linspace(-1, 1, 401)
    t = np.arccos(rho)
    f = (np.sin(t) + (np.pi - t) * np.cos(t)) / np.pi
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot(rho, f, label="f(rho)")
    ax.plot(rho, rho, linestyle="--", color="grey", label="identity")
    ax.set_xlabel("rho")
    ax.set_ylabel("f(rho)")
    ax.set_title("ReLU correlation map")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def checked(cell: Cell, exclude: set[str]) -> bool:
    """Whether the paper check covers ``cell``: a deterministic GP cell with a paper value, not
    a stand-in, on a dataset not excluded (``--exclude``)."""
    return cell.deterministic and not math.isnan(cell.paper) and not cell.stand_in and cell.dataset not in exclude


def check_paper(tables: list[Table], tolerance: float, exclude: Iterable[str] = ()) -> tuple[list[Cell], list[tuple[Cell, str]], list[Cell]]:
    """The checked cells (:func:`checked`) that differ from the paper by more than ``tolerance`` at the paper's 4-decimal precision:
    (unexplained, known with their explanation, without a result: missing or an error row)."""
    known = known_deviations()
    exclude = set(exclude)
    unexplained, explained, absent = [], [], []
    for table in tables:
        for cell in table.cells.values():
            if not checked(cell, exclude):
                continue
            if not cell.n:
                absent.append(cell)
                continue
            if round(abs(cell.diff), 4) <= tolerance:
                continue
            match = known[(known["table"] == cell.table) & (known["row"] == cell.row) & (known["column"] == cell.column)]
            if len(match):
                explained.append((cell, str(match["explanation"].iloc[0])))
            else:
                unexplained.append(cell)
    return unexplained, explained, absent


def write_report(folders: list[Path], out: Path, tolerance: Optional[float] = None, exclude: Iterable[str] = ()) -> int:
    """Write every table and figure to ``out``; with ``tolerance``, return 1 when a checked cell
    (a deterministic GP cell, not a stand-in, its dataset not in ``exclude``) deviates from the
    paper unexplained, or has no result (missing, or only an error row)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = read_results(folders)
    paper = paper_values()
    tables = [table4(rows, paper), table5(rows, paper)]
    titles = {"table4": "Table 4: GCNGP against GCN and standard kernels", "table5": "Table 5: GNNs against their GP kernels"}
    for table in tables:
        table.frame().to_csv(out / f"{table.name}.csv", index=False)
        (out / f"{table.name}.md").write_text(table.markdown(titles[table.name]))
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
    lines += ["## Tables", "", "- [Table 4](table4.md) ([csv](table4.csv))", "- [Table 5](table5.md) ([csv](table5.csv))", "", "## Figures", ""]
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
        single = [c for c in table.cells.values() if c.n == 1 and c.column in GNN_METHODS | {f'{t} GNN' for t, _ in TABLE5_DATASETS.values()}]
        if single:
            lines.append(f"- {table.name}: GNN cells from a single seed (the paper reports 5): " + "; ".join(f"{c.row} / {c.column}" for c in single))
    cells = {(d, m) for d in TABLE4_DATASETS for m in TABLE4_METHODS}
    cells |= {(d, m + ("-X" if large and m not in GNN_METHODS else "")) for d, (_, large) in TABLE5_DATASETS.items()
              for pair in TABLE5_ARCHS.values() for m in pair}
    apart = left_out(rows, cells)
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
