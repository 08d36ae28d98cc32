"""ListObjects (v1) and ListObjectsV2."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from urllib.parse import quote_plus

from aiohttp import web

from ... import digest
from ...limits import MAX_KEYS
from ...store import ListEntry, ListPage
from .. import checksums, xml
from ..context import Context
from ..errors import invalid_argument
from ..params import check_version_id, parse_int


def max_count(ctx: Context, name: str, empty_is_absent: bool = False) -> int:
    """max-keys, max-uploads, max-parts: 0 to 1000 (more is capped), 1000 when absent (or
    empty, where AWS takes that as absent)."""
    raw = ctx.query.get(name)
    if raw is None or (empty_is_absent and not raw):
        return MAX_KEYS
    value = (
        parse_int(raw) if len(raw) <= 18 else (MAX_KEYS if raw.isascii() and raw.isdigit() else -1)
    )
    if value < 0:
        raise invalid_argument(f"Provided {name} not an integer or within integer range", name, raw)
    return min(value, MAX_KEYS)


Encode = Callable[[str], str]


def _url_encode(name: str) -> str:
    return quote_plus(name, safe="/")


def encoder(ctx: Context) -> tuple[str | None, Encode]:
    """EncodingType=url: names are URL-encoded in the response (the only encoding S3 has)."""
    encoding = ctx.query.get("encoding-type")
    if encoding is None:
        return None, str
    if encoding.lower() != "url":
        raise invalid_argument(
            "Invalid Encoding Method specified in Request", "encoding-type", encoding
        )
    return "url", _url_encode


async def _page(ctx: Context, after: str) -> tuple[ListPage, str, str, int]:
    prefix = ctx.query.get("prefix", "")
    delimiter = ctx.query.get("delimiter", "")
    max_keys = max_count(ctx, "max-keys")
    page = await ctx.store.list_objects(ctx.bucket, prefix, delimiter, after, max_keys)
    return page, prefix, delimiter, max_keys


def checksum_nodes(entry: ListEntry) -> list[xml.Node]:
    """ChecksumAlgorithm and ChecksumType of a listed object (AWS lists both since 2025;
    LocalStack's recordings of Feb 2026): its stored checksum's algorithm, and FULL_OBJECT
    unless it was made COMPOSITE from the parts'. An object stored without any checksum
    (written before the gateway added CRC64NVME to every object) lists neither, as AWS's
    objects from before its default do."""
    algorithm = kind = None
    for name, value in entry.checksums:
        if name == "x-amz-checksum-type":
            kind = value
        elif algorithm is None:
            algorithm = checksums.by_header(name)
    if algorithm is None:
        return []
    return [("ChecksumAlgorithm", algorithm.name), ("ChecksumType", kind or checksums.FULL_OBJECT)]


def storage_class(entry: ListEntry) -> str:
    return entry.storage_class or "STANDARD"


def _contents(page: ListPage, encode: Encode, owner: list[xml.Node] | None) -> list[xml.Node]:
    nodes: list[xml.Node] = [
        (
            "Contents",
            [
                ("Key", encode(e.key)),
                ("LastModified", xml.iso8601_seconds(e.mtime_ns)),
                ("ETag", digest.quote(e.etag)),
                *checksum_nodes(e),
                ("Size", e.size),
                ("Owner", owner),
                ("StorageClass", storage_class(e)),
            ],
        )
        for e in page.entries
    ]
    nodes += [("CommonPrefixes", [("Prefix", encode(p))]) for p in page.common_prefixes]
    return nodes


def _bucket_owner(ctx: Context) -> list[xml.Node]:
    bucket = ctx.bucket_record
    return ctx.owner(bucket.owner if bucket else ctx.user.canonical_id)


async def list_objects(ctx: Context) -> web.StreamResponse:
    encoding, encode = encoder(ctx)
    marker = ctx.query.get("marker", "")
    page, prefix, delimiter, max_keys = await _page(ctx, marker)
    nodes: list[xml.Node] = [
        ("Name", ctx.bucket),
        ("Prefix", encode(prefix)),
        ("Marker", encode(marker)),
        ("MaxKeys", max_keys),
        ("Delimiter", encode(delimiter) if delimiter else None),
        ("EncodingType", encoding),
        ("IsTruncated", page.truncated),
        # AWS returns NextMarker only with a delimiter; without one the last key serves.
        ("NextMarker", encode(page.last) if page.truncated and delimiter else None),
    ]
    nodes += _contents(page, encode, _bucket_owner(ctx))
    return web.Response(body=xml.render("ListBucketResult", nodes), content_type="application/xml")


def _token(last: str) -> str:
    return base64.urlsafe_b64encode(last.encode()).decode()


def _from_token(token: str) -> str:
    try:
        # validate: urlsafe_b64decode alone drops characters outside the alphabet.
        return base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise invalid_argument(
            "The continuation token provided is incorrect", "continuation-token", token
        ) from exc


async def list_objects_v2(ctx: Context) -> web.StreamResponse:
    encoding, encode = encoder(ctx)
    token = ctx.query.get("continuation-token")
    start_after = ctx.query.get("start-after", "")
    after = _from_token(token) if token is not None else start_after
    page, prefix, delimiter, max_keys = await _page(ctx, after)
    fetch_owner = ctx.query.get("fetch-owner", "").lower() == "true"
    nodes: list[xml.Node] = [
        ("Name", ctx.bucket),
        ("Prefix", encode(prefix)),
        ("MaxKeys", max_keys),
        ("KeyCount", len(page.entries) + len(page.common_prefixes)),
        ("Delimiter", encode(delimiter) if delimiter else None),
        ("EncodingType", encoding),
        ("IsTruncated", page.truncated),
        ("ContinuationToken", token),
        (
            "NextContinuationToken",
            _token(page.last) if page.truncated and page.last is not None else None,
        ),
        ("StartAfter", encode(start_after) if start_after else None),
    ]
    nodes += _contents(page, encode, _bucket_owner(ctx) if fetch_owner else None)
    return web.Response(body=xml.render("ListBucketResult", nodes), content_type="application/xml")


async def list_object_versions(ctx: Context) -> web.StreamResponse:
    """Versions and delete markers in one sequence (keys ascending, newest first within a
    key), as AWS lists them; `max-keys` counts both, and the next page starts after the last
    entry returned (AWS's recording, where its API text says "first key not returned")."""
    encoding, encode = encoder(ctx)
    key_marker = ctx.query.get("key-marker", "")
    version_marker = ctx.query.get("version-id-marker", "")
    if version_marker and not key_marker:
        raise invalid_argument(
            "A version-id marker cannot be specified without a key marker.",
            "version-id-marker",
            version_marker,
        )
    if version_marker:
        check_version_id(version_marker, ctx.bucket_record, "version-id-marker")
    prefix = ctx.query.get("prefix", "")
    delimiter = ctx.query.get("delimiter", "")
    max_keys = max_count(ctx, "max-keys")
    page = await ctx.store.list_versions(
        ctx.bucket, prefix, delimiter, key_marker, version_marker, max_keys
    )
    owner = _bucket_owner(ctx)
    nodes: list[xml.Node] = [
        ("Name", ctx.bucket),
        ("Prefix", encode(prefix)),
        ("KeyMarker", encode(key_marker)),
        ("VersionIdMarker", version_marker),
        ("NextKeyMarker", encode(page.next_key) if page.next_key is not None else None),
        ("NextVersionIdMarker", page.next_version_id),
        ("MaxKeys", max_keys),
        ("Delimiter", encode(delimiter) if delimiter else None),
        ("EncodingType", encoding),
        ("IsTruncated", page.truncated),
    ]
    for e in page.entries:
        common: list[xml.Node] = [
            ("Key", encode(e.key)),
            ("VersionId", e.version_id),
            ("IsLatest", e.is_latest),
            ("LastModified", xml.iso8601_seconds(e.mtime_ns)),
        ]
        if e.delete_marker:
            nodes.append(("DeleteMarker", [*common, ("Owner", owner)]))
            continue
        nodes.append(
            (
                "Version",
                [
                    *common,
                    ("ETag", digest.quote(e.etag)),
                    *checksum_nodes(e),
                    ("Size", e.size),
                    ("Owner", owner),
                    ("StorageClass", storage_class(e)),
                ],
            )
        )
    nodes += [("CommonPrefixes", [("Prefix", encode(p))]) for p in page.common_prefixes]
    return web.Response(
        body=xml.render("ListVersionsResult", nodes), content_type="application/xml"
    )


OPERATIONS = {
    "ListObjects": list_objects,
    "ListObjectsV2": list_objects_v2,
    "ListObjectVersions": list_object_versions,
}
