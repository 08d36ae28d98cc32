"""Multipart uploads: Create, UploadPart, Complete, Abort, ListParts, ListMultipartUploads."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace

from aiohttp import web

from ... import digest
from ...limits import MAX_COMPLETE_XML, MAX_PART_NUMBER, MAX_PART_SIZE
from ...store import StoreError, Upload
from ...store.model import NULL_VERSION
from .. import checksums, retention, sse, writes, xml
from ..context import Context
from ..errors import S3Error, invalid_argument
from ..params import attrs_from_headers, check_key, content_md5, parse_int, part_number
from .listing import encoder, max_count
from .objects import stage_body, write_condition


def _xml(root: str, nodes: list[xml.Node]) -> web.Response:
    return web.Response(body=xml.render(root, nodes), content_type="application/xml")


def _upload_checksum(headers: Mapping[str, str]) -> dict[str, str]:
    """x-amz-checksum-algorithm / -type of CreateMultipartUpload: how the object's checksum
    will be made from the parts' (kept with the upload until Complete)."""
    kind = headers.get("x-amz-checksum-type")
    algorithm = checksums.requested(headers)
    if algorithm is None:
        if kind is not None:
            raise S3Error(
                "InvalidRequest",
                "The x-amz-checksum-type header can only be used with the "
                "x-amz-checksum-algorithm header.",
            )
        return {}
    return {"algorithm": algorithm.name, "type": checksums.multipart_type(algorithm, kind)}


async def create_multipart_upload(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    spec = _upload_checksum(ctx.headers)
    # The upload's encryption, which every part takes (an SSE-C part brings the same key).
    encryption = sse.requested(ctx)
    attrs = encryption.attrs(ctx.with_acl(replace(attrs_from_headers(ctx.headers), checksums=spec)))
    lock = retention.lock_from_headers(ctx.headers, ctx.bucket_record)
    upload = await ctx.store.create_upload(ctx.bucket, key, ctx.user.canonical_id, attrs, lock)
    headers = sse.echo(upload.attrs, context=True)
    if spec:
        headers = {
            "x-amz-checksum-algorithm": spec["algorithm"],
            "x-amz-checksum-type": spec["type"],
        }
    response = _xml(
        "InitiateMultipartUploadResult",
        [("Bucket", ctx.bucket), ("Key", key), ("UploadId", upload.id)],
    )
    response.headers.update(headers)
    return response


def part_encryption(ctx: Context, upload: Upload) -> sse.Requested:
    """How a part of `upload` is encrypted (UploadPart, UploadPartCopy)."""
    return sse.for_upload(upload.attrs, ctx.store.keys, sse.request_key(ctx))


def _algorithm(upload: Upload) -> checksums.Algorithm | None:
    name = upload.attrs.checksums.get("algorithm")
    return checksums.algorithm(name) if name else None


async def upload_part(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    number = part_number(ctx)
    expected_md5 = content_md5(ctx.headers)
    ctx.payload.require_length(MAX_PART_SIZE)
    # Before the body is invited: an unknown upload costs the client nothing.
    upload = await ctx.store.get_upload(ctx.upload_id, ctx.bucket, key)
    retention.require_integrity(ctx.headers, ctx.bucket_record, upload.lock, "Put Part")
    expected = _algorithm(upload)
    sent = ctx.payload.checksum
    if expected is not None and sent is not None and sent.algorithm is not expected:
        raise S3Error(
            "InvalidRequest",
            f"Checksum Type mismatch occurred, expected checksum Type: "
            f"{expected.name.lower()}, actual checksum Type: {sent.algorithm.name.lower()}",
        )
    encryption = part_encryption(ctx, upload)
    blob = await stage_body(ctx, expected_md5, encryption)
    part = await writes.upload_part(
        ctx.store,
        upload,
        number,
        blob,
        # An upload without an algorithm keeps each part's default checksum, unannounced,
        # for Complete to combine into the object's.
        ctx.payload.checksum_value if expected is not None else ctx.payload.default_value(),
        encryption,
    )
    # The part's answer names only a checksum the client sent (LocalStack's AWS recordings).
    checksum = ctx.payload.checksum_headers() if sent is not None else {}
    checksum.pop("x-amz-checksum-type", None)
    return web.Response(
        headers={"ETag": digest.quote(part.etag), **checksum, **sse.echo(upload.attrs)}
    )


# The root, and each Part with PartNumber, ETag and the five Checksum* members AWS defines.
COMPLETE_ELEMENTS = 1 + 8 * MAX_PART_NUMBER


async def complete_multipart_upload(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    upload_id = ctx.upload_id
    condition = await write_condition(ctx)
    upload = await _upload_to_complete(ctx, upload_id, key)
    root = xml.parse(await ctx.read_xml(MAX_COMPLETE_XML), COMPLETE_ELEMENTS)
    if root.tag != "CompleteMultipartUpload":
        raise S3Error("MalformedXML")
    chosen: list[tuple[int, str]] = []
    sent: dict[int, dict[str, str]] = {}  # part number -> ChecksumCRC32 etc., as sent
    for el in root.findall("Part"):
        number, etag = xml.child_text(el, "PartNumber"), xml.child_text(el, "ETag")
        if number is None or etag is None or parse_int(number.strip()) < 0:
            raise S3Error("MalformedXML")
        chosen.append((parse_int(number.strip()), digest.unquote(etag)))
        sent[chosen[-1][0]] = {c.tag: c.text or "" for c in el if c.tag.startswith("Checksum")}
    if not chosen:
        raise S3Error("MalformedXML")
    if any(a[0] >= b[0] for a, b in itertools.pairwise(chosen)):
        raise S3Error("InvalidPartOrder", UploadId=upload_id)
    customer_key = sse.request_key(ctx)
    if customer_key is not None:
        # Complete needs no key (AWS), but one it is given must be the upload's.
        if upload is None:
            upload = await ctx.store.get_upload(upload_id, ctx.bucket, key)
        sse.for_upload(upload.attrs, ctx.store.keys, customer_key)

    obj = await writes.complete(
        ctx.store, upload_id, ctx.bucket, key, chosen, sent, ctx.headers, condition, ctx.origin()
    )
    location = f"{ctx.request.scheme}://{ctx.request.host}/{ctx.bucket}/{key}"
    response = _xml(
        "CompleteMultipartUploadResult",
        [
            ("Location", location),
            ("Bucket", ctx.bucket),
            ("Key", key),
            ("ETag", digest.quote(obj.etag)),
            *checksum_nodes(obj.attrs.checksums),
        ],
    )
    if obj.version_id != NULL_VERSION:  # none for a null version, as PutObject
        response.headers["x-amz-version-id"] = obj.version_id
    # Complete carries no key; the answer names the encryption, SSE-C's key MD5 included.
    response.headers.update(sse.echo(obj.attrs))
    return response


async def _upload_to_complete(ctx: Context, upload_id: str, key: str) -> Upload | None:
    """The upload a Complete names; None when it is done already and made the current object
    (a retried Complete is answered with that object, as AWS does). An unknown upload is
    NoSuchUpload before the body is read (or invited), whatever the body holds, as AWS
    answers it."""
    try:
        return await ctx.store.get_upload(upload_id, ctx.bucket, key)
    except StoreError as exc:
        if exc.code != "NoSuchUpload":
            raise
        try:
            done = await ctx.store.head_object(ctx.bucket, key)
        except StoreError:
            raise exc from None
        if done.upload_id != upload_id:
            raise
        return None


def checksum_nodes(headers: Mapping[str, str]) -> list[xml.Node]:
    """Stored checksum headers as the ChecksumCRC32 / ChecksumType elements of a result."""
    nodes: list[xml.Node] = []
    for name, value in headers.items():
        if name == "x-amz-checksum-type":
            nodes.append(("ChecksumType", value))
        else:
            algorithm = checksums.by_header(name)
            if algorithm is not None:
                nodes.append((f"Checksum{algorithm.name}", value))
    return nodes


async def abort_multipart_upload(ctx: Context) -> web.StreamResponse:
    await ctx.store.abort_upload(ctx.upload_id, ctx.bucket, check_key(ctx.key))
    return web.Response(status=204)


async def list_parts(ctx: Context) -> web.StreamResponse:
    key = check_key(ctx.key)
    upload = await ctx.store.get_upload(ctx.upload_id, ctx.bucket, key)
    # Empty max-parts and part-number-marker are taken as absent: AWS answers 200 with
    # MaxParts 1000 and PartNumberMarker 0 (LocalStack's test_list_parts_empty_part_number_
    # marker, recorded against AWS in 2023 and Feb 2026).
    limit = max_count(ctx, "max-parts", empty_is_absent=True)
    raw_marker = ctx.query.get("part-number-marker", "0") or "0"
    if parse_int(raw_marker) < 0:
        raise invalid_argument(
            "Provided part-number-marker not an integer or within integer range",
            "part-number-marker",
            raw_marker,
        )
    marker = int(raw_marker)
    parts = await ctx.store.list_parts(upload.id, marker, limit + 1)
    truncated = len(parts) > limit
    parts = parts[:limit]
    # The initiator started the upload; the owner is who will own the object (the bucket's
    # owner unless the writer keeps it, as the ownership controls decide).
    assert ctx.bucket_record is not None  # the dispatcher found it
    owner = ctx.owner(upload.attrs.owner or ctx.bucket_record.owner)
    algorithm = _algorithm(upload)
    field = f"Checksum{algorithm.name}" if algorithm is not None else ""
    return _xml(
        "ListPartsResult",
        [
            ("Bucket", ctx.bucket),
            ("Key", key),
            ("UploadId", upload.id),
            ("Initiator", ctx.initiator(upload.owner)),
            ("Owner", owner),
            ("StorageClass", "STANDARD"),
            # The upload's checksum, as AWS's ListPartsResult names it.
            ("ChecksumAlgorithm", algorithm.name if algorithm is not None else None),
            ("ChecksumType", upload.attrs.checksums.get("type")),
            ("PartNumberMarker", marker),
            # Always sent: the last part listed, 0 when none (AWS's recordings, Feb 2026).
            ("NextPartNumberMarker", parts[-1].number if parts else 0),
            ("MaxParts", limit),
            ("IsTruncated", truncated),
            *(
                (
                    "Part",
                    [
                        ("PartNumber", p.number),
                        ("LastModified", xml.iso8601_seconds(p.mtime_ns)),
                        ("ETag", digest.quote(p.etag)),
                        ("Size", p.size),
                        (field, p.checksum if field else None),
                    ],
                )
                for p in parts
            ),
        ],
    )


async def list_multipart_uploads(ctx: Context) -> web.StreamResponse:
    encoding, encode = encoder(ctx)
    prefix = ctx.query.get("prefix", "")
    delimiter = ctx.query.get("delimiter", "")
    key_marker = ctx.query.get("key-marker", "")
    upload_id_marker = ctx.query.get("upload-id-marker", "") if key_marker else ""
    limit = max_count(ctx, "max-uploads")
    page = await ctx.store.list_uploads(
        ctx.bucket, prefix, delimiter, key_marker, upload_id_marker, limit
    )
    # Always sent, truncated or not: the last upload listed, empty when none; never a common
    # prefix, even one listed after it (LocalStack's recordings of AWS, Feb 2026:
    # test_list_multiparts_next_marker, test_list_multipart_uploads_marker_common_prefixes).
    last_upload = page.uploads[-1] if page.uploads else None
    next_key = last_upload.key if last_upload is not None else ""
    next_id = last_upload.id if last_upload is not None else ""
    nodes: list[xml.Node] = [
        ("Bucket", ctx.bucket),
        ("KeyMarker", encode(key_marker)),
        ("UploadIdMarker", upload_id_marker),
        ("NextKeyMarker", encode(next_key)),
        ("NextUploadIdMarker", next_id),
        ("Delimiter", encode(delimiter) if delimiter else None),
        ("Prefix", encode(prefix)),
        ("MaxUploads", limit),
        ("EncodingType", encoding),
        ("IsTruncated", page.truncated),
    ]
    for u in page.uploads:
        nodes.append(
            (
                "Upload",
                [
                    ("Key", encode(u.key)),
                    ("UploadId", u.id),
                    ("Initiator", ctx.initiator(u.owner)),
                    ("Owner", ctx.owner(u.owner)),
                    ("StorageClass", "STANDARD"),
                    ("Initiated", xml.iso8601_seconds(u.initiated_ns)),
                    # The upload's checksum, as AWS lists it.
                    ("ChecksumAlgorithm", u.attrs.checksums.get("algorithm")),
                    ("ChecksumType", u.attrs.checksums.get("type")),
                ],
            )
        )
    nodes += [("CommonPrefixes", [("Prefix", encode(p))]) for p in page.common_prefixes]
    return _xml("ListMultipartUploadsResult", nodes)


OPERATIONS = {
    "CreateMultipartUpload": create_multipart_upload,
    "UploadPart": upload_part,
    "CompleteMultipartUpload": complete_multipart_upload,
    "AbortMultipartUpload": abort_multipart_upload,
    "ListParts": list_parts,
    "ListMultipartUploads": list_multipart_uploads,
}
