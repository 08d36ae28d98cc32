"""Blob intents: what a crashed writer left is reclaimed by the nodes that go on serving.

A blob file is named in the catalog before it exists in blobs/: an intent row (blob id, node,
expiry = now + the lease) is committed before the file is published, and deleted by the
commit that inserts the blob's row, in that commit's transaction. So at any moment a published
blob file is an intent, a blob, or garbage, and a reclaimer on any node may delete

- the files of an intent that expired: it deletes the row first (a write whose commit deletes
  it at the same time waits for that and fails with IntentLost: nothing acknowledged refers
  to the file), then the body being received, then the published file;
- a file that neither a blob nor an intent names and that nobody has modified for a lease:
  left by a crash between a failed commit and its cleanup, by a gateway from before intents,
  or a body whose writer died before its intent was recorded. Blob files are looked through
  one folder of blobs/ per round, so a round costs little whatever the store holds.

A writer renews its intent while the body streams in (a third of the lease after the last
renewal) and before it publishes; a writer that stalled for longer than the lease finds its
intent gone and answers 503 (IntentLost), never an acknowledged object without its bytes.
Correctness does not rest on clocks: the expiry only says when a reclaimer may try, and the
row decides, under the catalog's row lock, whether the writer or the reclaimer has the file.
docs/scaling.md has the races.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from . import errors
from .api import BlobStore, Catalog, CatalogReader, CatalogTx

log = logging.getLogger(__name__)

# Intents a reclaimer takes per transaction.
BATCH = 500


@dataclass
class Reclaimed:
    """What one round removed."""

    intents: int = 0  # expired intents, with whatever their writers had written
    files: int = 0  # files no blob or intent names, older than the lease

    def __bool__(self) -> bool:
        return bool(self.intents or self.files)


class Intents:
    """The intents of one process's writers, and the reclaimer of every node's lapsed ones."""

    def __init__(
        self, catalog: Catalog, reader: CatalogReader, files: BlobStore, lease: float
    ) -> None:
        self.catalog = catalog
        self.reader = reader
        self.files = files
        self.lease = lease
        self.node = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._next_folder: str | None = None
        self._background: set[asyncio.Future[Any]] = set()

    def expiry(self) -> int:
        return time.time_ns() + int(self.lease * 1e9)

    def begin(self, blob_id: str) -> Intent:
        """Record the intent of a blob about to be written (at once, in the background)."""
        return Intent(self, blob_id)

    def _write(self, fn: Callable[[CatalogTx], Coroutine[Any, Any, Any]]) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self.catalog.write(fn))

    def drop(self, blob_ids: list[str]) -> None:
        """Forget intents whose files are gone (a failed write removed them), in the
        background: one that is left costs a reclaimer's look, nothing more."""
        if blob_ids:
            self._later(self._write(lambda tx: tx.drop_intents(blob_ids)))

    def _later(self, fut: asyncio.Future[Any]) -> None:
        self._background.add(fut)

        def done(f: asyncio.Future[Any]) -> None:
            self._background.discard(f)
            if not f.cancelled() and f.exception() is not None:
                log.debug("could not forget an intent (it will lapse): %s", f.exception())

        fut.add_done_callback(done)

    # --- reclaiming ----------------------------------------------------------------------------

    async def reclaim(self) -> Reclaimed:
        """One round: every expired intent, in batches, then the old files of tmp/ and trash/
        and of one folder of blobs/ that nothing names."""
        done = Reclaimed()
        now = time.time_ns()
        while True:
            taken, _ = await self.catalog.write(lambda tx: tx.take_expired_intents(now, BATCH))
            if taken:
                log.info("reclaiming %d blobs whose writers' intents lapsed", len(taken))
                await self.files.forget(taken)
                done.intents += len(taken)
            if len(taken) < BATCH:
                break
        done.files += await self._unnamed(None)
        folder = await self._folder()
        if folder is not None:
            done.files += await self._unnamed(folder)
        return done

    async def _folder(self) -> str | None:
        """The next folder of blobs/ in turn; each process starts at a random one, so that
        nodes look through different folders."""
        folders = await self.files.folders()
        if not folders:
            return None
        if self._next_folder is None:
            self._next_folder = random.choice(folders)
        following = [f for f in folders if f >= self._next_folder]
        current = following[0] if following else folders[0]
        later = [f for f in folders if f > current]
        self._next_folder = later[0] if later else folders[0]
        return current

    async def _unnamed(self, folder: str | None) -> int:
        """Remove the old files of `folder` (None: tmp/ and trash/) that no blob or intent
        names. A released file in trash/ is named by nothing any more, and goes too."""
        old = await self.files.old_files(folder, self.lease)
        if not old:
            return 0
        removed = 0
        for start in range(0, len(old), BATCH):
            batch = old[start : start + BATCH]
            known = await self.reader.known_blobs_among([f.name for f in batch])
            stale = [f for f in batch if f.name not in known]
            if stale:
                log.info("reclaiming %d files that no blob or intent names", len(stale))
                await self.files.remove(stale)
                removed += len(stale)
        return removed

    async def run_forever(self) -> None:
        """Reclaim every fifth of the lease (at most every minute), for good."""
        period = min(60.0, self.lease / 5)
        while True:
            await asyncio.sleep(period * random.uniform(0.8, 1.2))
            try:
                await self.reclaim()
            except asyncio.CancelledError:
                raise
            except (errors.StoreError, OSError) as exc:  # the next round tries again
                log.warning("reclaiming orphan blobs failed: %s", exc)


class Intent:
    """The intent of one blob being written: recorded as the writer starts, renewed while
    the body streams in, and checked (renewed if due) before the file is published."""

    def __init__(self, intents: Intents, blob_id: str) -> None:
        self.intents = intents
        self.blob_id = blob_id
        self._since = time.monotonic()
        expires = intents.expiry()
        self._held: asyncio.Future[Any] = intents._write(
            lambda tx: tx.add_intent(blob_id, intents.node, expires)
        )
        self._held.add_done_callback(_retrieve)

    def _due(self) -> bool:
        return time.monotonic() - self._since > self.intents.lease / 3

    def _renew(self) -> None:
        self._since = time.monotonic()
        expires = self.intents.expiry()

        async def renew(tx: CatalogTx) -> None:
            if not await tx.renew_intent(self.blob_id, expires):
                raise errors.IntentLost(errors.INTENT_LOST)

        self._held = self.intents._write(renew)
        self._held.add_done_callback(_retrieve)

    def keep(self) -> None:
        """As bytes come: renew the intent if a third of the lease has passed (without
        waiting; a renewal that found the intent gone fails `ready`)."""
        held = self._held
        if held.done() and not held.cancelled() and held.exception() is None and self._due():
            self._renew()

    async def ready(self) -> None:
        """Before the file is published: the intent is recorded, and has at least two thirds
        of the lease to run. IntentLost if it was reclaimed meanwhile."""
        await self._held
        if self._due():
            self._renew()
            await self._held

    def abandon(self) -> None:
        """The write failed and its files are being removed: the intent goes too, once it is
        recorded (a failed record leaves nothing to forget)."""

        def recorded(fut: asyncio.Future[Any]) -> None:
            if not fut.cancelled() and fut.exception() is None:
                self.intents.drop([self.blob_id])

        self._held.add_done_callback(recorded)


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a background write's error as seen: whoever needs it awaits the future."""
    if not fut.cancelled():
        fut.exception()
