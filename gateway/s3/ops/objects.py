"""PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping

from aiohttp import web
from multidict import CIMultiDict

from ... import digest
from ...limits import MAX_DELETE_KEYS, MAX_DELETE_XML, MAX_KEY_BYTES
from ...store import (
    DeleteCondition,
    ObjectInfo,
    ObjectReader,
    StagedBlob,
    StoreError,
    WriteCondition,
)
from ...store.model import NULL_VERSION, Deleted
from ...store.versions import DeleteMarker, is_version_id
from .. import conditions, lifecycle, params, retention, sendfile, sse, writes, xml
from ..context import SENT_BY_SENDFILE, Context
from ..errors import S3Error
from ..middleware import BATCH_DELETED, HOST_ID, REQUEST_ID
from ..params import (
    attrs_from_headers,
    check_key,
    content_md5,
    delete_condition,
    part_number,
    require_integrity_header,
    response_overrides,
    version_param,
)
from ..ranges import parse_range


def versioned(ctx: Context) -> bool:
    """Was the bucket's versioning ever set? Only then do answers carry x-amz-version-id
    (rclone goes looking for a version it is told of, even `null`)."""
    return ctx.bucket_record is not None and ctx.bucket_record.versioning is not None


def version_headers(ctx: Context, obj: ObjectInfo) -> dict[str, str]:
    """x-amz-version-id of the version a GET, HEAD or copy reads or a write made."""
    if obj.version_id != NULL_VERSION or versioned(ctx):
        return {"x-amz-version-id": obj.version_id}
    return {}


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
    return web.Response(
        status=exc.status,
        headers=headers,
        body=exc.to_xml(ctx.request[REQUEST_ID], ctx.request[HOST_ID]),
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


# What a header value may carry as it is: printable ASCII, space and tab.
_MAIL_SAFE = re.compile(r"[\t\x20-\x7e]*")


def user_metadata_header(value: str) -> str:
    """A stored x-amz-meta-* value as GET and HEAD send it: AWS "encoded as per RFC 2047 to
    make them mail-safe before returning" (UsingMetadata.html), one `=?UTF-8?B?…?=` encoded
    word for a value that is not printable ASCII (params.user_metadata_value decoded it on
    the way in); an ASCII value as it is."""
    if _MAIL_SAFE.fullmatch(value):
        return value
    return "=?UTF-8?B?" + base64.b64encode(value.encode()).decode() + "?="


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
        headers["x-amz-meta-" + name] = user_metadata_header(value)
    if obj.attrs.tags:
        headers["x-amz-tagging-count"] = str(len(obj.attrs.tags))
    if obj.attrs.replication is not None:
        headers["x-amz-replication-status"] = obj.attrs.replication
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


def _condition_value(ctx: Context, name: str) -> str | None:
    """A conditional write's header, or the same name as a parameter of a presigned URL's
    query (which its signature covers: a URL made for `If-None-Match: *` carries it)."""
    found = ctx.headers.get(name)
    if found is None:
        found = next((v for k, v in ctx.query.items() if k.lower() == name), None)
    return found


async def write_condition(ctx: Context) -> WriteCondition | None:
    """If-Match / If-None-Match on a write (AWS's conditional writes: `*` or ETags): PutObject,
    CopyObject's destination, CompleteMultipartUpload. Checked once before the body is read
    (a cheap early answer) and again, atomically, when the write commits."""
    if_match = _condition_value(ctx, "if-match")
    if_none_match = _condition_value(ctx, "if-none-match")
    if if_match is None and if_none_match is None:
        return None
    if if_match is not None and if_none_match is not None:
        # AWS takes one of the two on a write, and says so with 501.
        raise S3Error(
            "NotImplemented",
            "A header you provided implies functionality that is not implemented",
            Header="If-Match,If-None-Match",
            additionalMessage="Multiple conditional request headers present in the request",
        )
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
    obj = await writes.put(
        ctx.store, ctx.bucket, key, blob, attrs, encryption, condition, lock, ctx.origin()
    )
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


# The storage classes whose objects must be restored before they are read (GLACIER_IR reads
# at once).
ARCHIVED = frozenset({"GLACIER", "DEEP_ARCHIVE"})


async def get_object(ctx: Context) -> web.StreamResponse:
    key, version_id = check_key(ctx.key), version_param(ctx)
    try:
        reader = await ctx.store.open_object(
            ctx.bucket, key, version_id, lambda obj: sse.read_key(ctx, obj.attrs), ctx.latest
        )
    except DeleteMarker as exc:
        return delete_marker_response(ctx, exc)
    try:
        archived = reader.info.attrs.headers.get("x-amz-storage-class")
        if archived in ARCHIVED:
            # AWS keeps an archived object's class and refuses its GET until it is restored
            # (HEAD answers): LocalStack's test_put_object_storage_class[GLACIER-False],
            # recorded Feb 2026. The gateway has no RestoreObject; README says what to do.
            error = S3Error("InvalidObjectState", StorageClass=archived)
            return error_response(ctx, error, {"x-amz-storage-class": archived})
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
    status = ctx.status or 200
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
    TLS)."""
    transport = ctx.request.transport
    if transport is None or not sendfile.usable(transport):
        return False
    span = await reader.single_file(start, length)
    if span is None:
        return False
    f, offset = span
    with f:
        await sendfile.send_file(transport, f, offset, length)
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
        params.http_seconds,
    )
    (done,) = await ctx.store.delete_versions(
        ctx.bucket, [(key, version_id)], [bypass], [condition], ctx.origin()
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
            params.element_seconds,
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
            ctx.origin(),
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
