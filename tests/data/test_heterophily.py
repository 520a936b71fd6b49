"""The heterophily suite: its npz loaders and splits, ROC-AUC, the polynomial-filter and H2GCN
blocks against dense recursions in every evaluation path, and the GNN baselines."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import in_process

from gnngp_cli.data import Adjacency, DataStore
from gnngp_cli.data.heterophily import HETEROPHILY_NAMES, load_heterophily
from gnngp_cli.graph.operators import h2gcn_operators, two_hop_edges
from gnngp_cli.errors import ConfigError, DatasetError
from gnngp_cli.kernels import BaseKernel, KernelContext
from gnngp_cli.kernels.architectures import composed, gprgp, h2gcn
from gnngp_cli.kernels.blocks import Input, ReLU, Serial, Weight
from gnngp_cli.kernels.planner import exact_kernel, pair_diagonal
from gnngp_cli.kernels.filters import HopConv, Poly
from gnngp_cli.kernels.pairs import PatternTooLarge
from gnngp_cli.metrics import METRICS, MetricInput, resolve_metric



# ---------------------------------------------------------------- dense references

def random_graph(n=30, m=60, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(n, (2, m), generator=g)
    ei = torch.cat([ei, ei.flip(0)], 1)
    return ei, torch.randn(n, d, generator=g, dtype=torch.float64)


def dense(adj: Adjacency) -> torch.Tensor:
    a = torch.zeros(adj.num_nodes, adj.num_nodes, dtype=adj.edge_weight.dtype)
    a.index_put_((adj.edge_index[0], adj.edge_index[1]), adj.edge_weight, accumulate=True)
    return a


def relu_dense(k):
    d = torch.diagonal(k).clamp_min(0).sqrt()
    s = d[:, None] * d[None, :]
    cos = torch.where(s > 0, k / torch.where(s > 0, s, 1), 0).clamp(-1, 1)
    t = torch.arccos(cos)
    return (torch.sin(t) + (math.pi - t) * cos) * s / (2 * math.pi)


def poly_dense(coefficients, a):
    """``P = sum_k g_k A^k`` by the recursion ``A^(k+1) = A A^k``."""
    power, p = torch.eye(a.size(0), dtype=a.dtype), torch.zeros_like(a)
    for g in coefficients:
        p = p + g * power
        power = a @ power
    return p


def context(x, ei, landmarks=None, budget=40_000_000):
    adj = Adjacency.from_graph(ei, x.size(0), "sym", x.dtype, "cpu")
    return KernelContext(x, adj, BaseKernel(), landmarks, pair_budget=budget), adj


COEFFICIENTS = (0.5, -1.0, 0.25)


def gpr_network(coefficients=COEFFICIENTS):
    """MLP (with a ReLU, so the filter's input is a matrix, not a root) then the filter."""
    return Serial(Input(), Weight(1.3), ReLU(), Weight(0.9), Poly(coefficients))


def gpr_reference(x, a, coefficients=COEFFICIENTS):
    p = poly_dense(coefficients, a)
    return p @ (0.81 * relu_dense(1.69 * x @ x.T)) @ p.T


# ---------------------------------------------------------------- polynomial filter block

def test_poly_block_equals_dense_recursion_on_node_sets():
    ei, x = random_graph()
    ctx, adj = context(x, ei)
    ref = gpr_reference(x, dense(adj))
    nodes = torch.tensor([0, 4, 9, 17, 29])
    torch.testing.assert_close(gpr_network()(None, ctx, nodes).dense(), ref[nodes][:, nodes])
    # a root input (no activation): P X on the K-hop support of the rows
    p = poly_dense(COEFFICIENTS, dense(adj))
    k = Serial(Input(), Poly(COEFFICIENTS))(None, ctx, nodes)
    assert k.root is not None
    torch.testing.assert_close(k.dense(), (p @ x @ x.T @ p.T)[nodes][:, nodes])


@pytest.mark.parametrize("budget", [40_000_000, 10])
def test_poly_block_rectangles_and_pair_diagonal_equal_dense_recursion(budget):
    """Rectangle ``K[rows, cols]`` with the ReLU variances from the pair evaluation (or, with a
    budget of 10 pair terms, the square fallback), and ``diag K`` by pairs."""
    ei, x = random_graph()
    ctx, adj = context(x, ei, budget=budget)
    ref = gpr_reference(x, dense(adj))
    rows, cols = torch.tensor([1, 2, 8, 13, 21, 28]), torch.tensor([2, 13, 28])
    k, diagonal = exact_kernel(gpr_network(), ctx, rows, cols)
    torch.testing.assert_close(k.dense(), ref[rows][:, cols])
    torch.testing.assert_close(diagonal, torch.diagonal(ref))
    if budget > 10:
        torch.testing.assert_close(pair_diagonal(gpr_network(), ctx), torch.diagonal(ref))
    else:
        with pytest.raises(PatternTooLarge):
            pair_diagonal(gpr_network(), ctx)


def test_poly_block_low_rank_with_every_node_a_landmark_equals_exact():
    ei, x = random_graph()
    n = x.size(0)
    ctx, adj = context(x, ei, landmarks=torch.arange(n))
    q = gpr_network()(None, ctx, None).root
    torch.testing.assert_close(q @ q.T, gpr_reference(x, dense(adj)), rtol=1e-6, atol=1e-8)


def test_poly_block_applies_the_filter():
    ei, x = random_graph()
    ctx, adj = context(x, ei)
    torch.testing.assert_close(Poly(COEFFICIENTS).apply(x, None, None, adj, ctx), poly_dense(COEFFICIENTS, dense(adj)) @ x)


def test_high_pass_i_minus_a_removes_the_smooth_signal():
    """``A = (I+D)^-1/2 (I+A) (I+D)^-1/2`` has eigenvector ``(I+D)^1/2 1`` with eigenvalue 1, so
    the high-pass ``I - A`` maps that signal's kernel to zero, while ``A`` keeps it."""
    ei, _ = random_graph()
    n = 30
    degree = torch.bincount(ei[0], minlength=n).double() + 1   # row sums of I + A (repeated edges add up)
    smooth = degree.sqrt()[:, None]
    ctx, adj = context(smooth, ei)
    a = dense(adj)
    torch.testing.assert_close(a @ smooth, smooth)
    nodes = torch.arange(n)
    high = Serial(Input(), Poly([1, -1]))(None, ctx, nodes).dense()
    torch.testing.assert_close(high, torch.zeros(n, n, dtype=torch.float64), atol=1e-10, rtol=0)
    low = Serial(Input(), Poly([0, 1]))(None, ctx, nodes).dense()
    torch.testing.assert_close(low, smooth @ smooth.T)
    # and on any features it is (I - A) K (I - A)^T, also written as a composed block
    _, x = random_graph()
    ctx, adj = context(x, ei)
    i_minus_a = torch.eye(n, dtype=torch.float64) - dense(adj)
    net = composed(1, first=["input", {"poly": [1, -1]}], hidden=None, sigma_w=1.0, sigma_b=0.0)
    torch.testing.assert_close(net(None, ctx, nodes).dense(), i_minus_a @ x @ x.T @ i_minus_a.T)


def test_gprgp_architecture_is_mlp_kernel_then_filter():
    ei, x = random_graph()
    ctx, adj = context(x, ei)
    a = dense(adj)
    k1 = 1.2 ** 2 * x @ x.T + 0.1 ** 2
    k2 = 1.2 ** 2 * relu_dense(k1) + 0.1 ** 2
    p = poly_dense([1, -1, 0.5], a)
    nodes = torch.arange(30)
    torch.testing.assert_close(gprgp(2, 1.2, 0.1, coefficients=[1, -1, 0.5])(None, ctx, nodes).dense(), p @ k2 @ p.T)


@pytest.mark.parametrize("bad", [[], "x", [float("nan")], [0, 0]])
def test_bad_filter_coefficients_are_config_errors(bad):
    with pytest.raises(ConfigError, match="filter coefficient|coefficients must|is zero"):
        composed(1, first=["input", {"poly": bad}], hidden=None, sigma_w=1.0, sigma_b=0.0)


# ---------------------------------------------------------------- H2GCN

HAND_EDGES = torch.tensor([[0, 1], [1, 2], [2, 3], [0, 2], [3, 4], [4, 4]]).T   # a triangle 0-1-2, a tail 2-3-4, a self-loop at 4


def test_h2gcn_two_hop_set_on_a_hand_made_graph():
    """2-hop: reachable in two steps, not in one, not the node itself (self-loops ignored)."""
    two = two_hop_edges(HAND_EDGES, 5)
    sets = {v: sorted(two[1][two[0] == v].tolist()) for v in range(5)}
    assert sets == {0: [3], 1: [3], 2: [4], 3: [0, 1], 4: [2]}
    a1, a2 = h2gcn_operators(HAND_EDGES, 5, torch.float64)
    d1, d2 = dense(a1), dense(a2)
    assert torch.diagonal(d1).abs().sum() == 0 and torch.diagonal(d2).abs().sum() == 0
    # D^-1/2 M D^-1/2 with each set's own degrees: |N1| = 2,2,3,2,1 and |N2| = 1,1,1,2,1
    assert d1[2, 3] == pytest.approx(1 / math.sqrt(3 * 2)) and d1[3, 4] == pytest.approx(1 / math.sqrt(2 * 1))
    assert d2[0, 3] == pytest.approx(1 / math.sqrt(1 * 2)) and d2[2, 4] == pytest.approx(1.0)


def h2gcn_reference(x, a1, a2, layers=2, sigma_w=1.1, sigma_b=0.2):
    k0 = relu_dense(sigma_w ** 2 * x @ x.T + sigma_b ** 2)
    total, k = k0.clone(), k0
    for _ in range(layers):
        k = a1 @ k @ a1.T + a2 @ k @ a2.T
        total = total + k
    return sigma_w ** 2 * total


@pytest.mark.parametrize("budget", [40_000_000, 10])
def test_h2gcngp_equals_dense_recursion_in_every_path(budget):
    ei, x = random_graph()
    n = x.size(0)
    ctx, adj = context(x, ei, budget=budget)
    a1, a2 = (dense(op) for op in h2gcn_operators(ei, n, torch.float64))
    ref = h2gcn_reference(x, a1, a2)
    net = h2gcn(2, 1.1, 0.2)
    nodes = torch.tensor([0, 5, 6, 19, 25])
    torch.testing.assert_close(net(None, ctx, nodes).dense(), ref[nodes][:, nodes])
    rows, cols = torch.tensor([3, 7, 12, 22, 29]), torch.tensor([7, 22])
    k, diagonal = exact_kernel(net, ctx, rows, cols)
    torch.testing.assert_close(k.dense(), ref[rows][:, cols])
    torch.testing.assert_close(diagonal, torch.diagonal(ref))
    low_ctx, _ = context(x, ei, landmarks=torch.arange(n))
    q = net(None, low_ctx, None).root
    torch.testing.assert_close(q @ q.T, ref, rtol=1e-6, atol=1e-8)


def test_hop_conv_rejects_other_hops():
    with pytest.raises(ConfigError):
        HopConv(3)


# ---------------------------------------------------------------- ROC-AUC

def roc_auc_curve(scores: torch.Tensor, positive: torch.Tensor) -> list[float]:
    """The registry's roc_auc of each column of ``scores`` (two-class outputs ``[0, score]``)."""
    scores = scores.reshape(scores.size(0), -1)
    mean = torch.stack([torch.zeros_like(scores), scores], dim=2)
    return METRICS["roc_auc"].value(MetricInput(mean, positive.long())).tolist()


@pytest.mark.parametrize("scores, labels, expected", [
    ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], 0.75),          # scikit-learn's documented example
    ([1.0, 1.0, 1.0, 1.0], [0, 1, 0, 1], 0.5),             # all tied
    ([0.5, 0.5, 0.2, 0.9], [1, 0, 0, 1], 0.875),           # one tied pair counts 1/2: (1/2 + 1 + 1 + 1) / 4
    ([3.0, 2.0, 1.0], [0, 1, 1], 0.0),                     # perfectly wrong
    # positives 0.2, 0.7, 0.7 against negatives 0.2, 0.7: (1/2 + 0) + 2 (1 + 1/2) over 6 pairs
    ([0.2, 0.2, 0.7, 0.7, 0.7], [0, 1, 0, 1, 1], 7 / 12),
])
def test_roc_auc_hand_computed(scores, labels, expected):
    s, y = torch.tensor(scores, dtype=torch.float64), torch.tensor(labels)
    assert roc_auc_curve(s, y == 1)[0] == pytest.approx(expected)


def test_roc_auc_curve_is_each_column_and_the_pair_definition():
    g = torch.Generator().manual_seed(3)
    scores = torch.randint(0, 6, (200, 7), generator=g).double()   # many ties
    y = torch.rand(200, generator=g) < 0.3
    curve = roc_auc_curve(scores, y)
    for j in range(7):
        pos, neg = scores[y, j], scores[~y, j]
        by_pairs = ((pos[:, None] > neg[None, :]).double() + 0.5 * (pos[:, None] == neg[None, :]).double()).mean()
        assert curve[j] == pytest.approx(float(by_pairs))
        assert roc_auc_curve(scores[:, j], y)[0] == pytest.approx(curve[j])
    assert math.isnan(roc_auc_curve(scores[:, 0], torch.zeros(200, dtype=torch.bool))[0])


def test_roc_auc_is_not_moved_by_scores_beyond_a_sigmoids_range():
    """Scores far outside [0, 1] keep their order (torchmetrics, the tests' reference, reads them as
    logits, and its sigmoid ties every score above ~37 in float64; gnngp's ranks never do)."""
    scores, y = torch.tensor([0.5, 100.0, 101.0, -3.0], dtype=torch.float64), torch.tensor([0, 1, 0, 1])
    assert roc_auc_curve(scores, y == 1)[0] == pytest.approx(0.25)


def test_roc_auc_agrees_with_scikit_learn_when_installed():
    metrics = pytest.importorskip("sklearn.metrics")
    g = torch.Generator().manual_seed(5)
    scores = torch.round(torch.randn(300, generator=g, dtype=torch.float64) * 4) / 4
    y = torch.rand(300, generator=g) < 0.4
    assert roc_auc_curve(scores, y)[0] == pytest.approx(metrics.roc_auc_score(y.numpy(), scores.numpy()))


def test_metric_defaults_and_overrides():
    assert resolve_metric(None, "classification", 2, "d") == "roc_auc"
    assert resolve_metric(None, "classification", 5, "d") == "accuracy"
    assert resolve_metric(None, "regression", 0, "d") == "r2"
    assert resolve_metric("accuracy", "classification", 2, "d") == "accuracy"
    with pytest.raises(ConfigError, match="roc_auc needs a two-class task but d is a 5-class task"):
        resolve_metric("roc_auc", "classification", 5, "d")
    with pytest.raises(ConfigError):
        resolve_metric("r2", "classification", 2, "d")


# ---------------------------------------------------------------- loaders and splits

def write_suite_file(folder: Path, name: str, n=40, d=6, classes=3, splits=10, seed=0) -> dict:
    """A small file in the suite's real npz layout (one direction per edge, 10 x N masks)."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, size=(80, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    masks = {key: np.zeros((splits, n), dtype=bool) for key in ("train_masks", "val_masks", "test_masks")}
    for s in range(splits):
        perm = rng.permutation(n)
        masks["train_masks"][s, perm[: n // 2]] = True
        masks["val_masks"][s, perm[n // 2: 3 * n // 4]] = True
        masks["test_masks"][s, perm[3 * n // 4:]] = True
    arrays = dict(node_features=rng.normal(size=(n, d)).astype(np.float32), node_labels=rng.integers(0, classes, n).astype(np.int64),
                  edges=edges.astype(np.int64), **masks)
    arrays["node_labels"][:classes] = np.arange(classes)   # every class present
    (folder / name / "raw").mkdir(parents=True, exist_ok=True)
    np.savez(folder / name / "raw" / f"{name}.npz", **arrays)
    return arrays


@pytest.mark.parametrize("name", ["roman_empire", "amazon_ratings", "questions", "squirrel_filtered"])
def test_absent_suite_datasets_load_from_files_in_their_format(tmp_path, name):
    arrays = write_suite_file(tmp_path / "mirror", name, classes=2 if name == "questions" else 5)
    store = DataStore(tmp_path / "cache", tmp_path / "mirror", download=False)
    for split in (0, 7):
        data = load_heterophily(name, store, split)
        for key in ("train", "val", "test"):
            assert torch.equal(data[f"{key}_mask"], torch.from_numpy(arrays[f"{key}_masks"][split]))
    assert data.num_splits == 10 and data.num_classes == (2 if name == "questions" else 5)
    assert torch.equal(data.x, torch.from_numpy(arrays["node_features"]))
    # undirected, as PyG's to_undirected: every file edge both ways, nothing else
    got = set(map(tuple, data.edge_index.T.tolist()))
    want = {(int(a), int(b)) for a, b in arrays["edges"]} | {(int(b), int(a)) for a, b in arrays["edges"]}
    assert got == want
    assert (tmp_path / "cache" / name / "raw" / f"{name}.npz").is_file()   # copied into the cache


def test_split_index_out_of_range_and_pickled_files_are_dataset_errors(tmp_path):
    write_suite_file(tmp_path / "mirror", "tolokers", classes=2)
    store = DataStore(tmp_path / "cache", tmp_path / "mirror", download=False, verify=False)
    with pytest.raises(DatasetError, match=r"dataset.split_index=10 is out of range; tolokers provides splits 0..9"):
        load_heterophily("tolokers", store, 10)
    arrays = write_suite_file(tmp_path / "bad", "minesweeper", classes=2)
    arrays["node_features"] = np.array([{"a": 1}] * 40, dtype=object)   # a pickled array is never loaded
    np.savez(tmp_path / "bad" / "minesweeper" / "raw" / "minesweeper.npz", **arrays)
    with pytest.raises(DatasetError, match="could not be read as a plain npz"):
        load_heterophily("minesweeper", DataStore(tmp_path / "c2", tmp_path / "bad", download=False, verify=False), 0)


def test_chameleon_filtered_splits_are_read_as_the_file_gives_them(mirror, cache):
    path = mirror / "chameleon_filtered" / "raw" / "chameleon_filtered.npz"
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    store = DataStore(cache, mirror, download=False)
    for split in (0, 9):
        data = load_heterophily("chameleon_filtered", store, split)
        for key in ("train", "val", "test"):
            assert torch.equal(data[f"{key}_mask"], torch.from_numpy(arrays[f"{key}_masks"][split]))
    assert data.num_nodes == 890 and data.num_classes == 5 and data.x.shape == (890, 2325)
    assert data.edge_index.size(1) == 2 * 8854   # no duplicate nor reversed pair in the file


# ---------------------------------------------------------------- end to end

def test_binary_suite_dataset_runs_every_split_with_roc_auc(tmp_path):
    write_suite_file(tmp_path / "mirror", "minesweeper", n=60, classes=2)
    out = in_process("run", "dataset=minesweeper", "kernel=gprgp", "kernel.coefficients=[[1],[1,-1]]", "splits=all",
                f"data.mirror={tmp_path / 'mirror'}", f"data.root={tmp_path / 'cache'}", "data.verify=false", f"hydra.run.dir={tmp_path / 'out'}")
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(tmp_path / "out" / "results.csv")
    assert rows["split_index"].tolist() == list(range(10)) and set(rows["metric"]) == {"roc_auc"}
    assert rows["split"].tolist() == [f"platonov {k}" for k in range(10)]
    assert "GPRGP on minesweeper over 10 splits: test roc_auc" in out.stdout + out.stderr
    assert all('"coefficients"' in e for e in rows["extra"])


@pytest.mark.paper  # slow: runs in CI with -m paper
def test_two_class_custom_dataset_defaults_to_roc_auc_and_can_be_overridden(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "features.npy", rng.normal(size=(50, 4)).astype(np.float32))
    np.save(tmp_path / "labels.npy", (np.arange(50) % 2).astype(np.int64))
    (tmp_path / "edges.csv").write_text("\n".join(f"{i},{(i + 1) % 50}" for i in range(50)))
    for extra, metric in (([], "roc_auc"), (["dataset.metric=accuracy"], "accuracy")):
        run_dir = tmp_path / f"out-{metric}"
        out = in_process("run", "dataset=custom", f"dataset.path={tmp_path}", "kernel=h2gcngp", *extra, f"hydra.run.dir={run_dir}")
        assert out.returncode == 0, out.stderr
        assert pd.read_csv(run_dir / "results.csv").loc[0, "metric"] == metric


@pytest.mark.parametrize("args, message", [
    (["dataset=tolokers", "dataset.split_index=12"], "gnngp: error: dataset.split_index=12 is out of range; tolokers provides splits 0..9"),
    (["dataset=chameleon_filtered", "dataset.metric=roc_auc"], "gnngp: error: dataset.metric=roc_auc needs a two-class task but chameleon_filtered is a 5-class task"),
    (["dataset=tolokers", "kernel=gprgp", "kernel.coefficients=[]"], "gnngp: error: kernel.coefficients: the filter coefficient list [] is empty"),
    (["dataset=tolokers", "kernel=composed", "kernel.first=[input,{poly:[]}]"], "gnngp: error: kernel block {poly: ...}: the filter coefficient list [] is empty"),
    (["dataset=csbm", "splits=all"], "gnngp: error: splits=all needs a dataset with numbered fixed splits"),
    (["dataset=chameleon_filtered", "splits=all", "dataset.split_index=3"],   # an adversary's: all 10 ran, the rows saying split_index=3
     "gnngp: error: splits=all runs every split of chameleon_filtered, and dataset.split_index=3 names one"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
    mirror = tmp_path / "mirror"
    write_suite_file(mirror, "tolokers", classes=2)
    write_suite_file(mirror, "chameleon_filtered", classes=5)
    out = in_process("run", *args, f"data.mirror={mirror}", f"data.root={tmp_path / 'cache'}", "data.download=false", "data.verify=false",
                     f"hydra.run.dir={tmp_path / 'out'}")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert len(errors) == 1 and errors[0].startswith(message), out.stderr


# ---------------------------------------------------------------- GNN baselines

def test_gprgnn_forward_is_the_filtered_mlp():
    from gnngp_cli.gnn import Graph
    from gnngp_cli.gnn import GPRGNN

    ei, x = random_graph()
    x = x.float()
    torch.manual_seed(0)
    from types import SimpleNamespace

    model = GPRGNN(SimpleNamespace(hidden=8, layers=2, dropout=0.5, alpha=0.2, hops=3), 5, 3).eval()
    expected_gamma = torch.tensor([0.2, 0.2 * 0.8, 0.2 * 0.64, 0.8 ** 3])
    torch.testing.assert_close(model.gamma.data, expected_gamma)
    graph = Graph.build(ei, 30, True)
    a = dense(Adjacency(graph.edge_index, graph.edge_weight, 30))
    h = model.lins[1](torch.relu(model.lins[0](x)))
    p = poly_dense(expected_gamma.tolist(), a)
    torch.testing.assert_close(model(x, graph.edge_index, graph.edge_weight), p @ h, rtol=1e-4, atol=1e-5)


def test_h2gcn_forward_concatenates_ego_and_hop_rounds():
    from gnngp_cli.gnn import H2GCN

    ei, x = random_graph()
    x = x.float()
    torch.manual_seed(0)
    from types import SimpleNamespace

    model = H2GCN(SimpleNamespace(hidden=4, layers=2, dropout=0.5), 5, 2).eval()
    a1, a2 = (dense(op) for op in h2gcn_operators(ei, 30))
    r0 = torch.relu(model.embed(x))
    r1 = torch.cat([a1 @ r0, a2 @ r0], 1)
    r2 = torch.cat([a1 @ r1, a2 @ r1], 1)
    torch.testing.assert_close(model(x, ei), model.classify(torch.cat([r0, r1, r2], 1)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("gnn", ["gprgnn", "h2gcn"])
def test_heterophily_gnns_train_and_report_the_dataset_metric(tmp_path, gnn):
    write_suite_file(tmp_path / "mirror", "questions", n=60, classes=2)
    out = in_process("run", "dataset=questions", f"gnn={gnn}", "gnn.epochs=5", "progress=false",
                f"data.mirror={tmp_path / 'mirror'}", f"data.root={tmp_path / 'cache'}", "data.verify=false", f"hydra.run.dir={tmp_path / 'out'}")
    assert out.returncode == 0, out.stderr
    row = pd.read_csv(tmp_path / "out" / "results.csv").iloc[0]
    assert row["metric"] == "roc_auc" and 0 <= row["test"] <= 1 and row["method"] == {"gprgnn": "GPRGNN", "h2gcn": "H2GCN"}[gnn]


def test_every_suite_dataset_is_a_registered_config_option():
    from gnngp_cli.api import compose
    from gnngp_cli.data import DATASETS

    assert all(name in DATASETS and compose([f"dataset={name}"]).dataset.name == name for name in HETEROPHILY_NAMES)




# ---------------------------------------------------------------- GPRGP under fit=mll

def test_gprgp_fit_mll_fits_every_filter_on_its_graph_and_keeps_the_most_likely():
    """Each candidate filter is fitted with its own propagation (not without a graph); the row's
    filter is the one of the highest marginal likelihood, and its fitted values are the ones a
    run with that filter alone fits and uses."""
    import json

    from gnngp_cli.api import run
    from gnngp_cli.kernels.architectures import GPR_FILTER_GRID

    common = ["kernel=gprgp", "fit=mll", "fit.steps=6", "dataset.num_nodes=300", "dtype=float64"]
    row = run(common)[0]
    chosen = json.loads(row["extra"])["coefficients"]
    alone = {g: run([*common, f"kernel.coefficients={list(g)}"])[0] for g in GPR_FILTER_GRID}
    best = max(alone.values(), key=lambda r: r["fit_mll"])
    assert chosen == json.loads(best["extra"])["coefficients"] and row["fit_mll"] == best["fit_mll"]
    for key in ("test", "nugget", "fitted_sigma_w", "fitted_nugget", "fitted_output_scale"):
        assert row[key] == best[key], key
    assert len({round(r["fit_mll"], 6) for r in alone.values()}) > 1               # the filters do differ
    pair = run([*common, "kernel.coefficients=[[1,-1],[0,1]]"])[0]                   # a list of filters under fit=mll
    assert json.loads(pair["extra"])["coefficients"] in ([1.0, -1.0], [0.0, 1.0]) and pair["status"] == "ok"


def test_the_sparse_operators_print_no_torch_warning():
    """torch warns once a process ("Sparse invariant checks are implicitly disabled ... SEGFAULT") at the first
    sparse tensor made without saying whether to check it; gnngp's own say so, and PyG's are made quiet. A fresh
    process: the first one decides (gnn=h2gcn printed it, through the exact 2-hop set; gnn=sgc through SGConv)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import torch
        from gnngp_cli.graph.operators import Adjacency, two_hop_edges
        edges = torch.randint(0, 50, (2, 200), generator=torch.Generator().manual_seed(0))
        two_hop_edges(edges, 50)
        Adjacency.from_graph(edges, 50, "sym", torch.float32, "cpu").matmul(torch.ones(50, 2))
        # then SGC's S^K X, through PyG's CSR product (a trial: every gnn=sgc and gnn=sign run printed it)
        from gnngp_cli.api import run
        run(["dataset=csbm", "dataset.num_nodes=300", "gnn=sgc", "gnn.epochs=5", "progress=false"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)   # the warnings a user sees
    assert out.returncode == 0 and "invariant" not in out.stderr and "UserWarning" not in out.stderr, out.stderr[-2000:]


def test_a_class_id_past_the_datasets_classes_or_complex_features_are_refused(tmp_path):
    """A trial: one label of 10^6 in roman_empire's file made the class count 10^6 + 1 (an
    allocation of 101 GB, named as "use the low-rank kernel"), and complex features were cast to
    real with numpy's ComplexWarning, exit 0."""
    arrays = write_suite_file(tmp_path / "mirror", "roman_empire", classes=5)
    arrays["node_labels"][7] = 10**6
    np.savez(tmp_path / "mirror" / "roman_empire" / "raw" / "roman_empire.npz", **arrays)
    with pytest.raises(DatasetError, match=r"roman_empire.npz holds the class id 1000000, and Roman-empire has 18 classes \(0..17\); the file is "
                                           r"not Roman-empire's: delete it and fetch it again"):
        load_heterophily("roman_empire", DataStore(tmp_path / "cache", tmp_path / "mirror", download=False, verify=False), 0)
    arrays = write_suite_file(tmp_path / "m2", "tolokers", classes=2)
    arrays["node_features"] = arrays["node_features"].astype(np.complex64) * 1j
    np.savez(tmp_path / "m2" / "tolokers" / "raw" / "tolokers.npz", **arrays)
    with pytest.raises(DatasetError, match=r"node_features must be a real N x d array, got shape \(40, 6\) \(complex64\)"):
        load_heterophily("tolokers", DataStore(tmp_path / "c2", tmp_path / "m2", download=False, verify=False), 0)


def test_a_split_that_cannot_run_is_named_in_a_splits_all_jobs_error(tmp_path):
    """An adversary's trial: a suite file whose split 2 has an empty validation mask stopped
    splits=all with 'the validation set is empty', naming no split (splits 0 and 1 kept)."""
    mirror = tmp_path / "mirror"
    arrays = write_suite_file(mirror, "roman_empire", classes=3)
    arrays["val_masks"][2] = False
    np.savez(mirror / "roman_empire" / "raw" / "roman_empire.npz", **arrays)
    out = in_process("run", "dataset=roman_empire", "kernel=gcngp", "splits=all", f"data.mirror={mirror}", f"data.root={tmp_path / 'cache'}",
                     "data.download=false", "data.verify=false", f"hydra.run.dir={tmp_path / 'out'}")
    errors = [line for line in out.stderr.splitlines() if line.startswith("gnngp: error:")]
    assert out.returncode == 1 and len(errors) == 1 and errors[0].startswith("gnngp: error: split 2 of 10: dataset 'roman_empire': the validation set is empty")
    rows = pd.read_csv(tmp_path / "out" / "results.csv")
    assert rows["status"].tolist() == ["ok", "ok", "error"]
