"""The body's stream: the minimum rate counts the client's time, never the gateway's."""

from __future__ import annotations

import asyncio

import pytest

from gateway.s3.errors import S3Error
from gateway.s3.payload import _Patient


class _Client:
    """A body stream whose bytes come `piece` at a time, each after `delay` seconds; with
    `buffered`, every byte has already arrived (read_nowait has it)."""

    def __init__(self, pieces: int, piece: bytes, delay: float, buffered: bool = False) -> None:
        self.left = pieces
        self.piece = piece
        self.delay = delay
        self.buffered = buffered

    def _next(self) -> bytes:
        if not self.left:
            return b""
        self.left -= 1
        return self.piece

    def read_nowait(self) -> bytes:
        return self._next() if self.buffered else b""

    def is_eof(self) -> bool:
        return not self.left

    async def readany(self) -> bytes:
        await asyncio.sleep(self.delay)
        return self._next()


async def _drain(stream: _Patient, pause: float = 0.0) -> int:
    received = 0
    while data := await stream.readany():
        received += len(data)
        await asyncio.sleep(pause)  # the gateway's own work on what it read
    return received


async def test_a_body_below_the_rate_is_timed_out() -> None:
    # A byte every 20 ms: never a stall of the 0.2 s timeout, but 50 B/s against 1000.
    stream = _Patient(_Client(1000, b"x", 0.02), 0.2, 1000)  # type: ignore[arg-type]
    with pytest.raises(S3Error) as caught:
        await _drain(stream)
    assert caught.value.code == "RequestTimeout"


async def test_a_body_above_the_rate_is_read() -> None:
    stream = _Patient(_Client(30, b"x" * 100, 0.02), 0.2, 1000)  # type: ignore[arg-type]
    assert await _drain(stream) == 3000


async def test_a_gateway_that_reads_slowly_does_not_blame_the_client() -> None:
    # Each byte comes at once when asked for, but the gateway asks every 50 ms: 20 B/s of
    # wall time, none of it spent waiting for the client.
    stream = _Patient(_Client(10, b"x", 0.0), 0.2, 1000)  # type: ignore[arg-type]
    assert await _drain(stream, pause=0.05) == 10


async def test_bytes_already_arrived_count() -> None:
    stream = _Patient(_Client(10, b"x" * 500, 0.0, buffered=True), 0.2, 1000)  # type: ignore[arg-type]
    assert await _drain(stream, pause=0.05) == 5000


async def test_no_minimum_rate_when_zero() -> None:
    stream = _Patient(_Client(20, b"x", 0.02), 0.2, 0)  # type: ignore[arg-type]
    assert await _drain(stream) == 20


async def test_the_end_of_a_body_is_not_waited_for() -> None:
    # Every byte has arrived and the stream has ended: the last read answers at once, where
    # a wait (here one that would never end in time) is no part of reading a body.
    client = _Client(3, b"x" * 100, 3600.0, buffered=True)
    stream = _Patient(client, 0.2, 1000)  # type: ignore[arg-type]
    assert await _drain(stream) == 300
