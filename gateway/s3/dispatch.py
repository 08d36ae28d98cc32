"""A request's way to its operation: route, authenticate, find and authorise the bucket,
refuse what is not supported, admit the body, run the operation."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from ..config import Settings
from ..store import Bucket, Store
from ..store.store import Latest
from ..users import User
from . import policy_context as conditions
from . import tagging as tag_sets
from .auth import Authenticator, AuthResult, KeySource, SignedRequest, anonymous
from .authorize import (
    BUCKET_OWNER_ENFORCED,
    OWNERSHIP,
    PER_KEY,
    READS,
    Access,
    Allowed,
    as_listing,
    authorize,
    decide,
    decide_account,
    expect_owner,
    is_anonymous,
    needs_object,
    object_attrs,
    resolve_bucket,
)
from .bucketlog import SETTING as LOGGING
from .context import Context
from .errors import S3Error
from .middleware import ACL_REQUIRED, BUCKET, OPERATION, RECEIVED, REQUESTER, TARGET, USER
from .ops import acl as acl_ops
from .ops import (
    attributes,
    bucketlog,
    buckets,
    copy,
    encryption,
    lifecycle,
    listing,
    multipart,
    notification,
    objectlock,
    objects,
    ownership,
    post,
    replication,
    tagging,
    website,
)
from .ops import cors as cors_ops
from .ops import policy as policy_ops
from .payload import ALWAYS, MISSING, Payload
from .router import Endpoint, Op, bucket_from_host, route

Operation = Callable[[Context], Awaitable[web.StreamResponse]]

OPERATIONS: dict[str, Operation] = {
    **buckets.OPERATIONS,
    **objects.OPERATIONS,
    **listing.OPERATIONS,
    **copy.OPERATIONS,
    **multipart.OPERATIONS,
    **acl_ops.OPERATIONS,
    **ownership.OPERATIONS,
    **policy_ops.OPERATIONS,
    **objectlock.OPERATIONS,
    **tagging.OPERATIONS,
    **attributes.OPERATIONS,
    **lifecycle.OPERATIONS,
    **cors_ops.OPERATIONS,
    **post.OPERATIONS,
    **encryption.OPERATIONS,
    **bucketlog.OPERATIONS,
    **notification.OPERATIONS,
    **replication.OPERATIONS,
    **website.OPERATIONS,
}
# Reads of one object that take its latest version with the bucket (Dispatcher._bucket).
_READS_LATEST = frozenset({Op.GetObject, Op.HeadObject})
# Object writes that may carry x-amz-acl / x-amz-grant-* headers.
_OBJECT_ACL_WRITES = frozenset({Op.PutObject, Op.CopyObject, Op.CreateMultipartUpload})
# The bodies that get AWS's default checksum (checksums.DEFAULT) in the MD5's pass: an object
# sent without a checksum, and every part (Complete combines the parts' into the object's).
_DEFAULT_CHECKSUM = {Op.PutObject: MISSING, Op.UploadPart: ALWAYS}


def _allowed(access: Access, operation: str, key: str, version_id: str | None) -> bool:
    return decide(dataclasses.replace(access, operation=operation, key=key, version_id=version_id))


def _acl_required(access: Access) -> bool:
    """Would the request be refused with the bucket's ACLs disabled? Server access logs say
    so (their aclRequired field), for owners deciding whether ACLs can go."""
    settings = {**access.bucket.settings, OWNERSHIP: BUCKET_OWNER_ENFORCED}
    return not decide(
        dataclasses.replace(access, bucket=dataclasses.replace(access.bucket, settings=settings))
    )


def _hide_missing(access: Access, latest: Latest) -> None:
    """A read of a key with no object (`latest`, read with the bucket, is None) by a caller
    who may read it but not list the bucket: AccessDenied, not NoSuchKey ("If you don't have
    the s3:ListBucket permission, Amazon S3 returns an HTTP status code 403", GetObject in the
    API reference): whether a key exists is the listing's to say."""
    if latest is None and not decide(as_listing(access)):
        raise S3Error("AccessDenied")


@dataclasses.dataclass(frozen=True)
class _Decided:
    """What authorisation found and decided, for the operation's Context."""

    bucket: Bucket | None = None
    latest: Latest = None
    owner: str | None = None  # who owns an object the request writes (None: the bucket's)
    acl: str | None = None  # the ACL it asked for
    allowed: Allowed | None = None  # the verdict for one more key or action


# Another service's request (IAM's, STS's: gateway/iam/api.py), with the authenticator.
Services = Callable[[web.Request, Authenticator], Awaitable[web.StreamResponse]]


class Dispatcher:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        users: Mapping[str, User],
        keys: KeySource | None = None,
        services: tuple[Callable[[web.Request, str | None], bool], Services] | None = None,
    ) -> None:
        """`keys`: IAM's keys and temporary credentials beside `users` (the roots);
        `services`: which requests are another service's, and their handler."""
        self.store = store
        self.settings = settings
        self.auth = Authenticator(users, settings.region, keys=keys)
        self.services = services
        self.users_by_id = {u.canonical_id: u for u in users.values()}
        self.receiving = 0  # request bodies being received now (uploads)

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        raw_path, _, query_string = request.raw_path.partition("?")
        domain = self.settings.domain
        if self.services is not None:
            is_theirs, handle = self.services
            if is_theirs(request, bucket_from_host(request.headers.get("host", ""), domain)):
                return await handle(request, self.auth)
        target = route(request.method, raw_path, request.query, request.headers, domain)
        request[OPERATION] = target.operation
        request[TARGET] = target
        if target.operation == Op.OptionsPreflight:
            # A browser's preflight carries no credentials: its rules decide (as on AWS).
            return await cors_ops.preflight(self.store, request, target)
        auth = await self._authenticate(request, target, raw_path, query_string)
        request[USER] = auth.user.name
        if not is_anonymous(auth.user):
            request[REQUESTER] = auth.user.requester
        operation = OPERATIONS.get(target.operation)
        if operation is None:
            raise S3Error(
                "NotImplemented", f"{target.operation} is not implemented by this gateway"
            )
        payload = Payload(
            request,
            auth,
            body_checksum=target.operation != Op.CompleteMultipartUpload,
            default_checksum=_DEFAULT_CHECKSUM.get(target.operation),
            read_timeout=self.settings.body_timeout,
            min_rate=self.settings.min_body_rate,
        )
        decided = await self._authorise(request, target, auth, payload)
        ctx = Context(
            request=request,
            endpoint=target,
            user=auth.user,
            store=self.store,
            settings=self.settings,
            payload=payload,
            users_by_id=self.users_by_id,
            authenticator=self.auth,
            bucket_record=decided.bucket,
            object_owner=decided.owner,
            object_acl=decided.acl,
            allowed=decided.allowed,
            latest=decided.latest,
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

    async def _authenticate(
        self, request: web.Request, target: Endpoint, raw_path: str, query_string: str
    ) -> AuthResult:
        """Who sent the request, by the one way it proves it (auth.Authenticator picks it
        from the request). A form upload's proof is in its body: until PostObject has read
        the fields (and asked `Authenticator.post_form`), its sender is nobody."""
        if target.operation == Op.PostObject:
            return anonymous({})
        signed = SignedRequest(
            request.method,
            raw_path,
            query_string,
            request.headers,
            bucket_from_host(request.headers.get("host", ""), self.settings.domain),
        )
        return await self.auth.identify(signed)

    async def _authorise(
        self, request: web.Request, target: Endpoint, auth: AuthResult, payload: Payload
    ) -> _Decided:
        """The bucket the request names, and whether its caller may run the operation there:
        `authorize` decides once, on the values the operation will use (the object's attrs
        where they matter, the request's condition values). PostObject decides itself, once
        its form says who sent it."""
        if target.bucket is None or target.operation == Op.CreateBucket:
            # Anonymous callers can neither list buckets nor own one; an IAM identity as its
            # policies say.
            if target.operation == Op.CreateBucket:
                action, resource = "s3:CreateBucket", f"arn:aws:s3:::{target.bucket}"
            else:
                action, resource = "s3:ListAllMyBuckets", "arn:aws:s3:::*"
            if not decide_account(auth.user, action, resource):
                raise S3Error("AccessDenied")
            return _Decided()
        bucket, latest = await self._bucket(target)
        request[BUCKET] = bucket  # its CORS rules shape the answer, errors included
        expect_owner(
            request.headers.get("x-amz-expected-bucket-owner"),
            bucket,
            self.settings.bucket_defaults == "legacy",
        )
        if target.operation == Op.PostObject:
            return _Decided(bucket, latest)
        obj = None
        if target.key is not None and needs_object(target.operation, bucket):
            if latest is not None:  # read with the bucket
                obj = latest[0].attrs
            else:
                obj = await object_attrs(self.store, bucket.name, target.key, target.version_id)
        tags = None
        if target.operation == Op.PutObjectTagging:
            # s3:RequestObjectTag/<key> and s3:RequestObjectTagKeys are the tags the body
            # sets: read (small, bounded) before the decision, which judges them.
            body = await payload.read(min(tag_sets.MAX_TAGGING_XML, self.settings.max_xml_size))
            tags = tag_sets.from_xml(body, tag_sets.MAX_OBJECT_TAGS)
        access = Access(
            auth.user,
            target.operation,
            bucket,
            target.key,
            target.version_id,
            obj,
            conditions.lookup(request, auth, obj, tags),
        )
        if target.operation not in PER_KEY:
            try:
                authorize(access)
            except S3Error as exc:
                await self._missing_instead(exc, access)
                raise
            if target.operation in _READS_LATEST and target.key and target.version_id is None:
                _hide_missing(access, latest)
            if LOGGING in bucket.settings and _acl_required(access):
                request[ACL_REQUIRED] = True
        owner, acl = None, None
        if target.operation in _OBJECT_ACL_WRITES:
            owner, acl = acl_ops.object_acl_for_write(
                request.headers, auth.user, bucket, self.users_by_id.__contains__
            )
        # What else the operation may need decided on the same values: each key of a
        # DeleteObjects, a GOVERNANCE bypass (retention.bypass_governance).
        return _Decided(bucket, latest, owner, acl, functools.partial(_allowed, access))

    async def _bucket(self, target: Endpoint) -> tuple[Bucket, Latest]:
        """The bucket a request names; for a read of a key's latest version, that version too,
        in the same catalog read (the bucket is read with every request, never cached: another
        node may have changed its policy a moment ago)."""
        assert target.bucket is not None
        if target.operation in _READS_LATEST and target.key and target.version_id is None:
            bucket, latest = await self.store.get_bucket_and_object(target.bucket, target.key)
            if bucket is not None:
                return bucket, latest
        # resolve_bucket says why there is none (NoSuchBucket, InvalidBucketName).
        return await resolve_bucket(self.store, target.bucket), None

    # --- the website endpoint's reads (gateway/website/) ------------------------------------

    async def judge_anonymous_read(self, request: web.Request, bucket: Bucket, key: str) -> Latest:
        """May anyone read `key`? Judged by `authorize` as an anonymous GetObject (HeadObject)
        of it, as the S3 endpoint judges one: Block Public Access, the bucket policy and the
        ACLs decide. AccessDenied, or NoSuchKey where anyone may list the bucket; else the
        key's latest version read with the bucket (None: it has no object)."""
        found, latest = await self.store.get_bucket_and_object(bucket.name, key)
        bucket = found or bucket
        operation = Op.HeadObject if request.method == "HEAD" else Op.GetObject
        obj = None
        if needs_object(operation, bucket):
            obj = latest[0].attrs if latest is not None else None
        nobody = anonymous({})
        access = Access(
            nobody.user, operation, bucket, key, None, obj, conditions.lookup(request, nobody, obj)
        )
        try:
            authorize(access)
        except S3Error as exc:
            await self._missing_instead(exc, access)
            raise
        _hide_missing(access, latest)
        return latest

    async def send_object(
        self,
        request: web.Request,
        bucket: Bucket,
        key: str,
        latest: Latest,
        status: int | None = None,
    ) -> web.StreamResponse:
        """GetObject (HeadObject) of a key `judge_anonymous_read` allowed, answered by the S3
        endpoint's own operation: conditions, ranges, headers, sendfile. `status`: the
        answer's status instead of 200 (a website's error document goes with its error's)."""
        nobody = anonymous({})
        operation = Op.HeadObject if request.method == "HEAD" else Op.GetObject
        target = Endpoint(operation, bucket.name, key)
        ctx = Context(
            request=request,
            endpoint=target,
            user=nobody.user,
            store=self.store,
            settings=self.settings,
            payload=Payload(request, nobody, read_timeout=self.settings.body_timeout),
            users_by_id=self.users_by_id,
            authenticator=self.auth,
            bucket_record=bucket,
            latest=latest,
            status=status,
        )
        if target.operation == Op.HeadObject:
            return await objects.head_object(ctx)
        return await objects.get_object(ctx)

    async def _missing_instead(self, exc: S3Error, access: Access) -> None:
        """A refused read of an object that does not exist is NoSuchKey to a caller who may
        list it (READS); refusals are rare, so only they pay for the look-up."""
        if exc.code != "AccessDenied" or access.operation not in READS or access.key is None:
            return
        if access.obj is not None:
            return
        found = await object_attrs(self.store, access.bucket.name, access.key, access.version_id)
        if found is not None:
            return
        if decide(as_listing(access)):
            raise S3Error("NoSuchKey", Key=access.key) from exc
