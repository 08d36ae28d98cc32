"""CatalogWriter: group commit, one savepoint per write, long writes off the event loop, and
several writers (worker processes) on one catalog taking turns."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store import catalog


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "catalog.sqlite3"
    catalog.initialise(p)
    conn = catalog.connect(p)
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    conn.close()
    return p


class Files:
    """BlobFiles' release calls, recorded: retire (moved out of blobs/), then purge (freed)."""

    def __init__(self) -> None:
        self.retired: list[str] = []
        self.freed: list[str] = []
        self.purging = threading.Event()  # set: purge may finish

    def retire(self, blob_ids: list[str]) -> list[Path]:
        self.retired += blob_ids
        return [Path(b) for b in blob_ids]

    def purge(self, retired: list[Path]) -> None:
        self.purging.wait(10)
        self.freed += [p.name for p in retired]


@pytest.fixture
def files() -> Files:
    f = Files()
    f.purging.set()
    return f


@pytest.fixture
def writer(path: Path, files: Files) -> Iterator[catalog.CatalogWriter]:
    pool = concurrent.futures.ThreadPoolExecutor(2)
    w = catalog.CatalogWriter(path, files, pool)  # type: ignore[arg-type]
    yield w
    w.close()
    pool.shutdown()


def committed(path: Path) -> set[int]:
    conn = sqlite3.connect(path)
    try:
        return {n for (n,) in conn.execute("SELECT n FROM t")}
    finally:
        conn.close()


def insert(n: int, fail: bool = False, files: list[str] | None = None):  # type: ignore[no-untyped-def]
    def fn(conn: sqlite3.Connection) -> tuple[int, list[str]]:
        conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
        if fail:
            raise ValueError(f"write {n} fails")
        # How many rows this transaction sees: more than were committed before the group
        # when earlier writes of the same group are visible to it.
        return conn.execute("SELECT count(*) FROM t").fetchone()[0], files or []

    return fn


async def test_concurrent_writes_share_commits(writer, path):
    seen = await asyncio.gather(*(writer.run(insert(n)) for n in range(50)))
    assert committed(path) == set(range(50))
    # All 50 were handed in before the first group started: one transaction, where each
    # write saw the rows of the writes before it, and one commit.
    assert sorted(seen) == list(range(1, 51))
    commits = []
    commit = writer._commit
    writer._commit = lambda *group: commits.append(1) or commit(*group)  # type: ignore[method-assign]
    await asyncio.gather(*(writer.run(insert(n)) for n in range(50, 100)))
    assert len(commits) == 1


async def test_a_failing_write_undoes_only_itself(writer, path, files):
    results = await asyncio.gather(
        writer.run(insert(1)),
        writer.run(insert(2, fail=True), staged=["staged-by-2"]),
        writer.run(insert(3, files=["released-by-3"])),
        return_exceptions=True,
    )
    assert isinstance(results[1], ValueError)
    assert committed(path) == {1, 3}
    # The failed write's staged file and the committed write's released file were moved out
    # before the answers came.
    assert sorted(files.retired) == ["released-by-3", "staged-by-2"]


async def test_writes_are_answered_before_the_space_is_freed_but_deletes_after(writer, files):
    files.purging.clear()  # freeing takes (here: forever) long
    assert await writer.run(insert(1, files=["replaced-object"])) == 1
    assert files.retired == ["replaced-object"] and files.freed == []
    delete = asyncio.ensure_future(writer.run(insert(2, files=["deleted-object"]), frees=True))
    await asyncio.sleep(0.2)
    assert not delete.done()  # a delete waits for its space
    files.purging.set()
    assert await delete == 2
    assert "deleted-object" in files.freed


async def test_a_group_where_every_write_fails_commits_nothing(writer, path):
    with pytest.raises(ValueError):
        await writer.run(insert(7, fail=True))
    assert committed(path) == set()
    assert await writer.run(insert(8)) == 1  # the writer goes on


async def test_long_writes_run_off_the_event_loop(writer, path):
    loop_thread = threading.current_thread()

    def where(conn: sqlite3.Connection) -> tuple[threading.Thread, list[str]]:
        conn.execute("INSERT INTO t (n) VALUES ((SELECT coalesce(max(n), 0) + 1 FROM t))")
        return threading.current_thread(), []

    assert await writer.run(where) is loop_thread
    assert await writer.run(where, long=True) is not loop_thread
    assert committed(path) == {1, 2}


async def test_writers_of_several_processes_take_turns(path, files):
    """Two writers on one catalog (as two worker processes have): each transaction waits for
    the other's turn instead of failing with 'database is locked'."""
    pool = concurrent.futures.ThreadPoolExecutor(2)
    a = catalog.CatalogWriter(path, files, pool)  # type: ignore[arg-type]
    b = catalog.CatalogWriter(path, files, pool)  # type: ignore[arg-type]
    try:

        def slow(n: int):  # type: ignore[no-untyped-def]
            def fn(conn: sqlite3.Connection) -> tuple[None, list[str]]:
                conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
                conn.execute("SELECT count(*) FROM t, t AS u").fetchone()  # holds the turn
                return None, []

            return fn

        await asyncio.gather(
            *(writer.run(slow(n), long=n % 3 == 0) for n in range(60) for writer in [(a, b)[n % 2]])
        )
    finally:
        a.close()
        b.close()
        pool.shutdown()
    assert committed(path) == set(range(60))


async def test_a_group_that_cannot_commit_gives_the_turn_back(path, files):
    """A group whose COMMIT cannot be run (here: the commit thread is gone) fails its writes,
    rolls back, and leaves the turn free for the other workers."""
    pool = concurrent.futures.ThreadPoolExecutor(2)
    a = catalog.CatalogWriter(path, files, pool)  # type: ignore[arg-type]
    b = catalog.CatalogWriter(path, files, pool)  # type: ignore[arg-type]
    try:
        a._thread.shutdown()
        with pytest.raises(RuntimeError):
            await a.run(insert(1))
        assert await asyncio.wait_for(b.run(insert(2)), 5) == 1
    finally:
        a.close()
        b.close()
        pool.shutdown()
    assert committed(path) == {2}
