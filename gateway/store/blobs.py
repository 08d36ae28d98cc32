"""Immutable blob files: written under tmp/, fsynced, renamed into blobs/ab/cd/<id>.

Blob files are named by random ids, never by keys, and never change once published. The catalog
says which exist; a file the catalog does not know is an orphan of a crash and is swept.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


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


class BlobFiles:
    """The blobs/ and tmp/ folders of a data directory. Thread-safe; every call blocks."""

    def __init__(self, root: Path) -> None:
        self.blobs = root / "blobs"
        self.tmp = root / "tmp"
        self.trash = root / "trash"
        for folder in (self.blobs, self.tmp, self.trash):
            folder.mkdir(parents=True, exist_ok=True)
        self._dirs: set[Path] = set()

    def path(self, blob_id: str) -> Path:
        return self.blobs / blob_id[:2] / blob_id[2:4] / blob_id

    def create_tmp(self) -> tuple[int, Path]:
        """A new, empty file under tmp/, opened for writing."""
        path = self.tmp / secrets.token_hex(16)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        return fd, path

    def publish(self, fd: int, tmp_path: Path, blob_id: str) -> None:
        """Make a fully written tmp file durable as blob `blob_id`, and close it.

        fsync the bytes, rename into place, fsync the directory: after this returns the blob
        survives a crash (it is an orphan until a catalog commit references it).
        """
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        final = self.path(blob_id)
        self._ensure_dir(final.parent)
        os.rename(tmp_path, final)
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

    def discard_tmp(self, fd: int | None, tmp_path: Path) -> None:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()

    def delete(self, blob_ids: Iterable[str]) -> None:
        """Remove blob files the catalog no longer references (after the commit that dropped
        them: a crash before this leaves orphans for the sweep, never a dangling reference)."""
        self.purge(self.retire(blob_ids))

    def retire(self, blob_ids: Iterable[str]) -> list[Path]:
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

    def purge(self, retired: Iterable[Path]) -> None:
        for path in retired:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def open(self, blob_id: str) -> int:
        return os.open(self.path(blob_id), os.O_RDONLY)

    def leftover_names(self) -> list[str]:
        """What `empty_tmp` would remove."""
        return sorted([*os.listdir(self.tmp), *os.listdir(self.trash)])

    def empty_tmp(self) -> int:
        """Remove everything under tmp/ (bodies that were being received when we stopped) and
        trash/ (blob files released and not yet freed)."""
        removed = 0
        for entry in [*os.scandir(self.tmp), *os.scandir(self.trash)]:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
            removed += 1
        return removed

    def walk(self) -> Iterator[tuple[str, list[os.DirEntry[str]]]]:
        """Yield (4-hex-char prefix, file entries) for each leaf directory, in sorted order,
        so that a sweep can compare one directory at a time with the catalog."""
        for top in sorted(os.scandir(self.blobs), key=lambda e: e.name):
            if not top.is_dir(follow_symlinks=False):
                continue
            for leaf in sorted(os.scandir(top.path), key=lambda e: e.name):
                if leaf.is_dir(follow_symlinks=False):
                    files = [e for e in os.scandir(leaf.path) if e.is_file(follow_symlinks=False)]
                    yield top.name + leaf.name, files


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
