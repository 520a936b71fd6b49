"""gnngp: Gaussian processes with graph-neural-network kernels (GNNGP), as a Hydra app."""
from .version import __version__

__all__ = ["NodeGP", "load_dataset", "__version__"]
API = ("NodeGP", "load_dataset")


def __getattr__(name: str):
    """``from gnngp_cli import NodeGP, load_dataset`` (the Python API, :mod:`gnngp_cli.api`),
    imported on first use so that the command line starts without it."""
    if name in API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'gnngp_cli' has no attribute {name!r}")
