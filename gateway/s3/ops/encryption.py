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
    await _store(ctx, sse.replace_configuration(_current(ctx), rule))
    return web.Response(status=200)


async def get_bucket_encryption(ctx: Context) -> web.StreamResponse:
    # A bucket without a configuration encrypts nothing by default here, so it answers what
    # AWS answered before every bucket had SSE-S3 (docs/encryption.md, "The default"): a
    # header or document must never claim encryption that is not done. A new bucket whose
    # only rule blocks SSE-C (sse.SSE_C_BLOCKED) answers that rule, with no algorithm.
    document = ctx.setting("encryption", "ServerSideEncryptionConfigurationNotFoundError")
    return web.Response(body=document.encode(), content_type="application/xml")


async def delete_bucket_encryption(ctx: Context) -> web.StreamResponse:
    await _store(ctx, sse.replace_configuration(_current(ctx), None))
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
