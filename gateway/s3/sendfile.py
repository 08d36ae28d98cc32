"""A file's bytes sent to a client by sendfile(2): the kernel copies them from the page cache
to the socket, with no Python buffer, on either event loop.

asyncio's loop has `loop.sendfile`. uvloop (the default loop) has none, so on it the bytes go
by `os.sendfile` on a duplicate of the connection's descriptor, once the transport has written
what it holds (the response's headers): the duplicate is ours to wait on for writability, the
transport's own being registered with the loop. A TLS connection is never sent to this way
(its bytes must be encrypted): the caller sends them itself.
"""

from __future__ import annotations

import asyncio
import os
from typing import BinaryIO


async def send_file(transport: asyncio.Transport, file: BinaryIO, offset: int, count: int) -> bool:
    """Send `count` bytes of `file` from `offset` on the connection of `transport`. False if
    sendfile cannot carry them (TLS, no socket); a client that goes away raises ConnectionError
    partway, as any write would."""
    if transport.get_extra_info("sslcontext") is not None:
        return False
    loop = asyncio.get_running_loop()
    try:
        sent = await loop.sendfile(transport, file, offset, count)  # type: ignore[arg-type]
    except NotImplementedError:  # uvloop
        pass
    else:
        if sent < count:  # asyncio stops quietly at the file's end
            raise _short(count - sent)
        return True
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    out = os.dup(sock.fileno())
    try:
        while transport.get_write_buffer_size():
            await _writable(loop, out)
            await asyncio.sleep(0)  # the transport writes what it holds in its own callback
        await _send(loop, out, file.fileno(), offset, count)
    finally:
        os.close(out)
    return True


async def _send(
    loop: asyncio.AbstractEventLoop, out: int, fd: int, offset: int, count: int
) -> None:
    """As asyncio's own: each time the socket takes more, as much as it takes, sent from the
    loop's writer callback (no task woken per send)."""
    done = loop.create_future()
    end = offset + count

    def send() -> None:
        nonlocal offset
        if done.done():
            return
        try:
            while offset < end:
                sent = os.sendfile(out, fd, offset, end - offset)
                if sent == 0:  # the file is shorter than the catalog says
                    raise _short(end - offset)
                offset += sent
        except BlockingIOError:
            return  # called again once the socket takes more
        except Exception as exc:
            done.set_exception(exc)
            return
        done.set_result(None)

    loop.add_writer(out, send)
    try:
        await done
    finally:
        loop.remove_writer(out)


def _short(missing: int) -> OSError:
    return OSError(f"sendfile: the file ended {missing} bytes early")


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready = loop.create_future()
    loop.add_writer(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_writer(fd)
