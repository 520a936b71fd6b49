"""Refuse, never ignore: each key of the schemas is read by the run it is set on, or refused in one
line; a key added with ``+`` that no schema has is refused. Config checks in this process: each
base config is composed once (a Hydra composition is about 0.4 s) and changed in place."""
import copy
import logging

import pytest
from omegaconf import OmegaConf, open_dict, read_write

from gnngp_cli.api import compose
from gnngp_cli.config import parse, validate
from gnngp_cli.data import DATASETS
from gnngp_cli.errors import ConfigError
from gnngp_cli.gnn import GNNS
from gnngp_cli.kernels import KERNELS
from gnngp_cli.readers import READERS, leaf_keys, reader_of, reads, unread_options
from gnngp_cli.schema import DatasetConfig, GNNConfig, KernelConfig, LoggerConfig, RunConfig, TableConfig
from tests.helpers import in_process

# the runs every key is tried on: a refusal of one run is another's setting
BASES = {
    "gcngp": ["dataset.num_nodes=300"],
    "gcngp_x": ["kernel=gcngp_x", "dataset.num_nodes=300"],
    "rbf": ["kernel=rbf", "dataset.num_nodes=300"],
    "gcn": ["gnn=gcn", "dataset.num_nodes=300"],
    "active": ["active=sigma_opt", "dataset.num_nodes=300"],
    "active_mll": ["active=sigma_opt", "fit=mll", "dataset.num_nodes=300"],
}


@pytest.fixture(scope="module")
def bases():
    return {name: compose(overrides) for name, overrides in BASES.items()}


def with_value(cfg, key: str, value, add: bool = False):
    cfg = copy.deepcopy(cfg)
    with read_write(cfg), open_dict(cfg):
        OmegaConf.update(cfg, key, value, merge=False, force_add=add)
    return cfg


def schema_keys() -> dict[str, bool]:
    """Every key of the schemas and of the registries' entries -> whether it is a common key (of
    the base schemas), which must be named in READERS itself, not only by a registry entry's pattern."""
    keys = {key: True for key in leaf_keys(RunConfig) if key not in ("dataset", "kernel", "gnn")}   # logger, experiment.table: optional nodes
    for section, base, configs in (("dataset", DatasetConfig, [type(e.config) for e in DATASETS.values()]),
                                   ("kernel", KernelConfig, [e.config for e in KERNELS.values()]),
                                   ("gnn", GNNConfig, [type(e.config(name=n)) for n, e in GNNS.items()]),
                                   ("logger", LoggerConfig, []), ("experiment.table", TableConfig, [])):
        common = set(leaf_keys(base))
        keys.update({f"{section}.{key}": True for key in common})
        keys.update({f"{section}.{key}": False for cls in configs for key in leaf_keys(cls) if key not in common})
    return keys


def test_every_key_of_the_schemas_says_which_runs_read_it():
    """A new option, in a schema or a registry entry, fails here until READERS says which runs read it."""
    keys = schema_keys()
    assert len(keys) > 150
    missing = [key for key in keys if reader_of(key) is None]
    assert not missing, f"add these keys to gnngp_cli/readers.py READERS: {missing}"
    only_by_pattern = [key for key, common in keys.items() if common and not any(key in r.keys for r in READERS)]
    assert not only_by_pattern, f"name these common keys in READERS: {only_by_pattern}"
    named = {key for r in READERS for key in r.keys if "*" not in key}
    assert not named - set(keys), f"READERS names keys no schema has: {named - set(keys)}"
    assert len(named) == sum(len([k for k in r.keys if "*" not in k]) for r in READERS), "a key is named twice in READERS"


def changed(value):
    """A value of the same type as ``value``, different from it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2 if value else 0.5
    if isinstance(value, list):
        return value[:1] if len(value) > 1 else [*value, *value] or ["x"]
    return None


EXAMPLES = {   # keys whose default (null, a word) gives no value by type: a valid value other than the default
    "likelihood.alpha": 0.05, "likelihood.temperature": True, "likelihood.probabilities": "mc", "fit.learn": ["nugget"],
    "fit.output_scale": 2.0, "fit.optimizer": "lbfgs", "protocol.left_out": 1, "protocol.perturbation": "swap",
    "protocol.ordering": "personalised", "protocol.shares": [0.2, 0.1, 0.1], "protocol.split": [0.3, 0.1],
    "landmarks.count": 20, "landmarks.pool": "all", "landmarks.fraction": 2.0, "max_memory_gb": 8.0, "kernel.adjacency": "row", "kernel.base.gamma": 2.0,
    "kernel.base.c": 1.0, "kernel.base.d": 2.0, "kernel.gamma_grid.max": 50.0, "kernel.gamma_grid.min": 0.1, "nugget.min": 0.01,
    "nugget.max": 5.0, "compute.product": "torch", "compute.workers": 2, "compute.memory_limit": "2GB", "compute.spill_dir": "/tmp/spill",
    "compute.address": "tcp://127.0.0.1:8786", "compute.shards": "/tmp/shards", "compute.dashboard": ":0", "compute.roots_dir": "/tmp/roots",
    "compute.queue": "batch", "compute.account": "me", "compute.walltime": "01:00:00", "compute.memory": "16GB",
    "compute.job_extra": ["--constraint=cpu"], "partition.rows": 100, "partition.out": "/tmp/blocks", "verify.widths": [32, 64],
    "dtype": "float64", "depth": 3, "protocol.seed": 7, "conformal.seed": 7, "gnn.members": 3, "gnn.mc_samples": 5,
    "likelihood.samples": 64, "likelihood.alpha_grid": [0.1], "kernel.layers": 3, "dataset.landmark_count": 30, "dataset.landmark_fraction": 4.0,
    "active.budgets": [5, 10], "active.model": "gcn", "active.epochs": 5,
}
CHECKED = sorted(key for r in READERS if r.reads.__name__ != "_every" for key in r.keys if "*" not in key)


def set_in_place(cfg, key: str, value) -> None:
    with read_write(cfg), open_dict(cfg):
        OmegaConf.update(cfg, key, value, merge=False)


@pytest.mark.parametrize("base", BASES)
def test_each_option_is_read_by_the_run_it_is_set_on_or_refused_in_one_line(bases, base):
    """Every key that some runs do not read, set on each base run: where READERS says the run reads
    it, the run takes it; else one line naming the key, its value and the runs that read it (the
    refusal validate raises: test_the_issues_options_without_effect_are_refused)."""
    cfg = copy.deepcopy(bases[base])   # each key set, then put back as it was (a copy per key costs more than the check)
    for key in CHECKED:
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if node is None:   # kernel.* on a GNN run, gnn.* on a GP run: an unknown key there
            continue
        raw = OmegaConf.to_container(node, resolve=False)[leaf]   # an interpolation (${depth}) as written
        value = EXAMPLES.get(key, changed(OmegaConf.select(cfg, key)))
        assert value is not None, f"give {key} an example value in EXAMPLES"
        set_in_place(cfg, key, value)
        unread = {item.key: item for item in unread_options(cfg)}
        if reads(cfg, key):
            assert key not in unread
        else:
            message = unread[key].message
            assert message.startswith(f"{key}=") and "has no effect on this run" in message and "read only by" in message, message
            assert "\n" not in message
        set_in_place(cfg, key, raw)
    assert not unread_options(cfg), "a key was not put back"


@pytest.mark.parametrize("overrides, message", [
    (["kernel=rbf", "kernel.layers=5"], "kernel.layers=5 has no effect on this run (kernel=rbf): it is read only by the kernels with layers"),
    (["gnn=gcn", "dtype=float64"], "dtype=float64 has no effect on this run (gnn=gcn): it is read only by GP kernels"),
    (["likelihood.alpha=0.1"], "likelihood.alpha=0.1 has no effect on this run (kernel=gcngp): it is read only by likelihood=dirichlet; "
                               "drop it, or set likelihood=dirichlet"),
    (["landmarks.count=5"], "landmarks.count=5 has no effect on this run (kernel=gcngp): it is read only by low-rank kernels"),
    (["compute.workers=2"], "compute.workers=2 has no effect on this run (kernel=gcngp): it is read only by compute=dask and compute=slurm"),
    (["partition.rows=100"], "partition.rows=100 has no effect on this run"),
    (["protocol.share=0.3"], "protocol.share=0.3 has no effect on this run (kernel=gcngp): it is read only by protocol=feature_shift"),
    (["fit.lr=0.1"], "fit.lr=0.1 has no effect on this run (kernel=gcngp): it is read only by fit=mll"),
    (["kernel.gamma_grid.num=5"], "kernel.gamma_grid.num=5 has no effect on this run (kernel=gcngp): it is read only by a gamma search"),
    (["kernel.base.gamma=2"], "kernel.base.gamma=2.0 has no effect on this run"),
    (["kernel=rbf", "kernel.adjacency=row"], "kernel.adjacency=row has no effect on this run (kernel=rbf)"),
    (["verify.seeds=10"], "verify.seeds=10 has no effect on this run (kernel=gcngp): it is read only by gnngp verify"),
    (["gnn=gcn", "gnn.members=3"], "gnn.members=3 has no effect on this run (gnn=gcn): it is read only by gnn.uncertainty=ensemble"),
    (["gnn=gcn", "nugget.num=5"], "nugget.num=5 has no effect on this run (gnn=gcn)"),
    (["active.batch=2"], "active.batch=2 has no effect on this run (kernel=gcngp): it is read only by active learning"),
    (["active", "nugget.num=5"], "nugget.num=5 has no effect on this run (kernel=gcngp): it is read only by GP kernels with fit=grid"),
    (["active_mll", "fit.steps=5"], "fit.steps=5 has no effect on this run (kernel=gcngp): it is read only by fit=mll outside active learning "
                                    "(an active run's fit=mll chooses the nugget on the nugget grid, with no optimiser); drop it"),   # not "or set fit=mll": it is
])
def test_the_issues_options_without_effect_are_refused(bases, overrides, message):
    """The options found accepted and ignored (issue 50, item 4), each on the base run it was set on."""
    base, *rest = overrides if overrides[0].startswith(("kernel=", "gnn=")) or overrides[0] in BASES else ["gcngp", *overrides]
    cfg = bases[base.split("=")[-1]]
    for override in rest:
        key, _, value = override.partition("=")
        cfg = with_value(cfg, key, yaml_value(value))
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    assert str(refused.value).startswith(message) and not (message.endswith("drop it") and str(refused.value) != message), str(refused.value)


@pytest.mark.parametrize("overrides, read", [
    (["kernel=gcngp", "depth=3", "kernel.layers=2"], False),   # the kernel's own layers win: depth=3 set nothing
    (["gnn=sgc", "depth=3", "gnn.layers=2"], False),
    (["kernel=gcngp", "depth=3"], True),
    (["gnn=gcn", "depth=3"], True),
    (["kernel=gcngp", "depth=3", "kernel.layers=2", "active=random", "active.model=gcn"], True),   # the GCN it trains takes depth
])
def test_depth_beside_a_methods_own_layers_is_refused(overrides, read):
    """A trial's ``depth=3 kernel.layers=2``: the run had 2 layers and the report called it depth=3."""
    cfg = compose(["dataset=csbm", *overrides])
    if read:
        validate(cfg)
        return
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    assert str(refused.value).startswith("depth=3 has no effect on this run") and "gnn.layers or kernel.layers" in str(refused.value)


def yaml_value(text: str):
    return OmegaConf.create({"v": text}).v if not text[:1].isdigit() else OmegaConf.create(f"v: {text}").v


def test_a_value_left_at_its_default_is_never_refused(bases):
    """The defaults of every base run, and a default typed on the command line (kernel.layers=2,
    the value kernel=rbf has anyway), parse; so do the registries' own defaults (arxiv's landmark
    fraction with an exact kernel)."""
    for cfg in bases.values():
        parse(copy.deepcopy(cfg))
    parse(with_value(bases["rbf"], "kernel.layers", 2))
    parse(compose(["dataset=arxiv"]))   # arxiv's landmark fraction, 50, with the exact kernel
    parse(compose(["dataset=csbm_1e5", "kernel=gcngp"]))   # a preset's landmark count
    parse(compose(["experiment=table5", "dataset=pubmed", "gnn=gcn"]))   # kernel.low_rank, for the preset's GP jobs: not a GNN's option


@pytest.mark.parametrize("key, value, message", [
    ("kernel.layer", 3, "unknown key kernel.layer (a + addition adds only keys the schema has); did you mean kernel.layers?"),
    ("foo", "bar", "unknown key foo (a + addition adds only keys the schema has); keys: dataset, method"),
    ("nugget.nmu", 5, "unknown key nugget.nmu (a + addition adds only keys the schema has); did you mean nugget.num?"),
])
def test_a_plus_addition_of_a_key_no_schema_has_is_refused(bases, key, value, message):
    with pytest.raises(ConfigError) as refused:
        validate(with_value(bases["gcngp"], key, value, add=True))
    assert str(refused.value).startswith(message), str(refused.value)


def test_the_command_refuses_in_one_line_with_exit_status_1(tmp_path):   # end to end: Hydra's + and the preflight
    for args, line in ((["+kernel.layer=3"], "gnngp: error: unknown key kernel.layer (a + addition adds only keys the schema has); "
                                              "did you mean kernel.layers?"),
                       (["kernel=rbf", "kernel.layers=5"], "gnngp: error: kernel.layers=5 has no effect on this run (kernel=rbf)")):
        out = in_process("run", *args, f"hydra.run.dir={tmp_path / 'run'}")
        assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith(line), out.stderr
        assert not (tmp_path / "run").exists()   # refused before any work: no run folder


def test_a_sweep_refuses_only_what_no_job_reads_and_the_others_run_it_at_the_default(bases, caplog):
    """``-m kernel=gcngp,rbf kernel.layers=3``: the GCN-GP job reads it, so the sweep runs, and the RBF
    job keeps its default with a warning; ``-m kernel=rbf,ggp kernel.layers=3``: no job reads it."""
    from gnngp_cli.cli.preflight import unread_in_sweep

    gcngp, rbf = with_value(bases["gcngp"], "kernel.layers", 3), with_value(bases["rbf"], "kernel.layers", 3)
    unread_in_sweep([("0: kernel=gcngp", gcngp), ("1: kernel=rbf", rbf)])   # no refusal
    with pytest.raises(SystemExit) as code:
        unread_in_sweep([("0: kernel=rbf", rbf), ("1: kernel=rbf dtype=float64", with_value(rbf, "dtype", "float64"))])
    assert code.value.code == 1
    with caplog.at_level(logging.WARNING, logger="gnngp"):
        spec = parse(copy.deepcopy(rbf), unread="reset")
    assert spec.kernel.layers == 2 and "kernel.layers=3 has no effect on this run (kernel=rbf)" in caplog.text
    assert "this job of the sweep runs with its default kernel.layers=2" in caplog.text
    from gnngp_cli.cli.execute import read_overrides   # and its rows record the settings it ran, not the one it ignored

    assert read_overrides(rbf, ["model=rbf", "kernel.layers=3", "seed=1"]) == ["model=rbf", "seed=1"]
    assert read_overrides(gcngp, ["model=gcngp", "kernel.layers=3"]) == ["model=gcngp", "kernel.layers=3"]


def test_verify_and_partition_read_their_own_keys(bases):
    parse(with_value(bases["gcngp"], "verify.seeds", 8), command="verify")
    parse(with_value(bases["gcngp"], "partition.rows", 100), command="partition")
    with pytest.raises(ConfigError, match="partition.rows=100 has no effect on gnngp verify"):
        parse(with_value(bases["gcngp"], "partition.rows", 100), command="verify")


@pytest.mark.parametrize("overrides, message", [
    (["gnn=gcn", "+kernel.layers=5"], "kernel.layers=5 has no effect on this run (gnn=gcn): a GNN reads no kernel option; they are read "
                                      "only by GP kernels (kernel=<name>); drop it, or run the GP kernel of the same architecture, kernel=gcngp"),
    (["gnn=gcn", "+kernel.foo=1"], "kernel.foo=1 has no effect on this run (gnn=gcn): a GNN reads no kernel option"),
    (["gnn=gcn", "+kernel.base.gamma=2"], "kernel.base.gamma=2 has no effect on this run (gnn=gcn)"),
    (["experiment=table5", "dataset=pubmed", "gnn=gcn", "kernel.low_rank=true"], "kernel.low_rank=true has no effect on this run (gnn=gcn)"),
    (["kernel=gcngp", "+gnn.hidden=5"], "gnn.hidden=5 has no effect on this run (kernel=gcngp): a GP kernel reads no GNN option; they are read "
                                        "only by GNNs (gnn=<name>); drop it, or run the GNN of the same architecture, gnn=gcn"),
])
def test_the_other_methods_section_is_refused(overrides, message):
    """A GNN run's ``kernel`` section (a ``+`` addition, or a preset's value changed) and a GP run's
    ``gnn`` section are read by no run of them: one line naming the key and the method that reads it."""
    with pytest.raises(ConfigError) as refused:
        parse(compose(overrides))
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value), str(refused.value)


@pytest.mark.parametrize("overrides, message", [
    (["landmarks.count=5"], "landmarks.count=5 has no effect on this run (kernel=gcngp): it is read only by low-rank kernels "
                            "(kernel=<name>_x); drop it, or use the low-rank twin kernel=gcngp_x"),
    (["kernel=sagegp", "landmarks.fraction=4"], "landmarks.fraction=4.0 has no effect on this run (kernel=sagegp): it is read only by "
                                                "low-rank kernels (kernel=<name>_x) without landmarks.count; drop it, or use the low-rank twin kernel=sagegp_x"),
    (["dataset=cora", "dataset.landmark_count=10"], "dataset.landmark_count=10 has no effect on this run (kernel=gcngp): it is read only by "
                                                    "low-rank kernels (kernel=<name>_x) without landmarks.count; drop it, or use the low-rank twin kernel=gcngp_x"),
    (["dataset=cora", "dataset.landmark_fraction=3"], "dataset.landmark_fraction=3.0 has no effect on this run (kernel=gcngp)"),
    (["dataset=cora", "kernel=gcngp_x", "landmarks.count=5", "dataset.landmark_count=9"], "dataset.landmark_count=9 has no effect on this run "
                                                                                          "(kernel=gcngp_x): it is read only by low-rank kernels (kernel=<name>_x) without landmarks.count"),
    (["dataset=cora", "gnn=gcn", "dataset.landmark_fraction=3"], "dataset.landmark_fraction=3.0 has no effect on this run (gnn=gcn)"),
])
def test_landmark_options_on_an_exact_kernel_are_refused_naming_the_low_rank_twin(overrides, message):
    """``landmarks.*`` and a dataset's landmark defaults (``dataset.landmark_*``) set on an exact
    kernel or a GNN change nothing: one line naming this run's low-rank kernel."""
    with pytest.raises(ConfigError) as refused:
        parse(compose(overrides))
    assert str(refused.value).startswith(message), str(refused.value)
    parse(compose(["dataset=cora", "kernel=gcngp_x", "dataset.landmark_fraction=3"]))   # read by the low-rank twin


@pytest.mark.parametrize("override, key", [
    ("runs=3", "runs=3"), ("nugget.num=5", "nugget.num=5"), ("fit=mll", "fit.method=mll"), ("likelihood=dirichlet", "likelihood.name=dirichlet"),
    ("conformal=aps", "conformal.name=aps"), ("conformal.alpha=0.2", "conformal.alpha=0.2"), ("landmarks.count=5", "landmarks.count=5"),
    ("dtype=float64", "dtype=float64"), ("compute=dask", "compute.backend=dask"), ("splits=all", "splits=all"),
    ("results_file=mine.csv", "results_file=mine.csv"),
    ("active=sigma_opt", "active.name=sigma_opt"), ("progress=false", "progress=false"), ("logger=mlflow", "logger.name=mlflow"),
    ("experiment.paper=true", "experiment.paper=true"),
])
def test_run_only_options_given_to_verify_are_refused(override, key):
    """``gnngp verify`` checks a kernel against wide networks: the options only ``gnngp run`` reads
    (its runs, nugget grid, fit, likelihood, conformal sets, landmarks, backend) are one line."""
    overrides = [override, "dataset=chameleon"] if override == "splits=all" else [override]
    with pytest.raises(ConfigError) as refused:
        parse(compose(overrides, config_name="verify"), command="verify")
    assert str(refused.value).startswith(f"{key} has no effect on gnngp verify: it is read only by gnngp run; drop it"), str(refused.value)


def test_verify_of_a_low_rank_kernel_names_its_exact_twin():
    with pytest.raises(ConfigError) as refused:
        parse(compose(["kernel=gcngp_x"], config_name="verify"), command="verify")
    assert str(refused.value) == ("kernel=gcngp_x is a low-rank kernel, and gnngp verify checks an exact kernel against wide random "
                                  "networks; use kernel=gcngp")


def test_a_key_of_verify_mistyped_names_the_key_it_is_near_first(tmp_path):
    out = in_process("verify", "verify.seed=3", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and out.stderr.startswith("gnngp: error: unknown key verify.seed; did you mean verify.seeds or seed"), out.stderr


def test_verify_reads_the_kernel_the_dataset_and_its_own_keys():
    for overrides in (["seed=3"], ["kernel.layers=3"], ["kernel=sagegp", "kernel.sigma_w1=0.3"], ["dataset=cora"], ["verify.seeds=8"],
                      ["protocol=feature_shift"], ["kernel.base.name=rbf", "kernel.base.gamma=2"], ["experiment.stand_in=csbm"]):
        parse(compose(overrides, config_name="verify"), command="verify")


def test_verify_refuses_a_run_only_option_on_the_command_line(tmp_path):
    out = in_process("verify", "runs=3", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and out.stderr.strip().splitlines() == [
        "gnngp: error: runs=3 has no effect on gnngp verify: it is read only by gnngp run; drop it (gnngp verify checks a kernel "
        "against wide random networks; it fits no GP and trains no GNN)"], out.stderr
    assert not (tmp_path / "run").exists()


PARTITION_FIX = "drop it (gnngp partition writes a dataset's graph as row blocks; it builds no kernel, fits no GP and trains no GNN)"


@pytest.mark.parametrize("override, key, who", [
    ("runs=3", "runs=3", "gnngp run"), ("nugget.num=5", "nugget.num=5", "gnngp run"), ("fit=mll", "fit.method=mll", "gnngp run"),
    ("likelihood=dirichlet", "likelihood.name=dirichlet", "gnngp run"), ("conformal=aps", "conformal.name=aps", "gnngp run"),
    ("inference.time=[1]", "inference.time=[1]", "gnngp run"), ("active=sigma_opt", "active.name=sigma_opt", "gnngp run"),
    ("gnn=gcn", "gnn.name=gcn", "gnngp run"), ("kernel=gcngp_x", "kernel.low_rank=true", "gnngp run"), ("dtype=float64", "dtype=float64", "gnngp run"),
    ("compute=dask", "compute.backend=dask", "gnngp run"), ("progress=false", "progress=false", "gnngp run"),
    ("kernel=rbf", "kernel.name=rbf", "gnngp run and gnngp verify"),
    ("kernel.layers=3", "kernel.layers=3", "gnngp run and gnngp verify"), ("kernel.adjacency=row", "kernel.adjacency=row", "gnngp run and gnngp verify"),
    ("seed=3", "seed=3", "gnngp run and gnngp verify"), ("protocol=feature_shift", "protocol.name=feature_shift", "gnngp run and gnngp verify"),
])
def test_run_options_given_to_partition_are_refused(override, key, who):
    """``gnngp partition`` writes the graph as row blocks: a key of ``gnngp run`` (and ``gnngp
    verify``) that it never reads is one line naming the key, as ``gnngp verify`` refuses them."""
    with pytest.raises(ConfigError) as refused:
        parse(compose([override]), command="partition")
    assert str(refused.value) == f"{key} has no effect on gnngp partition: it is read only by {who}; {PARTITION_FIX}", str(refused.value)


def test_partition_reads_the_graph_and_its_own_keys_and_defaults_are_never_refused():
    for overrides in (["dataset.num_nodes=300"], ["data.order=rcm"], ["max_memory_gb=4"], ["partition.rows=100"], ["dataset=cora", "experiment.stand_in=csbm"],
                      ["kernel=gcngp"], ["kernel.layers=2"], ["runs=1"], ["fit=grid"], ["seed=0"], ["dtype=float32"], ["active=none"], ["compute=local"]):
        parse(compose(overrides), command="partition")
    with pytest.raises(ConfigError, match="verify.seeds=8 has no effect on gnngp partition: it is read only by gnngp verify; drop it$"):
        parse(compose(["verify.seeds=8"]), command="partition")


def test_partition_without_out_is_refused_before_any_folder_is_made(tmp_path):
    out = in_process("partition", "dataset.num_nodes=300", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and out.stderr.strip() == "gnngp: error: gnngp partition needs the folder to write: out=<dir>", out.stderr
    assert not (tmp_path / "run").exists()


def test_partition_takes_config_yamls_kernel_as_its_default():
    from gnngp_cli.readers import PARTITION_MODEL

    assert compose([]).kernel.name == PARTITION_MODEL


@pytest.mark.parametrize("args, line", [
    (["runs=3"], "runs=3 has no effect on gnngp partition: it is read only by gnngp run"),
    (["gnn=gcn"], "gnn.name=gcn has no effect on gnngp partition: it is read only by gnngp run"),
    (["kernel=gcngp_x"], "kernel.low_rank=true has no effect on gnngp partition: it is read only by gnngp run"),
    (["conformal=aps"], "conformal.name=aps has no effect on gnngp partition: it is read only by gnngp run"),
])
def test_partition_refuses_a_run_option_on_the_command_line(tmp_path, args, line):
    out = in_process("partition", "dataset=csbm", "dataset.num_nodes=300", f"out={tmp_path / 'shards'}", *args, f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and out.stderr.strip().splitlines() == [f"gnngp: error: {line}; {PARTITION_FIX}"], out.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "shards").exists()


def test_a_partition_with_the_keys_it_reads_writes_the_shards(tmp_path):
    from gnngp_cli.data.shards import read_meta

    out = in_process("partition", "dataset=csbm", "dataset.num_nodes=300", f"out={tmp_path / 'shards'}", "partition.rows=100", "data.order=rcm",
                     "max_memory_gb=4", "kernel=gcngp", "runs=1", f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr
    meta = read_meta(tmp_path / "shards")
    assert (meta.num_nodes, meta.rows, meta.num_blocks) == (300, 100, 3)
