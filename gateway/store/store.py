"""The Store service: what the protocol layer calls. Knows nothing of HTTP.

S3's storage rules live here, once, over the Catalog and BlobStore protocols (api.py):
conditional writes, references taken before they are dropped, Complete's checks, a copy's
source unchanged, bucket rules, the listing roll-up (listing.py), and blobs freed only after
the commit that released them. Which backend holds the catalog is the composition root's
choice (`open_store`); nothing here speaks SQL or knows the data folder's layout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from .. import digest, metrics
from ..limits import MAX_OBJECT_SIZE, MIN_PART_SIZE
from . import crypto, errors, listing, objectlock, staging, versions
from .api import BlobStore, Catalog, CatalogReader, CatalogTx, Stray
from .blobs import BlobFiles, FolderLock
from .intents import Intents
from .model import (
    NO_LOCK,
    Bucket,
    DefaultRetention,
    DeleteCondition,
    Deleted,
    Extent,
    ListPage,
    ObjectAttrs,
    ObjectInfo,
    ObjectLock,
    Part,
    StagedBlob,
    Upload,
    UploadsPage,
    VersionsPage,
    WriteCondition,
    slice_extents,
)
from .reader import ObjectReader

log = logging.getLogger(__name__)
T = TypeVar("T")
# A key's latest version as the catalog gave it, with its first blob's inline bytes
# (CatalogReader.get_object_inline); None: the key has no object.
Latest = tuple[ObjectInfo, dict[str, bytes | None]] | None

# Catalog writes of more keys or parts than this run in the writer's thread, not on the loop.
LONG = 32


class Store:
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
    ) -> None:
        """Open a data folder over the catalog `catalog(pool)` makes, with the gateway's
        encryption keys `keys` (None: encryption is unavailable). `shared`: one of several
        worker processes of one gateway, whose parent swept the folder and holds it;
        otherwise this store holds it alone until `start()` has swept it. `blob_lease`:
        seconds a blob being written may go without news before others reclaim it
        (intents.py)."""
        self.root = root
        self.inline_max = inline_max
        root.mkdir(parents=True, exist_ok=True)
        self.lock = FolderLock(root)
        if shared:
            self.lock.shared()
        else:
            self.lock.exclusive("cannot start")
        self.pool = concurrent.futures.ThreadPoolExecutor(io_threads, thread_name_prefix="io")
        self.files: BlobStore = BlobFiles(root, self.pool)
        self.catalog = catalog(self.pool)
        self.keys = keys
        self._read: CatalogReader = self.catalog.reader
        self.intents = Intents(self.catalog, self._read, self.files, blob_lease)
        # Frees of released blobs under way: they finish whatever becomes of their request.
        self._freeing: set[asyncio.Task[None]] = set()

    def close(self) -> None:
        self.catalog.close()
        self.pool.shutdown(wait=True)
        self.lock.close()

    # --- start-up ------------------------------------------------------------------------------

    async def start(self) -> tuple[int, int]:
        """Sweep what a crash left, then let other processes of this gateway share the folder.
        Returns (tmp entries removed, orphan blob files removed)."""
        swept = await self.sweep()
        self.lock.shared()
        return swept

    async def sweep(self) -> tuple[int, int]:
        """Empty tmp/ and trash/, and remove blob files the catalog does not reference: what
        a crash left.

        Runs holding the folder exclusively, before requests are served (a blob being
        published is not yet in the catalog). One blob directory at a time: bounded memory.
        """
        await self.check_folder()
        tmp = await self.files.empty_leftovers()
        orphans = 0
        async for stale in leftover_files(self._read, self.files):
            log.info("start-up sweep: removing %d unreferenced blob files", len(stale))
            await self.files.remove(stale)
            orphans += len(stale)
        # Every intent is a dead writer's (the folder is ours alone), its files gone now.
        await self.catalog.write(lambda tx: tx.drop_intents(None))
        return tmp, orphans

    async def check_folder(self) -> None:
        """Refuse a data folder whose blob files another catalog references (`paired`);
        pair them if neither has met another. Every start asks, alone or joining others."""
        try:
            await paired(self.catalog, self.files, claim=True)
        except errors.StoreError as exc:
            raise errors.StoreError(f"{exc}; nothing was changed") from None

    def totals(self) -> tuple[int, int]:
        """(objects, bytes) stored; blocking, from any thread."""
        return self.catalog.totals()

    async def writable(self) -> bool:
        """Can the catalog and the blob store take writes? (readiness)"""
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(self.pool, self.catalog.writable):
            return False
        return await self.files.writable()

    # --- writes: one way in --------------------------------------------------------------------

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
        self, tx: CatalogTx, obj: ObjectInfo, new_blobs: Sequence[StagedBlob]
    ) -> ObjectInfo:
        """Write an object as its key's latest version, as the bucket's versioning says
        (versions.put); gives it with its version id and final time. References to its
        extents are taken before the replaced version's are dropped, in this one transaction,
        so replacing an object by a copy of itself never frees a blob it still uses."""
        await tx.retain(obj.extents, new_blobs)
        bucket = await _require_bucket(tx, obj.bucket)
        return await versions.put(tx, bucket, obj)

    # --- buckets -------------------------------------------------------------------------------

    async def get_bucket(self, name: str) -> Bucket | None:
        return await self._read.get_bucket(name)

    async def get_bucket_and_object(self, name: str, key: str) -> tuple[Bucket | None, Latest]:
        """The bucket and its key's latest version in one catalog read, for a GET or HEAD of
        the latest version: open_object and head_object take the version as `latest`."""
        found = await self._read.get_bucket_and_object(name, key)
        return (None, None) if found is None else found

    async def list_buckets(self, owner: str | None = None) -> list[Bucket]:
        return await self._read.list_buckets(owner)

    async def create_bucket(
        self,
        name: str,
        owner: str,
        region: str,
        object_lock: bool = False,
        settings: Mapping[str, str] | None = None,
    ) -> Bucket:
        """A new bucket, with its first settings; with Object Lock, versioning is Enabled from
        the start."""
        bucket = Bucket(name, owner, region, time.time_ns(), settings=dict(settings or {}))
        if object_lock:
            bucket = replace(bucket, versioning=versions.ENABLED, object_lock=True)

        async def commit(tx: CatalogTx) -> Bucket:
            existing = await tx.insert_bucket(bucket)
            if existing is not None:
                if existing.owner == owner:
                    raise errors.BucketAlreadyOwnedByYou(BucketName=name)
                raise errors.BucketAlreadyExists(BucketName=name)
            return bucket

        return await self._write(commit)

    async def set_versioning(self, name: str, status: str) -> Bucket:
        """PutBucketVersioning: "Enabled" or "Suspended" (never back to unversioned)."""

        async def commit(tx: CatalogTx) -> Bucket:
            bucket = await _change_bucket(tx, name)
            if bucket.object_lock and status != versions.ENABLED:
                raise objectlock.InvalidBucketState(objectlock.KEEPS_VERSIONING)
            bucket = replace(bucket, versioning=status)
            await tx.update_bucket(bucket)
            return bucket

        return await self._write(commit)

    async def set_lock_configuration(self, name: str, default: DefaultRetention | None) -> Bucket:
        """PutObjectLockConfiguration: Object Lock on (for good), with a default retention or
        none. Versioning must be Enabled."""

        async def commit(tx: CatalogTx) -> Bucket:
            bucket = await _change_bucket(tx, name)
            if bucket.versioning != versions.ENABLED:
                raise objectlock.InvalidBucketState(objectlock.NEEDS_VERSIONING)
            bucket = replace(bucket, object_lock=True, default_retention=default)
            await tx.update_bucket(bucket)
            return bucket

        return await self._write(commit)

    async def set_bucket_setting(self, name: str, setting: str, value: str | None) -> Bucket:
        """Put (or, with None, delete) one of a bucket's configuration documents by name;
        the others are kept, whatever other node changes them at the same time."""

        async def commit(tx: CatalogTx) -> Bucket:
            bucket = await _change_bucket(tx, name)
            settings = {k: v for k, v in bucket.settings.items() if k != setting}
            if value is not None:
                settings[setting] = value
            bucket = replace(bucket, settings=settings)
            await tx.update_bucket(bucket)
            return bucket

        return await self._write(commit)

    async def update_attrs(
        self,
        bucket: str,
        key: str,
        version_id: str | None,
        change: Callable[[ObjectInfo], ObjectAttrs],
    ) -> ObjectInfo:
        """Change what is stored beside a version's bytes (its ACL, its tags): `change` gets
        the latest version or the one by id, as it is in this transaction, and returns its
        new attrs. The bytes, the ETag and the time are untouched."""

        async def commit(tx: CatalogTx) -> ObjectInfo:
            version = await _lookup(tx, bucket, key, version_id)
            version = replace(version, attrs=change(version))
            await tx.update_version(version)
            return version

        return await self._write(commit)

    async def delete_bucket(self, name: str) -> None:
        """Delete an empty bucket (no object, no older version, no delete marker); its
        unfinished multipart uploads go with it."""

        async def commit(tx: CatalogTx) -> None:
            await _require_bucket(tx, name)
            if not await tx.bucket_is_empty(name):
                raise errors.BucketNotEmpty(BucketName=name)
            for upload_id in await tx.upload_ids(name):
                for part in await tx.delete_upload(upload_id):
                    await tx.release(part.extents)
            await tx.delete_bucket(name)

        # Its uploads go with it: any number of statements, run off the event loop.
        await self._write(commit, long=True, frees=True)

    # --- writing objects -----------------------------------------------------------------------

    async def stage(
        self,
        chunks: AsyncIterable[bytes],
        observers: Sequence[digest.Digest] = (),
        encryption: crypto.Encryption | None = None,
    ) -> StagedBlob:
        """Receive a body: hash it (MD5 plus `observers`), make it durable, encrypted with
        `encryption` if given, and return the blob (staging.py). It is referenced by nothing
        until a commit; `discard` drops it."""
        return await staging.stage(
            chunks, self.files, self.pool, self.inline_max, observers, encryption, self.intents
        )

    async def discard(self, blob: StagedBlob) -> None:
        """Drop a staged blob that will not be committed (its request failed a check)."""
        if blob.data is None:
            await self._drop_staged([blob.id])

    async def put_object(
        self,
        bucket: str,
        key: str,
        blob: StagedBlob,
        attrs: ObjectAttrs,
        condition: WriteCondition | None = None,
        lock: ObjectLock = NO_LOCK,
        etag: str | None = None,
        keep_md5: bool = True,
    ) -> ObjectInfo:
        """Commit a staged blob as the object `bucket/key`: its latest version, with the Object
        Lock asked for (or the bucket's default). The ETag is the MD5 of the bytes unless
        `etag` says otherwise (SSE-C, SSE-KMS); `keep_md5` False keeps no MD5 of them (SSE-C)."""
        md5 = blob.md5.hex()
        obj = ObjectInfo(
            bucket=bucket,
            key=key,
            size=blob.size,
            etag=etag or md5,
            mtime_ns=0,
            attrs=attrs,
            extents=(Extent(blob.id, 0, blob.size, blob.key),) if blob.size else (),
            content_md5=md5 if keep_md5 else None,
            lock=lock,
        )
        staged = [] if blob.data is not None else [blob.id]

        async def commit(tx: CatalogTx) -> ObjectInfo:
            await _check_write(tx, bucket, key, condition)
            # The timestamp is taken inside the transaction so that commit order and
            # Last-Modified order agree.
            return await self._put(
                tx, replace(obj, mtime_ns=time.time_ns()), [blob] if blob.size else []
            )

        return await self._write(commit, staged)

    async def check_write(self, bucket: str, key: str, condition: WriteCondition) -> None:
        """An early look at a write condition (it is checked again when the write commits)."""
        await _check_write(self._read, bucket, key, condition)

    async def delete_objects(self, bucket: str, keys: Sequence[str]) -> list[Deleted]:
        """Delete keys (a missing key is not an error, as in S3): in a bucket whose
        versioning was ever set, each gets a delete marker."""
        done = await self.delete_versions(bucket, [(key, None) for key in keys])
        return [d for d in done if isinstance(d, Deleted)]  # a key alone is never locked

    async def delete_versions(
        self,
        bucket: str,
        targets: Sequence[tuple[str, str | None]],
        bypass_governance: Sequence[bool] = (),
        conditions: Sequence[DeleteCondition | None] = (),
    ) -> list[Deleted | errors.StoreError]:
        """DeleteObject and DeleteObjects: each (key, version id) removes that version for
        good ("null": the null version); (key, None) deletes the key as the bucket's
        versioning says (versions.delete). By target: `bypass_governance`, whether a
        GOVERNANCE lock may be lifted (the caller's permission, decided per key), and
        `conditions`, what the version deleted must be (_check_delete). One transaction for
        them all; a target refused (a version Object Lock keeps, a condition not met) is
        answered with its error and the others go ahead."""

        # Rows are locked in key order whatever the request's order, so two nodes deleting
        # the same keys cannot deadlock (PostgreSQL would abort one, to be run again).
        order = sorted(range(len(targets)), key=lambda n: targets[n][0].encode())
        refused = (objectlock.ObjectLocked, errors.PreconditionFailed, errors.NoSuchKey)

        async def commit(tx: CatalogTx) -> list[Deleted | errors.StoreError]:
            record = await _require_bucket(tx, bucket)
            now = time.time_ns()
            done: dict[int, Deleted | errors.StoreError] = {}
            for n in order:
                key, vid = targets[n]
                condition = conditions[n] if n < len(conditions) else None
                try:
                    if condition is not None and not await _check_delete(
                        tx, bucket, key, vid, condition
                    ):
                        done[n] = Deleted(key, vid)  # nothing the condition could hold for
                        continue
                    bypass = n < len(bypass_governance) and bypass_governance[n]
                    done[n] = await versions.delete(tx, record, key, vid, now, bypass)
                except refused as exc:
                    done[n] = exc  # raised before it changed anything
            return [done[n] for n in range(len(targets))]

        return await self._write(commit, long=len(targets) > LONG, frees=True)

    async def expire(self, bucket: str, key: str, version_id: str | None, mtime_ns: int) -> bool:
        """Lifecycle's delete: of the key (`version_id` None: as the bucket's versioning says,
        a delete marker where it was ever set) or of one version or marker by its id, only
        if what is there is still what the rule judged (the same time); a version Object Lock
        keeps stays. True when something was deleted."""

        async def commit(tx: CatalogTx) -> bool:
            record = await _require_bucket(tx, bucket)
            try:
                seen = await _lookup(tx, bucket, key, version_id)
            except versions.DeleteMarker as exc:
                if not exc.by_id:
                    return False  # the key is deleted already
                seen = exc.marker
            except (errors.NoSuchKey, versions.NoSuchVersion):
                return False
            if seen.mtime_ns != mtime_ns:
                return False
            try:
                await versions.delete(tx, record, key, version_id, time.time_ns())
            except objectlock.ObjectLocked:
                return False
            return True

        return await self._write(commit, frees=True)

    async def take_lease(self, bucket: str, name: str, holder: str, seconds: float) -> bool:
        """Hold the bucket's lease `name` for `seconds` if it is free, expired, or `holder`'s
        already: one holder at a time across every process and node sharing the catalog."""

        async def commit(tx: CatalogTx) -> bool:
            record = await _change_bucket(tx, bucket)
            setting = f"lease:{name}"
            now = time.time_ns()
            held = record.settings.get(setting)
            if held is not None:
                other, _, until = held.rpartition(" ")
                if other != holder and int(until) > now:
                    return False
            settings = dict(record.settings)
            settings[setting] = f"{holder} {now + int(seconds * 1e9)}"
            await tx.update_bucket(replace(record, settings=settings))
            return True

        return await self._write(commit)

    async def release_lease(self, bucket: str, name: str, holder: str) -> bool:
        """Give back the bucket's lease `name` if `holder` holds it, so that another process
        may take it at once rather than when it lapses; True if it was given back. Anyone
        else's lease, or a bucket gone, is left as it is."""

        async def commit(tx: CatalogTx) -> bool:
            record = await tx.lock_bucket(bucket)
            setting = f"lease:{name}"
            held = None if record is None else record.settings.get(setting)
            if record is None or held is None or held.rpartition(" ")[0] != holder:
                return False
            settings = {k: v for k, v in record.settings.items() if k != setting}
            await tx.update_bucket(replace(record, settings=settings))
            return True

        return await self._write(commit)

    async def set_retention(
        self,
        bucket: str,
        key: str,
        version_id: str | None,
        mode: str | None,
        until_ns: int | None,
        bypass_governance: bool = False,
    ) -> ObjectInfo:
        """PutObjectRetention on the latest version or one by id ((None, None): remove it),
        as objectlock.check_retention allows."""

        async def commit(tx: CatalogTx) -> ObjectInfo:
            version = await _lookup(tx, bucket, key, version_id)
            objectlock.check_retention(
                version.lock, mode, until_ns, bypass_governance, time.time_ns()
            )
            version = replace(
                version, lock=replace(version.lock, mode=mode, retain_until_ns=until_ns)
            )
            await tx.update_version(version)
            return version

        return await self._write(commit)

    async def set_legal_hold(
        self, bucket: str, key: str, version_id: str | None, status: str
    ) -> ObjectInfo:
        """PutObjectLegalHold: ON or OFF, on the latest version or one by id."""

        async def commit(tx: CatalogTx) -> ObjectInfo:
            version = await _lookup(tx, bucket, key, version_id)
            version = replace(version, lock=replace(version.lock, legal_hold=status))
            await tx.update_version(version)
            return version

        return await self._write(commit)

    async def copy_object(
        self,
        source: ObjectInfo,
        bucket: str,
        key: str,
        attrs: ObjectAttrs,
        etag: str,
        learnt_md5: str | None = None,
        lock: ObjectLock = NO_LOCK,
        rewrap: crypto.Encryption | None = None,
        content_md5: str | None = None,
    ) -> ObjectInfo:
        """A new object over the source's extents: metadata only, whatever the size. It does
        not take the source's Object Lock: `lock` (or the bucket's default) applies.

        `source` is the version the caller checked (conditions, ETag); if the source changed
        before the commit, SourceChanged is raised and the caller starts again. `learnt_md5`,
        when the caller hashed a multipart source, is remembered on it for the next copy.
        `rewrap`: the destination's encryption, under which the source's data keys are
        wrapped again (the blobs are still shared); `content_md5`: the bytes' MD5 when the
        ETag is not it ("" when none is to be kept).
        """
        extents = source.extents if rewrap is None else self.rewrap(source.extents, rewrap)

        async def commit(tx: CatalogTx) -> ObjectInfo:
            await _require_unchanged(tx, source)
            if learnt_md5 is not None:
                await tx.remember_content_md5(source, learnt_md5)
            obj = ObjectInfo(
                bucket=bucket,
                key=key,
                size=source.size,
                etag=etag,
                mtime_ns=time.time_ns(),
                attrs=attrs,
                extents=extents,
                content_md5=etag if content_md5 is None else content_md5 or None,
                lock=lock,
            )
            return await self._put(tx, obj, [])

        return await self._write(commit)

    def rewrap(
        self, extents: tuple[Extent, ...], encryption: crypto.Encryption
    ) -> tuple[Extent, ...]:
        """The extents with each data key wrapped under `encryption` (server-managed keys
        only: docs/encryption.md says why a customer's key is never re-wrapped)."""
        assert self.keys is not None
        opener = self.keys.opener()
        done: dict[str, str] = {}
        out = []
        for e in extents:
            if e.key is None or crypto.label_of(e.key) == encryption.label:
                out.append(e)
                continue
            if e.key not in done:
                done[e.key] = encryption.seal(opener(e.key))
            out.append(replace(e, key=done[e.key]))
        return tuple(out)

    def reader(
        self,
        obj: ObjectInfo,
        customer_key: bytes | None = None,
        known: Mapping[str, bytes | None] | None = None,
    ) -> ObjectReader:
        """A reader of `obj`'s bytes, not opened yet (`customer_key`: an SSE-C object's;
        `known`: its blobs as its lookup read them)."""
        keys = self.keys.opener(customer_key) if self.keys is not None else None
        return ObjectReader(self._read, self.files, obj, keys, self.pool, known)

    async def content_md5(
        self,
        obj: ObjectInfo,
        start: int = 0,
        length: int | None = None,
        customer_key: bytes | None = None,
    ) -> bytes:
        """The MD5 of (a range of) an object's bytes, read and hashed off the event loop."""
        length = obj.size - start if length is None else length
        reader = self.reader(obj, customer_key)
        try:
            await reader.open()
        except FileNotFoundError as exc:
            reader.close()
            raise errors.SourceChanged() from exc
        try:
            value = await reader.md5(start, length, self.pool)
        finally:
            reader.close()
        metrics.MD5_BYTES.inc(length)
        return value

    # --- multipart uploads ---------------------------------------------------------------------

    async def create_upload(
        self,
        bucket: str,
        key: str,
        owner: str,
        attrs: ObjectAttrs,
        lock: ObjectLock = NO_LOCK,
    ) -> Upload:
        """A multipart upload; the object Complete makes gets `lock` (or the default)."""
        upload = Upload(secrets.token_urlsafe(32), bucket, key, time.time_ns(), owner, attrs, lock)

        async def commit(tx: CatalogTx) -> Upload:
            await _require_bucket(tx, bucket)
            await tx.insert_upload(upload)
            return upload

        return await self._write(commit)

    async def get_upload(self, upload_id: str, bucket: str, key: str) -> Upload:
        """The upload, which must be for this bucket and key (else NoSuchUpload, as on AWS)."""
        return await _upload(self._read, upload_id, bucket, key)

    async def upload_part(
        self,
        upload: Upload,
        number: int,
        blob: StagedBlob,
        checksum: str | None = None,
        etag: str | None = None,
    ) -> Part:
        """A part from a staged blob; its ETag is the blob's MD5 unless `etag` is given."""
        part = Part(
            upload.id,
            number,
            blob.size,
            etag or blob.md5.hex(),
            0,
            (Extent(blob.id, 0, blob.size, blob.key),) if blob.size else (),
            checksum,
        )

        async def commit(tx: CatalogTx) -> Part:
            await _upload(tx, upload.id, upload.bucket, upload.key)  # not aborted meanwhile
            final = replace(part, mtime_ns=time.time_ns())
            await _put_part(tx, final, [blob] if blob.size else [])
            return final

        return await self._write(commit, [] if blob.data is not None else [blob.id])

    async def upload_part_copy(
        self,
        upload: Upload,
        number: int,
        source: ObjectInfo,
        start: int,
        length: int,
        etag: str,
        learnt_md5: str | None = None,
        rewrap: crypto.Encryption | None = None,
        checksum: str | None = None,
    ) -> Part:
        """A part over a slice of the source's extents: the bytes are not copied (`rewrap`:
        as in copy_object; `checksum`: the slice's, in the upload's algorithm)."""
        extents = slice_extents(source.extents, start, length)
        if rewrap is not None:
            extents = self.rewrap(extents, rewrap)

        async def commit(tx: CatalogTx) -> Part:
            await _upload(tx, upload.id, upload.bucket, upload.key)
            await _require_unchanged(tx, source)
            if learnt_md5 is not None:
                await tx.remember_content_md5(source, learnt_md5)
            part = Part(
                upload.id,
                number,
                length,
                etag,
                time.time_ns(),
                extents,
                checksum,
            )
            await _put_part(tx, part, [])
            return part

        return await self._write(commit)

    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]:
        return await self._read.list_parts(upload_id, after, limit)

    async def complete_upload(
        self,
        upload_id: str,
        bucket: str,
        key: str,
        chosen: Sequence[tuple[int, str]],
        checksums_of: Callable[[Upload, Sequence[Part]], dict[str, str]],
        condition: WriteCondition | None = None,
    ) -> ObjectInfo:
        """Make the object from the chosen (part number, ETag) pairs, in ascending order.

        The object's manifest is the parts' manifests end to end: no byte is copied. Every
        part must exist with that ETag (InvalidPart) and all but the last be at least 5 MiB
        (EntityTooSmall). Parts not chosen are released with the upload. A retried Complete of
        an upload that made the current object is answered with that object, as AWS does.
        """

        async def commit(tx: CatalogTx) -> ObjectInfo:
            try:
                upload = await _upload(tx, upload_id, bucket, key)
            except errors.NoSuchUpload:
                done = await tx.get_object(bucket, key)
                if done is not None and done.upload_id == upload_id:
                    return done
                raise
            await _check_write(tx, bucket, key, condition)
            parts = {p.number: p for p in await tx.list_parts(upload.id, 0, -1)}
            picked: list[Part] = []
            for number, etag in chosen:
                part = parts.get(number)
                if part is None or part.etag != etag:
                    raise errors.InvalidPart(UploadId=upload.id, PartNumber=number, ETag=etag)
                picked.append(part)
            for part in picked[:-1]:
                if part.size < MIN_PART_SIZE:
                    raise errors.EntityTooSmall(
                        ProposedSize=part.size, MinSizeAllowed=MIN_PART_SIZE, PartNumber=part.number
                    )
            size = sum(p.size for p in picked)
            if size > MAX_OBJECT_SIZE:
                raise errors.EntityTooLarge(ProposedSize=size, MaxSizeAllowed=MAX_OBJECT_SIZE)
            obj = ObjectInfo(
                bucket=bucket,
                key=key,
                size=size,
                etag=digest.multipart_etag_of_hex(p.etag for p in picked),
                mtime_ns=time.time_ns(),
                attrs=replace(
                    upload.attrs,
                    checksums=checksums_of(upload, picked),
                    part_checksums=_part_checksums(picked),
                ),
                extents=tuple(e for p in picked for e in p.extents),
                parts=tuple(p.size for p in picked),
                upload_id=upload.id,
                lock=upload.lock,
            )
            # References the parts' blobs before the upload lets go.
            final = await self._put(tx, obj, [])
            for part in await tx.delete_upload(upload.id):
                await tx.release(part.extents)
            return final

        return await self._write(commit, long=len(chosen) > LONG)

    async def abort_upload(self, upload_id: str, bucket: str, key: str) -> None:
        async def commit(tx: CatalogTx) -> None:
            await _upload(tx, upload_id, bucket, key)
            for part in await tx.delete_upload(upload_id):
                await tx.release(part.extents)

        await self._write(commit, long=True, frees=True)  # any number of parts

    async def list_uploads(
        self,
        bucket: str,
        prefix: str,
        delimiter: str,
        key_marker: str,
        upload_id_marker: str,
        max_uploads: int,
    ) -> UploadsPage:
        """Uploads by key, then by initiation time; common prefixes as in list_objects."""

        async def page(reader: CatalogReader) -> UploadsPage:
            await _require_bucket(reader, bucket)
            cursor: tuple[object, ...] = (key_marker.encode(),)
            inclusive = False
            if key_marker and upload_id_marker:
                # Resume inside the marker key, after that upload.
                marker = await reader.get_upload(upload_id_marker)
                if marker is not None:
                    cursor = (key_marker.encode(), marker.initiated_ns, marker.id)
            rolled = await listing.roll_up(
                lambda c, i, end, n: reader.scan_uploads(bucket, c, i, end, n),
                prefix.encode(),
                delimiter.encode(),
                cursor,
                inclusive,
                max_uploads,
            )
            return UploadsPage(tuple(rolled.items), rolled.prefixes, rolled.truncated)

        return await self.catalog.scan(page)

    # --- reading objects -----------------------------------------------------------------------

    async def head_object(
        self, bucket: str, key: str, version_id: str | None = None, latest: Latest = None
    ) -> ObjectInfo:
        """The key's latest version, or the version `version_id` ("null": the null version).
        NoSuchKey, NoSuchVersion, or versions.DeleteMarker when the latest version, or the
        version asked for, is a delete marker. `latest`: the latest version, read already
        (get_bucket_and_object)."""
        if latest is not None and version_id is None:
            return latest[0]
        return await _lookup(self._read, bucket, key, version_id)

    async def open_object(
        self,
        bucket: str,
        key: str,
        version_id: str | None = None,
        check: Callable[[ObjectInfo], bytes | None] | None = None,
        latest: Latest = None,
    ) -> ObjectReader:
        """Look an object up and open what its bytes need, as one consistent snapshot.
        `check` judges the version before anything is read (an SSE-C request's key) and gives
        the customer key its data keys need. `latest`: the latest version, read already
        (get_bucket_and_object), used on the first attempt."""
        for _attempt in range(5):
            # The latest version and its inline bytes in one round trip when it is an object.
            found = latest if version_id is None else None
            if found is None and version_id is None:
                found = await self._read.get_object_inline(bucket, key)
            latest = None  # a version replaced since is looked up again
            obj, known = found or (await self.head_object(bucket, key, version_id), None)
            customer_key = check(obj) if check is not None else None
            reader = self.reader(obj, customer_key, known)
            try:
                await reader.open()
            except FileNotFoundError:
                # Replaced or deleted between the lookup and the open: look again.
                reader.close()
                continue
            return reader
        raise errors.StoreError("object kept changing while being opened")

    async def list_objects(
        self, bucket: str, prefix: str, delimiter: str, after: str, max_keys: int
    ) -> ListPage:
        """One page of a listing: keys > `after` that start with `prefix`, with keys that
        contain `delimiter` after the prefix rolled up into common prefixes."""

        async def page(reader: CatalogReader) -> ListPage:
            await _require_bucket(reader, bucket)
            rolled = await listing.roll_up(
                lambda c, i, end, n: reader.scan_objects(bucket, c, i, end, n),
                prefix.encode(),
                delimiter.encode(),
                (after.encode(),),
                False,
                max_keys,
            )
            return ListPage(tuple(rolled.items), rolled.prefixes, rolled.truncated, rolled.last)

        return await self.catalog.scan(page)

    async def list_versions(
        self,
        bucket: str,
        prefix: str,
        delimiter: str,
        key_marker: str,
        version_id_marker: str,
        max_keys: int,
    ) -> VersionsPage:
        """One page of ListObjectVersions (versions.list_page)."""

        async def page(reader: CatalogReader) -> VersionsPage:
            await _require_bucket(reader, bucket)
            return await versions.list_page(
                reader, bucket, prefix, delimiter, key_marker, version_id_marker, max_keys
            )

        return await self.catalog.scan(page)


async def _lookup(
    reader: CatalogReader, bucket: str, key: str, version_id: str | None
) -> ObjectInfo:
    if version_id is None:
        obj = await reader.get_object(bucket, key)
        if obj is not None:
            return obj
        record = await _require_bucket(reader, bucket)
        if record.versioning is not None:
            marker = await versions.latest_marker(reader, bucket, key)
            if marker is not None:
                raise versions.DeleteMarker(marker, by_id=False)
        raise errors.NoSuchKey(Key=key)
    found = await versions.find(reader, bucket, key, version_id)
    if found is None:
        await _require_bucket(reader, bucket)
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


def _part_checksums(parts: Sequence[Part]) -> tuple[str, ...]:
    """What the parts' own checksums were, when every part had one (the upload's algorithm's)."""
    if parts and all(p.checksum is not None for p in parts):
        return tuple(p.checksum for p in parts if p.checksum is not None)
    return ()


async def _change_bucket(tx: CatalogTx, name: str) -> Bucket:
    """The bucket whose settings `tx` changes; NoSuchBucket."""
    bucket = await tx.lock_bucket(name)
    if bucket is None:
        raise errors.NoSuchBucket(BucketName=name)
    return bucket


async def _require_bucket(reader: CatalogReader, name: str) -> Bucket:
    bucket = await reader.get_bucket(name)
    if bucket is None:
        raise errors.NoSuchBucket(BucketName=name)
    return bucket


async def _upload(reader: CatalogReader, upload_id: str, bucket: str, key: str) -> Upload:
    upload = await reader.get_upload(upload_id)
    if upload is None or upload.bucket != bucket or upload.key != key:
        raise errors.NoSuchUpload(UploadId=upload_id)
    return upload


async def _put_part(tx: CatalogTx, part: Part, new_blobs: Sequence[StagedBlob]) -> None:
    """Store a part, replacing one with the same number: references before releases."""
    await tx.retain(part.extents, new_blobs)
    old = await tx.put_part(part)
    if old is not None:
        await tx.release(old.extents)


async def _check_write(
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


async def _check_delete(
    tx: CatalogTx, bucket: str, key: str, version_id: str | None, condition: DeleteCondition
) -> bool:
    """Does the version a conditional delete names (the current object, or the one by id)
    meet its condition? PreconditionFailed if not. When there is no such object: NoSuchKey
    for If-Match on the key (AWS's general purpose buckets), else False (nothing to delete,
    and nothing is: AWS's directory buckets answer 204)."""
    if version_id is None:
        target = await tx.get_object(bucket, key)
    else:
        target = await versions.find(tx, bucket, key, version_id)
    if target is None or target.delete_marker:
        if condition.if_match is not None and version_id is None:
            raise errors.NoSuchKey(Key=key)
        return False
    if condition.if_match is not None and not digest.matches(condition.if_match, target.etag):
        raise errors.PreconditionFailed(Condition="If-Match")
    if condition.size is not None and condition.size != target.size:
        raise errors.PreconditionFailed(Condition="x-amz-if-match-size")
    if condition.modified_s is not None and condition.modified_s != target.mtime_ns // 10**9:
        raise errors.PreconditionFailed(Condition="x-amz-if-match-last-modified-time")
    return True


async def _require_unchanged(reader: CatalogReader, source: ObjectInfo) -> None:
    """The source of a copy must still be the version that was checked and hashed (current or
    not: a newer version written meanwhile does not change the one being copied)."""
    found = await versions.find(reader, source.bucket, source.key, source.version_id)
    # Gone or changed: the caller looks the source up again, and answers what that lookup
    # says (NoSuchVersion for a version removed by id, NoSuchKey for a deleted key).
    if found is None or found.delete_marker:
        raise errors.SourceChanged()
    if found.extents != source.extents or found.etag != source.etag:
        raise errors.SourceChanged()


async def paired(catalog: Catalog, files: BlobStore, *, claim: bool) -> None:
    """Raise StoreError unless `files` hold this catalog's blobs: else the start-up sweep,
    the reclaimer and fsck's repair would delete another catalog's objects as orphans.

    A new, empty catalog over a folder that holds blob files is a gateway started without its
    --catalog (a SQLite catalog made where PostgreSQL held the rows) or on a database nobody
    migrated into. A catalog that holds objects of its own is told apart by its id, which the
    folder records too: the first start of a pair gives both the same one (with `claim`) and
    every later start compares them."""
    knows = False
    async with contextlib.aclosing(catalog.audit.audit_blobs()) as rows:
        async for _ in rows:
            knows = True
            break
    if not knows:
        async with contextlib.aclosing(files.walk()) as found:
            async for _ in found:
                raise errors.StoreError(
                    "it holds blob files but this catalog knows no blob: they are another "
                    "catalog's objects (start with the catalog that served the folder, "
                    "--catalog / S3GW_CATALOG, or move a SQLite catalog with s3gw migrate; "
                    "only if every object was deleted are they orphans: remove blobs/ then)"
                )
    folder = await files.catalog_id(None)
    ours, _ = await catalog.write(lambda tx: tx.claim_id(None))
    if ours is None and folder is not None and knows:
        raise errors.StoreError(
            f"its blob files are catalog {folder}'s, and this catalog, which holds objects, "
            "has no id: it is another catalog (--catalog / S3GW_CATALOG), or one that served "
            "this folder before catalogs had ids (then remove the folder's catalog-id file)"
        )
    if claim and ours is None:
        proposed = folder or secrets.token_hex(16)
        ours, _ = await catalog.write(lambda tx: tx.claim_id(proposed))
    if claim and folder is None and ours is not None:
        folder = await files.catalog_id(ours)
    if folder is not None and ours is not None and folder != ours:
        raise errors.StoreError(
            f"its blob files are catalog {folder}'s, not this catalog's ({ours}): start with "
            "the catalog that served the folder (--catalog / S3GW_CATALOG)"
        )


async def leftover_files(reader: CatalogReader, blobs: BlobStore) -> AsyncIterator[list[Stray]]:
    """Blob files the catalog does not know, one directory at a time: what a crash (or a
    worker killed mid-request) left. The start-up sweep removes them and fsck calls them
    leftovers, not damage: both ask here, so they cannot disagree. Only while no gateway
    serves the store (a blob being published is not in the catalog yet)."""
    async for found in blobs.walk():
        known = await reader.file_blobs_among([entry.name for entry in found])
        stale = [entry for entry in found if entry.name not in known]
        if stale:
            yield stale
