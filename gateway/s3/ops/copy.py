"""CopyObject and UploadPartCopy: metadata over the source's blobs, ETag reused when it can be.

A copy takes the source's extents (or a slice of them) and adds references: no byte is written,
whatever the size. The ETag of a whole-object copy is the source's when that is a plain MD5
(or when the MD5 of a multipart source's bytes is already known); otherwise the bytes are read
and hashed once, and the MD5 is remembered on the source, as DESIGN.md's idea 2 says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import unquote

from aiohttp import web

from ... import digest
from ...limits import MAX_COPY_SIZE
from ...store import ObjectInfo
from ...store.model import NULL_VERSION
from ...store.versions import DeleteMarker
from .. import checksums, conditions, retention, sse, tagging, writes, xml
from ..authorize import authorize_read, expect_owner, resolve_bucket
from ..context import Context
from ..errors import S3Error, invalid_argument
from ..middleware import COPY_SOURCE
from ..params import attrs_from_headers, check_key, check_version_id, part_number
from ..ranges import byte_offset
from .multipart import checksum_nodes, part_encryption
from .objects import write_condition

COPY_PREFIX = "x-amz-copy-source-"
_COPY_RANGE = re.compile(r"bytes=([0-9]+)-([0-9]+)")
_RANGE_FORM = (
    "The x-amz-copy-source-range value must be of the form bytes=first-last where first and "
    "last are the zero-based offsets of the first and last bytes to copy"
)
_SELF_COPY = (
    "This copy request is illegal because it is trying to copy an object to itself without "
    "changing the object's metadata, storage class, website redirect location or encryption "
    "attributes."
)
# Headers that make a copy onto itself legal besides a REPLACE directive.
_SELF_COPY_CHANGES = (
    "x-amz-storage-class",
    "x-amz-website-redirect-location",
    "x-amz-server-side-encryption",
    "x-amz-server-side-encryption-customer-algorithm",
)


@dataclass(frozen=True)
class CopySource:
    bucket: str
    key: str
    version_id: str | None = None  # ?versionId= in x-amz-copy-source


def parse_copy_source(value: str) -> CopySource:
    """`x-amz-copy-source`: URL-encoded `bucket/key[?versionId=...]`, leading `/` optional."""
    path, sep, version = value.partition("?versionId=")
    try:
        path = unquote(path, errors="strict")
    except UnicodeDecodeError as exc:
        raise invalid_argument("Invalid copy source encoding", "x-amz-copy-source", value) from exc
    if path.startswith("/"):
        path = path[1:]
    bucket, _, key = path.partition("/")
    if not bucket or not key:
        raise invalid_argument(
            "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
            "x-amz-copy-source",
            value,
        )
    return CopySource(bucket, key, version if sep else None)


async def _source(ctx: Context, ref: CopySource) -> tuple[ObjectInfo, dict[str, str]]:
    """Look the source up, check the caller may read it and its x-amz-copy-source-if-*. Gives
    it with the x-amz-copy-source-version-id header the answer carries."""
    # The source is read with the caller's rights, as a GetObject of it would be.
    bucket = await resolve_bucket(ctx.store, ref.bucket)
    expect_owner(
        ctx.headers.get("x-amz-source-expected-bucket-owner"),
        bucket,
        ctx.settings.bucket_defaults == "legacy",
    )
    await authorize_read(ctx.store, ctx.user, bucket, ref.key, ref.version_id)
    version_id = check_version_id(ref.version_id, bucket)  # as GetObject judges ?versionId
    try:
        obj = await ctx.store.head_object(ref.bucket, check_key(ref.key), version_id)
    except DeleteMarker as exc:
        if exc.by_id:
            raise S3Error(
                "InvalidRequest",
                "The source of a copy request may not specifically refer to a delete marker "
                "by version id.",
            ) from exc
        raise S3Error("NoSuchKey", Key=ref.key) from exc
    conditions.evaluate(ctx.headers, obj.etag, obj.mtime_ns, prefix=COPY_PREFIX)
    ctx.request[COPY_SOURCE] = (bucket, ref.key, ref.version_id)
    named = bucket.versioning is not None and obj.version_id != NULL_VERSION
    return obj, ({"x-amz-copy-source-version-id": obj.version_id} if named else {})


def _requested_checksum(ctx: Context) -> checksums.Algorithm | None:
    """CopyObject's x-amz-checksum-algorithm: the checksum the copy is to have."""
    return checksums.requested(ctx.headers)


def _composite_algorithm(source: ObjectInfo) -> checksums.Algorithm | None:
    """The algorithm of a source's COMPOSITE checksum: a copy is one part, so AWS gives it that
    algorithm's FULL_OBJECT checksum of the bytes instead (LocalStack's AWS recordings of
    test_complete_multipart_parts_checksum_composite, copy-obj-checksum, Feb 2026)."""
    if source.attrs.checksums.get("x-amz-checksum-type") != checksums.COMPOSITE:
        return None
    return next((a for a in map(checksums.by_header, source.attrs.checksums) if a), None)


def _result(
    root: str,
    etag: str,
    mtime_ns: int,
    headers: dict[str, str],
    checksum: dict[str, str] | None = None,
) -> web.Response:
    # A copy's result names its checksum, as AWS's CopyObjectResult does.
    nodes: list[xml.Node] = [("LastModified", xml.iso8601(mtime_ns)), ("ETag", digest.quote(etag))]
    body = xml.render(root, nodes + checksum_nodes(checksum or {}))
    return web.Response(body=body, content_type="application/xml", headers=headers)


async def copy_object(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    ref = parse_copy_source(ctx.headers["x-amz-copy-source"])
    directive = ctx.headers.get("x-amz-metadata-directive", "COPY")
    if directive not in ("COPY", "REPLACE"):
        raise invalid_argument("Unknown metadata directive.", "x-amz-metadata-directive", directive)
    tagging_directive = ctx.headers.get("x-amz-tagging-directive", "COPY")
    if tagging_directive not in ("COPY", "REPLACE"):
        raise invalid_argument(
            "Unknown tagging directive.", "x-amz-tagging-directive", tagging_directive
        )
    # REPLACE: the request's tags, none without the header; COPY: the source's, whatever the
    # request's header says (AWS ignores it then).
    new_tags = tagging.from_header(ctx.headers.get("x-amz-tagging"))
    # A copy never takes the source's lock: what the request asks for, or the bucket default.
    lock = retention.lock_from_headers(ctx.headers, ctx.bucket_record)
    dest = sse.requested(ctx)
    wanted = _requested_checksum(ctx)
    condition = await write_condition(
        ctx
    )  # the destination's (the source's: x-amz-copy-source-if-*)

    async def attempt() -> web.StreamResponse:
        source, answer = await _source(ctx, ref)
        source_key = sse.read_key(ctx, source.attrs, sse.COPY_CUSTOMER)
        if source.size > MAX_COPY_SIZE:
            raise S3Error(
                "InvalidRequest",
                "The specified copy source is larger than the maximum allowable size for a "
                f"copy source: {MAX_COPY_SIZE}",
            )
        # Copying an older version onto its own key is how a version is restored: allowed.
        same = (ref.bucket, source.key, ref.version_id) == (ctx.bucket, key, None)
        changes = directive == "REPLACE" or tagging_directive == "REPLACE"
        if same and not changes and not any(h in ctx.headers for h in _SELF_COPY_CHANGES):
            raise S3Error("InvalidRequest", _SELF_COPY)
        if directive == "REPLACE":
            # New metadata, same bytes: the checksums of the bytes stay.
            attrs = replace(attrs_from_headers(ctx.headers), checksums=source.attrs.checksums)
        else:
            # COPY keeps user metadata and the user-controlled system metadata; the website
            # redirect is never copied (AWS); a storage class in the request applies.
            headers = dict(source.attrs.headers)
            headers.pop("x-amz-website-redirect-location", None)
            requested = attrs_from_headers(ctx.headers).headers
            for name in ("x-amz-website-redirect-location", "x-amz-storage-class"):
                if name in requested:
                    headers[name] = requested[name]
            attrs = replace(source.attrs, headers=headers)
        attrs = replace(
            attrs, tags=new_tags if tagging_directive == "REPLACE" else source.attrs.tags
        )
        algorithm = wanted or _composite_algorithm(source)
        if algorithm is not None:
            sums = await writes.copy_checksum(ctx.store, source, source_key, algorithm)
            attrs = replace(attrs, checksums=sums, part_checksums=())
        attrs = ctx.with_acl(attrs)
        # The destination's encryption is the request's (or its bucket's default), never the
        # source's.
        obj = await writes.copy(
            ctx.store,
            source,
            source_key,
            ctx.bucket,
            key,
            attrs,
            dest,
            lock,
            condition,
            ctx.origin(),
        )
        if obj.version_id != NULL_VERSION:
            answer["x-amz-version-id"] = obj.version_id
        answer.update(sse.echo(obj.attrs, context=True))
        return _result("CopyObjectResult", obj.etag, obj.mtime_ns, answer, obj.attrs.checksums)

    return await writes.retry_copy(attempt)


def parse_copy_range(value: str | None, size: int) -> tuple[int, int]:
    """`x-amz-copy-source-range: bytes=first-last` -> (start, length); absent: everything.

    Errors as AWS answers them (LocalStack's AWS-recorded test_upload_part_copy_range): bad
    syntax and end past the size are InvalidArgument, a start past the size InvalidRequest.
    ceph s3-tests expects InvalidRange for the end case; we follow AWS.
    """
    if value is None:
        return 0, size
    m = _COPY_RANGE.fullmatch(value)
    if m is None or byte_offset(m.group(1)) > byte_offset(m.group(2)):
        raise invalid_argument(_RANGE_FORM, "x-amz-copy-source-range", value)
    first, last = byte_offset(m.group(1)), byte_offset(m.group(2))
    if first >= size:
        raise S3Error(
            "InvalidRequest", "The specified copy range is invalid for the source object size"
        )
    if last >= size:
        raise invalid_argument(
            f"Range specified is not valid for source object of size: {size}",
            "x-amz-copy-source-range",
            value,
        )
    return first, last - first + 1


async def upload_part_copy(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    number = part_number(ctx)
    upload = await ctx.store.get_upload(ctx.upload_id, ctx.bucket, key)
    ref = parse_copy_source(ctx.headers["x-amz-copy-source"])
    dest = part_encryption(ctx, upload)
    # The part's checksum: the upload's algorithm's, which Complete needs of every part (AWS
    # computes the copied range's and answers it: LocalStack's AWS recordings of
    # test_multipart_upload_part_copy_checksum); without one, the default, unannounced, that
    # Complete combines into the object's as it does UploadPart's.
    name = upload.attrs.checksums.get("algorithm")
    algorithm = checksums.algorithm(name) if name else None

    async def attempt() -> web.StreamResponse:
        source, answer = await _source(ctx, ref)
        source_key = sse.read_key(ctx, source.attrs, sse.COPY_CUSTOMER)
        start, length = parse_copy_range(ctx.headers.get("x-amz-copy-source-range"), source.size)
        if length > MAX_COPY_SIZE:
            raise S3Error(
                "InvalidRequest",
                "The specified copy source is larger than the maximum allowable size for a "
                f"copy source: {MAX_COPY_SIZE}",
            )
        answer.update(sse.echo(upload.attrs))
        copied = await writes.copy_part(
            ctx.store, upload, number, source, source_key, start, length, dest, algorithm
        )
        sums = _announced(algorithm, copied.checksum)
        part = copied.part
        return _result("CopyPartResult", part.etag, part.mtime_ns, answer, sums)

    return await writes.retry_copy(attempt)


def _announced(algorithm: checksums.Algorithm | None, value: str | None) -> dict[str, str]:
    """The checksum CopyPartResult names: the upload's algorithm's, never the default."""
    return {algorithm.header: value} if algorithm is not None and value is not None else {}


OPERATIONS = {"CopyObject": copy_object, "UploadPartCopy": upload_part_copy}
