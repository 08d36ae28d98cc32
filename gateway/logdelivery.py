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
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web

from . import metrics
from .logs import masked_target
from .s3 import bucketlog, checksums, grants, sse, writes
from .s3.bucketlog import LoggingConfig, Record
from .s3.context import RESPONSE_STARTED_AT
from .s3.errors import S3Error
from .s3.middleware import (
    ACL_REQUIRED,
    BATCH_DELETED,
    BUCKET,
    COPY_SOURCE,
    ERROR_CODE,
    OPERATION,
    REQUEST_ID,
    REQUESTER,
    TARGET,
)
from .s3.payload import BODY_RECEIVED_AT
from .store import Bucket, ObjectAttrs, Store, StoreError

log = logging.getLogger(__name__)

_GRANTEE_KINDS = {"CanonicalUser": "id", "Group": "uri"}


@functools.lru_cache(maxsize=1024)
def _config(document: str) -> LoggingConfig:
    return LoggingConfig.from_json(document)


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

    def observe(
        self, request: web.Request, response: web.StreamResponse, sent: int, seconds: float
    ) -> None:
        """The middleware's hook: a record for a request whose bucket logs."""
        bucket = request.get(BUCKET)
        if bucket is None:
            return
        source = request.get(COPY_SOURCE)
        if source is not None and bucketlog.SETTING in source[0].settings:
            self._copy_source(request, response, source, sent, seconds)
        document = bucket.settings.get(bucketlog.SETTING)
        if document is None:
            return
        try:
            record = _record(request, response, bucket, sent, seconds)
        except Exception:  # a record never fails the request it describes
            log.exception("request %s: no access log record", request.get(REQUEST_ID))
            return
        config = _config(document)
        self.add(bucket, config, bucketlog.format_record(record), record.time_s)
        for key, version_id in request.get(BATCH_DELETED, ()):
            # LogFormat.html: a DeleteObjects request is logged with one BATCH.DELETE.OBJECT
            # record per object it deleted, after its own.
            removed = dataclasses.replace(
                record,
                operation="BATCH.DELETE.OBJECT",
                key=key,
                request_uri=None,
                status=204,
                error_code=None,
                bytes_sent=0,
                object_size=None,
                version_id=version_id,
            )
            self.add(bucket, config, bucketlog.format_record(removed), record.time_s)

    def _copy_source(
        self,
        request: web.Request,
        response: web.StreamResponse,
        source: tuple[Bucket, str, str | None],
        sent: int,
        seconds: float,
    ) -> None:
        """A copy's read of its source, logged in the source bucket (REST.COPY.OBJECT_GET)."""
        bucket, key, version_id = source
        try:
            record = _record(request, response, bucket, sent, seconds)
        except Exception:
            log.exception("request %s: no access log record", request.get(REQUEST_ID))
            return
        read = dataclasses.replace(
            record,
            operation=record.operation + "_GET",
            key=key,
            bytes_sent=0,
            version_id=version_id,
        )
        document = bucket.settings[bucketlog.SETTING]
        self.add(bucket, _config(document), bucketlog.format_record(read), record.time_s)

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
        # And, as a PutObject without a checksum, AWS's default one.
        checksum = writes.default_checksum()
        blob = await writes.stage(self.store, _chunks(body), encryption, [checksum])
        # The target's owner has FULL_CONTROL of its logs; TargetGrants add to it.
        given = [
            grants.Grant(_GRANTEE_KINDS[g.kind], g.value, g.permission)
            for g in config.grants
            if g.kind in _GRANTEE_KINDS
        ]
        acl = grants.Acl(
            target.owner, (grants.Grant("id", target.owner, grants.FULL_CONTROL), *given)
        )
        attrs = ObjectAttrs(
            content_type="text/plain",
            acl=acl.to_json(),
            checksums=writes.whole_object_checksum(checksums.DEFAULT, checksum.value()),
        )
        try:
            await writes.put(self.store, target.name, key, blob, attrs, encryption)
        except BaseException:
            await self.store.discard(blob)
            raise
        return key

    async def cleanup_context(self, app: web.Application) -> AsyncIterator[None]:
        """The application's cleanup context: what is pending is delivered at shutdown."""
        yield
        await self.close()


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    yield body


def _record(
    request: web.Request, response: web.StreamResponse, bucket: Bucket, sent: int, seconds: float
) -> Record:
    target = request.get(TARGET)
    key = target.key if target is not None else None
    operation = request.get(OPERATION, "Unknown")
    headers = request.headers
    signature, auth_type = _signature(request)
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
    version = request.version
    now = time.perf_counter()
    return Record(
        bucket_owner=bucket.owner,
        bucket=bucket.name,
        time_s=time.time() - seconds,
        remote_ip=request.remote,
        requester=request.get(REQUESTER),
        request_id=request.get(REQUEST_ID, "-"),
        operation=bucketlog.operation_name(operation, request.method, key is not None),
        key=key,
        # The signature of a presigned URL masked, as in the access log.
        request_uri=(
            f"{request.method} {masked_target(request.raw_path)} "
            f"HTTP/{version.major}.{version.minor}"
        ),
        status=response.status,
        error_code=request.get(ERROR_CODE),
        bytes_sent=sent,
        object_size=_object_size(request, response, operation),
        total_ms=round(seconds * 1000),
        turnaround_ms=_turnaround_ms(request, now - seconds, now),
        referer=headers.get("Referer"),
        user_agent=headers.get("User-Agent"),
        version_id=response.headers.get("x-amz-version-id") or request.query.get("versionId"),
        host_id=request.get(REQUEST_ID, "-"),
        signature_version=signature,
        cipher_suite=ssl_object.cipher()[0] if ssl_object is not None else None,
        auth_type=auth_type,
        host_header=headers.get("Host"),
        tls_version=ssl_object.version() if ssl_object is not None else None,
        acl_required=request.get(ACL_REQUIRED, False),
    )


def _turnaround_ms(request: web.Request, began: float, now: float) -> int:
    """LogFormat.html's Turn-Around Time: "from the time that the last byte of your request
    was received until the time that the first byte of the response was sent". A request
    without a body was whole when it began; an answer not streamed goes as it is logged."""
    last_in = request.get(BODY_RECEIVED_AT, began)
    first_out = request.get(RESPONSE_STARTED_AT, now)
    return max(0, round((first_out - last_in) * 1000))


def _signature(request: web.Request) -> tuple[str | None, str | None]:
    """The signature version and how it was sent (LogFormat.html: SigV2 or SigV4; AuthHeader
    or QueryString; `-` for an unauthenticated request)."""
    if request.get(REQUESTER) is None:
        return None, None
    authorization = request.headers.get("Authorization", "")
    if authorization.startswith("AWS4-"):
        return "SigV4", "AuthHeader"
    if authorization.startswith("AWS "):
        return "SigV2", "AuthHeader"
    if "X-Amz-Credential" in request.query:
        return "SigV4", "QueryString"
    if "AWSAccessKeyId" in request.query:
        return "SigV2", "QueryString"
    return None, None


def _object_size(request: web.Request, response: web.StreamResponse, operation: str) -> int | None:
    if response.status >= 300:
        return None
    content_range = response.headers.get("Content-Range", "")
    if "/" in content_range:
        total = content_range.rsplit("/", 1)[1]
        return int(total) if total.isdigit() else None
    if operation in ("GetObject", "HeadObject"):
        # A streamed body's length is the response's, not a header set by hand.
        return response.content_length
    if operation in ("PutObject", "UploadPart", "PostObject"):
        length = request.headers.get("Content-Length")
        decoded = request.headers.get("x-amz-decoded-content-length")
        value = decoded or length
        return int(value) if value and value.isdigit() else None
    return None
