"""The lifecycle worker: applies every bucket's lifecycle rules in the background, as AWS does
(userguide/intro-lifecycle-rules.md).

- Expiration: a current version past its date is deleted (a delete marker where versioning
  was ever set); a delete marker left with no other version is removed by
  ExpiredObjectDeleteMarker at once, and by Expiration Days or Date once it is that old.
- NoncurrentVersionExpiration: a version noncurrent for its days (counted from when the next
  newer version was written) is removed, past the newest NewerNoncurrentVersions kept.
- AbortIncompleteMultipartUpload: an upload that many days old is aborted.

Each bucket is worked on by one process at a time, whatever number of worker processes and
nodes share the catalog: the one holding the bucket's lease (Store.take_lease). The lease is
renewed only while its holder works (at each run, and between pages of a long one), and
given back on a clean stop (`release_leases`), so that a restarted gateway's new processes
take the buckets at once; a holder that dies leaves its leases to lapse (LEASE_SECONDS, half
a minute).
Work goes in pages of listings with a pause between them, so requests are never held up for
long; a deletion happens only if the version is still the one judged (Store.expire). A run
that stops (a crash, a restart) leaves nothing half done: the next run starts over.

`day_seconds` shortens the day for tests (the conformance suite's lifecycle tests wait a few
"days" of seconds, as its home server's debug interval makes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import socket
import time

from ..s3.lifecycle import Rule, after_days, rules
from ..store import Store, StoreError
from ..store.model import ListEntry

log = logging.getLogger(__name__)

PAGE = 1000
# Short, so that the buckets of a holder that died (SIGKILL, a lost node) are taken up within
# half a minute; a holder renews it while it works, at each object once a third has gone.
LEASE_SECONDS = 30.0


class _LeaseLost(Exception):
    """Another holder took the bucket's lease (ours lapsed): its work is theirs now."""


class LifecycleWorker:
    def __init__(self, store: Store, day_seconds: float = 86_400) -> None:
        self.store = store
        self.day_ns = int(day_seconds * 1e9)
        # How often buckets are looked at: hourly, or twenty times a (shortened) day, so that
        # a test reading the bucket a whole number of days later finds the work done (a
        # deadline falls at any time within its day; a fifth of a day late missed a fifth).
        self.period = min(3600.0, max(0.25, day_seconds / 20))
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        # The buckets whose lease this worker took, and when (monotonic) it last did.
        self.leases: dict[str, float] = {}

    async def run_forever(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a run that fails is tried again next period, never fatal
                log.exception("lifecycle run failed")
            await asyncio.sleep(max(0.0, self.period - (time.monotonic() - started)))

    async def run_once(self) -> int:
        """Apply every bucket's rules once; the number of deletions and aborts made."""
        done = 0
        for bucket in await self.store.list_buckets(None):
            document = bucket.settings.get("lifecycle")
            if document is None:
                continue
            active = [r for r in rules(document) if r.enabled]
            if not active:
                continue
            if not await self._take(bucket.name):
                continue
            try:
                for rule in active:
                    done += await self._apply(bucket.name, rule, versioned=bucket.versioning)
            except _LeaseLost:
                log.warning("lifecycle: the lease of bucket %s lapsed mid-run", bucket.name)
        return done

    async def _take(self, bucket: str) -> bool:
        """Take (or renew) the bucket's lease; False while another holder has it."""
        if await self.store.take_lease(bucket, "lifecycle", self.holder, LEASE_SECONDS):
            self.leases[bucket] = time.monotonic()
            return True
        self.leases.pop(bucket, None)
        return False

    async def _keep(self, bucket: str) -> None:
        """Between pages: renew the lease once a third of it has gone (a run over a large
        bucket may outlast it); _LeaseLost if another holder has it now."""
        await asyncio.sleep(0)
        taken = self.leases.get(bucket)
        due = taken is None or time.monotonic() - taken > LEASE_SECONDS / 3
        if due and not await self._take(bucket):
            raise _LeaseLost(bucket)

    async def release_leases(self) -> None:
        """Give back every lease this worker holds (on a clean stop), so that a restarted
        gateway's workers take the buckets at once rather than when the leases lapse."""
        held, self.leases = list(self.leases), {}
        for bucket in held:
            try:
                await self.store.release_lease(bucket, "lifecycle", self.holder)
            except Exception:  # it lapses on its own; the stop goes on
                log.warning("lifecycle: could not give back the lease of bucket %s", bucket)

    async def _apply(self, bucket: str, rule: Rule, versioned: str | None) -> int:
        now = time.time_ns()
        done = 0
        if rule.expiration_days is not None or rule.expiration_date_ns is not None:
            async for entry in self._current(bucket, rule):
                at = rule.expires_at(entry.mtime_ns, self.day_ns)
                if at is not None and at <= now and await self._takes(bucket, rule, entry):
                    done += await self.store.expire(bucket, entry.key, None, entry.mtime_ns)
        if versioned is not None and (
            rule.noncurrent_days is not None
            or rule.expired_object_delete_marker
            or rule.expiration_days is not None
            or rule.expiration_date_ns is not None
        ):
            done += await self._versions(bucket, rule, now)
        if rule.abort_days is not None:
            done += await self._uploads(bucket, rule, now)
        return done

    async def _takes(self, bucket: str, rule: Rule, entry: ListEntry) -> bool:
        """The filter's tags need the object's own (a listing does not carry them)."""
        await self._keep(bucket)
        if not rule.tags:
            return rule.applies(entry.key, entry.size, ())
        try:
            obj = await self.store.head_object(bucket, entry.key, entry.version_id)
        except StoreError:  # gone, or a marker now: nothing to expire
            return False
        return rule.applies(entry.key, obj.size, obj.attrs.tags)

    async def _current(self, bucket: str, rule: Rule):  # type: ignore[no-untyped-def]
        after = ""
        while True:
            page = await self.store.list_objects(bucket, rule.prefix, "", after, PAGE)
            for entry in page.entries:
                yield entry
            if not page.truncated or not page.entries:
                return
            after = page.entries[-1].key
            await self._keep(bucket)

    async def _versions(self, bucket: str, rule: Rule, now: int) -> int:
        done = 0
        key_marker, vid_marker = "", ""
        group: list[ListEntry] = []
        while True:
            page = await self.store.list_versions(
                bucket, rule.prefix, "", key_marker, vid_marker, PAGE
            )
            for entry in page.entries:
                if group and entry.key != group[0].key:
                    done += await self._key_versions(bucket, rule, group, now)
                    group = []
                group.append(entry)
            if not page.truncated or not page.entries:
                break
            key_marker, vid_marker = page.entries[-1].key, page.entries[-1].version_id
            await self._keep(bucket)
        if group:
            done += await self._key_versions(bucket, rule, group, now)
        return done

    async def _key_versions(
        self, bucket: str, rule: Rule, newest_first: list[ListEntry], now: int
    ) -> int:
        """One key's versions, newest first: expire the noncurrent ones the rule takes, and a
        delete marker left alone."""
        done = 0
        latest = newest_first[0]
        left = list(newest_first)
        if rule.noncurrent_days is not None:
            kept = 0
            for newer, entry in itertools.pairwise(newest_first):
                if entry.delete_marker:
                    continue
                if not await self._takes(bucket, rule, entry):
                    continue
                kept += 1
                if rule.newer_noncurrent is not None and kept <= rule.newer_noncurrent:
                    continue
                # Noncurrent since the next newer version was written.
                if after_days(newer.mtime_ns, rule.noncurrent_days, self.day_ns) <= now:
                    done += await self.store.expire(
                        bucket, entry.key, entry.version_id, entry.mtime_ns
                    )
                    left.remove(entry)
        alone = left == [latest] and latest.key.startswith(rule.prefix)
        if latest.delete_marker and alone and self._marker_expired(rule, latest, now):
            done += await self.store.expire(bucket, latest.key, latest.version_id, latest.mtime_ns)
        return done

    def _marker_expired(self, rule: Rule, marker: ListEntry, now: int) -> bool:
        """Is a delete marker left with no version one the rule removes? With
        ExpiredObjectDeleteMarker at once; with an Expiration that deletes current versions
        (Days or Date) once the marker is as old as the rule says, its age counted from its
        own creation (userguide/ManagingDelMarkers.html: "If the lifecycle configuration is set
        to delete current versions ... Amazon S3 removes the expired object's delete marker";
        lifecycle-configuration-examples.html: the cleanup happens "when the delete markers are
        old enough to satisfy the age criteria"). A marker has no tags, so a rule that filters
        on tags never takes one."""
        if rule.expired_object_delete_marker:
            return True
        if rule.tags:
            return False
        at = rule.expires_at(marker.mtime_ns, self.day_ns)
        return at is not None and at <= now

    async def _uploads(self, bucket: str, rule: Rule, now: int) -> int:
        done = 0
        key_marker, id_marker = "", ""
        while True:
            page = await self.store.list_uploads(
                bucket, rule.prefix, "", key_marker, id_marker, PAGE
            )
            for upload in page.uploads:
                if after_days(upload.initiated_ns, rule.abort_days or 0, self.day_ns) <= now:
                    with contextlib.suppress(StoreError):  # completed or aborted meanwhile
                        await self.store.abort_upload(upload.id, bucket, upload.key)
                        done += 1
            if not page.truncated or not page.uploads:
                return done
            key_marker, id_marker = page.uploads[-1].key, page.uploads[-1].id
            await self._keep(bucket)
