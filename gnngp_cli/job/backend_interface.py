"""The backend interface: what a GP job asks of the place where it computes.

A backend holds the graph (a tensor on a device, or row blocks on a Dask cluster), evaluates
kernels there and reduces what inference needs; the job (:mod:`.gp_job`) does everything else, once
for every backend: landmarks, the choices made on validation, the fit, the posterior, the
metrics and the rows. A backend never re-implements the job.

| method          | what it gives the job                                                            |
|-----------------|----------------------------------------------------------------------------------|
| ``refuse``      | a one-line error, before any work, for a combination it does not run             |
| ``supports_fit``| whether ``fit=mll`` runs on it (gradients through the kernel on every node)       |
| ``__enter__``   | the graph loaded (``info``, ``load_seconds``, ``dtype``), a cluster started ...   |
| ``where``       | how progress lines name the graph and the backend                                |
| ``train_ids``   | the training node ids, sorted                                                    |
| ``train_targets``| their regression targets in float64 (``fit=mll``)                               |
| ``context``     | the :class:`~gnngp_cli.kernels.KernelContext` the kernel's blocks read           |
| ``estimate``    | the run's peak memory and time class, after refusing what would not fit           |
| ``evaluate``    | the kernel, held as the backend holds it (opaque to the job)                     |
| ``statistics``  | :class:`~gnngp_cli.gp.sufficient.TrainingStatistics` of an evaluated kernel                   |
| ``reduce``      | ``fn(group)`` over :class:`~gnngp_cli.gp.posterior.RowGroup` s of labelled rows, combined    |
| ``columns``     | the result row's columns of this backend (device, workers, peak memory ...)      |

A backend is registered by name in :mod:`gnngp_cli.backends` (``compute=<name>``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, TypeVar

import torch

from ..kernels import Architecture, BaseKernel, KernelContext
from ..kernels.architectures import KernelEntry
from .estimate import Estimate
from ..gp.posterior import RowGroup
from ..gp.sufficient import TrainingStatistics

T = TypeVar("T")


@dataclass(frozen=True)
class GraphInfo:
    """What a job reads of the graph a backend holds."""

    dataset: str
    task: str
    num_classes: int
    num_nodes: int
    num_edges: int
    num_features: int
    split: str = ""
    stand_in: str = ""
    num_splits: Optional[int] = None
    warnings: tuple[str, ...] = ()
    metric: Optional[str] = None   # the metric the loaded graph resolved (before a protocol that keeps fewer classes)
    data_digest: str = ""          # a custom graph's files as they were read (:func:`~gnngp_cli.data.custom.files_digest`)


class Backend(Protocol):
    """See the module docstring."""

    name: str
    info: GraphInfo
    load_seconds: float
    dtype: torch.dtype
    supports_fit: bool

    def refuse(self, spec: Any, entry: KernelEntry) -> None: ...
    def __enter__(self) -> "Backend": ...
    def __exit__(self, *exc: Any) -> None: ...
    def train_ids(self) -> torch.Tensor: ...
    def train_targets(self) -> torch.Tensor: ...
    def context(self, adjacency: str, base: BaseKernel, landmarks: Optional[torch.Tensor], feature_scale: float = 1.0) -> KernelContext: ...
    def estimate(self, arch: Architecture, ctx: KernelContext, landmarks: Optional[torch.Tensor], fit: bool) -> Estimate: ...
    def evaluate(self, arch: Architecture, ctx: KernelContext) -> Any: ...
    def statistics(self, kernel: Any) -> TrainingStatistics: ...
    def reduce(self, kernel: Any, fn: Callable[[RowGroup], T], combine: Callable[..., T]) -> T: ...
    def columns(self) -> dict: ...

    @property
    def where(self) -> str: ...
