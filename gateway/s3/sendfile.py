"""A file's bytes sent to a client by sendfile(2): the kernel copies them from the page cache
to the socket, with no Python buffer, on either event loop.

asyncio's loop has `loop.sendfile`. uvloop (the default loop) has none, so on it the bytes go
by `os.sendfile` on a duplicate of the connection's descriptor, once the transport has written
what it holds (the response's headers): the duplicate is ours to wait on for writability, the
transport's own being registered with the loop. A TLS connection is never sent to this way
(its bytes must be encrypted): `usable` says so before the caller opens the file.
"""

from __future__ import annotations

import asyncio
import os
from typing import BinaryIO


def usable(transport: asyncio.BaseTransport) -> bool:
    """Can sendfile carry a response's bytes on this connection (not TLS, a socket)?"""
    return (
        transport.get_extra_info("sslcontext") is None
        and transport.get_extra_info("socket") is not None
    )


async def send_file(transport: asyncio.Transport, file: BinaryIO, offset: int, count: int) -> None:
    """Send `count` bytes of `file` from `offset` on a connection `usable` said yes to. A file
    shorter than that is an OSError (never a wait for bytes that will not come); a client that
    goes away raises ConnectionError partway, as any write would."""
    loop = asyncio.get_running_loop()
    try:
        sent = await loop.sendfile(transport, file, offset, count)  # type: ignore[arg-type]
    except NotImplementedError:  # uvloop
        sent = await _send(loop, transport, file.fileno(), offset, count)
    if sent < count:  # both stop quietly at the file's end
        raise OSError(f"sendfile: the file ended {count - sent} bytes early")


async def _send(
    loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, fd: int, offset: int, count: int
) -> int:
    """As asyncio's own: each time the socket takes more, as much as it takes, sent from the
    loop's writer callback (no task woken per send). Gives the bytes sent."""
    out = os.dup(transport.get_extra_info("socket").fileno())
    done: asyncio.Future[int] = loop.create_future()
    start, end = offset, offset + count

    def send() -> None:
        nonlocal offset
        if done.done():
            return
        if transport.is_closing():
            done.set_exception(ConnectionResetError("the connection closed mid-response"))
            return
        if transport.get_write_buffer_size():
            return  # the headers go first: the transport sends them in its own callback
        try:
            while offset < end:
                sent = os.sendfile(out, fd, offset, end - offset)
                if sent == 0:  # the file ended
                    break
                offset += sent
        except BlockingIOError:
            return  # called again once the socket takes more
        except Exception as exc:
            done.set_exception(exc)
            return
        done.set_result(offset - start)

    loop.add_writer(out, send)
    try:
        return await done
    finally:
        loop.remove_writer(out)
        os.close(out)
