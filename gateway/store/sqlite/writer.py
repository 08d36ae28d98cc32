"""The SQLite catalog's one writing connection, with group commit.

Writes are coroutines over a SqliteTx. The writes waiting when a group starts run in one
transaction and are committed together (one WAL fsync for the group). Each write's outcome, with
the file blobs it released, is set on a future of its own that no caller can cancel: a request
that goes away neither undoes a write nor loses track of what it released (the Store service
frees those).

One failing write must not undo the others. A group first runs its writes together, with no
savepoint between them; if one raises, that run is rolled back whole and the group runs again
apart, each write in its own savepoint, where a failing write is undone alone. Savepoints are
not kept for every group because they cost more than their two statements: each page a write
changes that the database had before its savepoint is first copied to SQLite's sub-journal
(past 64 KiB a temporary file, written with two pwrites per page), about a third of a 4 KiB PUT's
share of its group when it replaces an object (docs/performance.md, issue 45, lever 3). Running
a write twice is safe: nothing of the first run is visible (nor committed), and the Store's
write functions may run again (the PostgreSQL adapter runs them again after a conflict).

The statements run on the event loop and only the COMMIT in a thread: sqlite3 releases the GIL
around every statement, and a writer thread then waited, statement by statement, for a busy
event loop to hand the GIL back (that, not the fsync, capped a worker's small PUTs). Writes
marked `long` (thousands of statements) run in the thread instead, so as not to stall the loop.
The writers of several worker processes take turns by an flock rather than by SQLite's busy
handler, which sleeps 1, 2, 5 ... ms between tries: flock hands the turn over at once, and
meanwhile the waiting worker's group grows.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import logging
import os
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .. import errors
from ..api import complete_now
from .queries import SqliteTx
from .schema import connect

log = logging.getLogger(__name__)
T = TypeVar("T")

Outcome = tuple[Any, BaseException | None]  # (result and released files, or the error)


def _translate(exc: BaseException) -> BaseException:
    """SQLite's word for a full or read-only disk, as the store's."""
    if isinstance(exc, sqlite3.Error):
        text = str(exc).lower()
        if "disk is full" in text:
            return errors.StorageUnavailable(errors.FULL)
        if "readonly" in text or "read-only" in text:
            return errors.StorageUnavailable(errors.READ_ONLY)
    return exc


@dataclass
class _Write:
    fn: Callable[[SqliteTx], Awaitable[Any]]
    fut: asyncio.Future[Any]
    long: bool


class GroupWriter:
    MAX_GROUP = 256

    def __init__(self, path: Path) -> None:
        self._conn = connect(path)
        self._turn = os.open(f"{path}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="catalog")
        self._pending: list[_Write] = []
        self._drainer: asyncio.Task[None] | None = None
        self._closed = False
        # Run the next group's writes together (False: apart; _apply says when).
        self._together = True

    def run(
        self, fn: Callable[[SqliteTx], Awaitable[T]], *, long: bool = False
    ) -> asyncio.Future[tuple[T, list[str]]]:
        """Queue `fn`; the future settles once its transaction has committed (or failed)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[T, list[str]]] = loop.create_future()
        self._pending.append(_Write(fn, fut, long))
        if self._drainer is None:
            self._drainer = loop.create_task(self._drain())
        return fut

    def close(self) -> None:
        # A write queued after this (a background worker's, as the process stops) is
        # answered as refused by _drain, never run on the closed connection.
        self._closed = True
        self._thread.shutdown(wait=True)
        self._conn.close()
        os.close(self._turn)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                group = self._pending[: self.MAX_GROUP]
                del self._pending[: self.MAX_GROUP]
                if self._closed:
                    closed = errors.StorageUnavailable("the catalog is closed (stopping)")
                    for write in group:
                        if not write.fut.done():
                            write.fut.set_exception(closed)
                    continue
                try:
                    await self._take_turn()
                    if any(write.long for write in group):
                        outcomes = await loop.run_in_executor(
                            self._thread, self._apply_and_commit, group
                        )
                    else:
                        outcomes = await loop.run_in_executor(
                            self._thread, self._commit, self._apply(group)
                        )
                except Exception as exc:  # no turn, or the thread is gone: nothing committed
                    if self._closed:  # closed under it as the process stops: refused, no more
                        closed = errors.StorageUnavailable("the catalog is closed (stopping)")
                        outcomes = [(None, closed)] * len(group)
                    else:
                        log.exception("catalog group failed")
                        if self._conn.in_transaction:
                            self._conn.execute("ROLLBACK")
                        fcntl.flock(self._turn, fcntl.LOCK_UN)  # harmless if not held
                        outcomes = [(None, exc)] * len(group)
                for write, (result, exc) in zip(group, outcomes, strict=True):
                    if write.fut.done():  # its caller went away: the outcome stands regardless
                        continue
                    if exc is not None:
                        write.fut.set_exception(_translate(exc))
                    else:
                        write.fut.set_result(result)
        finally:
            self._drainer = None

    async def _take_turn(self) -> None:
        # Tried from the loop, so that the group runs the moment the turn is ours (a turn
        # taken in a thread would be held while the loop gets round to the group).
        delay = 0.0001
        while True:
            try:
                fcntl.flock(self._turn, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:  # another worker is writing
                await asyncio.sleep(delay)
                delay = min(2 * delay, 0.0005)

    def _apply(self, group: list[_Write]) -> list[Outcome]:
        """Begin, and run the group's writes: together, then apart if one of them raised
        (apart at once after a group where one failed). An error of the transaction itself
        (not of a write) is the whole group's outcome."""
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._together:
                outcomes = self._run_together(group)
                if outcomes is not None:
                    return outcomes
                # A write raised: what the others wrote may be the reason (the same key
                # twice), so they run again before it, each undone alone if it fails.
                if conn.in_transaction:  # SQLite rolls back by itself on some errors
                    conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
            outcomes = self._run_apart(group)
            # A group where a write failed is likely followed by one (a client retrying a
            # condition that fails): run apart until a group has none, not twice each time.
            self._together = all(exc is None for _, exc in outcomes)
        except Exception as exc:
            log.exception("catalog transaction failed")
            outcomes = [(None, exc)] * len(group)
        return outcomes

    def _run_together(self, group: list[_Write]) -> list[Outcome] | None:
        """Each write in turn in the one transaction, no savepoint between them; None when
        one raised (its statements and the others' are then all in the transaction)."""
        outcomes: list[Outcome] = []
        for write in group:
            tx = SqliteTx(self._conn)
            try:
                result = complete_now(write.fn(tx))  # type: ignore[arg-type]
            except Exception as exc:
                if len(group) == 1:  # the group is only this write: _commit rolls it back
                    return [(None, exc)]
                return None
            outcomes.append(((result, tx.released), None))
        return outcomes

    def _run_apart(self, group: list[_Write]) -> list[Outcome]:
        """Each write in its own savepoint: one that raises is undone alone."""
        conn = self._conn
        outcomes: list[Outcome] = []
        for write in group:
            conn.execute("SAVEPOINT op")
            tx = SqliteTx(conn)
            try:
                result = complete_now(write.fn(tx))  # type: ignore[arg-type]
            except Exception as exc:
                conn.execute("ROLLBACK TO op")
                conn.execute("RELEASE op")
                outcomes.append((None, exc))
            else:
                conn.execute("RELEASE op")
                outcomes.append(((result, tx.released), None))
        return outcomes

    def _commit(self, outcomes: list[Outcome]) -> list[Outcome]:
        """COMMIT (the fsync), or roll back what failed; then give the turn back."""
        conn = self._conn
        try:
            if conn.in_transaction:
                failed = all(exc is not None for _, exc in outcomes) and len(outcomes) > 0
                conn.execute("ROLLBACK" if failed else "COMMIT")
        except Exception as exc:
            log.exception("catalog commit failed")
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            outcomes = [(None, exc)] * len(outcomes)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
        return outcomes

    def _apply_and_commit(self, group: list[_Write]) -> list[Outcome]:
        return self._commit(self._apply(group))
