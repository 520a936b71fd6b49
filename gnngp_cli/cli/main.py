"""The ``gnngp`` command: ``gnngp run [hydra overrides]``."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

USAGE = """usage: gnngp <command> [args]

commands:
  run      run one experiment (a Hydra app): gnngp run dataset=cora kernel=gcngp
           sweeps: gnngp run -m dataset=cora,citeseer kernel=gcngp,gcngp_x
           help:   gnngp run --help ; the composed config: gnngp run --cfg job
  partition  write a dataset as row blocks for compute=dask (once):
           gnngp partition dataset=<name> out=<dir> partition.rows=100000
  report   tables of your runs, and the paper's from its presets: gnngp report DIR... [--out DIR] [--check-paper 0.002]
  verify   wide random networks built from the kernel's own blocks against the kernel, PASS/FAIL (exit 1):
           gnngp verify kernel=gcn2gp verify.widths=[256,512,1024,2048] verify.seeds=16

options:
  -V, --version   print the version
"""


def check_output_dir(argv: list[str]) -> None:
    """Refuse, in one line, an output folder that cannot be created (Hydra would fail with a
    traceback): the nearest existing folder of ``hydra.run.dir`` / ``hydra.sweep.dir`` (or of
    ``outputs``/``multirun`` in the working directory) must be a writable folder."""
    import os

    from .preflight import path_too_long

    if any(a in ("--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--shell-completion", "-sc") for a in argv):
        return   # nothing is written
    multirun = "-m" in argv or "--multirun" in argv
    key = "hydra.sweep.dir=" if multirun else "hydra.run.dir="
    value = next((a[len(key):] for a in reversed(argv) if a.startswith(key)), "multirun" if multirun else "outputs")
    if not value.strip():   # an unset shell variable (hydra.run.dir=$OUT): Hydra would write into the working directory
        print(f"gnngp: error: {key} is empty, as an unset shell variable leaves (e.g. {key}$OUT); give the folder, e.g. {key}outputs/my-run",
              file=sys.stderr)
        raise SystemExit(1)
    if "//" in value.split("://")[-1]:
        print(f"gnngp: error: {key}{value} has an empty part ('//'), as an unset shell variable leaves (e.g. $USER); give the folder in full",
              file=sys.stderr)
        raise SystemExit(1)
    literal = value.split("${", 1)[0] or "."
    folder = Path(literal).expanduser().absolute()
    too_long = path_too_long(folder, room=95)   # the job's own files go in it
    if too_long:
        shown = value if len(value) <= 80 else value[:40] + "..."
        print(f"gnngp: error: {key}{shown} {too_long}", file=sys.stderr)
        raise SystemExit(1)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK) or not _can_create_in(folder):
        why = "is not a folder" if not folder.is_dir() else "is not writable"
        print(f"gnngp: error: the output folder {value} cannot be created: {folder} {why}; set {key}<a writable folder>", file=sys.stderr)
        raise SystemExit(1)


def _can_create_in(folder: Path) -> bool:
    """Whether a folder can be made in ``folder``: for root, whom ``os.access`` tells yes
    everywhere (/proc included), by making one and removing it; for anyone else ``os.access``
    (which the caller asked) is the answer, and nothing is made."""
    import os
    import tempfile

    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return True
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".gnngp-check-", dir=folder))
    except OSError:
        return False
    return True


HYDRA_FLAGS = frozenset({"-h", "--help", "--hydra-help", "--version", "-c", "--cfg", "--resolve", "-p", "--package", "-r", "--run", "-m",
                         "--multirun", "-sc", "--shell-completion", "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir",
                         "--experimental-rerun", "-i", "--info"})


def _swept_by_preset(name: str, seen: frozenset = frozenset()) -> set[str]:
    """The keys ``experiment=<name>`` sweeps (its ``hydra.sweeper.params``, and those of the
    presets it builds on by its ``defaults``)."""
    from omegaconf import OmegaConf

    from ..compose import config_dir

    path = Path(config_dir()) / "experiment" / f"{name}.yaml"
    if name in seen or not path.is_file():
        return set()
    preset = OmegaConf.load(path)
    keys = set(OmegaConf.select(preset, "hydra.sweeper.params") or {})
    for parent in preset.get("defaults", []) or []:
        if isinstance(parent, str):
            keys |= _swept_by_preset(parent, seen | {name})
    return keys


def check_preset_sweep(argv: list[str], prog: str) -> None:
    """``experiment=table4`` without ``-m`` ran one job of the defaults (GCNGP on csbm, no job of
    the preset), exit 0: without ``-m`` every key the preset sweeps is given one value (one of its
    jobs), else one line asking for ``-m`` or those values."""
    from .tracking import MULTIRUN, SHOWN

    if MULTIRUN.intersection(argv) or SHOWN.intersection(argv):
        return
    given = {arg.partition("=")[0].lstrip("+~") for arg in argv if "=" in arg}
    given |= {"model" for key in ("kernel", "gnn") if key in given}
    for arg in argv:
        key, sep, value = arg.partition("=")
        swept = _swept_by_preset(value) if sep and key.lstrip("+") == "experiment" else set()
        if swept - given:   # a key left to its default would run a job the preset has not (GCNGP on csbm in table4)
            keys = ", ".join(sorted(swept))
            example = " ".join(f"{k}=..." for k in sorted(swept))
            _fail(f"experiment={value} is a sweep of many jobs (over {keys}): add -m ({prog} -m experiment={value} ...), "
                  f"or choose one job of it by giving each of its keys one value ({prog} experiment={value} {example})")


PARTITION_HELP = """gnngp partition: write a dataset's graph once as row blocks (its features, graph and row order in
files), for compute=dask runs that read them with compute.shards=<dir>. It starts no workers.

  gnngp partition dataset=reddit out=shards/reddit                       blocks of 100,000 nodes
  gnngp partition dataset=reddit out=shards/reddit partition.rows=50000 data.order=rcm

Keys: out=<dir> (required: the folder to write), partition.rows (nodes per block; auto: 100,000),
the graph's keys (dataset=<name>, dataset.*, data.*, experiment.stand_in, max_memory_gb); every
other key set away from its default is refused. gnngp run dataset=<name> --help lists the
dataset's keys; docs/dask.md says more."""

VALUE_FLAGS = frozenset({"-c", "--cfg", "-p", "--package", "-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir",
                         "--experimental-rerun"})
INFO_CHOICES = frozenset({"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"})


def flags_first(argv: list[str]) -> list[str]:
    """Hydra's flags (with their values) after the overrides: argparse takes the overrides as
    one run of words, so ``-m dataset=a --cfg job hydra.sweep.dir=x`` left ``hydra.sweep.dir=x``
    unrecognised (its usage, exit 2), and ``--info dataset=a`` read ``dataset=a`` as --info's choice."""
    flags, overrides, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        takes = (arg in VALUE_FLAGS or (arg in ("-i", "--info") and i + 1 < len(argv) and argv[i + 1] in INFO_CHOICES))
        if arg.startswith("-"):
            flags.extend(argv[i:i + 2] if takes else [arg])
            i += 2 if takes else 1
        else:
            overrides.append(arg)
            i += 1
    return overrides + flags


def check_flags(argv: list[str], prog: str) -> None:
    """An argument that starts with ``-`` is one of Hydra's flags, else one line (argparse would
    print its usage, nine lines, then its own error)."""
    for i, arg in enumerate(argv):
        key, eq, value = arg.partition("=")
        if arg.startswith("-") and key not in HYDRA_FLAGS:
            word = key.lstrip("-")
            given = value if eq else (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") and "=" not in argv[i + 1] else "")
            hint = f" (did you mean {word}={given or '...'}?)" if key.startswith("--") and word.replace("_", "").replace(".", "").isalnum() else ""
            flags = "" if prog == "gnngp partition" else " (-m for a sweep, --cfg job for the composed config)"
            _fail(f"{arg!r} is not an option of {prog}; give overrides as key=value{hint}, and flags from {prog} --help{flags}")
        if key in ("-sc", "--shell-completion"):   # Hydra's script completes a program of one word: `gnngp run` is two
            _fail(f"{key}: Hydra's shell completion completes a program named by one word, and {prog} is two, so it would complete "
                  f"nothing; {prog} --help lists the groups, their options and every key")
        if key in ("-c", "--cfg"):
            shown = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if shown not in ("job", "hydra", "all"):
                _fail(f"{key} {shown or '(no value)'} is not a choice: {key} job shows the run's config (hydra: Hydra's own, all: both)")
        if eq and not key.startswith("~") and (value == "~" or value.startswith("~/")):   # the shell expands ~ only at a word's start
            _fail(f"{arg}: the shell expands ~ only at the start of a word, so {value} reached gnngp as typed; give the whole path, "
                  f"e.g. {key}=$HOME{value[1:]}")
        if (eq and value.endswith(",") and value.count("[") == value.count("]") and i + 1 < len(argv) and "=" not in argv[i + 1]
                and not argv[i + 1].startswith("-")):
            _fail(f"{arg} {argv[i + 1]}: the shell cut the sweep at the space after the comma; write it without spaces, "
                  f"{arg}{argv[i + 1]}")
        if eq and value.count("[") > value.count("]") and i + 1 < len(argv):   # [10, 20] unquoted: the shell cut the list at its spaces
            whole = " ".join([value, *argv[i + 1:]])
            depth = next((n for n in range(whole.index("["), len(whole)) if whole[:n + 1].count("[") == whole[:n + 1].count("]")), len(whole) - 1)
            whole = whole[:depth + 1]
            _fail(f"{key}={value} was cut at a space by the shell; write the list without spaces, {key}={whole.replace(' ', '')}, "
                  f"or quote it: '{key}={whole}'")


def _hydra_app(task, argv: list[str], prog: str, config_name: str = "config") -> None:
    """Run a Hydra app; every mistake in the overrides is one line ``gnngp: error: ...`` and
    exit status 1 (see :mod:`gnngp_cli.cli.messages`). A sweep with failed jobs exits 1 after its
    summary is written."""
    import os

    from .messages import check_deletions, check_group_choices, check_repeated, one_line, spell_methods_in_logs, spellings
    from ..compose import method_overrides
    from ..errors import GnngpError
    from .preflight import JobDoesNotCompose
    from .watchdog import mark_launcher

    argv = [a for a in argv if a not in ("logger=none", "hparams_search=none")]   # the groups' default, said (as active=none, conformal=none)
    spelled = spellings(argv)
    check_flags(argv, prog)
    try:
        check_repeated(argv)
        check_deletions(argv)
        check_group_choices(argv)
        argv = method_overrides(argv)
    except GnngpError as err:
        _fail(str(err))
    if ("--help" in argv or "-h" in argv) and prog == "gnngp partition":   # Hydra's would print gnngp run's header
        print(PARTITION_HELP)
        return
    if ("--help" in argv or "-h" in argv) and prog in ("gnngp run", "gnngp verify"):
        from .help import run_help

        run_help([a for a in argv if a not in ("--help", "-h")], config_name)
        return
    from .tracking import check_extras

    try:
        check_extras(argv)   # hparams_search= and logger=: a preset, with its extra installed
    except GnngpError as err:
        _fail(str(err))
    check_preset_sweep(argv, prog)
    check_output_dir(argv)
    argv = flags_first(argv)
    import hydra
    from hydra._internal.hydra import Hydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from . import sweep
    from ..backends import compute_options
    from ..compose import config_dir, register_configs, skip_unset_mode

    mark_launcher()
    spell_methods_in_logs()   # the launchers' and the sweeper's log lines name the method as the user does (kernel=)
    sweep.LAST_SWEEP = None   # this command's sweep, not one an earlier call in this process ran
    register_configs(compute_options())
    skip_unset_mode(Hydra)
    sys.argv = [prog, *argv]
    user_full_error = "HYDRA_FULL_ERROR" in os.environ
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")  # Hydra raises instead of printing its multi-line report
    started: list = []   # a job began: an error after it is the job's, not the overrides'

    def job(cfg):
        started.append(True)
        return task(cfg)
    job.__module__, job.__qualname__ = task.__module__, task.__qualname__   # Hydra names the job's files after the task

    sweep.RUNNING = None
    try:
        hydra.main(version_base=None, config_path=str(config_dir()), config_name=config_name)(job)()
    except JobDoesNotCompose as err:   # before any job: the job's overrides, and why
        _fail(f"{one_line(err.error, spelled)} (sweep job {err.job})")
    except (KeyboardInterrupt, SystemExit):   # a stopped job (SystemExit) or a stop between two jobs of a sweep
        sweep.summarise_stopped()
        raise
    except (HydraException, OmegaConfBaseException) as err:
        if user_full_error:
            raise
        _fail(str(err.__cause__) if isinstance(err.__cause__, GnngpError) else one_line(err, spelled))   # a logger's, from its constructor
    except OSError as err:   # Hydra writing the run's folder (.hydra/config.yaml, multirun.yaml) before any job: a full disk
        if started or user_full_error:   # (after Hydra's own exceptions: its MissingConfigException is an IOError too)
            raise
        _fail(f"could not write the run's folder ({err.strerror or err}{': ' + str(err.filename) if err.filename else ''}); free space "
              "there, or give a writable folder (hydra.run.dir=..., or hydra.sweep.dir=... with -m)")
    except (ValueError, AssertionError) as err:   # Optuna's sweeper (hparams_search=...) when every trial failed: no best one
        if user_full_error:
            raise
        if "Only one of --run, --multirun" in str(err):   # -m beside --cfg / --info / --shell-completion
            _fail(f"-m runs a sweep, and --cfg, --info and --shell-completion show one job without running it: give one of them "
                  f"(drop -m to see a job's config, e.g. {prog} dataset=cora --cfg job)")
        if "No trials are completed" in str(err):   # Optuna's sweeper raised before the callbacks' end: the summary written here
            sweep.summarise_stopped(stopped=False)
            written = sweep.LAST_SWEEP.path if sweep.LAST_SWEEP is not None else "each job's results.csv in the sweep folder"
            _fail(f"every trial of the search failed, so it has no best one; their errors are rows of {written}")
        if started:
            raise
        # Hydra's composition, before any job: compute.job_extra._=0 (a list indexed by a name) is int('_'),
        # fit.learn.dj0=0 (a key under null) OmegaConf's assertion
        _fail(f"the overrides could not be applied ({str(err).splitlines()[0] if str(err).strip() else type(err).__name__}); "
              "a list is indexed by a number (verify.widths.0=256), a key is set only under a mapping (not under fit.learn, "
              "which is null or a list), and gnngp run --cfg job shows the keys")
    finally:
        if not user_full_error:
            os.environ.pop("HYDRA_FULL_ERROR", None)
    if sweep.LAST_SWEEP is not None and (sweep.LAST_SWEEP.failed or sweep.LAST_SWEEP.unwritten):
        s = sweep.LAST_SWEEP
        _fail("; ".join(part for part in (f"{s.failed} of {s.jobs} jobs failed; their errors are rows of {s.path}" if s.failed else "",
                                          s.unwritten) if part))


def _fail(message: str) -> None:
    print(f"gnngp: error: {message}", file=sys.stderr)
    raise SystemExit(1)


def _run_task(cfg) -> float:
    """One job; its value for a sweeper (``hparams_search=...``) is the mean validation metric
    (:func:`~gnngp_cli.cli.execute.objective`); a failed job of a search raises, a failed trial."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from .execute import execute, objective
    from .watchdog import watch_launcher

    watch_launcher()
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    rows = execute(cfg, Path(hc.runtime.output_dir), multirun, list(hc.overrides.task))
    searched = multirun and not str(hc.sweeper.get("_target_", "")).endswith("BasicSweeper")   # a sweeper that optimises the value
    return objective(rows, searched)


def _partition_task(cfg) -> None:
    import time

    from ..backends.rowblocks.dask_backend import partition
    from ..config import parse
    from ..data import DataStore
    from ..errors import ConfigError, GnngpError
    from .preflight import NO_OUT

    try:
        spec = parse(cfg, command="partition")
        if not spec.partition.out:
            raise ConfigError(NO_OUT)   # a sweep's job (its preflight checks each run alone)
        store = DataStore.of(spec.data)
        start = time.perf_counter()
        meta = partition(spec, store, Path(spec.partition.out), spec.partition.rows)
    except GnngpError as err:
        print(f"gnngp: error: {err}", file=sys.stderr)
        raise SystemExit(1)
    except OSError as err:   # the folder's disk full (or gone) while writing: meta.json, written last, is not there
        where = f": {err.filename}" if err.filename else ""
        print(f"gnngp: error: writing the shards to {spec.partition.out} failed ({err.strerror or err}{where}); the blocks written so far "
              "are no shards (meta.json, written last, is missing, so no run reads them): free space, or give another out=, and run "
              "gnngp partition again", file=sys.stderr)
        raise SystemExit(1)
    blocks = f"{meta.num_blocks:,} row block{'s' if meta.num_blocks != 1 else ''} of up to {meta.rows:,} nodes"
    print(f"wrote {blocks} ({meta.num_nodes:,} nodes, {meta.num_edges:,} edges) "
          f"to {spec.partition.out} in {time.perf_counter() - start:.1f} s; run with compute=dask compute.shards={spec.partition.out}")


def _verify_task(cfg) -> None:
    """One check. In a sweep (``gnngp verify -m``) a FAIL or an error ends this job only: its row
    in ``verify.csv`` says so, and the sweep's summary counts it (exit 1 at the end)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from ..config import parse
    from ..errors import GnngpError
    from ..results.resume import job_overrides
    from ..verify.task import append_table, error_table, verify

    hc = HydraConfig.get()
    multirun, overrides = hc.mode == RunMode.MULTIRUN, job_overrides(list(hc.overrides.task))
    spec = cfg
    try:
        spec = parse(cfg, command="verify")
        if spec.kernel is None:   # gnn=... (or model=<a GNN>): verify compares a kernel with its networks
            from ..errors import ConfigError

            raise ConfigError(f"gnngp verify checks a kernel against the wide networks it is the limit of, and gnn={spec.gnn.name} is a GNN; "
                              "use kernel=<name> (e.g. kernel=gcngp, the GCN's kernel)")
        if spec.kernel.low_rank:
            print("gnngp: note: the check compares networks with the exact kernel; the _x twin is ignored", file=sys.stderr)
        result = verify(spec, Path(hc.runtime.output_dir), overrides)
    except GnngpError as err:
        print(f"gnngp: error: {err}", file=sys.stderr)
        if not multirun:
            raise SystemExit(1)
        append_table(Path(hc.runtime.output_dir) / "verify.csv", error_table(spec, err, overrides))
        return
    if not result.verdict.passed and not multirun:
        raise SystemExit(1)


def _report(argv: list[str]) -> None:
    import argparse

    from ..errors import ConfigError, DatasetError
    from ..report import write_report
    from ..results.writing import ResultsNotWritten

    class OneLine(argparse.ArgumentParser):
        def error(self, message):   # argparse's usage block and message: one line, as every other mistake (exit 2: a usage error)
            print(f"gnngp: error: {message} (gnngp report --help lists the options)", file=sys.stderr)
            raise SystemExit(2)

    parser = OneLine(prog="gnngp report", description="Tables of your runs, and the GNNGP paper's tables and figures "
                                     "from the runs of its presets, from the results.csv / summary.csv files under the folders given (only those).")
    parser.add_argument("dirs", nargs="*", help="folders with results.csv / summary.csv, e.g. outputs/2026-11-27 multirun/table4")
    parser.add_argument("--out", default="outputs/report", help="report folder (default: outputs/report)")
    parser.add_argument("--check-paper", type=float, default=None, metavar="TOL",
                        help="exit 1 if a deterministic GP cell that was run differs from the paper by more than TOL (known deviations "
                             "excepted) or has only an error row; cells not run are listed, not failed (see --require-all); stand-ins are exempt")
    parser.add_argument("--require-all", action="store_true",
                        help="with --check-paper: a checked cell that was not run fails too (the reproduction job's check)")
    parser.add_argument("--exclude", default="", metavar="DATASETS",
                        help="comma-separated datasets the paper check leaves out, e.g. --exclude crocodile (its features are not in the mirror)")
    args = parser.parse_args(argv)
    if not args.dirs:
        print("gnngp: error: give the folders to read, e.g. gnngp report outputs multirun (the report reads only the folders it is given)", file=sys.stderr)
        raise SystemExit(2)
    absent = [d for d in args.dirs if not Path(d).is_dir()]
    if absent:
        overrides = [d for d in absent if "=" in d]
        hint = (f"; gnngp report takes folders and flags (--check-paper, --out), not key=value overrides such as {overrides[0]}: "
                "it reports every row of the folders given" if overrides else "")
        print(f"gnngp: error: {', '.join(absent)}: not a folder; give the folders that hold results.csv files{hint}", file=sys.stderr)
        raise SystemExit(1)
    folders = [Path(d) for d in args.dirs]
    exclude = [d.strip().lower() for d in args.exclude.split(",") if d.strip()]
    if args.require_all and args.check_paper is None:
        print("gnngp: error: --require-all goes with --check-paper TOL, e.g. --check-paper 0.002 --require-all", file=sys.stderr)
        raise SystemExit(2)
    if args.check_paper is not None and not 0 <= args.check_paper < 1:   # NaN too; inf (or 1: a metric's whole range) checks nothing
        print(f"gnngp: error: --check-paper {args.check_paper} is not a tolerance; give a number from 0 to below 1 (a metric's range), "
              "e.g. --check-paper 0.002", file=sys.stderr)
        raise SystemExit(2)
    if exclude and args.check_paper is None:   # it would be read by nothing
        print("gnngp: error: --exclude goes with --check-paper TOL (it leaves datasets out of the paper check), e.g. --check-paper 0.002 "
              f"--exclude {','.join(exclude)}", file=sys.stderr)
        raise SystemExit(2)
    out = Path(args.out).resolve()
    if out == Path(out.anchor) or out == Path.home().resolve():   # a report's dozen files among the system's or one's own
        print(f"gnngp: error: --out {args.out} is {'the root folder' if out == Path(out.anchor) else 'your home folder'}; give a folder "
              "of its own, e.g. --out outputs/report", file=sys.stderr)
        raise SystemExit(2)
    try:
        status = write_report(folders, Path(args.out), args.check_paper, exclude, require_all=args.require_all)
    except ConfigError as err:
        print(f"gnngp: error: {err}", file=sys.stderr)
        raise SystemExit(2)
    except (DatasetError, ResultsNotWritten) as err:   # no result rows under the folders given; --out not writable
        print(f"gnngp: error: {err}", file=sys.stderr)
        raise SystemExit(1)
    print(f"report: {Path(args.out) / 'report.md'}")
    print((Path(args.out) / "report.md").read_text())
    if status:
        first = next((line[len("- FAIL"):].lstrip(": ") for line in (Path(args.out) / "report.md").read_text().splitlines() if line.startswith("- FAIL")), "")
        print(f"gnngp: error: the paper check failed, first: {first.rstrip('.')}; the FAIL lines of {Path(args.out) / 'report.md'} "
              "say which cells and why", file=sys.stderr)
    raise SystemExit(status)


def _log_line_lost(handler: logging.Handler, record: logging.LogRecord) -> None:
    """A log line a handler could not write (``gnngp.log`` on a full disk): one warning, not a
    traceback per line; the run goes on, its console lines and rows as ever."""
    if not getattr(_log_line_lost, "said", False):
        _log_line_lost.said = True
        err = sys.exc_info()[1]
        where = getattr(handler, "baseFilename", None) or type(handler).__name__
        print(f"gnngp: warning: a log line could not be written to {where} ({type(err).__name__}: "
              f"{getattr(err, 'strerror', None) or err}); later ones there are lost too, the run goes on", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    from ..stops import command_stops, stop_signal

    logging.Handler.handleError = _log_line_lost   # this process is gnngp's command: its log handlers' failures are one line
    try:
        with command_stops():   # SIGTERM as Ctrl-C; a second one during the clean-up ends it in order
            _main(argv)
    except KeyboardInterrupt as err:   # a stop outside a job (a job says what it kept itself): imports, composition, between sweep jobs
        name, status = stop_signal(err)
        given = list(argv if argv is not None else sys.argv[1:])
        if given[:1] == ["report"]:   # a report writes no rows: it is published whole or not at all
            print(f"gnngp: error: stopped by {name}; the report was not published: --out holds the earlier one, if any, as it was",
                  file=sys.stderr)
            raise SystemExit(status) from None
        where = " (a sweep's finished jobs in their folders)" if "-m" in (argv or sys.argv) or "--multirun" in (argv or sys.argv) else ""
        print(f"gnngp: error: stopped by {name}; rows already written are kept{where}", file=sys.stderr)
        raise SystemExit(status) from None
    except BrokenPipeError:
        # the reader went away (`gnngp run --help | head`): not an error of ours. Point stdout at
        # devnull so that Python's flush at exit does not raise again (Python docs, "Note on SIGPIPE").
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as err:   # after BrokenPipeError, one of them
        import errno

        if err.errno != errno.ENAMETOOLONG:
            raise
        name = str(err.filename or "")
        print(f"gnngp: error: a path is too long for the file system ({err.strerror}: {name[:60]}{'...' if len(name) > 60 else ''}); "
              "give it shorter (at most 255 bytes a folder or file name, 4,096 the whole path)", file=sys.stderr)
        raise SystemExit(1) from None


def _main(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    if argv[0] in ("-V", "--version", "version"):
        from ..version import __version__

        print(f"gnngp {__version__}")
        return
    command, rest = argv[0], argv[1:]
    if command in ("run", "partition", "verify", "report"):   # other packages' registry entries, before any config is composed
        from ..backends import plugin_registries
        from ..errors import GnngpError
        from ..plugins import load_plugins

        try:
            load_plugins(plugin_registries())
        except GnngpError as err:
            if command != "report":
                print(f"gnngp: error: {err}", file=sys.stderr)
                raise SystemExit(1) from None
            # a report reads rows, not a plugin's entries (a label, a dataset's name): the rows already written are reported
            print(f"gnngp: warning: {err}; the report goes on without it", file=sys.stderr)
    if command == "run":
        _hydra_app(_run_task, rest, "gnngp run")
    elif command == "partition":
        _hydra_app(_partition_task, ["partition.out=" + a.partition("=")[2] if a.startswith("out=") else a for a in rest]
                   + ["hydra.callbacks.preflight.command=partition"], "gnngp partition")   # its preflight parses for partition
    elif command == "verify":
        _hydra_app(_verify_task, rest, "gnngp verify", config_name="verify")
    elif command == "report":
        _report(rest)
    else:
        print(f"gnngp: error: unknown command '{command}'; use one of: run, partition, report, verify (gnngp --help)", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
