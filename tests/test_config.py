"""Configs: every group composes into the typed schema; impossible values fail early."""
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from gnngp_cli.api import compose, run
from gnngp_cli.config import validate
from gnngp_cli.errors import ConfigError

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.mark.parametrize("group", ["dataset", "kernel", "landmarks", "nugget"])
def test_every_config_in_every_group_composes_and_validates(group):
    names = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
    assert names
    for name in names:
        cfg = compose([f"{group}={name}"])
        validate(cfg)


def test_dataset_defaults_flow_into_kernel_and_landmarks():
    cfg = compose(["dataset=chameleon", "kernel=gcngp_x"])
    assert cfg.kernel.sigma_b == pytest.approx(0.1 ** 0.5) and cfg.kernel.low_rank
    assert compose(["dataset=cora"]).kernel.sigma_b == 0.0
    assert compose(["dataset=reddit"]).landmarks.fraction == 50
    assert compose(["dataset=cora", "kernel.sigma_b=0.5"]).kernel.sigma_b == 0.5


def test_wrong_key_or_type_fails_at_composition():
    with pytest.raises(ConfigCompositionException):
        compose(["kernel.layerz=3"])
    with pytest.raises((ConfigCompositionException, ValidationError)):
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
    ],
)
def test_impossible_values_fail_before_any_work(override, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose([override]))


def test_landmark_count_above_training_set_is_refused():
    with pytest.raises(ConfigError, match="landmarks.count=5000 exceeds the 300 training nodes of csbm"):
        run(["kernel=gcngp_x", "landmarks.count=5000"])
