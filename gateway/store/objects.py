"""The Store's objects and versions: bodies staged and committed, copies over shared blobs,
deletes and delete markers, expiry, leases, retention and legal holds."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Mapping, Sequence
from dataclasses import replace

from .. import digest, metrics
from . import crypto, errors, objectlock, outbox, staging, versions
from .api import CatalogTx
from .core import (
    LONG,
    StoreCore,
    change_bucket,
    check_write,
    lookup,
    require_bucket,
    require_unchanged,
)
from .model import (
    NO_LOCK,
    NO_ORIGIN,
    Bucket,
    DeleteCondition,
    Deleted,
    Extent,
    ObjectAttrs,
    ObjectInfo,
    ObjectLock,
    Origin,
    OutboxRecord,
    StagedBlob,
    WriteCondition,
)
from .outbox import Backlog
from .reader import ObjectReader

# The lifecycle worker's deletions: AWS's records name the service as their principal.
LIFECYCLE = Origin(principal="s3.amazonaws.com", source_ip="s3.amazonaws.com")
# A resync's rows (`s3gw replicate resync`): the operator's, on the gateway's host.
RESYNC = Origin(principal="s3gw replicate resync")


class Objects(StoreCore):
    async def stage(
        self,
        chunks: AsyncIterable[bytes],
        observers: Sequence[digest.Digest] = (),
        encryption: crypto.Encryption | None = None,
    ) -> StagedBlob:
        """Receive a body: hash it (MD5 plus `observers`), make it durable, encrypted with
        `encryption` if given, and return the blob (staging.py). It is referenced by nothing
        until a commit; `discard` drops it."""
        return await staging.stage(
            chunks, self.files, self.pool, self.inline_max, observers, encryption, self.intents
        )

    async def discard(self, blob: StagedBlob) -> None:
        """Drop a staged blob that will not be committed (its request failed a check)."""
        if blob.data is None:
            await self._drop_staged([blob.id])

    async def put_object(
        self,
        bucket: str,
        key: str,
        blob: StagedBlob,
        attrs: ObjectAttrs,
        condition: WriteCondition | None = None,
        lock: ObjectLock = NO_LOCK,
        etag: str | None = None,
        keep_md5: bool = True,
        event: str = outbox.PUT,
        origin: Origin = NO_ORIGIN,
    ) -> ObjectInfo:
        """Commit a staged blob as the object `bucket/key`: its latest version, with the Object
        Lock asked for (or the bucket's default). The ETag is the MD5 of the bytes unless
        `etag` says otherwise (SSE-C, SSE-KMS); `keep_md5` False keeps no MD5 of them (SSE-C).
        `event`: what the outbox records of it (a PUT, a POST form's, a re-encrypted copy)
        for `origin`'s request."""
        md5 = blob.md5.hex()
        staged = [] if blob.data is not None else [blob.id]

        async def commit(tx: CatalogTx) -> ObjectInfo:
            await check_write(tx, bucket, key, condition)
            obj = ObjectInfo(
                bucket=bucket,
                key=key,
                size=blob.size,
                etag=etag or md5,
                # Taken inside the transaction so that commit order and Last-Modified order
                # agree.
                mtime_ns=time.time_ns(),
                attrs=attrs,
                extents=(Extent(blob.id, 0, blob.size, blob.key),) if blob.size else (),
                content_md5=md5 if keep_md5 else None,
                lock=lock,
            )
            return await self._put(tx, obj, [blob] if blob.size else [], event, origin)

        return await self._write(commit, staged)

    async def check_write(self, bucket: str, key: str, condition: WriteCondition) -> None:
        """An early look at a write condition (it is checked again when the write commits)."""
        await check_write(self._read, bucket, key, condition)

    async def delete_objects(
        self, bucket: str, keys: Sequence[str], origin: Origin = NO_ORIGIN
    ) -> list[Deleted]:
        """Delete keys (a missing key is not an error, as in S3): in a bucket whose
        versioning was ever set, each gets a delete marker."""
        done = await self.delete_versions(bucket, [(key, None) for key in keys], origin=origin)
        return [d for d in done if isinstance(d, Deleted)]  # a key alone is never locked

    async def delete_versions(
        self,
        bucket: str,
        targets: Sequence[tuple[str, str | None]],
        bypass_governance: Sequence[bool] = (),
        conditions: Sequence[DeleteCondition | None] = (),
        origin: Origin = NO_ORIGIN,
    ) -> list[Deleted | errors.StoreError]:
        """DeleteObject and DeleteObjects: each (key, version id) removes that version for
        good ("null": the null version); (key, None) deletes the key as the bucket's
        versioning says (versions.delete). By target: `bypass_governance`, whether a
        GOVERNANCE lock may be lifted (the caller's permission, decided per key), and
        `conditions`, what the version deleted must be (_check_delete). One transaction for
        them all; a target refused (a version Object Lock keeps, a condition not met) is
        answered with its error and the others go ahead. Each deletion is recorded in the
        outbox for `origin`'s request (outbox.py)."""

        # Rows are locked in key order whatever the request's order, so two nodes deleting
        # the same keys cannot deadlock (PostgreSQL would abort one, to be run again).
        order = sorted(range(len(targets)), key=lambda n: targets[n][0].encode())
        refused = (objectlock.ObjectLocked, errors.PreconditionFailed, errors.NoSuchKey)

        async def commit(tx: CatalogTx) -> list[Deleted | errors.StoreError]:
            record = await require_bucket(tx, bucket)
            now = time.time_ns()
            done: dict[int, Deleted | errors.StoreError] = {}
            for n in order:
                key, vid = targets[n]
                condition = conditions[n] if n < len(conditions) else None
                try:
                    if condition is not None and not await _check_delete(
                        tx, bucket, key, vid, condition
                    ):
                        done[n] = Deleted(key, vid)  # nothing the condition could hold for
                        continue
                    bypass = n < len(bypass_governance) and bypass_governance[n]
                    done[n] = deleted = await versions.delete(tx, record, key, vid, now, bypass)
                    await self._removed(tx, record, deleted, vid, now, origin, lifecycle=False)
                except refused as exc:
                    done[n] = exc  # raised before it changed anything
            return [done[n] for n in range(len(targets))]

        return await self._write(commit, long=len(targets) > LONG, frees=True)

    async def expire(self, bucket: str, key: str, version_id: str | None, mtime_ns: int) -> bool:
        """Lifecycle's delete: of the key (`version_id` None: as the bucket's versioning says,
        a delete marker where it was ever set) or of one version or marker by its id, only
        if what is there is still what the rule judged (the same time); a version Object Lock
        keeps stays. True when something was deleted."""

        async def commit(tx: CatalogTx) -> bool:
            record = await require_bucket(tx, bucket)
            try:
                seen = await lookup(tx, bucket, key, version_id)
            except versions.DeleteMarker as exc:
                if not exc.by_id:
                    return False  # the key is deleted already
                seen = exc.marker
            except (errors.NoSuchKey, versions.NoSuchVersion):
                return False
            if seen.mtime_ns != mtime_ns:
                return False
            now = time.time_ns()
            try:
                deleted = await versions.delete(tx, record, key, version_id, now)
            except objectlock.ObjectLocked:
                return False
            await self._removed(tx, record, deleted, version_id, now, LIFECYCLE, lifecycle=True)
            return True

        return await self._write(commit, frees=True)

    async def _removed(
        self,
        tx: CatalogTx,
        bucket: Bucket,
        deleted: Deleted,
        version_id: str | None,
        now_ns: int,
        origin: Origin,
        lifecycle: bool,
    ) -> None:
        """Record a deletion in the outbox: a delete marker made (the key deleted in a
        versioned bucket), else a removal (of the key, or of the version by its id)."""
        if version_id is None and deleted.delete_marker:
            event = outbox.EXPIRED_MARKER if lifecycle else outbox.MARKER
            version_id = deleted.marker_version_id
        else:
            event = outbox.EXPIRED if lifecycle else outbox.DELETE
        fired = self.fired(bucket, event, deleted.key, replica=origin.replica)
        await outbox.record(tx, fired, bucket, deleted.key, event, origin, now_ns, version_id)

    async def read_outbox(
        self, limit: int, parts: Sequence[int] | None = None
    ) -> list[OutboxRecord]:
        """The outbox's first `limit` rows, in order (outbox.py); of the partitions `parts`
        only (None: all), at most `limit` of each."""
        if parts is not None and not parts:
            return []
        return await self.catalog.scan(lambda reader: reader.read_outbox(limit, parts))

    async def count_outbox(self, parts: Sequence[int] | None = None) -> int:
        if parts is not None and not parts:
            return 0
        return await self.catalog.scan(lambda reader: reader.count_outbox(parts))

    async def outbox_backlog(self, arn: str, within: int = outbox.BACKLOG_WITHIN) -> Backlog:
        """How many rows of the outbox still name the destination `arn` (outbox.Backlog)."""
        fragment = outbox.naming(arn)
        scanned, naming = await self.catalog.scan(
            lambda reader: reader.count_outbox_naming(fragment, within)
        )
        return Backlog(naming, scanned >= within)

    async def acknowledge(self, seqs: Sequence[int]) -> None:
        """Remove rows of the outbox that every destination has acknowledged."""

        async def commit(tx: CatalogTx) -> None:
            await tx.delete_outbox(seqs)

        await self._write(commit)

    async def hold_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Hold the catalog's lease `name` (not a bucket's: take_lease) for `seconds` if it is
        free, expired or `holder`'s already: one holder at a time across every process and
        node sharing the catalog."""
        now = time.time_ns()
        return await self._write(
            lambda tx: tx.hold_lease(name, holder, now, now + int(seconds * 1e9))
        )

    async def hold_share(
        self, group: str, holder: str, parts: int, seconds: float, rebalance: bool = True
    ) -> frozenset[int]:
        """Hold a fair share of the `parts` partitions of the work `group` for `seconds`: the
        leases `GROUP/p/N`, each held by one process at a time across every node. The holder
        is a member of the group (its lease `GROUP/m/HOLDER`, renewed here) and renews the
        partitions it holds; with `rebalance`, a holder with more than its share (the parts
        divided among the members alive, rounded up) gives back its highest ones, and one
        with fewer takes partitions nobody holds (free, or lapsed) up to it. A process joining
        is a member at once and gets its share once the others gave theirs back (at their
        next rebalance). The partitions held after this (empty: none)."""
        now = time.time_ns()
        until = now + int(seconds * 1e9)
        partition, member = f"{group}/p/", f"{group}/m/"

        async def commit(tx: CatalogTx) -> frozenset[int]:
            live = await tx.live_leases(f"{group}/", now)
            await tx.hold_lease(member + holder, holder, now, until)
            members = {n for n in live if n.startswith(member)} | {member + holder}
            share = -(-parts // len(members))
            mine = sorted(
                int(n[len(partition) :])
                for n, h in live.items()
                if h == holder and n.startswith(partition)
            )
            held: list[int] = []
            for number in mine:
                if rebalance and len(held) >= share:
                    await tx.drop_lease(f"{partition}{number}", holder)
                elif await tx.hold_lease(f"{partition}{number}", holder, now, until):
                    held.append(number)
            for number in range(parts) if rebalance else ():
                if len(held) >= share:
                    break
                name = f"{partition}{number}"
                if name not in live and await tx.hold_lease(name, holder, now, until):
                    held.append(number)
            return frozenset(held)

        return await self._write(commit)

    async def drop_share(self, group: str, holder: str) -> None:
        """Give back every lease `holder` has of the work `group` (hold_share): its
        partitions and its membership."""

        async def commit(tx: CatalogTx) -> None:
            await tx.drop_leases(f"{group}/", holder)

        await self._write(commit)

    async def drop_lease(self, name: str, holder: str) -> None:
        """Give back the catalog's lease `name` if `holder` holds it."""

        async def commit(tx: CatalogTx) -> None:
            await tx.drop_lease(name, holder)

        await self._write(commit)

    async def take_lease(self, bucket: str, name: str, holder: str, seconds: float) -> bool:
        """Hold the bucket's lease `name` for `seconds` if it is free, expired, or `holder`'s
        already: one holder at a time across every process and node sharing the catalog."""

        async def commit(tx: CatalogTx) -> bool:
            record = await change_bucket(tx, bucket)
            setting = f"lease:{name}"
            now = time.time_ns()
            held = record.settings.get(setting)
            if held is not None:
                other, _, until = held.rpartition(" ")
                if other != holder and int(until) > now:
                    return False
            settings = dict(record.settings)
            settings[setting] = f"{holder} {now + int(seconds * 1e9)}"
            await tx.update_bucket(replace(record, settings=settings))
            return True

        return await self._write(commit)

    async def release_lease(self, bucket: str, name: str, holder: str) -> bool:
        """Give back the bucket's lease `name` if `holder` holds it, so that another process
        may take it at once rather than when it lapses; True if it was given back. Anyone
        else's lease, or a bucket gone, is left as it is."""

        async def commit(tx: CatalogTx) -> bool:
            record = await tx.lock_bucket(bucket)
            setting = f"lease:{name}"
            held = None if record is None else record.settings.get(setting)
            if record is None or held is None or held.rpartition(" ")[0] != holder:
                return False
            settings = {k: v for k, v in record.settings.items() if k != setting}
            await tx.update_bucket(replace(record, settings=settings))
            return True

        return await self._write(commit)

    async def set_retention(
        self,
        bucket: str,
        key: str,
        version_id: str | None,
        mode: str | None,
        until_ns: int | None,
        bypass_governance: bool = False,
    ) -> ObjectInfo:
        """PutObjectRetention on the latest version or one by id ((None, None): remove it),
        as objectlock.check_retention allows."""

        async def commit(tx: CatalogTx) -> ObjectInfo:
            version = await lookup(tx, bucket, key, version_id)
            objectlock.check_retention(
                version.lock, mode, until_ns, bypass_governance, time.time_ns()
            )
            version = replace(
                version, lock=replace(version.lock, mode=mode, retain_until_ns=until_ns)
            )
            await tx.update_version(version)
            return version

        return await self._write(commit)

    async def set_legal_hold(
        self, bucket: str, key: str, version_id: str | None, status: str
    ) -> ObjectInfo:
        """PutObjectLegalHold: ON or OFF, on the latest version or one by id."""

        async def commit(tx: CatalogTx) -> ObjectInfo:
            version = await lookup(tx, bucket, key, version_id)
            version = replace(version, lock=replace(version.lock, legal_hold=status))
            await tx.update_version(version)
            return version

        return await self._write(commit)

    async def put_replica(self, bucket: str, version: ObjectInfo, origin: Origin) -> ObjectInfo:
        """The replication worker's copy of `version` (of another bucket here) into `bucket`:
        the same bytes (its extents shared: no byte is copied), id, time, metadata, tags and
        Object Lock, with status REPLICA (versions.put_replica); an object or a delete marker.
        `origin` is the worker's (Origin.replica)."""
        event = outbox.MARKER if version.delete_marker else outbox.PUT
        obj = replace(version, bucket=bucket)

        async def commit(tx: CatalogTx) -> ObjectInfo:
            return await self._put(tx, obj, [], event, origin)

        return await self._write(commit)

    async def set_replication(
        self,
        bucket: str,
        key: str,
        version_id: str,
        status: str,
        origin: Origin = NO_ORIGIN,
        failure: Mapping[str, str] | None = None,
    ) -> ObjectInfo | None:
        """A version's x-amz-replication-status, once the worker has copied it (COMPLETED) or
        cannot (FAILED: with the event s3:Replication:OperationFailedReplication, its `failure`
        the record's replicationEventData, for `origin`); None if the version is gone
        meanwhile."""
        event = outbox.REPLICATION_FAILED if failure is not None else None
        try:
            return await self.update_attrs(
                bucket,
                key,
                version_id,
                lambda v: replace(v.attrs, replication=status),
                event,
                origin,
                failure,
            )
        except (errors.NoSuchKey, errors.NoSuchBucket, versions.NoSuchVersion):
            return None
        except versions.DeleteMarker:
            return None  # a delete marker shows no status (a HEAD of one is 405)

    async def requeue_replication(
        self, bucket: str, key: str, version_id: str, rule_id: str | None = None
    ) -> str:
        """Queue an existing version for the bucket's replication rules that apply to it now
        (only `rule_id` if given), as if it had just been written: its status PENDING and an
        outbox row of an ObjectCreated:Put naming those rules, in one transaction, so the
        notifications worker copies it as it copies new versions. outbox.QUEUED, REPLICATED
        (its copies are made) or SKIPPED (no rule copies it, or it is gone or a delete
        marker): outbox.requeued says which."""

        async def commit(tx: CatalogTx) -> str:
            record = await require_bucket(tx, bucket)
            version = await versions.find(tx, bucket, key, version_id)
            if version is None or version.delete_marker:
                return outbox.SKIPPED
            attrs = version.attrs
            fired = self.fired(record, outbox.PUT, key, attrs.tags, kms=attrs.kms_encrypted)
            sse_c = version.attrs.sse_key is not None
            outcome, targets = outbox.requeued(version.attrs.replication, sse_c, fired, rule_id)
            if outcome != outbox.QUEUED:
                return outcome
            pending = replace(version.attrs, replication="PENDING")
            await tx.update_version(replace(version, attrs=pending))
            await outbox.record(
                tx,
                targets,
                record,
                key,
                outbox.PUT,
                RESYNC,
                time.time_ns(),
                version.version_id,
                version.size,
                version.etag,
            )
            return outcome

        return await self._write(commit)

    async def copy_object(
        self,
        source: ObjectInfo,
        bucket: str,
        key: str,
        attrs: ObjectAttrs,
        etag: str,
        learnt_md5: str | None = None,
        lock: ObjectLock = NO_LOCK,
        rewrap: crypto.Encryption | None = None,
        content_md5: str | None = None,
        condition: WriteCondition | None = None,
        origin: Origin = NO_ORIGIN,
    ) -> ObjectInfo:
        """A new object over the source's extents: metadata only, whatever the size. It does
        not take the source's Object Lock: `lock` (or the bucket's default) applies;
        `condition`: what the destination's current object must be (checked in the commit).

        `source` is the version the caller checked (conditions, ETag); if the source changed
        before the commit, SourceChanged is raised and the caller starts again. `learnt_md5`,
        when the caller hashed a multipart source, is remembered on it for the next copy.
        `rewrap`: the destination's encryption, under which the source's data keys are
        wrapped again (the blobs are still shared); `content_md5`: the bytes' MD5 when the
        ETag is not it ("" when none is to be kept).
        """
        extents = source.extents if rewrap is None else self.rewrap(source.extents, rewrap)

        async def commit(tx: CatalogTx) -> ObjectInfo:
            await require_unchanged(tx, source)
            await check_write(tx, bucket, key, condition)
            if learnt_md5 is not None:
                await tx.remember_content_md5(source, learnt_md5)
            obj = ObjectInfo(
                bucket=bucket,
                key=key,
                size=source.size,
                etag=etag,
                mtime_ns=time.time_ns(),
                attrs=attrs,
                extents=extents,
                content_md5=etag if content_md5 is None else content_md5 or None,
                lock=lock,
            )
            return await self._put(tx, obj, [], outbox.COPY, origin)

        return await self._write(commit)

    def rewrap(
        self, extents: tuple[Extent, ...], encryption: crypto.Encryption
    ) -> tuple[Extent, ...]:
        """The extents with each data key wrapped under `encryption` (server-managed keys
        only: docs/encryption.md says why a customer's key is never re-wrapped)."""
        assert self.keys is not None
        opener = self.keys.opener()
        done: dict[str, str] = {}
        out = []
        for e in extents:
            if e.key is None or crypto.label_of(e.key) == encryption.label:
                out.append(e)
                continue
            if e.key not in done:
                done[e.key] = encryption.seal(opener(e.key))
            out.append(replace(e, key=done[e.key]))
        return tuple(out)

    def reader(
        self,
        obj: ObjectInfo,
        customer_key: bytes | None = None,
        known: Mapping[str, bytes | None] | None = None,
    ) -> ObjectReader:
        """A reader of `obj`'s bytes, not opened yet (`customer_key`: an SSE-C object's;
        `known`: its blobs as its lookup read them)."""
        keys = self.keys.opener(customer_key) if self.keys is not None else None
        return ObjectReader(self._read, self.files, obj, keys, self.pool, known)

    async def content_md5(
        self,
        obj: ObjectInfo,
        start: int = 0,
        length: int | None = None,
        customer_key: bytes | None = None,
    ) -> bytes:
        """The MD5 of (a range of) an object's bytes, read and hashed off the event loop."""
        length = obj.size - start if length is None else length
        reader = self.reader(obj, customer_key)
        try:
            await reader.open()
        except FileNotFoundError as exc:
            reader.close()
            raise errors.SourceChanged() from exc
        try:
            value = await reader.md5(start, length, self.pool)
        finally:
            reader.close()
        metrics.MD5_BYTES.inc(length)
        return value


async def _check_delete(
    tx: CatalogTx, bucket: str, key: str, version_id: str | None, condition: DeleteCondition
) -> bool:
    """Does the version a conditional delete names (the current object, or the one by id)
    meet its condition? PreconditionFailed if not. When there is no such object: NoSuchKey
    for If-Match on the key (AWS's general purpose buckets), else False (nothing to delete,
    and nothing is: AWS's directory buckets answer 204)."""
    if version_id is None:
        target = await tx.get_object(bucket, key)
    else:
        target = await versions.find(tx, bucket, key, version_id)
    if target is None or target.delete_marker:
        if condition.if_match is not None and version_id is None:
            raise errors.NoSuchKey(Key=key)
        return False
    if condition.if_match is not None and not digest.matches(condition.if_match, target.etag):
        raise errors.PreconditionFailed(Condition="If-Match")
    if condition.size is not None and condition.size != target.size:
        raise errors.PreconditionFailed(Condition="x-amz-if-match-size")
    if condition.modified_s is not None and condition.modified_s != target.mtime_ns // 10**9:
        raise errors.PreconditionFailed(Condition="x-amz-if-match-last-modified-time")
    return True
