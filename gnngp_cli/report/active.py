"""The report's active-learning curves: the test metric (and the macro-F1 over every node) against
the labels bought, a line per strategy, the mean over seeds with a band of one standard
deviation, from the rows of ``active=<strategy>`` runs (a row per budget)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import pandas as pd

from .layouts import display
from .settings import setting_labels

PANELS = 6   # dataset and kernel pairs drawn at most (the table lists every curve)
KEYS = ["dataset", "method", "strategy", "labelled"]


def bought(rows: pd.DataFrame) -> pd.Series:
    """Which rows are an active run's (a row per budget: a strategy and the labels bought)."""
    if "strategy" not in rows.columns or "labelled" not in rows.columns:
        return pd.Series(False, index=rows.index)
    return rows["strategy"].notna() & rows["strategy"].astype(str).ne("") & rows["labelled"].notna()


def points(rows: pd.DataFrame) -> pd.DataFrame:
    """The ``ok`` rows of active runs: dataset, method, strategy, labels, seed, test metric, macro-F1
    and selection seconds."""
    if "strategy" not in rows.columns or "labelled" not in rows.columns:
        return pd.DataFrame(columns=[*KEYS, "seed", "metric", "test", "macro_f1_all", "selection_seconds"])
    ok = rows[(rows["status"] == "ok") & bought(rows)]
    out = ok[[c for c in [*KEYS, "seed", "metric", "test", "macro_f1_all", "selection_seconds"] if c in ok.columns]].copy()
    out["labelled"] = out["labelled"].astype(int)
    if "group" in ok.columns:   # runs of one strategy with other settings are never averaged together: a curve each
        out["strategy"] = [f"{strategy} ({label})" if label else strategy for strategy, label in zip(out["strategy"], setting_labels(ok["group"], APART))]
    # one point per seed and label count: two runs of a seed whose budgets differ (the same curve,
    # other points) both hold their shared counts, which count once (their mean), not as two seeds
    keys = [c for c in [*KEYS, "seed", "metric"] if c in out.columns]
    values = [c for c in ("test", "macro_f1_all", "selection_seconds") if c in out.columns]
    return out.groupby(keys, dropna=False, sort=False, as_index=False)[values].mean()


APART = frozenset({"active", "active.budgets", "active.seed"})   # the strategy itself, and what only adds points or varies seeds


def table(found: pd.DataFrame) -> str:
    """Per dataset, method and strategy: the seeds (a range where some label counts have fewer), the
    mean test metric at each label count, the macro-F1 over every node averaged over the budgets
    (FeatProp's summary) and the selection seconds at the last budget."""
    lines = ["| dataset | method | strategy | seeds | labels : test metric (mean) | macro-F1 (%), all nodes (mean over budgets; FeatProp's unit) | selection s (last budget) |",
             "|---|---|---|---|---|---|---|"]
    for (dataset, method, strategy), group in found.groupby(["dataset", "method", "strategy"], sort=True):
        means = group.groupby("labelled")["test"].mean()
        cells = ", ".join(f"{int(n)}: {v:.3f}" for n, v in means.items())
        f1 = group.groupby("labelled")["macro_f1_all"].mean().mean() if "macro_f1_all" in group else math.nan
        last = group[group["labelled"] == group["labelled"].max()]["selection_seconds"].mean() if "selection_seconds" in group else math.nan
        seeds = group.groupby("labelled")["seed"].nunique()   # a label count that fewer seeds' runs reached says so
        count = str(seeds.max()) if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}"
        lines.append(f"| {display(str(dataset))} | {method} | {strategy} | {count} | {cells} | "
                     f"{'-' if pd.isna(f1) else f'{100 * f1:.2f}'} | {'-' if pd.isna(last) else f'{last:.2f}'} |")
    return "\n".join(lines) + "\n"


def draw(found: pd.DataFrame, path: Path) -> Optional[str]:
    """Test metric against labels (log axis), a panel per dataset and method, a line per strategy with
    a band of one standard deviation over seeds. Returns why nothing was drawn, or ``None``."""
    if found.empty:
        return "no row of an active run"
    from .figures import _plt

    plt = _plt()
    panels = sorted(found.groupby(["dataset", "method"]), key=lambda item: item[0])[:PANELS]   # ((dataset, method), its rows)
    most = max(here["strategy"].nunique() for _, here in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6 + 0.17 * most), squeeze=False)
    colours = plt.get_cmap("tab20").colors   # twenty colours, the dark ten first; beyond them a line's dashes tell it apart
    colours = colours[0::2] + colours[1::2]
    for ax, ((dataset, method), here) in zip(axes[0], panels):
        for k, (strategy, group) in enumerate(here.groupby("strategy", sort=True)):
            stats = group.groupby("labelled")["test"].agg(["mean", "std"]).fillna({"std": 0.0})
            colour, dashes = colours[k % len(colours)], ("-", "--", ":", "-.")[(k // len(colours)) % 4]
            ax.plot(stats.index, stats["mean"], marker="o", markersize=3, color=colour, linestyle=dashes, label=str(strategy))
            ax.fill_between(stats.index, stats["mean"] - stats["std"], stats["mean"] + stats["std"], color=colour, alpha=0.2)
        ax.set_xscale("log")
        counts = []
        for v in sorted(int(v) for v in here["labelled"].unique()):   # a tick per count, but none crowding the one before (30, 40, 41)
            if not counts or v >= 1.2 * counts[-1]:
                counts.append(v)
        ax.set_xticks(counts)
        ax.set_xticklabels([str(v) for v in counts])
        ax.minorticks_off()
        ax.set_xlabel("labels bought")
        ax.set_ylabel(f"test {here['metric'].dropna().iloc[0] if here['metric'].notna().any() else 'metric'}")
        ax.set_title(f"{display(str(dataset))}, {method}")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)   # below the axes: never over the lines
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return None
