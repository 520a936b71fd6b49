"""Datasets: real mirrored files load with their known sizes; other loaders run on small
files written here in the real on-disk format; every bad input gives a clear error."""
import gzip
import json
import re
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnngp_cli.api import compose
from gnngp_cli.data import DataStore, edge_homophily, generate_csbm, load_dataset
from gnngp_cli.errors import DatasetError


def load(name, mirror, root, download=True, verify=True, **overrides):
    cfg = compose([f"dataset={name}"] + [f"dataset.{k}={v}" for k, v in overrides.items()])
    store = DataStore.from_config(str(root), str(mirror) if mirror else None, download, verify=verify)
    return load_dataset(cfg.dataset, store)


def split_sizes(data):
    return int(data.train_mask.sum()), int(data.val_mask.sum()), int(data.test_mask.sum())


@pytest.mark.parametrize(
    "name, nodes, features, classes, undirected_edges, splits",
    [
        ("cora", 2708, 1433, 7, 5278, (140, 500, 1000)),
        ("citeseer", 3327, 3703, 6, 4552, (120, 500, 1000)),
        ("pubmed", 19717, 500, 3, 44324, (60, 500, 1000)),
    ],
)
def test_planetoid_from_mirror(mirror, cache, name, nodes, features, classes, undirected_edges, splits):
    data = load(name, mirror, cache)
    assert (data.num_nodes, data.num_features, data.num_classes, data.task) == (nodes, features, classes, "classification")
    assert data.edge_index.size(1) == 2 * undirected_edges
    assert split_sizes(data) == splits


@pytest.mark.parametrize(
    "name, nodes, features, edges_with_loops, splits",
    [
        ("chameleon", 2277, 3132, 2 * 31371 + 50, (1092, 729, 456)),
        ("squirrel", 5201, 3148, 2 * 198353 + 140, (2496, 1664, 1041)),
    ],
)
def test_wikipedia_from_mirror(mirror, cache, name, nodes, features, edges_with_loops, splits):
    data = load(name, mirror, cache)
    assert (data.num_nodes, data.num_features, data.task) == (nodes, features, "regression")
    assert data.edge_index.size(1) == edges_with_loops
    assert split_sizes(data) == splits
    assert data.x.unique().tolist() == [0.0, 1.0]
    assert torch.isfinite(data.y).all() and data.y.min() > 0  # log of traffic >= 15


def test_wikipedia_split_index_picks_another_geom_gcn_split(mirror, cache):
    a, b = load("chameleon", mirror, cache), load("chameleon", mirror, cache, split_index=3)
    assert split_sizes(a) == split_sizes(b) and not torch.equal(a.train_mask, b.train_mask)
    with pytest.raises(DatasetError, match="split_index=10 is out of range"):
        load("chameleon", mirror, cache, split_index=10)


def test_mirror_is_copied_into_cache_and_not_written(mirror, tmp_path):
    root = tmp_path / "cache"
    load("cora", mirror, root)
    assert (root / "Cora" / "raw" / "ind.cora.x").is_file()
    assert (root / "Cora" / "processed").is_dir()
    assert not any(p.name == "processed" for p in (mirror / "Cora").iterdir())


def test_env_variable_sets_the_mirror(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("GNNGP_DATA_MIRROR", str(mirror))
    store = DataStore.from_config(str(tmp_path), None)
    assert store.mirror == mirror


def test_missing_dataset_without_mirror_names_dataset_places_and_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("GNNGP_DATA_MIRROR", raising=False)
    with pytest.raises(DatasetError) as err:
        load("cora", None, tmp_path)
    message = str(err.value)
    assert "dataset 'Cora' is not available" in message
    assert f"not in cache {tmp_path / 'Cora'} and no mirror is set (GNNGP_DATA_MIRROR unset)" in message
    assert "download failed (https://" in message and "GNNGP_DATA_MIRROR" in message   # the address tried, not a relative file name
    assert not (tmp_path / "Cora").exists()   # the failed download's folders (Cora/raw) are not left behind
    with pytest.raises(DatasetError, match="download is off"):
        load("cora", None, tmp_path, download=False)


def test_absent_large_datasets_fail_clearly(mirror, tmp_path):
    for name, folder in (("arxiv", "ogbn_arxiv"), ("reddit", "Reddit")):
        with pytest.raises(DatasetError, match=f"dataset '{folder}' is not available"):
            load(name, mirror, tmp_path)


def test_a_mirror_without_the_dataset_is_named_as_what_to_fix(mirror, tmp_path):
    """With a mirror set, "set data.mirror" is no fix: the message says what the mirror lacks."""
    partial = tmp_path / "mirror"
    (partial / "Cora" / "raw").mkdir(parents=True)
    shutil.copy(mirror / "Cora" / "raw" / "ind.cora.x", partial / "Cora" / "raw")   # one genuine file of eight
    for folder, fix in ((tmp_path / "empty", "has no Cora/ folder: add it there"), (partial, "the mirror's Cora/ folder lacks raw/")):
        folder.mkdir(exist_ok=True)
        with pytest.raises(DatasetError) as err:
            load("cora", folder, tmp_path / "cache", download=False)
        assert fix in str(err.value) and "to a folder that has" in str(err.value), str(err.value)
    with pytest.raises(DatasetError, match=rf"data.mirror={re.escape(str(partial / 'Cora'))} is the Cora/ folder itself; give the folder "
                                           rf"that holds it: data.mirror={re.escape(str(partial))}$"):   # a newcomer's trial
        load("cora", partial / "Cora", tmp_path / "cache", download=False)


def test_unknown_dataset_suggests_the_close_name(tmp_path):
    cfg = compose(["dataset=cora"]).dataset
    cfg.name = "coraa"
    with pytest.raises(DatasetError, match="unknown dataset 'coraa' \\(did you mean 'cora'\\?\\)"):
        load_dataset(cfg, DataStore(tmp_path))


def copy_mirror(mirror, tmp_path, name):
    dst = tmp_path / "mirror"
    shutil.copytree(mirror / name, dst / name)
    return dst


def test_truncated_pickle_is_named(mirror, tmp_path):
    bad = copy_mirror(mirror, tmp_path, "Cora")
    path = bad / "Cora" / "raw" / "ind.cora.allx"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DatasetError, match="raw file .*ind.cora.allx has sha256 [0-9a-f]{64} but the published file has 9419ba2f"):
        load("cora", bad, tmp_path / "cache")
    with pytest.raises(DatasetError, match="raw file .*ind.cora.allx is corrupt or truncated"):  # the format check behind it
        load("cora", bad, tmp_path / "cache2", verify=False)


def test_planetoid_files_disagreeing_on_node_count_are_named(mirror, tmp_path):
    bad = copy_mirror(mirror, tmp_path, "Cora")
    path = bad / "Cora" / "raw" / "ind.cora.ally"
    with open(path, "rb") as f:
        ally = pickle.load(f, encoding="latin1")
    with open(path, "wb") as f:
        pickle.dump(ally[:-5], f)
    with pytest.raises(DatasetError, match="ind.cora.ally has 1703 rows but ind.cora.allx has 1708"):
        load("cora", bad, tmp_path / "cache", verify=False)


def write_musae(folder: Path, name: str, n: int = 40, features=None, edges=None, target=None):
    raw = folder / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    feats = features if features is not None else json.dumps({str(i): sorted(set(rng.integers(0, 9, 3).tolist())) for i in range(n)})
    (raw / f"{name}.json").write_text(feats)
    if edges is None:
        pairs = rng.integers(0, n, (3 * n, 2))
        edges = "id1,id2\n" + "".join(f"{a},{b}\n" for a, b in pairs) + "0,0\n"
    (raw / f"{name}_edges.csv").write_text(edges)
    if target is None:
        target = "id,target\n" + "".join(f"{i},{int(rng.integers(15, 5000))}\n" for i in range(n))
    (raw / f"{name}_target.csv").write_text(target)
    return folder


def test_crocodile_from_written_musae_files(tmp_path):
    mirror = write_musae(tmp_path / "mirror", "crocodile", n=50)
    with pytest.raises(DatasetError, match="crocodile.json has git blob id [0-9a-f]{40} .* but the published file has git blob id 0c68f0cf"):
        load("crocodile", mirror, tmp_path / "cache")
    data = load("crocodile", mirror, tmp_path / "cache", verify=False)
    assert data.task == "regression" and data.num_nodes == 50
    assert split_sizes(data) == (24, 16, 10)  # 0.48 / 0.32 / 0.20
    assert data.split == "random 0.48/0.32/0.20, seed 0"
    other = load("crocodile", mirror, tmp_path / "cache", verify=False, split_seed=1)
    assert not torch.equal(other.train_mask, data.train_mask)


def test_real_crocodile_mirror_lacks_features_and_says_so(mirror, tmp_path):
    with pytest.raises(DatasetError, match="raw/crocodile.json not in cache"):
        load("crocodile", mirror, tmp_path)


@pytest.mark.parametrize(
    "kind, content, message",
    [
        ("features", "{not json", "crocodile.json is not valid json"),
        ("edges", "id1,id2\n0,1\n1,x\n", r"crocodile_edges.csv has a non-integer node id \(.*\), first on line 3 \('1,x'\)"),   # (a trial: no line)
        ("edges", "id1,id2\n0,1\n1,99\n", "crocodile_edges.csv has node id 99 outside \\[0, 40\\)"),
        ("target", "id,target\n0,5\n1,7\n", "crocodile_target.csv has 2 rows but the features have 40 nodes"),
    ],
)
def test_corrupt_musae_files_are_named(tmp_path, kind, content, message):
    mirror = write_musae(tmp_path / "mirror", "crocodile", n=40, **{kind: content})
    with pytest.raises(DatasetError, match=message):
        load("crocodile", mirror, tmp_path / "cache", verify=False)


def write_arxiv(folder: Path, n=30, d=4):
    root = folder / "ogbn_arxiv"
    (root / "raw").mkdir(parents=True)
    (root / "split" / "time").mkdir(parents=True)
    rng = np.random.default_rng(0)

    def put(path, rows):
        with gzip.open(path, "wt") as f:
            f.write("".join(",".join(str(v) for v in np.atleast_1d(r)) + "\n" for r in rows))

    edges = rng.integers(0, n, (60, 2))
    put(root / "raw" / "edge.csv.gz", edges)
    put(root / "raw" / "node-feat.csv.gz", rng.normal(size=(n, d)).round(4))
    put(root / "raw" / "node-label.csv.gz", rng.integers(0, 5, n))
    put(root / "raw" / "node_year.csv.gz", rng.integers(2000, 2020, n))
    put(root / "raw" / "num-node-list.csv.gz", [n])
    put(root / "raw" / "num-edge-list.csv.gz", [len(edges)])
    perm = rng.permutation(n)
    for name, idx in (("train", perm[:15]), ("valid", perm[15:22]), ("test", perm[22:])):
        put(root / "split" / "time" / f"{name}.csv.gz", idx)
    return folder


def test_arxiv_from_written_ogb_files(tmp_path):
    mirror = write_arxiv(tmp_path / "mirror")
    data = load("arxiv", mirror, tmp_path / "cache")
    assert (data.num_nodes, data.num_features, data.task) == (30, 4, "classification")
    assert split_sizes(data) == (15, 7, 8)
    assert data.y.dim() == 1 and data.num_classes == 40  # ogbn-arxiv's class count
    assert abs(float(data.x.mean(0).abs().max())) < 1e-5  # the arxiv preset centres features
    ei = data.edge_index
    assert torch.equal(torch.sort(ei[0] * 30 + ei[1])[0], torch.sort(ei[1] * 30 + ei[0])[0])  # undirected


def test_arxiv_with_wrong_node_count_is_named(tmp_path):
    mirror = write_arxiv(tmp_path / "mirror")
    with gzip.open(mirror / "ogbn_arxiv" / "raw" / "num-node-list.csv.gz", "wt") as f:
        f.write("31\n")
    with pytest.raises(DatasetError, match="node-feat.csv.gz has 30 rows but num-node-list.csv.gz says 31 nodes"):
        load("arxiv", mirror, tmp_path / "cache")


def write_reddit(folder: Path, n=25, d=6):
    raw = folder / "Reddit" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    types = np.array([1] * 10 + [2] * 5 + [3] * 10)
    np.savez(raw / "reddit_data.npz", feature=rng.normal(size=(n, d)).astype(np.float32), label=rng.integers(0, 41, n), node_types=types)
    pairs = rng.integers(0, n, (50, 2))
    sp.save_npz(raw / "reddit_graph.npz", sp.coo_matrix((np.ones(50), (pairs[:, 0], pairs[:, 1])), shape=(n, n)))
    return folder


def test_reddit_from_written_pyg_files(tmp_path):
    mirror = write_reddit(tmp_path / "mirror")
    data = load("reddit", mirror, tmp_path / "cache")
    assert (data.num_nodes, data.num_features, data.task) == (25, 6, "classification")
    assert split_sizes(data) == (10, 5, 10)
    # the edge list is PyG's Reddit.process: coalesce of the scipy COO (sorted, duplicates merged)
    from torch_geometric.utils import coalesce

    adj = sp.load_npz(mirror / "Reddit" / "raw" / "reddit_graph.npz").tocoo()
    raw = torch.stack([torch.from_numpy(adj.row).long(), torch.from_numpy(adj.col).long()])
    assert raw.size(1) == 50 and torch.equal(data.edge_index, coalesce(raw, num_nodes=25)) and data.edge_index.size(1) < 50


def test_truncated_reddit_file_is_named(tmp_path):
    mirror = write_reddit(tmp_path / "mirror")
    path = mirror / "Reddit" / "raw" / "reddit_graph.npz"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DatasetError, match="reddit_graph.npz is corrupt or truncated"):
        load("reddit", mirror, tmp_path / "cache")


@pytest.mark.parametrize("key, value, need", [("homophily", 1.5, "from 0 to 1"), ("snr", -1.0, ">= 0"), ("num_features", 0, "at least 1"),
                                             ("homophily", float("nan"), "from 0 to 1")])
def test_a_bad_csbm_setting_is_named_with_its_value(key, value, need):
    """A trial: dataset.homophily=1.5 said 'csbm needs 0 <= homophily <= 1, avg_degree >= 0, ...', not which one."""
    with pytest.raises(DatasetError, match=rf"^dataset\.{key}={value:g} must be {re.escape(need)}; csbm needs"):
        generate_csbm(num_nodes=100, **{key: value})


def test_csbm_sizes_determinism_and_homophily():
    data = generate_csbm(num_nodes=20000, avg_degree=8, num_classes=5, homophily=0.7, num_features=16, seed=3)
    assert data.num_nodes == 20000 and data.num_features == 16 and data.num_classes == 5
    assert abs(data.edge_index.size(1) / 20000 - 8) < 0.2  # directed edges per node ~ avg degree
    assert abs(edge_homophily(data.edge_index, data.y) - 0.7) < 0.02
    again = generate_csbm(num_nodes=20000, avg_degree=8, num_classes=5, homophily=0.7, num_features=16, seed=3)
    assert torch.equal(data.edge_index, again.edge_index) and torch.equal(data.x, again.x)
    other = generate_csbm(num_nodes=20000, avg_degree=8, num_classes=5, homophily=0.7, num_features=16, seed=4)
    assert not torch.equal(data.edge_index, other.edge_index)


def test_csbm_rejects_impossible_parameters():
    with pytest.raises(DatasetError, match="homophily"):
        generate_csbm(num_nodes=100, homophily=1.5)


def write_custom(folder: Path, n=30, labels="int", masks=False, header=True):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, n, (80, 2))
    (folder / "edges.csv").write_text(("src,dst\n" if header else "") + "".join(f"{a},{b}\n" for a, b in pairs))
    np.save(folder / "features.npy", rng.normal(size=(n, 5)))
    if labels == "int":
        np.save(folder / "labels.npy", rng.integers(0, 3, n))
    else:
        (folder / "labels.csv").write_text("value\n" + "".join(f"{v:.3f}\n" for v in rng.normal(size=n)))
    if masks:
        m = np.zeros(n, bool)
        for i, name in enumerate(("train_mask", "val_mask", "test_mask")):
            mm = m.copy()
            mm[i * 10:(i + 1) * 10] = True
            np.save(folder / f"{name}.npy", mm)
    return folder


def test_custom_classification_with_random_split(tmp_path):
    folder = write_custom(tmp_path / "g")
    data = load("custom", None, tmp_path, path=folder, train_ratio=0.5, val_ratio=0.2)
    assert (data.task, data.num_classes, data.num_nodes) == ("classification", 3, 30)
    assert split_sizes(data) == (15, 6, 9)


def test_class_names_as_labels_say_to_write_integer_ids(tmp_path):
    folder = write_custom(tmp_path / "g", labels="float")
    (folder / "labels.csv").write_text("label\n" + "".join(f"{name}\n" for name in ["cat", "dog", "bird"] * 10))
    with pytest.raises(DatasetError, match=r"must hold real numbers, got object; write each class as an integer id 0..C-1"):
        load("custom", None, tmp_path, path=folder)


def test_custom_regression_csv_labels_masks_and_sparse_features(tmp_path):
    folder = write_custom(tmp_path / "g", labels="float", masks=True, header=False)
    (folder / "features.npy").unlink()
    sp.save_npz(folder / "features.npz", sp.random(30, 7, density=0.3, format="csr", random_state=0))
    data = load("custom", None, tmp_path, path=folder)
    assert (data.task, data.num_features) == ("regression", 7)
    assert split_sizes(data) == (10, 10, 10) and data.split == "from files"


def test_a_blank_line_in_labels_csv_is_a_node_without_a_label(tmp_path):
    # pandas skips blank lines by default: every later label moved onto the node before it
    # ("has 29 labels but the features have 30 rows"); blank lines at the end are no nodes
    folder = write_custom(tmp_path / "g", labels="float", masks=True)
    values = [str(i % 3) for i in range(30)]
    values[25] = ""
    (folder / "labels.csv").write_text("label\n" + "\n".join(values) + "\n\n\n")
    with pytest.raises(DatasetError, match=r"has NaN on 1 node, and classification needs a class id"):
        load("custom", None, tmp_path, path=folder, task="classification")
    with pytest.raises(DatasetError, match=r"\(first: node 25\)"):
        load("custom", None, tmp_path, path=folder)
    from gnngp_cli.data.custom import _read_labels
    for text, read in [("\n0\n1\n2\n", [None, 0, 1, 2]),             # a first blank line: pandas' EmptyDataError, or dropped
                       ("y\n1\n   \n\t\n2\n", [1, None, None, 2]),    # whitespace: "must hold real numbers, got object"
                       ("0\r\n1\r\n\r\n2\r\n", [0, 1, None, 2]),
                       ("\ufeff3\n1\n", [3, 1]),                        # Excel's byte-order mark: not a header
                       ("\nlabel\n2\nNA\nnull\n1\n", [2, None, None, 1])]:   # R's NA (refused as text); a blank line above a header
        (folder / "labels.csv").write_text(text, newline="")
        got = _read_labels(folder / "labels.csv")
        assert [None if np.isnan(v) else int(v) for v in got] == read, (text, got)
    for text, said in [("0\t1\n", "several values on line 1"), ("3,\n4\n", "several values on line 1"),   # a header, or "write class ids"
                       ("1_000\n2\n", "must hold real numbers"), (f"{2**70}\n2\n", "beyond a 64-bit integer")]:   # a header; OverflowError
        (folder / "labels.csv").write_text(text)
        with pytest.raises(DatasetError, match=said):
            _read_labels(folder / "labels.csv")
    (folder / "labels.csv").write_text("\n".join(values[:29]) + "\n\n")   # the last node's label meant blank
    with pytest.raises(DatasetError, match="has 29 labels but the features have 30 rows; .* write nan on a last node without one"):
        load("custom", None, tmp_path, path=folder)


def test_custom_task_override(tmp_path):
    folder = write_custom(tmp_path / "g")
    assert load("custom", None, tmp_path, path=folder, task="regression").task == "regression"


def _zip_of_text(path):
    import zipfile

    with zipfile.ZipFile(path, "w") as z:   # a zip named .npz whose member is no array (a traceback in a helper's trial)
        z.writestr("a.txt", "hello")


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda f: (f / "edges.csv").write_text("0,1\n1,30\n"), "edges.csv has node id 30 outside \\[0, 30\\)"),
        (lambda f: (f / "edges.csv").write_text("0,1,2\n"), "edges.csv has 3 columns"),
        (lambda f: (f / "edges.csv").write_text("0 1 2\n1 2 3\n"), "edges.csv has 3 columns"),   # np.savetxt of three columns (was "1 columns")
        (lambda f: np.save(f / "labels.npy", np.zeros(29, int)), "labels.npy has 29 labels but the features have 30 rows"),
        (lambda f: (f / "features.npy").unlink(), "has no features file; add one of features.npy, features.npz"),
        (lambda f: np.save(f / "train_mask.npy", np.ones(30, bool)), "has train_mask but not all of"),
        (lambda f: (f / "features.npy").write_bytes(b"garbage"), "feature file .*features.npy is not a NumPy .npy file"),   # not "pickled"
        (lambda f: np.save(f / "labels.npy", np.array([{"a": 1}] * 30, dtype=object), allow_pickle=True),
         "label file .*labels.npy holds Python objects .*never unpickles"),
        (lambda f: (f / "features.npy").unlink() or (f / "features.npz").write_text("a,b\n"), "features.npz is not a NumPy .npz file"),
        (lambda f: (f / "features.npy").unlink() or _zip_of_text(f / "features.npz"), "features.npz holds a.txt, which is not a NumPy array"),
        (lambda f: (f / "features.npy").unlink() or np.savez(f / "features.npz", x=np.array([{"a": 1}] * 30, dtype=object)),
         "features.npz holds Python objects .*never unpickles"),
        (lambda f: np.savez(f / "features.npz", x=np.zeros((30, 2))), "has 2 features files \\(features.npy, features.npz\\); keep one"),
        (lambda f: np.savetxt(f / "edges.csv", np.array([[0, 1], [2, 3]])), r"non-integer node id .*np.savetxt writes floats unless told fmt="),
        (lambda f: (f / "edges.csv").write_text("0;1\n"), "edges.csv has 1 column; .* separated by a comma \\(or spaces or a tab\\)"),
    ],
)
def test_custom_bad_inputs_name_the_file(tmp_path, breakage, message):
    folder = write_custom(tmp_path / "g")
    breakage(folder)
    with pytest.raises(DatasetError, match=message):
        load("custom", None, tmp_path, path=folder)


@pytest.mark.parametrize("line", ["{a} {b}\n", "{a}\t{b}\n", "{a}  {b}\n"])
def test_edges_separated_by_spaces_or_a_tab_read_as_by_commas(tmp_path, line):
    """A trial: np.savetxt's edges.csv (spaces, or a tab) was '1 columns; it needs exactly two
    integer columns', which says nothing of commas."""
    folder = write_custom(tmp_path / "g")
    edges = [(0, 1), (1, 2), (5, 29)]
    (folder / "edges.csv").write_text("".join(f"{a},{b}\n" for a, b in edges))
    expected = load("custom", None, tmp_path, path=folder).edge_index
    (folder / "edges.csv").write_text("".join(line.format(a=a, b=b) for a, b in edges))
    assert torch.equal(load("custom", None, tmp_path, path=folder).edge_index, expected)


def _broken_npz(folder, **arrays):
    """features.npz in scipy's layout (as save_npz writes it) with these arrays in place of a
    valid 30 x 7 CSR matrix's."""
    (folder / "features.npy").unlink()
    valid = dict(format=b"csr", shape=np.array([30, 7]), indptr=np.array([0, 2] + [3] * 29, np.int32),
                 indices=np.array([0, 5, 6], np.int32), data=np.ones(3, np.float32))
    np.savez(folder / "features.npz", **{**valid, **arrays})


@pytest.mark.parametrize("arrays", [{"indices": np.array([0, 5, 10**9], np.int32)}, {"indptr": np.array([0, 2, 1] + [3] * 28, np.int32)},
                                    {"format": b"csc", "indptr": np.array([0, 3, 3, 3, 3, 3, 3, 3], np.int32), "indices": np.array([0, 1, 99], np.int32)}])
def test_a_sparse_feature_file_of_broken_structure_is_refused_before_it_is_densified(tmp_path, arrays):
    """scipy's loader trusts the file's indices and toarray writes where they point: a segfault."""
    folder = write_custom(tmp_path / "g")
    _broken_npz(folder, **arrays)
    with pytest.raises(DatasetError, match=r"feature file .*features.npz holds a sparse matrix whose structure is broken \(.*\); it was not read"):
        load("custom", None, tmp_path, path=folder)


def test_a_sparse_feature_file_of_sound_structure_reads_as_its_dense_matrix(tmp_path):
    folder = write_custom(tmp_path / "g")
    _broken_npz(folder)
    x = load("custom", None, tmp_path, path=folder).x
    assert x.shape == (30, 7) and x[0, 0] == x[0, 5] == x[1, 6] == 1 and float(x.abs().sum()) == 3


@pytest.mark.parametrize("bad, shown", [(np.inf, "inf"), (-np.inf, "-inf"), (-1.0, "-1"), (1.5, "1.5")])
def test_classification_labels_that_are_no_class_id_are_named(tmp_path, bad, shown):
    folder = write_custom(tmp_path / "g")
    labels = np.arange(30) % 3.0
    labels[7] = bad
    np.save(folder / "labels.npy", labels)
    with pytest.raises(DatasetError, match=rf"must hold non-negative integer class ids for classification \(it has {re.escape(shown)}, first on node 7\)"):
        load("custom", None, tmp_path, path=folder, task="classification")


def test_custom_path_of_a_file_names_its_folder(tmp_path):
    folder = write_custom(tmp_path / "g")
    with pytest.raises(DatasetError, match=rf"dataset.path=.*edges.csv is a file; .* \(dataset.path={re.escape(str(folder))}\)"):
        load("custom", None, tmp_path, path=folder / "edges.csv")


def test_custom_missing_folder(tmp_path):
    with pytest.raises(DatasetError, match="custom dataset folder .*nope does not exist"):
        load("custom", None, tmp_path, path=tmp_path / "nope")


def test_custom_path_too_long_is_one_error(tmp_path):
    with pytest.raises(DatasetError, match=r"is too long a path .* give the folder by a shorter path"):
        load("custom", None, tmp_path, path=tmp_path / ("y" * 300))


def test_a_reddit_label_past_its_41_classes_is_refused_before_any_allocation(tmp_path):
    """A trial: Reddit's raw file (no published digest) with one label of 10^6 set the class
    count to 10^6 + 1, and the process was killed by the kernel's out-of-memory killer (23 GB)."""
    mirror = write_reddit(tmp_path / "mirror")
    path = mirror / "Reddit" / "raw" / "reddit_data.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["label"][3] = 10**6
    np.savez(path, **arrays)
    with pytest.raises(DatasetError, match=r"reddit_data.npz holds the class id 1000000, and Reddit has 41 classes \(0..40\)"):
        load("reddit", mirror, tmp_path / "cache")


def test_a_classification_label_of_minus_one_says_how_to_give_a_node_without_a_label(tmp_path):
    """A practitioner's trial: -1 on a node outside every mask (the API takes it) was 'must hold
    non-negative integer class ids', with no word of how to give a node without a label."""
    folder = write_custom(tmp_path / "g")
    labels = np.arange(30) % 3
    labels[29] = -1
    np.save(folder / "labels.npy", labels)
    with pytest.raises(DatasetError, match=re.escape("(it has -1, first on node 29); gnngp has no id for a node without a label (-1 here): give "
                                                     "it one of the class ids yourself and leave it out of the three masks")):
        load("custom", None, tmp_path, path=folder)
