"""Loaders for the public benchmark graphs, read by gnngp itself from verified raw files.

Cora, CiteSeer, PubMed: the Planetoid files with the public split, built exactly as PyG's
``Planetoid`` builds them. Reddit: the DGL files, as PyG's ``Reddit``. arxiv: the OGB
``ogbn-arxiv`` CSVs with the time split, as OGB's ``PygNodePropPredDataset``. Raw files are
fetched through the :class:`~gnngp_cli.data.store.DataStore` (which checks their digests), and
read safely: Planetoid pickles with a restricted unpickler, npz files without pickles, CSVs with
pandas. PyG's and OGB's dataset classes are not used: they unpickle raw files and load their
processed files with ``weights_only=False``. The tensors are cached by
:func:`~gnngp_cli.data.cache.cached_tensors`.
"""
from __future__ import annotations

import shutil
import zipfile
from itertools import repeat
from pathlib import Path

import numpy as np
import torch

from ..schema import DatasetConfig
from ..errors import DatasetError
from .cache import cached_tensors
from .container import GraphData as Data  # PyG's Data interface, without importing torch_geometric
from .files import atomic_write
from .labels import published_class_count
from ..graph.operators import make_undirected
from .datasets import register_dataset
from .safe_pickle import UnsafePickle, load_restricted
from .store import DataStore, Opener, plain_open

PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
PLANETOID_CLASSES = {"cora": 7, "citeseer": 6, "pubmed": 3}   # Yang, Cohen & Salakhutdinov 2016's label sets
PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
REDDIT_URL = "https://data.dgl.ai/dataset/reddit.zip"
ARXIV_URL = "https://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip"
ARXIV_CLASSES = 40   # ogbn-arxiv's subject areas (OGB's master.csv)
REDDIT_CLASSES = 41  # Reddit's communities (Hamilton, Ying & Leskovec 2017)
ARXIV_FILES = (
    "raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz", "raw/node_year.csv.gz",
    "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz",
    "split/time/train.csv.gz", "split/time/valid.csv.gz", "split/time/test.csv.gz",
)


def _corrupt(path: Path, err: Exception) -> DatasetError:
    return DatasetError(f"raw file {path} is corrupt or truncated ({type(err).__name__}: {err}); delete it and fetch it again (mirror or download)")


def _read_planetoid_part(path: Path, part: str, opener: Opener = plain_open):
    """One Planetoid raw file: ``test.index`` is text; the others are restricted pickles of a
    feature matrix (scipy sparse or ndarray), a one-hot label array, or the adjacency dict."""
    try:
        with opener(path) as f:
            if part == "test.index":
                return np.loadtxt(f, dtype=np.int64, ndmin=1)
            item = load_restricted(path, f)
    except (UnsafePickle, DatasetError):
        raise
    except Exception as err:  # noqa: BLE001 - pickle/numpy raise many types for a bad file
        raise _corrupt(path, err) from err
    if part == "graph":
        if not isinstance(item, dict) or not all(isinstance(k, (int, np.integer)) and isinstance(v, list) for k, v in item.items()):
            raise DatasetError(f"raw file {path} holds a {type(item).__name__}, not the adjacency dict (node id -> list of neighbour ids) of a Planetoid graph file; fetch it again")
        return item
    dense = item.todense() if hasattr(item, "todense") and hasattr(item, "tocsr") else item
    if not isinstance(dense, np.ndarray) or dense.ndim != 2 or not np.issubdtype(dense.dtype, np.number):
        what = "feature matrix" if part in ("x", "tx", "allx") else "one-hot label matrix"
        raise DatasetError(f"raw file {path} holds a {type(item).__name__}, not the 2-D numeric {what} of a Planetoid '{part}' file; fetch it again")
    return np.asarray(dense)


def _check_planetoid(items: dict, raw: Path, name: str) -> None:
    rows = {k: items[k].shape[0] for k in ("x", "y", "tx", "ty", "allx", "ally")}
    test_index, graph = items["test.index"], items["graph"]
    for a, b in (("x", "y"), ("allx", "ally"), ("tx", "ty")):
        if rows[a] != rows[b]:
            raise DatasetError(f"raw file {raw / f'ind.{name}.{b}'} has {rows[b]} rows but ind.{name}.{a} has {rows[a]}; the files disagree on the node count, fetch them again")
    widths = {k: (items[k].shape[1] if items[k].ndim == 2 else 0) for k in ("x", "tx", "allx", "y", "ty", "ally")}
    for group in (("x", "tx", "allx"), ("y", "ty", "ally")):   # one feature width, one class count (a wider ally was torch.cat's traceback)
        if len({widths[k] for k in group}) > 1:
            shown = ", ".join(f"ind.{name}.{k} {widths[k]}" for k in group)
            raise DatasetError(f"the raw files in {raw} disagree on their {'feature' if group[0] == 'x' else 'class'} columns ({shown}); "
                               "fetch them again")
    if rows["tx"] != len(test_index) or len(test_index) == 0:
        raise DatasetError(f"raw file {raw / f'ind.{name}.test.index'} lists {len(test_index)} nodes but ind.{name}.tx has {rows['tx']} rows; fetch them again")
    num_nodes = rows["allx"] + int(test_index.max() - test_index.min()) + 1
    if len(graph) != num_nodes or max(graph) >= num_nodes:
        raise DatasetError(f"raw file {raw / f'ind.{name}.graph'} has {len(graph)} nodes but the feature files imply {num_nodes}; fetch them again")


def read_planetoid(raw: Path, name: str, opener: Opener = plain_open) -> dict[str, torch.Tensor]:
    """The Planetoid graph ``name`` from its raw files, exactly as PyG 2.8's
    ``read_planetoid_data`` builds it: rows ``allx`` then ``tx`` (CiteSeer's missing test ids as
    zero rows), test rows put in ``test.index`` order, self-loops removed, edges coalesced; the
    first ``len(y)`` nodes train, the next 500 validate, ``test.index`` tests."""
    from torch_geometric.utils import coalesce, index_to_mask, remove_self_loops  # PyG's own, for PyG's exact results

    items = {part: _read_planetoid_part(raw / f"ind.{name}.{part}", part, opener) for part in PLANETOID_PARTS}
    _check_planetoid(items, raw, name)
    as_float = {k: torch.from_numpy(items[k]).to(torch.float) for k in ("x", "tx", "allx", "y", "ty", "ally")}
    tx, ty, allx, ally, y_train = as_float["tx"], as_float["ty"], as_float["allx"], as_float["ally"], as_float["y"]
    test_index = torch.from_numpy(items["test.index"])
    sorted_test_index = test_index.sort()[0]
    if name == "citeseer":  # isolated test nodes have no row: zero rows fill the gaps
        span = int(test_index.max() - test_index.min()) + 1
        tx_ext = torch.zeros(span, tx.size(1), dtype=tx.dtype)
        tx_ext[sorted_test_index - test_index.min(), :] = tx
        ty_ext = torch.zeros(span, ty.size(1), dtype=ty.dtype)
        ty_ext[sorted_test_index - test_index.min(), :] = ty
        tx, ty = tx_ext, ty_ext
    x = torch.cat([allx, tx], dim=0)
    x[test_index] = x[sorted_test_index]
    y = torch.cat([ally, ty], dim=0).max(dim=1)[1]
    y[test_index] = y[sorted_test_index]
    n = y.size(0)
    rows, cols = [], []
    try:
        for key, value in items["graph"].items():
            rows += repeat(int(key), len(value))
            cols += [int(v) for v in value]
    except (TypeError, ValueError, OverflowError) as err:   # a neighbour that is no node id ('abc', a list): the file is not the published one
        raise DatasetError(f"raw file {raw / f'ind.{name}.graph'} holds a neighbour list that is not node ids ({type(err).__name__}: "
                           f"{str(err)[:80]}); delete it and fetch it again") from None
    edge_index = torch.stack([torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)], dim=0)
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise DatasetError(f"raw file {raw / f'ind.{name}.graph'} names a node outside [0, {n}); fetch it again")
    edge_index, _ = remove_self_loops(edge_index)
    edge_index = coalesce(edge_index, num_nodes=n, sort_by_row=False)
    return {
        "x": x, "y": y, "edge_index": edge_index,
        "train_mask": index_to_mask(torch.arange(y_train.size(0)), size=n),
        "val_mask": index_to_mask(torch.arange(y_train.size(0), y_train.size(0) + 500), size=n),
        "test_mask": index_to_mask(test_index, size=n),
    }


def load_planetoid(name: str, store: DataStore) -> Data:
    title = PLANETOID_NAMES[name]
    files = [f"raw/ind.{name}.{part}" for part in PLANETOID_PARTS]
    urls = {f: f"{PLANETOID_URL}/{Path(f).name}" for f in files}
    folder = store.fetch(title, files, urls)
    tensors = cached_tensors(folder, store.digests[title], lambda: read_planetoid(folder / "raw", name, store.opener()), store.untrusted, store.verify)
    data = Data(**tensors)
    data.task, data.num_classes = "classification", published_class_count(data.y, f"raw file {folder / 'raw' / f'ind.{name}.ally'}", title,
                                                                           PLANETOID_CLASSES[name])   # (with ty: the labels' one-hot rows)
    return data


def read_reddit(raw: Path, opener: Opener = plain_open) -> dict[str, torch.Tensor]:
    """Reddit from ``reddit_data.npz`` (``feature``, ``label``, ``node_types``: 1 train, 2 val,
    3 test) and ``reddit_graph.npz`` (a scipy COO adjacency), as PyG's ``Reddit.process``;
    neither file may hold a pickle."""
    import scipy.sparse as sp

    from ..graph.operators import coalesce_keys

    try:
        with opener(raw / "reddit_data.npz") as f, np.load(f, allow_pickle=False) as z:
            feature, label, types = z["feature"], z["label"], z["node_types"]
    except DatasetError:
        raise
    except Exception as err:  # noqa: BLE001 - numpy/zipfile raise many types
        raise _corrupt(raw / "reddit_data.npz", err) from err
    try:
        with opener(raw / "reddit_graph.npz") as f:
            adj = sp.load_npz(f).tocoo()
    except DatasetError:
        raise
    except Exception as err:  # noqa: BLE001
        raise _corrupt(raw / "reddit_graph.npz", err) from err
    n = feature.shape[0]
    if not (n == label.shape[0] == types.shape[0]):
        raise DatasetError(f"raw file {raw / 'reddit_data.npz'} has {n} feature rows, {label.shape[0]} labels and {types.shape[0]} node types; they must agree, fetch it again")
    if adj.shape != (n, n):
        raise DatasetError(f"raw file {raw / 'reddit_graph.npz'} is {adj.shape[0]}x{adj.shape[1]} but reddit_data.npz has {n} nodes; fetch them again")
    # PyG's coalesce (sorted, duplicates merged), from one int64 key per edge: the int64 edge
    # list and PyG's temporaries beside scipy's arrays peaked at 10 GB on a Reddit-sized graph
    key = adj.row.astype(np.int64)
    key *= n
    key += adj.col
    keys = [torch.from_numpy(key)]
    del adj, key
    edge_index = coalesce_keys(keys.pop(), None, n)[0]
    split = torch.from_numpy(types)
    return {
        "x": torch.from_numpy(feature).to(torch.float), "y": torch.from_numpy(label).to(torch.long),
        "edge_index": edge_index,
        "train_mask": split == 1, "val_mask": split == 2, "test_mask": split == 3,
    }


def _unzip_into(members: dict[str, str]):
    def unpack(archive: Path, target: Path) -> None:
        with zipfile.ZipFile(archive) as z:
            for member, dest in members.items():
                with z.open(member) as src:
                    atomic_write(target / dest, lambda out: shutil.copyfileobj(src, out), binary=True)
    return unpack


def load_reddit(name: str, store: DataStore) -> Data:
    files = ["raw/reddit_data.npz", "raw/reddit_graph.npz"]
    folder = store.fetch("Reddit", files, archive=(REDDIT_URL, _unzip_into({"reddit_data.npz": files[0], "reddit_graph.npz": files[1]})))
    data = Data(**cached_tensors(folder, store.digests["Reddit"], lambda: read_reddit(folder / "raw", store.opener()), store.untrusted, store.verify))
    data.task, data.num_classes = "classification", published_class_count(data.y, f"raw file {folder / files[0]}", "Reddit", REDDIT_CLASSES)
    return data


def read_arxiv(folder: Path, opener: Opener = plain_open) -> dict[str, torch.Tensor]:
    """ogbn-arxiv from OGB's CSVs, as OGB builds it: ``edge.csv.gz`` (one directed citation a
    row), ``node-feat.csv.gz`` (float32), ``node-label.csv.gz``, and the time split; edges are
    then made undirected."""
    from torch_geometric.utils import index_to_mask  # PyG's own, for PyG's exact results

    import pandas as pd

    tables = {}
    for f in ARXIV_FILES:
        try:
            with opener(folder / f) as handle:
                tables[f] = pd.read_csv(handle, compression="gzip", header=None)
        except DatasetError:
            raise
        except Exception as err:  # noqa: BLE001
            raise _corrupt(folder / f, err) from err
    try:
        n = int(tables["raw/num-node-list.csv.gz"].iloc[0, 0])
    except (IndexError, ValueError, TypeError) as err:
        raise _corrupt(folder / "raw/num-node-list.csv.gz", err) from err
    for f in ("raw/node-feat.csv.gz", "raw/node-label.csv.gz", "raw/node_year.csv.gz"):
        if len(tables[f]) != n:
            raise DatasetError(f"raw file {folder / f} has {len(tables[f])} rows but num-node-list.csv.gz says {n} nodes; fetch the dataset again")
    try:
        edges = tables["raw/edge.csv.gz"].to_numpy().astype(np.int64)
        x = tables["raw/node-feat.csv.gz"].to_numpy().astype(np.float32)
        y = tables["raw/node-label.csv.gz"].to_numpy().astype(np.int64).reshape(-1)
        split = {key: tables[f"split/time/{key}.csv.gz"].to_numpy().astype(np.int64).reshape(-1) for key in ("train", "valid", "test")}
    except (ValueError, TypeError) as err:
        raise DatasetError(f"a raw file of ogbn_arxiv in {folder} holds a non-numeric value ({err}); fetch the dataset again") from err
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.size and (edges.min() < 0 or edges.max() >= n):
        raise DatasetError(f"raw file {folder / 'raw/edge.csv.gz'} has node ids outside [0, {n}); fetch the dataset again")
    for key, idx in split.items():
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise DatasetError(f"split file {folder / f'split/time/{key}.csv.gz'} has node ids outside [0, {n}); fetch the dataset again")
    tensors = {
        "x": torch.from_numpy(x), "y": torch.from_numpy(y),
        "edge_index": make_undirected(torch.from_numpy(np.ascontiguousarray(edges.T)), n),
    }
    for key, name in (("train", "train"), ("valid", "val"), ("test", "test")):
        tensors[f"{name}_mask"] = index_to_mask(torch.from_numpy(split[key]), size=n)
    return tensors


def load_arxiv(name: str, store: DataStore) -> Data:
    members = {f"arxiv/{f}": f for f in ARXIV_FILES}
    folder = store.fetch("ogbn_arxiv", list(ARXIV_FILES), archive=(ARXIV_URL, _unzip_into(members)))
    data = Data(**cached_tensors(folder, store.digests["ogbn_arxiv"], lambda: read_arxiv(folder, store.opener()), store.untrusted, store.verify))
    data.task, data.num_classes = "classification", ARXIV_CLASSES
    return data


def _planetoid(name: str):
    def load(options, store: DataStore) -> Data:
        data = load_planetoid(name, store)
        data.split = "planetoid public"
        return data
    return load


def _arxiv(options, store: DataStore) -> Data:
    data = load_arxiv("arxiv", store)
    data.split = "ogb time"
    return data


def _reddit(options, store: DataStore) -> Data:
    data = load_reddit("reddit", store)
    data.split = "pyg reddit"
    return data


# kimiyoung/planetoid @ af6abf46 (PubMed's allx: the original is known by its git blob id only;
# the offline mirror holds a copy rebuilt from the same values, also accepted)
DIGESTS = {
    "CiteSeer/raw/ind.citeseer.allx": ("2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",),
    "CiteSeer/raw/ind.citeseer.ally": ("f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",),
    "CiteSeer/raw/ind.citeseer.graph": ("d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",),
    "CiteSeer/raw/ind.citeseer.test.index": ("2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",),
    "CiteSeer/raw/ind.citeseer.tx": ("539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",),
    "CiteSeer/raw/ind.citeseer.ty": ("55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",),
    "CiteSeer/raw/ind.citeseer.x": ("d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",),
    "CiteSeer/raw/ind.citeseer.y": ("8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",),
    "Cora/raw/ind.cora.allx": ("9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",),
    "Cora/raw/ind.cora.ally": ("2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",),
    "Cora/raw/ind.cora.graph": ("58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",),
    "Cora/raw/ind.cora.test.index": ("297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",),
    "Cora/raw/ind.cora.tx": ("b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",),
    "Cora/raw/ind.cora.ty": ("41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",),
    "Cora/raw/ind.cora.x": ("23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",),
    "Cora/raw/ind.cora.y": ("94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",),
    "PubMed/raw/ind.pubmed.allx": (
        "9d419f4544d0029d635a142df75e01fa8a376682e282a4cb3f3ff6539d57472e",  # the rebuilt mirror copy (see below)
        "gitblob:3b86bccf08111c37c632a9dd8ab63db25ea76361",  # the original in kimiyoung/planetoid
    ),
    "PubMed/raw/ind.pubmed.ally": ("0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",),
    "PubMed/raw/ind.pubmed.graph": ("5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",),
    "PubMed/raw/ind.pubmed.test.index": ("b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",),
    "PubMed/raw/ind.pubmed.tx": ("4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",),
    "PubMed/raw/ind.pubmed.ty": ("ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",),
    "PubMed/raw/ind.pubmed.x": ("fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",),
    "PubMed/raw/ind.pubmed.y": ("e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",),
}


def _digests(title: str) -> dict[str, tuple[str, ...]]:
    return {key: value for key, value in DIGESTS.items() if key.startswith(f"{title}/")}


for _name, _title in PLANETOID_NAMES.items():
    register_dataset(_name, _title, _planetoid(_name), DatasetConfig(name=_name), digests=_digests(_title))
# Table 1 of the paper gives the shapes of the csbm stand-ins: nodes, edges, features, classes, train/val ratios
register_dataset("arxiv", "ArXiv", _arxiv,
                 DatasetConfig(name="arxiv", center=True, landmark_fraction=50, large=True),  # the paper centres arxiv features for the GPs
                 stand_in=(169_343, 1_166_243, 128, 40, 0.54, 0.18))
register_dataset("reddit", "Reddit", _reddit, DatasetConfig(name="reddit", landmark_fraction=50, large=True),
                 stand_in=(232_965, 11_606_919, 602, 41, 0.66, 0.10))
