"""The report's learning curves: the metric along training time of every row that recorded one
(``curve`` in its ``extra``): a GP with several ``inference.time`` values (the mean of the
infinitely wide network trained for each time; ``kernel.limit=ntk`` for the trained network's
limit) and a GNN trained with ``gnn.regime=ntk`` (the finite network, after each recorded
gradient step, at the same learning rate). ``experiment=learning_curve`` runs both."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import pandas as pd

from .layouts import display
from .settings import extra_of, setting_labels

PANELS = 6   # datasets drawn at most (the table lists every curve)


def curves(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per recorded curve point: dataset, method, learning rate, seed, ``t``
    (``inf``: the kernel regression limit) and the metric on each split."""
    points = []
    ok = rows[rows["status"] == "ok"] if "status" in rows.columns else rows
    for _, row in ok.iterrows():
        extra = extra_of(row)
        curve = extra.get("curve")
        if not isinstance(curve, dict) or not isinstance(curve.get("t"), list):
            continue
        rate = extra.get("learning_rate")
        method = row.get("method")
        if extra.get("regime") == "ntk":   # the finite network: its width tells how close to the limit it should come
            method = f"{method}, width {extra.get('hidden')}"
        for i, t in enumerate(curve["t"]):
            point = {"dataset": row.get("dataset"), "method": method, "metric": row.get("metric"), "learning_rate": rate,
                     "settings": str(row.get("group") or "{}"), "seed": row.get("seed"), "t": math.inf if t == "inf" else float(t)}
            for split in ("train", "val", "test"):
                values = curve.get(split) or []
                point[split] = float(values[i]) if i < len(values) and values[i] is not None else math.nan
            points.append(point)
    return pd.DataFrame(points)


TOLD_APART = ("inference.time", "inference.learning_rate")   # a curve's own axis, and the learning rate's column


def _lines(points: pd.DataFrame):
    """(dataset, method with its settings' words, learning rate, the curve's points), one per curve."""
    groups = pd.Series(points["settings"].unique())   # runs of other settings are never averaged into one curve
    words = dict(zip(groups, setting_labels(groups, TOLD_APART)))
    rate = points["learning_rate"].fillna(math.nan)
    for (dataset, method, lr, group), part in points.groupby(["dataset", "method", rate, "settings"], dropna=False, sort=True):
        yield dataset, f"{method} ({words[group]})" if words[group] else str(method), lr, part


def table(points: pd.DataFrame) -> str:
    """The mean test metric at each recorded time, a line per dataset, method, settings and learning rate."""
    lines = ["| dataset | method | learning rate | t : test metric (mean over seeds) |", "|---|---|---|---|"]
    for dataset, method, rate, group in _lines(points):
        means = group.groupby("t")["test"].mean()
        cells = ", ".join(f"{'inf' if math.isinf(t) else f'{t:g}'}: {v:.3f}" for t, v in means.items())
        lines.append(f"| {display(str(dataset))} | {method} | {'-' if pd.isna(rate) else f'{float(rate):g}'} | {cells} |")
    return "\n".join(lines) + "\n"


def draw(points: pd.DataFrame, path: Path) -> Optional[str]:
    """Test metric against training time (log axis), a panel per dataset, a line per method; the
    kernel regression limit (``t = inf``) as a dashed level. Returns why nothing was drawn, or ``None``."""
    if points.empty:
        return "no row recorded a learning curve"
    from .figures import _major_labels_only, _plt

    plt = _plt()
    datasets = sorted(points["dataset"].dropna().unique())[:PANELS]
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 3.6), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        here = points[points["dataset"] == dataset]
        rates = here["learning_rate"].dropna().nunique()
        for _, method, rate, group in _lines(here):   # a line per curve of the table (other settings, another learning rate)
            means = group.groupby("t")["test"].mean()
            finite = means[[not math.isinf(t) for t in means.index]]
            said = f"{method}, lr {float(rate):g}" if rates > 1 and not pd.isna(rate) else method
            line, = ax.plot(finite.index, finite.values, marker="o", markersize=3, label=said)
            if any(math.isinf(t) for t in means.index):
                ax.axhline(float(means[math.inf]), color=line.get_color(), linestyle="--", linewidth=1)
        ax.set_xscale("log")
        _major_labels_only(ax)
        ax.set_xlabel("training time t (gradient steps at the learning rate)")
        ax.set_ylabel(f"test {here['metric'].dropna().iloc[0] if here['metric'].notna().any() else 'metric'}")
        ax.set_title(display(str(dataset)))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
