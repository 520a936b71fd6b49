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
_LOADED: set[str] = set()          # the entry points imported in this process (each once)
_FAILED: dict[str, str] = {}       # an entry point refused in this process -> its one line, said again at every load (never half-loaded)


def load_plugins(registries: Optional[Mapping[str, dict]] = None) -> list[str]:
    """Import every installed ``gnngp.plugins`` entry point not imported yet; the names imported.
    One that fails to import (or exits) is one line naming it, its package and the fix; one that
    replaces an entry already in ``registries`` (kind -> registry: a shipped dataset ``cora``), or
    adds a name that another entry answers to (:func:`_clash`: a kernel ``gcngp_x``, the low-rank
    twin's name; a kernel named as a GNN; a dataset named as a shipped preset; an activation named
    as a block), is refused, naming both: a plugin adds names, and never changes what a name ran
    before. A refused plugin leaves the registries as they were (none of its entries kept) and is
    refused again at every later load in the process (a notebook's second call)."""
    done = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        key = f"{point.name}={point.value}"
        if key in _FAILED:
            raise ConfigError(_FAILED[key])
        if key in _LOADED:
            continue
        _LOADED.add(key)
        package = point.dist.name if point.dist is not None else "its package"
        before = {kind: dict(registry) for kind, registry in (registries or {}).items()}
        problem = None
        try:
            point.load()
        except (Exception, SystemExit) as err:  # noqa: BLE001 - any failure of someone else's module is theirs, in one line
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            problem = (f"the gnngp plugin {point.name!r} ({point.value}, from {package}) failed to import "
                       f"({type(err).__name__}{': ' + first if first else ''}); fix it, or uninstall it: pip uninstall {package}")
        if problem is None:
            found = _replaced(before, registries or {}) or _clash(before, registries or {})
            if found is not None:
                kind, name, why = found
                problem = (f"the gnngp plugin {point.name!r} ({point.value}, from {package}) registers the {kind} {name!r}, {why}; a plugin "
                           f"adds entries under names of its own (rename it in the plugin, e.g. {name}_mine), or uninstall it: pip uninstall {package}")
        if problem is not None:
            for kind, registry in (registries or {}).items():   # as it was: the plugin's entries never run, in place of another's or at all
                registry.clear()
                registry.update(before[kind])
            _FAILED[key] = problem
            raise ConfigError(problem)
        done.append(point.name)
    return done


def _replaced(before: Mapping[str, dict], registries: Mapping[str, dict]) -> Optional[tuple[str, str, str]]:
    """The first entry of ``before`` a plugin replaced: (kind, name, why)."""
    for kind, registry in registries.items():
        replaced = [name for name, entry in before[kind].items() if registry.get(name) is not entry]
        if replaced:
            return kind, replaced[0], "which is registered already"
    return None


def _clash(before: Mapping[str, dict], registries: Mapping[str, dict]) -> Optional[tuple[str, str, str]]:
    """The first name a plugin added that another entry already answers to: (kind, name, why)."""
    def added(kind: str) -> list[str]:
        return [name for name in registries.get(kind, {}) if name not in before.get(kind, {})]
    kernels, gnns = registries.get("kernel", {}), registries.get("GNN", {})
    for kind in ("kernel", "GNN"):   # one config group, model=: kernel=<name>, <name>_x and gnn=<name> name one entry each
        for name in added(kind):
            if name.endswith("_x") and name[:-2] in kernels:
                return kind, name, f"the name of the kernel {name[:-2]!r}'s low-rank twin (kernel={name})"
            if kind == "kernel" and name in gnns:
                return kind, name, "the name of a GNN (gnn=" + name + ")"
            if kind == "GNN" and name in kernels:
                return kind, name, "the name of a kernel (kernel=" + name + ")"
    for name in added("dataset"):
        if name in registries.get("dataset preset", {}):
            return "dataset", name, "the name of a shipped preset (dataset=" + name + ")"
    for name in added("activation"):
        if name in registries.get("kernel block", {}):
            return "activation", name, "the name of a composed kernel's block"
    return None
