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
