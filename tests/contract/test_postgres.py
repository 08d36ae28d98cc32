"""What the PostgreSQL catalog must hold beyond the contract suite: several nodes (each a Store
with its own connections) writing the same keys at once, a serialization failure retried,
S3's byte order whatever the database's collation, a write that outlives its caller, the
schema made by nodes starting together, and a database that goes away and comes back."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import multiprocessing
import os
import random
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.store import Store, errors, open_catalog, versions
from gateway.store.api import Catalog, CatalogTx
from gateway.store.model import (
    Bucket,
    Extent,
    ObjectAttrs,
    ObjectInfo,
    StagedBlob,
    WriteCondition,
)
from gateway.store.postgres import PostgresCatalog
from gateway.store.postgres.schema import SCHEMA_VERSION
from tests.contract.model import utf8
from tests.postgres import PostgresServer

MIB = 1 << 20


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def node(root: Path, url: str | None, **kw: Any) -> Store:
    """A gateway node's Store: its own catalog connections, the data folder shared."""
    return Store(root, lambda pool: open_catalog(root, pool, url), inline_max=4, shared=True, **kw)


async def put(store: Store, bucket: str, key: str, data: bytes, **kw: Any) -> ObjectInfo:
    blob = await store.stage(_chunks(data))
    return await store.put_object(bucket, key, blob, ObjectAttrs(), **kw)


async def counts(catalog: Catalog) -> tuple[dict[str, int], Counter[str]]:
    """(each blob's reference count, how many extents of objects and parts use each blob)."""
    refs = {row.id: row.refs async for row in catalog.audit.audit_blobs()}
    used: Counter[str] = Counter()
    async for obj in catalog.audit.audit_objects():
        used.update(e.blob for e in obj.extents)
    async for part, _ in catalog.audit.audit_parts():
        used.update(e.blob for e in part.extents)
    return refs, used


def files(root: Path) -> set[str]:
    return {p.name for p in (root / "blobs").rglob("*") if p.is_file()}


async def settled(stores: list[Store]) -> None:
    """Released files are freed after the answer of a write that is not a delete."""
    for store in stores:
        await asyncio.get_running_loop().run_in_executor(store.pool, lambda: None)


async def check_exact(store: Store, root: Path) -> None:
    """Every blob's count is exactly its uses (none at zero, none unused), and the blob files
    on disk are exactly the file blobs of the catalog."""
    refs, used = await counts(store.catalog)
    assert refs == dict(used)
    file_blobs = {row.id async for row in store.catalog.audit.audit_blobs() if not row.inline}
    assert files(root) == file_blobs


@pytest.fixture
def nodes(postgres: PostgresServer, tmp_path: Path) -> Iterator[tuple[asyncio.Runner, list[Store]]]:
    """Three nodes on one fresh database and one data folder, driven from one event loop
    (each node's statements go over its own connections: the database sees three clients)."""
    url = postgres.database()
    with asyncio.Runner() as runner:
        stores = [node(tmp_path, url) for _ in range(3)]
        yield runner, stores
        for store in stores:
            store.close()


def test_nodes_racing_on_keys_leave_one_state_and_exact_counts(
    nodes: tuple[asyncio.Runner, list[Store]], tmp_path: Path
) -> None:
    """PUT, copy and delete of the same keys through three nodes at once. Copies share their
    source's blob: its count is raised and dropped by many transactions at once, down to zero
    for the blob of `shared` and its copies, all replaced or deleted together."""
    runner, stores = nodes
    first = stores[0]
    runner.run(first.create_bucket("b", "owner", "us-east-1"))
    source = runner.run(put(first, "b", "source", os.urandom(100)))
    keys = ["shared", "k0", "k1", "k2"]

    async def storm() -> list[object]:
        shared = await put(first, "b", "shared", os.urandom(100))
        for key in keys[1:]:
            await first.copy_object(shared, "b", key, ObjectAttrs(), shared.etag)

        async def one(n: int) -> object:
            store = stores[n % 3]  # clients spread over the nodes
            key = keys[n % 4]
            if n % 5 == 0 and key != "shared":
                return await store.copy_object(source, "b", key, ObjectAttrs(), source.etag)
            if n % 3 == 0:
                return await store.delete_objects("b", [key])
            return await put(store, "b", key, os.urandom(50 + n))

        return await asyncio.gather(*(one(n) for n in range(40)), return_exceptions=True)

    for _ in range(5):
        outcomes = runner.run(storm())
        assert [o for o in outcomes if isinstance(o, BaseException)] == []
        runner.run(settled(stores))
        # Every node sees the same one state.
        states = {
            tuple(e.key for e in runner.run(s.list_objects("b", "", "", "", 10)).entries)
            for s in stores
        }
        assert len(states) == 1 and "source" in states.pop()
        runner.run(check_exact(first, tmp_path))


def test_conditional_creates_racing_on_nodes_make_one_object(
    nodes: tuple[asyncio.Runner, list[Store]], tmp_path: Path
) -> None:
    runner, stores = nodes
    runner.run(stores[0].create_bucket("b", "owner", "us-east-1"))
    create = WriteCondition(if_none_match="*")

    async def race(key: str) -> list[object]:
        return await asyncio.gather(
            *(put(stores[n % 3], "b", key, os.urandom(20), condition=create) for n in range(12)),
            return_exceptions=True,
        )

    for round_ in range(5):
        outcomes = runner.run(race(f"k{round_}"))
        made = [o for o in outcomes if isinstance(o, ObjectInfo)]
        refused = [o for o in outcomes if isinstance(o, errors.PreconditionFailed)]
        assert len(made) == 1 and len(refused) == 11
        current = runner.run(stores[1].head_object("b", f"k{round_}"))
        assert current.etag == made[0].etag
    runner.run(settled(stores))
    runner.run(check_exact(stores[0], tmp_path))


def test_nodes_writing_and_deleting_versions_of_one_key_keep_every_acknowledged_version(
    nodes: tuple[asyncio.Runner, list[Store]], tmp_path: Path
) -> None:
    """PUTs, deletes (delete markers) and removals of versions by id, of one key of an Enabled
    bucket, through three nodes at once: whether the key had a current object or not, every
    version acknowledged is there exactly once (and every one removed is gone), ids order the
    versions as their times do, exactly one is the latest and GET agrees, counts are exact."""
    runner, stores = nodes
    first = stores[0]
    runner.run(first.create_bucket("b", "owner", "us-east-1"))
    runner.run(first.set_versioning("b", "Enabled"))
    kept: set[str] = set()  # acknowledged version ids (objects and delete markers)
    markers: set[str] = set()

    async def storm(doomed: list[str]) -> list[object]:
        async def one(n: int) -> object:
            store = stores[n % 3]
            if n < len(doomed):
                return await store.delete_versions("b", [("k", doomed[n])])
            if n % 4 == 0:
                return await store.delete_objects("b", ["k"])
            return await put(store, "b", "k", os.urandom(20 + n))

        return await asyncio.gather(*(one(n) for n in range(24)), return_exceptions=True)

    for round_ in range(8):
        # Removes the newest versions of the round before (ids sort newest first), the latest
        # among them: the next newest takes its place while the others write.
        doomed = sorted(kept)[: 2 + round_ % 2]
        outcomes = runner.run(storm(doomed))
        assert [o for o in outcomes if isinstance(o, BaseException)] == []
        kept -= set(doomed)
        markers -= set(doomed)
        for outcome in outcomes:
            if isinstance(outcome, ObjectInfo):
                kept.add(outcome.version_id)
            elif isinstance(outcome, list) and outcome[0].version_id is None:
                (deleted,) = outcome
                kept.add(deleted.marker_version_id)
                markers.add(deleted.marker_version_id)
        runner.run(settled(stores))
        page = runner.run(stores[round_ % 3].list_versions("b", "", "", "", "", 1000))
        ids = [e.version_id for e in page.entries]
        assert not page.truncated and sorted(ids) == sorted(kept)  # each exactly once
        assert {e.version_id for e in page.entries if e.delete_marker} == markers
        times = [e.mtime_ns for e in page.entries]
        assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
        assert [e.is_latest for e in page.entries] == [True] + [False] * (len(ids) - 1)
        if page.entries[0].delete_marker:
            with pytest.raises(versions.DeleteMarker):
                runner.run(stores[1].head_object("b", "k"))
        else:
            assert runner.run(stores[1].head_object("b", "k")).version_id == ids[0]
        runner.run(check_exact(first, tmp_path))


def test_complete_racing_on_two_nodes_runs_once(
    nodes: tuple[asyncio.Runner, list[Store]], tmp_path: Path
) -> None:
    runner, stores = nodes
    runner.run(stores[0].create_bucket("b", "owner", "us-east-1"))
    upload = runner.run(stores[0].create_upload("b", "mp", "owner", ObjectAttrs()))
    parts = []
    for number, store in ((1, stores[0]), (2, stores[1])):  # parts through different nodes
        blob = runner.run(store.stage(_chunks(os.urandom(5 * MIB if number == 1 else 10))))
        parts.append(runner.run(store.upload_part(upload, number, blob)))
    chosen = [(p.number, p.etag) for p in parts]

    async def race() -> list[object]:
        return await asyncio.gather(
            *(
                s.complete_upload(upload.id, "b", "mp", chosen, lambda u, p: {})
                for s in (stores[1], stores[2])
            ),
            return_exceptions=True,
        )

    first, second = runner.run(race())
    assert isinstance(first, ObjectInfo) and first == second  # one object, answered twice
    assert runner.run(stores[0].head_object("b", "mp")) == first
    runner.run(check_exact(stores[0], tmp_path))


def test_deleting_a_bucket_while_nodes_write_into_it_never_strands_an_object(
    nodes: tuple[asyncio.Runner, list[Store]], tmp_path: Path
) -> None:
    runner, stores = nodes

    async def race(bucket: str) -> list[object]:
        await stores[0].create_bucket(bucket, "owner", "us-east-1")
        writes = [put(stores[1 + n % 2], bucket, f"k{n}", os.urandom(10)) for n in range(4)]
        upload = stores[2].create_upload(bucket, "u", "owner", ObjectAttrs())
        return await asyncio.gather(
            stores[0].delete_bucket(bucket), upload, *writes, return_exceptions=True
        )

    for round_ in range(20):
        bucket = f"b{round_}"
        deleted, upload, *writes = runner.run(race(bucket))
        if deleted is None:  # the bucket went: no object was written into it...
            assert all(isinstance(w, errors.NoSuchBucket) for w in writes)
            # ...and an upload made before it went with it.
            if not isinstance(upload, errors.NoSuchBucket):
                assert runner.run(stores[1].catalog.reader.get_upload(upload.id)) is None
        else:  # an object got in first: the bucket stays, with it
            assert isinstance(deleted, errors.BucketNotEmpty)
            assert runner.run(stores[1].get_bucket(bucket)) is not None
            assert any(isinstance(w, ObjectInfo) for w in writes)
    runner.run(_no_strays(stores[0]))
    runner.run(settled(stores))
    runner.run(check_exact(stores[0], tmp_path))


async def _no_strays(store: Store) -> None:
    """No object or part in a bucket that does not exist."""
    buckets = {b.name for b in await store.list_buckets()}
    async for obj in store.catalog.audit.audit_objects():
        assert obj.bucket in buckets
    async for _, upload in store.catalog.audit.audit_parts():
        assert upload is not None and upload.bucket in buckets


def test_a_serialization_failure_is_retried_and_the_write_made(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """A real SQLSTATE 40001: the first attempt's transaction is made REPEATABLE READ, reads,
    and another connection then changes the row it updates. The write is run again."""
    url = postgres.database()
    with asyncio.Runner() as runner:
        store = node(tmp_path, url)
        runner.run(store.create_bucket("b", "owner", "us-east-1"))
        obj = runner.run(put(store, "b", "k", os.urandom(100)))
        (blob,) = {e.blob for e in obj.extents}
        attempts: list[str] = []

        async def fn(tx: CatalogTx) -> str:
            attempts.append("tried")
            if len(attempts) == 1:
                await tx.flush()  # type: ignore[attr-defined]  # the BEGIN, sent with nothing
                conn = tx.conn  # type: ignore[attr-defined]
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                assert await tx.get_bucket("b") is not None  # the snapshot is taken here
                with psycopg.connect(url, autocommit=True) as other:
                    other.execute("UPDATE blobs SET refs = refs + 1 WHERE id = %s", (blob,))
            await tx.retain([Extent(blob, 0, 100)])
            return "made"

        result, released = runner.run(_write(store.catalog, fn))
        assert (result, released) == ("made", []) and len(attempts) == 2
        refs, _ = runner.run(counts(store.catalog))
        assert refs[blob] == 3  # the object's, the other connection's, the retried write's
        store.close()


def test_two_serializable_writes_that_skew_both_succeed(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """`s3gw_isolation=serializable`: two writes at once, each reading the bucket the other
    changes (write skew), both read before either writes. PostgreSQL's serializable checks
    refuse one with 40001 (at a statement or at its commit); the adapter runs it again, and
    both are made."""
    url = postgres.database() + "?s3gw_isolation=serializable"
    with asyncio.Runner() as runner:
        store = node(tmp_path, url)
        for name in ("a", "b"):
            runner.run(store.create_bucket(name, "owner", "us-east-1"))
        attempts: Counter[str] = Counter()
        isolations: set[str] = set()

        async def skew() -> list[Any]:
            read = {"a": asyncio.Event(), "b": asyncio.Event()}

            def writer(reads: str, writes: str) -> Any:
                async def fn(tx: CatalogTx) -> str:
                    attempts[writes] += 1
                    assert await tx.get_bucket(reads) is not None
                    conn = tx.conn  # type: ignore[attr-defined]
                    row = await (await conn.execute("SHOW transaction_isolation")).fetchone()
                    isolations.add(row[0])
                    read[reads].set()
                    other = "b" if reads == "a" else "a"
                    async with asyncio.timeout(30):
                        await read[other].wait()  # both have read before either writes
                    bucket = await tx.lock_bucket(writes)
                    assert bucket is not None
                    settings = {**bucket.settings, "note": f"from {reads} {attempts[writes]}"}
                    await tx.update_bucket(dataclasses.replace(bucket, settings=settings))
                    return writes

                return store.catalog.write(fn)

            return await asyncio.gather(writer("a", "b"), writer("b", "a"))

        outcomes = runner.run(skew())
        assert sorted(result for result, _ in outcomes) == ["a", "b"]
        assert isolations == {"serializable"}
        # One of the two met the serialization failure and ran again.
        assert sum(attempts.values()) >= 3, attempts
        for name in ("a", "b"):
            bucket = runner.run(store.get_bucket(name))
            assert bucket.settings["note"].startswith("from ")
        store.close()


def test_a_deferred_statement_that_fails_fails_its_write(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """retain's INSERT of a new blob is not waited for: it goes with the write's next statement,
    or before the COMMIT when none follows. An error of it still fails the write, with nothing
    of the write committed, and the connection goes on serving."""
    url = postgres.database()
    with asyncio.Runner() as runner:
        store = node(tmp_path, url)
        runner.run(store.create_bucket("b", "owner", "us-east-1"))
        too_large = 1 << 70  # not a bigint: the server refuses the row

        async def last(tx: CatalogTx) -> None:
            await tx.retain([], [StagedBlob("last", too_large, b"", b"x")])

        async def then_read(tx: CatalogTx) -> None:
            await tx.retain([], [StagedBlob("then-read", too_large, b"", b"x")])
            await tx.get_bucket("b")
            pytest.fail("the bucket's read answered after a failed insert")

        async def then_ok(tx: CatalogTx) -> None:  # an insert that fails after one that works
            await tx.retain([], [StagedBlob("ok", 1, b"", b"x")])
            await tx.insert_bucket(Bucket("made", "owner", "us-east-1", 1))
            await tx.retain([], [StagedBlob("after", too_large, b"", b"x")])

        for fn in (last, then_read, then_ok):
            with pytest.raises(psycopg.errors.NumericValueOutOfRange):
                runner.run(_write(store.catalog, fn))
        refs, _ = runner.run(counts(store.catalog))
        assert not {"last", "then-read", "ok", "after"} & set(refs)
        assert runner.run(store.get_bucket("made")) is None
        for n in range(12):  # more writes than the pool has connections
            runner.run(put(store, "b", f"k{n}", b"data"))
        assert len(runner.run(store.list_objects("b", "", "", "", 20)).entries) == 12
        store.close()


async def _write(catalog: Catalog, fn: Any) -> Any:
    return await catalog.write(fn)


def test_a_write_outlives_its_caller(postgres: PostgresServer, tmp_path: Path) -> None:
    """The caller's future is cancelled while its transaction is open: the transaction still
    reaches its commit."""
    url = postgres.database()
    with asyncio.Runner() as runner:
        store = node(tmp_path, url)

        async def go() -> None:
            started, resume = asyncio.Event(), asyncio.Event()

            async def fn(tx: CatalogTx) -> None:
                started.set()
                await resume.wait()
                await tx.insert_bucket(Bucket("late", "owner", "us-east-1", 1))

            outcome = store.catalog.write(fn)
            await started.wait()
            outcome.cancel()  # the request went away
            resume.set()
            for _ in range(500):
                if await store.get_bucket("late") is not None:
                    return
                await asyncio.sleep(0.01)
            pytest.fail("the write of a caller that went away was not made")

        runner.run(go())
        store.close()


KEYS = ["a", "B", "b", "\x00", "a\x00", "a\x00b", "\x7f", "\u00e9", "\u00ff", "\u0100"]
KEYS += ["\ufffd", "\uffff", "\U00010000", "\U0010ffff", "a/\U0010ffff", "\U0001f600", "z"]


def test_keys_list_in_byte_order_as_on_sqlite(postgres: PostgresServer, tmp_path: Path) -> None:
    """The database's collation is ICU's en-US (tests/postgres.py), where 'a' < 'B': keys
    compared as text would list out of S3's order."""
    url = postgres.database()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 'a' < 'B'").fetchone() == (True,)
    order = sorted(KEYS, key=utf8)
    with asyncio.Runner() as runner:
        listings = []
        for name, catalog_url in (("sqlite", None), ("postgresql", url)):
            root = tmp_path / name
            store = Store(root, lambda pool, r=root, u=catalog_url: open_catalog(r, pool, u))
            runner.run(store.create_bucket("b", "owner", "us-east-1"))
            for key in random.sample(KEYS, len(KEYS)):
                runner.run(put(store, "b", key, b"x"))
                runner.run(store.create_upload("b", key, "owner", ObjectAttrs()))
            page = runner.run(store.list_objects("b", "", "", "", 1000))
            uploads = runner.run(store.list_uploads("b", "", "", "", "", 1000))
            # Page by page from each key, and from a prefix at the top of the byte range.
            pages = [
                [e.key for e in runner.run(store.list_objects("b", "", "", after, 2)).entries]
                for after in order
            ]
            high = runner.run(store.list_objects("b", "\U0010ffff", "", "", 1000)).entries
            high_keys = [e.key for e in high]
            listings.append(
                ([e.key for e in page.entries], [u.key for u in uploads.uploads], pages, high_keys)
            )
            store.close()
    sqlite, postgresql = listings
    assert sqlite[0] == order and sqlite[1] == order and sqlite[3] == ["\U0010ffff"]
    assert postgresql == sqlite


def test_nodes_starting_together_make_the_schema_once(postgres: PostgresServer) -> None:
    url = postgres.database()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    made: list[object] = []
    gate = threading.Barrier(6)

    def start() -> None:
        gate.wait()
        try:
            made.append(PostgresCatalog(url, pool))
        except BaseException as exc:
            made.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # A catalog whose start-up blocks (the schema's lock never given up) is a failure here.
    assert not [t for t in threads if t.is_alive()], "a catalog's start-up did not end"
    assert all(isinstance(c, PostgresCatalog) for c in made), made
    for catalog in made:
        catalog.close()  # type: ignore[union-attr]
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT one, version FROM schema_version").fetchall() == [
            (1, SCHEMA_VERSION)
        ]
        conn.execute("UPDATE schema_version SET version = 99")
    # A database a newer gateway migrated is refused, in one line.
    with pytest.raises(errors.StoreError, match="schema 99 is newer") as refused:
        PostgresCatalog(url, pool)
    assert "\n" not in str(refused.value)
    pool.shutdown()


def test_a_lost_database_is_unavailable_and_the_node_recovers(tmp_path: Path) -> None:
    server = PostgresServer().start()
    try:
        url = server.database()
        with asyncio.Runner() as runner:
            store = Store(
                tmp_path,
                lambda pool: PostgresCatalog(url, pool, pool_timeout=0.5, connect_timeout=2),
            )
            runner.run(store.create_bucket("b", "owner", "us-east-1"))
            kept = runner.run(put(store, "b", "kept", os.urandom(100)))
            server.stop()
            with pytest.raises(errors.CatalogUnavailable):
                runner.run(store.head_object("b", "kept"))
            with pytest.raises(errors.CatalogUnavailable):
                runner.run(put(store, "b", "new", os.urandom(100)))
            with pytest.raises(errors.CatalogUnavailable):
                runner.run(store.list_objects("b", "", "", "", 10))
            with pytest.raises(errors.CatalogUnavailable):
                store.totals()
            assert runner.run(store.writable()) is False
            server.start()
            for _ in range(120):  # the pool reconnects on its own
                try:
                    assert runner.run(store.head_object("b", "kept")) == kept
                    break
                except errors.CatalogUnavailable:
                    runner.run(asyncio.sleep(0.5))
            else:
                pytest.fail("the node did not recover once the database was back")
            runner.run(put(store, "b", "new", b"after"))
            assert runner.run(store.writable()) is True and store.totals() == (2, 105)
            store.close()
    finally:
        server.close()


def test_open_catalog_says_what_is_wrong_with_a_url_in_one_line(tmp_path: Path) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    with pytest.raises(errors.StoreError, match="unknown catalog 'mysql'") as unknown:
        open_catalog(tmp_path, pool, "mysql://user:secret@host/db")
    # Nothing listens on port 1: refused at once, and the password is not repeated.
    with pytest.raises(errors.CatalogUnavailable) as refused:
        open_catalog(tmp_path, pool, "postgresql://gw:secret@127.0.0.1:1/s3")
    for exc in (unknown.value, refused.value):
        assert "\n" not in str(exc) and "secret" not in str(exc)
    assert "postgresql://gw@127.0.0.1:1/s3" in str(refused.value)
    pool.shutdown()


def _sessions(url: str) -> list[int]:
    """The server processes of the gateway's connections to this database."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 's3gw'"
        ).fetchall()
    return sorted(pid for (pid,) in rows)


async def _backend(catalog: PostgresCatalog) -> int:
    ((pid,),) = await catalog.read("SELECT pg_backend_pid()", ())
    return int(pid)


@pytest.mark.parametrize("state", ["idle", "running", "closed"])
def test_close_ends_the_sessions_in_any_state_of_the_loop(
    postgres: PostgresServer, state: str
) -> None:
    """Closed between runs of its loop (tests), from within it (a shutdown hook), or after
    it ended (fsck's asyncio.run): the loop ends, and so do the database sessions."""
    url = postgres.database()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    catalog = PostgresCatalog(url, pool)

    async def use(close: bool) -> None:
        await asyncio.gather(*(_backend(catalog) for _ in range(4)))
        assert len(_sessions(url)) >= 2  # the pool's, and the blocking one
        if close:
            catalog.close()

    if state == "idle":
        with asyncio.Runner() as runner:
            runner.run(use(False))
            catalog.close()
    else:
        asyncio.run(use(state == "running"))
        if state == "closed":
            catalog.close()
    # A server process leaves pg_stat_activity shortly after its client said goodbye.
    for _ in range(200):
        if not _sessions(url):
            break
        time.sleep(0.05)
    assert _sessions(url) == []
    pool.shutdown()


def _child_reads(catalog: PostgresCatalog, answers: Any) -> None:
    pid = asyncio.run(_backend(catalog))  # a new loop in a new process
    blocking = catalog.blocking(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone())
    catalog.close()  # must not close what the parent opened
    answers.put((pid, blocking[0]))


def test_a_forked_process_makes_its_own_connections(postgres: PostgresServer) -> None:
    url = postgres.database()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    catalog = PostgresCatalog(url, pool, pool_size=1)
    with asyncio.Runner() as runner:
        parent = runner.run(_backend(catalog))
        blocking = catalog.blocking(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone())
        fork = multiprocessing.get_context("fork")
        answers = fork.Queue()
        child = fork.Process(target=_child_reads, args=(catalog, answers))
        child.start()
        child_pid, child_blocking = answers.get(timeout=60)
        child.join(60)
        assert child.exitcode == 0
        assert {child_pid, child_blocking}.isdisjoint({parent, blocking[0]})
        # The parent's sessions were not touched: the same server processes answer.
        assert runner.run(_backend(catalog)) == parent
        assert (
            catalog.blocking(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone())[0]
            == blocking[0]
        )
        catalog.close()
    pool.shutdown()


def test_the_start_up_sweep_asks_the_database(postgres: PostgresServer, tmp_path: Path) -> None:
    """The sweep awaits the catalog: an orphan file goes, the referenced blob stays."""
    url = postgres.database()
    with asyncio.Runner() as runner:
        store = Store(tmp_path, lambda pool: open_catalog(tmp_path, pool, url), inline_max=4)
        runner.run(store.create_bucket("b", "owner", "us-east-1"))
        kept = runner.run(put(store, "b", "k", os.urandom(100)))

        async def orphan() -> str:
            writer = store.files.writer()
            await writer.publish(b"left by a crash")
            return writer.blob_id

        left = runner.run(orphan())
        assert files(tmp_path) == {kept.extents[0].blob, left}
        assert runner.run(store.sweep()) == (0, 1)
        assert files(tmp_path) == {kept.extents[0].blob}
        store.close()


def test_a_schema_2_database_upgrades_to_object_lock_in_place(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """A database as the gateway made it before Object Lock (schema 2) gets the lock columns
    on its first connection: its objects stay, and locks are kept in every table."""
    from gateway.store.postgres.schema import MIGRATIONS
    from gateway.store.rows import encode_attrs

    url = postgres.database()
    with psycopg.connect(url, autocommit=True) as conn:
        for step in (1, 2):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
        conn.execute("CREATE TABLE schema_version (one integer PRIMARY KEY, version integer)")
        conn.execute("INSERT INTO schema_version VALUES (1, 2)")
        conn.execute("INSERT INTO buckets VALUES ('old', 'owner', 'us-east-1', 1, NULL)")
        conn.execute("INSERT INTO blobs VALUES ('b1', 5, 1, %s)", (b"hello",))
        conn.execute(
            "INSERT INTO objects VALUES ('old', %s, 5, 'e', NULL, 1, %s, %s, NULL, NULL, NULL)",
            (b"k", encode_attrs(ObjectAttrs()), '[["b1",0,5]]'),
        )
    with asyncio.Runner() as runner:
        store = node(tmp_path, url)
        try:
            old = runner.run(store.head_object("old", "k"))
            assert (old.size, old.version_id, old.lock.legal_hold) == (5, "null", None)
            runner.run(store.create_bucket("new", "owner", "us-east-1", object_lock=True))
            first = runner.run(put(store, "new", "k", b"x"))
            runner.run(store.set_legal_hold("new", "k", None, "ON"))
            runner.run(put(store, "new", "k", b"y"))  # `first` is noncurrent now
            held = runner.run(store.head_object("new", "k", first.version_id))
            assert held.lock.legal_hold == "ON"
            assert runner.run(store.head_object("new", "k")).lock.legal_hold is None
        finally:
            store.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def test_a_legal_hold_waits_for_a_removal_that_read_the_version(
    nodes: tuple[asyncio.Runner, list[Store]], postgres: PostgresServer
) -> None:
    """A removal by id has read a noncurrent version (under a delete marker: no current
    object whose row would order the two) and found it unlocked; PutObjectLegalHold on it
    through another node then waits, and finds the version gone. Never a hold acknowledged
    on a version that is then removed."""
    runner, (first, second, _) = nodes
    runner.run(first.create_bucket("b", "owner", "us-east-1", object_lock=True))
    old = runner.run(put(first, "b", "k", b"old"))
    runner.run(first.delete_versions("b", [("k", None)]))
    vid = old.version_id

    async def go() -> tuple[object, ObjectInfo | None]:
        read, resume = asyncio.Event(), asyncio.Event()

        async def removal(tx: CatalogTx) -> ObjectInfo | None:
            gone = await tx.get_version("b", "k", vid)  # as versions._remove reads it
            assert gone is not None and gone.lock.legal_hold is None
            read.set()
            await resume.wait()
            return await tx.delete_version("b", "k", vid)

        removing = asyncio.ensure_future(_write(first.catalog, removal))
        await read.wait()
        hold = asyncio.ensure_future(second.set_legal_hold("b", "k", vid, "ON"))
        while not hold.done() and not _lock_waits(postgres):
            await asyncio.sleep(0.01)
        resume.set()
        removed, _ = await removing
        (held,) = await asyncio.gather(hold, return_exceptions=True)
        return held, removed

    held, removed = runner.run(go())
    assert removed is not None and removed.version_id == vid
    assert isinstance(held, versions.NoSuchVersion), held


def _lock_waits(postgres: PostgresServer) -> bool:
    """Is a session of the server waiting for a row lock?"""
    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()  # type: ignore[misc]
    return n > 0
