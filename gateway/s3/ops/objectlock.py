"""Get/PutObjectLockConfiguration, Get/PutObjectRetention, Get/PutObjectLegalHold.

The rules (what a lock keeps from happening) are the Store's (store/objectlock.py); the lock
headers of writes and reads are read and written by s3/retention.py.
"""

from __future__ import annotations

from aiohttp import web

from ...limits import MAX_BUCKET_XML
from ...store.model import DefaultRetention, ObjectInfo
from ...store.objectlock import MODES
from .. import xml
from ..context import Context
from ..errors import S3Error
from ..params import check_key, parse_int, require_integrity_header, version_param
from ..retention import HOLD_STATES, asks_bypass, bypass_governance, lock_bucket, retain_until


def _xml(root: str, nodes: list[xml.Node]) -> web.Response:
    return web.Response(body=xml.render(root, nodes), content_type="application/xml")


# --- the bucket's configuration --------------------------------------------------------------


async def get_object_lock_configuration(ctx: Context) -> web.StreamResponse:
    bucket = ctx.bucket_record
    if bucket is None or not bucket.object_lock:
        raise S3Error("ObjectLockConfigurationNotFoundError", BucketName=ctx.bucket)
    nodes: list[xml.Node] = [("ObjectLockEnabled", "Enabled")]
    rule = bucket.default_retention
    if rule is not None:
        retention = [("Mode", rule.mode), ("Days", rule.days), ("Years", rule.years)]
        nodes.append(("Rule", [("DefaultRetention", retention)]))
    return _xml("ObjectLockConfiguration", nodes)


async def put_object_lock_configuration(ctx: Context) -> web.StreamResponse:
    require_integrity_header(ctx)
    root = xml.parse(await ctx.read_xml(MAX_BUCKET_XML))
    if root.tag != "ObjectLockConfiguration" or xml.child_text(root, "ObjectLockEnabled") != (
        "Enabled"
    ):
        raise S3Error("MalformedXML")
    default = None
    rule = root.find("Rule")
    if rule is not None:
        retention = rule.find("DefaultRetention")
        if retention is None:
            raise S3Error("MalformedXML")
        mode = xml.child_text(retention, "Mode")
        days, years = xml.child_text(retention, "Days"), xml.child_text(retention, "Years")
        if mode is None or mode not in MODES or (days is None) == (years is None):
            raise S3Error("MalformedXML")
        if days is not None:
            default = DefaultRetention(mode, days=_period(days))
        elif years is not None:
            default = DefaultRetention(mode, years=_period(years))
    await ctx.store.set_lock_configuration(ctx.bucket, default)
    return web.Response()


def _period(text: str) -> int:
    """Days or Years: a whole number, above zero (AWS: InvalidRetentionPeriod otherwise)."""
    raw = text.strip()
    value = parse_int(raw.removeprefix("-"))
    if value < 0:
        raise S3Error("MalformedXML")
    if raw.startswith("-") or value == 0:
        raise S3Error("InvalidRetentionPeriod")
    return value


# --- a version's retention and legal hold ----------------------------------------------------


async def _version(ctx: Context) -> ObjectInfo:
    lock_bucket(ctx.bucket_record)
    return await ctx.store.head_object(ctx.bucket, check_key(ctx.key), version_param(ctx))


async def get_object_retention(ctx: Context) -> web.StreamResponse:
    obj = await _version(ctx)
    if obj.lock.mode is None or obj.lock.retain_until_ns is None:
        raise S3Error("NoSuchObjectLockConfiguration")
    return _xml(
        "Retention",
        [("Mode", obj.lock.mode), ("RetainUntilDate", xml.iso8601(obj.lock.retain_until_ns))],
    )


async def put_object_retention(ctx: Context) -> web.StreamResponse:
    lock_bucket(ctx.bucket_record)
    key, version_id = check_key(ctx.key), version_param(ctx)
    asked = asks_bypass(ctx.headers, ctx.bucket_record)
    bypass = bypass_governance(asked, ctx.allowed, key, version_id)
    require_integrity_header(ctx)
    root = xml.parse(await ctx.read_xml(MAX_BUCKET_XML))
    if root.tag != "Retention":
        raise S3Error("MalformedXML")
    mode, until = xml.child_text(root, "Mode"), xml.child_text(root, "RetainUntilDate")
    until_ns = None
    if mode is not None or until is not None:  # an empty Retention removes it
        if mode not in MODES or until is None:
            raise S3Error("MalformedXML")
        until_ns = retain_until(until, "RetainUntilDate")
    await ctx.store.set_retention(ctx.bucket, key, version_id, mode, until_ns, bypass)
    return web.Response()


async def get_object_legal_hold(ctx: Context) -> web.StreamResponse:
    obj = await _version(ctx)
    if obj.lock.legal_hold is None:
        raise S3Error("NoSuchObjectLockConfiguration")
    return _xml("LegalHold", [("Status", obj.lock.legal_hold)])


async def put_object_legal_hold(ctx: Context) -> web.StreamResponse:
    lock_bucket(ctx.bucket_record)
    require_integrity_header(ctx)
    root = xml.parse(await ctx.read_xml(MAX_BUCKET_XML))
    status = xml.child_text(root, "Status")
    if root.tag != "LegalHold" or status not in HOLD_STATES:
        raise S3Error("MalformedXML")
    await ctx.store.set_legal_hold(ctx.bucket, check_key(ctx.key), version_param(ctx), status)
    return web.Response()


OPERATIONS = {
    "GetObjectLockConfiguration": get_object_lock_configuration,
    "PutObjectLockConfiguration": put_object_lock_configuration,
    "GetObjectRetention": get_object_retention,
    "PutObjectRetention": put_object_retention,
    "GetObjectLegalHold": get_object_legal_hold,
    "PutObjectLegalHold": put_object_legal_hold,
}
