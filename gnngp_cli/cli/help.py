"""``gnngp run --help`` and ``gnngp verify --help``: every config group with its options, and
every key of the composed config on one line with its value and what it is.

A key's description is the comment beside its field in the typed schemas
(:func:`gnngp_cli.schema.field_descriptions`), and a group's the comment beside it in the
config's defaults list (``gnngp_cli/conf/config.yaml``): each is written once, where the key or
group is declared. Hydra's own app help composes the whole config store once per config group
(64 times here; it took as long as importing torch); this composes it once.
"""
from __future__ import annotations

import sys

HYDRA_GROUPS = {   # Hydra's own groups that this package ships options for (conf/hydra/...): what each chooses
    "hydra/launcher": "how a sweep (-m) runs its jobs: Hydra's basic (in turn, the default), joblib, submitit_local "
                      "(their plugins installed), or this package's",
}


def _defaults_list(config_name: str) -> dict[str, tuple[str, str]]:
    """``group -> (default option, description)`` from the defaults list of ``conf/<config_name>.yaml``
    (and the configs it names): the comment beside each entry describes its group."""
    import re

    from ..compose import config_dir

    entries: dict[str, tuple[str, str]] = {}
    text = (config_dir() / f"{config_name}.yaml").read_text()
    for line in text.split("\nhydra:", 1)[0].splitlines():
        match = re.match(r"\s*-\s*(?:optional\s+)?([\w/]+)\s*(?::\s*([^\s#]+))?\s*(?:#\s*(.*))?$", line)
        if not match or match.group(1) == "_self_":
            continue
        group, option, comment = match.groups()
        if option is None:   # another config of the folder (verify.yaml: - config): its groups
            entries.update(_defaults_list(group) if (config_dir() / f"{group}.yaml").is_file() else {})
        else:
            entries[group] = (option, (comment or "").strip())
    return entries


def plugin_launchers() -> list[str]:
    """Hydra's launchers beside this package's: basic (Hydra's own), and those of the launcher
    plugins installed (the ``launchers`` extra: joblib, submitit_local and submitit_slurm)."""
    import importlib.util

    plugins = {"hydra_plugins.hydra_joblib_launcher": ["joblib"], "hydra_plugins.hydra_submitit_launcher": ["submitit_local", "submitit_slurm"]}
    found = ["basic"]
    for module, names in plugins.items():
        try:
            installed = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:   # hydra_plugins itself absent
            installed = False
        found += names if installed else []
    return found


def config_groups(config_name: str = "config") -> dict[str, tuple[list[str], str, str]]:
    """Every config group: ``group -> (options, default, description)``. The groups the
    registries store (``dataset``, ``model``, ``fit``, ``compute``) and every folder of YAML
    options under ``gnngp_cli/conf`` (``experiment``, ``hydra/launcher``, ...); a group's
    description is the comment beside it in the config's defaults list."""
    from hydra.core.config_store import ConfigStore

    from ..backends import compute_options
    from ..compose import config_dir, register_configs

    if "model" not in ConfigStore.instance().repo:   # the registries' options (a composed config has stored them)
        register_configs(compute_options())
    options: dict[str, set[str]] = {}
    for group, entries in ConfigStore.instance().repo.items():
        if isinstance(entries, dict) and group != "hydra":
            options.setdefault(group, set()).update(name.removesuffix(".yaml") for name in entries)
    root = config_dir()
    for path in root.rglob("*.yaml"):
        if path.parent != root:
            options.setdefault(path.parent.relative_to(root).as_posix(), set()).add(path.stem)
    options.setdefault("hydra/launcher", set()).update(plugin_launchers())
    listed = _defaults_list(config_name)
    out = {}
    for group, names in sorted(options.items()):
        default, description = listed.get(group, ("", ""))
        out[group] = (sorted(names), "" if default == "null" else default, description or HYDRA_GROUPS.get(group, ""))
    return out


def _value_text(value) -> str:
    """A config value as it is written on the command line (``null``, ``true``, ``[1, 2]``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def config_key_lines(cfg) -> list[tuple[str, str, str]]:
    """Every key of a composed config: ``(dotted key, value as written, description)``, a
    section's own keys before its sections; a section (a key holding keys) has the value
    ``""``. Descriptions come from the typed schemas' field comments
    (:func:`gnngp_cli.schema.field_descriptions`)."""
    from dataclasses import is_dataclass

    from omegaconf import DictConfig, OmegaConf

    from ..schema import field_descriptions

    lines: list[tuple[str, str, str]] = []

    def walk(node: DictConfig, raw: dict, prefix: str) -> None:
        kind = OmegaConf.get_type(node)
        described = field_descriptions(kind) if isinstance(kind, type) and is_dataclass(kind) else {}
        sections = {key for key, value in raw.items() if isinstance(value, dict) and isinstance(node[key], DictConfig)}
        for key, value in raw.items():   # a section's own keys first, then its sections
            if key not in sections:
                lines.append((f"{prefix}{key}", _value_text(value), described.get(key, "")))
        for key in (k for k in raw if k in sections):
            lines.append((f"{prefix}{key}", "", described.get(key, "")))
            walk(node[key], raw[key], f"{prefix}{key}.")

    walk(cfg, OmegaConf.to_container(cfg, resolve=False), "")
    return lines


def run_help(overrides: list[str], config_name: str = "config") -> None:
    """``gnngp run --help`` (``gnngp verify --help``): the help header, every config group with
    its options, and every key of the composed config with its value and one line saying what
    it is (the schemas' field comments), then the footer. A config that does not compose is
    one line ``gnngp: error: ...`` and exit status 1."""
    import textwrap

    from omegaconf import OmegaConf

    from ..backends import compute_options
    from .messages import one_line
    from ..compose import compose, config_dir

    app = OmegaConf.load(config_dir() / f"{config_name}.yaml").hydra.help
    chosen = [o for o in overrides if not o.startswith(("hydra.", "hydra/", "-"))]
    try:
        cfg = compose(chosen, compute_options(), config_name=config_name)
    except Exception as err:  # noqa: BLE001 - Hydra and OmegaConf errors, shortened
        print(f"gnngp: error: {one_line(err)}", file=sys.stderr)
        raise SystemExit(1)
    picked = {o.partition("=")[0].lstrip("+~"): o.partition("=")[2] for o in overrides if "=" in o}
    print(app.header)
    print("\n== Configuration groups ==\nChoose an option per group: group=option (kernel=<name> and gnn=<name> are spellings "
          "of model=<name>); [the current choice]\n")
    for group, (options, default, description) in config_groups(config_name).items():
        current = picked.get(group, default)
        names = ", ".join(f"[{o}]" if o == current else o for o in options)
        print(f"{group}: {description}" if description else f"{group}:")
        print(textwrap.fill(names, width=100, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False))
    lines = config_key_lines(cfg)
    sections = {key for key, value, _ in lines if not value and any(k.startswith(key + ".") for k, _, _ in lines)}
    top = [line for line in lines if "." not in line[0] and line[0] not in sections]
    if top:   # the top-level keys under a heading of their own, so that none reads as a section's
        lines = [("top level", "", "keys outside any section")] + top + [line for line in lines if line not in top]
        sections.add("top level")
    if config_name != "config":   # the command's own section first (verify.*), then gnngp run's keys
        lines = sorted(lines, key=lambda line: line[0].split(".")[0] != config_name)
    command = "gnngp run" if config_name == "config" else f"gnngp {config_name}"
    shown = " ".join(chosen) or "the defaults"
    print(f"\n== Keys ==\nOverride any key: key=value. The keys of {shown}; put group choices before --help to see "
          f"another's ({command} kernel=gprgp --help)")
    width = min(44, max(len(f"{k}={v}") for k, v, _ in lines if k not in sections))
    for key, value, description in lines:
        if key in sections:   # its keys follow
            print(f"\n{key}: {description}" if description else f"\n{key}:")
            continue
        setting = f"  {key}={value}"
        print(f"{setting:<{width + 2}}  {description}".rstrip())
    print()
    print(app.footer)
