"""GNNGP kernels as GPyTorch kernels (the optional extra ``pip install -e ".[gpytorch]"``).

:class:`GNNGPKernel` is a ``gpytorch.kernels.Kernel`` over node indices: an input row is a
node id (``n x 1``, any float dtype), and ``K(x1, x2) = K[ids1, ids2]`` is the architecture's
kernel from :mod:`gnngp_cli.kernels` (exact: the square over the nodes' supports; low rank:
the Nystrom factor ``Q`` over every node, returned as a root ``Q[ids1] Q[ids2]^T`` so that
GPyTorch's solves and log-determinants use Woodbury). Its ``sigma_w``, ``sigma_b``, ``alpha``
and base ``gamma`` are registered GPyTorch parameters (``raw_sigma_w`` ... with ``Positive``
constraints, ``alpha`` in ``Interval(0, 1)``), so an ``ExactGP`` with ``ScaleKernel`` and a
``GaussianLikelihood`` trains them with ``ExactMarginalLogLikelihood``.

Correspondence with ``fit=mll`` (:mod:`gnngp_cli.gp.mll`): ``ScaleKernel.outputscale = s^2`` and
``GaussianLikelihood.noise = s^2 nu``. GPyTorch's objective divides by ``n``; with the ``C``
one-hot columns as a ``C x n`` target (independent outputs, shared kernel) it returns one value
per column, and their mean is ``fit=mll``'s objective ``log p(Y) / (n C)``.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import Tensor

try:
    import gpytorch
    from gpytorch.constraints import Interval, Positive
    from linear_operator.operators import MatmulLinearOperator, RootLinearOperator
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError('gnngp_cli.gpytorch needs GPyTorch: pip install -e ".[gpytorch]"') from err

from .config import kernel_spec
from .graph.operators import Adjacency
from .errors import ConfigError
from .gp.mll import architecture_values, kernel_parameters, plan_parameters, training_kernel
from .kernels import BASE_KERNELS, KERNELS, BaseKernel, KernelContext
from .schema import FitConfig, freeze


INTEGER_IDS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)   # node ids; bool, float, complex are not


def check_graph_inputs(data: Any, landmarks: Optional[Any]) -> Optional[Tensor]:
    """The graph and landmarks a :class:`GNNGPKernel` is built on, checked as ``gnngp run``
    checks a dataset and its landmarks, each mistake one line; the landmarks sorted."""
    x, edge_index = getattr(data, "x", None), getattr(data, "edge_index", None)
    if not isinstance(x, Tensor) or x.dim() != 2 or not x.is_floating_point() or x.size(1) == 0:
        raise ConfigError("GNNGPKernel needs data.x, a 2-D float tensor of node features (nodes x features, at least one feature)")
    n = int(data.num_nodes or 0)
    if n == 0:
        raise ConfigError("GNNGPKernel: the graph has no nodes")
    if x.size(0) != n:
        raise ConfigError(f"GNNGPKernel: data.x has {x.size(0)} rows but the graph has {n} nodes; give one feature row per node")
    if not torch.isfinite(x).all():
        raise ConfigError("GNNGPKernel: data.x contains NaN or infinite values; clean them first")
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.dtype not in INTEGER_IDS:
        raise ConfigError("GNNGPKernel needs data.edge_index, a 2 x E integer tensor of node ids")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        bad = int(edge_index.max()) if int(edge_index.max()) >= n else int(edge_index.min())
        raise ConfigError(f"GNNGPKernel: data.edge_index names node {bad}, outside [0, {n}); every edge must join nodes of the graph")
    if landmarks is None:
        return None
    try:
        ids = torch.as_tensor(landmarks)
    except (TypeError, ValueError, RuntimeError, OverflowError) as err:
        raise ConfigError(f"GNNGPKernel: landmarks must be integer node ids of the graph ({type(err).__name__}: {str(err).splitlines()[0][:80]})") from None
    if ids.numel() == 0:
        raise ConfigError("GNNGPKernel: landmarks is empty; give at least one node id, or landmarks=None for the exact kernel")
    if ids.dtype not in INTEGER_IDS or ids.dim() != 1:
        raise ConfigError(f"GNNGPKernel: landmarks must be a 1-D list or tensor of integer node ids, got {ids.dtype} of shape {tuple(ids.shape)}")
    if int(ids.min()) < 0 or int(ids.max()) >= n:
        bad = int(ids.max()) if int(ids.max()) >= n else int(ids.min())
        raise ConfigError(f"GNNGPKernel: landmark {bad} is outside [0, {n}); landmarks are node ids of the graph")
    if torch.unique(ids).numel() != ids.numel():
        raise ConfigError("GNNGPKernel: landmarks name a node twice; give each landmark once")
    return ids.to(x.device).sort()[0]


def _learned_names(learn: Any, architecture: str, available: list[str]) -> Optional[list[str]]:
    """``learn`` as a list of names this kernel has: one string is one name (``"sigma_w"``, not
    its characters); an unknown name, or a name of the GP's own (the nugget and output scale: the
    likelihood's noise and a ``ScaleKernel`` in GPyTorch), is one line."""
    if learn is None:
        return None
    names = [learn] if isinstance(learn, str) else list(learn) if isinstance(learn, (list, tuple, set, frozenset)) else None
    if names is None:
        raise ConfigError(f"GNNGPKernel: learn takes a parameter's name or a list of names (learn=[\"sigma_w\"]), not {type(learn).__name__}")
    for name in names:
        if name not in available:
            own = (" (in GPyTorch the nugget is the likelihood's noise and the output scale a ScaleKernel's outputscale)"
                   if name in ("nugget", "output_scale") else "")
            raise ConfigError(f"GNNGPKernel('{architecture}'): learn names {name!r}, which this kernel does not have{own}; "
                              f"use some of {', '.join(available) or '(none: give a base kernel with a parameter)'}")
    return names


class GNNGPKernel(gpytorch.kernels.Kernel):
    """``K[ids1, ids2]`` of a GNNGP architecture on the graph ``data`` (a PyG ``Data`` with ``x``
    and ``edge_index``); inputs are node ids as a column (``... x n x 1``).

    ``learn`` names the fitted parameters, a name or a list of names (default: every parameter of
    the architecture with a positive value; ``sigma_b = 0`` is a network without bias); an
    unknown name is a :class:`~gnngp_cli.errors.ConfigError`; ``per_layer`` fits one value per
    layer. ``landmarks`` (node ids) makes the kernel low rank (Nystrom). Defaults are the
    kernel entry's for the task of ``data``; a value a run chooses among candidates (GPRGP's
    filter, ``coefficients``) takes the first candidate unless given."""

    has_lengthscale = False

    def __init__(self, architecture: str, data: Any, *, learn: Optional[Sequence[str]] = None, per_layer: bool = False,
                 landmarks: Optional[Tensor] = None, dtype: torch.dtype = torch.float64, **settings: Any):
        super().__init__()
        if dtype not in (torch.float32, torch.float64):
            raise ConfigError(f"GNNGPKernel: dtype={dtype} is not a float dtype; use torch.float64 (the default) or torch.float32")
        landmarks = check_graph_inputs(data, landmarks)
        self.config = kernel_spec(architecture, getattr(data, "task", "classification"), **settings)
        entry = KERNELS[architecture]
        base_names = BASE_KERNELS.get(self.config.base.name, ())
        self.base_names = base_names
        learn = _learned_names(learn, architecture, [p.name for p in kernel_parameters(self.config)])
        if learn is None:  # every parameter with a positive value (output scale and noise belong to ScaleKernel and the likelihood)
            base = self.config.base
            learn = [p.name for p in kernel_parameters(self.config) if getattr(base if p.name in base_names else self.config, p.name) > 0]
            if not learn:
                raise ConfigError(f"GNNGPKernel('{architecture}') with base '{base.name}' has no parameter to learn; "
                                  "use positive sigmas or a base kernel with gamma (base='rbf')")
        fit = freeze(FitConfig(method="mll", learn=list(learn), per_layer=per_layer, nugget=1.0, output_scale=1.0))
        fitted, self.held = plan_parameters(self.config, fit)
        self.fitted = [p for p in fitted if p.name not in ("nugget", "output_scale")]
        self._build = lambda values: entry.architecture(self.config, values)
        arch = self._build({})
        device = data.x.device
        adjacency = Adjacency.from_graph(data.edge_index, data.num_nodes, arch.adjacency, dtype, device)
        base = self.config.base
        features = data.x.to(dtype) * (base.scale ** 0.5 if base.scale != 1 else 1)   # C0 reads sqrt(scale) x
        self.ctx = KernelContext(features, adjacency, BaseKernel(base.name, base.gamma, base.c, base.d),
                                 landmarks)
        self.num_nodes = int(data.num_nodes)
        for p in self.fitted:
            constraint = Interval(0.0, 1.0) if p.transform == "logit" else Positive()
            self.register_parameter(f"raw_{p.name}", torch.nn.Parameter(torch.zeros((), dtype=dtype, device=device)))
            self.register_constraint(f"raw_{p.name}", constraint)
            self.initialize(**{f"raw_{p.name}": constraint.inverse_transform(torch.tensor(p.initial, dtype=dtype, device=device))})

    def value(self, name: str) -> Tensor:
        """The constrained (natural) value of a fitted parameter, e.g. ``value("sigma_w")``."""
        constraint = getattr(self, f"raw_{name}_constraint")
        return constraint.transform(getattr(self, f"raw_{name}"))

    def values(self) -> dict:
        """Every architecture value (fitted ones as tensors, per-layer ones as lists) and the base kernel's."""
        flat = {**self.held, **{p.name: self.value(p.name) for p in self.fitted}}
        names = {p.key.rsplit(".", 1)[-1] for p in self.fitted} | set(self.held)   # kernel.sigma_w -> sigma_w (also for sigma_w_2 per layer)
        return architecture_values(flat, tuple(names), self.config.layers)

    def _context(self, values: dict) -> KernelContext:
        fitted = {n: values[n] for n in self.base_names if isinstance(values.get(n), Tensor)}
        return self.ctx.with_base(self.ctx.base.with_values(fitted)) if fitted else self.ctx

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise ValueError("GNNGPKernel takes node ids in one column; last_dim_is_batch is not supported")
        batch = x1.shape[:-2]
        ids1, ids2 = self._ids(x1), self._ids(x2)
        if diag and ids1.numel() != ids2.numel():
            raise ValueError(f"GNNGPKernel: diag=True pairs the inputs' nodes one to one, and they hold {ids1.numel()} and {ids2.numel()}")
        values = self.values()
        network = self._build({k: v for k, v in values.items() if k not in self.base_names}).network
        ctx = self._context(values)
        out_dtype = x1.dtype   # the model's dtype (float32 inputs and targets: the kernel's values in float32 too, not float64's)
        if ctx.low_rank:
            root = network(None, ctx, None).root.to(out_dtype)
            q1, q2 = root[ids1], root[ids2]
            if diag:
                out = (q1 * q2).sum(-1)
            elif torch.equal(ids1, ids2):
                out = RootLinearOperator(q1)
            else:
                out = MatmulLinearOperator(q1, q2.T)
        else:
            nodes = torch.unique(torch.cat([ids1, ids2]))
            dense = training_kernel(network, ctx, nodes).dense().to(out_dtype)
            pos1, pos2 = torch.searchsorted(nodes, ids1), torch.searchsorted(nodes, ids2)
            out = dense[pos1, pos2] if diag else dense[pos1][:, pos2]
        if len(batch):
            out = out.expand(*batch, *out.shape)
        return out

    def _ids(self, x: Tensor) -> Tensor:
        """The node ids of ``x`` (``... x n x 1``); batch copies must hold the same ids."""
        if x.size(-1) != 1:
            raise ValueError(f"GNNGPKernel takes node ids as one column (n x 1), got inputs of shape {tuple(x.shape)}")
        if not x.is_floating_point():   # a bool or integer tensor: GPyTorch's models take float inputs
            raise ValueError(f"GNNGPKernel inputs are node ids as a float column (ids.double().unsqueeze(-1)), not {x.dtype}")
        if x.dim() < 2 or x.size(-2) == 0:
            raise ValueError("GNNGPKernel: the inputs hold no node id; give at least one")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"GNNGPKernel inputs must be node ids in [0, {self.num_nodes}), not NaN or infinite")
        flat = x.reshape(-1, x.size(-2))
        if not bool((flat == flat[:1]).all()):
            raise ValueError("GNNGPKernel: batch copies of the inputs must hold the same node ids")
        ids = flat[0].round().long()
        if not bool((ids.to(x.dtype) == flat[0]).all()) or (ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_nodes)):
            raise ValueError(f"GNNGPKernel inputs must be node ids in [0, {self.num_nodes})")
        return ids
