"""Adding a kernel, a dataset, a GNN or a metric is one registry entry: this file adds a toy of
each, in the test alone, and runs them through ``gnngp run``, ``compute=dask``, ``fit=mll`` and
``gnngp verify``, with no other file touched. Their config options, CLI choices, labels,
defaults, fitted parameters and wide network come from the entries."""
import math
import re
import os
import subprocess
import sys
from dataclasses import dataclass

import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from gnngp_cli.api import compose
from gnngp_cli.errors import ConfigError
from gnngp_cli.cli.main import main
from gnngp_cli.data import DATASETS, register_dataset
from gnngp_cli.gnn import GNN, GNNS, register_gnn
from gnngp_cli.kernels import ACTIVATIONS, KERNELS, Conv, Input, ReLU, Serial, Weight, register_kernel
from gnngp_cli.kernels.architectures import Parameter
from gnngp_cli.metrics import METRICS, MetricInput, register_metric
from gnngp_cli.schema import DatasetConfig, GNNConfig, KernelConfig
from helpers import in_process


@dataclass
class SGCConfig(KernelConfig):
    sigma_w: float = 1.0
    hops: int = 2                      # a parameter only this kernel has


def sgc(layers: int, sigma_w: float, hops: int):
    """SGC-like: ``K <- s_w^2 A^hops C0 (A^hops)^T`` then ``L-1`` ReLU layers without graph."""
    first = Serial(Input(), Weight(sigma_w), *[Conv() for _ in range(hops)], name="layer 1")
    return Serial(first, *[Serial(ReLU(), Weight(sigma_w), name=f"layer {l}") for l in range(2, layers + 1)])


def balanced_accuracy_state(p: MetricInput) -> dict:
    """Per nugget column, the right predictions of each class and each class's count (they add up over row groups)."""
    one_hot = torch.nn.functional.one_hot(p.y, p.mean.size(2)).double()
    right = (p.mean.argmax(dim=2) == p.y[:, None]).double()
    return {"right": right.T @ one_hot, "count": one_hot.sum(0)}


def balanced_accuracy(state: dict) -> torch.Tensor:
    """The mean over the classes present of each class's recall."""
    present = state["count"] > 0
    return (state["right"][:, present] / state["count"][present]).mean(1)


@dataclass
class RingConfig(DatasetConfig):
    name: str = "ring"
    num_nodes: int = 120               # a setting only this dataset has


def ring(cfg, store) -> Data:
    """A ring of two-class communities, features that carry the class weakly."""
    n = cfg.num_nodes
    src = torch.arange(n)
    edge_index = torch.stack([torch.cat([src, (src + 1) % n]), torch.cat([(src + 1) % n, src])])
    y = (src * 2 // n).long()
    x = torch.nn.functional.one_hot(y, 2).float() + 0.5 * torch.randn(n, 2, generator=torch.Generator().manual_seed(0))
    data = Data(x=x, y=y, edge_index=edge_index)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(cfg.split_seed))
    for key, idx in (("train", order[: n // 2]), ("val", order[n // 2: 3 * n // 4]), ("test", order[3 * n // 4:])):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[idx] = True
        data[f"{key}_mask"] = mask
    data.task, data.num_classes, data.split = "classification", 2, "random halves"
    return data


@dataclass
class MLPConfig(GNNConfig):
    depth_scale: float = 1.0           # a setting only this GNN has


class MLP(GNN):
    """A graph-free baseline: linear layers (its ``conv`` ignores the edges)."""

    def __init__(self, cfg, in_dim, out_dim):
        super().__init__(cfg, in_dim, out_dim)
        self.convs.extend(torch.nn.Linear(self.dims[l], self.dims[l + 1]) for l in range(cfg.layers))

    def conv(self, l, h, x0, edge_index, edge_weight):
        return self.convs[l](h)


@pytest.fixture(scope="module")
def toys():
    register_kernel("sgcgp", "SGCGP", SGCConfig, parameters=(Parameter("sigma_w"), Parameter("hops", learnable=False)))(sgc)
    register_dataset("ring", "Ring", ring, RingConfig(), split="seeded")
    register_gnn("mlp", "MLP", config=MLPConfig, defaults={"*": {"lr": 0.05, "epochs": 30, "batch_norm": False}})(MLP)
    register_metric("balanced_accuracy", ("classification",), balanced_accuracy_state, balanced_accuracy)
    yield
    KERNELS.pop("sgcgp")
    DATASETS.pop("ring")
    GNNS.pop("mlp")
    METRICS.pop("balanced_accuracy")


def run_cli(tmp_path, *overrides):
    """``gnngp run`` in this process (the toys are registered here only)."""
    main(["run", *overrides, f"hydra.run.dir={tmp_path}", "progress=false"])
    return pd.read_csv(tmp_path / "results.csv").iloc[-1]


def test_toy_kernel_dataset_and_gnn_run_through_gnngp_run(toys, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["gnngp"])
    exact = run_cli(tmp_path / "a", "dataset=ring", "kernel=sgcgp", "kernel.hops=3")
    assert exact["status"] == "ok" and exact["method"] == "SGCGP" and exact["dataset"] == "ring" and exact["n_nodes"] == 120
    assert exact["test"] > 0.8
    low = run_cli(tmp_path / "b", "dataset=ring", "kernel=sgcgp_x")           # the low-rank twin comes for free
    assert low["method"] == "SGCGP-X" and low["landmarks"] == 60
    net = run_cli(tmp_path / "c", "dataset=ring", "gnn=mlp", "gnn.depth_scale=2")
    assert net["method"] == "MLP" and net["status"] == "ok" and '"epochs": 30' in net["extra"]


def test_toy_kernel_and_metric_on_dask_give_the_local_row(toys, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["gnngp"])
    common = ["dataset=ring", "kernel=sgcgp_x", "dataset.metric=balanced_accuracy", "dtype=float64", "device=cpu", f"data.root={tmp_path / 'data'}"]
    local = run_cli(tmp_path / "local", *common)
    dask = run_cli(tmp_path / "dask", *common, "compute=dask", "compute.workers=2", "compute.processes=false", "compute.dashboard=:0",
                   "partition.rows=50")
    assert local["metric"] == dask["metric"] == "balanced_accuracy" and dask["compute_backend"] == "dask"
    for key in ("train", "val", "test", "nugget"):
        assert dask[key] == pytest.approx(local[key], rel=1e-6)
    assert 0.5 < local["test"] <= 1


def test_toy_kernel_fits_its_parameters_by_marginal_likelihood(toys, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["gnngp"])
    row = run_cli(tmp_path, "dataset=ring", "kernel=sgcgp", "fit=mll", "fit.steps=10", "dataset.metric=balanced_accuracy")
    assert row["status"] == "ok" and row["fit"] == "mll" and row["fitted_sigma_w"] > 0 and math.isfinite(row["fit_mll"])
    assert "fitted_hops" not in row.index                                   # declared not learnable


def test_toy_kernel_passes_gnngp_verify_with_the_network_its_blocks_make(toys, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["gnngp"])
    main(["verify", "dataset=ring", "kernel=sgcgp", "verify.widths=[64,128,256,512]", "verify.seeds=8", f"hydra.run.dir={tmp_path}"])
    out = capsys.readouterr().out
    assert "SGCGP: 8 random networks per width (its blocks' own layers, L=2)" in out and "verdict: PASS" in out
    assert set(pd.read_csv(tmp_path / "verify.csv")["verdict"]) == {"PASS"}


def test_toy_kernel_is_a_gpytorch_kernel_with_its_learnable_parameter(toys):
    pytest.importorskip("gpytorch")
    from gnngp_cli.gpytorch import GNNGPKernel

    kernel = GNNGPKernel("sgcgp", ring(RingConfig(), None), hops=3)
    assert {name for name, _ in kernel.named_parameters()} == {"raw_sigma_w"}      # hops is declared not learnable
    k = kernel(torch.arange(0, 120, 6, dtype=torch.float64).view(-1, 1)).to_dense()
    k.sum().backward()
    assert bool(torch.isfinite(k).all()) and bool(torch.isfinite(kernel.raw_sigma_w.grad))


def test_toy_entries_are_typed_config_options(toys):
    cfg = compose(["dataset=ring", "dataset.num_nodes=50", "kernel=sgcgp", "kernel.hops=1"])
    assert cfg.dataset.num_nodes == 50 and cfg.kernel.hops == 1 and not cfg.kernel.low_rank
    with pytest.raises(ConfigError, match="unknown key kernel.sigma_b"):
        compose(["kernel=sgcgp", "kernel.sigma_b=0.1"])         # not a parameter of this kernel
    with pytest.raises(ConfigError, match="unknown key dataset.homophily"):
        compose(["dataset=ring", "dataset.homophily=0.5"])      # not a setting of this dataset
    assert compose(["dataset=ring", "dataset.metric=balanced_accuracy"]).dataset.metric == "balanced_accuracy"


@pytest.mark.parametrize("broken, said", [
    (lambda data: delattr(data, "task"), "its loader gave a graph without task"),       # an AttributeError deep in the job
    (lambda data: delattr(data, "test_mask"), "its loader gave a graph without test_mask"),   # a KeyError
    (lambda data: setattr(data, "num_classes", 1), "has class id 1, and num_classes=1 allows 0..0"),
])
def test_a_registered_loaders_broken_graph_is_one_line(broken, said, tmp_path, monkeypatch):
    def bad(cfg, store):
        data = ring(cfg, store)
        broken(data)
        return data
    register_dataset("badring", "BadRing", bad, RingConfig(name="badring"), split="seeded")
    try:
        monkeypatch.setattr("sys.argv", ["gnngp"])
        out = in_process("run", "dataset=badring", "kernel=gcngp", f"hydra.run.dir={tmp_path}", "progress=false")
    finally:
        DATASETS.pop("badring")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and len(errors) == 1 and said in errors[0], out.stderr


PLUGIN = '''
import torch
from dataclasses import dataclass
from torch_geometric.data import Data
from gnngp_cli.data import register_dataset
from gnngp_cli.schema import DatasetConfig


@dataclass
class Config(DatasetConfig):
    name: str = "plugring"
    num_nodes: int = 80


def plugring(cfg, store):
    n = cfg.num_nodes
    src = torch.arange(n)
    y = (src * 2 // n).long()
    x = torch.nn.functional.one_hot(y, 2).float() + 0.5 * torch.randn(n, 2, generator=torch.Generator().manual_seed(0))
    data = Data(x=x, y=y, edge_index=torch.stack([torch.cat([src, (src + 1) % n]), torch.cat([(src + 1) % n, src])]))
    for key, part in (("train", 0), ("val", 1), ("test", 2)):
        data[key + "_mask"] = src % 3 == part
    data.task, data.num_classes, data.split = "classification", 2, "thirds"
    return data


register_dataset("plugring", "PlugRing", plugring, Config(), split="fixed")
'''


def test_a_registry_entry_of_an_installed_package_of_ones_own_runs_through_gnngp_run(tmp_path):
    """A newcomer's trial: docs/extending.md said the whole tool reads a registry entry, but one
    registered in one's own package was seen by the Python API alone, never by the gnngp command.
    A package's ``gnngp.plugins`` entry point is imported first (gnngp_cli.plugins); one that fails
    to import is one line naming it."""
    from helpers import gnngp

    takes_cora = "from gnngp_cli.data import DATASETS, register_dataset\nregister_dataset('cora', 'Fake', None, DATASETS['cora'].config)\n"
    for name, body, module in (("good", PLUGIN, "plug_good"), ("bad", "raise RuntimeError('no such thing\\nsecond line')\n", "plug_bad"),
                               ("exits", "import sys\nsys.exit(0)\n", "plug_exits"), ("taker", takes_cora, "plug_taker")):
        site = tmp_path / name
        (site / module).mkdir(parents=True)
        (site / module / "__init__.py").write_text(body)
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[gnngp.plugins]\nmine = {module}\n")
    path = lambda site: {"PYTHONPATH": os.pathsep.join([str(tmp_path / site), os.environ.get("PYTHONPATH", "")])}
    done = gnngp("run", "dataset=plugring", "dataset.num_nodes=90", "progress=false", f"hydra.run.dir={tmp_path / 'run'}", env=path("good"))
    assert done.returncode == 0, done.stderr
    row = pd.read_csv(tmp_path / "run" / "results.csv").iloc[-1]
    assert (row["dataset"], row["n_nodes"], row["status"]) == ("plugring", 90, "ok")
    api = subprocess.run([sys.executable, "-c", "from gnngp_cli.api import load_dataset; print(load_dataset('plugring', num_nodes=90).num_nodes)"],
                         capture_output=True, text=True, env={**os.environ, **path("good")})
    assert api.stdout.strip() == "90", api.stderr   # its own keys, bare (they were checked before the plugin was loaded)
    failed = gnngp("run", "dataset=cora", f"hydra.run.dir={tmp_path / 'no'}", env=path("bad"))
    assert failed.returncode == 1 and failed.stderr.strip().splitlines() == [
        "gnngp: error: the gnngp plugin 'mine' (plug_bad, from plug_bad) failed to import (RuntimeError: no such thing); fix it, or "
        "uninstall it: pip uninstall plug_bad"]
    assert not (tmp_path / "no").exists()
    # an adversary's trial of it: a plugin that exits made gnngp run exit 0 with nothing done; one that registered 'cora' ran an
    # 80-node ring as Cora, silently
    exits = gnngp("run", f"hydra.run.dir={tmp_path / 'no'}", env=path("exits"))
    assert exits.returncode == 1 and "the gnngp plugin 'mine' (plug_exits, from plug_exits) failed to import (SystemExit" in exits.stderr
    taker = gnngp("run", "dataset=cora", f"hydra.run.dir={tmp_path / 'no'}", env=path("taker"))
    assert taker.returncode == 1 and "registers the dataset 'cora', which is registered already" in taker.stderr


class _Point:
    """An installed entry point of the gnngp.plugins group, stood in for (its module's import is ``load``)."""

    def __init__(self, load, name="mine"):
        self.name, self.value, self.dist, self.load = name, f"plug_{name}", None, load


@pytest.mark.parametrize("register, said", [
    (lambda: KERNELS.__setitem__("gcngp_x", KERNELS["gcngp"]), "registers the kernel 'gcngp_x', the name of the kernel 'gcngp''s low-rank twin"),
    (lambda: KERNELS.__setitem__("gcn", KERNELS["gcngp"]), "registers the kernel 'gcn', the name of a GNN (gnn=gcn)"),
    (lambda: DATASETS.__setitem__("csbm_1e3", DATASETS["csbm"]), "registers the dataset 'csbm_1e3', the name of a shipped preset"),
    (lambda: ACTIVATIONS.__setitem__("relu", ACTIVATIONS["erf"]), "registers the activation 'relu', which is registered already"),
    (lambda: ACTIVATIONS.__setitem__("conv", ACTIVATIONS["erf"]), "registers the activation 'conv', the name of a composed kernel's block"),
])
def test_a_plugin_name_another_entry_answers_to_is_refused_and_leaves_nothing(monkeypatch, register, said):
    """A newcomer's trial of plugins: kernel=gcngp_x ran a plugin's kernel (0.8270, the shipped
    twin 0.7980), a kernel named gcn trained the GCN, a dataset named csbm_1e3 ran the preset, and
    an activation replacing relu (or named conv) changed a shipped composed kernel's result."""
    import gnngp_cli.plugins as plugins
    from gnngp_cli.compose import registries

    before = {kind: dict(registry) for kind, registry in registries().items()}
    monkeypatch.setattr(plugins, "entry_points", lambda group: [_Point(register)])
    monkeypatch.setattr(plugins, "_LOADED", set())
    monkeypatch.setattr(plugins, "_FAILED", {})
    for _ in range(2):   # refused again at the next load in the process: it was marked loaded, its entries kept (a notebook's 2nd call)
        with pytest.raises(ConfigError, match=re.escape(said)):
            plugins.load_plugins(registries())
    assert {kind: dict(registry) for kind, registry in registries().items()} == before


def test_a_plugin_that_fails_after_registering_leaves_nothing_of_it(monkeypatch):
    import gnngp_cli.plugins as plugins
    from gnngp_cli.compose import registries

    def half():
        KERNELS["half_loaded"] = KERNELS["gcngp"]
        raise RuntimeError("late")
    monkeypatch.setattr(plugins, "entry_points", lambda group: [_Point(half)])
    monkeypatch.setattr(plugins, "_LOADED", set())
    monkeypatch.setattr(plugins, "_FAILED", {})
    for _ in range(2):
        with pytest.raises(ConfigError, match="failed to import \\(RuntimeError: late\\)"):
            plugins.load_plugins(registries())
    assert "half_loaded" not in KERNELS


def test_a_broken_plugin_does_not_block_a_report_of_rows_already_written(monkeypatch, tmp_path):
    import gnngp_cli.plugins as plugins

    def broken():
        raise RuntimeError("broken")
    monkeypatch.setattr(plugins, "entry_points", lambda group: [_Point(broken)])
    monkeypatch.setattr(plugins, "_LOADED", set())
    monkeypatch.setattr(plugins, "_FAILED", {})
    (tmp_path / "runs").mkdir()
    pd.DataFrame([{"status": "ok", "dataset": "cora", "method": "GCNGP", "test": 0.828, "seed": 0, "run": 0, "layers": 2,
                   "timestamp": "2026-01-01T00:00:00"}]).to_csv(tmp_path / "runs" / "results.csv", index=False)
    out = in_process("report", str(tmp_path / "runs"), "--out", str(tmp_path / "r"))
    assert out.returncode == 0 and "gnngp: warning: the gnngp plugin 'mine'" in out.stderr and "the report goes on without it" in out.stderr
    assert in_process("run", f"hydra.run.dir={tmp_path / 'no'}").returncode == 1   # a run needs its registries whole


@pytest.mark.parametrize("name, label, config, parameters, said", [
    ("my kernel=1", "MINE", KernelConfig, (), "a kernel's name is a word of lower-case letters"),
    ("mine_x", "MINE", KernelConfig, (), "does not end in _x"),
    ("mine", "", KernelConfig, (), "needs a label"),
    ("mine", "MINE", dict, (), "its config is a dataclass deriving gnngp_cli.schema.KernelConfig"),
    ("mine", "MINE", KernelConfig, (Parameter("sigma_q"),), "its parameters sigma_q are not fields of its config KernelConfig"),
])
def test_a_malformed_kernel_entry_is_refused_when_registered(name, label, config, parameters, said):
    """A newcomer's plugin trials: each was accepted and failed later (an AttributeError at fit=mll,
    'unknown key kernel.base', an empty method column, a name kernel= cannot take)."""
    with pytest.raises(ConfigError, match=re.escape(said)):
        register_kernel(name, label, config, parameters=parameters)
    assert name not in KERNELS


def test_a_builder_that_returns_no_block_is_one_line(monkeypatch):
    @register_kernel("returns_text", "TEXT", KernelConfig)
    def returns_text(layers):
        return "input"
    try:
        with pytest.raises(ConfigError, match="the builder of kernel=returns_text returned a str, not a Block"):
            KERNELS["returns_text"].architecture(compose(["kernel=gcngp"]).kernel)
    finally:
        KERNELS.pop("returns_text")


def test_a_plugin_may_not_replace_a_backend_and_a_refused_one_leaves_none(monkeypatch):
    # an adversary's: register_backend("local", ...) broke every run (a traceback); a refused plugin's backend stayed registered
    import gnngp_cli.plugins as plugins
    from gnngp_cli.backends import BACKENDS, plugin_registries, register_backend
    from gnngp_cli.schema import ComputeConfig

    def replaces():
        register_backend("local", None, ComputeConfig(backend="local"))

    def adds_then_fails():
        register_backend("mybk", None, ComputeConfig(backend="mybk"))
        raise RuntimeError("late")
    for load, said in ((replaces, "registers the backend 'local', which is registered already"), (adds_then_fails, "failed to import")):
        monkeypatch.setattr(plugins, "entry_points", lambda group, load=load: [_Point(load)])
        monkeypatch.setattr(plugins, "_LOADED", set())
        monkeypatch.setattr(plugins, "_FAILED", {})
        with pytest.raises(ConfigError, match=re.escape(said)):
            plugins.load_plugins(plugin_registries())
    assert BACKENDS["local"].make is not None and "mybk" not in BACKENDS
