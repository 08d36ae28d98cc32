"""Receiving a body: hashed and made durable in batches, never on the event loop.

A body of at most `inline_max` bytes stays in memory and goes into the catalog with its object
(one fsync fewer per small PUT). A larger one is gathered into BATCH-sized batches, each handed
to two lanes of the pool: one hashes the batches in turn (MD5 and the observers), the other
writes them in turn (encrypted first, when asked). The lanes run at their own pace, one batch
apart if need be, while the event loop receives the next batch: a batch that hashes slowly
does not keep the disk idle, nor a slow write the hasher. At most DEPTH batches are in the
lanes, and the loop receives only while fewer are (memory: DEPTH batches per body, and as much
ciphertext when encrypted). A batch's chunks go to the hasher and to `os.writev` as aiohttp gave
them: no copy on the event loop.
A body that gets a file gets an intent in the catalog first (intents.py), renewed as it comes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .. import digest, metrics
from . import errors
from .api import BlobStore
from .blobs import new_blob_id
from .crypto import CHUNK, DataKey, Encryption
from .intents import Intent, Intents
from .model import StagedBlob

# 1 MiB: 4 MiB batches made the 256 MiB PUT slower, not faster, and so did writing with a
# write-back started every 4 MiB rather than every 1 MiB (docs/performance.md, "Large PUT").
BATCH = 1 << 20
# Batches handed to the lanes at once: one lane may be a batch behind the other.
DEPTH = 2

Chunks = Sequence[bytes | memoryview]
T = TypeVar("T")


class _File:
    """The file of a body too large to keep inline, and its intent."""

    def __init__(self, blobs: BlobStore, intents: Intents | None) -> None:
        self.writer = blobs.writer()
        self.blob_id = self.writer.blob_id
        self.intent: Intent | None = None if intents is None else intents.begin(self.blob_id)

    def append(self, data: bytes | Chunks) -> Awaitable[None]:
        return self.writer.append(data)

    def keep(self) -> None:
        if self.intent is not None:
            self.intent.keep()

    async def publish(self, last: bytes | Chunks) -> None:
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


def _settled(task: asyncio.Future[Any]) -> None:
    # A lane's failure is raised by whoever awaits it; one that nobody awaits (the request
    # failed for another reason first) must not be logged as an exception nobody retrieved.
    if not task.cancelled():
        task.exception()


class _Lanes:
    """The pool's two lanes for one body: batches hashed one after another, and written one
    after another, each lane at its own pace; at most DEPTH batches handed over at a time."""

    def __init__(self, pool: concurrent.futures.Executor, hashers: Sequence[digest.Digest]):
        self.loop = asyncio.get_running_loop()
        self.pool = pool
        self.hashers = hashers
        self.hashed: asyncio.Future[None] | None = None  # the last batch's hash
        self.written: asyncio.Future[None] | None = None  # the last batch's write
        self.batches: deque[tuple[asyncio.Future[None], asyncio.Future[None]]] = deque()

    def hash_now(self, chunks: Chunks) -> None:
        for h in self.hashers:
            for chunk in chunks:
                h.update(chunk)

    def in_pool(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        job = self.loop.run_in_executor(self.pool, fn, *args)
        job.add_done_callback(_settled)
        return job

    def _after(
        self, before: asyncio.Future[None] | None, start: Callable[[], Awaitable[None]]
    ) -> asyncio.Future[None]:
        async def run() -> None:
            if before is not None:
                await before  # the lane's first failure, raised again
            await start()

        task = asyncio.ensure_future(run())
        task.add_done_callback(_settled)
        return task

    def hash(self, chunks: Chunks) -> asyncio.Future[None]:
        self.hashed = self._after(self.hashed, lambda: self.in_pool(self.hash_now, chunks))
        return self.hashed

    async def add(self, chunks: Chunks, write: Callable[[], Awaitable[None]]) -> None:
        """Hash `chunks` and `write()` them, each after the batch before; return once fewer
        than DEPTH batches are in the lanes (raising the first failure met)."""
        hashed = self.hash(chunks)
        self.written = self._after(self.written, write)
        self.batches.append((hashed, self.written))
        while len(self.batches) >= DEPTH:
            hashed, written = self.batches.popleft()
            await hashed
            await written

    def stop(self) -> None:
        """No batch starts from now on: a job running finishes in its thread (the writer's
        abort waits for a write running: blobs.FileWriter.abort)."""
        for hashed, written in self.batches:
            hashed.cancel()
            written.cancel()
        for task in (self.hashed, self.written):
            if task is not None:
                task.cancel()


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
    written or kept inline (docs/encryption.md): batches are cut at chunk boundaries, and each
    is sealed in a pool thread of its own before the write lane takes it.

    `intents`: where a body that needs a file records its intent before the file is published
    (None: nothing shares the folder, as in tests of the files alone)."""
    md5 = digest.md5()
    lanes = _Lanes(pool, [md5, *observers])
    key: DataKey | None = None
    sealed: str | None = None
    if encryption is not None:
        key, sealed = encryption.new_key()
    batch: list[bytes | memoryview] = []
    size = total = 0
    writer: _File | None = None
    try:
        async for chunk in chunks:
            batch.append(chunk)
            size += len(chunk)
            if writer is not None:
                writer.keep()
            if size < BATCH:
                continue
            if writer is None:
                writer = _File(blobs, intents)
            if key is None:
                whole, batch, size = batch, [], 0
            else:
                whole, batch, size = _cut(batch, size)
            await lanes.add(whole, _writing(lanes, writer, key, whole, total // CHUNK))
            total += sum(len(c) for c in whole)
        if writer is None and size <= inline_max:
            data = b"".join(batch)
            lanes.hash_now([data])
            metrics.MD5_BYTES.inc(size)
            if key is not None:
                data = key.seal(data, 0)
            return StagedBlob(new_blob_id(), size, md5.digest(), data, sealed)
        if writer is None:
            writer = _File(blobs, intents)
        hashed = lanes.hash(batch)
        last: bytes | Chunks = batch
        if key is not None:
            last = await lanes.in_pool(_seal, key, batch, total // CHUNK)
        if lanes.written is not None:
            await lanes.written
        await writer.publish(last)
        await hashed
        total += size
        metrics.MD5_BYTES.inc(total)
        return StagedBlob(writer.blob_id, total, md5.digest(), None, sealed)
    except BaseException:
        lanes.stop()
        if writer is not None:
            writer.abort()
        raise


def _cut(
    batch: list[bytes | memoryview], size: int
) -> tuple[Chunks, list[bytes | memoryview], int]:
    """The whole 64 KiB chunks of a batch, to encrypt now, and the rest, for the next."""
    rest = size % CHUNK
    if not rest:
        return batch, [], 0
    last = memoryview(batch[-1])
    if len(last) < rest:  # tiny pieces: the rest spans several
        data = memoryview(b"".join(batch))
        return [data[: size - rest]], [data[size - rest :]], rest
    return [*batch[:-1], last[: len(last) - rest]], [last[len(last) - rest :]], rest


def _seal(key: DataKey, chunks: Chunks, first: int) -> bytes:
    """A batch's pieces encrypted (joined here in the pool, not on the loop); chunk 0 is the
    blob's chunk `first`."""
    return key.seal(chunks[0] if len(chunks) == 1 else b"".join(chunks), first)


def _writing(
    lanes: _Lanes, writer: _File, key: DataKey | None, chunks: Chunks, first: int
) -> Callable[[], Awaitable[None]]:
    """The write lane's job for a batch: its pieces as they came, or encrypted first (in a
    pool thread, starting now, while the write before it may still run)."""
    if key is None:
        return lambda: writer.append(chunks)
    sealing = lanes.in_pool(_seal, key, chunks, first)

    async def write_sealed() -> None:
        await writer.append(await sealing)

    return write_sealed
