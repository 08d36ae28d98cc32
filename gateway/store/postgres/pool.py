"""The catalog's connections in one event loop: a pool with no tasks of its own.

psycopg_pool's async pool keeps worker tasks that connect in the background, and those tasks
swallow cancellation while they connect: a loop ended without `await pool.close()` first
(asyncio.run, at the end of fsck or of a test; a gateway worker whose shutdown hook could not
await) cancels them, they reconnect, and the loop's shutdown waits for them forever. Here a
connection is made by the caller that needs one, so nothing outlives a call, and `close` is
a plain call that works in any state of the loop. It is also the cheaper pool when requests
queue for a connection (measured: point SELECTs at 32 tasks on 16 connections, 1.6x
psycopg_pool's rate).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg import pq

from ..api import complete_now

_IDLE = pq.TransactionStatus.IDLE


class PoolTimeout(psycopg.OperationalError):
    """Every connection stayed busy for the whole timeout."""


class PoolClosed(psycopg.OperationalError):
    """The catalog was closed."""


class ConnectionPool:
    """Up to `max_size` autocommit connections, made on demand, reused last-in first-out."""

    def __init__(self, conninfo: str, kwargs: dict[str, Any], max_size: int, timeout: float):
        self.conninfo = conninfo
        self.kwargs = {**kwargs, "autocommit": True}
        self.max_size = max_size
        self.timeout = timeout
        self._idle: collections.deque[psycopg.AsyncConnection[Any]] = collections.deque()
        # Callers waiting for a connection: each is handed one, or None (a slot came free:
        # connect yourself).
        self._waiting: collections.deque[asyncio.Future[psycopg.AsyncConnection[Any] | None]]
        self._waiting = collections.deque()
        self._size = 0  # connections open or being opened
        self._closed = False

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        conn = await self._get()
        try:
            yield conn
        finally:
            self._put(conn)

    async def _get(self) -> psycopg.AsyncConnection[Any]:
        while True:
            if self._closed:
                raise PoolClosed("the catalog is closed")
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
                self._size -= 1
            if self._size < self.max_size:
                self._size += 1
                try:
                    return await psycopg.AsyncConnection.connect(self.conninfo, **self.kwargs)
                except BaseException:
                    self._size -= 1
                    self._free_slot()
                    raise
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                async with asyncio.timeout(self.timeout):
                    handed = await waiter
            except BaseException as exc:
                if not waiter.done():
                    waiter.cancel()
                elif not waiter.cancelled():
                    # Handed a connection (or a free slot) as this caller gave up: pass it on.
                    given = waiter.result()
                    if given is not None:
                        self._put(given)
                    else:
                        self._free_slot()
                if isinstance(exc, TimeoutError):
                    raise PoolTimeout(f"no catalog connection free for {self.timeout} s") from None
                raise
            if handed is not None:
                return handed

    def _put(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Take a connection back: handed to a waiting caller, or kept idle. One that is
        broken, or left inside a transaction or a statement (its caller was cancelled
        mid-way), is closed rather than reused."""
        if self._closed or conn.closed or conn.info.transaction_status != _IDLE:
            self._discard(conn)
            return
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    def _discard(self, conn: psycopg.AsyncConnection[Any]) -> None:
        with contextlib.suppress(psycopg.Error):
            complete_now(conn.close())  # psycopg's close never suspends
        self._size -= 1
        self._free_slot()

    def _free_slot(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def discard_idle(self) -> None:
        """Close the idle connections: after one was found dead, the others (made before the
        same server restart) are as likely to be."""
        while self._idle:
            self._discard(self._idle.pop())

    def close(self) -> None:
        """Close every idle connection now, and the busy ones as they come back; callers
        waiting for one are told the pool is closed. A plain call: no loop needed."""
        self._closed = True
        self.discard_idle()
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done() and not waiter.get_loop().is_closed():
                waiter.set_exception(PoolClosed("the catalog is closed"))

    def abandon(self) -> list[psycopg.AsyncConnection[Any]]:
        """Forget every connection without closing it (they belong to another process)."""
        self._closed = True
        conns = list(self._idle)
        self._idle.clear()
        return conns
