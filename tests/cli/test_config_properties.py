"""Property: no override can crash the config layer. Generated overrides (known and unknown
keys, nested and unicode keys, ``+``/``++``/``~`` prefixes; values of every type: huge and tiny
numbers, NaN and inf, lists and mappings where scalars go, unicode text, interpolations, group
choices, free text) always give either a valid spec or exactly one typed error: from Python, a
:class:`~gnngp_cli.errors.GnngpError` out of composition and parsing (what ``NodeGP`` and
``gnngp_cli.api.run`` do before any work); from the command line, exit 0 or exactly one
``gnngp: error:`` line, and never a traceback. No GP job runs: the command's job is replaced by
one that returns at once, so what is tested is what ``gnngp run`` does before its job (the
preflight parse included). The number of examples comes from the profile (:mod:`tests.properties`)."""
from __future__ import annotations

import dataclasses
import math
import typing

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from gnngp_cli import schema
from gnngp_cli.data.datasets import DATASETS
from gnngp_cli.errors import GnngpError
from gnngp_cli.gnn import GNNS
from gnngp_cli.kernels import KERNELS

from helpers import in_process
from properties import examples, within


def _dotted(cls, prefix: str) -> list[str]:
    out = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if factory is not None and dataclasses.is_dataclass(factory):
            out += _dotted(factory, key)
        else:
            out.append(key)
    return out


def _known_keys() -> list[str]:
    keys = set(_dotted(schema.RunConfig, ""))
    for entry in KERNELS.values():
        keys.update(_dotted(entry.config, "kernel"))
    for entry in GNNS.values():
        keys.update(_dotted(entry.config, "gnn"))
    for entry in DATASETS.values():
        keys.update(_dotted(type(entry.config), "dataset"))
    return sorted(k for k in keys if not k.startswith("hydra"))


KNOWN_KEYS = _known_keys()


def _typed_keys() -> dict[str, tuple[type, object]]:
    """Every schema key (the run's, each kernel's, GNN's and dataset's own) with its type and its
    default: what :data:`typed_override` draws a value of the right kind for."""
    out: dict[str, tuple[type, object]] = {}

    def walk(cls, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            key, kind = f"{prefix}.{f.name}" if prefix else f.name, hints[f.name]
            if dataclasses.is_dataclass(kind):
                walk(kind, key)
            elif not key.startswith("hydra"):
                default = f.default if f.default is not dataclasses.MISSING else (
                    f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
                out.setdefault(key, (kind, default))

    walk(schema.RunConfig, "")
    for prefix, entries in (("kernel", [e.config for e in KERNELS.values()]), ("gnn", [e.config for e in GNNS.values()]),
                            ("dataset", [type(e.config) for e in DATASETS.values()])):
        for cls in entries:
            walk(cls, prefix)
    return out


TYPED_KEYS = _typed_keys()


def _typed_value(kind, default) -> st.SearchStrategy:
    """A value of the key's own type, near its default: what a user who read the docs would write."""
    base = typing.get_args(kind)[0] if typing.get_origin(kind) is typing.Union else kind
    optional = typing.get_origin(kind) is typing.Union
    if base is bool:
        values = st.sampled_from(["true", "false"])
    elif base is int:
        d = default if isinstance(default, int) and not isinstance(default, bool) else 2
        values = st.integers(max(0, d // 2 - 1), 2 * d + 2).map(str)
    elif base is float:
        d = default if isinstance(default, (int, float)) and not isinstance(default, bool) and math.isfinite(default) and default else 0.5
        values = st.sampled_from([0.5, 1.0, 2.0, 0.1, 10.0]).map(lambda f: repr(d * f))
    elif typing.get_origin(base) is list:
        inner = typing.get_args(base)[0]
        item = st.integers(1, 200).map(str) if inner is int else st.floats(0.001, 10.0).map(repr) if inner is float else identifier
        values = st.lists(item, min_size=1, max_size=4, unique=True).map(lambda vs: "[" + ",".join(sorted(vs, key=lambda v: float(v) if inner is not str else 0)) + "]")
    elif isinstance(default, str):
        values = st.sampled_from([default, default, f"'{default}'"]) if default else identifier
    else:
        values = st.just("null")
    return st.one_of(values, st.just("null")) if optional else values


typed_override = st.sampled_from(sorted(TYPED_KEYS)).flatmap(lambda k: _typed_value(*TYPED_KEYS[k]).map(lambda v: f"{k}={v}"))
GROUPS = {
    "dataset": sorted(DATASETS), "kernel": sorted([*KERNELS, *(k + "_x" for k in KERNELS)]), "gnn": sorted([*GNNS, "none"]),
    "model": sorted([*KERNELS, *GNNS]), "compute": ["local", "dask", "slurm"], "fit": ["grid", "mll"],
    "likelihood": ["gaussian", "dirichlet"], "protocol": ["leave_out_classes", "feature_shift", "structural_shift"],
    "conformal": ["aps", "raps", "daps", "snaps", "tps"], "active": ["random", "v_opt", "sigma_opt"], "experiment": ["table4", "table5", "figure1", "ntk", "conformal"],
}

# keys: the schema's, the groups, misspelt and unknown ones, deeper than the schema, unicode
identifier = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
key = st.one_of(
    st.sampled_from(KNOWN_KEYS),
    st.sampled_from(sorted(GROUPS)),
    st.builds(lambda k, extra: f"{k}.{extra}", st.sampled_from(KNOWN_KEYS), identifier),
    st.builds(lambda parts: ".".join(parts), st.lists(identifier, min_size=1, max_size=4)),
    st.text(min_size=1, max_size=12).filter(lambda s: "=" not in s),
)

# values: every YAML type and Hydra's grammar, rendered as on the command line
finite_or_not = st.floats(allow_nan=True, allow_infinity=True)
scalar = st.one_of(
    st.integers(min_value=-10**30, max_value=10**30).map(str),
    st.sampled_from(["0", "-1", "1", "2", str(2**63), str(2**63 - 1), str(-2**63), str(2**64), "1e308", "1e-320", "5e-324",
                     "-0.0", "1e400", "nan", "inf", "-inf", ".inf", "-.inf", ".nan", "NaN", "0x10", "1_000", "true", "false",
                     "True", "null", "None", "~", "''", '""', "' '", "auto"]),
    finite_or_not.map(repr),
    st.text(max_size=16).map(lambda s: s.replace("\\", "")),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8).map(lambda s: f"'{s}'"),
)
value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda vs: "[" + ",".join(vs) + "]"),
        st.dictionaries(identifier, inner, max_size=3).map(lambda d: "{" + ",".join(f"{k}:{v}" for k, v in d.items()) + "}"),
    ),
    max_leaves=6,
)
interpolation = st.one_of(st.sampled_from(KNOWN_KEYS), identifier).map(lambda k: "${" + k + "}")
group_choice = st.sampled_from(sorted(GROUPS)).flatmap(lambda g: st.tuples(st.just(g), st.sampled_from(GROUPS[g]) | identifier))


def _override(prefix: str, k: str, v) -> str:
    return f"{prefix}{k}" if prefix == "~" and v is None else f"{prefix}{k}={v}"


override = st.one_of(
    st.builds(_override, st.sampled_from(["", "", "", "+", "++", "~"]), key, st.one_of(value, interpolation, st.none())),
    group_choice.map(lambda gv: f"{gv[0]}={gv[1]}"),
    st.text(max_size=24),   # anything at all
)
overrides = st.lists(override, max_size=5)
# biased toward runs a user would write: a group choice or two and typed values near the defaults,
# so that most of them are valid specs or refused by the spec's own checks, not by the grammar
valid_choice = st.sampled_from(["kernel", "dataset", "model", "fit", "likelihood", "active", "conformal"]).flatmap(
    lambda g: st.sampled_from(GROUPS[g]).map(lambda v: f"{g}={v}"))
typed_overrides = st.tuples(st.lists(valid_choice, max_size=2, unique_by=lambda o: o.split("=")[0]),
                            st.lists(typed_override, min_size=1, max_size=3, unique_by=lambda o: o.split("=")[0]),
                            st.lists(override, max_size=1)).map(lambda parts: [*parts[0], *parts[1], *parts[2]])


def _refused_or_valid(settings: list[str]) -> str:
    """``compose`` then ``parse``, as the Python API does before any work: the outcome's name."""
    from gnngp_cli.api import compose
    from gnngp_cli.config import parse

    try:
        cfg = compose(settings)
        spec = parse(cfg)
    except GnngpError as err:
        assert "\n" not in str(err).strip(), f"a refusal of {settings} is more than one line: {err}"
        return f"refused: {type(err).__name__}"
    assert isinstance(spec, schema.RunConfig) and spec.frozen
    return "valid"


# the examples the generators found, kept as regression cases
@example(settings=["~nugget"])
@example(settings=["~kernel.layers"])
@example(settings=["~dataset"])
@example(settings=["+foo=bar"])
@example(settings=["++nugget.num=3"])
@example(settings=["nugget.num=[1,2]"])
@example(settings=["nugget={a:1}"])
@example(settings=["seed=1e400"])
@example(settings=["kernel.layers=${nugget}"])
@example(settings=["dataset.name=ä"])
@example(settings=["model=gcngp", "gnn=gcn"])
@example(settings=["compute=[[]]"])
@example(settings=["compute=[0]"])
@example(settings=["conformal=0"])
@example(settings=["~compute=[]"])
@example(settings=["likelihood={a:1}"])
@example(settings=["compute=[\n]"])
@example(settings=["compute.job_extra._=0"])
@example(settings=["fit.learn.dj0=0"])
@example(settings=["likelihood.alpha_grid=${compute.memory}"])
@example(settings=["likelihood.alpha_grid=${compute.account}"])
@example(settings=["seed=${compute.memory}"])
@example(settings=["compute=0\n0"])
@example(settings=["active.batch=0", "++kernel=${active.batch}"])
@examples(ci=30)
@given(settings=overrides)
def test_generated_overrides_give_a_spec_or_one_typed_error(settings):
    with within(60, f"compose and parse {settings}"):
        event(_refused_or_valid(settings))


@example(settings=["kernel=gcngp_x", "landmarks.count=50"])
@example(settings=["dataset.name=???"])
@example(settings=["kernel.layers=???"])
@examples(ci=12)
@given(settings=typed_overrides)
def test_typed_overrides_near_the_defaults_give_a_spec_or_one_typed_error(settings):
    """The same property on generated runs a user would write (group choices, typed values near the
    defaults): these reach the spec's own checks and its readers' refusals, where free text mostly
    stops at the grammar."""
    with within(60, f"compose and parse {settings}"):
        event(_refused_or_valid(settings))


@pytest.fixture
def no_job(monkeypatch):
    """``gnngp run``'s job replaced by one that returns at once (its preflight parse still runs)."""
    import importlib

    monkeypatch.setattr(importlib.import_module("gnngp_cli.cli.main"), "_run_task", lambda cfg: 0.0)


@example(settings=["~nugget"])
@example(settings=["+foo=bar"])
@example(settings=["="])
@example(settings=["nugget.num=1,2"])
@example(settings=["kernel.layers=${oops}"])
@example(settings=["-î¯", "seed=1"])
@example(settings=["--seed=1"])
@example(settings=["compute.job_extra._=0"])
@example(settings=["fit.learn.dj0=0"])
@example(settings=["dataset.name=???"])
@examples(ci=4)
@given(settings=overrides)
def test_generated_command_lines_give_exit_0_or_one_error_line(settings, no_job, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    with within(60, f"gnngp run {settings}"):
        out = in_process("run", *settings, f"hydra.run.dir={folder / 'out'}", f"data.root={folder / 'cache'}", cwd=folder)
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert "Traceback" not in out.stderr, out.stderr
    if out.returncode == 0:
        assert not errors, out.stderr
        event("valid")
    else:
        assert out.returncode in (1, 2), (out.returncode, out.stderr)
        assert len(errors) == 1, f"gnngp run {settings}: {out.stderr}"
        event("refused")


def test_the_generators_reach_known_keys_values_and_prefixes():
    """The generators are not vacuous: they name the schema's keys (a kernel's own and a
    dataset's own among them), and render lists, mappings and non-finite numbers."""
    assert {"nugget.num", "kernel.layers", "dataset.path", "compute.workers", "seed"} <= set(KNOWN_KEYS)
    assert math.isinf(float("1e400"))
