"""A request's body as it streams, with the checks its signature promised.

SigV4 signs the body by its SHA-256 (`x-amz-content-sha256`): the digest is fed while the body
streams (by whoever consumes it: the store hashes in its write batches) and compared at the end,
before anything is committed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncIterator

from aiohttp import ClientPayloadError, web

from ..digest import Digest
from .errors import S3Error

UNSIGNED = "UNSIGNED-PAYLOAD"
EMPTY_SHA256 = hashlib.sha256().hexdigest()


class Payload:
    def __init__(self, request: web.Request, payload_hash: str) -> None:
        self._request = request
        self._hash = payload_hash
        self._sha256 = None if payload_hash == UNSIGNED else hashlib.sha256()
        if payload_hash.startswith("STREAMING-"):
            raise S3Error("NotImplemented", "aws-chunked request bodies are not supported yet")
        self.observers: list[Digest] = [self._sha256] if self._sha256 is not None else []
        self.received = 0
        self.consumed = False

    @property
    def declared_length(self) -> int | None:
        return self._request.content_length

    def require_length(self, maximum: int) -> int:
        """The body's length for an upload: S3 wants it up front and caps it."""
        length = self.declared_length
        if length is None:
            raise S3Error("MissingContentLength")
        if length > maximum:
            raise S3Error("EntityTooLarge", ProposedSize=length, MaxSizeAllowed=maximum)
        return length

    async def _continue(self) -> None:
        # We answer `Expect: 100-continue` ourselves, only once the request has passed its
        # checks (aiohttp's default would invite the body before authentication).
        if self._request.headers.get("Expect", "").lower() == "100-continue":
            await self._request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive. Raises IncompleteBody if the client stops short."""
        self.consumed = True
        await self._continue()
        content = self._request.content
        try:
            while True:
                data = await content.readany()
                if not data:
                    break
                self.received += len(data)
                yield data
        except (ClientPayloadError, ConnectionError, asyncio.IncompleteReadError) as exc:
            raise S3Error("IncompleteBody") from exc
        expected = self.declared_length
        if expected is not None and self.received != expected:
            raise S3Error("IncompleteBody")

    def verify(self) -> None:
        """Once the body has been consumed (and fed to `observers`): does it match its hash?"""
        if self._sha256 is None:
            return
        computed = self._sha256.hexdigest()
        if not hmac.compare_digest(computed, self._hash.lower()):
            raise S3Error(
                "XAmzContentSHA256Mismatch",
                ClientComputedContentSHA256=self._hash,
                S3ComputedContentSHA256=computed,
            )

    async def read(self, limit: int) -> bytes:
        """The whole (small) body, verified. Over `limit` bytes is MaxMessageLengthExceeded."""
        parts: list[bytes] = []
        async for chunk in self.chunks():
            if self.received > limit:
                raise S3Error("MaxMessageLengthExceeded", MaxMessageLengthBytes=limit)
            parts.append(chunk)
        data = b"".join(parts)
        for h in self.observers:
            h.update(data)
        self.verify()
        return data
