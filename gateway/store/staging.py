"""Receiving a body: hashed and made durable in batches, never on the event loop.

A body of at most `inline_max` bytes stays in memory and goes into the catalog with its object
(one fsync fewer per small PUT). A larger one is coalesced into BATCH-sized batches: each is
hashed in one pool thread while the BlobStore writes it (MD5 and the disk each at their own
speed, not one after the other), one batch in flight while the event loop receives the next.
A body that gets a file gets an intent in the catalog first (intents.py), renewed as it comes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterable, Awaitable, Sequence

from .. import digest, metrics
from . import errors
from .api import BlobStore
from .blobs import new_blob_id
from .crypto import CHUNK, Encryption
from .intents import Intent, Intents
from .model import StagedBlob

BATCH = 1 << 20


class _File:
    """The file of a body too large to keep inline, and its intent."""

    def __init__(self, blobs: BlobStore, intents: Intents | None) -> None:
        self.writer = blobs.writer()
        self.blob_id = self.writer.blob_id
        self.intent: Intent | None = None if intents is None else intents.begin(self.blob_id)

    def append(self, data: bytes) -> Awaitable[None]:
        return self.writer.append(data)

    def keep(self) -> None:
        if self.intent is not None:
            self.intent.keep()

    async def publish(self, last: bytes) -> None:
        """Make the file durable and publish it, once its intent is sure to be there."""
        try:
            await self.writer.publish(last, None if self.intent is None else self.intent.ready)
        except FileNotFoundError as exc:
            # A reclaimer took the body: its intent had lapsed (intents.py).
            raise errors.IntentLost(errors.INTENT_LOST) from exc

    def abort(self) -> None:
        self.writer.abort()
        if self.intent is not None:
            self.intent.abandon()


async def stage(
    chunks: AsyncIterable[bytes],
    blobs: BlobStore,
    pool: concurrent.futures.Executor,
    inline_max: int,
    observers: Sequence[digest.Digest] = (),
    encryption: Encryption | None = None,
    intents: Intents | None = None,
) -> StagedBlob:
    """Receive a body: hash it (MD5 plus `observers`), make it durable, return the blob. The
    blob is referenced by nothing until a commit takes it; on failure nothing is left.

    With `encryption`, the blob gets a new data key and every byte is encrypted before it is
    written or kept inline (docs/encryption.md): batches are cut at chunk boundaries, and
    a batch's chunks are sealed in the pool while the next batch is received.

    `intents`: where a body that needs a file records its intent before the file is published
    (None: nothing shares the folder, as in tests of the files alone)."""
    if encryption is not None:
        return await _stage_encrypted(
            chunks, blobs, pool, inline_max, observers, encryption, intents
        )
    md5 = digest.md5()
    hashers = [md5, *observers]

    def hash_batch(data: bytes) -> None:
        for h in hashers:
            h.update(data)

    # Chunks are kept as they come and joined once per batch: one copy of each byte.
    batch: list[bytes] = []
    size = total = 0
    writer: _File | None = None
    in_flight: list[Awaitable[None]] = []
    loop = asyncio.get_running_loop()
    try:
        async for chunk in chunks:
            batch.append(chunk)
            size += len(chunk)
            if writer is not None:
                writer.keep()
            if size >= BATCH:
                data = b"".join(batch)
                batch.clear()
                total, size = total + size, 0
                if writer is None:
                    writer = _File(blobs, intents)
                for job in in_flight:
                    await job
                in_flight = [loop.run_in_executor(pool, hash_batch, data), writer.append(data)]
        data = b"".join(batch)
        if writer is None and size <= inline_max:
            hash_batch(data)
            metrics.MD5_BYTES.inc(size)
            return StagedBlob(new_blob_id(), size, md5.digest(), data)
        if writer is None:
            writer = _File(blobs, intents)
        for job in in_flight:
            await job
        hashed = loop.run_in_executor(pool, hash_batch, data)
        await writer.publish(data)
        await hashed
        total += size
        metrics.MD5_BYTES.inc(total)
        return StagedBlob(writer.blob_id, total, md5.digest())
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


async def _stage_encrypted(
    chunks: AsyncIterable[bytes],
    blobs: BlobStore,
    pool: concurrent.futures.Executor,
    inline_max: int,
    observers: Sequence[digest.Digest],
    encryption: Encryption,
    intents: Intents | None,
) -> StagedBlob:
    md5 = digest.md5()
    hashers = [md5, *observers]
    data_key, sealed = encryption.new_key()
    loop = asyncio.get_running_loop()
    batch: list[bytes] = []
    size = total = 0
    index = 0  # the next chunk's index in the blob
    writer: _File | None = None
    # A batch is hashed and encrypted by two pool threads at once (both let the GIL go,
    # crypto.OpenSSLGcm), while the batch before it is written and the loop receives the next.
    hashing: asyncio.Future[None] | None = None
    sealing: asyncio.Future[bytes] | None = None
    writing: Awaitable[None] | None = None

    def hash_batch(data: bytes | memoryview) -> None:
        for h in hashers:
            h.update(data)

    async def write_sealed() -> None:
        """Hand the batch sealed last to the writer, once the one before it is written, and
        let its hash finish (MD5 takes its batches in order)."""
        nonlocal hashing, sealing, writing
        assert writer is not None
        if sealing is None:
            return
        ciphertext = await sealing
        sealing = None
        if writing is not None:
            await writing
        writing = writer.append(ciphertext)
        if hashing is not None:
            await hashing
            hashing = None

    try:
        async for chunk in chunks:
            batch.append(chunk)
            size += len(chunk)
            if writer is not None:
                writer.keep()
            if size >= BATCH:
                data = b"".join(batch)
                cut = len(data) - len(data) % CHUNK  # whole chunks now, the rest later
                batch = [data[cut:]] if cut < len(data) else []
                size = len(data) - cut
                if writer is None:
                    writer = _File(blobs, intents)
                await write_sealed()
                whole = memoryview(data)[:cut]
                hashing = loop.run_in_executor(pool, hash_batch, whole)
                sealing = loop.run_in_executor(pool, data_key.seal, whole, index)
                index += cut // CHUNK
                total += cut
        data = b"".join(batch)
        if writer is None and size <= inline_max:
            hash_batch(data)
            ciphertext = data_key.seal(data, 0)
            metrics.MD5_BYTES.inc(size)
            return StagedBlob(new_blob_id(), size, md5.digest(), ciphertext, sealed)
        if writer is None:
            writer = _File(blobs, intents)
        await write_sealed()
        hashing = loop.run_in_executor(pool, hash_batch, data)
        last = await loop.run_in_executor(pool, data_key.seal, data, index)
        await hashing
        if writing is not None:
            await writing
            writing = None
        await writer.publish(last)
        total += size
        metrics.MD5_BYTES.inc(total)
        return StagedBlob(writer.blob_id, total, md5.digest(), None, sealed)
    except BaseException:
        # The writer's abort waits for a write in progress; a hash or seal in progress writes
        # nothing.
        if writer is not None:
            writer.abort()
        raise
