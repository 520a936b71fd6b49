"""The graph product ``A Q``: the tiled product and the node orders against torch's product."""
from __future__ import annotations

import pytest
import torch

from gnngp_cli.graph import sparse_product as products
from gnngp_cli.graph.operators import Adjacency
from gnngp_cli.data.order_cache import cached_order
from gnngp_cli.graph.orders import check_order, node_order
from gnngp_cli.graph.sparse_product import TiledProduct, resolve_product
from gnngp_cli.errors import ConfigError

from helpers import run


def random_edges(n: int, e: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (2, e), generator=g)


def community_edges(n: int, e: int, communities: int = 7, seed: int = 0) -> torch.Tensor:
    """Most entries inside a node's community, node ids shuffled (locality for an order to find)."""
    g = torch.Generator().manual_seed(seed)
    label = torch.randint(0, communities, (n,), generator=g)
    row = torch.randint(0, n, (e,), generator=g)
    col = torch.randint(0, n, (e,), generator=g)
    for _ in range(20):   # move most columns into the row's community
        bad = (label[col] != label[row]) & (torch.rand(e, generator=g) < 0.9)
        col[bad] = torch.randint(0, n, (int(bad.sum()),), generator=g)
    return torch.stack([row, col])


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-13)])
@pytest.mark.parametrize("order", ["none", "rcm", "metis"])
@pytest.mark.parametrize("width", [1, 63, 64, 130])
def test_tiled_product_equals_torch(dtype, tol, order, width):
    n = 2 * products.TILE_BYTES // products.SLICE_BYTES + 1000   # three source tiles, the last one partial
    edges = random_edges(n, 80_000)
    reference = Adjacency.from_graph(edges, n, "sym", dtype, "cpu")
    q = torch.randn(n, width, dtype=dtype, generator=torch.Generator().manual_seed(1))
    tiled = Adjacency.from_graph(edges, n, "sym", dtype, "cpu", product="tiled", order=node_order(edges, n, order))
    want = reference.matmul(q)
    got = tiled.matmul(q)
    assert tiled._tiled is not None   # the tiled product ran
    assert torch.allclose(got, want, rtol=0, atol=tol * float(want.abs().max()))


@pytest.mark.parametrize("order", ["rcm", "metis"])
def test_torch_product_under_an_order(order):
    n = 3000
    edges = community_edges(n, 30_000)
    reference = Adjacency.from_graph(edges, n, "sym", torch.float64, "cpu")
    ordered = Adjacency.from_graph(edges, n, "sym", torch.float64, "cpu", product="torch", order=node_order(edges, n, order))
    q = torch.randn(n, 5, dtype=torch.float64)
    assert torch.allclose(ordered.matmul(q), reference.matmul(q), atol=1e-13)
    leaf = q.clone().requires_grad_()
    ordered.matmul(leaf).sum().backward()   # the differentiable path (fit=mll) under an order
    reference_leaf = q.clone().requires_grad_()
    reference.matmul(reference_leaf).sum().backward()
    assert torch.allclose(leaf.grad, reference_leaf.grad, atol=1e-13)


@pytest.mark.paper  # slow-ish: real graphs and CLI runs (the fast suite keeps the random-graph matrix)
def test_tiled_product_on_a_real_graph(mirror, tmp_path):
    from gnngp_cli.api import load_dataset

    data = load_dataset("pubmed", data={"mirror": str(mirror), "root": str(tmp_path)})
    n = int(data.num_nodes)
    reference = Adjacency.from_graph(data.edge_index, n, "sym", torch.float32, "cpu")
    tiled = Adjacency.from_graph(data.edge_index, n, "sym", torch.float32, "cpu", product="tiled",
                                 order=node_order(data.edge_index, n, "rcm"))
    want, got = reference.matmul(data.x), tiled.matmul(data.x)
    assert torch.allclose(got, want, rtol=0, atol=1e-5 * float(want.abs().max()))


def test_orders_are_permutations_and_undo():
    n = 2000
    edges = community_edges(n, 20_000)
    for method in ("rcm", "metis"):
        order = node_order(edges, n, method)
        assert check_order(order, n) is None
        pos = torch.empty_like(order)
        pos[order] = torch.arange(n)
        x = torch.randn(n, 3)
        assert torch.equal(x[order][pos], x)   # reorder, then un-reorder: the identity
    assert node_order(edges, n, "none") is None
    assert node_order(edges, n, "metis").tolist() == node_order(edges, n, "metis").tolist()   # seeded: reproducible


def mean_distance(edges: torch.Tensor, order=None) -> float:
    if order is None:
        return float((edges[0] - edges[1]).abs().float().mean())
    pos = torch.empty_like(order)
    pos[order] = torch.arange(order.numel())
    return float((pos[edges[0]] - pos[edges[1]]).abs().float().mean())


@pytest.mark.paper  # slow-ish: real graphs and CLI runs (the fast suite keeps the random-graph matrix)
def test_orders_find_locality():
    """Ids shuffled: RCM puts a grid's neighbours close (its bandwidth), METIS a graph's communities."""
    side = 60
    ids = torch.arange(side * side).view(side, side)
    grid = torch.cat([torch.stack([ids[:, :-1].reshape(-1), ids[:, 1:].reshape(-1)]),
                      torch.stack([ids[:-1].reshape(-1), ids[1:].reshape(-1)])], 1)
    grid = torch.randperm(side * side, generator=torch.Generator().manual_seed(0))[grid]
    assert mean_distance(grid, node_order(grid, side * side, "rcm")) < 0.1 * mean_distance(grid)
    n = 20_000
    edges = community_edges(n, 200_000, communities=5)
    assert mean_distance(edges, node_order(edges, n, "metis")) < 0.3 * mean_distance(edges)


def test_check_order_names_the_problem():
    assert "twice" in check_order(torch.tensor([0, 0, 2]), 3)
    assert "outside" in check_order(torch.tensor([0, 1, 3]), 3)
    assert "int64" in check_order(torch.tensor([0.0, 1.0, 2.0]), 3)


def test_layout_gives_up_the_csr_and_rebuilds_it():
    n = 5000
    edges = random_edges(n, 50_000)
    reference = Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu")
    adj = Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu", product="tiled", order=node_order(edges, n, "rcm"))
    adj.csr_parts()
    adj._coo = None   # as a large graph is held: CSR only
    adj.matmul(torch.randn(n, 4))
    assert adj._csr is None   # the layout replaced it
    assert torch.equal(adj.edge_index, reference.edge_index)
    assert torch.equal(adj.csr_parts()[2], reference.edge_weight)


def test_layout_counts_each_entry_once():
    n = products.TILE_BYTES // products.SLICE_BYTES + 5
    edges = random_edges(n, 30_000)
    adj = Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu")
    crow, col, weight = adj.csr_parts()
    layout = TiledProduct.build(crow, col, weight, n)
    assert layout.tiles == 2 and int(layout.entry[-1]) == weight.numel() == layout.local.size
    assert float(layout.weight.sum()) == pytest.approx(float(weight.sum()), rel=1e-6)


def test_layout_grows_with_the_entries_not_the_nodes():
    """A large, very sparse graph: the layout lists only the rows that have entries in a tile."""
    n = 40 * products.TILE_BYTES // products.SLICE_BYTES   # 40 tiles
    edges = random_edges(n, 2000)
    adj = Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu", product="tiled")
    crow, col, weight = adj.csr_parts()
    layout = TiledProduct.build(crow, col, weight, n)
    assert layout.rows.size <= weight.numel() and layout.nbytes < 30 * weight.numel()
    q = torch.randn(n, 3)
    assert torch.allclose(adj.matmul(q), Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu").matmul(q), atol=1e-6)


def test_a_root_of_the_wrong_height_is_refused():
    n = 3000
    adj = Adjacency.from_graph(random_edges(n, 10_000), n, "sym", torch.float32, "cpu", product="tiled")
    with pytest.raises(ValueError, match="needs Q of 3000 rows"):
        adj.matmul(torch.randn(2000, 4))


def test_resolve_product():
    assert resolve_product("auto", "cpu", torch.float32) == "auto"   # each product decides (size, density)
    assert resolve_product("auto", "meta", torch.float32) == "torch"
    assert resolve_product("auto", "cpu", torch.float16) == "torch"
    assert resolve_product("torch", "cpu", torch.float32) == "torch"
    with pytest.raises(ConfigError, match="compute.product=tiled runs on the CPU"):
        resolve_product("tiled", "meta", torch.float32)
    with pytest.raises(ConfigError, match="unknown compute.product"):
        resolve_product("fast", "cpu", torch.float32)


def test_auto_keeps_torch_below_the_threshold():
    """Small products (every paper dataset's) keep torch's product, bit for bit."""
    n = 3000
    edges = random_edges(n, 20_000)
    adj = Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu", product="auto")
    q = torch.randn(n, 100)
    assert torch.equal(adj.matmul(q), Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu").matmul(q))
    assert adj._tiled is None


def test_cached_order_is_kept_and_checked(tmp_path, capsys):
    n = 1500
    edges = community_edges(n, 10_000)
    first = cached_order(edges, n, "rcm", tmp_path)
    files = list(tmp_path.glob("order-rcm-*.pt"))
    assert len(files) == 1
    assert torch.equal(cached_order(edges, n, "rcm", tmp_path), first)   # read back
    torch.save({"order": torch.zeros(n, dtype=torch.long)}, files[0])   # not a permutation
    assert torch.equal(cached_order(edges, n, "rcm", tmp_path), first)
    assert "names some node twice; computing the order again" in capsys.readouterr().err
    torch.save({"order": torch.randperm(n), "edges": "x"}, files[0])   # a permutation, but not this graph's
    assert torch.equal(cached_order(edges, n, "rcm", tmp_path), first)
    assert "was not computed for this graph's edges" in capsys.readouterr().err
    files[0].write_bytes(b"not a torch file")
    assert torch.equal(cached_order(edges, n, "rcm", tmp_path), first)
    assert "could not be loaded safely" in capsys.readouterr().err
    other = community_edges(n, 10_000, seed=3)
    cached_order(other, n, "rcm", tmp_path)
    assert len(list(tmp_path.glob("order-rcm-*.pt"))) == 2   # another graph, its own file


def test_the_default_keeps_torchs_product_on_small_graphs(mirror, tmp_path, monkeypatch):
    """compute.product=auto on Cora: torch's product, bit for bit (the paper's numbers)."""
    built = []
    monkeypatch.setattr(TiledProduct, "build", classmethod(lambda cls, *a, **k: built.append(1)))
    code, err, row, _ = run(tmp_path, "dataset=cora", "kernel=gcngp_x", f"data.mirror={mirror}")
    assert code == 0, err
    assert not built


@pytest.mark.paper  # slow-ish: real graphs and CLI runs (the fast suite keeps the random-graph matrix)
def test_run_with_tiled_product_and_orders_matches(mirror, tmp_path):
    """gcngp_x on Cora: the tiled product and each order give the default run's row (landmarks,
    nugget, accuracies)."""
    common = ["dataset=cora", "kernel=gcngp_x", f"data.mirror={mirror}"]
    code, err, base, _ = run(tmp_path, *common, run_dir=tmp_path / "base")
    assert code == 0, err
    for i, extra in enumerate((["compute.product=tiled"], ["compute.product=tiled", "data.order=rcm"], ["data.order=metis"])):
        code, err, row, _ = run(tmp_path, *common, *extra, run_dir=tmp_path / f"run{i}")
        assert code == 0, err
        for key in ("landmarks", "nugget", "train", "val", "test"):
            assert row[key] == pytest.approx(base[key], rel=1e-6), (extra, key)


@pytest.mark.parametrize("setting, message", [
    ("data.order=bogus", "data.order"),
    ("compute.product=fast", "compute.product"),
    ("gnn=gcn data.order=metis", "data.order=metis applies to the GP kernels' graph product"),
    ("device=cuda compute.product=tiled", "compute.product=tiled runs on the CPU"),
])
def test_bad_settings_are_one_line_errors(tmp_path, setting, message):
    model = [] if setting.startswith("gnn=") else ["kernel=gcngp_x"]
    code, err, row, errors = run(tmp_path, "dataset=cora", *model, "data.download=false", *setting.split())
    assert code != 0 and (row is None or row["status"] == "error")
    assert len(errors) == 1 and message in errors[0], err



def test_auto_takes_the_tiled_product_where_it_pays(monkeypatch):
    """Past the size threshold, ``auto`` tiles a graph whose rows reach every source tile, and
    leaves a sparse one (scattered rows per tile) to torch's product."""
    from gnngp_cli import runtime

    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 1000)
    tile = products.TILE_BYTES // products.SLICE_BYTES
    n = 2 * tile   # two tiles
    q = torch.randn(n, 8)
    dense = Adjacency.from_graph(random_edges(n, 3 * n), n, "sym", torch.float32, "cpu", product="auto")   # 7 entries a row
    sparse = Adjacency.from_graph(random_edges(n, n // 4), n, "sym", torch.float32, "cpu", product="auto")
    dense.matmul(q), sparse.matmul(q)
    assert dense._tiled is not None and sparse._tiled is None
    assert products.tiles_pay(2 * n, n) and not products.tiles_pay(n, n)


def test_a_tiled_product_leaves_torchs_thread_count_as_it_was():
    """numba's OpenMP layer, started by the first tiled product, shares OpenMP's thread count with
    torch and sets it to the machine's cores: a job (or a Dask worker) on one thread stayed on one for
    the tiled product only and ran every torch operation after it on every core. A fresh process, so
    that the layer starts inside the product."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import torch
        torch.set_num_threads(1)
        from gnngp_cli.graph.operators import Adjacency
        n = 3000
        edges = torch.randint(0, n, (2, 20_000), generator=torch.Generator().manual_seed(0))
        adj = Adjacency.from_graph(edges, n, "sym", torch.float32, "cpu", product="tiled")
        adj.matmul(torch.randn(n, 8))
        import numba
        print(torch.get_num_threads(), numba.threading_layer(), numba.config.NUMBA_NUM_THREADS)
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")}
    env["NUMBA_NUM_THREADS"] = "2"   # a pool of two, whatever the machine, so that the count would change
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    threads, layer, pool = out.stdout.split()
    assert (threads, pool) == ("1", "2"), out.stdout
