"""MD5 and ETags: the one place that computes them.

MD5 here is an integrity checksum (S3's ETag), not security, so it is requested with
`usedforsecurity=False`: that selects OpenSSL's non-FIPS property query and keeps ETags working on
FIPS-mode hosts. CPython's `_hashlib` fetches the algorithm once per process and up-refs it for
each new digest, which is the cached-fetch behaviour DESIGN.md asks for.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Protocol


class Digest(Protocol):
    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...
    def digest(self) -> bytes: ...
    def hexdigest(self) -> str: ...


def md5() -> Digest:
    """A new MD5 digest."""
    return hashlib.md5(usedforsecurity=False)


def configure(backend: str) -> str:
    """Select the MD5 backend for this process (before the first request); returns a line
    describing it for the start-up log."""
    if backend != "hashlib":
        raise ValueError(f"unknown MD5 backend {backend!r}")
    return "MD5 backend: hashlib"


def md5_of(data: bytes | bytearray | memoryview) -> Digest:
    d = md5()
    d.update(data)
    return d


# --- ETag rules -----------------------------------------------------------------------------

_PLAIN = re.compile(r"[0-9a-f]{32}")
_MULTIPART = re.compile(r"([0-9a-f]{32})-([1-9][0-9]*)")


def quote(etag: str) -> str:
    """ETags travel double-quoted in headers and XML (s3-tests test_object_write_check_etag)."""
    return f'"{etag}"'


def unquote(etag: str) -> str:
    """Clients send ETags quoted or not (If-Match, CompleteMultipartUpload); compare unquoted."""
    etag = etag.strip()
    if etag.startswith("W/"):
        etag = etag[2:]
    return etag.strip('"')


def is_plain(etag: str | None) -> bool:
    """A plain ETag is the MD5 of the object's bytes: no `-N` multipart suffix."""
    return etag is not None and _PLAIN.fullmatch(etag) is not None


def multipart_etag(part_md5s: Iterable[bytes]) -> str:
    """`md5(concat(binary part MD5s))-N`, the ETag of a completed multipart upload."""
    d = md5()
    n = 0
    for part in part_md5s:
        d.update(part)
        n += 1
    return f"{d.hexdigest()}-{n}"


def multipart_etag_of_hex(part_etags: Iterable[str]) -> str:
    """The multipart ETag from the parts' (plain, hex) ETags."""
    return multipart_etag(bytes.fromhex(e) for e in part_etags)


def matches(condition: str, etag: str) -> bool:
    """Does an If-Match / If-None-Match header value match this ETag? `*` matches anything."""
    for candidate in condition.split(","):
        candidate = unquote(candidate)
        if candidate == "*" or candidate == etag:
            return True
    return False
