"""Trust, section 1: no code runs from a dataset file. Raw files are checked against the
published digests; Planetoid pickles are read by a restricted unpickler; processed files are
loaded with ``weights_only=True`` only (or rebuilt); PyG's and OGB's own processed files are
never read. Each planted payload would create a marker file if it ran."""
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from gnngp_cli.api import compose
from gnngp_cli.data import DataStore, load_dataset
from gnngp_cli.data import public, store, wikipedia
from gnngp_cli.data.cache import PROCESSED
from gnngp_cli.data.digests import git_blob, known_digests, sha256

KNOWN_DIGESTS = known_digests()
from gnngp_cli.errors import DatasetError

from test_data import write_arxiv, write_reddit


class Payload:
    """Unpickling this runs ``touch <marker>``: the attack the issue reported."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def load(name, mirror, root, verify=True):
    cfg = compose([f"dataset={name}"])
    return load_dataset(cfg.dataset, DataStore.from_config(str(root), str(mirror) if mirror else None, verify=verify))


def copy_planetoid(mirror, tmp_path, title="Cora"):
    dst = tmp_path / "mirror"
    shutil.copytree(mirror / title, dst / title)
    return dst


def test_the_payload_runs_under_plain_pickle(tmp_path):
    """The marker check is real: a plain ``pickle.load`` of the payload creates the marker."""
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()


@pytest.mark.parametrize("verify", [True, False])
def test_payload_in_a_raw_planetoid_pickle_never_runs(mirror, tmp_path, verify):
    bad = copy_planetoid(mirror, tmp_path)
    marker = tmp_path / "ran"
    with open(bad / "Cora" / "raw" / "ind.cora.x", "wb") as f:
        pickle.dump(Payload(marker), f, protocol=2)
    expected = "ind.cora.x has sha256 .* but the published file has 23cfa55d" if verify else "ind.cora.x names posix.system, which a Planetoid file never holds"
    with pytest.raises(DatasetError, match=expected):
        load("cora", bad, tmp_path / "cache", verify=verify)
    assert not marker.exists()
    assert not (tmp_path / "cache" / "Cora" / "raw" / "ind.cora.x").exists() or not verify  # a tampered mirror file is not copied


def test_payload_planted_in_the_cache_raw_file_never_runs(mirror, tmp_path):
    cache = tmp_path / "cache"
    load("cora", mirror, cache)
    marker = tmp_path / "ran"
    with open(cache / "Cora" / "raw" / "ind.cora.graph", "wb") as f:
        pickle.dump(Payload(marker), f, protocol=2)
    with pytest.raises(DatasetError, match=r"raw file .*cache/Cora/raw/ind.cora.graph has sha256 [0-9a-f]{64} but the published file has 58f13302"):
        load("cora", mirror, cache)
    assert not marker.exists()


def test_payload_in_pyg_processed_files_is_never_read(mirror, tmp_path):
    """PyG's ``data.pt`` (loaded with a weights_only=False fallback) and ``pre_transform.pt``
    (loaded with weights_only=False) in a shared cache: gnngp does not read them."""
    cache = tmp_path / "cache"
    marker = tmp_path / "ran"
    (cache / "Cora" / "processed").mkdir(parents=True)
    for name in ("data.pt", "pre_transform.pt", "pre_filter.pt"):
        torch.save(Payload(marker), cache / "Cora" / "processed" / name)
    data = load("cora", mirror, cache)
    assert not marker.exists()
    assert data.num_nodes == 2708


@pytest.mark.parametrize("dataset", ["cora", "chameleon"])
def test_payload_in_the_gnngp_processed_file_is_refused_and_rebuilt(mirror, tmp_path, capfd, dataset):
    cache = tmp_path / "cache"
    clean = load(dataset, mirror, cache)
    folder = next(p for p in cache.iterdir() if p.is_dir())
    marker = tmp_path / "ran"
    torch.save({"format": 1, "raw": {}, "tensors": Payload(marker)}, folder / PROCESSED)
    again = load(dataset, mirror, cache)
    assert not marker.exists()
    warned = [line for line in capfd.readouterr().err.splitlines() if "could not be loaded safely" in line]
    assert len(warned) == 1 and "could not be loaded safely (UnpicklingError: Trying to load unsupported GLOBAL posix.system" in warned[0]
    assert "weights_only" not in warned[0] and "trusted source" not in warned[0]   # torch's advice to run the file's code: never ours
    assert torch.equal(again.x, clean.x) and torch.equal(again.edge_index, clean.edge_index) and torch.equal(again.y, clean.y)
    stored = torch.load(folder / PROCESSED, weights_only=True)  # the rebuilt file is a plain tensor dict
    assert set(stored["tensors"]) >= {"x", "y", "edge_index"}


def test_payload_in_ogb_processed_and_split_files_is_never_read(tmp_path):
    mirror = write_arxiv(tmp_path / "mirror")
    cache = tmp_path / "cache"
    marker = tmp_path / "ran"
    shutil.copytree(mirror / "ogbn_arxiv", cache / "ogbn_arxiv")
    (cache / "ogbn_arxiv" / "processed").mkdir()
    torch.save(Payload(marker), cache / "ogbn_arxiv" / "processed" / "geometric_data_processed.pt")
    torch.save(Payload(marker), cache / "ogbn_arxiv" / "processed" / "pre_transform.pt")
    torch.save(Payload(marker), cache / "ogbn_arxiv" / "split" / "time" / "split_dict.pt")
    data = load("arxiv", None, cache)
    assert not marker.exists()
    assert data.num_nodes == 30 and int(data.train_mask.sum()) == 15


def test_payload_in_our_ogb_cache_is_rebuilt(tmp_path, capfd):
    mirror = write_arxiv(tmp_path / "mirror")
    cache = tmp_path / "cache"
    clean = load("arxiv", mirror, cache)
    marker = tmp_path / "ran"
    torch.save(Payload(marker), cache / "ogbn_arxiv" / PROCESSED)
    again = load("arxiv", mirror, cache)
    assert not marker.exists() and "rebuilding it from the verified raw files" in capfd.readouterr().err
    assert torch.equal(again.x, clean.x) and torch.equal(again.test_mask, clean.test_mask)


def test_pickled_arrays_in_npz_files_are_refused(tmp_path):
    mirror = write_reddit(tmp_path / "mirror")
    marker = tmp_path / "ran"
    import numpy as np

    raw = mirror / "Reddit" / "raw"
    np.savez(raw / "reddit_data.npz", feature=np.array([Payload(marker)], dtype=object), label=np.zeros(1), node_types=np.ones(1))
    with pytest.raises(DatasetError, match="reddit_data.npz is corrupt or truncated .*allow_pickle=False"):
        load("reddit", mirror, tmp_path / "cache")
    assert not marker.exists()


@pytest.mark.parametrize("name, title", [("cora", "Cora"), ("citeseer", "CiteSeer"), ("pubmed", "PubMed")])
def test_safe_planetoid_reader_matches_pyg_exactly(mirror, tmp_path, name, title):
    """The paper numbers depend on it: x, y, edge_index and the masks equal PyG's ``Planetoid``
    on the genuine (digest-verified) files, dtype included."""
    from torch_geometric.datasets import Planetoid

    root = tmp_path / "pyg"
    shutil.copytree(mirror / title, root / title)
    for f in (root / title / "raw").iterdir():
        assert sha256(f) in KNOWN_DIGESTS[f"{title}/raw/{f.name}"]
    ours = public.read_planetoid(root / title / "raw", name)
    reference = Planetoid(str(root), title)[0]
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        assert ours[key].dtype == reference[key].dtype and torch.equal(ours[key], reference[key]), key


def crafted_csr(**arrays):
    """A 140 x 1433 CSR matrix (Cora's x) whose pickled arrays are replaced by ``arrays``: scipy
    sets them on unpickling without a check."""
    import numpy as np
    import scipy.sparse as sp

    matrix = sp.csr_matrix((np.ones(3, np.float32), np.array([0, 5, 9], np.int32), np.array([0, 2] + [3] * 139, np.int32)), shape=(140, 1433))
    for name, value in arrays.items():
        setattr(matrix, name, value) if name != "_shape" else matrix.__dict__.update(_shape=value)
    return matrix


@pytest.mark.parametrize("arrays, problem", [
    ({"indices": __import__("numpy").array([0, 5, 10**9], "int32")}, "a column index lies outside [0, 1433)"),
    ({"indices": __import__("numpy").array([0, -7, 9], "int32")}, "a column index lies outside [0, 1433)"),
    ({"indptr": __import__("numpy").array([0, 2, 1] + [3] * 138, "int32")}, "indptr does not rise from 0"),
    ({"indptr": __import__("numpy").array([0, 2, 3], "int32")}, "indptr has 3 entries for 140 rows"),
    ({"indptr": __import__("numpy").array([0, 2] + [10**6] * 139, "int32")}, "indptr ends at 1000000 but there are 3 indices"),
    ({"data": __import__("numpy").ones(2, "float32")}, "there are 3 indices and 2 values"),
    ({"_shape": (10**6, 10**6)}, "is over 1,000,000,000 entries dense"),
    ({"_shape": (-140, 1433)}, "is not two non-negative integers"),
])
def test_a_crafted_sparse_matrix_is_refused_before_it_is_densified(mirror, tmp_path, arrays, problem):
    """With data.verify=false, out-of-range indices made todense write outside its array
    (signal 11, no message): the CSR structure is checked whatever the digest says."""
    bad = copy_planetoid(mirror, tmp_path)
    with open(bad / "Cora" / "raw" / "ind.cora.x", "wb") as f:
        pickle.dump(crafted_csr(**arrays), f, protocol=2)
    with pytest.raises(DatasetError) as err:
        load("cora", bad, tmp_path / "cache", verify=False)
    assert "ind.cora.x holds a sparse matrix whose structure is broken" in str(err.value) and problem in str(err.value)
    assert "\n" not in str(err.value)


def test_digest_table_covers_every_raw_file_of_the_mirrored_datasets(mirror):
    for folder in ("Cora", "CiteSeer", "PubMed", "chameleon", "squirrel", "crocodile"):
        for f in (mirror / folder / "raw").iterdir():
            assert sha256(f) in KNOWN_DIGESTS[f"{folder}/raw/{f.name}"], f
    for name in ("chameleon", "squirrel", "crocodile"):
        assert all(f"{name}/{f}" in KNOWN_DIGESTS for f in wikipedia.wikipedia_files(name))


def test_pubmed_allx_original_is_accepted_by_its_git_blob_id(mirror):
    # the git blob id is computed as git does: the mirror's genuine ind.pubmed.x has the blob id of kimiyoung/planetoid
    assert git_blob(mirror / "PubMed" / "raw" / "ind.pubmed.x") == "16c0eca8d2b3297014ff80327416f9332eda10d7"
    assert "gitblob:3b86bccf08111c37c632a9dd8ab63db25ea76361" in KNOWN_DIGESTS["PubMed/raw/ind.pubmed.allx"]


def test_a_download_that_is_not_the_published_file_is_not_kept(tmp_path, monkeypatch):
    def fake(url, dst, timeout_s):
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(b"not the planetoid file")

    monkeypatch.setattr(store, "_download", fake)
    monkeypatch.delenv("GNNGP_DATA_MIRROR", raising=False)   # no mirror: the file must come from the download
    with pytest.raises(DatasetError, match=r"raw file .*ind.cora.x \(downloaded from https://github.com/kimiyoung/planetoid/raw/master/data/ind.cora.x, not kept\) has sha256 [0-9a-f]{64} but the published file has 23cfa55d"):
        load("cora", None, tmp_path / "cache")
    assert not (tmp_path / "cache" / "Cora" / "raw" / "ind.cora.x").exists()


def test_verify_false_warns_and_skips_the_digest_check(mirror, tmp_path, capfd):
    bad = copy_planetoid(mirror, tmp_path)
    (bad / "Cora" / "raw" / "ind.cora.test.index").write_text((bad / "Cora" / "raw" / "ind.cora.test.index").read_text() + "\n")
    data = load("cora", bad, tmp_path / "cache", verify=False)
    assert data.num_nodes == 2708
    assert "gnngp: warning: data.verify=false: the raw files of Cora are not checked" in capfd.readouterr().err
    # a cache built from other raw files is rebuilt, and not said to be from "the verified raw files" (a trial)
    (bad / "Cora" / "raw" / "ind.cora.test.index").write_text((bad / "Cora" / "raw" / "ind.cora.test.index").read_text() + "\n")
    shutil.copy(bad / "Cora" / "raw" / "ind.cora.test.index", tmp_path / "cache" / "Cora" / "raw" / "ind.cora.test.index")
    load("cora", bad, tmp_path / "cache", verify=False)
    err = capfd.readouterr().err
    assert "rebuilding it from the raw files (not verified: data.verify=false)" in err and "verified raw files" not in err, err


def test_a_full_disk_names_the_file_being_written(mirror, tmp_path, monkeypatch):
    """A failed write has no file name: the line said "No space left on device: None"."""
    import errno

    from gnngp_cli.data import files

    def full(source, out):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.shutil, "copyfileobj", full)
    with pytest.raises(DatasetError) as err:
        load("cora", mirror, tmp_path / "cache")
    raw = tmp_path / "cache" / "Cora" / "raw"
    assert f"cannot be written (No space left on device: {raw}/ind.cora." in str(err.value) and "None" not in str(err.value)


def test_downloads_use_https():
    from gnngp_cli.data import heterophily, papers100m

    urls = [public.PLANETOID_URL, public.REDDIT_URL, public.ARXIV_URL, wikipedia.MUSAE_URL, wikipedia.GEOM_GCN_URL, heterophily.HETEROPHILY_URL,
            papers100m.URL]   # papers100M's was http (a trial)
    assert all(u.startswith("https://") for u in urls), urls


def test_no_weights_only_false_load_remains_in_the_package():
    package = Path(public.__file__).resolve().parents[1]
    for path in package.rglob("*.py"):
        text = path.read_text()
        assert "weights_only=False" not in text.replace('"weights_only=False"', "").replace("``weights_only=False``", ""), path
        assert "_trusted_torch_load" not in text and "pickle.load(" not in text, path


def test_a_downloaded_archive_is_unpacked_and_its_files_honour_the_umask(tmp_path, monkeypatch):
    import zipfile

    written = write_reddit(tmp_path / "src") / "Reddit" / "raw"
    archive = tmp_path / "reddit.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in ("reddit_data.npz", "reddit_graph.npz"):
            z.write(written / name, name)

    def fake(url, dst, timeout_s):
        assert url == public.REDDIT_URL
        shutil.copyfile(archive, dst)

    monkeypatch.setattr(store, "_download", fake)
    old = os.umask(0o022)
    try:
        data = load("reddit", None, tmp_path / "cache")
    finally:
        os.umask(old)
    assert data.num_nodes == 25
    raw = tmp_path / "cache" / "Reddit" / "raw"
    assert all((raw / n).stat().st_mode & 0o777 == 0o644 for n in ("reddit_data.npz", "reddit_graph.npz"))
    assert not [p for p in raw.iterdir() if p.name.endswith(".tmp")]


def _swap_after_check(monkeypatch, path: Path, content: bytes):
    """Replace ``path`` (as a copy or a download is written: a new file renamed over it) right
    after the store has checked its digest: the time-of-check/time-of-use gap."""
    check = store.verify_handle

    def checked_then_swapped(f, size, key, shown):
        digest = check(f, size, key, shown)
        if shown == str(path):
            swap = path.with_name(path.name + ".swap")
            swap.write_bytes(content)
            os.replace(swap, path)
        return digest

    monkeypatch.setattr(store, "verify_handle", checked_then_swapped)


def test_a_raw_file_replaced_after_its_check_never_reaches_the_loader(mirror, tmp_path, monkeypatch):
    """The loader parses the bytes whose digest was checked, read once: a raw file replaced
    between the check and the parse (here, by a payload) changes nothing the run reads."""
    genuine = load("cora", mirror, tmp_path / "genuine")
    root = tmp_path / "cache"
    target = root / "Cora" / "raw" / "ind.cora.x"
    marker = tmp_path / "ran"
    shop = DataStore.from_config(str(root), str(mirror))
    shop.fetch("Cora", [f"raw/ind.cora.{part}" for part in public.PLANETOID_PARTS])   # in the cache, checked
    _swap_after_check(monkeypatch, target, pickle.dumps(Payload(marker), protocol=2))
    data = load("cora", None, root)
    assert not marker.exists()
    assert torch.equal(data.x, genuine.x) and torch.equal(data.y, genuine.y)


def test_a_raw_file_changed_after_the_fetch_checked_it_is_one_line(mirror, tmp_path):
    """``fetch`` checks every file and its digests key the processed cache; a file changed
    before the loader reads it is refused, even with ``data.verify=false`` (no published digest
    to check it against), so no cache is ever keyed by digests of other bytes."""
    root = tmp_path / "cache"
    shop = DataStore.from_config(str(root), str(mirror), verify=False)
    folder = shop.fetch("Cora", [f"raw/ind.cora.{part}" for part in public.PLANETOID_PARTS])
    (folder / "raw" / "ind.cora.test.index").write_text("0\n1\n")
    with pytest.raises(DatasetError, match=r"raw file .*ind.cora.test.index changed after it was checked \(sha256 .*\): another process wrote it"):
        public.read_planetoid(folder / "raw", "cora", shop.opener())
    checked = DataStore.from_config(str(root), str(mirror))
    checked.digests = shop.digests
    with pytest.raises(DatasetError, match=r"ind.cora.test.index has sha256 .* but the published file has"):
        public.read_planetoid(folder / "raw", "cora", checked.opener())


def test_a_large_raw_file_is_checked_and_read_from_the_same_open_file(mirror, tmp_path, monkeypatch):
    """Above the snapshot size, the file is not read into memory: it is checked and parsed from
    the one open file, so a file renamed over it after the check is not the one parsed."""
    monkeypatch.setattr(store, "SNAPSHOT_BYTES", 0)
    genuine = load("cora", mirror, tmp_path / "genuine")
    root = tmp_path / "cache"
    DataStore.from_config(str(root), str(mirror)).fetch("Cora", [f"raw/ind.cora.{part}" for part in public.PLANETOID_PARTS])
    marker = tmp_path / "ran"
    _swap_after_check(monkeypatch, root / "Cora" / "raw" / "ind.cora.x", pickle.dumps(Payload(marker), protocol=2))
    data = load("cora", None, root)
    assert not marker.exists() and torch.equal(data.x, genuine.x)


@pytest.mark.parametrize("kind", ["compressed", "sparse"])
def test_features_a_small_file_declares_huge_are_refused_before_they_are_read(tmp_path, kind):
    """A trial: a 2.3 MB compressed npz of 60 x 10^7 float32 zeros, with max_memory_gb=0.5, was
    read (9.7 GB, exit 0), and a 1.2 KB sparse npz of 60 x 2 10^7 densified to 4.8 GB. The sizes
    the file declares are checked against the limit before any of it is read."""
    import numpy as np
    import scipy.sparse as sp

    from gnngp_cli.errors import ResourceError
    from gnngp_cli.job.loading import check_load_memory

    n, folder = 60, tmp_path / "graph"
    folder.mkdir()
    (folder / "edges.csv").write_text("".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    np.save(folder / "labels.npy", np.arange(n) % 2)
    if kind == "compressed":
        np.savez_compressed(folder / "features.npz", np.zeros((n, 1_000_000), np.float32))
    else:
        sp.save_npz(folder / "features.npz", sp.csr_matrix((n, 20_000_000), dtype=np.float32))
    assert (folder / "features.npz").stat().st_size < 300_000
    declared = "60 x 1,000,000 float32" if kind == "compressed" else "60 x 20,000,000 float32"
    with pytest.raises(ResourceError, match=rf"^reading the features of {folder} \(features.npz declares {declared} values\) needs about "
                                            r".*, and the limit is 100.0 MiB \(max_memory_gb"):
        check_load_memory(compose(["dataset=custom", f"dataset.path={folder}", "max_memory_gb=0.09765625"]))
    check_load_memory(compose(["dataset=custom", f"dataset.path={folder}", "max_memory_gb=100"]))   # within a limit that holds it


@pytest.mark.parametrize("neighbour", ["abc", [1, 2]])
def test_a_planetoid_graph_with_a_neighbour_that_is_no_node_id_is_one_line(mirror, tmp_path, neighbour):
    """A trial (data.verify=false): a string neighbour in ind.cora.graph was an 88-line traceback
    ending in int()'s ValueError; a nested list a TypeError."""
    from gnngp_cli.data.safe_pickle import load_restricted

    bad = copy_planetoid(mirror, tmp_path)
    path = bad / "Cora" / "raw" / "ind.cora.graph"
    with open(path, "rb") as f:
        graph = dict(load_restricted(path, f))
    graph[0] = list(graph[0]) + [neighbour]
    with open(path, "wb") as f:
        pickle.dump(graph, f, protocol=2)
    with pytest.raises(DatasetError, match=r"ind.cora.graph holds a neighbour list that is not node ids \(.*\); delete it and fetch it again"):
        load("cora", bad, tmp_path / "cache", verify=False)


def test_a_mirror_file_that_is_not_the_published_one_names_the_mirror_as_the_place_to_mend(mirror, tmp_path):
    """A trial: a corrupt file in the (read-only) mirror said 'delete it and fetch it again', of a
    file gnngp does not own and cannot fetch into the mirror."""
    bad = copy_planetoid(mirror, tmp_path)
    path = bad / "Cora" / "raw" / "ind.cora.y"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DatasetError, match=r"ind.cora.y has sha256 .* but the published file has .*; replace it in the mirror with the "
                                           r"published file or point data.mirror at another copy"):
        load("cora", bad, tmp_path / "cache")


def test_planetoid_label_files_of_another_class_count_are_one_line(mirror, tmp_path):
    """A trial (data.verify=false): ind.cora.ally written with 9 one-hot columns (ty and y with 7)
    was torch.cat's 'Sizes of tensors must match' traceback."""
    import numpy as np

    from gnngp_cli.data.safe_pickle import load_restricted

    bad = copy_planetoid(mirror, tmp_path)
    path = bad / "Cora" / "raw" / "ind.cora.ally"
    with open(path, "rb") as f:
        ally = np.asarray(load_restricted(path, f))
    with open(path, "wb") as f:
        pickle.dump(np.hstack([ally, np.zeros((ally.shape[0], 2))]), f, protocol=2)
    with pytest.raises(DatasetError, match=r"the raw files in .* disagree on their class columns \(ind.cora.y 7, ind.cora.ty 7, ind.cora.ally 9\)"):
        load("cora", bad, tmp_path / "cache", verify=False)
