"""gnngp: Gaussian processes with graph-neural-network kernels (GNNGP), as a Hydra app."""
__version__ = "0.2.0"
