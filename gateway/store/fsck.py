"""fsck: does the catalog agree with the blob files?

Checks that every extent names a blob that exists and covers it, that every file blob has its
file with the recorded size, that each reference count equals the references found in the
manifests of every version of every object (current or not) and of pending parts, and (deep)
that the bytes hash to what the catalog says: plain ETags, multipart `-N` ETags part by part,
pending parts. Damage makes the exit status 1.

Blob files the catalog does not know, files under tmp/ and trash/, and intents (intents.py)
are leftovers of a crash, not damage: the next start sweeps exactly those (store.leftover_files
decides for both). They are listed; `repair` removes them, and fixes counts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import digest
from . import crypto, has_catalog, open_catalog
from .api import BlobStore, Catalog, CatalogTx, Stray
from .blobs import BlobFiles, FolderLock
from .errors import StoreError
from .model import NULL_VERSION, Extent, ObjectInfo
from .reader import decrypted
from .store import leftover_files, paired

READ_CHUNK = 1 << 20


@dataclass
class Report:
    objects: int = 0
    parts: int = 0
    blobs: int = 0
    tmp_files: list[str] = field(default_factory=list)  # under tmp/ and trash/
    orphan_files: list[str] = field(default_factory=list)  # blob files the catalog lacks
    intents: list[str] = field(default_factory=list)  # of writers that stopped (intents.py)
    missing_files: list[str] = field(default_factory=list)
    wrong_sizes: list[tuple[str, int, int]] = field(default_factory=list)
    dangling: list[tuple[str, str]] = field(default_factory=list)  # (owner, blob)
    short_extents: list[tuple[str, Extent]] = field(default_factory=list)
    wrong_counts: list[tuple[str, int, int]] = field(default_factory=list)  # blob, stored, found
    bad_etags: list[tuple[str, str, str]] = field(default_factory=list)  # owner, stored, actual
    bad_checksums: list[tuple[str, str, str]] = field(default_factory=list)  # likewise
    bad_ciphertext: list[tuple[str, str]] = field(default_factory=list)  # owner, what failed
    # Encrypted objects whose bytes only their customer's key opens (SSE-C): not read.
    customer_keyed: int = 0
    repaired: list[str] = field(default_factory=list)

    @property
    def damage(self) -> list[str]:
        """Problems that remain (after repair, if any was made)."""
        out = []
        if not self._fixed("counts"):
            out += [f"blob {b}: count {s}, references {f}" for b, s, f in self.wrong_counts]
        out += [f"blob {b}: file missing" for b in self.missing_files]
        out += [f"blob {b}: file has {a} bytes, catalog says {e}" for b, e, a in self.wrong_sizes]
        out += [f"{o}: extent names unknown blob {b}" for o, b in self.dangling]
        out += [f"{o}: extent {e} runs past its blob" for o, e in self.short_extents]
        out += [f"{o}: ETag {s} but bytes hash to {a}" for o, s, a in self.bad_etags]
        out += [f"{o}: checksum {s} but bytes give {a}" for o, s, a in self.bad_checksums]
        out += [f"{o}: encrypted bytes fail: {w}" for o, w in self.bad_ciphertext]
        return out

    def _fixed(self, what: str) -> bool:
        return what in self.repaired

    def render(self) -> str:
        lines = [
            f"checked {self.objects} objects, {self.parts} parts, {self.blobs} blobs",
        ]
        if self.customer_keyed:
            lines.append(
                f"{self.customer_keyed} SSE-C objects or parts not read: only their "
                "customers' keys open them"
            )
        lines += [f"repaired: {what}" for what in self.repaired]
        if not self._fixed("leftovers"):
            lines += [f"leftover: orphan blob file {b}" for b in self.orphan_files]
            lines += [f"leftover: stray tmp file {t}" for t in self.tmp_files]
            lines += [f"leftover: intent of blob {b}" for b in self.intents]
            if self.orphan_files or self.tmp_files or self.intents:
                lines.append(
                    "leftovers are what a crash left; the next start (or --repair) removes them"
                )
        damage = self.damage
        lines += [f"DAMAGE: {d}" for d in damage]
        lines.append("no damage found" if not damage else f"{len(damage)} problems remain")
        return "\n".join(lines)


def check(
    root: Path,
    *,
    deep: bool = False,
    repair: bool = False,
    checksum_of: ChecksumOf | None = None,
    catalog_url: str | None = None,
    blobs: Callable[[concurrent.futures.Executor], BlobStore] | None = None,
) -> Report:
    """Check (and optionally repair) the data folder at `root` against its catalog (the SQLite
    file in it, or the database `catalog_url` names). Every gateway on the folder must be
    stopped: raises FolderInUse otherwise (its uncommitted blobs would look like orphans).
    `deep` reads every byte; `checksum_of` also checks the stored flexible checksums then.
    `blobs`: makes the BlobStore (None: the blob files of the data folder)."""
    if catalog_url in (None, "sqlite") and not has_catalog(root):
        raise FileNotFoundError(f"{root} holds no catalog")
    lock = FolderLock(root)
    try:
        lock.exclusive("fsck", wait=0)
        pool = concurrent.futures.ThreadPoolExecutor(1)
        catalog = open_catalog(root, pool, catalog_url)
        keys = crypto.Keyring.load(root) if (root / "keys.json").exists() else None
        files = BlobFiles(root, pool) if blobs is None else blobs(pool)

        async def run() -> Report:
            try:
                return await _check(catalog, files, deep, repair, checksum_of, keys)
            finally:
                files.close()

        try:
            return asyncio.run(run())
        finally:
            catalog.close()
            pool.shutdown()
    finally:
        lock.close()


async def _check(
    catalog: Catalog,
    files: BlobStore,
    deep: bool,
    repair: bool,
    checksum_of: ChecksumOf | None,
    keys: crypto.Keyring | None = None,
) -> Report:
    report = Report()
    blobs = {row.id: row async for row in catalog.audit.audit_blobs()}
    report.blobs = len(blobs)
    found: Counter[str] = Counter()
    encrypted: set[str] = set()  # a blob's file holds stored_size(plaintext size) bytes

    def walk(owner: str, extents: tuple[Extent, ...]) -> None:
        for e in extents:
            found[e.blob] += 1
            if e.key is not None:
                encrypted.add(e.blob)
            known = blobs.get(e.blob)
            if known is None:
                report.dangling.append((owner, e.blob))
            elif e.offset + e.length > known.size:
                report.short_extents.append((owner, e))

    async for obj in catalog.audit.audit_objects():
        report.objects += 1
        walk(_owner(obj), obj.extents)
    async for part, _upload in catalog.audit.audit_parts():
        report.parts += 1
        walk(f"upload {part.upload_id} part {part.number}", part.extents)

    leftovers = [entry async for stale in leftover_files(catalog.reader, files) for entry in stale]
    report.orphan_files = sorted(entry.name for entry in leftovers)
    for row in blobs.values():
        if row.inline:
            continue
        try:
            blob = await files.open(row.id)
        except FileNotFoundError:
            report.missing_files.append(row.id)
            continue
        try:
            actual = blob.size()
        finally:
            blob.close()
        expected = crypto.stored_size(row.size) if row.id in encrypted else row.size
        if actual != expected:
            report.wrong_sizes.append((row.id, expected, actual))
    report.missing_files.sort()
    report.tmp_files = await files.leftovers()
    report.intents = sorted([blob_id async for blob_id in catalog.audit.audit_intents()])
    report.wrong_counts = sorted(
        (b, row.refs, found[b]) for b, row in blobs.items() if row.refs != found[b]
    )
    if deep:
        await _check_bytes(catalog, files, report, checksum_of, keys)
    if repair:
        try:
            await paired(catalog, files, claim=False)
        except StoreError as exc:
            # Files another catalog references are not a crash's leftovers.
            raise StoreError(f"{exc}; nothing was repaired") from None
        await _repair(catalog, files, report, leftovers)
    return report


class ChecksumCheck(Protocol):
    """Recomputes one stored checksum from the bytes fed to it."""

    expected: str

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def actual(self) -> str: ...


# From what the store kept (an object's checksums, or a pending part's `{"algorithm", "value"}`,
# without "algorithm" for the default one) and the part sizes, a checker, or None: the protocol
# layer knows the algorithms.
ChecksumOf = Callable[[Mapping[str, str], Sequence[int]], ChecksumCheck | None]


@dataclass(frozen=True)
class _Stored:
    """What the catalog says the bytes of an object or a pending part hash to."""

    owner: str
    extents: tuple[Extent, ...]
    md5s: list[tuple[str, str]]  # (label, MD5 of all the bytes)
    customer_keyed: bool  # SSE-C: unreadable here
    multipart_etag: str | None  # `-N`, folded from the MD5 of each run of `part_sizes`
    part_sizes: tuple[int, ...]
    checksums: Mapping[str, str]  # for ChecksumOf


async def _stored(catalog: Catalog) -> AsyncIterator[_Stored]:
    async for obj in catalog.audit.audit_objects():
        if obj.delete_marker:
            continue  # no bytes
        owner = _owner(obj)
        md5_etag = obj.attrs.etag_is_md5
        plain = digest.is_plain(obj.etag)
        md5s = [(owner, obj.etag)] if plain and md5_etag else []
        if obj.content_md5 is not None:
            md5s.append((f"{owner} (content MD5)", obj.content_md5))
        multipart = obj.etag if not plain and obj.parts and md5_etag else None
        sse_c = obj.attrs.sse_key is not None
        yield _Stored(owner, obj.extents, md5s, sse_c, multipart, obj.parts, obj.attrs.checksums)
    async for part, upload in catalog.audit.audit_parts():
        owner = f"upload {part.upload_id} part {part.number}"
        # A part of an upload that named no algorithm keeps the default checksum, for Complete
        # to combine: a `value` without an `algorithm` (ChecksumOf knows which that is). A part
        # whose upload is gone has no algorithm to go by.
        stored: dict[str, str] = {}
        if upload is not None and part.checksum is not None:
            stored["value"] = part.checksum
            algorithm = upload.attrs.checksums.get("algorithm")
            if algorithm:
                stored["algorithm"] = algorithm
        md5s = [(owner, part.etag)] if upload is None or upload.attrs.etag_is_md5 else []
        sse_c = upload is not None and upload.attrs.sse_key is not None
        yield _Stored(owner, part.extents, md5s, sse_c, None, (), stored)


def _owner(obj: ObjectInfo) -> str:
    """How a report names an object version."""
    if obj.version_id == NULL_VERSION:
        return f"{obj.bucket}/{obj.key}"
    return f"{obj.bucket}/{obj.key} version {obj.version_id}"


async def _check_bytes(
    catalog: Catalog,
    files: BlobStore,
    report: Report,
    checksum_of: ChecksumOf | None,
    keys: crypto.Keyring | None,
) -> None:
    """Read the bytes of every object and pending part once and compare them with what the
    catalog says they hash to: a plain ETag, a remembered content MD5, a multipart object's
    `-N` ETag part by part (a flipped byte in any part's blob changes it), stored checksums."""
    opener = keys.opener() if keys is not None else None
    async for stored in _stored(catalog):
        if stored.customer_keyed:
            report.customer_keyed += 1
            continue
        whole = digest.md5()
        parts = digest.PartDigests(stored.part_sizes if stored.multipart_etag else (), digest.md5)
        checksum = checksum_of(stored.checksums, stored.part_sizes) if checksum_of else None
        inline = await catalog.reader.read_inline(e.blob for e in stored.extents)
        try:
            async for chunk in _read(inline, files, stored.extents, opener):
                whole.update(chunk)
                parts.update(chunk)
                if checksum:
                    checksum.update(chunk)
        except crypto.Tampered as exc:
            report.bad_ciphertext.append((stored.owner, str(exc)))
            continue
        except crypto.WrongKey as exc:
            report.bad_ciphertext.append((stored.owner, f"no key opens its data key ({exc})"))
            continue
        except OSError:
            continue  # reported already as a missing or short blob
        actual = whole.hexdigest()
        report.bad_etags += [(label, md5, actual) for label, md5 in stored.md5s if md5 != actual]
        if stored.multipart_etag:
            folded = digest.multipart_etag(parts.digests())
            if folded != stored.multipart_etag:
                report.bad_etags.append((stored.owner, stored.multipart_etag, folded))
        if checksum and checksum.actual() != checksum.expected:
            report.bad_checksums.append((stored.owner, checksum.expected, checksum.actual()))


async def _read(
    inline: Mapping[str, bytes],
    files: BlobStore,
    extents: tuple[Extent, ...],
    opener: Callable[[str], crypto.DataKey] | None,
) -> AsyncIterator[bytes]:
    """The bytes of `extents` in chunks of at most READ_CHUNK: memory stays bounded whatever
    the object's size. Raises OSError if a blob file is missing or short; encrypted extents
    are decrypted, every chunk's tag checked (crypto.Tampered, crypto.WrongKey)."""
    for e in extents:
        if e.key is not None:
            if opener is None:
                raise crypto.WrongKey("the data folder has no keys.json")
            key = opener(e.key)
            if e.blob in inline:
                yield key.open(inline[e.blob], 0)[e.offset : e.offset + e.length]
                continue
            blob = await files.open(e.blob)
            try:
                async for piece in decrypted(blob, e, key, None):
                    yield piece
            finally:
                blob.close()
            continue
        if e.blob in inline:
            yield inline[e.blob][e.offset : e.offset + e.length]
            continue
        blob = await files.open(e.blob)
        try:
            offset, left = e.offset, e.length
            while left:
                data = await blob.read(offset, min(left, READ_CHUNK))
                offset += len(data)
                left -= len(data)
                yield data
        finally:
            blob.close()


async def _repair(
    catalog: Catalog, files: BlobStore, report: Report, leftovers: list[Stray]
) -> None:
    if report.orphan_files or report.tmp_files or report.intents:
        await files.remove(leftovers)
        await files.empty_leftovers()
        await catalog.write(lambda tx: tx.drop_intents(None))
        report.repaired.append("leftovers")
    if report.wrong_counts:

        async def fix(tx: CatalogTx) -> None:
            for blob, _stored, found in report.wrong_counts:
                await tx.set_refs(blob, found)

        _, gone = await catalog.write(fix, long=True)
        await files.delete(gone)
        report.repaired.append("counts")
