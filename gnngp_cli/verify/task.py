"""``gnngp verify``: the check set up from the run config, its table, verdict and ``verify.csv``.

The graph is an induced subgraph (``verify.num_nodes`` nodes, a breadth-first ball around a
seeded node) of the configured dataset with its real features, divided by their mean row
norm (``verify.unit_norm``) so the weights, biases and ``C0`` all matter. Both the kernel and
the networks read these features after ``kernel.base.scale``.
"""
from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import torch
from torch import Tensor

from ..config import parse, with_method_defaults
from ..errors import ConfigError, ResourceError
from ..job.estimate import size_text
from ..runtime import memory_limit_bytes
from ..job.loading import load_graph
from ..kernels import KERNELS, BaseKernel
from ..kernels.architectures import plain
from ..schema import RunConfig, revised
from .oracles import ORACLES
from .wide_check import NETWORK_DTYPE, BaseSpec, Check, CheckResult, analytic_kernel, run_check, tangent_parts
from .activation_check import Observed
from .features import check_base
from .subgraph import CheckGraph, induced_subgraph, restrict


@dataclass
class CheckSetup:
    check: Check
    kernel: Tensor  # the analytic kernel (n x n, float64)
    label: str
    description: str
    parts: tuple[str, ...] = ()   # a tangent kernel's parts (one per block with parameters), named
    part_kernels: Optional[Tensor] = None   # their kernels (P x n x n; they sum to ``kernel``)
    observed: tuple = ()          # the activation blocks the kernel read, for the activation check (verify.activation_check)

    @property
    def kernels(self) -> Tensor:
        """The whole kernel, then its parts: what the check compares the networks with."""
        return self.kernel[None] if self.part_kernels is None else torch.cat([self.kernel[None], self.part_kernels])


# Settings left null take these in the check, so that every block is exercised: a bias and
# SAGE's root weight that are not zero (the run's defaults are 0 on classification sets), and a
# signed degree-2 filter for a kernel whose filter is chosen on validation (GPRGP).
VERIFY_DEFAULTS = {"sigma_b": 0.5, "sigma_w1": 0.5, "coefficients": [1.0, -1.0, 1.0]}


def check_network(kernel: Any, oracle: bool = False) -> None:
    """Refuse, before any work, an oracle the kernel has none of, or several candidates of a value
    the run would choose."""
    entry = KERNELS[kernel.name]
    if oracle and kernel.name not in ORACLES:
        raise ConfigError(f"verify.oracle=true samples a hand-written network, and kernel={kernel.name} has none; "
                          f"use verify.oracle=false (its blocks' own network), or kernel={' or kernel='.join(ORACLES)}")
    if oracle and str(kernel.get("limit", "nngp")) == "ntk":
        raise ConfigError("verify.oracle=true samples the hand-written network's outputs, and kernel.limit=ntk checks tangent kernels, "
                          "which gnngp verify takes of the blocks' own layers (their parameters, part by part); use verify.oracle=false with "
                          "kernel.limit=ntk, or the oracle with kernel.limit=nngp")
    for name, candidates in entry.candidates(kernel).items():
        if len(candidates) > 1:
            raise ConfigError(f"gnngp verify checks one network, but kernel.{name} gives {len(candidates)} candidates (a run chooses among "
                              f"them on validation); give one, e.g. kernel.{name}={list(candidates[0])}")


def verify_spec(spec: Any) -> RunConfig:
    """The check's spec: the run's (a composed config is parsed here, :func:`~gnngp_cli.config.parse`),
    its kernel's ``null`` settings given :data:`VERIFY_DEFAULTS`."""
    spec = parse(spec, command="verify")
    kernel = spec.kernel
    filled = {key: value for key, value in VERIFY_DEFAULTS.items() if hasattr(kernel, key) and getattr(kernel, key) is None}
    return revised(spec, kernel=revised(kernel, **filled)) if filled else spec


NETWORK_MATRICES = 4   # width x width matrices alive per layer and one more: the weights, a layer's output and (tangent kernels) their gradients, GCNII's residual


def check_width_memory(spec: Any) -> None:
    """Refuse, before any sampling, widths whose one network would not fit: about
    ``NETWORK_MATRICES (L + 1) w^2`` entries of the networks' dtype at width ``w``."""
    widest, layers = max(spec.verify.widths), int(spec.kernel.get("layers", 2) or 2)
    entry = torch.finfo(NETWORK_DTYPE).bits // 8
    per_square = NETWORK_MATRICES * (layers + 1) * entry
    need = per_square * float(widest) ** 2
    limit = memory_limit_bytes(spec.max_memory_gb, torch.device("cpu"))
    if need > limit:
        fits = int(math.sqrt(limit / per_square))
        raise ResourceError(f"verify.widths: a network of width {widest:,} ({layers} layers) holds about {size_text(need)} and the limit is "
                            f"{size_text(limit)} (max_memory_gb; default half of the free memory); use widths up to {fits:,} "
                            "(the defaults, 64 to 512, find an error of 2% four times in five, drawing more networks where they need: verify.resolution)")


def prepare_check(spec: Any) -> CheckSetup:
    """The subgraph, the analytic kernel (the package's blocks) and the network family."""
    spec = verify_spec(spec)
    check_width_memory(spec)
    check_base(spec.kernel.base.name, spec.kernel.base.d)
    check_network(spec.kernel, spec.verify.oracle)
    graph = load_graph(spec)
    data = graph.data.cpu()
    spec = with_method_defaults(spec, data.task)   # the method's other defaults for the dataset
    kspec = spec.kernel
    entry = KERNELS[kspec.name]
    arch = entry.architecture(kspec)
    v = spec.verify
    nodes = induced_subgraph(data.edge_index, data.num_nodes, v.num_nodes, spec.seed)
    edge_index = restrict(data.edge_index, nodes, data.num_nodes)
    x = data.x[nodes].double()
    if kspec.base.scale != 1:
        x = x * math.sqrt(kspec.base.scale)
    if v.unit_norm:
        mean_norm = float(x.norm(dim=1).mean())
        x = x / mean_norm if mean_norm > 0 else x
    graph = CheckGraph.build(edge_index, v.num_nodes, arch.adjacency, NETWORK_DTYPE)
    base = BaseKernel(kspec.base.name, kspec.base.gamma, kspec.base.c, kspec.base.d)
    seen: list[Observed] = []
    kernel = analytic_kernel(arch.network, x, graph.edge_index, arch.adjacency, base,
                             observe=lambda block, k: seen.append(Observed.of(block, k)))
    limit = str(kspec.get("limit", "nngp"))
    names, parts = tangent_parts(arch.network, x, graph.edge_index, arch.adjacency, base) if limit == "ntk" and not v.oracle else ((), [])
    params = {key: plain(value) for key, value in entry.arguments(kspec).items()}   # the same arguments the kernel's builder reads
    params.update({name: list(candidates[0]) for name, candidates in entry.candidates(kspec).items()})
    check = Check(x, graph, kspec.name, params, BaseSpec(kspec.base.name, kspec.base.gamma, kspec.base.c, kspec.base.d), limit, v.oracle)
    made = ORACLES[kspec.name].layers_text if v.oracle else "its blocks' own layers"
    what = "empirical tangent kernels of " if limit == "ntk" else ""
    description = (f"{what}{v.seeds} random networks per width ({made}, L={kspec.layers}) on a {v.num_nodes}-node induced "
                   f"subgraph of {str(spec.dataset.name).lower()} ({graph.edge_index.size(1) // 2} edges, {x.size(1)} features), {kspec.base.name} C0")
    return CheckSetup(check, kernel, arch.label, description, tuple(names), torch.stack(parts) if len(parts) > 1 else None, tuple(seen))


def result_table(spec: Any, label: str, result: CheckResult, overrides: str = "") -> pd.DataFrame:
    """One row per width: the error, its bootstrap interval, the noise, and the verdict columns;
    every row of one check carries its ``overrides`` and the same ``timestamp``."""
    v = result.verdict
    stamp = check_time()
    return pd.DataFrame([{
        "kernel": spec.kernel.name, "method": label, "layers": spec.kernel.layers, "dataset": str(spec.dataset.name).lower(),
        "num_nodes": spec.verify.num_nodes, "width": r.width, "samples": r.seeds, "relative_error": r.relative_error,
        "error_low": r.error_low, "error_high": r.error_high, "noise": r.noise, "noise_ratio": r.noise_ratio,
        "slope": v.slope, "slope_low": v.slope_low, "slope_high": v.slope_high, "p_value": v.p_value,
        "shift": v.shift.estimate, "shift_se": v.shift.se, "shift_p": v.shift.p_value, "detectable": v.shift.detectable,
        "level": v.level, "verdict": v.label, "seconds": result.seconds, "error": "", "overrides": overrides, "timestamp": stamp,
    } for r in result.widths])


def check_time() -> str:
    """A check's ``timestamp`` (to the microsecond: the rows of one check are those of one stamp)."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def error_table(spec: Any, err: Exception, overrides: str = "") -> pd.DataFrame:
    """The row of a check that could not run (a sweep's job: the summary reads it)."""
    kernel = getattr(getattr(spec, "kernel", None), "name", None) or ""
    dataset = str(getattr(getattr(spec, "dataset", None), "name", "") or "").lower()
    return pd.DataFrame([{"kernel": kernel, "dataset": dataset, "verdict": "ERROR", "error": str(err).replace("\n", " "),
                          "overrides": overrides, "timestamp": check_time()}])


def append_table(path: Path, table: pd.DataFrame) -> tuple[int, str]:
    """Add ``table``'s rows to ``path`` (a ``verify.csv``), which keeps the rows of earlier checks
    in the folder; written whole to a temporary and renamed (a stop leaves the old file whole).
    A file that does not read as a table is moved aside first. Returns the rows kept from before,
    and a note saying what was moved aside, or ''."""
    from ..data.files import atomic_write

    note, kept = "", 0
    if path.exists():
        try:
            with warnings.catch_warnings():   # a row longer than the header would be cut: not a table of ours
                warnings.simplefilter("error", pd.errors.ParserWarning)
                earlier = pd.read_csv(path, dtype=str, keep_default_na=False, index_col=False)
            if not {"kernel", "verdict"} <= set(earlier.columns):   # a file of someone else's (an earlier version's has both)
                raise ValueError(f"it has no kernel and verdict columns (it has {', '.join(map(str, earlier.columns[:5]))})")
            cut = [i + 2 for i, (verdict, stamp) in enumerate(zip(earlier["verdict"], earlier.get("timestamp", earlier["verdict"])))
                   if not verdict or not stamp]   # every row of a check has both: a row without them was cut short (a writer killed mid-row)
            if cut:
                raise ValueError(f"its line {cut[0]} has no verdict or timestamp: cut short")
        except Exception as err:  # noqa: BLE001 - pandas raises many types for a damaged file
            aside = path.with_name(f"verify.malformed-{check_time().replace(':', '')}.csv")
            path.replace(aside)
            note = f"{path} is not a verify.csv that reads ({type(err).__name__}: {err}), moved to {aside}; the new rows start a fresh file"
        else:
            kept = len(earlier)
            table = pd.concat([earlier, table.astype(object)], ignore_index=True)
    atomic_write(path, lambda f: table.to_csv(f, index=False))
    return kept, note


def verify(spec: Any, out_dir: Path, overrides: str = "") -> CheckResult:
    """Run the check, print the table and verdict, add its rows to ``verify.csv`` (``overrides``:
    the job's, as a results row records them)."""
    spec = parse(spec, command="verify")
    v = spec.verify
    prepared = prepare_check(spec)
    print(f"{prepared.label}: {prepared.description}", flush=True)
    result = run_check(prepared.check, prepared.kernels, sorted(v.widths), v.seeds, spec.seed, v.bootstrap, v.level,
                       progress=lambda width: print(f"  sampling width {width}", file=sys.stderr, flush=True), names=prepared.parts,
                       observed=prepared.observed, activation_samples=v.activation_samples, resolution=v.resolution, max_seeds=v.max_seeds,
                       more=lambda count: print(f"  {count:,} more networks a width, to find an error of {100 * v.resolution:g}% along the kernel "
                                                "(verify.resolution)", file=sys.stderr, flush=True))
    table = result_table(spec, prepared.label, result, overrides)
    out = out_dir / "verify.csv"
    kept, note = append_table(out, table)
    if note:
        print(f"gnngp: warning: {note}", file=sys.stderr)
    confidence = f"{100 * (1 - result.verdict.level):g}%"   # a check that looked twice: each look at half of verify.level
    shown = pd.DataFrame({
        "width": table["width"], "relative_error": table["relative_error"].map("{:.4f}".format),
        f"{confidence} interval": [f"[{lo:.4f}, {hi:.4f}]" for lo, hi in zip(table["error_low"], table["error_high"])],
        "noise": table["noise"].map("{:.4f}".format), "error/noise": table["noise_ratio"].map("{:.2f}".format),
    })
    verdict = result.verdict
    sampled = "mean empirical tangent kernel (J J^T)" if prepared.check.limit == "ntk" else "mean output covariance"
    print(f"relative Frobenius error of the networks' {sampled} against the kernel "
          "(interval: bootstrap over seeds; noise: the error expected from Monte-Carlo noise alone)")
    print(shown.to_string(index=False))
    print(f"slope of log error against log width: {verdict.slope:.2f}, {confidence} interval [{verdict.slope_low:.2f}, {verdict.slope_high:.2f}] (theory: -0.5)")
    statistic = "empirical tangent kernel" if prepared.check.limit == "ntk" else "network covariance"
    print(f"randomisation test of E[{statistic}] = kernel: p = {verdict.p_value:.2g} (level {verdict.level / 2:g})")
    for shift in verdict.activations:
        print(f"relative error of {shift.part} against direct Monte Carlo of the activation ({v.activation_samples:,} Gaussian draws): "
              f"{100 * shift.estimate:+.3f}% +- {100 * shift.se:.3f}% (p = {shift.p_value:.2g}, level {verdict.alpha:.2g}); "
              f"detectable: {100 * shift.detectable:.2f}%")
    for shift in (verdict.shift, *verdict.parts):
        print(f"relative error of {shift.part} along itself, pooled over widths: {100 * shift.estimate:+.2f}% +- {100 * shift.se:.2f}% "
              f"(p = {shift.p_value:.2g}, level {verdict.alpha:.2g}); detectable: {100 * shift.detectable:.2f}% (found four times in five)")
    power = (f"; with {result.widths[0].seeds} networks a width it finds an error of {100 * verdict.shift.detectable:.2f}% along the kernel four "
             f"times in five (verify.resolution={v.resolution:g})") if verdict.passed else ""
    print(f"verdict: {verdict.label}: {verdict.reason}{power}")
    print(f"wrote {out}" + (f" (after the {kept} row{'s' if kept != 1 else ''} of earlier checks in it)" if kept else ""))
    return result
