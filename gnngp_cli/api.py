"""Python entry points: compose the same config as ``gnngp run`` and run it in-process.

    >>> from gnngp_cli.api import compose, run
    >>> rows = run(["dataset=cora", "kernel=gcngp_x"])
"""
from __future__ import annotations

from typing import Optional, Sequence

from omegaconf import DictConfig


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The composed, typed config for these Hydra overrides (no output dir is created)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from .cli import config_dir
    from .config import method_overrides, register_configs

    overrides = method_overrides(list(overrides))
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        return hydra_compose(config_name=config_name, overrides=overrides)


def run(overrides: Sequence[str] = (), cfg: Optional[DictConfig] = None) -> list[dict]:
    """Run one job (GP kernel or GNN) in-process and return its result rows (no CSV is written);
    a row whose metric is not a number is an error row, as in ``gnngp run``."""
    from .config import needs_validation
    from .invariants import checked_rows
    from .runner import run_job

    cfg = cfg if cfg is not None else compose(overrides)
    return checked_rows(run_job(cfg), validation=needs_validation(cfg))
