"""A composed config is kept and handed out again as a copy (``gnngp_cli.compose``): the same
config as composing again, never one a caller changed, and composed anew when a registry
entry changes or the configs may come from files a user edits."""
from dataclasses import replace

from gnngp_cli import compose as composing
from gnngp_cli.api import compose
from gnngp_cli.kernels import KERNELS

OVERRIDES = ["dataset=cora", "kernel=gcngp_x", "kernel.layers=3"]


def test_a_kept_config_is_a_copy_equal_to_a_fresh_compose(monkeypatch):
    first = compose(OVERRIDES)
    first.kernel.layers = 7                       # a caller's change stays its own
    again = compose(OVERRIDES)
    assert again.kernel.layers == 3 and again is not first
    monkeypatch.setattr(composing, "_COMPOSED", type(composing._COMPOSED)())   # nothing kept: composed by Hydra
    fresh = compose(OVERRIDES)
    assert fresh == again and again._get_flag("struct") == fresh._get_flag("struct")


def test_a_changed_registry_entry_is_composed_again(monkeypatch):
    before = compose(["kernel=gcngp"]).kernel.sigma_w
    entry = KERNELS["gcngp"]
    changed = replace(entry, config=lambda **kw: replace(entry.config(**kw), sigma_w=before + 1.0))
    monkeypatch.setitem(KERNELS, "gcngp", changed)
    assert compose(["kernel=gcngp"]).kernel.sigma_w == before + 1.0
    monkeypatch.undo()
    assert compose(["kernel=gcngp"]).kernel.sigma_w == before


def test_a_users_config_folder_is_read_on_every_compose(tmp_path):
    preset = tmp_path / "experiment" / "mine.yaml"
    preset.parent.mkdir()
    search = f"hydra.searchpath=[file://{tmp_path}]"
    preset.write_text("# @package _global_\nruns: 2\n")
    assert composing.compose([search, "experiment=mine"]).runs == 2   # as gnngp run composes it (the API knows only the package's presets)
    preset.write_text("# @package _global_\nruns: 4\n")   # edited between two calls of one session
    assert composing.compose([search, "experiment=mine"]).runs == 4



def test_a_compose_copies_no_config_store():
    """Hydra copies its config repository at each compose; the config store inside it is shared
    (:func:`gnngp_cli.compose.share_config_store`): the copies Hydra makes hold no second store
    (the options stored again after a registry change are composed: the test above)."""
    import copy

    from hydra.core.config_store import ConfigStore

    compose(["dataset=cora"])
    store = ConfigStore.instance()
    assert copy.deepcopy(store) is store and copy.deepcopy({"in": [store]})["in"][0] is store


def test_the_packages_config_files_are_parsed_once_and_each_compose_gets_its_own_copy():
    """The YAML files shipped with gnngp and Hydra are parsed once a process
    (:func:`gnngp_cli.compose.keep_package_configs`); each load is a copy, so what Hydra takes
    out of one (the defaults list) is still in the next, and a composed config is the same."""
    first = composing.compose(["dataset=cora", "seed=101"])
    kept = {key: result.config for key, result in composing._SOURCES.items()}
    assert any(str(key[0]).endswith("config.yaml") for key in kept) and any(key[0] == "hydra.conf" for key in kept)
    again = composing.compose(["dataset=cora", "seed=102"])
    assert {key: id(result.config) for key, result in composing._SOURCES.items()} == {key: id(c) for key, c in kept.items()}   # parsed once
    assert all("defaults" in config for key, config in kept.items() if str(key[0]).endswith("config.yaml"))   # never handed out
    assert again.seed == 102 and first.seed == 101 and again.dataset == first.dataset


def test_a_run_composes_once_unless_the_mode_may_be_set_by_the_command_line_or_a_users_configs(tmp_path, monkeypatch):
    """Hydra's app composes once to read ``hydra.mode`` before the run's own compose; no config
    shipped with gnngp sets it, so that compose is skipped (:func:`gnngp_cli.compose.skip_unset_mode`)
    unless the command line sets the mode or adds a config folder of the user's, which may."""
    from hydra._internal.hydra import Hydra

    from helpers import in_process

    composed = []
    real = Hydra.compose_config
    monkeypatch.setattr(Hydra, "compose_config", lambda self, *a, **kw: composed.append(kw.get("run_mode")) or real(self, *a, **kw))
    small = ["dataset=csbm", "dataset.num_nodes=120", "progress=false"]
    done = in_process("run", *small, f"hydra.run.dir={tmp_path / 'plain'}")
    assert done.returncode == 0, done.stderr
    assert len(composed) == 1 and (tmp_path / "plain" / "results.csv").is_file()
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "sweep.yaml").write_text("# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    composed.clear()
    done = in_process("run", *small, f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "experiment=sweep",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert done.returncode == 0, done.stderr
    assert len(composed) >= 2 and (tmp_path / "sweep" / "multirun.yaml").is_file()   # the user's config made it a sweep, without -m
    composed.clear()
    done = in_process("run", *small, "hydra.mode=MULTIRUN", f"hydra.sweep.dir={tmp_path / 'set'}")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "set" / "multirun.yaml").is_file()


def test_a_kept_interpolation_parse_resolves_in_each_config_to_its_own_values():
    """The parse trees of interpolation texts are kept (:func:`gnngp_cli.compose.keep_parsed_interpolations`):
    the same text resolves in each config to that config's values, and a text that does not parse
    is refused each time."""
    import pytest
    from omegaconf import OmegaConf
    from omegaconf.errors import GrammarParseError

    compose(["dataset=cora"])   # installs it
    from omegaconf import base

    assert getattr(base.parse, "kept_by_gnngp", False)
    for value in (1, 2, "x"):
        cfg = OmegaConf.create({"a": value, "b": "${a}", "c": "a${a}b", "d": {"e": "${..a}"}, "f": "${oc.select:g, 7}"})
        assert OmegaConf.to_container(cfg, resolve=True) == {"a": value, "b": value, "c": f"a{value}b", "d": {"e": value}, "f": 7}
    for _ in range(2):
        with pytest.raises(GrammarParseError):
            OmegaConf.create({"a": 1, "b": "${a"})


def test_a_users_interpolated_defaults_and_a_config_under_two_packages_compose_as_hydra_has_them(tmp_path):
    """The two steps of Hydra's composition gnngp skips where nothing reads them
    (:func:`gnngp_cli.compose.skip_unused_interpolation_maps`, :func:`gnngp_cli.compose.embed_loaded_configs`)
    still run where a user's configs need them: a defaults entry naming an interpolation of the
    choices, and one config file placed under two packages (two configs, not one)."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    compose(["dataset=cora"])   # the steps are set up with the configs
    for path, text in {"config.yaml": "defaults:\n  - db@src: mysql\n  - db@dst: mysql\n  - db: postgres\n  - server: ${db}\n  - _self_\n",
                       "db/mysql.yaml": "port: 3306\n", "db/postgres.yaml": "port: 5432\n", "server/postgres.yaml": "name: pg\n"}.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(text)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
            cfg = hydra_compose("config")
    finally:
        GlobalHydra.instance().clear()
    assert (cfg.src.port, cfg.dst.port, cfg.db.port, cfg.server.name) == (3306, 3306, 5432, "pg")
    cfg.src.port = 1
    assert cfg.dst.port == 3306
