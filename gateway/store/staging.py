"""Receiving a body: hashed and made durable in batches, never on the event loop.

A body of at most `inline_max` bytes stays in memory and goes into the catalog with its object
(one fsync fewer per small PUT). A larger one is coalesced into BATCH-sized batches: each is
hashed in one pool thread while the BlobStore writes it (MD5 and the disk each at their own
speed, not one after the other), one batch in flight while the event loop receives the next.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterable, Awaitable, Sequence

from .. import digest, metrics
from .api import BlobStore, BlobWriter
from .blobs import new_blob_id
from .model import StagedBlob

BATCH = 1 << 20


async def stage(
    chunks: AsyncIterable[bytes],
    blobs: BlobStore,
    pool: concurrent.futures.Executor,
    inline_max: int,
    observers: Sequence[digest.Digest] = (),
) -> StagedBlob:
    """Receive a body: hash it (MD5 plus `observers`), make it durable, return the blob. The
    blob is referenced by nothing until a commit takes it; on failure nothing is left."""
    md5 = digest.md5()
    hashers = [md5, *observers]

    def hash_batch(data: bytes) -> None:
        for h in hashers:
            h.update(data)

    # Chunks are kept as they come and joined once per batch: one copy of each byte.
    batch: list[bytes] = []
    size = total = 0
    writer: BlobWriter | None = None
    in_flight: list[Awaitable[None]] = []
    loop = asyncio.get_running_loop()
    try:
        async for chunk in chunks:
            batch.append(chunk)
            size += len(chunk)
            if size >= BATCH:
                data = b"".join(batch)
                batch.clear()
                total, size = total + size, 0
                if writer is None:
                    writer = blobs.writer()
                for job in in_flight:
                    await job
                in_flight = [loop.run_in_executor(pool, hash_batch, data), writer.append(data)]
        data = b"".join(batch)
        if writer is None and size <= inline_max:
            hash_batch(data)
            metrics.MD5_BYTES.inc(size)
            return StagedBlob(new_blob_id(), size, md5.digest(), data)
        if writer is None:
            writer = blobs.writer()
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
