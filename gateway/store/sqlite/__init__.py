"""The SQLite catalog adapter (the embedded default): api.Catalog over `catalog.sqlite3` in the
data folder. The only place in the gateway that speaks SQL to SQLite.

Point reads run on the event loop's own read connection (a primary-key lookup in WAL mode takes
microseconds and never waits for the writer); scans run in a thread pool, each thread with a
read connection of its own; writes go through the group-commit writer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from .. import errors
from ..api import CatalogAudit, CatalogReader, CatalogTx, complete_now
from .export import moved_to
from .queries import SqliteAudit, SqliteReader
from .schema import connect, initialise
from .writer import GroupWriter

__all__ = ["SqliteCatalog", "StorageFault"]

T = TypeVar("T")

# What a failing catalog raises (a full disk, a read-only folder): the protocol layer answers
# these with 503.
StorageFault = sqlite3.Error


class SqliteCatalog:
    """api.Catalog on a SQLite file."""

    def __init__(self, path: Path, pool: concurrent.futures.Executor) -> None:
        self.path = path
        moved = moved_to(path.parent)
        if moved is not None:
            # Its blobs are the moved catalog's now: a start on the old file would serve stale
            # rows, and its sweep would delete every blob written since.
            raise errors.StoreError(
                f"{path.parent}'s catalog was migrated to {moved}: use --catalog with that URL"
            )
        try:
            initialise(path)
            self._writer = GroupWriter(path)
            self.reader: CatalogReader = SqliteReader(connect(path))
        except sqlite3.Error as exc:
            raise errors.StoreError(f"cannot open the catalog {path}: {exc}") from exc
        self._pool = pool
        self.audit: CatalogAudit = SqliteAudit(self.reader.conn)  # type: ignore[attr-defined]
        self._local = threading.local()

    def close(self) -> None:
        self._writer.close()
        self.reader.conn.close()  # type: ignore[attr-defined]

    async def scan(self, fn: Callable[[CatalogReader], Awaitable[T]]) -> T:
        def run() -> T:
            reader = getattr(self._local, "reader", None)
            if reader is None:
                reader = self._local.reader = SqliteReader(connect(self.path))
            return complete_now(fn(reader))  # type: ignore[arg-type]

        return await asyncio.get_running_loop().run_in_executor(self._pool, run)

    def write(
        self, fn: Callable[[CatalogTx], Awaitable[T]], *, long: bool = False
    ) -> asyncio.Future[tuple[T, list[str]]]:
        return self._writer.run(fn, long=long)  # type: ignore[arg-type]

    def totals(self) -> tuple[int, int]:
        try:
            conn = connect(self.path)
            try:
                count, size = conn.execute("SELECT count(*), total(size) FROM objects").fetchone()
                # Older versions take space too (they are not objects a listing shows).
                (older,) = conn.execute("SELECT total(size) FROM versions").fetchone()
                size += older
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise errors.StoreError(f"cannot count the objects: {exc}") from exc
        return count, int(size)

    def writable(self) -> bool:
        try:
            conn = connect(self.path)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            finally:
                conn.close()
        except sqlite3.Error:
            return False
        return True
