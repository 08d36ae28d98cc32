"""One end-to-end test per operation family, with boto3, against the endpoint in the
environment. Every assertion is what Amazon S3 itself answers, so the suite runs against any
S3: it only touches buckets it creates, and deletes them (see conftest.py)."""

from __future__ import annotations

import base64
import hashlib
import os
import ssl
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from conftest import REGION, Buckets, make_client

MIB = 2**20


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def status(call: Callable[..., Any], **kwargs: Any) -> int:
    """The HTTP status of a call, error or not (304 and 412 are errors to boto3)."""
    try:
        return call(**kwargs)["ResponseMetadata"]["HTTPStatusCode"]
    except ClientError as exc:
        return exc.response["ResponseMetadata"]["HTTPStatusCode"]


def md5_etag(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'


def multipart_etag(parts: list[bytes]) -> str:
    joined = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(joined).hexdigest()}-{len(parts)}"'


def test_buckets(s3, buckets: Buckets):
    name = buckets.create()
    assert status(s3.head_bucket, Bucket=name) == 200
    assert name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    # us-east-1 is the one region S3 reports as no location at all.
    assert (s3.get_bucket_location(Bucket=name)["LocationConstraint"] or "us-east-1") == REGION

    missing = buckets.name()
    assert status(s3.head_bucket, Bucket=missing) == 404
    with pytest.raises(ClientError) as exc:
        s3.list_objects_v2(Bucket=missing)
    assert error(exc) == ("NoSuchBucket", 404)
    with pytest.raises(ClientError) as exc:
        s3.create_bucket(Bucket="Not_A_Valid_Bucket_Name")
    assert error(exc) == ("InvalidBucketName", 400)

    s3.put_object(Bucket=name, Key="k", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket=name)
    assert error(exc) == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket=name, Key="k")
    assert status(s3.delete_bucket, Bucket=name) == 204
    assert status(s3.head_bucket, Bucket=name) == 404
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_objects_metadata_ranges_conditionals(s3, bucket):
    key = "dir/an object ü+%.bin"
    body = os.urandom(100_000)
    put = s3.put_object(
        Bucket=bucket,
        Key=key,
        Body=body,
        ContentMD5=base64.b64encode(hashlib.md5(body).digest()).decode(),
        ContentType="application/x-smoke",
        CacheControl="max-age=60",
        ContentDisposition='attachment; filename="x.bin"',
        ContentLanguage="en",
        Metadata={"color": "blue", "number": "7"},
    )
    etag = put["ETag"]
    assert etag == md5_etag(body)

    head = s3.head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] == len(body) and head["ETag"] == etag
    assert head["ContentType"] == "application/x-smoke"
    assert head["CacheControl"] == "max-age=60"
    assert head["ContentDisposition"] == 'attachment; filename="x.bin"'
    assert head["ContentLanguage"] == "en"
    assert head["Metadata"] == {"color": "blue", "number": "7"}
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == body and got["Metadata"] == head["Metadata"]
    override = s3.get_object(Bucket=bucket, Key=key, ResponseContentType="text/plain")
    assert override["Body"].read() == body and override["ContentType"] == "text/plain"

    # Ranges: first-last, suffix, open-ended; one beyond the end is refused.
    for header, expected, first in (
        ("bytes=10-19", body[10:20], 10),
        ("bytes=-5", body[-5:], len(body) - 5),
        ("bytes=99990-", body[99990:], 99990),
        ("bytes=99990-200000", body[99990:], 99990),
    ):
        part = s3.get_object(Bucket=bucket, Key=key, Range=header)
        assert part["ResponseMetadata"]["HTTPStatusCode"] == 206, header
        assert part["Body"].read() == expected, header
        last = first + len(expected) - 1
        assert part["ContentRange"] == f"bytes {first}-{last}/{len(body)}", header
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={len(body)}-")
    assert error(exc) == ("InvalidRange", 416)

    # Conditional GET and HEAD.
    modified = head["LastModified"]
    for call in (s3.get_object, s3.head_object):
        kw = {"Bucket": bucket, "Key": key}
        assert status(call, IfMatch=etag, **kw) == 200
        assert status(call, IfMatch='"00000000000000000000000000000000"', **kw) == 412
        assert status(call, IfNoneMatch=etag, **kw) == 304
        assert status(call, IfNoneMatch='"00000000000000000000000000000000"', **kw) == 200
        assert status(call, IfModifiedSince=modified, **kw) == 304
        assert status(call, IfUnmodifiedSince=modified - timedelta(days=1), **kw) == 412
        assert status(call, IfUnmodifiedSince=modified, **kw) == 200

    # Overwrite, the empty object, delete.
    s3.put_object(Bucket=bucket, Key=key, Body=b"second")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"second"
    empty = s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    assert empty["ETag"] == md5_etag(b"")
    assert s3.get_object(Bucket=bucket, Key="empty")["Body"].read() == b""
    assert status(s3.delete_object, Bucket=bucket, Key=key) == 204
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key=key)
    assert error(exc) == ("NoSuchKey", 404)
    assert status(s3.head_object, Bucket=bucket, Key=key) == 404


def test_response_overrides_replace_stored_headers(s3, bucket):
    stored = {
        "CacheControl": "max-age=60",
        "ContentDisposition": "inline",
        "ContentEncoding": "identity",
        "ContentLanguage": "en",
        "ContentType": "application/x-smoke",
    }
    s3.put_object(Bucket=bucket, Key="k", Body=b"body", **stored)
    got = s3.get_object(
        Bucket=bucket,
        Key="k",
        ResponseCacheControl="no-cache",
        ResponseContentDisposition='attachment; filename="k.txt"',
        ResponseContentEncoding="gzip",
        ResponseContentLanguage="fr",
        ResponseContentType="text/plain",
    )
    assert got["Body"].read() == b"body"
    assert {name: got[name] for name in stored} == {
        "CacheControl": "no-cache",
        "ContentDisposition": 'attachment; filename="k.txt"',
        "ContentEncoding": "gzip",
        "ContentLanguage": "fr",
        "ContentType": "text/plain",
    }


def test_copy(s3, buckets: Buckets):
    source, target = buckets.create(), buckets.create()
    key = "from dir/ü+source.bin"
    body = os.urandom(300_000)
    etag = s3.put_object(
        Bucket=source, Key=key, Body=body, ContentType="image/png", Metadata={"a": "1"}
    )["ETag"]
    copy_source = {"Bucket": source, "Key": key}

    copied = s3.copy_object(Bucket=target, Key="copy", CopySource=copy_source)
    assert copied["CopyObjectResult"]["ETag"] == etag  # a copy has the same bytes, so the same MD5
    head = s3.head_object(Bucket=target, Key="copy")
    assert (head["ContentType"], head["Metadata"], head["ETag"]) == ("image/png", {"a": "1"}, etag)
    assert s3.get_object(Bucket=target, Key="copy")["Body"].read() == body

    s3.copy_object(
        Bucket=target,
        Key="replaced",
        CopySource=copy_source,
        MetadataDirective="REPLACE",
        ContentType="text/plain",
        Metadata={"b": "2"},
    )
    head = s3.head_object(Bucket=target, Key="replaced")
    assert (head["ContentType"], head["Metadata"]) == ("text/plain", {"b": "2"})

    # Onto itself: only when something changes.
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=source, Key=key, CopySource=copy_source)
    assert error(exc) == ("InvalidRequest", 400)
    s3.copy_object(
        Bucket=source, Key=key, CopySource=copy_source, MetadataDirective="REPLACE",
        Metadata={"a": "2"},
    )  # fmt: skip
    assert s3.head_object(Bucket=source, Key=key)["Metadata"] == {"a": "2"}
    assert s3.get_object(Bucket=source, Key=key)["Body"].read() == body

    # Conditions on the source.
    ok = s3.copy_object(Bucket=target, Key="if", CopySource=copy_source, CopySourceIfMatch=etag)
    assert ok["CopyObjectResult"]["ETag"] == etag
    for condition in ({"CopySourceIfMatch": md5_etag(b"other")}, {"CopySourceIfNoneMatch": etag}):
        with pytest.raises(ClientError) as exc:
            s3.copy_object(Bucket=target, Key="if", CopySource=copy_source, **condition)
        assert error(exc) == ("PreconditionFailed", 412), condition
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=target, Key="x", CopySource={"Bucket": source, "Key": "missing"})
    assert error(exc) == ("NoSuchKey", 404)


def test_multipart_with_upload_part_copy(s3, bucket):
    source = os.urandom(6 * MIB)
    s3.put_object(Bucket=bucket, Key="source", Body=source)
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key="assembled", ContentType="video/mp4", Metadata={"origin": "smoke"}
    )["UploadId"]
    ids = {"Bucket": bucket, "Key": "assembled", "UploadId": upload}
    assert upload in [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]]

    p1 = os.urandom(5 * MIB)
    e1 = s3.upload_part(PartNumber=1, Body=p1, **ids)["ETag"]
    p2 = source[1 : 5 * MIB + 1]
    e2 = s3.upload_part_copy(
        PartNumber=2, CopySource={"Bucket": bucket, "Key": "source"},
        CopySourceRange=f"bytes=1-{5 * MIB}", **ids,
    )["CopyPartResult"]["ETag"]  # fmt: skip
    p3 = source  # a whole object as the last part
    e3 = s3.upload_part_copy(PartNumber=3, CopySource=f"{bucket}/source", **ids)
    e3 = e3["CopyPartResult"]["ETag"]
    listed = s3.list_parts(**ids)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed] == [
        (1, e1, len(p1)),
        (2, e2, len(p2)),
        (3, e3, len(p3)),
    ]

    # A wrong ETag names a part that was not uploaded; the upload stays open.
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": md5_etag(b"other")}]}, **ids
        )
    assert error(exc) == ("InvalidPart", 400)
    parts = [{"PartNumber": n, "ETag": e} for n, e in ((1, e1), (2, e2), (3, e3))]
    done = s3.complete_multipart_upload(MultipartUpload={"Parts": parts}, **ids)
    assert done["ETag"] == multipart_etag([p1, p2, p3])
    got = s3.get_object(Bucket=bucket, Key="assembled")
    assert got["Body"].read() == p1 + p2 + p3
    assert (got["ETag"], got["ContentType"]) == (done["ETag"], "video/mp4")
    assert got["Metadata"] == {"origin": "smoke"}
    with pytest.raises(ClientError) as exc:
        s3.list_parts(**ids)
    assert error(exc) == ("NoSuchUpload", 404)

    # Parts but the last must be 5 MiB at least; an aborted upload is gone.
    small = s3.create_multipart_upload(Bucket=bucket, Key="small")["UploadId"]
    ids = {"Bucket": bucket, "Key": "small", "UploadId": small}
    tiny = [
        {"PartNumber": n, "ETag": s3.upload_part(PartNumber=n, Body=b"tiny", **ids)["ETag"]}
        for n in (1, 2)
    ]
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(MultipartUpload={"Parts": tiny}, **ids)
    assert error(exc) == ("EntityTooSmall", 400)
    assert status(s3.abort_multipart_upload, **ids) == 204
    with pytest.raises(ClientError) as exc:
        # Answered before the body is invited: the connection is closed, then reused safely.
        s3.upload_part(PartNumber=3, Body=b"late", **ids)
    assert error(exc) == ("NoSuchUpload", 404)
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    assert status(s3.head_object, Bucket=bucket, Key="small") == 404


LISTED = ["a/1", "a/2", "a/b/3", "b/1", "c", "d", "e/f/g", "sp ace", "x+y", "ü", "~"]


def test_listing_v1_and_v2(s3, bucket):
    for key in LISTED:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    everything = sorted(LISTED, key=lambda k: k.encode())  # S3 orders keys by UTF-8 bytes

    v2 = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in v2["Contents"]] == everything
    assert v2["KeyCount"] == len(everything) and not v2["IsTruncated"]
    assert all(o["Size"] == len(o["Key"].encode()) for o in v2["Contents"])

    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["a/", "b/", "e/"]
    assert [o["Key"] for o in top["Contents"]] == [k for k in everything if "/" not in k]
    inside = s3.list_objects_v2(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in inside["Contents"]] == ["a/1", "a/2"]
    assert [p["Prefix"] for p in inside["CommonPrefixes"]] == ["a/b/"]
    after = s3.list_objects_v2(Bucket=bucket, StartAfter="d")
    assert [o["Key"] for o in after["Contents"]] == [k for k in everything if k.encode() > b"d"]
    none = s3.list_objects_v2(Bucket=bucket, Prefix="nothing/")
    assert none["KeyCount"] == 0 and "Contents" not in none

    # v2 pages by continuation token, v1 by marker (NextMarker comes only with a delimiter:
    # without one the next marker is the last key). A page lists its keys, then its prefixes.
    top = sorted(["a/", "b/", "e/"] + [k for k in everything if "/" not in k], key=str.encode)
    for delimiter, expected in (("", everything), ("/", top)):
        seen: list[str] = []
        kw: dict[str, Any] = {"Delimiter": delimiter} if delimiter else {}
        while True:
            page = s3.list_objects_v2(Bucket=bucket, MaxKeys=2, **kw)
            assert page["KeyCount"] <= 2
            seen += [o["Key"] for o in page.get("Contents", [])]
            seen += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
            if not page["IsTruncated"]:
                break
            kw["ContinuationToken"] = page["NextContinuationToken"]
        assert sorted(seen, key=str.encode) == expected and len(set(seen)) == len(seen)

        seen, kw = [], {"Delimiter": delimiter} if delimiter else {}
        while True:
            page = s3.list_objects(Bucket=bucket, MaxKeys=3, **kw)
            keys = [o["Key"] for o in page.get("Contents", [])]
            prefixes = [p["Prefix"] for p in page.get("CommonPrefixes", [])]
            seen += keys + prefixes
            if not page["IsTruncated"]:
                break
            kw["Marker"] = page["NextMarker"] if delimiter else keys[-1]
        assert sorted(seen, key=str.encode) == expected and len(set(seen)) == len(seen)

    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 4}
    )
    assert [o["Key"] for page in pages for o in page["Contents"]] == everything


def test_delete_objects(s3, bucket):
    keys = [f"batch/{n}" for n in range(6)]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    # A key that does not exist is reported deleted, as S3 does.
    reply = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in [*keys[:3], "batch/missing"]]}
    )
    assert {d["Key"] for d in reply["Deleted"]} == {*keys[:3], "batch/missing"}
    assert not reply.get("Errors")
    quiet = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[3:]], "Quiet": True}
    )
    assert not quiet.get("Deleted") and not quiet.get("Errors")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    assert status(s3.delete_object, Bucket=bucket, Key="batch/missing") == 204


def _https_context() -> ssl.SSLContext | None:
    bundle = os.environ.get("AWS_CA_BUNDLE")
    return ssl.create_default_context(cafile=bundle) if bundle else None


def _fetch(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30, context=_https_context()) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_presigned_urls(bucket):
    # SigV4: what every S3 accepts (Amazon S3 refuses SigV2 for buckets made since 2020).
    signer = make_client(signature_version="s3v4")
    body = os.urandom(10_000)
    put = signer.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "pre signed"}, ExpiresIn=300
    )
    assert _fetch(put, "PUT", body)[0] == 200
    get = signer.generate_presigned_url(
        "get_object",
        Params={"Bucket": bucket, "Key": "pre signed", "ResponseContentType": "text/plain"},
        ExpiresIn=300,
    )
    assert _fetch(get) == (200, body)
    with urllib.request.urlopen(get, timeout=30, context=_https_context()) as reply:
        assert reply.headers["Content-Type"] == "text/plain"
    head = signer.generate_presigned_url(
        "head_object", Params={"Bucket": bucket, "Key": "pre signed"}, ExpiresIn=300
    )
    assert _fetch(head, "HEAD")[0] == 200

    # Not another key, not after it expires.
    other = get.replace("pre%20signed", "other")
    assert other != get
    status_, reply = _fetch(other)
    assert status_ == 403 and b"SignatureDoesNotMatch" in reply
    expiring = signer.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "pre signed"}, ExpiresIn=1
    )
    time.sleep(2.5)
    status_, reply = _fetch(expiring)
    assert status_ == 403 and b"AccessDenied" in reply


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


CHECKSUMS: dict[str, Callable[[bytes], bytes]] = {
    "CRC32": lambda data: zlib.crc32(data).to_bytes(4, "big"),
    "SHA1": lambda data: hashlib.sha1(data).digest(),
    "SHA256": lambda data: hashlib.sha256(data).digest(),
}
try:  # botocore needs awscrt for these two as well
    from awscrt import checksums as _crt

    CHECKSUMS["CRC32C"] = lambda data: _crt.crc32c(data).to_bytes(4, "big")
    CHECKSUMS["CRC64NVME"] = lambda data: _crt.crc64nvme(data).to_bytes(8, "big")
except ImportError:
    pass


def test_checksums(s3, bucket):
    data = os.urandom(70_000)
    for algorithm, checksum in CHECKSUMS.items():
        expected = _b64(checksum(data))
        put = s3.put_object(Bucket=bucket, Key=algorithm, Body=data, ChecksumAlgorithm=algorithm)
        assert put[f"Checksum{algorithm}"] == expected, algorithm
        head = s3.head_object(Bucket=bucket, Key=algorithm, ChecksumMode="ENABLED")
        assert head[f"Checksum{algorithm}"] == expected, algorithm
        got = s3.get_object(Bucket=bucket, Key=algorithm, ChecksumMode="ENABLED")
        assert got[f"Checksum{algorithm}"] == expected, algorithm
        assert got["Body"].read() == data  # botocore checked the body against it as well

    # A checksum that does not match the body stores nothing.
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="bad", Body=data, ChecksumSHA256=_b64(b"\0" * 32))
    assert error(exc) == ("BadDigest", 400)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="bad", Body=data, ContentMD5=_b64(b"\0" * 16))
    assert error(exc) == ("BadDigest", 400)
    assert status(s3.head_object, Bucket=bucket, Key="bad") == 404

    # Multipart: each part's checksum, and the object's is the checksum of theirs, "-N".
    parts = [os.urandom(5 * MIB), os.urandom(1000)]
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key="mp", ChecksumAlgorithm="SHA256", ChecksumType="COMPOSITE"
    )
    ids = {"Bucket": bucket, "Key": "mp", "UploadId": upload["UploadId"]}
    done = []
    for number, part in enumerate(parts, 1):
        reply = s3.upload_part(PartNumber=number, Body=part, ChecksumAlgorithm="SHA256", **ids)
        assert reply["ChecksumSHA256"] == _b64(hashlib.sha256(part).digest())
        done.append(
            {"PartNumber": number, "ETag": reply["ETag"], "ChecksumSHA256": reply["ChecksumSHA256"]}
        )
    result = s3.complete_multipart_upload(MultipartUpload={"Parts": done}, **ids)
    joined = b"".join(hashlib.sha256(p).digest() for p in parts)
    expected = f"{_b64(hashlib.sha256(joined).digest())}-2"
    assert result["ChecksumSHA256"] == expected
    head = s3.head_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == expected and head["ChecksumType"] == "COMPOSITE"
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"".join(parts)
