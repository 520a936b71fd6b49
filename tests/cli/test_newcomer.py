"""Smaller things a newcomer met (issue 23): the fit=mll line and row say which values were used
and how long the fit took; no folder is made from an empty shell variable."""
import pytest
from helpers import in_process

from gnngp_cli.gp.mll import FitResult
from gnngp_cli.results.writing import summary_line

def mll_row(**fitted) -> dict:
    row = dict(status="ok", method="GCNGP", dataset="cora", run=0, seed=0, metric="accuracy", test=0.82, val=0.8, train=0.95,
               nugget=0.2014, sigma_w=1.0, sigma_b=0.0, kernel_seconds=2.29, inference_seconds=1.71, device="cpu", fit="mll")
    result = FitResult(values=fitted, held={"sigma_b": 0.0}, objective=-0.1, trace=[-0.2, -0.1], steps=50, seconds=56.59,
                       layers=2, architecture=("sigma_w", "sigma_b"))
    row.update(fit_seconds=result.seconds, **result.row())
    return row


def test_the_fit_mll_line_gives_the_fit_time_and_each_used_value_once():
    row = mll_row(nugget=0.00377, output_scale=12.79, sigma_w=0.8672)
    line = summary_line(row)
    assert "in 56.59 s fit + 2.29 s kernel + 1.71 s inference on cpu" in line, line
    assert "fitted by mll and used: nugget 0.2014 (times K's mean diagonal), output_scale 12.79, sigma_w 0.8672" in line, line
    assert "0.00377" not in line and "sigma_w 1" not in line     # neither the absolute nugget nor the configured start


def test_the_fit_mll_row_holds_the_used_value_in_each_setting_column():
    row = mll_row(nugget=0.00377, output_scale=12.79, sigma_w=0.8672)
    assert row["sigma_w"] == row["fitted_sigma_w"] == 0.8672 and row["sigma_b"] == 0.0   # sigma_b held: the configured value is the used one
    per_layer = mll_row(nugget=0.004, output_scale=10.0, sigma_w_1=0.9, sigma_w_2=0.8)
    assert per_layer["sigma_w"] is None and per_layer["fitted_sigma_w_1"] == 0.9   # per layer: the fitted_* columns, not the start
    assert "sigma_w_1 0.9, sigma_w_2 0.8" in summary_line(per_layer)


def test_a_grid_row_line_is_unchanged():
    row = mll_row()
    row.update(fit="grid")
    for key in [k for k in row if k.startswith("fit_")]:
        row.pop(key)
    assert summary_line(row).endswith("(val 0.8000, train 0.9500, nugget 0.201) in 2.29 s kernel + 1.71 s inference on cpu")


@pytest.mark.parametrize("args, env, said", [
    (["hydra.run.dir={tmp}//made"], {}, "hydra.run.dir={tmp}//made has an empty part"),
    (["-m", "hydra.sweep.dir={tmp}//made", "kernel=gcngp_x"], {}, "hydra.sweep.dir={tmp}//made has an empty part"),
    (["data.root={tmp}//made", "dataset=cora", "hydra.run.dir={tmp}/run"], {}, "data.root={tmp}//made has an empty part"),
    (["dataset=cora", "hydra.run.dir={tmp}/run"], {"GNNGP_DATA_ROOT": "{tmp}//made"}, "GNNGP_DATA_ROOT={tmp}//made (the default of data.root) has an empty part"),
    (["compute.spill_dir={tmp}//made", "hydra.run.dir={tmp}/run"], {}, "compute.spill_dir={tmp}//made has an empty part"),
])
def test_no_folder_is_made_from_an_empty_shell_variable(tmp_path, args, env, said):
    """``/scratch/$USER/x`` with ``USER`` unset: refused in one line, and the folder never made
    (the run's own folder, when it is given in full, holds the error row)."""
    tmp = str(tmp_path)
    out = in_process("run", *[a.format(tmp=tmp) for a in args], env={k: v.format(tmp=tmp) for k, v in env.items()})
    assert out.returncode == 1 and said.format(tmp=tmp) in out.stderr, out.stderr
    assert not (tmp_path / "made").exists()


@pytest.mark.parametrize("args", [["hydra.run.dir="], ["-m", "hydra.sweep.dir= ", "dataset=cora"]])
def test_an_empty_output_folder_is_refused_not_the_working_directory(tmp_path, args):
    """``hydra.run.dir=$OUT`` with ``OUT`` unset: Hydra would write the job into the working directory."""
    out = in_process("run", *args, cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "is empty, as an unset shell variable leaves" in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.paper  # slow end to end: runs with the paper tests, keeping the fast suite within its 10 minutes
def test_with_splits_all_every_line_of_a_split_names_it(tmp_path, data_overrides):
    out = in_process("run", "dataset=chameleon_filtered", "kernel=gcngp_x", "splits=all", *data_overrides, f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    lines = (out.stdout + out.stderr).splitlines()
    estimates = [line for line in lines if "(estimate before computing)" in line]
    assert [f"GCNGP-X on chameleon_filtered (split {i}): ~" in line for i, line in enumerate(estimates)] == [True] * 10, estimates
    ends = [line for line in lines if "test accuracy" in line and "(split " in line]
    assert len(ends) == 10   # each split's line as it ends


@pytest.mark.parametrize("value, said", [
    ("11", "splits='11' is not valid: it takes only all; one split is dataset.split_index=11 (splits=all runs every fixed split)"),
    ("every", "splits='every' is not valid: it takes only all; splits=all runs every fixed split of the dataset, dataset.split_index=<k> one of them"),
])
def test_splits_other_than_all_say_how_to_run_one_split(value, said):
    """splits takes only all: "use one of all" read oddly, and running one chosen split is another key."""
    from gnngp_cli.api import compose
    from gnngp_cli.config import validate
    from gnngp_cli.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        validate(compose(["dataset=chameleon", f"splits={value}"]))
    assert str(err.value).startswith(said), str(err.value)
