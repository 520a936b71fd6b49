"""Kernel hyperparameters fitted by maximising the log marginal likelihood (type-II maximum
likelihood), instead of the paper's validation grid (``fit=mll``).

With ``b`` the training nodes, ``Y`` their targets (``n x C``: one-hot columns for
classification, independent outputs with a shared kernel, as the paper regresses them; ``y``
for regression), ``K`` the network kernel (a function of ``sigma_w``, ``sigma_b``, ``alpha``,
``gamma``), an output scale ``s^2`` and a nugget ``nu``:

    Y[:, c] ~ N(0, s^2 (K_bb + nu I)),
    log p(Y) = -tr(Y^T (K_bb + nu I)^-1 Y) / (2 s^2) - C/2 (n log s^2 + log|K_bb + nu I|) - nC/2 log(2 pi).

Exact kernels use a Cholesky factor of ``K_bb + nu I``. Low-rank kernels, ``K_bb = Q_b Q_b^T``
with ``Q_b`` of ``r`` columns, use Woodbury and the matrix determinant lemma with
``M = Q_b^T Q_b + nu I_r`` (never an ``n x n`` matrix):

    (K_bb + nu I)^-1 = (I - Q_b M^-1 Q_b^T) / nu,    log|K_bb + nu I| = (n - r) log nu + log|M|.

The objective reported (``fit_mll``) is ``log p(Y) / (n C)``: GPyTorch's
``ExactMarginalLogLikelihood`` (divided by ``n``) averaged over the ``C`` outputs, with
GPyTorch's output scale ``s^2`` and likelihood noise ``s^2 nu`` (see :mod:`gnngp_cli.gpytorch`).

What is fitted is read from the kernel's registry entry (its learnable ``parameters``, those a
configuration uses) and from the base kernel (``gamma`` of rbf and laplacian, ``c`` of the
polynomial). Every parameter is positive through a log transform; a parameter with an upper
bound (GCNII's ``alpha``, a mixing weight in ``(0, 1)``) through a logit. Gradients come from
autograd through the blocks (the ReLU expectation and the Nystrom factor included); the linear
algebra of the objective runs in float64. The validation nodes are never read: they only report.

The fit needs gradients through the kernel on every node it reads, so it runs where the kernel
is a tensor of this process (``compute=local``, on the CPU or a GPU).
"""
from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch
from torch import Tensor

from ..errors import ConfigError, KernelError
from ..kernels import BASE_KERNELS, KERNELS, BaseKernel, Kernel, KernelContext
from ..kernels.architectures import Parameter
from ..kernels.blocks import Block
from .posterior import LowRankPosterior, strategy_of

log = logging.getLogger("gnngp")

GP_PARAMETERS = ("nugget", "output_scale")


def kernel_parameters(kernel_spec: Any) -> list[Parameter]:
    """The parameters of a kernel config that ``fit=mll`` may learn: its entry's learnable
    ones that the configuration uses, then its base kernel's (``gamma``, ``c``)."""
    own = KERNELS[kernel_spec.name].learnable(kernel_spec)
    return own + [Parameter(name, per_layer=False) for name in BASE_KERNELS.get(kernel_spec.base.name, ())]


def _configured(kernel_spec: Any, name: str) -> Any:
    return getattr(kernel_spec.base, name) if name in BASE_KERNELS.get(kernel_spec.base.name, ()) else getattr(kernel_spec, name)


def check_learn(kernel_spec: Any, fit_spec: Any) -> None:
    """``fit.learn`` names only what this kernel can learn (one line otherwise), before any work."""
    available = [p.name for p in kernel_parameters(kernel_spec)]
    named = list(fit_spec.learn or [])
    twice = next((name for name in named if named.count(name) > 1), None)
    if twice is not None:
        raise ConfigError(f"fit.learn names '{twice}' twice; name each parameter once")
    if fit_spec.learn is not None and named and all(name in GP_PARAMETERS for name in named) and available:
        raise ConfigError(f"fit.learn={list(named)} learns no kernel parameter, and fit=mll fits the kernel's too: add some of "
                          f"{', '.join(available)}; to choose the nugget alone, fit=grid chooses it on the validation nodes")
    for name in named:
        if name not in GP_PARAMETERS and name not in available:
            raise ConfigError(f"fit.learn names '{name}', which kernel={kernel_spec.name} (base {kernel_spec.base.name}) cannot learn; "
                              f"use some of {', '.join([*GP_PARAMETERS, *available])}")


@dataclass(frozen=True)
class Hyperparameter:
    """One fitted value: ``name`` (``sigma_w``, or ``sigma_w_2`` per layer), the config key it
    starts from, its initial value and its transform (``log`` or ``logit``)."""

    name: str
    key: str
    initial: float
    transform: str = "log"

    def raw(self, value: float) -> float:
        return math.log(value) if self.transform == "log" else math.log(value / (1 - value))   # logit on (0, 1)

    def natural(self, raw: Tensor) -> Tensor:
        return raw.exp() if self.transform == "log" else torch.sigmoid(raw)


def plan_parameters(kernel_spec: Any, fit_spec: Any) -> tuple[list[Hyperparameter], dict[str, float]]:
    """``(fitted, held)``: the parameters ``fit=mll`` learns and those it holds at their
    configured value. By default (``fit.learn`` null) it learns the nugget, the output scale
    and every kernel parameter whose configured value is positive (``sigma_b = 0`` means a
    network without bias, and stays so); ``fit.learn`` names them explicitly."""
    specs = {p.name: p for p in kernel_parameters(kernel_spec)}
    available = list(specs)
    configured = {name: float(_configured(kernel_spec, name)) for name in available}
    check_learn(kernel_spec, fit_spec)
    if fit_spec.learn is None:
        learn = list(GP_PARAMETERS) + [n for n in available if configured[n] > 0]
    else:
        learn = list(fit_spec.learn)
    if not any(n not in GP_PARAMETERS for n in learn):
        fix = ("name one in fit.learn or give it a positive value" if available else
               "use fit=grid, a kernel with sigmas (e.g. kernel=gcngp), or a base kernel with a parameter (kernel.base.name=rbf or polynomial)")
        raise ConfigError(
            f"fit=mll needs a kernel with a trainable parameter, but kernel={kernel_spec.name} (base {kernel_spec.base.name}) has "
            + (f"only {', '.join(f'{n}={configured[n]:g}' for n in available)}, none of them learned" if available else "none")
            + f"; {fix}")
    fitted, held = [], {n: configured[n] for n in available if n not in learn}
    for name in learn:
        spec = specs.get(name, Parameter(name, per_layer=False))
        key = f"fit.{name}" if name in GP_PARAMETERS else (f"kernel.base.{name}" if name in BASE_KERNELS.get(kernel_spec.base.name, ()) else f"kernel.{name}")
        value = configured.get(name, getattr(fit_spec, name) if name in GP_PARAMETERS else None)
        if value is not None and not value > 0:
            raise ConfigError(f"fit=mll learns {name} on a log scale, so its initial value {key}={value:g} must be positive; "
                              f"set {key} to a positive value" + ("" if name in GP_PARAMETERS else f" or leave {name} out of fit.learn"))
        transform = spec.transform
        if transform == "logit" and not value < spec.upper:
            raise ConfigError(f"fit=mll learns {name} in (0, {spec.upper:g}), so its initial value {key}={value:g} must be below {spec.upper:g}")
        if spec.per_layer and fit_spec.per_layer:
            fitted += [Hyperparameter(f"{name}_{l}", key, value, transform) for l in range(1, kernel_spec.layers + 1)]
        else:
            fitted.append(Hyperparameter(name, key, value if value is not None else math.nan, transform))
    return fitted, held


class Hyperparameters(torch.nn.Module):
    """The fitted values as unconstrained ``raw`` parameters (``value = exp(raw)`` or
    ``sigmoid(raw)``), and the values the blocks and the objective read."""

    def __init__(self, fitted: list[Hyperparameter], held: dict[str, float], layers: int, dtype: torch.dtype, device,
                 architecture: tuple[str, ...] = ()):
        super().__init__()
        self.architecture = architecture      # the kernel's own parameter names (the base kernel's are apart)
        self.specs = {p.name: p for p in fitted}
        self.held = dict(held)
        self.layers = layers
        self.raw = torch.nn.ParameterDict({
            p.name: torch.nn.Parameter(torch.tensor(p.raw(p.initial) if math.isfinite(p.initial) else 0.0, dtype=dtype, device=device))
            for p in fitted
        })

    def start(self, name: str, value: float) -> None:
        """Start ``name`` from ``value`` (a data-dependent default, e.g. the nugget), or hold it there when it is not fitted."""
        if name not in self.raw:
            self.held[name] = value
            return
        with torch.no_grad():
            self.raw[name].fill_(self.specs[name].raw(value))

    def values(self) -> dict:
        """Every value: the fitted ones as tensors (natural scale; ``sigma_w_2`` one per layer), the held ones as numbers."""
        return {**self.held, **{name: self.specs[name].natural(raw) for name, raw in self.raw.items()}}

    def value(self, name: str) -> "Tensor | float":
        """The natural value of ``name``: a tensor when fitted, a number when held."""
        return self.specs[name].natural(self.raw[name]) if name in self.raw else self.held[name]

    def network_values(self) -> dict:
        """Values for the kernel entry's ``architecture`` (per-layer ones as lists)."""
        return architecture_values(self.values(), self.architecture, self.layers)

    def base(self, base: BaseKernel) -> BaseKernel:
        return fitted_base(base, self.values())

    def snapshot(self) -> dict[str, float]:
        """Every fitted value as a number."""
        with torch.no_grad():
            return {name: float(self.specs[name].natural(raw)) for name, raw in self.raw.items()}


def architecture_values(values: dict, names: tuple[str, ...], layers: int) -> dict:
    """The architecture's arguments among ``values``: ``name``, or ``name_1 .. name_L`` (one per
    layer) given back as a list."""
    out = {}
    for name in names:
        if name in values:
            out[name] = values[name]
        elif f"{name}_1" in values:
            out[name] = [values[f"{name}_{l}"] for l in range(1, layers + 1)]
    return out


def fitted_base(base: BaseKernel, values: dict) -> BaseKernel:
    """``base`` with its learnable parameters (``gamma``, ``c``) taken from ``values`` where they are."""
    return base.with_values({n: values[n] for n in BASE_KERNELS.get(base.name, ()) if n in values})


def _float64(value: "Tensor | float", device) -> Tensor:
    return value.double() if isinstance(value, Tensor) else torch.tensor(float(value), dtype=torch.float64, device=device)


def log_marginal_likelihood(kernel: Kernel, y: Tensor, nugget: "Tensor | float", output_scale: "Tensor | float", low_rank: bool) -> Tensor:
    """``log p(Y) / (n C)`` (see the module docstring) for the kernel on the training nodes
    (its rows, in order, match ``y``'s)."""
    n, outputs = y.shape
    quad, logdet = quadratic_and_logdet(kernel, y, nugget, low_rank)
    scale = _float64(output_scale, quad.device)
    total = -quad / (2 * scale) - outputs / 2 * (n * torch.log(scale) + logdet) - n * outputs / 2 * math.log(2 * math.pi)
    return total / (n * outputs)


def quadratic_and_logdet(kernel: Kernel, y: Tensor, nugget: "Tensor | float", low_rank: bool) -> tuple[Tensor, Tensor]:
    """``(tr(Y^T (K_bb + nu I)^-1 Y), log|K_bb + nu I|)`` in float64, by the posterior strategy's
    own solve (:func:`~.inference.strategy_of`): a root ``Q_b`` through Woodbury and the
    determinant lemma when the kernel is low rank or ``Q_b`` has fewer columns than rows, else
    ``K_bb + nu I`` factorised. Raises :class:`KernelError` when it is not positive definite."""
    strategy = strategy_of(kernel, y.size(0), low_rank)
    values = kernel.root if strategy is LowRankPosterior else kernel.dense()
    return strategy.quadratic_and_logdet(values, y, _float64(nugget, values.device))


def training_kernel(network: Block, ctx: KernelContext, train: Tensor) -> Kernel:
    """``K`` on the training nodes, differentiably: exact, the square over the training nodes'
    supports (the node-set evaluation); low rank, the rows ``Q_b`` of the Nystrom factor."""
    if ctx.low_rank:
        return Kernel(train, root=network(None, ctx, None).root[train])
    return network(None, ctx, train)


ROW_SETTINGS = ("sigma_w", "sigma_b")   # the kernel settings a results row has columns for (the others are in its extra)


@dataclass
class FitResult:
    """The fitted values (natural scale), the held ones, the objective per step."""

    values: dict[str, float]
    held: dict[str, float]
    objective: float
    trace: list[float]
    steps: int
    seconds: float = 0.0
    layers: int = 1
    architecture: tuple[str, ...] = ()
    warnings: list = field(default_factory=list)   # the row's warnings (a fit that never left its start)

    def value(self, name: str) -> float:
        """A fitted or held value."""
        return self.values[name] if name in self.values else self.held[name]

    @property
    def nugget(self) -> float:
        """``nu``, absolute (the grid's nugget is ``nu / mean diag K``)."""
        return self.value("nugget")

    def network_values(self) -> dict:
        """Fitted architecture values for the kernel entry's ``architecture`` (numbers, or lists per layer)."""
        return architecture_values(self.values, self.architecture, self.layers)

    def base(self, base: BaseKernel) -> BaseKernel:
        return fitted_base(base, self.values)

    def row(self) -> dict:
        """Results-row columns: the setting columns hold the values the run used, so a fitted
        ``sigma_w`` / ``sigma_b`` replaces the configured one there (the configured value was
        only the fit's start; fitted per layer, the column is empty and ``fitted_sigma_w_1`` ...
        hold the values); ``fitted_<name>`` for every fitted value (``fitted_nugget`` is
        absolute, the row's ``nugget`` the same nugget relative to the mean diagonal of K, as a
        grid's), and the objective."""
        used = {name: None if isinstance(value, list) else value for name, value in self.network_values().items() if name in ROW_SETTINGS}
        return {**used, **{f"fitted_{name}": value for name, value in self.values.items()},
                "fit_mll": self.objective, "fit_steps": self.steps}

    def summary(self) -> str:
        fitted = ", ".join(f"{name}={value:.4g}" + (" (absolute)" if name == "nugget" else "") for name, value in self.values.items())
        return f"fit=mll after {self.steps} steps in {self.seconds:.2f} s: log marginal likelihood / (n C) {self.objective:.5f}; fitted {fitted}"


def fit_hyperparameters(
    kernel_spec: Any, fit_spec: Any, build: Callable[[dict], Block], ctx: KernelContext, y_train: Tensor,
    train: Tensor, progress: bool = True,
) -> FitResult:
    """Maximise :func:`log_marginal_likelihood` over the planned parameters with Adam or
    L-BFGS (``fit.optimizer``, ``fit.steps``, ``fit.lr``); returns the best step's values.
    ``build(values)`` gives the network for architecture values (see :meth:`Hyperparameters.network_values`)."""
    fitted, held = plan_parameters(kernel_spec, fit_spec)
    ctx = replace(ctx, dense_input=True)  # X X^T once, not a root product every step
    dtype, device = ctx.features.dtype, ctx.features.device
    architecture = tuple(p.name for p in KERNELS[kernel_spec.name].learnable(kernel_spec))
    params = Hyperparameters(fitted, held, kernel_spec.layers, dtype, device, architecture)
    y = y_train.to(device)
    fits_base = any(n in params.raw for n in BASE_KERNELS.get(ctx.base.name, ()))

    def kernel_now() -> Kernel:
        step_ctx = ctx.with_base(params.base(ctx.base)) if fits_base else ctx
        return training_kernel(build(params.network_values()), step_ctx, train)

    start = time.perf_counter()
    with torch.no_grad():  # data-dependent starts: nugget relative to mean diag K_bb, output scale at its optimum
        k0 = kernel_now()
        diag_mean = float(k0.diagonal().mean())
        if not diag_mean > 0:
            raise KernelError("fit=mll: the kernel is zero on every training node; check the features and sigmas")
        params.start("nugget", fit_spec.nugget * diag_mean)
        if fit_spec.output_scale is None:   # argmax over s^2: tr(Y^T (K + nu I)^-1 Y) / (n C)
            quad, _ = quadratic_and_logdet(k0, y, params.value("nugget"), ctx.low_rank)
            params.start("output_scale", max(float(quad) / y.numel(), 1e-8))
        else:
            params.start("output_scale", fit_spec.output_scale)

    started = params.snapshot()   # where the fit starts: a fit that never leaves it is said (below)

    def objective() -> Tensor:
        return log_marginal_likelihood(kernel_now(), y, params.value("nugget"), params.value("output_scale"), ctx.low_rank)

    if fit_spec.optimizer == "adam":
        optimiser = torch.optim.Adam(params.parameters(), lr=fit_spec.lr)
    else:
        optimiser = torch.optim.LBFGS(params.parameters(), lr=fit_spec.lr, max_iter=1, history_size=20, line_search_fn="strong_wolfe")
    best_value, best_raw, trace = -math.inf, None, []
    bar = _progress_bar(fit_spec.steps, progress)
    step = 0

    def closure() -> Tensor:
        optimiser.zero_grad()
        try:
            value = objective()
        except KernelError as err:
            if step == 0:
                raise
            raise KernelError(f"fit=mll diverged at step {step}: {err}; use a smaller fit.lr (now {fit_spec.lr:g})") from err
        if not bool(torch.isfinite(value)):
            if step == 0:   # no step taken yet: the start is the problem, which no learning rate can mend (fit.output_scale=1e300)
                raise KernelError(f"fit=mll: the log marginal likelihood is {float(value.detach())} at its start, before any step "
                                  f"(fit.nugget={fit_spec.nugget:g}, fit.output_scale={fit_spec.output_scale}); start nearer the data's scale "
                                  "(fit.nugget=0.1 and fit.output_scale=null, the defaults), or use dtype=float64")
            raise KernelError(f"fit=mll diverged at step {step}: the log marginal likelihood is {float(value)}; use a smaller fit.lr (now {fit_spec.lr:g})"
                              + (" or fit.optimizer=adam" if fit_spec.optimizer == "lbfgs" else ""))
        (-value).backward()
        bad = [name for name, raw in params.raw.items() if raw.grad is not None and not bool(torch.isfinite(raw.grad))]
        if bad and step == 0 and (fit_spec.nugget != 0.1 or fit_spec.output_scale is not None):   # no step yet: a start of the user's
            raise KernelError(f"fit=mll: the gradient of {', '.join(bad)} is not finite at its start (fit.nugget={fit_spec.nugget:g}, "
                              f"fit.output_scale={fit_spec.output_scale}); start nearer the data's scale (fit.nugget=0.1 and "
                              "fit.output_scale=null, the defaults), or use dtype=float64")
        if bad:   # Adam would turn the parameters into NaN and fail a step later, blaming fit.lr
            raise KernelError(f"fit=mll: the gradient of {', '.join(bad)} is not finite at step {step} (objective {float(value.detach()):.5g}); "
                              f"use a smaller fit.lr (now {fit_spec.lr:g}), dtype=float64, or fewer landmarks")
        nonlocal best_value, best_raw
        if float(value.detach()) > best_value:
            best_value, best_raw = float(value.detach()), {k: v.detach().clone() for k, v in params.raw.items()}
        return -value

    try:
        for step in range(fit_spec.steps + 1):
            if step == fit_spec.steps:  # the final values are scored too
                closure()
                break
            loss = float(optimiser.step(closure).detach())
            trace.append(-loss)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(mll=f"{-loss:.5f}")
            elif fit_spec.log_every and (step + 1) % fit_spec.log_every == 0:
                log.info("fit=mll step %d/%d: log marginal likelihood / (n C) %.5f", step + 1, fit_spec.steps, -loss)
    finally:
        if bar is not None:
            bar.close()
    with torch.no_grad():
        for name, raw in best_raw.items():
            params.raw[name].copy_(raw)
    values = params.snapshot()
    warnings = []
    moved = [name for name in values if name in started and not math.isclose(values[name], started[name], rel_tol=1e-3, abs_tol=1e-12)]
    if fit_spec.steps and started and not moved:   # a start where the likelihood is flat (fit.nugget=1e30): the run is the start's
        shown = ", ".join(f"{name} {value:.3g}" for name, value in values.items() if name in started)
        warnings.append(f"fit=mll's values did not move from their start in {fit_spec.steps} steps ({shown}): the marginal likelihood is "
                        f"flat there (fit.nugget={fit_spec.nugget:g} is the start, times the kernel's mean diagonal); "
                        + ("start nearer the data's scale (fit.nugget=0.1, the default) or raise fit.lr" if fit_spec.nugget != 0.1 else
                           "raise fit.lr or fit.steps, or start elsewhere (fit.nugget=0.01 or 1)"))
        log.warning(warnings[-1])
    ratio = values.get("nugget", math.nan) / diag_mean
    if not warnings and "nugget" in started and not 1e-8 <= ratio <= 1e4:   # the labels all noise (or none): the start's basin, most likely
        warnings.append(f"fit=mll's nugget is {ratio:.3g} times the kernel's mean diagonal: the fit takes the labels for "
                        f"{'noise alone' if ratio > 1 else 'noise-free'}, which a start far from the data's scale leads to (fit.nugget="
                        f"{fit_spec.nugget:g}); compare with the default start (fit.nugget=0.1) or fit=grid")
        log.warning(warnings[-1])
    return FitResult(values=values, held=dict(params.held), objective=best_value, trace=trace, steps=fit_spec.steps,
                     seconds=time.perf_counter() - start, layers=kernel_spec.layers, architecture=architecture, warnings=warnings)


def _progress_bar(total: int, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="fit=mll", leave=False)
