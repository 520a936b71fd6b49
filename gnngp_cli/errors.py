"""Exception types. Each message names the problem and the fix, on one line."""


class GnngpError(Exception):
    """Base class: the CLI prints these as one line, without a traceback. A message that quotes
    another library's (pandas' "Error tokenizing data. C error: ...\\n") is kept on one line:
    its line breaks become spaces."""

    def __str__(self) -> str:
        text = super().__str__()
        return " ".join(line.strip() for line in text.splitlines() if line.strip()) if "\n" in text or "\r" in text else text


class ConfigError(GnngpError):
    """An impossible or inconsistent configuration value."""


class DatasetError(GnngpError):
    """A dataset that is unknown, missing, or whose files are corrupt."""


class DatasetUnavailable(DatasetError):
    """A dataset that is neither in the cache nor in the mirror, and could not be downloaded."""


class KernelError(GnngpError):
    """A kernel that is numerically invalid (e.g. lost positive semi-definiteness)."""


class ResourceError(GnngpError):
    """A computation that would not fit in memory."""


class ComputeError(GnngpError):
    """A compute backend that cannot run the job (an unreachable scheduler, no workers)."""


class NotFittedError(GnngpError, RuntimeError):
    """A fitted model's method called before ``fit`` (as scikit-learn's ``NotFittedError``, a
    ``RuntimeError`` here: the object is in the wrong state, not given a wrong value)."""


class NotSavedError(GnngpError, TypeError):
    """An object that holds live state of this process (a fitted :class:`~gnngp_cli.api.NodeGP`)
    asked to be pickled or deep-copied (a ``TypeError``, as pickle's own refusals are)."""


def grid_edge(what: str, chosen: float, low: float, high: float, fix: str, unit: str = "") -> str:
    """The one wording of a warning that a value chosen on validation (a nugget, a temperature, a
    weight decay) is the lowest or highest of its grid, so the best may lie beyond it: ``what`` the
    value (``"the nugget chosen on validation"``), ``unit`` what follows the number, ``fix`` what to do."""
    side = "lowest" if chosen == low else "highest"
    return f"{what} is {chosen:g}{unit}, the {side} value of its grid ({low:g}..{high:g}), so the best may lie beyond it; {fix}"
