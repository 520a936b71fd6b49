"""The package version (a leaf: every layer may read it without importing the package)."""
__version__ = "0.2.0"
