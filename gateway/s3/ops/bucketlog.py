"""Put/GetBucketLogging, and RGW's PostBucketLogging extension (POST /bucket?logging), which
delivers the bucket's pending access log records now (ceph's s3-tests flush with it).

The records are made by s3/logrecords.py and delivered by gateway/workers/logdelivery.py.
"""

from __future__ import annotations

import dataclasses
import time

from aiohttp import web

from ...limits import MAX_BUCKET_XML
from .. import bucketlog, xml
from ..authorize import BUCKET_OWNER_ENFORCED, ownership
from ..context import FLUSH_LOGS, Context
from ..errors import S3Error, invalid_argument


def _owner_only(ctx: Context) -> None:
    # "To set the logging status of a bucket, you must be the bucket owner" (PutBucketLogging):
    # a bucket policy granting s3:PutBucketLogging to others does not make them owners.
    assert ctx.bucket_record is not None
    if ctx.user.canonical_id != ctx.bucket_record.owner:
        raise S3Error("AccessDenied")


async def put_bucket_logging(ctx: Context) -> web.StreamResponse:
    _owner_only(ctx)
    assert ctx.bucket_record is not None
    config = bucketlog.parse_status(await ctx.read_xml(MAX_BUCKET_XML))
    if config is not None:
        # Grants by e-mail address: 405, or (--email-grants resolve) the user's canonical id.
        resolved = (
            bucketlog.TargetGrant("CanonicalUser", ctx.email_grantee(g.value), g.permission)
            if g.kind == "AmazonCustomerByEmail"
            else g
            for g in config.grants
        )
        config = dataclasses.replace(config, grants=tuple(resolved))
        await _check_target(ctx, config)
        stored = ctx.bucket_record.settings.get(bucketlog.SETTING)
        before = bucketlog.LoggingConfig.from_json(stored) if stored is not None else None
        # The same configuration again changes nothing, not even its time.
        same = before is not None and before == config
        modified = before.modified_ns if same and before is not None else time.time_ns()
        config = dataclasses.replace(config, modified_ns=modified)
    await ctx.store.set_bucket_setting(
        ctx.bucket, bucketlog.SETTING, config.to_json() if config is not None else None
    )
    return web.Response()


async def _check_target(ctx: Context, config: bucketlog.LoggingConfig) -> None:
    """AWS's checks of the target (PutBucketLogging; userguide/ServerLogs.html): it exists,
    belongs to the source bucket's owner, has no default retention, and takes no grants when
    ACLs are disabled on it. It may be the source bucket itself."""
    assert ctx.bucket_record is not None
    target = await ctx.store.get_bucket(config.target_bucket)
    if target is None:
        raise S3Error("InvalidTargetBucketForLogging", TargetBucket=config.target_bucket)
    if target.owner != ctx.bucket_record.owner:
        raise S3Error(
            "InvalidTargetBucketForLogging",
            "The owner for the bucket to be logged and the target bucket must be the same.",
            TargetBucket=config.target_bucket,
        )
    if target.default_retention is not None:
        # "The destination bucket must not have an S3 Object Lock default retention period
        # configuration" (userguide/ServerLogs.html): log objects must stay deletable.
        raise S3Error(
            "InvalidTargetBucketForLogging",
            "The target bucket for logging must not have an Object Lock default retention "
            "period configured.",
            TargetBucket=config.target_bucket,
        )
    if config.grants and ownership(target) == BUCKET_OWNER_ENFORCED:
        raise S3Error(
            "InvalidTargetBucketForLogging",
            "Target grants are not supported when the target bucket uses the bucket owner "
            "enforced setting for Object Ownership.",
            TargetBucket=config.target_bucket,
        )
    for grant in config.grants:
        if grant.kind == "CanonicalUser" and grant.value not in ctx.users_by_id:
            raise invalid_argument("Invalid id", "CanonicalUser/ID", grant.value)


async def get_bucket_logging(ctx: Context) -> web.StreamResponse:
    _owner_only(ctx)
    assert ctx.bucket_record is not None
    stored = ctx.bucket_record.settings.get(bucketlog.SETTING)
    # No configuration is no error: an empty BucketLoggingStatus (logging is off).
    config = bucketlog.LoggingConfig.from_json(stored) if stored is not None else None
    headers = {"Last-Modified": xml.http_date(config.modified_ns)} if config else {}
    return web.Response(
        body=bucketlog.render_status(config), headers=headers, content_type="application/xml"
    )


async def post_bucket_logging(ctx: Context) -> web.StreamResponse:
    """The extension: deliver this process's pending records of the bucket now, and name the
    log object written (empty when there was nothing to deliver)."""
    _owner_only(ctx)
    assert ctx.bucket_record is not None
    if bucketlog.SETTING not in ctx.bucket_record.settings:
        raise S3Error("NoSuchKey", "The bucket has no logging configuration", Key=ctx.bucket)
    key = await ctx.request.app[FLUSH_LOGS](ctx.bucket)
    body = xml.render("PostBucketLoggingOutput", [("FlushedLoggingObject", key or "")])
    return web.Response(body=body, content_type="application/xml")


OPERATIONS = {
    "PutBucketLogging": put_bucket_logging,
    "GetBucketLogging": get_bucket_logging,
    "PostBucketLogging": post_bucket_logging,
}
