"""The one request handler: route, authenticate, authorise, dispatch, render errors.

Every response carries `x-amz-request-id`. An S3Error (or a store error, which names its S3
code) becomes S3's XML error; anything else is logged with its traceback and answered with a
plain InternalError, never the traceback.
"""

from __future__ import annotations

import errno
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from .. import metrics
from ..config import Settings
from ..store import Store, StoreError
from ..store import errors as store_errors
from .auth import Authenticator, SignedRequest, User
from .context import RESPONSE_STARTED, SENT_BY_SENDFILE, Context
from .errors import S3Error
from .ops import acl, buckets, copy, listing, multipart, objects
from .payload import Payload
from .router import Route, bucket_from_host, route

log = logging.getLogger(__name__)
access_log = logging.getLogger("gateway.access")

Operation = Callable[[Context], Awaitable[web.StreamResponse]]

OPERATIONS: dict[str, Operation] = {
    **buckets.OPERATIONS,
    **objects.OPERATIONS,
    **listing.OPERATIONS,
    **copy.OPERATIONS,
    **multipart.OPERATIONS,
    **acl.OPERATIONS,
}
# Writes that may carry x-amz-acl / x-amz-grant-* headers.
_ACL_WRITES = {"PutObject", "CopyObject", "CreateBucket", "CreateMultipartUpload"}
# Headers asking for what this gateway does not do: refused, never silently ignored (a client
# that asked for a customer key or object lock must not believe it got one).
_UNSUPPORTED_HEADERS = (
    "x-amz-server-side-encryption-customer-algorithm",
    "x-amz-copy-source-server-side-encryption-customer-algorithm",
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-tagging",
    "x-amz-object-lock-mode",
    "x-amz-object-lock-retain-until-date",
    "x-amz-object-lock-legal-hold",
)


def storage_unavailable(exc: BaseException) -> S3Error | None:
    """A full or read-only disk is the storage's condition, not a bug: 503, which clients retry
    with backoff, and the request has changed nothing (its staged blob is dropped)."""
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return S3Error("ServiceUnavailable", store_errors.FULL)
        if exc.errno == errno.EROFS:
            return S3Error("ServiceUnavailable", store_errors.READ_ONLY)
    return None


def refuse_unsupported(headers: Mapping[str, str]) -> None:
    for name in _UNSUPPORTED_HEADERS:
        if name in headers:
            raise S3Error("NotImplemented", f"{name} is not supported by this gateway")
    # SSE-S3 (AES256) is what AWS applies to every object anyway; KMS is not available here.
    sse = headers.get("x-amz-server-side-encryption")
    if sse is not None and sse != "AES256":
        raise S3Error("NotImplemented", f"server-side encryption {sse!r} is not supported")


# The Server header of every answer: the gateway's name, never its libraries' versions.
SERVER = "s3gw"


def new_request_id() -> str:
    return secrets.token_hex(8).upper()


REQUEST_ID = web.RequestKey("request_id", str)
OPERATION = web.RequestKey("operation", str)
TARGET = web.RequestKey("target", Route)
USER = web.RequestKey("user", str)
RECEIVED = web.RequestKey("received", int)


class S3Handler:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        users: Mapping[str, User],
    ) -> None:
        self.store = store
        self.settings = settings
        self.auth = Authenticator(users, settings.region)
        self.users_by_id = {u.canonical_id: u for u in users.values()}
        self.receiving = 0  # request bodies being received now (uploads)

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        request_id = new_request_id()
        request[REQUEST_ID] = request_id
        started_at = time.perf_counter()
        try:
            response = await self._handle(request)
        except S3Error as exc:
            response = self._error(request, exc, request_id)
        except StoreError as exc:
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
        self._account(request, response, time.perf_counter() - started_at)
        return response

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
        metrics.REQUESTS.labels(operation, str(response.status)).inc()
        metrics.LATENCY.labels(operation).observe(seconds)
        metrics.BYTES_IN.inc(received)
        metrics.BYTES_OUT.inc(sent)
        if access_log.isEnabledFor(logging.INFO):
            target = request.get(TARGET)
            access_log.info(
                "%s %s %s %s %d %.1fms",
                request[REQUEST_ID],
                operation,
                request.method,
                request.raw_path,
                response.status,
                seconds * 1000,
                extra={
                    "request_id": request[REQUEST_ID],
                    "user": request.get(USER),
                    "operation": operation,
                    "bucket": target.bucket if target else None,
                    "key": target.key if target else None,
                    "status": response.status,
                    "bytes_in": received,
                    "bytes_out": sent,
                    "ms": round(seconds * 1000, 2),
                },
            )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw_path, _, query_string = request.raw_path.partition("?")
        domain = self.settings.domain
        target = route(request.method, raw_path, request.query, request.headers, domain)
        request[OPERATION] = target.operation
        request[TARGET] = target
        auth = self.auth.authenticate(
            SignedRequest(
                request.method,
                raw_path,
                query_string,
                request.headers,
                bucket_from_host(request.headers.get("host", ""), domain),
            )
        )
        request[USER] = auth.user.display_name
        operation = OPERATIONS.get(target.operation)
        if operation is None:
            raise S3Error(
                "NotImplemented", f"{target.operation} is not implemented by this gateway"
            )
        if target.bucket is not None and target.operation != "CreateBucket":
            bucket = await self.store.get_bucket(target.bucket)
            if bucket is None:
                if not buckets.could_be_a_bucket(target.bucket):
                    raise S3Error("InvalidBucketName", BucketName=target.bucket)
                raise S3Error("NoSuchBucket", BucketName=target.bucket)
            if bucket.owner != auth.user.canonical_id:
                raise S3Error("AccessDenied")
        if target.operation in _ACL_WRITES:
            acl.check_canned_acl(request.headers)
        refuse_unsupported(request.headers)
        payload = Payload(
            request,
            auth,
            body_checksum=target.operation != "CompleteMultipartUpload",
            read_timeout=self.settings.body_timeout,
            min_rate=self.settings.min_body_rate,
        )
        ctx = Context(
            request=request,
            route=target,
            user=auth.user,
            store=self.store,
            settings=self.settings,
            payload=payload,
            users_by_id=self.users_by_id,
        )
        upload = request.body_exists
        if upload and self.receiving >= self.settings.max_uploads:
            # Each body holds a tmp file and up to two 1 MiB batches: past the limit the
            # client is asked to come back (503 SlowDown is retried by every SDK).
            raise S3Error("SlowDown")
        self.receiving += upload
        try:
            return await operation(ctx)
        finally:
            self.receiving -= upload
            request[RECEIVED] = payload.received

    def _error(self, request: web.Request, exc: S3Error, request_id: str) -> web.Response:
        if request.method == "HEAD":
            # HEAD answers carry no body; the status says it all (boto3 reports "404").
            return web.Response(status=exc.status)
        resource = request.raw_path.partition("?")[0]
        return web.Response(
            status=exc.status,
            body=exc.to_xml(resource, request_id),
            content_type="application/xml",
        )


async def on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    request_id = request.get(REQUEST_ID)
    if request_id is not None:
        response.headers["x-amz-request-id"] = request_id
        response.headers["x-amz-id-2"] = request_id
    response.headers["Server"] = SERVER
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
