"""The compute backends of a GP job (``compute=<name>``), each implementing
:class:`gnngp_cli.job.backend_interface.Backend`:

- ``local``: tensors of this process, on the CPU or a GPU (:mod:`.local`);
- ``dask``, ``slurm``: low-rank kernels on row blocks of a Dask cluster, local, at
  ``compute.address`` or on SLURM jobs (:mod:`.rowblocks`; Dask is imported when one runs).

A new backend is one entry of :data:`BACKENDS`: its class (constructed with the job's config)
and the ``compute=`` option's defaults.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError
from ..schema import ComputeConfig
from .local import LocalBackend


def _rowblocks(spec: Any) -> Any:
    import importlib.util

    missing = [name for name in ("dask", "distributed") if importlib.util.find_spec(name) is None]
    if missing:   # the package installed without its dask extra: one line, before any work
        raise ConfigError(f"compute={spec.compute.backend} needs {' and '.join(missing)}, which are not installed; install gnngp with "
                          "the dask extra (pip install 'gnngp[dask]', or pip install -e '.[dask]' in a checkout), or use compute=local")
    from .rowblocks.dask_backend import DaskBackend

    return DaskBackend(spec)


@dataclass(frozen=True)
class BackendEntry:
    name: str
    make: Callable[[Any], Any]       # spec -> a backend for one job
    options: ComputeConfig           # the compute=<name> option
    external: bool = False           # needs a system beyond this machine (a SLURM scheduler): the parity tests leave it out


BACKENDS: dict[str, BackendEntry] = {}


def plugin_registries() -> dict[str, dict]:
    """Every registry a plugin adds to (:func:`~gnngp_cli.compose.registries`, and the backends):
    what :func:`~gnngp_cli.plugins.load_plugins` guards (a plugin replacing ``local`` broke every run)."""
    from ..compose import registries

    return {**registries(), "backend": BACKENDS}


def register_backend(name: str, make: Callable[[Any], Any], options: ComputeConfig, external: bool = False) -> None:
    BACKENDS[name] = BackendEntry(name, make, options, external)


register_backend("local", LocalBackend, ComputeConfig(backend="local"))
register_backend("dask", _rowblocks, ComputeConfig(backend="dask"))
register_backend("slurm", _rowblocks, ComputeConfig(backend="slurm", workers=1), external=True)   # the dask backend on SLURM jobs


def compute_options() -> dict[str, ComputeConfig]:
    """The ``compute=`` options, for the config store."""
    return {name: entry.options for name, entry in BACKENDS.items()}


def backend_for(spec: Any) -> Any:
    """The backend of ``spec.compute.backend`` for one job."""
    name = spec.compute.backend
    if name not in BACKENDS:
        raise ConfigError(f"compute.backend={name!r} is not a backend; use one of {', '.join(BACKENDS)}")
    return BACKENDS[name].make(spec)
