"""Get/PutBucketAcl and Get/PutObjectAcl, and the ACL an object write asks for.

An ACL is given by a canned `x-amz-acl`, by `x-amz-grant-*` headers, or by an
AccessControlPolicy document (gateway/s3/grants.py). Where the bucket's ownership controls
disable ACLs (BucketOwnerEnforced), every ACL write is AccessControlListNotSupported except
an object write's ACL that grants no more than bucket-owner-full-control does; reading still
answers the owner's FULL_CONTROL. A public ACL under BlockPublicAcls is AccessDenied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from aiohttp import web

from ...limits import MAX_ACL_XML
from ...store import Bucket, ObjectAttrs, ObjectInfo, outbox
from ...store.versions import DeleteMarker
from ...users import User
from .. import grants, xml
from ..authorize import (
    ACL,
    BUCKET_OWNER_PREFERRED,
    acls_enabled,
    bucket_acl,
    is_anonymous,
    object_owner,
    ownership,
    public_access_block,
)
from ..context import Context
from ..errors import S3Error
from ..params import check_key, version_param


def object_acl_for_write(
    headers: Mapping[str, str], writer: User, bucket: Bucket, known: Callable[[str], bool]
) -> tuple[str | None, str | None]:
    """(owner, stored ACL) of an object a PutObject, CopyObject or CreateMultipartUpload
    writes: None for the bucket's owner and for the owner's private ACL."""
    owner = bucket.owner if is_anonymous(writer) else writer.canonical_id
    acl = grants.from_headers(headers, owner, bucket.owner, known)
    canned = headers.get("x-amz-acl")
    if not acls_enabled(bucket):
        # "Buckets that use this setting only accept PUT requests that don't specify an ACL
        # or specify bucket owner full control ACLs (the bucket-owner-full-control canned ACL
        # or a custom ACL in XML format that grants the same permissions)" (the
        # OwnershipControlsRule API page): judged by what the ACL grants, not by its
        # spelling, so the bucket owner's own `private` (rclone's and s3cmd's default) passes.
        if acl is not None and not acl.grants_only_bucket_owner_full_control(bucket.owner):
            raise S3Error("AccessControlListNotSupported")
        return None, None
    if acl is not None and acl.is_public() and public_access_block(bucket).block_public_acls:
        raise S3Error("AccessDenied")
    if ownership(bucket) == BUCKET_OWNER_PREFERRED and canned == grants.BUCKET_OWNER_FULL_CONTROL:
        owner = bucket.owner
        acl = grants.canned(canned, owner, bucket.owner)
    stored = None if acl is None or acl.only_owner() else acl.to_json()
    return (None if owner == bucket.owner else owner), stored


def _response(ctx: Context, acl: grants.Acl) -> web.Response:
    return web.Response(body=grants.render(acl, ctx.owner), content_type="application/xml")


def _bucket(ctx: Context) -> Bucket:
    assert ctx.bucket_record is not None  # the dispatcher found it
    return ctx.bucket_record


async def get_bucket_acl(ctx: Context) -> web.StreamResponse:
    bucket = _bucket(ctx)
    if not acls_enabled(bucket):
        return _response(ctx, grants.private(bucket.owner))
    return _response(ctx, bucket_acl(bucket))


async def get_object_acl(ctx: Context) -> web.StreamResponse:
    # A latest delete marker: 404 NoSuchKey; a marker by its id: 405 (AWS).
    obj = await ctx.store.head_object(ctx.bucket, check_key(ctx.key), version_param(ctx))
    bucket = _bucket(ctx)
    owner = object_owner(bucket, obj.attrs)
    if not acls_enabled(bucket):
        return _response(ctx, grants.private(owner))
    return _response(ctx, grants.stored(obj.attrs.acl, owner))


async def _requested_acl(ctx: Context, owner: str, bucket_owner: str) -> grants.Acl:
    """The ACL a PutBucketAcl or PutObjectAcl sets, from its headers or its body (never
    both), checked before anything else is judged."""
    known = ctx.users_by_id.__contains__
    from_headers = grants.from_headers(ctx.headers, owner, bucket_owner, known)
    body = await ctx.read_xml(MAX_ACL_XML)
    if from_headers is not None:
        if body.strip():
            raise S3Error("UnexpectedContent")
        acl = from_headers
    elif body.strip():
        try:
            root = xml.parse(body)
        except S3Error as exc:
            raise S3Error("MalformedACLError") from exc
        # The resource keeps its owner: the document's Owner names it, it does not move it.
        acl = replace(grants.from_xml(root, known), owner=owner)
    else:
        raise S3Error("MissingSecurityHeader", MissingHeaderName="x-amz-acl")
    acl = ctx.resolve_emails(acl)
    bucket = _bucket(ctx)
    if not acls_enabled(bucket):
        raise S3Error("AccessControlListNotSupported")
    if acl.is_public() and public_access_block(bucket).block_public_acls:
        raise S3Error("AccessDenied")
    return acl


async def put_bucket_acl(ctx: Context) -> web.StreamResponse:
    bucket = _bucket(ctx)
    acl = await _requested_acl(ctx, bucket.owner, bucket.owner)
    await ctx.store.set_bucket_setting(ctx.bucket, ACL, None if acl.only_owner() else acl.to_json())
    return web.Response()


async def put_object_acl(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    try:
        obj = await ctx.store.head_object(ctx.bucket, key, version_param(ctx))
    except DeleteMarker as exc:
        # AWS answers 405 here even when the marker is only the latest version.
        raise S3Error("MethodNotAllowed", Method="PUT", ResourceType="DeleteMarker") from exc
    bucket = _bucket(ctx)
    owner = object_owner(bucket, obj.attrs)
    acl = await _requested_acl(ctx, owner, bucket.owner)
    stored = None if acl.only_owner() else acl.to_json()

    def change(version: ObjectInfo) -> ObjectAttrs:
        return replace(version.attrs, acl=stored)

    await ctx.store.update_attrs(ctx.bucket, key, obj.version_id, change, outbox.ACL, ctx.origin())
    return web.Response()


OPERATIONS = {
    "GetBucketAcl": get_bucket_acl,
    "GetObjectAcl": get_object_acl,
    "PutBucketAcl": put_bucket_acl,
    "PutObjectAcl": put_object_acl,
}
