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


def test_a_virtual_hosted_request_verifies_over_https(tmp_path):
    """The self-signed certificate names the virtual-hosted domain and its wildcard
    (`*.s3.localhost`, and `--domain`'s): a client that verifies it reaches BUCKET.DOMAIN.
    `*.localhost` alone matched no `bucket.s3.localhost` (a wildcard covers one label)."""
    import socket
    import ssl

    from tests import raw

    for domain in ("s3.localhost", "objects.example.test"):
        server = GatewayProcess(
            tmp_path / domain / "data", {"S3GW_TLS_SELF_SIGNED": "1", "S3GW_DOMAIN": domain}
        ).start()
        try:
            port = int(server.url.rsplit(":", 1)[1])
            cert = server.data / "tls" / "localhost.crt"
            server.client(verify=str(cert)).create_bucket(Bucket="vbucket")
            host = f"vbucket.{domain}"
            context = ssl.create_default_context(cafile=str(cert))  # verifies, names checked
            headers = raw.sign("GET", f"https://{host}:{port}/?list-type=2")
            request = [
                "GET /?list-type=2 HTTP/1.1",
                f"Host: {host}:{port}",
                *(f"{k}: {v}" for k, v in headers.items()),
                "Connection: close",
                "",
                "",
            ]
            with (
                socket.create_connection(("127.0.0.1", port), timeout=30) as plain,
                context.wrap_socket(plain, server_hostname=host) as conn,
            ):
                conn.sendall("\r\n".join(request).encode())
                answer = b""
                while chunk := conn.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 200"), answer.partition(b"\r\n\r\n")[2][:200]
            assert b"<Name>vbucket</Name>" in answer
        finally:
            server.stop()
