"""`gnngp run --help` and `gnngp verify --help`: every config group with its options, and every key
of the composed config on one line with what it is (the schemas' field comments, one place)."""
import pytest
from helpers import in_process

from gnngp_cli.api import compose
from gnngp_cli.cli.help import config_groups, config_key_lines
from gnngp_cli.schema import field_descriptions

def undescribed(overrides, config_name="config"):
    from gnngp_cli.backends import compute_options
    from gnngp_cli.compose import compose as compose_named

    cfg = compose_named(overrides, compute_options(), config_name=config_name) if config_name != "config" else compose(overrides)
    return [key for key, _, description in config_key_lines(cfg) if not description]


@pytest.mark.parametrize("group, options", [   # every model and dataset option: test_config (composed once there)
    ("fit", ["grid", "mll"]), ("compute", ["local", "dask", "slurm"]),
])
def test_every_key_of_every_composed_config_has_a_description(group, options):
    missing = {option: undescribed([f"{group}={option}"]) for option in options}
    assert not {option: keys for option, keys in missing.items() if keys}, missing


def test_every_key_of_verify_and_of_a_paper_preset_has_a_description():
    assert not undescribed([], config_name="verify")
    assert not undescribed(["experiment=table4"])


def test_a_description_is_the_comment_beside_the_field_or_above_it():
    from dataclasses import dataclass

    @dataclass
    class Example:
        beside: int = 1                 # the comment beside it
        # the comment above it,
        # on two lines
        above: int = 2
        none: int = 3

    assert field_descriptions(Example) == {"beside": "the comment beside it", "above": "the comment above it, on two lines"}


def test_run_help_lists_every_group_with_its_options_and_every_key_on_one_line():
    out = in_process("run", "--help")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    groups = config_groups()
    for group in ("dataset", "model", "fit", "compute", "experiment", "hydra/launcher"):
        assert group in groups
    for group, (options, default, description) in groups.items():
        assert f"\n{group}: {description}\n" in text and description, group   # every group says what it chooses
        assert all(option in text for option in options), group
        if default:
            assert f"[{default}]" in text, group                                  # the current choice, marked
    for key in ("fit.method=grid", "compute.roots_dir=null", "kernel.sigma_w=1.0", "dataset.name=csbm", "nugget.num=101"):
        line = next(line for line in text.splitlines() if line.strip().startswith(key))
        assert len(line.split(key, 1)[1].strip()) > 5, line                   # the key's description on its line


def test_help_shows_the_keys_of_the_chosen_method():
    out = in_process("run", "kernel=gprgp", "--help")
    assert out.returncode == 0, out.stderr
    assert "kernel.coefficients=null" in out.stdout and "[gprgp]" in out.stdout


def test_verify_help_lists_the_verify_keys_with_descriptions():
    out = in_process("verify", "--help")
    assert out.returncode == 0 and out.stdout.startswith("gnngp verify:"), out.stdout[:200]
    line = next(line for line in out.stdout.splitlines() if line.strip().startswith("verify.widths="))
    assert "widths of the random networks" in line
