"""`s3gw migrate --blobs-to`: copy every blob the catalog names from the data folder to an S3
tier (s3://BUCKET[/PREFIX]) or back, with every gateway on the folder stopped.

The folder is held exclusively, as `s3gw migrate` holds it for the catalog: a gateway serving
it could write a blob to the old tier after it was copied. Each blob is written under its own
id (the catalog's rows do not change), read back from the new tier and compared with the old
one (size, SHA-256) and with the catalog (the size it records; the MD5 of a plaintext object
held whole in one blob). Only when every blob is there and verified is the marker written
(MARKER in the data folder, naming the new tier): from then on a start whose --blobs names
another tier is refused (check_moved), since it would serve from, and write to, the old copy.
A run that stops half way has written no marker: running it again skips each blob already on
the new tier with the same bytes (resumable), and the gateway still starts on the old tier.

The old tier's copies are kept (as the SQLite file is after a catalog's migration): delete
them once the gateway has served from the new tier for a while.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .. import digest
from ..config import Settings, StartError, setting_name
from ..store import crypto, has_catalog, open_catalog
from ..store.api import BlobStore, Catalog
from ..store.blobs import BlobFiles, FileWriter, FolderLock
from ..store.errors import StoreError
from . import FOLDER, MARKER, blob_store
from .s3 import S3Blobs, S3Writer

READ = 8 << 20
# Blobs copied at once.
FANOUT = 8


class BlobMoveError(StoreError):
    """Why blobs were not moved, or the marker not written: one line."""


@dataclass(frozen=True)
class MoveSummary:
    source: str
    target: str
    blobs: int
    copied: int
    present: int
    size: int
    md5s: int
    seconds: float

    def render(self) -> str:
        return (
            f"moved {self.blobs} blobs ({self.size} bytes) from {self.source} to {self.target} "
            f"in {self.seconds:.1f} s: {self.copied} copied, {self.present} already there, all "
            f"read back alike ({self.md5s} also against their objects' MD5); start the gateway "
            f"with --blobs {'unset' if self.target == FOLDER else self.target}; the copies "
            f"in {'the data folder' if self.source == FOLDER else self.source} are kept"
        )


def _expected(catalog_rows: dict[str, int], encrypted: set[str], blob_id: str) -> int:
    size = catalog_rows[blob_id]
    return crypto.stored_size(size) if blob_id in encrypted else size


async def _named(catalog: Catalog) -> tuple[dict[str, int], set[str], dict[str, str]]:
    """The blobs the catalog names (id -> size), those holding ciphertext, and the MD5 of
    the plaintext blobs that hold one object whole (its plain ETag)."""
    sizes = {r.id: r.size async for r in catalog.audit.audit_blobs() if not r.inline}
    encrypted: set[str] = set()
    md5s: dict[str, str] = {}

    async for obj in catalog.audit.audit_objects():
        for e in obj.extents:
            if e.key is not None:
                encrypted.add(e.blob)
        if (
            len(obj.extents) == 1
            and obj.attrs.etag_is_md5
            and digest.is_plain(obj.etag)
            and obj.extents[0].key is None
            and obj.extents[0].offset == 0
            and obj.extents[0].length == sizes.get(obj.extents[0].blob, -1)
        ):
            md5s[obj.extents[0].blob] = obj.etag.strip('"')
    async for part, _upload in catalog.audit.audit_parts():
        for e in part.extents:
            if e.key is not None:
                encrypted.add(e.blob)
    return sizes, encrypted, md5s


async def _digest(store: BlobStore, blob_id: str) -> tuple[int, str, str] | None:
    """(size, SHA-256, MD5) of a blob as a tier holds it; None: it has none."""
    try:
        blob = await store.open(blob_id)
    except FileNotFoundError:
        return None
    try:
        size, sha, md5 = blob.size(), hashlib.sha256(), hashlib.md5()
        offset = 0
        while offset < size:
            data = await blob.read(offset, min(READ, size - offset))
            sha.update(data)
            md5.update(data)
            offset += len(data)
        return size, sha.hexdigest(), md5.hexdigest()
    finally:
        blob.close()


async def _copy(source: BlobStore, target: BlobStore, blob_id: str) -> None:
    # Under the blob's own id: the catalog's rows name it (a BlobStore's writer() makes a new
    # one, for a new body).
    writer: S3Writer | FileWriter
    if isinstance(target, S3Blobs):
        writer = S3Writer(target, blob_id)
    else:
        assert isinstance(target, BlobFiles)
        writer = FileWriter(target, blob_id)
    blob = await source.open(blob_id)
    try:
        size, offset = blob.size(), 0
        while offset < size:
            data = await blob.read(offset, min(READ, size - offset))
            await writer.append(data)
            offset += len(data)
        await writer.publish()
    except BaseException:
        writer.abort()
        raise
    finally:
        blob.close()


async def _move(
    catalog: Catalog, source: BlobStore, target: BlobStore
) -> tuple[int, int, int, int, int]:
    sizes, encrypted, md5s = await _named(catalog)
    copied = present = total = checked_md5 = 0
    gate = asyncio.Semaphore(FANOUT)

    async def one(blob_id: str) -> None:
        nonlocal copied, present, total, checked_md5
        async with gate:
            old = await _digest(source, blob_id)
            if old is None:
                raise BlobMoveError(f"blob {blob_id} is missing from the old tier (s3gw fsck)")
            expected = _expected(sizes, encrypted, blob_id)
            if old[0] != expected:
                raise BlobMoveError(
                    f"blob {blob_id}: {old[0]} bytes on the old tier, the catalog says {expected}"
                )
            new = await _digest(target, blob_id)
            if new == old:
                present += 1
            else:
                await _copy(source, target, blob_id)
                new = await _digest(target, blob_id)
                if new != old:
                    raise BlobMoveError(f"blob {blob_id} reads back differently on the new tier")
                copied += 1
            if blob_id in md5s:
                if new[2] != md5s[blob_id]:
                    raise BlobMoveError(f"blob {blob_id}: MD5 {new[2]}, its object's ETag differs")
                checked_md5 += 1
            total += new[0]

    await asyncio.gather(*(one(b) for b in sizes))
    return len(sizes), copied, present, total, checked_md5


def _write_marker(root: Path, where: str) -> None:
    path = root / MARKER
    tmp = root / f"{MARKER}.tmp"
    tmp.write_text(f"{where}\n")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move_blobs(settings: Settings, target_settings: Settings) -> MoveSummary:
    """Copy the blobs of `settings`' tier to `target_settings`' (the same settings but for
    --blobs and its keys), verify them, and mark the folder moved."""
    root = settings.data
    source_where = settings.blobs or FOLDER
    to = target_settings.blobs or FOLDER
    if to == source_where:
        raise StartError(f"--blobs-to {to}: the blobs are there already ({setting_name('blobs')})")
    if settings.catalog in (None, "sqlite") and not has_catalog(root):
        raise BlobMoveError(f"{root} holds no catalog: nothing to move")
    lock = FolderLock(root)
    try:
        lock.exclusive("s3gw migrate", wait=0)
        started = time.monotonic()
        pool = concurrent.futures.ThreadPoolExecutor(4)
        catalog = open_catalog(root, pool, settings.catalog)

        def tier(s: Settings) -> BlobStore:
            factory = blob_store(s, check=False)
            return BlobFiles(root, pool) if factory is None else factory(pool)

        async def run() -> tuple[int, int, int, int, int]:
            source, target = tier(settings), tier(target_settings)
            try:
                ours, _ = await catalog.write(lambda tx: tx.claim_id(None))
                counts = await _move(catalog, source, target)
                if ours is not None:
                    # The new tier is this catalog's: a start pairs them as it did the old.
                    claimed = await target.catalog_id(ours)
                    if claimed != ours:
                        raise BlobMoveError(f"{to} holds catalog {claimed}'s blobs, not {ours}'s")
                return counts
            finally:
                source.close()
                target.close()

        try:
            blobs, copied, present, size, md5s = asyncio.run(run())
        finally:
            catalog.close()
            pool.shutdown()
        _write_marker(root, to)
        return MoveSummary(
            source_where, to, blobs, copied, present, size, md5s, time.monotonic() - started
        )
    finally:
        with contextlib.suppress(OSError):
            lock.close()
