"""Configs: every group composes into the typed schema; impossible values fail early."""
import pytest
from omegaconf import OmegaConf

from gnngp_cli.api import compose, run
from gnngp_cli.config import parse, validate, with_method_defaults
from gnngp_cli.errors import ConfigError



def _options(group: str) -> list[str]:
    from gnngp_cli.data import DATASETS, PRESETS
    from gnngp_cli.gnn import GNNS
    from gnngp_cli.kernels import KERNELS

    if group == "dataset":
        return sorted([*DATASETS, *PRESETS])
    return sorted([*KERNELS, *(k + "_x" for k in KERNELS), *GNNS])


@pytest.mark.parametrize("group", ["dataset", "model"])
def test_every_option_of_every_registry_composes_validates_and_describes_each_key(group):
    """Every option of the registries and of the CLI's choices composes and validates, and every key
    of what it composes has a description (`gnngp run --help` lists them; fit and compute: test_help)."""
    from gnngp_cli.cli.messages import group_options
    from gnngp_cli.cli.help import config_key_lines

    names = sorted({*_options(group), *group_options(group)})
    assert len(names) >= 10
    undescribed = {}
    for name in names:
        cfg = compose([f"{group}={name}"])
        validate(cfg)
        if group == "model" and name in _options(group):
            assert (cfg.kernel if cfg.method == "gp" else cfg.gnn).name == name.removesuffix("_x")
        undescribed[name] = [key for key, _, description in config_key_lines(cfg) if not description]
    assert not {name: keys for name, keys in undescribed.items() if keys}, undescribed


def test_kernel_and_gnn_are_spellings_of_the_one_method_choice():
    assert compose(["kernel=gcngp_x"]).kernel.low_rank
    assert compose(["kernel=gcngp_x"]) == compose(["model=gcngp_x"])
    cfg = compose(["gnn=gcn"])
    assert cfg.method == "gnn" and cfg.kernel is None and cfg.gnn.name == "gcn"
    with pytest.raises(ConfigError, match="both kernel and gnn are set"):
        compose(["kernel=gcngp", "gnn=gcn"])
    # the sweep a hint offers runs: model= where kernels and GNNs mix (kernel=gcngp,gcngp_x,gcn was refused; helper-53)
    with pytest.raises(ConfigError, match=r"a sweep of both: gnngp run -m model=gcngp,gcngp_x,gcn\)$"):
        compose(["kernel=gcngp,gcngp_x", "model=gcn"])
    with pytest.raises(ConfigError, match=r"a sweep of both: gnngp run -m model=gcn,gin,gcngp\)$"):
        compose(["gnn=gcn,gin", "model=gcngp"])
    with pytest.raises(ConfigError, match=r"a sweep of both: gnngp run -m model=gcngp,gcn\)$"):
        compose(["kernel=gcngp", "gnn=gcn"])
    with pytest.raises(ConfigError, match=r"a sweep of both: gnngp run -m kernel=gcngp,rbf_x\)$"):
        compose(["kernel=gcngp", "kernel=rbf_x"])


def test_each_kernel_has_only_its_own_parameters():
    with pytest.raises(ConfigError, match="unknown key kernel.alpha"):
        compose(["kernel=gcngp", "kernel.alpha=0.3"])   # alpha belongs to GCNII
    assert compose(["kernel=gcn2gp", "kernel.alpha=0.3"]).kernel.alpha == 0.3
    with pytest.raises(ConfigError, match="unknown key dataset.num_nodes"):
        compose(["dataset=cora", "dataset.num_nodes=10"])  # a csbm setting


def test_method_defaults_are_resolved_for_the_dataset_and_kept_when_set():
    def resolved(*overrides, task):
        cfg = compose(list(overrides))
        before = OmegaConf.to_yaml(cfg)
        spec = with_method_defaults(parse(cfg), task)
        assert OmegaConf.to_yaml(cfg) == before   # a new spec: nothing is written back into the config
        return spec

    assert resolved("dataset=chameleon", "kernel=gcngp_x", task="regression").kernel.sigma_b == pytest.approx(0.1 ** 0.5)
    assert resolved("dataset=cora", task="classification").kernel.sigma_b == 0.0
    assert resolved("dataset=cora", "kernel.sigma_b=0.5", task="classification").kernel.sigma_b == 0.5
    assert resolved("dataset=reddit", "kernel=sagegp_x", task="classification").kernel.sigma_w1 == pytest.approx(0.1 ** 0.5)
    assert resolved("dataset=cora", "kernel=sagegp", task="classification").kernel.sigma_w1 == 0.0
    gcn = resolved("dataset=squirrel", "gnn=gcn", task="regression").gnn
    assert gcn.lr == pytest.approx(0.1 ** 0.5) and gcn.batch_norm and gcn.epochs == 100
    reddit = resolved("dataset=reddit", "gnn=sage", "gnn.epochs=3", task="classification").gnn
    assert reddit.batch_size == 10240 and reddit.epochs == 3 and reddit.lr == 0.01
    assert compose(["dataset=reddit"]).landmarks.fraction == 50


def test_wrong_key_or_type_fails_at_composition():
    with pytest.raises(ConfigError, match="unknown key kernel.layerz; did you mean kernel.layers"):
        compose(["kernel.layerz=3"])     # the API's compose: the command line's one line, as a typed error
    with pytest.raises(ConfigError, match="kernel.layers: Value 'two'"):
        compose(["kernel.layers=two"])


@pytest.mark.parametrize(
    "override, message",
    [
        ("kernel.layers=0", "kernel.layers=0 must be at least 1"),
        ("kernel.sigma_w=-1", "kernel.sigma_w=-1.0 is negative"),
        ("nugget.min=10", "nugget.min=10.0 must be below nugget.max=10.0"),
        ("nugget.min=0", "nugget.min=0.0 must be positive"),
        ("landmarks.count=0", "landmarks.count=0 must be at least 1"),
        ("landmarks.fraction=0.5", "landmarks.fraction=0.5 must be >= 1"),
        ("runs=0", "runs=0 must be at least 1"),
        ("device=tpu", "device='tpu' is not valid"),
        ("dtype=float16", "dtype='float16' is not valid"),
        ("kernel.base.name=rbff", "kernel.base.name='rbff' is not valid \\(did you mean 'rbf'\\?\\)"),
        ("verify.level=2", "verify.level=2.0 must be between 0 and 1"),
        ("verify.seeds=1", "verify.seeds=1 must be at least 2"),
        ("verify.bootstrap=5", "verify.bootstrap=5 must be at least 100"),
    ],
)
def test_impossible_values_fail_before_any_work(override, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose([override]))


def test_landmark_count_above_training_set_is_refused():
    with pytest.raises(ConfigError, match="landmarks.count=5000 exceeds the 300 training nodes of csbm; use at most 300 or "
                                          "landmarks.fraction, or landmarks.pool=all"):
        run(["kernel=gcngp_x", "landmarks.count=5000"])
    with pytest.raises(ConfigError, match="landmarks.count=5000 exceeds the 3000 nodes of csbm; use at most 3000 or landmarks.fraction$"):
        run(["kernel=gcngp_x", "landmarks.count=5000", "landmarks.pool=all"])
    with pytest.raises(ConfigError, match="landmarks.pool='every' is not valid; use one of train, all"):
        validate(compose(["kernel=gcngp_x", "landmarks.pool=every"]))


def test_landmarks_of_every_node_include_unlabelled_nodes_and_are_recorded():
    """``landmarks.pool=all``: the Nystrom landmarks are drawn from every node (features, never
    labels), seeded; the row records the pool so the report keeps such runs apart."""
    import json

    import torch

    from gnngp_cli.job.landmarks import choose_landmarks, landmark_pool

    train = torch.arange(0, 300, 3)
    drawn, what = landmark_pool("all", train, 1000)
    chosen = choose_landmarks(drawn, 1.0, 200, seed=0, dataset="csbm", what=what)
    assert what == "nodes" and chosen.numel() == 200 and bool((chosen[1:] > chosen[:-1]).all())
    assert not bool(torch.isin(chosen, train).all())   # 200 of 1,000 nodes: not all among the 100 training ones
    assert torch.equal(chosen, choose_landmarks(drawn, 1.0, 200, seed=0, dataset="csbm", what=what))
    assert landmark_pool("train", train, 1000) == (train, "training nodes")
    row = run(["kernel=gcngp_x", "landmarks.pool=all", "landmarks.count=400"])[0]
    assert row["status"] == "ok" and row["landmarks"] == 400 and json.loads(row["extra"])["landmark_pool"] == "all"
    assert "landmark_pool" not in json.loads(run(["kernel=gcngp_x", "landmarks.count=40"])[0]["extra"])


@pytest.mark.parametrize("overrides, message", [
    (["dataset=cora", "dataset.train_ratio=0.5"], "dataset.train_ratio=0.5 does not apply to cora, whose split is the one it comes with; drop it (it applies to csbm, custom"),
    (["dataset=chameleon", "dataset.split_seed=3"], "dataset.split_seed=3 does not apply to chameleon, whose split is numbered (dataset.split_index)"),
    (["dataset=csbm", "dataset.split_index=2"], "dataset.split_index=2 does not apply to csbm, whose split is by dataset.train_ratio and dataset.val_ratio"),
    (["kernel.gamma_search=true"], "kernel.gamma_search=true searches the base kernel's gamma, but kernel.base.name=linear has none"),
    (["kernel=rbf", "fit=mll", "fit.learn=[nugget,output_scale]"], "fit=mll learns the base kernel's gamma instead of searching it on validation, but fit.learn leaves gamma out"),
])
def test_a_setting_the_job_would_not_read_is_refused_not_ignored(overrides, message):
    with pytest.raises(ConfigError) as caught:
        validate(compose(overrides))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_split_settings_a_dataset_reads_are_accepted():
    for overrides in (["dataset=chameleon", "dataset.split_index=3"], ["dataset=crocodile", "dataset.split_seed=2"],
                      ["dataset=csbm", "dataset.train_ratio=0.3", "dataset.split_seed=1"], ["dataset=arxiv", "experiment.stand_in=csbm", "dataset.split_seed=1"]):
        validate(compose(overrides))


def test_a_spec_is_typed_frozen_and_parsed_once():
    """parse() makes the job's spec from the composed config: the schema's own dataclasses (an
    architecture's subclass for the kernel), frozen; a spec given again is the same object."""
    import dataclasses

    from gnngp_cli.kernels.architectures import GATGPConfig
    from gnngp_cli.schema import RunConfig, revised

    spec = parse(compose(["dataset=cora", "kernel=gatgp_x", "kernel.layers=3"]))
    assert isinstance(spec, RunConfig) and isinstance(spec.kernel, GATGPConfig)
    assert spec.kernel.layers == 3 and spec.kernel.low_rank and spec.kernel.sigma_b is None
    assert parse(spec) is spec
    for node, key in ((spec, "seed"), (spec.kernel, "layers"), (spec.kernel.base, "gamma"), (spec.dataset, "split_index")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(node, key, 1)
    changed = revised(spec, kernel=revised(spec.kernel, layers=2))
    assert changed.kernel.layers == 2 and spec.kernel.layers == 3 and changed.frozen and changed.kernel.frozen
    unchecked = dataclasses.replace(spec, runs=0)   # a typed but unfrozen instance is checked as a config before it is frozen
    with pytest.raises(ConfigError, match="runs=0 must be at least 1"):
        parse(unchecked)
