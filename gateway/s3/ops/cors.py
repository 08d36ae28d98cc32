"""Put/Get/DeleteBucketCors, and the preflight OPTIONS request a browser sends before a
cross-origin request (answered from the bucket's rules, without a signature, as on AWS).

The headers an actual cross-origin request gets are added by the middleware (every answer,
errors included), from the same rules (gateway/s3/cors.py).
"""

from __future__ import annotations

from aiohttp import web

from ... import digest
from ...limits import KiB
from ...store import Store
from .. import cors
from ..context import Context
from ..errors import S3Error
from ..params import content_md5, require_integrity_header
from ..router import Endpoint
from .buckets import delete_setting

# "The document is limited to 64 KB in size" (PutBucketCors).
MAX_CORS_XML = 64 * KiB
_NOT_ALLOWED = (
    "CORSResponse: This CORS request is not allowed. This is usually because the evalution of "
    "Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers "
    "are not whitelisted by the resource's CORS spec."
)  # sic: AWS's own spelling of "evaluation"


async def put_bucket_cors(ctx: Context) -> web.StreamResponse:
    require_integrity_header(ctx)
    expected_md5 = content_md5(ctx.headers)
    body = await ctx.read_xml(MAX_CORS_XML)
    if expected_md5 is not None and digest.md5_of(body).digest() != expected_md5:
        raise S3Error("BadDigest")
    rules = cors.parse_configuration(body)
    await ctx.store.set_bucket_setting(
        ctx.bucket, cors.SETTING, cors.render_configuration(rules).decode()
    )
    return web.Response()


async def get_bucket_cors(ctx: Context) -> web.StreamResponse:
    stored = ctx.setting(cors.SETTING, "NoSuchCORSConfiguration")
    return web.Response(body=stored.encode(), content_type="application/xml")


async def preflight(store: Store, request: web.Request, target: Endpoint) -> web.StreamResponse:
    """OPTIONS: 200 with the matched rule's headers and no body, or AWS's refusal. It needs no
    signature: a browser sends none (and a presigned URL's query is ignored)."""
    origin = request.headers.get("Origin")
    if origin is None:
        raise S3Error("BadRequest", "Insufficient information. Origin request header needed.")
    method = request.headers.get("Access-Control-Request-Method")
    shown = method or "OPTIONS"
    bucket = await store.get_bucket(target.bucket) if target.bucket is not None else None
    if bucket is None:
        raise S3Error(
            "AccessForbidden",
            "CORSResponse: Bucket not found",
            Method=shown,
            ResourceType="BUCKET",
        )
    stored = bucket.settings.get(cors.SETTING)
    if stored is None:
        raise S3Error(
            "AccessForbidden",
            "CORSResponse: CORS is not enabled for this bucket.",
            Method=shown,
            ResourceType="BUCKET",
        )
    if method is None:
        # Not recorded from AWS with a configuration in place; s3-tests (test_cors_origin_
        # response) expects a 400, and without the method no rule can be judged.
        raise S3Error(
            "BadRequest",
            "Insufficient information. Access-Control-Request-Method request header needed.",
        )
    requested = cors.requested_headers(request.headers.get("Access-Control-Request-Headers"))
    rule = cors.match(cors.rules_of(stored), origin, method, requested)
    if rule is None:
        raise S3Error(
            "AccessForbidden",
            _NOT_ALLOWED,
            Method=method,
            ResourceType="OBJECT" if target.key is not None else "BUCKET",
        )
    return web.Response(headers=cors.answer_headers(rule, origin, requested))


OPERATIONS = {
    "PutBucketCors": put_bucket_cors,
    "GetBucketCors": get_bucket_cors,
    "DeleteBucketCors": delete_setting(cors.SETTING),
}
