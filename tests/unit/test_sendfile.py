"""gateway/s3/sendfile.py on both event loops: the bytes arrive whole and in order after what
the transport already held (a response's headers), by sendfile(2), never through Python."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator

import pytest
import uvloop

from gateway.s3 import sendfile

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@contextlib.asynccontextmanager
async def _connection() -> AsyncIterator[tuple[asyncio.Transport, socket.socket]]:
    """A server's transport and its client's socket, on the running loop."""
    loop = asyncio.get_running_loop()
    made: asyncio.Future[asyncio.Transport] = loop.create_future()

    class Server(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            made.set_result(transport)  # type: ignore[arg-type]

    server = await loop.create_server(Server, "127.0.0.1", 0)
    client = socket.create_connection(("127.0.0.1", server.sockets[0].getsockname()[1]))
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    client.settimeout(10)  # a send that stops short fails the test, not hangs it
    transport = await made
    try:
        yield transport, client
    finally:
        transport.close()
        client.close()
        server.close()
        await server.wait_closed()


def _run(loop_name: str, main: object) -> None:
    loop = LOOPS[loop_name]()
    try:
        loop.run_until_complete(main)  # type: ignore[arg-type]
    finally:
        loop.close()


def _serve(loop_name: str, tmp_path, head: bytes, offset: int, count: int) -> None:
    """Send `head` by the transport, then `count` bytes of a file from `offset` by
    send_file, to a client that reads only after both were queued: it reads them all."""
    body = os.urandom(offset + count + 1000)
    path = tmp_path / "blob"
    path.write_bytes(body)
    received = bytearray()

    async def main() -> None:
        async with _connection() as (transport, client):
            assert sendfile.usable(transport)  # plain TCP: sendfile may carry it
            transport.write(head)  # more than the socket takes at once: the transport keeps some

            def read_all() -> None:
                while len(received) < len(head) + count:
                    chunk = client.recv(1 << 20)
                    if not chunk:
                        break
                    received.extend(chunk)

            reading = asyncio.get_running_loop().run_in_executor(None, read_all)
            with open(path, "rb") as f:
                await sendfile.send_file(transport, f, offset, count)
            await reading

    _run(loop_name, main())
    assert received == head + body[offset : offset + count]


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_bytes_follow_what_the_transport_held(tmp_path, loop_name, monkeypatch):
    calls: list[int] = []
    real = os.sendfile

    def counted(out: int, in_fd: int, offset: int, count: int) -> int:
        calls.append(count)
        return real(out, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counted)
    head = b"HTTP/1.1 200 OK\r\n" + os.urandom(4 * 1024 * 1024)
    _serve(loop_name, tmp_path, head, 12345, 8 * 1024 * 1024 + 7)
    assert calls  # by sendfile(2), on either loop: not read into Python and written


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_small_range(tmp_path, loop_name):
    _serve(loop_name, tmp_path, b"HTTP/1.1 206 Partial Content\r\n\r\n", 100, 3901)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_short_file_is_an_error_not_a_hang(tmp_path, loop_name):
    """A blob shorter than the catalog says ends the response with an error (the middleware
    cuts the connection), never a wait for bytes that will not come."""
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 100)

    async def main() -> None:
        async with _connection() as (transport, _):
            with open(path, "rb") as f, pytest.raises(OSError, match="ended 50 bytes early"):
                await sendfile.send_file(transport, f, 0, 150)

    _run(loop_name, main())
