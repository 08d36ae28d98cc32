"""Hand-made requests, signed with botocore's own SigV4 signer, sent with http.client.

For what boto3 will not send: a missing Content-Length, a body that differs from its signed
hash, odd headers, no signature at all.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
from dataclasses import dataclass
from urllib.parse import urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.server import ACCESS_KEY, SECRET_KEY


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def code(self) -> str | None:
        start = self.body.find(b"<Code>")
        if start < 0:
            return None
        return self.body[start + 6 : self.body.find(b"</Code>")].decode()


def sign(
    method: str,
    url: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    payload_hash: str | None = None,
    access_key: str = ACCESS_KEY,
    secret_key: str = SECRET_KEY,
) -> dict[str, str]:
    """Headers for a SigV4-signed request (payload hash: the body's SHA-256 unless given)."""
    request = AWSRequest(method=method, url=url, headers=dict(headers or {}), data=body)
    signer = _Signer(Credentials(access_key, secret_key), "s3", "us-east-1")
    signer.payload_hash = payload_hash or hashlib.sha256(body).hexdigest()
    signer.add_auth(request)
    return dict(request.headers.items())


class _Signer(S3SigV4Auth):
    """botocore's S3 signer, told which payload hash to sign (it would hash the body)."""

    payload_hash = ""

    def payload(self, request: AWSRequest) -> str:
        return self.payload_hash


def send(
    method: str,
    url: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    chunked: bool = False,
    connect: str | None = None,
) -> Reply:
    """Send a request as given; `connect` is the host to connect to when the URL's host is
    a name that does not resolve here (virtual-hosted style)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(connect or parts.hostname, parts.port, timeout=60)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if "host" not in {k.lower() for k in (headers or {})}:
            conn.putheader("Host", parts.netloc)
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        elif body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body:
            if chunked:
                conn.send(f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
            else:
                conn.send(body)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def signed(
    method: str, url: str, headers: dict[str, str] | None = None, body: bytes = b"", **kw
) -> Reply:  # type: ignore[no-untyped-def]
    return send(method, url, sign(method, url, headers, body), body if body else None, **kw)


def signed_to(url: str, method: str, body: bytes = b"") -> Reply:
    """A signed request to a URL whose host may not resolve: sent to 127.0.0.1."""
    return send(method, url, sign(method, url, body=body), body or None, connect="127.0.0.1")


def signed_chunked_put(
    url: str,
    chunks: list[bytes],
    trailers: list[tuple[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[dict[str, str], bytes]:
    """Headers and body of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] PUT, signed the way
    the Java and JS SDKs sign them (botocore does not): a seed signature over the headers, then
    each chunk's signature chained from it (sigv4-streaming.html)."""
    mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" + ("-TRAILER" if trailers is not None else "")
    headers = {
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(sum(map(len, chunks))),
        **(headers or {}),
    }
    if trailers:
        headers["x-amz-trailer"] = ",".join(name for name, _ in trailers)
    signed = sign("PUT", url, headers, payload_hash=mode)
    amz_date = signed["X-Amz-Date"]
    scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
    key = f"AWS4{SECRET_KEY}".encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    previous = signed["Authorization"].rsplit("Signature=", 1)[1]

    def signature(kind: str, digest: str) -> str:
        extra = [hashlib.sha256(b"").hexdigest()] if kind == "PAYLOAD" else []
        text = "\n".join([f"AWS4-HMAC-SHA256-{kind}", amz_date, scope, previous, *extra, digest])
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()

    body = []
    for data in [*chunks, b""]:
        previous = signature("PAYLOAD", hashlib.sha256(data).hexdigest())
        body.append(b"%x;chunk-signature=%s\r\n" % (len(data), previous.encode()))
        body.append(data + b"\r\n" if data else b"")
    if trailers is not None:
        lines = "".join(f"{name}:{value}\n" for name, value in trailers)
        body += [f"{name}:{value}\r\n".encode() for name, value in trailers]
        sig = signature("TRAILER", hashlib.sha256(lines.encode()).hexdigest())
        body.append(f"x-amz-trailer-signature:{sig}\r\n".encode())
    body.append(b"\r\n")
    return signed, b"".join(body)
