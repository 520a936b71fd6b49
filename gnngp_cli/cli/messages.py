"""Mistakes on the command line, each told in one line with the closest valid name.

Four kinds reach the user before any work starts:

- a typo in a group option (``dataset=coraa``, ``kernel=gcnpg``): checked here against the
  registries, before Hydra sees the overrides, in the spelling the user wrote (``kernel=``,
  ``gnn=`` or ``model=``; Hydra itself only ever sees ``model=``);
- an unknown key (``kernel.layer=3``) and a wrong type (``runs=two``): Hydra's composition
  errors, shortened to one line by :func:`one_line` with the nearest key of the schema;
- anything else Hydra rejects (a malformed override): its first line.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import re
import typing
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..errors import ConfigError

GROUP_KEYS = ("dataset", "model", "kernel", "gnn", "experiment", "fit", "compute", "likelihood", "protocol", "conformal", "active",
              "learning_curve")
ONE_OPTION_GROUPS = (*GROUP_KEYS, "hparams_search", "logger")   # each takes one option's name, never a list or mapping


def closest(word: str, choices: Iterable[str]) -> Optional[str]:
    """The valid name nearest to ``word`` (difflib's ratio), or ``None`` when nothing is close."""
    choices = list(choices)
    same = [c for c in choices if c.lower() == str(word).lower()]   # GCNGP: gcngp (difflib reads case, and found nothing)
    if same:
        return same[0]
    found = difflib.get_close_matches(str(word), choices, n=1, cutoff=0.5)
    return found[0] if found else None


def group_options(key: str) -> list[str]:
    """Valid values of a group option as the user spells it: ``dataset``, ``kernel`` (kernels
    and their ``_x`` twins), ``gnn`` (GNNs and ``none``), ``model`` (both) or ``experiment``
    (the presets)."""
    from ..data.datasets import DATASETS, PRESETS
    from ..gnn import GNNS
    from ..kernels.architectures import KERNELS

    from ..backends import BACKENDS
    from ..compose import config_dir
    from ..gp.likelihoods import LIKELIHOODS
    from ..gp.strategies import STRATEGIES
    from ..schema import CONFORMAL, FIT_METHODS, PROTOCOLS

    kernels = [name + suffix for name in KERNELS for suffix in ("", "_x")]
    return {
        "dataset": [*DATASETS, *PRESETS],
        "kernel": kernels,
        "gnn": [*GNNS, "none"],
        "model": [*kernels, *GNNS],
        "experiment": [*sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml")), "null"],   # optional: Hydra would skip a typo
        "fit": list(FIT_METHODS),
        "compute": list(BACKENDS),
        "likelihood": list(LIKELIHOODS),
        "protocol": list(PROTOCOLS),
        "conformal": list(CONFORMAL),
        "active": ["none", *STRATEGIES],
        "learning_curve": sorted(p.stem for p in (config_dir() / "learning_curve").glob("*.yaml")),   # optional: a typo was skipped
    }[key]


def _sweep_values(value: str) -> list[str]:
    """The values of ``a,b,c`` or ``choice(a,b)``; a value Hydra would interpolate or glob is
    left to Hydra (empty list)."""
    value = value.strip()
    if value.startswith("choice(") and value.endswith(")"):
        value = value[len("choice("):-1]
    if any(ch in value for ch in "$*()[]{}"):
        return []
    return [v.strip().strip("'\"") for v in value.split(",") if v.strip()]


def check_repeated(overrides: Sequence[str]) -> None:
    """A group's option chosen twice on the command line (``dataset=cora dataset=citeseer``,
    ``fit=grid fit=mll``) is one line: two choices, of which Hydra keeps the last silently, and a
    run of the other is not what was asked. A key given twice takes the last value, Hydra's rule
    (a script's defaults first, then the user's: ``data.root=<default> ... data.root=<mine>``);
    ``kernel=``/``gnn=``/``model=`` are the method's, checked with the method."""
    seen: dict[str, str] = {}
    for override in overrides:
        if override.startswith("-") or "=" not in override or override.startswith("~"):
            continue
        key, _, value = override.partition("=")
        key = key.lstrip("+")
        if key not in ONE_OPTION_GROUPS or key in ("kernel", "gnn", "model") or any(c in value for c in ",()"):
            continue   # a key's value (the last counts), the method's choice, a sweep's values (the sweep's checks name them)
        if key in seen and seen[key] != value:
            raise ConfigError(f"{key} is chosen twice ({key}={seen[key]} and {key}={value}); choose one (a sweep of both: gnngp run -m "
                              f"{key}={seen[key]},{value})")
        seen[key] = value


def check_deletions(overrides: Sequence[str]) -> None:
    """``~section.key`` (a key of a typed section) is one line: the section keeps all its keys,
    and OmegaConf's "does not support deletion" or a false "does not exist" named no fix."""
    for override in overrides:
        if not override.startswith("~"):
            continue
        key = override[1:].partition("=")[0]
        if "." in key and not key.startswith("hydra."):
            raise ConfigError(f"~{key} removes a key, and {key.rsplit('.', 1)[0]} keeps every key of its schema; set it instead "
                              f"({key}=<value>, or {key}=null where null is allowed), or leave it out for its default")


def check_group_choices(overrides: Sequence[str]) -> None:
    """Raise a one-line :class:`ConfigError` for an unknown ``dataset=``, ``kernel=``, ``gnn=``,
    ``model=``, ``experiment=``, ``fit=``, ``compute=``, ``likelihood=``, ``protocol=``,
    ``conformal=``, ``active=`` or ``learning_curve=`` value (every value of a sweep), naming the
    closest valid one; a list or mapping given to a group (``compute=[0]``) is refused too, and a
    dataset config of the user's own with a shipped option's name."""
    folders = user_config_folders(overrides)
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if sep and key in ONE_OPTION_GROUPS and value.strip()[:1] in ("[", "{"):   # Hydra would fail with a ValueError or TypeError
            raise ConfigError(f"{key}={value}: {key} takes one option's name (e.g. {key}={group_options(key)[0] if key in GROUP_KEYS else 'name'}), "
                              "not a list or mapping; a sweep over options is gnngp run -m " + f"{key}=a,b")
        if not sep or key not in GROUP_KEYS:
            continue
        valid = [*group_options(key), *sorted({p.stem for folder in folders for p in (folder / key).glob("*.yaml")})]
        for choice in _sweep_values(value):
            shadow = next((folder / key / f"{choice}.yaml" for folder in folders if (folder / key / f"{choice}.yaml").is_file()), None) \
                if key == "dataset" and choice in group_options(key) else None
            if shadow is not None:
                # Hydra reads the user's file in the option's place, and the rows record the name alone: the report could not
                # tell the two apart (it names a config of the user's own by its name)
                raise ConfigError(f"dataset={choice}: your {shadow} has the name of gnngp's own dataset option {choice}, which Hydra "
                                  f"then reads in its place; rename your file (e.g. {choice}_mine.yaml), so that its runs are told "
                                  "apart from the option's (gnngp report names a config of your own by its name)")
            if key == "learning_curve" and choice in ("null", "none") and choice not in valid:   # Hydra: "must be a string or a list"
                raise ConfigError(f"learning_curve={choice}: a run without a learning curve leaves learning_curve out (an optional group); "
                                  f"its options: {', '.join(valid)}")
            if choice not in valid:
                other = {"kernel": "gnn", "gnn": "kernel"}.get(key)
                if other is not None and choice in group_options(other):   # gnn=gcngp: a kernel's name, given as a GNN's
                    what = "a GP kernel" if other == "kernel" else "a GNN"
                    raise ConfigError(f"{key}={choice}: {choice} is {what}; did you mean {other}={choice}? ({key}= takes "
                                      f"{'GNNs' if key == 'gnn' else 'GP kernels'}: {', '.join(sorted(valid)[:12])}{', ...' if len(valid) > 12 else ''})")
                raise ConfigError(_unknown(f"{key}={choice}", closest(choice, valid), f"{key}={{name}}", valid))


def user_config_folders(overrides: Sequence[str]) -> list[Path]:
    """The config folders of the user's that a command line adds to the package's: the ``file://``
    and ``pkg://`` entries of ``hydra.searchpath=[...]`` and the folder of ``--config-dir`` (``-cd``); their
    ``<group>/<name>.yaml`` files are options of the group (``experiment=mine``)."""
    folders: list[Path] = []
    for i, arg in enumerate(overrides):
        key, sep, value = arg.partition("=")
        if key.lstrip("+~") == "hydra.searchpath" and sep:
            for entry in (e.strip().strip("'\"") for e in value.strip().strip("[]").split(",") if e.strip()):
                scheme, found, path = entry.partition("://")
                if not found:
                    raise ConfigError(f"hydra.searchpath entry {entry} is not a URL; name a folder as file://{Path(entry).absolute()} "
                                      "(or a Python package as pkg://name)")
                if scheme == "pkg":   # a package's folder of configs (an installed package's files, read where they lie)
                    import importlib.resources

                    try:
                        path = str(importlib.resources.files(path))
                    except (ImportError, TypeError, ValueError):
                        raise ConfigError(f"hydra.searchpath entry {entry} names no installed Python package; install it, or "
                                          "name a folder as file:///path/to/my_conf") from None
                if not Path(path).is_dir():
                    raise ConfigError(f"hydra.searchpath entry {entry}: {path} is not a folder; name the folder that holds "
                                      "your experiment/ (or dataset/ ...) configs")
                folders.append(Path(path))
        elif key in ("--config-dir", "-cd"):
            value = value if sep else (overrides[i + 1] if i + 1 < len(overrides) else "")
            folders += [Path(value)] if value else []
    return folders


def _unknown(what: str, near: Optional[str], fix: str, valid: Sequence[str]) -> str:
    hint = f"did you mean {fix.format(name=near)}? " if near else ""
    valid = sorted(valid)
    listed = ", ".join(valid) if len(valid) <= 40 else ", ".join(valid[:40]) + ", ..."
    return f"{what} is not an option; {hint}valid: {listed}"


def _schema_keys(object_type) -> list[str]:
    if object_type is not None and dataclasses.is_dataclass(object_type):
        return [f.name for f in dataclasses.fields(object_type)]
    return []


# a key that is not the run's, typed where another key holds its meaning (``depth`` sets kernel.layers and gnn.layers)
ALIASES = {"layers": ["depth"]}


def _key_for(object_type, value) -> Optional[str]:
    """The first key of a section's schema whose type takes ``value`` as typed: an integer an
    ``int`` key (``landmarks=500``: ``landmarks.count``), a decimal a ``float`` one; ``None``: none."""
    if object_type is None or not dataclasses.is_dataclass(object_type):
        return None
    text = str(value)
    wanted = int if text.lstrip("-").isdigit() else float if _is_number(text) else str
    hints = typing.get_type_hints(object_type)
    for f in dataclasses.fields(object_type):
        kind = hints.get(f.name)
        if kind is wanted or wanted in typing.get_args(kind):
            return f.name
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def sections() -> dict[str, type]:
    """Each section of the run's config (a key that holds keys) and its schema; ``kernel`` and
    ``gnn`` by what every kernel and GNN has."""
    import typing

    from ..schema import GNNConfig, KernelConfig, RunConfig

    found = {name: hint for name, hint in typing.get_type_hints(RunConfig).items() if dataclasses.is_dataclass(hint)}
    found.update(kernel=KernelConfig, gnn=GNNConfig)
    return found


def placed_elsewhere(leaf: str, parent: str) -> list[str]:
    """Where a key named ``leaf``, unknown under ``parent`` (``""``: the top level), is one: the
    top level (``dataset.seed``: ``seed``), under another section (``epochs``: ``gnn.epochs``), a
    section of its own (``kernel.landmarks``: ``landmarks.count`` ...), or an alias (``layers``: ``depth``)."""
    from ..schema import RunConfig

    known = sections()
    found = list(ALIASES.get(leaf, [])) if not parent else []
    if parent and leaf in _schema_keys(RunConfig) and leaf not in known:   # dataset.seed: the run's own seed
        found.append(leaf)
    if parent and leaf in known:
        found += [f"{leaf}.{key}" for key in _schema_keys(known[leaf])]
    found += [f"{name}.{leaf}" for name, schema in known.items() if name != parent and leaf in _schema_keys(schema)]
    return found


def other_methods_with(leaf: str, parent: str) -> list[str]:
    """The kernels (or GNNs) whose own key ``leaf`` is, for a key unknown under ``kernel`` (or ``gnn``):
    ``kernel.alpha`` is GCNII's, ``["kernel=gcn2gp (its kernel.alpha)"]``."""
    from ..gnn import GNNS
    from ..kernels import KERNELS

    table = {"kernel": KERNELS, "gnn": GNNS, "model": {**KERNELS, **GNNS}}.get(parent)
    if table is None:
        return []
    owners = [name for name, entry in table.items() if leaf in _schema_keys(type(entry.config(name=name)))]
    kind = "kernel" if parent == "model" and owners and owners[0] in KERNELS else parent
    return [f"{kind}={name} (its {kind}.{leaf})" for name in owners[:3]]


def spellings(overrides: Sequence[str]) -> dict[str, str]:
    """How the user spelled the method group (``kernel=``, ``gnn=`` or ``model=``; Hydra only
    sees ``model=``): ``{"model": "kernel"}``, for :func:`one_line` to name keys as typed."""
    return {"model": key for key in ("kernel", "gnn", "model") for o in overrides if o.lstrip("+~").startswith(key + "=")}


def _user_key(full_key: str, spelled: dict[str, str]) -> str:
    """``model`` back in the user's spelling (``kernel`` or ``gnn``) where they wrote that."""
    head, dot, rest = full_key.partition(".")
    return spelled.get(head, head) + dot + rest


HYDRA_PATHS = frozenset({"hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.job.chdir", "hydra.job.name"})


def one_line(err: BaseException, spelled: Optional[dict[str, str]] = None) -> str:
    """A Hydra or OmegaConf composition error as one line: what is wrong, and the fix."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

    spelled = spelled or {}
    cause = err if isinstance(err, OmegaConfBaseException) else (err.__cause__ or err.__context__)
    preset = re.match(r"In '([^']+)': ", str(err))   # a key of a config file (a preset of the user's: experiment/mine)
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and getattr(cause, "full_key", None):
        full_key = str(cause.full_key)
        parent, _, leaf = full_key.rpartition(".")
        keys = _schema_keys(getattr(cause, "object_type", None))
        near = closest(leaf, keys)
        elsewhere = placed_elsewhere(leaf, parent)
        # this section's near key, first when it only adds or drops an ending (verify.seed: verify.seeds), else only when no other fits
        first = near is not None and (near.startswith(leaf) or leaf.startswith(near))
        dotted = full_key.replace("_", ".", 1).replace("sweepdir", "sweep.dir").replace("rundir", "run.dir")
        if dotted in HYDRA_PATHS and dotted != full_key:   # hydra.sweep_dir: Hydra's folder keys are two levels deep
            near, first, elsewhere = None, False, [dotted]
        guesses = ([(parent + "." if parent else "") + near] if near and (first or not elsewhere) else [])
        guesses += other_methods_with(leaf, parent) + elsewhere   # kernel.alpha: GCNII's own key before likelihood.alpha
        where = f" of {parent}" if parent else ""
        hint = f"did you mean {' or '.join(guesses)}? " if guesses else ""
        listed = f"keys{where}: {', '.join(keys)}" if keys else "see gnngp run --cfg job for the keys"
        if preset is None:
            return f"unknown key {full_key}; {hint}{listed}"
        group = preset.group(1).split("/")[0]
        if full_key.startswith(group + ".") and group not in ("dataset", "model"):   # the file's keys went under its group
            return (f"{preset.group(1)}.yaml sets {leaf}, which is read as {full_key}: a preset that sets the run's keys "
                    f"(runs, kernel.layers, ...) begins with the line '# @package _global_'")
        return f"{preset.group(1)}.yaml sets the unknown key {full_key}; {hint}{listed}"
    if isinstance(cause, ValidationError) and getattr(cause, "full_key", None):
        first = str(getattr(cause, "msg", "") or cause).splitlines()[0]
        key = _user_key(str(cause.full_key), spelled)
        value = getattr(cause, "value", None)
        known = sections()
        if str(cause.full_key) in known and "is not a subclass of" in first:   # landmarks=500: a value given to a whole section
            keys = _schema_keys(known[str(cause.full_key)])
            if {"min", "max", "num"} <= set(keys) and _is_number(str(value)):   # nugget=0.1: a grid of that one value
                return (f"{key}={value} gives a value to a section; for that one value set {key}.min={value} {key}.max={value} "
                        f"{key}.num=1 (keys of {key}: {', '.join(keys)})")
            example = _key_for(known[str(cause.full_key)], value) or keys[0]
            return (f"{key}={value} gives a value to a section; set one of its keys, e.g. {key}.{example}={value} "
                    f"(keys of {key}: {', '.join(keys)})")
        if "is not a ListConfig" in first:   # active.budgets=20: a list key given one value
            listed = f"{value},{2 * int(value)}" if key == "verify.widths" and str(value).isdigit() else value   # (two widths at least: the slope)
            return f"{key}={value} is not a list; give a list, e.g. {key}=[{listed}] (quoted in a shell: '{key}=[{listed}]')"
        shows = "--cfg hydra" if key.startswith("hydra.") else "--cfg job"   # Hydra's own keys are not the job's config
        return f"{key}: {first}; give a value of the key's type (gnngp run {shows} shows them)"
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    group = next((g for g in ("model", "dataset", "likelihood", "protocol", "conformal", "active", "fit", "compute") if f"Could not find '{g}/" in text), None)
    if group is not None:
        name = text.split(f"'{group}/", 1)[1].split("'", 1)[0]
        key = spelled.get(group, group)
        valid = group_options(key)
        return _unknown(f"{key}={name}", closest(name, valid), f"{key}={{name}}", valid)
    missing = re.search(r"Could not find '([\w/]+)/([^'/]+)'", text)
    if missing is not None and "Available options in" in str(err):   # another group (hydra/launcher=jobib): the options Hydra lists
        group, name = missing.groups()
        listed = str(err).split("Available options in", 1)[1].split("\n", 1)[-1].split("Config search path", 1)[0]
        options = [line.strip() for line in listed.splitlines() if line.strip()]
        if options:
            return _unknown(f"{group}={name}", closest(name, options), f"{group}={{name}}", options)
    ambiguous = re.match(r"Ambiguous value for argument '([^']+)'", text)
    if ambiguous is not None:   # a comma list without -m: Hydra's three numbered options, in its own words (model=, --multirun)
        from ..compose import shown_override

        typed = shown_override(ambiguous.group(1))
        key, _, value = typed.partition("=")
        listed = "" if key in ONE_OPTION_GROUPS or "/" in key else f"; a key that takes a list takes it in brackets ({key}=[{value}])"
        return f"{typed} lists several values: a sweep of them needs -m (gnngp run -m {typed} ...){listed}"
    lexer = re.match(r"LexerNoViableAltException: (\S+?)=(.*?)(?:\s+\^ See https?://\S+ for details.*)?$", text, re.S)   # the whole value
    if lexer is not None:   # a character Hydra's grammar takes only in quotes (non-ASCII, some punctuation)
        key, value = lexer.groups()
        return (f"{key}={value} has a character an override takes only in quotes: write {key}='{value}' "
                f"(in a shell: \"{key}='{value}'\")")
    hydra_sweep = re.match(r"Sweeping over Hydra's configuration is not supported : '(hydra\.sweeper\.params\.[^=']+)=([^']*)'", text)
    if hydra_sweep is not None:   # a search space typed without the quotes the shell removes (choice(a, b) read as a sweep)
        key, value = hydra_sweep.groups()
        return (f"{key}={value} is read as a sweep of the search's own settings: quote the value for Hydra and the whole for the "
                f"shell, \"{key}='{value}'\" (\"+{key}=...\" for a key the preset does not search)")
    needs_m = re.match(r"Sweep parameters '([^']+)' requires --multirun", text)
    if needs_m is not None:   # range(...), choice(...), glob(...) without -m
        return f"{needs_m.group(1)} is a sweep: add -m (gnngp run -m {needs_m.group(1)} ...)"
    parsing = re.match(r"Error parsing override '([^']*)' (.*?) See https://hydra\.cc\S* for details", text)
    if parsing is not None:   # Hydra's grammar error: the override as typed, and the form it takes
        typed, why = parsing.groups()
        if "=" not in typed:
            key = re.split(r"[:\s]", typed, maxsplit=1)[0]
            return (f"{typed!r} is not an override: give key=value, e.g. {key}=<value> (gnngp run dataset=cora; "
                    f"a key's values: gnngp run --help)")
        key, _, value = typed.partition("=")
        why = why.split(" expecting ", 1)[0]
        return f"{typed} cannot be read ({why}): a value is a word or a number, or a list in brackets ({key}=[10,20])"
    text = text.replace("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.", "").strip()
    if isinstance(cause, OmegaConfBaseException):
        text += " " + str(cause).splitlines()[0]
    return text


# Hydra's launchers and the Optuna sweeper log each job's overrides ("#0 : dataset=cora
# model=gcngp") and the best trial ("Best parameters: {'model': 'gcngp_x', ...}") as Hydra sees
# them: the method as ``model=``, which the user typed as ``kernel=`` or ``gnn=``.
OVERRIDE_LOGGERS = ("hydra._internal.core_plugins.basic_launcher", "hydra_plugins.hydra_joblib_launcher._core",
                    "hydra_plugins.hydra_submitit_launcher.submitit_launcher", "hydra_plugins.hydra_optuna_sweeper._impl")
_TYPED = re.compile(r"(?<![\w.])([+~]*model=\S+)")
_PARAM = re.compile(r"'model': '([^']*)'")


def shown_text(message: str) -> str:
    """A log message with every ``model=<name>`` (and an Optuna ``'model': '<name>'``) spelled as
    the user spells it (:func:`gnngp_cli.compose.shown_override`): ``kernel=gcngp``, ``gnn=gcn``."""
    from ..compose import method_key, shown_override

    if "model" not in message:
        return message
    message = _TYPED.sub(lambda m: shown_override(m.group(1)), message)
    return _PARAM.sub(lambda m: f"'{method_key(m.group(1))}': '{m.group(1)}'", message)


class MethodSpelling(logging.Filter):
    """Rewrites a log record's message with :func:`shown_text`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):   # a record whose arguments do not fit: logging reports it, as it is
            return True
        shown = shown_text(message)
        if shown != message:
            record.msg, record.args = shown, ()
        return True


def spell_methods_in_logs() -> None:
    """Add :class:`MethodSpelling` to the loggers of Hydra's launchers and of the Optuna sweeper
    (once; a logger's filters outlive Hydra's logging configuration)."""
    for name in OVERRIDE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, MethodSpelling) for f in logger.filters):
            logger.addFilter(MethodSpelling())

