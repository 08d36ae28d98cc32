"""A request's body as it streams, with the checks its signature and headers promised.

- SigV4 signs a plain body by its SHA-256 (`x-amz-content-sha256`): the digest is fed while
  the body streams (by whoever consumes it: the store hashes in its write batches) and compared
  at the end, before anything is committed.
- An aws-chunked body (`STREAMING-*`) is decoded here, chunk signatures verified as it streams
  (gateway/s3/chunked.py); its size is `x-amz-decoded-content-length`.
- A flexible checksum (`x-amz-checksum-*`, in a header or a trailer) is computed the same way
  and checked at the end (gateway/s3/checksums.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from collections.abc import AsyncIterator

from aiohttp import ClientPayloadError, StreamReader, web

from ..digest import Digest
from . import checksums
from .auth import AuthResult
from .chunked import ChunkedDecoder, stored_content_encoding
from .errors import S3Error

UNSIGNED = "UNSIGNED-PAYLOAD"
# When the body's last byte came (time.perf_counter()): where an access log record's
# turn-around time starts (LogFormat.html).
BODY_RECEIVED_AT = web.RequestKey("body_received_at", float)
# Payload's default_checksum.
MISSING = "missing"
ALWAYS = "always"
STREAMING = "STREAMING-"


class _Patient:
    """The request body's stream, with limits on how long the client may keep us waiting.

    A client that stops sending mid-body gets RequestTimeout after `timeout` seconds, and so
    does one that keeps sending too little: over each `timeout` seconds spent waiting for it,
    the body must average `min_rate` bytes a second (a byte every 15 s would otherwise hold an
    upload slot, a tmp file and a batch of memory for hours). Only the time spent waiting for
    the client counts: a body the gateway reads slowly (a busy disk) is never the client's
    fault.
    """

    def __init__(self, content: StreamReader, timeout: float, min_rate: int = 0) -> None:
        self._content = content
        self._timeout = timeout
        self._min_rate = min_rate
        self._waited = 0.0  # in the current window
        self._received = 0

    async def readany(self) -> bytes:
        # What has arrived already needs no timer (a small body is usually all there).
        if data := self._content.read_nowait():
            self._received += len(data)
            return data
        if self._content.is_eof():
            # The end of the body: nothing to wait for (every body ends with this call).
            return b""
        started = time.monotonic()
        try:
            # A deadline on this task, not wait_for's: that wraps the read in a task of its
            # own, one per wait.
            async with asyncio.timeout(self._timeout):
                data = await self._content.readany()
        except TimeoutError as exc:
            raise S3Error("RequestTimeout") from exc
        self._waited += time.monotonic() - started
        self._received += len(data)
        if self._waited >= self._timeout and data:
            if self._received < self._min_rate * self._waited:
                raise S3Error("RequestTimeout")
            self._waited, self._received = 0.0, 0
        return data


class Payload:
    def __init__(
        self,
        request: web.Request,
        auth: AuthResult,
        *,
        body_checksum: bool = True,
        default_checksum: str | None = None,
        read_timeout: float = 20.0,
        min_rate: int = 0,
    ) -> None:
        """`body_checksum`: whether x-amz-checksum-* headers describe this body (they describe
        the object being assembled on CompleteMultipartUpload, not its XML).
        `default_checksum`: when to compute checksums.DEFAULT in the same pass as the MD5:
        MISSING (the body is an object that takes it when the client sent no checksum),
        ALWAYS (a part, whose DEFAULT Complete combines unless the client sent that one), or
        None. `read_timeout` and `min_rate`: see _Patient."""
        self._request = request
        self._whole: bytes | None = None  # the small body read() gave
        self._content = _Patient(request.content, read_timeout, min_rate)
        self._hash = auth.payload_hash
        self.streaming = auth.payload_hash.startswith(STREAMING)
        # Checksum headers are checked before the body is invited.
        self.checksum = checksums.parse_request(request.headers) if body_checksum else None
        self._computed = self.checksum.new() if self.checksum is not None else None
        self._default: checksums.Checksum | None = None
        sent = self.checksum.algorithm if self.checksum is not None else None
        if (default_checksum == MISSING and sent is None) or (
            default_checksum == ALWAYS and sent is not checksums.DEFAULT
        ):
            self._default = checksums.DEFAULT.new()
        self._sha256 = None
        if not self.streaming and auth.payload_hash != UNSIGNED:
            self._sha256 = hashlib.sha256()
        self._decoder: ChunkedDecoder | None = None
        self._decoded_length: int | None = None
        if self.streaming:
            raw = request.headers.get("x-amz-decoded-content-length")
            if raw is not None and raw.isdigit():
                self._decoded_length = int(raw)
            self._decoder = ChunkedDecoder(
                self._content,
                auth.payload_hash,
                auth=auth,
                expected_length=self._decoded_length,
                trailer_names=self.checksum.trailer_names if self.checksum else frozenset(),
            )
        self.observers: list[Digest] = [
            d for d in (self._sha256, self._computed, self._default) if d is not None
        ]
        self.received = 0
        # The checksum value to store with the object, once verify() has accepted it.
        self.checksum_value: str | None = None

    @property
    def declared_length(self) -> int | None:
        """The body's size: the decoded size of an aws-chunked body, else Content-Length."""
        if self.streaming:
            return self._decoded_length
        return self._request.content_length

    def require_length(self, maximum: int) -> int:
        """The body's length for an upload: S3 wants it up front and caps it."""
        length = self.declared_length
        if length is None and "chunked" in self._request.headers.get("Transfer-Encoding", ""):
            # AWS takes no HTTP-chunked upload (its streaming form is aws-chunked, with
            # x-amz-decoded-content-length): 501 naming the header (AWS's answers quoted in
            # Automattic/knox#43 and chilts/awssum#30).
            raise S3Error(
                "NotImplemented",
                "A header you provided implies functionality that is not implemented",
                Header="Transfer-Encoding",
            )
        if length is None:
            raise S3Error("MissingContentLength")
        if length > maximum:
            raise S3Error("EntityTooLarge", ProposedSize=length, MaxSizeAllowed=maximum)
        return length

    def content_encoding(self) -> str | None:
        """Content-Encoding to store: `aws-chunked` describes the transfer, not the object
        (stripped whatever the body: s3-tests test_object_content_encoding_aws_chunked)."""
        return stored_content_encoding(self._request.headers.get("content-encoding"))

    async def _continue(self) -> None:
        # We answer `Expect: 100-continue` ourselves, only once the request has passed its
        # checks (aiohttp's default would invite the body before authentication).
        if self._request.headers.get("Expect", "").lower() == "100-continue":
            await self._request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive. Raises IncompleteBody if the client stops short,
        and the aws-chunked errors (bad framing or chunk signature) as they are found."""
        await self._continue()
        if self._decoder is not None:
            async for data in self._decoder.chunks():
                self.received += len(data)
                yield data
            self._request[BODY_RECEIVED_AT] = time.perf_counter()
            return
        content = self._content
        try:
            while True:
                data = await content.readany()
                if not data:
                    break
                self.received += len(data)
                yield data
        except (ClientPayloadError, ConnectionError, asyncio.IncompleteReadError) as exc:
            raise S3Error("IncompleteBody") from exc
        self._request[BODY_RECEIVED_AT] = time.perf_counter()
        expected = self.declared_length
        if expected is not None and self.received != expected:
            raise S3Error("IncompleteBody")

    def verify(self) -> None:
        """Once the body has been consumed (and fed to `observers`): does it match what the
        request promised? The signed SHA-256 first (AWS reports it before any checksum)."""
        if self._sha256 is not None:
            computed = self._sha256.hexdigest()
            if not hmac.compare_digest(computed, self._hash.lower()):
                raise S3Error(
                    "XAmzContentSHA256Mismatch",
                    ClientComputedContentSHA256=self._hash,
                    S3ComputedContentSHA256=computed,
                )
        if self.checksum is not None and self._computed is not None:
            trailers = self._decoder.trailers if self._decoder is not None else {}
            self.checksum_value = self.checksum.check(self._computed, trailers)

    def checksum_headers(self) -> dict[str, str]:
        """The verified checksum as response (and stored) headers; the default checksum in
        place of one the client did not send, when asked for."""
        if self.checksum is not None and self.checksum_value is not None:
            alg, value = self.checksum.algorithm, self.checksum_value
        elif self._default is not None and self.checksum is None:
            alg, value = checksums.DEFAULT, self._default.value()
        else:
            return {}
        return {alg.header: value, "x-amz-checksum-type": checksums.FULL_OBJECT}

    def default_value(self) -> str | None:
        """The body's checksums.DEFAULT value, verified if the client sent it, else computed
        (None if neither)."""
        if self.checksum is not None and self.checksum.algorithm is checksums.DEFAULT:
            return self.checksum_value
        return self._default.value() if self._default is not None else None

    async def read(self, limit: int) -> bytes:
        """The whole (small) body, verified. Over `limit` bytes is MaxMessageLengthExceeded.
        Read once: a second call (the operation, after authorisation read the tags a
        PutObjectTagging sets) has the same bytes."""
        if self._whole is not None:
            return self._whole
        parts: list[bytes] = []
        async for chunk in self.chunks():
            if self.received > limit:
                raise S3Error("MaxMessageLengthExceeded", MaxMessageLengthBytes=limit)
            parts.append(chunk)
        data = b"".join(parts)
        for h in self.observers:
            h.update(data)
        self.verify()
        self._whole = data
        return data
