"""Device choice, device-synchronised wall-clock timing and memory accounting."""
from __future__ import annotations

import gc
import os
import resource
import sys
import time
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from .errors import ConfigError

# Past this many entries (256 MiB in float32) an ``N x r`` product with the root is computed by
# row blocks written into one output (the ReLU's Nystrom root, the convolution ``A Q``, the
# posterior variances): its temporaries are then a block's, not several copies of an ``N x r`` matrix (a
# Reddit-sized GCNGP-X: 232,965 x 3,184, 3 GB each). Smaller problems take the one-product path.
ROW_BLOCK_ENTRIES = 1 << 26


def row_blocks(rows: int, width: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive row blocks of a ``rows x width`` result, each of about
    ``ROW_BLOCK_ENTRIES`` entries (at least one row)."""
    step = max(1, ROW_BLOCK_ENTRIES // max(width, 1))
    for start in range(0, rows, step):
        yield start, min(start + step, rows)


def resolve_device(name: str) -> torch.device:
    """The job's device: ``cuda`` without a GPU is an error, never a silent fallback (``""``:
    ``GNNGP_DEVICE`` set but empty, read as unset: auto)."""
    if name == "auto" or (name == "" and os.environ.get("GNNGP_DEVICE") == ""):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        source = " (from GNNGP_DEVICE)" if os.environ.get("GNNGP_DEVICE") == "cuda" else ""
        raise ConfigError(f"device=cuda{source} but no CUDA device is available; use device=cpu or device=auto")
    return torch.device(name)


_WARM: set[str] = set()
_WARMUP = {"seconds": 0.0}   # the process's one-time start-up, not yet reported in a row


def start_job(device: torch.device, eigh: Callable[[torch.Tensor], Any] = torch.linalg.eigh) -> None:
    """Before a job's clocks start: the process's one-time costs, paid once and timed apart
    (:func:`take_warmup_seconds`, the rows' ``warmup_seconds``), so that the first job's kernel
    and inference seconds are what every later job of the process pays. On any device: the
    dense, sparse and eigen routines called once on a small matrix (their thread pools and
    dispatch; ``eigh``: the eigensolver the job will call). On CUDA also: float32 products kept
    in float32 (TF32 rounds operands to 10 mantissa bits, a relative error of about 5e-4), each
    job's peak memory started from zero, and the cuBLAS/cuSOLVER/cuSPARSE handles created."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        gc.collect()                  # the previous job's tensors, if a reference cycle still holds them
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    if str(device) in _WARM:
        return
    start = time.perf_counter()
    with warnings.catch_warnings():   # torch's "sparse CSR support is in beta" notice: the job's own products say it if they do
        warnings.simplefilter("ignore", UserWarning)
        a = torch.eye(8, device=device, dtype=torch.float32) * 2
        eigh(a @ a)
        torch.linalg.cholesky(a)
        (a.to_sparse_csr() @ a).sum().item()
        eigh(a.double())
        torch.exp(torch.full((256, 256), 0.5, device=device)).sum().item()   # no draw: the global random state is the job's
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _WARM.add(str(device))
    _WARMUP["seconds"] += time.perf_counter() - start


def take_warmup_seconds() -> float:
    """The one-time start-up :func:`start_job` paid and no row has reported yet (then 0): the
    first row of a process carries it, as ``warmup_seconds``."""
    seconds, _WARMUP["seconds"] = _WARMUP["seconds"], 0.0
    return seconds


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Wall seconds (``time.perf_counter``) around device-synchronised work."""

    def __init__(self, device: torch.device):
        self.device = device
        self.seconds = 0.0

    @contextmanager
    def measure(self) -> Iterator[None]:
        synchronize(self.device)
        start = time.perf_counter()
        try:
            yield
        finally:
            synchronize(self.device)
            self.seconds += time.perf_counter() - start


_LIBC: Any = None


def release_freed_memory() -> None:
    """Hand the memory this process has freed back to the system (glibc's ``malloc_trim``): a
    loop of equal chunks (a conformal run's splits) otherwise grows the process by what the
    allocator keeps of each (conformal.splits=10^5 on 1,000 nodes: 1.0 GB peak; 0.39 GB trimmed
    per chunk, in the same time). Nothing where the C library has no such call."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6") if sys.platform.startswith("linux") else False
            _LIBC = _LIBC if _LIBC and hasattr(_LIBC, "malloc_trim") else False
        except OSError:   # not glibc (musl, another system's C library)
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def peak_cuda_mb(device: torch.device) -> float:
    if device.type != "cuda":
        return 0.0
    return torch.cuda.max_memory_allocated(device) / 2**20


def available_bytes(device: torch.device) -> int:
    """Free memory on the device (CUDA) or available host memory (``MemAvailable``)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    available = _proc_bytes("/proc/meminfo", "MemAvailable:")
    if available is not None:
        return available
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def current_rss_bytes() -> int:
    """Resident memory of this process now (``VmRSS``; the peak so far where that is unreadable)."""
    rss = _proc_bytes("/proc/self/status", "VmRSS:")
    return rss if rss is not None else int(peak_rss_mb() * 2**20)


def _proc_bytes(path: str, key: str):
    """The ``key: <n> kB`` line of a Linux ``/proc`` file, in bytes (``None`` where unreadable)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


DEFAULT_MEMORY_SHARE = 0.5


def memory_limit_bytes(max_memory_gb, device: torch.device) -> float:
    """``max_memory_gb`` in bytes, or by default half of the memory free when the job starts.

    Half, not most: on a shared machine the others' use grows while a job runs, and a job that
    starts near the edge is killed from outside with nothing written. The estimate each run
    prints says how much a job needs, so a user with the machine to themselves raises the
    limit knowingly (``max_memory_gb``)."""
    if max_memory_gb is not None:
        return float(max_memory_gb) * 2**30
    return DEFAULT_MEMORY_SHARE * available_bytes(device)
