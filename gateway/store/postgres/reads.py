"""The PostgreSQL catalog's reads (api.CatalogReader): from the pool's connections, or from a
write's own connection (ConnReader, which PostgresTx extends with its writes and locks:
queries.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from ..api import Cursor, doc_table
from ..model import (
    NULL_VERSION,
    Bucket,
    ListEntry,
    ObjectInfo,
    OutboxRecord,
    Part,
    Upload,
)
from ..rows import (
    BUCKET_COLUMNS,
    OBJECT_COLUMNS,
    OBJECT_ENTRY_COLUMNS,
    PART_COLUMNS,
    UPLOAD_COLUMNS,
    VERSION_COLUMNS,
    VERSION_ENTRY_COLUMNS,
    bucket_and_object_from_row,
    bucket_from_row,
    object_entry,
    object_from_row,
    part_from_row,
    upload_from_row,
    version_entry,
    version_from_row,
)

if TYPE_CHECKING:
    from . import PostgresCatalog

Row = tuple[Any, ...]


# get_object_inline: the object's columns, then its first extent's blob (a multipart object's
# manifest, of up to 10,000 extents, is not parsed for it).
OBJECT_AND_BLOB = (
    f"SELECT {', '.join('o.' + c for c in OBJECT_COLUMNS.split(', '))}, b.id, b.data "
    "FROM objects o LEFT JOIN blobs b ON b.id = "
    "CASE WHEN o.parts IS NULL THEN o.manifest::json->0->>0 END "
    "WHERE o.bucket = %s AND o.key = %s"
)


# get_bucket_and_object: the bucket's columns, then OBJECT_AND_BLOB's (all NULL when the key has
# no object). The object's row is found by its primary key under the bucket's.
_BUCKETOBJECT_AND_BLOB = (
    f"SELECT {', '.join('k.' + c for c in BUCKET_COLUMNS.split(', '))}, "
    f"{', '.join('o.' + c for c in OBJECT_COLUMNS.split(', '))}, b.id, b.data "
    "FROM buckets k LEFT JOIN objects o ON o.bucket = k.name AND o.key = %s "
    "LEFT JOIN blobs b ON b.id = "
    "CASE WHEN o.parts IS NULL THEN o.manifest::json->0->>0 END "
    "WHERE k.name = %s"
)


def after(columns: Sequence[str], cursor: Cursor, inclusive: bool) -> tuple[str, list[Any]]:
    """`(c1, c2, ...) > (%s, %s, ...)` over as many leading columns as the cursor has."""
    lead = columns[: len(cursor)]
    op = ">=" if inclusive else ">"
    if len(lead) == 1:
        return f"{lead[0]} {op} %s", list(cursor)
    return f"({', '.join(lead)}) {op} ({', '.join(['%s'] * len(lead))})", list(cursor)


def version_where(version_id: str) -> tuple[str, tuple[str, ...]]:
    """A key's row of the versions table by id: a real id is the row's `seq`; the null
    version is found by its flag (through the partial unique index)."""
    if version_id == NULL_VERSION:
        return "is_null", ()
    return "seq = %s AND NOT is_null", (version_id,)


class Reads:
    """api.CatalogReader's statements, over whatever runs them (`_all`)."""

    # Inside a write transaction these reads lock what the write depends on (PostgresTx).
    _BUCKET_LOCK = ""
    _OBJECT_LOCK = ""
    _UPLOAD_LOCK = ""

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        raise NotImplementedError

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        rows = await self._all(sql, args)
        return rows[0] if rows else None

    async def get_bucket(self, name: str) -> Bucket | None:
        row = await self._one(
            f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE name = %s{self._BUCKET_LOCK}", (name,)
        )
        return bucket_from_row(row) if row else None

    async def list_buckets(self, owner: str | None) -> list[Bucket]:
        if owner is None:
            rows = await self._all(f"SELECT {BUCKET_COLUMNS} FROM buckets ORDER BY name")
        else:
            rows = await self._all(
                f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE owner = %s ORDER BY name", (owner,)
            )
        return [bucket_from_row(row) for row in rows]

    async def get_object(self, bucket: str, key: str) -> ObjectInfo | None:
        sql = f"SELECT {OBJECT_COLUMNS} FROM objects WHERE bucket = %s AND key = %s"
        row = await self._one(sql + self._OBJECT_LOCK, (bucket, key.encode()))
        if row is None and self._OBJECT_LOCK:
            # A locking read that waited for a transaction which deleted the row skips it,
            # and never sees a row that transaction inserted for the same key (a replaced
            # object is a new row). The next statement's snapshot has that commit in it.
            row = await self._one(sql + self._OBJECT_LOCK, (bucket, key.encode()))
        return object_from_row(bucket, row) if row else None

    async def get_version(self, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
        where, args = version_where(version_id)
        row = await self._one(
            f"SELECT {VERSION_COLUMNS} FROM versions WHERE bucket = %s AND key = %s AND {where}",
            (bucket, key.encode(), *args),
        )
        return version_from_row(bucket, row) if row else None

    async def newest_version(self, bucket: str, key: str) -> ObjectInfo | None:
        row = await self._one(
            f"SELECT {VERSION_COLUMNS} FROM versions WHERE bucket = %s AND key = %s "
            "ORDER BY seq LIMIT 1",
            (bucket, key.encode()),
        )
        return version_from_row(bucket, row) if row else None

    async def get_upload(self, upload_id: str) -> Upload | None:
        row = await self._one(
            f"SELECT {UPLOAD_COLUMNS} FROM uploads WHERE id = %s{self._UPLOAD_LOCK}", (upload_id,)
        )
        return upload_from_row(row) if row else None

    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]:
        rows = await self._all(
            f"SELECT {PART_COLUMNS} FROM parts WHERE upload_id = %s AND number > %s "
            "ORDER BY number LIMIT %s",
            (upload_id, after, None if limit < 0 else limit),  # LIMIT NULL: all of them
        )
        return [part_from_row(upload_id, row) for row in rows]

    async def scan_objects(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, ListEntry]]:
        where, args = after(("key",), cursor, inclusive)
        bound = " AND key < %s" if end is not None else ""
        rows = await self._all(
            f"SELECT {OBJECT_ENTRY_COLUMNS} FROM objects "
            f"WHERE bucket = %s AND {where}{bound} ORDER BY key LIMIT %s",
            [bucket, *args, *([end] if end is not None else []), limit],
        )
        return [object_entry(row) for row in rows]

    async def scan_versions(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, ListEntry]]:
        # bytea and "C" text compare as bytes: the order of SQLite's BLOB and TEXT columns.
        where, args = after(("key", "seq"), cursor, inclusive)
        bound = " AND key < %s" if end is not None else ""
        rows = await self._all(
            f"SELECT {VERSION_ENTRY_COLUMNS} FROM versions "
            f"WHERE bucket = %s AND {where}{bound} ORDER BY key, seq LIMIT %s",
            [bucket, *args, *([end] if end is not None else []), limit],
        )
        return [version_entry(row) for row in rows]

    async def scan_uploads(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, Upload]]:
        where, args = after(("key", "initiated_ns", "id"), cursor, inclusive)
        bound = " AND key < %s" if end is not None else ""
        rows = await self._all(
            f"SELECT {UPLOAD_COLUMNS} FROM uploads WHERE bucket = %s AND {where}{bound} "
            "ORDER BY key, initiated_ns, id LIMIT %s",
            [bucket, *args, *([end] if end is not None else []), limit],
        )
        return [((row[2], row[3], row[0]), upload_from_row(row)) for row in rows]

    async def read_inline(self, blob_ids: Iterable[str]) -> dict[str, bytes]:
        rows = await self._all(
            "SELECT id, data FROM blobs WHERE id = ANY(%s) AND data IS NOT NULL",
            (sorted(set(blob_ids)),),
        )
        return {blob: data for blob, data in rows}

    async def get_object_inline(
        self, bucket: str, key: str
    ) -> tuple[ObjectInfo, dict[str, bytes | None]] | None:
        row = await self._one(OBJECT_AND_BLOB, (bucket, key.encode()))
        if row is None:
            return None
        blob, data = row[-2:]
        return object_from_row(bucket, row[:-2]), {} if blob is None else {blob: data}

    async def get_bucket_and_object(
        self, bucket: str, key: str
    ) -> tuple[Bucket, tuple[ObjectInfo, dict[str, bytes | None]] | None] | None:
        row = await self._one(_BUCKETOBJECT_AND_BLOB, (key.encode(), bucket))
        return None if row is None else bucket_and_object_from_row(bucket, row)

    async def known_blobs_among(self, blob_ids: Sequence[str]) -> set[str]:
        # One statement, one snapshot: a commit that turned an intent into a blob between
        # two reads would otherwise be seen in neither.
        rows = await self._all(
            "SELECT blob_id FROM blob_intents WHERE blob_id = ANY(%s) "
            "UNION ALL SELECT id FROM blobs WHERE id = ANY(%s)",
            (list(blob_ids), list(blob_ids)),
        )
        return {blob for (blob,) in rows}

    async def file_blobs_among(self, blob_ids: Sequence[str]) -> set[str]:
        rows = await self._all(
            "SELECT id FROM blobs WHERE id = ANY(%s) AND data IS NULL", (list(blob_ids),)
        )
        return {blob for (blob,) in rows}

    async def get_iam_account(self, account: str) -> str | None:
        row = await self._one("SELECT doc FROM iam_accounts WHERE account = %s", (account,))
        return row[0] if row else None

    async def get_iam_entities(
        self, account: str, kind: str, names: Sequence[str]
    ) -> dict[str, str]:
        rows = await self._all(
            "SELECT name, doc FROM iam_entities WHERE account = %s AND kind = %s "
            "AND name = ANY(%s)",
            (account, kind, list(names)),
        )
        return dict(rows)  # type: ignore[arg-type]

    async def list_iam_entities(
        self, account: str, kind: str, containing: str | None = None
    ) -> dict[str, str]:
        sql = "SELECT name, doc FROM iam_entities WHERE account = %s AND kind = %s"
        if containing is None:
            return dict(await self._all(sql, (account, kind)))  # type: ignore[arg-type]
        rows = await self._all(f"{sql} AND strpos(doc, %s) > 0", (account, kind, containing))
        return dict(rows)  # type: ignore[arg-type]

    async def iam_counts(self, account: str) -> dict[str, int]:
        rows = await self._all(
            "SELECT kind, count(*) FROM iam_entities WHERE account = %s GROUP BY kind "
            "UNION ALL SELECT 'access_key', count(*) FROM access_keys "
            "WHERE account = %s AND user_name > ''",
            (account, account),
        )
        return {kind: int(n) for kind, n in rows if n}

    async def iam_attachment_counts(self, account: str, arns: Sequence[str]) -> dict[str, int]:
        rows = await self._all(
            "SELECT policy_arn, count(*) FROM iam_attachments WHERE account = %s "
            "AND policy_arn = ANY(%s) GROUP BY policy_arn",
            (account, list(arns)),
        )
        return {arn: int(n) for arn, n in rows}

    async def iam_group_members(self, account: str, group: str) -> list[str]:
        rows = await self._all(
            "SELECT user_name FROM iam_members WHERE account = %s AND group_name = %s",
            (account, group),
        )
        return [name for (name,) in rows]

    async def access_key_owner(self, access_key: str) -> tuple[str, str] | None:
        row = await self._one(
            "SELECT account, user_name FROM access_keys WHERE access_key = %s", (access_key,)
        )
        return (row[0], row[1]) if row else None

    async def read_outbox(
        self, limit: int, parts: Sequence[int] | None = None
    ) -> list[OutboxRecord]:
        columns = "seq, bucket, key, event, version_id, time_ns, facts, part"
        if parts is None:
            rows = await self._all(f"SELECT {columns} FROM outbox ORDER BY seq LIMIT %s", (limit,))
        else:
            # Each partition's first rows by its index (part, seq), then in order.
            one = f"(SELECT {columns} FROM outbox WHERE part = %s ORDER BY seq LIMIT %s)"
            statement = " UNION ALL ".join([one] * len(parts)) + " ORDER BY seq"
            rows = await self._all(statement, tuple(v for p in parts for v in (p, limit)))
        return [
            OutboxRecord(seq, bucket, bytes(key).decode(), event, version_id, time_ns, facts, part)
            for seq, bucket, key, event, version_id, time_ns, facts, part in rows
        ]

    async def count_outbox(self, parts: Sequence[int] | None = None) -> int:
        if parts is None:
            row = await self._one("SELECT count(*) FROM outbox")
        else:
            row = await self._one(
                "SELECT count(*) FROM outbox WHERE part = ANY(%s)", (list(parts),)
            )
        return int(row[0]) if row else 0

    async def count_outbox_naming(self, fragment: str, within: int) -> tuple[int, int]:
        # strpos, not LIKE: a topic's name may hold `_`, LIKE's wildcard.
        row = await self._one(
            "SELECT count(*), count(*) FILTER (WHERE strpos(facts, %s) > 0) "
            "FROM (SELECT facts FROM outbox ORDER BY seq LIMIT %s) AS first_rows",
            (fragment, within),
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def get_docs(self, kind: str, account: str) -> dict[str, str]:
        rows = await self._all(
            f"SELECT name, doc FROM {doc_table(kind)} WHERE account = %s", (account,)
        )
        return {name: doc for name, doc in rows}


class PooledReader(Reads):
    """The catalog's point reads: each statement on a pooled connection of its own, in
    autocommit (it sees every commit made before it)."""

    def __init__(self, catalog: PostgresCatalog) -> None:
        self.catalog = catalog

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return await self.catalog.read(sql, args)


class ConnReader(Reads):
    """Reads over one connection (a scan's snapshot, or a write's transaction)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        cur = await self.conn.execute(sql, args)  # type: ignore[arg-type]
        return await cur.fetchall()

    async def _run(self, sql: str, args: Sequence[Any] = ()) -> int:
        cur = await self.conn.execute(sql, args)  # type: ignore[arg-type]
        return cur.rowcount
