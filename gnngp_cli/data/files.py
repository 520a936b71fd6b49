"""Files written so that readers never see half of one: a temporary beside the target, then an
atomic rename. Temporaries are created with mode ``0644 & ~umask`` (``mkstemp`` would give
0600, unreadable to the other users of a shared cache; ``0666`` under a umask of 002 would be
group-writable, which :mod:`.trust` refuses to trust), in folders made ``0755 & ~umask``, and are named
``.<target>.<host>.<pid>.<random>.tmp``, so that one left by a killed process is recognised and
removed by the next writer. :func:`locked` serialises writers across processes (``flock`` on a
sidecar ``.<target>.lock``); :func:`held_for_job` marks a file's jobs for their lives (``flock`` on a
sidecar ``.<target>.jobs``: shared by jobs that add rows, exclusive for one that reads it first).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import socket
import stat
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, Optional

from .trust import make_private_dirs

STALE_SECONDS = 24 * 3600   # another host's temporary older than this is abandoned


def _host() -> str:
    return socket.gethostname().replace(".", "_") or "host"


def temporary_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is alive (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete temporaries of ``path`` left by dead processes (this host) or abandoned for a day
    (other hosts); returns the ones removed."""
    removed = []
    prefix = f".{path.name}."
    try:
        candidates = [p for p in path.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(".tmp")]
    except OSError:
        return removed
    for tmp in candidates:
        parts = tmp.name[len(prefix):].split(".")
        try:
            host, pid = parts[0], int(parts[1])
            stale = (not process_alive(pid)) if host == _host() else time.time() - tmp.stat().st_mtime > STALE_SECONDS
        except (IndexError, ValueError, OSError):   # a temporary of the old mkstemp naming
            try:
                stale = time.time() - tmp.stat().st_mtime > 60
            except OSError:
                continue
        if stale:
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
    return removed


def atomic_write(path: Path, write: Callable, binary: bool = False, mode: Optional[int] = None) -> None:
    """Write ``path`` by ``write(file)`` on a temporary, fsync it, and rename it over ``path``;
    ``mode``: the permissions the file gets (the file it replaces kept its own: ``chmod 600``),
    never group- or world-writable."""
    make_private_dirs(path.parent)
    remove_stale_temporaries(path)
    tmp = temporary_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)   # the umask applies; never group-writable
    if mode is not None:
        os.fchmod(fd, mode & 0o7755)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"newline": ""})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        if err.filename is None:   # a failed write (a full disk) names no file: name the one being written
            err.filename = str(path)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as source:
        atomic_write(dst, lambda out: shutil.copyfileobj(source, out), binary=True)


@contextlib.contextmanager
def held_for_job(path: Path, exclusive: bool) -> Iterator[bool]:
    """Hold a ``flock`` on ``.<path>.jobs`` (beside ``path``) for the block without waiting:
    shared (any number of jobs appending their rows) or ``exclusive`` (a job that decides what to
    run from the rows there: no other job may add rows meanwhile). Yields ``False`` when another
    process holds it the other way (or exclusively); ``True`` when held, or when the folder or its
    file system takes no lock (a warning says the job runs unguarded). The kernel releases it
    when its process ends, however it ends."""
    lock = path.with_name(f".{path.name}.jobs")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError:
        try:   # another user's lock file, or a folder of that name: flock takes a descriptor opened to read (never waiting on a FIFO)
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            if not (stat.S_ISREG(os.fstat(fd).st_mode) or stat.S_ISDIR(os.fstat(fd).st_mode)):
                os.close(fd)
                raise OSError(errno.EINVAL, "not a regular file or folder")
        except OSError as err:
            print(f"gnngp: warning: could not open {lock} ({err.strerror}), which keeps a resume from running beside another job on "
                  f"{path}; the job runs unguarded", file=sys.stderr)
            yield True
            return
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        except OSError as err:   # no locks on this file system
            print(f"gnngp: warning: {lock} could not be locked ({err.strerror}: a file system without flock), which keeps a resume from "
                  f"running beside another job on {path}; the job runs unguarded", file=sys.stderr)
            yield True
            return
        yield True
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``.<path>.lock`` (beside ``path``) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
