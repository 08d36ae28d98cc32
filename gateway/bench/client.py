"""A lean signed HTTP client for benchmarks: botocore's SigV4 signer over one kept-alive
http.client connection, and no response parsing, so that what is timed is the server."""

from __future__ import annotations

import http.client
from urllib.parse import urlencode, urlsplit

from .process import ACCESS_KEY, SECRET_KEY


class LeanClient:
    def __init__(self, endpoint: str, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY):
        # botocore comes with the test extra, not with the gateway: imported when used.
        from botocore.auth import S3SigV4Auth
        from botocore.credentials import Credentials

        parts = urlsplit(endpoint)
        self.endpoint = endpoint
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        self.signer = S3SigV4Auth(Credentials(access_key, secret_key), "s3", "us-east-1")

    def request(
        self, method: str, path: str, query: dict[str, str] | None = None, body: bytes = b""
    ) -> tuple[int, bytes]:
        from botocore.awsrequest import AWSRequest

        url = self.endpoint + path + ("?" + urlencode(query) if query else "")
        request = AWSRequest(method=method, url=url, data=body)
        self.signer.add_auth(request)
        target = path + ("?" + urlencode(query) if query else "")
        self.conn.request(method, target, body=body or None, headers=dict(request.headers.items()))
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.conn.close()
