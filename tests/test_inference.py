"""GP inference: the nugget-grid solver against direct linear solves."""
import pytest
import torch

from gnngp_cli.inference import gp_predict, log_grid
from gnngp_cli.kernels import Kernel


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
    eps = res.nugget * res.nugget_scale
    b = masks["train"].nonzero().view(-1)
    targets = torch.nn.functional.one_hot(y[b], 3).double() if task == "classification" else y[b].view(-1, 1)
    solve = torch.linalg.solve(k[b][:, b] + eps * torch.eye(b.numel(), dtype=torch.float64), torch.cat([targets, k[b]], 1))
    mean = k[:, b] @ solve[:, : targets.size(1)]
    var = torch.diagonal(k) - (k[:, b] * solve[:, targets.size(1):].T).sum(1)
    torch.testing.assert_close(res.mean, mean)
    torch.testing.assert_close(res.variance, var.clamp_min(0))
    # the chosen nugget is the first grid value with the best validation metric
    assert res.val_curve.index(max(res.val_curve)) == int(torch.argmin((grid - res.nugget).abs()))


def test_low_rank_form_equals_exact_form_on_an_exact_root():
    q, y, masks = problem()
    n = q.size(0)
    grid = log_grid(1e-3, 10, 11, dtype=torch.float64)
    exact = gp_predict(Kernel(torch.arange(n), matrix=q @ q.T), y, masks, "regression", 0, grid, low_rank=False)
    low = gp_predict(Kernel(None, root=q), y, masks, "regression", 0, grid, low_rank=True)
    torch.testing.assert_close(low.mean, exact.mean)
    torch.testing.assert_close(low.variance, exact.variance)
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
