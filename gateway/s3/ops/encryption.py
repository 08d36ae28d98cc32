"""Put/Get/DeleteBucketEncryption: a bucket's default encryption, kept as its "encryption"
setting (the document sse.py renders)."""

from __future__ import annotations

from aiohttp import web

from .. import sse
from ..context import Context

MAX_ENCRYPTION_XML = 64 * 1024


async def put_bucket_encryption(ctx: Context) -> web.StreamResponse:
    body = await ctx.read_xml(MAX_ENCRYPTION_XML)
    rule = sse.parse_configuration(body, ctx.store.keys)
    await ctx.store.set_bucket_setting(ctx.bucket, "encryption", sse.render_configuration(rule))
    return web.Response(status=200)


async def get_bucket_encryption(ctx: Context) -> web.StreamResponse:
    # A bucket without a configuration encrypts nothing by default here, so it answers what
    # AWS answered before every bucket had SSE-S3 (docs/encryption.md, "The default"): a
    # header or document must never claim encryption that is not done.
    document = ctx.setting("encryption", "ServerSideEncryptionConfigurationNotFoundError")
    return web.Response(body=document.encode(), content_type="application/xml")


async def delete_bucket_encryption(ctx: Context) -> web.StreamResponse:
    await ctx.store.set_bucket_setting(ctx.bucket, "encryption", None)
    return web.Response(status=204)


OPERATIONS = {
    "PutBucketEncryption": put_bucket_encryption,
    "GetBucketEncryption": get_bucket_encryption,
    "DeleteBucketEncryption": delete_bucket_encryption,
}
