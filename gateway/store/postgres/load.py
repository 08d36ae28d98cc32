"""The PostgreSQL catalog filled by `s3gw migrate` (store/migrate.py): one connection, one
transaction, rows streamed in with COPY, converted to the column types PostgreSQL declares
(SQLite's 0/1 flags become booleans)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import psycopg

from .. import errors
from ..api import CatalogReader
from .reads import ConnReader
from .schema import SchemaTooNew, initialise

# Tables that hold no catalog data: the schema's version (the schema makes it), and the
# per-key locks of versioned writes (empty outside a transaction).
NOT_DATA = frozenset({"schema_version", "key_locks"})


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class PostgresImport:
    """An empty PostgreSQL catalog being filled; `where` names it without its password."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], where: str) -> None:
        self.conn = conn
        self.where = where
        self.reader: CatalogReader = ConnReader(conn)

    @classmethod
    async def connect(cls, url: str) -> PostgresImport:
        """Its schema made or migrated, as a gateway's first start would (the URL the
        gateway will serve it with: its `s3gw_isolation` is the gateway's, not libpq's)."""
        from . import describe, split_isolation

        url, _ = split_isolation(url)
        where = describe(url)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                initialise(conn)
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=5)
        except SchemaTooNew as exc:
            raise errors.StoreError(f"{where}: {exc}") from exc
        except psycopg.Error as exc:
            raise errors.StoreError(f"cannot reach {where}: {_one_line(exc)}") from exc
        return cls(conn, where)

    async def close(self) -> None:
        await self.conn.close()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """Everything inside commits together or not at all; a database error is a
        StoreError."""
        try:
            async with self.conn.transaction():
                yield
        except psycopg.Error as exc:
            raise errors.StoreError(f"{self.where}: {_one_line(exc)}") from exc

    async def columns(self) -> dict[str, dict[str, str]]:
        """table -> column -> data type, for the data tables of the schema."""
        cur = await self.conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema()"
        )
        found: dict[str, dict[str, str]] = {}
        for table, column, kind in await cur.fetchall():
            if table not in NOT_DATA:
                found.setdefault(table, {})[column] = kind
        return found

    async def tables_with_rows(self) -> list[str]:
        holding = []
        for table in sorted(await self.columns()):
            cur = await self.conn.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')
            row = await cur.fetchone()
            if row and row[0]:
                holding.append(table)
        return holding

    async def copy(
        self, table: str, columns: list[str], kinds: dict[str, str], batches: Iterable[list[Any]]
    ) -> int:
        convert = [_converter(kinds[c]) for c in columns]
        quoted = ", ".join(f'"{c}"' for c in columns)
        count = 0
        statement = f'COPY "{table}" ({quoted}) FROM STDIN'
        async with self.conn.cursor() as cur, cur.copy(statement) as copy:  # type: ignore[arg-type]
            for rows in batches:
                for row in rows:
                    await copy.write_row([c(v) for c, v in zip(convert, row, strict=True)])
                count += len(rows)
        return count

    async def continue_sequence(self, table: str, column: str, last: int) -> None:
        """Make the identity `table.column` give numbers after `last` (COPY writes the given
        values without moving it)."""
        if last > 0:
            await self.conn.execute(
                "SELECT setval(pg_get_serial_sequence(%s, %s), %s)", (table, column, last)
            )

    async def count(self, table: str) -> int:
        cur = await self.conn.execute(f'SELECT count(*) FROM "{table}"')
        row = await cur.fetchone()
        return int(row[0]) if row else -1

    async def total_refs(self) -> int:
        cur = await self.conn.execute("SELECT coalesce(sum(refs), 0) FROM blobs")
        row = await cur.fetchone()
        return int(row[0]) if row else -1


def _converter(kind: str) -> Any:
    """SQLite's value as the PostgreSQL column of type `kind` takes it."""
    if kind == "boolean":
        return lambda v: None if v is None else bool(v)
    if kind == "bytea":
        return lambda v: v.encode() if isinstance(v, str) else v
    return lambda v: v
