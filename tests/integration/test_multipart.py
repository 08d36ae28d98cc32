"""Multipart uploads against the real server: ETags, errors, listings, space released."""

from __future__ import annotations

import hashlib
import http.client
import os
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from tests import awscli, raw
from tests.datadir import inspect

MIB = 2**20


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def mp_etag(parts: list[bytes]) -> str:
    joined = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(joined).hexdigest()}-{len(parts)}"'


def start(s3, bucket, key="mp", **kw):
    return s3.create_multipart_upload(Bucket=bucket, Key=key, **kw)["UploadId"]


def put_part(s3, bucket, upload, n, data, key="mp"):
    return s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n, Body=data)["ETag"]


def complete(s3, bucket, upload, parts, key="mp"):
    return s3.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
    )


def test_upload_and_copy_parts_read_back_exactly(s3, bucket, gateway):
    copied_source = os.urandom(7 * MIB)
    s3.put_object(Bucket=bucket, Key="source", Body=copied_source)
    p1, p3 = os.urandom(5 * MIB), os.urandom(123)
    upload = start(s3, bucket, ContentType="video/mp4", Metadata={"origin": "test"})
    e1 = put_part(s3, bucket, upload, 1, p1)
    e2 = s3.upload_part_copy(
        Bucket=bucket,
        Key="mp",
        UploadId=upload,
        PartNumber=2,
        CopySource=f"{bucket}/source",
        CopySourceRange=f"bytes=1-{5 * MIB}",
    )["CopyPartResult"]["ETag"]
    e3 = put_part(s3, bucket, upload, 3, p3)
    p2 = copied_source[1 : 5 * MIB + 1]
    result = complete(s3, bucket, upload, [(1, e1), (2, e2), (3, e3)])
    assert result["ETag"] == mp_etag([p1, p2, p3])
    assert result["Key"] == "mp" and result["Bucket"] == bucket
    got = s3.get_object(Bucket=bucket, Key="mp")
    assert got["Body"].read() == p1 + p2 + p3
    assert got["ContentType"] == "video/mp4"
    assert got["Metadata"] == {"origin": "test"}
    assert got["ETag"] == mp_etag([p1, p2, p3])
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_get_part_number(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(10)]
    upload = start(s3, bucket)
    done = [(n, put_part(s3, bucket, upload, n, p)) for n, p in enumerate(parts, 1)]
    complete(s3, bucket, upload, done)
    for n, data in enumerate(parts, 1):
        got = s3.get_object(Bucket=bucket, Key="mp", PartNumber=n)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["PartsCount"] == 3
        assert got["Body"].read() == data
    head = s3.head_object(Bucket=bucket, Key="mp", PartNumber=3)
    assert head["ContentLength"] == 10 and head["PartsCount"] == 3
    assert "PartsCount" not in s3.head_object(Bucket=bucket, Key="mp")
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=4)
    assert error(exc) == ("InvalidPartNumber", 416)
    # An object that was not uploaded in parts is its own part 1.
    s3.put_object(Bucket=bucket, Key="single", Body=b"0123456789")
    got = s3.get_object(Bucket=bucket, Key="single", PartNumber=1)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert got["ContentRange"] == "bytes 0-9/10"
    assert got["Body"].read() == b"0123456789"


def test_complete_errors(s3, bucket, gateway):
    upload = start(s3, bucket)
    small = put_part(s3, bucket, upload, 1, b"tiny")
    big = put_part(s3, bucket, upload, 2, os.urandom(5 * MIB))
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(2, big), (1, small)])
    assert error(exc) == ("InvalidPartOrder", 400)
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(1, small), (1, small)])
    assert error(exc) == ("InvalidPartOrder", 400)
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(1, small), (3, big)])
    assert error(exc) == ("InvalidPart", 400)
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(1, '"00000000000000000000000000000000"')])
    assert error(exc) == ("InvalidPart", 400)
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(1, small), (2, big)])  # a 4-byte part that is not last
    assert error(exc) == ("EntityTooSmall", 400)
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [])
    assert error(exc) == ("MalformedXML", 400)
    # None of this touched the upload: it still completes, with unquoted ETags too.
    result = complete(s3, bucket, upload, [(2, big.strip('"'))])
    assert result["ETag"].endswith('-1"')
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_malformed_complete_body(gateway, s3, bucket):
    upload = start(s3, bucket)
    url = f"{gateway.url}/{bucket}/mp?uploadId={upload}"
    for body in (
        b"not xml",
        b"<CompleteMultipartUpload><Part><PartNumber>x</PartNumber>"
        b"<ETag>e</ETag></Part></CompleteMultipartUpload>",
        b"<Other/>",
    ):
        reply = raw.signed("POST", url, body=body)
        assert (reply.status, reply.code) == (400, "MalformedXML")


def test_repeated_complete_answers_the_same(s3, bucket):
    upload = start(s3, bucket)
    e1 = put_part(s3, bucket, upload, 1, b"only part")
    first = complete(s3, bucket, upload, [(1, e1)])
    again = complete(s3, bucket, upload, [(1, e1)])
    assert again["ETag"] == first["ETag"]
    # Once the object is replaced, the upload is gone for good.
    s3.put_object(Bucket=bucket, Key="mp", Body=b"newer")
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(1, e1)])
    assert error(exc) == ("NoSuchUpload", 404)


def test_abort_releases_parts(s3, bucket, gateway):
    before = inspect(gateway.data, gateway.catalog).blob_files
    upload = start(s3, bucket)
    put_part(s3, bucket, upload, 1, os.urandom(5 * MIB))
    put_part(s3, bucket, upload, 2, os.urandom(MIB))
    assert len(inspect(gateway.data, gateway.catalog).blob_files - before) == 2
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)
    assert inspect(gateway.data, gateway.catalog).blob_files == before
    with pytest.raises(ClientError) as exc:
        s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload)
    assert error(exc) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as exc:
        put_part(s3, bucket, upload, 3, b"late")
    assert error(exc) == ("NoSuchUpload", 404)
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_resent_part_replaces_and_releases(s3, bucket, gateway):
    before = inspect(gateway.data, gateway.catalog).blob_files
    upload = start(s3, bucket)
    put_part(s3, bucket, upload, 1, os.urandom(2 * MIB))
    second = os.urandom(2 * MIB)
    e1 = put_part(s3, bucket, upload, 1, second)
    assert len(inspect(gateway.data, gateway.catalog).blob_files - before) == 1
    parts = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["ETag"]) for p in parts] == [(1, e1)]
    complete(s3, bucket, upload, [(1, e1)])
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == second
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_overlapping_uploads_of_a_part_the_last_to_finish_wins(s3, bucket, gateway):
    """Two uploads of part 1 overlap: the first starts, the second starts and finishes, then
    the first finishes. Part 1 is the upload acknowledged last ("If you upload a new part
    using the same part number as a previously uploaded part, the previously uploaded part is
    overwritten", mpuoverview.html). A list naming part 1 twice is refused (InvalidPartOrder:
    AWS's answer to such a list, quoted in transloadit/uppy#2324)."""
    upload = start(s3, bucket)
    slow, quick = os.urandom(MIB), os.urandom(MIB)
    url = f"{gateway.url}/{bucket}/mp?partNumber=1&uploadId={upload}"
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.putrequest("PUT", f"{parts.path}?{parts.query}", skip_host=True)
        headers = raw.sign("PUT", url, payload_hash="UNSIGNED-PAYLOAD")
        headers.update({"Host": parts.netloc, "Content-Length": str(len(slow))})
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        conn.send(slow[: MIB // 2])
        quick_etag = put_part(s3, bucket, upload, 1, quick)  # starts later, finishes first
        conn.send(slow[MIB // 2 :])
        reply = conn.getresponse()
        assert reply.status == 200
        slow_etag = reply.getheader("ETag")
        reply.read()
    finally:
        conn.close()
    assert slow_etag == f'"{hashlib.md5(slow).hexdigest()}"' != quick_etag
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(1, quick_etag), (1, slow_etag)])
    assert error(exc) == ("InvalidPartOrder", 400)
    with pytest.raises(ClientError) as exc:
        complete(s3, bucket, upload, [(1, quick_etag)])
    assert error(exc) == ("InvalidPart", 400)
    complete(s3, bucket, upload, [(1, slow_etag)])
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == slow
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_unused_parts_are_released_on_complete(s3, bucket, gateway):
    before = inspect(gateway.data, gateway.catalog).blob_files
    upload = start(s3, bucket)
    e1 = put_part(s3, bucket, upload, 1, os.urandom(2 * MIB))
    put_part(s3, bucket, upload, 2, os.urandom(2 * MIB))
    complete(s3, bucket, upload, [(1, e1)])
    assert len(inspect(gateway.data, gateway.catalog).blob_files - before) == 1
    inspect(gateway.data, gateway.catalog).assert_clean()


@pytest.mark.parametrize("number", [0, 10001, -1])
def test_part_number_bounds(s3, bucket, gateway, number):
    upload = start(s3, bucket)
    url = f"{gateway.url}/{bucket}/mp?partNumber={number}&uploadId={upload}"
    reply = raw.signed("PUT", url, body=b"x")
    assert (reply.status, reply.code) == (400, "InvalidArgument")


def test_unknown_upload(s3, bucket):
    with pytest.raises(ClientError) as exc:
        put_part(s3, bucket, "no-such-upload", 1, b"x")
    assert error(exc) == ("NoSuchUpload", 404)
    upload = start(s3, bucket, key="a")
    with pytest.raises(ClientError) as exc:  # the upload is for another key
        put_part(s3, bucket, upload, 1, b"x", key="b")
    assert error(exc) == ("NoSuchUpload", 404)


def test_list_parts_pagination(s3, bucket):
    upload = start(s3, bucket)
    etags = {n: put_part(s3, bucket, upload, n, f"part {n}".encode()) for n in range(1, 8)}
    seen, marker = [], 0
    while True:
        page = s3.list_parts(
            Bucket=bucket, Key="mp", UploadId=upload, MaxParts=3, PartNumberMarker=marker
        )
        seen += [(p["PartNumber"], p["ETag"], p["Size"]) for p in page["Parts"]]
        if not page["IsTruncated"]:
            break
        marker = page["NextPartNumberMarker"]
    assert seen == [(n, etags[n], len(f"part {n}")) for n in range(1, 8)]


def test_list_multipart_uploads(s3, bucket):
    ids = {}
    for key in ["a/1", "a/2", "b", "c/x/y", "b"]:
        ids.setdefault(key, []).append(start(s3, bucket, key=key))
    listed = []
    kw: dict[str, str] = {}
    while True:
        page = s3.list_multipart_uploads(Bucket=bucket, MaxUploads=2, **kw)
        listed += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
        if not page["IsTruncated"]:
            break
        kw = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}
    assert [k for k, _ in listed] == ["a/1", "a/2", "b", "b", "c/x/y"]
    assert [u for k, u in listed if k == "b"] == ids["b"]  # same key: oldest first
    page = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["a/", "c/"]
    assert [u["Key"] for u in page["Uploads"]] == ["b", "b"]
    page = s3.list_multipart_uploads(Bucket=bucket, Prefix="a/")
    assert [u["Key"] for u in page["Uploads"]] == ["a/1", "a/2"]


def test_delete_bucket_drops_pending_uploads(s3, gateway):
    s3.create_bucket(Bucket="pending-uploads")
    before = inspect(gateway.data, gateway.catalog).blob_files
    upload = start(s3, "pending-uploads")
    put_part(s3, "pending-uploads", upload, 1, os.urandom(2 * MIB))
    s3.delete_bucket(Bucket="pending-uploads")
    assert inspect(gateway.data, gateway.catalog).blob_files == before
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_aws_cli_server_side_copy_of_100_mib(gateway, s3, bucket, tmp_path):
    data = os.urandom(100 * MIB)
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    awscli.ok(gateway.url, "s3", "cp", f"s3://{bucket}/k", f"s3://{bucket}/k2")
    head = s3.head_object(Bucket=bucket, Key="k2")
    assert head["ETag"].endswith('-13"')  # aws-cli copied it in 8 MiB UploadPartCopy parts
    body = s3.get_object(Bucket=bucket, Key="k2")["Body"].read()
    assert hashlib.md5(body).digest() == hashlib.md5(data).digest()
