"""The catalog: SQLite, the only source of truth for what exists.

Buckets, objects (a row and a manifest of extents) and blobs (size, reference count, and the
bytes themselves for small ones). Every function here takes a connection and runs inside the
caller's transaction; `CatalogWriter` owns the one writing connection and commits.

Keys are stored as BLOBs of their UTF-8 bytes, so that SQLite's memcmp ordering is S3's listing
order (UTF-8 byte order) and prefix bounds can be computed on bytes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import json
import logging
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from .. import digest
from . import errors
from .blobs import BlobFiles
from .model import (
    Bucket,
    Extent,
    ListEntry,
    ListPage,
    ObjectAttrs,
    ObjectInfo,
    Part,
    StagedBlob,
    Upload,
    UploadsPage,
    WriteCondition,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS buckets (
    name        TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    region      TEXT NOT NULL,
    created_ns  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS objects (
    bucket      TEXT NOT NULL,
    key         BLOB NOT NULL,
    size        INTEGER NOT NULL,
    etag        TEXT NOT NULL,
    content_md5 TEXT,
    mtime_ns    INTEGER NOT NULL,
    attrs       TEXT NOT NULL,
    manifest    TEXT NOT NULL,
    parts       TEXT,
    upload_id   TEXT,
    PRIMARY KEY (bucket, key)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS uploads (
    id           TEXT PRIMARY KEY,
    bucket       TEXT NOT NULL,
    key          BLOB NOT NULL,
    initiated_ns INTEGER NOT NULL,
    owner        TEXT NOT NULL,
    attrs        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS uploads_by_key ON uploads (bucket, key, initiated_ns, id);

CREATE TABLE IF NOT EXISTS parts (
    upload_id   TEXT NOT NULL,
    number      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    etag        TEXT NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    manifest    TEXT NOT NULL,
    checksum    TEXT,
    PRIMARY KEY (upload_id, number)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS blobs (
    id          TEXT PRIMARY KEY,
    size        INTEGER NOT NULL,
    refs        INTEGER NOT NULL,
    data        BLOB
);
"""


def connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves; check_same_thread=False only
    # because a connection is created on one thread and then owned by another.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: the WAL is fsynced at every commit, so a commit is durable before we answer 200.
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def initialise(path: Path) -> None:
    conn = connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"catalog {path} has schema {version}, newer than this gateway")
        if version == 1:
            # 2: parts keep the flexible checksum their UploadPart verified.
            conn.execute("ALTER TABLE parts ADD COLUMN checksum TEXT")
        conn.executescript(SCHEMA)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    finally:
        conn.close()


# --- buckets ----------------------------------------------------------------------------------


def get_bucket(conn: sqlite3.Connection, name: str) -> Bucket | None:
    row = conn.execute(
        "SELECT name, owner, region, created_ns FROM buckets WHERE name = ?", (name,)
    ).fetchone()
    return Bucket(*row) if row else None


def list_buckets(conn: sqlite3.Connection, owner: str | None = None) -> list[Bucket]:
    if owner is None:
        rows = conn.execute("SELECT name, owner, region, created_ns FROM buckets ORDER BY name")
    else:
        rows = conn.execute(
            "SELECT name, owner, region, created_ns FROM buckets WHERE owner = ? ORDER BY name",
            (owner,),
        )
    return [Bucket(*row) for row in rows]


def create_bucket(conn: sqlite3.Connection, bucket: Bucket) -> None:
    existing = get_bucket(conn, bucket.name)
    if existing is not None:
        if existing.owner == bucket.owner:
            raise errors.BucketAlreadyOwnedByYou(BucketName=bucket.name)
        raise errors.BucketAlreadyExists(BucketName=bucket.name)
    conn.execute(
        "INSERT INTO buckets (name, owner, region, created_ns) VALUES (?, ?, ?, ?)",
        (bucket.name, bucket.owner, bucket.region, bucket.created_ns),
    )


def delete_bucket(conn: sqlite3.Connection, name: str) -> list[str]:
    """Delete an empty bucket; its unfinished multipart uploads go with it."""
    require_bucket(conn, name)
    if conn.execute("SELECT 1 FROM objects WHERE bucket = ? LIMIT 1", (name,)).fetchone():
        raise errors.BucketNotEmpty(BucketName=name)
    files: list[str] = []
    for (upload_id,) in conn.execute("SELECT id FROM uploads WHERE bucket = ?", (name,)).fetchall():
        files += abort_upload(conn, upload_id)
    conn.execute("DELETE FROM buckets WHERE name = ?", (name,))
    return files


def require_bucket(conn: sqlite3.Connection, name: str) -> Bucket:
    bucket = get_bucket(conn, name)
    if bucket is None:
        raise errors.NoSuchBucket(BucketName=name)
    return bucket


# --- blobs and references -----------------------------------------------------------------------


def retain(
    conn: sqlite3.Connection, extents: Iterable[Extent], new_blobs: Iterable[StagedBlob] = ()
) -> None:
    """One reference per extent; `new_blobs` (staged by this request) are inserted with
    theirs. Raises SourceChanged if a blob is gone (released meanwhile)."""
    counts = Counter(e.blob for e in extents)
    for blob in new_blobs:
        conn.execute(
            "INSERT INTO blobs (id, size, refs, data) VALUES (?, ?, ?, ?)",
            (blob.id, blob.size, counts.pop(blob.id, 0), blob.data),
        )
    for blob, n in counts.items():
        cur = conn.execute("UPDATE blobs SET refs = refs + ? WHERE id = ?", (n, blob))
        if cur.rowcount != 1:
            raise errors.SourceChanged("a blob of the source was released concurrently")


def release(conn: sqlite3.Connection, extents: Iterable[Extent]) -> list[str]:
    """Drop one reference per extent; delete blobs that reach zero. Returns the ids of the
    blob *files* to unlink once the transaction has committed."""
    files: list[str] = []
    for blob, n in Counter(e.blob for e in extents).items():
        # Most blobs have one user: try the delete first, one statement in that case.
        row = conn.execute(
            "DELETE FROM blobs WHERE id = ? AND refs <= ? RETURNING data IS NULL", (blob, n)
        ).fetchone()
        if row is None:
            conn.execute("UPDATE blobs SET refs = refs - ? WHERE id = ?", (n, blob))
        elif row[0]:
            files.append(blob)
    return files


def leftover_files(conn: sqlite3.Connection, files: BlobFiles) -> Iterator[list[os.DirEntry[str]]]:
    """Blob files the catalog does not know as file blobs, one directory at a time: what a
    crash (or a worker killed mid-request) left. The start-up sweep removes them and fsck
    calls them leftovers, not damage: both ask here, so they cannot disagree.

    Each file is looked up by its exact name, never by a range of ids: a range bound worked
    out as text (the `ffff` directory's "next prefix" is "10000", below "ffff…") once made
    every referenced blob of a directory look orphaned.
    """
    for _prefix, entries in files.walk():
        names = [entry.name for entry in entries]
        known: set[str] = set()
        for start in range(0, len(names), _LOOKUP_BATCH):
            batch = names[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(batch))
            known.update(
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM blobs WHERE id IN ({marks}) AND data IS NULL", batch
                )
            )
        stale = [entry for entry in entries if entry.name not in known]
        if stale:
            yield stale


# Names looked up per statement: well under SQLite's limit on bound parameters.
_LOOKUP_BATCH = 500


def read_inline(conn: sqlite3.Connection, blob_ids: Iterable[str]) -> dict[str, bytes]:
    """The bytes of the inline blobs among `blob_ids`."""
    found: dict[str, bytes] = {}
    for blob in set(blob_ids):
        row = conn.execute("SELECT data FROM blobs WHERE id = ?", (blob,)).fetchone()
        if row is not None and row[0] is not None:
            found[blob] = row[0]
    return found


# --- objects ----------------------------------------------------------------------------------

_OBJECT_COLUMNS = "key, size, etag, content_md5, mtime_ns, attrs, manifest, parts, upload_id"


def _encode_attrs(attrs: ObjectAttrs) -> str:
    fields = {"content_type": attrs.content_type, "headers": attrs.headers, "meta": attrs.meta}
    if attrs.checksums:
        fields["checksums"] = attrs.checksums
    return json.dumps(fields, separators=(",", ":"))


def _decode_attrs(text: str) -> ObjectAttrs:
    a = json.loads(text)
    return ObjectAttrs(a["content_type"], a["headers"], a["meta"], a.get("checksums", {}))


def encode_manifest(extents: Iterable[Extent]) -> str:
    return json.dumps([[e.blob, e.offset, e.length] for e in extents], separators=(",", ":"))


def decode_manifest(text: str) -> tuple[Extent, ...]:
    return tuple(Extent(b, o, n) for b, o, n in json.loads(text))


def _object_from_row(bucket: str, row: Sequence[Any]) -> ObjectInfo:
    key, size, etag, content_md5, mtime_ns, attrs, manifest, parts, upload_id = row
    return ObjectInfo(
        bucket=bucket,
        key=key.decode(),
        size=size,
        etag=etag,
        mtime_ns=mtime_ns,
        attrs=_decode_attrs(attrs),
        extents=decode_manifest(manifest),
        content_md5=content_md5,
        parts=tuple(json.loads(parts)) if parts else (),
        upload_id=upload_id,
    )


def get_object(conn: sqlite3.Connection, bucket: str, key: str) -> ObjectInfo | None:
    row = conn.execute(
        f"SELECT {_OBJECT_COLUMNS} FROM objects WHERE bucket = ? AND key = ?",
        (bucket, key.encode()),
    ).fetchone()
    return _object_from_row(bucket, row) if row else None


def put_object(
    conn: sqlite3.Connection, obj: ObjectInfo, new_blobs: Sequence[StagedBlob] = ()
) -> list[str]:
    """Insert or replace an object. References to its extents are taken before the replaced
    object's are dropped, in this one transaction, so replacing an object by a copy of itself
    never frees a blob it still uses. Returns blob files to unlink after commit."""
    retain(conn, obj.extents, new_blobs)
    dropped = _delete_object_row(conn, obj.bucket, obj.key)
    # The bucket is checked by the insert itself (one statement less per PUT); what ran
    # before is undone with the failing write's savepoint.
    cur = conn.execute(
        f"INSERT INTO objects (bucket, {_OBJECT_COLUMNS}) "
        "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM buckets WHERE name = ?)",
        (
            obj.bucket,
            obj.key.encode(),
            obj.size,
            obj.etag,
            obj.content_md5,
            obj.mtime_ns,
            _encode_attrs(obj.attrs),
            encode_manifest(obj.extents),
            json.dumps(list(obj.parts)) if obj.parts else None,
            obj.upload_id,
            obj.bucket,
        ),
    )
    if cur.rowcount != 1:
        raise errors.NoSuchBucket(BucketName=obj.bucket)
    return dropped


def check_write(
    conn: sqlite3.Connection, bucket: str, key: str, condition: WriteCondition | None
) -> None:
    if condition is None:
        return
    current = get_object(conn, bucket, key)
    if (
        condition.if_none_match is not None
        and current is not None
        and digest.matches(condition.if_none_match, current.etag)
    ):
        raise errors.PreconditionFailed(Condition="If-None-Match")
    if condition.if_match is not None:
        if current is None:
            raise errors.NoSuchKey(Key=key)
        if not digest.matches(condition.if_match, current.etag):
            raise errors.PreconditionFailed(Condition="If-Match")


def remember_content_md5(conn: sqlite3.Connection, obj: ObjectInfo, md5: str) -> None:
    """Record the MD5 of a multipart object's bytes once computed, so the next copy of it
    reads nothing. Only if the row is still the version that was hashed."""
    conn.execute(
        "UPDATE objects SET content_md5 = ? WHERE bucket = ? AND key = ? AND manifest = ?",
        (md5, obj.bucket, obj.key.encode(), encode_manifest(obj.extents)),
    )


def _delete_object_row(conn: sqlite3.Connection, bucket: str, key: str) -> list[str]:
    row = conn.execute(
        "DELETE FROM objects WHERE bucket = ? AND key = ? RETURNING manifest",
        (bucket, key.encode()),
    ).fetchone()
    if row is None:
        return []
    return release(conn, decode_manifest(row[0]))


def delete_objects(conn: sqlite3.Connection, bucket: str, keys: Iterable[str]) -> list[str]:
    """Delete keys (a missing key is not an error, as in S3). Returns blob files to unlink."""
    require_bucket(conn, bucket)
    files: list[str] = []
    for key in keys:
        files += _delete_object_row(conn, bucket, key)
    return files


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string that starts with `prefix`."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def list_objects(
    conn: sqlite3.Connection,
    bucket: str,
    prefix: str = "",
    delimiter: str = "",
    after: str = "",
    max_keys: int = 1000,
) -> ListPage:
    """One page of a listing: keys > `after` that start with `prefix`, with keys that contain
    `delimiter` after the prefix rolled up into common prefixes (each counting as one entry).

    Each common prefix costs one index seek: the scan jumps past every key below it instead of
    reading them, so a page costs the same whatever the bucket holds.
    """
    require_bucket(conn, bucket)
    p = prefix.encode()
    d = delimiter.encode()
    upper = _successor(p)
    cursor = after.encode()
    inclusive = False  # is `cursor` itself a candidate (after a seek) or excluded (a marker)?
    if d and cursor.startswith(p):
        # A marker that is itself a common prefix (a NextMarker we returned): skip what it
        # rolled up, or the next page would repeat it.
        cut = cursor.find(d, len(p))
        if cut >= 0 and cut + len(d) == len(cursor):
            nxt = _successor(cursor)
            if nxt is None:
                return ListPage((), (), False, None)
            cursor, inclusive = nxt, True
    if cursor < p:
        cursor, inclusive = p, True

    entries: list[ListEntry] = []
    prefixes: list[str] = []
    last: str | None = None
    if max_keys <= 0:
        return ListPage((), (), False, None)  # s3-tests test_bucket_list_maxkeys_zero
    bound = " AND key < ?" if upper is not None else ""
    while True:
        want = max_keys - len(entries) - len(prefixes)
        # One row beyond the page tells whether the listing is truncated.
        # Rows are stepped one at a time, not fetched: after a common prefix the scan stops
        # and seeks, so it never reads the keys below the prefix.
        rows = conn.execute(
            "SELECT key, size, etag, mtime_ns FROM objects WHERE bucket = ? AND key "
            + (">= ?" if inclusive else "> ?")
            + bound
            + " ORDER BY key LIMIT ?",
            [bucket, cursor, *([upper] if upper is not None else []), want + 1],
        )
        seek: bytes | None = None
        for key, size, etag, mtime_ns in rows:
            if want == 0:
                return ListPage(tuple(entries), tuple(prefixes), True, last)
            want -= 1
            cut = key.find(d, len(p)) if d else -1
            if cut < 0:
                entries.append(ListEntry(key.decode(), size, etag, mtime_ns))
                last = entries[-1].key
                continue
            common = key[: cut + len(d)]
            prefixes.append(common.decode())
            last = prefixes[-1]
            seek = _successor(common)
            break
        if seek is None:
            # The rows ran out before the page filled (or nothing lies past the prefix).
            return ListPage(tuple(entries), tuple(prefixes), False, last)
        cursor, inclusive = seek, True
        if want == 0:
            more = conn.execute(
                "SELECT 1 FROM objects WHERE bucket = ? AND key >= ?" + bound + " LIMIT 1",
                [bucket, cursor, *([upper] if upper is not None else [])],
            ).fetchone()
            return ListPage(tuple(entries), tuple(prefixes), more is not None, last)


# --- multipart uploads ------------------------------------------------------------------------

MIN_PART_SIZE = 5 * 1024 * 1024  # every part but the last (AWS: 5 MiB)
MAX_OBJECT_SIZE = 5 * 1024**4  # 5 TiB
_UPLOAD_COLUMNS = "id, bucket, key, initiated_ns, owner, attrs"


def create_upload(conn: sqlite3.Connection, upload: Upload) -> None:
    require_bucket(conn, upload.bucket)
    conn.execute(
        f"INSERT INTO uploads ({_UPLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        (
            upload.id,
            upload.bucket,
            upload.key.encode(),
            upload.initiated_ns,
            upload.owner,
            _encode_attrs(upload.attrs),
        ),
    )


def _upload_from_row(row: Sequence[Any]) -> Upload:
    upload_id, bucket, key, initiated_ns, owner, attrs = row
    return Upload(upload_id, bucket, key.decode(), initiated_ns, owner, _decode_attrs(attrs))


def get_upload(conn: sqlite3.Connection, upload_id: str, bucket: str, key: str) -> Upload:
    """The upload, which must be for this bucket and key (else NoSuchUpload, as on AWS)."""
    row = conn.execute(
        f"SELECT {_UPLOAD_COLUMNS} FROM uploads WHERE id = ? AND bucket = ? AND key = ?",
        (upload_id, bucket, key.encode()),
    ).fetchone()
    if row is None:
        raise errors.NoSuchUpload(UploadId=upload_id)
    return _upload_from_row(row)


def put_part(
    conn: sqlite3.Connection, part: Part, new_blobs: Sequence[StagedBlob] = ()
) -> list[str]:
    """Store a part (replacing a part with the same number). Returns files to unlink."""
    retain(conn, part.extents, new_blobs)
    old = conn.execute(
        "DELETE FROM parts WHERE upload_id = ? AND number = ? RETURNING manifest",
        (part.upload_id, part.number),
    ).fetchone()
    conn.execute(
        "INSERT INTO parts (upload_id, number, size, etag, mtime_ns, manifest, checksum) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
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
    return release(conn, decode_manifest(old[0])) if old else []


def _part_from_row(upload_id: str, row: Sequence[Any]) -> Part:
    number, size, etag, mtime_ns, manifest, checksum = row
    return Part(upload_id, number, size, etag, mtime_ns, decode_manifest(manifest), checksum)


def list_parts(
    conn: sqlite3.Connection, upload_id: str, after: int = 0, limit: int = -1
) -> list[Part]:
    rows = conn.execute(
        "SELECT number, size, etag, mtime_ns, manifest, checksum FROM parts "
        "WHERE upload_id = ? AND number > ? ORDER BY number LIMIT ?",
        (upload_id, after, limit),
    )
    return [_part_from_row(upload_id, row) for row in rows]


def abort_upload(conn: sqlite3.Connection, upload_id: str) -> list[str]:
    """Forget an upload and release its parts. Returns files to unlink."""
    files: list[str] = []
    for (manifest,) in conn.execute(
        "DELETE FROM parts WHERE upload_id = ? RETURNING manifest", (upload_id,)
    ).fetchall():
        files += release(conn, decode_manifest(manifest))
    conn.execute("DELETE FROM uploads WHERE id = ?", (upload_id,))
    return files


def complete_upload(
    conn: sqlite3.Connection,
    upload: Upload,
    chosen: Sequence[tuple[int, str]],
    etag_of: Callable[[Sequence[str]], str],
    mtime_ns: int,
    checksums_of: Callable[[Sequence[Part]], dict[str, str]] = lambda parts: {},
    condition: WriteCondition | None = None,
) -> tuple[ObjectInfo, list[str]]:
    """Make the object from the chosen (part number, ETag) pairs, in ascending order.

    The object's manifest is the parts' manifests end to end: no byte is copied. Every part
    must exist with that ETag (InvalidPart) and all but the last be at least 5 MiB
    (EntityTooSmall). Parts not chosen are released with the upload.
    """
    check_write(conn, upload.bucket, upload.key, condition)
    parts = {p.number: p for p in list_parts(conn, upload.id)}
    picked: list[Part] = []
    for number, etag in chosen:
        part = parts.get(number)
        if part is None or part.etag != etag:
            raise errors.InvalidPart(UploadId=upload.id, PartNumber=number, ETag=etag)
        picked.append(part)
    for part in picked[:-1]:
        if part.size < MIN_PART_SIZE:
            raise errors.EntityTooSmall(
                ProposedSize=part.size, MinSizeAllowed=MIN_PART_SIZE, PartNumber=part.number
            )
    size = sum(p.size for p in picked)
    if size > MAX_OBJECT_SIZE:
        raise errors.EntityTooLarge(ProposedSize=size, MaxSizeAllowed=MAX_OBJECT_SIZE)
    obj = ObjectInfo(
        bucket=upload.bucket,
        key=upload.key,
        size=size,
        etag=etag_of([p.etag for p in picked]),
        mtime_ns=mtime_ns,
        attrs=replace(upload.attrs, checksums=checksums_of(picked)),
        extents=tuple(e for p in picked for e in p.extents),
        parts=tuple(p.size for p in picked),
        upload_id=upload.id,
    )
    files = put_object(conn, obj)  # references the parts' blobs before the upload lets go
    files += abort_upload(conn, upload.id)
    return obj, files


def list_uploads(
    conn: sqlite3.Connection,
    bucket: str,
    prefix: str = "",
    delimiter: str = "",
    key_marker: str = "",
    upload_id_marker: str = "",
    max_uploads: int = 1000,
) -> UploadsPage:
    """Uploads by key, then by initiation time; common prefixes as in list_objects."""
    require_bucket(conn, bucket)
    p, d = prefix.encode(), delimiter.encode()
    upper = _successor(p)
    marker = key_marker.encode()
    # Resume inside the marker key only when an upload-id marker says where.
    after_id: tuple[int, str] | None = None
    if key_marker and upload_id_marker:
        row = conn.execute(
            "SELECT initiated_ns, id FROM uploads WHERE id = ?", (upload_id_marker,)
        ).fetchone()
        after_id = (row[0], row[1]) if row else None
    rows = conn.execute(
        f"SELECT {_UPLOAD_COLUMNS} FROM uploads WHERE bucket = ? AND key >= ?"
        + (" AND key < ?" if upper is not None else "")
        + " ORDER BY key, initiated_ns, id",
        [bucket, max(p, marker), *([upper] if upper is not None else [])],
    )
    uploads: list[Upload] = []
    prefixes: list[str] = []
    for row in rows:
        key = row[2]
        if key_marker and (
            key < marker or (key == marker and (after_id is None or (row[3], row[0]) <= after_id))
        ):
            continue
        cut = key.find(d, len(p)) if d else -1
        if cut >= 0:
            common = key[: cut + len(d)].decode()
            if prefixes and prefixes[-1] == common:
                continue
            if common == key_marker:
                continue
            item: Any = common
        else:
            item = _upload_from_row(row)
        if len(uploads) + len(prefixes) == max_uploads:
            return UploadsPage(tuple(uploads), tuple(prefixes), True)
        (prefixes if isinstance(item, str) else uploads).append(item)
    return UploadsPage(tuple(uploads), tuple(prefixes), False)


# --- the writer ---------------------------------------------------------------------------------


class CatalogWriter:
    """The one writing connection of a process, with group commit.

    Requests hand in closures. The writes waiting when a group starts run in one transaction,
    each in its own savepoint (one failing write does not undo the others), and are committed
    together (one WAL fsync for the group); their requests are answered only after the
    commit. A closure returns (result, blob files it released); files the request staged are
    released when its closure fails, so a request that disappears meanwhile can neither leak
    a blob nor delete one a committed object uses. Released files are moved out of blobs/
    (renames) before the group is answered and freed after: a write that replaced a 5 GiB
    object is not kept waiting while the file system frees it, but a write marked `frees` (a
    delete) is answered once the space is free.

    The statements run on the event loop and only the COMMIT in a thread: sqlite3 releases
    the GIL around every statement, and a writer thread then waited, statement by statement,
    for a busy event loop to hand the GIL back (that, not the fsync, capped a worker's small
    PUTs). Closures marked `long` (thousands of statements) run in the thread instead, so as
    not to stall the loop. The writers of several worker processes take turns by an flock
    rather than by SQLite's busy handler, which sleeps 1, 2, 5 ... ms between tries: flock
    hands the turn over at once, and meanwhile the waiting worker's group grows.
    """

    MAX_GROUP = 256

    def __init__(
        self,
        path: Path,
        files: BlobFiles,
        pool: concurrent.futures.Executor,
    ) -> None:
        self._conn = connect(path)
        self._turn = os.open(f"{path}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._files = files
        self._pool = pool
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="catalog")
        self._pending: list[_Write] = []
        self._drainer: asyncio.Task[None] | None = None

    async def run(
        self,
        fn: Callable[[sqlite3.Connection], tuple[T, list[str]]],
        staged: Sequence[str] = (),
        *,
        long: bool = False,
        frees: bool = False,
    ) -> T:
        """Run `fn` in a committed transaction; `staged` are blob files to remove if it fails.
        `long`: many statements, run off the event loop. `frees`: answer once the space of
        the files it released is free."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._pending.append(_Write(fn, list(staged), fut, long, frees))
        if self._drainer is None:
            self._drainer = loop.create_task(self._drain())
        return await fut

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self._conn.close()
        os.close(self._turn)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                group = self._pending[: self.MAX_GROUP]
                del self._pending[: self.MAX_GROUP]
                try:
                    await self._take_turn(loop)
                    if any(write.long for write in group):
                        done = await loop.run_in_executor(
                            self._thread, self._apply_and_commit, group
                        )
                    else:
                        applied = self._apply(group)
                        done = await loop.run_in_executor(self._thread, self._commit, *applied)
                except Exception as exc:  # no turn, or the thread is gone: nothing committed
                    log.exception("catalog group failed")
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    fcntl.flock(self._turn, fcntl.LOCK_UN)  # harmless if not held
                    done = group, [(None, exc)] * len(group), []
                self._settle(loop, *done)
        finally:
            self._drainer = None

    async def _take_turn(self, loop: asyncio.AbstractEventLoop) -> None:
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

    def _apply(self, group: list[Any]) -> tuple[list[Any], list[tuple[Any, Any]], list[str]]:
        """Begin, and run each closure in its savepoint. An error of the transaction itself
        (not of a closure) is the whole group's outcome."""
        conn = self._conn
        outcomes: list[tuple[Any, BaseException | None]] = []
        to_unlink: list[str] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for write in group:
                conn.execute("SAVEPOINT op")
                try:
                    result, files = write.fn(conn)
                except Exception as exc:
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    outcomes.append((None, exc))
                else:
                    conn.execute("RELEASE op")
                    outcomes.append((result, None))
                    to_unlink += files
        except Exception as exc:
            log.exception("catalog transaction failed")
            outcomes = [(None, exc)] * len(group)
            to_unlink = []
        return group, outcomes, to_unlink

    def _commit(
        self, group: list[Any], outcomes: list[tuple[Any, Any]], to_unlink: list[str]
    ) -> tuple[list[Any], list[tuple[Any, Any]], list[str]]:
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
            outcomes = [(None, exc)] * len(group)
            to_unlink = []
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
        return group, outcomes, to_unlink

    def _apply_and_commit(self, group: list[Any]) -> tuple[list[Any], list[Any], list[str]]:
        return self._commit(*self._apply(group))

    def _settle(
        self,
        loop: asyncio.AbstractEventLoop,
        group: list[_Write],
        outcomes: list[tuple[Any, BaseException | None]],
        released: list[str],
    ) -> None:
        for write, (_result, exc) in zip(group, outcomes, strict=True):
            if exc is not None:
                released += write.staged
        soon, later = [], []
        for write, outcome in zip(group, outcomes, strict=True):
            (later if write.frees and released else soon).append((write.fut, *outcome))
        if not released:
            _answer(soon)
            return
        # Off the loop, without holding up the next group.
        self._pool.submit(self._release, loop, released, soon, later)

    def _release(
        self,
        loop: asyncio.AbstractEventLoop,
        released: list[str],
        soon: list[Any],
        later: list[Any],
    ) -> None:
        retired: list[Path] = []
        try:
            retired = self._files.retire(released)
        except OSError:
            log.exception("could not move released blob files out (the sweep will remove them)")
        loop.call_soon_threadsafe(_answer, soon)
        try:
            self._files.purge(retired)
        except OSError:
            log.exception("could not free released blob files (the sweep will)")
        if later:
            loop.call_soon_threadsafe(_answer, later)


@dataclass
class _Write:
    fn: Callable[[sqlite3.Connection], tuple[Any, list[str]]]
    staged: list[str]
    fut: asyncio.Future[Any]
    long: bool
    frees: bool


def _answer(answers: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for fut, result, exc in answers:
        if fut.done():  # the request went away; its outcome stands regardless
            continue
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
