"""What an operation handler receives: the request, its route, who sent it, and the store."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy, MultiDictProxy

from ..config import Settings
from ..store import Bucket, ObjectAttrs, Store
from ..store.model import Origin
from ..store.store import Latest
from ..users import User
from . import grants
from .auth import Authenticator
from .authorize import Allowed
from .errors import S3Error
from .payload import Payload
from .router import Endpoint
from .xml import Node

# The response whose status and headers have gone out: an error after that cannot be
# answered with an error document any more.
RESPONSE_STARTED = web.RequestKey("response_started", web.StreamResponse)
# When a streamed response's first byte went (time.perf_counter()): where an access log
# record's turn-around time ends (LogFormat.html).
RESPONSE_STARTED_AT = web.RequestKey("response_started_at", float)
# A request's id (x-amz-request-id) and AWS's "extended request id" (x-amz-id-2): the
# middleware sets them (here, so that an operation's context can name them without importing
# the middleware).
REQUEST_ID = web.RequestKey("request_id", str)
HOST_ID = web.RequestKey("host_id", str)
# Body bytes sent by sendfile, which passes aiohttp's count (response.body_length) by.
SENT_BY_SENDFILE = web.RequestKey("sent_by_sendfile", int)
# Delivers a bucket's pending server access log records now and names the log object written
# (PostBucketLogging): the application sets it to the log delivery worker's, so that s3/
# imports no worker.
FLUSH_LOGS = web.AppKey("flush_logs", Callable[[str], Awaitable[str | None]])


@dataclass
class Context:
    request: web.Request
    endpoint: Endpoint
    user: User
    store: Store
    settings: Settings
    payload: Payload
    users_by_id: Mapping[str, User]
    # Who sent what: the dispatcher's, for the operation whose credentials are in its body
    # (PostObject's form).
    authenticator: Authenticator
    # The bucket the request names, as the dispatcher found and authorised it (None for
    # ListBuckets and CreateBucket).
    bucket_record: Bucket | None = None
    # Who owns an object this request writes (None: the bucket's owner) and the ACL it asked
    # for (stored JSON; None: the owner's alone), as the dispatcher judged its ACL headers.
    object_owner: str | None = None
    object_acl: str | None = None
    # Whether the caller may run an operation on one key of the bucket (operation, key,
    # version id): authorisation's verdict, for operations that name many keys.
    allowed: Allowed | None = None
    # GetObject and HeadObject of the latest version: that version, read with the bucket
    # (None: not read, or the key has no object; the operation looks it up).
    latest: Latest = None
    # The answer's status instead of the object's own 200: the website endpoint sends its
    # error document with the error's status (gateway/website/).
    status: int | None = None

    def __post_init__(self) -> None:
        # The dispatcher reads an object write's ACL headers (object_acl_for_write) without
        # the settings: its grants by e-mail address are refused or resolved here, before the
        # operation reads a byte of the body.
        self.object_acl = self.resolve_stored_emails(self.object_acl)

    def resolve_stored_emails(self, stored: str | None) -> str | None:
        """`resolve_emails` of an ACL as object_acl_for_write gives it (stored JSON)."""
        if stored is None:
            return None
        acl = grants.from_json(stored)
        resolved = self.resolve_emails(acl)
        return stored if resolved is acl else resolved.to_json()

    def resolve_emails(self, acl: grants.Acl) -> grants.Acl:
        """An ACL whose grants by e-mail address are made canonical users' grants
        (`email_grantee`)."""
        return grants.resolve_emails(acl, self.email_grantee)

    def email_grantee(self, address: str) -> str:
        """The canonical id a grant by e-mail address names. AWS refuses such grants since
        1 October 2025: "the request will receive an HTTP 405 (Method Not Allowed) error"
        (API_PutBucketAcl.html, API_PutBucketLogging.html). Under --email-grants resolve, the
        users file's user with that email, or 400 UnresolvableGrantByEmailAddress."""
        if self.settings.email_grants != "resolve":
            raise S3Error("MethodNotAllowed")
        wanted = address.lower()
        for user in self.users_by_id.values():
            if user.email and user.email.lower() == wanted:
                return user.canonical_id
        raise S3Error("UnresolvableGrantByEmailAddress", EmailAddress=address)

    def origin(self, form: bool = False) -> Origin:
        """What an event record says of this request: who (the IAM identity's ARN, or the
        account's canonical id), from where, its ids (store/outbox.py). `form`: a POST
        form's write (ObjectCreated:Post)."""
        return Origin(
            self.user.requester,
            self.request.remote or "",
            self.request.get(REQUEST_ID, ""),
            self.request.get(HOST_ID, ""),
            form,
        )

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self.request.headers

    @property
    def query(self) -> MultiDictProxy[str]:
        return self.request.query

    @property
    def bucket(self) -> str:
        assert self.endpoint.bucket is not None
        return self.endpoint.bucket

    @property
    def key(self) -> str:
        assert self.endpoint.key is not None
        return self.endpoint.key

    @property
    def upload_id(self) -> str:
        assert self.endpoint.upload_id is not None  # the router routes on it
        return self.endpoint.upload_id

    def setting(self, name: str, missing: str) -> str:
        """One of the bucket's stored configuration documents; the S3 error `missing` (a
        NoSuch…Configuration) when it was never set or was deleted."""
        assert self.bucket_record is not None  # the dispatcher found it
        document = self.bucket_record.settings.get(name)
        if document is None:
            raise S3Error(missing, BucketName=self.bucket)
        return document

    async def read_xml(self, limit: int) -> bytes:
        """A request's XML body: at most the operation's `limit` bytes, and never more than
        the configured --max-xml-size."""
        return await self.payload.read(min(limit, self.settings.max_xml_size))

    async def start(self, response: web.StreamResponse) -> None:
        self.request[RESPONSE_STARTED_AT] = time.perf_counter()
        await response.prepare(self.request)
        self.request[RESPONSE_STARTED] = response

    def with_acl(self, attrs: ObjectAttrs, **changes: Any) -> ObjectAttrs:
        """The attrs of an object this request writes, with its owner and ACL (a copy never
        keeps its source's), and any other `changes` made in the same copy."""
        return replace(attrs, owner=self.object_owner, acl=self.object_acl, **changes)

    def owner(self, canonical_id: str) -> list[Node]:
        """An Owner or ACL grantee: its ID alone, as AWS has answered since November 2025
        (DisplayName dropped: the Owner API page; LocalStack's recordings of Feb 2026); with
        its DisplayName under --bucket-defaults legacy, for the suites that still read it
        (ceph's s3-tests check_grants)."""
        if self.settings.bucket_defaults != "legacy":
            return [("ID", canonical_id)]
        return self.initiator(canonical_id)

    def initiator(self, canonical_id: str) -> list[Node]:
        """A multipart upload's Initiator: AWS still names it (ID and DisplayName, in
        ListParts and ListMultipartUploads as recorded in Feb 2026)."""
        user = self.users_by_id.get(canonical_id)
        return [("ID", canonical_id), ("DisplayName", user.display_name if user else None)]
