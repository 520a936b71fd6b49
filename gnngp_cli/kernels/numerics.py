"""Numerics of kernel matrices: round-off allowances, the Nystrom root, and the checks that
fail loudly (never silently NaN) when a kernel is not a covariance."""
from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import torch
from torch import Tensor

from ..errors import KernelError
from .value import FactoredRoot, Kernel


def psd_tolerance(dtype: torch.dtype, n: int) -> float:
    """Relative round-off allowance for eigenvalues of an ``n x n`` kernel block."""
    return max(1e-10, 50 * torch.finfo(dtype).eps * max(n, 1) ** 0.5)


class _Eigh(torch.autograd.Function):
    """``torch.linalg.eigh`` with a backward that stays finite at equal eigenvalues.

    PyTorch's backward (``gA = V (diag(gw) + F o V^T gV) V^T``, ``F_ij = 1 / (w_j - w_i)``)
    divides by every gap, and a ReLU kernel on more landmarks than float32 resolves has
    eigenvalues equal to the last bit: fit=mll on squirrel's GCNGP-X (2,496 landmarks) got a NaN
    gradient at step 9. Here ``F_ij = g / (g^2 + e^2)`` with ``g = w_j - w_i`` and ``e = eps max |w|``
    (Lorentzian broadening, Liao et al. 2019): PyTorch's value wherever the gap is above
    round-off, 0 for equal eigenvalues, whose eigenvectors are arbitrary within their eigenspace and
    which a function of the eigenspace alone (the kernel ``Q Q^T``) does not depend on."""

    @staticmethod
    def forward(ctx, a):
        w, v = lapack_eigh(a)
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx, grad_w, grad_v):
        w, v = ctx.saved_tensors
        middle = torch.zeros_like(v)
        if grad_v is not None:
            gap = w[None, :] - w[:, None]
            broadening = (torch.finfo(w.dtype).eps * w.abs().amax()) ** 2
            middle = gap / (gap * gap + broadening) * (v.T @ grad_v)
        if grad_w is not None:
            middle = middle + torch.diag_embed(grad_w)
        return v @ middle @ v.T


def lapack_eigh(a: Tensor) -> tuple[Tensor, Tensor]:
    """``(w, V)`` with ``a = V diag(w) V^T``, by LAPACK's divide and conquer (``syevd``). On the CPU,
    SciPy's LAPACK (OpenBLAS), on as many threads as torch's (threadpoolctl): torch's own (MKL) is slower on the
    AMD CPUs this project runs on (``scripts/bench_roofline.py`` times both; the roofline benchmark
    page); elsewhere torch's. Raises ``LinAlgError`` (numpy's or torch's) when it does not converge."""
    if a.device.type != "cpu":
        return torch.linalg.eigh(a)
    import scipy.linalg   # when used: importing gnngp stays light

    with _blas_threads(torch.get_num_threads()):
        w, v = scipy.linalg.eigh(a.detach().numpy(), driver="evd", check_finite=False)
    return torch.from_numpy(w), torch.from_numpy(v)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """threadpoolctl's view of the BLAS libraries loaded (SciPy's among them), found once."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextmanager
def _blas_threads(count: int) -> Iterator[None]:
    """SciPy's BLAS on ``count`` threads while the block runs (a Dask worker of one thread stays at one)."""
    with _blas_controller().limit(limits=count, user_api="blas"):
        yield


def symmetric_eigh(a: Tensor) -> tuple[Tensor, Tensor]:
    """``eigh`` of ``(a + a^T) / 2`` with the entries below ``sqrt(tiny)`` times the largest set
    to zero. LAPACK's reduction multiplies such entries into subnormal numbers, which x86 CPUs
    process about 100x slower: an RBF kernel at mid-grid gamma on squirrel's 2,496 training nodes
    (most entries near exp(-44)) took 14 s instead of 0.9 s, with the same eigenvalues to 3e-6.
    The change is at most ``n sqrt(tiny)`` relative (1e-16 in float32): below round-off. With a
    gradient, the backward of :class:`_Eigh`.

    LAPACK's divide and conquer can fail to converge on a float32 matrix with many equal
    eigenvalues (H2GCNGP-X's 2,100 x 2,100 Gram matrix on minesweeper failed with the small
    entries zeroed and not without them); then the matrix as given is tried, then float64 (the
    result cast back), and only if all fail is it an error, one line. The decomposition itself is
    :func:`lapack_eigh`'s."""
    a = (a + a.T) / 2
    if a.numel() == 0:
        return torch.linalg.eigh(a)
    floor = a.detach().abs().amax() * math.sqrt(torch.finfo(a.dtype).tiny)
    zeroed = torch.where(a.detach().abs() < floor, torch.zeros((), dtype=a.dtype, device=a.device), a)
    attempts = [zeroed, a] + ([a.double()] if a.dtype != torch.float64 else [])
    for candidate in attempts:
        try:
            w, v = _Eigh.apply(candidate) if candidate.requires_grad else lapack_eigh(candidate)
        except (torch.linalg.LinAlgError, np.linalg.LinAlgError):
            continue
        return w.to(a.dtype), v.to(a.dtype)
    raise KernelError(f"the eigendecomposition of a {a.size(0)} x {a.size(0)} kernel block did not converge (LAPACK); "
                      "check the features and sigmas for NaN or extreme values, or use fewer landmarks")


def sqrt_positive(x: Tensor) -> Tensor:
    """``sqrt(x)``, 0 where ``x <= 0``, with a finite gradient everywhere (0 where ``x <= 0``):
    ``clamp_min(0).sqrt()`` has the same values but passes ``0 * inf = NaN`` back from an exact 0
    (an eigenvalue of 0 in fit=mll on squirrel's GCNGP-X turned ``sigma_w``'s gradient NaN)."""
    positive = x > 0
    return torch.where(positive, torch.where(positive, x, 1).sqrt(), 0)


@dataclass(frozen=True)
class NystromFactor:
    """The factor of ``C[a, a] = V D V^T`` that :func:`nystrom_root` applies row by row:
    ``eigvecs = V``, ``sqrt_d = sqrt(D)`` and ``smoothed_inv = sqrt(D) / max(D, 1e-4 D_max)``."""

    eigvecs: Tensor
    sqrt_d: Tensor
    smoothed_inv: Tensor

    @classmethod
    def of(cls, block: Tensor, where: str) -> "NystromFactor":
        """Factor ``C[a, a]`` (symmetrised); raises :class:`KernelError` if it is indefinite
        beyond round-off or not finite."""
        eigvals, eigvecs = symmetric_eigh(block)
        top = eigvals[-1].clamp_min(0)
        if not bool(torch.isfinite(eigvals).all()):
            raise KernelError(f"{where}: the kernel on the landmarks has NaN or infinite entries; check the features and sigmas")
        if eigvals[0] < -psd_tolerance(block.dtype, block.size(0)) * max(float(top.detach()), torch.finfo(block.dtype).tiny):
            raise KernelError(
                f"{where}: the kernel is not positive semi-definite (eigenvalue {float(eigvals[0]):.3g} vs largest {float(top):.3g}); "
                "use a positive semi-definite base kernel (e.g. kernel.base.name=linear) or float64"
            )
        sqrt_d = sqrt_positive(eigvals)
        floor = torch.clamp_min(top * 1e-4, torch.finfo(block.dtype).tiny)
        return cls(eigvecs, sqrt_d, sqrt_d / eigvals.clamp_min(floor))

    def project(self, cross: Tensor, into: Optional[Tensor] = None) -> Tensor:
        """``C[x, a] V sqrt(D)^+`` (smoothed) on every row of ``cross = C[:, a]``: one matrix
        product, scaled where it lies (without a gradient; into ``into`` where given)."""
        if cross.requires_grad or self.eigvecs.requires_grad or self.smoothed_inv.requires_grad:
            return (cross @ self.eigvecs) * self.smoothed_inv
        return (cross @ self.eigvecs if into is None else torch.mm(cross, self.eigvecs, out=into)).mul_(self.smoothed_inv)

    def landmark_rows(self, landmark_index: Tensor) -> Tensor:
        """``V[i] sqrt(D)``: the root's exact rows on the landmarks ``i``."""
        return (self.eigvecs * self.sqrt_d)[landmark_index]

    @property
    def right(self) -> Tensor:
        """``V s``, ``s = sqrt(D)^+`` (smoothed): the root is ``C[:, a] V s``, this its right factor."""
        return self.eigvecs * self.smoothed_inv

    def left_rows(self, cross: Tensor, is_landmark: Tensor, landmark_index: Tensor) -> Tensor:
        """Rows of the left factor ``L`` with ``L V s`` the root :meth:`apply` gives: ``C[x, a]``,
        and on the ``i``-th landmark's row ``V[i] max(D, 1e-4 D_max) V^T`` (``C[a, a]`` with its
        smoothed eigenvalues raised to the floor), whose product with ``V s`` is ``V[i] sqrt(D)``
        exactly as :meth:`apply`'s. ``cross`` is written in place."""
        if bool(is_landmark.any()):
            rows = self.eigvecs[landmark_index]
            floored = self.sqrt_d / torch.where(self.smoothed_inv > 0, self.smoothed_inv, torch.ones_like(self.smoothed_inv))
            cross[is_landmark] = (rows * floored) @ self.eigvecs.T
        return cross

    def apply(self, cross: Tensor, is_landmark: Tensor, landmark_index: Tensor, into: Optional[Tensor] = None) -> Tensor:
        """Rows of the root from rows of ``C[:, a]``: ``C[x, a] V sqrt(D)^+`` (smoothed), and
        exactly ``V[i] sqrt(D)`` on the row of the ``i``-th landmark (``is_landmark`` marks
        those rows, ``landmark_index`` gives their ``i`` in order); written into ``into`` where given."""
        root = self.project(cross, into)
        root[is_landmark] = self.landmark_rows(landmark_index)
        return root


def nystrom_root(cross: Tensor, landmarks: Tensor, where: str) -> Tensor:
    """``chol(C) = C[:, a] C[a, a]^{-1/2}`` from ``cross = C[:, a]``.

    Symmetric eigendecomposition ``C[a, a] = V D V^T``; eigenvalues are clamped at 0 and
    those below ``1e-4`` times the largest get the smoothed inverse ``sqrt(D) / (1e-4 D_max)``
    rather than being dropped. Landmark rows are ``V sqrt(D)`` exactly, so ``Q[a] Q[a]^T``
    reproduces ``C[a, a]``. Raises :class:`KernelError` if ``C[a, a]`` is indefinite beyond
    round-off. (:class:`NystromFactor` is the same, in two steps, for roots held in row blocks.)
    """
    factor = NystromFactor.of(cross[landmarks], where)
    is_landmark = torch.zeros(cross.size(0), dtype=torch.bool, device=cross.device)
    is_landmark[landmarks] = True
    return factor.apply(cross, is_landmark, torch.arange(landmarks.numel(), device=cross.device))


def not_finite(where: str, dtype: object = None) -> KernelError:
    """The error for a layer's kernel with a NaN or infinite entry (local and row-block roots);
    ``dtype``: the kernel's, torch's or numpy's (float64 is not suggested to a run in it)."""
    wider = "" if str(dtype).removeprefix("torch.") == "float64" else ", or use dtype=float64"
    return KernelError(f"{where}: the kernel has NaN or infinite entries; lower the sigmas or the depth{wider}, or scale features of very "
                       "large magnitude (dataset.scale=true)")


CHECK_ROWS = 1024   # rows of a kernel block that check_kernel reads at a time


def check_kernel(k: Kernel, where: str) -> None:
    """Fail loudly (never silently NaN) if a layer's kernel is not a covariance."""
    if isinstance(k.root, FactoredRoot):   # its factors finite: so is their product, short of an overflow
        parts = (k.root.left, k.root.right)
    else:
        parts = ((k.root if k.root is not None else k.matrix).detach(),)  # a check, not part of a fitted objective
    for values in parts:
        if values.numel() and not all(math.isfinite(float(v)) for v in torch.aminmax(values)):  # one pass; NaN propagates; no temporaries
            raise not_finite(where, values.dtype)
    values = parts[0]
    if k.matrix is None or not k.square or k.matrix.numel() == 0:  # a rectangular block's variances are checked by the pair evaluation
        return
    diag = torch.diagonal(values)
    scale = float(diag.abs().max()) if diag.numel() else 0.0
    tol = psd_tolerance(k.matrix.dtype, k.size) * max(scale, torch.finfo(k.matrix.dtype).tiny)
    if float(diag.min()) < -tol:
        raise KernelError(f"{where}: the kernel has a negative variance ({float(diag.min()):.3g}); it is not positive semi-definite")
    s = diag.clamp_min(0).sqrt()
    excess = max(float(values[i:i + CHECK_ROWS].abs().addcmul_(s[i:i + CHECK_ROWS, None], s[None, :], value=-1).max())   # by rows: one temporary of a row block
                 for i in range(0, values.size(0), CHECK_ROWS))
    if excess > tol:
        raise KernelError(f"{where}: the kernel breaks |K_xy| <= sqrt(K_xx K_yy) by {float(excess):.3g}; it is not positive semi-definite")
