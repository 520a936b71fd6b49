"""A sharded graph as Dask collections: features, degrees, labels and masks by row block, and
the blocked sparse-dense product ``A Q``.

``A Q`` is one task per output row block ``b``: for each row block ``j`` of ``Q`` that ``b``'s
columns touch (its edges are sorted by source block), it reads from ``Q_j``'s file only the rows
those edges name (memory-mapped, see :mod:`.root_files`), multiplies them by ``(I + A)[b, j]`` scaled
by ``s_in``, and adds the result into ``b``'s rows, which the end scales by ``s_out``:
``s_in = s_out = D^-1/2`` (symmetric) or ``s_in = 1, s_out = D^-1`` (row normalisation).

A task holds one output block, one source's rows and their product, whatever the graph; no
partial product is stored or sent between workers.

Other operators on the graph (H2GCN's ``hop1`` and ``hop2``, see :mod:`gnngp_cli.graph.operators`)
are sharded the same way by :meth:`ShardedGraph.operator`, one task per row block, from the
shards of ``I + A``: their binary entries and degrees in the same layout under
``<shards>/operators/<name>``, written once and normalised by the product as ``sym`` is (a row
with no entry is a zero row). Their ``done.json`` holds the sha256 of each file and the shards'
``meta_digest`` they came from; a reuse checks both and writes them again where either differs. The exact 2-hop rows of block ``b`` need the 1-hop rows of
``b``'s neighbours, read from their blocks' files. (The first version computed each partial
product beside ``Q_j`` in the workers' memory and summed them in chains: on a random graph the
partial products of one product are about ``M x width``, 100 GB at 10^8 edges and 257 columns,
and moving them between workers cost more than computing them.)
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

from ...graph.operators import OPERATORS
from ...data.shards import (TRAIN, ShardMeta, block_dir, block_files, check_columns, check_edges, differing_files, file_digests, load_part, read_ids, save_edges,
                            stored_meta_digest)
from ...data.trust import make_private_dirs
from ...errors import ComputeError
from .root_files import RootStore, block_path, read_block

log = logging.getLogger("gnngp")

FAN_IN = 8


def tree_reduce(parts: Sequence[Any], combine: Callable[..., Any], fan_in: int = FAN_IN) -> Any:
    """Reduce delayed ``parts`` with ``combine(*group)`` in a tree of fan-in ``fan_in``."""
    import dask

    parts = list(parts)
    while len(parts) > 1:
        parts = [dask.delayed(combine, pure=True)(*parts[i:i + fan_in]) if len(parts[i:i + fan_in]) > 1 else parts[i]
                 for i in range(0, len(parts), fan_in)]
    return parts[0]


def task_block(out: Any, label: str, shape: tuple, dtype: Any):
    """The Dask array of one row block computed by the delayed ``out``, named ``label`` (the
    task kind the end-of-run time summary shows; Dask's own name would be "from-value")."""
    import dask.array as da

    return da.from_delayed(out, shape=shape, dtype=dtype, name=f"{label}-{out.key.split('-', 1)[-1]}")


def _node_part(root: str, b: int, name: str, dtype: Any = None) -> np.ndarray:
    part = np.asarray(load_part(Path(root), b, name))
    return part if dtype is None else part.astype(dtype)


def _inverse_degree(root: str, b: int, kind: str) -> np.ndarray:
    """``D^-1/2`` (sym) or ``D^-1`` (row) of block ``b``'s degrees, 0 where a degree is 0."""
    deg = np.asarray(load_part(Path(root), b, "deg"))
    inverse = np.zeros_like(deg)
    np.power(deg, -0.5 if kind == "sym" else -1.0, out=inverse, where=deg > 0)
    return inverse


def _scale(root: str, b: int, kind: str, dtype: Any) -> np.ndarray:
    """``s_out`` of block ``b`` (a column vector): ``D^-1/2`` (sym) or ``D^-1`` (row)."""
    return _inverse_degree(root, b, kind).astype(dtype)[:, None]


def _block_product(root: str, b: int, kind: str, count: int, width: int, dtype: Any, sources: str) -> np.ndarray:
    """Row block ``b`` of ``A Q`` (see the module docstring); ``sources``: the folder of ``Q``'s block files."""
    import scipy.sparse as sp

    split = np.asarray(load_part(Path(root), b, "split"))
    rows_all, cols_all = load_part(Path(root), b, "rows"), load_part(Path(root), b, "cols")
    weights_all = load_part(Path(root), b, "weights")
    check_edges(Path(root), b, split, rows_all, cols_all, weights_all, count)
    out = np.zeros((count, width), dtype=dtype)
    block = torch.from_numpy(out)
    for j in np.nonzero(np.diff(split) > 0)[0]:
        lo, hi = int(split[j]), int(split[j + 1])
        rows, cols = np.asarray(rows_all[lo:hi]), np.asarray(cols_all[lo:hi])
        weights = np.asarray(weights_all[lo:hi])
        touched, local = np.unique(rows, return_inverse=True)
        needed, col = np.unique(cols, return_inverse=True)
        q_j = read_block(block_path(sources, int(j)), mmap=True)
        check_columns(Path(root), b, int(j), needed, q_j.shape[0])
        if kind == "sym":
            weights = weights * _inverse_degree(root, int(j), "sym")[cols]
        gathered = np.array(q_j[needed])   # only the rows these edges name; the map is let go before the next source
        del q_j
        a = sp.csr_matrix((weights.astype(dtype), (local, col)), shape=(touched.size, needed.size))
        block.index_add_(0, torch.from_numpy(touched.astype(np.int64, copy=False)), torch.from_numpy(np.asarray(a @ gathered)))
    out *= _scale(root, b, kind, dtype)
    return out


@dataclass
class ShardedGraph:
    """The shards of one graph (see :mod:`gnngp_cli.data.shards`) and the Dask collections
    read from them. Every collection is chunked by row block."""

    root: Path
    meta: ShardMeta

    @property
    def chunks(self) -> tuple[int, ...]:
        return tuple(self.meta.block_rows(b) for b in range(self.meta.num_blocks))

    def _column(self, name: str, dtype: Any, width: int = 0):
        import dask
        import dask.array as da

        blocks = []
        for b in range(self.meta.num_blocks):
            shape = (self.meta.block_rows(b), width) if width else (self.meta.block_rows(b),)
            part = dask.delayed(_node_part, pure=True)(str(self.root), b, name, dtype)
            blocks.append(da.from_delayed(part, shape=shape, dtype=dtype))
        return da.concatenate(blocks, axis=0)

    def features(self, dtype: Any):
        """``X`` (N x d), in ``dtype``."""
        return self._column("x", np.dtype(dtype), self.meta.num_features)

    def labels(self):
        dtype = np.int64 if self.meta.task == "classification" else np.float64
        return self._column("y", dtype)

    def masks(self):
        return self._column("mask", np.uint8)

    def gather_rows(self, array, nodes: np.ndarray) -> np.ndarray:
        """``array[nodes]`` on the client (``nodes`` sorted, few: the landmarks)."""
        return np.asarray(array[nodes].compute())

    def train_ids(self) -> np.ndarray:
        """The training node ids, in order (one int64 per training node, on the client). Shards
        written in a ``data.order`` give their positions in the order of the graph's own ids, so
        the landmarks drawn from them are the nodes the local path draws."""
        import dask

        meta = self.meta
        parts = [dask.delayed(_ids_of, pure=True)(str(self.root), b, meta.block_start(b), TRAIN, meta.order) for b in range(meta.num_blocks)]
        found = dask.compute(*parts)
        positions = np.concatenate([p for p, _ in found])
        own = np.concatenate([o for _, o in found])
        return positions[np.argsort(own, kind="stable")]

    def convolve(self, sources: str, kind: str, width: int, dtype: Any, edges: Optional[Path] = None):
        """``A Q`` by row blocks (see the module docstring), ``Q`` (``N x width``) read from its
        row-block files in the folder ``sources`` (:mod:`.root_files`); ``kind`` is ``sym`` or ``row``;
        ``edges``: the folder of another operator's shards (:meth:`operator`)."""
        import dask
        import dask.array as da

        blocks = []
        for b in range(self.meta.num_blocks):
            count = self.meta.block_rows(b)
            out = dask.delayed(_block_product, pure=True)(str(edges or self.root), b, kind, count, width, np.dtype(dtype), str(sources))
            blocks.append(task_block(out, "block_product", (count, width), dtype))
        return da.concatenate(blocks, axis=0)

    def operator(self, name: str, store: RootStore) -> Path:
        """The folder of the shards of operator ``name`` (``hop1``, ``hop2``): written once under
        ``<shards>/operators/<name>``, or into the run's roots folder where the shards' folder
        cannot be written (e.g. shards another user made)."""
        import dask

        if name not in OPERATORS:
            raise ComputeError(f"the row-block backend has no graph operator {name!r}; it shards {', '.join(OPERATORS)}")
        shards = stored_meta_digest(self.root)
        for base in (self.root / "operators", store.folder / "operators"):
            folder = base / name
            if (folder / "done.json").is_file():
                problem = _operator_problem(folder, shards)
                if problem is None:
                    return folder
                log.warning("the %s operator's shards %s %s; writing them again", name, folder, problem)
                shutil.rmtree(folder, ignore_errors=True)
            try:
                make_private_dirs(folder)
                probe = folder / f".probe-{os.getpid()}"
                probe.write_text("")
                probe.unlink()
            except OSError:
                continue
            log.info("sharding the graph operator %s of %s into %s", name, self.meta.dataset, folder)
            hop = int(name[-1])
            dask.compute(*[dask.delayed(_hop_block, pure=True)(str(self.root), b, hop, self.meta.rows, self.meta.num_nodes,
                                                               self.meta.num_blocks, str(folder)) for b in range(self.meta.num_blocks)])
            digests = file_digests(folder, block_files(folder, self.meta.num_blocks))
            (folder / "done.json").write_text(json.dumps({"operator": name, "dataset": self.meta.dataset, "shards": shards, "digests": digests}))
            os.chmod(folder / "done.json", 0o644)   # never group-writable, whatever the umask (data.trust)
            return folder
        raise ComputeError(f"cannot write the {name} operator's shards into {self.root} nor into {store.folder}; "
                           "make one of them writable (compute.shards or compute.roots_dir)")


def _operator_problem(folder: Path, shards: str):
    """Why an operator's shards cannot be reused (``None``: they can): written from other shards
    (partitioned again since), or a file changed since it was written."""
    try:
        done = json.loads((folder / "done.json").read_text())
        written = dict(done["digests"])
    except (OSError, ValueError, KeyError, TypeError):
        return "carry no digests (written by an older gnngp)"
    if done.get("shards") != shards:
        return "were written from other shards"
    changed = differing_files(folder, written, [f"{p.parent.name}/{p.name}" for p in folder.glob("block-*/*.npy")])
    return f"changed since they were written ({folder / changed[0][0]})" if changed else None


def _one_hop(root: str, b: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Block ``b``'s 1-hop entries: ``(row within the block, global column)`` of ``I + A`` with
    the self-loops dropped (binary: repeated edges count once)."""
    split = np.asarray(load_part(Path(root), b, "split"))
    local = np.asarray(load_part(Path(root), b, "rows")).astype(np.int64)
    cols = np.asarray(load_part(Path(root), b, "cols")).astype(np.int64)
    check_edges(Path(root), b, split, local, cols, load_part(Path(root), b, "weights"), rows)
    for j in np.nonzero(np.diff(split) > 0)[0]:
        check_columns(Path(root), b, int(j), cols[int(split[j]):int(split[j + 1])], rows)
    source = np.repeat(np.arange(split.size - 1), np.diff(split))
    cols = cols + source * rows
    keep = cols != local + b * rows
    return local[keep], cols[keep]


def _hop_block(root: str, b: int, hop: int, rows: int, num_nodes: int, num_blocks: int, out: str) -> int:
    """Block ``b`` of H2GCN's 1-hop (``hop=1``) or exact 2-hop (``hop=2``) operator, written in
    the shard layout under ``out`` with unit weights and the degrees ``|N_i(v)|``; its entry count."""
    import scipy.sparse as sp

    count = min(rows, num_nodes - b * rows)
    local, cols = _one_hop(root, b, rows)
    if hop == 2:   # reachable in two steps, not in one, not the node itself
        needed = np.unique(cols)
        parts_rows, parts_cols = [], []
        for j in np.unique(needed // rows):
            l_j, c_j = _one_hop(root, int(j), rows)
            keep = np.isin(l_j + j * rows, needed)
            parts_rows.append(l_j[keep] + j * rows)
            parts_cols.append(c_j[keep])
        nbr_rows = np.concatenate(parts_rows) if parts_rows else np.zeros(0, dtype=np.int64)
        nbr_cols = np.concatenate(parts_cols) if parts_cols else np.zeros(0, dtype=np.int64)
        a_b = sp.csr_matrix((np.ones(local.size), (local, np.searchsorted(needed, cols))), shape=(count, needed.size))
        a_n = sp.csr_matrix((np.ones(nbr_rows.size), (np.searchsorted(needed, nbr_rows), nbr_cols)), shape=(needed.size, num_nodes))
        reach = (a_b @ a_n).tocoo()
        keys = reach.row.astype(np.int64) * num_nodes + reach.col
        excluded = np.concatenate([local * num_nodes + cols, np.arange(count, dtype=np.int64) * num_nodes + np.arange(count) + b * rows])
        keys = np.setdiff1d(keys, excluded)
        local, cols = keys // num_nodes, keys % num_nodes
    else:
        keys = np.unique(local * num_nodes + cols)
        local, cols = keys // num_nodes, keys % num_nodes
    save_edges(block_dir(Path(out), b), local, cols, np.ones(local.size), count, rows, num_blocks)
    return int(local.size)


def _ids_of(root: str, b: int, start: int, bit: int, order: str = "none") -> tuple[np.ndarray, np.ndarray]:
    """The positions of block ``b``'s nodes with ``bit`` set, and their own ids."""
    mask = np.asarray(load_part(Path(root), b, "mask"))
    local = np.nonzero(mask & bit)[0]
    return local.astype(np.int64) + start, read_ids(Path(root), b, start, mask.size, order)[local]

