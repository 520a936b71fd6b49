"""The user's own runs, whatever they ran: one table per task and metric, a line per dataset,
method and group of settings (mean +- std of the test and validation metric over its runs and
splits, the seconds of each stage and the peak memory). Runs whose settings differ
(:func:`.settings.group_settings`: ``fit``, ``compute``, ``landmarks.count``, ``depth``...) are
never averaged together; the settings a table's groups share are said once above it, and
those that tell them apart label each line."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd

from .active import bought
from .layouts import display

SECONDS = (("kernel_seconds", "kernel s"), ("inference_seconds", "inference s"), ("fit_seconds", "fit s"), ("precompute_seconds", "precompute s"), ("train_seconds", "train s"))


@dataclass
class RunsTable:
    """One task's table: its lines (a frame) and the settings all its lines share."""

    task: str
    metric: str
    lines: pd.DataFrame
    common: dict

    @property
    def title(self) -> str:
        return f"{self.task} ({self.metric})"

    def markdown(self) -> str:
        """The table, each metric as ``mean +- std`` (its CSV keeps them apart)."""
        shown = [c for c in self.lines.columns if not c.endswith("_std")]
        heads = [f"{c[:-5]} {self.metric}" if c.endswith("_mean") else c for c in shown]
        out = [f"### {self.title}", ""]
        if self.common:
            out += ["Settings of every line: " + ", ".join(f"`{k}={v}`" for k, v in sorted(self.common.items())), ""]
        out += ["| " + " | ".join(heads) + " |", "|---" * len(shown) + "|"]
        for _, line in self.lines.iterrows():
            out.append("| " + " | ".join(_mean_std(line[c], line[c[:-5] + "_std"]) if c.endswith("_mean") else _cell(line[c]) for c in shown) + " |")
        return "\n".join(out) + "\n"


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value).replace("|", "\\|")


def _mean_std(mean: float, std: float) -> str:
    if pd.isna(mean):
        return ""
    return f"{mean:.4f}" + ("" if pd.isna(std) else f" +- {std:.4f}")


def _mean(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def _label(group: dict, varying: list[str]) -> str:
    """The settings that tell this line apart (a key a line did not set is left out: its default)."""
    return ", ".join(f"{key}={group[key]}" for key in varying if key in group) or "defaults"


def own_runs(rows: pd.DataFrame) -> list[RunsTable]:
    """The tables of every row read (:func:`.reading.read_results`), ok and error rows: per task
    and metric, a line per (dataset, method, settings group), sorted. An active run's rows (a row
    per budget) are left to the Active learning section (:mod:`.active`)."""
    if rows.empty:
        return []
    rows = rows.copy()
    rows["task"] = rows["task"].fillna("").astype(str).replace("", "task not recorded")
    rows["metric"] = rows["metric"].fillna("").astype(str)
    tables = []
    ok = rows[rows["status"] == "ok"]
    ok = ok[~bought(ok)]   # an active run's rows are its budgets, not runs: the report's Active learning section
    for (task, metric), part in ok.groupby(["task", "metric"], sort=True):
        groups = {g: json.loads(g) for g in part["group"].unique()}
        keys = sorted({k for g in groups.values() for k in g})
        varying = [k for k in keys if len({g.get(k) for g in groups.values()}) > 1]
        common = {k: v for k, v in next(iter(groups.values())).items() if k not in varying}
        lines = []
        for (dataset, method, group), runs in part.groupby(["dataset", "method", "group"], sort=True):
            failed = rows[(rows["status"] != "ok") & (rows["dataset"] == dataset) & (rows["method"] == method) & (rows["group"] == group)]
            stand_in = next((s for s in runs["stand_in"] if s), "")
            line = {"dataset": display(dataset) + (" (stand-in)" if stand_in else ""), "method": method}
            if varying:
                line["settings"] = _label(groups[group], varying)
            line["runs"] = len(runs)
            planned = pd.to_numeric(runs["split_count"], errors="coerce").max() if "split_count" in runs.columns else math.nan
            if planned == planned and runs["split_index"].nunique() < planned:   # a splits=all run stopped part way: not the set's mean
                line["splits"] = f"{runs['split_index'].nunique()} of {int(planned)}"
            for split in ("test", "val"):
                values = pd.to_numeric(runs[split], errors="coerce").dropna()
                line[f"{split}_mean"] = float(values.mean()) if len(values) else math.nan
                line[f"{split}_std"] = float(values.std()) if len(values) > 1 else math.nan
            line.update({name: _mean(runs[column]) for column, name in SECONDS})
            peak = pd.to_numeric(runs["peak_rss_mb"], errors="coerce").max()
            line["peak MB"] = float(peak) if not pd.isna(peak) else math.nan
            if len(failed):
                line["errors"] = len(failed)
            lines.append(line)
        frame = pd.DataFrame(lines)
        for _, name in SECONDS:   # a stage no line of this table ran is left out
            if name in frame.columns and frame[name].isna().all():
                frame = frame.drop(columns=name)
        tables.append(RunsTable(task, metric, frame, common))
    done = set(zip(ok["dataset"], ok["method"], ok["group"]))
    fresh = pd.Series([key not in done for key in zip(rows["dataset"], rows["method"], rows["group"])], index=rows.index)
    errors_only = rows[(rows["status"] != "ok") & fresh]
    if len(errors_only):
        def settings(group) -> str:   # what sets these runs apart from an ok line of the same dataset and method
            try:
                values = json.loads(group) if isinstance(group, str) else {}
            except ValueError:
                values = {}
            return _label(values, sorted(values)) if isinstance(values, dict) else "defaults"

        frame = pd.DataFrame([{"dataset": display(str(d)) if isinstance(d, str) else "?", "method": m if isinstance(m, str) else "?",
                               "settings": settings(group), "errors": len(g), "last error": str(g["error"].iloc[-1])}   # whole: its fix ends it
                              for (d, m, group), g in errors_only.groupby(["dataset", "method", "group"], dropna=False, sort=True)])
        tables.append(RunsTable("failed runs", "no result", frame, {}))
    return tables


def frame(tables: list[RunsTable]) -> pd.DataFrame:
    """Every table's lines in one frame (``runs.csv``), with its task and metric."""
    return pd.concat([t.lines.assign(task=t.task, metric=t.metric) for t in tables], ignore_index=True) if tables else pd.DataFrame()
