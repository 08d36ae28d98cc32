"""The SQLite catalog's statements: the reads and writes of api.CatalogReader and CatalogTx.

Every method is a coroutine that completes without suspending (a local SQLite file answers at
once), run on whatever thread owns the connection. No S3 rule is decided here: which write
may happen, and in what order, is the Store service's.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from .. import errors
from ..api import BlobRow, Cursor, doc_table
from ..model import (
    NULL_VERSION,
    Bucket,
    Extent,
    IamWrite,
    ListEntry,
    ObjectInfo,
    OutboxRecord,
    Part,
    StagedBlob,
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
    bucket_values,
    decode_manifest,
    encode_attrs,
    encode_lock,
    encode_manifest,
    object_entry,
    object_from_row,
    object_lock_value,
    object_values,
    part_from_row,
    settings_value,
    upload_from_row,
    upload_values,
    version_entry,
    version_from_row,
    version_values,
)

# get_object_inline: the object's columns, then its first extent's blob (a multipart object's
# manifest, of up to 10,000 extents, is not parsed for it).
_OBJECT_AND_BLOB = (
    f"SELECT {', '.join('o.' + c for c in OBJECT_COLUMNS.split(', '))}, b.id, b.data "
    "FROM objects o LEFT JOIN blobs b ON b.id = "
    "CASE WHEN o.parts IS NULL THEN json_extract(o.manifest, '$[0][0]') END "
    "WHERE o.bucket = ? AND o.key = ?"
)

# get_bucket_and_object: the bucket's columns, then _OBJECT_AND_BLOB's (all NULL when the key has
# no object). The object's row is found by its primary key under the bucket's.
_BUCKET_OBJECT_AND_BLOB = (
    f"SELECT {', '.join('k.' + c for c in BUCKET_COLUMNS.split(', '))}, "
    f"{', '.join('o.' + c for c in OBJECT_COLUMNS.split(', '))}, b.id, b.data "
    "FROM buckets k LEFT JOIN objects o ON o.bucket = k.name AND o.key = ? "
    "LEFT JOIN blobs b ON b.id = "
    "CASE WHEN o.parts IS NULL THEN json_extract(o.manifest, '$[0][0]') END "
    "WHERE k.name = ?"
)

# Names looked up per statement: well under SQLite's limit on bound parameters.
_LOOKUP_BATCH = 500


def _version_where(version_id: str) -> tuple[str, tuple[str, ...]]:
    """A key's row of the versions table by id: a real id is the row's `seq`; the null
    version is found by its flag (through the partial unique index)."""
    if version_id == NULL_VERSION:
        return "is_null = 1", ()
    return "seq = ? AND is_null = 0", (version_id,)


def _after(columns: Sequence[str], cursor: Cursor, inclusive: bool) -> tuple[str, list[Any]]:
    """`(c1, c2, ...) > (?, ?, ...)` over as many leading columns as the cursor has."""
    lead = columns[: len(cursor)]
    op = ">=" if inclusive else ">"
    if len(lead) == 1:
        return f"{lead[0]} {op} ?", list(cursor)
    return f"({', '.join(lead)}) {op} ({', '.join('?' * len(lead))})", list(cursor)


class SqliteReader:
    """api.CatalogReader over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def get_bucket(self, name: str) -> Bucket | None:
        row = self.conn.execute(
            f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE name = ?", (name,)
        ).fetchone()
        return bucket_from_row(row) if row else None

    async def list_buckets(self, owner: str | None) -> list[Bucket]:
        if owner is None:
            rows = self.conn.execute(f"SELECT {BUCKET_COLUMNS} FROM buckets ORDER BY name")
        else:
            rows = self.conn.execute(
                f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE owner = ? ORDER BY name", (owner,)
            )
        return [bucket_from_row(row) for row in rows]

    async def get_object(self, bucket: str, key: str) -> ObjectInfo | None:
        row = self.conn.execute(
            f"SELECT {OBJECT_COLUMNS} FROM objects WHERE bucket = ? AND key = ?",
            (bucket, key.encode()),
        ).fetchone()
        return object_from_row(bucket, row) if row else None

    async def get_version(self, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
        where, args = _version_where(version_id)
        row = self.conn.execute(
            f"SELECT {VERSION_COLUMNS} FROM versions WHERE bucket = ? AND key = ? AND {where}",
            (bucket, key.encode(), *args),
        ).fetchone()
        return version_from_row(bucket, row) if row else None

    async def newest_version(self, bucket: str, key: str) -> ObjectInfo | None:
        row = self.conn.execute(
            f"SELECT {VERSION_COLUMNS} FROM versions WHERE bucket = ? AND key = ? "
            "ORDER BY seq LIMIT 1",
            (bucket, key.encode()),
        ).fetchone()
        return version_from_row(bucket, row) if row else None

    async def get_upload(self, upload_id: str) -> Upload | None:
        row = self.conn.execute(
            f"SELECT {UPLOAD_COLUMNS} FROM uploads WHERE id = ?", (upload_id,)
        ).fetchone()
        return upload_from_row(row) if row else None

    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]:
        rows = self.conn.execute(
            f"SELECT {PART_COLUMNS} FROM parts WHERE upload_id = ? AND number > ? "
            "ORDER BY number LIMIT ?",
            (upload_id, after, limit),
        )
        return [part_from_row(upload_id, row) for row in rows]

    async def scan_objects(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, ListEntry]]:
        where, args = _after(("key",), cursor, inclusive)
        bound = " AND key < ?" if end is not None else ""
        rows = self.conn.execute(
            f"SELECT {OBJECT_ENTRY_COLUMNS} FROM objects "
            f"WHERE bucket = ? AND {where}{bound} ORDER BY key LIMIT ?",
            [bucket, *args, *([end] if end is not None else []), limit],
        )
        return [object_entry(row) for row in rows]

    async def scan_versions(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, ListEntry]]:
        where, args = _after(("key", "seq"), cursor, inclusive)
        bound = " AND key < ?" if end is not None else ""
        rows = self.conn.execute(
            f"SELECT {VERSION_ENTRY_COLUMNS} FROM versions "
            f"WHERE bucket = ? AND {where}{bound} ORDER BY key, seq LIMIT ?",
            [bucket, *args, *([end] if end is not None else []), limit],
        )
        return [version_entry(row) for row in rows]

    async def scan_uploads(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, Upload]]:
        where, args = _after(("key", "initiated_ns", "id"), cursor, inclusive)
        bound = " AND key < ?" if end is not None else ""
        rows = self.conn.execute(
            f"SELECT {UPLOAD_COLUMNS} FROM uploads WHERE bucket = ? AND {where}{bound} "
            "ORDER BY key, initiated_ns, id LIMIT ?",
            [bucket, *args, *([end] if end is not None else []), limit],
        )
        return [((row[2], row[3], row[0]), upload_from_row(row)) for row in rows]

    async def read_inline(self, blob_ids: Iterable[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for blob in set(blob_ids):
            row = self.conn.execute("SELECT data FROM blobs WHERE id = ?", (blob,)).fetchone()
            if row is not None and row[0] is not None:
                found[blob] = row[0]
        return found

    async def get_object_inline(
        self, bucket: str, key: str
    ) -> tuple[ObjectInfo, dict[str, bytes | None]] | None:
        row = self.conn.execute(_OBJECT_AND_BLOB, (bucket, key.encode())).fetchone()
        if row is None:
            return None
        blob, data = row[-2:]
        return object_from_row(bucket, row[:-2]), {} if blob is None else {blob: data}

    async def get_bucket_and_object(
        self, bucket: str, key: str
    ) -> tuple[Bucket, tuple[ObjectInfo, dict[str, bytes | None]] | None] | None:
        row = self.conn.execute(_BUCKET_OBJECT_AND_BLOB, (key.encode(), bucket)).fetchone()
        return None if row is None else bucket_and_object_from_row(bucket, row)

    async def known_blobs_among(self, blob_ids: Sequence[str]) -> set[str]:
        return self._ids_among(
            blob_ids,
            "SELECT blob_id FROM blob_intents WHERE blob_id IN ({marks}) "
            "UNION ALL SELECT id FROM blobs WHERE id IN ({marks})",
            lists=2,
        )

    async def file_blobs_among(self, blob_ids: Sequence[str]) -> set[str]:
        # Each name is looked up exactly, never as a range of ids: a range bound worked out as
        # text (the `ffff` directory's "next prefix" is "10000", below "ffff…") once made every
        # referenced blob of a directory look orphaned to the start-up sweep.
        return self._ids_among(
            blob_ids, "SELECT id FROM blobs WHERE id IN ({marks}) AND data IS NULL"
        )

    def _ids_among(self, blob_ids: Sequence[str], query: str, lists: int = 1) -> set[str]:
        """The ids `query` returns for `blob_ids`, put in each of its `lists` IN ({marks})
        lists; asked _LOOKUP_BATCH names at a time."""
        found: set[str] = set()
        for start in range(0, len(blob_ids), _LOOKUP_BATCH):
            batch = list(blob_ids[start : start + _LOOKUP_BATCH])
            marks = ",".join("?" * len(batch))
            rows = self.conn.execute(query.format(marks=marks), batch * lists)
            found.update(row[0] for row in rows)
        return found

    async def get_iam_account(self, account: str) -> str | None:
        row = self.conn.execute(
            "SELECT doc FROM iam_accounts WHERE account = ?", (account,)
        ).fetchone()
        return row[0] if row else None

    async def get_iam_entities(
        self, account: str, kind: str, names: Sequence[str]
    ) -> dict[str, str]:
        found: dict[str, str] = {}
        names = list(dict.fromkeys(names))
        for start in range(0, len(names), _LOOKUP_BATCH):
            batch = names[start : start + _LOOKUP_BATCH]
            rows = self.conn.execute(
                "SELECT name, doc FROM iam_entities WHERE account = ? AND kind = ? "
                f"AND name IN ({','.join('?' * len(batch))})",
                (account, kind, *batch),
            )
            found.update(rows)
        return found

    async def list_iam_entities(
        self, account: str, kind: str, containing: str | None = None
    ) -> dict[str, str]:
        sql = "SELECT name, doc FROM iam_entities WHERE account = ? AND kind = ?"
        if containing is None:
            return dict(self.conn.execute(sql, (account, kind)))
        return dict(self.conn.execute(f"{sql} AND instr(doc, ?) > 0", (account, kind, containing)))

    async def iam_counts(self, account: str) -> dict[str, int]:
        counts = dict(
            self.conn.execute(
                "SELECT kind, count(*) FROM iam_entities WHERE account = ? GROUP BY kind",
                (account,),
            )
        )
        row = self.conn.execute(
            "SELECT count(*) FROM access_keys WHERE account = ? AND user_name > ''", (account,)
        ).fetchone()
        return {**counts, "access_key": row[0]} if row[0] else counts

    async def iam_attachment_counts(self, account: str, arns: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        arns = list(dict.fromkeys(arns))
        for start in range(0, len(arns), _LOOKUP_BATCH):
            batch = arns[start : start + _LOOKUP_BATCH]
            rows = self.conn.execute(
                "SELECT policy_arn, count(*) FROM iam_attachments WHERE account = ? "
                f"AND policy_arn IN ({','.join('?' * len(batch))}) GROUP BY policy_arn",
                (account, *batch),
            )
            found.update(rows)
        return found

    async def iam_group_members(self, account: str, group: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT user_name FROM iam_members WHERE account = ? AND group_name = ?",
            (account, group),
        )
        return [name for (name,) in rows]

    async def access_key_owner(self, access_key: str) -> tuple[str, str] | None:
        row = self.conn.execute(
            "SELECT account, user_name FROM access_keys WHERE access_key = ?", (access_key,)
        ).fetchone()
        return (row[0], row[1]) if row else None

    async def read_outbox(
        self, limit: int, parts: Sequence[int] | None = None
    ) -> list[OutboxRecord]:
        columns = "seq, bucket, key, event, version_id, time_ns, facts, part"
        if parts is None:
            rows = self.conn.execute(
                f"SELECT {columns} FROM outbox ORDER BY seq LIMIT ?", (limit,)
            ).fetchall()
        else:
            # Each partition's first rows by its index (part, seq), then in order.
            one = (
                f"SELECT * FROM (SELECT {columns} FROM outbox WHERE part = ? ORDER BY seq LIMIT ?)"
            )
            statement = " UNION ALL ".join([one] * len(parts)) + " ORDER BY seq"
            rows = self.conn.execute(statement, [v for p in parts for v in (p, limit)]).fetchall()
        return [
            OutboxRecord(seq, bucket, bytes(key).decode(), event, version_id, time_ns, facts, part)
            for seq, bucket, key, event, version_id, time_ns, facts, part in rows
        ]

    async def count_outbox(self, parts: Sequence[int] | None = None) -> int:
        if parts is None:
            (count,) = self.conn.execute("SELECT count(*) FROM outbox").fetchone()
        else:
            marks = ", ".join("?" * len(parts))
            (count,) = self.conn.execute(
                f"SELECT count(*) FROM outbox WHERE part IN ({marks})", tuple(parts)
            ).fetchone()
        return int(count)

    async def count_outbox_naming(self, fragment: str, within: int) -> tuple[int, int]:
        # instr, not LIKE: a topic's name may hold `_`, LIKE's wildcard.
        scanned, naming = self.conn.execute(
            "SELECT count(*), coalesce(sum(instr(facts, ?) > 0), 0) "
            "FROM (SELECT facts FROM outbox ORDER BY seq LIMIT ?)",
            (fragment, within),
        ).fetchone()
        return int(scanned), int(naming)

    async def get_docs(self, kind: str, account: str) -> dict[str, str]:
        table = doc_table(kind)
        rows = self.conn.execute(f"SELECT name, doc FROM {table} WHERE account = ?", (account,))
        return dict(rows.fetchall())


class SqliteAudit:
    """api.CatalogAudit: whole-table scans, row by row."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def audit_blobs(self) -> AsyncIterator[BlobRow]:
        for blob_id, size, refs, inline in self.conn.execute(
            "SELECT id, size, refs, data IS NOT NULL FROM blobs"
        ):
            yield BlobRow(blob_id, size, refs, bool(inline))

    async def audit_objects(self) -> AsyncIterator[ObjectInfo]:
        for row in self.conn.execute(f"SELECT bucket, {OBJECT_COLUMNS} FROM objects"):
            yield object_from_row(row[0], row[1:])
        for row in self.conn.execute(f"SELECT bucket, {VERSION_COLUMNS} FROM versions"):
            yield version_from_row(row[0], row[1:])

    async def audit_parts(self) -> AsyncIterator[tuple[Part, Upload | None]]:
        rows = self.conn.execute(
            f"SELECT p.upload_id, {', '.join('p.' + c for c in PART_COLUMNS.split(', '))}, "
            f"{', '.join('u.' + c for c in UPLOAD_COLUMNS.split(', '))} "
            "FROM parts p LEFT JOIN uploads u ON u.id = p.upload_id"
        )
        for row in rows:
            part = part_from_row(row[0], row[1:7])
            yield part, upload_from_row(row[7:]) if row[7] is not None else None

    async def audit_intents(self) -> AsyncIterator[str]:
        for (blob_id,) in self.conn.execute("SELECT blob_id FROM blob_intents"):
            yield blob_id


class SqliteTx(SqliteReader):
    """api.CatalogTx inside a group's transaction of the writing connection (writer.py)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self.released: list[str] = []  # file blobs that reached zero references

    async def insert_bucket(self, bucket: Bucket) -> Bucket | None:
        existing = await self.get_bucket(bucket.name)
        if existing is not None:
            return existing
        self.conn.execute(
            f"INSERT INTO buckets ({BUCKET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            bucket_values(bucket),
        )
        return None

    async def lock_bucket(self, name: str) -> Bucket | None:
        return await self.get_bucket(name)  # one writer at a time

    async def update_bucket(self, bucket: Bucket) -> None:
        self.conn.execute(
            "UPDATE buckets SET versioning = ?, object_lock = ?, settings = ? WHERE name = ?",
            (bucket.versioning, object_lock_value(bucket), settings_value(bucket), bucket.name),
        )

    async def update_version(self, version: ObjectInfo) -> None:
        args = (
            encode_attrs(version.attrs),
            encode_lock(version.lock),
            version.bucket,
            version.key.encode(),
        )
        current = "version_id IS NULL" if version.version_id == NULL_VERSION else "version_id = ?"
        cur = self.conn.execute(
            f"UPDATE objects SET attrs = ?, lock = ? WHERE bucket = ? AND key = ? AND {current}",
            args if version.version_id == NULL_VERSION else (*args, version.version_id),
        )
        if cur.rowcount == 0:
            where, more = _version_where(version.version_id)
            self.conn.execute(
                f"UPDATE versions SET attrs = ?, lock = ? WHERE bucket = ? AND key = ? AND {where}",
                (*args, *more),
            )

    async def lock_iam_account(self, account: str) -> str | None:
        return await self.get_iam_account(account)  # one writer at a time

    async def write_identities(self, account: str, write: IamWrite) -> None:
        run, many = self.conn.execute, self.conn.executemany
        many("DELETE FROM access_keys WHERE access_key = ?", [(k,) for k in write.keys_removed])
        many(
            "DELETE FROM iam_members WHERE account = ? AND group_name = ? AND user_name = ?",
            [(account, *m) for m in write.members_removed],
        )
        many(
            "DELETE FROM iam_attachments WHERE account = ? AND policy_arn = ? AND kind = ? "
            "AND name = ?",
            [(account, *a) for a in write.detached],
        )
        many(
            "DELETE FROM iam_entities WHERE account = ? AND kind = ? AND name = ?",
            [(account, r.kind, r.name) for r in write.rows if r.doc is None],
        )
        if write.account_doc is not None:
            run(
                "INSERT INTO iam_accounts (account, doc) VALUES (?, ?) "
                "ON CONFLICT (account) DO UPDATE SET doc = excluded.doc",
                (account, write.account_doc),
            )
        many(
            "INSERT INTO iam_entities (account, kind, name, doc) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (account, kind, name) DO UPDATE SET doc = excluded.doc",
            [(account, r.kind, r.name, r.doc) for r in write.rows if r.doc is not None],
        )
        many(
            "INSERT INTO access_keys (access_key, account, user_name) VALUES (?, ?, ?)",
            [(k, account, user) for k, user in write.keys_added],
        )
        many(
            "INSERT INTO iam_members (account, group_name, user_name) VALUES (?, ?, ?)",
            [(account, *m) for m in write.members_added],
        )
        many(
            "INSERT INTO iam_attachments (account, policy_arn, kind, name) VALUES (?, ?, ?, ?)",
            [(account, *a) for a in write.attached],
        )

    async def delete_bucket(self, name: str) -> None:
        self.conn.execute("DELETE FROM buckets WHERE name = ?", (name,))

    async def bucket_is_empty(self, name: str) -> bool:
        for table in ("objects", "versions"):
            row = self.conn.execute(f"SELECT 1 FROM {table} WHERE bucket = ? LIMIT 1", (name,))
            if row.fetchone() is not None:
                return False
        return True

    async def upload_ids(self, bucket: str) -> list[str]:
        rows = self.conn.execute("SELECT id FROM uploads WHERE bucket = ?", (bucket,))
        return [upload_id for (upload_id,) in rows.fetchall()]

    async def retain(self, extents: Iterable[Extent], new_blobs: Iterable[StagedBlob] = ()) -> None:
        counts = Counter(e.blob for e in extents)
        for blob in new_blobs:
            if blob.data is None:
                # The file is this write's only while its intent is (intents.py).
                cur = self.conn.execute("DELETE FROM blob_intents WHERE blob_id = ?", (blob.id,))
                if cur.rowcount != 1:
                    raise errors.IntentLost(errors.INTENT_LOST)
            self.conn.execute(
                "INSERT INTO blobs (id, size, refs, data) VALUES (?, ?, ?, ?)",
                (blob.id, blob.size, counts.pop(blob.id, 0), blob.data),
            )
        for blob, n in counts.items():
            cur = self.conn.execute("UPDATE blobs SET refs = refs + ? WHERE id = ?", (n, blob))
            if cur.rowcount != 1:
                raise errors.SourceChanged("a blob of the source was released concurrently")

    async def release(self, extents: Iterable[Extent]) -> None:
        for blob, n in Counter(e.blob for e in extents).items():
            # Most blobs have one user: try the delete first, one statement in that case.
            row = self.conn.execute(
                "DELETE FROM blobs WHERE id = ? AND refs <= ? RETURNING data IS NULL", (blob, n)
            ).fetchone()
            if row is None:
                self.conn.execute("UPDATE blobs SET refs = refs - ? WHERE id = ?", (n, blob))
            elif row[0]:
                self.released.append(blob)

    async def insert_object(self, obj: ObjectInfo) -> bool:
        # The bucket is checked by the insert itself (one statement less per PUT).
        cur = self.conn.execute(
            f"INSERT INTO objects (bucket, {OBJECT_COLUMNS}) "
            "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
            "WHERE EXISTS (SELECT 1 FROM buckets WHERE name = ?)",
            (obj.bucket, *object_values(obj), obj.bucket),
        )
        return cur.rowcount == 1

    async def insert_version(self, obj: ObjectInfo, seq: str) -> None:
        self.conn.execute(
            f"INSERT INTO versions (bucket, {VERSION_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (obj.bucket, *version_values(obj, seq)),
        )

    async def delete_version(self, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
        where, args = _version_where(version_id)
        row = self.conn.execute(
            f"DELETE FROM versions WHERE bucket = ? AND key = ? AND {where} "
            f"RETURNING {VERSION_COLUMNS}",
            (bucket, key.encode(), *args),
        ).fetchone()
        return version_from_row(bucket, row) if row else None

    async def delete_object(self, bucket: str, key: str) -> ObjectInfo | None:
        row = self._delete_current(bucket, key, OBJECT_COLUMNS)
        return object_from_row(bucket, row) if row else None

    async def drop_object(self, bucket: str, key: str) -> tuple[Extent, ...] | None:
        row = self._delete_current(bucket, key, "manifest")
        return decode_manifest(row[0]) if row else None

    def _delete_current(self, bucket: str, key: str, columns: str) -> Any:
        """Delete the key's row of `objects`; `columns` of it, or None."""
        return self.conn.execute(
            f"DELETE FROM objects WHERE bucket = ? AND key = ? RETURNING {columns}",
            (bucket, key.encode()),
        ).fetchone()

    async def remember_content_md5(self, obj: ObjectInfo, md5: str) -> None:
        # The version may be current or not (a copy from an older version): both tables.
        for table in ("objects", "versions"):
            self.conn.execute(
                f"UPDATE {table} SET content_md5 = ? "
                "WHERE bucket = ? AND key = ? AND etag = ? AND manifest = ?",
                (md5, obj.bucket, obj.key.encode(), obj.etag, encode_manifest(obj.extents)),
            )

    async def insert_upload(self, upload: Upload) -> None:
        self.conn.execute(
            f"INSERT INTO uploads ({UPLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            upload_values(upload),
        )

    async def put_part(self, part: Part) -> Part | None:
        old = self.conn.execute(
            f"DELETE FROM parts WHERE upload_id = ? AND number = ? RETURNING {PART_COLUMNS}",
            (part.upload_id, part.number),
        ).fetchone()
        self.conn.execute(
            f"INSERT INTO parts (upload_id, {PART_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                part.upload_id,
                part.number,
                part.size,
                part.etag,
                part.mtime_ns,
                encode_manifest(part.extents),
                part.checksum,
            ),
        )
        return part_from_row(part.upload_id, old) if old else None

    async def set_refs(self, blob_id: str, refs: int) -> None:
        if refs > 0:
            self.conn.execute("UPDATE blobs SET refs = ? WHERE id = ?", (refs, blob_id))
            return
        row = self.conn.execute(
            "DELETE FROM blobs WHERE id = ? RETURNING data IS NULL", (blob_id,)
        ).fetchone()
        if row and row[0]:
            self.released.append(blob_id)

    async def add_intent(self, blob_id: str, node: str, expires_ns: int) -> None:
        self.conn.execute(
            "INSERT INTO blob_intents (blob_id, node, expires_ns) VALUES (?, ?, ?)",
            (blob_id, node, expires_ns),
        )

    async def renew_intent(self, blob_id: str, expires_ns: int) -> bool:
        cur = self.conn.execute(
            "UPDATE blob_intents SET expires_ns = ? WHERE blob_id = ?", (expires_ns, blob_id)
        )
        return cur.rowcount == 1

    async def drop_intents(self, blob_ids: Iterable[str] | None) -> None:
        if blob_ids is None:
            self.conn.execute("DELETE FROM blob_intents")
            return
        self.conn.executemany(
            "DELETE FROM blob_intents WHERE blob_id = ?", [(blob_id,) for blob_id in blob_ids]
        )

    async def take_expired_intents(self, now_ns: int, limit: int) -> list[str]:
        rows = self.conn.execute(
            "DELETE FROM blob_intents WHERE blob_id IN (SELECT blob_id FROM blob_intents "
            "WHERE expires_ns < ? ORDER BY expires_ns LIMIT ?) RETURNING blob_id",
            (now_ns, limit),
        )
        return [blob_id for (blob_id,) in rows.fetchall()]

    async def claim_id(self, proposed: str | None) -> str | None:
        if proposed is not None:
            self.conn.execute(
                "INSERT OR IGNORE INTO catalog_id (one, id) VALUES (1, ?)", (proposed,)
            )
        row = self.conn.execute("SELECT id FROM catalog_id").fetchone()
        return row[0] if row else None

    async def append_outbox(
        self,
        bucket: str,
        key: str,
        event: str,
        version_id: str | None,
        time_ns: int,
        facts: str,
        part: int,
    ) -> None:
        self.conn.execute(
            "INSERT INTO outbox (bucket, key, event, version_id, time_ns, facts, part) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (bucket, key.encode(), event, version_id, time_ns, facts, part),
        )

    async def delete_outbox(self, seqs: Sequence[int]) -> None:
        self.conn.executemany("DELETE FROM outbox WHERE seq = ?", [(seq,) for seq in seqs])

    async def hold_lease(self, name: str, holder: str, now_ns: int, until_ns: int) -> bool:
        row = self.conn.execute(
            "INSERT INTO leases (name, holder, expires_ns) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "expires_ns = excluded.expires_ns "
            "WHERE leases.holder = excluded.holder OR leases.expires_ns < ? RETURNING holder",
            (name, holder, until_ns, now_ns),
        ).fetchone()
        return row is not None

    async def drop_lease(self, name: str, holder: str) -> None:
        self.conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))

    async def live_leases(self, prefix: str, now_ns: int) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT name, holder FROM leases WHERE substr(name, 1, ?) = ? AND expires_ns >= ?",
            (len(prefix), prefix, now_ns),
        )
        return dict(rows)

    async def drop_leases(self, prefix: str, holder: str) -> None:
        self.conn.execute(
            "DELETE FROM leases WHERE holder = ? AND substr(name, 1, ?) = ?",
            (holder, len(prefix), prefix),
        )

    async def lock_docs(self, kind: str, account: str) -> dict[str, str]:
        return await self.get_docs(kind, account)  # the one writer: nobody else changes them

    async def put_doc(self, kind: str, account: str, name: str, doc: str) -> None:
        self.conn.execute(
            f"INSERT INTO {doc_table(kind)} (account, name, doc) VALUES (?, ?, ?) "
            "ON CONFLICT (account, name) DO UPDATE SET doc = excluded.doc",
            (account, name, doc),
        )

    async def delete_doc(self, kind: str, account: str, name: str) -> None:
        self.conn.execute(
            f"DELETE FROM {doc_table(kind)} WHERE account = ? AND name = ?", (account, name)
        )

    async def delete_upload(self, upload_id: str) -> list[Part]:
        rows = self.conn.execute(
            f"DELETE FROM parts WHERE upload_id = ? RETURNING {PART_COLUMNS}", (upload_id,)
        ).fetchall()
        self.conn.execute("DELETE FROM uploads WHERE id = ?", (upload_id,))
        return [part_from_row(upload_id, row) for row in rows]
