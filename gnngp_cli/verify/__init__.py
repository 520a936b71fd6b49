"""``gnngp verify``: wide random networks (PyTorch Geometric layers) against the analytic
kernels, with a statistical verdict. See :mod:`.wide_check` and :mod:`.statistics`."""
from .wide_check import BaseSpec, Check, CheckResult, analytic_kernel, run_check, sample_deviations, wide_network
from .subgraph import CheckGraph, induced_subgraph, restrict
from .statistics import Verdict, WidthSummary

__all__ = [
    "BaseSpec", "Check", "CheckGraph", "CheckResult", "Verdict", "WidthSummary", "analytic_kernel",
    "induced_subgraph", "restrict", "run_check", "sample_deviations", "wide_network",
]
