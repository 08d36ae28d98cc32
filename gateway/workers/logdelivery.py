"""Server access log delivery: the records of requests to buckets with logging enabled are
held per source bucket and written, in one object per batch, into the target bucket after the
delivery delay (`--log-delivery-interval`), as AWS delivers them "within a few hours"
(userguide/ServerLogs.html: best effort, batched).

- A batch starts with its first record and is written `interval` seconds later, or at once
  when its source bucket's configuration changes, when the PostBucketLogging extension asks
  for it, or when the server stops cleanly (nothing buffered is lost on SIGTERM).
- Log objects are written through the Store, as any object: durable before the batch is
  dropped, encrypted when the target has default encryption. The writes are not requests, so
  they make no records themselves: a bucket that logs into itself gets no feedback loop.
- Each process (and each node sharing a catalog) delivers its own records under its own
  unique names, as AWS's many front ends do.
- Records go only to a target that still belongs to the source bucket's owner: PutBucketLogging
  accepted a target of the same account (AWS requires it), and a target deleted and created
  again by another account must not receive the keys, requesters and addresses of the
  source's requests. Such records are dropped and counted (s3gw_log_records_dropped).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from aiohttp import web

from .. import metrics
from ..s3 import bucketlog, grants, sse, writes
from ..s3.bucketlog import LoggingConfig
from ..s3.errors import S3Error
from ..s3.logrecords import Logged
from ..store import Bucket, ObjectAttrs, Store, StoreError

log = logging.getLogger(__name__)

_GRANTEE_KINDS = {"CanonicalUser": "id", "Group": "uri"}


@dataclass
class _Batch:
    config: LoggingConfig
    source_owner: str
    first_s: float
    lines: list[str] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


class LogDelivery:
    """The records pending delivery, per source bucket, in this process."""

    def __init__(self, store: Store, region: str, interval: float) -> None:
        self.store = store
        self.region = region
        self.interval = interval
        self._pending: dict[str, _Batch] = {}
        self._writing: set[asyncio.Task[str | None]] = set()

    # --- taking records --------------------------------------------------------------------

    def take(self, logged: Iterable[Logged]) -> None:
        """Records made of a request (s3/logrecords.py), held for their target."""
        for one in logged:
            self.add(one.bucket, one.config, one.line, one.record.time_s)

    def add(self, bucket: Bucket, config: LoggingConfig, line: str, at_s: float) -> None:
        batch = self._pending.get(bucket.name)
        if batch is not None and batch.config != config:
            # Records go where the configuration said when they were made.
            self._start(bucket.name)
            batch = None
        if batch is None:
            batch = _Batch(config, bucket.owner, at_s)
            batch.timer = asyncio.get_running_loop().call_later(
                self.interval, self._start, bucket.name
            )
            self._pending[bucket.name] = batch
        batch.lines.append(line)

    # --- delivering --------------------------------------------------------------------------

    def _start(self, source: str) -> asyncio.Task[str | None] | None:
        batch = self._pending.pop(source, None)
        if batch is None:
            return None
        if batch.timer is not None:
            batch.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._deliver(source, batch))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)
        return task

    async def flush(self, source: str) -> str | None:
        """Deliver `source`'s pending records now: the log object's key, or None when there
        was nothing to deliver (or it could not be written)."""
        task = self._start(source)
        return None if task is None else await task

    async def close(self) -> None:
        """Deliver everything pending (a clean stop), and wait for the writes."""
        for source in list(self._pending):
            self._start(source)
        if self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)

    async def _deliver(self, source: str, batch: _Batch) -> str | None:
        config = batch.config
        try:
            target = await self.store.get_bucket(config.target_bucket)
            if target is None:
                self._drop(source, batch, "target_gone", "the target bucket is gone")
                return None
            if target.owner != batch.source_owner:
                # The name now belongs to another account (the target was deleted and created
                # again): the records would tell it what the source's owner does.
                self._drop(source, batch, "target_owner_changed", "the target has another owner")
                return None
            return await self._write(source, batch, target)
        except (S3Error, StoreError, OSError) as exc:
            self._drop(source, batch, "write_failed", f"not written: {exc}")
            return None

    def _drop(self, source: str, batch: _Batch, reason: str, why: str) -> None:
        log.warning(
            "access log of %s: %d records dropped, %s: %s",
            source,
            len(batch.lines),
            batch.config.target_bucket,
            why,
        )
        metrics.LOG_RECORDS_DROPPED.labels(reason).inc(len(batch.lines))

    async def _write(self, source: str, batch: _Batch, target: Bucket) -> str:
        config = batch.config
        body = ("\n".join(batch.lines) + "\n").encode()
        key = bucketlog.object_key(
            config, source, batch.source_owner, self.region, batch.first_s, time.time()
        )
        # As a PutObject without encryption headers: the target's default encryption applies.
        encryption = sse.for_write({}, target.settings, self.store.keys, True, True)
        # The target's owner has FULL_CONTROL of its logs; TargetGrants add to it.
        given = [
            grants.Grant(_GRANTEE_KINDS[g.kind], g.value, g.permission)
            for g in config.grants
            if g.kind in _GRANTEE_KINDS
        ]
        acl = grants.Acl(
            target.owner, (grants.Grant("id", target.owner, grants.FULL_CONTROL), *given)
        )
        attrs = ObjectAttrs(content_type="text/plain", acl=acl.to_json())
        # As a PutObject without a checksum: AWS's default one.
        await writes.put_body(self.store, target.name, key, _chunks(body), attrs, encryption)
        return key

    async def cleanup_context(self, app: web.Application) -> AsyncIterator[None]:
        """The application's cleanup context: what is pending is delivered at shutdown."""
        yield
        await self.close()


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    yield body
