"""Put/Get/DeleteBucketEncryption: a bucket's default encryption, kept as its "encryption"
setting (the document sse.py renders)."""

from __future__ import annotations

from aiohttp import web

from .. import sse, writes
from ..context import Context

MAX_ENCRYPTION_XML = 64 * 1024


async def put_bucket_encryption(ctx: Context) -> web.StreamResponse:
    body = await ctx.read_xml(MAX_ENCRYPTION_XML)
    rule = sse.parse_configuration(body, ctx.store.keys)
    await _store(ctx, sse.replace_configuration(_current(ctx), rule))
    return web.Response(status=200)


async def get_bucket_encryption(ctx: Context) -> web.StreamResponse:
    # The bucket's rule as kept: a new bucket's is SSE-S3 (AWS's default), or under
    # --default-encryption none the SSE-C block alone, with no algorithm; one without any
    # (--bucket-defaults legacy, or made before) encrypts nothing by default and answers what
    # AWS answered before every bucket had SSE-S3: a document must never claim encryption
    # that is not done (docs/encryption.md, "The default").
    document = ctx.setting("encryption", "ServerSideEncryptionConfigurationNotFoundError")
    return web.Response(body=document.encode(), content_type="application/xml")


async def delete_bucket_encryption(ctx: Context) -> web.StreamResponse:
    default = writes.default_encryption(ctx.settings)
    await _store(ctx, sse.replace_configuration(_current(ctx), None, default))
    return web.Response(status=204)


def _current(ctx: Context) -> sse.DefaultRule | None:
    record = ctx.bucket_record
    return sse.default_rule(record.settings) if record is not None else None


async def _store(ctx: Context, rule: sse.DefaultRule | None) -> None:
    document = None if rule is None else sse.render_configuration(rule)
    await ctx.store.set_bucket_setting(ctx.bucket, "encryption", document)


OPERATIONS = {
    "PutBucketEncryption": put_bucket_encryption,
    "GetBucketEncryption": get_bucket_encryption,
    "DeleteBucketEncryption": delete_bucket_encryption,
}
