"""The Store's topics (gateway/notify/): each account's notification topics, a document per
topic by name, read and changed through `get_topics` and `change_topics`.

INTERIM KEEPING. Until the catalog has a table for them (the next slice of issue 41 adds
`topics (account, name, doc)` to both catalogs with the outbox, docs/notifications.md), topics
are kept in the data folder, one JSON file per account under DATA/topics/, written whole
(temporary file, fsync, rename) under an exclusive lock on the file DATA/topics/.lock that the
gateway's worker processes share. What that does not give, and the table will: several nodes
on one PostgreSQL catalog with data folders of their own each see only their own topics, and
`s3gw migrate` does not carry them. Callers see none of this: the two methods below are the
seam, and their signatures are what the catalog's implementation keeps.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .core import StoreCore

T = TypeVar("T")

# Each account's topics: {name: document (JSON text, gateway/notify/topics.py says what)}.
TopicDocs = dict[str, str]


def _file(folder: Path, account: str) -> Path:
    # An account's canonical id is any string the users file gives: named by its hash.
    return folder / (hashlib.sha256(account.encode()).hexdigest() + ".json")


def _load(path: Path) -> TopicDocs:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    found = json.loads(text)["topics"]
    return {str(k): str(v) for k, v in found.items()}


def _store(path: Path, account: str, docs: TopicDocs) -> None:
    if not docs:
        path.unlink(missing_ok=True)
    else:
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"account": account, "topics": docs}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename (or the unlink) is durable before the change is answered
    finally:
        os.close(fd)


class Topics(StoreCore):
    @property
    def _topics_folder(self) -> Path:
        folder = self.root / "topics"
        folder.mkdir(exist_ok=True)
        return folder

    def _locked(self, fn: Callable[[], T], exclusive: bool) -> T:
        with open(self._topics_folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            return fn()

    async def get_topics(self, account: str) -> TopicDocs:
        """The account's topics by name (empty: it has none)."""
        path = _file(self._topics_folder, account)
        return await self._in_pool(lambda: self._locked(lambda: _load(path), exclusive=False))

    async def change_topics(
        self, account: str, change: Callable[[TopicDocs], tuple[TopicDocs, T]]
    ) -> T:
        """Run `change` on the account's topics as they are now, alone; keep what it returns
        (the new topics by name, and the caller's answer). `change` is pure: with a catalog
        table it may run more than once (a conflict with another node's write)."""
        path = _file(self._topics_folder, account)

        def run() -> T:
            current = _load(path)
            made, result = change(dict(current))
            if made != current:
                _store(path, account, made)
            return result

        return await self._in_pool(lambda: self._locked(run, exclusive=True))

    async def _in_pool(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn)
