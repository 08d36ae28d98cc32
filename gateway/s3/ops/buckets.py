"""ListBuckets, CreateBucket (with its ownership controls, public access block and ACL),
HeadBucket, DeleteBucket, GetBucketLocation, Get/PutBucketVersioning; the DELETE of a bucket's
configuration documents (`delete_setting`)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from xml.etree.ElementTree import Element

from aiohttp import web

from ...limits import MAX_BUCKET_XML
from ...replication.configuration import SETTING as REPLICATION
from ...store import Bucket, StoreError
from .. import grants, tagging, writes, xml
from ..authorize import ACL, OWNERSHIPS, acls_enabled, public_access_block
from ..context import Context
from ..errors import S3Error, invalid_argument
from ..names import valid_bucket_name


def bucket_arn(name: str) -> str:
    """A general purpose bucket's ARN, which AWS answers in ListBuckets' BucketArn and in
    CreateBucket's and HeadBucket's x-amz-bucket-arn (LocalStack's recordings, Feb 2026)."""
    return f"arn:aws:s3:::{name}"


def _xml(body: bytes, status: int = 200) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/xml")


async def _page_of_buckets(ctx: Context) -> tuple[list[Bucket], str | None]:
    """prefix, continuation-token and max-buckets (1 to 10,000): a page and the next token."""
    buckets = await ctx.store.list_buckets(ctx.user.canonical_id)
    prefix = ctx.query.get("prefix", "")
    token = ctx.query.get("continuation-token")
    after = ""
    if token is not None:
        try:
            after = base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
            raise invalid_argument(
                "The continuation token provided is incorrect", "continuation-token", token
            ) from exc
    raw = ctx.query.get("max-buckets", "10000")
    limit = int(raw) if raw.isdigit() else 0
    if not 1 <= limit <= 10_000:
        raise invalid_argument("Invalid max-buckets", "max-buckets", raw)
    chosen = [b for b in buckets if b.name.startswith(prefix) and b.name > after]
    if len(chosen) > limit:
        chosen = chosen[:limit]
        return chosen, base64.urlsafe_b64encode(chosen[-1].name.encode()).decode()
    return chosen, None


async def list_buckets(ctx: Context) -> web.StreamResponse:
    buckets, token = await _page_of_buckets(ctx)
    return _xml(
        xml.render(
            "ListAllMyBucketsResult",
            [
                ("Owner", ctx.owner(ctx.user.canonical_id)),
                (
                    "Buckets",
                    [
                        (
                            "Bucket",
                            [
                                ("Name", b.name),
                                ("CreationDate", xml.iso8601_seconds(b.created_ns)),
                                ("BucketRegion", b.region),
                                ("BucketArn", bucket_arn(b.name)),
                            ],
                        )
                        for b in buckets
                    ],
                ),
                ("ContinuationToken", token),
                ("Prefix", ctx.query.get("prefix")),
            ],
        )
    )


def _requested_access(ctx: Context) -> tuple[grants.Acl | None, str | None]:
    """The ACL (None: none asked for) and the ownership controls a CreateBucket's ACL and
    x-amz-object-ownership headers ask for, checked."""
    me = ctx.user.canonical_id
    # The bucket-owner-* canned ACLs are the owner's alone on a bucket (acl-overview.html).
    acl = grants.from_headers(ctx.headers, me, me, ctx.users_by_id.__contains__)
    if acl is not None:
        acl = ctx.resolve_emails(acl)
    chosen = ctx.headers.get("x-amz-object-ownership")
    if chosen is not None and chosen not in OWNERSHIPS:
        raise invalid_argument(
            f"Invalid x-amz-object-ownership header: {chosen}", "x-amz-object-ownership", chosen
        )
    return acl, chosen


async def _reset_acl(ctx: Context, bucket: Bucket, acl: grants.Acl | None) -> None:
    """Re-creating a bucket you own in us-east-1: "Amazon S3 returns 200 OK and resets the
    bucket access control lists (ACLs)" (API_CreateBucket.html): to what the request asks,
    the owner's alone (private) when it asks for nothing. Nothing else changes (objects,
    policy, ownership controls). The ACL is judged against the bucket as it is, as
    PutBucketAcl judges one."""
    if acl is not None and not acl.only_owner():
        if not acls_enabled(bucket):
            raise S3Error("InvalidBucketAclWithObjectOwnership")
        if acl.is_public() and public_access_block(bucket).block_public_acls:
            raise S3Error("AccessDenied")
    stored = None if acl is None or acl.only_owner() else acl.to_json()
    if bucket.settings.get(ACL) != stored:
        await ctx.store.set_bucket_setting(bucket.name, ACL, stored)


async def create_bucket(ctx: Context) -> web.StreamResponse:
    name = ctx.bucket
    if not valid_bucket_name(name):
        raise S3Error("InvalidBucketName", BucketName=name)
    # Object Lock turns versioning on with it, for good.
    object_lock = ctx.headers.get("x-amz-bucket-object-lock-enabled", "").lower() == "true"
    body = await ctx.read_xml(MAX_BUCKET_XML)
    region = ctx.settings.region
    tags: tagging.TagSet = ()
    if body.strip():
        root = xml.parse(body)
        if root.tag != "CreateBucketConfiguration":
            raise S3Error("MalformedXML")
        constraint = xml.child_text(root, "LocationConstraint")
        if constraint is not None:
            # AWS: us-east-1 is the absence of a constraint; naming it is an error there.
            if constraint == "us-east-1" == region:
                raise S3Error("InvalidLocationConstraint", LocationConstraint=constraint)
            if constraint and constraint != region:
                raise S3Error(
                    "IllegalLocationConstraintException",
                    f"The {constraint} location constraint is incompatible for the region "
                    "specific endpoint this request was sent to.",
                )
        tags = _tags(root)
    acl, chosen = _requested_access(ctx)
    me = ctx.user.canonical_id
    # AWS, in us-east-1 only: re-creating a bucket you own answers 200 and resets its ACL;
    # elsewhere 409 BucketAlreadyOwnedByYou (the store's answer).
    existing = await ctx.store.get_bucket(name) if region == "us-east-1" else None
    if existing is None or existing.owner != me:
        settings = writes.new_bucket_settings(ctx.settings, chosen, acl)
        if tags:
            settings["tagging"] = tagging.encode(tags)
        try:
            await ctx.store.create_bucket(name, me, region, object_lock, settings)
            return web.Response(headers=_created(name))
        except StoreError as exc:
            # Created by the same owner since the look-up: a re-create after all.
            if exc.code != "BucketAlreadyOwnedByYou" or region != "us-east-1":
                raise
        existing = await ctx.store.get_bucket(name)
    if existing is not None:
        await _reset_acl(ctx, existing, acl)
    return web.Response(headers=_created(name))


def _tags(root: Element) -> tagging.TagSet:
    """CreateBucketConfiguration's Tags: the new bucket's tags, as PutBucketTagging would set
    them (API_CreateBucketConfiguration.html), checked by the same rules."""
    listed = root.find("Tags")
    if listed is None:
        return ()
    tags: list[tuple[str, str]] = []
    for tag in listed:
        key, value = xml.child_text(tag, "Key"), xml.child_text(tag, "Value")
        if tag.tag != "Tag" or key is None or value is None:
            raise S3Error("MalformedXML")
        tags.append((key, value))
    if len({k for k, _ in tags}) != len(tags):
        raise S3Error("InvalidTag", "Cannot provide multiple Tags with the same key")
    return tagging.check(tuple(sorted(tags)), tagging.MAX_BUCKET_TAGS)


def _created(name: str) -> dict[str, str]:
    return {"Location": "/" + name, "x-amz-bucket-arn": bucket_arn(name)}


async def head_bucket(ctx: Context) -> web.StreamResponse:
    bucket = ctx.bucket_record
    assert bucket is not None  # the dispatcher found it
    return web.Response(
        headers={"x-amz-bucket-region": bucket.region, "x-amz-bucket-arn": bucket_arn(bucket.name)}
    )


async def delete_bucket(ctx: Context) -> web.StreamResponse:
    await ctx.store.delete_bucket(ctx.bucket)
    return web.Response(status=204)


async def get_bucket_location(ctx: Context) -> web.StreamResponse:
    bucket = ctx.bucket_record
    assert bucket is not None  # the dispatcher found it
    if bucket.region == "us-east-1":
        # us-east-1 is an empty, self-closed LocationConstraint: "When the bucket's Region is
        # US Classic, Amazon S3 returns an empty string for the bucket's Region:
        # <LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>"
        # (RESTBucketGETlocation.html; LocalStack, checked against AWS, writes the same).
        return _xml(_EMPTY_LOCATION)
    return _xml(xml.render("LocationConstraint", bucket.region))


_EMPTY_LOCATION = (
    f'<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="{xml.NS}"/>'.encode()
)


async def get_bucket_versioning(ctx: Context) -> web.StreamResponse:
    bucket = ctx.bucket_record
    assert bucket is not None  # the dispatcher found it
    # A bucket whose versioning was never set answers an empty configuration. MFADelete is
    # sent only by a bucket that has had it enabled, which none here can.
    return _xml(xml.render("VersioningConfiguration", [("Status", bucket.versioning)]))


async def put_bucket_versioning(ctx: Context) -> web.StreamResponse:
    root = xml.parse(await ctx.read_xml(MAX_BUCKET_XML))
    if root.tag != "VersioningConfiguration":
        raise S3Error("MalformedXML")
    status = xml.child_text(root, "Status")
    mfa_delete = xml.child_text(root, "MfaDelete")
    if mfa_delete not in (None, "Enabled", "Disabled") or status not in (
        None,
        "Enabled",
        "Suspended",
    ):
        raise S3Error("MalformedXML")  # `enabled` and `Disabled` too, as AWS answers them
    if mfa_delete == "Enabled":
        # MFA delete needs the root user's MFA device, which no user of this gateway has: AWS's
        # answer to a request without a valid x-amz-mfa.
        raise S3Error("AccessDenied", "Mfa Authentication must be used for this request")
    if status is None:
        raise S3Error("IllegalVersioningConfigurationException")
    bucket = ctx.bucket_record
    if status == "Suspended" and bucket is not None and REPLICATION in bucket.settings:
        # Replication needs versioning on the source for as long as it is configured (AWS
        # answers InvalidBucketState; the message is MinIO's, which answers as AWS does).
        raise S3Error(
            "InvalidBucketState",
            "A replication configuration is present on this bucket, bucket wide versioning "
            "cannot be suspended.",
        )
    await ctx.store.set_versioning(ctx.bucket, status)
    return web.Response()


def delete_setting(name: str) -> Callable[[Context], Awaitable[web.StreamResponse]]:
    """DeleteBucketCors, DeleteBucketTagging, DeleteBucketPolicy and the like: forget the
    bucket's `name` document, 204 whether or not it had one (AWS's recorded answers). Who may
    is decided before, by the operation's name, as for every operation."""

    async def delete(ctx: Context) -> web.StreamResponse:
        await ctx.store.set_bucket_setting(ctx.bucket, name, None)
        return web.Response(status=204)

    return delete


OPERATIONS = {
    "ListBuckets": list_buckets,
    "CreateBucket": create_bucket,
    "HeadBucket": head_bucket,
    "DeleteBucket": delete_bucket,
    "GetBucketLocation": get_bucket_location,
    "GetBucketVersioning": get_bucket_versioning,
    "PutBucketVersioning": put_bucket_versioning,
}
