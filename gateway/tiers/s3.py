"""The BlobStore on S3: each blob one object of a bucket below (SeaweedFS, Ceph RGW, a cloud's
S3), written once and never changed, read by ranges.

Layout: PREFIX/blobs/<id[:2]>/<id>, and PREFIX/catalog-id (the catalog these blobs are
paired with, store.paired). A blob is buffered up to PART_SIZE: a smaller one goes in one
PUT, a larger one as a multipart upload below, a part at a time (memory: one part per body).
The object appears under its id only at that PUT or at Complete, after the blob's intent is
recorded (intents.py), so the rules of the file adapter hold unchanged:

- what the file adapter keeps under tmp/ (a body being received) is here a multipart upload in
  progress: `old_files(None, …)`, `leftovers` and `forget` find and abort those;
- a blob object that no blob or intent names and that is older than the lease is an orphan,
  looked through one folder (`PREFIX/blobs/ab/`) per reclaimer round;
- `retire` takes nothing out of reach by itself (S3 has no cheap rename): `purge` deletes, after
  the commit that released the blob. A blob this process is still reading is deleted when its
  last reader closes: a GET under way here keeps its bytes, as with files. (A reader on
  another node may lose them: docs/scaling.md.)
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from ..store import errors
from ..store.blobs import new_blob_id
from .client import S3Client, S3Failed, Target, children, text

log = logging.getLogger(__name__)

# A part of a blob's multipart upload below (S3's least is 5 MiB, but for the last part).
PART_SIZE = 8 << 20
# Requests at once when deleting or aborting many.
FANOUT = 16

Buffers = bytes | memoryview | Sequence[bytes | memoryview]


@dataclass(frozen=True)
class Found:
    """api.Stray: an object below (upload_id None) or a multipart upload in progress."""

    name: str
    key: str
    upload_id: str | None = None


def _stamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class S3Blobs:
    """api.BlobStore on a bucket of an S3 store."""

    def __init__(self, target: Target) -> None:
        self.client = S3Client(target)
        self.root = f"{target.prefix}blobs/"
        self.id_key = f"{target.prefix}catalog-id"
        self._reading: Counter[str] = Counter()  # blob id -> readers open in this process
        self._doomed: set[str] = set()  # released while read: deleted at the last close
        self._background: set[asyncio.Future[Any]] = set()

    def key(self, blob_id: str) -> str:
        return f"{self.root}{blob_id[:2]}/{blob_id}"

    def close(self) -> None:
        self.client.close()

    def _later(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)

        def done(t: asyncio.Future[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("blob tier: background work failed: %s", t.exception())

        task.add_done_callback(done)

    async def _each(self, fn: Callable[[Any], Awaitable[None]], items: Iterable[Any]) -> None:
        """`fn` over `items`, FANOUT at a time."""
        gate = asyncio.Semaphore(FANOUT)

        async def one(item: Any) -> None:
            async with gate:
                await fn(item)

        await asyncio.gather(*(one(i) for i in items))

    # --- writing -------------------------------------------------------------------------------

    def writer(self) -> S3Writer:
        return S3Writer(self, new_blob_id())

    async def writable(self) -> bool:
        try:
            await self.client.call("HEAD", what="the blob bucket")
        except OSError:
            return False
        return True

    async def catalog_id(self, proposed: str | None) -> str | None:
        try:
            found = await self.client.call("GET", self.id_key, what="catalog-id")
            value = found.body.decode().strip()
            if not value:
                raise errors.StoreError(f"{self.id_key} is empty: it should name the catalog")
            return value
        except S3Failed as exc:
            if exc.status != 404:
                raise
        if proposed is None:
            return None
        # If-None-Match: of two claims at once exactly one lands (a store that ignores the
        # header lets the last one land: both then read the same id back).
        try:
            await self.client.call(
                "PUT",
                self.id_key,
                headers={"If-None-Match": "*"},
                body=f"{proposed}\n".encode(),
                what="catalog-id",
            )
        except S3Failed as exc:
            if exc.status not in (409, 412):
                raise
        return await self.catalog_id(None)

    # --- freeing -------------------------------------------------------------------------------

    async def delete(self, blob_ids: Iterable[str]) -> None:
        await self.purge(await self.retire(blob_ids))

    async def retire(self, blob_ids: Iterable[str]) -> list[str]:
        return list(blob_ids)

    async def purge(self, retired: Iterable[object]) -> None:
        now = []
        for blob_id in retired:
            assert isinstance(blob_id, str)
            if self._reading[blob_id]:
                self._doomed.add(blob_id)
            else:
                now.append(blob_id)
        await self._each(self._delete_object, [self.key(b) for b in now])

    async def _delete_object(self, key: str) -> None:
        await self.client.call("DELETE", key, ok=(200, 204, 404), what="delete a blob")

    # --- reading -------------------------------------------------------------------------------

    async def open(self, blob_id: str) -> S3Open:
        try:
            head = await self.client.call("HEAD", self.key(blob_id), what="open a blob")
        except S3Failed as exc:
            if exc.status == 404:
                raise FileNotFoundError(errno.ENOENT, "no such blob", blob_id) from None
            raise
        self._reading[blob_id] += 1
        return S3Open(self, blob_id, int(head.headers.get("Content-Length", "0")))

    def _closed(self, blob_id: str) -> None:
        self._reading[blob_id] -= 1
        if self._reading[blob_id] <= 0:
            del self._reading[blob_id]
            if blob_id in self._doomed:
                self._doomed.discard(blob_id)
                self._later(self._delete_object(self.key(blob_id)))

    # --- listing -------------------------------------------------------------------------------

    async def _list(
        self, prefix: str, delimiter: str = ""
    ) -> AsyncIterator[tuple[list[tuple[str, float]], list[str]]]:
        """Pages of ListObjectsV2: ((key, modified), …) and common prefixes."""
        token = ""
        while True:
            query = [("list-type", "2"), ("prefix", prefix), ("max-keys", "1000")]
            if delimiter:
                query.append(("delimiter", delimiter))
            if token:
                query.append(("continuation-token", token))
            page = (await self.client.call("GET", query=query, what="list blobs")).xml()
            objects = [
                (text(c, "Key"), _stamp(text(c, "LastModified")))
                for c in children(page, "Contents")
            ]
            prefixes = [text(p, "Prefix") for p in children(page, "CommonPrefixes")]
            yield objects, prefixes
            token = text(page, "NextContinuationToken")
            if text(page, "IsTruncated") != "true" or not token:
                return

    async def _uploads(self, prefix: str) -> list[tuple[str, str, float]]:
        """Multipart uploads in progress below `prefix`: (key, upload id, initiated)."""
        found = []
        key_marker = upload_marker = ""
        while True:
            query = [("uploads", ""), ("prefix", prefix)]
            if key_marker:
                query += [("key-marker", key_marker), ("upload-id-marker", upload_marker)]
            page = (await self.client.call("GET", query=query, what="list uploads")).xml()
            for u in children(page, "Upload"):
                found.append((text(u, "Key"), text(u, "UploadId"), _stamp(text(u, "Initiated"))))
            key_marker = text(page, "NextKeyMarker")
            upload_marker = text(page, "NextUploadIdMarker")
            if text(page, "IsTruncated") != "true" or not key_marker:
                return found

    def _name(self, key: str) -> str:
        return key.rpartition("/")[2]

    async def walk(self) -> AsyncIterator[list[Found]]:
        """The blob objects, a listing page (at most 1000) at a time."""
        async for objects, _ in self._list(self.root):
            found = [Found(self._name(k), k) for k, _ in objects]
            if found:
                yield found

    async def remove(self, found: Iterable[Found]) -> None:
        await self._each(self._remove_one, list(found))

    async def _remove_one(self, item: Found) -> None:
        if item.upload_id is None:
            await self._delete_object(item.key)
        else:
            await self._abort(item.key, item.upload_id)

    async def _abort(self, key: str, upload_id: str) -> None:
        await self.client.call(
            "DELETE", key, [("uploadId", upload_id)], ok=(200, 204, 404), what="abort an upload"
        )

    # --- reclaiming while gateways serve (intents.py) ------------------------------------------

    async def folders(self) -> list[str]:
        found: list[str] = []
        async for _, prefixes in self._list(self.root, "/"):
            found += [p[len(self.root) :].rstrip("/") for p in prefixes]
        return sorted(found)

    async def old_files(self, folder: str | None, age: float) -> list[Found]:
        """Blob objects of `folder` not written for `age` seconds; with None, multipart uploads
        begun that long ago (bodies being received, or left by a writer that died)."""
        cutoff = time.time() - age
        if folder is None:
            return [
                Found(self._name(key), key, upload_id)
                for key, upload_id, initiated in await self._uploads(self.root)
                if initiated < cutoff
            ]
        out = []
        async for objects, _ in self._list(f"{self.root}{folder}/"):
            out += [Found(self._name(k), k) for k, modified in objects if modified < cutoff]
        return out

    async def forget(self, blob_ids: Iterable[str]) -> None:
        """The upload in progress first, then the object: a writer that completes between the
        two loses its object to the second; one that completes after both finds no upload
        (FileNotFoundError at publish). Its commit fails either way: its intent is gone."""

        async def one(blob_id: str) -> None:
            key = self.key(blob_id)
            for found_key, upload_id, _ in await self._uploads(key):
                if found_key == key:
                    await self._abort(key, upload_id)
            await self._delete_object(key)

        await self._each(one, list(blob_ids))

    async def leftovers(self) -> list[str]:
        """Multipart uploads in progress (no freed blob waits here: purge deletes at once)."""
        return sorted(f"{self._name(k)} (upload {u})" for k, u, _ in await self._uploads(self.root))

    async def empty_leftovers(self) -> int:
        uploads = await self._uploads(self.root)
        await self._each(lambda u: self._abort(u[0], u[1]), uploads)
        return len(uploads)


class S3Writer:
    """api.BlobWriter: bytes gathered into parts; one PUT for a blob of at most PART_SIZE,
    else a multipart upload below, completed at publish."""

    def __init__(self, blobs: S3Blobs, blob_id: str) -> None:
        self.blobs = blobs
        self.client = blobs.client
        self.blob_id = blob_id
        self.key = blobs.key(blob_id)
        self.buffer = bytearray()
        self.upload_id: str | None = None
        self.parts: list[tuple[int, str]] = []
        self.published = False
        self._busy: asyncio.Future[None] | None = None
        self._aborted = False

    def append(self, data: Buffers) -> asyncio.Future[None]:
        self._busy = asyncio.ensure_future(self._append(data))
        return self._busy

    async def _append(self, data: Buffers) -> None:
        if self._aborted:
            raise OSError(errno.ECANCELED, "the blob was aborted")
        for piece in [data] if isinstance(data, bytes | memoryview) else data:
            self.buffer += piece
        while len(self.buffer) >= PART_SIZE:
            await self._send_part(PART_SIZE)

    async def _send_part(self, size: int) -> None:
        try:
            if self.upload_id is None:
                begun = await self.client.call(
                    "POST", self.key, [("uploads", "")], what="begin a blob's upload"
                )
                self.upload_id = text(begun.xml(), "UploadId")
            number = len(self.parts) + 1
            answer = await self.client.call(
                "PUT",
                self.key,
                [("partNumber", str(number)), ("uploadId", self.upload_id)],
                body=bytes(self.buffer[:size]),
                what="a part of a blob",
            )
        except S3Failed as exc:
            if exc.code == "NoSuchUpload" or exc.status == 404:
                # A reclaimer aborted it: the blob's intent lapsed (intents.py).
                raise errors.IntentLost(errors.INTENT_LOST) from exc
            raise
        self.parts.append((number, answer.headers.get("ETag", "")))
        del self.buffer[:size]

    async def publish(
        self, last: Buffers = b"", ready: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        await self._append(last)
        if ready is not None:
            await ready()
        if self._aborted:
            raise OSError(errno.ECANCELED, "the blob was aborted")
        if self.upload_id is None:
            await self.client.call("PUT", self.key, body=self.buffer, what="a blob")
        else:
            if self.buffer:
                try:
                    await self._send_part(len(self.buffer))
                except errors.IntentLost as exc:
                    raise FileNotFoundError(errno.ENOENT, "the blob's upload is gone") from exc
            document = "".join(
                f"<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
                for n, etag in self.parts
            )
            try:
                done = await self.client.call(
                    "POST",
                    self.key,
                    [("uploadId", self.upload_id)],
                    body=f"<CompleteMultipartUpload>{document}</CompleteMultipartUpload>".encode(),
                    what="complete a blob's upload",
                )
            except S3Failed as exc:
                if exc.code == "NoSuchUpload" or exc.status == 404:
                    raise FileNotFoundError(errno.ENOENT, "the blob's upload is gone") from exc
                raise
            # Complete may answer 200 with an error in its body.
            if b"<Error>" in done.body[:200]:
                raise OSError(errno.EIO, f"completing a blob's upload failed: {done.body[:200]!r}")
        self.published = True
        self.buffer = bytearray()

    def abort(self) -> None:
        self._aborted = True
        busy = self._busy

        async def cleanup() -> None:
            if busy is not None:
                await asyncio.wait([busy])
            self.buffer = bytearray()
            if self.upload_id is not None:
                await self.blobs._abort(self.key, self.upload_id)
            # A publish that completed before the failure leaves a blob nobody references.
            await self.blobs._delete_object(self.key)

        self.blobs._later(cleanup())


class S3Open:
    """api.OpenBlob on an object below: each read is a ranged GET."""

    def __init__(self, blobs: S3Blobs, blob_id: str, size: int) -> None:
        self.blobs = blobs
        self.blob_id = blob_id
        self._size = size
        self._open = True

    async def read(self, offset: int, count: int) -> bytes:
        if offset >= self._size or count <= 0:
            raise OSError(errno.EIO, "a blob is shorter than its extent")
        end = min(offset + count, self._size) - 1
        try:
            answer = await self.blobs.client.call(
                "GET",
                self.blobs.key(self.blob_id),
                headers={"Range": f"bytes={offset}-{end}"},
                what="read a blob",
            )
        except S3Failed as exc:
            raise OSError(errno.EIO, f"reading a blob failed: {exc}") from exc
        if not answer.body:
            raise OSError(errno.EIO, "a blob is shorter than its extent")
        return answer.body

    def size(self) -> int:
        return self._size

    def file(self) -> BinaryIO | None:
        return None  # no file to sendfile: the response streams the reads

    def close(self) -> None:
        if self._open:
            self._open = False
            self.blobs._closed(self.blob_id)
