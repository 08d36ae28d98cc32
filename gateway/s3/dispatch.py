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
from .middleware import BUCKET, OPERATION, RECEIVED, TARGET, USER
from .ops import (
    acl,
    attributes,
    buckets,
    copy,
    lifecycle,
    listing,
    multipart,
    objectlock,
    objects,
    post,
    tagging,
)
from .ops import cors as cors_ops
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
    **lifecycle.OPERATIONS,
    **cors_ops.OPERATIONS,
    **post.OPERATIONS,
}
# Writes that may carry x-amz-acl / x-amz-grant-* headers.
_ACL_WRITES = {"PutObject", "CopyObject", "CreateBucket", "CreateMultipartUpload"}
# Headers asking for what this gateway does not do: refused, never silently ignored (a client
# that asked for a customer key must not believe it got one).
_UNSUPPORTED_HEADERS = (
    "x-amz-server-side-encryption-customer-algorithm",
    "x-amz-copy-source-server-side-encryption-customer-algorithm",
    "x-amz-server-side-encryption-aws-kms-key-id",
)


def refuse_unsupported(headers: Mapping[str, str]) -> None:
    for name in _UNSUPPORTED_HEADERS:
        if name in headers:
            raise S3Error("NotImplemented", f"{name} is not supported by this gateway")
    # SSE-S3 (AES256) is what AWS applies to every object anyway; KMS is not available here.
    sse = headers.get("x-amz-server-side-encryption")
    if sse is not None and sse != "AES256":
        raise S3Error("NotImplemented", f"server-side encryption {sse!r} is not supported")


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
        if target.operation == "OptionsPreflight":
            # A browser's preflight carries no credentials: its rules decide (as on AWS).
            return await cors_ops.preflight(self.store, request, target)
        # A form upload's credentials are its fields: PostObject checks them, and authorises.
        form_post = target.operation == "PostObject"
        if form_post:
            auth = post.FORM_AUTH
        else:
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
            request[BUCKET] = bucket  # its CORS rules shape the answer, errors included
            if not form_post:
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
