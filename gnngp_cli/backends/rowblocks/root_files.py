"""Roots as row-block files: where a ``compute=dask`` run keeps each layer's ``N x r`` factor.

A root that a later step reads again (a layer's output, the operand of ``A Q``, the input root)
is written once, one ``.npy`` file per row block, into a folder that every worker sees (the
run's folder under ``compute.roots_dir``), and read back from there: whole blocks by row-local
tasks, and only the rows it needs by each output block of ``A Q``
(:meth:`~.sharded_graph.ShardedGraph.convolve`, memory-mapped). Writing replaces a file atomically, so a
task recomputed after a lost worker writes the same bytes again and no reader sees half a file.

Why files, and not roots persisted in the workers' memory: on a random graph every output block
of ``A Q`` reads every source block. Held by the workers, a root larger than their memory was
spilled by Dask and read back from disk, whole block by whole block, once for every group of
output blocks (at 10^7 nodes, 4 workers of 3 GB: 1,144 worker-seconds reading spilled blocks
and 1,993 moving partial products between workers, for 670 s of wall time). From files, a
worker reads only the rows an output block needs, the operating system caches what is read
often, and nothing moves between workers but small results.

The run's folder is emptied when the next evaluation (the next gamma of a search, the next seed)
starts (:meth:`RootStore.clear`; the last one's files serve its result until then) and removed
when the run ends, fails or is stopped (Ctrl-C, SIGTERM). A run killed outright (SIGKILL) leaves
its folder. The folder is made with its marker already in it (``owner.json``: made by gnngp,
the folder's own name, host and process; written in a hidden ``.run-<id>.tmp`` folder renamed
into place, and held under an exclusive ``flock`` for the run's life), and the next run on that
host removes only the folders whose marker proves gnngp made them and whose lock is free (its
process gone, in whatever PID namespace). A folder without such a marker is never touched, whatever
its name or age: it may be a user's. One named as gnngp names its folders but without the marker
(an older gnngp's) is a warning, once, with the command that removes it.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...data.files import process_alive
from ...data.shards import load_npy
from ...data.trust import make_private_dirs
from ...errors import ComputeError
from ...job.estimate import size_text
from ...kernels.numerics import not_finite

log = logging.getLogger("gnngp")

OWNER = "owner.json"


def block_path(folder: str, b: int) -> str:
    return os.path.join(folder, f"{b:05d}.npy")


def _write_block(block: np.ndarray, path: str) -> bool:
    """Write ``block`` to ``path`` (atomically); whether every entry is finite."""
    block = np.ascontiguousarray(block)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as f:
            np.save(f, block, allow_pickle=False)
        os.replace(tmp, path)
    except OSError as err:
        reason = err.strerror or f"{err}: a short write, the folder is likely full"   # numpy's short write has no errno
        Path(tmp).unlink(missing_ok=True)
        try:
            free = f"{size_text(shutil.disk_usage(os.path.dirname(path)).free)} free there once the partial file was removed"
        except OSError:
            free = "the folder is gone"
        raise ComputeError(f"cannot write root block {path} ({reason}; {free}); compute.roots_dir needs room for "
                           "the run's roots (its estimate line says how much) and must be writable by every worker") from None
    return bool(np.isfinite(block).all())


def read_block(path: str, mmap: bool = False) -> np.ndarray:
    """One row block of a written root (never unpickled); ``mmap``: memory-mapped, read-only."""
    try:
        return load_npy(path, mmap)
    except (OSError, ValueError) as err:
        raise ComputeError(f"root block {path} is missing or unreadable ({err}); compute.roots_dir must be one folder that "
                           "every worker sees, with room for the run's roots") from None


def _rows_of(path: str, local: np.ndarray) -> np.ndarray:
    return np.array(read_block(path, mmap=True)[local])


MARK = "gnngp roots"


def _lock(path: Path, hold: bool) -> Optional[int]:
    """An exclusive ``flock`` on ``path`` without waiting: the open descriptor holding it when
    ``hold`` (the run's own marker, for its life), else released at once; ``None`` when another
    open file holds it (a live run, in whatever PID namespace of this kernel) or it cannot be
    taken. The kernel releases it when its process ends, however it ends."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    if not hold:
        os.close(fd)
    return fd


def _proven_dead(folder: Path, name: str, host: str) -> Optional[int]:
    """The process id of the gnngp run that made ``folder`` (whose own name is ``name``), if its
    marker proves gnngp made it, on this host, and that process is gone; else ``None``. A marker
    this gnngp wrote (``locked``) is held locked by its run for the run's life: a lock that can be
    taken is the proof, since a process id alone is not one (a live run in another PID namespace
    with this host name, a container sharing the folder, has an id this process may see as gone)."""
    try:
        owner = json.loads((folder / OWNER).read_text())
        if not (isinstance(owner, dict) and owner.get("made_by") == MARK and owner.get("folder") == name and owner.get("host") == host):
            return None
        pid = int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if owner.get("locked"):
        return pid if _lock(folder / OWNER, hold=False) is not None else None
    return None if process_alive(pid) else pid


OLDER_NAME = re.compile(r"run-[0-9a-f]{12}")   # the name every gnngp has given a run's folder
_TOLD: set[Path] = set()   # the folders whose unmarked roots this process has warned of


def _marked(folder: Path) -> bool:
    try:
        owner = json.loads((folder / OWNER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(owner, dict) and owner.get("made_by") == MARK


def _empty_and_old(folder: Path, seconds: float = 60.0) -> bool:
    """An empty folder untouched for ``seconds`` (a run making one writes its marker at once)."""
    try:
        return not any(folder.iterdir()) and time.time() - folder.stat().st_mtime > seconds
    except OSError:
        return False


def sweep_dead_runs(base: Path) -> None:
    """Remove the folders under ``base`` of runs on this host whose process is gone (killed
    outright, so their own clean-up never ran), and only those: the marker must prove gnngp
    made the folder. Other hosts' folders, and anything without the marker, are left alone.
    Folders named as gnngp names them but without the marker (an older gnngp's: it wrote none,
    or one that proves nothing) are one warning, once, saying so and how to remove them."""
    host = socket.gethostname()
    unmarked = []
    for folder in [*base.glob("run-*"), *base.glob(".run-*.tmp")]:
        name = folder.name[1:-len(".tmp")] if folder.name.startswith(".") else folder.name
        if folder.is_symlink() or not folder.is_dir():
            continue
        if folder.name.startswith(".") and _empty_and_old(folder):   # a removal cut short between its marker and its folder
            shutil.rmtree(folder, ignore_errors=True)
            continue
        pid = _proven_dead(folder, name, host)
        if pid is not None:
            shutil.rmtree(folder, ignore_errors=True)
            log.info("removed the roots of a gnngp run that was killed (process %d gone): %s", pid, folder)
        elif OLDER_NAME.fullmatch(folder.name) and not _marked(folder):
            unmarked.append(folder)
    if unmarked and base not in _TOLD:
        _TOLD.add(base)
        shown = " ".join(str(f) for f in sorted(unmarked)[:3]) + (f" (and {len(unmarked) - 3} more)" if len(unmarked) > 3 else "")
        log.warning("%d roots folder(s) under %s have no owner.json marker (an older gnngp made them), so no run ever removes them; "
                    "when no gnngp run is using %s, delete them: rm -r %s", len(unmarked), base, base, shown)


class RootStore:
    """The row-block files of one run's roots, in ``<base>/run-<id>/<array name>/<block>.npy``
    (``base`` made absolute: workers may start elsewhere)."""

    def __init__(self, base: Path):
        base = Path(base).expanduser().absolute()
        name = f"run-{uuid.uuid4().hex[:12]}"
        self.folder = base / name
        making = base / f".{name}.tmp"
        try:   # the marker is in the folder before it has its name: every run-* folder gnngp made is marked
            make_private_dirs(base)
            making.mkdir(mode=0o755, exist_ok=False)   # never group- or world-writable, whatever the umask (data.trust)
            (making / OWNER).touch()
            # held until close (or the process's end): the proof the run lives; where the file system has no flock, the
            # marker says so and the process id is the word
            self._held = _lock(making / OWNER, hold=True)
            (making / OWNER).write_text(json.dumps({"made_by": MARK, "folder": name, "host": socket.gethostname(), "pid": os.getpid(),
                                                    "locked": self._held is not None}))
            os.rename(making, self.folder)
        except OSError as err:
            self._release()
            shutil.rmtree(making, ignore_errors=True)
            raise ComputeError(f"cannot write the roots of this run into {base} ({err.strerror or err}); "
                               "set compute.roots_dir to a writable folder that every worker sees") from None
        sweep_dead_runs(base)
        self.paths: dict[str, str] = {}   # array name -> its folder
        self.read_back: dict[str, Any] = {}   # name of an array written -> the array read from its files

    def check_room(self, need_gib: float) -> None:
        """Refuse, before any kernel work, a folder with less free space than ``need_gib``
        (this run's own files are cleared first)."""
        self.clear()
        free = shutil.disk_usage(self.folder).free
        if free < need_gib * 2**30:
            raise ComputeError(f"compute.roots_dir={self.folder.parent} has {size_text(free)} free and this run writes about "
                               f"{size_text(need_gib * 2**30)} of roots at its peak; free space there or set compute.roots_dir to a "
                               "folder with room that every worker sees")

    def written(self, q, what: str) -> Any:
        """``q`` (a Dask array chunked by row blocks), written to files unless it was read from
        them, and read back from them. Raises :func:`~gnngp_cli.kernels.numerics.not_finite`'s
        error naming ``what`` when an entry is not finite."""
        import dask
        import dask.array as da

        if q.name in self.read_back:   # written before (a root that is both K's and Theta's): its files, not its graph again
            return self.read_back[q.name]
        if q.name in self.paths:
            return q
        if q.ndim == 2 and q.numblocks[1] != 1:
            q = q.rechunk({1: -1})
        folder = self.folder / q.name
        folder.mkdir(parents=True, exist_ok=True)
        paths = [block_path(str(folder), b) for b in range(q.numblocks[0])]
        flags = dask.compute(*[dask.delayed(_write_block, pure=True)(block, path) for block, path in zip(q.to_delayed().ravel(), paths)])
        self.paths[q.name] = str(folder)   # removed by clear() even if the check below fails
        if not all(flags):
            raise not_finite(what, q.dtype)
        blocks = [da.from_delayed(dask.delayed(read_block, pure=True)(path), shape=(rows, *q.shape[1:]), dtype=q.dtype,
                                  name=f"read_block-{dask.base.tokenize(path)}")
                  for path, rows in zip(paths, q.chunks[0])]
        out = da.concatenate(blocks, axis=0)
        self.paths[out.name] = str(folder)
        self.read_back[q.name] = out
        return out

    def folder_of(self, q, what: str) -> tuple[str, Any]:
        """The folder of ``q``'s block files (written first if need be) and the array read from them."""
        q = self.written(q, what)
        return self.paths[q.name], q

    def gather_rows(self, q, nodes: np.ndarray, what: str) -> np.ndarray:
        """``q[nodes]`` on the client (``nodes`` few: the landmarks), each block's rows read by a
        task from its file."""
        import dask

        folder, q = self.folder_of(q, what)
        order = np.argsort(nodes, kind="stable")
        ids = np.asarray(nodes)[order]
        starts = np.cumsum((0, *q.chunks[0]))
        parts = []
        for b in range(q.numblocks[0]):
            lo, hi = np.searchsorted(ids, [starts[b], starts[b + 1]])
            if hi > lo:
                parts.append(dask.delayed(_rows_of, pure=True)(block_path(folder, b), ids[lo:hi] - starts[b]))
        rows = dask.compute(*parts)
        out = np.concatenate(rows, axis=0) if rows else np.zeros((0, *q.shape[1:]), dtype=q.dtype)
        return out[np.argsort(order, kind="stable")]   # back in the order of ``nodes``

    def clear(self) -> None:
        """Remove every file written so far."""
        for folder in set(self.paths.values()):
            shutil.rmtree(folder, ignore_errors=True)
        self.paths.clear()
        self.read_back.clear()

    def _release(self) -> None:
        held, self._held = getattr(self, "_held", None), None
        if held is not None:
            os.close(held)

    def close(self) -> None:
        """Remove the run's folder: renamed to its hidden ``.tmp`` name first, then its files, the
        marker last, so that a stop part way (a second signal during the clean-up) never leaves a
        ``run-*`` folder without its marker (a later run would call it an older gnngp's)."""
        self.paths.clear()
        self.read_back.clear()
        going = self.folder.parent / f".{self.folder.name}.tmp"
        try:
            os.rename(self.folder, going)
        except OSError:
            going = self.folder
        for entry in going.iterdir() if going.is_dir() else ():
            if entry.name == OWNER:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        shutil.rmtree(going, ignore_errors=True)
        self._release()
