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
import sqlite3
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

from .. import digest
from . import catalog, errors
from .blobs import BlobFiles, new_blob_id
from .model import Bucket, Extent, ListPage, ObjectAttrs, ObjectInfo, StagedBlob

log = logging.getLogger(__name__)

# Bodies are written and hashed in batches of this size, off the event loop.
BATCH = 1 << 20
# Reads of file blobs for GET.
READ_CHUNK = 1 << 20
# Objects with at most this many distinct blob files have every file opened before the first
# byte is sent: a delete that commits meanwhile cannot pull a blob from under the response.
EAGER_OPEN = 256


class Store:
    def __init__(self, root: Path, *, inline_max: int = 64 * 1024, io_threads: int = 16) -> None:
        self.root = root
        self.inline_max = inline_max
        root.mkdir(parents=True, exist_ok=True)
        self.files = BlobFiles(root)
        self.catalog_path = root / "catalog.sqlite3"
        catalog.initialise(self.catalog_path)
        self.pool = concurrent.futures.ThreadPoolExecutor(io_threads, thread_name_prefix="io")
        self.writer = catalog.CatalogWriter(self.catalog_path, self.files.delete)
        self._reader = catalog.connect(self.catalog_path)
        self._local = threading.local()

    def close(self) -> None:
        self.writer.close()
        self.pool.shutdown(wait=True)
        self._reader.close()

    # --- start-up ------------------------------------------------------------------------------

    def sweep(self) -> tuple[int, int]:
        """Empty tmp/ and remove blob files the catalog does not reference: what a crash left.

        Must run before requests are served (a blob being published is not yet in the catalog).
        Compares one blob directory at a time with a range of catalog ids: bounded memory.
        Returns (tmp entries removed, orphan blob files removed).
        """
        tmp = self.files.empty_tmp()
        orphans = 0
        conn = self._reader
        for prefix, entries in self.files.walk():
            hi = format(int(prefix, 16) + 1, "04x")
            known = {
                row[0]
                for row in conn.execute(
                    "SELECT id FROM blobs WHERE id >= ? AND id < ? AND data IS NULL", (prefix, hi)
                )
            }
            stale = [e.name for e in entries if e.name not in known]
            self.files.delete(stale)
            orphans += len(stale)
        return tmp, orphans

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
        await self.writer.run(lambda c: (catalog.delete_bucket(c, name), []))

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
        buf = bytearray()
        sink: _BlobSink | None = None
        try:
            async for chunk in chunks:
                buf += chunk
                if len(buf) >= BATCH:
                    if sink is None:
                        sink = _BlobSink(self, hashers)
                    await sink.write(bytes(buf))
                    buf.clear()
            if sink is None and len(buf) <= self.inline_max:
                data = bytes(buf)
                for h in hashers:
                    h.update(data)
                return StagedBlob(new_blob_id(), len(data), md5.digest(), data)
            if sink is None:
                sink = _BlobSink(self, hashers)
            size = await sink.finish(bytes(buf))
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
        self, bucket: str, key: str, blob: StagedBlob, attrs: ObjectAttrs
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
            final = replace(obj, mtime_ns=time.time_ns())
            return final, catalog.put_object(conn, final, [blob] if blob.size else [])

        return await self.writer.run(commit, staged)

    async def delete_objects(self, bucket: str, keys: Sequence[str]) -> None:
        await self.writer.run(lambda c: (None, catalog.delete_objects(c, bucket, keys)))

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
        return await asyncio.get_running_loop().run_in_executor(
            self.pool, self._list_objects, bucket, prefix, delimiter, after, max_keys
        )

    def _list_objects(
        self, bucket: str, prefix: str, delimiter: str, after: str, max_keys: int
    ) -> ListPage:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = catalog.connect(self.catalog_path)
        return catalog.list_objects(conn, bucket, prefix, delimiter, after, max_keys)


class _BlobSink:
    """A blob file being written: batches are hashed and written in the pool, one at a time
    and in order, while the event loop receives the next batch."""

    def __init__(self, store: Store, hashers: list[digest.Digest]) -> None:
        self.store = store
        self.hashers = hashers
        self.blob_id = new_blob_id()
        self.fd: int | None = None
        self.tmp: Path | None = None
        self.size = 0
        self.pending: concurrent.futures.Future[None] | None = None

    def _write(self, data: bytes) -> None:
        if self.fd is None:
            self.fd, self.tmp = self.store.files.create_tmp()
        for h in self.hashers:
            h.update(data)
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.size += len(data)

    async def write(self, data: bytes) -> None:
        if self.pending is not None:
            await asyncio.wrap_future(self.pending)
        self.pending = self.store.pool.submit(self._write, data)

    def _finish(self, data: bytes) -> int:
        self._write(data)
        assert self.fd is not None and self.tmp is not None
        fd, self.fd = self.fd, None
        self.store.files.publish(fd, self.tmp, self.blob_id)
        return self.size

    async def finish(self, data: bytes) -> int:
        if self.pending is not None:
            await asyncio.wrap_future(self.pending)
        self.pending = self.store.pool.submit(self._finish, data)
        return await asyncio.wrap_future(self.pending)

    def abort(self) -> None:
        """Remove whatever was written, once the batch in flight (if any) has finished."""
        pending = self.pending

        def cleanup() -> None:
            if pending is not None:
                concurrent.futures.wait([pending])
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

    def spans(self, start: int, length: int) -> list[tuple[Extent, int, int]]:
        """(extent, offset in blob, byte count) for each extent piece the range covers."""
        out: list[tuple[Extent, int, int]] = []
        pos = 0
        end = start + length
        for e in self.info.extents:
            lo, hi = max(start, pos), min(end, pos + e.length)
            if lo < hi:
                out.append((e, e.offset + lo - pos, hi - lo))
            pos += e.length
            if pos >= end:
                break
        return out

    def single_file(self, start: int, length: int) -> tuple[int, int] | None:
        """(fd, offset) when the range lies within one file blob: it can be sent with sendfile."""
        spans = self.spans(start, length)
        if len(spans) == 1 and spans[0][0].blob not in self.inline:
            extent, offset, _ = spans[0]
            return self._fd(extent.blob), offset
        return None

    async def chunks(self, start: int, length: int) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        for extent, offset, count in self.spans(start, length):
            data = self.inline.get(extent.blob)
            if data is not None:
                yield data[offset : offset + count]
                continue
            try:
                fd = self._fd(extent.blob)
            except FileNotFoundError as exc:
                raise OSError(errno.ENOENT, "blob released during a read") from exc
            while count:
                piece = await loop.run_in_executor(
                    self.store.pool, os.pread, fd, min(count, READ_CHUNK), offset
                )
                if not piece:
                    raise OSError(errno.EIO, f"blob {extent.blob} is shorter than its extent")
                yield piece
                offset += len(piece)
                count -= len(piece)
