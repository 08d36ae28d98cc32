"""Versions and delete markers: S3's versioning rules, once, over the Catalog protocol.

Where versions live. A catalog keeps two tables of object rows:

- `objects` holds the current version of each key when that version is an object. It is what
  ListObjects and ListObjectsV2 scan, and what GET and HEAD without `versionId` look up, so a
  page of a listing and a GET cost the same in a bucket with a million older versions as in an
  unversioned one, and an unversioned bucket's PUT and DELETE run the statements they ran
  before versioning existed. A data folder from before versioning upgrades in place: its rows
  are already the current null versions.
- `versions` holds every other version: noncurrent objects and delete markers, including a
  marker that is the latest. ListObjectVersions merges the two scans.

The other layout, one table with a "latest" flag and a partial index, would have listings scan
an index of its own and every versioned write flip two flags; this one keeps the hot paths on
the primary key and costs a move of one row when a version becomes noncurrent.

The invariants, kept by this module alone (the adapters store and scan rows):

- A key has a row in `objects` exactly when its latest version is an object; otherwise its
  newest row in `versions`, if any, is a delete marker and the latest.
- Within a key, `versions` orders rows by `seq` ascending, newest first. A version's id is its
  `seq`: 32 characters of base32hex (sortable, URL-safe), an inverted nanosecond timestamp then
  96 random bits, so ids sort newest first without a per-key counter and two nodes never make
  the same one. The null version is at the `seq` its time gives (zero random bits).
- Time only moves forward within a key: a new version is stamped later than the key's latest
  (by a nanosecond if a node's clock lags), so Last-Modified order, id order and the order of
  the writes agree.
- At most one null version per key (a unique partial index says so too).

References to blobs move with the rows: moving a version between the tables keeps them; only
removing a version for good releases them.
"""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import replace

from . import objectlock
from .api import CatalogReader, CatalogTx, Cursor
from .errors import StoreError
from .listing import roll_up
from .model import NULL_VERSION, Bucket, Deleted, ListEntry, ObjectAttrs, ObjectInfo, VersionsPage

ENABLED = "Enabled"
SUSPENDED = "Suspended"

_MAX_NS = (1 << 64) - 1
_ID = re.compile(r"[0-9A-V]{32}")


class NoSuchVersion(StoreError):
    code = "NoSuchVersion"


class DeleteMarker(StoreError):
    """The latest version is a delete marker (a GET without `versionId`: 404 NoSuchKey), or
    the version asked for by id is one (405 MethodNotAllowed). The protocol layer answers with
    the marker's headers."""

    def __init__(self, marker: ObjectInfo, by_id: bool) -> None:
        if by_id:
            super().__init__("", ResourceType="DeleteMarker")
        else:
            super().__init__("", Key=marker.key)
        self.code = "MethodNotAllowed" if by_id else "NoSuchKey"
        self.marker = marker
        self.by_id = by_id


def new_version_id(mtime_ns: int) -> str:
    return _encode(mtime_ns, secrets.token_bytes(12))


def is_version_id(text: str) -> bool:
    """Could `text` be a version id this store made (or "null")?"""
    return text == NULL_VERSION or _ID.fullmatch(text) is not None


def _encode(mtime_ns: int, tail: bytes) -> str:
    return base64.b32hexencode((_MAX_NS - mtime_ns).to_bytes(8, "big") + tail).decode()


def seq_of(version: ObjectInfo) -> str:
    """A version's place among its key's versions (ascending: newest first)."""
    if version.version_id != NULL_VERSION:
        return version.version_id
    return _encode(version.mtime_ns, bytes(12))


# --- reads -----------------------------------------------------------------------------------


async def find(reader: CatalogReader, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
    """A version (object or delete marker) by its id, current or not."""
    current = await reader.get_object(bucket, key)
    if current is not None and current.version_id == version_id:
        return current
    return await reader.get_version(bucket, key, version_id)


async def latest_marker(reader: CatalogReader, bucket: str, key: str) -> ObjectInfo | None:
    """The delete marker that is the key's latest version, when the key has no current
    object (the caller has looked)."""
    newest = await reader.newest_version(bucket, key)
    return newest if newest is not None and newest.delete_marker else None


# --- writes ----------------------------------------------------------------------------------


async def _drop_current(tx: CatalogTx, bucket: str, key: str) -> None:
    """An unversioned bucket's key loses its object for good: nothing of it is kept, so its
    extents are all it takes to release it."""
    extents = await tx.drop_object(bucket, key)
    if extents is not None:
        await tx.release(extents)


async def _make_way(tx: CatalogTx, bucket: Bucket, key: str, now_ns: int) -> tuple[str, int]:
    """Before a new latest version of `key` is written: the current version becomes noncurrent
    (Enabled), or the null version goes (unversioned, Suspended). Gives the new version's id
    and time."""
    if bucket.versioning is None:
        await _drop_current(tx, bucket.name, key)
        return NULL_VERSION, now_ns
    current = await tx.delete_object(bucket.name, key)
    newest = current if current is not None else await tx.newest_version(bucket.name, key)
    mtime = now_ns if newest is None else max(now_ns, newest.mtime_ns + 1)
    version_id = new_version_id(mtime) if bucket.versioning == ENABLED else NULL_VERSION
    null_gone = False
    if current is not None:
        if current.version_id == NULL_VERSION == version_id:
            await tx.release(current.extents)  # a suspended write replaces the null version
            null_gone = True
        else:
            await tx.insert_version(current, seq_of(current))
    if version_id == NULL_VERSION and not null_gone:
        older = await tx.delete_version(bucket.name, key, NULL_VERSION)
        if older is not None:
            await tx.release(older.extents)
    return version_id, mtime


async def put(tx: CatalogTx, bucket: Bucket, obj: ObjectInfo) -> ObjectInfo:
    """Write `obj` as its key's latest version (its references already taken): a new version
    (Enabled), or the null version (unversioned, Suspended), with the lock it asked for or
    the bucket's default retention. Gives it with its id, time and lock."""
    version_id, mtime = await _make_way(tx, bucket, obj.key, obj.mtime_ns)
    lock = objectlock.on_write(bucket, obj.lock, mtime)
    final = replace(obj, version_id=version_id, mtime_ns=mtime, lock=lock)
    if not await tx.insert_object(final):
        raise StoreError("the bucket went away mid-write")  # the caller checked it exists
    return final


async def put_replica(tx: CatalogTx, bucket: Bucket, obj: ObjectInfo) -> ObjectInfo:
    """Write a version copied from another bucket (replication) with its own id and time, an
    object or a delete marker: the key's latest if it is newer than the key's newest version,
    else one of its older versions (copies of one key arrive in order, but the destination may
    have versions of its own). A version of that id there already (a copy made again, at
    least once) stays as it is."""
    assert obj.version_id is not None
    found = await find(tx, bucket.name, obj.key, obj.version_id)
    if found is not None:
        await tx.release(obj.extents)  # the caller's references for a copy not made
        return found
    current = await tx.get_object(bucket.name, obj.key)
    newest = current if current is not None else await tx.newest_version(bucket.name, obj.key)
    if newest is not None and seq_of(newest) < seq_of(obj):
        await tx.insert_version(obj, seq_of(obj))  # newer versions are there: an older one
        return obj
    if current is not None:
        await tx.delete_object(bucket.name, obj.key)
        await tx.insert_version(current, seq_of(current))
    if obj.delete_marker:
        await tx.insert_version(obj, seq_of(obj))
    elif not await tx.insert_object(obj):
        raise StoreError("the bucket went away mid-write")
    return obj


async def delete(
    tx: CatalogTx,
    bucket: Bucket,
    key: str,
    version_id: str | None,
    now_ns: int,
    bypass_governance: bool = False,
) -> Deleted:
    """DeleteObject of one key: the key alone (`version_id` None) or one version by its id
    (objectlock.ObjectLocked, before anything changes, if a lock keeps that version)."""
    if version_id is not None:
        return await _remove(tx, bucket.name, key, version_id, now_ns, bypass_governance)
    if bucket.versioning is None:
        await _drop_current(tx, bucket.name, key)
        return Deleted(key, None)
    marker_id, mtime = await _make_way(tx, bucket, key, now_ns)
    marker = ObjectInfo(
        bucket.name, key, 0, "", mtime, ObjectAttrs(), (), version_id=marker_id, delete_marker=True
    )
    await tx.insert_version(marker, seq_of(marker))
    return Deleted(key, None, delete_marker=True, marker_version_id=marker_id)


async def _remove(
    tx: CatalogTx, bucket: str, key: str, version_id: str, now_ns: int, bypass: bool
) -> Deleted:
    """Remove one version for good (an id that names nothing is not an error, as on S3); if it
    was the latest, the next newest takes its place."""
    current = await tx.get_object(bucket, key)
    is_current = current is not None and current.version_id == version_id
    gone = current if is_current else await tx.get_version(bucket, key, version_id)
    if gone is None:
        return Deleted(key, version_id)
    if objectlock.protected(gone.lock, bypass, now_ns):
        raise objectlock.ObjectLocked()
    if is_current:
        await tx.drop_object(bucket, key)  # `gone` is that row, read above
    else:
        await tx.delete_version(bucket, key, version_id)
    await tx.release(gone.extents)
    if is_current or current is None:
        await _promote(tx, bucket, key)
    if gone.delete_marker:
        return Deleted(key, version_id, delete_marker=True, marker_version_id=version_id)
    return Deleted(key, version_id)


async def _promote(tx: CatalogTx, bucket: str, key: str) -> None:
    """The key has no current object: if its newest remaining version is an object, that
    version is the latest now and moves to the objects table."""
    newest = await tx.newest_version(bucket, key)
    if newest is not None and not newest.delete_marker:
        await tx.delete_version(bucket, key, newest.version_id)
        await tx.insert_object(newest)


# --- ListObjectVersions ----------------------------------------------------------------------


async def list_page(
    reader: CatalogReader,
    bucket: str,
    prefix: str,
    delimiter: str,
    key_marker: str,
    version_id_marker: str,
    max_keys: int,
) -> VersionsPage:
    """One page of versions and delete markers after (`key_marker`, `version_id_marker`):
    the current objects and the versions table merged in (key bytes, newest first) order,
    rolled up by the listing's one roll-up."""
    cursor = await _start(reader, bucket, key_marker, version_id_marker)

    async def seek(
        at: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, ListEntry]]:
        # A current object sits before its key's older versions: position (key, "").
        inside = len(at) > 1 and at[1] != ""
        current = await reader.scan_objects(bucket, at[:1], inclusive and not inside, end, limit)
        older = await reader.scan_versions(bucket, at, inclusive, end, limit)
        rows = [((position[0], ""), entry) for position, entry in current] + older
        rows.sort(key=lambda row: row[0])
        return rows[:limit]

    rolled = await roll_up(seek, prefix.encode(), delimiter.encode(), cursor, False, max_keys)
    entries = await _mark_latest(reader, bucket, rolled.items, cursor)
    next_key = next_version = None
    if rolled.truncated:
        next_key = rolled.last
        if entries and entries[-1].key == rolled.last:
            next_version = entries[-1].version_id
    return VersionsPage(tuple(entries), rolled.prefixes, rolled.truncated, next_key, next_version)


async def _start(reader: CatalogReader, bucket: str, key: str, version_id: str) -> Cursor:
    """The position a page starts after: past every version of `key` alone, or past one of
    them. An id is its own position, even once that version is gone."""
    if not key or not version_id:
        return (key.encode(),)
    if version_id != NULL_VERSION:
        return (key.encode(), version_id)
    null = await reader.get_version(bucket, key, NULL_VERSION)
    # The null version is current (or gone): the page goes on with the key's older versions.
    return (key.encode(), seq_of(null) if null is not None else "")


async def _mark_latest(
    reader: CatalogReader, bucket: str, entries: list[ListEntry], cursor: Cursor
) -> list[ListEntry]:
    """Set IsLatest: a current object is the latest; so is the first row of a key in the
    versions table when no current object came before it. A page that starts inside a key
    looks that key's latest up."""
    out: list[ListEntry] = []
    previous: str | None = None
    for entry in entries:
        first = entry.key != previous
        previous = entry.key
        if entry.is_latest or not first:
            out.append(entry)
            continue
        latest = True
        if len(cursor) > 1 and entry.key.encode() == cursor[0]:
            latest = await _is_latest(reader, bucket, entry)
        out.append(replace(entry, is_latest=latest))
    return out


async def _is_latest(reader: CatalogReader, bucket: str, entry: ListEntry) -> bool:
    """Is this row of the versions table its key's latest version?"""
    if await reader.get_object(bucket, entry.key) is not None:
        return False
    newest = await reader.newest_version(bucket, entry.key)
    return newest is not None and newest.version_id == entry.version_id
