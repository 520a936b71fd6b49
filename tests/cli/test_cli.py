"""The ``gnngp`` command as a user runs it: a few tests end to end in a fresh process (``gnngp``:
the README's first run, a one-line error and its exit status, ``--version`` and an unknown
command, help into a closed pipe), the rest through the same ``main`` in this process."""
import json
import subprocess
import sys

import pandas as pd
import pytest
from helpers import GNNGP, gnngp, in_process
from gnngp_cli.api import compose
from gnngp_cli.config import parse
from gnngp_cli.errors import GnngpError


def test_default_run_on_embedded_csbm_writes_results(tmp_path):
    out = gnngp("run", f"hydra.run.dir={tmp_path}")   # end to end: the README's first command
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(tmp_path / "results.csv")
    assert rows.loc[0, "status"] == "ok" and rows.loc[0, "method"] == "GCNGP" and rows.loc[0, "dataset"] == "csbm"
    assert rows.loc[0, "test"] > 0.8
    for column in ("kernel_seconds", "inference_seconds", "load_seconds", "peak_rss_mb", "nugget", "timestamp", "version"):
        assert column in rows.columns
    assert "GCNGP on csbm" in out.stderr + out.stdout


def test_an_exact_kernel_refused_at_its_square_over_every_node_says_so(tmp_path, data_overrides):
    """GATGP on PubMed: its blocks on the labelled and training nodes fit in 20 GiB, but the plan
    squares over every node (its product's pairs exceed the pair limit); that square is refused
    before it is computed, and the message says that it is the square that does not fit."""
    out = in_process("run", "dataset=pubmed", "kernel=gatgp", "max_memory_gb=20", *data_overrides, f"hydra.run.dir={tmp_path}")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and errors == [
        "gnngp: error: the exact GATGP kernel on pubmed needs about 23.2 GiB to evaluate it over all 19,717 nodes at once but the "
        "limit is 20.0 GiB (max_memory_gb; default half of the free memory); use the low-rank kernel (kernel=gatgp_x), "
        "or raise max_memory_gb if the memory is yours"], out.stderr


@pytest.mark.paper  # slow: runs in CI with -m paper
def test_rerun_into_the_same_dir_appends_and_keeps_rows(tmp_path):
    for _ in range(2):
        assert in_process("run", "kernel=gcngp_x", "runs=2", f"hydra.run.dir={tmp_path}").returncode == 0
    rows = pd.read_csv(tmp_path / "results.csv")
    assert len(rows) == 4 and rows["run"].tolist() == [0, 1, 0, 1] and rows["seed"].tolist() == [0, 1, 0, 1]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["kernel.layers=0"], "gnngp: error: kernel.layers=0 must be at least 1"),
        (["dataset=reddit", "data.download=false"], "gnngp: error: dataset 'Reddit' is not available"),
        (["kernel=gcngp_x", "landmarks.count=100000"], "gnngp: error: landmarks.count=100000 exceeds the 300 training nodes"),
        (["dataset=custom"], "gnngp: error: dataset=custom needs dataset.path=<dir>"),
        (["max_memory_gb=0.01"], "gnngp: error: the exact GCNGP kernel on csbm needs about"),   # above generating the graph (3.2 MiB)
        (["max_memory_gb=0.01", "fit=mll"],
         "gnngp: error: the exact GCNGP kernel on csbm needs about 91.9 MiB to fit it on its 300 training nodes but the limit is 10.2 MiB"),
        (["fit=mll", "kernel=ggp", "kernel.base.name=linear"], "gnngp: error: fit=mll needs a kernel with a trainable parameter"),
        (["fit=mll", "fit.learn=[nugget,sigma_b]"], "gnngp: error: fit=mll learns sigma_b on a log scale"),
    ],
)
def test_bad_input_is_one_line_without_traceback(tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("GNNGP_DATA_MIRROR", "")
    out = in_process("run", *args, f"data.root={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path}")   # a traceback fails it
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    if "needs about" not in message:   # the memory refusal reads the estimate; every other one comes before it
        assert "estimate before computing" not in out.stdout + out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert len(errors) == 1 and errors[0].startswith(message), out.stderr
    try:
        parse(compose(args))
        refused = False
    except GnngpError:
        refused = True
    if refused:   # the options refused before any work: nothing written (tests/cli/test_preflight.py)
        assert not (tmp_path / "results.csv").exists()
    else:   # found while running: an error row
        row = pd.read_csv(tmp_path / "results.csv").iloc[-1]
        assert row["status"] == "error" and message.split("error: ")[1][:20] in row["error"]


def test_help_and_cfg_job():
    help_out = in_process("run", "--help")
    assert help_out.returncode == 0 and "dataset" in help_out.stdout and "kernel" in help_out.stdout
    cfg = in_process("run", "dataset=cora", "kernel=gcngp_x", "--cfg", "job")
    assert cfg.returncode == 0 and "low_rank: true" in cfg.stdout and "name: cora" in cfg.stdout
    top = in_process()
    assert top.returncode == 0 and "usage: gnngp" in top.stdout


def test_help_into_a_reader_that_leaves_early_is_not_an_error():
    """`gnngp run --help | head -1` (CI's wheel check once failed on the BrokenPipeError)."""
    proc = subprocess.Popen([*GNNGP, "run", "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("gnngp run")
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=600) == 0 and "Traceback" not in err, err


def test_multirun_sweep_over_any_key(tmp_path):
    out = in_process("run", "-m", "kernel=gcngp,gcngp_x", "kernel.layers=1,2", f"hydra.sweep.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    rows = pd.concat([pd.read_csv(p) for p in sorted(tmp_path.glob("*/results.csv"))])
    assert len(rows) == 4 and set(rows["method"]) == {"GCNGP", "GCNGP-X"} and set(rows["layers"]) == {1, 2}


def test_verify_prints_error_by_width(tmp_path):
    out = in_process("verify", "kernel=gingp", "verify.widths=[64,128,256,1024]", "verify.seeds=8", "verify.activation_samples=100000",
                     "verify.resolution=0.25", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    table = pd.read_csv(tmp_path / "verify.csv")
    assert table["width"].tolist() == [64, 128, 256, 1024]
    assert table["relative_error"].iloc[-1] < table["relative_error"].iloc[0]
    assert "relative Frobenius error" in out.stdout and "verdict: PASS" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["dataset=coraa"], "gnngp: error: dataset=coraa is not an option; did you mean dataset=cora?"),
        (["kernel=gcnpg"], "gnngp: error: kernel=gcnpg is not an option; did you mean kernel=gcngp?"),   # as the user spelled it
        (["gnn=gcnn"], "gnngp: error: gnn=gcnn is not an option; did you mean gnn=gcn?"),
        (["-m", "kernel=gcngp,gcngp_y"], "gnngp: error: kernel=gcngp_y is not an option; did you mean kernel=gcngp_x?"),  # every sweep value
        (["fit=mle"], "gnngp: error: fit=mle is not an option; did you mean fit=mll? valid: grid, mll"),
        (["compute=dusk"], "gnngp: error: compute=dusk is not an option; did you mean compute=dask?"),
        (["experiment=tabel4"], "gnngp: error: experiment=tabel4 is not an option; did you mean experiment=table4?"),   # an optional group: Hydra would skip it
        (["kernel.layer=3"], "gnngp: error: unknown key kernel.layer; did you mean kernel.layers?"),
        (["dataset.num_nodez=5"], "gnngp: error: unknown key dataset.num_nodez; did you mean dataset.num_nodes?"),
        (["runs=two"], "gnngp: error: runs: Value 'two' of type 'str' could not be converted to Integer"),
        (["nugget.num=1.5"], "gnngp: error: nugget.num: Value '1.5' of type 'float' could not be converted to Integer"),
        # a key typed where another holds it (the nearest spelling under the wrong section misled: kernel.landmarks -> kernel.layers)
        (["kernel.landmarks=500"], "gnngp: error: unknown key kernel.landmarks; did you mean landmarks.fraction or landmarks.count or landmarks.pool?"),
        (["layers=3"], "gnngp: error: unknown key layers; did you mean depth or kernel.layers or gnn.layers?"),
        (["epochs=50"], "gnngp: error: unknown key epochs; did you mean active.epochs or gnn.epochs?"),
        (["dataset.seed=3"], "gnngp: error: unknown key dataset.seed; did you mean seed or protocol.seed or conformal.seed or active.seed?"),
        (["landmarks=500"], "gnngp: error: landmarks=500 gives a value to a section; set one of its keys, e.g. landmarks.count=500 (keys of landmarks: fraction, count, pool)"),
        (["nugget=0.1"], "gnngp: error: nugget=0.1 gives a value to a section; for that one value set nugget.min=0.1 nugget.max=0.1 nugget.num=1 (keys of nugget: min, max, num)"),
        (["active=random", "active.budgets=20"], "gnngp: error: active.budgets=20 is not a list; give a list, e.g. active.budgets=[20]"),
        (["active=random", "active.budgets=[10,", "20]"], "gnngp: error: active.budgets=[10, was cut at a space by the shell; write the list "
                                                          "without spaces, active.budgets=[10,20], or quote it: 'active.budgets=[10, 20]'"),
        (["verify.widths=[16,", "32,", "64]", "seed=0"], "gnngp: error: verify.widths=[16, was cut at a space by the shell; write the list "
                                                          "without spaces, verify.widths=[16,32,64], or quote it: 'verify.widths=[16, 32, 64]'"),
        (["kernel.alpha=0.2"], "gnngp: error: unknown key kernel.alpha; did you mean kernel=gcn2gp (its kernel.alpha) or likelihood.alpha"),
        (["gnn=gcn", "gnn.alpha=0.1"], "gnngp: error: unknown key gnn.alpha; did you mean gnn=gcn2 (its gnn.alpha) or gnn=gprgnn"),
        (["device=${oc.env:GNNGP_NO_SUCH_VARIABLE}"], "gnngp: error: device: the environment variable GNNGP_NO_SUCH_VARIABLE is not set"),
        (["max_memory_gb=1e-9"], "gnngp: error: generating csbm (3,000 nodes) needs about 3.2 MiB, and the limit is 1.07 bytes"),   # was 0.0 KiB
        (["logger.experiment=\u00e9xp \u2603"], "gnngp: error: logger.experiment=\u00e9xp \u2603 has a character an override takes only in quotes: "
                                                 "write logger.experiment='\u00e9xp \u2603'"),   # an adversary's: the advice dropped ' \u2603'
        (["learning_curve=ntkk"], "gnngp: error: learning_curve=ntkk is not an option; did you mean learning_curve=ntk?"),
        (["learning_curve=null"], "gnngp: error: learning_curve=null: a run without a learning curve leaves learning_curve out"),   # was skipped (optional)
        (["hydra/launcher=jobib"], "gnngp: error: hydra/launcher=jobib is not an option; did you mean hydra/launcher=joblib? valid: basic, joblib,"),
        # a newcomer's trial (a helper, fresh clone): each was Hydra's grammar error or advice that did not fit
        (["dataset=custom", "dataset.path=~/graph"], "gnngp: error: dataset.path=~/graph: the shell expands ~ only at the start of a word, "
                                                     "so ~/graph reached gnngp as typed; give the whole path, e.g. dataset.path=$HOME/graph"),
        (["-m", "dataset=cora,", "citeseer"], "gnngp: error: dataset=cora, citeseer: the shell cut the sweep at the space after the comma; "
                                              "write it without spaces, dataset=cora,citeseer"),
        (["--cfg", "jobs"], "gnngp: error: --cfg jobs is not a choice: --cfg job shows the run's config"),
        (["experiment=mine", "hydra.searchpath=[/no/such/conf]"], "gnngp: error: hydra.searchpath entry /no/such/conf is not a URL; name a "
                                                                  "folder as file:///no/such/conf"),
        (["experiment=mine", "hydra.searchpath=[file:///no/such/conf]"], "gnngp: error: hydra.searchpath entry file:///no/such/conf: "
                                                                         "/no/such/conf is not a folder"),
        (["kernel=gcngp_x", "landmarks.count=100", "landmarks.fraction=5"], "gnngp: error: landmarks.fraction=5.0 has no effect on this run "
                                                                            "(kernel=gcngp_x): it is read only by low-rank kernels (kernel=<name>_x) without landmarks.count; drop it"),
        (["dataset=cora", "splits=all"], "gnngp: error: splits=all needs a dataset with numbered fixed splits (chameleon"),
        # a fifth newcomer's trial: Hydra's words, or a suggestion that pointed the wrong way
        (["kernel=gcngp,gcngp_x"], "gnngp: error: kernel=gcngp,gcngp_x lists several values: a sweep of them needs -m (gnngp run -m kernel=gcngp,gcngp_x ...)"),
        (["seed=1,2"], "gnngp: error: seed=1,2 lists several values: a sweep of them needs -m (gnngp run -m seed=1,2 ...); a key that takes a list"),
        (["dataset", "cora"], "gnngp: error: 'dataset' is not an override: give key=value, e.g. dataset=<value>"),
        (["active.budgets=(10,20)"], "gnngp: error: active.budgets=(10,20) cannot be read (extraneous input '('): a value is a word or a number, or a "
                                     "list in brackets (active.budgets=[10,20])"),
        (["gnn=gcngp"], "gnngp: error: gnn=gcngp: gcngp is a GP kernel; did you mean kernel=gcngp?"),
        (["kernel=gcn"], "gnngp: error: kernel=gcn: gcn is a GNN; did you mean gnn=gcn?"),
        (["device=gpu"], "gnngp: error: device='gpu' is not valid (did you mean 'cuda'?)"),
        (["hydra.sweep_dir=x"], "gnngp: error: unknown key hydra.sweep_dir; did you mean hydra.sweep.dir?"),
        (["kernel=gcngp", "kernel=rbf_x"], "gnngp: error: the method is chosen twice (kernel=gcngp and kernel=rbf_x); keep one"),
        (["protocol=feature_shift", "protocol.share=0"], "gnngp: error: protocol.share=0.0 must be above 0 and below 1"),
        (["--dataset=cora"], "gnngp: error: '--dataset=cora' is not an option of gnngp run; give overrides as key=value (did you mean dataset=cora?)"),
        (["hydra.run.dir=o/\u65e5\u672c"], "gnngp: error: hydra.run.dir=o/\u65e5\u672c has a character an override takes only in quotes: "
                                             "write hydra.run.dir='o/\u65e5\u672c'"),
        (["dataset.num_nodes=range(200,400,100)"], "gnngp: error: dataset.num_nodes=range(200,400,100) is a sweep: add -m"),
        (["-sc", "install=bash"], "gnngp: error: -sc: Hydra's shell completion completes a program named by one word"),
    ],
)
def test_every_config_mistake_is_one_line_with_the_closest_name(tmp_path, args, message):
    out = in_process("run", *args, f"hydra.run.dir={tmp_path}", f"hydra.sweep.dir={tmp_path}")   # a traceback fails it
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and out.stderr.startswith(message), out.stderr
    assert "Traceback" not in out.stderr and "HYDRA_FULL_ERROR" not in out.stderr


def test_a_preset_in_a_package_on_the_search_path_is_an_option(tmp_path, monkeypatch):
    (tmp_path / "my_presets" / "experiment").mkdir(parents=True)
    (tmp_path / "my_presets" / "__init__.py").write_text("")
    (tmp_path / "my_presets" / "experiment" / "small.yaml").write_text("# @package _global_\ndataset:\n  num_nodes: 120\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    done = in_process("run", "experiment=small", "hydra.searchpath=[pkg://my_presets]", "progress=false", f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 0, done.stderr
    assert pd.read_csv(tmp_path / "run" / "results.csv")["n_nodes"].tolist() == [120]
    absent = in_process("run", "experiment=small", "hydra.searchpath=[pkg://no_such_presets]", f"hydra.run.dir={tmp_path / 'absent'}")
    assert absent.stderr.startswith("gnngp: error: hydra.searchpath entry pkg://no_such_presets names no installed Python package")


def test_a_preset_in_the_users_config_folder_is_an_option_and_a_typo_of_it_names_it(tmp_path):
    """docs/configuration.md: ``my_conf/experiment/mine.yaml`` added with ``hydra.searchpath`` (or
    ``--config-dir``) is ``experiment=mine``, checked like the package's presets."""
    (tmp_path / "my_conf" / "experiment").mkdir(parents=True)
    (tmp_path / "my_conf" / "experiment" / "mine.yaml").write_text("# @package _global_\nruns: 2\ndataset:\n  num_nodes: 120\n")
    search = f"hydra.searchpath=[file://{tmp_path / 'my_conf'}]"
    done = in_process("run", "-m", "experiment=mine", search, "progress=false", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert done.returncode == 0, done.stderr
    assert pd.read_csv(tmp_path / "sweep" / "0" / "results.csv")["run"].tolist() == [0, 1]
    typo = in_process("run", "experiment=mien", search, f"hydra.run.dir={tmp_path / 'typo'}")
    assert typo.returncode == 1 and typo.stderr.startswith("gnngp: error: experiment=mien is not an option; did you mean experiment=mine?")
    other = in_process("run", "experiment=mine", f"hydra.run.dir={tmp_path / 'other'}")   # without the folder: not an option
    assert other.returncode == 1 and "experiment=mine is not an option" in other.stderr
    (tmp_path / "my_conf" / "experiment" / "bare.yaml").write_text("runs: 2\n")   # no '# @package _global_'
    (tmp_path / "my_conf" / "experiment" / "typo.yaml").write_text("# @package _global_\nkernel:\n  layer: 3\n")
    bare = in_process("run", "experiment=bare", search, f"hydra.run.dir={tmp_path / 'bare'}")
    assert bare.stderr.strip() == ("gnngp: error: experiment/bare.yaml sets runs, which is read as experiment.runs: a preset that sets "
                                   "the run's keys (runs, kernel.layers, ...) begins with the line '# @package _global_'")
    typo = in_process("run", "experiment=typo", search, f"hydra.run.dir={tmp_path / 'typo'}")
    assert typo.stderr.startswith("gnngp: error: experiment/typo.yaml sets the unknown key kernel.layer; did you mean kernel.layers?")


def test_every_gp_run_tells_its_memory_estimate_before_computing(tmp_path):
    out = in_process("run", "kernel=gcngp_x", "landmarks.count=200", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    estimate = next(line for line in text.splitlines() if "estimate before computing" in line)
    assert "GCNGP-X on csbm: ~" in estimate and "200 landmarks" in estimate
    assert text.index("estimate before computing") < text.index("test accuracy")
    row = pd.read_csv(tmp_path / "results.csv").iloc[0]
    assert row["estimated_gb"] > 0 and pd.isna(row["landmark_fraction"]) and row["landmarks"] == 200   # count used: no fraction


def test_gnn_rows_have_no_kernel_and_rows_name_the_resolved_device(tmp_path):
    out = in_process("run", "gnn=gcn", "gnn.epochs=2", "device=auto", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    row = pd.read_csv(tmp_path / "results.csv").iloc[0]
    assert pd.isna(row["kernel"]) and row["method"] == "GCN" and row["device"] in ("cpu", "cuda")
    bad = in_process("run", "dataset=custom", f"dataset.path={tmp_path / 'absent'}", "device=auto", f"hydra.run.dir={tmp_path / 'bad'}")
    error = pd.read_csv(tmp_path / "bad" / "results.csv").iloc[0]   # an error found while running is a row
    assert bad.returncode == 1 and error["status"] == "error" and error["device"] in ("cpu", "cuda")


def test_version_and_unknown_command():   # end to end: the exit statuses of the command itself
    version = gnngp("--version")
    assert version.returncode == 0 and version.stdout.startswith("gnngp ")
    unknown = gnngp("rnu")
    assert unknown.returncode == 2 and "run, partition, report, verify" in unknown.stderr


IMPORTS_AFTER_EACH = r"""
import json, sys
from gnngp_cli.cli.main import main
for args in json.loads(sys.argv[1]):
    try:
        main(args)
    except SystemExit:
        pass
    found = sorted(m for m in sys.modules if m.split(".")[0] in ("torch_geometric", "ogb"))
    print("IMPORTED", json.dumps([args, found[:3]]), flush=True)
"""


@pytest.mark.paper  # a fresh process: runs in CI with -m paper
def test_help_cfg_report_and_config_errors_import_neither_torch_geometric_nor_ogb(tmp_path):
    """The commands one after another in one fresh process, its modules read after each: a module
    once imported stays, so none after the last command means none imported by any of them."""
    commands = [["run", "--help"], ["run", "--cfg", "job"], ["run", "dataset=coraa"], ["run", "runs=two"],
                ["report", str(tmp_path), "--out", str(tmp_path / "r")], ["run", f"hydra.run.dir={tmp_path / 'csbm'}"]]
    out = subprocess.run([sys.executable, "-c", IMPORTS_AFTER_EACH, json.dumps(commands)], capture_output=True, text=True, timeout=600)
    seen = [json.loads(line[len("IMPORTED "):]) for line in out.stdout.splitlines() if line.startswith("IMPORTED ")]
    assert [args for args, _ in seen] == commands, out.stderr[-2000:]   # every command ran (the last a whole csbm job)
    assert (tmp_path / "csbm" / "results.csv").is_file()
    for args, found in seen:
        assert not found, (args, found)


@pytest.mark.paper  # slow: runs in CI with -m paper
@pytest.mark.parametrize("args", [
    ["dataset=csbm", "dataset.num_nodes=30000", "kernel=gcngp_x", "landmarks.count=1500"],   # a low-rank root of 30,000 x 1,500
    ["dataset=pubmed", "kernel=gcngp"],      # exact, rectangular blocks
    ["dataset=chameleon", "kernel=gcngp"],   # exact, one square block over every node
])
def test_the_memory_estimate_is_within_2x_of_the_measured_peak(tmp_path, args, request):
    extra = request.getfixturevalue("data_overrides") if args[0] != "dataset=csbm" else []
    out = gnngp("run", *args, *extra, f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    row = pd.read_csv(tmp_path / "results.csv").iloc[0]
    measured = row["peak_rss_mb"] / 1024
    assert measured / 2 <= row["estimated_gb"] <= 2 * measured, (row["estimated_gb"], measured)


def test_a_stand_in_says_so_beside_the_dataset_name(tmp_path, monkeypatch, caplog):
    import logging
    from dataclasses import replace

    from gnngp_cli.api import compose
    from gnngp_cli.data import DATASETS
    from gnngp_cli.cli.execute import execute

    monkeypatch.setitem(DATASETS, "arxiv", replace(DATASETS["arxiv"], stand_in=(2000, 8000, 16, 5, 0.54, 0.18)))
    monkeypatch.delenv("GNNGP_DATA_MIRROR", raising=False)
    caplog.set_level(logging.INFO, logger="gnngp")
    cfg = compose(["dataset=arxiv", "kernel=gcngp_x", "experiment.stand_in=csbm", "data.download=false",
                   f"data.root={tmp_path / 'cache'}"])
    rows = execute(cfg, tmp_path, multirun=False)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("GCNGP-X on arxiv (csbm stand-in): ~") for line in lines)            # the estimate
    assert any(line.startswith("GCNGP-X on arxiv (csbm stand-in) (run 0") for line in lines)         # the result
    assert rows[0]["dataset"] == "arxiv" and rows[0]["stand_in"].startswith("csbm stand-in")


def test_verify_help_names_verify_not_run():
    out = in_process("verify", "--help")
    assert out.returncode == 0 and out.stdout.startswith("gnngp verify: wide random networks"), out.stdout[:200]
    assert "gnngp run:" not in out.stdout


def test_the_valid_choices_of_a_typo_are_sorted():
    out = gnngp("run", "dataset=corra")   # end to end: the README's one-line error and exit status 1
    listed = out.stderr.strip().split("valid: ")[1].split(", ")
    assert out.returncode == 1 and listed == sorted(listed) and "cora" in listed


def test_a_folder_with_an_empty_part_is_refused_not_made(tmp_path):
    """``compute.roots_dir=/scratch/$USER/roots`` with USER unset made /scratch//roots."""
    out = in_process("run", f"compute.roots_dir={tmp_path}//roots", "compute=dask", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and f"gnngp: error: compute.roots_dir={tmp_path}//roots has an empty part" in out.stderr
    assert not (tmp_path / "roots").exists()


def test_depth_is_named_as_typed():
    out = in_process("run", "depth=-1")
    assert out.returncode == 1 and "gnngp: error: depth=-1 must be from 1 to 10,000" in out.stderr


def test_partition_help_is_its_own():
    """A trial: gnngp partition --help printed gnngp run's header and examples."""
    out = in_process("partition", "--help")
    assert out.returncode == 0 and out.stdout.startswith("gnngp partition:") and "out=<dir>" in out.stdout and "gnngp run:" not in out.stdout
    wrong = in_process("partition", "dataset=cora", "--out", "x")
    assert wrong.returncode == 1 and "did you mean out=x?" in wrong.stderr and "-m for a sweep" not in wrong.stderr


def test_partition_on_a_full_disk_is_one_line_and_leaves_no_shards_a_run_reads(tmp_path, monkeypatch, data_overrides):
    """A trial: gnngp partition on an 8 MB tmpfs was a 53-line traceback ending in numpy's
    'OSError: 1433000 requested and 610272 written'."""
    from gnngp_cli.data import shards

    real, calls = shards.np.save, []

    def filling(path, array, **kwargs):
        calls.append(path)
        if len(calls) > 3:
            raise OSError("1433000 requested and 610272 written")
        real(path, array, **kwargs)

    monkeypatch.setattr(shards.np, "save", filling)
    out = in_process("partition", "dataset=cora", f"out={tmp_path / 'shards'}", "partition.rows=1000", *data_overrides,
                     f"hydra.run.dir={tmp_path / 'h'}")
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"gnngp: error: writing the shards to {tmp_path / 'shards'} failed (the disk is full: 1433000 requested and "
                                 f"610272 written: {calls[-1]}); the blocks written so far are no shards"), out.stderr
    assert not (tmp_path / "shards" / "meta.json").exists()


def test_a_dataset_config_of_ones_own_with_a_shipped_options_name_is_refused(tmp_path):
    """An adversary's trial: a searchpath's dataset/csbm_1e3.yaml (scaled, centred) ran in place
    of gnngp's csbm_1e3, and gnngp report read its run and the option's as one (a row dropped)."""
    (tmp_path / "conf" / "dataset").mkdir(parents=True)
    (tmp_path / "conf" / "dataset" / "csbm_1e3.yaml").write_text("defaults:\n  - csbm\n  - _self_\nnum_nodes: 1000\nscale: true\n")
    out = in_process("run", f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "dataset=csbm_1e3", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1 and out.stderr.startswith(f"gnngp: error: dataset=csbm_1e3: your {tmp_path / 'conf' / 'dataset' / 'csbm_1e3.yaml'} "
                                                         "has the name of gnngp's own dataset option csbm_1e3")
    (tmp_path / "conf" / "dataset" / "csbm_1e3.yaml").rename(tmp_path / "conf" / "dataset" / "csbm_mine.yaml")
    out = in_process("run", f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "dataset=csbm_mine", "progress=false",
                     f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 0, out.stderr


def test_a_stopped_report_says_nothing_was_published_not_that_rows_were_kept(monkeypatch, capsys):
    # an adversary's: gnngp report stopped by SIGTERM printed "rows already written are kept"; a report writes no rows
    import importlib
    cli = importlib.import_module("gnngp_cli.cli.main")

    def stopped(argv):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_main", stopped)
    with pytest.raises(SystemExit):
        cli.main(["report", "outputs"])
    assert capsys.readouterr().err.strip() == ("gnngp: error: stopped by Ctrl-C; the report was not published: --out holds the earlier one, "
                                               "if any, as it was")


@pytest.mark.parametrize("overrides, message", [
    # an adversary's: kernel.name=rbf ran GCNGP's settings in a row labelled RBF; kernel=gcngp kernel.name=gcn2gp a 67-line traceback
    (["kernel.name=rbf"], "kernel.name is set by kernel=<name>, which brings its own settings with it; give kernel=rbf"),
    (["dataset.name=cora", "dataset.num_nodes=500"], "dataset.name is set by dataset=<name>, which brings its own settings with it"),
    # Hydra kept the last of a group's two choices, silently
    (["dataset=cora", "dataset=citeseer"], "dataset is chosen twice (dataset=cora and dataset=citeseer); choose one (a sweep of both: "
                                           "gnngp run -m dataset=cora,citeseer)"),
    (["fit=grid", "fit=mll"], "fit is chosen twice (fit=grid and fit=mll)"),
])
def test_a_choice_spelled_as_its_name_key_or_chosen_twice_is_one_line(tmp_path, overrides, message):
    out = in_process("run", *overrides, f"hydra.run.dir={tmp_path}")
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith(f"gnngp: error: {message}"), out.stderr
    assert not (tmp_path / "results.csv").exists()


@pytest.mark.parametrize("override", ["likelihood.temperature=2", "data.shared_cache=2", "dataset.center=5"])
def test_a_switch_given_a_number_is_one_line(tmp_path, override):
    # OmegaConf read any integer as a boolean: likelihood.temperature=2 fitted a temperature, data.shared_cache=2 trusted a cache
    out = in_process("run", override, f"hydra.run.dir={tmp_path}")
    key = override.partition("=")[0]
    assert out.returncode == 1 and f"gnngp: error: {override}: {key} is a switch, true or false" in out.stderr.strip().splitlines()[-1], out.stderr


def test_a_switch_spelled_as_omegaconf_spells_a_boolean_is_taken():
    from gnngp_cli.api import compose

    for word in ("yes", "off", "1"):   # OmegaConf's own spellings (an adversary's: yes was refused)
        compose([f"data.shared_cache={word}"])


@pytest.mark.parametrize("degree", ["-1", "0", "2.5"])
def test_a_polynomial_degree_that_is_not_a_whole_number_of_at_least_1_is_one_line(tmp_path, degree):
    # d=0 ran a constant kernel (accuracy 0.13, exit 0); 2.5 and -1 failed mid-run advising lower sigmas or float64
    out = in_process("run", "kernel.base.name=polynomial", f"kernel.base.d={degree}", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 1 and f"kernel.base.d={float(degree):g} is not a polynomial kernel's degree" in out.stderr.strip().splitlines()[-1]


def test_a_kernel_name_in_capitals_gets_the_closest_name(tmp_path):
    # kernel=GCNGP got the list without a did-you-mean (dataset=Cora had one): difflib reads case
    out = in_process("run", "kernel=GCNGP", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 1 and "did you mean kernel=gcngp?" in out.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("key", ["kernel.layers", "dataset.metric"])
def test_removing_a_key_of_a_typed_section_is_one_line_with_the_fix(tmp_path, key):
    # OmegaConf said "does not support deletion" (no fix) or "does not exist" (false: it holds null)
    out = in_process("run", f"~{key}", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith(f"gnngp: error: ~{key} removes a key") and f"{key}=<value>" in out.stderr
