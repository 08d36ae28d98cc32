"""CopyObject and UploadPartCopy: metadata-only copies, ETag rules, conditions, ranges."""

from __future__ import annotations

import datetime
import hashlib
import os

import pytest
from botocore.exceptions import ClientError

from tests import raw
from tests.datadir import inspect

MIB = 2**20


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def multipart_put(s3, bucket: str, key: str, parts: list[bytes]) -> str:
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = []
    for n, data in enumerate(parts, 1):
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n, Body=data)
        done.append({"PartNumber": n, "ETag": etag["ETag"]})
    result = s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done}
    )
    return result["ETag"]


def test_plain_copy_keeps_etag_and_shares_blobs(s3, bucket, gateway):
    data = os.urandom(2 * MIB)
    put = s3.put_object(Bucket=bucket, Key="src", Body=data, Metadata={"m": "1"})
    before = inspect(gateway.data, gateway.catalog)
    result = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert result["CopyObjectResult"]["ETag"] == put["ETag"]
    after = inspect(gateway.data, gateway.catalog)
    # No byte written: the copy references the very same blob file.
    assert after.blob_files == before.blob_files
    got = s3.get_object(Bucket=bucket, Key="dst")
    assert got["Body"].read() == data
    assert got["Metadata"] == {"m": "1"}
    after.assert_clean()


def test_multipart_source_copy_gets_content_md5(s3, bucket, gateway):
    parts = [os.urandom(5 * MIB), os.urandom(MIB)]
    etag = multipart_put(s3, bucket, "mp", parts)
    assert etag.endswith('-2"')
    whole = b"".join(parts)
    first = s3.copy_object(Bucket=bucket, Key="c1", CopySource=f"{bucket}/mp")
    assert first["CopyObjectResult"]["ETag"] == f'"{md5(whole)}"'
    # The content MD5 is remembered: the second copy gives the same answer (without reading).
    second = s3.copy_object(Bucket=bucket, Key="c2", CopySource=f"/{bucket}/mp")
    assert second["CopyObjectResult"]["ETag"] == f'"{md5(whole)}"'
    assert s3.get_object(Bucket=bucket, Key="c2")["Body"].read() == whole
    assert s3.head_object(Bucket=bucket, Key="mp")["ETag"] == etag  # source unchanged
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_copy_survives_source_delete_and_overwrite(s3, bucket, gateway):
    data = os.urandom(3 * MIB)
    before = inspect(gateway.data, gateway.catalog).blob_files
    s3.put_object(Bucket=bucket, Key="src", Body=data)
    (blob,) = inspect(gateway.data, gateway.catalog).blob_files - before
    s3.copy_object(Bucket=bucket, Key="a", CopySource=f"{bucket}/src")
    s3.copy_object(Bucket=bucket, Key="b", CopySource=f"{bucket}/src")
    s3.put_object(Bucket=bucket, Key="src", Body=b"overwritten")
    assert s3.get_object(Bucket=bucket, Key="a")["Body"].read() == data
    s3.delete_object(Bucket=bucket, Key="a")
    assert s3.get_object(Bucket=bucket, Key="b")["Body"].read() == data
    state = inspect(gateway.data, gateway.catalog)
    state.assert_clean()
    assert state.refs[blob] == 1
    s3.delete_object(Bucket=bucket, Key="b")
    state = inspect(gateway.data, gateway.catalog)
    assert blob not in state.blob_files  # the last reference gone: the file is gone
    state.assert_clean()


def test_copy_onto_itself(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"self", Metadata={"a": "1"})
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="k", CopySource=f"{bucket}/k")
    assert error(exc) == ("InvalidRequest", 400)
    assert "without changing the object's metadata" in exc.value.response["Error"]["Message"]
    # REPLACE, even with the same metadata, is allowed.
    s3.copy_object(
        Bucket=bucket,
        Key="k",
        CopySource=f"{bucket}/k",
        MetadataDirective="REPLACE",
        Metadata={"a": "1"},
    )
    s3.copy_object(
        Bucket=bucket,
        Key="k",
        CopySource=f"{bucket}/k",
        MetadataDirective="REPLACE",
        Metadata={"b": "2"},
        ContentType="text/plain",
    )
    head = s3.head_object(Bucket=bucket, Key="k")
    assert head["Metadata"] == {"b": "2"}
    assert head["ContentType"] == "text/plain"
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"self"


def test_metadata_directives(s3, bucket):
    s3.put_object(
        Bucket=bucket,
        Key="src",
        Body=b"x",
        ContentType="text/css",
        CacheControl="no-store",
        Metadata={"keep": "me"},
        WebsiteRedirectLocation="/elsewhere",
    )
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=f"{bucket}/src")
    head = s3.head_object(Bucket=bucket, Key="copied")
    assert head["ContentType"] == "text/css"
    assert head["CacheControl"] == "no-store"
    assert head["Metadata"] == {"keep": "me"}
    assert "WebsiteRedirectLocation" not in head  # never copied (AWS)
    s3.copy_object(
        Bucket=bucket,
        Key="replaced",
        CopySource=f"{bucket}/src",
        MetadataDirective="REPLACE",
        Metadata={"new": "yes"},
    )
    head = s3.head_object(Bucket=bucket, Key="replaced")
    assert head["Metadata"] == {"new": "yes"}
    assert head["ContentType"] == "binary/octet-stream"
    assert "CacheControl" not in head


def test_bad_directive_and_sources(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"x")
    url = f"{gateway.url}/{bucket}/dst"
    reply = raw.signed(
        "PUT", url, {"x-amz-copy-source": f"{bucket}/src", "x-amz-metadata-directive": "MOVE"}
    )
    assert (reply.status, reply.code) == (400, "InvalidArgument")
    reply = raw.signed("PUT", url, {"x-amz-copy-source": f"{bucket}"})
    assert (reply.status, reply.code) == (400, "InvalidArgument")
    # A source version is judged as GetObject judges ?versionId: in a bucket whose versioning
    # was never set, any id but `null` is invalid (AWS: 400 InvalidArgument).
    reply = raw.signed("PUT", url, {"x-amz-copy-source": f"{bucket}/src?versionId=abc"})
    assert (reply.status, reply.code) == (400, "InvalidArgument")
    reply = raw.signed("PUT", url, {"x-amz-copy-source": f"{bucket}/src?versionId=null"})
    assert reply.status == 200
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="d", CopySource=f"{bucket}/missing")
    assert error(exc) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="d", CopySource="no-such-bucket-x/src")
    assert error(exc) == ("NoSuchBucket", 404)


def test_copy_source_url_encoding(s3, bucket):
    key = "dir/with space+plus/ü?&=.txt"
    s3.put_object(Bucket=bucket, Key=key, Body=b"encoded")
    s3.copy_object(Bucket=bucket, Key="out", CopySource={"Bucket": bucket, "Key": key})
    assert s3.get_object(Bucket=bucket, Key="out")["Body"].read() == b"encoded"


@pytest.fixture
def source(s3, bucket):
    put = s3.put_object(Bucket=bucket, Key="src", Body=b"0123456789")
    modified = s3.head_object(Bucket=bucket, Key="src")["LastModified"]
    return bucket, put["ETag"], modified


def _copy_status(s3, bucket, **conditions) -> int | str:
    try:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource=f"{bucket}/src", **conditions)
    except ClientError as exc:
        return exc.response["Error"]["Code"]
    return 200


def test_copy_source_conditions(s3, source):
    bucket, etag, modified = source
    earlier = modified - datetime.timedelta(days=1)
    assert _copy_status(s3, bucket, CopySourceIfMatch=etag) == 200
    assert _copy_status(s3, bucket, CopySourceIfMatch='"nope"') == "PreconditionFailed"
    assert _copy_status(s3, bucket, CopySourceIfNoneMatch='"nope"') == 200
    assert _copy_status(s3, bucket, CopySourceIfNoneMatch=etag) == "PreconditionFailed"
    assert _copy_status(s3, bucket, CopySourceIfModifiedSince=earlier) == 200
    assert _copy_status(s3, bucket, CopySourceIfModifiedSince=modified) == "PreconditionFailed"
    assert _copy_status(s3, bucket, CopySourceIfUnmodifiedSince=modified) == 200
    assert _copy_status(s3, bucket, CopySourceIfUnmodifiedSince=earlier) == "PreconditionFailed"
    # AWS: if-match true and if-unmodified-since false -> copy.
    assert (
        _copy_status(s3, bucket, CopySourceIfMatch=etag, CopySourceIfUnmodifiedSince=earlier) == 200
    )
    # AWS: if-none-match false and if-modified-since true -> 412.
    assert (
        _copy_status(s3, bucket, CopySourceIfNoneMatch=etag, CopySourceIfModifiedSince=earlier)
        == "PreconditionFailed"
    )


def test_failed_condition_names_the_header(gateway, source):
    bucket, _, _ = source
    reply = raw.signed(
        "PUT",
        f"{gateway.url}/{bucket}/dst",
        {"x-amz-copy-source": f"{bucket}/src", "x-amz-copy-source-if-match": '"x"'},
    )
    assert (reply.status, reply.code) == (412, "PreconditionFailed")
    assert b"<Condition>x-amz-copy-source-If-Match</Condition>" in reply.body


# --- UploadPartCopy ------------------------------------------------------------------------------


def _part_copy(s3, bucket, upload, number, source_key, copy_range=None):
    kw = {"CopySourceRange": copy_range} if copy_range else {}
    return s3.upload_part_copy(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload,
        PartNumber=number,
        CopySource=f"{bucket}/{source_key}",
        **kw,
    )["CopyPartResult"]["ETag"]


def test_upload_part_copy_ranges(s3, bucket):
    data = bytes(range(10))
    s3.put_object(Bucket=bucket, Key="ten", Body=data)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    # Tiny ranges are allowed at copy time (AWS-recorded: ranges of a 10-byte source).
    assert _part_copy(s3, bucket, upload, 1, "ten", "bytes=0-0") == f'"{md5(data[:1])}"'
    assert _part_copy(s3, bucket, upload, 2, "ten", "bytes=9-9") == f'"{md5(data[9:])}"'
    assert _part_copy(s3, bucket, upload, 3, "ten", "bytes=0-8") == f'"{md5(data[:9])}"'
    assert _part_copy(s3, bucket, upload, 4, "ten") == f'"{md5(data)}"'
    parts = s3.list_parts(Bucket=bucket, Key="assembled", UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, 1), (2, 1), (3, 9), (4, 10)]
    s3.abort_multipart_upload(Bucket=bucket, Key="assembled", UploadId=upload)


@pytest.mark.parametrize(
    ("copy_range", "code"),
    [
        ("0-2", "InvalidArgument"),
        ("bytes=1-0", "InvalidArgument"),
        ("bytes=-1", "InvalidArgument"),
        ("bytes=0--1", "InvalidArgument"),
        ("bytes=0-1,3-4", "InvalidArgument"),
        ("bytes=-", "InvalidArgument"),
        ("bytes=1-", "InvalidArgument"),
        ("bytes=0-100", "InvalidArgument"),  # end past the size: AWS's answer
        ("bytes=100-200", "InvalidRequest"),  # start past the size
    ],
)
def test_upload_part_copy_invalid_ranges(s3, bucket, copy_range, code):
    s3.put_object(Bucket=bucket, Key="ten", Body=b"0123456789")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    with pytest.raises(ClientError) as exc:
        _part_copy(s3, bucket, upload, 1, "ten", copy_range)
    assert error(exc) == (code, 400)
    if copy_range == "bytes=0-100":
        assert (
            exc.value.response["Error"]["Message"]
            == "Range specified is not valid for source object of size: 10"
        )
    assert s3.list_parts(Bucket=bucket, Key="assembled", UploadId=upload).get("Parts", []) == []


def test_upload_part_copy_of_large_source_writes_nothing(s3, bucket, gateway):
    data = os.urandom(12 * MIB)
    s3.put_object(Bucket=bucket, Key="big", Body=data)
    before = inspect(gateway.data, gateway.catalog).blob_files
    upload = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    e1 = _part_copy(s3, bucket, upload, 1, "big", f"bytes=0-{6 * MIB - 1}")
    e2 = _part_copy(s3, bucket, upload, 2, "big", f"bytes={6 * MIB}-{12 * MIB - 1}")
    assert inspect(gateway.data, gateway.catalog).blob_files == before
    etag = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )["ETag"]
    expected = hashlib.md5(
        hashlib.md5(data[: 6 * MIB]).digest() + hashlib.md5(data[6 * MIB :]).digest()
    ).hexdigest()
    assert etag == f'"{expected}-2"'
    assert s3.get_object(Bucket=bucket, Key="assembled")["Body"].read() == data
    assert inspect(gateway.data, gateway.catalog).blob_files == before
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_upload_part_copy_conditions(s3, source):
    bucket, etag, _ = source
    upload = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    with pytest.raises(ClientError) as exc:
        s3.upload_part_copy(
            Bucket=bucket,
            Key="assembled",
            UploadId=upload,
            PartNumber=1,
            CopySource=f"{bucket}/src",
            CopySourceIfMatch='"other"',
        )
    assert error(exc) == ("PreconditionFailed", 412)
    ok = s3.upload_part_copy(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload,
        PartNumber=1,
        CopySource=f"{bucket}/src",
        CopySourceIfMatch=etag,
    )
    assert ok["CopyPartResult"]["ETag"] == etag


def test_boto3_managed_copy(s3, bucket):
    data = os.urandom(20 * MIB)
    s3.put_object(Bucket=bucket, Key="src", Body=data)
    s3.copy({"Bucket": bucket, "Key": "src"}, bucket, "managed-copy")
    assert s3.get_object(Bucket=bucket, Key="managed-copy")["Body"].read() == data
