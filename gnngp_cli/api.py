"""Python entry points: compose the same config as ``gnngp run`` and run it in-process.

    >>> from gnngp_cli.api import compose, run
    >>> rows = run(["dataset=cora", "kernel=gcngp_x"])
"""
from __future__ import annotations

from typing import Optional, Sequence

from omegaconf import DictConfig

from .backends import compute_options
from .compose import compose as compose_config
from .config import needs_validation
from .execute import run_job
from .invariants import checked_rows


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The composed, typed config for these Hydra overrides (no output dir is created)."""
    return compose_config(overrides, compute_options(), config_name)


def run(overrides: Sequence[str] = (), cfg: Optional[DictConfig] = None) -> list[dict]:
    """Run one job (GP kernel or GNN) in-process and return its result rows (no CSV is written);
    a row whose metric is not a number is an error row, as in ``gnngp run``."""
    cfg = cfg if cfg is not None else compose(overrides)
    return checked_rows(run_job(cfg), validation=needs_validation(cfg))
