"""The BlobStore on files: written under tmp/, fsynced, renamed into blobs/ab/cd/<id>.

Blob files are named by random ids, never by keys, and never change once published. The catalog
says which exist; a file the catalog does not know is an orphan of a crash and is swept.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from .errors import StoreError

T = TypeVar("T")
# What an append takes: bytes, or pieces written in order.
Buffers = bytes | memoryview | Sequence[bytes | memoryview]


def new_blob_id() -> str:
    return secrets.token_hex(16)


def _sync_file_range() -> Callable[[int, int, int], None]:
    """Linux's sync_file_range(SYNC_FILE_RANGE_WRITE), or a no-op where there is none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError, TypeError):
        return lambda fd, offset, length: None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    write = 2  # SYNC_FILE_RANGE_WRITE: start writing these pages back, do not wait

    def start(fd: int, offset: int, length: int) -> None:
        call(fd, offset, length, write)  # advice only: a failure is the fsync's to report

    return start


# Start the disk writing a blob's pages as they come, instead of all of them at its fsync: the
# fsync that makes a large blob durable then has little left to wait for.
start_writeback = _sync_file_range()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Found:
    """api.Stray: a file a scan found, by name and path."""

    name: str
    path: str


class BlobFiles:
    """api.BlobStore on the blobs/, tmp/ and trash/ folders of a data directory. Every file
    call that may wait runs in `pool`; opening a blob (one lookup) runs on the caller's
    thread."""

    def __init__(self, root: Path, pool: concurrent.futures.Executor) -> None:
        self.blobs = root / "blobs"
        self.tmp = root / "tmp"
        self.trash = root / "trash"
        self.id_file = root / "catalog-id"
        self.pool = pool
        for folder in (self.blobs, self.tmp, self.trash):
            folder.mkdir(parents=True, exist_ok=True)
        self._dirs: set[Path] = set()

    def close(self) -> None:
        """Nothing to let go of: the pool is its owner's."""

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def path(self, blob_id: str) -> Path:
        return self.blobs / blob_id[:2] / blob_id[2:4] / blob_id

    # --- writing -------------------------------------------------------------------------------

    def writer(self) -> FileWriter:
        return FileWriter(self, new_blob_id())

    def create_tmp(self, name: str) -> int:
        """A new, empty file tmp/<name>, opened for writing."""
        return os.open(self.tmp / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)

    def publish_tmp(self, fd: int, name: str, blob_id: str) -> None:
        """Make a fully written tmp file durable as blob `blob_id`, and close it.

        fsync the bytes, rename into place, fsync the directory: after this returns the blob
        survives a crash (it is an orphan until a catalog commit references it).
        """
        try:
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self.rename_tmp(fd, name, blob_id)

    def rename_tmp(self, fd: int, name: str, blob_id: str) -> None:
        """publish_tmp, for a file whose bytes are fsynced already."""
        os.close(fd)
        final = self.path(blob_id)
        self._ensure_dir(final.parent)
        os.rename(self.tmp / name, final)
        _fsync_dir(final.parent)

    def _ensure_dir(self, path: Path) -> None:
        if path in self._dirs:
            return
        if not path.is_dir():
            # Create each missing level and make its entry in the parent durable.
            for level in (path.parent, path):
                if not level.is_dir():
                    level.mkdir(exist_ok=True)
                    _fsync_dir(level.parent)
        self._dirs.add(path)

    def discard_tmp(self, fd: int | None, name: str) -> None:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            (self.tmp / name).unlink()

    async def writable(self) -> bool:
        def probe() -> None:
            name = secrets.token_hex(16)
            self.discard_tmp(self.create_tmp(name), name)

        try:
            await self._run(probe)
        except OSError:
            return False
        return True

    async def catalog_id(self, proposed: str | None) -> str | None:
        return await self._run(self._claim_id, proposed)

    def _claim_id(self, proposed: str | None) -> str | None:
        try:
            found = self.id_file.read_text().strip()
        except FileNotFoundError:
            if proposed is None:
                return None
        else:
            if not found:
                raise StoreError(f"{self.id_file} is empty: it should name the folder's catalog")
            return found
        # Written whole and fsynced under tmp/, then linked into place: a link fails if the
        # name exists, so of two claims at once exactly one lands, and never a torn file.
        name = f"catalog-id.{secrets.token_hex(8)}"
        fd = self.create_tmp(name)
        try:
            os.write(fd, f"{proposed}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(self.tmp / name, self.id_file)
            _fsync_dir(self.id_file.parent)
        except FileExistsError:
            pass
        finally:
            os.unlink(self.tmp / name)
        return self._claim_id(None)

    # --- freeing -------------------------------------------------------------------------------

    async def delete(self, blob_ids: Iterable[str]) -> None:
        """Remove blob files the catalog no longer references (after the commit that dropped
        them: a crash before this leaves orphans for the sweep, never a dangling reference)."""
        await self._run(self.delete_now, list(blob_ids))

    def delete_now(self, blob_ids: Iterable[str]) -> None:
        self.purge_now(self.retire_now(blob_ids))

    async def retire(self, blob_ids: Iterable[str]) -> list[Path]:
        return await self._run(self.retire_now, list(blob_ids))

    def retire_now(self, blob_ids: Iterable[str]) -> list[Path]:
        """Move blob files the catalog no longer references into trash/: a rename, as quick
        for 5 GiB as for 5 KiB, where an unlink frees every extent first. `purge` then frees
        them; a crash in between leaves them for the start-up sweep."""
        moved = []
        for blob_id in blob_ids:
            target = self.trash / blob_id
            try:
                os.rename(self.path(blob_id), target)
            except FileNotFoundError:
                continue
            moved.append(target)
        return moved

    async def purge(self, retired: Iterable[object]) -> None:
        await self._run(self.purge_now, list(retired))

    @staticmethod
    def purge_now(retired: Iterable[object]) -> None:
        for path in retired:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # type: ignore[arg-type]

    # --- reading -------------------------------------------------------------------------------

    async def open(self, blob_id: str) -> OpenFile:
        return OpenFile(os.open(self.path(blob_id), os.O_RDONLY), self.pool)

    # --- what a crash leaves -------------------------------------------------------------------

    async def leftovers(self) -> list[str]:
        """What `empty_leftovers` would remove."""
        return await self._run(lambda: sorted([*os.listdir(self.tmp), *os.listdir(self.trash)]))

    async def empty_leftovers(self) -> int:
        """Remove everything under tmp/ (bodies that were being received when we stopped) and
        trash/ (blob files released and not yet freed)."""

        def empty() -> int:
            removed = 0
            for entry in [*os.scandir(self.tmp), *os.scandir(self.trash)]:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                removed += 1
            return removed

        return await self._run(empty)

    async def walk(self) -> AsyncIterator[list[os.DirEntry[str]]]:
        """The files of each leaf directory in turn, in sorted order: a sweep compares one
        directory at a time with the catalog (bounded memory at any count)."""

        def leaves() -> list[str]:
            out = []
            for top in sorted(os.scandir(self.blobs), key=lambda e: e.name):
                if top.is_dir(follow_symlinks=False):
                    out += [
                        leaf.path
                        for leaf in sorted(os.scandir(top.path), key=lambda e: e.name)
                        if leaf.is_dir(follow_symlinks=False)
                    ]
            return out

        def files(leaf: str) -> list[os.DirEntry[str]]:
            return [e for e in os.scandir(leaf) if e.is_file(follow_symlinks=False)]

        for leaf in await self._run(leaves):
            found = await self._run(files, leaf)
            if found:
                yield found

    async def remove(self, found: Iterable[os.DirEntry[str] | Found]) -> None:
        # By each file's own path: a stray name need not be an id that maps onto its folder.
        await self._run(self.purge_now, [entry.path for entry in found])

    # --- reclaiming while gateways serve (intents.py) ------------------------------------------

    async def folders(self) -> list[str]:
        """The groups of blob files a reclaimer looks through one at a time: the first level
        of blobs/ (at most 256 folders of 256 leaves)."""

        def tops() -> list[str]:
            return sorted(e.name for e in os.scandir(self.blobs) if e.is_dir(follow_symlinks=False))

        return await self._run(tops)

    async def old_files(self, folder: str | None, age: float) -> list[Found]:
        """Files not modified for `age` seconds: the blob files under `folder` (one of
        `folders()`), or with None the bodies being received (tmp/) and the released files
        not yet freed (trash/). A file being written is modified as its bytes come."""

        def scan() -> list[Found]:
            cutoff = time.time() - age
            if folder is None:
                places = [self.tmp, self.trash]
            else:
                top = self.blobs / folder
                try:
                    places = [Path(e.path) for e in os.scandir(top) if e.is_dir()]
                except FileNotFoundError:
                    return []
            out = []
            for place in places:
                try:
                    entries = list(os.scandir(place))
                except FileNotFoundError:
                    continue
                for entry in entries:
                    try:
                        if entry.is_file(follow_symlinks=False) and (
                            entry.stat(follow_symlinks=False).st_mtime < cutoff
                        ):
                            out.append(Found(entry.name, entry.path))
                    except FileNotFoundError:
                        continue  # freed meanwhile
            return out

        return await self._run(scan)

    async def forget(self, blob_ids: Iterable[str]) -> None:
        """Remove what is kept of blobs whose intents were reclaimed: the body being received,
        then the published file. In that order: a writer that publishes between the two
        loses its file to the second, and one that publishes after both finds no body to
        publish (FileNotFoundError); its commit fails either way, as its intent is gone."""

        def remove(ids: list[str]) -> None:
            for blob_id in ids:
                with contextlib.suppress(FileNotFoundError):
                    (self.tmp / blob_id).unlink()
                with contextlib.suppress(FileNotFoundError):
                    self.path(blob_id).unlink()

        await self._run(remove, list(blob_ids))


class FileWriter:
    """api.BlobWriter: a blob file written under tmp/ (named by the blob id), published into
    blobs/. Each append is one pool job; the Store awaits one before starting the next."""

    def __init__(self, files: BlobFiles, blob_id: str) -> None:
        self.files = files
        self.blob_id = blob_id
        self.fd: int | None = None
        self.size = 0
        self._busy: concurrent.futures.Future[None] | None = None
        self._aborted = False

    def _start(self, fn: Callable[[Buffers], None], data: Buffers) -> asyncio.Future[None]:
        self._busy = self.files.pool.submit(fn, data)
        return asyncio.wrap_future(self._busy)

    def append(self, data: Buffers) -> asyncio.Future[None]:
        return self._start(self._write, data)

    def _write(self, data: Buffers) -> None:
        if self._aborted:
            # A write that was on its way when the body failed must not make the file again
            # after the abort removed it.
            raise OSError(errno.ECANCELED, "the blob was aborted")
        if self.fd is None:
            self.fd = self.files.create_tmp(self.blob_id)
        pieces = [memoryview(data)] if isinstance(data, bytes | memoryview) else data
        length = _write_all(self.fd, pieces)
        start_writeback(self.fd, self.size, length)
        self.size += length

    async def publish(
        self, last: Buffers = b"", ready: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Append `last` and publish: one pool job for the final batch, the fsync and the
        rename; or with `ready`, awaited before the rename (while the bytes are made
        durable), two."""
        if ready is None:
            await self._start(self._write_and_publish, last)
            return
        await self._start(self._write_and_sync, last)
        await ready()
        await self._start(self._publish_synced, b"")

    def _write_and_publish(self, data: Buffers) -> None:
        self._write_and_sync(data)
        self._publish_synced(b"")

    def _write_and_sync(self, data: Buffers) -> None:
        self._write(data)
        assert self.fd is not None
        os.fsync(self.fd)

    def _publish_synced(self, _: Buffers) -> None:
        assert self.fd is not None
        fd, self.fd = self.fd, None
        self.files.rename_tmp(fd, self.blob_id, self.blob_id)

    def abort(self) -> None:
        busy = self._busy
        self._aborted = True

        def cleanup() -> None:
            if busy is not None:
                concurrent.futures.wait([busy])
            self.files.discard_tmp(self.fd, self.blob_id)
            self.fd = None
            # A publish that completed before the failure leaves a blob nobody references.
            self.files.delete_now([self.blob_id])

        try:
            self.files.pool.submit(cleanup)
        except RuntimeError:
            # The pool is shut down (the store closing under a write in flight): its work is
            # done, so the clean-up runs here rather than failing the request with a 500.
            cleanup()


# At most this many buffers per writev (Linux's IOV_MAX).
_IOV_MAX = 1024


def _write_all(fd: int, pieces: Sequence[bytes | memoryview]) -> int:
    """Write `pieces` in order, as one writev where the kernel takes them all (a batch's
    pieces as aiohttp received them: no copy to join them first); returns the bytes written."""
    views = [memoryview(p) for p in pieces if len(p)]
    i = 0
    while i < len(views):
        n = os.writev(fd, views[i : i + _IOV_MAX])
        while i < len(views) and n >= len(views[i]):
            n -= len(views[i])
            i += 1
        if n:  # the kernel took part of a piece: the rest of it next
            views[i] = views[i][n:]
    return sum(len(p) for p in pieces)


class OpenFile:
    """api.OpenBlob on a descriptor: it outlives an unlink of the file."""

    def __init__(self, fd: int, pool: concurrent.futures.Executor) -> None:
        self.fd = fd
        self.pool = pool

    def read_now(self, offset: int, count: int) -> bytes:
        piece = os.pread(self.fd, count, offset)
        if not piece:
            raise OSError(errno.EIO, "a blob file is shorter than its extent")
        return piece

    async def read(self, offset: int, count: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(
            self.pool, self.read_now, offset, count
        )

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def file(self) -> BinaryIO:
        return os.fdopen(os.dup(self.fd), "rb")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class FolderInUse(RuntimeError):
    pass


class FolderLock:
    """An advisory lock on the data folder. A gateway holds it shared while it serves (its
    worker processes share it too); the start-up sweep and fsck need it exclusively, because
    a blob being published is not in the catalog yet and would look like an orphan."""

    def __init__(self, root: Path) -> None:
        self.fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)

    def exclusive(self, what: str, wait: float = 5.0) -> None:
        """Take the folder alone; processes of a gateway that just stopped get `wait` seconds
        to go away."""
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise FolderInUse(
                        f"{what}: the data folder is in use by a running gateway; stop it first"
                    ) from None
                time.sleep(0.05)

    def shared(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_SH)

    def close(self) -> None:
        os.close(self.fd)
