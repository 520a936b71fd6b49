"""The check of raw files against their published digests.

Each dataset's registry entry carries the digests of its raw files (``digests=``, beside its
loader): ``<Name>/raw/<file>`` (the cache layout) to the digests a genuine copy may have: a hex
sha256, or ``gitblob:<sha1>``, the git blob id of the file in its source repository
(``sha1("blob <size>\\0" + content)``), used where only that is published.

Sources: Planetoid files are kimiyoung/planetoid @ af6abf46; MUSAE files are
benedekrozemberczki/MUSAE @ 5f901232; geom-gcn splits are graphdml-uiuc-jlu/geom-gcn @ f1fc0d14
(each checked byte for byte against the git blob ids of those commits). PubMed's ``allx``
original is only known by its git blob id; the offline mirror holds a copy rebuilt from the
same values (sha256 below), which is also accepted. MUSAE's ``crocodile.json`` (absent from the
mirror) is known by its git blob id only. Reddit (data.dgl.ai) and ogbn-arxiv
(snap.stanford.edu) publish no digests: their files are checked by format and size only
(:data:`FORMAT_ONLY`), as are a user's own files (``dataset=custom``).
"""
from __future__ import annotations

import hashlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, Callable, Sequence, TypeVar

from ..errors import DatasetError
from .datasets import DATASETS


FORMAT_ONLY = ("Reddit", "ogbn_arxiv")


class DigestMismatch(DatasetError):
    """A raw file whose content is not the published one."""


T = TypeVar("T")


def side_by_side(digest: Callable[[T], str], items: Sequence[T]) -> list[str]:
    """``digest`` of each item, in order, on the machine's cores at once (hashlib releases the GIL
    while it hashes); the first item that raises raises, as one at a time would."""
    workers = min(len(items), os.cpu_count() or 1)
    if workers <= 1:
        return [digest(item) for item in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(digest, items))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob(path: Path) -> str:
    """The git blob id of a file: ``sha1("blob <size>\\0" + content)``."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def known_digests() -> dict[str, tuple[str, ...]]:
    """Every published digest, from the dataset entries: ``<Name>/raw/<file> -> digests``."""
    out: dict[str, tuple[str, ...]] = {}
    for entry in DATASETS.values():
        out.update(entry.digests)
    return out


def expected(key: str) -> tuple[str, ...]:
    """The accepted digests of ``<Name>/raw/<file>``; empty when none is published."""
    for entry in DATASETS.values():
        if key in entry.digests:
            return entry.digests[key]
    return ()


FETCH_AGAIN = "delete it and fetch it again (a tampered or corrupt copy)"
IN_MIRROR = ("replace it in the mirror with the published file or point data.mirror at another copy (gnngp reads the mirror, never "
             "writes it)")


def verify_file(path: Path, key: str, shown: str | None = None, fix: str = FETCH_AGAIN) -> str:
    """Check ``path`` (the file known as ``key``) against the table; return its sha256.

    Raises :class:`DigestMismatch` naming the file and both digests. A file without a
    published digest passes (its loader checks its format)."""
    with open(path, "rb") as f:
        return verify_handle(f, os.fstat(f.fileno()).st_size, key, shown or str(path), fix)


def verify_handle(f: BinaryIO, size: int, key: str, shown: str, fix: str = FETCH_AGAIN) -> str:
    """:func:`verify_file` of the ``size`` bytes an open file ``f`` holds from where it stands,
    read once: its sha256, and its git blob id from the same bytes where the table accepts one."""
    accepted = expected(key)
    digest = hashlib.sha256()
    blob = hashlib.sha1(f"blob {size}\0".encode()) if any(d.startswith("gitblob:") for d in accepted) else None
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
        if blob is not None:
            blob.update(block)
    actual = digest.hexdigest()
    if not accepted or actual in accepted:
        return actual
    blobs = [d.split(":", 1)[1] for d in accepted if d.startswith("gitblob:")]
    if blobs and blob.hexdigest() in blobs:
        return actual
    sha = [d for d in accepted if not d.startswith("gitblob:")]
    if sha:
        found, want = f"sha256 {actual}", sha[0]
    else:
        found, want = f"git blob id {blob.hexdigest()} (sha256 {actual})", f"git blob id {blobs[0]}"
    raise DigestMismatch(
        f"raw file {shown} has {found} but the published file has {want}; "
        f"{fix}, or set data.verify=false to use a modified copy at your own risk"
    )


def warn_unverified(name: str) -> None:
    print(f"gnngp: warning: data.verify=false: the raw files of {name} are not checked against their published digests", file=sys.stderr)
