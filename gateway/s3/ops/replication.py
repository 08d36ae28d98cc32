"""Put/Get/DeleteBucketReplication: a bucket's replication configuration
(gateway/replication/configuration.py), kept as its "replication" setting.

A PUT replaces the whole configuration. As AWS: the source bucket's versioning must be Enabled
(400 InvalidRequest); each rule's destination must be a bucket this gateway holds, with
versioning Enabled ("Destination bucket must exist.", "Destination bucket must have versioning
enabled.", both 400 InvalidRequest, as AWS answers them), and not the source itself; or a
remote (gateway/replication/remotes.py): a bucket the operator names in the
--replication-remotes file, or one the bucket's account named on the console's Remotes page,
taken as it is named there (whether it exists is the worker's to find out, as AWS finds out a
cross-account destination's permissions only when it replicates). A remote wins over a local
bucket of the same name: its owner named it. A GET of a bucket without one is
404 ReplicationConfigurationNotFoundError; a DELETE is 204 either way."""

from __future__ import annotations

from aiohttp import web

from ...replication import configuration, remotes
from ..context import Context
from ..errors import S3Error

_SOURCE_VERSIONING = (
    "Versioning must be 'Enabled' on the bucket to apply a replication configuration"
)


async def get_bucket_replication(ctx: Context) -> web.StreamResponse:
    assert ctx.bucket_record is not None
    document = ctx.bucket_record.settings.get(configuration.SETTING)
    if document is None:
        raise S3Error("ReplicationConfigurationNotFoundError", BucketName=ctx.bucket)
    return web.Response(body=document.encode(), content_type="application/xml")


async def put_bucket_replication(ctx: Context) -> web.StreamResponse:
    assert ctx.bucket_record is not None
    body = await ctx.read_xml(configuration.MAX_REPLICATION_XML)
    config = configuration.parse(body)
    if ctx.bucket_record.versioning != "Enabled":
        raise S3Error("InvalidRequest", _SOURCE_VERSIONING)
    owner = ctx.bucket_record.owner
    known = set(remotes.load(ctx.settings.replication_remotes))
    known.update(await ctx.store.get_docs(remotes.KIND, owner))  # the account's own
    for name in dict.fromkeys(rule.destination.bucket for rule in config.rules):
        if name in known:
            continue
        if name == ctx.bucket:
            raise S3Error(
                "InvalidRequest", "Destination bucket cannot be the same as the source bucket."
            )
        destination = await ctx.store.get_bucket(name)
        if destination is None:
            raise S3Error("InvalidRequest", "Destination bucket must exist.")
        if destination.versioning != "Enabled":
            raise S3Error("InvalidRequest", "Destination bucket must have versioning enabled.")
    await ctx.store.set_bucket_setting(ctx.bucket, configuration.SETTING, config.to_document())
    return web.Response()


async def delete_bucket_replication(ctx: Context) -> web.StreamResponse:
    await ctx.store.set_bucket_setting(ctx.bucket, configuration.SETTING, None)
    return web.Response(status=204)


OPERATIONS = {
    "GetBucketReplication": get_bucket_replication,
    "PutBucketReplication": put_bucket_replication,
    "DeleteBucketReplication": delete_bucket_replication,
}
