"""Kernels: each block and architecture against independent computations."""
import math
from dataclasses import replace

import pytest
import torch

from gnngp_cli.data import Adjacency
from gnngp_cli.errors import KernelError
from gnngp_cli.kernels import RELU, BaseKernel, KernelContext
from gnngp_cli.kernels.architectures import composed, gcn, gcn2, gin, ggp, gprgp, h2gcn, rbf, sage
from gnngp_cli.kernels.planner import exact_kernel, pair_diagonal

ARCHS = {
    "gcn": lambda L: gcn(L, 1.1, 0.3),
    "gcn2": lambda L: gcn2(L, 1.0, alpha=0.2, theta=0.5),
    "gin": lambda L: gin(L, 1.2, 0.2),
    "sage": lambda L: sage(L, 0.5, 1.0),
    "ggp": lambda L: ggp(),
    "rbf": lambda L: rbf(),
    "composed": lambda L: composed(L, first=["input", "weight", "conv", "bias"], hidden=[{"add": [["relu", "conv", {"scale": 0.9}], ["input", {"scale": 0.1}]]}], sigma_w=1.0, sigma_b=0.1),
}


def random_graph(n=40, m=90, d=6, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(n, (2, m), generator=g)
    ei = torch.cat([ei, ei.flip(0)], 1)
    x = torch.randn(n, d, generator=g, dtype=dtype)
    x[5] = 0  # an isolated-looking, feature-less node
    return ei, x


def dense_reference(arch, L, x, a, base):
    """The kernel recursion written out with dense N x N matrices."""
    c0 = base.block(x, x)

    def g(k):
        d = torch.diagonal(k).clamp_min(0).sqrt()
        s = d[:, None] * d[None, :]
        cos = torch.where(s > 0, k / torch.where(s > 0, s, 1), 0).clamp(-1, 1)
        t = torch.arccos(cos)
        return (torch.sin(t) + (math.pi - t) * cos) * s / (2 * math.pi)

    if arch == "gcn":
        k = 1.1 ** 2 * a @ c0 @ a.T + 0.3 ** 2
        for _ in range(L - 1):
            k = 1.1 ** 2 * a @ g(k) @ a.T + 0.3 ** 2
    elif arch == "gcn2":
        k = a @ g(c0) @ a.T
        for l in range(1, L):
            beta = math.log(0.5 / l + 1)
            k = ((1 - beta) ** 2 + beta ** 2) * (0.8 ** 2 * a @ g(k) @ a.T + 0.2 ** 2 * c0)
    elif arch == "gin":
        k = 1.2 ** 2 * a @ c0 @ a.T + 0.2 ** 2
        for _ in range(L - 1):
            k = 1.2 ** 2 * g(k) + 0.2 ** 2
    elif arch == "sage":
        k = 0.25 * c0 + a @ c0 @ a.T
        for _ in range(L - 1):
            k = 0.25 * g(k) + a @ g(k) @ a.T
    elif arch == "ggp":
        k = a @ c0 @ a.T
    elif arch == "rbf":
        k = c0
    else:
        k = a @ c0 @ a.T + 0.01
        for _ in range(L - 1):
            k = 0.81 * a @ g(k) @ a.T + 0.01 * c0
    return k


def context(x, ei, kind="sym", base=BaseKernel(), landmarks=None):
    """A context whose pair evaluations always run (on graphs this small the automatic budget
    would choose the square evaluation)."""
    n = x.size(0)
    adj = Adjacency.from_graph(ei, n, kind, x.dtype, "cpu")
    return KernelContext(x, adj, base, landmarks, pair_budget=40_000_000), adj


def dense_adj(adj):
    a = torch.zeros(adj.num_nodes, adj.num_nodes, dtype=adj.edge_weight.dtype)
    a[adj.edge_index[0], adj.edge_index[1]] = adj.edge_weight
    return a


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("base", [BaseKernel(), BaseKernel("polynomial", c=1.0, d=2.0)])
def test_exact_kernel_equals_dense_recursion_on_any_node_subset(arch, base):
    ei, x = random_graph()
    ctx, adj = context(x, ei, base=base)
    ref = dense_reference(arch, 3, x, dense_adj(adj), base)
    nodes = torch.tensor([0, 3, 5, 7, 11, 20, 33])
    k = ARCHS[arch](3)(None, ctx, nodes)
    torch.testing.assert_close(k.dense(), ref[nodes][:, nodes])
    torch.testing.assert_close(pair_diagonal(ARCHS[arch](3), ctx), torch.diagonal(ref))


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("base", [BaseKernel(), BaseKernel("polynomial", c=1.0, d=2.0)])
@pytest.mark.parametrize("pair_budget,every_row", [(40_000_000, False), (10, False), (None, False), (40_000_000, True)])
def test_rectangular_blocks_equal_dense_recursion(arch, base, pair_budget, every_row):
    """K[rows, cols] from rectangular blocks (activation variances from the pair evaluation),
    and the one square evaluation used when the pair budget is too small or rows are every node."""
    ei, x = random_graph()
    ctx, adj = context(x, ei, base=base)
    ctx.pair_budget = pair_budget
    ref = dense_reference(arch, 3, x, dense_adj(adj), base)
    rows = torch.arange(x.size(0)) if every_row else torch.tensor([0, 3, 5, 7, 11, 20, 33, 39])
    cols = torch.tensor([3, 11, 39])
    k, diagonal = exact_kernel(ARCHS[arch](3), ctx, rows, cols)
    torch.testing.assert_close(k.dense(), ref[rows][:, cols])
    torch.testing.assert_close(k.restrict(torch.tensor([5, 11, 39]), torch.tensor([11, 39])).dense(), ref[[5, 11, 39]][:, [11, 39]])
    torch.testing.assert_close(diagonal, torch.diagonal(ref))


def test_square_fallback_is_announced_before_computing():
    ei, x = random_graph()
    ctx, _ = context(x, ei)
    ctx.pair_budget = 10
    seen = []
    exact_kernel(gcn(2, 1.0, 0.1), ctx, torch.arange(5), torch.arange(2), before_square=lambda nodes: seen.append(nodes.numel()))
    assert seen == [x.size(0)]


def test_a_network_that_reads_no_graph_is_one_rectangle_even_over_every_node():
    """Every node labelled (squirrel): a graph network's rows need their neighbours', so one square;
    an RBF kernel's rows need nothing else, so ``K[every node, training]`` directly, and the same."""
    from gnngp_cli.kernels.blocks import reads_graph

    ei, x = random_graph()
    ctx, adj = context(x, ei, base=BaseKernel("rbf", gamma=0.5))
    rows, cols = torch.arange(x.size(0)), torch.tensor([1, 2, 3])
    squares = []
    k, diagonal = exact_kernel(rbf(), ctx, rows, cols, before_square=lambda nodes: squares.append(1))
    ref = dense_reference("rbf", 1, x, dense_adj(adj), BaseKernel("rbf", gamma=0.5))
    assert squares == [] and k.matrix.shape == (x.size(0), 3)
    torch.testing.assert_close(k.dense(), ref[:, cols])
    torch.testing.assert_close(diagonal, torch.diagonal(ref))
    exact_kernel(gcn(2, 1.0, 0.1), ctx, rows, cols, before_square=lambda nodes: squares.append(1))
    assert squares == [1]
    assert not reads_graph(rbf()) and all(reads_graph(PLANNED[arch](2)) for arch in PLANNED if arch != "rbf")


PLANNED = {**ARCHS, "gprgp": lambda L: gprgp(L, 1.0, 0.1, (1.0, -1.0, 1.0)), "h2gcn": lambda L: h2gcn(2, 1.0, 0.1)}


@pytest.mark.parametrize("arch", list(PLANNED))
def test_the_plan_the_estimate_reads_agrees_with_the_evaluation(arch):
    """``pair_plan_fits`` (read by the memory estimate before computing) says the pair
    evaluation fits exactly when ``exact_kernel`` takes it. It once planned only the outer
    layers: GCNII on PubMed was estimated at 1 GB on rectangles and ran one 9 GB square."""
    from gnngp_cli.kernels.planner import pair_plan_fits

    ei, x = random_graph()
    ctx, _ = context(x, ei)
    for budget in (10, 100, 300, 1_000, 3_000, 10_000, 100_000):
        ctx.pair_budget = budget
        squares = []
        exact_kernel(PLANNED[arch](3), ctx, torch.tensor([0, 3, 5, 7]), torch.tensor([3, 7]), before_square=lambda nodes: squares.append(1))
        assert pair_plan_fits(PLANNED[arch](3), ctx) == (not squares), budget


def test_gamma_search_reuses_the_base_statistic_on_every_node(monkeypatch):
    """Each gamma of a search on a graph whose nodes are all labelled (one rectangle over every
    node and the training columns) reads the cached pairwise statistic instead of recomputing it."""
    ei, x = random_graph()
    ctx, adj = context(x, ei, base=BaseKernel("rbf", gamma=0.1))
    rows, cols, gammas = torch.arange(x.size(0)), torch.tensor([1, 2, 3]), (0.1, 0.5, 2.0)
    refs = [dense_reference("rbf", 1, x, dense_adj(adj), BaseKernel("rbf", gamma=g))[:, cols] for g in gammas]
    calls = []
    original = BaseKernel.statistic
    monkeypatch.setattr(BaseKernel, "statistic", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    for gamma, ref in zip(gammas, refs):
        ctx = ctx.with_base(BaseKernel("rbf", gamma=gamma))
        k, _ = exact_kernel(rbf(), ctx, rows, cols)
        torch.testing.assert_close(k.dense(), ref)
    assert len(calls) == 1


def test_rectangular_block_without_pair_variances_is_refused():
    ei, x = random_graph()
    ctx, _ = context(x, ei)
    with pytest.raises(KernelError, match="pair evaluation"):
        gcn(3, 1.0, 0.1)(None, ctx, torch.arange(10), torch.tensor([2, 4]))


@pytest.mark.parametrize("arch", list(ARCHS))
def test_low_rank_with_every_node_a_landmark_equals_exact(arch):
    ei, x = random_graph()
    n = x.size(0)
    ctx, adj = context(x, ei, landmarks=torch.arange(n))
    q = ARCHS[arch](3)(None, ctx, None)
    exact_ctx, _ = context(x, ei)
    k = ARCHS[arch](3)(None, exact_ctx, torch.arange(n)).dense()
    torch.testing.assert_close(q.root @ q.root.T, k, rtol=1e-6, atol=1e-8)


def test_relu_expectation_matches_monte_carlo():
    torch.manual_seed(0)
    k = torch.tensor([[2.0, 0.7, -0.5], [0.7, 1.0, 0.2], [-0.5, 0.2, 0.5]], dtype=torch.float64)
    z = torch.randn(400_000, 3, dtype=torch.float64) @ torch.linalg.cholesky(k).T
    mc = torch.relu(z).T @ torch.relu(z) / z.size(0)
    analytic = RELU.expectation(k, torch.diagonal(k), torch.diagonal(k))
    torch.testing.assert_close(analytic, mc, atol=5e-3, rtol=0)
    torch.testing.assert_close(torch.diagonal(analytic), torch.diagonal(k) / 2)


def test_zero_variance_node_gives_zero_row_not_nan():
    k = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    g = RELU.expectation(k, torch.diagonal(k), torch.diagonal(k))
    assert torch.isfinite(g).all() and g[1].abs().sum() == 0


@pytest.mark.parametrize("arch", ["gcn", "gcn2", "sage"])
def test_float32_and_float64_agree(arch):
    """The same kernel in both precisions, exact and low rank: float32 within its round-off."""
    ei, x = random_graph(dtype=torch.float64)
    out = {}
    for dtype in (torch.float32, torch.float64):
        exact, _ = context(x.to(dtype), ei)
        low, _ = context(x.to(dtype), ei, landmarks=torch.arange(0, 40, 2))
        k = ARCHS[arch](3)(None, exact, torch.arange(40)).dense()
        q = ARCHS[arch](3)(None, low, None).root
        assert k.dtype == q.dtype == dtype
        out[dtype] = (k.double(), (q @ q.T).double())
    for k32, k64 in zip(out[torch.float32], out[torch.float64]):
        assert torch.isfinite(k32).all()
        torch.testing.assert_close(k32, k64, rtol=1e-4, atol=1e-5 * float(k64.abs().max()))


def test_indefinite_kernel_raises_naming_the_layer():
    ei, x = random_graph()
    x = x * 3
    ctx, _ = context(x, ei, base=BaseKernel("sigmoid", gamma=2.0, c=-1.0), landmarks=torch.arange(0, 40, 2))
    with pytest.raises(KernelError, match="input layer: the kernel is not positive semi-definite"):
        gcn(2, 1.0, 0.0)(None, ctx, None)
    exact, _ = context(x, ei, base=BaseKernel("sigmoid", gamma=2.0, c=-1.0))
    with pytest.raises(KernelError, match="layer 1: the kernel"):
        gcn(2, 1.0, 0.0)(None, exact, torch.arange(40))


def test_overflow_raises_instead_of_nan():
    ei, x = random_graph(dtype=torch.float32)
    ctx, _ = context(x * 1e20, ei)
    with pytest.raises(KernelError, match="NaN or infinite"):
        gcn(2, 1.0, 0.0)(None, ctx, torch.arange(40))


def test_an_eigendecomposition_that_does_not_converge_is_retried_then_a_one_line_error(monkeypatch):
    """LAPACK failed on H2GCNGP-X's Gram matrix on minesweeper once its tiny entries were zeroed
    (not without them): the matrix as given is tried next, then float64; all failing is one line."""
    import numpy as np
    import pytest
    import torch

    from gnngp_cli.errors import KernelError
    from gnngp_cli.kernels import numerics

    eigh = numerics.lapack_eigh   # the LAPACK call every attempt makes
    calls = []

    def failing(times):
        def fake(m):
            calls.append(m.dtype)
            if len(calls) <= times:   # SciPy's LAPACK raises numpy's error, torch's its own: both are retried
                raise (np.linalg.LinAlgError if len(calls) == 1 else torch.linalg.LinAlgError)("eigh: the algorithm failed to converge")
            return eigh(m)
        return fake

    a = torch.tensor([[2.0, 1e-30], [1e-30, 1.0]])
    monkeypatch.setattr(numerics, "lapack_eigh", failing(2))
    w, v = numerics.symmetric_eigh(a)
    assert calls == [torch.float32, torch.float32, torch.float64] and w.dtype == torch.float32
    torch.testing.assert_close(w, torch.tensor([1.0, 2.0]))
    calls.clear()
    monkeypatch.setattr(numerics, "lapack_eigh", failing(3))
    with pytest.raises(KernelError) as caught:
        numerics.symmetric_eigh(a)
    assert "2 x 2 kernel block did not converge" in str(caught.value) and "\n" not in str(caught.value)


def test_the_relu_root_by_row_blocks_equals_the_whole_one(monkeypatch):
    """Past ROW_BLOCK_ENTRIES (a Reddit-sized GCNGP-X) the ReLU's Nystrom root is built by row
    blocks into one output, so its temporaries are a block's; the root is the same."""
    import torch

    from gnngp_cli.kernels import torch_roots as roots

    g = torch.Generator().manual_seed(0)
    q = torch.randn(1000, 40, generator=g, dtype=torch.float64)
    landmarks = torch.sort(torch.randperm(1000, generator=g)[:70]).values
    whole = roots.TorchRoots().activation_root(q, landmarks)
    monkeypatch.setattr(roots.runtime, "ROW_BLOCK_ENTRIES", 70 * 128 + 5)   # blocks of 128 rows, the last one short
    by_rows = roots.TorchRoots().activation_root(q, landmarks)
    torch.testing.assert_close(by_rows, whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(by_rows[landmarks] @ by_rows[landmarks].T, RELU.expectation(q[landmarks] @ q[landmarks].T, (q[landmarks] ** 2).sum(1), (q[landmarks] ** 2).sum(1)))


def test_branch_count_tells_how_wide_a_low_rank_root_gets_at_an_addition():
    """The memory estimates count a network's roots this many times as wide: GCNII and
    GraphSAGE add two branches; GCN, GIN, GGP and RBF none; a low-rank root checks it."""
    from gnngp_cli.kernels.blocks import branch_count

    assert [branch_count(ARCHS[name](2)) for name in ("gcn", "gin", "ggp", "rbf")] == [1, 1, 1, 1]
    assert [branch_count(ARCHS[name](3)) for name in ("gcn2", "sage", "composed")] == [2, 2, 2]
    ei, x = random_graph(n=60, m=200, d=40)
    ctx = KernelContext(x, Adjacency.from_graph(ei, 60, "row", torch.float64, "cpu"), BaseKernel(), torch.arange(12))
    width = ARCHS["sage"](2)(None, ctx, None).root.size(1)
    assert 12 < width <= branch_count(ARCHS["sage"](2)) * 40       # two roots side by side, each at most max(m, d) wide


@pytest.mark.parametrize("name", ["relu", "erf"])
def test_each_activations_two_expectations_match_monte_carlo(name):
    """An activation is its function and two Gaussian expectations: ``E[phi(u) phi(v)]`` and
    ``E[phi'(u) phi'(v)]`` (the derivative by autograd on the samples), off and on the diagonal."""
    from gnngp_cli.kernels import ACTIVATIONS

    activation = ACTIVATIONS[name]
    cov = torch.tensor([[1.3, 0.6], [0.6, 0.8]], dtype=torch.float64)
    z = (torch.randn(1_000_000, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) @ torch.linalg.cholesky(cov).T)
    z.requires_grad_(True)
    phi = activation.function(z)
    (slope,) = torch.autograd.grad(phi.sum(), z)
    phi = phi.detach()
    for (i, j) in ((0, 1), (0, 0), (1, 1)):
        for entries, samples in ((activation.expectation_entries, phi), (activation.derivative_entries, slope)):
            product = samples[:, i] * samples[:, j]
            analytic = float(entries(cov[i, j], cov[i, i], cov[j, j]))
            assert abs(float(product.mean()) - analytic) < 5 * float(product.std()) / 1000, (name, i, j, entries.__name__)


def test_a_composed_kernel_with_erf_passes_verify_against_its_derived_network():
    """A generic activation end to end: ``erf`` between the layers of a composed kernel, its
    network drawn from the same blocks (torch.erf), and gnngp verify's check passes."""
    from gnngp_cli.api import compose
    from gnngp_cli.verify import run_check
    from gnngp_cli.verify.task import prepare_check

    cfg = compose(["kernel=composed", "kernel.hidden=[erf,weight,conv,bias]", "verify.seeds=64",
                   "verify.activation_samples=100000"], config_name="verify")   # 64 networks a width: at 16 a fixed seed's p-value is near the level
    prep = prepare_check(cfg)
    v = cfg.verify
    result = run_check(prep.check, prep.kernel, list(v.widths), v.seeds, cfg.seed, v.bootstrap, v.level, observed=prep.observed,
                       activation_samples=v.activation_samples)
    assert result.verdict.passed, result.verdict.reason


@pytest.mark.parametrize("overrides, message", [
    (["kernel.first=[erf,weight,conv]"], "kernel.first must begin with input (the features), e.g. kernel.first=[input,weight,conv,bias]; it begins with erf"),
    (["kernel.first=[weight,conv]"], "kernel.first must begin with input"),
    (["kernel.hidden=erf"], "kernel.hidden=erf is one block; kernel.hidden takes a list of blocks, e.g. kernel.hidden=[erf]"),
    (["kernel.hidden=[erff]"], "unknown kernel block 'erff'; use input, conv, weight, bias, an activation (relu, erf)"),
    # a newcomer's: an IndexError, an AttributeError deep in the graph's operators, "unknown kernel block 'c'" (a string's letters)
    (["kernel.first=[input,{add: []}]", "kernel.layers=1"], "add takes a list of branches, each a non-empty list of blocks"),
    (["kernel.first=[input,conv,input]", "kernel.layers=1"], "kernel.first: input is block 3 of 3; input (the features) starts a chain"),
    (["kernel.hidden=[input]"], "kernel.hidden begins with input"),
    (["kernel.first=[input,{add: [conv, relu]}]", "kernel.layers=1"], "add takes a list of branches, each a non-empty list of blocks"),
])
def test_a_malformed_composed_kernel_is_one_line(tmp_path, overrides, message):
    from helpers import in_process

    out = in_process("run", "kernel=composed", *overrides, f"hydra.run.dir={tmp_path}")
    assert out.returncode == 1 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("gnngp: error:")


def test_the_lapack_eigendecomposition_is_torchs_to_round_off():
    """:func:`lapack_eigh` (SciPy's LAPACK on the CPU) gives torch's eigenvalues and an orthonormal
    basis that rebuilds the matrix, in float32 and float64, the dtype kept."""
    import torch

    from gnngp_cli.kernels.numerics import lapack_eigh

    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):
        x = torch.randn(300, 200, generator=torch.Generator().manual_seed(0), dtype=dtype)
        a = x @ x.T / 200
        w, v = lapack_eigh(a)
        assert w.dtype == v.dtype == dtype
        torch.testing.assert_close(w, torch.linalg.eigh(a)[0], atol=tol, rtol=tol)
        torch.testing.assert_close(v.T @ v, torch.eye(300, dtype=dtype), atol=tol, rtol=0)
        torch.testing.assert_close((v * w) @ v.T, a, atol=tol, rtol=0)


def test_a_factored_relu_root_is_the_row_block_root(monkeypatch):
    """``TorchRoots(factored=True)`` keeps a row-block Nystrom step's root as ``(C[:, a], V s)``;
    multiplied out it is the root the plain backing gives, landmark rows included (``V sqrt(D)``,
    also where eigenvalues are smoothed: a rank-deficient input makes some fall below the floor),
    and the weight, the convolution and the bias that follow act on it as on that root."""
    from gnngp_cli.kernels import torch_roots as roots
    from gnngp_cli.kernels.value import FactoredRoot, held

    g = torch.Generator().manual_seed(3)
    q = torch.randn(1000, 6, generator=g, dtype=torch.float64)   # 6 columns under 70 landmarks: smoothed eigenvalues
    landmarks = torch.sort(torch.randperm(1000, generator=g)[:70]).values
    monkeypatch.setattr(roots.runtime, "ROW_BLOCK_ENTRIES", 70 * 128 + 5)
    plain = roots.TorchRoots().activation_root(q, landmarks)
    backing = roots.TorchRoots(factored=True)
    factored = backing.activation_root(q, landmarks)
    assert isinstance(factored, FactoredRoot) and factored.shape == plain.shape
    torch.testing.assert_close(held(factored), plain, rtol=1e-10, atol=1e-12)
    ei, _ = random_graph(n=1000, m=4000, d=3)
    adjacency = Adjacency.from_graph(ei, 1000, "sym", torch.float64, "cpu")
    out = backing.with_constant(backing.convolve(adjacency, factored * 1.7), 0.3)
    expect = roots.TorchRoots().with_constant(adjacency.matmul(plain * 1.7), 0.3)
    torch.testing.assert_close(held(out), expect, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out[torch.tensor([5, 2])] @ torch.eye(expect.size(1), dtype=torch.float64), expect[[5, 2]], rtol=1e-10, atol=1e-12)
    again = backing.activation_root(out, landmarks)   # a factored input is multiplied out a row block at a time
    torch.testing.assert_close(held(again), roots.TorchRoots().activation_root(expect, landmarks), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["gcn", "gcn2", "gprgp", "gcn3"])
def test_factored_gp_statistics_equal_the_plain_ones(monkeypatch, name):
    """What the GP reads of a factored root (its Gram matrix and right-hand side on the training
    rows, each class's Gram matrix and column sum, the sum of ``diag K``, the rows it predicts
    from) equals what it reads of the plain root, for networks whose last Nystrom step is followed
    by a convolution, an addition of branches or a polynomial filter, and a deeper one."""
    from gnngp_cli.gp.posterior import LowRankPosterior
    from gnngp_cli.gp.sufficient import low_rank_statistics
    from gnngp_cli.kernels import torch_roots as roots
    from gnngp_cli.kernels.value import FactoredRoot, held

    arch = {"gcn": ARCHS["gcn"](2), "gcn2": ARCHS["gcn2"](2), "gprgp": PLANNED["gprgp"](2), "gcn3": ARCHS["gcn"](3)}[name]
    ei, x = random_graph(n=400, m=1500, d=12)
    ctx = KernelContext(x, Adjacency.from_graph(ei, 400, "sym", torch.float64, "cpu"), BaseKernel(), torch.arange(0, 400, 8))
    monkeypatch.setattr(roots.runtime, "ROW_BLOCK_ENTRIES", 50 * 64)
    plain = arch(None, ctx, None).root
    factored = arch(None, replace(ctx, roots=roots.TorchRoots(factored=True)), None).root
    if name != "gcn2":   # GCNII adds two branches: their roots go side by side, multiplied out
        assert isinstance(factored, FactoredRoot)
    train = torch.arange(1, 400, 3)
    y = torch.nn.functional.one_hot(torch.arange(train.numel()) % 3, 3).double()
    a = low_rank_statistics(factored, train, y, 400, per_class=True)
    b = low_rank_statistics(plain, train, y, 400, per_class=True)
    for field in ("gram", "rhs", "class_grams", "column_sum"):
        torch.testing.assert_close(getattr(a, field), getattr(b, field), rtol=1e-9, atol=1e-10)
    assert a.diagonal_sum == pytest.approx(b.diagonal_sum, rel=1e-10)
    post = LowRankPosterior(b)
    pos = torch.arange(0, 400, 2)
    eps = torch.tensor(0.05, dtype=torch.float64)
    torch.testing.assert_close(post.mean(factored, pos, eps), post.mean(plain, pos, eps), rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(post.variance(factored, pos, eps, None), post.variance(plain, pos, eps, None), rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(held(factored), plain, rtol=1e-9, atol=1e-10)


def test_a_gamma_search_reads_the_features_once_for_the_block_and_once_for_the_diagonal(monkeypatch):
    """The base kernel's statistics (the block's and the diagonal pairs') are kept in the context and
    shared by every gamma of a search (``with_base``): the features are read once, and each gamma's
    kernel equals one computed afresh."""
    g = torch.Generator().manual_seed(0)
    n = 60
    x = torch.randn(n, 5, generator=g, dtype=torch.float64)
    ring = torch.arange(n)
    edges = torch.stack([ring, (ring + 1) % n])
    adjacency = Adjacency.from_graph(torch.cat([edges, edges.flip(0)], 1), n, "sym", torch.float64, "cpu")
    rows, cols = torch.arange(0, n, 2), torch.arange(0, n, 4)
    reads = {"block": 0, "pairs": 0}
    block, pairs = BaseKernel.statistic, BaseKernel.pair_statistic
    monkeypatch.setattr(BaseKernel, "statistic", lambda self, *a, **kw: reads.__setitem__("block", reads["block"] + 1) or block(self, *a, **kw))
    monkeypatch.setattr(BaseKernel, "pair_statistic", lambda self, *a: reads.__setitem__("pairs", reads["pairs"] + 1) or pairs(self, *a))
    ctx = KernelContext(x, adjacency, BaseKernel("rbf", 1.0))
    for gamma in (0.01, 0.1, 1.0):
        searched = ctx.with_base(BaseKernel("rbf", gamma))
        kernel, diagonal = exact_kernel(rbf(1), searched, rows, cols)
        fresh, fresh_diagonal = exact_kernel(rbf(1), KernelContext(x, adjacency, BaseKernel("rbf", gamma)), rows, cols)
        assert torch.equal(kernel.dense(), fresh.dense()) and torch.equal(diagonal, fresh_diagonal)
    assert reads == {"block": 1 + 3, "pairs": 1 + 3}   # the search's once each, the three fresh contexts' once each
