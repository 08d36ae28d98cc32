"""What every S3 request gets, whatever its operation: a request id, the error XML (an
S3Error, or a store error, which names its S3 code), the 5xx policy (a traceback in the log, a
plain InternalError to the client, never the traceback; a full or read-only disk is 503), the
access log line and the metrics, and the headers of every answer.
"""

from __future__ import annotations

import base64
import errno
import logging
import secrets
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from .. import logs, metrics
from ..store import Bucket, StoreError
from ..store import errors as store_errors
from . import cors
from .context import HOST_ID, REQUEST_ID, RESPONSE_STARTED, SENT_BY_SENDFILE
from .errors import S3Error
from .router import Endpoint

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def storage_unavailable(exc: BaseException) -> S3Error | None:
    """A full or read-only disk, or a catalog database out of reach, is the storage's
    condition, not a bug: 503, which clients retry with backoff. The request has changed
    nothing (its staged blob is dropped), unless the database was lost while it committed.
    What the database said is logged, never sent."""
    if isinstance(exc, store_errors.CatalogUnavailable):
        return S3Error("ServiceUnavailable", store_errors.CATALOG_DOWN)
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return S3Error("ServiceUnavailable", store_errors.FULL)
        if exc.errno == errno.EROFS:
            return S3Error("ServiceUnavailable", store_errors.READ_ONLY)
    return None


# The Server header of every answer: the gateway's name, never its libraries' versions.
SERVER = "s3gw"


def new_request_id() -> str:
    """x-amz-request-id: 16 upper-case hex digits, as AWS's."""
    return secrets.token_hex(8).upper()


def new_host_id() -> str:
    """x-amz-id-2, AWS's "extended request id": a value of its own beside the request id (not
    a copy of it), an opaque base64 token as long as AWS's (76 characters)."""
    return base64.b64encode(secrets.token_bytes(56)).decode()


OPERATION = web.RequestKey("operation", str)
TARGET = web.RequestKey("target", Endpoint)
USER = web.RequestKey("user", str)
# The requester's canonical id (absent: anonymous, or not authenticated) and the S3 error code
# of the answer: server access log fields.
REQUESTER = web.RequestKey("requester", str)
ERROR_CODE = web.RequestKey("error_code", str)
# Set when only an ACL let the request in (the access log's aclRequired field).
ACL_REQUIRED = web.RequestKey("acl_required", bool)
# What a DeleteObjects removed, (key, version id) each: one server access log record per key
# (BATCH.DELETE.OBJECT) follows the request's own.
BATCH_DELETED = web.RequestKey("batch_deleted", tuple)
# A copy's source (bucket, key, version id): its bucket's server access log gets the read
# (REST.COPY.OBJECT_GET, REST.COPY.PART_GET).
COPY_SOURCE = web.RequestKey("copy_source", tuple)
RECEIVED = web.RequestKey("received", int)
# The bucket a request names, as the dispatcher found it: its CORS rules shape the answer.
BUCKET = web.RequestKey("bucket", Bucket)

BucketLookup = Callable[[str], Awaitable[Bucket | None]]
# Sees every answered request (request, response, bytes sent, seconds): server access logging.
Observer = Callable[[web.Request, web.StreamResponse, int, float], None]


class S3Middleware:
    """Wraps the dispatcher: whatever it answers or raises becomes one answer, accounted.

    `buckets` finds a bucket by name for the CORS headers of an error answered before the
    dispatcher found the request's bucket (an anonymous request refused, say): a browser
    reads no error of a cross-origin request without them."""

    def __init__(
        self,
        dispatch: Handler,
        buckets: BucketLookup | None = None,
        observe: Observer | None = None,
    ) -> None:
        self.dispatch = dispatch
        self.buckets = buckets
        self.observe = observe

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        request_id = new_request_id()
        request[REQUEST_ID] = request_id
        request[HOST_ID] = new_host_id()
        started_at = time.perf_counter()
        try:
            response = await self.dispatch(request)
        except S3Error as exc:
            response = self._error(request, exc, request_id)
        except StoreError as exc:
            unavailable = storage_unavailable(exc)
            if unavailable is not None:
                log.warning("request %s refused: %s", request_id, exc)
                response = self._error(request, unavailable, request_id)
            else:
                response = self._error(
                    request, S3Error(exc.code, exc.message or None, **exc.fields), request_id
                )
        except Exception as exc:
            started = request.get(RESPONSE_STARTED)
            if started is not None:
                # The body was already streaming: the only honest signal left is to cut it.
                if not isinstance(exc, ConnectionError):
                    log.exception("request %s failed while sending its body", request_id)
                    raise
                # The client went away: the connection is dropped, and nothing is logged as
                # an error (aiohttp would log the exception with its traceback).
                log.info("request %s: the client went away mid-response", request_id)
                if request.transport is not None:
                    request.transport.abort()
                self._account(request, started, time.perf_counter() - started_at)
                return started
            unavailable = storage_unavailable(exc)
            if unavailable is not None:
                log.warning("request %s refused: %s", request_id, exc)
                response = self._error(request, unavailable, request_id)
            else:
                log.exception("request %s failed", request_id)
                response = self._error(request, S3Error("InternalError"), request_id)
        if not response.prepared:
            await self._find_bucket(request)
        self._account(request, response, time.perf_counter() - started_at)
        return response

    async def _find_bucket(self, request: web.Request) -> None:
        """The bucket of a request the dispatcher stopped before finding it: a cross-origin
        request's (its CORS headers), or a refused one's (server access logs record requests
        that fail authentication, with their error code: logging-with-S3.html)."""
        target = request.get(TARGET)
        if (
            self.buckets is None
            or BUCKET in request
            or target is None
            or target.bucket is None
            or request.method == "OPTIONS"
            or ("Origin" not in request.headers and ERROR_CODE not in request)
            or request.get(ERROR_CODE) == "NoSuchBucket"
        ):
            return
        try:
            bucket = await self.buckets(target.bucket)
        except Exception:  # the answer is an error already: a missing CORS header is no worse
            log.debug("request %s: no bucket for its CORS headers", request[REQUEST_ID])
            return
        if bucket is not None:
            request[BUCKET] = bucket

    def _account(self, request: web.Request, response: web.StreamResponse, seconds: float) -> None:
        """Metrics and the access log line of a request."""
        operation = request.get(OPERATION, "Unknown")
        sent = (
            response.body_length
            if response.prepared
            else len(getattr(response, "body", b"") or b"")
        )
        sent += request.get(SENT_BY_SENDFILE, 0)
        received = request.get(RECEIVED, 0)
        metrics.TALLY.count(operation, response.status, seconds, received, sent)
        if self.observe is not None:
            self.observe(request, response, sent, seconds)
        if logs.access_enabled():
            target = request.get(TARGET)
            request_id = request[REQUEST_ID]
            status = response.status
            target_line = logs.masked_target(request.raw_path)  # no presigned URL's signature
            logs.access(
                f"{request_id} {operation} {request.method} {target_line} {status} "
                f"{seconds * 1000:.1f}ms",
                {
                    "request_id": request_id,
                    "user": request.get(USER),
                    "operation": operation,
                    "bucket": target.bucket if target else None,
                    "key": target.key if target else None,
                    "status": status,
                    "bytes_in": received,
                    "bytes_out": sent,
                    "ms": round(seconds * 1000, 2),
                },
            )

    def _error(self, request: web.Request, exc: S3Error, request_id: str) -> web.Response:
        request[ERROR_CODE] = exc.code
        if request.method == "HEAD":
            # HEAD answers carry no body; the status says it all (boto3 reports "404").
            return web.Response(status=exc.status)
        return web.Response(
            status=exc.status,
            body=exc.to_xml(request_id, request[HOST_ID]),
            content_type="application/xml",
        )


async def on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    request_id = request.get(REQUEST_ID)
    if request_id is not None:
        response.headers["x-amz-request-id"] = request_id
        response.headers["x-amz-id-2"] = request.get(HOST_ID) or new_host_id()
    response.headers["Server"] = SERVER
    add_cors_headers(request, response)
    # A body we did not read (an error answered before it, or an `Expect: 100-continue` body
    # never invited) would be read as the next request: close the connection instead. So too
    # after any error to a request with a body: the error may be about its framing (a body
    # longer than its Content-Length answers BadDigest, and its extra bytes would be parsed as
    # the next request, as s3-tests' bad_contentlength_mismatch_below_aws2 sends).
    if request.body_exists and (response.status >= 400 or not request.content.is_eof()):
        response.force_close()
        # aiohttp has chosen the Connection header by now: say it, or the client reuses the
        # connection and its next request is read as this one's body.
        response.headers["Connection"] = "close"


def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """An actual cross-origin request (not a preflight) whose Origin and method match one of
    the bucket's rules gets the rule's headers, on errors too (s3-tests reads them on a 404
    and a 403); one that matches none gets its answer without them, as on AWS."""
    origin = request.headers.get("Origin")
    bucket = request.get(BUCKET)
    if origin is None or bucket is None or request.method == "OPTIONS":
        return
    stored = bucket.settings.get(cors.SETTING)
    if stored is None:
        return
    # AWS (and s3-tests) judge a request carrying Access-Control-Request-Method by it.
    method = request.headers.get("Access-Control-Request-Method") or request.method
    rule = cors.match(cors.rules_of(stored), origin, method)
    if rule is not None:
        response.headers.update(cors.answer_headers(rule, origin, []))
