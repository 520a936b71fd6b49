"""A cache's tensors are hashed side by side, every time they are asked for (a digest remembered
for a tensor would miss a write that torch does not count), and a cached adjacency is read as a
private, copy-on-write mapping of its file."""
from __future__ import annotations

import torch

from gnngp_cli.data.cache import cached_file, tensor_digest, tensor_digests


def test_digests_side_by_side_are_the_ones_taken_one_at_a_time_and_see_every_write():
    t = torch.arange(12, dtype=torch.int64)
    many = {"a": t, "b": torch.ones(5), "c": torch.zeros(0)}
    first = tensor_digests(many)
    assert first == {name: tensor_digest(x.clone()) for name, x in many.items()} and list(first) == ["a", "b", "c"]
    t.numpy()[3] = -1                        # a write torch's version counter does not see
    assert tensor_digest(t) != first["a"] and tensor_digest(t) == tensor_digest(t.clone())
    t.view(3, 4)[1, 2] = 7
    assert tensor_digest(t) == tensor_digest(t.clone())


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


def test_a_cache_loads_under_inference_mode(tmp_path, capfd):
    """Tensors made under ``torch.inference_mode()`` have no version counter: nothing reads one."""
    built = []

    def build():
        built.append(1)
        return {"x": torch.arange(4, dtype=torch.float32)}

    with torch.inference_mode():
        for mapped in (False, True):
            path = tmp_path / f"cache-{mapped}.pt"
            cached_file(path, {"raw": "digest"}, build, mapped=mapped)
            assert torch.equal(cached_file(path, {"raw": "digest"}, build, mapped=mapped)["x"], torch.arange(4, dtype=torch.float32))
    assert built == [1, 1] and "warning" not in capfd.readouterr().err
