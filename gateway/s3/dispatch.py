"""A request's way to its operation: route, authenticate, find and authorise the bucket,
refuse what is not supported, admit the body, run the operation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from ..config import Settings
from ..store import Store
from ..users import User
from .auth import Authenticator, SignedRequest
from .authorize import authorize, resolve_bucket
from .context import Context
from .errors import S3Error
from .middleware import OPERATION, RECEIVED, TARGET, USER
from .ops import (
    acl,
    attributes,
    buckets,
    copy,
    encryption,
    listing,
    multipart,
    objectlock,
    objects,
    tagging,
)
from .payload import Payload
from .router import bucket_from_host, route

Operation = Callable[[Context], Awaitable[web.StreamResponse]]

OPERATIONS: dict[str, Operation] = {
    **buckets.OPERATIONS,
    **objects.OPERATIONS,
    **listing.OPERATIONS,
    **copy.OPERATIONS,
    **multipart.OPERATIONS,
    **acl.OPERATIONS,
    **objectlock.OPERATIONS,
    **tagging.OPERATIONS,
    **attributes.OPERATIONS,
    **encryption.OPERATIONS,
}
# Writes that may carry x-amz-acl / x-amz-grant-* headers.
_ACL_WRITES = {"PutObject", "CopyObject", "CreateBucket", "CreateMultipartUpload"}
# Headers asking for what this gateway does not do: refused, never silently ignored (a client
# that asked for a customer key must not believe it got one).
# (Server-side encryption headers are all served now: gateway/s3/sse.py.)
_UNSUPPORTED_HEADERS: tuple[str, ...] = ()


def refuse_unsupported(headers: Mapping[str, str]) -> None:
    for name in _UNSUPPORTED_HEADERS:
        if name in headers:
            raise S3Error("NotImplemented", f"{name} is not supported by this gateway")


class Dispatcher:
    def __init__(self, store: Store, settings: Settings, users: Mapping[str, User]) -> None:
        self.store = store
        self.settings = settings
        self.auth = Authenticator(users, settings.region)
        self.users_by_id = {u.canonical_id: u for u in users.values()}
        self.receiving = 0  # request bodies being received now (uploads)

    async def __call__(self, request: web.Request) -> web.StreamResponse:
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
        bucket = None
        if target.bucket is not None and target.operation != "CreateBucket":
            bucket = await resolve_bucket(self.store, target.bucket)
            authorize(auth.user, target.operation, bucket)
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
            endpoint=target,
            user=auth.user,
            store=self.store,
            settings=self.settings,
            payload=payload,
            users_by_id=self.users_by_id,
            bucket_record=bucket,
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
