"""Put/Get/DeleteBucketPolicy and GetBucketPolicyStatus (the policy language is in
gateway/s3/policy.py; `authorize` applies it)."""

from __future__ import annotations

from aiohttp import web

from .. import policy, xml
from ..authorize import POLICY, public_access_block
from ..context import Context
from ..errors import S3Error
from .buckets import delete_setting

# The body may carry whitespace beyond the 20 KB AWS counts (it measures the policy without
# it), so more is read than is kept.
MAX_POLICY_BODY = 64 * 1024


def _stored(ctx: Context) -> str:
    return ctx.setting(POLICY, "NoSuchBucketPolicy")


async def put_bucket_policy(ctx: Context) -> web.StreamResponse:
    assert ctx.bucket_record is not None
    body = await ctx.read_xml(MAX_POLICY_BODY)
    parsed = policy.parse(body, ctx.bucket)
    if parsed.is_public() and public_access_block(ctx.bucket_record).block_public_policy:
        raise S3Error("AccessDenied")
    # Kept as sent (valid UTF-8: parse decoded it), and given back as sent.
    await ctx.store.set_bucket_setting(ctx.bucket, POLICY, body.decode("utf-8"))
    return web.Response(status=204)


async def get_bucket_policy(ctx: Context) -> web.StreamResponse:
    return web.Response(text=_stored(ctx), content_type="application/json")


async def get_bucket_policy_status(ctx: Context) -> web.StreamResponse:
    # Without a policy AWS answers NoSuchBucketPolicy, and it judges the policy alone, not
    # the ACLs (S3-SEMANTICS: GetBucketPolicyStatus).
    public = policy.cached(_stored(ctx), ctx.bucket).is_public()
    body = xml.render("PolicyStatus", [("IsPublic", public)])
    return web.Response(body=body, content_type="application/xml")


OPERATIONS = {
    "PutBucketPolicy": put_bucket_policy,
    "GetBucketPolicy": get_bucket_policy,
    "DeleteBucketPolicy": delete_setting(POLICY),
    "GetBucketPolicyStatus": get_bucket_policy_status,
}
