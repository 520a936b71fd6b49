"""MUSAE Wikipedia page-traffic graphs (chameleon, squirrel, crocodile), a regression task.

Raw files in ``<Name>/raw/``: ``<name>.json`` (node -> list of feature ids),
``<name>_edges.csv`` (header ``id1,id2``), ``<name>_target.csv`` (``id,target``: average
monthly traffic) and, for chameleon and squirrel, the geom-gcn splits
``<name>_split_0.6_0.2_<k>.npz``. Features are a dense binary matrix over the sorted
distinct feature ids; the target is ``log(traffic)``; edges are made undirected.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from ..schema import DatasetConfig
from ..errors import DatasetError
from .cache import cached_tensors
from .container import GraphData as Data  # PyG's Data interface, without importing torch_geometric
from ..graph.operators import make_undirected
from .datasets import register_dataset
from .store import DataStore, Opener, plain_open

MUSAE_URL = "https://raw.githubusercontent.com/benedekrozemberczki/MUSAE/master/input"
GEOM_GCN_URL = "https://raw.githubusercontent.com/graphdml-uiuc-jlu/geom-gcn/master/splits"
WIKIPEDIA_NAMES = ("chameleon", "squirrel", "crocodile")
GEOM_GCN_SPLITS = 10


def wikipedia_files(name: str) -> dict[str, str]:
    """Raw file (relative to ``<name>``) -> download URL."""
    files = {
        f"raw/{name}.json": f"{MUSAE_URL}/features/{name}.json",
        f"raw/{name}_edges.csv": f"{MUSAE_URL}/edges/{name}_edges.csv",
        f"raw/{name}_target.csv": f"{MUSAE_URL}/target/{name}_target.csv",
    }
    if name != "crocodile":
        for k in range(GEOM_GCN_SPLITS):
            files[f"raw/{name}_split_0.6_0.2_{k}.npz"] = f"{GEOM_GCN_URL}/{name}_split_0.6_0.2_{k}.npz"
    return files


def read_musae_features(path: Path, opener: Opener = plain_open) -> torch.Tensor:
    """Dense binary features from a MUSAE json (parsed with ``json``, never ``eval``)."""
    try:
        with opener(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as err:
        raise DatasetError(f"raw file {path} is not valid json ({err}); delete it and fetch it again") from err
    if not isinstance(raw, dict):
        raise DatasetError(f"raw file {path} must map node ids to feature-id lists; fetch it again")
    n = len(raw)
    try:
        ids = sorted(int(k) for k in raw)
        rows = np.concatenate([np.full(len(raw[str(i)]), i) for i in range(n)]) if n else np.zeros(0, int)
        cols = np.concatenate([np.asarray(raw[str(i)], dtype=np.int64) for i in range(n)]) if n else np.zeros(0, int)
    except (KeyError, ValueError, TypeError) as err:
        raise DatasetError(f"raw file {path} has a malformed entry ({type(err).__name__}: {err}); fetch it again") from err
    if ids != list(range(n)):
        raise DatasetError(f"raw file {path} must have node ids 0..{n - 1}; fetch it again")
    values, cols = np.unique(cols, return_inverse=True)
    x = torch.zeros(n, len(values))
    x[torch.from_numpy(rows), torch.from_numpy(cols.reshape(-1))] = 1.0
    return x


def _is_number(value: object) -> bool:
    try:
        float(str(value).strip())
    except ValueError:
        return False
    return True


def read_edge_csv(path: Path, num_nodes: int, header: bool | None = True, opener: Opener = plain_open) -> torch.Tensor:
    """Two integer columns of node ids, separated by a comma (or, as ``np.savetxt`` writes them,
    by spaces or a tab); ``header=None`` detects a header row."""
    import pandas as pd

    def read(sep: str):
        with opener(path) as f:
            return pd.read_csv(f, header=None, dtype=str, skip_blank_lines=True, sep=sep)

    try:
        frame = read(",")
        if frame.shape[1] == 1 and len(frame) and len(str(frame.iloc[0, 0]).split()) >= 2:   # "0 1" or "0\t1": no comma anywhere
            frame = read(r"\s+")                                                               # (three fields: named as three columns)
    except pd.errors.EmptyDataError:   # an empty file (or blank lines): no edges, as a file of its header alone
        return torch.empty(2, 0, dtype=torch.int64)
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise DatasetError(f"edge file {path} could not be read as CSV ({err}); it needs two integer columns of node ids") from err
    if frame.shape[1] != 2:
        raise DatasetError(f"edge file {path} has {frame.shape[1]} column{'s' if frame.shape[1] != 1 else ''}; it needs exactly two integer columns of node ids, "
                           "a row per edge, separated by a comma (or spaces or a tab)")
    if header is None:   # a header names its columns: a first row of numbers (1.5, 1e1, nan too) is data, and checked as ids below
        header = len(frame) > 0 and not all(_is_number(v) for v in frame.iloc[0])
    if header:
        frame = frame.iloc[1:]
    try:
        edges = frame.apply(lambda c: c.str.strip()).astype(np.int64).to_numpy()
    except OverflowError:
        raise DatasetError(f"edge file {path} has a node id beyond 64-bit integers; node ids are 0..{num_nodes - 1}") from None
    except (ValueError, TypeError) as err:
        raise DatasetError(f"edge file {path} has a non-integer node id ({err}){_first_bad_row(frame)}; every row must be two integers"
                           f"{_float_hint(frame)}") from err
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise DatasetError(f"edge file {path} has node id {int(edges.max() if edges.max() >= num_nodes else edges.min())} outside [0, {num_nodes}); the other files have {num_nodes} nodes")
    return torch.from_numpy(edges.T.copy()).reshape(2, -1)


def _first_bad_row(frame) -> str:
    """``, first on line N ('a,b')``: the first row whose two fields are not both integers (its line
    in the file, the header counted), or '' if none is found."""
    for index, row in frame.iterrows():
        fields = [str(v).strip() if v is not None and str(v) != "nan" else "" for v in row]
        if not all(f.lstrip("+-").isdigit() for f in fields):
            shown = ",".join(f for f in fields if f) or "(empty)"
            return f", first on line {int(index) + 1} ({shown[:40]!r})"
    return ""


def _float_hint(frame) -> str:
    """np.savetxt's float rows (``1.000000000000000000e+00``), named where the file has them."""
    sample = " ".join(str(v) for v in frame.head(20).to_numpy().ravel())
    return " (np.savetxt writes floats unless told fmt=\"%d\")" if "e+" in sample or "." in sample else ""


def _read_target(path: Path, num_nodes: int, opener: Opener = plain_open) -> torch.Tensor:
    import pandas as pd

    try:
        with opener(path) as f:
            frame = pd.read_csv(f)
        ids = frame.iloc[:, 0].to_numpy(dtype=np.int64)
        traffic = frame.iloc[:, 1].to_numpy(dtype=np.float64)
    except (OSError, ValueError, IndexError, pd.errors.ParserError) as err:
        raise DatasetError(f"target file {path} could not be read ({err}); it needs columns id,target") from err
    if len(ids) != num_nodes or set(ids.tolist()) != set(range(num_nodes)):
        raise DatasetError(f"target file {path} has {len(ids)} rows but the features have {num_nodes} nodes; the files disagree, fetch them again")
    if (traffic <= 0).any() or not np.isfinite(traffic).all():
        raise DatasetError(f"target file {path} has a non-positive or missing traffic value; log(traffic) needs positive numbers")
    y = np.empty(num_nodes)
    y[ids] = np.log(traffic)
    return torch.from_numpy(y).float()


def _read_splits(raw: Path, name: str, num_nodes: int, opener: Opener = plain_open) -> dict[str, torch.Tensor]:
    masks = {"train": [], "val": [], "test": []}
    for k in range(GEOM_GCN_SPLITS):
        path = raw / f"{name}_split_0.6_0.2_{k}.npz"
        try:
            with opener(path) as f, np.load(f, allow_pickle=False) as z:
                for key in masks:
                    masks[key].append(torch.from_numpy(z[f"{key}_mask"].astype(bool)))
        except DatasetError:
            raise
        except Exception as err:  # noqa: BLE001 - numpy/zipfile raise many types
            raise DatasetError(f"split file {path} is corrupt ({type(err).__name__}: {err}); fetch it again") from err
        if any(m[-1].numel() != num_nodes for m in masks.values()):
            raise DatasetError(f"split file {path} has masks of length {masks['train'][-1].numel()} but the graph has {num_nodes} nodes; fetch it again")
    return {key: torch.stack(value, dim=1) for key, value in masks.items()}


def read_wikipedia(raw: Path, name: str, opener: Opener = plain_open) -> dict[str, torch.Tensor]:
    """Features, undirected edges, ``log(traffic)`` targets and (chameleon, squirrel) the
    geom-gcn split masks stacked as columns, from the raw MUSAE files."""
    x = read_musae_features(raw / f"{name}.json", opener)
    n = x.size(0)
    tensors = {
        "x": x,
        "edge_index": make_undirected(read_edge_csv(raw / f"{name}_edges.csv", n, opener=opener), n),
        "y": _read_target(raw / f"{name}_target.csv", n, opener),
    }
    if name != "crocodile":
        for key, mask in _read_splits(raw, name, n, opener).items():
            tensors[f"{key}_masks"] = mask
    return tensors


def random_split(num_nodes: int, train_ratio: float, val_ratio: float, seed: int) -> dict[str, torch.Tensor]:
    """Seeded random train/val/test masks; the rest after train and val is test."""
    perm = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))
    n_train, n_val = int(round(train_ratio * num_nodes)), int(round(val_ratio * num_nodes))
    out = {}
    for key, idx in (("train", perm[:n_train]), ("val", perm[n_train:n_train + n_val]), ("test", perm[n_train + n_val:])):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[idx] = True
        out[key] = mask
    return out


def load_wikipedia(name: str, store: DataStore, split_index: int = 0, split_seed: int = 0) -> Data:
    files = wikipedia_files(name)
    folder = store.fetch(name, list(files), files)
    full = cached_tensors(folder, store.digests[name], lambda: read_wikipedia(folder / "raw", name, store.opener()), store.untrusted, store.verify)
    data = Data(x=full["x"], y=full["y"], edge_index=full["edge_index"])
    if name == "crocodile":
        masks = random_split(data.num_nodes, 0.48, 0.32, split_seed)
        data.split = f"random 0.48/0.32/0.20, seed {split_seed}"
    else:
        if not 0 <= split_index < GEOM_GCN_SPLITS:
            raise DatasetError(f"dataset.split_index={split_index} is out of range; geom-gcn provides splits 0..{GEOM_GCN_SPLITS - 1}")
        masks = {key: full[f"{key}_masks"][:, split_index].clone() for key in ("train", "val", "test")}
        data.split = f"geom-gcn {split_index}"
        data.num_splits = GEOM_GCN_SPLITS
    for key, mask in masks.items():
        data[f"{key}_mask"] = mask
    data.task, data.num_classes = "regression", 0
    return data


def _wikipedia(name: str):
    def load(options, store: DataStore) -> Data:
        return load_wikipedia(name, store, options.split_index, options.split_seed)
    return load


# MUSAE files: benedekrozemberczki/MUSAE @ 5f901232; geom-gcn splits: graphdml-uiuc-jlu/geom-gcn @ f1fc0d14
DIGESTS = {
    "chameleon/raw/chameleon.json": ("a958c2158cb81bb05cc01f5605ffb3449a7b20b389c8f1e94a0da61dbed6bdbe",),
    "chameleon/raw/chameleon_edges.csv": ("b90d671846530ea7c0f6f6d0e3be98eb512ecd8e9741811940fe4029d991b266",),
    "chameleon/raw/chameleon_split_0.6_0.2_0.npz": ("36605525b69be4e7df5b31fe6a1d044288c6ebf9f9f0514ca151f6a36afc5e8b",),
    "chameleon/raw/chameleon_split_0.6_0.2_1.npz": ("d0779d5a1bedf1967d394468a52c0175fb00595d361fba897faf73322386c952",),
    "chameleon/raw/chameleon_split_0.6_0.2_2.npz": ("86ad0d827bf4301dff830598fc0b70d0dd8689c5b4d72dab1d87a6c1970c4c6e",),
    "chameleon/raw/chameleon_split_0.6_0.2_3.npz": ("37b3e994adf3afc55e16b617ed05af4e3ce308800755839084d77eced0528e9d",),
    "chameleon/raw/chameleon_split_0.6_0.2_4.npz": ("f6b1d067b2b330132839d8b6120077bdc6cf759f7ce421f881a02e2953ec4596",),
    "chameleon/raw/chameleon_split_0.6_0.2_5.npz": ("e7661834275c826692510cea0457b18b2c1ee38771f178d06e701b97541a1f6d",),
    "chameleon/raw/chameleon_split_0.6_0.2_6.npz": ("16648d1197c1d3a2dec385346212c382030b0d5a8c997f4255aa2afa68a6b174",),
    "chameleon/raw/chameleon_split_0.6_0.2_7.npz": ("61adcc53846becefecd466a5364dda23b983d387d1ac5d58c6e24d080c0fcba7",),
    "chameleon/raw/chameleon_split_0.6_0.2_8.npz": ("7076ad5341a8218b1f5b6eccf9cfd15d28286ea11ef5c06eeee77af24ff2bf63",),
    "chameleon/raw/chameleon_split_0.6_0.2_9.npz": ("743c4f813bf6130398a6511eb9ff07d2366c73bd6c7fddaf226a3f9e2917e0e7",),
    "chameleon/raw/chameleon_target.csv": ("5816b4731cbd156738095550d1f6e37caf6f4dabe1d660c035156408ae6bae43",),
    "crocodile/raw/crocodile.json": ("gitblob:0c68f0cfb24216ab860818c492c22d325a07194b",),  # MUSAE's, absent from the mirror
    "crocodile/raw/crocodile_edges.csv": ("92f4fe840f5ef79f85364e3678bbc909d0c151e0ff8d8328854b602d998f2d22",),
    "crocodile/raw/crocodile_target.csv": ("f83d79b3c6979639475d90fb5e2c969d2c21b64b068abc19e57f93c8fedfef1d",),
    "squirrel/raw/squirrel.json": ("34512ff7981f36811d830d6bf5c7116a671f40e3210f26a276d9792001acffc0",),
    "squirrel/raw/squirrel_edges.csv": ("574b9d083635377c368e9431a29121773500f57edb8b4602f69544e6b5fe0da8",),
    "squirrel/raw/squirrel_split_0.6_0.2_0.npz": ("f112b88d3354e86d164d4d915b6a1f695c10f0e01e3e6b9893fc7b09bb93191d",),
    "squirrel/raw/squirrel_split_0.6_0.2_1.npz": ("2486c687c8befb55930a6237f76f1d86ce2ba345782eda6157f4e752d05f304f",),
    "squirrel/raw/squirrel_split_0.6_0.2_2.npz": ("d62ff83862ad96022d3400dfc9b7ca405834ca62767319d97c36b3f02db978c0",),
    "squirrel/raw/squirrel_split_0.6_0.2_3.npz": ("af3d90e0b2718ac7417e10e8b5b382443667412e846cabc3cc4e4a592f4cedae",),
    "squirrel/raw/squirrel_split_0.6_0.2_4.npz": ("fbe848298bb72b88db0704050cf216e2a93c916540d577906f3e644b679a6a2c",),
    "squirrel/raw/squirrel_split_0.6_0.2_5.npz": ("cd04fab46a181151ddd97ce93c65fe79558fb79ffa230b62f488ebfaf5fdcd75",),
    "squirrel/raw/squirrel_split_0.6_0.2_6.npz": ("b9189f7903ca7556a025c54dd5be6c00ec5952d4299e71630bc9876157676412",),
    "squirrel/raw/squirrel_split_0.6_0.2_7.npz": ("ea7fb3ca5d5aa45b917b99fb7d64d4e87322b2b5303a0156c547aa3f1a6c8941",),
    "squirrel/raw/squirrel_split_0.6_0.2_8.npz": ("b43faa190ca6dd4885a39dfc2a93d59f56f5174f3567bdbc49b18dd9cd9b7fb4",),
    "squirrel/raw/squirrel_split_0.6_0.2_9.npz": ("529ade4b86fd191908a96011f25c454653083674b6d4f090b3fdd27af2d14f62",),
    "squirrel/raw/squirrel_target.csv": ("0933f58cf0469eda904e27442eabeda04f0f27e8e1863b76dad144d4404fdd3f",),
}


for _name in WIKIPEDIA_NAMES:
    register_dataset(_name, _name.capitalize(), _wikipedia(_name), DatasetConfig(name=_name),
                     split="seeded" if _name == "crocodile" else "fixed",
                     digests={key: value for key, value in DIGESTS.items() if key.startswith(f"{_name}/")})
