"""The paper's figures from result rows (matplotlib, no display): which methods and datasets
each draws is its experiment's sweep (:mod:`.layouts`)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from .layouts import display, experiment, model_label
from .reading import default_depth, preset, preset_runs


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
    """Total time of each method of the experiment (Table 4's) normalised by GCN's time on the
    same dataset: a log axis with GCN's reference line at 1 and every bar's value printed on it,
    so a bar at 0.45 reads as 0.45 wherever the axis starts. Only rows with the preset's settings count."""
    exp = experiment("figure1")
    methods = [model_label(m) for m in exp.models]
    ok = preset(default_depth(rows[(rows["status"] == "ok") & rows["dataset"].isin(exp.datasets)]))
    times = ok.groupby(["dataset", "method"])["total_seconds"].mean().unstack()
    if "GCN" not in times.columns or times["GCN"].dropna().empty:
        return "no GCN timing to normalise by"
    ratio = times.div(times["GCN"], axis=0).dropna(how="all")
    ratio = ratio[[m for m in methods if m in ratio.columns]].dropna(subset=["GCN"])
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
    ax.set_xticks(np.arange(len(ratio)) + 0.4 - width / 2, [display(d) + ("\n(csbm stand-in)" if d in stand_ins else "") for d in ratio.index])
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


def _scale(ax, which: str, values) -> str:
    """A log axis, every decade labelled (:func:`_every_decade`), where ``values`` span a decade or
    more; a linear one where they span less, which a log axis would leave with no tick and so no
    number (one or two close sizes, times, landmark counts). The scale chosen: ``log`` or ``linear``."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) and values.max() >= 10 * values.min():
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
        _every_decade(ax, which)
        return "log"
    (ax.set_xscale if which == "x" else ax.set_yscale)("linear")
    return "linear"


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def figure2(rows: pd.DataFrame, path: Path) -> Optional[str]:
    """Time against graph size M + N on log-log axes, every decade labelled. Each method's
    slope is fitted over one family of runs (the same experiment, depth, device and dtype: the
    largest such family), with its number of runs; a negative slope is not a scaling law and is
    not printed as one."""
    methods = [model_label(m) for m in experiment("figure2").models]
    ok = preset_runs(rows[(rows["status"] == "ok") & rows["method"].isin(methods)]).copy()
    ok["size"] = pd.to_numeric(ok["n_nodes"], errors="coerce") + pd.to_numeric(ok["n_edges"], errors="coerce")
    ok = default_depth(ok).dropna(subset=["size", "total_seconds"])
    if ok.empty:
        return f"no timed {'/'.join(methods)} rows"
    for column in ("experiment", "device", "dtype"):
        ok[column] = ok[column].fillna("").astype(str)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for method in [m for m in methods if m in set(ok["method"])]:
        group = ok[ok["method"] == method]
        families = group.groupby(["experiment", "device", "dtype"])
        key = max(families.groups, key=lambda k: (families.get_group(k)["size"].nunique(), len(families.get_group(k))))
        family = families.get_group(key)
        points = family.groupby("size")["total_seconds"].mean()
        others = group.drop(family.index)
        line = ax.scatter(points.index, points.to_numpy(), label=f"{method} ({key[0] or 'runs'}, {_counted(len(points), 'size')})")
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
    _every_decade(ax, "x")
    lo, hi = ok["size"].min(), ok["size"].max()
    ax.set_xlim(10 ** np.floor(np.log10(lo)), 10 ** np.ceil(np.log10(hi) + 1e-9))   # a decade at least: labelled
    ax.set_xlabel("graph size M + N (directed edges + nodes)")
    ax.set_ylabel("time (s" + ("" if _scale(ax, "y", ok["total_seconds"]) == "log" else ", linear: under a decade") + ")")
    ax.set_title("Figure 2: scalability")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


FIGURE3_NOTE = ("GCNIIGP at L >= 3 is the paper's kernel recursion, not the wide-network limit of GCNII: the identity mapping "
                "passes rectified, non-Gaussian features to the next ReLU (gnngp verify kernel=gcn2gp kernel.layers=3 fails).")


def figure3(rows: pd.DataFrame, path: Path) -> Optional[str]:
    """Accuracy against depth of the experiment's methods on its dataset (PubMed: GCN, GCNGP,
    GCNII and GCNIIGP), captioned with :data:`FIGURE3_NOTE`."""
    exp = experiment("figure3")
    where = " and ".join(display(d) for d in exp.datasets)
    ok = preset_runs(rows[(rows["status"] == "ok") & rows["dataset"].isin(exp.datasets) & rows["method"].isin([model_label(m) for m in exp.models])])
    if ok["layers"].nunique() < 2:
        return f"fewer than two depths on {where}"
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, group in ok.groupby("method"):
        stats = group.groupby("layers")["test"].agg(["mean", "std"]).fillna(0)
        ax.errorbar(stats.index, stats["mean"], yerr=stats["std"], marker="o", capsize=3, label=method)
    ax.set_xlabel("depth L")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"Figure 3: depth on {where}")
    ax.legend()
    fig.text(0.01, 0.01, "Note: " + FIGURE3_NOTE, fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def figure4(rows: pd.DataFrame, path: Path) -> Optional[str]:
    """The experiment's low-rank kernel's (GCNGP-X) test metric and time against the number of landmarks."""
    methods = [model_label(m) for m in experiment("figure4").models]
    ok = preset_runs(rows[(rows["status"] == "ok") & rows["method"].isin(methods)]).dropna(subset=["landmark_fraction"])
    ok = ok[ok.groupby("dataset")["landmark_fraction"].transform("nunique") >= 2]
    if ok.empty:
        return f"no landmark sweep ({'/'.join(methods)} at two or more landmark fractions)"
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    gcn = preset(default_depth(rows[(rows["status"] == "ok") & (rows["method"] == "GCN")]))
    for dataset, group in ok.groupby("dataset"):
        stats = group.groupby("landmark_fraction").agg(landmarks=("landmarks", "mean"), test=("test", "mean"), seconds=("total_seconds", "mean")).sort_values("landmarks")
        label = display(dataset) + (" (stand-in)" if group["stand_in"].astype(bool).any() else "")
        line, = left.plot(stats["landmarks"], stats["test"], marker="o", label=label)
        reference = gcn[gcn["dataset"] == dataset]["test"]
        if len(reference):
            left.axhline(reference.mean(), color=line.get_color(), linestyle=":", label=f"GCN on {label}")
        right.plot(stats["landmarks"], stats["seconds"], marker="o", label=label)
    for ax, ylabel in ((left, "test metric"), (right, "time (s)")):
        _scale(ax, "x", ok["landmarks"])
        ax.set_xlabel("landmarks")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    if _scale(right, "y", ok.groupby(["dataset", "landmark_fraction"])["total_seconds"].mean()) == "linear":
        right.set_ylabel("time (s, linear: under a decade)")
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
