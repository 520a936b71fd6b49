"""The normalised adjacency is built once per dataset and kept in the data cache: a second job
reads it instead of normalising the graph again, and a cached adjacency that was changed after
it was written is rebuilt with a warning, as an edited processed dataset is."""
from __future__ import annotations

import torch

from gnngp_cli.api import compose
from gnngp_cli.data import adjacency_cache
from gnngp_cli.data.adjacency_cache import FOLDER, cached_adjacency
from gnngp_cli.graph.operators import Adjacency
from gnngp_cli.job.loading import load_graph


def counting_builds(monkeypatch) -> list:
    """Every normalisation the adjacency cache runs, recorded."""
    built: list = []
    original = adjacency_cache.normalised_parts

    def recorded(*args, **kwargs):
        built.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(adjacency_cache, "normalised_parts", recorded)
    return built


def test_the_cached_adjacency_is_the_built_one_and_is_read_back(tmp_path, monkeypatch):
    edges = torch.randint(0, 300, (2, 2_000), generator=torch.Generator().manual_seed(0))
    built = counting_builds(monkeypatch)
    first = cached_adjacency(edges, 300, "sym", torch.float32, tmp_path)
    again = cached_adjacency(edges, 300, "sym", torch.float32, tmp_path)
    assert built == ["sym"]   # the second read the file
    assert [f.name.split("-")[:3] for f in (tmp_path / FOLDER).iterdir()] == [["sym", "float32", "300"]]
    direct = Adjacency.from_graph(edges, 300, "sym", torch.float32, "cpu")
    for parts in (first, again):   # the same operator as one normalised in memory, bit for bit
        cached = Adjacency.from_parts(*parts, 300)
        assert torch.equal(cached.edge_index, direct.edge_index) and torch.equal(cached.edge_weight, direct.edge_weight)
    cached_adjacency(edges, 300, "row", torch.float32, tmp_path)
    cached_adjacency(edges[:, :1_000], 300, "sym", torch.float32, tmp_path)
    assert built == ["sym", "row", "sym"] and len(list((tmp_path / FOLDER).iterdir())) == 3   # another kind or graph: its own file


def test_a_tampered_cached_adjacency_is_rebuilt(tmp_path, monkeypatch, capfd):
    edges = torch.randint(0, 300, (2, 2_000), generator=torch.Generator().manual_seed(1))
    built = counting_builds(monkeypatch)
    clean = cached_adjacency(edges, 300, "sym", torch.float32, tmp_path)
    [path] = (tmp_path / FOLDER).iterdir()
    stored = torch.load(path, weights_only=True)
    stored["tensors"]["weight"][:10] *= 2   # edited weights, saved as a plain tensor dict again
    torch.save(stored, path)
    capfd.readouterr()
    again = cached_adjacency(edges, 300, "sym", torch.float32, tmp_path)
    err = capfd.readouterr().err
    assert f"the cache file {path} (the normalised adjacency) was changed after it was written (weight no longer match" in err and "rebuilding it from the edge list" in err
    assert built == ["sym", "sym"] and all(torch.equal(a, b) for a, b in zip(again, clean))
    assert torch.equal(torch.load(path, weights_only=True)["tensors"]["weight"], clean[2])   # the rebuilt file is the clean one
    path.write_bytes(b"not a torch file")
    assert all(torch.equal(a, b) for a, b in zip(cached_adjacency(edges, 300, "sym", torch.float32, tmp_path), clean))
    assert "could not be loaded safely" in capfd.readouterr().err and built == ["sym", "sym", "sym"]


def test_a_second_job_on_a_dataset_reads_its_adjacency(mirror, tmp_path, monkeypatch):
    built = counting_builds(monkeypatch)
    cfg = compose(["dataset=cora", "kernel=gcngp_x", f"data.root={tmp_path}", f"data.mirror={mirror}"])
    first = load_graph(cfg).adjacency("sym")
    second = load_graph(cfg).adjacency("sym")
    assert built == ["sym"]
    assert torch.equal(first.edge_index, second.edge_index) and torch.equal(first.edge_weight, second.edge_weight)
    data = load_graph(cfg).data
    direct = Adjacency.from_graph(data.edge_index, data.num_nodes, "sym", torch.float32, "cpu")
    assert torch.equal(second.edge_index, direct.edge_index) and torch.equal(second.edge_weight, direct.edge_weight)


def test_an_untrusted_cached_adjacency_is_neither_read_nor_written(tmp_path, monkeypatch, capfd):
    """A file another user could write (the store's ``untrusted`` names it): built in memory for the run."""
    edges = torch.randint(0, 300, (2, 2_000), generator=torch.Generator().manual_seed(2))
    built = counting_builds(monkeypatch)
    parts = cached_adjacency(edges, 300, "sym", torch.float32, tmp_path, untrusted=lambda path: f"{path.parent} is world-writable")
    err = capfd.readouterr().err
    assert "not trusting the processed cache" in err and "building the normalised adjacency from the edge list in memory" in err
    assert built == ["sym"] and not (tmp_path / FOLDER).exists()
    direct = Adjacency.from_graph(edges, 300, "sym", torch.float32, "cpu")
    assert torch.equal(Adjacency.from_parts(*parts, 300).edge_weight, direct.edge_weight)


def test_a_generated_graph_and_a_callers_own_keep_no_adjacency_file(tmp_path):
    """A csbm graph (its size a setting, made anew each run) and a graph the Python API is handed
    build their adjacency in memory: a session of many graphs leaves no file per graph."""
    from gnngp_cli.job.loading import adopt_graph

    cfg = compose(["dataset=csbm", "dataset.num_nodes=200", "kernel=gcngp_x", f"data.root={tmp_path}"])
    loaded = load_graph(cfg)
    loaded.adjacency("sym")
    adopt_graph(cfg, loaded.data.cpu()).adjacency("sym")
    assert not (tmp_path / FOLDER).exists() or not any((tmp_path / FOLDER).iterdir())
