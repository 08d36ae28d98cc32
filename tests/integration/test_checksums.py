"""Flexible checksums and aws-chunked bodies through the real server."""

from __future__ import annotations

import base64
import os
import zlib

import pytest
from botocore.exceptions import ClientError

from tests import raw
from tests.datadir import inspect


def crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def test_default_boto3_checksum_is_stored_and_returned(s3, bucket):
    data = os.urandom(100_000)
    put = s3.put_object(Bucket=bucket, Key="k", Body=data)  # boto3 adds a CRC32 by default
    assert put["ChecksumCRC32"] == crc32(data)
    got = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == crc32(data)
    assert got["Body"].read() == data
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == crc32(data) and head["ChecksumType"] == "FULL_OBJECT"
    assert "ChecksumCRC32" not in s3.head_object(Bucket=bucket, Key="k")
    ranged = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED", Range="bytes=0-9")
    assert "ChecksumCRC32" not in ranged  # a checksum of the whole cannot vouch for a part
    copied = s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k")
    assert copied["CopyObjectResult"]["ETag"] == put["ETag"]
    assert s3.head_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")["ChecksumCRC32"] == (
        crc32(data)
    )


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
def test_each_algorithm(s3, bucket, algorithm):
    data = os.urandom(70_000)
    put = s3.put_object(Bucket=bucket, Key=algorithm, Body=data, ChecksumAlgorithm=algorithm)
    value = put[f"Checksum{algorithm}"]
    got = s3.get_object(Bucket=bucket, Key=algorithm, ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == value
    assert got["Body"].read() == data  # botocore validated the body against the checksum too


def test_wrong_checksum_is_bad_digest_and_stores_nothing(s3, bucket, gateway):
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=b"data", ChecksumCRC32=crc32(b"other"))
    assert exc.value.response["Error"]["Code"] == "BadDigest"
    assert "CRC32" in exc.value.response["Error"]["Message"]
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    inspect(gateway.data).assert_clean()


def test_malformed_checksum_header(gateway, bucket):
    url = f"{gateway.url}/{bucket}/k"
    reply = raw.signed("PUT", url, {"x-amz-checksum-crc32": "not base64!"}, body=b"x")
    assert (reply.status, reply.code) == (400, "InvalidRequest")


@pytest.mark.parametrize("trailer", [False, True])
def test_signed_aws_chunked_put(gateway, s3, bucket, trailer):
    chunks = [os.urandom(64 * 1024), os.urandom(64 * 1024), os.urandom(1000)]
    data = b"".join(chunks)
    url = f"{gateway.url}/{bucket}/chunked"
    trailers = [("x-amz-checksum-crc32", crc32(data))] if trailer else None
    headers, body = raw.signed_chunked_put(url, chunks, trailers, {"Content-Type": "text/x"})
    reply = raw.send("PUT", url, headers, body)
    assert reply.status == 200, reply.body
    got = s3.get_object(Bucket=bucket, Key="chunked", ChecksumMode="ENABLED")
    assert got["Body"].read() == data  # the framing was removed, not stored
    assert "ContentEncoding" not in got  # aws-chunked is not the object's encoding
    assert got["ContentType"] == "text/x"
    if trailer:
        assert got["ChecksumCRC32"] == crc32(data)


def test_damaged_aws_chunked_bodies_are_refused(gateway, s3, bucket):
    url = f"{gateway.url}/{bucket}/damaged"
    chunks = [os.urandom(10_000), os.urandom(500)]
    headers, body = raw.signed_chunked_put(url, chunks)
    at = body.index(b"\r\n") + 2 + 100  # a byte of the first chunk's data
    flipped = body[:at] + bytes([body[at] ^ 1]) + body[at + 1 :]
    assert raw.send("PUT", url, headers, flipped).code == "SignatureDoesNotMatch"
    assert raw.send("PUT", url, headers, body[:-40]).code == "IncompleteBody"
    headers, body = raw.signed_chunked_put(url, chunks, [("x-amz-checksum-crc32", crc32(b"x"))])
    assert raw.send("PUT", url, headers, body).code == "BadDigest"
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    inspect(gateway.data).assert_clean()


def test_aws_cli_put_object_with_crc32c(gateway, s3, bucket, tmp_path):
    from tests.integration.test_auth import _aws

    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(50_000))
    out = _aws(
        gateway, "s3api", "put-object", "--bucket", bucket, "--key", "cli",
        "--body", str(source), "--checksum-algorithm", "CRC32C",
    )  # fmt: skip
    assert "ChecksumCRC32C" in out
    head = s3.head_object(Bucket=bucket, Key="cli", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32C"] in out
