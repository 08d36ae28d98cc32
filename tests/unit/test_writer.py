"""The SQLite catalog's GroupWriter: group commit, a group's writes run together and, when one
fails, again apart (a savepoint per write), long writes off the event loop, several writers
(worker processes) on one catalog taking turns; and the Store's release of blob files after the
commit that released them."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store import open_store
from gateway.store.errors import CommitOutcomeUnknown, PreconditionFailed
from gateway.store.model import ObjectAttrs, StagedBlob, WriteCondition
from gateway.store.sqlite.queries import SqliteTx
from gateway.store.sqlite.schema import connect, initialise
from gateway.store.sqlite.writer import GroupWriter


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "catalog.sqlite3"
    initialise(p)
    conn = connect(p)
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    conn.close()
    return p


@pytest.fixture
def writer(path: Path) -> Iterator[GroupWriter]:
    w = GroupWriter(path)
    yield w
    w.close()


def committed(path: Path) -> set[int]:
    conn = sqlite3.connect(path)
    try:
        return {n for (n,) in conn.execute("SELECT n FROM t")}
    finally:
        conn.close()


def insert(n: int, fail: bool = False, files: list[str] | None = None):  # type: ignore[no-untyped-def]
    async def fn(tx: SqliteTx) -> int:
        tx.conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
        tx.released += files or []
        if fail:
            raise ValueError(f"write {n} fails")
        # How many rows this transaction sees: more than were committed before the group
        # when earlier writes of the same group are visible to it.
        return tx.conn.execute("SELECT count(*) FROM t").fetchone()[0]

    return fn


async def test_concurrent_writes_share_commits(writer, path):
    seen = await asyncio.gather(*(writer.run(insert(n)) for n in range(50)))
    assert committed(path) == set(range(50))
    # All 50 were handed in before the first group started: one transaction, where each
    # write saw the rows of the writes before it, and one commit.
    assert sorted(n for n, _ in seen) == list(range(1, 51))
    commits = []
    commit = writer._commit
    writer._commit = lambda *group: commits.append(1) or commit(*group)  # type: ignore[method-assign]
    await asyncio.gather(*(writer.run(insert(n)) for n in range(50, 100)))
    assert len(commits) == 1


async def test_a_failing_write_undoes_only_itself(writer, path):
    results = await asyncio.gather(
        writer.run(insert(1)),
        writer.run(insert(2, fail=True, files=["never-released"])),
        writer.run(insert(3, files=["released-by-3"])),
        return_exceptions=True,
    )
    assert isinstance(results[1], ValueError)
    assert committed(path) == {1, 3}
    # What a write released is handed back with its outcome, and only if it committed.
    assert results[2] == (2, ["released-by-3"])


def savepoints(writer: GroupWriter) -> list[str]:
    """The SAVEPOINT statements the writer's connection runs from now on, as they run."""
    seen: list[str] = []
    writer._conn.set_trace_callback(lambda sql: seen.append(sql) if "SAVEPOINT" in sql else None)
    return seen


async def test_a_group_without_failures_runs_together(writer, path):
    """No savepoint per write (each costs a copy of every page it changes): one BEGIN, the
    writes, one COMMIT."""
    seen = savepoints(writer)
    results = await asyncio.gather(*(writer.run(insert(n)) for n in range(20)))
    assert seen == []
    assert sorted(n for n, _ in results) == list(range(1, 21))
    assert committed(path) == set(range(20))


async def test_a_failing_write_makes_its_group_run_again_apart(writer, path):
    """The group's first run stops at the failing write and is rolled back whole: every write
    is answered from the second run, where each has its savepoint; what the first run's
    writes released is not handed back twice."""
    seen = savepoints(writer)
    runs: list[int] = []

    def counted(n: int, fail: bool = False, files: list[str] | None = None):  # type: ignore[no-untyped-def]
        fn = insert(n, fail, files)

        async def run(tx: SqliteTx) -> int:
            runs.append(n)
            return await fn(tx)

        return run

    results = await asyncio.gather(
        writer.run(counted(1, files=["by-1"])),
        writer.run(counted(2, fail=True, files=["never-released"])),
        writer.run(counted(3, files=["by-3"])),
        return_exceptions=True,
    )
    assert runs == [1, 2, 1, 2, 3]
    assert results[0] == (1, ["by-1"]) and results[2] == (2, ["by-3"])
    assert isinstance(results[1], ValueError)
    assert committed(path) == {1, 3}
    assert seen.count("SAVEPOINT op") == 3


async def test_a_write_refused_for_what_an_earlier_write_of_its_group_did(writer, path):
    """The same row twice in one group (a constraint failure in the first run): the second
    write still sees the first's row when the group runs again, and fails alone."""
    results = await asyncio.gather(
        writer.run(insert(5)),
        writer.run(insert(5)),
        writer.run(insert(6)),
        return_exceptions=True,
    )
    assert results[0] == (1, [])
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert results[2] == (2, [])
    assert committed(path) == {5, 6}


async def test_after_a_failing_group_the_next_runs_apart_until_one_has_no_failure(writer, path):
    """A group with a failure is likely followed by another (a client retrying a refused
    condition): the next group runs apart at once instead of twice; a group without failure
    lets the following ones run together again."""
    await asyncio.gather(
        writer.run(insert(1)), writer.run(insert(2, fail=True)), return_exceptions=True
    )
    seen = savepoints(writer)
    await asyncio.gather(writer.run(insert(3)), writer.run(insert(4)))  # apart, no failure
    assert seen.count("SAVEPOINT op") == 2
    seen.clear()
    await asyncio.gather(writer.run(insert(5)), writer.run(insert(6)))  # together again
    assert seen == []
    assert committed(path) == {1, 3, 4, 5, 6}


async def test_a_failing_write_alone_in_its_group_runs_once(writer, path):
    runs: list[int] = []

    async def fails(tx: SqliteTx) -> None:
        runs.append(1)
        tx.conn.execute("INSERT INTO t (n) VALUES (1)")
        raise ValueError("no")

    with pytest.raises(ValueError):
        await writer.run(fails)
    assert runs == [1] and committed(path) == set()
    assert await writer.run(insert(2)) == (1, [])  # and the next group runs together
    assert committed(path) == {2}


async def test_a_full_disk_fails_the_group_as_it_did_with_a_savepoint_per_write(writer, path):
    """SQLite rolls the whole transaction back itself when the disk is full (here: the
    catalog's page limit): the first run's failure leaves no transaction, and the second
    meets the same end as a savepoint per write always did (every write of the group fails,
    nothing is kept); the writer goes on once there is room."""
    conn = writer._conn
    conn.execute("CREATE TABLE IF NOT EXISTS big (n INTEGER PRIMARY KEY, data BLOB)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 8}")

    def row(n: int, size: int):  # type: ignore[no-untyped-def]
        async def fn(tx: SqliteTx) -> int:
            tx.conn.execute("INSERT INTO big (n, data) VALUES (?, ?)", (n, b"x" * size))
            return n

        return fn

    outcomes = []
    for together in (False, True):
        writer._together = together
        results = await asyncio.gather(
            writer.run(row(1, 100)),
            writer.run(row(2, 1 << 20)),
            writer.run(row(3, 100)),
            return_exceptions=True,
        )
        outcomes.append([type(r) for r in results])
        assert all(isinstance(r, sqlite3.Error) for r in results)
        assert not conn.execute("SELECT n FROM big").fetchall()
    assert outcomes[0] == outcomes[1]
    conn.execute("PRAGMA max_page_count = 1073741823")
    assert await writer.run(row(4, 1 << 20)) == (4, [])


async def test_a_group_where_every_write_fails_commits_nothing(writer, path):
    with pytest.raises(ValueError):
        await writer.run(insert(7, fail=True))
    assert committed(path) == set()
    assert await writer.run(insert(8)) == (1, [])  # the writer goes on


async def test_a_caller_that_goes_away_does_not_undo_its_write(writer, path):
    """A caller awaiting the write's future and cancelled cancels that future: the write
    still commits, and the writer goes on with the rest of its group and the next ones."""

    async def caller() -> object:
        return await writer.run(insert(9))

    gone = asyncio.ensure_future(caller())
    await asyncio.sleep(0)  # its write is queued first
    other = writer.run(insert(10))  # in the same group, after it
    gone.cancel()
    assert (await asyncio.wait_for(other, 10))[1] == []
    assert await writer.run(insert(11)) == (3, [])
    assert committed(path) == {9, 10, 11}


async def test_long_writes_run_off_the_event_loop(writer, path):
    loop_thread = threading.current_thread()

    async def where(tx: SqliteTx) -> threading.Thread:
        tx.conn.execute("INSERT INTO t (n) VALUES ((SELECT coalesce(max(n), 0) + 1 FROM t))")
        return threading.current_thread()

    assert (await writer.run(where))[0] is loop_thread
    assert (await writer.run(where, long=True))[0] is not loop_thread
    assert committed(path) == {1, 2}


async def test_a_write_that_suspends_is_refused(writer, path):
    """A SQLite write must complete at once (it runs inside the group's transaction)."""

    async def suspends(tx: SqliteTx) -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="suspended"):
        await writer.run(suspends)


async def test_writers_of_several_processes_take_turns(path):
    """Two writers on one catalog (as two worker processes have): each transaction waits for
    the other's turn instead of failing with 'database is locked'."""
    a, b = GroupWriter(path), GroupWriter(path)
    try:

        def slow(n: int):  # type: ignore[no-untyped-def]
            async def fn(tx: SqliteTx) -> None:
                tx.conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
                tx.conn.execute("SELECT count(*) FROM t, t AS u").fetchone()  # holds the turn

            return fn

        await asyncio.gather(
            *(writer.run(slow(n), long=n % 3 == 0) for n in range(60) for writer in [(a, b)[n % 2]])
        )
    finally:
        a.close()
        b.close()
    assert committed(path) == set(range(60))


async def test_a_group_that_cannot_commit_gives_the_turn_back(path):
    """A group whose COMMIT cannot be run (here: the commit thread is gone) fails its writes,
    rolls back, and leaves the turn free for the other workers."""
    a, b = GroupWriter(path), GroupWriter(path)
    try:
        a._thread.shutdown()
        with pytest.raises(RuntimeError):
            await a.run(insert(1))
        assert await asyncio.wait_for(b.run(insert(2)), 5) == (1, [])
    finally:
        a.close()
        b.close()
    assert committed(path) == {2}


# --- the Store frees what a write released, after its commit ------------------------------------


class Files:
    """The blob store's release calls, recorded: retire (moved out of reach), then purge."""

    def __init__(self) -> None:
        self.retired: list[str] = []
        self.freed: list[str] = []
        self.purging = asyncio.Event()  # set: purge may finish

    def close(self) -> None:
        """Nothing held open (the BlobStore protocol's close)."""

    async def retire(self, blob_ids: list[str]) -> list[Path]:
        self.retired += blob_ids
        return [Path(b) for b in blob_ids]

    async def purge(self, retired: list[Path]) -> None:
        await asyncio.wait_for(self.purging.wait(), 10)
        self.freed += [p.name for p in retired]

    async def delete(self, blob_ids: list[str]) -> None:
        await self.purge(await self.retire(blob_ids))


def released(*blob_ids: str):  # type: ignore[no-untyped-def]
    async def fn(tx: SqliteTx) -> str:
        tx.released += blob_ids
        return "done"

    return fn


async def test_writes_are_answered_before_the_space_is_freed_but_deletes_after(tmp_path):
    store = open_store(tmp_path / "data")
    files = Files()
    store.files = files  # type: ignore[assignment]
    try:
        files.purging.clear()  # freeing takes (here: forever) long
        assert await store._write(released("replaced-object")) == "done"
        assert files.retired == ["replaced-object"] and files.freed == []
        delete = asyncio.ensure_future(store._write(released("deleted-object"), frees=True))
        await asyncio.sleep(0.2)
        assert not delete.done()  # a delete waits for its space
        files.purging.set()
        assert await delete == "done"
        assert "deleted-object" in files.freed
    finally:
        files.purging.set()
        store.close()


async def test_a_failed_write_frees_what_it_staged(tmp_path):
    store = open_store(tmp_path / "data")
    files = Files()
    files.purging.set()
    store.files = files  # type: ignore[assignment]

    async def fails(tx: SqliteTx) -> None:
        tx.released.append("never")
        raise ValueError("no")

    try:
        with pytest.raises(ValueError):
            await store._write(fails, ["staged-body"])
        for _ in range(100):
            if files.freed:
                break
            await asyncio.sleep(0.01)
        assert files.retired == ["staged-body"] and files.freed == ["staged-body"]
    finally:
        store.close()


async def test_a_write_whose_commit_is_unknown_keeps_what_it_staged(tmp_path):
    """A connection lost during COMMIT: the row may exist, so its blob must stay."""
    store = open_store(tmp_path / "data")
    files = Files()
    files.purging.set()
    store.files = files  # type: ignore[assignment]

    async def lost(tx: SqliteTx) -> None:
        raise CommitOutcomeUnknown("the connection closed during COMMIT")

    try:
        with pytest.raises(CommitOutcomeUnknown):
            await store._write(lost, ["staged-body"])
        await asyncio.sleep(0.1)  # a free, had one been started, would have run by now
        assert files.retired == [] and files.freed == []
    finally:
        store.close()


# --- PutObject through the group: what the first run did is never half kept -------------------


async def test_puts_of_one_group_when_one_is_refused(tmp_path):
    """One group (its commit counted): a key written twice ends with the second body, a
    conditional PUT refused because an earlier PUT of the group made its key is refused
    alone, and the catalog keeps exactly the blobs its objects use, one reference each (none
    of the first run's rows, none of the refused PUT's or the replaced body's)."""
    store = open_store(tmp_path / "data")
    try:
        await store.create_bucket("b", "owner", "us-east-1")

        async def body(text: bytes) -> StagedBlob:
            async def chunks():  # type: ignore[no-untyped-def]
                yield text

            return await store.stage(chunks())

        blobs = [await body(b) for b in (b"one", b"two", b"first", b"refused", b"second")]
        writer = store.catalog._writer  # type: ignore[attr-defined]
        commits = []
        commit = writer._commit
        writer._commit = lambda *group: commits.append(1) or commit(*group)
        results = await asyncio.gather(
            store.put_object("b", "one", blobs[0], ObjectAttrs()),
            store.put_object("b", "twice", blobs[2], ObjectAttrs()),
            store.put_object("b", "two", blobs[1], ObjectAttrs()),
            store.put_object(
                "b", "one", blobs[3], ObjectAttrs(), condition=WriteCondition(if_none_match="*")
            ),
            store.put_object("b", "twice", blobs[4], ObjectAttrs()),
            return_exceptions=True,
        )
        assert len(commits) == 1
        assert isinstance(results[3], PreconditionFailed)
        for key, blob in (("one", blobs[0]), ("two", blobs[1]), ("twice", blobs[4])):
            obj = await store.head_object("b", key)
            assert obj.extents[0].blob == blob.id and obj.etag == blob.md5.hex()
        catalog = sqlite3.connect(tmp_path / "data" / "catalog.sqlite3")
        rows = catalog.execute("SELECT id, refs FROM blobs").fetchall()
        assert sorted(rows) == sorted((b.id, 1) for b in (blobs[0], blobs[1], blobs[4]))
        # The writer runs the next group apart, then together again: both commit.
        await store.put_object("b", "three", await body(b"three"), ObjectAttrs())
        await store.put_object("b", "four", await body(b"four"), ObjectAttrs())
        keys = catalog.execute("SELECT key FROM objects ORDER BY key").fetchall()
        assert [bytes(k).decode() for (k,) in keys] == ["four", "one", "three", "twice", "two"]
        catalog.close()
    finally:
        store.close()
