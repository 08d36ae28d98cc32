"""Put/Get/DeleteBucketWebsite. The document is checked (s3/website.py) and kept as rendered
from what was parsed; the website endpoint (gateway/website/) serves the bucket by it."""

from __future__ import annotations

from aiohttp import web

from .. import website
from ..context import Context
from ..params import require_integrity_header
from .buckets import delete_setting

# A configuration of 50 routing rules is a few KiB; AWS states no size of its own.
MAX_WEBSITE_XML = 128 * 1024


async def put_bucket_website(ctx: Context) -> web.StreamResponse:
    require_integrity_header(ctx)
    body = await ctx.read_xml(MAX_WEBSITE_XML)
    config = website.parse_configuration(body)
    await ctx.store.set_bucket_setting(
        ctx.bucket, website.SETTING, website.render_configuration(config).decode()
    )
    return web.Response()


async def get_bucket_website(ctx: Context) -> web.StreamResponse:
    stored = ctx.setting(website.SETTING, "NoSuchWebsiteConfiguration")
    return web.Response(body=stored.encode(), content_type="application/xml")


OPERATIONS = {
    "PutBucketWebsite": put_bucket_website,
    "GetBucketWebsite": get_bucket_website,
    "DeleteBucketWebsite": delete_setting(website.SETTING),
}
