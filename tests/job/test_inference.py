"""GP inference: the nugget-grid solver against direct linear solves."""
import math

import pytest
import torch

from gnngp_cli.backends.local import local_group, local_kernel, local_statistics
from gnngp_cli.gp.inference import log_grid, predict
from gnngp_cli.gp.sufficient import regression_targets
from gnngp_cli.kernels import Kernel
from gnngp_cli.metrics import METRICS, default_metric, uncertainty_metrics


def gp_predict(kernel, y, masks, task, num_classes, grid, low_rank):
    """The job's inference on one kernel held locally: every labelled node one row group."""
    train = masks["train"].nonzero().view(-1)
    k = local_kernel(kernel, train, kernel.diagonal(), low_rank)
    values = kernel.root if kernel.root is not None else kernel.matrix
    stats = local_statistics(k, train, regression_targets(y[train], task, num_classes, values.dtype))
    group = local_group(k, {key: masks[key].nonzero().view(-1) for key in ("train", "val", "test")}, y)
    return predict(stats, lambda fn, combine: fn(group), grid, METRICS[default_metric(task, num_classes)],
                   uncertainty_metrics(task, num_classes), task)


def problem(n=30, r=8, task="regression", seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, r, generator=g, dtype=torch.float64)
    if task == "regression":
        y = q @ torch.randn(r, generator=g, dtype=torch.float64) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    else:
        y = torch.randint(3, (n,), generator=g)
    masks = {"train": torch.zeros(n, dtype=torch.bool), "val": torch.zeros(n, dtype=torch.bool), "test": torch.zeros(n, dtype=torch.bool)}
    masks["train"][:12], masks["val"][12:20], masks["test"][20:] = True, True, True
    return q, y, masks


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_mean_and_variance_equal_direct_solves(task):
    q, y, masks = problem(task=task)
    k = q @ q.T
    n = q.size(0)
    grid = log_grid(1e-3, 10, 21, dtype=torch.float64)
    res = gp_predict(Kernel(torch.arange(n), matrix=k), y, masks, task, 3, grid, low_rank=False)
    eps = float(res.eps)
    b = masks["train"].nonzero().view(-1)
    targets = torch.nn.functional.one_hot(y[b], 3).double() if task == "classification" else y[b].view(-1, 1)
    solve = torch.linalg.solve(k[b][:, b] + eps * torch.eye(b.numel(), dtype=torch.float64), torch.cat([targets, k[b]], 1))
    mean = k[:, b] @ solve[:, : targets.size(1)]
    var = torch.diagonal(k) - (k[:, b] * solve[:, targets.size(1):].T).sum(1)
    torch.testing.assert_close(res.means(), mean)
    torch.testing.assert_close(res.variances(), var.clamp_min(0))
    # the chosen nugget is the first grid value with the best validation metric
    assert int(torch.argmax(res.val_curve)) == int(torch.argmin((grid - res.nugget).abs()))


def test_low_rank_form_equals_exact_form_on_an_exact_root():
    q, y, masks = problem()
    n = q.size(0)
    grid = log_grid(1e-3, 10, 11, dtype=torch.float64)
    exact = gp_predict(Kernel(torch.arange(n), matrix=q @ q.T), y, masks, "regression", 0, grid, low_rank=False)
    low = gp_predict(Kernel(None, root=q), y, masks, "regression", 0, grid, low_rank=True)
    torch.testing.assert_close(low.means(), exact.means())
    torch.testing.assert_close(low.variances(), exact.variances())
    assert low.metrics == pytest.approx(exact.metrics)
    assert low.uncertainty == pytest.approx(exact.uncertainty)


def test_regression_uncertainty_is_calibrated_on_a_gp_sample():
    g = torch.Generator().manual_seed(1)
    n = 400
    x = torch.linspace(0, 10, n, dtype=torch.float64)
    k = torch.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) * 4.0
    noise = 0.1
    f = torch.linalg.cholesky(k + 1e-8 * torch.eye(n, dtype=torch.float64)) @ torch.randn(n, generator=g, dtype=torch.float64)
    y = f + noise ** 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
    perm = torch.randperm(n, generator=g)
    masks = {key: torch.zeros(n, dtype=torch.bool) for key in ("train", "val", "test")}
    masks["train"][perm[:150]], masks["val"][perm[150:250]], masks["test"][perm[250:]] = True, True, True
    res = gp_predict(Kernel(torch.arange(n), matrix=k), y, masks, "regression", 0, log_grid(1e-3, 10, 41, dtype=torch.float64), False)
    assert 0.85 <= res.uncertainty["coverage95"] <= 1.0
    assert res.metrics["test"] > 0.8


def test_entries_that_would_become_subnormal_are_dropped_and_nothing_else_moves():
    """An RBF kernel at mid gamma has entries near exp(-44); LAPACK multiplied them into subnormal
    numbers (14 s instead of 0.9 s for squirrel's 2,496 training nodes). They are set to zero."""
    from gnngp_cli.kernels.numerics import symmetric_eigh

    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 20, generator=g)
    k = torch.exp(-1.0 * torch.cdist(x, x) ** 2 / 2)
    floor = float(k.abs().max()) * torch.finfo(torch.float32).tiny ** 0.5
    assert bool(((k > 0) & (k < floor)).any()) and bool(((k >= floor) & (k < 1e-6)).any())
    w, v = symmetric_eigh(k)
    w64 = torch.linalg.eigvalsh(k.double())
    assert float((w.double() - w64).abs().max()) < 1e-5
    kept = torch.where(k < floor, torch.zeros(()), k)
    torch.testing.assert_close(v @ torch.diag(w) @ v.T, kept, atol=1e-5, rtol=0)
    w0, v0 = symmetric_eigh(torch.zeros(0, 0))
    assert w0.numel() == 0 and v0.shape == (0, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["rbf", "laplacian"])
def test_an_exponential_base_kernel_has_no_subnormal_entries(name, dtype):
    """exp(-gamma d) underflows into subnormal numbers at large gamma; every product such an entry
    entered took x86's slow path (the Nystrom root of squirrel's RBF-X search, 0.75 s a gamma
    instead of 0.15 s). Those entries are 0; every other entry is exp's own."""
    from gnngp_cli.kernels.base import BaseKernel

    tiny = torch.finfo(dtype).tiny
    stat = torch.linspace(0, 1.1 * -math.log(torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps), 5000, dtype=dtype)
    base = BaseKernel(name, gamma=1.0)
    k, raw = base.from_statistic(stat), torch.exp(-stat)
    assert bool(((raw > 0) & (raw < tiny)).any())                        # the grid reaches the subnormal range
    assert not bool(((k > 0) & (k < tiny)).any())                        # ... and none is left
    assert torch.equal(k[raw >= tiny], raw[raw >= tiny]) and bool((k[raw < tiny] == 0).all())


def test_a_gram_of_orthogonal_columns_is_decomposed_by_its_diagonal_and_others_by_eigh():
    from gnngp_cli.gp.sufficient import gram_eigh
    from gnngp_cli.kernels.numerics import nystrom_root

    g = torch.Generator().manual_seed(1)
    x = torch.randn(120, 6, generator=g)
    cross = torch.exp(-0.5 * torch.cdist(x, x[:40]) ** 2)
    root = nystrom_root(cross, torch.arange(40), "test")    # landmarks are the training nodes 0..39
    gram = root[:40].T @ root[:40]                          # sqrt(D) V^T V sqrt(D) = D up to round-off
    w, v = gram_eigh(gram)
    assert bool((v.abs().sum(0) == 1).all()) and bool((v.abs().sum(1) == 1).all())      # a permutation: no eigh ran
    torch.testing.assert_close(w, torch.linalg.eigvalsh(gram), atol=1e-5, rtol=1e-4)
    mixed = gram + 1e-2 * torch.ones_like(gram)             # correlated columns: the full eigendecomposition
    w2, v2 = gram_eigh(mixed)
    assert not bool((v2.abs().sum(0) == 1).all())
    torch.testing.assert_close(v2 @ torch.diag(w2) @ v2.T, mixed, atol=1e-4, rtol=1e-4)



@pytest.mark.parametrize("columns", [1023, 1024, 1301])
def test_the_gram_of_column_blocks_equals_the_one_product(columns):
    """Past 4 x 256 columns the Gram matrix is built from its blocks on and above the diagonal
    (uneven ones too); below, it is the one product."""
    from gnngp_cli.gp.sufficient import gram

    q = torch.randn(700, columns, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    g = gram(q)
    torch.testing.assert_close(g, q.T @ q, rtol=1e-12, atol=1e-10)
    edge = round(columns / 4)
    assert columns < 1024 or torch.equal(g[edge:, :edge], g[:edge, edge:].T)   # a block below the diagonal: its mirror's transpose


def test_posterior_variances_by_row_blocks_equal_the_one_product(monkeypatch):
    """Past ROW_BLOCK_ENTRIES the variances are computed by row blocks (a Reddit-sized
    GCNGP-X held three N x r temporaries for them); the values are the same."""
    from gnngp_cli import runtime
    from gnngp_cli.gp.posterior import LowRankPosterior
    from gnngp_cli.gp.sufficient import low_rank_statistics

    g = torch.Generator().manual_seed(1)
    root = torch.randn(500, 30, generator=g, dtype=torch.float64)
    train = torch.arange(0, 500, 3)
    post = LowRankPosterior(low_rank_statistics(root, train, torch.randn(train.numel(), 2, generator=g, dtype=torch.float64), 500))
    pos = torch.arange(499, -1, -1)
    eps = torch.tensor(0.1, dtype=torch.float64)
    whole = post.variance(root, pos, eps, None)
    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 30 * 64 + 7)
    torch.testing.assert_close(post.variance(root, pos, eps, None), whole, rtol=1e-12, atol=1e-14)


def test_a_gp_job_on_a_factored_root_gives_the_plain_roots_row(monkeypatch):
    """Past ROW_BLOCK_ENTRIES a GP job keeps the last Nystrom step's root factored (the GP reads its
    Gram matrices and ``Q[rows] @ M``); in float64 its row is the plain root's: the same nugget, the
    same metrics to round-off, on a network with a bias after the convolution (GCN) and one whose
    branches are added (GCNII, multiplied out there). The validation and test rows kept projected
    onto the posterior's eigenbasis (the nugget scale's share of them, then their variances) give
    the same uncertainty columns."""
    from gnngp_cli import runtime
    from gnngp_cli.api import run
    from gnngp_cli.backends import local
    from gnngp_cli.gp import sufficient
    from gnngp_cli.kernels.torch_roots import LOCAL_ROOTS

    projected = []
    real = sufficient.project_rows
    monkeypatch.setattr(sufficient, "project_rows", lambda rows, index, m: projected.append(index.numel()) or real(rows, index, m))
    monkeypatch.setattr(runtime, "ROW_BLOCK_ENTRIES", 4000)
    for kernel in (["kernel=gcngp_x", "kernel.sigma_b=0.3"], ["kernel=gcn2gp_x"]):
        args = ["dataset=csbm", "dataset.num_nodes=600", "dataset.train_ratio=0.66", *kernel, "landmarks.count=40", "dtype=float64", "runs=1",
                "progress=false"]   # Reddit's proportions: the validation and test rows take less than half of the root's memory
        factored = run(args)[0]
        monkeypatch.setattr(local, "FACTORED_ROOTS", LOCAL_ROOTS)
        plain = run(args)[0]
        monkeypatch.setattr(local, "FACTORED_ROOTS", local.TorchRoots(factored=True))
        assert factored["nugget"] == pytest.approx(plain["nugget"], rel=1e-12)
        for key in ("test", "val", "train", "var_correct", "var_wrong", "nll", "brier", "ece", "temperature"):
            assert factored[key] == pytest.approx(plain[key], rel=1e-9, abs=1e-12), (kernel, key)
    assert len(projected) == 1 and projected[0] > 0   # GCN's run kept its validation and test rows projected (GCNII's root is multiplied out)


def test_factored_statistics_in_float32_keep_the_right_hand_side_to_its_rounding():
    """The right factor weighs the left one's small directions up (``V D^-1/2``); the right-hand side
    ``R^T L[b]^T y`` is summed about the rows' centre in float64, so in float32 it stays near float32's
    rounding of the exact value (7e-8 here; 1.0e-6 when it was summed in float32, 4.1e-7 from the
    plain root ``(L R)[b]^T y``)."""
    from gnngp_cli.gp.sufficient import factored_statistics
    from gnngp_cli.kernels.value import FactoredRoot

    g = torch.Generator().manual_seed(4)
    left = 5.0 + torch.rand(3000, 60, generator=g, dtype=torch.float64)   # one large common direction
    q, _ = torch.linalg.qr(torch.randn(60, 60, generator=g, dtype=torch.float64))
    right = q * torch.logspace(0, 2, 60, dtype=torch.float64)
    train = torch.arange(0, 3000, 2)
    y = torch.nn.functional.one_hot(torch.randint(0, 4, (train.numel(),), generator=g), 4).double()
    exact = right.T @ (left[train].T @ y)
    got = factored_statistics(FactoredRoot(left.float(), right.float()), train, y.float(), 3000).rhs.double()
    assert float((got - exact).abs().max() / exact.abs().max()) < 5e-7
