"""gateway/s3/sendfile.py on both event loops: the bytes arrive whole and in order after what
the transport already held (a response's headers), by sendfile(2), never through Python."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest
import uvloop

from gateway.s3 import sendfile

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _serve(loop_name: str, tmp_path, head: bytes, offset: int, count: int) -> tuple[bytes, bool]:
    """Send `head` by the transport, then `count` bytes of a file from `offset` by
    send_file, to a client that reads only after both were queued. Gives what the client
    read and send_file's answer."""
    body = os.urandom(offset + count + 1000)
    path = tmp_path / "blob"
    path.write_bytes(body)

    async def main() -> tuple[bytes, bool]:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[asyncio.Transport] = loop.create_future()

        class Server(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                made.set_result(transport)  # type: ignore[arg-type]

        server = await loop.create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        client.settimeout(10)  # a send that stops short fails the test, not hangs it
        transport = await made
        transport.write(head)  # more than the socket takes at once: the transport keeps some
        received = bytearray()

        def read_all() -> None:
            while len(received) < len(head) + count:
                chunk = client.recv(1 << 20)
                if not chunk:
                    break
                received.extend(chunk)

        reading = loop.run_in_executor(None, read_all)
        with open(path, "rb") as f:
            done = await sendfile.send_file(transport, f, offset, count)
        await reading
        transport.close()
        client.close()
        server.close()
        await server.wait_closed()
        return bytes(received), done

    loop = LOOPS[loop_name]()
    try:
        got, done = loop.run_until_complete(main())
    finally:
        loop.close()
    assert got == head + body[offset : offset + count]
    return got, done


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_bytes_follow_what_the_transport_held(tmp_path, loop_name, monkeypatch):
    calls: list[int] = []
    real = os.sendfile

    def counted(out: int, in_fd: int, offset: int, count: int) -> int:
        calls.append(count)
        return real(out, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counted)
    head = b"HTTP/1.1 200 OK\r\n" + os.urandom(4 * 1024 * 1024)
    _, done = _serve(loop_name, tmp_path, head, 12345, 8 * 1024 * 1024 + 7)
    assert done
    assert calls  # by sendfile(2), on either loop: not read into Python and written


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_small_range(tmp_path, loop_name):
    _, done = _serve(loop_name, tmp_path, b"HTTP/1.1 206 Partial Content\r\n\r\n", 100, 3901)
    assert done


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_short_file_is_an_error_not_a_hang(tmp_path, loop_name):
    """A blob shorter than the catalog says ends the response with an error (the middleware
    cuts the connection), never a wait for bytes that will not come."""
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 100)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[asyncio.Transport] = loop.create_future()

        class Server(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                made.set_result(transport)  # type: ignore[arg-type]

        server = await loop.create_server(Server, "127.0.0.1", 0)
        client = socket.create_connection(("127.0.0.1", server.sockets[0].getsockname()[1]))
        transport = await made
        try:
            with open(path, "rb") as f, pytest.raises(OSError, match="ended 50 bytes early"):
                await sendfile.send_file(transport, f, 0, 150)
        finally:
            transport.close()
            client.close()
            server.close()

    loop = LOOPS[loop_name]()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
