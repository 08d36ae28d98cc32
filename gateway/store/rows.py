"""The catalog's rows as the store's values, for every catalog adapter: the text encodings of
attributes and manifests (JSON), and the columns a row of each table is read in. Both adapters
store the same text, so a catalog moved from one engine to the other is copied row for row."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .model import Extent, ObjectAttrs, ObjectInfo, Part, Upload

OBJECT_COLUMNS = "key, size, etag, content_md5, mtime_ns, attrs, manifest, parts, upload_id"
UPLOAD_COLUMNS = "id, bucket, key, initiated_ns, owner, attrs"
PART_COLUMNS = "number, size, etag, mtime_ns, manifest, checksum"


def encode_attrs(attrs: ObjectAttrs) -> str:
    fields = {"content_type": attrs.content_type, "headers": attrs.headers, "meta": attrs.meta}
    if attrs.checksums:
        fields["checksums"] = attrs.checksums
    return json.dumps(fields, separators=(",", ":"))


def decode_attrs(text: str) -> ObjectAttrs:
    a = json.loads(text)
    return ObjectAttrs(a["content_type"], a["headers"], a["meta"], a.get("checksums", {}))


def encode_manifest(extents: Iterable[Extent]) -> str:
    return json.dumps([[e.blob, e.offset, e.length] for e in extents], separators=(",", ":"))


def decode_manifest(text: str) -> tuple[Extent, ...]:
    return tuple(Extent(b, o, n) for b, o, n in json.loads(text))


def encode_parts(obj: ObjectInfo) -> str | None:
    return json.dumps(list(obj.parts)) if obj.parts else None


def object_values(obj: ObjectInfo) -> tuple[Any, ...]:
    """The values of OBJECT_COLUMNS for `obj` (the key as its UTF-8 bytes)."""
    return (
        obj.key.encode(),
        obj.size,
        obj.etag,
        obj.content_md5,
        obj.mtime_ns,
        encode_attrs(obj.attrs),
        encode_manifest(obj.extents),
        encode_parts(obj),
        obj.upload_id,
    )


def object_from_row(bucket: str, row: Sequence[Any]) -> ObjectInfo:
    key, size, etag, content_md5, mtime_ns, attrs, manifest, parts, upload_id = row
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
    )


def upload_from_row(row: Sequence[Any]) -> Upload:
    upload_id, bucket, key, initiated_ns, owner, attrs = row
    return Upload(upload_id, bucket, bytes(key).decode(), initiated_ns, owner, decode_attrs(attrs))


def part_from_row(upload_id: str, row: Sequence[Any]) -> Part:
    number, size, etag, mtime_ns, manifest, checksum = row
    return Part(upload_id, number, size, etag, mtime_ns, decode_manifest(manifest), checksum)
