"""`s3gw migrate`: move a data folder's SQLite catalog into a PostgreSQL database.

Blob files stay where they are: both catalogs name them by the same ids, and rows.py stores
the same text in both, so a catalog moves table by table, row for row. The tables are taken
from the SQLite file itself (every table in it, whatever the schema version adds), each copied
into the PostgreSQL table of the same name and columns; the only conversions are the ones the
column types ask for (SQLite's 0/1 flags become booleans, BLOB keys bytea).

One PostgreSQL transaction holds the whole copy and its checks: a run that fails at any point
(a lost connection, a check that disagrees, ^C) leaves the target as empty as it found it, and
running the same command again is the way to resume. A resumable copy in several transactions
would leave a half-filled catalog that a gateway could be started on, and the refusal of a
target that already holds data (which keeps a catalog from being merged into another) would
have to tell a half-done run of ours from someone's data.

Checks before the commit, inside that transaction: the number of rows of every table and the
blobs' total reference count; then a random sample of objects, versions, uploads and buckets
read through both adapters' own readers (the gateway's code paths, not this module's SQL) must
give equal values, inline bytes included.

The folder is held exclusively the whole time (as fsck does): a gateway serving it could write
rows after they were copied. Once committed, a marker file (MOVED_MARKER) names the catalog's
new home, and the SQLite catalog refuses to open while it is there: a gateway started on the
old catalog by mistake would serve stale data, and its start-up sweep would delete every blob
written since through PostgreSQL. The old file is kept, for going back before anything was
written through PostgreSQL (delete the marker).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api import CatalogReader
from .blobs import FolderLock
from .sqlite.queries import SqliteReader
from .sqlite.schema import connect as sqlite_connect
from .sqlite.schema import initialise as sqlite_initialise

if TYPE_CHECKING:
    import psycopg

CATALOG_FILE = "catalog.sqlite3"
MOVED_MARKER = "catalog.moved"
BATCH = 1000
SAMPLE = 100

# PostgreSQL tables that are not data: the schema's version (made by the schema itself), and
# the per-key locks of versioned writes, empty outside a transaction.
_NOT_DATA = {"schema_version"}
_TRANSIENT = {"key_locks"}


class MigrateError(Exception):
    """Why the migration did not run or did not commit: one line for the operator."""


@dataclasses.dataclass
class Summary:
    source: Path
    target: str
    rows: dict[str, int]
    verified: dict[str, int]
    seconds: float

    def render(self) -> str:
        lines = [f"migrated {self.source} into {self.target} in {self.seconds:.1f} s"]
        width = max((len(t) for t in self.rows), default=0)
        lines += [f"  {table:<{width}}  {count:>10} rows" for table, count in self.rows.items()]
        checked = ", ".join(f"{n} {what}" for what, n in self.verified.items())
        lines.append(f"verified: row counts of {len(self.rows)} tables; read alike: {checked}")
        lines.append(
            f"start every gateway on this folder with --catalog {self.target} (S3GW_CATALOG); "
            f"{CATALOG_FILE} is kept, and refused while {MOVED_MARKER} is there"
        )
        return "\n".join(lines)


def moved_to(root: Path) -> str | None:
    """Where `migrate` moved the folder's catalog (None: it did not)."""
    marker = root / MOVED_MARKER
    return marker.read_text().strip() if marker.exists() else None


def migrate(
    root: Path,
    url: str,
    *,
    batch: int = BATCH,
    sample: int = SAMPLE,
    progress: Callable[[str], None] = lambda line: None,
) -> Summary:
    """Copy the catalog of the data folder `root` into the empty PostgreSQL database `url`,
    check it, commit it, and mark the folder as moved. Raises MigrateError, or FolderInUse
    while a gateway serves the folder."""
    from .postgres import describe

    where = describe(url)
    path = root / CATALOG_FILE
    if not root.is_dir():
        raise MigrateError(f"{root} is not a folder")
    if not path.exists():
        raise MigrateError(f"{root} holds no {CATALOG_FILE}: nothing to migrate")
    if moved_to(root) is not None:
        raise MigrateError(f"{root}'s catalog was already migrated, to {moved_to(root)}")
    lock = FolderLock(root)
    try:
        lock.exclusive(str(root), wait=0)
        started = time.monotonic()
        try:
            # An older catalog is brought to this gateway's schema first, as a start would.
            sqlite_initialise(path)
            source = sqlite_connect(path)
        except sqlite3.Error as exc:
            raise MigrateError(f"cannot read {path}: {exc}") from exc
        try:
            rows, verified = asyncio.run(_migrate(source, url, where, batch, sample, progress))
        finally:
            source.close()
        # Written once the commit is done: a failed run leaves the folder as it was.
        marker = root / MOVED_MARKER
        marker.write_text(where + "\n")
        return Summary(path, where, rows, verified, time.monotonic() - started)
    finally:
        lock.close()


async def _migrate(
    source: sqlite3.Connection,
    url: str,
    where: str,
    batch: int,
    sample: int,
    progress: Callable[[str], None],
) -> tuple[dict[str, int], dict[str, int]]:
    # Here, not at the top: a gateway on SQLite never loads the PostgreSQL driver.
    import psycopg

    from .postgres.queries import ConnReader
    from .postgres.schema import SchemaTooNew
    from .postgres.schema import initialise as pg_initialise

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            pg_initialise(conn)
        target = await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=5)
    except SchemaTooNew as exc:
        raise MigrateError(f"{where}: {exc}") from exc
    except psycopg.Error as exc:
        raise MigrateError(f"cannot reach {where}: {_one_line(exc)}") from exc
    try:
        # One snapshot of the source (nothing else writes it: the folder is ours).
        source.execute("BEGIN")
        tables = _sqlite_tables(source)
        async with target.transaction():
            columns = await _pg_columns(target)
            await _refuse_data(target, columns, where)
            rows: dict[str, int] = {}
            for table in tables:
                rows[table] = await _copy(source, target, table, columns, batch)
                progress(f"{table}: {rows[table]} rows")
            await _check_counts(source, target, rows)
            verified = await _compare(SqliteReader(source), ConnReader(target), source, sample)
        return rows, verified
    except psycopg.Error as exc:
        raise MigrateError(
            f"{where}: {_one_line(exc)} (nothing was committed; the target is as it was)"
        ) from exc
    finally:
        source.execute("ROLLBACK")
        await target.close()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _sqlite_tables(source: sqlite3.Connection) -> list[str]:
    return [
        name
        for (name,) in source.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]


def _sqlite_columns(source: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in source.execute(f'PRAGMA table_info("{table}")')]


async def _pg_columns(target: psycopg.AsyncConnection[Any]) -> dict[str, dict[str, str]]:
    """table -> column -> data type, for the tables of the connection's schema."""
    cur = await target.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema()"
    )
    found: dict[str, dict[str, str]] = {}
    for table, column, kind in await cur.fetchall():
        found.setdefault(table, {})[column] = kind
    return found


async def _refuse_data(
    target: psycopg.AsyncConnection[Any], columns: dict[str, dict[str, str]], where: str
) -> None:
    """A target with rows is someone's catalog: copying into it would merge two catalogs
    (and two sets of reference counts), which nothing can undo."""
    holding = []
    for table in sorted(set(columns) - _NOT_DATA):
        cur = await target.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')
        row = await cur.fetchone()
        if row and row[0]:
            holding.append(table)
    if holding:
        raise MigrateError(
            f"{where} already holds a catalog (rows in {', '.join(holding)}): "
            "migrate only into an empty database"
        )


def _converter(kind: str) -> Callable[[Any], Any]:
    """SQLite's value as the PostgreSQL column of type `kind` takes it."""
    if kind == "boolean":
        return lambda v: None if v is None else bool(v)
    if kind == "bytea":
        return lambda v: v.encode() if isinstance(v, str) else v
    return lambda v: v


async def _copy(
    source: sqlite3.Connection,
    target: psycopg.AsyncConnection[Any],
    table: str,
    columns: dict[str, dict[str, str]],
    batch: int,
) -> int:
    names = _sqlite_columns(source, table)
    if table in _TRANSIENT or table in _NOT_DATA:
        raise MigrateError(f"the SQLite catalog has a table {table!r} that holds no data")
    kinds = columns.get(table)
    if kinds is None:
        raise MigrateError(f"the PostgreSQL schema has no table {table!r}: a newer SQLite schema?")
    missing = [n for n in names if n not in kinds]
    if missing:
        raise MigrateError(f"the PostgreSQL table {table!r} has no column {', '.join(missing)}")
    convert = [_converter(kinds[n]) for n in names]
    quoted = ", ".join(f'"{n}"' for n in names)
    cursor = source.execute(f'SELECT {quoted} FROM "{table}"')
    count = 0
    statement = f'COPY "{table}" ({quoted}) FROM STDIN'
    async with target.cursor() as cur, cur.copy(statement) as copy:  # type: ignore[arg-type]
        for rows in _batches(cursor, batch):
            for row in rows:
                await copy.write_row([c(v) for c, v in zip(convert, row, strict=True)])
            count += len(rows)
    return count


def _batches(cursor: sqlite3.Cursor, size: int) -> Iterator[list[Any]]:
    while rows := cursor.fetchmany(size):
        yield rows


async def _check_counts(
    source: sqlite3.Connection, target: psycopg.AsyncConnection[Any], rows: dict[str, int]
) -> None:
    for table, copied in rows.items():
        (have,) = source.execute(f'SELECT count(*) FROM "{table}"').fetchone()
        cur = await target.execute(f'SELECT count(*) FROM "{table}"')
        row = await cur.fetchone()
        landed = row[0] if row else -1
        if not have == copied == landed:
            raise MigrateError(
                f"table {table}: {have} rows in SQLite, {copied} copied, {landed} in PostgreSQL"
            )
    (refs,) = source.execute("SELECT total(refs) FROM blobs").fetchone()
    cur = await target.execute("SELECT coalesce(sum(refs), 0) FROM blobs")
    row = await cur.fetchone()
    if row is None or int(row[0]) != int(refs):
        raise MigrateError(f"blob references: {int(refs)} in SQLite, {row} in PostgreSQL")


async def _compare(
    old: CatalogReader,
    new: CatalogReader,
    source: sqlite3.Connection,
    sample: int,
) -> dict[str, int]:
    """Read a random sample through both adapters' readers; any difference is an error."""
    checked = {"buckets": 0, "objects": 0, "inline bodies": 0, "versions": 0, "uploads": 0}

    def differ(what: str, a: object, b: object) -> None:
        if a != b:
            raise MigrateError(f"{what} reads differently: SQLite {a!r}, PostgreSQL {b!r}")

    buckets = await old.list_buckets(None)
    differ("the bucket list", buckets, await new.list_buckets(None))
    checked["buckets"] = len(buckets)
    for bucket, key in source.execute(
        "SELECT bucket, key FROM objects ORDER BY random() LIMIT ?", (sample,)
    ).fetchall():
        name = f"object {bucket}/{key.decode(errors='replace')}"
        obj = await old.get_object(bucket, key.decode())
        differ(name, obj, await new.get_object(bucket, key.decode()))
        checked["objects"] += 1
        if obj is not None:
            blobs = [e.blob for e in obj.extents]
            inline = await old.read_inline(blobs)
            differ(f"{name}'s inline bytes", inline, await new.read_inline(blobs))
            checked["inline bodies"] += len(inline)
    for bucket, key in source.execute(
        "SELECT DISTINCT bucket, key FROM versions ORDER BY random() LIMIT ?", (sample,)
    ).fetchall():
        name = f"the versions of {bucket}/{key.decode(errors='replace')}"
        end = key + b"\0"  # this key's rows only
        entries = await old.scan_versions(bucket, (key,), True, end, 1000)
        differ(name, entries, await new.scan_versions(bucket, (key,), True, end, 1000))
        for _, entry in entries:
            version = await old.get_version(bucket, entry.key, entry.version_id)
            differ(name, version, await new.get_version(bucket, entry.key, entry.version_id))
            checked["versions"] += 1
    for (upload_id,) in source.execute(
        "SELECT id FROM uploads ORDER BY random() LIMIT ?", (sample,)
    ).fetchall():
        name = f"upload {upload_id}"
        differ(name, await old.get_upload(upload_id), await new.get_upload(upload_id))
        parts = await old.list_parts(upload_id, 0, 10000)
        differ(f"{name}'s parts", parts, await new.list_parts(upload_id, 0, 10000))
        checked["uploads"] += 1
    return checked
