"""The processed cache: a dataset's tensors built once from its verified raw files.

``<root>/<Name>/processed/gnngp.pt`` holds a plain dict ``{"format", "raw", "tensors", "digests",
"manifest"}``: the sha256 of every raw file it was built from, a dict of tensors, the sha256 of
each tensor (its dtype, shape and bytes) written with them, and a digest of those names and
digests (a flipped bit in a tensor's name, which both dicts share, is caught by it). It is read with
``torch.load(weights_only=True)`` only (no global may be named, so no code in it can run), and
its tensors are hashed again on every load: a file that fails that load, was built from other
raw files, or whose tensors are not the ones written (an edited label, one flipped byte) is
rebuilt from the verified raw files, with a warning naming it. Its tensors are hashed side by side
on the machine's cores. A file that another user could have
written (it, or a folder from the data root down to it, is group- or world-writable or owned by
another user: :mod:`.trust`) is neither read nor written: whoever can write it can rewrite its
digests too. The run says so in one warning naming the path and the fix, and builds the tensors
from the raw files (checked against the digests shipped in the package), in memory. Hashing costs about a second per
GB of tensors on one core (Reddit: 2.4 GB), against minutes of kernel work.
PyG's and OGB's own processed files (``data.pt``, ``pre_transform.pt``, ``geometric_data_processed.pt``)
are never read: their loaders fall back to ``weights_only=False``.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Callable, Mapping, Optional

import torch

from .digests import side_by_side
from .files import atomic_write

FORMAT = 3   # 2: tensor digests; 3: and a manifest of names and digests (an older file is rebuilt once, with a warning)
PROCESSED = "processed/gnngp.pt"


# torch's own advice on a refused weights-only load: to load it again without that restriction,
# which runs whatever code the file names. gnngp never does; a refused file is rebuilt.
_TORCH_ADVICE = ("Weights only load failed", "weights_only", "Check the documentation of torch.load", "arbitrary code execution")


def load_failure(err: BaseException) -> str:
    """Why ``torch.load(weights_only=True)`` refused a file, in one line: its type and what it
    refused (``UnpicklingError: Trying to load unsupported GLOBAL posix.system ...``), without
    torch's advice to load it unrestricted or to allowlist what it refused."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    kept = [line for line in lines if not any(advice in line for advice in _TORCH_ADVICE)]
    why = kept[0].split(" Please use `torch.serialization", 1)[0].rstrip(".")[:200] if kept else ""   # nor its allowlisting advice
    return f"{type(err).__name__}: {why}" if why else type(err).__name__


def cached_tensors(folder: Path, raw_digests: Mapping[str, str], build: Callable[[], dict[str, torch.Tensor]],
                   untrusted: Optional[Callable[[Path], Optional[str]]] = None, verified: bool = True) -> dict[str, torch.Tensor]:
    """The tensors cached in ``folder/processed/gnngp.pt`` if they were built from exactly
    ``raw_digests``, else ``build()`` (written to the cache when it is writable). ``untrusted``:
    why a path is not to be trusted (:meth:`~gnngp_cli.data.store.DataStore.untrusted`); a cache it
    names is not read nor written, and ``build()`` serves this run. ``verified``: whether the raw
    files were checked against their published digests (``data.verify=false``: not), as its
    warnings say."""
    if verified:
        return cached_file(folder / PROCESSED, raw_digests, build, untrusted)
    return cached_file(folder / PROCESSED, raw_digests, build, untrusted, what="the dataset from its raw files (not verified: data.verify=false)",
                       source="the raw files (not verified: data.verify=false)")


_DISTRUSTED: set[str] = set()   # the reasons a cache was distrusted in this process (what cached_file warned of)


def cached_file(path: Path, raw_digests: Mapping[str, str], build: Callable[[], dict[str, torch.Tensor]],
                untrusted: Optional[Callable[[Path], Optional[str]]] = None,
                what: str = "the dataset from its verified raw files", source: str = "the verified raw files",
                derived: bool = False, mapped: bool = False) -> dict[str, torch.Tensor]:
    """:func:`cached_tensors` in the file ``path``: what else is built once from a dataset and kept
    beside it (its normalised adjacency, :mod:`.adjacency_cache`), ``raw_digests`` naming what it
    was built from, checked the same way; the warnings say what is built from what (``what``) and
    what a rejected file is rebuilt from (``source``). ``derived``: a file built from a dataset
    whose own cache was distrusted for the same reason says nothing more (one warning per folder).
    ``mapped``: the file is mapped into memory (copy-on-write) instead of copied into it, for tensors
    that are held together as long as any of them is (one mapping serves them all, and is
    released with the last: a dataset's edge list, released once its adjacency is built, would
    keep its pages while its features live)."""
    built = what.split(" from ", 1)[0]   # "the dataset", "the normalised adjacency", "the node order"
    distrusted = untrusted(path) if untrusted is not None else None
    if distrusted is not None:
        if not (derived and distrusted in _DISTRUSTED):
            print(f"gnngp: warning: not trusting the processed cache: {distrusted}; building {what} "
                  "in memory this run, without reading or writing that cache", file=sys.stderr)
        _DISTRUSTED.add(distrusted)
        return build()
    if path.is_file():
        try:
            stored = torch.load(path, map_location="cpu", weights_only=True, mmap=mapped)
            problem = _problem(stored, raw_digests)
            if problem is None:
                return stored["tensors"]
            print(f"gnngp: warning: the cache file {path} ({built}) {problem}; rebuilding it from {source}", file=sys.stderr)
        except Exception as err:  # noqa: BLE001 - any failure means: do not trust it, rebuild
            print(f"gnngp: warning: the cache file {path} ({built}) could not be loaded safely ({load_failure(err)}); "
                  f"rebuilding it from {source}", file=sys.stderr)
    tensors = build()
    digests = tensor_digests(tensors)
    stored = {"format": FORMAT, "raw": dict(raw_digests), "tensors": tensors, "digests": digests, "manifest": manifest(digests)}
    try:
        atomic_write(path, lambda f: torch.save(stored, f), binary=True)
    except (OSError, RuntimeError) as err:  # a read-only or full cache still serves its raw files (torch.save raises RuntimeError on a full disk)
        reason = (err.strerror or str(err)) if isinstance(err, OSError) else f"the write stopped short, likely a full disk: {str(err).splitlines()[0][:100]}"
        print(f"gnngp: warning: could not write the processed cache {path} ({reason}); {built} is rebuilt on every run", file=sys.stderr)
    return tensors


def manifest(digests: Mapping[str, str]) -> str:
    """sha256 of the tensors' names and digests, held as its own string: a flip in a name (held
    once, shared by ``tensors`` and ``digests``) changes what this gives, not what was stored."""
    return hashlib.sha256("\n".join(f"{name}={digests[name]}" for name in sorted(digests)).encode()).hexdigest()


def _problem(stored: object, raw_digests: Mapping[str, str]):
    """Why ``stored`` cannot be used (``None``: it can)."""
    if not _valid(stored):
        return f"is not a gnngp cache of format {FORMAT} (written by another version, or damaged)"
    if stored["raw"] != dict(raw_digests):
        return "was built from other raw files than the ones in the cache now"
    digests = stored["digests"]
    if set(digests) != set(stored["tensors"]) or manifest(digests) != stored.get("manifest"):
        return "was changed after it was written (its tensor names or digests are not the ones written)"
    now = tensor_digests(stored["tensors"])
    changed = sorted(name for name in now if now[name] != digests[name])
    if changed:
        return f"was changed after it was written ({', '.join(changed)} no longer match the digests stored with them)"
    return None


def tensor_digest(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's dtype, shape and bytes (contiguous, on the CPU). Taken anew each time:
    a digest remembered for a tensor would go stale after a write that torch does not count (through
    ``tensor.numpy()``, ``.data`` or another view of its storage), and an edge list changed that way
    would be given another graph's cached adjacency."""
    h = hashlib.sha256(f"{tensor.dtype}|{tuple(tensor.shape)}|".encode())
    data = tensor.detach().cpu().contiguous()
    if data.numel():
        h.update(memoryview(data.view(-1).view(torch.uint8).numpy()))
    return h.hexdigest()


def tensor_digests(tensors: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """:func:`tensor_digest` of each tensor, side by side on the machine's cores, the largest first."""
    names = sorted(tensors, key=lambda name: -tensors[name].numel() * tensors[name].element_size())
    found = dict(zip(names, side_by_side(lambda name: tensor_digest(tensors[name]), names)))
    return {name: found[name] for name in tensors}


def _valid(stored: object) -> bool:
    return (
        isinstance(stored, dict) and stored.get("format") == FORMAT and isinstance(stored.get("raw"), dict)
        and isinstance(stored.get("tensors"), dict) and all(isinstance(v, torch.Tensor) for v in stored["tensors"].values())
        and isinstance(stored.get("digests"), dict) and isinstance(stored.get("manifest"), str)
    )
