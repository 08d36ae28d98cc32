"""Put/GetBucketNotificationConfiguration: a bucket's notification configuration
(gateway/notify/configuration.py), kept as its "notification" setting.

A PUT replaces the whole configuration (an empty <NotificationConfiguration/> removes it); every
destination must be a topic in this region, of the bucket owner's account or of another account
whose topic's Policy allows sns:Publish to the bucket's account (Topic.publishes), and each one
with an endpoint is sent AWS's s3:TestEvent first, unless x-amz-skip-destination-validation:
true. Another account's topic that does not allow it refuses the PUT with 403 AccessDenied (as
Ceph RGW and s3-tests' test_cross_account_topic_publish have it); a destination that does not
exist or does not acknowledge, with AWS's InvalidArgument "Unable to validate the following
destination configurations", naming it (ArgumentName1, ArgumentValue1...). Nothing of a refused
PUT is kept. A GET of a bucket without one answers the empty element, as AWS does."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from ...notify import configuration, topics
from ...notify.networks import networks
from ...notify.records import s3_test_event
from ...notify.targets import Senders
from ...store.crypto import WrongKey
from ...users import account_number
from ..context import Context
from ..errors import S3Error
from ..middleware import HOST_ID, REQUEST_ID

_UNVALIDATED = "Unable to validate the following destination configurations"


async def get_bucket_notification_configuration(ctx: Context) -> web.StreamResponse:
    assert ctx.bucket_record is not None
    document = ctx.bucket_record.settings.get(configuration.SETTING)
    body = document.encode() if document is not None else configuration.render(configuration.EMPTY)
    return web.Response(body=body, content_type="application/xml")


async def put_bucket_notification_configuration(ctx: Context) -> web.StreamResponse:
    body = await ctx.read_xml(configuration.MAX_NOTIFICATION_XML)
    config = configuration.parse(body)
    skip = ctx.headers.get("x-amz-skip-destination-validation", "").lower() == "true"
    failures = await _validate(ctx, config, send_test=not skip)
    if failures:
        fields = {}
        for i, (arn, why) in enumerate(failures, 1):
            fields[f"ArgumentName{i}"] = arn
            fields[f"ArgumentValue{i}"] = why
        raise S3Error("InvalidArgument", _UNVALIDATED, **fields)
    document = configuration.render(config).decode() if config.targets else None
    await ctx.store.set_bucket_setting(ctx.bucket, configuration.SETTING, document)
    return web.Response()


async def _validate(
    ctx: Context, config: configuration.Configuration, send_test: bool
) -> list[tuple[str, str]]:
    """Each destination that cannot be used, with why (empty: all can); AccessDenied when
    another account's topic does not allow the bucket's events."""
    assert ctx.bucket_record is not None
    owner = ctx.bucket_record.owner
    region = ctx.settings.region
    accounts = {account_number(c): c for c in ctx.users_by_id}
    found: dict[str, dict[str, str]] = {}  # topics by account, each read once
    failures: list[tuple[str, str]] = []
    usable: dict[str, topics.Topic] = {}
    denied = False
    for arn in dict.fromkeys(t.arn for t in config.targets):
        named = topics.parse_arn(arn)
        account = None if named is None else topics.registry_account(named, owner, accounts)
        if named is not None and account is not None and account not in found:
            found[account] = await ctx.store.get_docs("topics", account)
        if named is None or account is None or named.name not in found[account]:
            failures.append((arn, "The destination topic does not exist"))
        elif named.region != region:
            failures.append((arn, "The destination is not in this bucket's region"))
        else:
            if any((t.account, t.name) == (account, named.name) for t in usable.values()):
                continue  # another ARN of the same topic: tested once
            try:
                topic = topics.Topic.from_doc(
                    account, named.name, region, found[account][named.name], _opener(ctx)
                )
            except WrongKey:
                failures.append((arn, "The destination's endpoint cannot be read"))
                continue
            if not topic.publishes(ctx.bucket, owner):
                denied = True  # another account's topic whose Policy does not allow it
                continue
            usable[arn] = topic
    if denied:
        raise S3Error("AccessDenied")
    if failures or not send_test:
        return failures
    message = s3_test_event(
        ctx.bucket, time.time_ns(), ctx.request[REQUEST_ID], ctx.request[HOST_ID]
    )
    async with Senders(networks(ctx.settings.notify_networks)) as sender:
        for arn, topic in usable.items():
            if not topic.endpoint:
                continue
            delivered = await sender.send(topic, message)
            if not delivered.acknowledged:
                failures.append((arn, f"The test event was not delivered: {delivered.reason}"))
    return failures


def _opener(ctx: Context) -> Callable[[str], bytes]:
    keys = ctx.store.keys
    if keys is None:
        raise S3Error("InternalError")
    return keys.open_topic_secret


OPERATIONS = {
    "GetBucketNotificationConfiguration": get_bucket_notification_configuration,
    "PutBucketNotificationConfiguration": put_bucket_notification_configuration,
}
