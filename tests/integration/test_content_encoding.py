"""A body is stored as it was sent, whatever its Content-Encoding: S3 keeps the encoding as
metadata and returns it on GET, and never inflates the bytes (aiohttp would, by default, before
the length, payload hash and Content-MD5 checks saw them)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import zlib

import pytest

from tests import raw
from tests.integration.test_post_object import form_of, post, presigned

# br: the first bytes of a Brotli stream are not checked here; any bytes must pass through.
BODIES = {
    "gzip": gzip.compress(b"hello, gzip " * 500),
    "deflate": zlib.compress(b"hello, deflate " * 500),
    "br": bytes(range(256)) * 8,
    "x-bogus": b"\x00not gzip at all\xff" * 100,
    "gzip, identity": b"these bytes are not gzip",
}


def _md5(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest() + '"'


def _read_back(s3, bucket: str, key: str, body: bytes, encoding: str) -> None:
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == body
    assert got["ContentEncoding"] == encoding
    assert got["ContentLength"] == len(body)
    assert s3.head_object(Bucket=bucket, Key=key)["ContentEncoding"] == encoding


@pytest.mark.parametrize("encoding", BODIES)
def test_put_object_stores_the_bytes_sent(s3, bucket, encoding):
    body = BODIES[encoding]
    put = s3.put_object(Bucket=bucket, Key="k", Body=body, ContentEncoding=encoding)
    assert put["ETag"] == _md5(body)
    _read_back(s3, bucket, "k", body, encoding)


@pytest.mark.parametrize("encoding", ["gzip", "x-bogus"])
def test_a_signed_put_with_content_md5_and_the_encoding(gateway, s3, bucket, encoding):
    """Hand-signed (the payload hash and Content-MD5 of the bytes as sent) and over plain
    HTTP, as aws-cli's `s3 cp --content-encoding gzip` sends it."""
    body = BODIES[encoding]
    url = f"{gateway.url}/{bucket}/signed"
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    reply = raw.signed("PUT", url, {"Content-Encoding": encoding, "Content-MD5": md5}, body)
    assert reply.status == 200, reply.body
    assert reply.headers["etag"] == _md5(body)
    _read_back(s3, bucket, "signed", body, encoding)


@pytest.mark.parametrize("encoding", ["gzip", "br"])
def test_upload_part_stores_the_bytes_sent(s3, bucket, encoding):
    body = BODIES[encoding] + b"x" * (5 * 1024 * 1024)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", ContentEncoding=encoding)
    part = s3.upload_part(
        Bucket=bucket, Key="mp", UploadId=upload["UploadId"], PartNumber=1, Body=body
    )
    assert part["ETag"] == _md5(body)
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    _read_back(s3, bucket, "mp", body, encoding)


def test_upload_part_sent_with_content_encoding(gateway, s3, bucket):
    """The part's own request says gzip: its bytes are the part, as sent."""
    body = BODIES["gzip"]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp2")
    url = f"{gateway.url}/{bucket}/mp2?partNumber=1&uploadId={upload['UploadId']}"
    reply = raw.signed("PUT", url, {"Content-Encoding": "gzip"}, body)
    assert reply.status == 200, reply.body
    assert reply.headers["etag"] == _md5(body)
    parts = s3.list_parts(Bucket=bucket, Key="mp2", UploadId=upload["UploadId"])["Parts"]
    assert parts[0]["Size"] == len(body)


@pytest.mark.parametrize("encoding", ["gzip", "x-bogus"])
def test_presigned_put_stores_the_bytes_sent(gateway, s3, bucket, encoding):
    body = BODIES[encoding]
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "pre", "ContentEncoding": encoding}
    )
    reply = raw.send("PUT", url, {"Content-Encoding": encoding}, body)
    assert reply.status == 200, reply.body
    assert reply.headers["etag"] == _md5(body)
    _read_back(s3, bucket, "pre", body, encoding)


@pytest.mark.parametrize("encoding", ["gzip", "x-bogus"])
def test_post_form_stores_the_file_sent(gateway, s3, bucket, encoding):
    body = BODIES[encoding]
    signed = presigned(
        s3,
        bucket,
        "form",
        fields={"Content-Encoding": encoding},
        conditions=[{"Content-Encoding": encoding}],
    )
    reply = post(signed["url"], form_of(signed, body))
    assert reply.status == 204, reply.body
    assert reply.headers["etag"] == _md5(body)
    _read_back(s3, bucket, "form", body, encoding)


def test_aws_chunked_with_gzip_keeps_gzip(gateway, s3, bucket):
    """`aws-chunked` describes the transfer and is dropped; the object's own coding stays."""
    body = BODIES["gzip"]
    url = f"{gateway.url}/{bucket}/chunked"
    headers, framed = raw.signed_chunked_put(
        url, [body], headers={"Content-Encoding": "aws-chunked,gzip"}
    )
    reply = raw.send("PUT", url, headers, framed)
    assert reply.status == 200, reply.body
    assert reply.headers["etag"] == _md5(body)
    _read_back(s3, bucket, "chunked", body, "gzip")
