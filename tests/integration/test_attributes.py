"""GetObjectAttributes through boto3: only the attributes asked for, the ETag unquoted, the
checksum, the parts of a multipart object (listed, and paged, when it has a COMPOSITE checksum; the
count alone otherwise), by version, and AWS's errors."""

from __future__ import annotations

import base64
import hashlib
import zlib

import pytest
from awscrt import checksums as crt
from botocore.exceptions import ClientError

from tests import raw

ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]
MiB = 1024 * 1024


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def test_a_plain_object(s3, bucket):
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"hello", ChecksumAlgorithm="SHA256")
    got = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=ALL)
    assert got["ETag"] == put["ETag"].strip('"')
    assert got["ObjectSize"] == 5 and got["StorageClass"] == "STANDARD"
    expected = base64.b64encode(hashlib.sha256(b"hello").digest()).decode()
    assert got["Checksum"]["ChecksumSHA256"] == expected
    assert "ObjectParts" not in got  # not a multipart object
    assert got["LastModified"] == s3.head_object(Bucket=bucket, Key="k")["LastModified"]
    only = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ObjectSize"])
    assert [k for k in only if k != "ResponseMetadata" and k != "LastModified"] == ["ObjectSize"]


def _multipart(  # type: ignore[no-untyped-def]
    s3, bucket: str, key: str, sizes: list[int], checksum: str | None, kind: str | None = None
):
    extra = {"ChecksumAlgorithm": checksum} if checksum else {}
    typed = {"ChecksumType": kind} if kind else {}
    up = s3.create_multipart_upload(Bucket=bucket, Key=key, **extra, **typed)["UploadId"]
    parts = []
    for n, size in enumerate(sizes, 1):
        answer = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=bytes([n]) * size, **extra
        )
        part = {"ETag": answer["ETag"], "PartNumber": n}
        if checksum:
            part[f"Checksum{checksum}"] = answer[f"Checksum{checksum}"]
        parts.append(part)
    s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=up, MultipartUpload={"Parts": parts}
    )
    return parts


def test_multipart_without_checksums_gives_the_count_only(s3, bucket):
    _multipart(s3, bucket, "mp", [5 * MiB, 5 * MiB, 1], None)
    got = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ALL)
    assert got["ObjectParts"] == {"TotalPartsCount": 3}
    assert got["ObjectSize"] == 10 * MiB + 1 and got["ETag"].endswith("-3")
    # The default checksum AWS gives an upload created without an algorithm: the whole
    # object's CRC64NVME (API_Checksum.html).
    data = b"\x01" * 5 * MiB + b"\x02" * 5 * MiB + b"\x03"
    want = base64.b64encode(crt.crc64nvme(data).to_bytes(8, "big")).decode()
    assert got["Checksum"] == {"ChecksumCRC64NVME": want, "ChecksumType": "FULL_OBJECT"}


def test_multipart_with_checksums_lists_and_pages_the_parts(s3, bucket):
    parts = _multipart(s3, bucket, "mp", [5 * MiB, 5 * MiB, 7], "SHA256")
    got = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ALL)
    listed = got["ObjectParts"]
    assert listed["TotalPartsCount"] == 3 and listed["IsTruncated"] is False
    assert [(p["PartNumber"], p["Size"], p["ChecksumSHA256"]) for p in listed["Parts"]] == [
        (n, size, part["ChecksumSHA256"])
        for n, size, part in zip((1, 2, 3), (5 * MiB, 5 * MiB, 7), parts, strict=True)
    ]
    assert got["Checksum"]["ChecksumType"] == "COMPOSITE"
    # The object's COMPOSITE checksum without the "-3" that HEAD shows, as AWS gives it here.
    head = s3.head_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED")["ChecksumSHA256"]
    assert head.endswith("-3") and got["Checksum"]["ChecksumSHA256"] == head.removesuffix("-3")
    first = s3.get_object_attributes(
        Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"], MaxParts=2
    )["ObjectParts"]
    assert [p["PartNumber"] for p in first["Parts"]] == [1, 2]
    assert (first["IsTruncated"], first["NextPartNumberMarker"]) == (True, 2)
    rest = s3.get_object_attributes(
        Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"], MaxParts=2, PartNumberMarker=2
    )["ObjectParts"]
    assert [p["PartNumber"] for p in rest["Parts"]] == [3] and rest["IsTruncated"] is False
    # A part read by its number carries that part's checksum (a range carries none).
    for n in (1, 3):
        got = s3.get_object(Bucket=bucket, Key="mp", PartNumber=n, ChecksumMode="ENABLED")
        assert got["ChecksumSHA256"] == parts[n - 1]["ChecksumSHA256"]
        assert got["ChecksumType"] == "COMPOSITE"
    ranged = s3.get_object(Bucket=bucket, Key="mp", Range="bytes=0-9", ChecksumMode="ENABLED")
    assert "ChecksumSHA256" not in ranged


def test_multipart_with_a_full_object_checksum_gives_the_count_only(s3, bucket):
    # AWS lists the parts only for a COMPOSITE checksum: a FULL_OBJECT upload answers
    # ObjectParts {TotalPartsCount} alone, as a default one does (LocalStack's AWS recordings
    # of test_complete_multipart_parts_checksum_full_object, Feb 2026).
    _multipart(s3, bucket, "mp", [5 * MiB, 5 * MiB, 7], "CRC32", "FULL_OBJECT")
    got = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ALL)
    assert got["ObjectParts"] == {"TotalPartsCount": 3}
    assert got["Checksum"]["ChecksumType"] == "FULL_OBJECT"
    whole = bytes([1]) * 5 * MiB + bytes([2]) * 5 * MiB + bytes([3]) * 7
    crc = base64.b64encode(zlib.crc32(whole).to_bytes(4, "big")).decode()
    assert got["Checksum"]["ChecksumCRC32"] == crc


def test_by_version_and_under_a_delete_marker(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=bucket, Key="k", Body=b"old")["VersionId"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"newer")
    got = s3.get_object_attributes(
        Bucket=bucket, Key="k", VersionId=old, ObjectAttributes=["ObjectSize"]
    )
    assert (got["ObjectSize"], got["VersionId"]) == (3, old)
    s3.delete_object(Bucket=bucket, Key="k")
    with pytest.raises(ClientError) as exc:
        s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ObjectSize"])
    assert error(exc) == ("NoSuchKey", 404)


def test_errors(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    url = f"{gateway.url}/{bucket}/k?attributes"
    for headers in ({}, {"x-amz-object-attributes": " , "}):
        reply = raw.signed("GET", url, headers)
        assert (reply.status, b"<Code>InvalidRequest</Code>" in reply.body) == (400, True)
    reply = raw.signed("GET", url, {"x-amz-object-attributes": "ETag,Colour"})
    assert (reply.status, b"<Code>InvalidArgument</Code>" in reply.body) == (400, True)
    # Spaces after the commas are fine.
    reply = raw.signed("GET", url, {"x-amz-object-attributes": "ETag, ObjectSize"})
    assert reply.status == 200 and b"<ObjectSize>1</ObjectSize>" in reply.body
    with pytest.raises(ClientError) as exc:
        s3.get_object_attributes(Bucket=bucket, Key="absent", ObjectAttributes=["ETag"])
    assert error(exc) == ("NoSuchKey", 404)
