"""The PostgreSQL catalog adapter: api.Catalog over a PostgreSQL database, for several gateway
nodes (and their worker processes) sharing one catalog. The only place in the gateway that
speaks SQL to PostgreSQL.

Driver: psycopg 3 (the measurement and the reasons are in pyproject.toml), with a pool of its
own that has no background tasks (pool.py says why).

Isolation: READ COMMITTED with explicit row locks, not REPEATABLE READ or SERIALIZABLE.
- Reference counts change by `UPDATE ... refs = refs + n` (RETURNING the new count), which
  locks the row and works on its newest version; a blob is deleted only while that lock is
  held. Two writers on the same blob queue on its row; neither fails. A write's count changes
  are applied at its end, in id order, so that writers lock rows in one order.
- A write's reads lock what it depends on (queries.py): the object a condition or a copy
  checks, the bucket a row goes into, the upload a part goes into. Deleting a bucket or an
  upload takes the exclusive lock before it looks at what it holds. Under REPEATABLE READ that
  does not work: the snapshot is taken before the lock is waited for, so the check that
  follows would read what was there before the writer it waited for.
- Two writers making the same key at once both find no row. The second's insert meets the
  first's row: it replaces it as a later write would (references released), unless its write
  checked that key's state (a condition), which then runs again. Other rows made twice at
  once (a bucket, a part number) fail with a unique violation. Such conflicts, serialization
  failures and deadlocks run `fn` again from the start in a new transaction, a bounded number
  of times with jittered backoff, seeing the other's commit. The Store's write functions can
  run again: they take their timestamps inside, and a failed attempt leaves nothing.
The statements are also valid on engines that run everything SERIALIZABLE (CockroachDB by
default): there every one of these races surfaces as SQLSTATE 40001 and is retried. The
catalog URL's `s3gw_isolation=serializable` begins every write SERIALIZABLE for them (the
contract suite runs so on PostgreSQL too); the parameter is the gateway's, taken off the URL
before libpq sees it. Nothing here uses advisory locks, LISTEN/NOTIFY or sequences but the
outbox's identity (tests/unit/test_postgres_portability.py reads the SQL for them).

YugabyteDB runs READ COMMITTED as Snapshot isolation unless its tservers have
`yb_enable_read_committed_isolation`: the locks above would then guard stale snapshots, so a
start there is refused unless the URL chose SERIALIZABLE (`engine_refusal`).

Connections: an asyncio pool, made the first time a call runs in an event loop (never before
the loop: the Store may be made before it, and the gateway forks workers after making one;
a connection never crosses a fork or a loop). Point reads take a pooled connection each, in
autocommit; a scan runs in one REPEATABLE READ READ ONLY transaction (one snapshot per
listing page); a write runs in its own task, so that it reaches its COMMIT or ROLLBACK
whatever becomes of the caller. The blocking calls (`totals`, `writable`) use one plain
connection, from any thread. A lost database is CatalogUnavailable
(503 to clients); connections are made again as calls need them once the database is back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo

from .. import errors
from ..api import CatalogAudit, CatalogReader, CatalogTx
from .pool import ConnectionPool, PoolClosed, PoolTimeout
from .queries import BEGIN, BEGIN_SERIALIZABLE, Conflict, PostgresAudit, PostgresTx
from .reads import ConnReader, PooledReader, Row
from .schema import MigrationFailed, SchemaTooNew, initialise

__all__ = ["PostgresCatalog"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# Conflicts with concurrent writers: the write is run again from the start. 40001
# serialization failure, 40P01 deadlock, 23505 unique violation (two created the same row).
RETRIED = frozenset({"40001", "40P01", "23505"})
ATTEMPTS = 12
# SQLSTATE classes that mean the database is not there to answer: connection exception,
# insufficient resources (too many connections), operator intervention (shutting down).
_UNAVAILABLE_CLASSES = ("08", "53", "57")

# Pools and connections left behind by a fork: they belong to the parent, and must not be
# finalised in the child (libpq would say goodbye to the server on the parent's socket).
_INHERITED: list[object] = []


def describe(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL catalog (an invalid URL)"
    user = f"{params['user']}@" if params.get("user") else ""
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{params.get('host', '')}{port}/{params.get('dbname', '')}"


# The catalog URL's own parameter (not libpq's): the isolation writes begin with.
ISOLATION_PARAMETER = "s3gw_isolation"
ISOLATIONS = {"read-committed": BEGIN, "serializable": BEGIN_SERIALIZABLE}
YB_READ_COMMITTED = "yb_enable_read_committed_isolation"


def split_isolation(url: str) -> tuple[str, str]:
    """The URL libpq is given (without `s3gw_isolation`, which libpq would refuse), and the
    isolation it names (read-committed unless it says serializable). Other parameters are
    kept byte for byte (a multi-host URL's `target_session_attrs` among them)."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, "read-committed"
    kept, isolation = [], "read-committed"
    for item in query.split("&"):
        name, _, value = item.partition("=")
        if name == ISOLATION_PARAMETER:
            isolation = value.lower()
            if isolation not in ISOLATIONS:
                raise errors.StoreError(
                    f"the catalog URL's {ISOLATION_PARAMETER} must be "
                    f"{' or '.join(ISOLATIONS)}, not {value!r}"
                )
        elif item:
            kept.append(item)
    return (f"{base}?{'&'.join(kept)}" if kept else base), isolation


def engine_refusal(version: str, read_committed: str | None, isolation: str) -> str | None:
    """Why the catalog must not be served on this engine (None: it may), from its `SELECT
    version()`, its `yb_enable_read_committed_isolation` (None: SHOW did not know it) and the
    isolation the URL chose. YugabyteDB without that flag runs READ COMMITTED as Snapshot
    isolation (docs.yugabyte.com, "Isolation levels"), without a word: the row locks the
    writes rely on (queries.py) would guard reads of a snapshot taken before the wait."""
    if "-YB-" not in version or isolation == "serializable":
        return None
    if (read_committed or "").strip().lower() in ("on", "true", "1"):
        return None
    shown = "unknown" if read_committed is None else read_committed
    return (
        f"YugabyteDB runs READ COMMITTED as Snapshot isolation unless the tservers' "
        f"{YB_READ_COMMITTED} flag is true (it is {shown}): set it, or add "
        f"{ISOLATION_PARAMETER}=serializable to the catalog URL"
    )


def _engine_check(isolation: str) -> Callable[[psycopg.Connection[Any]], str | None]:
    def check(conn: psycopg.Connection[Any]) -> str | None:
        row = conn.execute("SELECT version()").fetchone()
        version = str(row[0]) if row else ""
        if "-YB-" not in version:
            return None
        try:
            setting = conn.execute(f"SHOW {YB_READ_COMMITTED}").fetchone()
        except psycopg.errors.UndefinedObject:
            setting = None
        return engine_refusal(version, str(setting[0]) if setting else None, isolation)

    return check


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _conflict(exc: BaseException) -> str | None:
    """What a write ran into that running it again resolves (None: nothing of the kind)."""
    if isinstance(exc, Conflict):
        return "a row it read was replaced"
    state = getattr(exc, "sqlstate", None)
    return state if state in RETRIED else None


def _lost(exc: BaseException) -> bool:
    """Does `exc` say the database is unreachable (rather than refusing a statement)?"""
    if isinstance(exc, PoolTimeout | PoolClosed):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state[:2] in _UNAVAILABLE_CLASSES


class PostgresCatalog:
    """api.Catalog on a PostgreSQL database."""

    def __init__(
        self,
        url: str,
        pool: concurrent.futures.Executor,
        *,
        pool_size: int = 10,
        pool_timeout: float = 5.0,
        connect_timeout: int = 5,
    ) -> None:
        """`pool_size`: connections per process (one process of one node). `pool_timeout`:
        how long a request waits for a busy pool before it is answered 503. (`pool`, the
        Store's threads, is not needed: every call awaits the network, none blocks.)"""
        self.url, self.isolation = split_isolation(url)
        self._begin = ISOLATIONS[self.isolation]
        self.where = describe(self.url)
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self._connect = {"connect_timeout": connect_timeout, "application_name": "s3gw"}
        self._pool: ConnectionPool | None = None
        self._owner: tuple[int, asyncio.AbstractEventLoop] | None = None
        self._sync: psycopg.Connection[Any] | None = None
        self._sync_pid = 0
        self._sync_lock = threading.Lock()
        self._writes: set[asyncio.Task[Any]] = set()
        self._closed = False
        try:
            refusal = self.blocking(_engine_check(self.isolation))
            if refusal is not None:
                raise errors.StoreError(f"cannot serve the catalog {self.where}: {refusal}")
            self.blocking(initialise)
        except (psycopg.Error, SchemaTooNew, MigrationFailed) as exc:
            message = f"cannot open the catalog {self.where}: {_one_line(exc)}"
            raise errors.StoreError(message) from exc
        self.reader: CatalogReader = PooledReader(self)
        self.audit: CatalogAudit = PostgresAudit(self)

    # --- connections ---------------------------------------------------------------------------

    def blocking(self, fn: Callable[[psycopg.Connection[Any]], T], *, alone: bool = False) -> T:
        """Run `fn` over the catalog's plain (blocking) connection, from any thread; a lost
        connection is made again once. `alone`: a long call, on a connection of its own, so
        as not to hold up the others (readiness) meanwhile."""
        if alone:
            try:
                with psycopg.connect(self.url, autocommit=True, **self._connect) as conn:
                    return fn(conn)
            except psycopg.Error as exc:
                if _lost(exc):
                    raise self._unavailable(exc) from exc
                raise
        with self._sync_lock:
            for attempt in (1, 2):
                conn = self._sync_connection()
                try:
                    return fn(conn)
                except psycopg.Error as exc:
                    if not (_lost(exc) or conn.broken):
                        raise
                    self._sync = None
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
                    if attempt == 2:
                        raise self._unavailable(exc) from exc
        raise AssertionError("unreachable")

    def _sync_connection(self) -> psycopg.Connection[Any]:
        if self._sync is not None and self._sync_pid != os.getpid():
            _INHERITED.append(self._sync)
            self._sync = None
        if self._sync is None or self._sync.closed:
            try:
                self._sync = psycopg.connect(self.url, autocommit=True, **self._connect)
            except psycopg.Error as exc:
                raise self._unavailable(exc) from exc
            self._sync_pid = os.getpid()
        return self._sync

    def _unavailable(self, exc: BaseException) -> errors.CatalogUnavailable:
        return errors.CatalogUnavailable(f"cannot reach the catalog {self.where}: {_one_line(exc)}")

    def _pool_now(self) -> ConnectionPool:
        """This process's and this event loop's pool, made on first use."""
        if self._closed:
            raise PoolClosed("the catalog is closed")
        owner = (os.getpid(), asyncio.get_running_loop())
        if self._owner != owner:
            self._let_go()
            self._pool = ConnectionPool(self.url, self._connect, self.pool_size, self.pool_timeout)
            self._owner = owner
        assert self._pool is not None
        return self._pool

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._pool_now().connection() as conn:
            yield conn

    def _after_loss(self) -> None:
        """After a lost connection: drop the pool's idle connections, made before the same
        loss (a server restart ends them all)."""
        if self._pool is not None:
            self._pool.discard_idle()

    # --- reads ---------------------------------------------------------------------------------

    async def read(self, sql: str, args: Sequence[Any]) -> list[Row]:
        """One statement on a pooled connection (autocommit)."""
        for attempt in (1, 2):
            try:
                async with self.connection() as conn:
                    cur = await conn.execute(sql, args)  # type: ignore[arg-type]
                    return await cur.fetchall()
            except psycopg.Error as exc:
                if not _lost(exc):
                    raise
                if attempt == 2 or isinstance(exc, PoolTimeout | PoolClosed):
                    raise self._unavailable(exc) from exc
                self._after_loss()  # an idle connection the server had closed
        raise AssertionError("unreachable")

    async def scan(self, fn: Callable[[CatalogReader], Awaitable[T]]) -> T:
        """`fn`'s reads in one REPEATABLE READ READ ONLY transaction: one snapshot."""
        for attempt in (1, 2):
            try:
                async with self.connection() as conn:
                    await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    try:
                        return await fn(ConnReader(conn))
                    finally:
                        with contextlib.suppress(psycopg.Error):
                            await conn.execute("ROLLBACK")
            except psycopg.Error as exc:
                if not _lost(exc):
                    raise
                if attempt == 2 or isinstance(exc, PoolTimeout | PoolClosed):
                    raise self._unavailable(exc) from exc
                self._after_loss()
        raise AssertionError("unreachable")

    async def stream(self, sql: str) -> AsyncIterator[Row]:
        """A whole-table read through a server-side cursor, in one snapshot."""
        try:
            async with self.connection() as conn:
                await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    async with conn.cursor(name="audit") as cur:
                        await cur.execute(sql)  # type: ignore[arg-type]
                        async for row in cur:
                            yield row
                finally:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK")
        except psycopg.Error as exc:
            if _lost(exc):
                raise self._unavailable(exc) from exc
            raise

    # --- writes --------------------------------------------------------------------------------

    def write(
        self, fn: Callable[[CatalogTx], Awaitable[T]], *, long: bool = False
    ) -> asyncio.Future[tuple[T, list[str]]]:
        # `long` changes nothing here: every statement awaits the network, none blocks the loop.
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[tuple[T, list[str]]] = loop.create_future()
        task = loop.create_task(self._transact(fn))
        self._writes.add(task)

        def settled(task: asyncio.Task[tuple[T, list[str]]]) -> None:
            self._writes.discard(task)
            if task.cancelled():  # the loop is shutting down
                if not outcome.done():
                    outcome.set_exception(errors.CatalogUnavailable("the write was interrupted"))
                return
            exc = task.exception()
            if outcome.done():  # its caller went away: the outcome stands regardless
                return
            if exc is not None:
                outcome.set_exception(exc)
            else:
                outcome.set_result(task.result())

        task.add_done_callback(settled)
        return outcome

    async def _transact(self, fn: Callable[[CatalogTx], Awaitable[T]]) -> tuple[T, list[str]]:
        """Run `fn` in a transaction until it commits, fails on its own, or keeps conflicting."""
        backoff = 0.001
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self._attempt(fn)
            except (psycopg.Error, Conflict) as exc:
                conflict = _conflict(exc)
                if conflict is not None:
                    if attempt == ATTEMPTS:
                        log.warning("a catalog write kept conflicting (%s): %s", conflict, exc)
                        raise errors.SourceChanged(
                            "The write kept conflicting with concurrent writes; retry it."
                        ) from exc
                    log.debug("catalog write conflicted (%s): running it again", conflict)
                    await asyncio.sleep(random.uniform(0, backoff))
                    backoff = min(2 * backoff, 0.1)
                    continue
                if not _lost(exc):
                    raise
                # Lost before its COMMIT was sent (a lost COMMIT raises CommitOutcomeUnknown):
                # nothing was written, and a connection the server had closed is replaced.
                if attempt >= 2 or isinstance(exc, PoolTimeout | PoolClosed):
                    raise self._unavailable(exc) from exc
                self._after_loss()
        raise AssertionError("unreachable")

    async def _attempt(self, fn: Callable[[CatalogTx], Awaitable[T]]) -> tuple[T, list[str]]:
        async with self.connection() as conn:
            tx = PostgresTx(conn, self._begin)  # its BEGIN goes with its first statement
            try:
                result = await fn(tx)
                await tx.settle()
                await tx.flush()
            except BaseException:
                if tx.begun:
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK")
                raise
            try:
                await conn.execute("COMMIT")
            except psycopg.Error as exc:
                if _lost(exc) or conn.broken:
                    raise errors.CommitOutcomeUnknown(
                        f"lost the catalog {self.where} while committing: {_one_line(exc)}"
                    ) from exc
                raise  # refused at commit (a serialization failure): rolled back, retried
            return result, tx.released

    # --- blocking calls ------------------------------------------------------------------------

    def totals(self) -> tuple[int, int]:
        count, size = self.blocking(
            # Older versions take space too (they are not objects a listing shows).
            lambda conn: conn.execute(
                "SELECT count(*), coalesce(sum(size), 0) "
                "+ (SELECT coalesce(sum(size), 0) FROM versions) FROM objects"
            ).fetchone(),
            alone=True,  # a whole-table scan
        )
        return int(count), int(size)

    def writable(self) -> bool:
        try:
            row = self.blocking(lambda conn: conn.execute("SHOW transaction_read_only").fetchone())
        except errors.CatalogUnavailable:
            return False
        return row is not None and row[0] == "off"

    def close(self) -> None:
        self._closed = True
        self._let_go()
        with self._sync_lock:
            conn, self._sync = self._sync, None
            if conn is not None:
                if self._sync_pid == os.getpid():
                    conn.close()
                else:
                    _INHERITED.append(conn)

    def _let_go(self) -> None:
        """Close the pool of another loop (or of this one, on close); forget, without closing,
        the pool of the process this one was forked from."""
        pool, owner = self._pool, self._owner
        self._pool = self._owner = None
        if pool is None or owner is None:
            return
        if owner[0] != os.getpid():
            _INHERITED.extend(pool.abandon())
        else:
            pool.close()
