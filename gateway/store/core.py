"""What every part of the Store shares: the data folder, the catalog and the blob files it
holds, the one way a write goes in (`_write`: a catalog transaction, staged blobs published or
dropped with it, blobs freed after the commit that released them), and the look-ups and
checks the rules of buckets, objects and uploads all make."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from .. import digest
from . import crypto, errors, outbox, versions
from .api import BlobStore, Catalog, CatalogReader, CatalogTx
from .blobs import BlobFiles, FolderLock
from .intents import Intents
from .model import (
    Bucket,
    ObjectInfo,
    Origin,
    StagedBlob,
    WriteCondition,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# A key's latest version as the catalog gave it, with its first blob's inline bytes
# (CatalogReader.get_object_inline); None: the key has no object.
Latest = tuple[ObjectInfo, dict[str, bytes | None]] | None

# Catalog writes of more keys or parts than this run in the writer's thread, not on the loop.
LONG = 32


class StoreCore:
    def __init__(
        self,
        root: Path,
        catalog: Callable[[concurrent.futures.Executor], Catalog],
        *,
        inline_max: int = 64 * 1024,
        io_threads: int = 16,
        shared: bool = False,
        blob_lease: float = 300.0,
        keys: crypto.Keyring | None = None,
        blobs: Callable[[concurrent.futures.Executor], BlobStore] | None = None,
    ) -> None:
        """Open a data folder over the catalog `catalog(pool)` makes, with the gateway's
        encryption keys `keys` (None: encryption is unavailable). `shared`: one of several
        worker processes of one gateway, whose parent swept the folder and holds it;
        otherwise this store holds it alone until `start()` has swept it. `blob_lease`:
        seconds a blob being written may go without news before others reclaim it
        (intents.py). `blobs`: makes the BlobStore (None: blob files in the data folder)."""
        self.root = root
        self.inline_max = inline_max
        root.mkdir(parents=True, exist_ok=True)
        self.lock = FolderLock(root)
        if shared:
            self.lock.shared()
        else:
            self.lock.exclusive("cannot start")
        self.pool = concurrent.futures.ThreadPoolExecutor(io_threads, thread_name_prefix="io")
        self.files: BlobStore = BlobFiles(root, self.pool) if blobs is None else blobs(self.pool)
        self.catalog = catalog(self.pool)
        self.keys = keys
        self._read: CatalogReader = self.catalog.reader
        self.intents = Intents(self.catalog, self._read, self.files, blob_lease)
        # Frees of released blobs under way: they finish whatever becomes of their request.
        self._freeing: set[asyncio.Task[None]] = set()
        # Which notification configurations an event fires (outbox.py): the application's
        # to give; None records no event.
        self.destinations: outbox.Destinations | None = None
        # Which replication rules copy a change elsewhere (outbox.py): likewise.
        self.replicas: outbox.Replicas | None = None

    def fired(
        self,
        bucket: Bucket,
        event: str,
        key: str,
        tags: Sequence[tuple[str, str]] = (),
        replica: bool = False,
        kms: bool = False,
    ) -> tuple[tuple[str, str], ...]:
        """What a change must reach: notification destinations and replication rules."""
        return outbox.fired(
            bucket, self.destinations, self.replicas, event, key, tags, replica, kms
        )

    def close(self) -> None:
        self.files.close()
        self.catalog.close()
        self.pool.shutdown(wait=True)
        self.lock.close()

    def _write(
        self,
        fn: Callable[[CatalogTx], Awaitable[T]],
        staged: Sequence[str] = (),
        *,
        long: bool = False,
        frees: bool = False,
    ) -> asyncio.Future[T]:
        """Run `fn` in a committed transaction. Blob files it released are moved out of reach
        before the answer and freed after it, or before it when `frees` (a delete answers once
        the space is free); `staged` blob files are removed if it fails. All of that happens
        whatever becomes of the caller: a request that goes away neither leaks a blob nor
        deletes one that a committed object uses."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()

        def settled(outcome: asyncio.Future[tuple[T, list[str]]]) -> None:
            exc = outcome.exception()
            if exc is not None:
                # A commit whose outcome is unknown may have made rows that use the staged
                # blobs: they stay (an orphan costs space; a freed blob in use loses data).
                # If it was not made, its intents lapse and a reclaimer frees those blobs.
                if staged and not isinstance(exc, errors.CommitOutcomeUnknown):
                    self._free_later(self._drop_staged(list(staged)))
                _answer(answer, None, exc)
                return
            result, released = outcome.result()
            if not released:
                _answer(answer, result, None)
                return
            self._free_later(self._free(released, lambda: _answer(answer, result, None), frees))

        self.catalog.write(fn, long=long).add_done_callback(settled)
        return answer

    async def _drop_staged(self, blob_ids: list[str]) -> None:
        """Remove staged blob files that no commit took, then their intents."""
        await self.files.delete(blob_ids)
        self.intents.drop(blob_ids)

    def _free_later(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._freeing.add(task)
        task.add_done_callback(self._freeing.discard)

    async def _free(self, released: list[str], answer: Callable[[], None], frees: bool) -> None:
        """Move released blobs out of reach, then free them; answer between the two, or after
        them when `frees`. A failure is logged: the sweep removes what is left."""
        retired: Sequence[object] = ()
        try:
            retired = await self.files.retire(released)
        except OSError:
            log.exception("could not move released blob files out (the sweep will remove them)")
        if not frees:
            answer()
        try:
            await self.files.purge(retired)
        except OSError:
            log.exception("could not free released blob files (the sweep will)")
        if frees:
            answer()

    async def _put(
        self,
        tx: CatalogTx,
        obj: ObjectInfo,
        new_blobs: Sequence[StagedBlob],
        event: str,
        origin: Origin,
    ) -> ObjectInfo:
        """Write an object as its key's latest version, as the bucket's versioning says
        (versions.put); gives it with its version id and final time. References to its
        extents are taken before the replaced version's are dropped, in this one transaction,
        so replacing an object by a copy of itself never frees a blob it still uses. `event`
        (ObjectCreated's kind) is recorded in the outbox if the bucket's configuration fires
        for it, in this transaction too."""
        await tx.retain(obj.extents, new_blobs)
        bucket = await require_bucket(tx, obj.bucket)
        attrs = obj.attrs
        fired = self.fired(bucket, event, obj.key, attrs.tags, origin.replica, attrs.kms_encrypted)
        if obj.attrs.sse_key is not None:  # SSE-C objects are not replicated (no key to read)
            fired = tuple(t for t in fired if not outbox.is_replication(t))
        status = _status(fired, origin)
        if status != obj.attrs.replication:  # most writes: none, and none asked for
            obj = replace(obj, attrs=replace(obj.attrs, replication=status))
        final = await (versions.put_replica if origin.replica else versions.put)(tx, bucket, obj)
        await outbox.record(
            tx,
            fired,
            bucket,
            obj.key,
            event,
            origin,
            final.mtime_ns,
            final.version_id,
            final.size,
            final.etag,
        )
        return final


def _status(fired: Sequence[tuple[str, str]], origin: Origin) -> str | None:
    """A new version's x-amz-replication-status: REPLICA for the replication worker's copy,
    PENDING when a rule copies it elsewhere, else none (whatever a copied source said)."""
    if origin.replica:
        return "REPLICA"
    return "PENDING" if any(map(outbox.is_replication, fired)) else None


async def lookup(
    reader: CatalogReader, bucket: str, key: str, version_id: str | None
) -> ObjectInfo:
    if version_id is None:
        obj = await reader.get_object(bucket, key)
        if obj is not None:
            return obj
        record = await require_bucket(reader, bucket)
        if record.versioning is not None:
            marker = await versions.latest_marker(reader, bucket, key)
            if marker is not None:
                raise versions.DeleteMarker(marker, by_id=False)
        raise errors.NoSuchKey(Key=key)
    found = await versions.find(reader, bucket, key, version_id)
    if found is None:
        await require_bucket(reader, bucket)
        raise versions.NoSuchVersion(Key=key, VersionId=version_id)
    if found.delete_marker:
        raise versions.DeleteMarker(found, by_id=True)
    return found


def _answer(fut: asyncio.Future[T], result: T | None, exc: BaseException | None) -> None:
    if fut.done():  # the request went away; the outcome stands regardless
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)  # type: ignore[arg-type]


async def change_bucket(tx: CatalogTx, name: str) -> Bucket:
    """The bucket whose settings `tx` changes; NoSuchBucket."""
    bucket = await tx.lock_bucket(name)
    if bucket is None:
        raise errors.NoSuchBucket(BucketName=name)
    return bucket


async def require_bucket(reader: CatalogReader, name: str) -> Bucket:
    bucket = await reader.get_bucket(name)
    if bucket is None:
        raise errors.NoSuchBucket(BucketName=name)
    return bucket


async def check_write(
    reader: CatalogReader, bucket: str, key: str, condition: WriteCondition | None
) -> None:
    """If-None-Match / If-Match on a write, against the current object."""
    if condition is None:
        return
    current = await reader.get_object(bucket, key)
    if (
        condition.if_none_match is not None
        and current is not None
        and digest.matches(condition.if_none_match, current.etag)
    ):
        raise errors.PreconditionFailed(Condition="If-None-Match")
    if condition.if_match is not None:
        if current is None:
            raise errors.NoSuchKey(Key=key)
        if not digest.matches(condition.if_match, current.etag):
            raise errors.PreconditionFailed(Condition="If-Match")


async def require_unchanged(reader: CatalogReader, source: ObjectInfo) -> None:
    """The source of a copy must still be the version that was checked and hashed (current or
    not: a newer version written meanwhile does not change the one being copied)."""
    found = await versions.find(reader, source.bucket, source.key, source.version_id)
    # Gone or changed: the caller looks the source up again, and answers what that lookup
    # says (NoSuchVersion for a version removed by id, NoSuchKey for a deleted key).
    if found is None or found.delete_marker:
        raise errors.SourceChanged()
    if found.extents != source.extents or found.etag != source.etag:
        raise errors.SourceChanged()
