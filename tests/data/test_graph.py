"""Normalisation: one function shared by kernels and GNNs, sparse, NaN-free."""
import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import to_dense_adj

from gnngp_cli.data import Adjacency, normalized_adjacency


def dense(edge_index, weight, n):
    return to_dense_adj(edge_index, edge_attr=weight, max_num_nodes=n)[0]


def small_graph():
    # node 4 is isolated; edges are undirected
    edges = torch.tensor([[0, 1], [1, 2], [2, 0], [2, 3]]).T
    return torch.cat([edges, edges.flip(0)], dim=1), 5


def test_row_normalised_rows_sum_to_one():
    ei, n = small_graph()
    a = dense(*normalized_adjacency(ei, n, "row"), n)
    torch.testing.assert_close(a.sum(1), torch.ones(n))


def test_symmetric_matches_pyg_gcn_norm():
    ei, n = small_graph()
    a = dense(*normalized_adjacency(ei, n, "sym"), n)
    torch.testing.assert_close(a, a.T)
    ref_ei, ref_w = gcn_norm(ei, num_nodes=n, add_self_loops=True)
    torch.testing.assert_close(a, dense(ref_ei, ref_w, n))


def test_existing_self_loop_gets_unit_loop_on_top():
    ei = torch.tensor([[0, 0, 1], [0, 1, 0]])  # node 0 has a self-loop
    a = dense(*normalized_adjacency(ei, 2, "row"), 2)
    # row 0 of I + A: self weight 1 + 1 = 2, edge to 1 weight 1 -> (2/3, 1/3)
    torch.testing.assert_close(a[0], torch.tensor([2 / 3, 1 / 3]))


def test_isolated_node_keeps_unit_loop_without_nan():
    ei, n = small_graph()
    for kind in ("sym", "row"):
        a = dense(*normalized_adjacency(ei, n, kind), n)
        assert torch.isfinite(a).all()
        assert a[4, 4] == 1.0


def test_adjacency_blocks_and_products_agree_with_dense():
    ei, n = small_graph()
    adj = Adjacency.from_graph(ei, n, "sym", torch.float64, "cpu")
    a = dense(adj.edge_index, adj.edge_weight, n)
    x = torch.randn(n, 3, dtype=torch.float64)
    torch.testing.assert_close(adj.matmul(x), a @ x)
    rows = torch.tensor([0, 3])
    cols = adj.neighbours(rows)
    assert cols.tolist() == [0, 1, 2, 3]
    torch.testing.assert_close(adj.block(rows, cols).to_dense(), a[rows][:, cols])


def test_edge_helpers_equal_pyg_coalesce_and_to_undirected():
    """graph.py does without torch_geometric (its import costs more than torch's), and must give
    the same edges, in the same order, with the same summed weights."""
    from torch_geometric.utils import coalesce as pyg_coalesce
    from torch_geometric.utils import to_undirected

    from gnngp_cli.graph.operators import coalesce, make_undirected

    g = torch.Generator().manual_seed(0)
    n = 50
    ei = torch.randint(n, (2, 400), generator=g)  # duplicates and self-loops included
    w = torch.rand(400, generator=g)
    ours_ei, ours_w = coalesce(ei, w, n)
    ref_ei, ref_w = pyg_coalesce(ei, w, num_nodes=n, reduce="sum")
    assert torch.equal(ours_ei, ref_ei)
    torch.testing.assert_close(ours_w, ref_w)
    assert torch.equal(make_undirected(ei, n), to_undirected(ei, num_nodes=n))


def test_the_convolution_by_row_blocks_equals_the_one_product(monkeypatch):
    """Past ROW_BLOCK_ENTRIES, ``A Q`` goes by row blocks of A (the product allocates a
    temporary the size of its result: 3 GB on a Reddit-sized root); the values are the same."""
    import torch

    from gnngp_cli import runtime
    from gnngp_cli.graph.operators import Adjacency

    g = torch.Generator().manual_seed(2)
    edges = torch.randint(0, 300, (2, 2000), generator=g)
    adjacency = Adjacency.from_graph(edges, 300, "sym", torch.float64, "cpu")
    q = torch.randn(300, 9, generator=g, dtype=torch.float64)
    whole = adjacency.matmul(q)
    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 9 * 37)   # blocks of 37 rows, the last one short
    assert torch.equal(adjacency.matmul(q), whole)
    dense = torch.zeros(300, 300, dtype=torch.float64).index_put_(tuple(adjacency.edge_index), adjacency.edge_weight, accumulate=True)
    torch.testing.assert_close(whole, dense @ q)


def test_a_large_adjacency_holds_only_its_csr_form_and_rebuilds_its_edge_list(monkeypatch):
    """Past ROW_BLOCK_ENTRIES entries the COO rows are not held (0.9 GB on a Reddit-sized
    graph); the edge list, the product and the blocks are the same as with them."""
    import torch

    from gnngp_cli import runtime
    from gnngp_cli.graph.operators import Adjacency

    g = torch.Generator().manual_seed(3)
    edges = torch.randint(0, 200, (2, 900), generator=g)
    small = Adjacency.from_graph(edges, 200, "sym", torch.float64, "cpu")
    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 100)
    large = Adjacency.from_graph(edges, 200, "sym", torch.float64, "cpu")
    assert large._coo is None and small._coo is not None
    assert torch.equal(large.edge_index, small.edge_index) and torch.equal(large.edge_weight, small.edge_weight)
    q = torch.randn(200, 3, generator=g, dtype=torch.float64)
    assert torch.equal(large.matmul(q), small.matmul(q))
    nodes = torch.tensor([3, 50, 120])
    assert torch.equal(large.neighbours(nodes), small.neighbours(nodes))
