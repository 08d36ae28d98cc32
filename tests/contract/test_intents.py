"""Blob intents over each backend (gateway/store/intents.py): a blob file is named in the
catalog before it is published and until its commit; a reclaimer removes the files of lapsed
intents and old files that nothing names, and never a file a writer is about to commit: a
writer whose intent was taken has its commit refused (503), never acknowledged without its
bytes. Also the combined read of an object and its inline bytes (one round trip per GET)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from gateway.store import Store, errors, open_catalog
from gateway.store.api import CatalogTx
from gateway.store.intents import Reclaimed
from gateway.store.model import ObjectAttrs, StagedBlob
from gateway.store.rows import encode_attrs
from tests.contract.conftest import Harness
from tests.postgres import PostgresServer

MIB = 1 << 20


async def _chunks(data: bytes, pause: float = 0.0) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 256 * 1024):
        if pause and start:
            await asyncio.sleep(pause)
        yield data[start : start + 256 * 1024]


def intents(h: Harness) -> set[str]:
    async def scan() -> set[str]:
        return {blob_id async for blob_id in h.store.catalog.audit.audit_intents()}

    return h.run(scan())


def files(root: Path) -> set[str]:
    return {p.name for p in (root / "blobs").rglob("*") if p.is_file()}


def tmp_files(root: Path) -> set[str]:
    return {p.name for p in (root / "tmp").iterdir()}


def age(path: Path, seconds: float = 3600) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def blob_path(root: Path, blob_id: str) -> Path:
    return root / "blobs" / blob_id[:2] / blob_id[2:4] / blob_id


def reclaim_all(h: Harness) -> Reclaimed:
    """Rounds enough to have looked through every folder of blobs/ once."""
    total = Reclaimed()
    for _ in range(len(list((h.root / "blobs").iterdir())) + 1):
        done = h.run(h.store.intents.reclaim())
        total.intents += done.intents
        total.files += done.files
    return total


@pytest.fixture
def lease(harness: Harness) -> Iterator[Harness]:
    """The harness with a lease of a fraction of a second (restored after the test)."""
    kept = harness.store.intents.lease
    harness.store.intents.lease = 0.4
    yield harness
    harness.store.intents.lease = kept
    harness.write(lambda tx: tx.drop_intents(None))


def test_a_file_blob_is_an_intent_until_its_commit(harness: Harness) -> None:
    h = harness
    bucket = h.new_bucket()
    blob = h.run(h.store.stage(_chunks(os.urandom(MIB + 10))))
    assert blob.data is None and blob.id in files(h.root)
    assert blob.id in intents(h)
    h.run(h.store.put_object(bucket, "k", blob, ObjectAttrs()))
    assert blob.id not in intents(h)
    # An inline body has no file and needs no intent.
    small = h.run(h.store.stage(_chunks(b"abc")))
    assert small.data == b"abc" and small.id not in intents(h)
    h.run(h.store.put_object(bucket, "small", small, ObjectAttrs()))
    # Reclaiming finds nothing to take: the committed file stays, however old.
    age(blob_path(h.root, blob.id))
    assert not reclaim_all(h)
    assert blob.id in files(h.root)


def test_names_are_looked_up_across_many_statements(harness: Harness) -> None:
    """A reclaimer's lookups of more names than one statement binds (the SQLite catalog asks
    500 at a time) find every known one, in any batch, and nothing else."""
    h = harness
    bucket = h.new_bucket()
    blob = h.run(h.store.stage(_chunks(os.urandom(MIB + 10))))
    h.run(h.store.put_object(bucket, "many", blob, ObjectAttrs()))
    names = [f"{n:032x}" for n in range(1203)]
    pending = [names[0], names[777], names[1202]]
    later = time.time_ns() + 3_600_000_000_000

    async def record(tx: CatalogTx) -> None:
        for name in pending:
            await tx.add_intent(name, "elsewhere", later)

    h.write(record)
    names[501] = blob.id
    try:
        reader = h.store.catalog.reader
        assert h.run(reader.known_blobs_among(names)) == {*pending, blob.id}
        assert h.run(reader.file_blobs_among(names)) == {blob.id}
    finally:
        h.write(lambda tx: tx.drop_intents(pending))


def test_a_lapsed_intent_is_reclaimed_and_its_commit_refused(lease: Harness) -> None:
    h = lease
    bucket = h.new_bucket()
    blob = h.run(h.store.stage(_chunks(os.urandom(MIB + 10))))
    h.run(asyncio.sleep(0.5))  # past the lease, with no news from the writer
    done = reclaim_all(h)
    assert done.intents == 1
    assert blob.id not in files(h.root) and blob.id not in intents(h)
    # The writer comes back: its commit is refused (503 to the client), nothing is made.
    with pytest.raises(errors.IntentLost):
        h.run(h.store.put_object(bucket, "k", blob, ObjectAttrs()))
    with pytest.raises(errors.NoSuchKey):
        h.run(h.store.head_object(bucket, "k"))

    async def rows() -> set[str]:
        return {row.id async for row in h.store.catalog.audit.audit_blobs()}

    assert blob.id not in h.run(rows())


def test_a_slow_writer_keeps_its_intent_while_others_reclaim(lease: Harness) -> None:
    """A body that takes several leases to arrive, a reclaimer running all along: the
    writer's renewals keep its blob, and the object commits whole."""
    h = lease
    bucket = h.new_bucket()
    data = os.urandom(MIB + 8 * 256 * 1024)  # a file from the first MiB, then 8 slow pieces
    reclaimed = Reclaimed()

    async def go() -> bytes:
        async def reclaimer() -> None:
            while True:
                done = await h.store.intents.reclaim()
                reclaimed.intents += done.intents
                await asyncio.sleep(0.05)

        task = asyncio.create_task(reclaimer())
        try:
            blob = await h.store.stage(_chunks(data, pause=0.15))  # 1.2 s: three leases
            await h.store.put_object(bucket, "slow", blob, ObjectAttrs())
        finally:
            task.cancel()
        reader = await h.store.open_object(bucket, "slow")
        try:
            return b"".join([c async for c in reader.chunks(0, len(data))])
        finally:
            reader.close()

    assert h.run(go()) == data
    assert reclaimed.intents == 0


def test_old_files_that_nothing_names_are_reclaimed(lease: Harness) -> None:
    h = lease
    bucket = h.new_bucket()
    kept = h.run(h.store.stage(_chunks(os.urandom(MIB + 1))))
    h.run(h.store.put_object(bucket, "k", kept, ObjectAttrs()))
    # A copy shares the blob: no new file, no intent.
    source = h.run(h.store.head_object(bucket, "k"))
    copy = h.run(h.store.copy_object(source, bucket, "c", ObjectAttrs(), kept.md5.hex()))
    assert copy.extents == source.extents
    pending = h.run(h.store.stage(_chunks(os.urandom(MIB + 2))))  # staged, not committed yet
    # Left by a gateway from before intents, by a crash after a failed commit, or by a body
    # whose writer died: named by nothing.
    old, fresh = "ab" * 16, "cd" * 16
    for name in (old, fresh):
        path = blob_path(h.root, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"orphan")
    (h.root / "tmp" / ("ef" * 16)).write_bytes(b"half a body")
    (h.root / "trash" / ("01" * 16)).write_bytes(b"released, not yet freed")
    for path in (
        blob_path(h.root, old),
        blob_path(h.root, kept.id),
        blob_path(h.root, pending.id),
        h.root / "tmp" / ("ef" * 16),
        h.root / "trash" / ("01" * 16),
    ):
        age(path)
    h.store.intents.lease = 60.0  # the pending write's intent stays alive
    done = reclaim_all(h)
    assert done.files == 3 and done.intents == 0
    assert old not in files(h.root)
    assert {fresh, kept.id, pending.id} <= files(h.root)
    assert tmp_files(h.root) == set() and list((h.root / "trash").iterdir()) == []
    h.run(h.store.put_object(bucket, "pending", pending, ObjectAttrs()))
    assert h.run(h.store.head_object(bucket, "pending")).size == MIB + 2
    blob_path(h.root, fresh).unlink()


def test_a_failed_body_leaves_no_intent(harness: Harness) -> None:
    h = harness

    async def broken() -> AsyncIterator[bytes]:
        yield os.urandom(MIB + 5)
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        h.run(h.store.stage(broken()))
    assert_left_clean(h)


def assert_left_clean(h: Harness) -> None:
    """No intent, no tmp file, no blob file that nothing commits, after a failed body.

    The cleanup runs in the background: the file's removal after the write in flight, the
    intent's after its own insert commits. Before those land the folder can look clean for
    a moment (the insert not yet made, the file not yet created): clean must stay clean."""
    deadline = time.monotonic() + 60
    clean_since = None
    while time.monotonic() < deadline:
        if not intents(h) and not files(h.root) - {*_committed(h)} and not tmp_files(h.root):
            clean_since = clean_since or time.monotonic()
            if time.monotonic() - clean_since > 1.0:
                break
        else:
            clean_since = None
        h.run(asyncio.sleep(0.01))
    assert intents(h) == set()
    assert tmp_files(h.root) == set()
    assert files(h.root) <= _committed(h)


def _committed(h: Harness) -> set[str]:
    async def scan() -> set[str]:
        return {row.id async for row in h.store.catalog.audit.audit_blobs() if not row.inline}

    return h.run(scan())


def test_get_object_inline_reads_the_object_and_its_bytes_at_once(harness: Harness) -> None:
    h = harness
    bucket = h.new_bucket()
    read = h.store.catalog.reader.get_object_inline
    assert h.run(read(bucket, "missing")) is None
    small = h.run(h.store.stage(_chunks(b"tiny")))
    made = h.run(h.store.put_object(bucket, "small", small, ObjectAttrs()))
    obj, known = h.run(read(bucket, "small"))  # type: ignore[misc]
    assert obj == made and known == {small.id: b"tiny"}
    big = h.run(h.store.stage(_chunks(os.urandom(MIB))))
    made = h.run(h.store.put_object(bucket, "big", big, ObjectAttrs()))
    obj, known = h.run(read(bucket, "big"))  # type: ignore[misc]
    assert obj == made and known == {big.id: None}  # in a file
    empty = h.run(h.store.stage(_chunks(b"")))
    h.run(h.store.put_object(bucket, "empty", empty, ObjectAttrs()))
    obj, known = h.run(read(bucket, "empty"))  # type: ignore[misc]
    assert obj.size == 0 and known == {}
    # GET reads through it: the same bytes as before.
    reader = h.run(h.store.open_object(bucket, "small"))
    assert reader.inline_bytes(0, 4) == b"tiny"
    reader.close()


def test_get_bucket_and_object_reads_both_at_once(harness: Harness) -> None:
    h = harness
    bucket = h.new_bucket()
    read = h.store.catalog.reader.get_bucket_and_object
    assert h.run(read("no-such-bucket", "k")) is None
    h.run(h.store.set_bucket_setting(bucket, "policy", '{"Statement": []}'))
    record, latest = h.run(read(bucket, "missing"))  # type: ignore[misc]
    # The bucket as get_bucket reads it, its settings included, though the key has no object.
    assert record == h.run(h.store.get_bucket(bucket)) and latest is None
    assert record.settings["policy"] == '{"Statement": []}'
    small = h.run(h.store.stage(_chunks(b"tiny")))
    made = h.run(h.store.put_object(bucket, "small", small, ObjectAttrs()))
    assert h.run(read(bucket, "small")) == (record, (made, {small.id: b"tiny"}))
    big = h.run(h.store.stage(_chunks(os.urandom(MIB))))
    made = h.run(h.store.put_object(bucket, "big", big, ObjectAttrs()))
    assert h.run(read(bucket, "big")) == (record, (made, {big.id: None}))
    # A key of another bucket is not this bucket's.
    other = h.new_bucket()
    assert h.run(read(other, "small")) == (h.run(h.store.get_bucket(other)), None)
    # GET reads through it: the same bytes as before.
    _, latest = h.run(h.store.get_bucket_and_object(bucket, "small"))
    reader = h.run(h.store.open_object(bucket, "small", latest=latest))
    assert reader.inline_bytes(0, 4) == b"tiny"
    reader.close()


# --- catalogs from before intents -----------------------------------------------------------

# The SQLite catalog as the gateway wrote it at schema 5 (before intents), frozen here.
_SQLITE_SCHEMA_5 = """
CREATE TABLE buckets (name TEXT PRIMARY KEY, owner TEXT NOT NULL, region TEXT NOT NULL,
    created_ns INTEGER NOT NULL, versioning TEXT, object_lock TEXT, settings TEXT) WITHOUT ROWID;
CREATE TABLE objects (bucket TEXT NOT NULL, key BLOB NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, content_md5 TEXT, mtime_ns INTEGER NOT NULL, attrs TEXT NOT NULL,
    manifest TEXT NOT NULL, parts TEXT, upload_id TEXT, lock TEXT, version_id TEXT,
    PRIMARY KEY (bucket, key)) WITHOUT ROWID;
CREATE TABLE versions (bucket TEXT NOT NULL, key BLOB NOT NULL, seq TEXT NOT NULL,
    is_null INTEGER NOT NULL, marker INTEGER NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, content_md5 TEXT, mtime_ns INTEGER NOT NULL, attrs TEXT NOT NULL,
    manifest TEXT NOT NULL, parts TEXT, upload_id TEXT, lock TEXT,
    PRIMARY KEY (bucket, key, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX versions_null ON versions (bucket, key) WHERE is_null = 1;
CREATE TABLE uploads (id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key BLOB NOT NULL,
    initiated_ns INTEGER NOT NULL, owner TEXT NOT NULL, attrs TEXT NOT NULL, lock TEXT);
CREATE INDEX uploads_by_key ON uploads (bucket, key, initiated_ns, id);
CREATE TABLE parts (upload_id TEXT NOT NULL, number INTEGER NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, mtime_ns INTEGER NOT NULL, manifest TEXT NOT NULL, checksum TEXT,
    PRIMARY KEY (upload_id, number)) WITHOUT ROWID;
CREATE TABLE blobs (id TEXT PRIMARY KEY, size INTEGER NOT NULL, refs INTEGER NOT NULL, data BLOB);
PRAGMA user_version=5;
"""


def _upgraded_store_works(root: Path, url: str | None) -> None:
    """The catalog's old object reads back, and a file blob goes through its intent."""
    with asyncio.Runner() as runner:
        store = Store(root, lambda pool: open_catalog(root, pool, url), inline_max=4)
        try:
            old = runner.run(store.head_object("old", "k"))
            assert old.size == 5
            blob: StagedBlob = runner.run(store.stage(_chunks(os.urandom(MIB + 3))))
            runner.run(store.put_object("old", "new", blob, ObjectAttrs()))
            assert runner.run(store.head_object("old", "new")).size == MIB + 3
            assert runner.run(store.intents.reclaim()).intents == 0
        finally:
            store.close()


def test_a_schema_5_sqlite_catalog_gets_intents_in_place(tmp_path: Path) -> None:
    from gateway.store.sqlite.schema import SCHEMA_VERSION

    conn = sqlite3.connect(tmp_path / "catalog.sqlite3")
    conn.executescript(_SQLITE_SCHEMA_5)
    conn.execute("INSERT INTO buckets VALUES ('old', 'owner', 'us-east-1', 1, NULL, NULL, NULL)")
    conn.execute("INSERT INTO blobs VALUES ('b1', 5, 1, ?)", (b"hello",))
    conn.execute(
        "INSERT INTO objects VALUES ('old', ?, 5, 'e', NULL, 1, ?, ?, NULL, NULL, NULL, NULL)",
        (b"k", encode_attrs(ObjectAttrs()), '[["b1",0,5]]'),
    )
    conn.commit()
    conn.close()
    _upgraded_store_works(tmp_path, None)
    conn = sqlite3.connect(tmp_path / "catalog.sqlite3")
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()


def test_a_schema_4_postgresql_catalog_gets_intents_in_place(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    from gateway.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION

    url = postgres.database()
    with psycopg.connect(url, autocommit=True) as conn:
        for step in (1, 2, 3, 4):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
        conn.execute("CREATE TABLE schema_version (one integer PRIMARY KEY, version integer)")
        conn.execute("INSERT INTO schema_version VALUES (1, 4)")
        conn.execute(
            "INSERT INTO buckets VALUES ('old', 'owner', 'us-east-1', 1, NULL, NULL, NULL)"
        )
        conn.execute("INSERT INTO blobs VALUES ('b1', 5, 1, %s)", (b"hello",))
        conn.execute(
            "INSERT INTO objects VALUES ('old', %s, 5, 'e', NULL, 1, %s, %s, NULL, NULL, NULL, "
            "NULL)",
            (b"k", encode_attrs(ObjectAttrs()), '[["b1",0,5]]'),
        )
    _upgraded_store_works(tmp_path, url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
