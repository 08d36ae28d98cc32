"""The Store's buckets: made, listed, configured (versioning, Object Lock, settings) and
deleted, with S3's rules."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from . import errors, objectlock, outbox, versions
from .api import CatalogTx
from .core import (
    Latest,
    StoreCore,
    change_bucket,
    lookup,
    require_bucket,
)
from .model import (
    NO_ORIGIN,
    Bucket,
    DefaultRetention,
    ObjectAttrs,
    ObjectInfo,
    Origin,
)


class Buckets(StoreCore):
    async def get_bucket(self, name: str) -> Bucket | None:
        return await self._read.get_bucket(name)

    async def get_bucket_and_object(self, name: str, key: str) -> tuple[Bucket | None, Latest]:
        """The bucket and its key's latest version in one catalog read, for a GET or HEAD of
        the latest version: open_object and head_object take the version as `latest`."""
        found = await self._read.get_bucket_and_object(name, key)
        return (None, None) if found is None else found

    async def list_buckets(self, owner: str | None = None) -> list[Bucket]:
        return await self._read.list_buckets(owner)

    async def create_bucket(
        self,
        name: str,
        owner: str,
        region: str,
        object_lock: bool = False,
        settings: Mapping[str, str] | None = None,
    ) -> Bucket:
        """A new bucket, with its first settings; with Object Lock, versioning is Enabled from
        the start."""
        bucket = Bucket(name, owner, region, time.time_ns(), settings=dict(settings or {}))
        if object_lock:
            bucket = replace(bucket, versioning=versions.ENABLED, object_lock=True)

        async def commit(tx: CatalogTx) -> Bucket:
            existing = await tx.insert_bucket(bucket)
            if existing is not None:
                if existing.owner == owner:
                    raise errors.BucketAlreadyOwnedByYou(BucketName=name)
                raise errors.BucketAlreadyExists(BucketName=name)
            return bucket

        return await self._write(commit)

    async def set_versioning(self, name: str, status: str) -> Bucket:
        """PutBucketVersioning: "Enabled" or "Suspended" (never back to unversioned)."""

        async def commit(tx: CatalogTx) -> Bucket:
            bucket = await change_bucket(tx, name)
            if bucket.object_lock and status != versions.ENABLED:
                raise objectlock.InvalidBucketState(objectlock.KEEPS_VERSIONING)
            bucket = replace(bucket, versioning=status)
            await tx.update_bucket(bucket)
            return bucket

        return await self._write(commit)

    async def set_lock_configuration(self, name: str, default: DefaultRetention | None) -> Bucket:
        """PutObjectLockConfiguration: Object Lock on (for good), with a default retention or
        none. Versioning must be Enabled."""

        async def commit(tx: CatalogTx) -> Bucket:
            bucket = await change_bucket(tx, name)
            if bucket.versioning != versions.ENABLED:
                raise objectlock.InvalidBucketState(objectlock.NEEDS_VERSIONING)
            bucket = replace(bucket, object_lock=True, default_retention=default)
            await tx.update_bucket(bucket)
            return bucket

        return await self._write(commit)

    async def set_bucket_setting(self, name: str, setting: str, value: str | None) -> Bucket:
        """Put (or, with None, delete) one of a bucket's configuration documents by name;
        the others are kept, whatever other node changes them at the same time."""

        async def commit(tx: CatalogTx) -> Bucket:
            bucket = await change_bucket(tx, name)
            settings = {k: v for k, v in bucket.settings.items() if k != setting}
            if value is not None:
                settings[setting] = value
            bucket = replace(bucket, settings=settings)
            await tx.update_bucket(bucket)
            return bucket

        return await self._write(commit)

    async def update_attrs(
        self,
        bucket: str,
        key: str,
        version_id: str | None,
        change: Callable[[ObjectInfo], ObjectAttrs],
        event: str | None = None,
        origin: Origin = NO_ORIGIN,
        detail: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Change what is stored beside a version's bytes (its ACL, its tags): `change` gets
        the latest version or the one by id, as it is in this transaction, and returns its
        new attrs. The bytes, the ETag and the time are untouched. `event` (ObjectTagging's,
        ObjectAcl:Put, a failed replication) is recorded in the outbox for `origin`'s request,
        with `detail` (outbox.py)."""

        async def commit(tx: CatalogTx) -> ObjectInfo:
            version = await lookup(tx, bucket, key, version_id)
            version = replace(version, attrs=change(version))
            await tx.update_version(version)
            if event is not None:
                record = await require_bucket(tx, bucket)
                await outbox.record(
                    tx,
                    self.fired(
                        record,
                        event,
                        key,
                        version.attrs.tags,
                        origin.replica,
                        version.attrs.kms_encrypted,
                    ),
                    record,
                    key,
                    event,
                    origin,
                    time.time_ns(),
                    version.version_id,
                    None,  # no size: the bytes did not change
                    version.etag,
                    detail,
                )
            return version

        return await self._write(commit)

    async def delete_bucket(self, name: str) -> None:
        """Delete an empty bucket (no object, no older version, no delete marker); its
        unfinished multipart uploads go with it."""

        async def commit(tx: CatalogTx) -> None:
            bucket = await require_bucket(tx, name)
            if not await tx.bucket_is_empty(name):
                # A bucket that has had versioning says what may be left (AWS's recording).
                raise errors.BucketNotEmpty(
                    errors.NOT_EMPTY_VERSIONED if bucket.versioning is not None else "",
                    BucketName=name,
                )
            for upload_id in await tx.upload_ids(name):
                for part in await tx.delete_upload(upload_id):
                    await tx.release(part.extents)
            await tx.delete_bucket(name)

        # Its uploads go with it: any number of statements, run off the event loop.
        await self._write(commit, long=True, frees=True)
