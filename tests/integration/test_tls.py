"""HTTPS with a self-signed certificate: what boto3 sends over TLS is not what it sends over
plain HTTP (unsigned payloads, aws-chunked bodies with checksum trailers)."""

from __future__ import annotations

import hashlib
import os

import pytest

from tests.server import GatewayProcess


@pytest.fixture(scope="module")
def tls_gateway(tmp_path_factory):
    server = GatewayProcess(
        tmp_path_factory.mktemp("tls") / "data", {"S3GW_TLS_SELF_SIGNED": "1"}
    ).start()
    yield server
    server.stop()


@pytest.mark.parametrize("checksums", ["when_supported", "when_required"])
@pytest.mark.parametrize("size", [0, 100, 9 * 2**20])
def test_boto3_over_https(tls_gateway, checksums, size):
    assert tls_gateway.url.startswith("https://")
    cert = str(tls_gateway.data / "tls" / "localhost.crt")
    s3 = tls_gateway.client(verify=cert, request_checksum_calculation=checksums)
    bucket = f"tls-{checksums.replace('_', '-')}-{size}"
    s3.create_bucket(Bucket=bucket)
    data = os.urandom(size)
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    got = s3.get_object(Bucket=bucket, Key="k")["Body"].read()
    assert hashlib.md5(got).digest() == hashlib.md5(data).digest()
    s3.upload_fileobj(__import__("io").BytesIO(data), bucket, "managed")
    got = s3.get_object(Bucket=bucket, Key="managed")["Body"].read()
    assert hashlib.md5(got).digest() == hashlib.md5(data).digest()
