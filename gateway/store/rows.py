"""The catalog's rows as the store's values, for every catalog adapter: the text encodings of
attributes and manifests (JSON), and the columns a row of each table is read in. Both adapters
store the same text, so a catalog moved from one engine to the other is copied row for row.

An object version is a row of `objects` (the key's current version) or of `versions` (the
others, delete markers included; versions.py says why two tables): both hold the same
ROW_COLUMNS. `objects.version_id` is NULL for the null version; a row of `versions` has its
`seq` (a real version's id) and the flags `is_null` and `marker`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .api import Cursor
from .model import (
    NO_LOCK,
    NULL_VERSION,
    Bucket,
    DefaultRetention,
    Extent,
    ListEntry,
    ObjectAttrs,
    ObjectInfo,
    ObjectLock,
    Part,
    Upload,
)

BUCKET_COLUMNS = "name, owner, region, created_ns, versioning, object_lock, settings"
ROW_COLUMNS = "size, etag, content_md5, mtime_ns, attrs, manifest, parts, upload_id, lock"
OBJECT_COLUMNS = f"key, {ROW_COLUMNS}, version_id"
VERSION_COLUMNS = f"key, {ROW_COLUMNS}, seq, is_null, marker"
# What a scan of the versions table reads of each row (version_entry).
VERSION_ENTRY_COLUMNS = "key, seq, is_null, marker, size, etag, mtime_ns, attrs"
# What a scan of the objects table reads of each row (object_entry).
OBJECT_ENTRY_COLUMNS = "key, size, etag, mtime_ns, version_id, attrs"
_BUCKET_WIDTH = len(BUCKET_COLUMNS.split(", "))
UPLOAD_COLUMNS = "id, bucket, key, initiated_ns, owner, attrs, lock"
PART_COLUMNS = "number, size, etag, mtime_ns, manifest, checksum"


def encode_attrs(attrs: ObjectAttrs) -> str:
    fields: dict[str, Any] = {
        "content_type": attrs.content_type,
        "headers": attrs.headers,
        "meta": attrs.meta,
    }
    # What most objects do not have is not written at all.
    if attrs.checksums:
        fields["checksums"] = attrs.checksums
    if attrs.owner is not None:
        fields["owner"] = attrs.owner
    if attrs.acl is not None:
        fields["acl"] = attrs.acl
    if attrs.tags:
        fields["tags"] = attrs.tags
    if attrs.part_checksums:
        fields["part_checksums"] = attrs.part_checksums
    if attrs.sse:
        fields["sse"] = attrs.sse
    if attrs.sse_key is not None:
        fields["sse_key"] = attrs.sse_key
    if attrs.replication is not None:
        fields["replication"] = attrs.replication
    return json.dumps(fields, separators=(",", ":"))


def decode_attrs(text: str) -> ObjectAttrs:
    a = json.loads(text)
    return ObjectAttrs(
        a["content_type"],
        a["headers"],
        a["meta"],
        a.get("checksums", {}),
        a.get("owner"),
        a.get("acl"),
        tuple((k, v) for k, v in a.get("tags", ())),
        tuple(a.get("part_checksums", ())),
        a.get("sse", {}),
        a.get("sse_key"),
        a.get("replication"),
    )


def encode_manifest(extents: Iterable[Extent]) -> str:
    # An encrypted extent has a fourth element, its sealed data key: plain manifests keep
    # their three-element form.
    return json.dumps(
        [
            [e.blob, e.offset, e.length] if e.key is None else [e.blob, e.offset, e.length, e.key]
            for e in extents
        ],
        separators=(",", ":"),
    )


def decode_manifest(text: str) -> tuple[Extent, ...]:
    return tuple(Extent(*e) for e in json.loads(text))


def encode_lock(lock: ObjectLock) -> str | None:
    """A version's or upload's lock: NULL when nothing is set (most rows)."""
    if lock == NO_LOCK:
        return None
    return json.dumps([lock.mode, lock.retain_until_ns, lock.legal_hold])


def decode_lock(text: str | None) -> ObjectLock:
    return ObjectLock(*json.loads(text)) if text else NO_LOCK


def bucket_from_row(row: Sequence[Any]) -> Bucket:
    """A row of the buckets table (BUCKET_COLUMNS)."""
    name, owner, region, created_ns, versioning, object_lock, settings = row
    default = None
    if object_lock is not None:
        rule = json.loads(object_lock)
        default = DefaultRetention(*rule) if rule else None
    return Bucket(
        name,
        owner,
        region,
        created_ns,
        versioning,
        object_lock is not None,
        default,
        json.loads(settings) if settings else {},
    )


def bucket_values(bucket: Bucket) -> tuple[Any, ...]:
    """The values of BUCKET_COLUMNS for `bucket`."""
    return (
        bucket.name,
        bucket.owner,
        bucket.region,
        bucket.created_ns,
        bucket.versioning,
        object_lock_value(bucket),
        settings_value(bucket),
    )


def settings_value(bucket: Bucket) -> str | None:
    """buckets.settings: NULL while no configuration is set, else a JSON object."""
    return json.dumps(dict(bucket.settings), separators=(",", ":")) if bucket.settings else None


def object_lock_value(bucket: Bucket) -> str | None:
    """buckets.object_lock: NULL while Object Lock was never enabled, else the default
    retention as JSON ([] for none)."""
    if not bucket.object_lock:
        return None
    rule = bucket.default_retention
    return json.dumps([rule.mode, rule.days, rule.years] if rule else [])


def encode_parts(obj: ObjectInfo) -> str | None:
    return json.dumps(list(obj.parts)) if obj.parts else None


def row_values(obj: ObjectInfo) -> tuple[Any, ...]:
    """The values of ROW_COLUMNS for `obj`."""
    return (
        obj.size,
        obj.etag,
        obj.content_md5,
        obj.mtime_ns,
        encode_attrs(obj.attrs),
        encode_manifest(obj.extents),
        encode_parts(obj),
        obj.upload_id,
        encode_lock(obj.lock),
    )


def object_values(obj: ObjectInfo) -> tuple[Any, ...]:
    """The values of OBJECT_COLUMNS for `obj` (the key as its UTF-8 bytes)."""
    version_id = None if obj.version_id == NULL_VERSION else obj.version_id
    return (obj.key.encode(), *row_values(obj), version_id)


def version_values(obj: ObjectInfo, seq: str) -> tuple[Any, ...]:
    """The values of VERSION_COLUMNS for `obj` kept at `seq` among its key's versions."""
    return (
        obj.key.encode(),
        *row_values(obj),
        seq,
        obj.version_id == NULL_VERSION,
        obj.delete_marker,
    )


def object_from_row(bucket: str, row: Sequence[Any]) -> ObjectInfo:
    """A row of the objects table (OBJECT_COLUMNS)."""
    return _info(bucket, row[:10], row[10] or NULL_VERSION, False)


def bucket_and_object_from_row(
    bucket: str, row: Sequence[Any]
) -> tuple[Bucket, tuple[ObjectInfo, dict[str, bytes | None]] | None]:
    """A row of BUCKET_COLUMNS, OBJECT_COLUMNS (all NULL when the key has no object), then
    the first extent's blob id and inline bytes (CatalogReader.get_bucket_and_object)."""
    found = bucket_from_row(row[:_BUCKET_WIDTH])
    if row[_BUCKET_WIDTH] is None:  # an object's key is never NULL: there is none
        return found, None
    blob, data = row[-2:]
    obj = object_from_row(bucket, row[_BUCKET_WIDTH:-2])
    return found, (obj, {} if blob is None else {blob: data})


def version_from_row(bucket: str, row: Sequence[Any]) -> ObjectInfo:
    """A row of the versions table (VERSION_COLUMNS)."""
    seq, is_null, marker = row[10:]
    return _info(bucket, row[:10], NULL_VERSION if is_null else seq, bool(marker))


def _info(bucket: str, row: Sequence[Any], version_id: str, marker: bool) -> ObjectInfo:
    key, size, etag, content_md5, mtime_ns, attrs, manifest, parts, upload_id, lock = row
    return ObjectInfo(
        bucket=bucket,
        key=bytes(key).decode(),
        size=size,
        etag=etag,
        mtime_ns=mtime_ns,
        attrs=decode_attrs(attrs),
        extents=decode_manifest(manifest),
        content_md5=content_md5,
        parts=tuple(json.loads(parts)) if parts else (),
        upload_id=upload_id,
        version_id=version_id,
        delete_marker=marker,
        lock=decode_lock(lock),
    )


def _listed(attrs: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The checksums and storage class a listing shows, from a row's attrs."""
    a = json.loads(attrs)
    return tuple(a.get("checksums", {}).items()), a["headers"].get("x-amz-storage-class")


def object_entry(row: Sequence[Any]) -> tuple[Cursor, ListEntry]:
    """A row of OBJECT_ENTRY_COLUMNS, with its position (key bytes,)."""
    key, size, etag, mtime_ns, version_id, attrs = row
    key = bytes(key)
    checksums, storage_class = _listed(attrs)
    entry = ListEntry(
        key.decode(),
        size,
        etag,
        mtime_ns,
        version_id or NULL_VERSION,
        checksums=checksums,
        storage_class=storage_class,
    )
    return (key,), entry


def version_entry(row: Sequence[Any]) -> tuple[Cursor, ListEntry]:
    """A row of VERSION_ENTRY_COLUMNS, with its position (key bytes, seq); not the latest
    (the Store decides which version is)."""
    key, seq, is_null, marker, size, etag, mtime_ns, attrs = row
    version_id = NULL_VERSION if is_null else seq
    checksums, storage_class = _listed(attrs) if not marker else ((), None)
    entry = ListEntry(
        bytes(key).decode(),
        size,
        etag,
        mtime_ns,
        version_id,
        bool(marker),
        is_latest=False,
        checksums=checksums,
        storage_class=storage_class,
    )
    return (bytes(key), seq), entry


def upload_from_row(row: Sequence[Any]) -> Upload:
    upload_id, bucket, key, initiated_ns, owner, attrs, lock = row
    return Upload(
        upload_id,
        bucket,
        bytes(key).decode(),
        initiated_ns,
        owner,
        decode_attrs(attrs),
        decode_lock(lock),
    )


def upload_values(upload: Upload) -> tuple[Any, ...]:
    """The values of UPLOAD_COLUMNS for `upload`."""
    return (
        upload.id,
        upload.bucket,
        upload.key.encode(),
        upload.initiated_ns,
        upload.owner,
        encode_attrs(upload.attrs),
        encode_lock(upload.lock),
    )


def part_from_row(upload_id: str, row: Sequence[Any]) -> Part:
    number, size, etag, mtime_ns, manifest, checksum = row
    return Part(upload_id, number, size, etag, mtime_ns, decode_manifest(manifest), checksum)
