"""The benchmark scripts' CSVs (scripts/benchcsv.py): a rerun of a cell is one copy in its place,
another table's CSV is refused in one line, a cut last line is left out, two writers take turns;
and the scripts that keep them (a conformal cell with its own number of splits, resumed)."""
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from benchcsv import BenchCsvError, check_writable, measured, read_rows, save_rows, spellings  # noqa: E402

COLUMNS = ["status", "dataset", "seed", "test", "error"]


def test_a_cell_run_again_replaces_its_rows_in_place_and_keeps_the_others(tmp_path):
    out = tmp_path / "b.csv"
    for seed in (0, 1, 2):
        save_rows(out, [{"status": "ok", "dataset": "cora", "seed": seed, "test": 0.5 + seed / 10}], COLUMNS, replace=[{"dataset": "cora", "seed": seed}])
    save_rows(out, [{"status": "error", "dataset": "cora", "seed": 1, "error": "boom"}], COLUMNS, replace=[{"dataset": "cora", "seed": 1}])
    save_rows(out, [{"status": "ok", "dataset": "cora", "seed": 1.0, "test": 0.9}], COLUMNS, replace=[{"dataset": "cora", "seed": 1.0}])
    rows = read_rows(out, COLUMNS)
    assert rows["seed"].tolist() == [0, 1, 2] and rows["test"].tolist() == [0.5, 0.9, 0.7] and rows["status"].eq("ok").all()
    assert measured(rows, {"dataset": "cora", "seed": 1}) and not measured(rows, {"dataset": "cora", "seed": 3})
    save_rows(out, [{"status": "error", "dataset": "cora", "seed": 3, "error": "x"}], COLUMNS, replace=[{"dataset": "cora", "seed": 3}])
    assert not measured(read_rows(out, COLUMNS), {"dataset": "cora", "seed": 3})   # an error row is no measurement: its cell runs again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"]   # no temporary or lock file left beside it


def test_another_tables_csv_a_folder_and_an_unwritable_path_are_one_line(tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("dataset,variant,split\ncora,a,0\n")
    with pytest.raises(BenchCsvError, match=r"holds another table's rows \(columns this script does not write: variant, split\); give this script its own --out"):
        read_rows(other, COLUMNS)
    with pytest.raises(BenchCsvError, match="is a folder"):
        read_rows(tmp_path, COLUMNS)
    older = tmp_path / "older.csv"   # an older version's CSV, without a column added since: read, the column empty
    older.write_text("status,dataset,seed,test\nok,cora,0,0.8\n")
    assert read_rows(older, COLUMNS)["error"].isna().all()
    if os.geteuid() != 0:
        locked = tmp_path / "ro"
        locked.mkdir()
        locked.chmod(0o500)
        with pytest.raises(BenchCsvError, match="cannot write --out .*; give a writable path"):
            check_writable(locked / "b.csv")


def test_a_last_line_cut_short_is_left_out_and_its_cell_runs_again(tmp_path, capsys):
    out = tmp_path / "b.csv"
    out.write_text("status,dataset,seed,test,error\nok,cora,0,0.8,\nok,cora,1,0.")   # a write that stopped in its last row
    rows = read_rows(out, COLUMNS)
    assert rows["seed"].tolist() == [0] and "last line was cut short" in capsys.readouterr().err
    save_rows(out, [{"status": "ok", "dataset": "cora", "seed": 1, "test": 0.7}], COLUMNS, replace=[{"dataset": "cora", "seed": 1}])
    assert read_rows(out, COLUMNS)["test"].tolist() == [0.8, 0.7]


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path, capsys):
    # an adversary's: a file an editor saved without a final newline lost its complete last row at the next save
    out = tmp_path / "b.csv"
    out.write_text("status,dataset,seed,test,error\nok,cora,0,0.8,")
    save_rows(out, [{"status": "ok", "dataset": "cora", "seed": 1, "test": 0.7}], COLUMNS, replace=[{"dataset": "cora", "seed": 1}])
    assert read_rows(out, COLUMNS)["seed"].tolist() == [0, 1] and "cut short" not in capsys.readouterr().err


def test_a_gaussian_jobs_regression_rows_are_its_cell_too(tmp_path):
    # an adversary's: --regression rows record no likelihood, so the gaussian job's key never matched: a rerun appended a copy
    columns = ["status", "dataset", "seed", "kernel", "likelihood", "test"]
    out = tmp_path / "u.csv"
    job = {"dataset": "chameleon", "seed": 0, "kernel": "gcngp", "likelihood": "gaussian"}
    for _ in range(2):
        save_rows(out, [{"status": "ok", "dataset": "chameleon", "seed": 0, "kernel": "gcngp", "likelihood": "", "test": 0.6}], columns,
                  replace=spellings(job))
    rows = read_rows(out, columns)
    assert len(rows) == 1 and any(measured(rows, key) for key in spellings(job))


def _writer(path: str, start: int) -> None:
    for seed in range(start, start + 20):
        save_rows(Path(path), [{"status": "ok", "dataset": "cora", "seed": seed, "test": 0.5}], COLUMNS, replace=[{"dataset": "cora", "seed": seed}])


def test_two_writers_of_one_csv_take_turns_and_lose_no_row(tmp_path):
    out = tmp_path / "b.csv"
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_writer, args=(str(out), start)) for start in (0, 100)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
    assert sorted(read_rows(out, COLUMNS)["seed"].tolist()) == [*range(20), *range(100, 120)]


def test_bench_conformal_runs_its_own_number_of_splits_and_a_rerun_is_one_copy(tmp_path):
    # --splits other than the default loaded the graph with conformal.splits but no conformal=: every cell an error row, exit 0
    out = tmp_path / "conformal.csv"
    command = [sys.executable, str(ROOT / "scripts" / "bench_conformal.py"), "--datasets", "csbm", "--seeds", "0", "--scores", "aps",
               "--kernels", "gcngp:gaussian", "--no-gnn", "--splits", "3", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GNNGP_DATA_MIRROR": os.environ.get("GNNGP_DATA_MIRROR", str(tmp_path))}
    for _ in range(2):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    rows = pd.read_csv(out)
    assert rows["status"].tolist() == ["ok"] and 0.5 < rows["coverage"].iloc[0] <= 1
    # a job that fails keeps its error row beside the next job's (the next save removed it, as the cell's graph's error row)
    both = [*command[:command.index("--kernels") + 1], "nope:gaussian", "gcngp:gaussian", *command[command.index("--kernels") + 2:]]
    subprocess.run([*both[:-1], str(tmp_path / "two.csv")], env=env, capture_output=True, text=True, timeout=300)
    assert sorted(pd.read_csv(tmp_path / "two.csv")["status"]) == ["error", "ok"]
    bad = subprocess.run([*command[:-4], "--splits", "0", "--out", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--splits 0: give at least 1" in bad.stderr.splitlines()[-1]


def _script(name: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name, args, message", [
    ("bench_memory.py", ["--kernels", "gcnpg"], "--kernels: gcnpg is not one of them; did you mean gcngp?"),
    ("bench_memory.py", ["--limits", "bogus"], "--limits: bogus is not one of them"),
    ("bench_fresh.py", ["--rounds", "0"], "argument --rounds: 0: give at least 1"),
    ("bench_mll.py", ["--repeats", "0"], "argument --repeats: 0: give at least 1"),
    ("bench_gap.py", ["--datasets", "nosuch"], "bench_gap.py: error: dataset=nosuch is not an option"),
    ("bench_platonov.py", ["--device", "gpu", "--datasets", "minesweeper", "--splits", "0"], "bench_platonov.py: error: device='gpu' is not valid"),
])
def test_a_benchmarks_bad_flag_is_one_line_before_any_work(tmp_path, name, args, message):
    # tracebacks, a StatisticsError after the warm-up jobs, or error rows with exit 0 that a CI job would pass
    done = _script(name, *args, "--out", str(tmp_path / "out.csv"))
    assert done.returncode == 2 and "Traceback" not in done.stderr and message in done.stderr.strip().splitlines()[-1], done.stderr
    assert not (tmp_path / "out.csv").exists()


def test_table_mll_from_parts_keeps_the_last_parts_row_of_a_cell(tmp_path):
    # a failed fit in part A and its rerun in part B: the table printed both, said MISSES, and the file twice was a traceback
    cells = [("grid", 0.828), ("mll", 0.821), ("mll, no val labels", 0.818)]
    a = pd.DataFrame([{"status": "ok" if p != "mll" else "error", "dataset": "cora", "kernel": "gcngp", "protocol": p,
                       "test": t if p != "mll" else float("nan"), "val": 0.8, "error": "" if p != "mll" else "diverged at step 10"} for p, t in cells])
    b = pd.DataFrame([{"status": "ok", "dataset": "cora", "kernel": "gcngp", "protocol": "mll", "test": 0.821, "val": 0.8, "error": ""}])
    a.to_csv(tmp_path / "a.csv", index=False)
    b.to_csv(tmp_path / "b.csv", index=False)
    done = _script("table_mll.py", "--from-csv", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), str(tmp_path / "b.csv"),
                   "--datasets", "cora", "--kernels", "gcngp")
    assert done.returncode == 0 and "| cora | 0.8280 | 0.8210 | 0.8180 |" in done.stdout and "meets the bar" in done.stdout, done.stdout + done.stderr
