"""Put/Get/DeleteBucketOwnershipControls and Put/Get/DeletePublicAccessBlock: the two bucket
settings that decide whether ACLs count and whether anything may be public
(about-object-ownership.html; access-control-block-public-access.html)."""

from __future__ import annotations

from aiohttp import web

from ...limits import MAX_BUCKET_XML
from ...store import Bucket
from .. import xml
from ..authorize import (
    BUCKET_OWNER_ENFORCED,
    OWNERSHIP,
    OWNERSHIPS,
    PAB_FLAGS,
    PUBLIC_ACCESS_BLOCK,
    PublicAccessBlock,
    bucket_acl,
    ownership,
    public_access_block,
)
from ..context import Context
from ..errors import S3Error
from .buckets import delete_setting


def _bucket(ctx: Context) -> Bucket:
    assert ctx.bucket_record is not None  # the dispatcher found it
    return ctx.bucket_record


def _xml(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/xml")


async def get_ownership_controls(ctx: Context) -> web.StreamResponse:
    value = ownership(_bucket(ctx))
    if value is None:
        raise S3Error("OwnershipControlsNotFoundError", BucketName=ctx.bucket)
    rule = [("Rule", [("ObjectOwnership", value)])]
    return _xml(xml.render("OwnershipControls", rule))


async def put_ownership_controls(ctx: Context) -> web.StreamResponse:
    root = xml.parse(await ctx.read_xml(MAX_BUCKET_XML))
    rules = root.findall("Rule")
    # One rule with one known value; anything else is MalformedXML (LS api.snap:2641).
    if root.tag != "OwnershipControls" or len(rules) != 1:
        raise S3Error("MalformedXML")
    value = xml.child_text(rules[0], "ObjectOwnership")
    if value not in OWNERSHIPS:
        raise S3Error("MalformedXML")
    if value == BUCKET_OWNER_ENFORCED and not bucket_acl(_bucket(ctx)).only_owner():
        raise S3Error("InvalidBucketAclWithObjectOwnership")
    await ctx.store.set_bucket_setting(ctx.bucket, OWNERSHIP, value)
    return web.Response()


async def get_public_access_block(ctx: Context) -> web.StreamResponse:
    text = _bucket(ctx).settings.get(PUBLIC_ACCESS_BLOCK)
    if text is None:
        raise S3Error("NoSuchPublicAccessBlockConfiguration", BucketName=ctx.bucket)
    pab = public_access_block(_bucket(ctx))
    values = (
        pab.block_public_acls,
        pab.ignore_public_acls,
        pab.block_public_policy,
        pab.restrict_public_buckets,
    )
    return _xml(
        xml.render("PublicAccessBlockConfiguration", list(zip(PAB_FLAGS, values, strict=True)))
    )


async def put_public_access_block(ctx: Context) -> web.StreamResponse:
    root = xml.parse(await ctx.read_xml(MAX_BUCKET_XML))
    if root.tag != "PublicAccessBlockConfiguration":
        raise S3Error("MalformedXML")
    flags = []
    for name in PAB_FLAGS:
        # A flag left out is stored as false (LS api.snap:2784).
        text = xml.child_text(root, name)
        if text is not None and text.strip().lower() not in ("true", "false"):
            raise S3Error("MalformedXML")
        flags.append(text is not None and text.strip().lower() == "true")
    value = PublicAccessBlock(*flags)
    await ctx.store.set_bucket_setting(ctx.bucket, PUBLIC_ACCESS_BLOCK, value.to_json())
    return web.Response()


OPERATIONS = {
    "GetBucketOwnershipControls": get_ownership_controls,
    "PutBucketOwnershipControls": put_ownership_controls,
    "DeleteBucketOwnershipControls": delete_setting(OWNERSHIP),
    "GetPublicAccessBlock": get_public_access_block,
    "PutPublicAccessBlock": put_public_access_block,
    "DeletePublicAccessBlock": delete_setting(PUBLIC_ACCESS_BLOCK),
}
