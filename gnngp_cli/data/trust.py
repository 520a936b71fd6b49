"""Who could have written a file gnngp trusts: ssh's ``StrictModes`` for the data cache.

A digest stored beside a file defends against accidents only: whoever can write the file can
write its digest too. So before gnngp reads state it trusts from disk (a processed dataset
cache, cached or given shards, a node order, the folder of a run's roots, a results file it
resumes), it checks who could have written it: the file and every folder from the base it lives
under (the data root, ``compute.roots_dir``, ``compute.shards``, the results file's folder) down
to it must be owned by this user (or root) and writable by no group and no other user. Folders
above the base (``/tmp`` above a data root there) are not checked, as ssh checks no folder above
the home directory.

``data.shared_cache=true`` trusts a cache that another user keeps for everyone (a lab's cache,
owned by its maintainer): a file or folder owned by another user is then trusted as long as no
one but its owner can write it. A group- or world-writable one is never trusted.

The offline mirror (``data.mirror``) is not checked: it is read, never trusted; each raw file in
it is checked against the sha256 table shipped inside the package before it is copied.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

FIX_SHARED = "data.shared_cache=true trusts a cache another user keeps read-only for everyone"


@dataclass(frozen=True)
class Distrust:
    """Why ``path`` is not trusted, and the command that mends it."""

    path: Path
    why: str     # "is writable by its group and others", "is owned by uid 1001, not you (uid 0)"
    fix: str     # "chmod go-w <path>"

    def text(self) -> str:
        return f"{self.path} {self.why}, so anyone who can write it could have rewritten it and its digests; fix: {self.fix}"


def _writers(mode: int) -> str:
    group, others = bool(mode & stat.S_IWGRP), bool(mode & stat.S_IWOTH)
    return "its group and others" if group and others else "its group" if group else "others"


def _written_by_others(path: Path, st: os.stat_result, shared: bool) -> Optional[Distrust]:
    """Why ``path`` (``st``: its stat) could have been written by someone else: group- or
    world-writable, or owned by another user than this one or root (unless ``shared``)."""
    me = os.geteuid()
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):   # /dev/null: no chmod of a device is a fix (nor safe)
            return Distrust(path, f"is writable by {_writers(st.st_mode)} and is no folder or file (a device)",
                            "give a folder of your own instead")
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:   # /tmp: every user's by design; chmod would break it for them
            return Distrust(path, f"is writable by {_writers(st.st_mode)} (a shared folder, as /tmp is)",
                            f"give a folder of your own inside it instead (mkdir -m 755 {path / 'gnngp'}); do not chmod {path}")
        return Distrust(path, f"is writable by {_writers(st.st_mode)}", f"chmod go-w {path}")
    if st.st_uid not in (me, 0) and not shared:
        return Distrust(path, f"is owned by uid {st.st_uid}, not you (uid {me})", f"chown {me} {path}, or {FIX_SHARED}")
    return None


def distrust(path: Path, base: Optional[Path] = None, shared: bool = False) -> Optional[Distrust]:
    """The first of ``base``, each folder below it down to ``path``, and ``path`` itself that
    someone other than this user (or root) could have written (``None``: none). Paths that do not
    exist are skipped; ``path`` outside ``base``: ``path`` and its own folder are checked. A
    ``path`` that is a symbolic link (or lies below one) is checked at its target too: the target
    and the folder holding it (``os.stat`` follows the link, but not to the target's folder)."""
    path = Path(path).absolute()
    chain = [path.parent, path]
    if base is not None:
        base = Path(base).absolute()
        try:
            parts = path.relative_to(base).parts
        except ValueError:
            parts = None
        if parts is not None:
            chain = [base] + [base.joinpath(*parts[:i + 1]) for i in range(len(parts))]
    for step in chain:
        try:
            found = _written_by_others(step, os.stat(step), shared)
        except OSError:
            continue
        if found is not None:
            return found
    for step in chain:   # a link in the chain (the file, or a folder of it): its target, and the folder holding the target, which
        if not os.path.islink(step):   # whoever can write could rename and replace (a trial: processed/ a link into a 0777 folder)
            continue
        try:
            target = step.resolve()
        except (OSError, RuntimeError):   # a link that loops: whoever reads it names that
            continue
        found = _target_distrust(target, shared)
        if found is not None:
            return found
    return None


def _target_distrust(target: Path, shared: bool) -> Optional[Distrust]:
    """:func:`distrust` of a link's target and the folder that holds it; a world-writable folder
    with the sticky bit (``/tmp``) holds safely what this user (or root) owns: others can neither
    rename nor remove it there."""
    try:
        st, parent = os.stat(target), os.stat(target.parent)
    except OSError:
        return None
    found = _written_by_others(target, st, shared)
    if found is not None:
        return found
    sticky = bool(parent.st_mode & stat.S_ISVTX)
    if parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky:
        return Distrust(target.parent, f"is writable by {_writers(parent.st_mode)} (it holds the target of a link gnngp follows)",
                        f"chmod go-w {target.parent}, or keep the target in a folder of your own")
    return None


def untrusted(path: Path, base: Optional[Path] = None, shared: bool = False) -> Optional[str]:
    """:func:`distrust`'s reason as one line (``None``: trusted)."""
    found = distrust(path, base, shared)
    return None if found is None else found.text()


def untrusted_tree(root: Path, base: Optional[Path] = None, shared: bool = False) -> Optional[str]:
    """:func:`untrusted` for ``root`` (from ``base`` down to it) and for every folder and file
    below it (a folder of shards: a few ``stat`` calls per row block)."""
    found = untrusted(root, base, shared)
    if found is not None or not Path(root).is_dir():
        return found
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            found = untrusted(Path(folder) / name, Path(folder) / name, shared)
            if found is not None:
                return found
    return None


def make_private_dirs(folder: Path) -> None:
    """``folder`` and its missing parents, each made ``0755 & ~umask``: never group- or
    world-writable, whatever the umask (``mkdir -p`` under a umask of 002 makes them
    group-writable, and so untrusted by the next run)."""
    folder = Path(folder)
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for step in reversed(missing):
        try:
            step.mkdir(mode=0o755)
        except FileExistsError:
            continue
