"""Published digests of every raw file gnngp reads, and the check against them.

Each entry maps ``<Name>/raw/<file>`` (the cache layout) to the digests a genuine copy may
have: a hex sha256, or ``gitblob:<sha1>``, the git blob id of the file in its source
repository (``sha1("blob <size>\\0" + content)``), used where only that is published.

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
import sys
from pathlib import Path
from typing import Mapping

from ..errors import DatasetError

KNOWN_DIGESTS: Mapping[str, tuple[str, ...]] = {
    "CiteSeer/raw/ind.citeseer.allx": ("2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",),
    "CiteSeer/raw/ind.citeseer.ally": ("f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",),
    "CiteSeer/raw/ind.citeseer.graph": ("d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",),
    "CiteSeer/raw/ind.citeseer.test.index": ("2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",),
    "CiteSeer/raw/ind.citeseer.tx": ("539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",),
    "CiteSeer/raw/ind.citeseer.ty": ("55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",),
    "CiteSeer/raw/ind.citeseer.x": ("d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",),
    "CiteSeer/raw/ind.citeseer.y": ("8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",),
    "Cora/raw/ind.cora.allx": ("9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",),
    "Cora/raw/ind.cora.ally": ("2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",),
    "Cora/raw/ind.cora.graph": ("58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",),
    "Cora/raw/ind.cora.test.index": ("297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",),
    "Cora/raw/ind.cora.tx": ("b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",),
    "Cora/raw/ind.cora.ty": ("41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",),
    "Cora/raw/ind.cora.x": ("23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",),
    "Cora/raw/ind.cora.y": ("94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",),
    "PubMed/raw/ind.pubmed.allx": (
        "9d419f4544d0029d635a142df75e01fa8a376682e282a4cb3f3ff6539d57472e",  # the rebuilt mirror copy (see below)
        "gitblob:3b86bccf08111c37c632a9dd8ab63db25ea76361",  # the original in kimiyoung/planetoid
    ),
    "PubMed/raw/ind.pubmed.ally": ("0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",),
    "PubMed/raw/ind.pubmed.graph": ("5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",),
    "PubMed/raw/ind.pubmed.test.index": ("b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",),
    "PubMed/raw/ind.pubmed.tx": ("4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",),
    "PubMed/raw/ind.pubmed.ty": ("ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",),
    "PubMed/raw/ind.pubmed.x": ("fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",),
    "PubMed/raw/ind.pubmed.y": ("e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",),
    "chameleon/raw/chameleon.json": ("a958c2158cb81bb05cc01f5605ffb3449a7b20b389c8f1e94a0da61dbed6bdbe",),
    "chameleon/raw/chameleon_edges.csv": ("b90d671846530ea7c0f6f6d0e3be98eb512ecd8e9741811940fe4029d991b266",),
    "chameleon/raw/chameleon_split_0.6_0.2_0.npz": ("36605525b69be4e7df5b31fe6a1d044288c6ebf9f9f0514ca151f6a36afc5e8b",),
    "chameleon/raw/chameleon_split_0.6_0.2_1.npz": ("d0779d5a1bedf1967d394468a52c0175fb00595d361fba897faf73322386c952",),
    "chameleon/raw/chameleon_split_0.6_0.2_2.npz": ("86ad0d827bf4301dff830598fc0b70d0dd8689c5b4d72dab1d87a6c1970c4c6e",),
    "chameleon/raw/chameleon_split_0.6_0.2_3.npz": ("37b3e994adf3afc55e16b617ed05af4e3ce308800755839084d77eced0528e9d",),
    "chameleon/raw/chameleon_split_0.6_0.2_4.npz": ("f6b1d067b2b330132839d8b6120077bdc6cf759f7ce421f881a02e2953ec4596",),
    "chameleon/raw/chameleon_split_0.6_0.2_5.npz": ("e7661834275c826692510cea0457b18b2c1ee38771f178d06e701b97541a1f6d",),
    "chameleon/raw/chameleon_split_0.6_0.2_6.npz": ("16648d1197c1d3a2dec385346212c382030b0d5a8c997f4255aa2afa68a6b174",),
    "chameleon/raw/chameleon_split_0.6_0.2_7.npz": ("61adcc53846becefecd466a5364dda23b983d387d1ac5d58c6e24d080c0fcba7",),
    "chameleon/raw/chameleon_split_0.6_0.2_8.npz": ("7076ad5341a8218b1f5b6eccf9cfd15d28286ea11ef5c06eeee77af24ff2bf63",),
    "chameleon/raw/chameleon_split_0.6_0.2_9.npz": ("743c4f813bf6130398a6511eb9ff07d2366c73bd6c7fddaf226a3f9e2917e0e7",),
    "chameleon/raw/chameleon_target.csv": ("5816b4731cbd156738095550d1f6e37caf6f4dabe1d660c035156408ae6bae43",),
    "crocodile/raw/crocodile.json": ("gitblob:0c68f0cfb24216ab860818c492c22d325a07194b",),  # MUSAE's, absent from the mirror
    "crocodile/raw/crocodile_edges.csv": ("92f4fe840f5ef79f85364e3678bbc909d0c151e0ff8d8328854b602d998f2d22",),
    "crocodile/raw/crocodile_target.csv": ("f83d79b3c6979639475d90fb5e2c969d2c21b64b068abc19e57f93c8fedfef1d",),
    "squirrel/raw/squirrel.json": ("34512ff7981f36811d830d6bf5c7116a671f40e3210f26a276d9792001acffc0",),
    "squirrel/raw/squirrel_edges.csv": ("574b9d083635377c368e9431a29121773500f57edb8b4602f69544e6b5fe0da8",),
    "squirrel/raw/squirrel_split_0.6_0.2_0.npz": ("f112b88d3354e86d164d4d915b6a1f695c10f0e01e3e6b9893fc7b09bb93191d",),
    "squirrel/raw/squirrel_split_0.6_0.2_1.npz": ("2486c687c8befb55930a6237f76f1d86ce2ba345782eda6157f4e752d05f304f",),
    "squirrel/raw/squirrel_split_0.6_0.2_2.npz": ("d62ff83862ad96022d3400dfc9b7ca405834ca62767319d97c36b3f02db978c0",),
    "squirrel/raw/squirrel_split_0.6_0.2_3.npz": ("af3d90e0b2718ac7417e10e8b5b382443667412e846cabc3cc4e4a592f4cedae",),
    "squirrel/raw/squirrel_split_0.6_0.2_4.npz": ("fbe848298bb72b88db0704050cf216e2a93c916540d577906f3e644b679a6a2c",),
    "squirrel/raw/squirrel_split_0.6_0.2_5.npz": ("cd04fab46a181151ddd97ce93c65fe79558fb79ffa230b62f488ebfaf5fdcd75",),
    "squirrel/raw/squirrel_split_0.6_0.2_6.npz": ("b9189f7903ca7556a025c54dd5be6c00ec5952d4299e71630bc9876157676412",),
    "squirrel/raw/squirrel_split_0.6_0.2_7.npz": ("ea7fb3ca5d5aa45b917b99fb7d64d4e87322b2b5303a0156c547aa3f1a6c8941",),
    "squirrel/raw/squirrel_split_0.6_0.2_8.npz": ("b43faa190ca6dd4885a39dfc2a93d59f56f5174f3567bdbc49b18dd9cd9b7fb4",),
    "squirrel/raw/squirrel_split_0.6_0.2_9.npz": ("529ade4b86fd191908a96011f25c454653083674b6d4f090b3fdd27af2d14f62",),
    "squirrel/raw/squirrel_target.csv": ("0933f58cf0469eda904e27442eabeda04f0f27e8e1863b76dad144d4404fdd3f",),
    # the heterophily suite (yandex-research/heterophilous-graphs data/<name>.npz)
    "tolokers/raw/tolokers.npz": ("dacf3ac94cec53d03cd2adb5255c08b33dee1656c33ca8164a464bd9450a1667",),
    "minesweeper/raw/minesweeper.npz": ("e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3",),
    "chameleon_filtered/raw/chameleon_filtered.npz": ("bf46f07e1fb5249280447e5fe3100f3e82fc4b93ad1e13ffcfdec924b6ac0bb5",),
}

FORMAT_ONLY = ("Reddit", "ogbn_arxiv")


class DigestMismatch(DatasetError):
    """A raw file whose content is not the published one."""


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


def expected(key: str) -> tuple[str, ...]:
    """The accepted digests of ``<Name>/raw/<file>``; empty when none is published."""
    return KNOWN_DIGESTS.get(key, ())


def verify_file(path: Path, key: str, shown: str | None = None) -> str:
    """Check ``path`` (the file known as ``key``) against the table; return its sha256.

    Raises :class:`DigestMismatch` naming the file and both digests. A file without a
    published digest passes (its loader checks its format)."""
    actual = sha256(path)
    accepted = expected(key)
    if not accepted or actual in accepted:
        return actual
    blobs = [d.split(":", 1)[1] for d in accepted if d.startswith("gitblob:")]
    if blobs and git_blob(path) in blobs:
        return actual
    sha = [d for d in accepted if not d.startswith("gitblob:")]
    if sha:
        found, want = f"sha256 {actual}", sha[0]
    else:
        found, want = f"git blob id {git_blob(path)} (sha256 {actual})", f"git blob id {blobs[0]}"
    raise DigestMismatch(
        f"raw file {shown or path} has {found} but the published file has {want}; "
        f"delete it and fetch it again (a tampered or corrupt copy), or set data.verify=false to use a modified copy at your own risk"
    )


def warn_unverified(name: str) -> None:
    print(f"gnngp: warning: data.verify=false: the raw files of {name} are not checked against their published digests", file=sys.stderr)
