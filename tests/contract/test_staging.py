"""Receiving a large body (gateway/store/staging.py) over each backend: batches hashed in one
lane and written in another, several batches in flight. Whatever the pieces a client's bytes
come in, the object is stored whole and in order; a failure in a batch that is not the first,
while others are in flight, leaves no file, no tmp file and no intent."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from gateway.store import ObjectAttrs, blobs, staging
from gateway.store.crypto import CHUNK, Keyring
from gateway.store.model import NO_LOCK
from tests.contract.conftest import Harness
from tests.contract.test_intents import assert_left_clean, blob_path

MIB = 1 << 20
MARKER = b"STAGING-PLAINTEXT-MARKER"
# Piece sizes that straddle the batches and the 64 KiB chunks of encryption in every way: a
# byte, less than a page, just over a chunk, several chunks, a whole batch and more.
PIECES = (1, 4095, 65_537, 300_001, MIB, 7, 2 * MIB + 3, 131_072)


def _body(size: int) -> bytes:
    return (MARKER + os.urandom(4000)) * (size // (len(MARKER) + 4000))


async def _pieces(data: bytes) -> AsyncIterator[bytes]:
    at = 0
    for size in itertools.cycle(PIECES):
        if at >= len(data):
            return
        yield data[at : at + size]
        at += size
        await asyncio.sleep(0)


@pytest.fixture
def keyed(harness: Harness) -> Iterator[Harness]:
    kept = harness.store.keys
    harness.store.keys = Keyring.load(harness.root)
    yield harness
    harness.store.keys = kept


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "sse-s3"])
def test_a_body_in_odd_pieces_is_stored_whole(keyed: Harness, encrypted: bool) -> None:
    h = keyed
    bucket = h.new_bucket()
    data = _body(7 * MIB + 12_345)
    assert keyed.store.keys is not None
    encryption = keyed.store.keys.sse_s3() if encrypted else None

    async def put_and_read() -> tuple[str, bytes]:
        blob = await h.store.stage(_pieces(data), encryption=encryption)
        assert blob.size == len(data) and blob.data is None
        obj = await h.store.put_object(bucket, "odd", blob, ObjectAttrs(), lock=NO_LOCK)
        assert obj.etag == hashlib.md5(data).hexdigest()
        reader = await h.store.open_object(bucket, "odd")
        try:
            return blob.id, b"".join([p async for p in reader.chunks(0, len(data))])
        finally:
            reader.close()

    blob_id, stored = h.run(put_and_read())
    assert stored == data
    if encrypted:
        assert MARKER not in blob_path(h.root, blob_id).read_bytes()


class _FailsAt:
    """An observer (a requested checksum, say) that fails when it reaches byte `at`."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.seen = 0

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        self.seen += len(data)
        if self.seen > self.at:
            raise OSError("the observer failed")

    def digest(self) -> bytes:
        return b""

    def hexdigest(self) -> str:
        return ""


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "sse-s3"])
@pytest.mark.parametrize("batch", [2, 5])
def test_a_failure_in_a_later_batch_leaves_nothing(
    keyed: Harness, encrypted: bool, batch: int
) -> None:
    """The hash lane fails in batch `batch` while the write lane has batches of its own."""
    h = keyed
    data = _body(8 * MIB)
    assert keyed.store.keys is not None
    encryption = keyed.store.keys.sse_s3() if encrypted else None
    failing = _FailsAt(batch * staging.BATCH + 10)
    with pytest.raises(OSError, match="the observer failed"):
        h.run(h.store.stage(_pieces(data), [failing], encryption))
    assert_left_clean(h)


def test_a_body_that_fails_after_its_batches_leaves_nothing(keyed: Harness) -> None:
    """The client goes away once several batches are in the lanes."""
    h = keyed

    async def broken() -> AsyncIterator[bytes]:
        async for piece in _pieces(_body(5 * MIB)):
            yield piece
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        h.run(h.store.stage(broken()))
    assert_left_clean(h)


def test_an_aborted_writer_writes_no_more(keyed: Harness) -> None:
    """A write that reaches the pool after the abort (a lane that had it on its way) fails
    instead of making the tmp file again behind the abort's back."""
    h = keyed

    async def go() -> None:
        writer = h.store.files.writer()
        await writer.append([b"a" * 10, b"b" * 20])
        writer.abort()
        with pytest.raises(OSError, match="aborted"):
            await writer.append(b"late")

    h.run(go())
    assert_left_clean(h)


def test_pieces_are_written_in_order_through_short_writes(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.writev may take less than it was given: the rest follows, in order."""
    real = os.writev

    def short(fd: int, views: list[memoryview]) -> int:
        first = views[0]
        return real(fd, [first[: max(1, len(first) // 3)]])

    monkeypatch.setattr(blobs.os, "writev", short)
    pieces = [os.urandom(n) for n in (1, 5000, 3, 70_000)]
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        assert blobs._write_all(fd, [*pieces, b""]) == sum(map(len, pieces))
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"".join(pieces)


@pytest.mark.parametrize(
    "sizes",
    [
        [CHUNK * 16],  # whole chunks: nothing left over
        [300_001, 2 * CHUNK],  # the rest within the last piece
        [CHUNK * 3 + 10, 5, 7],  # the rest spans pieces smaller than it
    ],
)
def test_a_batch_is_cut_at_a_chunk_boundary_in_order(sizes: list[int]) -> None:
    pieces = [os.urandom(n) for n in sizes]
    whole, rest, size = staging._cut(list(pieces), sum(sizes))
    joined = b"".join(pieces)
    assert b"".join(whole) + b"".join(rest) == joined
    assert len(b"".join(whole)) % CHUNK == 0 and size == len(b"".join(rest)) < CHUNK
