"""An object's bytes for GET, ranged GET and the hashing of copy sources."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
from collections.abc import AsyncIterator
from typing import BinaryIO

from .. import digest
from .api import BlobStore, CatalogReader, OpenBlob
from .model import ObjectInfo, slice_extents

# Reads of file blobs for GET.
READ_CHUNK = 1 << 20
# Objects with at most this many distinct blob files have every file opened before the first
# byte is sent: a delete that commits meanwhile cannot pull a blob from under the response.
EAGER_OPEN = 256


class ObjectReader:
    """An object's bytes, opened as a snapshot: blobs stay readable even if the object is
    deleted meanwhile (an open blob outlives its release)."""

    def __init__(self, catalog: CatalogReader, blobs: BlobStore, obj: ObjectInfo) -> None:
        self.catalog = catalog
        self.blobs = blobs
        self.info = obj
        self.inline: dict[str, bytes] = {}
        self.opened: dict[str, OpenBlob] = {}

    async def open(self) -> None:
        """Read the inline bytes and open the blobs (FileNotFoundError if one is gone)."""
        blobs = {e.blob for e in self.info.extents}
        if not blobs:
            return
        self.inline = await self.catalog.read_inline(blobs)
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
        if len(pieces) != 1 or pieces[0].blob in self.inline:
            return None
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
