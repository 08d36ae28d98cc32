"""The few S3 calls the blob tier makes, over aiohttp, signed with SigV4.

Not a general S3 client: objects are put whole or in parts, read by ranges, listed, deleted;
multipart uploads are begun, fed, completed, listed and aborted. Bodies go with
UNSIGNED-PAYLOAD (as boto3 sends them over HTTPS): hashing every byte with SHA-256 would cost
more CPU than the write itself, and the store below checks nothing more with it. Why this
rather than aiobotocore: docs/scaling.md, "Blobs on S3".
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import hmac
import ssl
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver

UNSIGNED = "UNSIGNED-PAYLOAD"
# Statuses worth another try: the store below is busy or restarting.
_RETRY = frozenset((500, 502, 503, 504))
_ATTEMPTS = 4


@dataclass(frozen=True)
class Target:
    """Where blobs go: a bucket (and a prefix in it) of an S3 endpoint, and how to reach it."""

    endpoint: str  # scheme://host[:port]
    bucket: str
    prefix: str  # "" or ending in "/"
    region: str
    access_key: str
    secret_key: str
    path_style: bool = True
    ca_file: str | None = None


class S3Failed(OSError):
    """An S3 call answered with an error: its status and code."""

    def __init__(self, status: int, code: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status} {code}".strip())
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def xml(self) -> ET.Element:
        return ET.fromstring(self.body)


def _uri(text: str, safe: str = "") -> str:
    return quote(text, safe="-_.~" + safe)


def signing_key(secret_key: str, date: str, region: str) -> bytes:
    key = f"AWS4{secret_key}".encode()
    for part in (date, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(
    target: Target,
    method: str,
    host: str,
    path: str,
    query: Sequence[tuple[str, str]],
    headers: dict[str, str],
    now: dt.datetime,
) -> str:
    """Add SigV4's headers to `headers` (host, x-amz-date, x-amz-content-sha256 and
    Authorization) for a request of `path` (URI-encoded already); gives the canonical query."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    date = stamp[:8]
    headers["host"] = host
    headers["x-amz-date"] = stamp
    headers.setdefault("x-amz-content-sha256", UNSIGNED)
    encoded = sorted((_uri(k), _uri(v)) for k, v in query)
    canonical_query = "&".join(f"{k}={v}" for k, v in encoded)
    names = sorted(n for n in (h.lower() for h in headers) if n == "host" or n[:6] == "x-amz-")
    lower = {n.lower(): " ".join(str(v).split()) for n, v in headers.items()}
    canonical = "\n".join(
        [
            method,
            path,
            canonical_query,
            "".join(f"{n}:{lower[n]}\n" for n in names),
            ";".join(names),
            headers["x-amz-content-sha256"],
        ]
    )
    scope = f"{date}/{target.region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    signature = hmac.new(
        signing_key(target.secret_key, date, target.region), to_sign.encode(), hashlib.sha256
    ).hexdigest()
    headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={target.access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return canonical_query


def children(element: ET.Element, name: str) -> Iterator[ET.Element]:
    """Direct children named `name`, whatever the namespace."""
    for child in element:
        if child.tag == name or child.tag.endswith("}" + name):
            yield child


def text(element: ET.Element, name: str) -> str:
    for child in children(element, name):
        return child.text or ""
    return ""


class S3Client:
    """Requests to one bucket. A session per event loop (a gateway has one; fsck and the tests
    run several loops one after another), closed with `close`."""

    def __init__(
        self, target: Target, connections: int = 64, resolver: AbstractResolver | None = None
    ) -> None:
        self.target = target
        self.connections = connections
        # Who resolves the endpoint's name (None: aiohttp's own); replication's remotes that an
        # account named are bound by --notify-networks this way (notify/webhook.BoundResolver).
        self.resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        split = urlsplit(target.endpoint)
        self.scheme = split.scheme or "https"
        if target.path_style:
            self.host = split.netloc
            self.base = f"/{_uri(target.bucket)}/"
        else:
            self.host = f"{target.bucket}.{split.netloc}"
            self.base = "/"

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            self.close()
            context: ssl.SSLContext | bool = True
            if self.target.ca_file:
                context = ssl.create_default_context(cafile=self.target.ca_file)
            connector = aiohttp.TCPConnector(
                limit=self.connections, ssl=context, resolver=self.resolver
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Content-Type"),
            )
            self._loop = loop
        return self._session

    def close(self) -> None:
        """Close the connections (synchronously: a Store closes without awaiting)."""
        session, self._session = self._session, None
        if session is None:
            return
        connector = session.connector
        session.detach()
        if connector is not None:
            # The base class's close closes every connection at once, before it returns
            # (TCPConnector's own is a coroutine, for the resolver, which here owns nothing).
            with contextlib.suppress(RuntimeError):  # its loop has ended: nothing left open
                waiter = aiohttp.BaseConnector.close(connector, abort_ssl=True)
                # Nobody waits for the closes to be acknowledged: said so, for aiohttp.
                waiter.__await__().close()

    async def call(
        self,
        method: str,
        key: str = "",
        query: Sequence[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        body: bytes | bytearray | memoryview = b"",
        ok: Sequence[int] = (200, 204, 206),
        what: str = "",
    ) -> Answer:
        """One request, tried again on a refused connection or a 5xx; S3Failed for a status
        not in `ok`."""
        path = self.base + _uri(key, "/")
        for attempt in range(_ATTEMPTS):
            sent = dict(headers or {})
            canonical_query = sign(
                self.target, method, self.host, path, query, sent, dt.datetime.now(dt.UTC)
            )
            sent.pop("host")
            url = f"{self.scheme}://{self.host}{path}" + (
                f"?{canonical_query}" if canonical_query else ""
            )
            try:
                async with self._client().request(
                    method,
                    aiohttp.client.URL(url, encoded=True),
                    headers=sent,
                    data=body,
                    allow_redirects=False,  # an S3 endpoint answers, it does not send elsewhere
                ) as response:
                    data = await response.read()
                    status = response.status
                    answer = Answer(status, response.headers.copy(), data)
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                if attempt + 1 == _ATTEMPTS:
                    raise OSError(f"{what or method}: {exc!r}") from exc
                await asyncio.sleep(0.1 * 2**attempt)
                continue
            if status in ok:
                return answer
            if status in _RETRY and attempt + 1 < _ATTEMPTS:
                await asyncio.sleep(0.1 * 2**attempt)
                continue
            code = ""
            with contextlib.suppress(ET.ParseError):
                code = text(answer.xml(), "Code") if data else ""
            raise S3Failed(status, code, what or f"{method} {key}")
        raise AssertionError("unreachable")
