"""The ``gnngp`` command: ``gnngp run [hydra overrides]``."""
from __future__ import annotations

import sys
from pathlib import Path

USAGE = """usage: gnngp <command> [args]

commands:
  run      run one experiment (a Hydra app): gnngp run dataset=cora kernel=gcngp
           sweeps: gnngp run -m dataset=cora,citeseer kernel=gcngp,gcngp_x
           help:   gnngp run --help ; the composed config: gnngp run --cfg job
  report   tables and figures from results: gnngp report [dirs...] [--out DIR] [--check-paper 0.002]
  verify   Monte-Carlo check that wide random networks approach the kernel:
           gnngp verify kernel=gcn2gp verify.widths=[128,512,2048]
"""


def config_dir() -> Path:
    """``conf/`` beside the package (source checkout or editable install), or inside it."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit("gnngp: error: the conf/ folder with config.yaml was not found; reinstall with 'pip install -e .' from the project folder")


def check_output_dir(argv: list[str]) -> None:
    """Refuse, in one line, an output folder that cannot be created (Hydra would fail with a
    traceback): the nearest existing folder of ``hydra.run.dir`` / ``hydra.sweep.dir`` (or of
    ``outputs``/``multirun`` in the working directory) must be a writable folder."""
    import os

    if any(a in ("--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--shell-completion", "-sc") for a in argv):
        return   # nothing is written
    multirun = "-m" in argv or "--multirun" in argv
    key = "hydra.sweep.dir=" if multirun else "hydra.run.dir="
    value = next((a[len(key):] for a in reversed(argv) if a.startswith(key)), "multirun" if multirun else "outputs")
    literal = value.split("${", 1)[0] or "."
    folder = Path(literal).expanduser().absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        why = "is not a folder" if not folder.is_dir() else "is not writable"
        print(f"gnngp: error: the output folder {value} cannot be created: {folder} {why}; set {key}<a writable folder>", file=sys.stderr)
        raise SystemExit(1)


def _hydra_app(task, argv: list[str], prog: str) -> None:
    import hydra

    from .config import register_configs
    from .watchdog import mark_launcher

    check_output_dir(argv)
    mark_launcher()
    register_configs()
    sys.argv = [prog, *argv]
    hydra.main(version_base=None, config_path=str(config_dir()), config_name="config")(task)()


def _run_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from .runner import execute
    from .watchdog import watch_launcher

    watch_launcher()
    hc = HydraConfig.get()
    execute(cfg, Path(hc.runtime.output_dir), hc.mode == RunMode.MULTIRUN, list(hc.overrides.task))


def _verify_task(cfg) -> None:
    import pandas as pd
    import torch
    from hydra.core.hydra_config import HydraConfig

    from .config import validate
    from .data import Adjacency
    from .errors import GnngpError
    from .kernels import BaseKernel
    from .runner import architecture
    from .verify import monte_carlo_errors, small_graph

    try:
        validate(cfg)
        if cfg.kernel.low_rank:
            print("gnngp: note: the check compares networks with the exact kernel; the _x twin is ignored", file=sys.stderr)
        arch = architecture(cfg.kernel)
        v = cfg.verify
        x, edge_index = small_graph(v.num_nodes, v.avg_degree, v.num_features, cfg.seed)
        adjacency = Adjacency.from_graph(edge_index, x.size(0), arch.adjacency, torch.float64, "cpu")
        base = BaseKernel(cfg.kernel.base.name, cfg.kernel.base.gamma, cfg.kernel.base.c, cfg.kernel.base.d)
        _, errors = monte_carlo_errors(arch.network, x, adjacency, base, list(v.widths), v.samples, cfg.seed)
    except GnngpError as err:
        print(f"gnngp: error: {err}", file=sys.stderr)
        raise SystemExit(1)
    table = pd.DataFrame([{"kernel": cfg.kernel.name, "width": e.width, "samples": e.samples, "relative_error": e.relative_error} for e in errors])
    out = Path(HydraConfig.get().runtime.output_dir) / "verify.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    print(f"{arch.label}: relative Frobenius error of the Monte-Carlo covariance of random networks ({v.num_nodes}-node graph)")
    print(table.to_string(index=False))
    print(f"wrote {out}")


def _report(argv: list[str]) -> None:
    import argparse

    from .report import write_report

    parser = argparse.ArgumentParser(prog="gnngp report", description="Tables and figures of the GNNGP paper from result CSVs.")
    parser.add_argument("dirs", nargs="*", default=["outputs", "multirun"], help="folders with results.csv / summary.csv (default: outputs multirun)")
    parser.add_argument("--out", default="outputs/report", help="report folder (default: outputs/report)")
    parser.add_argument("--check-paper", type=float, default=None, metavar="TOL",
                        help="exit 1 if a deterministic GP cell differs from the paper by more than TOL (known deviations excepted)")
    args = parser.parse_args(argv)
    folders = [Path(d) for d in args.dirs if Path(d).is_dir()]
    if not folders:
        print(f"gnngp: error: none of {', '.join(args.dirs)} is a folder; give the folders that hold results.csv files", file=sys.stderr)
        raise SystemExit(1)
    status = write_report(folders, Path(args.out), args.check_paper)
    print(f"report: {Path(args.out) / 'report.md'}")
    print((Path(args.out) / "report.md").read_text())
    raise SystemExit(status)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    command, rest = argv[0], argv[1:]
    if command == "run":
        _hydra_app(_run_task, rest, "gnngp run")
    elif command == "verify":
        _hydra_app(_verify_task, rest, "gnngp verify")
    elif command == "report":
        _report(rest)
    else:
        print(f"gnngp: error: unknown command '{command}'; use one of: run, verify", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
