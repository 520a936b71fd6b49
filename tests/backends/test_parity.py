"""One pipeline: every registered kernel (and its low-rank twin) x every backend that runs on
this machine x every score metric x {fit=grid, fit=mll} gives the row of compute=local (its
metric, chosen settings and test columns, within 1e-4 relative in float64) or, for a
combination a backend declares unsupported, one line from the CLI naming it, never an error
row holding an exception.

The matrix is built from the registries (KERNELS, BACKENDS, METRICS): a new kernel, metric or
backend joins it without editing this file. Each metric is scored on the first of the small
graphs below whose task it fits (many classes, two classes, regression).

The fast suite runs a slice of it: every kernel, exact and low-rank (so every block type), on
every backend with accuracy and fit=grid, and its tangent kernel; every other metric and fit=mll
with GCNGP and GCNGP-X; one training-time case. The rest of the matrix is marked ``paper`` (CI
runs it with ``-m paper``); the two together are the whole matrix, each case once."""
from __future__ import annotations

import copy
import json
import math
from dataclasses import replace

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from gnngp_cli.api import compose, run
from gnngp_cli.backends import BACKENDS
from gnngp_cli.cli.main import main
from gnngp_cli.data import DATASETS, generate_csbm, register_dataset
from gnngp_cli.errors import ConfigError
from gnngp_cli.kernels import KERNELS
from gnngp_cli.metrics import score_metrics
from gnngp_cli.schema import DatasetConfig

pytest.importorskip("distributed")


@pytest.fixture(autouse=True)
def on_the_cpu(monkeypatch):
    """The Dask backend computes on its workers' CPUs and refuses device=cuda; scripts/gpu_check.sh
    runs the suite with GNNGP_DEVICE=cuda, so these tests (and the local runs they compare) ask for the CPU."""
    monkeypatch.setenv("GNNGP_DEVICE", "cpu")


def _classes(classes: int):
    def load(cfg, store):
        return generate_csbm(num_nodes=150, avg_degree=6, num_classes=classes, homophily=0.7, num_features=10, snr=0.6,
                             seed=cfg.split_seed, train_ratio=0.3, val_ratio=0.2)
    return load


def _regression(cfg, store):
    """A smooth graph signal: ``y = A A X w`` plus noise, on a csbm graph."""
    from gnngp_cli.data import Adjacency

    data = generate_csbm(num_nodes=150, avg_degree=6, num_classes=3, homophily=0.7, num_features=10, snr=0.6, seed=cfg.split_seed,
                         train_ratio=0.3, val_ratio=0.2)
    g = torch.Generator().manual_seed(1)
    a = Adjacency.from_graph(data.edge_index, data.num_nodes, "sym", torch.float32, "cpu")
    signal = a.matmul(a.matmul(data.x @ torch.randn(10, 1, generator=g))).view(-1)
    data.y = (signal / signal.std() + 0.3 * torch.randn(data.num_nodes, generator=g)).double()
    data.task, data.num_classes = "regression", 0
    return data


GRAPHS = {  # name: (loader, task, classes)
    "parity_classes": (_classes(3), "classification", 3),
    "parity_binary": (_classes(2), "classification", 2),
    "parity_regression": (_regression, "regression", 0),
}


@pytest.fixture(scope="module", autouse=True)
def graphs():
    for name, (load, _, _) in GRAPHS.items():
        register_dataset(name, name, load, DatasetConfig(name=name), split="seeded")
    yield
    for name in GRAPHS:
        DATASETS.pop(name)


def graph_for(metric) -> str:
    """The first graph whose task the metric fits."""
    return next(name for name, (_, task, classes) in GRAPHS.items() if metric.applies(task, classes))


METHODS = [name + twin for name in KERNELS for twin in ("", "_x")]
OTHER_BACKENDS = [name for name, entry in BACKENDS.items() if name != "local" and not entry.external]
# fit=mll's path depends on the task (classes or regression), not on the metric that scores it: every kernel runs it
# on the classes (its gradients through every block), GCNGP and GCNGP-X on the regression too (the one-column
# targets; until 2026-11-28 every kernel did, and every metric before that: about a minute of the fast suite each)
MLL_CASES = {"accuracy": METHODS, "r2": ["gcngp", "gcngp_x"]}
CASES = [(method, metric.name, fit) for method in METHODS for metric in score_metrics()
         for fit in (("grid", "mll") if method in MLL_CASES.get(metric.name, ()) else ("grid",))]
COMMON = ["dtype=float64", "kernel.base.scale=0.5", "progress=false"]
LIGHTER = {"grid": ["nugget.num=21"], "mll": ["fit.steps=4"]}   # each where the case reads it (an option it does not read is refused)
GAMMA_LIGHTER = ["kernel.gamma_grid.num=3"]                     # a gamma search's grid (rbf, fit=grid)
CLUSTER = {"workers": 2, "processes": False, "dashboard": ":0"}   # compute.*: a local cluster of two workers
ROWS = 60                                                          # partition.rows: 3 row blocks
COMPARED = ("metric", "train", "val", "test", "nugget", "layers", "landmarks", "nlpd", "coverage95", "var_correct", "var_wrong",
            "nll", "brier", "temperature", "time", "ece")


def overrides_of(method: str, metric: str, fit: str, cache) -> list[str]:
    from gnngp_cli.metrics import METRICS

    # GPRGP chooses among kernel.coefficients; two filters keep the choice (and its per-filter fit) at a third of
    # the default grid's six, which made its cases the slowest of the matrix (10-20 s each)
    lighter = ["kernel.coefficients=[[1.0,1.0],[1.0,-1.0]]"] if method.startswith("gprgp") else []
    lighter += LIGHTER[fit] + (GAMMA_LIGHTER if method.removesuffix("_x") == "rbf" and fit == "grid" else [])
    return [f"dataset={graph_for(METRICS[metric])}", f"kernel={method}", f"fit={fit}", f"dataset.metric={metric}", f"data.root={cache}",
            *COMMON, *lighter]


_COMPOSED: dict[tuple, object] = {}   # the configs composed in this process: the matrix's tests and the refusal check share cases


def composed(overrides: list[str]):
    """``compose(overrides)``, once a process for each case (a Hydra composition is about 0.2 s)."""
    key = tuple(overrides)
    if key not in _COMPOSED:
        _COMPOSED[key] = compose(overrides)
    return copy.deepcopy(_COMPOSED[key])


def same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return math.isclose(float(a), float(b), rel_tol=1e-4, abs_tol=1e-9)


def chosen(row: dict) -> dict:
    """The settings a row records (what was chosen on validation, the kernel's own parameters)."""
    extra = json.loads(row.get("extra") or "{}")
    return {k: v for k, v in extra.items() if k not in ("shards", "row_block", "reliability", "curve")}   # bins: by count; curve: to round-off


def on_backend(cfg, backend: str, roots) -> object:
    """``cfg`` with ``compute=<backend>`` (its option, as the config store holds it) on a local cluster: the overrides
    ``compute=<backend> compute.workers=2 compute.processes=false ... partition.rows=60``, without composing again."""
    cfg = copy.deepcopy(cfg)
    cfg.compute = OmegaConf.merge(OmegaConf.structured(BACKENDS[backend].options), {**CLUSTER, "roots_dir": str(roots)})
    cfg.partition.rows = ROWS
    return cfg


# the tangent kernels (kernel.limit=ntk) of every kernel that has trained parameters, with one metric
TANGENT_CASES = [(method, "accuracy", "grid") for method in METHODS if method.removesuffix("_x") not in ("ggp", "rbf")]


def in_the_slice(method: str, metric: str, fit: str) -> bool:
    """The fast suite's slice of the matrix: every kernel (each block type) with accuracy and fit=grid, on every backend;
    every metric and fit=mll with GCNGP and GCNGP-X."""
    return (metric, fit) == ("accuracy", "grid") or method in ("gcngp", "gcngp_x")


def sliced(cases: list[tuple], fast=in_the_slice) -> list:
    """``cases`` as parameters, those outside the fast suite's slice marked ``paper``."""
    return [pytest.param(*case, id="-".join(case), marks=() if fast(*case) else pytest.mark.paper) for case in cases]


@pytest.mark.parametrize("method, metric, fit", sliced(CASES))
def test_every_kernel_metric_and_fit_gives_the_local_row_on_every_backend(method, metric, fit, cache, tmp_path):
    compare_backends(overrides_of(method, metric, fit, cache), metric, fit, tmp_path)


@pytest.mark.parametrize("method, metric, fit", sliced(TANGENT_CASES))
def test_every_tangent_kernel_gives_the_local_row_on_every_backend(method, metric, fit, cache, tmp_path):
    # a low-rank tangent kernel runs on every backend (issue 25): a refusal there fails the test
    compare_backends([*overrides_of(method, metric, fit, cache), "kernel.limit=ntk"], metric, fit, tmp_path, must_run=method.endswith("_x"))


# along training time the uncertainty columns read the trained network's variance, from the NNGP root kept beside the tangent
# root (two roots a row block, one more statistic): a classification and a regression, at finite times (a low-rank variance
# vanishes at t = inf, docs/kernels.md)
TIME_CASES = [("gcngp_x", "accuracy"), ("gcngp_x", "r2"), ("gatgp_x", "accuracy")]
TIME_SLICE = TIME_CASES[:1]   # in the fast suite; the others with -m paper


@pytest.mark.parametrize("method, metric", sliced(TIME_CASES, fast=lambda *case: case in TIME_SLICE))
def test_the_tangent_kernel_along_training_time_gives_the_local_row_on_every_backend(method, metric, cache, tmp_path):
    overrides = [o for o in overrides_of(method, metric, "grid", cache) if not o.startswith("nugget.")]
    compare_backends([*overrides, "kernel.limit=ntk", "inference.time=[1,30]"], metric, "grid", tmp_path, must_run=True)


def compare_backends(overrides: list[str], metric: str, fit: str, tmp_path, must_run: bool = False) -> None:
    """The row of every other backend equals the local one; a backend may refuse a combination
    it does not support (one line, before any work), unless ``must_run``."""
    cfg = composed(overrides)
    local = run(cfg=copy.deepcopy(cfg))[0]                                  # every combination runs locally
    assert local["status"] == "ok" and local["metric"] == metric and local["fit"] == fit, local
    if fit == "mll":
        assert any(key.startswith("fitted_") for key in local) and math.isfinite(local["fit_mll"])
    for backend in OTHER_BACKENDS:
        try:
            row = run(cfg=on_backend(cfg, backend, tmp_path / "roots"))[0]
        except ConfigError as refusal:                                     # declared unsupported: one line, before any work
            if must_run:
                raise
            message = str(refusal)
            assert "\n" not in message and f"compute={backend}" in message, message
            continue
        assert row["status"] == "ok" and row["compute_backend"] == backend and row["workers"] == 2, row
        differing = [key for key in COMPARED if not same(local.get(key), row.get(key))]
        assert not differing, {key: (local.get(key), row.get(key)) for key in differing}
        assert chosen(row) == chosen(local)
        curves = [json.loads(r.get("extra") or "{}").get("curve") for r in (local, row)]
        if curves[0] is not None:   # the metric at every training time, each split
            assert curves[1] is not None and curves[0]["t"] == curves[1]["t"]
            for split in ("train", "val", "test"):
                assert all(same(a, b) for a, b in zip(curves[0][split], curves[1][split])), (split, curves)
        bins = [json.loads(r.get("extra") or "{}").get("reliability") for r in (local, row)]
        if bins[0] is not None:   # the same test nodes in the same confidence bins (the means agree to round-off)
            assert bins[1] is not None and bins[0]["count"] == bins[1]["count"]


class _Stopped(Exception):
    """Raised where a backend that did not refuse a job would start its work."""


class _StopBeforeWork:
    """A backend that decides as the real one does (``refuse``, ``supports_fit``, ...) and stops where it would start work."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __enter__(self):
        raise _Stopped

    def __exit__(self, *exc):
        return False


def matrix_cases(fast: bool) -> list[tuple[list[str], tuple]]:
    """Every case of the matrix in the fast suite's slice (``fast``), or every other: (its overrides beyond
    :func:`overrides_of`, its (method, metric, fit)), as the three tests above run them."""
    cases = [([], case, in_the_slice(*case)) for case in CASES]
    cases += [(["kernel.limit=ntk"], case, in_the_slice(*case)) for case in TANGENT_CASES]
    cases += [(["kernel.limit=ntk", "inference.time=[1,30]"], (method, metric, "grid"), (method, metric) in TIME_SLICE)
              for method, metric in TIME_CASES]
    return [(extra, case) for extra, case, in_slice in cases if in_slice == fast]


def refusals(fast: bool, cache, roots) -> dict[str, list[str]]:
    """Every distinct refusal the matrix's cases (the slice, or the rest) meet on the other backends: a refusal's message ->
    the command line of one case that meets it. Each case runs as the matrix runs it, up to where the backend would start
    its work (a refusal comes before that, in one line)."""
    found: dict[str, list[str]] = {}
    with pytest.MonkeyPatch.context() as patch:
        for backend in OTHER_BACKENDS:
            entry = BACKENDS[backend]
            patch.setitem(BACKENDS, backend, replace(entry, make=lambda cfg, make=entry.make: _StopBeforeWork(make(cfg))))
        for extra, (method, metric, fit) in matrix_cases(fast):
            overrides = [*overrides_of(method, metric, fit, cache), *extra]
            if "inference.time=[1,30]" in extra:   # as the training-time test runs it: without the nugget grid
                overrides = [o for o in overrides if not o.startswith("nugget.")]
            cfg = composed(overrides)
            for backend in OTHER_BACKENDS:
                try:
                    run(cfg=on_backend(cfg, backend, roots))
                except _Stopped:
                    continue
                except ConfigError as refusal:
                    found.setdefault(str(refusal), [*overrides, f"compute={backend}", *(f"compute.{k}={v}" for k, v in CLUSTER.items()),
                                                     f"partition.rows={ROWS}", f"compute.roots_dir={roots}"])
    return found


@pytest.mark.parametrize("fast", [True, pytest.param(False, marks=pytest.mark.paper)], ids=["slice", "rest"])
def test_each_refusal_is_one_line_from_the_cli_and_an_error_row(fast, cache, tmp_path, capsys):
    """Every distinct refusal the matrix meets (in its fast slice, or in the rest), through ``gnngp run``: one line,
    exit status 1, and an error row holding it, or none where the backend refuses at preflight, before the job. The refusals are found here, from the matrix's own cases."""
    found = refusals(fast, cache, tmp_path / "roots")
    if fast:   # exact kernels and fit=mll on row blocks: without a refusal this test would check nothing
        assert found, "the matrix's slice met no refusal: if every backend now runs every case, this test has nothing left to check"
    for i, (message, overrides) in enumerate(found.items()):
        assert "\n" not in message, message
        with pytest.raises(SystemExit) as code:
            main(["run", *overrides, f"hydra.run.dir={tmp_path / str(i)}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code.value.code == 1 and err == [f"gnngp: error: {message}"], err
        written = tmp_path / str(i) / "results.csv"
        if written.exists():   # refused inside the job: its error row holds the refusal
            row = pd.read_csv(written).iloc[0]
            assert row["status"] == "error" and row["error"] == f"ConfigError: {message}"
        else:   # the backend's own refusal (an exact kernel on row blocks) comes at preflight, before the job writes anything
            assert "compute=dask" in message or "compute=slurm" in message, message
