"""GNNGPKernel in a plain GPyTorch loop on Cora: it trains, predicts, and its marginal
likelihood equals fit=mll's objective at the same hyperparameters (float64)."""
import pytest
import torch

gpytorch = pytest.importorskip("gpytorch")

from gnngp_cli.api import compose  # noqa: E402
from gnngp_cli.gp.mll import log_marginal_likelihood, training_kernel  # noqa: E402
from gnngp_cli.gp.sufficient import regression_targets  # noqa: E402
from gnngp_cli.job.loading import load_graph  # noqa: E402
from gnngp_cli.gpytorch import GNNGPKernel  # noqa: E402
from gnngp_cli.kernels import KERNELS, BaseKernel, KernelContext  # noqa: E402
from gnngp_cli.graph.operators import Adjacency  # noqa: E402


class NodeGP(gpytorch.models.ExactGP):
    """One GP per one-hot column (a batch of C), sharing the kernel, its output scale and the noise."""

    def __init__(self, x, y, likelihood, kernel):
        super().__init__(x, y, likelihood)
        self.mean = gpytorch.means.ZeroMean(batch_shape=y.shape[:1])
        self.covar = gpytorch.kernels.ScaleKernel(kernel)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean(x), self.covar(x))


@pytest.fixture(scope="module")
def cora(mirror, cache):
    return load_graph(compose(["dataset=cora", f"data.mirror={mirror}", f"data.root={cache}"])).data


@pytest.mark.parametrize("landmarks", [False, True], ids=["exact", "low-rank"])
def test_gpytorch_loop_trains_and_matches_fit_mll_objective(cora, landmarks):
    data = cora
    train, test = data.train_mask.nonzero().view(-1), data.test_mask.nonzero().view(-1)
    classes = data.num_classes
    x = train.double().view(1, -1, 1).expand(classes, -1, 1)
    y = regression_targets(data.y[train], data.task, classes, torch.float64).T.contiguous()        # C x n
    kernel = GNNGPKernel("gcngp", data, sigma_w=1.0, sigma_b=0.1, landmarks=train if landmarks else None)
    assert {n for n, _ in kernel.named_parameters()} == {"raw_sigma_w", "raw_sigma_b"}
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double().to(data.x.device)   # GPyTorch's modules start on the CPU
    model = NodeGP(x, y, likelihood, kernel).double().to(data.x.device)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train()
    likelihood.train()
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = -mll(model(x), y).mean()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 0.02

    with torch.no_grad():
        gpytorch_value = float(mll(model(x), y).mean())
        s2 = float(model.covar.outputscale)
        noise = float(likelihood.noise)
        sigma_w, sigma_b = float(kernel.value("sigma_w")), float(kernel.value("sigma_b"))
        # fit=mll's objective at the same values: output scale s^2, nugget nu = noise / s^2
        kcfg = compose(["dataset=cora", "kernel=gcngp"]).kernel
        network = KERNELS["gcngp"].architecture(kcfg, {"sigma_w": sigma_w, "sigma_b": sigma_b}).network
        ctx = KernelContext(data.x.double(), Adjacency.from_graph(data.edge_index, data.num_nodes, "sym", torch.float64, data.x.device),
                            BaseKernel(), train if landmarks else None)
        ours = float(log_marginal_likelihood(training_kernel(network, ctx, train), y.T, noise / s2, s2, low_rank=landmarks))
    assert ours == pytest.approx(gpytorch_value, rel=1e-6)

    model.eval()
    likelihood.eval()
    with torch.no_grad():
        mean = model(test.double().view(1, -1, 1).expand(classes, -1, 1)).mean    # C x n_test
    accuracy = float((mean.argmax(0) == data.y[test]).double().mean())
    assert accuracy > 0.75


def test_bad_inputs_are_clear_errors(cora):
    from gnngp_cli.errors import ConfigError

    with pytest.raises(ConfigError, match="has no parameter to learn"):
        GNNGPKernel("ggp", cora, base="linear")
    with pytest.raises(ConfigError, match=r"the low-rank twin of kernel=gcngp_x is architecture 'gcngp' with landmarks=<node ids>"):
        GNNGPKernel("gcngp_x", cora)   # the command line's name
    with pytest.raises(ConfigError, match=r"architecture 'gcngpp' is not known \(did you mean 'gcngp'\?\)"):
        GNNGPKernel("gcngpp", cora)
    kernel = GNNGPKernel("gcngp", cora)
    with pytest.raises(ValueError, match="node ids"):
        kernel(torch.tensor([[0.5]], dtype=torch.float64)).to_dense()


def test_learn_takes_one_name_as_one_name_and_refuses_unknown_ones():
    """learn="sigma_w" was read as its characters (fit.learn names 's'...)."""
    from gnngp_cli.data import generate_csbm
    from gnngp_cli.errors import ConfigError

    data = generate_csbm(num_nodes=60, num_features=6, num_classes=3, seed=2)
    assert [p.name for p in GNNGPKernel("gcngp", data, learn="sigma_w").fitted] == ["sigma_w"]
    assert [p.name for p in GNNGPKernel("gcngp", data, learn=("sigma_w", "sigma_b"), sigma_b=0.1).fitted] == ["sigma_w", "sigma_b"]
    for learn, message in (("sigma_x", "learn names 'sigma_x', which this kernel does not have; use some of sigma_w, sigma_b"),
                           (["sigma_w", "nugget"], "learn names 'nugget', which this kernel does not have (in GPyTorch the nugget is the likelihood's noise"),
                           (3, "learn takes a parameter's name or a list of names")):
        with pytest.raises(ConfigError) as err:
            GNNGPKernel("gcngp", data, learn=learn)
        assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_registered_kernel_is_a_gpytorch_kernel_with_gradients(name):
    """With its entry's defaults (a kernel whose filter a run chooses takes its first candidate)."""
    from gnngp_cli.data import generate_csbm

    data = generate_csbm(num_nodes=60, num_features=6, num_classes=3, seed=2)
    kernel = GNNGPKernel(name, data)
    ids = torch.arange(0, 60, 3, dtype=torch.float64).view(-1, 1)
    k = kernel(ids).to_dense()
    assert k.shape == (20, 20) and bool(torch.isfinite(k).all())
    torch.testing.assert_close(k, k.T)
    assert float(torch.linalg.eigvalsh(k.detach()).min()) >= -1e-8 * float(k.detach().abs().max())
    parameters = list(kernel.parameters())
    assert parameters, name                                                  # every kernel has something to learn
    k.sum().backward()
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in parameters)


def test_a_float32_model_and_malformed_ids_are_clear():
    """A newcomer's trials: the docs' model without .double() (float32 ids and targets) failed
    deep inside linear_operator ('Expected b and A to have the same dtype'); bool ids, no ids,
    a NaN id and diag=True over unequal inputs were torch's own errors."""
    from gnngp_cli.data import generate_csbm

    data = generate_csbm(num_nodes=60, num_features=6, num_classes=3, seed=2)
    for landmarks in (None, torch.arange(0, 60, 4)):
        ids = torch.arange(30, dtype=torch.float32).view(-1, 1)
        y = torch.nn.functional.one_hot(data.y[:30], 3).T.float()
        likelihood = gpytorch.likelihoods.GaussianLikelihood(batch_shape=torch.Size([3]))
        model = NodeGP(ids, y, likelihood, GNNGPKernel("gcngp", data, landmarks=landmarks))
        loss = -gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)(model(ids), y).sum()
        loss.backward()
        assert bool(torch.isfinite(loss))
    kernel = GNNGPKernel("gcngp", data)
    for bad, said in ((torch.ones(3, 1, dtype=torch.bool), "node ids as a float column"), (torch.zeros(0, 1), "hold no node id"),
                      (torch.tensor([[float("nan")]]), "not NaN or infinite")):
        with pytest.raises(ValueError, match=said):
            kernel(bad).to_dense()
    with pytest.raises(ValueError, match="diag=True pairs the inputs' nodes one to one, and they hold 2 and 3"):
        kernel(torch.tensor([[0.0], [1.0]]), torch.tensor([[0.0], [1.0], [2.0]]), diag=True)
