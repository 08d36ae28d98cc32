"""Access control lists, as far as this gateway has them: every bucket and object is private
to its owner, who has FULL_CONTROL.

Clients probe ACLs (s3cmd reads and writes an object's ACL on every server-side copy), so the
ACL operations answer with that one grant, and accept writes that change nothing: the canned
`private` (and its bucket-owner variants, the same thing when the owner is the only user
involved) or a policy that grants FULL_CONTROL to the owner alone. Anything that would share
a resource is NotImplemented rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from ...limits import MAX_ACL_XML
from ...store.versions import DeleteMarker
from .. import xml
from ..context import Context
from ..errors import S3Error
from .objects import check_key, version_param

PRIVATE_ACLS = {"private", "bucket-owner-full-control", "bucket-owner-read"}
_GRANTEE = 'Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"'


def check_canned_acl(headers: Mapping[str, str]) -> None:
    """x-amz-acl / x-amz-grant-* on a write: only what keeps the resource private."""
    acl = headers.get("x-amz-acl")
    if acl is not None and acl not in PRIVATE_ACLS:
        raise S3Error("NotImplemented", f"The canned ACL {acl!r} is not supported: only private")
    if any(name.lower().startswith("x-amz-grant-") for name in headers):
        raise S3Error("NotImplemented", "ACL grants are not supported: resources are private")


def _policy(ctx: Context, owner: str) -> web.Response:
    me = ctx.owner(owner)
    body = xml.render(
        "AccessControlPolicy",
        [
            ("Owner", me),
            (
                "AccessControlList",
                [("Grant", [(_GRANTEE, me), ("Permission", "FULL_CONTROL")])],
            ),
        ],
    )
    return web.Response(body=body, content_type="application/xml")


def _bucket_owner(ctx: Context) -> str:
    assert ctx.bucket_record is not None  # the dispatcher found it
    return ctx.bucket_record.owner


async def get_bucket_acl(ctx: Context) -> web.StreamResponse:
    return _policy(ctx, _bucket_owner(ctx))


async def get_object_acl(ctx: Context) -> web.StreamResponse:
    # A latest delete marker: 404 NoSuchKey; a marker by its id: 405 (AWS).
    await ctx.store.head_object(ctx.bucket, check_key(ctx.key), version_param(ctx))
    return _policy(ctx, _bucket_owner(ctx))


async def _put_acl(ctx: Context, owner: str) -> web.StreamResponse:
    check_canned_acl(ctx.headers)
    body = await ctx.read_xml(MAX_ACL_XML)
    if body.strip():
        root = xml.parse(body)
        if root.tag != "AccessControlPolicy":
            raise S3Error("MalformedXML")
        grants = root.findall("AccessControlList/Grant")
        for grant in grants:
            grantee = grant.find("Grantee")
            grantee_id = grantee.findtext("ID") if grantee is not None else None
            if grantee_id != owner or grant.findtext("Permission") != "FULL_CONTROL":
                raise S3Error(
                    "NotImplemented", "ACL grants are not supported: resources are private"
                )
    elif "x-amz-acl" not in ctx.headers:
        raise S3Error("MissingSecurityHeader", MissingHeaderName="x-amz-acl")
    return web.Response()


async def put_bucket_acl(ctx: Context) -> web.StreamResponse:
    return await _put_acl(ctx, _bucket_owner(ctx))


async def put_object_acl(ctx: Context) -> web.StreamResponse:
    try:
        await ctx.store.head_object(ctx.bucket, check_key(ctx.key), version_param(ctx))
    except DeleteMarker as exc:
        # AWS answers 405 here even when the marker is only the latest version.
        raise S3Error("MethodNotAllowed", Method="PUT", ResourceType="DeleteMarker") from exc
    return await _put_acl(ctx, _bucket_owner(ctx))


OPERATIONS = {
    "GetBucketAcl": get_bucket_acl,
    "GetObjectAcl": get_object_acl,
    "PutBucketAcl": put_bucket_acl,
    "PutObjectAcl": put_object_acl,
}
