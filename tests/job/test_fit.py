"""fit=mll: gradients of every block against finite differences (float64, both backings), the
objective against a reference Gaussian density, and the runner's behaviour and errors."""
import json
import math

import pytest
import torch

from gnngp_cli.api import compose, run
from gnngp_cli.config import parse, with_method_defaults
from gnngp_cli.graph.operators import Adjacency
from gnngp_cli.errors import ConfigError, KernelError
from gnngp_cli.gp.mll import log_marginal_likelihood, plan_parameters, training_kernel
from gnngp_cli.kernels import (
    Add, BaseKernel, Bias, Conv, Input, Kernel, KernelContext, MixedWeight, ReLU, Scale, Serial, Weight,
)
from gnngp_cli.kernels.architectures import gcn, gcn2, gin, sage
from gnngp_cli.kernels.relu import relu_expectation_entries

N, D = 14, 6


def small_graph(base: str = "linear", gamma=1.0, low_rank: bool = False) -> KernelContext:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(N, D, generator=generator, dtype=torch.float64)
    ring = torch.arange(N)
    chords = torch.tensor([[0, 5], [2, 9], [3, 11], [7, 12]]).T
    edges = torch.cat([torch.stack([ring, (ring + 1) % N]), chords], dim=1)
    edges = torch.cat([edges, edges.flip(0)], dim=1)
    adjacency = Adjacency.from_graph(edges, N, "sym", torch.float64, torch.device("cpu"))
    landmarks = torch.tensor([0, 2, 3, 6, 9, 13]) if low_rank else None  # fewer than the features: Nystrom on the input too
    return KernelContext(x, adjacency, BaseKernel(base, gamma), landmarks)


# each case: (name, number of positive parameters, builder from parameter tensors to a network)
BLOCKS = [
    ("Weight", 1, lambda p: Serial(Input(), Weight(p[0]))),
    ("Scale", 1, lambda p: Serial(Input(), Scale(p[0]))),
    ("MixedWeight", 1, lambda p: Serial(Input(), MixedWeight(0.7, 0.4, p[0]))),
    ("Bias", 2, lambda p: Serial(Input(), Weight(p[0]), Bias(p[1]))),
    ("Conv", 1, lambda p: Serial(Input(), Weight(p[0]), Conv())),
    ("ReLU", 2, lambda p: Serial(Input(), Weight(p[0]), Conv(), Bias(p[1]), ReLU(), Conv())),
    ("Add", 2, lambda p: Serial(Input(), Add(Weight(p[0]), Serial(Conv(), Weight(p[1]))))),
    ("gcn (Serial, 3 layers)", 2, lambda p: gcn(3, p[0], p[1])),
    ("gcn per layer", 4, lambda p: gcn(2, [p[0], p[1]], [p[2], p[3]])),
    ("gcn2 (alpha)", 2, lambda p: gcn2(3, p[0], alpha=p[1] / 4)),
    ("gin", 2, lambda p: gin(2, p[0], p[1])),
    ("sage", 2, lambda p: sage(2, p[0], p[1])),
]


def kernel_functional(build, ctx_of, nodes, low_rank):
    weights = torch.randn(N, N, generator=torch.Generator().manual_seed(5), dtype=torch.float64)

    def value(*params):
        ctx = ctx_of(params)
        out = training_kernel(build(params), ctx, nodes)
        dense = out.dense()
        return (dense * weights[:dense.size(0), :dense.size(1)]).sum()
    return value


@pytest.mark.parametrize("low_rank", [False, True], ids=["exact", "low-rank"])
@pytest.mark.parametrize("name, count, build", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_block_gradient_matches_finite_differences(name, count, build, low_rank):
    """d(sum W * K)/d(parameters) by autograd equals central differences, in float64, for every
    block, on the exact node-set path and on the Nystrom (low-rank) path."""
    ctx = small_graph(low_rank=low_rank)
    nodes = torch.tensor([1, 4, 5, 8, 10, 12])
    params = tuple(torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (0.9, 0.6, 1.3, 0.4)[:count])
    f = kernel_functional(build, lambda p: ctx, nodes, low_rank)
    assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("low_rank", [False, True], ids=["exact", "low-rank"])
@pytest.mark.parametrize("base", ["rbf", "laplacian"])
def test_input_gamma_gradient_matches_finite_differences(base, low_rank):
    """The base kernel's gamma (Input block, and the Nystrom factor of C0 when low rank)."""
    ctx = small_graph(base, low_rank=low_rank)
    nodes = torch.tensor([1, 4, 5, 8, 10, 12])
    f = kernel_functional(lambda p: gcn(2, 1.1, 0.3), lambda p: ctx.with_base(BaseKernel(base, p[0])), nodes, low_rank)
    assert torch.autograd.gradcheck(f, (torch.tensor(0.3, dtype=torch.float64, requires_grad=True),), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_relu_expectation_gradient_is_finite_and_exact_at_cosine_one():
    """At cov = sqrt(var_x var_y) (cos = 1, the diagonal) arccos' derivative is infinite; the
    expectation's own derivative there is finite: dg/dcov = (pi - t) / (2 pi) = 1/2."""
    var = torch.tensor(1.0, dtype=torch.float64)
    cov = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    g = relu_expectation_entries(cov, var, var)
    g.backward()
    assert float(g.detach()) == pytest.approx(0.5) and float(cov.grad) == pytest.approx(0.5)
    cov = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)   # cos = -1: g = 0, dg/dcov = (pi - pi) / (2 pi) = 0
    relu_expectation_entries(cov, var, var).backward()
    assert math.isfinite(float(cov.grad)) and abs(float(cov.grad)) < 1e-12
    # a variance on the diagonal, K_xx = v: g(v, v, v) = v / 2, so the total derivative is 1/2
    v = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    relu_expectation_entries(v, v, v).backward()
    assert float(v.grad) == pytest.approx(0.5)


def reference_lml(k: torch.Tensor, y: torch.Tensor, nugget: float, scale: float) -> float:
    n = k.size(0)
    dist = torch.distributions.MultivariateNormal(torch.zeros(n, dtype=torch.float64), scale * (k + nugget * torch.eye(n, dtype=torch.float64)))
    return float(sum(dist.log_prob(y[:, c]) for c in range(y.size(1)))) / y.numel()


def test_objective_equals_gaussian_density_dense_and_woodbury():
    """The dense objective and the Woodbury one (from a root with fewer columns than rows)
    both equal the sum of independent Gaussian log densities over the output columns."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(30, 5, generator=generator, dtype=torch.float64)
    y = torch.nn.functional.one_hot(torch.randint(0, 3, (30,), generator=generator), 3).double()
    expected = reference_lml(q @ q.T, y, 0.3, 1.7)
    dense = log_marginal_likelihood(Kernel(None, matrix=q @ q.T), y, 0.3, 1.7, low_rank=False)
    woodbury = log_marginal_likelihood(Kernel(None, root=q), y, 0.3, 1.7, low_rank=True)
    assert float(dense) == pytest.approx(expected, rel=1e-10)
    assert float(woodbury) == pytest.approx(expected, rel=1e-10)


def test_objective_gradient_through_the_network_matches_finite_differences():
    """The whole objective (nugget, output scale, sigmas) on both backings."""
    y = torch.nn.functional.one_hot(torch.arange(6) % 3, 3).double()
    nodes = torch.tensor([1, 4, 5, 8, 10, 12])
    for low_rank in (False, True):
        ctx = small_graph(low_rank=low_rank)

        def f(sw, sb, nu, s2):
            return log_marginal_likelihood(training_kernel(gcn(2, sw, sb), ctx, nodes), y, nu, s2, low_rank)
        params = tuple(torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (1.2, 0.5, 0.2, 0.8))
        assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-7, rtol=1e-5)


def resolved(overrides):
    """The job's spec with the method defaults of a classification set (as a run resolves them)."""
    return with_method_defaults(parse(compose(overrides)), "classification")


def test_parameters_follow_the_architecture_and_fit_learn():
    cfg = resolved(["kernel=gcn2gp", "fit=mll", "fit.per_layer=true", "kernel.layers=3"])
    fitted, held = plan_parameters(cfg.kernel, cfg.fit)
    assert [p.name for p in fitted] == ["nugget", "output_scale", "sigma_w_1", "sigma_w_2", "sigma_w_3", "alpha"]
    assert fitted[-1].transform == "logit" and held == {}
    cfg = resolved(["kernel=gcngp", "fit=mll"])  # sigma_b = 0 on csbm: a network without bias stays so
    fitted, held = plan_parameters(cfg.kernel, cfg.fit)
    assert [p.name for p in fitted] == ["nugget", "output_scale", "sigma_w"] and held == {"sigma_b": 0.0}
    cfg = resolved(["kernel=rbf", "fit=mll"])
    assert [p.name for p in plan_parameters(cfg.kernel, cfg.fit)[0]] == ["nugget", "output_scale", "gamma"]


@pytest.mark.parametrize(
    "overrides, error, message",
    [
        (["kernel=ggp", "kernel.base.name=linear"], ConfigError, "fit=mll needs a kernel with a trainable parameter"),
        (["fit.learn=[nugget,sigma_b]"], ConfigError, "its initial value kernel.sigma_b=0 must be positive"),
        (["fit.nugget=0"], ConfigError, "fit.nugget=0.0 is the initial nugget"),
        (["fit.lr=1000", "fit.steps=5"], KernelError, "fit=mll diverged at step"),
        (["fit.optimizer=sgd"], ConfigError, "fit.optimizer='sgd' is not valid"),
        (["fit.learn=[theta]"], ConfigError, "fit.learn names 'theta', which kernel=gcngp (base linear) cannot learn; use some of nugget, output_scale, sigma_w, sigma_b"),
        (["fit.learn=[sigma_w,sigma_w]"], ConfigError, "fit.learn names 'sigma_w' twice; name each parameter once"),   # (accepted)
        (["fit.learn=[nugget]"], ConfigError, "fit.learn=['nugget'] learns no kernel parameter, and fit=mll fits the kernel's too"),
        (["fit=grid", "dataset.hide_val=true"], ConfigError, "dataset.hide_val=true leaves no validation labels"),
        # a newcomer's: a start of 1e300 "diverged at step 0 ... use a smaller fit.lr", which cannot mend a start
        (["fit.output_scale=1e300", "fit.steps=5"], KernelError, "is -inf at its start, before any step (fit.nugget=0.1, fit.output_scale=1e+300)"),
    ],
)
def test_bad_fit_settings_are_one_line_errors(overrides, error, message):
    with pytest.raises(error) as caught:
        run(["fit=mll", "dataset.num_nodes=300", *overrides])
    assert message in str(caught.value) and "\n" not in str(caught.value)
    if "diverged" in message:
        assert "smaller fit.lr" in str(caught.value)


@pytest.mark.paper  # a marginal-likelihood fit on Cora: CI runs it with -m paper
def test_fit_mll_without_validation_labels_writes_fitted_values():
    """fit=mll never reads the validation set: with none (val_ratio=0) it runs, improves its
    objective, predicts as well as with one, and writes the fitted values."""
    common = ["fit=mll", "dataset.num_nodes=600", "fit.steps=15"]
    no_val = run([*common, "dataset.val_ratio=0"])[0]
    assert no_val["status"] == "ok" and math.isnan(no_val["val"]) and no_val["test"] > 0.7   # NaN val by design: not an error row
    assert no_val["fit"] == "mll" and no_val["fitted_sigma_w"] > 0 and no_val["fitted_nugget"] > 0 and no_val["fitted_output_scale"] > 0
    hidden = run([*common, "dataset.hide_val=true"])[0]
    with_val = run(common)[0]
    assert hidden["status"] == with_val["status"] == "ok"
    assert math.isnan(hidden["val"]) and hidden["test"] == with_val["test"] and not math.isnan(with_val["val"])
    assert with_val["fitted_sigma_w"] == hidden["fitted_sigma_w"]


@pytest.mark.paper  # slow end to end: runs with the paper tests, keeping the fast suite within its 10 minutes
@pytest.mark.parametrize("kernel", ["gcngp", "gcngp_x"])
def test_fit_mll_increases_the_objective_and_adam_and_lbfgs_agree(kernel):
    from gnngp_cli.gp.mll import fit_hyperparameters
    from gnngp_cli.gp.sufficient import regression_targets
    from gnngp_cli.job.loading import load_graph
    from gnngp_cli.kernels import KERNELS

    objectives = {}
    for optimizer, lr in (("adam", 0.05), ("lbfgs", 0.5)):
        cfg = compose([f"kernel={kernel}", "fit=mll", "dataset.num_nodes=400", "kernel.sigma_b=0.3",
                       f"fit.optimizer={optimizer}", f"fit.lr={lr}", "fit.steps=60", "dtype=float64"])
        prep = load_graph(cfg)
        data = prep.data
        arch = KERNELS[cfg.kernel.name].architecture(cfg.kernel)
        train = data.train_mask.nonzero().view(-1)
        ctx = KernelContext(data.x.double(), Adjacency.from_graph(data.edge_index, data.num_nodes, arch.adjacency, torch.float64, prep.device),
                            BaseKernel(), train if cfg.kernel.low_rank else None)
        result = fit_hyperparameters(cfg.kernel, cfg.fit, lambda v: KERNELS[cfg.kernel.name].architecture(cfg.kernel, v).network, ctx,
                                     regression_targets(data.y[train], data.task, data.num_classes, torch.float64), train, progress=False)
        assert result.objective > result.trace[0] + 1e-3 and set(result.values) == {"nugget", "output_scale", "sigma_w", "sigma_b"}
        objectives[optimizer] = result.objective
    assert objectives["adam"] == pytest.approx(objectives["lbfgs"], abs=5e-3)


def test_fit_mll_learns_the_base_gamma_instead_of_searching_it():
    """kernel=rbf chooses gamma on validation under fit=grid; under fit=mll gamma is learned."""
    row = run(["fit=mll", "kernel=rbf", "dataset.num_nodes=300", "fit.steps=5"])[0]
    assert row["fitted_gamma"] > 0 and row["fitted_gamma"] != 1.0 and "gamma" not in json.loads(row["extra"])
    assert math.isfinite(row["test"]) and math.isfinite(row["fit_mll"])


def test_eigh_backward_is_torchs_where_eigenvalues_differ_and_finite_where_they_are_equal():
    """fit=mll on squirrel's GCNGP-X got a NaN gradient at step 9: PyTorch's eigh backward
    divides by every eigenvalue gap, and a ReLU kernel on 2,496 landmarks has gaps of 0."""
    from gnngp_cli.kernels.numerics import symmetric_eigh

    g = torch.Generator().manual_seed(0)
    b = torch.randn(6, 6, generator=g, dtype=torch.float64)
    weights = torch.arange(6.0, dtype=torch.float64)

    def spectral(eig, a):
        w, v = eig(a)
        return (v @ torch.diag(w.clamp_min(0).sqrt()) @ v.T @ weights).sum()

    a = (b @ b.T + torch.eye(6, dtype=torch.float64)).requires_grad_(True)
    ours, = torch.autograd.grad(spectral(symmetric_eigh, a), a)
    theirs, = torch.autograd.grad(spectral(lambda m: torch.linalg.eigh((m + m.T) / 2), a), a)
    torch.testing.assert_close(ours, theirs)
    # two equal eigenvalues: torch's backward is not finite; ours is, and matches finite differences
    base = torch.diag(torch.tensor([1.0, 1.0, 2.0, 3.0], dtype=torch.float64))
    direction = torch.diag(torch.tensor([0.5, 0.5, 1.0, 0.0], dtype=torch.float64))
    w4 = torch.arange(4.0, dtype=torch.float64)

    def along(eig, t):
        w, v = eig(base + t * direction)
        return (v @ torch.diag(w.sqrt()) @ v.T @ w4).sum()

    s = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    torch_grad, = torch.autograd.grad(along(torch.linalg.eigh, s), s)
    assert not torch.isfinite(torch_grad)
    grad, = torch.autograd.grad(along(symmetric_eigh, s), s)
    h = 1e-6
    fd = (along(torch.linalg.eigh, torch.tensor(h, dtype=torch.float64)) - along(torch.linalg.eigh, torch.tensor(-h, dtype=torch.float64))) / (2 * h)
    assert torch.isfinite(grad) and abs(float(grad) - float(fd)) < 1e-6


def test_a_nystrom_factor_with_an_eigenvalue_of_zero_has_a_finite_gradient():
    """``clamp_min(0).sqrt()`` passes 0 * inf = NaN back from an eigenvalue of exactly 0."""
    from gnngp_cli.kernels.numerics import NystromFactor, sqrt_positive

    x = torch.tensor([0.0, -1e-9, 4.0], dtype=torch.float64, requires_grad=True)
    value = sqrt_positive(x)
    value.sum().backward()
    assert value.tolist() == [0.0, 0.0, 2.0] and x.grad.tolist() == [0.0, 0.0, 0.25]
    scale = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    block = scale * torch.diag(torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64))   # rank 2: one eigenvalue is 0
    factor = NystromFactor.of(block, "test")
    (factor.eigvecs * factor.sqrt_d).sum().backward()
    assert torch.isfinite(scale.grad)


def test_a_gradient_that_is_not_finite_is_a_one_line_error_naming_the_parameter(monkeypatch):
    """Adam would turn the parameters into NaN and fail a step later, blaming fit.lr."""
    import gnngp_cli.gp.mll as fit

    objective = fit.log_marginal_likelihood

    def nan_gradient(kernel, y, nugget, output_scale, low_rank):   # a finite value whose gradient in the nugget is NaN
        return objective(kernel, y, nugget, output_scale, low_rank) + torch.where(nugget > 0, 0.0, torch.sqrt(-nugget.double()))

    monkeypatch.setattr(fit, "log_marginal_likelihood", nan_gradient)
    with pytest.raises(KernelError) as caught:
        run(["fit=mll", "dataset.num_nodes=300", "fit.steps=3"])
    message = str(caught.value)
    assert message.startswith("fit=mll: the gradient of nugget is not finite at step 0") and "smaller fit.lr" in message and "dtype=float64" in message and "\n" not in message


def test_a_job_on_data_loaded_for_another_job_gets_its_own_method_defaults():
    """The benchmarks load a dataset once and run several configs on it (scripts/bench_mll.py
    failed: the second config's sigma_b stayed null)."""
    from gnngp_cli.cli.execute import run_job
    from gnngp_cli.job.loading import load_graph

    common = ["dataset.num_nodes=300", "kernel=gcngp"]
    prep = load_graph(compose([*common, "fit=grid"]))
    other = compose([*common, "fit=mll", "fit.steps=2"])
    assert other.kernel.sigma_b is None
    row = run_job(other, prep)[0]
    assert row["status"] == "ok" and row["fit"] == "mll" and row["sigma_b"] == 0.0   # its own default, in its own spec
    assert other.kernel.sigma_b is None   # the config is never written: the defaults live in the job's spec


@pytest.mark.parametrize("start, said", [("1e-30", "fit=mll's values did not move from their start in 3 steps"),
                                         ("1e30", "fit=mll's nugget is")])
def test_a_fit_stuck_at_an_absurd_start_is_a_warning_in_the_row(tmp_path, start, said):
    """A trial: fit.nugget=1e30 gave test 0.400 (0.821 from the default start) and fit.nugget=1e-30
    a nugget still 2.6e-30, both ok rows without a word; fit.output_scale=1e-30 blamed fit.lr at
    step 0, before any step."""
    import json

    import pandas as pd
    from helpers import in_process

    out = in_process("run", "dataset=csbm", "dataset.num_nodes=300", "kernel=gcngp", "fit=mll", f"fit.nugget={start}", "fit.steps=3",
                     "progress=false", f"hydra.run.dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    warned = json.loads(pd.read_csv(tmp_path / "results.csv")["extra"].iloc[0])["warnings"]
    assert any(w.startswith(said) for w in warned), warned
