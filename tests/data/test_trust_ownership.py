"""Trust, who could have written it (ssh's ``StrictModes``): state gnngp reads back from disk
(processed caches, shards, node orders, roots, a results file it resumes) that a folder or file
writable by another user, or owned by one, holds is never trusted: one warning naming the path and
``chmod go-w <path>``, then a rebuild in memory (caches, node orders, resumed rows) or a refusal
(shards, roots). A digest stored beside a file is no defence against whoever can write both."""
import os
import stat

import pytest
import torch

from gnngp_cli.api import compose
from gnngp_cli.data import DataStore, load_dataset
from gnngp_cli.data.cache import PROCESSED, manifest, tensor_digest
from gnngp_cli.data.files import atomic_write
from gnngp_cli.data.order_cache import cached_order
from gnngp_cli.data.trust import make_private_dirs, untrusted, untrusted_tree
from gnngp_cli.errors import ComputeError, DatasetError
from gnngp_cli.results.resume import resume_state

from helpers import run

CHEAP = ("dataset=cora", "kernel=gcngp_x", "landmarks.count=20", "nugget.num=5")
OTHER_UID = 54321


def rewrite_labels(path):
    """Half of the cached labels set to class 0, their digest and the manifest recomputed as
    gnngp computes them: the digests cannot tell. Returns the edited labels."""
    stored = torch.load(path, weights_only=True)
    edited = stored["tensors"]["y"].clone()
    edited[::2] = 0
    stored["tensors"]["y"] = edited
    stored["digests"]["y"] = tensor_digest(edited)
    stored["manifest"] = manifest(stored["digests"])
    torch.save(stored, path)
    return edited


def test_a_rewritten_cache_in_a_world_writable_root_is_neither_read_nor_written(mirror, tmp_path, capfd):
    """The fast twin of the end-to-end test below: the loader, without a run."""
    cache = tmp_path / "cache"
    cfg = compose(["dataset=cora"]).dataset
    clean = load_dataset(cfg, DataStore(cache, mirror, download=False))
    path = cache / "Cora" / PROCESSED
    edited = rewrite_labels(path)
    assert torch.equal(load_dataset(cfg, DataStore(cache, mirror, download=False)).y, edited)   # a private cache serves the edit
    capfd.readouterr()
    os.chmod(cache, 0o757)
    try:
        again = load_dataset(cfg, DataStore(cache, mirror, download=False))
    finally:
        os.chmod(cache, 0o755)
    warned = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(warned) == 1 and f"not trusting the processed cache: {cache} is writable by others" in warned[0]
    assert f"chmod go-w {cache}" in warned[0]
    assert torch.equal(again.y, clean.y) and torch.equal(torch.load(path, weights_only=True)["tensors"]["y"], edited)


@pytest.mark.paper  # two runs end to end (about 8 s): the loader's twin above runs in the fast suite
def test_a_rewritten_cache_in_a_world_writable_root_never_gives_an_ok_row_from_its_labels(mirror, tmp_path):
    """The issue's case: a real run builds Cora's processed cache; its labels are edited and their
    digest and the manifest recomputed as gnngp computes them, so the digests cannot tell; the
    data root is made world-writable. The next run says why in one line and its row is the clean
    run's, computed from the verified raw files, never from the edited labels."""
    args = (*CHEAP, f"data.mirror={mirror}")
    code, _, clean, _ = run(tmp_path, *args, run_dir=tmp_path / "clean")
    assert code == 0 and clean["status"] == "ok"
    cache = tmp_path / "cache"
    path = cache / "Cora" / PROCESSED
    edited = rewrite_labels(path)
    served = load_dataset(compose(["dataset=cora"]).dataset, DataStore(cache, mirror, download=False))
    assert torch.equal(served.y, edited)   # the edit is one the digests cannot see: a private cache serves it
    os.chmod(cache, os.stat(cache).st_mode | stat.S_IWOTH)
    try:
        code, err, row, errors = run(tmp_path, *args, run_dir=tmp_path / "edited")
    finally:
        os.chmod(cache, 0o755)
    warned = [line for line in err.splitlines() if "not trusting" in line]
    assert code == 0 and not errors and len(warned) == 1, err
    assert f"{cache} is writable by others" in warned[0] and f"chmod go-w {cache}" in warned[0]
    assert row["status"] == "ok" and (row["train"], row["val"], row["test"]) == (clean["train"], clean["val"], clean["test"])
    assert torch.equal(torch.load(path, weights_only=True)["tensors"]["y"], edited)   # neither read nor rewritten


def test_who_may_write_a_path_decides_whether_it_is_trusted(tmp_path):
    base = tmp_path / "root"
    leaf = base / "Cora" / "processed" / "gnngp.pt"
    leaf.parent.mkdir(parents=True)
    leaf.write_bytes(b"x")
    for p in (base, base / "Cora", leaf.parent):
        os.chmod(p, 0o755)
    os.chmod(leaf, 0o644)
    assert untrusted(leaf, base) is None
    os.chmod(leaf, 0o664)
    assert f"{leaf} is writable by its group" in untrusted(leaf, base) and f"chmod go-w {leaf}" in untrusted(leaf, base)
    os.chmod(leaf, 0o644)
    os.chmod(base / "Cora", 0o757)
    assert f"{base / 'Cora'} is writable by others" in untrusted(leaf, base)
    assert f"{base / 'Cora'} is writable by others" in untrusted_tree(base)
    os.chmod(base / "Cora", 0o755)
    assert untrusted(leaf, base / "Cora" / "processed") is None   # folders above the base are not checked
    assert untrusted(tmp_path / "absent" / "file", tmp_path / "absent") is None   # what does not exist is skipped


def test_a_link_is_trusted_only_where_its_target_and_the_folder_holding_it_are(tmp_path):
    """A trial: gnngp.pt a link to a forged file in a 0777 folder was trusted (os.stat follows
    the link, and only the link's own chain was checked): the forged labels gave test 0.041, exit 0."""
    base = tmp_path / "root"
    leaf = base / "Cora" / "processed" / "gnngp.pt"
    leaf.parent.mkdir(parents=True)
    for p in (base, base / "Cora", leaf.parent):
        os.chmod(p, 0o755)
    public = tmp_path / "public"
    public.mkdir()
    (public / "gnngp.pt").write_bytes(b"x")
    os.chmod(public / "gnngp.pt", 0o644)
    leaf.symlink_to(public / "gnngp.pt")
    os.chmod(public, 0o777)
    assert f"{public} is writable by its group and others" in untrusted(leaf, base)
    os.chmod(public, 0o755)
    assert untrusted(leaf, base) is None   # a target no one else can write or replace
    os.chmod(base / "Cora", 0o755)
    (base / "Cora" / "processed").rename(base / "Cora" / "real")   # a folder of the chain that is a link
    (base / "Cora" / "processed").symlink_to(public)
    os.chmod(public, 0o777)
    assert "processed is writable by its group and others" in untrusted(base / "Cora" / "processed" / "gnngp.pt", base)   # (the link's stat)
    # a trial of the fix: processed/ a link to a 0755 folder inside a 0777 one (which anyone may rename and replace) was trusted
    (base / "Cora" / "processed").unlink()
    shared = tmp_path / "shared"
    (shared / "proc").mkdir(parents=True)
    os.chmod(shared / "proc", 0o755)
    (base / "Cora" / "processed").symlink_to(shared / "proc")
    os.chmod(shared, 0o777)
    found = untrusted(base / "Cora" / "processed" / "gnngp.pt", base)
    assert f"{shared} is writable by its group and others (it holds the target of a link gnngp follows)" in found
    assert "keep the target in a folder of your own" in found
    os.chmod(shared, 0o1777)   # sticky, as /tmp: what this user owns there stays theirs (a trial: it said chmod go-w /tmp)
    assert untrusted(base / "Cora" / "processed" / "gnngp.pt", base) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")
def test_a_file_another_user_owns_is_trusted_only_as_a_read_only_shared_cache(tmp_path):
    leaf = tmp_path / "gnngp.pt"
    leaf.write_bytes(b"x")
    os.chmod(leaf, 0o644)
    os.chown(leaf, OTHER_UID, -1)
    assert f"owned by uid {OTHER_UID}" in untrusted(leaf, tmp_path) and "data.shared_cache=true" in untrusted(leaf, tmp_path)
    assert untrusted(leaf, tmp_path, shared=True) is None
    os.chmod(leaf, 0o646)
    assert "writable by others" in untrusted(leaf, tmp_path, shared=True)   # shared, never writable by others


def test_folders_and_files_gnngp_makes_are_never_group_writable_under_a_umask_of_002(tmp_path):
    old = os.umask(0o002)
    try:
        make_private_dirs(tmp_path / "a" / "b")
        atomic_write(tmp_path / "c" / "file", lambda f: f.write("x"))
    finally:
        os.umask(old)
    assert all(os.stat(p).st_mode & 0o777 == 0o755 for p in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "c"))
    assert os.stat(tmp_path / "c" / "file").st_mode & 0o777 == 0o644
    assert untrusted(tmp_path / "c" / "file", tmp_path / "c") is None


def test_a_node_order_in_a_writable_folder_is_neither_read_nor_written(tmp_path, capfd):
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    folder = tmp_path / "orders"
    own = cached_order(edge_index, 4, "rcm", folder)
    (path,) = folder.iterdir()
    torch.save({"order": torch.tensor([3, 1, 0, 2]), "edges": tensor_digest(edge_index)}, path)   # another's order, its digest matching
    os.chmod(folder, 0o777)
    store = DataStore(tmp_path, None)
    order = cached_order(edge_index, 4, "rcm", folder, store.untrusted)
    assert torch.equal(order, own)
    warned = [line for line in capfd.readouterr().err.splitlines() if "not trusting" in line]
    assert len(warned) == 1 and f"chmod go-w {folder}" in warned[0]


def test_a_results_file_others_can_write_is_not_resumed(tmp_path):
    results = tmp_path / "run" / "results.csv"
    results.parent.mkdir()
    results.write_text("status\nok\n")
    os.chmod(results.parent, 0o777)
    state = resume_state(results, [], False)
    assert not state.usable and state.distrusted and f"chmod go-w {results.parent}" in state.why


def test_roots_and_shards_others_can_write_are_refused(tmp_path):
    from gnngp_cli.backends.rowblocks.dask_backend import root_store, sharded_graph

    roots = tmp_path / "roots"
    roots.mkdir(mode=0o777)
    os.chmod(roots, 0o777)
    with pytest.raises(ComputeError, match=f"not trusting the roots folder: {roots} is writable by its group and others.*chmod go-w {roots}"):
        root_store(compose(["compute=dask", "kernel=gcngp_x", f"compute.roots_dir={roots}"]))
    shards = tmp_path / "shards"
    shards.mkdir(mode=0o755)
    (shards / "meta.json").write_text("{}")
    os.chmod(shards / "meta.json", 0o666)
    spec = compose(["compute=dask", "kernel=gcngp_x", f"compute.shards={shards}"])
    with pytest.raises(DatasetError, match=f"not trusting compute.shards: {shards / 'meta.json'} is writable"):
        sharded_graph(spec, DataStore(tmp_path / "cache", None))
    cache = tmp_path / "cache"
    (cache / "shards").mkdir(parents=True)
    os.chmod(cache, 0o775)
    with pytest.raises(DatasetError, match=f"not trusting the cached shards: {cache} is writable by its group"):
        sharded_graph(compose(["compute=dask", "kernel=gcngp_x"]), DataStore(cache, None))


def test_a_shared_sticky_folder_or_a_device_is_distrusted_without_advice_to_chmod_it(tmp_path):
    """An adversary's trial: compute.roots_dir=/tmp (or /dev/null) was told 'fix: chmod go-w /tmp',
    which would break the folder for every user of the machine."""
    from gnngp_cli.data.trust import distrust

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    found = distrust(shared / "roots")
    assert "a shared folder, as /tmp is" in found.text() and "do not chmod" in found.text() and "chmod go-w" not in found.text()
    device = distrust(__import__("pathlib").Path("/dev/null"))
    assert device is not None and "no folder or file (a device)" in device.text() and "chmod" not in device.text()
    plain = tmp_path / "plain"
    plain.mkdir()
    os.chmod(plain, 0o777)
    assert distrust(plain / "x").fix == f"chmod go-w {plain}"   # a folder of one's own: chmod is the fix
