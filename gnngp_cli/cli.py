"""The ``gnngp`` command: ``gnngp run [hydra overrides]``."""
from __future__ import annotations

import sys
from pathlib import Path

USAGE = """usage: gnngp <command> [args]

commands:
  run      run one experiment (a Hydra app): gnngp run dataset=cora kernel=gcngp
           sweeps: gnngp run -m dataset=cora,citeseer kernel=gcngp,gcngp_x
           help:   gnngp run --help ; the composed config: gnngp run --cfg job
"""


def config_dir() -> Path:
    """``conf/`` beside the package (source checkout or editable install), or inside it."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit("gnngp: error: the conf/ folder with config.yaml was not found; reinstall with 'pip install -e .' from the project folder")


def _hydra_app(task, argv: list[str], prog: str) -> None:
    import hydra

    from .config import register_configs

    register_configs()
    sys.argv = [prog, *argv]
    hydra.main(version_base=None, config_path=str(config_dir()), config_name="config")(task)()


def _run_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from .runner import execute

    hc = HydraConfig.get()
    execute(cfg, Path(hc.runtime.output_dir), hc.mode == RunMode.MULTIRUN)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    command, rest = argv[0], argv[1:]
    if command == "run":
        _hydra_app(_run_task, rest, "gnngp run")
    else:
        print(f"gnngp: error: unknown command '{command}'; use one of: run", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
