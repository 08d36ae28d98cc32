"""Put/Get/DeleteBucketLifecycleConfiguration. The document is checked (s3/lifecycle.py) and
kept as it was sent; the background worker (gateway/workers/lifecycle.py) applies its rules."""

from __future__ import annotations

from aiohttp import web

from .. import lifecycle
from ..context import Context
from ..params import require_integrity_header
from .buckets import delete_setting

SETTING = "lifecycle"


async def get_bucket_lifecycle_configuration(ctx: Context) -> web.StreamResponse:
    document = ctx.setting(SETTING, "NoSuchLifecycleConfiguration")
    return web.Response(
        body=document.encode(),
        content_type="application/xml",
        # AWS's default, sent with every configuration (the API model).
        headers={"x-amz-transition-default-minimum-object-size": "all_storage_classes_128K"},
    )


async def put_bucket_lifecycle_configuration(ctx: Context) -> web.StreamResponse:
    require_integrity_header(ctx)
    body = await ctx.read_xml(lifecycle.MAX_LIFECYCLE_XML)
    lifecycle.parse(body)  # refused whole, or kept whole
    await ctx.store.set_bucket_setting(ctx.bucket, SETTING, lifecycle.with_ids(body))
    return web.Response()


OPERATIONS = {
    "GetBucketLifecycleConfiguration": get_bucket_lifecycle_configuration,
    "PutBucketLifecycleConfiguration": put_bucket_lifecycle_configuration,
    "DeleteBucketLifecycleConfiguration": delete_setting(SETTING),
}
