"""``compute=local``: the graph as tensors of this process, on its device (the CPU, or a GPU
with ``device=cuda``). Exact kernels are evaluated on the node sets the prediction needs
(:func:`~gnngp_cli.kernels.planner.exact_kernel`), low-rank ones as a root over every node;
the labelled rows are one row group."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from ..config import parse
from ..conformal import GRAPH_SCORES
from ..errors import ConfigError, ResourceError
from ..job.backend_interface import GraphInfo
from ..job.estimate import Estimate, dense_factor, gp_estimate, size_text
from ..gp.posterior import RowGroup
from ..gp.sufficient import SPLITS, TrainingStatistics, low_rank_statistics, regression_targets
from ..gp.likelihoods import LIKELIHOODS
from ..job.loading import LoadedGraph, reuse
from ..results.rows import dataset_label
from ..kernels import Architecture, BaseKernel, Kernel, KernelContext
from ..kernels.architectures import KernelEntry
from ..kernels.blocks import branch_count, dense_branch_count, graph_operators
from ..kernels.torch_roots import LOCAL_ROOTS, TorchRoots
from ..kernels.value import FactoredRoot
from ..kernels.planner import exact_kernel, low_rank_width, nngp_diagonal, pair_plan_fits, square_first
from ..runtime import current_rss_bytes, memory_limit_bytes, peak_cuda_mb, peak_rss_mb


@dataclass
class LocalKernel:
    """An evaluated kernel as the local backend holds it: the prediction features ``F`` of the
    rows ``kernel.nodes`` (``Q``, or ``K[rows, training nodes]``), the strategy that reads them,
    and ``diag K`` on every node (``None`` for a factored root ``Q = L R``: its sum is read from the
    Gram matrices, :func:`~gnngp_cli.gp.sufficient.factored_statistics`)."""

    kernel: Kernel
    features: Any
    strategy: str
    diagonal: Optional[Tensor]
    nngp: Optional["LocalKernel"] = None   # a tangent kernel's NNGP kernel, read the same way (the covariance along training time)


def local_kernel(kernel: Kernel, train: Tensor, diagonal: Tensor, low_rank: bool, nngp_diagonal: Optional[Tensor] = None,
                 strategy: Optional[str] = None) -> LocalKernel:
    """``kernel`` (rows covering the labelled nodes, columns the training nodes ``train``) with
    the strategy that reads it: a root of rank at most the training set's size goes to the
    low-rank strategy (always for the Nystrom kernels), anything else to the exact one with
    ``F = K[rows, train]``; ``diagonal``: ``diag K`` on every node. A tangent kernel's ``nngp``
    is read with the same strategy (``nngp_diagonal``: its diagonal on every node)."""
    if kernel.nngp is not None:
        theta = local_kernel(replace(kernel, nngp=None), train, diagonal, low_rank, strategy=strategy)
        nngp = local_kernel(kernel.nngp, train, kernel.nngp.diagonal() if nngp_diagonal is None else nngp_diagonal, low_rank,
                            strategy=theta.strategy)
        return replace(theta, nngp=nngp)
    if kernel.root is not None and strategy != "exact" and (low_rank or strategy == "low_rank" or kernel.root.size(1) <= train.numel()):
        return LocalKernel(kernel, kernel.root, "low_rank", diagonal)
    if kernel.root is not None:
        features = kernel.root @ kernel.root[kernel.positions(train)].T
    else:
        col_train = kernel.col_positions(train)
        every_column = kernel.matrix.size(1) == train.numel() and torch.equal(col_train, torch.arange(train.numel(), device=col_train.device))
        features = kernel.matrix if every_column else kernel.matrix[:, col_train]
    return LocalKernel(kernel, features, "exact", diagonal)


def local_statistics(k: LocalKernel, train: Tensor, y_train: Tensor, per_class: bool = False, keep: Optional[Tensor] = None) -> TrainingStatistics:
    """The training statistics of ``k`` (``y_train``: the targets of ``train``, in ``k``'s dtype;
    ``per_class``: each class's Gram matrix too, for a per-class likelihood). ``keep``: nodes whose
    rows the posterior reads again (validation and test): a factored root may keep them projected,
    and ``k`` then holds that root (:class:`~gnngp_cli.gp.sufficient.ProjectedRoot`)."""
    pos_train = k.kernel.positions(train)
    n = k.diagonal.numel() if k.diagonal is not None else k.features.size(0)
    diagonal_sum = float(k.diagonal.mean()) * n if k.diagonal is not None else None   # the mean in the kernel's precision, as the nugget grid reads it
    nngp = None if k.nngp is None else k.nngp.features
    if k.strategy == "low_rank":   # the root's rows may be the labelled nodes only (an exact root): diag K from every node
        kept = None if keep is None or not isinstance(k.features, FactoredRoot) else torch.sort(k.kernel.positions(keep))[0]
        stats = low_rank_statistics(k.features, pos_train, y_train, n, diagonal_sum, per_class, nngp, kept)
        if stats.projected is not None:
            k.features = stats.projected
        return replace(stats, projected=None)
    return TrainingStatistics("exact", k.features[pos_train], y_train, float((y_train * y_train).sum()), int(train.numel()), diagonal_sum, n,
                              cross=None if nngp is None else nngp[pos_train])


def local_group(k: LocalKernel, nodes: dict[str, Tensor], y: Tensor, ood: Optional[Tensor] = None) -> RowGroup:
    """The labelled rows of ``k`` as one row group (``nodes``: each split's node ids; ``y``: every
    node's target; ``ood``: which nodes a protocol made out of distribution)."""
    positions = {key: k.kernel.positions(nodes[key]) for key in SPLITS}
    prior = {key: k.diagonal[nodes[key]] for key in SPLITS} if k.strategy == "exact" else None
    flags = ood[nodes["test"]] if ood is not None and bool(ood.any()) else None
    nngp = None if k.nngp is None else local_group(k.nngp, nodes, y)
    return RowGroup(k.features, positions, {key: y[nodes[key]] for key in SPLITS}, prior, flags,
                    None if nngp is None else nngp.features, None if nngp is None else nngp.prior)


FACTORED_ROOTS = TorchRoots(factored=True)


class LocalBackend:
    """See the module docstring. ``graph``: data loaded for another job on the same dataset
    (the benchmarks share it), else the job loads its own and releases its edge list once the
    adjacency is built."""

    name = "local"
    supports_fit = True

    def __init__(self, spec: Any, graph: Optional[LoadedGraph] = None):
        self.spec = parse(spec)
        self.graph = graph
        self._owned = graph is None

    def refuse(self, spec: Any, entry: KernelEntry) -> None:
        if not entry.runs_on(self.name):
            raise ConfigError(f"kernel={entry.name} does not run with compute={self.name}; use compute={' or compute='.join(entry.backends)}")

    def __enter__(self) -> "LocalBackend":
        self.graph = reuse(self.spec, self.graph)
        # data loaded for this job alone: its edge list goes once A is built, unless a conformal score diffuses over it
        # or an active run's strategy reads it (degree, PageRank)
        self.graph.keep_edges = not self._owned or self.spec.conformal.name in GRAPH_SCORES or self.spec.active.name != "none"
        self.info: GraphInfo = self.graph.info()
        self.load_seconds, self.dtype, self.device = self.graph.load_seconds, self.graph.dtype, self.graph.device
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    @property
    def data(self) -> Any:
        return self.graph.data

    @property
    def where(self) -> str:
        split = f" (split {int(self.spec.dataset.split_index)})" if self.spec.get("splits") == "all" else ""   # each split's lines say which
        return dataset_label(self.spec.dataset.name, self.info.stand_in) + split

    def _nodes(self, split: Optional[str] = None) -> Tensor:
        d = self.data
        mask = (d.train_mask | d.val_mask | d.test_mask) if split is None else d[f"{split}_mask"]
        return mask.nonzero().view(-1)

    def train_ids(self) -> Tensor:
        return self._nodes("train")

    def train_targets(self) -> Tensor:
        return regression_targets(self.data.y[self.train_ids()], self.info.task, self.info.num_classes, torch.float64)

    def context(self, adjacency: str, base: BaseKernel, landmarks: Optional[Tensor], feature_scale: float = 1.0) -> KernelContext:
        features = self.data.x.to(self.dtype)
        if feature_scale != 1:  # C0 reads sqrt(scale) x (linear: scale x.x')
            features = features * feature_scale ** 0.5
        return KernelContext(features, self.graph.adjacency(adjacency), base, landmarks)

    def check_exact_memory(self, arch: Architecture, ctx: KernelContext, target: Tensor, train: Optional[Tensor], fitting: bool = False) -> int:
        """Refuse, before computing, an exact kernel whose dense blocks ``K[target, train]``
        (``train=None``: square) would not fit. A linear network's kernel stays a root of the
        features' width (no dense block) but in a fit, which forms ``X X^T`` once (``fitting``).
        Returns the blocks' peak entries (0 for a root)."""
        if not fitting and arch.network.root_form(False, ctx):
            return 0
        elements = arch.network.peak_elements(target, ctx, train)
        need = elements * torch.finfo(self.dtype).bits // 8 * dense_factor(dense_branch_count(arch.network))
        limit = memory_limit_bytes(self.spec.max_memory_gb, ctx.features.device)
        if need > limit:
            square = "" if train is not None else (f" to fit it on its {int(target.numel()):,} training nodes" if fitting
                                                   else f" to evaluate it over all {int(target.numel()):,} nodes at once")
            raise ResourceError(
                f"the exact {arch.label} kernel on {self.spec.dataset.name} needs about {size_text(need)}{square} but the limit is {size_text(limit)} "
                f"(max_memory_gb; default half of the free memory); use the low-rank kernel (kernel={arch.name}_x)"
                + (" or dtype=float32" if self.dtype == torch.float64 else "") + ", or raise max_memory_gb if the memory is yours"
            )
        return elements

    def estimate(self, arch: Architecture, ctx: KernelContext, landmarks: Optional[Tensor], fit: bool) -> Estimate:
        """The run's peak memory and time class (:mod:`gnngp_cli.job.estimate`), before computing;
        a fit of an exact kernel is refused here when its square training block would not fit.
        The graph operators the network applies are built first (the run needs them, and the
        exact planning reads them): the process's memory then holds them, and its peak their build."""
        graph_operators(arch.network, ctx.adjacency)
        train, target = self.train_ids(), self._nodes()
        if fit and landmarks is None:
            self.check_exact_memory(arch, ctx, train, None, fitting=True)
        dense = 0
        linear = arch.network.root_form(False, ctx)   # no activation: its kernel stays a root of its input's width, no dense block
        input_nystrom = landmarks is not None and not (ctx.base.is_linear and landmarks.numel() >= self.info.num_features)
        if landmarks is None and not linear:
            square = square_first(arch.network, ctx, target) or not pair_plan_fits(arch.network, ctx)
            nodes = ctx.every_node if square else target
            dense = self.check_exact_memory(arch, ctx, nodes, None if square else train)   # the evaluation's refusal, before the estimate and its warnings
        width = low_rank_width(arch.network, ctx.base, arch.adjacency) if landmarks is not None or linear else None
        return gp_estimate(
            rss_now=current_rss_bytes(), peak_now=peak_rss_mb() * 2**20, num_nodes=self.info.num_nodes, num_edges=self.info.num_edges,
            num_features=self.info.num_features, n_train=int(train.numel()), n_labelled=int(target.numel()),
            layers=int(self.spec.kernel.layers), bytes_per_entry=torch.finfo(self.dtype).bits // 8,
            landmarks=None if landmarks is None else int(landmarks.numel()), dense_elements=int(dense),
            branches=branch_count(arch.network, low_rank=True) if landmarks is not None else dense_branch_count(arch.network),
            input_nystrom=input_nystrom,
            width=None if linear else width,
            root_width=int(((int(landmarks.numel()) if input_nystrom else self.info.num_features) + int(self.spec.kernel.layers) + 1)
                           * width) if linear else None,
        )

    def evaluate(self, arch: Architecture, ctx: KernelContext) -> LocalKernel:
        """Low rank: the root ``Q`` over every node. Exact: ``K[labelled, training]`` and
        ``diag K`` on every node, after the memory check (:func:`local_kernel`)."""
        train = self.train_ids()
        if ctx.low_rank:
            if ctx.roots is LOCAL_ROOTS and self.spec.kernel.limit == "nngp":
                ctx = replace(ctx, roots=FACTORED_ROOTS)   # the last Nystrom step's root kept as two factors (the GP reads Q[rows] @ M alone)
            kernel = arch.network(None, ctx, None)
            diagonal = None if isinstance(kernel.root, FactoredRoot) else kernel.diagonal()
        else:
            target = self._nodes()
            self.check_exact_memory(arch, ctx, target, train)
            kernel, diagonal = exact_kernel(arch.network, ctx, target, train,
                                            before_square=lambda nodes: self.check_exact_memory(arch, ctx, nodes, None))
            if kernel.nngp is not None:
                return local_kernel(kernel, train, diagonal, False, nngp_diagonal(kernel, ctx))
        return local_kernel(kernel, train, diagonal, ctx.low_rank)

    def statistics(self, k: LocalKernel) -> TrainingStatistics:
        train = self.train_ids()
        return local_statistics(k, train, regression_targets(self.data.y[train], self.info.task, self.info.num_classes, k.features.dtype),
                                LIKELIHOODS[self.spec.likelihood.name].per_class, torch.cat([self._nodes("val"), self._nodes("test")]))

    def reduce(self, k: LocalKernel, fn: Callable[[RowGroup], Any], combine: Callable[..., Any]) -> Any:
        """``fn`` on one row group: every labelled node."""
        return fn(local_group(k, {key: self._nodes(key) for key in SPLITS}, self.data.y, getattr(self.data, "ood_mask", None)))

    def prediction_rows(self, k: LocalKernel, nodes: Tensor, arch: Architecture, ctx: KernelContext) -> tuple[Tensor, Optional[Tensor]]:
        """The posterior's prediction features ``F`` of ``nodes`` and, for the exact strategy,
        their prior variances ``diag K``: read from ``k`` where it holds their rows (a root over
        every node; the labelled nodes of an exact kernel), else from the exact kernel evaluated
        again on them (with the training nodes, after the same memory check as a run's)."""
        if k.kernel.nodes is not None and not bool(torch.isin(nodes, k.kernel.nodes).all()):
            train = self.train_ids()
            rows = torch.unique(torch.cat([nodes, train]))
            self.check_exact_memory(arch, ctx, rows, train)
            kernel, _ = exact_kernel(arch.network, ctx, rows, train, before_square=lambda every: self.check_exact_memory(arch, ctx, every, None))
            again = local_kernel(kernel, train, k.diagonal, k.strategy == "low_rank")
            if again.strategy != k.strategy:
                raise ResourceError(f"the {arch.label} kernel on these nodes is held as {again.strategy}, not {k.strategy} as at the fit; "
                                    "predict the labelled nodes, or use the low-rank kernel")
            k = again
        features = k.features[k.kernel.positions(nodes)]
        return features, (k.diagonal[nodes] if k.strategy == "exact" else None)

    def columns(self) -> dict:
        return dict(device=str(self.device), peak_rss_mb=peak_rss_mb(), peak_cuda_mb=peak_cuda_mb(self.device), compute_backend=self.name, workers=1)
