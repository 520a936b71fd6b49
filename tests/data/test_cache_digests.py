"""A cached adjacency is read as a private, copy-on-write mapping of its file, and a tensor's digest
is taken once while its bytes stay the same: the edge list verified on loading names its
adjacency's file without being hashed again, and any in-place write is seen."""
from __future__ import annotations

import hashlib
import io

import torch

from gnngp_cli.api import compose
from gnngp_cli.data import cache
from gnngp_cli.data.cache import cached_file, tensor_digest, tensor_digests
from gnngp_cli.job.loading import load_graph


def fresh_digest(tensor: torch.Tensor) -> str:
    return tensor_digest(tensor.clone())   # a new tensor: nothing kept on it


def test_a_digest_kept_on_a_tensor_follows_every_in_place_write():
    t = torch.arange(12, dtype=torch.int64)
    first = tensor_digest(t)
    assert tensor_digest(t) == first == fresh_digest(t)
    t.view(3, 4)[1, 2] = -1                  # through a view: the version counter is shared
    assert tensor_digest(t) != first and tensor_digest(t) == fresh_digest(t)
    t.add_(1)
    assert tensor_digest(t) == fresh_digest(t)
    view = t.view(4, 3)                      # another shape, the same bytes: its own digest (the shape is hashed)
    assert tensor_digest(view) == fresh_digest(view) != tensor_digest(t)
    many = {"a": t, "b": torch.ones(5), "c": torch.zeros(0)}
    assert tensor_digests(many) == {name: fresh_digest(x) for name, x in many.items()}   # side by side, the same as one at a time
    assert list(tensor_digests(many)) == ["a", "b", "c"]


def test_a_remembered_digest_is_never_saved_with_its_tensor():
    """Beside the tensor, not on it: a file written after a tensor was hashed is the file of one never
    hashed (a digest saved in it would come back with the tensor, trusted, from an untrusted file)."""
    hashed, fresh = torch.arange(100), torch.arange(100)
    tensor_digest(hashed)
    saved = []
    for t in (hashed, fresh):
        buffer = io.BytesIO()
        torch.save({"t": t}, buffer)
        saved.append(buffer.getvalue())
    assert saved[0] == saved[1]


def test_a_mapped_cache_is_a_private_copy_of_its_file(tmp_path, capfd):
    path = tmp_path / "gnngp.pt"
    built = []

    def build():
        built.append(1)
        return {"x": torch.arange(6, dtype=torch.float32), "y": torch.tensor([1, 2, 3])}

    cached_file(path, {"raw": "digest"}, build, mapped=True)
    loaded = cached_file(path, {"raw": "digest"}, build, mapped=True)
    assert built == [1] and torch.equal(loaded["x"], torch.arange(6, dtype=torch.float32))
    loaded["x"].mul_(10)                     # a job's in-place write reaches its copy, not the file
    again = cached_file(path, {"raw": "digest"}, build, mapped=True)
    assert built == [1] and torch.equal(again["x"], torch.arange(6, dtype=torch.float32))
    assert "warning" not in capfd.readouterr().err


def test_the_edge_list_verified_on_loading_is_not_hashed_again_for_its_adjacency(mirror, tmp_path, monkeypatch):
    cfg = compose(["dataset=cora", "kernel=gcngp_x", f"data.root={tmp_path}", f"data.mirror={mirror}"])
    load_graph(cfg).adjacency("sym")          # builds the processed cache and the adjacency's file
    edge_hashes = []
    real = hashlib.sha256

    class Counting:
        @staticmethod
        def sha256(data: bytes = b""):
            if data.startswith(b"torch.int64|(2,"):
                edge_hashes.append(data)
            return real(data)

    monkeypatch.setattr(cache, "hashlib", Counting)
    graph = load_graph(cfg)
    graph.adjacency("sym")
    assert len(edge_hashes) == 1             # the processed cache's check; its adjacency's name reads the digest kept
