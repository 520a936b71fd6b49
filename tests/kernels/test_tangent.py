"""Tangent kernels (kernel.limit=ntk): each architecture's NTK against an independent dense
recursion, the exact node-set, pair and low-rank evaluations against each other, the identities
the NTK must satisfy, and the refusals."""
import math

import pytest
import torch

from gnngp_cli.errors import ConfigError
from gnngp_cli.kernels import KERNELS, BaseKernel, Tangent
from gnngp_cli.kernels.architectures import composed, gat, gcn, gcn2, gin, gprgp, h2gcn, sage
from gnngp_cli.kernels.planner import exact_kernel
from gnngp_cli.kernels.relu import relu_derivative_expectation_entries
from test_kernels import context, dense_adj, random_graph

ARCHS = {
    "gcn": lambda L: gcn(L, 1.1, 0.3),
    "gcn2": lambda L: gcn2(L, 1.2, alpha=0.2, theta=0.5),
    "gin": lambda L: gin(L, 1.2, 0.2),
    "sage": lambda L: sage(L, 0.5, 1.0),
    "gprgp": lambda L: gprgp(L, 1.0, 0.2, (1.0, -0.5, 0.3)),
    "composed": lambda L: composed(L, first=["input", "weight", "conv", "bias"],
                                   hidden=[{"add": [["relu", "conv", {"scale": 0.9}], ["input", {"scale": 0.1}]]}, "weight"],
                                   sigma_w=1.1, sigma_b=0.1),
    "h2gcn": lambda L: h2gcn(L, 1.0, 0.2),
    "gat": lambda L: gat(L, 1.1, 0.2, 0.9, slope=0.2),
}
BASES = [BaseKernel(), BaseKernel("polynomial", c=1.0, d=2.0)]


def relu_moments(k):
    """``g(K)`` and ``g'(K)`` written out on a dense matrix (the cosine snapped to +-1 within 8
    ulps, the convention of :func:`relu_derivative_expectation_entries`)."""
    d = torch.diagonal(k).clamp_min(0).sqrt()
    s = d[:, None] * d[None, :]
    cos = torch.where(s > 0, k / torch.where(s > 0, s, 1), 0).clamp(-1, 1)
    cos = torch.where(cos.abs() < 1 - 8 * torch.finfo(k.dtype).eps, cos, cos.sign())
    t = torch.arccos(cos)
    g = (torch.sin(t) + (math.pi - t) * cos) * s / (2 * math.pi)
    return g, torch.where(s > 0, (math.pi - t) / (2 * math.pi), 0)


def dense_ntk(arch, L, x, a, base):
    """``(K, Theta)`` by the recursion written out with dense matrices, layer by layer (NTK
    parameterisation: a weight adds ``s_w^2 K_in``, a bias ``s_b^2``, the ReLU multiplies by ``g'``)."""
    c0 = base.block(x, x)
    n = c0.size(0)
    if arch == "gcn":
        k = 1.1 ** 2 * a @ c0 @ a.T + 0.3 ** 2
        t = k.clone()
        for _ in range(L - 1):
            g, dg = relu_moments(k)
            k, t = 1.1 ** 2 * a @ g @ a.T + 0.3 ** 2, a @ (1.1 ** 2 * (dg * t + g)) @ a.T + 0.3 ** 2
    elif arch == "gcn2":
        g0, _ = relu_moments(c0)
        k = 1.2 ** 2 * a @ g0 @ a.T
        t = k.clone()                 # the ReLU of the input has no tangent: the weight's term alone
        for l in range(1, L):
            beta = math.log(0.5 / l + 1)
            g, dg = relu_moments(k)
            r, tr = 0.8 ** 2 * a @ g @ a.T + 0.2 ** 2 * c0, 0.8 ** 2 * a @ (dg * t) @ a.T
            m2 = (1 - beta) ** 2 + beta ** 2 * 1.2 ** 2
            k, t = m2 * r, m2 * tr + beta ** 2 * 1.2 ** 2 * r
    elif arch == "gin":
        k = 1.2 ** 2 * a @ c0 @ a.T + 0.2 ** 2
        t = k.clone()
        for _ in range(L - 1):
            g, dg = relu_moments(k)
            k, t = 1.2 ** 2 * g + 0.2 ** 2, 1.2 ** 2 * (dg * t + g) + 0.2 ** 2
    elif arch == "sage":
        k = 0.25 * c0 + a @ c0 @ a.T
        t = k.clone()
        for _ in range(L - 1):
            g, dg = relu_moments(k)
            h = dg * t + g
            k, t = 0.25 * g + a @ g @ a.T, 0.25 * h + a @ h @ a.T
    elif arch == "gprgp":
        k = c0 + 0.04
        t = k.clone()
        for _ in range(L - 1):
            g, dg = relu_moments(k)
            k, t = g + 0.04, dg * t + g + 0.04
        p = torch.eye(n, dtype=a.dtype) - 0.5 * a + 0.3 * a @ a
        k, t = p @ k @ p.T, p @ t @ p.T
    elif arch == "composed":
        k = 1.1 ** 2 * a @ c0 @ a.T + 0.01
        t = k.clone()
        for _ in range(L - 1):
            g, dg = relu_moments(k)
            r, tr = 0.81 * a @ g @ a.T + 0.01 * c0, 0.81 * a @ (dg * t) @ a.T
            k, t = 1.1 ** 2 * r, 1.1 ** 2 * (tr + r)
    elif arch == "gat":
        def attend(kh, th):
            """Linear attention on features of kernel ``kh`` (tangent ``th``): the score a weight
            (``s_a^2``), its product with the message by the product rule; then the output
            projection (``s = 1``: its own term adds the attention's kernel) and the bias."""
            ku, tu = 0.81 * kh, 0.81 * (th + kh)
            katt = ku * (a @ kh @ a.T) + a @ (ku * kh) @ a.T
            tatt = tu * (a @ kh @ a.T) + ku * (a @ th @ a.T) + a @ (tu * kh + ku * th) @ a.T
            return katt + 0.04, tatt + katt + 0.04
        k, t = attend(1.21 * c0, 1.21 * c0)
        for _ in range(L - 1):
            g, dg = relu_moments(k)
            kp, tp = 0.64 * g + 0.2 * k, (0.64 * dg + 0.2) * t      # LeakyReLU(0.2)
            k, t = attend(1.21 * kp, 1.21 * (tp + kp))
    elif arch == "h2gcn":
        a1, a2 = hop_operators(a)
        k0, dg = relu_moments(c0 + 0.04)                 # the ego embedding relu(X W + b): s_w = 1, s_b = 0.2
        t0 = dg * (c0 + 0.04)                            # the weight's and the bias's own terms, through g'
        mk, mt = k0, t0 + k0                             # each path's readout weight adds its input's K
        k, t = mk.clone(), mt.clone()
        for _ in range(L):                               # the paths one hop longer: H(M) = A1 M A1^T + A2 M A2^T
            mk, mt = a1 @ mk @ a1.T + a2 @ mk @ a2.T, a1 @ mt @ a1.T + a2 @ mt @ a2.T
            k, t = k + mk, t + mt
    else:
        raise ValueError(arch)
    return k, t


def hop_operators(a):
    """H2GCN's ``A1`` (neighbours, no self-loops) and exact ``A2`` (two steps away, not one, not
    the node itself), each ``D^-1/2 M D^-1/2`` by its own degrees, from the pattern of the dense ``a``."""
    n = a.size(0)
    eye = torch.eye(n, dtype=torch.bool)
    one = ((a != 0) | (a.T != 0)) & ~eye
    two = ((one.double() @ one.double()) > 0) & ~one & ~eye

    def normalised(m):
        m = m.to(a.dtype)
        deg = m.sum(1)
        inv = torch.where(deg > 0, deg.clamp_min(1).rsqrt(), torch.zeros_like(deg))
        return m * inv[:, None] * inv[None, :]

    return normalised(one), normalised(two)


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("base", BASES, ids=lambda b: b.name)
def test_tangent_kernel_equals_an_independent_dense_recursion(arch, base):
    ei, x = random_graph()
    for layers in (1, 2, 3):
        ctx, adj = context(x, ei, base=base)
        k, t = dense_ntk(arch, layers, x, dense_adj(adj), base)
        theta = Tangent(ARCHS[arch](layers))(None, ctx, torch.arange(x.size(0))).dense()
        assert float((theta - t).abs().max()) <= 1e-10 * float(t.abs().max()), (arch, layers)
        nngp = ARCHS[arch](layers)(None, ctx, torch.arange(x.size(0))).dense()
        assert float((nngp - k).abs().max()) <= 1e-10 * float(k.abs().max()), (arch, layers)


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("base", BASES, ids=lambda b: b.name)
def test_node_sets_pairs_and_low_rank_on_every_landmark_give_the_same_tangent_kernel(arch, base):
    """The square evaluation over every node, the node-set evaluation with its pair diagonal,
    and the low-rank root with every node a landmark: equal to 1e-6 (float64)."""
    ei, x = random_graph()
    n = x.size(0)
    every = torch.arange(n)
    rows = torch.tensor([0, 3, 5, 7, 11, 20, 33])
    for layers in (1, 3):
        network = Tangent(ARCHS[arch](layers))
        full = network(None, context(x, ei, base=base)[0], every).dense()
        scale = float(full.abs().max())
        block, diagonal = exact_kernel(network, context(x, ei, base=base)[0], rows, rows[:4])
        root = network(None, context(x, ei, base=base, landmarks=every)[0], None).root
        assert float((block.dense() - full[rows][:, rows[:4]]).abs().max()) <= 1e-6 * scale
        assert float((diagonal - full.diagonal()).abs().max()) <= 1e-6 * scale
        assert float((root @ root.T - full).abs().max()) <= 1e-6 * scale


def test_an_erf_network_gives_the_same_kernels_on_node_sets_pairs_and_roots():
    """The generic activation block with erf (its own expectations, no ReLU code): the NNGP and
    tangent kernels over every node, on a node set with its pair diagonal, and as a low-rank root
    with every node a landmark agree to 1e-6 (float64), as the ReLU's do above."""
    ei, x = random_graph()
    every, rows = torch.arange(x.size(0)), torch.tensor([0, 3, 5, 7, 11, 20, 33])
    for layers in (1, 3):
        plain = composed(layers, first=["input", "weight", "conv", "bias"], hidden=["erf", "weight", "conv", "bias"], sigma_w=1.1, sigma_b=0.2)
        for network in (plain, Tangent(plain)):
            full = network(None, context(x, ei)[0], every).dense()
            scale = float(full.abs().max())
            block, diagonal = exact_kernel(network, context(x, ei)[0], rows, rows[:4])
            root = network(None, context(x, ei, landmarks=every)[0], None).root
            assert float((block.dense() - full[rows][:, rows[:4]]).abs().max()) <= 1e-6 * scale
            assert float((diagonal - full.diagonal()).abs().max()) <= 1e-6 * scale
            assert float((root @ root.T - full).abs().max()) <= 1e-6 * scale


def test_one_gat_layer_has_four_times_its_nngp_as_its_tangent_kernel():
    """One GAT layer without bias, ``(sum_j A_ij (a . H_i + a' . H_j) H_j) W_o`` with ``H = X W``,
    is of degree 4 in its parameters: the score's ``W``, the message's ``W``, ``a`` and the output
    projection ``W_o`` each contribute the layer's NNGP to its tangent kernel, so ``Theta = 4 K``
    (the first layer's input has none); without the projection, degree 3 and ``Theta = 3 K``."""
    ei, x = random_graph()
    ctx, _ = context(x, ei)
    every = torch.arange(x.size(0))
    for projection, degree in ((True, 4), (False, 3)):
        nngp = gat(1, 1.3, 0.0, 0.7, projection=projection)(None, ctx, every).dense()
        theta = Tangent(gat(1, 1.3, 0.0, 0.7, projection=projection))(None, ctx, every).dense()
        assert float((theta - degree * nngp).abs().max()) <= 1e-10 * float(nngp.abs().max())


@pytest.mark.parametrize("arch", ["gcn", "gin", "sage", "gprgp", "h2gcn"])
def test_one_layer_network_without_relu_has_the_nngp_as_its_tangent_kernel(arch):
    """A known identity: with no activation the NTK of one layer is its NNGP (every term is a
    weight's or a bias's own); H2GCN's one ReLU sits before its linear readout, so it is excluded
    from the identity and checked not to satisfy it."""
    ei, x = random_graph()
    ctx, _ = context(x, ei)
    every = torch.arange(x.size(0))
    nngp = ARCHS[arch](1)(None, ctx, every).dense()
    theta = Tangent(ARCHS[arch](1))(None, ctx, every).dense()
    if arch == "h2gcn":
        assert not torch.allclose(theta, nngp)
    else:
        torch.testing.assert_close(theta, nngp, rtol=1e-12, atol=1e-12)


def test_relu_derivative_expectation_is_the_probability_both_units_fire():
    """``g'`` against a Monte-Carlo estimate of ``P(z_x > 0, z_y > 0)``, and 1/2 on the diagonal."""
    g = torch.Generator().manual_seed(0)
    cov = torch.tensor([[2.0, 0.7], [0.7, 1.0]], dtype=torch.float64)
    z = torch.randn(400_000, 2, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(cov).T
    both = float(((z[:, 0] > 0) & (z[:, 1] > 0)).double().mean())
    value = float(relu_derivative_expectation_entries(cov[0, 1], cov[0, 0], cov[1, 1]))
    assert abs(value - both) < 4e-3
    assert float(relu_derivative_expectation_entries(cov[0, 0], cov[0, 0], cov[0, 0])) == 0.5


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_both_relu_expectations_in_one_pass_equal_each_alone_bit_for_bit(dtype):
    """The fused pass of the low-rank tangent step (one ``arccos``) changes no bit of ``g`` or
    ``g'``: equal cosines of +-1 (a node and its copy or its negation), a zero row, row chunks."""
    from gnngp_cli.kernels.activations import RELU
    from gnngp_cli.kernels.relu import relu_expectations

    g = torch.Generator().manual_seed(0)
    q = torch.randn(300, 12, generator=g, dtype=torch.float64).to(dtype)
    q[5], q[7], q[9] = 0, q[3], -q[3]
    q_a = q[::7]
    var, var_a = (q * q).sum(1), (q_a * q_a).sum(1)
    cross = q @ q_a.T
    both = relu_expectations(cross, var, var_a, chunk_rows=64)
    assert torch.equal(both[0], RELU.expectation(cross, var, var_a))
    assert torch.equal(both[1], RELU.derivative(cross, var, var_a))


def test_tangent_kernel_gradient_is_finite_for_fitting():
    """fit=mll differentiates the tangent kernel: the diagonal's cosine of 1 gives no NaN."""
    ei, x = random_graph()
    ctx, _ = context(x, ei)
    sigma = torch.tensor(1.1, dtype=torch.float64, requires_grad=True)
    theta = Tangent(gcn(3, sigma, 0.3))(None, ctx, torch.arange(x.size(0))).dense()
    theta.sum().backward()
    assert sigma.grad is not None and math.isfinite(float(sigma.grad)) and float(sigma.grad) > 0


@pytest.mark.parametrize("name", ["ggp", "rbf"])
def test_a_kernel_without_trained_parameters_is_refused_with_the_ntk(name):
    from gnngp_cli.api import compose

    cfg = compose([f"kernel={name}", "kernel.limit=ntk"])
    with pytest.raises(ConfigError, match=f"kernel={name} has no trained parameters"):
        KERNELS[name].architecture(cfg.kernel)


def _posteriors(seed: int = 0):
    """An exact and a low-rank posterior of the same kernel ``K = Q Q^T`` (40 nodes, 15 of them
    training nodes, two outputs), with the prediction features of each."""
    from gnngp_cli.gp.posterior import ExactPosterior, LowRankPosterior
    from gnngp_cli.gp.sufficient import TrainingStatistics, low_rank_statistics

    g = torch.Generator().manual_seed(seed)
    q = torch.randn(40, 25, generator=g, dtype=torch.float64)
    k = q @ q.T
    train = torch.arange(0, 40, 2)[:15]
    y = torch.randn(15, 2, generator=g, dtype=torch.float64)
    exact = ExactPosterior(TrainingStatistics("exact", k[train][:, train], y, float((y * y).sum()), 15, float(k.diagonal().sum()), 40))
    low = LowRankPosterior(low_rank_statistics(q, train, y, 40))
    return k, q, train, y, exact, low


def test_infinite_training_time_is_kernel_regression_and_equals_the_gp_mean_at_zero_nugget():
    from gnngp_cli.gp.posterior import TrainingTimes

    k, q, train, y, exact, low = _posteriors()
    every = torch.arange(40)
    regression = k[:, train] @ torch.linalg.solve(k[train][:, train], y)
    forever = TrainingTimes(torch.tensor(math.inf, dtype=torch.float64), 0.3)
    for posterior, features in ((exact, k[:, train]), (low, q)):   # low rank: Q[b]^T Q[b] is singular (rank 15 of 25)
        torch.testing.assert_close(posterior.mean(features, every, forever), regression, rtol=1e-8, atol=1e-8)
    tiny = torch.tensor(1e-10, dtype=torch.float64)   # the exact GP posterior as the nugget goes to 0
    torch.testing.assert_close(exact.mean(k[:, train], every, tiny), regression, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(regression[train], y)      # trained to convergence, the network fits its training nodes


def test_short_training_stays_near_the_prior_mean_and_moves_along_the_kernel_gradient():
    """``f_0 = 0`` (the prior mean), ``f_t ~ rate t Theta[*, b] y`` for small ``t`` (one gradient
    step), the training error falls with ``t``, and exact and low rank agree at every time."""
    from gnngp_cli.gp.posterior import TrainingTimes

    k, q, train, y, exact, low = _posteriors(1)
    every = torch.arange(40)
    rate = 0.5 / 15
    grid = TrainingTimes(torch.tensor([0.0, 1e-6, 0.01, 0.1, 1.0, math.inf], dtype=torch.float64), rate)
    means = exact.grid_means(k[:, train], every, grid.times)   # the nugget path: a grid tensor means nuggets
    assert means.shape == (40, 6, 2)
    at = [exact.mean(k[:, train], every, grid[i]) for i in range(6)]
    assert float(at[0].abs().max()) == 0.0
    torch.testing.assert_close(at[1], rate * 1e-6 * k[:, train] @ y, rtol=1e-5, atol=1e-12)
    errors = [float((a[train] - y).norm()) for a in at]
    assert all(b < a for a, b in zip(errors, errors[1:])) and errors[-1] < 1e-6
    for i in range(6):
        torch.testing.assert_close(low.mean(q, every, grid[i]), at[i], rtol=1e-8, atol=1e-10)
    grid_at = exact.grid_means(k[:, train], every, grid)       # a grid of times at once, as validation scores it
    torch.testing.assert_close(grid_at, torch.stack(at, 1))


def _output_variance_by_its_linear_map(k, theta, train, phi_matrix):
    """The variance over initialisation of the linearised network's output after training,
    written as the linear map it is: ``f_t = f_0 + Theta[:, b] A (y - f_0[b])`` with
    ``f_0 ~ N(0, K)``, so ``f_t - E f_t = L f_0`` with ``L = I - Theta[:, b] A E_b`` and the
    variance ``diag L K L^T`` (``E_b`` picks the training rows)."""
    n = k.size(0)
    pick = torch.zeros(train.numel(), n, dtype=k.dtype)
    pick[torch.arange(train.numel()), train] = 1.0
    lin = torch.eye(n, dtype=k.dtype) - theta[:, train] @ phi_matrix @ pick
    return torch.diagonal(lin @ k @ lin.T)


@pytest.mark.parametrize("time", [0.0, 0.5, 20.0, math.inf])
def test_the_output_variance_after_training_time_is_that_of_the_linearised_network(time):
    """``Posterior.time_variance`` (exact and low rank, the tangent kernel ``Theta = P P^T`` beside
    its NNGP ``K = Q Q^T``; and the NNGP alone, ``Theta = K``) against the variance of the linear
    map the trained network's output is of its initial one: at ``t = 0`` the prior ``diag K``, at
    ``t = inf`` on the NNGP the GP's noise-free posterior variance. The statistics add over row blocks."""
    from gnngp_cli.gp.posterior import ExactPosterior, LowRankPosterior, TrainingTimes
    from gnngp_cli.gp.sufficient import TrainingStatistics, low_rank_statistics

    g = torch.Generator().manual_seed(3)
    n, rate = 40, 0.3
    q, p = torch.randn(n, 30, generator=g, dtype=torch.float64), torch.randn(n, 35, generator=g, dtype=torch.float64)
    p[:, :30] += q                                                  # Theta and K correlated, as a network's are
    k, theta = q @ q.T, p @ p.T
    train = torch.arange(0, n, 2)[:18]
    y = torch.randn(18, 2, generator=g, dtype=torch.float64)
    every = torch.arange(n)
    times = TrainingTimes(torch.tensor(time, dtype=torch.float64), rate)

    def phi_of(m):   # Theta[b, b]^-1 (I - exp(-rate t Theta[b, b])), by its eigendecomposition
        w, v = torch.linalg.eigh(m)
        return v @ torch.diag(times.filter(w)) @ v.T

    expected = _output_variance_by_its_linear_map(k, theta, train, phi_of(theta[train][:, train]))
    exact = ExactPosterior(TrainingStatistics("exact", theta[train][:, train], y, float((y * y).sum()), 18, float(theta.diagonal().sum()), n,
                                              cross=k[train][:, train]))
    torch.testing.assert_close(exact.time_variance(theta[:, train], k[:, train], every, times, k.diagonal()), expected, rtol=1e-7, atol=1e-7)
    halves = [torch.arange(0, 20), torch.arange(20, n)]             # two row blocks' statistics, added
    parts = [low_rank_statistics(p[h], torch.nonzero(torch.isin(h, train)).view(-1), y[torch.isin(train, h)], n, nngp=q[h]) for h in halves]
    low = LowRankPosterior(parts[0] + parts[1])
    torch.testing.assert_close(low.time_variance(p, q, every, times, None), expected, rtol=1e-7, atol=1e-7)

    nngp_alone = _output_variance_by_its_linear_map(k, k, train, phi_of(k[train][:, train]))
    exact_k = ExactPosterior(TrainingStatistics("exact", k[train][:, train], y, float((y * y).sum()), 18, float(k.diagonal().sum()), n))
    torch.testing.assert_close(exact_k.time_variance(k[:, train], None, every, times, k.diagonal()), nngp_alone, rtol=1e-7, atol=1e-7)
    if time == 0:
        torch.testing.assert_close(expected, k.diagonal())
    if time == math.inf:   # the NNGP trained to convergence: the GP posterior variance without a nugget
        kbb = k[train][:, train]
        gp = k.diagonal() - torch.einsum("ib,bc,ic->i", k[:, train], torch.linalg.inv(kbb), k[:, train])
        torch.testing.assert_close(nngp_alone, gp, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(nngp_alone[train], torch.zeros(18, dtype=torch.float64), rtol=0, atol=1e-7)


def test_cli_runs_the_tangent_kernel_along_training_time_and_records_it(tmp_path, mirror):
    """Through ``gnngp run`` on Cora: the tangent kernel's label and ``limit`` column; with a list
    of times, the time of the best validation accuracy (sorted: the earliest on ties) in the
    ``time`` column, no nugget, the times in ``extra``, and the console line naming the time."""
    import json

    from helpers import run

    code, err, row, errors = run(tmp_path, "dataset=cora", "kernel=gcngp", "kernel.limit=ntk", f"data.mirror={mirror}",
                                 "inference.time=[inf,1000,10]")
    assert code == 0 and not errors, err
    assert row["method"] == "GCNGP-NTK" and row["limit"] == "ntk" and row["time"] in (10.0, 1000.0, math.inf)
    assert math.isnan(row["nugget"]) and math.isfinite(row["nll"]) and 0 < row["var_correct"] < row["var_wrong"]   # the trained network's spread
    assert json.loads(row["extra"])["times"] == [10.0, 1000.0, "inf"]
    from gnngp_cli.results.writing import summary_line

    assert f"training time {row['time']:.3g})" in summary_line(row.to_dict())
    code, err, row, errors = run(tmp_path, "dataset=cora", "kernel=gcngp_x", f"data.mirror={mirror}", run_dir=tmp_path / "nngp")
    assert code == 0 and row["method"] == "GCNGP-X" and row["limit"] == "nngp" and math.isnan(row.get("time", math.nan))


@pytest.mark.parametrize("value, message", [
    ("true", "inference.time=True is not a training time"),
    ("-1", "inference.time=-1 is not a training time"),
    ("abc", "inference.time='abc' is not a training time"),
    ("[1,[2]]", "inference.time=[1, [2]] is not a training time"),
    ("[]", "inference.time=[] holds no time"),
])
def test_bad_training_times_are_one_line(tmp_path, value, message):
    from helpers import run

    code, err, row, errors = run(tmp_path, "kernel=gcngp", f"inference.time={value}")
    assert code == 1 and len(errors) == 1 and errors[0].startswith(f"gnngp: error: {message}"), errors


@pytest.mark.parametrize("overrides, message", [
    (["kernel=gcngp", "inference.time=10", "fit=mll"], "inference.time replaces the nugget that fit=mll fits"),
    (["kernel=gcngp", "inference.time=10", "likelihood=dirichlet"], "inference.time is gradient flow on the MSE loss"),
    (["model=gcn", "inference.time=10"], "inference.time is a GP kernel's training time, or the steps a GNN records with gnn.regime=ntk"),
    (["model=gcn", "gnn.regime=ntk", "gnn.dropout=0", "inference.time=2.5"], "inference.time=2.5: a GNN records whole gradient steps"),
    (["model=gcn", "gnn.regime=ntk", "gnn.dropout=0", "gnn.epochs=10", "inference.time=[5,20]"], "from 1 to gnn.epochs=10"),
    (["model=gcn", "gnn.regime=ntk", "gnn.dropout=0.5"], "gnn.dropout=0.5 has no place there: set gnn.dropout=0"),
    (["model=gcn", "gnn.regime=ntk", "gnn.batch_norm=true"], "gnn.batch_norm=True has no place there: set gnn.batch_norm=false"),
    (["model=sage", "gnn.regime=ntk", "gnn.dropout=0"], "gnn=sage has no place there: set gnn=gcn"),
    (["model=gcn", "gnn.regime=sgd"], "gnn.regime='sgd' is not valid"),
    (["kernel=gatgp", "kernel.sigma_a=0"], "the kernel is zero on every node (mean variance 0)"),
    (["model=gcn", "gnn.regime=ntk", "gnn.dropout=0", "gnn.epochs=5", "gnn.hidden=32", "inference.learning_rate=100000"], "gnn.regime=ntk diverged at step"),
    (["kernel=gcngp", "inference.learning_rate=0.5"], "inference.learning_rate=0.5 is the rate of training along inference.time, which is not set"),
    (["kernel=gcngp", "inference.time=10", "nugget.num=11"], "inference.time replaces the nugget grid, so nugget.num=11 would be ignored"),
    (["kernel=ggp", "kernel.limit=ntk"], "kernel=ggp has no trained parameters"),
    (["kernel=gcngp", "kernel.limit=ntkk"], "kernel.limit='ntkk' is not valid"),
])
def test_refused_combinations_are_one_line(tmp_path, overrides, message):
    from helpers import run

    code, err, row, errors = run(tmp_path, *overrides)
    assert code == 1 and len(errors) == 1 and message in errors[0], errors


def test_nodegp_refuses_training_times(mirror, tmp_path):
    from gnngp_cli.api import NodeGP, load_dataset

    cora = load_dataset("cora", data={"mirror": str(mirror), "root": str(tmp_path)})
    with pytest.raises(ConfigError, match="inference.time is for gnngp run"):
        NodeGP(kernel="gcngp", **{"inference.time": 100}).fit(cora)


def test_low_rank_tangent_root_by_row_blocks_equals_the_whole(monkeypatch):
    """Past ``runtime.ROW_BLOCK_ENTRIES`` the ReLU's tangent root goes by row blocks (as on Dask)."""
    from gnngp_cli import runtime
    from gnngp_cli.kernels.torch_roots import TorchRoots

    g = torch.Generator().manual_seed(0)
    q, p = torch.randn(500, 20, generator=g, dtype=torch.float64), torch.randn(500, 30, generator=g, dtype=torch.float64)
    landmarks = torch.arange(0, 500, 7)
    whole = TorchRoots().activation_tangent_root(q, p, landmarks)
    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 1000)
    torch.testing.assert_close(TorchRoots().activation_tangent_root(q, p, landmarks), whole, rtol=1e-12, atol=1e-12)
    assert TorchRoots().activation_tangent_root(q, p[:, :0], landmarks).shape == (500, 0)   # a tangent kernel of 0 stays 0


def test_the_relu_and_the_weight_after_it_in_one_pass_keep_the_tangent_root_as_wide_as_the_nngp_root(monkeypatch):
    """``relu_roots``: the ReLU's two roots from one pass, the tangent one of ``g' o P P^T + g`` (the
    following weight's own term): the same products as the two steps one after the other, on every
    landmark exactly, with ``r`` columns rather than ``2r``; by row blocks as whole; a zero ``P``
    gives the root of ``g`` alone."""
    from gnngp_cli import runtime
    from gnngp_cli.kernels.torch_roots import TorchRoots

    g = torch.Generator().manual_seed(0)
    q, p = torch.randn(60, 20, generator=g, dtype=torch.float64), torch.randn(60, 30, generator=g, dtype=torch.float64)
    every = torch.arange(60)
    roots = TorchRoots()
    q1, p1 = roots.activation_roots(q, p, every, with_kernel=True)
    relu_q = roots.activation_root(q, every)
    theta = roots.activation_tangent_root(q, p, every)
    assert q1.shape == (60, 60) and p1.shape == (60, 60)
    torch.testing.assert_close(q1 @ q1.T, relu_q @ relu_q.T, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(p1 @ p1.T, theta @ theta.T + relu_q @ relu_q.T, rtol=1e-9, atol=1e-9)
    _, zero = roots.activation_roots(q, p[:, :0], every, with_kernel=True)
    torch.testing.assert_close(zero @ zero.T, relu_q @ relu_q.T, rtol=1e-9, atol=1e-9)
    landmarks = torch.arange(0, 60, 4)
    whole = roots.activation_roots(q, p, landmarks, with_kernel=True)
    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 100)
    blocks = roots.activation_roots(q, p, landmarks, with_kernel=True)
    for a, b in zip(blocks, whole):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_a_low_rank_tangent_kernel_computes_each_root_once_and_no_nngp_root_that_nothing_reads():
    """Low rank over every node: after a first layer ``Theta = K`` (its weight's own term), one
    root for both (``A X`` once; the ReLU reads ``Q Q[a]^T`` once for both products); past the
    last block that reads ``K`` (a GCN's last weight), ``Theta`` alone goes on. A 2-layer GCN's
    tangent kernel convolves two roots, not four, and three when ``K`` is kept beside it; the
    kernels equal the exact ones, and those of a tangent root that is an equal copy."""
    from dataclasses import replace

    from gnngp_cli import runtime
    from gnngp_cli.kernels.torch_roots import TorchRoots

    ei, x = random_graph()
    every = torch.arange(x.size(0))
    products = []

    class Counting(TorchRoots):
        def convolve(self, adjacency, root):
            products.append(root.shape[1])
            return super().convolve(adjacency, root)

    ctx = replace(context(x, ei, landmarks=every)[0], roots=Counting())
    theta = Tangent(gcn(2, 1.1, 0.0))(None, ctx, None).root
    assert products == [x.size(1), x.size(0)], products   # A X (Theta = K), then A P: no A Q after the last ReLU
    full = Tangent(gcn(2, 1.1, 0.0))(None, context(x, ei)[0], every).dense()
    torch.testing.assert_close(theta @ theta.T, full, rtol=1e-9, atol=1e-9 * float(full.abs().max()))
    products.clear()
    kept = Tangent(gcn(2, 1.1, 0.0))(None, replace(context(x, ei, landmarks=every)[0], roots=Counting(), keep_nngp=True), None)
    assert len(products) == 3, products
    nngp = gcn(2, 1.1, 0.0)(None, context(x, ei)[0], every).dense()
    torch.testing.assert_close(kept.root @ kept.root.T, full, rtol=1e-9, atol=1e-9 * float(full.abs().max()))
    torch.testing.assert_close(kept.nngp.root @ kept.nngp.root.T, nngp, rtol=1e-9, atol=1e-9 * float(nngp.abs().max()))
    g = torch.Generator().manual_seed(0)
    q = torch.randn(300, 20, generator=g, dtype=torch.float64)
    landmarks = torch.arange(0, 300, 7)
    roots = TorchRoots()
    for blocks in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            if blocks:
                patch.setattr(runtime, "ROW_BLOCK_ENTRIES", 1000)
            for shared, copy in zip(roots.activation_roots(q, q, landmarks, with_kernel=True), roots.activation_roots(q, q.clone(), landmarks, with_kernel=True)):
                torch.testing.assert_close(shared, copy, rtol=1e-12, atol=1e-12)
            alone = roots.activation_roots(q, q, landmarks, with_kernel=True, kernel_root=False)
            assert alone[0] is None
            torch.testing.assert_close(alone[1], copy, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(roots.activation_tangent_root(q, q, landmarks), roots.activation_tangent_root(q, q.clone(), landmarks), rtol=1e-12, atol=1e-12)


def test_a_low_rank_tangent_layer_releases_each_input_root_once_its_output_is_made():
    """Over every node, a convolution and a bias that alone hold their input drop its root ``Q``
    before they convolve or extend the tangent root ``P`` (three roots alive at a time, not four),
    and give the kernels of the usual evaluation."""
    import weakref
    from dataclasses import replace

    from gnngp_cli.kernels.blocks import Bias, Conv, Serial
    from gnngp_cli.kernels.torch_roots import TorchRoots
    from gnngp_cli.kernels.value import Kernel

    ei, x = random_graph()
    ctx, _ = context(x, ei)
    alive = []

    class Watching(TorchRoots):   # notes, at each product, whether the last input's root is still held
        def convolve(self, adjacency, root):
            alive.append(None if not refs else refs[-1]() is not None)
            refs.append(weakref.ref(root))
            return super().convolve(adjacency, root)

    refs = []
    ctx = replace(ctx, tangent=True, roots=Watching())
    g = torch.Generator().manual_seed(0)
    q, p = torch.randn(40, 7, generator=g, dtype=torch.float64), torch.randn(40, 9, generator=g, dtype=torch.float64)
    held = Kernel(None, root=q.clone(), tangent=Kernel(None, root=p.clone()))   # held here: each block through Block.evaluate
    usual = Bias(0.3).evaluate(Conv().evaluate(held, ctx, None), ctx, None)
    taken = Serial(Conv(), Bias(0.3)).evaluate_taken([Kernel(None, root=q.clone(), tangent=Kernel(None, root=p.clone()))], ctx)
    assert len(alive) == 4 and alive[1] is True and alive[3] is False, alive   # Q held at P's product as usual; gone, taken
    torch.testing.assert_close(taken.root, usual.root)
    torch.testing.assert_close(taken.tangent.root, usual.tangent.root)


def test_one_training_time_needs_no_validation(tmp_path, mirror):
    from helpers import run

    code, err, row, errors = run(tmp_path, "dataset=cora", "kernel=gcngp", "kernel.limit=ntk", f"data.mirror={mirror}",
                                 "inference.time=100", "dataset.hide_val=true")
    assert code == 0 and row["time"] == 100.0, err
    code, err, row, errors = run(tmp_path, "dataset=cora", "kernel=gcngp", f"data.mirror={mirror}", "inference.time=[1,100]",
                                 "dataset.hide_val=true", run_dir=tmp_path / "list")
    assert code == 1 and "dataset.hide_val=true leaves no validation labels" in errors[0], errors


def test_a_protocol_scores_the_trained_networks_output_variance(tmp_path, mirror):
    """Left-out classes against the variance of the NTK network's output after training: the
    nodes of classes it never saw are told apart by it (as by the GP's, docs/uncertainty.md)."""
    from helpers import run

    code, err, row, errors = run(tmp_path, "dataset=cora", "kernel=gcngp", "kernel.limit=ntk", f"data.mirror={mirror}",
                                 "inference.time=inf", "protocol=leave_out_classes")
    assert code == 0 and not errors, err
    assert row["auroc_variance"] > 0.6 and math.isfinite(row["ece"]), row.to_dict()


def test_only_the_papers_presets_fill_its_tables():
    """``experiment=ntk`` (and the uncertainty presets) are not the paper's: gnngp report never
    fills a paper table or figure from their rows."""
    from gnngp_cli.report.layouts import names

    assert names() == ["figure1", "figure2", "figure3", "figure4", "table4", "table5"]


def test_a_limit_in_capitals_gets_its_spelling(tmp_path):
    from helpers import run

    code, err, row, errors = run(tmp_path, "kernel=gcngp", "kernel.limit=NTK")
    assert code == 1 and "did you mean 'ntk'?" in errors[0], errors


def test_the_ntk_regime_on_a_regression_set_trains_the_plain_network():
    """A trial: dataset=chameleon gnn=gcn gnn.regime=ntk gnn.dropout=0 ran with the regression
    recipe's batch norm (a null batch_norm passed the check, then took the dataset's default), and
    the gradient descent froze its scale: a flat learning curve, R^2 -12.8, reported ok."""
    from gnngp_cli.api import compose
    from gnngp_cli.config import parse, with_method_defaults

    plain = with_method_defaults(parse(compose(["model=gcn", "gnn.regime=ntk", "dataset=chameleon"])), "regression").gnn
    assert plain.batch_norm is False and plain.dropout == 0.0
    recipe = with_method_defaults(parse(compose(["model=gcn", "dataset=chameleon"])), "regression").gnn
    assert recipe.batch_norm is True and recipe.dropout == 0.5   # the standard regime keeps the recipe
