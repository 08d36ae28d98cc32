"""Conditional writes beyond PutObject (conditional-writes.html): If-Match / If-None-Match on
CopyObject's destination and on CompleteMultipartUpload, both on one write answered 501 as AWS
does, and either given as a signed query parameter of a presigned URL."""

from __future__ import annotations

import pytest
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests import raw
from tests.server import ACCESS_KEY, SECRET_KEY


def _error(call, **kw) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as refused:
        call(**kw)
    response = refused.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_copy_object_honours_the_destinations_condition(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"source")
    etag = s3.put_object(Bucket=bucket, Key="dst", Body=b"old")["ETag"]
    source = {"Bucket": bucket, "Key": "src"}
    copy = s3.copy_object
    assert _error(copy, Bucket=bucket, Key="dst", CopySource=source, IfNoneMatch="*") == (
        412,
        "PreconditionFailed",
    )
    assert _error(copy, Bucket=bucket, Key="dst", CopySource=source, IfMatch='"0000"') == (
        412,
        "PreconditionFailed",
    )
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"old"  # unchanged
    copy(Bucket=bucket, Key="dst", CopySource=source, IfMatch=etag)
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"source"
    copy(Bucket=bucket, Key="new", CopySource=source, IfNoneMatch="*")
    assert s3.get_object(Bucket=bucket, Key="new")["Body"].read() == b"source"
    assert _error(copy, Bucket=bucket, Key="absent", CopySource=source, IfMatch=etag)[0] == 404


def test_complete_honours_the_condition(s3, bucket):
    s3.put_object(Bucket=bucket, Key="mp", Body=b"there")

    def complete(**kw):  # type: ignore[no-untyped-def]
        upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1, Body=b"p")
        return s3.complete_multipart_upload(
            Bucket=bucket, Key="mp", UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}, **kw,
        )  # fmt: skip

    assert _error(complete, IfNoneMatch="*") == (412, "PreconditionFailed")
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"there"
    etag = s3.head_object(Bucket=bucket, Key="mp")["ETag"]
    complete(IfMatch=etag)
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"p"


def test_both_conditions_on_one_write_are_not_implemented(gateway, s3, bucket):
    url = f"{gateway.url}/{bucket}/both"
    headers = {"If-Match": '"abc"', "If-None-Match": "*"}
    reply = raw.signed("PUT", url, headers, b"x")
    assert (reply.status, reply.code) == (501, "NotImplemented")
    assert b"<Header>If-Match,If-None-Match</Header>" in reply.body
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="both")


def _presigned(url: str, params: dict[str, str]) -> str:
    """A SigV4 presigned PUT whose query carries `params`, signed with it."""
    request = AWSRequest("PUT", url, params=params)
    S3SigV4QueryAuth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1", 600).add_auth(request)
    return request.prepare().url


def test_a_presigned_urls_signed_condition_is_honoured(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="taken", Body=b"first")
    url = _presigned(f"{gateway.url}/{bucket}/taken", {"If-None-Match": "*"})
    assert "If-None-Match=%2A" in url
    reply = raw.send("PUT", url, {}, b"second")
    assert (reply.status, reply.code) == (412, "PreconditionFailed")
    assert s3.get_object(Bucket=bucket, Key="taken")["Body"].read() == b"first"
    free = _presigned(f"{gateway.url}/{bucket}/free", {"If-None-Match": "*"})
    assert raw.send("PUT", free, {}, b"made").status == 200
    assert s3.get_object(Bucket=bucket, Key="free")["Body"].read() == b"made"


def test_completes_object_checksum_is_checked_against_the_parts(s3, bucket):
    """A checksum Complete names for the whole object is the parts' combination, under the
    upload's algorithm: a wrong value is BadDigest, another algorithm's InvalidRequest (it
    was ignored), and GetObject of one part of a COMPOSITE object gives that part's."""
    import os

    bodies = [os.urandom(5 * 1024 * 1024), os.urandom(1000)]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm="CRC32")
    uid, parts = upload["UploadId"], []
    for n, data in enumerate(bodies, 1):
        made = s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=n, Body=data,
                              ChecksumAlgorithm="CRC32")  # fmt: skip
        parts.append(
            {"PartNumber": n, "ETag": made["ETag"], "ChecksumCRC32": made["ChecksumCRC32"]}
        )

    def complete(**kw):  # type: ignore[no-untyped-def]
        return s3.complete_multipart_upload(
            Bucket=bucket, Key="k", UploadId=uid, MultipartUpload={"Parts": parts}, **kw
        )

    assert _error(complete, ChecksumCRC32="AAAAAA==") == (400, "BadDigest")
    assert _error(complete, ChecksumSHA256="A" * 43 + "=") == (400, "InvalidRequest")
    done = complete()
    assert done["ChecksumType"] == "COMPOSITE" and done["ChecksumCRC32"].endswith("-2")
    for n, part in enumerate(parts, 1):
        got = s3.get_object(Bucket=bucket, Key="k", PartNumber=n, ChecksumMode="ENABLED")
        assert got["ChecksumCRC32"] == part["ChecksumCRC32"]
        assert got["Body"].read() == bodies[n - 1]
    # An upload that chose no algorithm has the default's (CRC64NVME) and no other.
    uid = s3.create_multipart_upload(Bucket=bucket, Key="d")["UploadId"]
    made = s3.upload_part(Bucket=bucket, Key="d", UploadId=uid, PartNumber=1, Body=b"d")
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="d", UploadId=uid, ChecksumCRC32="AAAAAA==",
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": made["ETag"]}]},
        )  # fmt: skip
    assert refused.value.response["Error"]["Code"] == "InvalidRequest"
