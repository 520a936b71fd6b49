"""Where raw dataset files come from: a writable cache, an offline mirror, or a download.

Layout (PyG's): ``<root>/<Name>/raw/<file>``. A mirror directory with the same layout
(config ``data.mirror`` or environment ``GNNGP_DATA_MIRROR``) is read, never written: files
found there are copied into the cache and no download is tried.

Every raw file with a published digest (:mod:`~gnngp_cli.data.digests`) is checked on every
fetch: a mirror file before it is copied, a download before it is kept, a cached file each time it
is used. ``data.verify=false`` turns the check off, with a warning.

A loader reads a raw file through :meth:`DataStore.open` (its ``opener``), never again by path:
the bytes it parses are the bytes checked, read once (a file of up to :data:`SNAPSHOT_BYTES` is
read into memory, checked, and parsed from there; a larger one is checked and parsed from the
same open file, so a file replaced after the check, the way a copy or a download is written,
never reaches the loader). They must also be the bytes :meth:`fetch` checked, whose digests key
the processed cache: a file changed in between is refused in one line.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import socket
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, ContextManager, Iterator, Mapping, Optional, Sequence

from ..errors import DatasetError, DatasetUnavailable
from .digests import FETCH_AGAIN, IN_MIRROR, DigestMismatch, sha256, side_by_side, verify_file, verify_handle, warn_unverified
from .files import atomic_copy, atomic_write
from .trust import untrusted

MIRROR_ENV = "GNNGP_DATA_MIRROR"
ROOT_ENV = "GNNGP_DATA_ROOT"
SNAPSHOT_BYTES = 256 * 2**20   # a raw file up to this size is read into memory once, checked and parsed from there

Opener = Callable[[Path], ContextManager[BinaryIO]]   # how a loader opens a raw file: DataStore.open, or plain_open


def plain_open(path: Path) -> ContextManager[BinaryIO]:
    """A file opened as it is (a user's own files, which have no published digest; tests)."""
    return open(path, "rb")


def default_root() -> Path:
    """``$GNNGP_DATA_ROOT``, else ``$XDG_CACHE_HOME/gnngp`` (``~/.cache/gnngp``)."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "gnngp"


@dataclass
class DataStore:
    root: Path
    mirror: Optional[Path] = None
    download: bool = True
    timeout_s: float = 20.0
    verify: bool = True
    shared_cache: bool = False   # trust caches another user owns, if no one but its owner can write them (:mod:`.trust`)
    digests: dict[str, dict[str, str]] = field(default_factory=dict)   # name -> file -> sha256 of the last fetch

    @classmethod
    def from_config(cls, root: Optional[str], mirror: Optional[str], download: bool = True, timeout_s: float = 20.0,
                    verify: bool = True, shared_cache: bool = False) -> "DataStore":
        mirror = mirror or os.environ.get(MIRROR_ENV) or None   # checked when a file is looked for there (_obtain): a run that reads
        # none (csbm, a dataset in the cache) runs whatever the variable says
        return cls(Path(root) if root else default_root(), Path(mirror) if mirror else None, download, timeout_s, verify, shared_cache)

    @classmethod
    def of(cls, data: Any) -> "DataStore":
        """The store a job's ``data`` config describes (root, mirror, download, its timeout, verify)."""
        return cls.from_config(data.root, data.mirror, data.download, data.download_timeout, data.verify, data.get("shared_cache", False))

    def untrusted(self, path: Path) -> Optional[str]:
        """Why ``path`` under the data root is not to be trusted, in one line (``None``: it is): a
        folder from the root down to it, or the file, that another user could have written
        (:func:`~gnngp_cli.data.trust.untrusted`)."""
        return untrusted(path, self.root, self.shared_cache)

    def folder(self, name: str) -> Path:
        return self.root / name

    def fetch(
        self,
        name: str,
        files: Sequence[str],
        urls: Optional[Mapping[str, str]] = None,
        archive: Optional[tuple[str, Callable[[Path, Path], None]]] = None,
    ) -> Path:
        """Make ``<root>/<name>/<file>`` exist for every file (paths relative to ``<name>``).

        Cache first, then the mirror (copied, atomically), then a download with a timeout:
        one URL per file (``urls``), or one archive ``(url, unpack(archive_path, folder))``.
        Raises :class:`DatasetError` naming the dataset, where it looked and the fix, and
        :class:`~gnngp_cli.data.digests.DigestMismatch` for a file that is not the published one.
        The sha256 of every file is kept in ``self.digests[name]``.
        """
        if not self.verify:
            warn_unverified(name)
        try:
            target = self._obtain(name, files, urls, archive)
        except OSError as err:   # downloads report their own failures; this is the cache itself
            raise DatasetError(
                f"the data cache {self.root} cannot be written ({err.strerror or err}{f': {err.filename}' if err.filename else ''}); "
                f"set data.root (or {ROOT_ENV}) to a writable folder"
            ) from err
        self.digests[name] = dict(zip(files, side_by_side(lambda f: self._checked(target / f, f"{name}/{f}"), files)))
        return target

    @contextlib.contextmanager
    def open(self, path: Path) -> Iterator[BinaryIO]:
        """Raw file ``path`` (``<root>/<name>/<file>``, fetched) as its loader reads it: the bytes
        checked are the bytes it reads (see the module's docstring). Raises
        :class:`~gnngp_cli.data.digests.DigestMismatch` for bytes that are not the published
        file, and :class:`DatasetError` for bytes that are not the ones :meth:`fetch` checked."""
        path = Path(path)
        try:
            name, *parts = path.relative_to(self.root).parts
        except ValueError:
            raise DatasetError(f"raw file {path} is not under the data root {self.root}; gnngp reads raw files from its cache") from None
        key, file = "/".join([name, *parts]), "/".join(parts)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            handle: BinaryIO = f
            if size <= SNAPSHOT_BYTES:
                handle = io.BytesIO(f.read())
            start = handle.tell()
            actual = verify_handle(handle, size, key, str(path)) if self.verify else _sha256_of(handle)
            handle.seek(start)
            fetched = self.digests.get(name, {}).get(file)
            if fetched is not None and fetched != actual:
                raise DatasetError(f"raw file {path} changed after it was checked (sha256 {actual[:12]}, checked {fetched[:12]}): another "
                                   "process wrote it while this run loaded it; run again, and keep the data cache to yourself (data.root)")
            yield handle

    def opener(self) -> Opener:
        """:meth:`open`, for a loader's ``opener`` argument."""
        return self.open

    def _prune(self, name: str, missing: Sequence[str]) -> None:
        """The empty folders a failed fetch of ``name`` made (a download makes its file's folder first)."""
        for f in missing:
            _prune_empty((self.folder(name) / f).parent, self.root)

    def _checked(self, path: Path, key: str, shown: Optional[str] = None, fix: str = FETCH_AGAIN) -> str:
        return verify_file(path, key, shown, fix) if self.verify else sha256(path)

    def _obtain(self, name: str, files: Sequence[str], urls, archive) -> Path:
        target = self.folder(name)
        missing = [f for f in files if not (target / f).is_file()]
        if not missing:
            return target
        if self.mirror is not None:
            if not self.mirror.is_dir():
                raise DatasetError(f"data mirror {self.mirror} is not a directory, and {name} needs {missing[0]} from it (not in the cache "
                                   f"{target}); set data.mirror (or {MIRROR_ENV}) to a folder holding <Name>/raw/ files, or unset it")
            for f in list(missing):
                src = self.mirror / name / f
                if src.is_file():
                    self._checked(src, f"{name}/{f}", fix=IN_MIRROR)   # a tampered mirror file is never copied
                    atomic_copy(src, target / f)
                    missing.remove(f)
        if missing and self.download and archive:
            url, unpack = archive
            with tempfile.TemporaryDirectory(dir=self.root if self.root.is_dir() else None) as tmp:
                try:
                    _download(url, Path(tmp) / "archive", self.timeout_s)
                    unpack(Path(tmp) / "archive", target)
                except (OSError, ValueError) as err:
                    raise self._unavailable(name, missing, f"download failed ({url}: {getattr(err, 'reason', err)})") from err
            missing = [f for f in missing if not (target / f).is_file()]
        if missing and self.download and urls:
            failures = []
            for f in list(missing):
                if f in urls:
                    try:
                        _download(urls[f], target / f, self.timeout_s)
                        try:
                            self._checked(target / f, f"{name}/{f}", shown=f"{target / f} (downloaded from {urls[f]}, not kept)")
                        except DigestMismatch:
                            (target / f).unlink()   # never keep a download that is not the published file
                            raise
                        missing.remove(f)
                    except OSError as err:
                        failures.append(f"{urls[f]}: {getattr(err, 'reason', err)}")
                        break
            if missing:
                raise self._unavailable(name, missing, "download failed (" + "; ".join(failures or ["no URL"]) + ")")
        if missing:
            raise self._unavailable(name, missing, "download is off (data.download=false)" if not self.download else "download has no source")
        return target

    def _unavailable(self, name: str, missing: Sequence[str], why: str) -> DatasetUnavailable:
        self._prune(name, missing)
        mirror = f"nor mirror {self.mirror / name}" if self.mirror else f"and no mirror is set ({MIRROR_ENV} unset)"
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        if not self.mirror:
            fix = f"set data.mirror=<dir> (or {MIRROR_ENV}) to a folder with {name}/..., or go online"
        elif not (self.mirror / name).is_dir() and self.mirror.name == name:   # data.mirror=.../Cora: the dataset's folder itself
            fix = f"data.mirror={self.mirror} is the {name}/ folder itself; give the folder that holds it: data.mirror={self.mirror.parent}"
        elif not (self.mirror / name).is_dir():
            fix = (f"the mirror {self.mirror} has no {name}/ folder: add it there, set data.mirror=<dir> (or {MIRROR_ENV}) "
                   f"to a folder that has it, or go online")
        else:
            them = "it" if len(missing) == 1 else "them"
            fix = (f"the mirror's {name}/ folder lacks {shown}: add {them} there, set data.mirror=<dir> "
                   f"(or {MIRROR_ENV}) to a folder that has {them}, or go online")
        return DatasetUnavailable(
            f"dataset '{name}' is not available: {shown} not in cache {self.folder(name)} {mirror}, "
            f"and the {why}; fix: {fix}"
        )


def _prune_empty(folder: Path, root: Path) -> None:
    """Remove ``folder`` and its parents up to ``root`` (not ``root``) while they are empty: the
    folders a failed download made (``<root>/Cora/raw``) leave nothing behind."""
    folder, root = Path(folder), Path(root)
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()   # only an empty folder; anything in it stays
        except OSError:
            return
        folder = folder.parent


def _download(url: str, dst: Path, timeout_s: float) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout_s)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            atomic_write(dst, lambda out: shutil.copyfileobj(response, out), binary=True)
    finally:
        socket.setdefaulttimeout(old)


def _sha256_of(f: BinaryIO) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()
