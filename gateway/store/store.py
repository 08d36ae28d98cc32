"""The store's async API: what the protocol layer calls. Knows nothing of HTTP.

Writes go through the catalog writer thread (group commit); point reads run on the event
loop's own read connection (a primary-key lookup in WAL mode takes microseconds and never waits
for the writer); scans and file I/O run in a thread pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from .. import digest, metrics
from . import catalog, errors
from .blobs import BlobFiles, FolderLock, new_blob_id, start_writeback
from .model import (
    Bucket,
    Extent,
    ListPage,
    ObjectAttrs,
    ObjectInfo,
    Part,
    StagedBlob,
    Upload,
    UploadsPage,
    WriteCondition,
    slice_extents,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# Bodies are written and hashed in batches of this size, off the event loop.
BATCH = 1 << 20
# Reads of file blobs for GET.
READ_CHUNK = 1 << 20
# Objects with at most this many distinct blob files have every file opened before the first
# byte is sent: a delete that commits meanwhile cannot pull a blob from under the response.
EAGER_OPEN = 256
# Catalog writes of more keys or parts than this run in the writer's thread, not on the loop.
LONG = 32


class Store:
    def __init__(
        self,
        root: Path,
        *,
        inline_max: int = 64 * 1024,
        io_threads: int = 16,
        shared: bool = False,
    ) -> None:
        """Open a data folder. `shared`: one of several worker processes of one gateway, whose
        parent swept the folder and holds it; otherwise this store holds it alone until
        `start()` has swept it."""
        self.root = root
        self.inline_max = inline_max
        root.mkdir(parents=True, exist_ok=True)
        self.lock = FolderLock(root)
        if shared:
            self.lock.shared()
        else:
            self.lock.exclusive("cannot start")
        self.files = BlobFiles(root)
        self.catalog_path = root / "catalog.sqlite3"
        catalog.initialise(self.catalog_path)
        self.pool = concurrent.futures.ThreadPoolExecutor(io_threads, thread_name_prefix="io")
        self.writer = catalog.CatalogWriter(self.catalog_path, self.files, self.pool)
        self._reader = catalog.connect(self.catalog_path)
        self._local = threading.local()

    def close(self) -> None:
        self.writer.close()
        self.pool.shutdown(wait=True)
        self._reader.close()
        self.lock.close()

    # --- start-up ------------------------------------------------------------------------------

    def start(self) -> tuple[int, int]:
        """Sweep what a crash left, then let other processes of this gateway share the folder.
        Returns (tmp entries removed, orphan blob files removed)."""
        swept = self.sweep()
        self.lock.shared()
        return swept

    def sweep(self) -> tuple[int, int]:
        """Empty tmp/ and trash/, and remove blob files the catalog does not reference: what
        a crash left.

        Runs holding the folder exclusively, before requests are served (a blob being
        published is not yet in the catalog). One blob directory at a time: bounded memory.
        """
        tmp = self.files.empty_tmp()
        orphans = 0
        for stale in catalog.leftover_files(self._reader, self.files):
            log.info("start-up sweep: removing %d unreferenced blob files", len(stale))
            self.files.purge(Path(entry.path) for entry in stale)
            orphans += len(stale)
        return tmp, orphans

    def totals(self) -> tuple[int, int]:
        """(objects, bytes) stored; blocking, from any thread (a connection of its own)."""
        conn = catalog.connect(self.catalog_path)
        try:
            count, size = conn.execute("SELECT count(*), total(size) FROM objects").fetchone()
        finally:
            conn.close()
        return count, int(size)

    def writable(self) -> bool:
        """Can the catalog and the data folder take writes? (readiness)"""
        try:
            conn = catalog.connect(self.catalog_path)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            finally:
                conn.close()
            fd, path = self.files.create_tmp()
            self.files.discard_tmp(fd, path)
        except (OSError, sqlite3.Error):
            return False
        return True

    # --- buckets -------------------------------------------------------------------------------

    def get_bucket(self, name: str) -> Bucket | None:
        return catalog.get_bucket(self._reader, name)

    def list_buckets(self, owner: str | None = None) -> list[Bucket]:
        return catalog.list_buckets(self._reader, owner)

    async def create_bucket(self, name: str, owner: str, region: str) -> Bucket:
        bucket = Bucket(name, owner, region, time.time_ns())

        def commit(conn: sqlite3.Connection) -> tuple[Bucket, list[str]]:
            catalog.create_bucket(conn, bucket)
            return bucket, []

        return await self.writer.run(commit)

    async def delete_bucket(self, name: str) -> None:
        # Its uploads go with it: any number of statements, run off the event loop.
        await self.writer.run(
            lambda c: (None, catalog.delete_bucket(c, name)), long=True, frees=True
        )

    # --- writing objects -----------------------------------------------------------------------

    async def stage(
        self, chunks: AsyncIterable[bytes], observers: Sequence[digest.Digest] = ()
    ) -> StagedBlob:
        """Receive a body: hash it (MD5 plus `observers`), make it durable, return the blob.

        Bodies up to `inline_max` stay in memory and go into the catalog with the object. Larger
        ones are written to tmp/ in batches off the event loop, fsynced and published under
        blobs/. The blob is referenced by nothing until `put_object`; `discard` drops it.
        """
        md5 = digest.md5()
        hashers = [md5, *observers]
        # Chunks are kept as they come and joined once per batch: one copy of each byte.
        batch: list[bytes] = []
        size = 0
        sink: _BlobSink | None = None
        try:
            async for chunk in chunks:
                batch.append(chunk)
                size += len(chunk)
                if size >= BATCH:
                    if sink is None:
                        sink = _BlobSink(self, hashers)
                    await sink.write(b"".join(batch))
                    batch.clear()
                    size = 0
            data = b"".join(batch)
            if sink is None and size <= self.inline_max:
                for h in hashers:
                    h.update(data)
                metrics.MD5_BYTES.inc(len(data))
                return StagedBlob(new_blob_id(), len(data), md5.digest(), data)
            if sink is None:
                sink = _BlobSink(self, hashers)
            size = await sink.finish(data)
            metrics.MD5_BYTES.inc(size)
            return StagedBlob(sink.blob_id, size, md5.digest())
        except BaseException:
            if sink is not None:
                sink.abort()
            raise

    async def discard(self, blob: StagedBlob) -> None:
        """Drop a staged blob that will not be committed (its request failed a check)."""
        if blob.data is None:
            await asyncio.get_running_loop().run_in_executor(
                self.pool, self.files.delete, [blob.id]
            )

    async def put_object(
        self,
        bucket: str,
        key: str,
        blob: StagedBlob,
        attrs: ObjectAttrs,
        condition: WriteCondition | None = None,
    ) -> ObjectInfo:
        """Commit a staged blob as the object `bucket/key`, replacing any previous one."""
        etag = blob.md5.hex()
        obj = ObjectInfo(
            bucket=bucket,
            key=key,
            size=blob.size,
            etag=etag,
            mtime_ns=0,
            attrs=attrs,
            extents=(Extent(blob.id, 0, blob.size),) if blob.size else (),
            content_md5=etag,
        )
        staged = [] if blob.data is not None else [blob.id]

        def commit(conn: sqlite3.Connection) -> tuple[ObjectInfo, list[str]]:
            # The timestamp is taken inside the transaction so that commit order and
            # Last-Modified order agree.
            catalog.check_write(conn, bucket, key, condition)
            final = replace(obj, mtime_ns=time.time_ns())
            return final, catalog.put_object(conn, final, [blob] if blob.size else [])

        return await self.writer.run(commit, staged)

    def check_write(self, bucket: str, key: str, condition: WriteCondition) -> None:
        """An early look at a write condition (it is checked again when the write commits)."""
        catalog.check_write(self._reader, bucket, key, condition)

    async def delete_objects(self, bucket: str, keys: Sequence[str]) -> None:
        await self.writer.run(
            lambda c: (None, catalog.delete_objects(c, bucket, keys)),
            long=len(keys) > LONG,
            frees=True,
        )

    async def copy_object(
        self,
        source: ObjectInfo,
        bucket: str,
        key: str,
        attrs: ObjectAttrs,
        etag: str,
        learnt_md5: str | None = None,
    ) -> ObjectInfo:
        """A new object over the source's extents: metadata only, whatever the size.

        `source` is the version the caller checked (conditions, ETag); if the source changed
        before the commit, SourceChanged is raised and the caller starts again. `learnt_md5`,
        when the caller hashed a multipart source, is remembered on it for the next copy.
        """

        def commit(conn: sqlite3.Connection) -> tuple[ObjectInfo, list[str]]:
            _require_unchanged(conn, source)
            if learnt_md5 is not None:
                catalog.remember_content_md5(conn, source, learnt_md5)
            obj = ObjectInfo(
                bucket=bucket,
                key=key,
                size=source.size,
                etag=etag,
                mtime_ns=time.time_ns(),
                attrs=attrs,
                extents=source.extents,
                content_md5=etag,
            )
            return obj, catalog.put_object(conn, obj)

        return await self.writer.run(commit)

    async def content_md5(
        self, obj: ObjectInfo, start: int = 0, length: int | None = None
    ) -> bytes:
        """The MD5 of (a range of) an object's bytes, read and hashed off the event loop."""
        length = obj.size - start if length is None else length
        reader = ObjectReader(self, obj)
        try:
            reader.open()
        except FileNotFoundError as exc:
            reader.close()
            raise errors.SourceChanged() from exc
        try:
            value = await asyncio.get_running_loop().run_in_executor(
                self.pool, reader.md5, start, length
            )
        finally:
            reader.close()
        metrics.MD5_BYTES.inc(length)
        return value

    # --- multipart uploads ---------------------------------------------------------------------

    async def create_upload(self, bucket: str, key: str, owner: str, attrs: ObjectAttrs) -> Upload:
        upload = Upload(secrets.token_urlsafe(32), bucket, key, time.time_ns(), owner, attrs)

        def commit(conn: sqlite3.Connection) -> tuple[Upload, list[str]]:
            catalog.create_upload(conn, upload)
            return upload, []

        return await self.writer.run(commit)

    def get_upload(self, upload_id: str, bucket: str, key: str) -> Upload:
        return catalog.get_upload(self._reader, upload_id, bucket, key)

    async def upload_part(
        self, upload: Upload, number: int, blob: StagedBlob, checksum: str | None = None
    ) -> Part:
        part = Part(
            upload.id,
            number,
            blob.size,
            blob.md5.hex(),
            0,
            (Extent(blob.id, 0, blob.size),) if blob.size else (),
            checksum,
        )

        def commit(conn: sqlite3.Connection) -> tuple[Part, list[str]]:
            catalog.get_upload(conn, upload.id, upload.bucket, upload.key)  # not aborted
            final = replace(part, mtime_ns=time.time_ns())
            return final, catalog.put_part(conn, final, [blob] if blob.size else [])

        return await self.writer.run(commit, [] if blob.data is not None else [blob.id])

    async def upload_part_copy(
        self,
        upload: Upload,
        number: int,
        source: ObjectInfo,
        start: int,
        length: int,
        etag: str,
        learnt_md5: str | None = None,
    ) -> Part:
        """A part over a slice of the source's extents: the bytes are not copied."""

        def commit(conn: sqlite3.Connection) -> tuple[Part, list[str]]:
            catalog.get_upload(conn, upload.id, upload.bucket, upload.key)
            _require_unchanged(conn, source)
            if learnt_md5 is not None:
                catalog.remember_content_md5(conn, source, learnt_md5)
            part = Part(
                upload.id,
                number,
                length,
                etag,
                time.time_ns(),
                slice_extents(source.extents, start, length),
            )
            return part, catalog.put_part(conn, part)

        return await self.writer.run(commit)

    def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]:
        return catalog.list_parts(self._reader, upload_id, after, limit)

    async def complete_upload(
        self,
        upload_id: str,
        bucket: str,
        key: str,
        chosen: Sequence[tuple[int, str]],
        checksums_of: Callable[[Upload, Sequence[Part]], dict[str, str]],
        condition: WriteCondition | None = None,
    ) -> ObjectInfo:
        """Finish an upload. A retried Complete of an upload that made the current object is
        answered with that object, as AWS does."""

        def commit(conn: sqlite3.Connection) -> tuple[ObjectInfo, list[str]]:
            try:
                upload = catalog.get_upload(conn, upload_id, bucket, key)
            except errors.NoSuchUpload:
                done = catalog.get_object(conn, bucket, key)
                if done is not None and done.upload_id == upload_id:
                    return done, []
                raise
            return catalog.complete_upload(
                conn,
                upload,
                chosen,
                digest.multipart_etag_of_hex,
                time.time_ns(),
                lambda parts: checksums_of(upload, parts),
                condition,
            )

        return await self.writer.run(commit, long=len(chosen) > LONG)

    async def abort_upload(self, upload_id: str, bucket: str, key: str) -> None:
        def commit(conn: sqlite3.Connection) -> tuple[None, list[str]]:
            catalog.get_upload(conn, upload_id, bucket, key)
            return None, catalog.abort_upload(conn, upload_id)

        await self.writer.run(commit, long=True, frees=True)  # any number of parts

    async def list_uploads(
        self,
        bucket: str,
        prefix: str,
        delimiter: str,
        key_marker: str,
        upload_id_marker: str,
        max_uploads: int,
    ) -> UploadsPage:
        return await self._in_pool(
            catalog.list_uploads,
            bucket,
            prefix,
            delimiter,
            key_marker,
            upload_id_marker,
            max_uploads,
        )

    # --- reading objects -----------------------------------------------------------------------

    def head_object(self, bucket: str, key: str) -> ObjectInfo:
        obj = catalog.get_object(self._reader, bucket, key)
        if obj is None:
            catalog.require_bucket(self._reader, bucket)
            raise errors.NoSuchKey(Key=key)
        return obj

    def open_object(self, bucket: str, key: str) -> ObjectReader:
        """Look an object up and open what its bytes need, as one consistent snapshot."""
        for _attempt in range(5):
            obj = self.head_object(bucket, key)
            reader = ObjectReader(self, obj)
            try:
                reader.open()
            except FileNotFoundError:
                # Replaced or deleted between the lookup and the open: look again.
                reader.close()
                continue
            return reader
        raise errors.StoreError("object kept changing while being opened")

    async def list_objects(
        self, bucket: str, prefix: str, delimiter: str, after: str, max_keys: int
    ) -> ListPage:
        return await self._in_pool(catalog.list_objects, bucket, prefix, delimiter, after, max_keys)

    async def _in_pool(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a catalog read (a scan) in the pool, on that thread's own read connection."""

        def run() -> T:
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = catalog.connect(self.catalog_path)
            return fn(conn, *args)

        return await asyncio.get_running_loop().run_in_executor(self.pool, run)


class _BlobSink:
    """A blob file being written: each batch is hashed in one pool thread while it is written
    in another (MD5 and the disk each go at their own speed, not one after the other), in
    order, one batch in flight, while the event loop receives the next batch."""

    def __init__(self, store: Store, hashers: list[digest.Digest]) -> None:
        self.store = store
        self.hashers = hashers
        self.blob_id = new_blob_id()
        self.fd: int | None = None
        self.tmp: Path | None = None
        self.size = 0
        self.pending: list[concurrent.futures.Future[None]] = []

    def _hash(self, data: bytes) -> None:
        for h in self.hashers:
            h.update(data)

    def _write(self, data: bytes) -> None:
        if self.fd is None:
            self.fd, self.tmp = self.store.files.create_tmp()
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        start_writeback(self.fd, self.size, len(data))
        self.size += len(data)

    def _write_and_publish(self, data: bytes) -> None:
        self._write(data)
        assert self.fd is not None and self.tmp is not None
        fd, self.fd = self.fd, None
        self.store.files.publish(fd, self.tmp, self.blob_id)

    async def _settled(self) -> None:
        """Wait for the batch in flight; its failure is raised (and it stays pending, for
        abort to wait on)."""
        for job in self.pending:
            await asyncio.wrap_future(job)
        self.pending = []

    async def write(self, data: bytes) -> None:
        await self._settled()
        pool = self.store.pool
        self.pending = [pool.submit(self._hash, data), pool.submit(self._write, data)]

    async def finish(self, data: bytes) -> int:
        await self._settled()
        pool = self.store.pool
        self.pending = [pool.submit(self._hash, data), pool.submit(self._write_and_publish, data)]
        await self._settled()
        return self.size

    def abort(self) -> None:
        """Remove whatever was written, once the batch in flight (if any) has finished."""
        pending = self.pending

        def cleanup() -> None:
            concurrent.futures.wait(pending)
            if self.tmp is not None:
                self.store.files.discard_tmp(self.fd, self.tmp)
                self.fd = None
            # A publish that completed before the failure leaves a blob nobody references.
            self.store.files.delete([self.blob_id])

        self.store.pool.submit(cleanup)


class ObjectReader:
    """An object's bytes, opened as a snapshot: file blobs stay readable even if the object
    is deleted meanwhile (an open descriptor outlives an unlink)."""

    def __init__(self, store: Store, obj: ObjectInfo) -> None:
        self.store = store
        self.info = obj
        self.inline: dict[str, bytes] = {}
        self.fds: dict[str, int] = {}

    def open(self) -> None:
        blobs = {e.blob for e in self.info.extents}
        if not blobs:
            return
        self.inline = catalog.read_inline(self.store._reader, blobs)
        files = blobs - self.inline.keys()
        if len(files) <= EAGER_OPEN:
            for blob in files:
                self.fds[blob] = self.store.files.open(blob)

    def close(self) -> None:
        fds, self.fds = self.fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)

    def _fd(self, blob: str) -> int:
        fd = self.fds.get(blob)
        if fd is None:
            fd = self.fds[blob] = self.store.files.open(blob)
        return fd

    def inline_bytes(self, start: int, length: int) -> bytes | None:
        """The range's bytes when every one of them is in the catalog (none in a file)."""
        pieces = slice_extents(self.info.extents, start, length)
        if any(p.blob not in self.inline for p in pieces):
            return None
        return b"".join(self.inline[p.blob][p.offset : p.offset + p.length] for p in pieces)

    def single_file(self, start: int, length: int) -> tuple[int, int] | None:
        """(fd, offset) when the range lies within one file blob: it can be sent with sendfile."""
        pieces = slice_extents(self.info.extents, start, length)
        if len(pieces) == 1 and pieces[0].blob not in self.inline:
            return self._fd(pieces[0].blob), pieces[0].offset
        return None

    def _read(self, extent: Extent, offset: int, count: int) -> bytes:
        """Up to `count` bytes of a blob from `offset` (one read: a pool job's worth)."""
        data = self.inline.get(extent.blob)
        if data is not None:
            return data[offset : offset + count]
        try:
            fd = self._fd(extent.blob)
        except FileNotFoundError as exc:
            raise OSError(errno.ENOENT, "blob released during a read") from exc
        piece = os.pread(fd, min(count, READ_CHUNK), offset)
        if not piece:
            raise OSError(errno.EIO, f"blob {extent.blob} is shorter than its extent")
        return piece

    async def chunks(self, start: int, length: int) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        for extent in slice_extents(self.info.extents, start, length):
            offset, count = extent.offset, extent.length
            while count:
                if extent.blob in self.inline:
                    piece = self._read(extent, offset, count)
                else:
                    piece = await loop.run_in_executor(
                        self.store.pool, self._read, extent, offset, count
                    )
                yield piece
                offset += len(piece)
                count -= len(piece)

    def md5(self, start: int, length: int) -> bytes:
        """Hash a range in the calling thread (blocking: run it in the pool)."""
        d = digest.md5()
        for extent in slice_extents(self.info.extents, start, length):
            offset, count = extent.offset, extent.length
            while count:
                piece = self._read(extent, offset, count)
                d.update(piece)
                offset += len(piece)
                count -= len(piece)
        return d.digest()


def _require_unchanged(conn: sqlite3.Connection, source: ObjectInfo) -> None:
    """The source of a copy must still be the version that was checked and hashed."""
    current = catalog.get_object(conn, source.bucket, source.key)
    if current is None:
        raise errors.NoSuchKey(Key=source.key)
    if current.extents != source.extents or current.etag != source.etag:
        raise errors.SourceChanged()
