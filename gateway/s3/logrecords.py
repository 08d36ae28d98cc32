"""Server access log records of a request (LogFormat.html): the protocol's half of bucket
logging. After the answer, `records` says which records the request makes and for which
bucket: its own, in the bucket it named when that bucket logs; a copy's read of its source,
in the source bucket; one BATCH.DELETE.OBJECT per key a DeleteObjects removed. Delivering
them is the log delivery worker's (gateway/workers/logdelivery.py)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass

from aiohttp import web

from ..logs import masked_target
from ..store import Bucket
from . import bucketlog
from .bucketlog import LoggingConfig, Record
from .context import RESPONSE_STARTED_AT
from .middleware import (
    ACL_REQUIRED,
    BATCH_DELETED,
    BUCKET,
    COPY_SOURCE,
    ERROR_CODE,
    HOST_ID,
    OPERATION,
    REQUEST_ID,
    REQUESTER,
    TARGET,
)
from .payload import BODY_RECEIVED_AT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Logged:
    """One record, for the bucket whose configuration asks for it."""

    bucket: Bucket
    config: LoggingConfig
    record: Record

    @property
    def line(self) -> str:
        return bucketlog.format_record(self.record)


def records(
    request: web.Request, response: web.StreamResponse, sent: int, seconds: float
) -> list[Logged]:
    """The records a request answered with `response` makes (none where no bucket logs). A
    record never fails the request it describes: one that cannot be made is logged, and
    left out."""
    bucket = request.get(BUCKET)
    if bucket is None:
        return []
    made: list[Logged] = []
    try:
        source = request.get(COPY_SOURCE)
        if source is not None and bucketlog.SETTING in source[0].settings:
            made.append(_copy_source(request, response, source, sent, seconds))
        document = bucket.settings.get(bucketlog.SETTING)
        if document is None:
            return made
        record = _record(request, response, bucket, sent, seconds)
    except Exception:
        log.exception("request %s: no access log record", request.get(REQUEST_ID))
        return made
    config = config_of(document)
    made.append(Logged(bucket, config, record))
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
        made.append(Logged(bucket, config, removed))
    return made


def _copy_source(
    request: web.Request,
    response: web.StreamResponse,
    source: tuple[Bucket, str, str | None],
    sent: int,
    seconds: float,
) -> Logged:
    """A copy's read of its source, logged in the source bucket (REST.COPY.OBJECT_GET)."""
    bucket, key, version_id = source
    record = _record(request, response, bucket, sent, seconds)
    read = dataclasses.replace(
        record,
        operation=record.operation + "_GET",
        key=key,
        bytes_sent=0,
        version_id=version_id,
    )
    return Logged(bucket, config_of(bucket.settings[bucketlog.SETTING]), read)


@functools.lru_cache(maxsize=1024)
def config_of(document: str) -> LoggingConfig:
    return LoggingConfig.from_json(document)


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
        host_id=request.get(HOST_ID, "-"),  # the answer's x-amz-id-2
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
    if operation in ("GetObject", "HeadObject", "WebsiteGetObject", "WebsiteHeadObject"):
        # A streamed body's length is the response's, not a header set by hand.
        return response.content_length
    if operation in ("PutObject", "UploadPart", "PostObject"):
        length = request.headers.get("Content-Length")
        decoded = request.headers.get("x-amz-decoded-content-length")
        value = decoded or length
        return int(value) if value and value.isdigit() else None
    return None
