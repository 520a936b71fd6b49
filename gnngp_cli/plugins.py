"""Registry entries from other installed packages: the ``gnngp.plugins`` entry points.

A package of one's own registers its kernels, datasets, GNNs, metrics or strategies in a module
(``register_kernel(...)``, ``register_dataset(...)``, ... at import) and names that module in its
``pyproject.toml``::

    [project.entry-points."gnngp.plugins"]
    mine = "my_package.gnngp_entries"

Once it is installed, ``gnngp run``, ``gnngp verify``, ``gnngp report`` and the Python API
import the module before composing any config, so ``gnngp run kernel=<its kernel>`` finds it
(docs/extending.md)."""
from __future__ import annotations

from importlib.metadata import entry_points
from typing import Mapping, Optional

from .errors import ConfigError

GROUP = "gnngp.plugins"
_LOADED: set[str] = set()   # the entry points imported in this process (each once)


def load_plugins(registries: Optional[Mapping[str, dict]] = None) -> list[str]:
    """Import every installed ``gnngp.plugins`` entry point not imported yet; the names imported.
    One that fails to import (or exits) is one line naming it, its package and the fix; one that
    replaces an entry already in ``registries`` (kind -> registry: a shipped dataset ``cora``)
    is refused, naming both: a plugin adds names, and never changes what a name ran before."""
    done = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        key = f"{point.name}={point.value}"
        if key in _LOADED:
            continue
        _LOADED.add(key)   # a failed one is not tried again in this process (its error was said once)
        package = point.dist.name if point.dist is not None else "its package"
        before = {kind: dict(registry) for kind, registry in (registries or {}).items()}
        try:
            point.load()
        except (Exception, SystemExit) as err:  # noqa: BLE001 - any failure of someone else's module is theirs, in one line
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise ConfigError(f"the gnngp plugin {point.name!r} ({point.value}, from {package}) failed to import "
                              f"({type(err).__name__}{': ' + first if first else ''}); fix it, or uninstall it: pip uninstall {package}") from None
        for kind, registry in (registries or {}).items():
            replaced = [name for name, entry in before[kind].items() if registry.get(name) is not entry]
            if replaced:
                for name, entry in before[kind].items():   # as it was: the plugin's entries never run in place of another's
                    registry[name] = entry
                raise ConfigError(f"the gnngp plugin {point.name!r} ({point.value}, from {package}) registers the {kind} "
                                  f"{replaced[0]!r}, which is registered already; a plugin adds entries under names of its own "
                                  f"(rename it in the plugin, e.g. {replaced[0]}_mine), or uninstall it: pip uninstall {package}")
        done.append(point.name)
    return done
