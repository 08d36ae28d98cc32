"""The PostgreSQL catalog's statements: the reads and writes of api.CatalogReader and CatalogTx.

The same statements as the SQLite catalog's, with the row locks that make them safe with
writers on other connections (READ COMMITTED; see the package's docstring for the design):

- a reference count changes by `UPDATE ... SET refs = refs + n`, which locks the row and
  re-reads its newest version, never by a read followed by a write; a write's changes to
  counts are applied together at its end, in blob id order (`settle`), so that writers lock
  blob rows in one order and after the object rows;
- a read inside a write transaction locks what the write depends on: the object a condition
  or a copy checked and a version read by its id, whose Object Lock a removal checks or a
  PutObjectRetention changes (FOR UPDATE), the bucket a row goes into (FOR KEY SHARE, as a
  foreign key would), the upload a part goes into (FOR SHARE); deleting a bucket or an upload
  takes the exclusive lock before it looks at what the bucket or upload holds;
- an object row that another transaction made after our delete_object looked (it replaced
  the row we waited for, or there was none) is replaced by our insert, its references
  released, as a later write would; unless this write read that key's state (a condition,
  a copy's source), in which case the whole write runs again (Conflict) to check it anew.
  Other rows made twice at once (a bucket, a part number) fail with a unique violation, and
  the write runs again too. A versioned write that meets such a row runs again as well (the
  row is a version that must be kept, not replaced);
- versions (versions.py) move between `objects` and `versions`. While a key has a current
  object, its row serialises the writes to the key. When it has none, a versioned write
  (a delete marker, a first version, a promotion) takes the key's row of `key_locks` first
  (newest_version): inserted by the write, deleted before its commit, it makes the next
  writer's insert wait for that commit, as a per-key lock that leaves nothing behind and
  needs no advisory lock. Then the write looks again: a current object made meanwhile runs
  the write again.

No S3 rule is decided here: which write may happen, and in what order, is the Store service's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from .. import errors
from ..api import BlobRow, doc_table
from ..model import (
    NULL_VERSION,
    Bucket,
    Extent,
    IamWrite,
    ObjectInfo,
    Part,
    StagedBlob,
    Upload,
)
from ..rows import (
    BUCKET_COLUMNS,
    OBJECT_COLUMNS,
    PART_COLUMNS,
    UPLOAD_COLUMNS,
    VERSION_COLUMNS,
    bucket_from_row,
    bucket_values,
    decode_manifest,
    encode_attrs,
    encode_lock,
    encode_manifest,
    object_from_row,
    object_lock_value,
    object_values,
    part_from_row,
    settings_value,
    upload_from_row,
    upload_values,
    version_from_row,
    version_values,
)

if TYPE_CHECKING:
    from . import PostgresCatalog

from .reads import ConnReader, Row, version_where

_OBJECT_FIELDS = OBJECT_COLUMNS.removeprefix("key, ")  # what replacing a key's row sets


class Conflict(Exception):
    """Another transaction changed what this write depends on: run the write again."""


# Explicit, so that a server default (default_transaction_isolation) does not change what
# the locks below are for. SERIALIZABLE: for engines that run nothing else (CockroachDB, a
# YugabyteDB without read committed), chosen by the catalog URL (`s3gw_isolation`); the same
# statements, each race a serialization failure (40001) that runs the write again.
BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
BEGIN_SERIALIZABLE = "BEGIN ISOLATION LEVEL SERIALIZABLE"
# Pipeline mode needs libpq 14 (psycopg's binary wheels bundle a newer one).
_PIPELINE = psycopg.AsyncPipeline.is_supported()


class PostgresTx(ConnReader):
    """api.CatalogTx inside one READ COMMITTED transaction.

    Round trips: the BEGIN, and statements whose only answer would be an error (`_defer`),
    are not waited for on their own. They go in one pipeline with the next statement whose
    answer the write needs, in order, one round trip for them all; an error of any of them
    is raised there, and the write fails or runs again as it would have (a 4 KiB PUT: the
    BEGIN, the inline blob's INSERT and the bucket's read in one round trip, not three).
    `flush` sends what is still queued; the caller commits after it."""

    _BUCKET_LOCK = " FOR KEY SHARE"
    _OBJECT_LOCK = " FOR UPDATE"
    _UPLOAD_LOCK = " FOR SHARE"

    def __init__(self, conn: psycopg.AsyncConnection[Any], begin: str = BEGIN) -> None:
        super().__init__(conn)
        self.begin = begin
        self.begun = False  # the BEGIN was sent: the transaction ends by COMMIT or ROLLBACK
        self._queued: list[tuple[str, Sequence[Any]]] = []  # deferred, not yet sent
        self.released: list[str] = []  # file blobs that reached zero references
        self._deltas: Counter[str] = Counter()  # reference changes not yet applied
        # Keys whose state this write read (a condition, a copy's source): True if a row was
        # there (then it is locked until the commit), False if none was.
        self._checked: dict[tuple[str, str], bool] = {}
        self._locked_keys: set[tuple[str, bytes]] = set()  # rows of key_locks held

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        cur = await self._send(sql, args)
        return await cur.fetchall()

    async def _run(self, sql: str, args: Sequence[Any] = ()) -> int:
        cur = await self._send(sql, args)
        return cur.rowcount

    def _defer(self, sql: str, args: Sequence[Any]) -> None:
        """A statement whose answer nothing waits for: sent with the next one that is."""
        self._queued.append((sql, args))

    async def flush(self) -> None:
        """Send the BEGIN and the deferred statements not sent yet."""
        if self._queued:
            await self._send(*self._queued.pop())
        elif not self.begun:
            await self._send(self.begin, ())

    async def _send(self, sql: str, args: Sequence[Any]) -> psycopg.AsyncCursor[Row]:
        """Run `sql` after what is queued (the BEGIN first); its cursor, answered."""
        statements = [] if self.begun else [(self.begin, ())]
        statements += [*self._queued, (sql, args)]
        self._queued.clear()
        self.begun = True
        if len(statements) == 1 or not _PIPELINE:
            for query, values in statements:
                cur = await self.conn.execute(query, values)  # type: ignore[arg-type]
            return cur
        async with self.conn.pipeline():  # its end waits for every answer, or raises
            for query, values in statements:
                cur = await self.conn.execute(query, values)  # type: ignore[arg-type]
        return cur

    async def get_object(self, bucket: str, key: str) -> ObjectInfo | None:
        obj = await super().get_object(bucket, key)
        self._checked.setdefault((bucket, key), obj is not None)
        return obj

    async def insert_bucket(self, bucket: Bucket) -> Bucket | None:
        existing = await self.get_bucket(bucket.name)
        if existing is not None:
            return existing
        # Two creating the same name at once: the second's INSERT fails (unique violation),
        # and its write, run again, finds the first's bucket.
        await self._run(
            f"INSERT INTO buckets ({BUCKET_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            bucket_values(bucket),
        )
        return None

    async def lock_bucket(self, name: str) -> Bucket | None:
        # NO KEY UPDATE: waits for another change of the settings, not for writes into the
        # bucket (they hold KEY SHARE).
        row = await self._one(
            f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE name = %s FOR NO KEY UPDATE", (name,)
        )
        return bucket_from_row(row) if row else None

    async def update_bucket(self, bucket: Bucket) -> None:
        await self._run(
            "UPDATE buckets SET versioning = %s, object_lock = %s, settings = %s WHERE name = %s",
            (bucket.versioning, object_lock_value(bucket), settings_value(bucket), bucket.name),
        )

    async def get_version(self, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
        # Locked, as a current object is (get_object): a removal by id checks the version's
        # Object Lock and a PutObjectRetention / PutObjectLegalHold changes it; one waits
        # for the other and then reads the row as it left it.
        where, args = version_where(version_id)
        row = await self._one(
            f"SELECT {VERSION_COLUMNS} FROM versions WHERE bucket = %s AND key = %s AND {where} "
            "FOR UPDATE",
            (bucket, key.encode(), *args),
        )
        if row is not None:
            return version_from_row(bucket, row)
        await self._check_not_promoted(bucket, key, version_id)
        return None

    async def _check_not_promoted(self, bucket: str, key: str, version_id: str) -> None:
        """A version not in `versions` may have been made current by a promotion this write
        did not see (its read of the current object came before, or waited for a row that
        then went): then the write runs again, and finds the version current."""
        current = "version_id IS NULL" if version_id == NULL_VERSION else "version_id = %s"
        args = () if version_id == NULL_VERSION else (version_id,)
        if await self._one(
            f"SELECT 1 FROM objects WHERE bucket = %s AND key = %s AND {current}",
            (bucket, key.encode(), *args),
        ):
            raise Conflict()

    async def update_version(self, version: ObjectInfo) -> None:
        # The version's row is this transaction's (get_object and get_version lock it), so
        # it is still in the table it was read from.
        args = (
            encode_attrs(version.attrs),
            encode_lock(version.lock),
            version.bucket,
            version.key.encode(),
        )
        if version.version_id == NULL_VERSION:
            current, more = "version_id IS NULL", ()
        else:
            current, more = "version_id = %s", (version.version_id,)
        sql = (
            f"UPDATE objects SET attrs = %s, lock = %s WHERE bucket = %s AND key = %s AND {current}"
        )
        if await self._run(sql, (*args, *more)) == 1:
            return
        where, more = version_where(version.version_id)
        sql = (
            f"UPDATE versions SET attrs = %s, lock = %s WHERE bucket = %s AND key = %s AND {where}"
        )
        if await self._run(sql, (*args, *more)) != 1:
            raise Conflict()

    async def lock_iam_account(self, account: str) -> str | None:
        # Every change of the account's identities takes this row first: they are made one
        # at a time (their rules read the account's counts and indexes), other accounts'
        # alongside. An account's first row, made by two at once: the second INSERT fails
        # (unique violation) and its write, run again, finds and locks the first's.
        row = await self._one(
            "SELECT doc FROM iam_accounts WHERE account = %s FOR UPDATE", (account,)
        )
        return row[0] if row else None

    async def write_identities(self, account: str, write: IamWrite) -> None:
        # Nothing waits for these answers: they go in one round trip with the COMMIT's flush.
        for key in write.keys_removed:
            self._defer("DELETE FROM access_keys WHERE access_key = %s", (key,))
        for group, user in write.members_removed:
            self._defer(
                "DELETE FROM iam_members WHERE account = %s AND group_name = %s AND user_name = %s",
                (account, group, user),
            )
        for arn, kind, name in write.detached:
            self._defer(
                "DELETE FROM iam_attachments WHERE account = %s AND policy_arn = %s "
                "AND kind = %s AND name = %s",
                (account, arn, kind, name),
            )
        for row in write.rows:
            if row.doc is None:
                self._defer(
                    "DELETE FROM iam_entities WHERE account = %s AND kind = %s AND name = %s",
                    (account, row.kind, row.name),
                )
        if write.account_doc is not None:
            if write.account_new:
                sql = "INSERT INTO iam_accounts (doc, account) VALUES (%s, %s)"
            else:
                sql = "UPDATE iam_accounts SET doc = %s WHERE account = %s"
            self._defer(sql, (write.account_doc, account))
        for row in write.rows:
            if row.doc is not None and row.new:
                self._defer(
                    "INSERT INTO iam_entities (account, kind, name, doc) VALUES (%s, %s, %s, %s)",
                    (account, row.kind, row.name, row.doc),
                )
            elif row.doc is not None:
                self._defer(
                    "UPDATE iam_entities SET doc = %s WHERE account = %s AND kind = %s "
                    "AND name = %s",
                    (row.doc, account, row.kind, row.name),
                )
        for key, user in write.keys_added:
            self._defer(
                "INSERT INTO access_keys (access_key, account, user_name) VALUES (%s, %s, %s)",
                (key, account, user),
            )
        for group, user in write.members_added:
            self._defer(
                "INSERT INTO iam_members (account, group_name, user_name) VALUES (%s, %s, %s)",
                (account, group, user),
            )
        for arn, kind, name in write.attached:
            self._defer(
                "INSERT INTO iam_attachments (account, policy_arn, kind, name) "
                "VALUES (%s, %s, %s, %s)",
                (account, arn, kind, name),
            )

    async def delete_bucket(self, name: str) -> None:
        await self._run("DELETE FROM buckets WHERE name = %s", (name,))

    async def bucket_is_empty(self, name: str) -> bool:
        # The exclusive lock first: writes into the bucket hold its KEY SHARE lock until they
        # commit, so once this lock is ours every object they made is visible below, and no
        # new one can be made until this transaction ends.
        await self._all("SELECT 1 FROM buckets WHERE name = %s FOR UPDATE", (name,))
        for table in ("objects", "versions"):
            if await self._one(f"SELECT 1 FROM {table} WHERE bucket = %s LIMIT 1", (name,)):
                return False
        return True

    async def newest_version(self, bucket: str, key: str) -> ObjectInfo | None:
        # A write asks when the key has no current object (it looked): it locks the key, then
        # makes sure no writer that held the lock before it made one since.
        where = (bucket, key.encode())
        if where not in self._locked_keys:
            await self._run("INSERT INTO key_locks (bucket, key) VALUES (%s, %s)", where)
            self._locked_keys.add(where)
        if await self._one("SELECT 1 FROM objects WHERE bucket = %s AND key = %s", where):
            raise Conflict()
        # The row is locked too: a removal of that version by its id (which takes no key
        # lock) waits for this write, which may move it (a promotion), or this one for it.
        sql = (
            f"SELECT {VERSION_COLUMNS} FROM versions WHERE bucket = %s AND key = %s "
            "ORDER BY seq LIMIT 1"
        )
        for _ in range(3):
            row = await self._one(sql + " FOR UPDATE", where)
            if row is not None:
                return version_from_row(bucket, row)
            # The newest row went while this waited for it (a locking read then skips it):
            # the next statement sees what is left.
            if await self._one(sql, where) is None:
                return None
        raise Conflict()

    async def upload_ids(self, bucket: str) -> list[str]:
        rows = await self._all("SELECT id FROM uploads WHERE bucket = %s", (bucket,))
        return [upload_id for (upload_id,) in rows]

    async def retain(self, extents: Iterable[Extent], new_blobs: Iterable[StagedBlob] = ()) -> None:
        counts = Counter(e.blob for e in extents)
        new_blobs = list(new_blobs)
        files = [blob.id for blob in new_blobs if blob.data is None]
        if files:
            # The files are this write's only while their intents are (intents.py). A
            # reclaimer deleting an intent holds its row: this waits, then finds it gone.
            taken = await self._all(
                "DELETE FROM blob_intents WHERE blob_id = ANY(%s) RETURNING blob_id", (files,)
            )
            if len(taken) != len(files):
                raise errors.IntentLost(errors.INTENT_LOST)
        for blob in new_blobs:
            # A new id: the insert fails only with the transaction (an error at the flush).
            self._defer(
                "INSERT INTO blobs (id, size, refs, data) VALUES (%s, %s, %s, %s)",
                (blob.id, blob.size, counts.pop(blob.id, 0), blob.data),
            )
        self._deltas.update(counts)  # applied by `settle`, before the commit

    async def release(self, extents: Iterable[Extent]) -> None:
        self._deltas.subtract(Counter(e.blob for e in extents))

    async def settle(self) -> None:
        """Apply the reference counts this write changed: the blob rows are locked last, and
        in id order. Taken as they came (a copy locks its source's blob, then waits for the
        destination's row; a PUT holding that row then releases the same blob) two writers
        deadlock, and PostgreSQL takes a second (deadlock_timeout) to break it."""
        if self._locked_keys:
            # Gone before the commit: the writers waiting on these rows go on once it is made.
            buckets, keys = (list(column) for column in zip(*self._locked_keys, strict=True))
            await self._run(
                "DELETE FROM key_locks USING unnest(%s::text[], %s::bytea[]) AS k(bucket, key) "
                "WHERE key_locks.bucket = k.bucket AND key_locks.key = k.key",
                (buckets, keys),
            )
            self._locked_keys.clear()
        changes = sorted((blob, n) for blob, n in self._deltas.items() if n)
        self._deltas.clear()
        if not changes:
            return
        if len(changes) == 1:
            ((blob, n),) = changes
            if n < 0:
                # Most blobs have one user: its delete is one statement. It waits for a writer
                # holding the row and then judges the count it left; a count its snapshot saw
                # above `-n` is not waited for, and the update below finds it at zero instead.
                row = await self._one(
                    "DELETE FROM blobs WHERE id = %s AND refs <= %s RETURNING data IS NULL",
                    (blob, -n),
                )
                if row is not None:
                    self.released += [blob] if row[0] else []
                    return
            rows = await self._all(
                "UPDATE blobs SET refs = refs + %s WHERE id = %s RETURNING id, refs, data IS NULL",
                (n, blob),
            )
        else:
            ids, ns = (list(column) for column in zip(*changes, strict=True))
            await self._all("SELECT 1 FROM blobs WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (ids,))
            rows = await self._all(
                "UPDATE blobs SET refs = blobs.refs + d.n "
                "FROM unnest(%s::text[], %s::bigint[]) AS d(id, n) WHERE blobs.id = d.id "
                "RETURNING blobs.id, blobs.refs, blobs.data IS NULL",
                (ids, ns),
            )
        found = {blob for blob, _, _ in rows}
        if any(n > 0 and blob not in found for blob, n in changes):
            raise errors.SourceChanged("a blob of the source was released concurrently")
        # The rows are locked: a count at zero is final, and the blob goes in this transaction.
        gone = [(blob, in_file) for blob, refs, in_file in rows if refs <= 0]
        if gone:
            await self._run("DELETE FROM blobs WHERE id = ANY(%s)", ([blob for blob, _ in gone],))
            self.released += [blob for blob, in_file in gone if in_file]

    async def insert_object(self, obj: ObjectInfo) -> bool:
        # The bucket is checked (and held, as a foreign key would) by the insert itself.
        values = object_values(obj)
        marks = ", ".join(["%s"] * (1 + len(values)))
        insert = (
            f"INSERT INTO objects (bucket, {OBJECT_COLUMNS}) SELECT {marks} "
            "WHERE EXISTS (SELECT 1 FROM buckets WHERE name = %s FOR KEY SHARE) "
            "ON CONFLICT (bucket, key) DO NOTHING"
        )
        where = (obj.bucket, obj.key.encode())
        for _ in range(3):
            if await self._run(insert, (obj.bucket, *values, obj.bucket)) == 1:
                if (obj.bucket, obj.key) in self._checked:
                    # The row is this write's now (a promoted version), locked until the end.
                    self._checked[obj.bucket, obj.key] = True
                return True
            # Another write made the key's row after this one's delete_object looked (it
            # replaced the row this one waited for, or the key had none)...
            row = await self._one(
                f"SELECT {OBJECT_COLUMNS} FROM objects WHERE bucket = %s AND key = %s FOR UPDATE",
                where,
            )
            if row is None:
                if await self._one("SELECT 1 FROM buckets WHERE name = %s", (obj.bucket,)) is None:
                    return False
                continue  # ...and it went again meanwhile
            # ...a write that checked the key's state (a condition) must check it anew; any
            # other replaces that row as a later write would, its references released. By an
            # UPDATE: the writers queued on the row then lock the version this one makes.
            there = object_from_row(obj.bucket, row)
            versioned = (obj.version_id, there.version_id) != (NULL_VERSION, NULL_VERSION)
            if (obj.bucket, obj.key) in self._checked or versioned:
                raise Conflict()
            await self.release(there.extents)
            await self._run(
                f"UPDATE objects SET ({_OBJECT_FIELDS}) = ({', '.join(['%s'] * len(values[1:]))}) "
                "WHERE bucket = %s AND key = %s",
                (*values[1:], *where),
            )
            return True
        raise Conflict()

    async def delete_object(self, bucket: str, key: str) -> ObjectInfo | None:
        row = await self._delete_current(bucket, key, OBJECT_COLUMNS)
        return object_from_row(bucket, row) if row else None

    async def drop_object(self, bucket: str, key: str) -> tuple[Extent, ...] | None:
        row = await self._delete_current(bucket, key, "manifest")
        return decode_manifest(row[0]) if row else None

    async def _delete_current(self, bucket: str, key: str, columns: str) -> Row | None:
        """Delete the key's row of `objects`; `columns` of it, or None."""
        row = await self._one(
            f"DELETE FROM objects WHERE bucket = %s AND key = %s RETURNING {columns}",
            (bucket, key.encode()),
        )
        if row is not None and self._checked.get((bucket, key)) is False:
            # The write found no object there (If-None-Match: *), and another has made one
            # since: no lock could hold a row that did not exist. It checks again.
            raise Conflict()
        return row

    async def insert_version(self, obj: ObjectInfo, seq: str) -> None:
        values = version_values(obj, seq)
        await self._run(
            f"INSERT INTO versions (bucket, {VERSION_COLUMNS}) "
            f"VALUES ({', '.join(['%s'] * (1 + len(values)))})",
            (obj.bucket, *values),
        )

    async def delete_version(self, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
        where, args = version_where(version_id)
        row = await self._one(
            f"DELETE FROM versions WHERE bucket = %s AND key = %s AND {where} "
            f"RETURNING {VERSION_COLUMNS}",
            (bucket, key.encode(), *args),
        )
        if row is not None:
            return version_from_row(bucket, row)
        # Not there: gone for good, or made current by a promotion.
        await self._check_not_promoted(bucket, key, version_id)
        return None

    async def remember_content_md5(self, obj: ObjectInfo, md5: str) -> None:
        # The version may be current or not (a copy from an older version): both tables.
        for table in ("objects", "versions"):
            await self._run(
                f"UPDATE {table} SET content_md5 = %s "
                "WHERE bucket = %s AND key = %s AND etag = %s AND manifest = %s",
                (md5, obj.bucket, obj.key.encode(), obj.etag, encode_manifest(obj.extents)),
            )

    async def insert_upload(self, upload: Upload) -> None:
        await self._run(
            f"INSERT INTO uploads ({UPLOAD_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            upload_values(upload),
        )

    async def put_part(self, part: Part) -> Part | None:
        old = await self._one(
            f"DELETE FROM parts WHERE upload_id = %s AND number = %s RETURNING {PART_COLUMNS}",
            (part.upload_id, part.number),
        )
        await self._run(
            f"INSERT INTO parts (upload_id, {PART_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
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
        await self.settle()
        if refs > 0:
            await self._run("UPDATE blobs SET refs = %s WHERE id = %s", (refs, blob_id))
            return
        row = await self._one("DELETE FROM blobs WHERE id = %s RETURNING data IS NULL", (blob_id,))
        if row and row[0]:
            self.released.append(blob_id)

    async def add_intent(self, blob_id: str, node: str, expires_ns: int) -> None:
        await self._run(
            "INSERT INTO blob_intents (blob_id, node, expires_ns) VALUES (%s, %s, %s)",
            (blob_id, node, expires_ns),
        )

    async def renew_intent(self, blob_id: str, expires_ns: int) -> bool:
        return (
            await self._run(
                "UPDATE blob_intents SET expires_ns = %s WHERE blob_id = %s", (expires_ns, blob_id)
            )
            == 1
        )

    async def drop_intents(self, blob_ids: Iterable[str] | None) -> None:
        if blob_ids is None:
            await self._run("DELETE FROM blob_intents")
            return
        await self._run("DELETE FROM blob_intents WHERE blob_id = ANY(%s)", (list(blob_ids),))

    async def claim_id(self, proposed: str | None) -> str | None:
        if proposed is not None:
            await self._run(
                "INSERT INTO catalog_id (one, id) VALUES (1, %s) ON CONFLICT (one) DO NOTHING",
                (proposed,),
            )
        row = await self._one("SELECT id FROM catalog_id")
        return row[0] if row else None

    async def take_expired_intents(self, now_ns: int, limit: int) -> list[str]:
        # The expiry is judged again on each row as the DELETE locks it: an intent renewed
        # or committed (deleted) meanwhile by its writer is skipped. No SKIP LOCKED: two
        # reclaimers wait for each other here and take each row once.
        rows = await self._all(
            "DELETE FROM blob_intents WHERE blob_id IN (SELECT blob_id FROM blob_intents "
            "WHERE expires_ns < %s ORDER BY expires_ns LIMIT %s) AND expires_ns < %s "
            "RETURNING blob_id",
            (now_ns, limit, now_ns),
        )
        return [blob_id for (blob_id,) in rows]

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
        self._defer(
            "INSERT INTO outbox (bucket, key, event, version_id, time_ns, facts, part) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (bucket, key.encode(), event, version_id, time_ns, facts, part),
        )

    async def delete_outbox(self, seqs: Sequence[int]) -> None:
        await self._run("DELETE FROM outbox WHERE seq = ANY(%s)", (list(seqs),))

    async def hold_lease(self, name: str, holder: str, now_ns: int, until_ns: int) -> bool:
        # One statement: two takers at once meet on the row's lock, and the second sees the
        # first's holder (ON CONFLICT, no advisory lock: CockroachDB and YugabyteDB run it).
        rows = await self._all(
            "INSERT INTO leases (name, holder, expires_ns) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "expires_ns = excluded.expires_ns "
            "WHERE leases.holder = excluded.holder OR leases.expires_ns < %s RETURNING holder",
            (name, holder, until_ns, now_ns),
        )
        return bool(rows)

    async def drop_lease(self, name: str, holder: str) -> None:
        await self._run("DELETE FROM leases WHERE name = %s AND holder = %s", (name, holder))

    async def live_leases(self, prefix: str, now_ns: int) -> dict[str, str]:
        rows = await self._all(
            "SELECT name, holder FROM leases WHERE left(name, %s) = %s AND expires_ns >= %s",
            (len(prefix), prefix, now_ns),
        )
        return {name: holder for name, holder in rows}

    async def drop_leases(self, prefix: str, holder: str) -> None:
        await self._run(
            "DELETE FROM leases WHERE holder = %s AND left(name, %s) = %s",
            (holder, len(prefix), prefix),
        )

    async def lock_docs(self, kind: str, account: str) -> dict[str, str]:
        # Two changes of one account's documents wait for each other on its rows; two making
        # an account's first ones at once both go ahead (a name made twice: the upsert).
        rows = await self._all(
            f"SELECT name, doc FROM {doc_table(kind)} WHERE account = %s FOR UPDATE", (account,)
        )
        return {name: doc for name, doc in rows}

    async def put_doc(self, kind: str, account: str, name: str, doc: str) -> None:
        await self._run(
            f"INSERT INTO {doc_table(kind)} (account, name, doc) VALUES (%s, %s, %s) "
            "ON CONFLICT (account, name) DO UPDATE SET doc = excluded.doc",
            (account, name, doc),
        )

    async def delete_doc(self, kind: str, account: str, name: str) -> None:
        await self._run(
            f"DELETE FROM {doc_table(kind)} WHERE account = %s AND name = %s", (account, name)
        )

    async def delete_upload(self, upload_id: str) -> list[Part]:
        # The upload's row first: its exclusive lock waits for the parts being written into
        # it (they hold its SHARE lock), whose rows the next statement then sees.
        await self._run("DELETE FROM uploads WHERE id = %s", (upload_id,))
        rows = await self._all(
            f"DELETE FROM parts WHERE upload_id = %s RETURNING {PART_COLUMNS}", (upload_id,)
        )
        return [part_from_row(upload_id, row) for row in rows]


class PostgresAudit:
    """api.CatalogAudit: whole-table scans, streamed through a server-side cursor."""

    def __init__(self, catalog: PostgresCatalog) -> None:
        self.catalog = catalog

    async def audit_blobs(self) -> AsyncIterator[BlobRow]:
        async for blob_id, size, refs, inline in self.catalog.stream(
            "SELECT id, size, refs, data IS NOT NULL FROM blobs"
        ):
            yield BlobRow(blob_id, size, refs, bool(inline))

    async def audit_objects(self) -> AsyncIterator[ObjectInfo]:
        async for row in self.catalog.stream(f"SELECT bucket, {OBJECT_COLUMNS} FROM objects"):
            yield object_from_row(row[0], row[1:])
        async for row in self.catalog.stream(f"SELECT bucket, {VERSION_COLUMNS} FROM versions"):
            yield version_from_row(row[0], row[1:])

    async def audit_parts(self) -> AsyncIterator[tuple[Part, Upload | None]]:
        async for row in self.catalog.stream(
            f"SELECT p.upload_id, {', '.join('p.' + c for c in PART_COLUMNS.split(', '))}, "
            f"{', '.join('u.' + c for c in UPLOAD_COLUMNS.split(', '))} "
            "FROM parts p LEFT JOIN uploads u ON u.id = p.upload_id"
        ):
            part = part_from_row(row[0], row[1:7])
            yield part, upload_from_row(row[7:]) if row[7] is not None else None

    async def audit_intents(self) -> AsyncIterator[str]:
        async for (blob_id,) in self.catalog.stream("SELECT blob_id FROM blob_intents"):
            yield blob_id
