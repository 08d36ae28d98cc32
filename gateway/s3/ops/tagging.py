"""Put/Get/DeleteObjectTagging and Put/Get/DeleteBucketTagging.

An object's tags live in its version's attrs (changed in place by Store.update_attrs: the
bytes, ETag and time stay); a bucket's in its settings, as the rendered document.
"""

from __future__ import annotations

from dataclasses import replace

from aiohttp import web

from ...store.model import ObjectInfo
from ...store.outbox import TAGGED, UNTAGGED
from ...store.versions import DeleteMarker
from .. import tagging
from ..context import Context
from ..errors import S3Error
from ..params import check_key, version_param
from .buckets import delete_setting
from .objects import version_headers

_XML = "application/xml"


async def _set_tags(ctx: Context, tags: tagging.TagSet, event: str) -> ObjectInfo:
    try:
        return await ctx.store.update_attrs(
            ctx.bucket,
            check_key(ctx.key),
            version_param(ctx),
            lambda version: replace(version.attrs, tags=tags),
            event,
            ctx.origin(),
        )
    except DeleteMarker as exc:
        # AWS answers 405 to a change of tags when the latest version is a marker, too.
        raise S3Error(
            "MethodNotAllowed", Method=ctx.request.method, ResourceType="DeleteMarker"
        ) from exc


async def get_object_tagging(ctx: Context) -> web.StreamResponse:
    try:
        obj = await ctx.store.head_object(ctx.bucket, check_key(ctx.key), version_param(ctx))
    except DeleteMarker as exc:
        raise S3Error("MethodNotAllowed", Method="GET", ResourceType="DeleteMarker") from exc
    return web.Response(
        body=tagging.render(obj.attrs.tags),
        content_type=_XML,
        headers=version_headers(ctx, obj),
    )


async def put_object_tagging(ctx: Context) -> web.StreamResponse:
    tags = tagging.from_xml(await ctx.read_xml(tagging.MAX_TAGGING_XML), tagging.MAX_OBJECT_TAGS)
    obj = await _set_tags(ctx, tags, TAGGED)
    return web.Response(headers=version_headers(ctx, obj))


async def delete_object_tagging(ctx: Context) -> web.StreamResponse:
    obj = await _set_tags(ctx, (), UNTAGGED)
    return web.Response(status=204, headers=version_headers(ctx, obj))


async def get_bucket_tagging(ctx: Context) -> web.StreamResponse:
    document = ctx.setting("tagging", "NoSuchTagSet")
    return web.Response(body=document.encode(), content_type=_XML)


async def put_bucket_tagging(ctx: Context) -> web.StreamResponse:
    tags = tagging.from_xml(await ctx.read_xml(tagging.MAX_TAGGING_XML), tagging.MAX_BUCKET_TAGS)
    await ctx.store.set_bucket_setting(ctx.bucket, "tagging", tagging.encode(tags))
    return web.Response(status=204)


OPERATIONS = {
    "GetObjectTagging": get_object_tagging,
    "PutObjectTagging": put_object_tagging,
    "DeleteObjectTagging": delete_object_tagging,
    "GetBucketTagging": get_bucket_tagging,
    "PutBucketTagging": put_bucket_tagging,
    "DeleteBucketTagging": delete_setting("tagging"),
}
