"""An object's bytes for GET, ranged GET and the hashing of copy sources."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import errno
from collections.abc import AsyncIterator, Callable, Mapping
from typing import BinaryIO

from .. import digest
from .api import BlobStore, CatalogReader, OpenBlob
from .crypto import CHUNK, SEALED_CHUNK, DataKey
from .model import Extent, ObjectInfo, slice_extents

# Reads of file blobs for GET.
READ_CHUNK = 1 << 20
# Objects with at most this many distinct blob files have every file opened before the first
# byte is sent: a delete that commits meanwhile cannot pull a blob from under the response.
EAGER_OPEN = 256


class ObjectReader:
    """An object's bytes, opened as a snapshot: blobs stay readable even if the object is
    deleted meanwhile (an open blob outlives its release)."""

    def __init__(
        self,
        catalog: CatalogReader,
        blobs: BlobStore,
        obj: ObjectInfo,
        keys: Callable[[str], DataKey] | None = None,
        pool: concurrent.futures.Executor | None = None,
        known: Mapping[str, bytes | None] | None = None,
    ) -> None:
        """`keys` opens the sealed data keys of an encrypted object's extents (crypto.WrongKey
        when it cannot); `pool` decrypts. `known`: what the lookup read of the blobs already
        (CatalogReader.get_object_inline), not read again."""
        self.catalog = catalog
        self.blobs = blobs
        self.info = obj
        self.inline: dict[str, bytes] = {}
        self.opened: dict[str, OpenBlob] = {}
        self.keys = keys
        self.pool = pool
        self.data_keys: dict[str, DataKey] = {}
        self.known = known or {}

    def _data_key(self, extent: Extent) -> DataKey:
        assert extent.key is not None and self.keys is not None
        key = self.data_keys.get(extent.key)
        if key is None:
            key = self.data_keys[extent.key] = self.keys(extent.key)
        return key

    async def open(self) -> None:
        """Read the inline bytes and open the blobs (FileNotFoundError if one is gone)."""
        blobs = {e.blob for e in self.info.extents}
        if not blobs:
            return
        self.inline = {b: data for b, data in self.known.items() if data is not None}
        unknown = blobs - self.known.keys()
        if unknown:
            self.inline.update(await self.catalog.read_inline(unknown))
        for extent in self.info.extents:
            if extent.key is not None and extent.blob in self.inline:
                # Inline ciphertext is at most --inline-max bytes: decrypted whole, once.
                sealed = self.inline.pop(extent.blob)
                self.inline[extent.blob] = self._data_key(extent).open(sealed, 0)
        files = blobs - self.inline.keys()
        if len(files) <= EAGER_OPEN:
            for blob in files:
                self.opened[blob] = await self.blobs.open(blob)

    def close(self) -> None:
        opened, self.opened = self.opened, {}
        for blob in opened.values():
            blob.close()

    async def _blob(self, blob_id: str) -> OpenBlob:
        blob = self.opened.get(blob_id)
        if blob is None:
            try:
                blob = self.opened[blob_id] = await self.blobs.open(blob_id)
            except FileNotFoundError as exc:
                raise OSError(errno.ENOENT, "blob released during a read") from exc
        return blob

    def inline_bytes(self, start: int, length: int) -> bytes | None:
        """The range's bytes when every one of them is in the catalog (none in a file)."""
        pieces = slice_extents(self.info.extents, start, length)
        if any(p.blob not in self.inline for p in pieces):
            return None
        return b"".join(self.inline[p.blob][p.offset : p.offset + p.length] for p in pieces)

    async def single_file(self, start: int, length: int) -> tuple[BinaryIO, int] | None:
        """(a file of its own, offset) when the range lies within one blob that has a file: it
        can be sent with sendfile. The caller closes the file."""
        pieces = slice_extents(self.info.extents, start, length)
        if len(pieces) != 1 or pieces[0].blob in self.inline or pieces[0].key is not None:
            return None  # sendfile would send ciphertext
        f = (await self._blob(pieces[0].blob)).file()
        return None if f is None else (f, pieces[0].offset)

    async def chunks(self, start: int, length: int) -> AsyncIterator[bytes]:
        for extent in slice_extents(self.info.extents, start, length):
            offset, count = extent.offset, extent.length
            data = self.inline.get(extent.blob)
            if data is not None:
                yield data[offset : offset + count]
                continue
            blob = await self._blob(extent.blob)
            if extent.key is not None:
                async for piece in decrypted(blob, extent, self._data_key(extent), self.pool):
                    yield piece
                continue
            if blob.file() is None:  # a blob tier's object: each read a round trip
                async for piece in read_ahead(blob, offset, count):
                    yield piece
                continue
            while count:
                piece = await blob.read(offset, min(count, READ_CHUNK))
                yield piece
                offset += len(piece)
                count -= len(piece)

    async def md5(self, start: int, length: int, pool: concurrent.futures.Executor) -> bytes:
        """The MD5 of a range, each piece hashed in `pool` while the next is read."""
        d = digest.md5()
        loop = asyncio.get_running_loop()
        hashing: asyncio.Future[None] | None = None
        async for piece in self.chunks(start, length):
            if hashing is not None:
                await hashing
            hashing = loop.run_in_executor(pool, d.update, piece)
        if hashing is not None:
            await hashing
        return d.digest()


# Reads of a blob without a local file (the S3 tier: a ranged GET each) under way ahead of the
# piece being sent, so that the round trips overlap instead of adding up.
READ_AHEAD = 4


async def read_ahead(blob: OpenBlob, offset: int, count: int) -> AsyncIterator[bytes]:
    """The bytes of [offset, offset + count) of `blob`, READ_CHUNK at a time, up to
    READ_AHEAD reads ahead of the piece given."""
    starts = iter(range(offset, offset + count, READ_CHUNK))
    end = offset + count
    ahead: collections.deque[tuple[int, asyncio.Future[bytes]]] = collections.deque()

    def more() -> None:
        start = next(starts, None)
        if start is not None:
            future = asyncio.ensure_future(blob.read(start, min(READ_CHUNK, end - start)))
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            ahead.append((start, future))

    try:
        for _ in range(READ_AHEAD):
            more()
        while ahead:
            start, pending = ahead.popleft()
            piece = await pending
            more()
            if len(piece) < min(READ_CHUNK, end - start):
                raise OSError(errno.EIO, "a blob is shorter than its extent")
            yield piece
    finally:
        # A reader that stops early (a client gone) starts no more reads.
        for _, pending in ahead:
            pending.cancel()


# Pieces of an encrypted extent read and decrypted ahead of the one being sent: the pool's
# threads open them in parallel (AES-GCM releases the GIL) while the loop sends the last.
DECRYPT_AHEAD = 3


async def decrypted(
    blob: OpenBlob, extent: Extent, key: DataKey, pool: concurrent.futures.Executor | None
) -> AsyncIterator[bytes]:
    """The plaintext of an encrypted extent: only the chunks it touches are read and
    decrypted, READ_CHUNK of plaintext at a time, in `pool`, up to DECRYPT_AHEAD pieces ahead
    of the one given (crypto.Tampered if one fails its tag)."""
    loop = asyncio.get_running_loop()
    first = extent.offset // CHUNK
    end = extent.offset + extent.length
    last = (end - 1) // CHUNK
    per_read = READ_CHUNK // CHUNK

    async def piece(index: int, count: int) -> bytes:
        sealed = await blob.read(index * SEALED_CHUNK, count * SEALED_CHUNK)
        return await loop.run_in_executor(pool, key.open, sealed, index)

    starts = iter(range(first, last + 1, per_read))
    ahead: collections.deque[tuple[int, int, asyncio.Future[bytes]]] = collections.deque()

    def more() -> None:
        index = next(starts, None)
        if index is not None:
            count = min(per_read, last + 1 - index)
            future = asyncio.ensure_future(piece(index, count))
            # A piece never awaited (the reader stopped early) leaves its failure unreported.
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            ahead.append((index, count, future))

    try:
        for _ in range(DECRYPT_AHEAD):
            more()
        while ahead:
            index, count, pending = ahead.popleft()
            plain = await pending
            more()
            base = index * CHUNK
            lo = max(extent.offset, base) - base
            hi = min(end, base + len(plain)) - base
            if hi < min(end, base + count * CHUNK) - base:
                raise OSError(errno.EIO, "an encrypted blob is shorter than its extent")
            yield plain[lo:hi]
    finally:
        # A reader that stops early (a client gone) starts no more reads or decryptions.
        for _, _, pending in ahead:
            pending.cancel()
