"""PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects."""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import re
from collections.abc import Callable, Mapping

from aiohttp import web
from multidict import CIMultiDict

from ... import digest
from ...limits import MAX_DELETE_KEYS, MAX_DELETE_XML, MAX_KEY_BYTES, MAX_PART_NUMBER
from ...store import (
    Bucket,
    DeleteCondition,
    ObjectAttrs,
    ObjectInfo,
    ObjectReader,
    StagedBlob,
    StoreError,
    WriteCondition,
)
from ...store.model import NULL_VERSION, Deleted
from ...store.versions import DeleteMarker, is_version_id
from .. import checksums, conditions, lifecycle, retention, sse, tagging, writes, xml
from ..context import SENT_BY_SENDFILE, Context
from ..errors import S3Error, invalid_argument
from ..middleware import BATCH_DELETED, REQUEST_ID
from ..ranges import parse_range

MAX_USER_METADATA = 2048  # bytes of x-amz-meta-* names and values (AWS: 2 KB)

# User-controlled system metadata that S3 stores with an object and returns on GET/HEAD.
STORED_HEADERS = (
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "expires",
    "x-amz-website-redirect-location",
)
STORAGE_CLASSES = {
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "OUTPOSTS",
    "GLACIER_IR",
    "SNOW",
    "EXPRESS_ONEZONE",
}
# GetObject query parameters that override response headers (signed requests only, as on AWS).
RESPONSE_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}


# What no HTTP header value may carry (RFC 9110 5.5: the C0 controls but tab, and DEL): an
# override holding one could only be sent by splitting the header, so it is refused up front.
_NOT_IN_A_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def response_overrides(query: Mapping[str, str]) -> dict[str, str]:
    """The headers that GetObject's response-* parameters ask for, checked before anything is
    sent (aiohttp would refuse them once the answer is under way: a cut connection, or a 500)."""
    overrides = {}
    for param, header in RESPONSE_OVERRIDES.items():
        value = query.get(param)
        if value is None:
            continue
        if _NOT_IN_A_HEADER.search(value):
            raise invalid_argument(
                f"{param} must not contain control characters: an HTTP header cannot carry them",
                param,
            )
        overrides[header] = value
    return overrides


def parse_int(text: str) -> int:
    """A non-negative decimal of ASCII digits, or -1 (isdigit() and int() would take any
    Unicode digit, and int() refuses over 4,300 digits: past 18 it is just "huge")."""
    if not (text and text.isascii() and text.isdigit()):
        return -1
    return int(text) if len(text) <= 18 else 10**18


def part_number(ctx: Context) -> int:
    """The partNumber query parameter: 1 to 10,000."""
    raw = ctx.endpoint.part_number or ""
    number = parse_int(raw)
    if not 1 <= number <= MAX_PART_NUMBER:
        raise invalid_argument(
            "Part number must be an integer between 1 and 10000, inclusive", "partNumber", raw
        )
    return number


def check_key(key: str) -> str:
    size = len(key.encode())
    if size > MAX_KEY_BYTES:
        raise S3Error("KeyTooLongError", MaxSizeAllowed=MAX_KEY_BYTES, Size=size)
    return key


def attrs_from_headers(headers: Mapping[str, str]) -> ObjectAttrs:
    """The metadata a PUT (or a copy with REPLACE) sets on an object."""
    stored = {name: headers[name] for name in STORED_HEADERS if name in headers}
    storage_class = headers.get("x-amz-storage-class")
    if storage_class is not None:
        if storage_class not in STORAGE_CLASSES:
            raise S3Error("InvalidStorageClass", StorageClassRequested=storage_class)
        if storage_class != "STANDARD":
            stored["x-amz-storage-class"] = storage_class
    meta: dict[str, str] = {}
    size = 0
    for name, value in headers.items():
        lower = name.lower()
        if lower.startswith("x-amz-meta-"):
            suffix = lower[len("x-amz-meta-") :]
            try:
                size += len(suffix.encode()) + len(value.encode())
            except UnicodeEncodeError as exc:  # bytes that were not UTF-8 on the wire
                raise invalid_argument(
                    "User metadata must be UTF-8", name, value.encode(errors="replace").decode()
                ) from exc
            meta[suffix] = f"{meta[suffix]},{value}" if suffix in meta else value
    if size > MAX_USER_METADATA:
        raise S3Error("MetadataTooLarge", MaxSizeAllowed=MAX_USER_METADATA, Size=size)
    content_type = headers.get("content-type") or "binary/octet-stream"
    return ObjectAttrs(
        content_type=content_type,
        headers=stored,
        meta=meta,
        tags=tagging.from_header(headers.get("x-amz-tagging")),
    )


def content_md5(headers: Mapping[str, str]) -> bytes | None:
    """The decoded Content-MD5 header, or None. Malformed -> InvalidDigest (RFC 1864)."""
    value = headers.get("content-md5")
    if value is None:
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise S3Error("InvalidDigest", ContentMD5=value) from exc
    if len(raw) != 16:
        raise S3Error("InvalidDigest", ContentMD5=value)
    return raw


def versioned(ctx: Context) -> bool:
    """Was the bucket's versioning ever set? Only then do answers carry x-amz-version-id
    (rclone goes looking for a version it is told of, even `null`)."""
    return ctx.bucket_record is not None and ctx.bucket_record.versioning is not None


def version_param(ctx: Context) -> str | None:
    """?versionId, judged by `check_version_id`."""
    return check_version_id(ctx.endpoint.version_id, ctx.bucket_record)


def check_version_id(
    version_id: str | None, bucket: Bucket | None, name: str = "versionId"
) -> str | None:
    """A version id a request names (in `name`): "null", or an id of this gateway's form in a
    bucket whose versioning was ever set; anything else is AWS's InvalidArgument."""
    if version_id is None or version_id == NULL_VERSION:
        return version_id
    if version_id == "":
        raise invalid_argument("Version id cannot be the empty string", name, "")
    if bucket is None or bucket.versioning is None or not is_version_id(version_id):
        raise invalid_argument("Invalid version id specified", name, version_id)
    return version_id


def require_integrity_header(ctx: Context) -> None:
    """For the operations whose every request AWS wants Content-MD5 or a checksum on."""
    if not checksums.has_integrity_header(ctx.headers):
        raise S3Error("InvalidRequest", "Missing required header for this request: Content-Md5")


def version_headers(ctx: Context, obj: ObjectInfo) -> dict[str, str]:
    """x-amz-version-id of the version a GET, HEAD or copy reads or a write made."""
    if obj.version_id != NULL_VERSION or versioned(ctx):
        return {"x-amz-version-id": obj.version_id}
    return {}


def delete_condition(
    etag: str | None, size: str | None, modified: str | None, seconds: Callable[[str], int]
) -> DeleteCondition | None:
    """A conditional delete's If-Match / ETag, size and Last-Modified (read by `seconds`)."""
    if etag is None and size is None and modified is None:
        return None
    if size is not None and not (size.isascii() and size.isdigit()):
        raise invalid_argument("Invalid size", "x-amz-if-match-size", size)
    return DeleteCondition(
        etag, int(size) if size is not None else None, seconds(modified) if modified else None
    )


def _http_date(text: str) -> int | None:
    """Whole seconds of an HTTP date (how the SDKs send a conditional delete's time, in the
    header and in DeleteObjects' LastModifiedTime alike); None if it is not one."""
    try:
        return int(email.utils.parsedate_to_datetime(text).timestamp())
    except (TypeError, ValueError):
        return None


def _http_seconds(text: str) -> int:
    seconds = _http_date(text)
    if seconds is None:
        raise invalid_argument("Invalid date", "x-amz-if-match-last-modified-time", text)
    return seconds


def _element_seconds(text: str) -> int:
    seconds = _http_date(text)
    if seconds is None:
        raise S3Error("MalformedXML")
    return seconds


def expiration_header(ctx: Context, obj: ObjectInfo) -> dict[str, str]:
    """x-amz-expiration when a lifecycle rule will expire the current version; never for a
    request naming a version (AWS sends none then, even for the current one)."""
    bucket = ctx.bucket_record
    if bucket is None or ctx.endpoint.version_id is not None:
        return {}
    value = lifecycle.expiration_header(
        bucket.settings.get("lifecycle"), obj.key, obj.size, obj.attrs.tags, obj.mtime_ns
    )
    return {"x-amz-expiration": value} if value else {}


def error_response(ctx: Context, exc: S3Error, headers: Mapping[str, str]) -> web.Response:
    """An error answered with headers of its own (the middleware renders the others)."""
    if ctx.request.method == "HEAD":
        return web.Response(status=exc.status, headers=headers)
    resource = ctx.request.raw_path.partition("?")[0]
    return web.Response(
        status=exc.status,
        headers=headers,
        body=exc.to_xml(resource, ctx.request[REQUEST_ID]),
        content_type="application/xml",
    )


def delete_marker_response(ctx: Context, exc: DeleteMarker) -> web.Response:
    """The latest version is a delete marker: 404 NoSuchKey; or the version asked for is one:
    405 MethodNotAllowed with Allow: DELETE and the marker's Last-Modified (AWS's GetObject and
    HeadObject pages). Both say which marker."""
    marker = exc.marker
    headers = {"x-amz-delete-marker": "true", "x-amz-version-id": marker.version_id}
    if not exc.by_id:
        return error_response(ctx, S3Error("NoSuchKey", Key=marker.key), headers)
    headers["Allow"] = "DELETE"
    headers["Last-Modified"] = xml.http_date(marker.mtime_ns)
    error = S3Error("MethodNotAllowed", Method=ctx.request.method, ResourceType="DeleteMarker")
    return error_response(ctx, error, headers)


def object_headers(obj: ObjectInfo) -> CIMultiDict[str]:
    # Case-insensitive: a response-* override replaces the stored header of any spelling.
    headers = CIMultiDict(
        {
            "ETag": digest.quote(obj.etag),
            "Last-Modified": xml.http_date(obj.mtime_ns),
            "Content-Type": obj.attrs.content_type,
            "Accept-Ranges": "bytes",
        }
    )
    for name, value in obj.attrs.headers.items():
        headers[name] = value
    for name, value in obj.attrs.meta.items():
        headers["x-amz-meta-" + name] = value
    if obj.attrs.tags:
        headers["x-amz-tagging-count"] = str(len(obj.attrs.tags))
    return headers


# Headers a 304 Not Modified repeats (RFC 9110 15.4.5: those a 200 would have sent that
# describe the version).
_NOT_MODIFIED_HEADERS = ("ETag", "Last-Modified", "x-amz-version-id")


# --- PutObject ---------------------------------------------------------------------------------


async def stage_body(
    ctx: Context, expected_md5: bytes | None, encryption: sse.Requested = sse.PLAIN
) -> StagedBlob:
    """Receive the request body into a staged blob (encrypted as `encryption` says), checked
    against its signed SHA-256 and its Content-MD5: a body that fails either is dropped before
    anything refers to it."""

    def check(blob: StagedBlob) -> None:
        ctx.payload.verify()
        if expected_md5 is not None and expected_md5 != blob.md5:
            raise S3Error("BadDigest", ExpectedDigest=base64.b64encode(expected_md5).decode())

    return await writes.stage(
        ctx.store, ctx.payload.chunks(), encryption, ctx.payload.observers, check
    )


async def write_condition(ctx: Context) -> WriteCondition | None:
    """If-Match / If-None-Match on a write (AWS's conditional writes: `*` or ETags). Checked
    once before the body is read (a cheap early answer) and again, atomically, when the write
    commits."""
    if_match = ctx.headers.get("if-match")
    if_none_match = ctx.headers.get("if-none-match")
    if if_match is None and if_none_match is None:
        return None
    condition = WriteCondition(if_match=if_match, if_none_match=if_none_match)
    await ctx.store.check_write(ctx.bucket, ctx.key, condition)
    return condition


async def put_object(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    condition = await write_condition(ctx)
    attrs = attrs_from_headers(ctx.headers)
    encoding = ctx.payload.content_encoding()
    headers = {k: v for k, v in attrs.headers.items() if k != "content-encoding"}
    if encoding:
        headers["content-encoding"] = encoding
    expected_md5 = content_md5(ctx.headers)
    lock = retention.lock_from_headers(ctx.headers, ctx.bucket_record)
    retention.require_integrity(ctx.headers, ctx.bucket_record, lock, "Put Object")
    ctx.payload.require_length(ctx.settings.max_object_size)
    encryption = sse.requested(ctx)
    blob = await stage_body(ctx, expected_md5, encryption)
    checksum = ctx.payload.checksum_headers()
    attrs = ctx.with_acl(attrs, headers=headers, checksums=checksum)
    obj = await writes.put(ctx.store, ctx.bucket, key, blob, attrs, encryption, condition, lock)
    # A null version (unversioned or suspended bucket) is not named: AWS sends no id then.
    made = {"x-amz-version-id": obj.version_id} if obj.version_id != NULL_VERSION else {}
    made.update(expiration_header(ctx, obj))
    return web.Response(
        headers={
            "ETag": digest.quote(obj.etag),
            **checksum,
            **made,
            **sse.echo(obj.attrs, context=True),
        }
    )


# --- GetObject / HeadObject ----------------------------------------------------------------------


async def get_object(ctx: Context) -> web.StreamResponse:
    key, version_id = check_key(ctx.key), version_param(ctx)
    try:
        reader = await ctx.store.open_object(
            ctx.bucket, key, version_id, lambda obj: sse.read_key(ctx, obj.attrs), ctx.latest
        )
    except DeleteMarker as exc:
        return delete_marker_response(ctx, exc)
    try:
        return await _send_object(ctx, reader)
    finally:
        reader.close()


async def head_object(ctx: Context) -> web.StreamResponse:
    key, version_id = check_key(ctx.key), version_param(ctx)
    try:
        obj = await ctx.store.head_object(ctx.bucket, key, version_id, ctx.latest)
    except DeleteMarker as exc:
        return delete_marker_response(ctx, exc)
    sse.read_key(ctx, obj.attrs)
    return await _send_object(ctx, None, obj)


async def _send_object(
    ctx: Context, reader: ObjectReader | None, obj: ObjectInfo | None = None
) -> web.StreamResponse:
    if reader is not None:
        obj = reader.info
    assert obj is not None
    overrides = response_overrides(ctx.query)
    headers = object_headers(obj)
    headers.update(version_headers(ctx, obj))
    headers.update(retention.lock_headers(obj))
    headers.update(expiration_header(ctx, obj))
    headers.update(sse.echo(obj.attrs))
    if not conditions.evaluate(ctx.headers, obj.etag, obj.mtime_ns):
        return web.Response(
            status=304,
            headers={k: v for k, v in headers.items() if k in _NOT_MODIFIED_HEADERS},
        )
    headers.update(overrides)
    requested = _requested_part(ctx, obj, headers)
    if requested is None:
        requested = parse_range(ctx.headers.get("Range"), obj.size)
    status = 200
    start, length = 0, obj.size
    if ctx.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED":
        # A checksum describes what it was computed over: the whole object, or a part of
        # one, never a range.
        if requested is None:
            headers.update(obj.attrs.checksums)
        elif ctx.endpoint.part_number is not None:
            headers.update(_part_checksum(obj, part_number(ctx)))
    if requested is not None:
        start, length = requested
        status = 206
        headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{obj.size}"
    small = reader.inline_bytes(start, length) if reader is not None else None
    if small is not None:
        # Bytes kept in the catalog: one answer, headers and body in one send.
        return web.Response(status=status, headers=headers, body=small)
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = length
    await ctx.start(response)
    if reader is None or length == 0:
        await response.write_eof()
        return response
    if not await _sendfile(ctx, reader, start, length):
        async for chunk in reader.chunks(start, length):
            await response.write(chunk)
    await response.write_eof()
    return response


async def _sendfile(ctx: Context, reader: ObjectReader, start: int, length: int) -> bool:
    """Send a range that lies in one blob file with sendfile: the kernel copies from the page
    cache to the socket, no Python buffers. False if it cannot (inline bytes, several blobs,
    TLS, or an event loop without sendfile, such as uvloop)."""
    transport = ctx.request.transport
    span = await reader.single_file(start, length) if transport is not None else None
    if span is None or transport is None:
        return False
    f, offset = span
    with f:
        try:
            await asyncio.get_running_loop().sendfile(transport, f, offset, length)
        except NotImplementedError:
            return False
    ctx.request[SENT_BY_SENDFILE] = length
    return True


def _requested_part(
    ctx: Context, obj: ObjectInfo, headers: dict[str, str]
) -> tuple[int, int] | None:
    """?partNumber=N: the bytes of part N of a multipart object, a ranged GET (206). An object
    that was not uploaded in parts has one part, itself (AWS answers partNumber=1)."""
    raw = ctx.endpoint.part_number
    if raw is None:
        return None
    number = part_number(ctx)
    if "Range" in ctx.headers:
        raise S3Error(
            "InvalidRequest", "Cannot specify both Range header and partNumber query parameter"
        )
    sizes = obj.parts or (obj.size,)
    if number > len(sizes):
        raise S3Error("InvalidPartNumber", PartNumberRequested=number, ActualPartCount=len(sizes))
    if obj.parts:
        headers["x-amz-mp-parts-count"] = str(len(obj.parts))
    if obj.size == 0:
        return None
    return sum(sizes[: number - 1]), sizes[number - 1]


def _part_checksum(obj: ObjectInfo, number: int) -> dict[str, str]:
    """The checksum part `number` was uploaded with, when its upload had an algorithm (a
    single-part object's part is the object itself). A FULL_OBJECT checksum of several parts
    vouches for none of them alone: AWS sends none with a part then (LocalStack's AWS
    recordings of test_complete_multipart_parts_checksum_full_object, Feb 2026)."""
    if len(obj.parts) <= 1:
        return dict(obj.attrs.checksums)
    if obj.attrs.checksums.get("x-amz-checksum-type") == "FULL_OBJECT":
        return {}
    sums = obj.attrs.part_checksums
    if len(sums) < number:
        return {}
    found: dict[str, str] = {}
    for name, value in obj.attrs.checksums.items():
        found[name] = value if name == "x-amz-checksum-type" else sums[number - 1]
    return found


# --- DeleteObject / DeleteObjects --------------------------------------------------------------


async def delete_object(ctx: Context) -> web.StreamResponse:
    key, version_id = check_key(ctx.key), version_param(ctx)
    asked = retention.asks_bypass(ctx.headers, ctx.bucket_record)
    bypass = retention.bypass_governance(asked, ctx.allowed, key, version_id)
    h = ctx.headers
    condition = delete_condition(
        h.get("if-match"),
        h.get("x-amz-if-match-size"),
        h.get("x-amz-if-match-last-modified-time"),
        _http_seconds,
    )
    (done,) = await ctx.store.delete_versions(
        ctx.bucket, [(key, version_id)], [bypass], [condition]
    )
    if isinstance(done, StoreError):
        raise done
    headers = {}
    if done.delete_marker:  # a marker made, or the version removed was one
        headers["x-amz-delete-marker"] = "true"
    if done.marker_version_id is not None:
        headers["x-amz-version-id"] = done.marker_version_id
    elif done.version_id is not None and versioned(ctx):
        headers["x-amz-version-id"] = done.version_id
    return web.Response(status=204, headers=headers)


# Delete, Quiet, and each Object with Key, VersionId, ETag, LastModifiedTime and Size: a body
# with more elements names more keys than DeleteObjects takes (MalformedXML, as for 1,001).
DELETE_ELEMENTS = 2 + 6 * MAX_DELETE_KEYS


async def delete_objects(ctx: Context) -> web.StreamResponse:
    require_integrity_header(ctx)
    asked = retention.asks_bypass(ctx.headers, ctx.bucket_record, strict=False)
    expected_md5 = content_md5(ctx.headers)
    body = await ctx.read_xml(MAX_DELETE_XML)
    if expected_md5 is not None and digest.md5_of(body).digest() != expected_md5:
        raise S3Error("BadDigest")
    root = xml.parse(body, DELETE_ELEMENTS)
    if root.tag != "Delete":
        raise S3Error("MalformedXML")
    quiet = (xml.child_text(root, "Quiet") or "").strip().lower() == "true"
    wanted: list[tuple[str, str | None, DeleteCondition | None]] = []
    for el in root.findall("Object"):
        key = xml.child_text(el, "Key")
        if key is None:
            raise S3Error("MalformedXML")
        # ETag (and a directory bucket's Size, LastModifiedTime): a conditional delete.
        condition = delete_condition(
            xml.child_text(el, "ETag"),
            xml.child_text(el, "Size"),
            xml.child_text(el, "LastModifiedTime"),
            _element_seconds,
        )
        wanted.append((key, xml.child_text(el, "VersionId"), condition))
    if not wanted or len(wanted) > MAX_DELETE_KEYS:
        raise S3Error("MalformedXML")

    # Entries answer in the request's order: errors found here, the rest once deleted.
    results: list[xml.Node | None] = []
    deletable: list[tuple[int, str, str | None, DeleteCondition | None]] = []
    for key, version, condition in wanted:
        if version is not None and not (
            version == NULL_VERSION or (versioned(ctx) and is_version_id(version))
        ):
            # DeleteObject says InvalidArgument for such an id; DeleteObjects, NoSuchVersion.
            results.append(_delete_error(key, version, "NoSuchVersion"))
        elif len(key.encode()) > MAX_KEY_BYTES:
            results.append(_delete_error(key, version, "KeyTooLongError"))
        elif ctx.allowed is not None and not ctx.allowed("DeleteObject", key, version):
            results.append(_delete_error(key, version, "AccessDenied"))
        else:
            deletable.append((len(results), key, version, condition))
            results.append(None)
    if deletable:
        done = await ctx.store.delete_versions(
            ctx.bucket,
            [(k, v) for _, k, v, _ in deletable],
            [retention.bypass_governance(asked, ctx.allowed, k, v) for _, k, v, _ in deletable],
            [condition for *_, condition in deletable],
        )
        for (at, key, version, _), deleted in zip(deletable, done, strict=True):
            if isinstance(deleted, StoreError):
                results[at] = _delete_error(key, version, deleted.code, deleted.message or None)
            elif not quiet:
                results[at] = _deleted(deleted)
        # Each with the version id the request named (the log's version field).
        ctx.request[BATCH_DELETED] = tuple(
            (key, version)
            for (_, key, version, _), deleted in zip(deletable, done, strict=True)
            if not isinstance(deleted, StoreError)
        )
    return web.Response(
        body=xml.render("DeleteResult", [r for r in results if r is not None]),
        content_type="application/xml",
    )


def _deleted(done: Deleted) -> xml.Node:
    return (
        "Deleted",
        [
            ("Key", done.key),
            ("VersionId", done.version_id),
            ("DeleteMarker", True if done.delete_marker else None),
            ("DeleteMarkerVersionId", done.marker_version_id),
        ],
    )


def _delete_error(key: str, version: str | None, code: str, message: str | None = None) -> xml.Node:
    error = S3Error(code, message)
    return (
        "Error",
        [("Key", key), ("VersionId", version), ("Code", code), ("Message", error.message)],
    )


OPERATIONS = {
    "PutObject": put_object,
    "GetObject": get_object,
    "HeadObject": head_object,
    "DeleteObject": delete_object,
    "DeleteObjects": delete_objects,
}
