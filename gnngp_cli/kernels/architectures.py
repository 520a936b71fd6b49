"""GNNGP kernels as compositions of blocks, each written like its network layer, and the
registry of them: one entry per kernel, carrying everything the tool needs of it.

``L`` is the number of layers; ``g`` the ReLU expectation; ``C0`` the base kernel.
"""
from __future__ import annotations

import math

import torch
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from ..errors import ConfigError
from ..schema import SQRT_TENTH, BaseKernelConfig, KernelConfig
from .activations import ACTIVATIONS, RELU
from .blocks import Add, Bias, Block, Conv, Elementwise, Input, MixedWeight, Product, ReLU, Scale, Serial, Tangent, Weight, has_parameters, is_constant
from .filters import HopConv, Poly, filter_coefficients, filter_grid, hop_paths
from .layers import ActivationLayer, BlockNetwork


@dataclass(frozen=True)
class Architecture:
    """A built kernel: the blocks, the adjacency normalisation and the method label."""

    name: str
    label: str
    network: Block
    adjacency: str = "sym"


@dataclass(frozen=True)
class Parameter:
    """A numeric parameter of a kernel's builder: its range (``lower`` to ``upper``), whether
    ``fit=mll`` may learn it (on a log scale, or a logit one when it has an upper bound) and
    whether ``fit.per_layer`` gives it one value per layer."""

    name: str
    lower: float = 0.0
    upper: Optional[float] = None
    learnable: bool = True
    per_layer: bool = True

    @property
    def transform(self) -> str:
        return "logit" if self.upper is not None else "log"

    def check(self, value: Any) -> None:
        if value is None:
            return
        if value < self.lower or (self.upper is not None and value > self.upper):
            if self.upper is not None:
                what = f"must lie in [{self.lower:g}, {self.upper:g}]"
            elif self.name.startswith("sigma"):
                what = f"is negative; a standard deviation must be >= {self.lower:g}"
            else:
                what = f"must be >= {self.lower:g}"
            raise ConfigError(f"kernel.{self.name}={value} {what}")


def sigmas(*names: str, per_layer: bool = True) -> tuple[Parameter, ...]:
    """Standard deviations (``>= 0``, learnable)."""
    return tuple(Parameter(name, per_layer=per_layer) for name in names)


@dataclass(frozen=True)
class KernelEntry:
    """One kernel of the zoo, with everything the tool reads of it:

    - ``build(layers, **arguments) -> Block``, its typed ``config`` (its arguments and their
      defaults), ``label`` (``GCNGP``; the low-rank twin adds ``-X``), its ``adjacency``
      normalisation and ``defaults`` per task or dataset (see :func:`~gnngp_cli.config.method_defaults`);
    - ``parameters``: the numeric arguments, with their ranges, and which ``fit=mll`` learns
      (``used(options)`` narrows them to those a configuration reads, as ``composed`` does);
    - ``choices``: the arguments chosen on validation (``fit=grid``) or by the marginal likelihood
      (``fit=mll``) among candidates, ``name -> candidates(options)``;
    - its wide random network, whose limit the kernel is (``gnngp verify``), is not listed: the
      blocks' own layers make it (:meth:`network`);
    - ``gnn``: the GNN baseline of the same architecture (tables pair them);
    - ``backends``: the compute backends that run it (``None``: every one);
    - ``note(options)``: a warning for some settings; ``check(options)``: a check beyond the ranges;
    - ``ignores``: the keys every kernel has (``layers``, ``adjacency``) that this one does not
      read, which a run refuses when they are set (:mod:`gnngp_cli.readers`)."""

    name: str
    label: str
    build: Callable[..., Block]
    config: type
    adjacency: str = "sym"
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    check: Optional[Callable[[Any], None]] = None
    parameters: tuple[Parameter, ...] = ()
    used: Optional[Callable[[Any], Iterable[str]]] = None
    choices: Mapping[str, Callable[[Any], list]] = field(default_factory=dict)
    gnn: Optional[str] = None
    backends: Optional[tuple[str, ...]] = None
    note: Optional[Callable[[Any], Optional[str]]] = None
    ignores: tuple[str, ...] = ()

    def network(self, arguments: Mapping[str, Any], in_dim: int, width: int) -> BlockNetwork:
        """The random network of width ``width`` whose infinite-width kernel this entry's kernel
        is: its blocks' own layers (:mod:`.layers`), built with ``arguments`` (those of
        :meth:`arguments` and a chosen candidate of each choice)."""
        return BlockNetwork(self.build(**arguments), in_dim, width)

    def validate(self, options: Any) -> None:
        for p in self.parameters:
            p.check(options.get(p.name))
        for name, candidates in self.choices.items():
            candidates(options)       # a malformed candidate list is a one-line ConfigError
        if self.check is not None:
            self.check(options)

    def arguments(self, options: Any) -> dict:
        """The builder's arguments as configured: ``layers`` and the architecture's own config fields."""
        own = [f.name for f in fields(self.config) if f.name not in KERNEL_COMMON]
        return {"layers": options.layers, **{key: getattr(options, key) for key in own}}

    def learnable(self, options: Any) -> list[Parameter]:
        """The parameters ``fit=mll`` may learn for this configuration."""
        used = None if self.used is None else set(self.used(options))
        return [p for p in self.parameters if p.learnable and (used is None or p.name in used)]

    def candidates(self, options: Any) -> dict[str, list]:
        """The candidates of each argument chosen on validation (or by the marginal likelihood)."""
        return {name: candidates(options) for name, candidates in self.choices.items()}

    def architecture(self, options: Any, values: Optional[Mapping[str, Any]] = None) -> Architecture:
        """The blocks of the kernel configured by ``options`` (method defaults already resolved);
        ``values`` replace configured arguments (fitted ones, one candidate of each choice; an
        argument chosen among candidates and not given takes the first)."""
        values = dict(values or {})
        for name, candidates in self.choices.items():
            values.setdefault(name, candidates(options)[0])
        network = self.build(**{**self.arguments(options), **values})
        if not isinstance(network, Block):   # a registered builder's bug: one line naming it, not an AttributeError deep in the job
            raise ConfigError(f"the builder of kernel={self.name} returned a {type(network).__name__}, not a Block (a composition of "
                              "gnngp_cli.kernels' blocks: Serial(Input(), Weight(s), Conv(), ...)); fix its builder (docs/extending.md)")
        limit = options.get("limit", "nngp")
        if limit == "ntk":
            if not has_parameters(network):
                raise ConfigError(f"kernel={self.name} has no trained parameters (no weight, no bias), so its tangent kernel is 0; "
                                  "use kernel.limit=nngp, or a kernel with weights")
            network = Tangent(network)
        return Architecture(self.name, kernel_label(self.name, options.low_rank, limit), network, options.adjacency or self.adjacency)

    def runs_on(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends


KERNELS: dict[str, KernelEntry] = {}
KERNEL_COMMON = {f.name for f in fields(KernelConfig)}   # what every kernel has; the rest are its arguments


def register_kernel(name: str, label: str, config: type, adjacency: str = "sym",
                    defaults: Optional[Mapping[str, Mapping[str, Any]]] = None,
                    check: Optional[Callable[[Any], None]] = None, *, parameters: Sequence[Parameter] = (),
                    used: Optional[Callable[[Any], Iterable[str]]] = None, choices: Optional[Mapping[str, Callable[[Any], list]]] = None,
                    gnn: Optional[str] = None, backends: Optional[Sequence[str]] = None,
                    note: Optional[Callable[[Any], Optional[str]]] = None, ignores: Sequence[str] = ()):
    """Decorator: add the builder ``build(layers, **arguments) -> Block`` (its arguments are
    the fields of ``config``) to the zoo as ``kernel=name`` (and its low-rank twin
    ``kernel=name_x``), with what :class:`KernelEntry` lists. Everything else (config options,
    CLI choices, fitting, verify, labels, report names) is read from the entry."""
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name.endswith("_x"):
        raise ConfigError(f"a kernel's name is a word of lower-case letters, digits and _ that does not end in _x (its low-rank twin's), "
                          f"which kernel=<name> can take; not {name!r}")
    if not isinstance(label, str) or not label.strip():
        raise ConfigError(f"kernel {name!r} needs a label, the method's name in rows and reports (e.g. \"GCNGP\")")
    if not (isinstance(config, type) and issubclass(config, KernelConfig)):
        raise ConfigError(f"kernel {name!r}: its config is a dataclass deriving gnngp_cli.schema.KernelConfig, not {config!r}")
    own = {f.name for f in fields(config)}
    stray = [p.name for p in parameters if p.name not in own]
    if stray:   # fit=mll would look them up in the config (an AttributeError at the fit, fit=grid ran)
        raise ConfigError(f"kernel {name!r}: its parameters {', '.join(stray)} are not fields of its config {config.__name__}; "
                          "a parameter is one of the config's fields")

    def add(build: Callable[..., Block]) -> Callable[..., Block]:
        KERNELS[name] = KernelEntry(name, label, build, config, adjacency, dict(defaults or {}), check, tuple(parameters), used,
                                    dict(choices or {}), gnn, None if backends is None else tuple(backends), note, tuple(ignores))
        return build
    return add


Value = Union[float, Any]  # a number, or a 0-dimensional tensor being fitted (see gnngp_cli.gp.mll)


def at_layer(value: Union[Value, Sequence[Value]], layer: int) -> Value:
    """A parameter of layer ``layer`` (1-based): ``value`` itself, or its entry when a list
    gives one value per layer (``fit.per_layer=true``)."""
    return value[layer - 1] if isinstance(value, (list, tuple)) else value


# The paper's bias on every dataset: 0 on classification sets, sqrt(0.1) on regression sets.
BIAS_DEFAULTS = {"*": {"sigma_b": 0.0}, "regression": {"sigma_b": SQRT_TENTH}}


@dataclass
class GCNGPConfig(KernelConfig):
    sigma_w: float = 1.0                # the weights' standard deviation
    sigma_b: Optional[float] = None     # the biases' standard deviation; null: 0, sqrt(0.1) on regression sets


@dataclass
class GCN2GPConfig(KernelConfig):
    sigma_w: float = 1.0                # the weights' standard deviation
    alpha: float = 0.1                  # GCNII's initial residual: the share of the input layer in each layer
    theta: float = 0.5                  # GCNII's identity mapping: beta_l = log(theta / l + 1)


@dataclass
class SAGEGPConfig(KernelConfig):
    sigma_w1: Optional[float] = None    # the node's own weight W1's standard deviation; null: 0, sqrt(0.1) on Reddit (the paper's)
    sigma_w2: float = 1.0               # the neighbours' weight W2's standard deviation (W1: the node's own)


@dataclass
class GGPConfig(KernelConfig):
    base: BaseKernelConfig = field(default_factory=lambda: BaseKernelConfig(name="polynomial", c=5.0, d=3.0))


@dataclass
class RBFConfig(KernelConfig):
    base: BaseKernelConfig = field(default_factory=lambda: BaseKernelConfig(name="rbf"))
    gamma_search: bool = True


@dataclass
class ComposedConfig(KernelConfig):
    sigma_w: float = 1.0                # the sigma of the blocks `weight` and `mixed`
    sigma_b: Optional[float] = None     # the sigma of the block `bias`; null: as GCN-GP
    first: Any = field(default_factory=lambda: ["input", "weight", "conv", "bias"])   # blocks of layer 1
    hidden: Any = field(default_factory=lambda: ["conv"])                            # blocks of layers 2..L


def _gcn2_note(options: Any) -> Optional[str]:
    if options.layers >= 3:
        return (f"GCNIIGP with L={options.layers} is the paper's kernel recursion, not the wide-network limit of GCNII: from L=3 on the "
                "identity mapping passes rectified, non-Gaussian features to the next ReLU (gnngp verify kernel=gcn2gp "
                "kernel.layers=3 fails)")
    return None


@register_kernel("gcngp", "GCNGP", GCNGPConfig, defaults=BIAS_DEFAULTS, parameters=sigmas("sigma_w", "sigma_b"), gnn="gcn")
def gcn(layers: int, sigma_w: float, sigma_b: float) -> Block:
    """GCN ``X <- A relu(X) W + b`` (no activation before the first layer):
    ``K <- s_w^2 A C0 A^T + s_b^2``, then ``L-1`` times ``K <- s_w^2 A g(K) A^T + s_b^2``."""
    first = Serial(Input(), Weight(at_layer(sigma_w, 1)), Conv(), Bias(at_layer(sigma_b, 1)), name="layer 1")
    hidden = [Serial(ReLU(), Weight(at_layer(sigma_w, l)), Conv(), Bias(at_layer(sigma_b, l)), name=f"layer {l}")
              for l in range(2, layers + 1)]
    return Serial(first, *hidden)


@register_kernel("gcn2gp", "GCNIIGP", GCN2GPConfig, gnn="gcn2", note=_gcn2_note,
                 parameters=(Parameter("sigma_w"), Parameter("alpha", upper=1.0, per_layer=False), Parameter("theta", learnable=False)))
def gcn2(layers: int, sigma_w: float, alpha: float = 0.1, theta: float = 0.5) -> Block:
    """GCNII without bias, ``X <- ((1-alpha) A relu(X) + alpha X0)((1-beta_l) I + beta_l W)``,
    ``beta_l = log(theta / l + 1)``: ``K <- s_w^2 A g(C0) A^T``, then for ``l = 1..L-1``
    ``K <- ((1-beta_l)^2 + beta_l^2 s_w^2) ((1-alpha)^2 A g(K) A^T + alpha^2 C0)``."""
    first = Serial(Input(), ReLU(), Conv(), Weight(at_layer(sigma_w, 1)), name="layer 1")
    hidden = []
    for l in range(1, layers):
        beta = math.log(theta / l + 1)
        residual = Add(Serial(ReLU(), Conv(), Scale(1 - alpha)), Serial(Input(), Scale(alpha)))
        hidden.append(Serial(residual, MixedWeight(1 - beta, beta, at_layer(sigma_w, l + 1)), name=f"layer {l + 1}"))
    return Serial(first, *hidden)


@register_kernel("gingp", "GINGP", GCNGPConfig, defaults=BIAS_DEFAULTS, parameters=sigmas("sigma_w", "sigma_b"), gnn="gin")
def gin(layers: int, sigma_w: float, sigma_b: float) -> Block:
    """GIN (eps = 0): aggregation then an MLP: ``K <- s_w^2 A C0 A^T + s_b^2``, then ``L-1``
    times ``K <- s_w^2 g(K) + s_b^2``."""
    first = Serial(Input(), Conv(), Weight(at_layer(sigma_w, 1)), Bias(at_layer(sigma_b, 1)), name="layer 1")
    hidden = [Serial(ReLU(), Weight(at_layer(sigma_w, l)), Bias(at_layer(sigma_b, l)), name=f"layer {l}")
              for l in range(2, layers + 1)]
    return Serial(first, *hidden)


@register_kernel("sagegp", "GraphSAGEGP", SAGEGPConfig, adjacency="row", parameters=sigmas("sigma_w1", "sigma_w2"),
                 defaults={"*": {"sigma_w1": 0.0}, "reddit": {"sigma_w1": SQRT_TENTH}}, gnn="sage")
def sage(layers: int, sigma_w1: float, sigma_w2: float) -> Block:
    """GraphSAGE, mean aggregation, ``X <- relu(X) W1 + A relu(X) W2``:
    ``K <- s_w1^2 C0 + s_w2^2 A C0 A^T``, then ``L-1`` times ``K <- s_w1^2 g(K) + s_w2^2 A g(K) A^T``."""
    def mix(l: int) -> Block:
        return Add(Weight(at_layer(sigma_w1, l)), Serial(Conv(), Weight(at_layer(sigma_w2, l))))

    first = Serial(Input(), mix(1), name="layer 1")
    hidden = [Serial(ReLU(), mix(l), name=f"layer {l}") for l in range(2, layers + 1)]
    return Serial(first, *hidden)


@dataclass
class GATGPConfig(KernelConfig):
    sigma_w: float = 1.0                # the weights' standard deviation
    sigma_b: Optional[float] = None     # the biases' standard deviation; null: 0, sqrt(0.1) on regression sets
    sigma_a: float = 1.0                # the attention vectors' standard deviation (a_src and a_dst)
    slope: float = 0.2                  # the LeakyReLU's negative slope between layers (0: a ReLU)
    projection: bool = True             # an output projection after each attention layer (the many-head limit, exact); false: none, a Gaussian approximation at L >= 2


def leaky_relu(slope: float) -> Block:
    """``X <- LeakyReLU(X)`` (``x`` above 0, ``slope x`` below). As ``relu(x) - relu(-x) = x``, its
    expectation is ``(1 - slope)^2 g(K) + slope K`` and its derivative's ``(1 - slope)^2 g'(K) + slope``:
    a ReLU scaled by ``1 - slope`` beside the identity scaled by ``sqrt(slope)``, summed as an
    :class:`Add` sums (the sum's kernel and tangent rule are exact here by that identity, not by independence)."""
    if is_constant(slope, 0):
        return ReLU()
    return LeakyReLU(slope)


class LeakyReLU(Add):
    """``X <- LeakyReLU(X)``: its kernel maps are those of the sum in :func:`leaky_relu` (exact by
    the identity there, not by independence), its finite layer the activation itself."""

    def __init__(self, slope: float):
        super().__init__(Serial(ReLU(), Scale(1 - slope)), Scale(math.sqrt(slope)))
        self.slope = slope

    def layer(self, shape):
        return ActivationLayer(lambda h: torch.nn.functional.leaky_relu(h, float(self.slope)), shape)


def attention(sigma_a: float) -> Block:
    """Linear graph attention on features ``H`` of width ``d``, one head per feature ``c``:
    ``X_ic <- sum_j A_ij e^c_ij H_jc``, ``e^c_ij = (a^c_dst . H_i + a^c_src . H_j) / sqrt(d)``,
    ``a^c ~ N(0, s_a^2)`` (PyG's names: ``a_dst`` scores the receiving node ``i``, ``a_src`` the
    neighbour ``j``). A score's two halves are independent of each other and, at infinite width,
    of any one feature of ``H``, so the output's covariance is
    ``s_a^2 (K o A K A^T + A (K o K) A^T)``: the receiver's half is a :class:`Product` of its score
    (a weight: ``s_a^2 K``) and the aggregated message, the neighbour's half an aggregation of the
    product of its score and message. One feature's output is a score times a Gaussian, not a
    Gaussian: :func:`gat` sums many heads through an output projection before the next activation."""
    return Add(Product(Weight(sigma_a), Conv()), Serial(Product(Weight(sigma_a), Scale(1.0)), Conv()))


def _gat_note(options: Any) -> Optional[str]:
    if str(getattr(options, "limit", "nngp")) == "ntk" and not options.projection:
        return (f"GATGP's tangent kernel with kernel.projection=false (L={options.layers}): without the output projection a unit's "
                "empirical tangent kernel does not converge to it as the width grows (each unit's gradients go through one head's random "
                "attention score; gnngp verify fails it at every depth), so it is no network's lazy-training limit; kernel.projection=true "
                "is the exact one")
    if options.layers >= 2 and not options.projection:
        return (f"GATGP with kernel.projection=false and L={options.layers}: without the output projection one feature's attention output "
                "is a random score times a Gaussian, not a Gaussian, so the next LeakyReLU's expectation is not the kernel's: the kernel is a "
                "Gaussian approximation of this network (docs/kernels.md gives its measured error); kernel.projection=true is the exact limit")
    if options.layers >= 4:
        return (f"GATGP with L={options.layers}: each linear-attention layer multiplies the kernel by itself (K o A K A^T), so the spread "
                "of the nodes' variances grows like a power 2^L; measured on Cora, 0.799 at L=2, 0.782 at L=3, 0.52 at L=4, "
                "and at L=5 the float32 kernel overflows (exact) or predicts near chance (low rank: 0.14; 0.12 in float64, so the "
                "model, not round-off). Linear attention is a shallow model: use kernel.layers=2 or 3")
    return None


@register_kernel("gatgp", "GATGP", GATGPConfig, adjacency="row", defaults=BIAS_DEFAULTS,
                 parameters=(*sigmas("sigma_w", "sigma_b", "sigma_a"), Parameter("slope", upper=1.0, learnable=False)), gnn="gat", note=_gat_note)
def gat(layers: int, sigma_w: float, sigma_b: float, sigma_a: float, slope: float = 0.2, projection: bool = True) -> Block:
    """GAT with linear attention (Cobanoglu 2023's infinite-width GAT; PyG's ``GATConv`` with the
    softmax left out), a head per feature and an output projection ``W_o`` over the heads (the
    many-head limit of Hron et al. 2020): ``X <- att_A(phi(X) W) W_o + b``, ``phi`` a LeakyReLU
    (none before the first layer), ``att_A`` the attention of :func:`attention` over the
    row-normalised adjacency (each node's attention weights sum over its neighbours, as a
    softmax's do), ``W_o ~ N(0, 1 / d)``: ``K <- att(s_w^2 C0) + s_b^2``, then ``L-1`` times
    ``K <- att(s_w^2 phi(K)) + s_b^2``. ``W_o`` sums ``d`` independent heads, so each output
    feature is Gaussian at infinite width and every layer's kernel is the exact limit; it adds
    ``att(...)`` to the tangent kernel (its own gradient). Without it (``projection=False``) the
    kernel is unchanged but only a Gaussian approximation of that network at ``L >= 2``."""
    def layer(l: int, start: Block) -> Block:
        project = (Weight(1.0),) if projection else ()
        return Serial(start, Weight(at_layer(sigma_w, l)), attention(at_layer(sigma_a, l)), *project, Bias(at_layer(sigma_b, l)), name=f"layer {l}")

    return Serial(layer(1, Input()), *[layer(l, leaky_relu(slope)) for l in range(2, layers + 1)])


@register_kernel("ggp", "GGP", GGPConfig, adjacency="row", ignores=("layers",))
def ggp(layers: int = 1) -> Block:
    """GGP baseline: ``K = A C0 A^T`` (polynomial ``C0`` by default)."""
    return Serial(Input(), Conv(), name="layer 1")


@register_kernel("rbf", "RBF", RBFConfig, ignores=("layers", "adjacency"))
def rbf(layers: int = 1) -> Block:
    """No graph: ``K = C0`` (an RBF ``C0`` by default)."""
    return Serial(Input(), name="input")


# GPRGP's default filter grid, chosen on validation (kernel.coefficients overrides it): no
# propagation, low-pass A and I + A, high-pass I - A, and the degree-2 low- and high-pass mixes.
GPR_FILTER_GRID = ((1.0,), (0.0, 1.0), (1.0, 1.0), (1.0, -1.0), (1.0, 1.0, 1.0), (1.0, -1.0, 1.0))


@dataclass
class GPRGPConfig(KernelConfig):
    sigma_w: float = 1.0                # the weights' standard deviation
    sigma_b: Optional[float] = None     # the biases' standard deviation; null: 0, sqrt(0.1) on regression sets
    coefficients: Any = None            # a filter [g0, g1, ...], or a list of filters chosen on validation; null: GPR_FILTER_GRID


def plain(value: Any) -> Any:
    """A value of the options as plain Python: mappings as dicts, sequences (but strings) as lists."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(item) for item in value]
    return value


def filters(options: Any) -> list[tuple[float, ...]]:
    """The filters a GPRGP kernel chooses from: ``kernel.coefficients`` (one filter or a list
    of them), else :data:`GPR_FILTER_GRID`."""
    value = options.get("coefficients")
    if value is None:
        return list(GPR_FILTER_GRID)
    return filter_grid(plain(value))


@register_kernel("gprgp", "GPRGP", GPRGPConfig, defaults=BIAS_DEFAULTS, parameters=sigmas("sigma_w", "sigma_b"),
                 choices={"coefficients": filters}, gnn="gprgnn")
def gprgp(layers: int, sigma_w: float, sigma_b: float, coefficients: Sequence[float]) -> Block:
    """GPR-GNN: an MLP ``H = relu(X W1 + b1) W2 + b2`` (``L`` layers), then the filter
    ``Z = sum_k g_k A^k H``: ``K <- s_w^2 C0 + s_b^2``, ``L-1`` times ``K <- s_w^2 g(K) + s_b^2``,
    then one polynomial block ``K <- P K P^T``, ``P = sum_k g_k A^k`` (signed ``g`` allowed).
    ``coefficients``: one filter (the job chooses among ``kernel.coefficients`` on validation)."""
    first = Serial(Input(), Weight(at_layer(sigma_w, 1)), Bias(at_layer(sigma_b, 1)), name="layer 1")
    hidden = [Serial(ReLU(), Weight(at_layer(sigma_w, l)), Bias(at_layer(sigma_b, l)), name=f"layer {l}") for l in range(2, layers + 1)]
    return Serial(first, *hidden, Serial(Poly(filter_coefficients(list(coefficients), "kernel.coefficients")), name="propagation"))


@register_kernel("h2gcngp", "H2GCNGP", GCNGPConfig, defaults=BIAS_DEFAULTS, parameters=sigmas("sigma_w", "sigma_b", per_layer=False), gnn="h2gcn")
def h2gcn(layers: int, sigma_w: float, sigma_b: float) -> Block:
    """H2GCN with ``L`` rounds: ego embedding ``r0 = relu(X W + b)``, rounds
    ``r_k = [A1 r_(k-1), A2 r_(k-1)]``, a linear readout of ``[r0, r1, ..., r_L]``. ``A1``, ``A2``:
    the normalised 1-hop and exact 2-hop operators (``Adjacency.operator``, :mod:`gnngp_cli.graph.operators`). The
    concatenation holds one block per path of hops (``r2 = [A1 A1 r0, A2 A1 r0, A1 A2 r0,
    A2 A2 r0]``), each read out by its own weights (``N(0, s_w^2 / width)``; one readout matrix
    over the whole concatenation, as the paper writes it, divides the kernel by the number of
    paths ``2^(L+1) - 1``): an independent addition over the paths,
    ``K0 = g(s_w^2 C0 + s_b^2)``, ``K = s_w^2 (K0 + H(K0) + H(H(K0)) + ... + H^L(K0))`` with
    ``H(K) = A1 K A1^T + A2 K A2^T``."""
    ego = Serial(Input(), Weight(sigma_w), Bias(sigma_b), ReLU(), name="ego")
    readout = Add(*[Serial(*[HopConv(hop) for hop in path], Weight(sigma_w)) for path in hop_paths(layers)])
    return Serial(ego, Serial(readout, name="readout"))


BLOCK_NAMES = ("input", "conv", "weight", "bias", "scale", "mixed", "add", "poly")   # the words of composed kernels' blocks, below


def _block_from_spec(spec: Any, params: Mapping[str, float]) -> Block:
    """One block from config: ``input``, an activation's name (``relu``, ``erf``: :data:`~.activations.ACTIVATIONS`),
    ``conv``, ``weight``, ``bias``, or a
    one-key mapping ``{scale: c}``, ``{weight: s_w}``, ``{bias: s_b}``, ``{mixed: [a, b]}``,
    ``{add: [[blocks...], [blocks...]]}``, ``{poly: [g0, g1, ...]}`` (the filter ``sum_k g_k A^k``)."""
    if isinstance(spec, str):
        simple = {"input": Input, "conv": Conv, "weight": lambda: Weight(params["sigma_w"]), "bias": lambda: Bias(params["sigma_b"])}
        if spec in ACTIVATIONS and spec not in simple:   # every registered activation is a block name (the ReLU its own class: LeakyReLU
            return ReLU() if ACTIVATIONS[spec] is RELU else Elementwise(ACTIVATIONS[spec])   # and the tests read it); never one of the blocks'
        if spec not in simple:
            raise ConfigError(f"unknown kernel block '{spec}'; use input, conv, weight, bias, an activation ({', '.join(ACTIVATIONS)}), "
                              "or {scale|weight|bias|mixed|add|poly: ...}")
        return simple[spec]()
    if isinstance(spec, Mapping) and len(spec) == 1:
        (key, value), = spec.items()
        try:
            if key == "scale":
                return Scale(float(value))
            if key == "weight":
                return Weight(float(value))
            if key == "bias":
                return Bias(float(value))
            if key == "mixed":
                a, b = value
                return MixedWeight(float(a), float(b), params["sigma_w"])
            if key == "poly":
                return Poly(filter_coefficients(value))
            if key == "add":
                branches = list(value) if not isinstance(value, (str, Mapping)) and hasattr(value, "__iter__") else None
                if not branches or any(isinstance(b, (str, Mapping)) or not hasattr(b, "__iter__") or not list(b) for b in branches):
                    raise ConfigError(f"kernel block {{add: {value}}} is malformed: add takes a list of branches, each a non-empty list of "
                                      "blocks, e.g. {add: [[conv], [relu, weight, conv]]}")
                return Add(*[Serial(*_chain(list(branch), params, "a branch of add")) for branch in branches])
        except (TypeError, ValueError) as err:
            raise ConfigError(f"kernel block {{{key}: {value}}} is malformed ({err})") from err
    raise ConfigError(f"kernel block {spec!r} is malformed; use a block name or a one-key mapping such as {{scale: 0.5}}")


def _chain(specs: list, params: Mapping[str, float], where: str) -> list[Block]:
    """The blocks of one chain (a layer's list, a branch of ``add``): ``input`` (the features,
    which start a kernel) only first in it; after another block it has no meaning (and failed deep
    in the graph's operators)."""
    late = next((i for i, spec in enumerate(specs) if spec == "input" and i > 0), None)
    if late is not None:
        raise ConfigError(f"{where}: input is block {late + 1} of {len(specs)}; input (the features) starts a chain: put it first, or "
                          "start a branch of add with it for a skip connection from the features, e.g. {add: [[input, weight], [conv]]}")
    return [_block_from_spec(spec, params) for spec in specs]


def _starts_from_input(spec: Any) -> bool:
    """Whether a composed kernel's first block reads the features: ``input``, or an ``add`` whose
    every branch begins with one."""
    if spec == "input":
        return True
    if isinstance(spec, Mapping) and set(spec) == {"add"} and isinstance(spec["add"], (list, tuple)) and spec["add"]:
        return all(isinstance(branch, (list, tuple)) and branch and _starts_from_input(branch[0]) for branch in spec["add"])
    return False


def _spec_words(spec: Any) -> Iterable[str]:
    """Block names in a composed kernel's spec that read a configured sigma: the plain ``weight``
    and ``bias`` (not ``{weight: 2.0}``, a fixed value) and ``mixed`` (it reads ``sigma_w``)."""
    if isinstance(spec, str):
        yield spec
    elif hasattr(spec, "items"):
        for key, value in spec.items():
            if key == "mixed":
                yield key
            elif key == "add":
                yield from _spec_words(value)
    elif isinstance(spec, (list, tuple)) or (spec is not None and hasattr(spec, "__iter__")):
        for item in spec:
            yield from _spec_words(item)


def _composed_uses(options: Any) -> list[str]:
    """The sigmas a composed kernel's blocks read: ``sigma_w`` (``weight``, ``mixed``), ``sigma_b`` (``bias``)."""
    words = set(_spec_words([options.first, options.hidden]))
    return [name for name, used in (("sigma_w", bool(words & {"weight", "mixed"})), ("sigma_b", "bias" in words)) if used]


@register_kernel("composed", "ComposedGP", ComposedConfig, defaults=BIAS_DEFAULTS, parameters=sigmas("sigma_w", "sigma_b"),
                 used=_composed_uses)
def composed(layers: int, first: Any, hidden: Any, sigma_w: float, sigma_b: float) -> Block:
    """An architecture written in config: ``first`` (list of blocks) once, then ``hidden``
    (list of blocks) ``L-1`` times."""
    first, hidden = plain(first), plain(hidden)
    for key, blocks in (("first", first), ("hidden", hidden)):
        if isinstance(blocks, str):
            raise ConfigError(f"kernel.{key}={blocks} is one block; kernel.{key} takes a list of blocks, e.g. kernel.{key}=[{blocks}]")
    if first and not _starts_from_input(first[0]):
        raise ConfigError(f"kernel.first must begin with input (the features), e.g. kernel.first=[input,weight,conv,bias]; it begins with {first[0]}")

    def layer_params(l: int) -> dict:
        return {"sigma_w": at_layer(sigma_w, l), "sigma_b": at_layer(sigma_b, l)}

    if not first:
        raise ConfigError("kernel=composed needs kernel.first, a list of blocks starting with input")
    stack = [Serial(*_chain(list(first), layer_params(1), "kernel.first"), name="layer 1")]
    for l in range(2, layers + 1):
        if not hidden:
            raise ConfigError("kernel=composed with kernel.layers > 1 needs kernel.hidden, a list of blocks")
        if list(hidden)[:1] == ["input"]:   # it would restart every hidden layer from the features: the layers below unread
            raise ConfigError("kernel.hidden begins with input, which would start each hidden layer from the features again; input "
                              "comes first in kernel.first only, or first in a branch of add (a skip connection from the features)")
        stack.append(Serial(*_chain(list(hidden), layer_params(l), "kernel.hidden"), name=f"layer {l}"))
    return Serial(*stack)


LIMITS = ("nngp", "ntk")   # kernel.limit: the network at initialisation, or trained by gradient descent (its tangent kernel)


def kernel_label(name: str, low_rank: bool, limit: str = "nngp") -> str:
    """The method label of a kernel config, e.g. ``GCNGP`` or ``GCNGP-X`` (the low-rank twin), and
    ``GCNGP-NTK`` or ``GCNGP-X-NTK`` for the tangent kernel (``kernel.limit=ntk``)."""
    label = KERNELS[name].label if name in KERNELS else name
    return label + ("-X" if low_rank else "") + ("-NTK" if limit == "ntk" else "")
