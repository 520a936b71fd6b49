"""The report's uncertainty part: for the rows that scored class probabilities (a GP with any
likelihood, a GNN with any ``gnn.uncertainty``), a table of calibration and detection per
dataset, protocol and method, and their reliability diagrams (the test nodes' confidence bins
each row recorded, summed over its seeds and splits)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from .layouts import display

COLUMNS = ["ece", "mce", "nll", "brier", "auroc_variance", "auroc_entropy", "auroc_maxprob"]
PANELS = 16   # reliability diagrams drawn at most (the table lists every group)
KEYS = ["dataset", "protocol", "method", "how", "settings", "group_key"]   # what tells a line of the table from another


def _how(row: pd.Series) -> str:
    for key in ("likelihood", "uncertainty"):
        value = row.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def scored(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows with calibration columns, with ``how`` (likelihood or GNN uncertainty) and ``protocol`` filled."""
    if "ece" not in rows.columns:
        return rows.iloc[0:0]
    return _labelled(rows[(rows["status"] == "ok") & pd.to_numeric(rows["ece"], errors="coerce").notna()].copy(), HIDDEN, KEYS[:-1])


def _labelled(out: pd.DataFrame, hidden: frozenset, shown: list[str]) -> pd.DataFrame:
    """``out`` with ``how`` (likelihood or GNN uncertainty), ``protocol`` (``none`` for none), the
    ``settings`` the table's columns do not show (``hidden`` they do, or that would only lengthen
    every line) and ``group_key`` filled. Lines whose ``shown`` cells would read the same though
    their settings differ (a float32 and a float64 run, say) show every setting no column shows."""
    out["how"] = [_how(r) for _, r in out.iterrows()]
    out["protocol"] = out["protocol"].fillna("").astype(str) if "protocol" in out.columns else ""
    out["protocol"] = out["protocol"].replace("", "none")
    groups = out["group"] if "group" in out.columns else pd.Series([""] * len(out), index=out.index)
    out["settings"] = [_settings(g, hidden) for g in groups]
    out["group_key"] = groups.fillna("").astype(str)   # every setting tells lines apart; the table shows those the columns do not
    if not out.empty:
        alike = out[shown].astype(str).agg("\x1f".join, axis=1)
        clash = out.groupby(alike, sort=False)["group_key"].transform("nunique") > 1
        if bool(clash.any()):
            out.loc[clash, "settings"] = [_settings(g, hidden - UNSHOWN) for g in out.loc[clash, "group_key"]]
    return out


UNSHOWN = frozenset({"device", "dtype", "experiment"})   # hidden to keep lines short, shown where two lines would read the same
HIDDEN = UNSHOWN | {"likelihood", "protocol", "gnn.uncertainty"}   # the others: in the likelihood / probabilities and protocol columns
CONFORMAL_SHOWN = HIDDEN | {"conformal", "conformal.alpha"}   # the conformal table's own columns


def _settings(group: str, hidden: frozenset) -> str:
    """A group's settings as ``key=value`` (those the other columns do not show)."""
    try:
        values = json.loads(group) if isinstance(group, str) and group else {}
    except ValueError:
        return ""
    return " ".join(f"{k}={v}" for k, v in sorted(values.items()) if k not in hidden)


def _cell(values: pd.Series) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return "-"
    return f"{values.mean():.3f}" + (f" +- {values.std():.3f}" if len(values) > 1 else "")


def table(rows: pd.DataFrame) -> str:
    """Markdown: a line per dataset, protocol, method and likelihood (mean +- std over the runs);
    then the regression runs' predictive uncertainty (:func:`regression_table`)."""
    found = scored(rows)
    lines = []
    if not found.empty:
        head = ["dataset", "protocol", "method", "likelihood / probabilities", "settings", "runs", "test", *COLUMNS, "seconds"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for (dataset, protocol, method, how, settings, _), group in found.groupby(KEYS, sort=True):
            cells = [display(dataset), protocol, method, how or "-", settings or "-", str(len(group)), _cell(group["test"]),
                     *[_cell(group[c]) if c in group.columns else "-" for c in COLUMNS], _cell(group["total_seconds"])]
            lines.append("| " + " | ".join(cells) + " |")
    regression = regression_table(rows)
    return "\n".join(lines) + ("\n" if lines else "") + ("\n" if lines and regression else "") + regression


REGRESSION = ["nlpd", "coverage95"]


def regression_table(rows: pd.DataFrame) -> str:
    """Markdown: the regression runs' predictive uncertainty, a line per dataset, protocol, method
    and settings: the test metric (R^2 by default), the mean negative log predictive density of the test
    targets and the share inside their 95% intervals (mean +- std over the runs)."""
    if "nlpd" not in rows.columns:
        return ""
    found = _labelled(rows[(rows["status"] == "ok") & pd.to_numeric(rows["nlpd"], errors="coerce").notna()].copy(), HIDDEN, KEYS[:-1])
    if found.empty:
        return ""
    head = ["dataset", "protocol", "method", "settings", "runs", "metric", "test", "NLPD", "coverage of the 95% interval", "seconds"]
    lines = ["Regression runs:", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (dataset, protocol, method, _, settings, _), group in found.groupby(KEYS, sort=True):
        metric = ", ".join(sorted({str(m) for m in group.get("metric", pd.Series(dtype=object)).dropna()})) or "-"
        cells = [display(dataset), protocol, method, settings or "-", str(len(group)), metric, _cell(group["test"]),
                 *[_cell(group[c]) if c in group.columns else "-" for c in REGRESSION], _cell(group["total_seconds"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


CONFORMAL = ["coverage", "set_size", "singleton_hit", "interval_width", "conformal_seconds"]


def conformal_table(rows: pd.DataFrame) -> str:
    """Markdown: a line per dataset, protocol, method, likelihood, conformal score and the other
    settings of the rows with conformal columns (mean +- std over the runs of each
    split-averaged column); runs with different settings are never averaged together."""
    if "conformal" not in rows.columns or "coverage" not in rows.columns:
        return ""
    keys = ["dataset", "protocol", "method", "how", "conformal", "conformal_alpha", "settings", "group_key"]
    found = _labelled(rows[(rows["status"] == "ok") & rows["conformal"].fillna("").astype(str).ne("")
                           & pd.to_numeric(rows["coverage"], errors="coerce").notna()].copy(), CONFORMAL_SHOWN, keys[:-1])
    if found.empty:
        return ""
    head = ["dataset", "protocol", "method", "likelihood / probabilities", "score", "alpha", "settings", "runs", "test", *CONFORMAL]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    trivial = 0
    for (dataset, protocol, method, how, score, alpha, settings, _), group in found.groupby(keys, sort=True):
        few = any("needs at least" in str(w) for w in _warnings(group))   # too few calibration nodes for alpha: every class
        trivial += few
        cells = [display(dataset), protocol, method, how or "-", str(score), f"{float(alpha):g}", settings or "-", str(len(group)),
                 _cell(group["test"]), *[_cell(group[c]) if c in group.columns else "-" for c in CONFORMAL]]
        cells[0] += " (*)" if few else ""
        lines.append("| " + " | ".join(cells) + " |")
    note = ("\n(*) too few calibration nodes for alpha (fewer than 1/alpha - 1 a split): every set holds every class, every "
            "interval is infinite; a larger conformal.calibration or alpha gives sets that mean something\n") if trivial else ""
    return "\n".join(lines) + "\n" + note


def _extra(group: pd.DataFrame, key: str) -> list:
    """The value under ``key`` of each row's ``extra`` (a JSON object) that has one."""
    out = []
    for extra in group.get("extra", pd.Series(dtype=object)):
        try:
            found = json.loads(extra) if isinstance(extra, str) else None
        except ValueError:
            found = None
        if isinstance(found, dict) and found.get(key) is not None:
            out.append(found[key])
    return out


def _warnings(group: pd.DataFrame) -> list[str]:
    """The warnings the rows' ``extra`` holds (a run's conformal warning among them)."""
    return [str(w) for found in _extra(group, "warnings") if isinstance(found, list) for w in found]


def _bins(group: pd.DataFrame) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    count = conf = acc = None
    for r in _extra(group, "reliability"):
        if not r:
            continue
        n = np.asarray(r["count"], dtype=float)
        c = np.nan_to_num(np.asarray([v if v is not None else np.nan for v in r["confidence"]], dtype=float)) * n
        a = np.nan_to_num(np.asarray([v if v is not None else np.nan for v in r["accuracy"]], dtype=float)) * n
        count, conf, acc = (n, c, a) if count is None else (count + n, conf + c, acc + a)
    return None if count is None else (count, conf, acc)


TITLE_WIDTH = 44   # characters of a panel title's line (7 pt in a 3.2 inch panel)


def _pairs(settings: str) -> list[str]:
    return settings.split() if settings else []


def shared_settings(keys: list[tuple]) -> list[str]:
    """The ``key=value`` settings every panel has (said once, above the panels)."""
    sets = [set(_pairs(key[4])) for key in keys]
    return sorted(set.intersection(*sets)) if sets and len(keys) > 1 else []


def panel_titles(keys: list[tuple]) -> list[str]:
    """Each panel's title, whole and wrapped to the panel's width: the dataset and protocol, the
    method and likelihood, and the settings that tell the panels apart (not those every panel
    shares, :func:`shared_settings`); never cut, so that no two panels read alike."""
    common = set(shared_settings(keys))
    out = []
    for dataset, protocol, method, how, settings, _ in keys:
        head = display(dataset) + ("" if protocol == "none" else f", {protocol}")
        own = [pair for pair in _pairs(settings) if pair not in common]
        lines = [head, f"{method} {how}".strip()] + textwrap.wrap(" ".join(own), TITLE_WIDTH, break_on_hyphens=False)
        out.append("\n".join(line for line in lines if line))
    return out


def reliability(rows: pd.DataFrame, path: Path) -> tuple[Optional[str], str]:
    """Reliability diagrams (accuracy against confidence per bin, the diagonal for reference) of
    up to :data:`PANELS` groups: the reason when there is nothing to draw, and what the figure's
    reader is told (how many groups it leaves out; its ECE is of the runs' bins pooled, which
    the table's mean of each run's ECE need not equal)."""
    found = scored(rows)
    if found.empty:   # regression runs alone: no class probabilities
        return "no row scored class probabilities (the regression runs' uncertainty is in the table)", ""
    groups = [(key, _bins(g)) for key, g in found.groupby(KEYS, sort=True)]
    groups = [(key, b) for key, b in groups if b is not None]
    if not groups:
        return "no row recorded the test nodes' confidence bins", ""
    left = f"; the first {PANELS} of {len(groups)} groups drawn (the table lists every one)" if len(groups) > PANELS else ""
    note = f"(each panel's ECE is of its runs' bins pooled, not the mean of each run's ECE that the table gives{left})"
    from .figures import _plt

    plt = _plt()
    shown = groups[:PANELS]
    cols = min(4, len(shown))
    fig, axes = plt.subplots((len(shown) + cols - 1) // cols, cols, figsize=(3.2 * cols, 3.2 * ((len(shown) + cols - 1) // cols)),
                             squeeze=False)
    titles = panel_titles([key for key, _ in shown])
    for ax, title, (_, (count, conf, acc)) in zip(axes.flat, titles, shown):
        bins = len(count)
        edges = np.linspace(0, 1, bins + 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = np.where(count > 0, acc / count, np.nan)
        ax.bar(edges[:-1], np.nan_to_num(accuracy), width=1 / bins, align="edge", edgecolor="black", linewidth=0.4, label="accuracy")
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=0.8)
        ece = float(np.abs(acc - conf).sum() / count.sum()) if count.sum() else float("nan")
        ax.set_title(f"{title} (pooled ECE {ece:.3f})", fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    common = shared_settings([key for key, _ in shown])
    if common:   # what every panel shares, once above them
        lines = textwrap.wrap("Every panel: " + " ".join(common), TITLE_WIDTH * cols)
        fig.suptitle("\n".join(lines), fontsize=7)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.15 * len(lines) / fig.get_figheight()))   # 0.15 inch a line of the title
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None, note
