"""aws-chunked request bodies, decoded as they stream, with their chunk signatures verified.

The framing (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html and
sigv4-streaming-trailers.html):

    hex-size[;chunk-signature=sig]\\r\\n data \\r\\n  ...  0[;chunk-signature=sig]\\r\\n
    [name:value\\r\\n ...] [x-amz-trailer-signature:sig\\r\\n] \\r\\n

Each signed chunk's signature is an HMAC (with the request's signing key) of
"AWS4-HMAC-SHA256-PAYLOAD\\n{amz_date}\\n{scope}\\n{previous signature}\\n{sha256('')}\\n
{sha256(chunk data)}", chained from the seed signature of the request's Authorization header; the
final 0-size chunk is signed too. The trailer signature is an HMAC of
"AWS4-HMAC-SHA256-TRAILER\\n{amz_date}\\n{scope}\\n{final chunk's signature}\\n{sha256(trailers)}"
where `trailers` is each trailer as "name:value\\n" (checked against AWS's published example).

Errors. AWS's answers come from OpenStack Swift's test/s3api/test_input_errors.py (recorded
against AWS) and versitygw#1684; rows marked "ours" are cases AWS was not seen answering.

| case | answer |
|---|---|
| size not hex (also a body that is not aws-chunked at all), a line ending in LF without CR or CR without LF, a missing CRLF after chunk data (data longer or shorter than announced), EOF anywhere before the final chunk | IncompleteBody "The request body terminated unexpectedly" |
| signed mode: no `;chunk-signature=`, or an empty one, or one followed by another `;param` | IncompleteBody "The request body terminated unexpectedly" |
| signed mode: a chunk (or the final chunk) whose signature does not match, a parameter other than chunk-signature first | SignatureDoesNotMatch |
| the decoded total differs from x-amz-decoded-content-length (checked when a chunk would overrun it, and at the final chunk) | IncompleteBody with NumberBytesExpected / NumberBytesProvided |
| signed trailer mode: no x-amz-trailer-signature | IncompleteBody "The request body terminated unexpectedly" |
| signed trailer mode: a trailer signature that does not match | SignatureDoesNotMatch |
| a trailer not announced in x-amz-trailer, a trailer line without a colon, a trailer after the trailer signature, too many trailer lines | MalformedTrailerError |
| ours: a size line over MAX_CHUNK_LINE bytes, a size over 16 hex digits or over MAX_CHUNK_SIZE, a negative size | IncompleteBody "The request body terminated unexpectedly" (AWS answers a negative size with 500) |
| ours: a non-empty line after the final chunk of a mode without trailers | IncompleteBody "The request body terminated unexpectedly" |
| ours: any byte after the final CRLF | IncompleteBody "The request body terminated unexpectedly" (AWS ignores such bytes; we refuse what nobody signed or sends) |
| ours: a STREAMING-AWS4-ECDSA-P256-SHA256-* mode | NotImplemented |

AWS accepts, and so do we: EOF in place of the final empty line (Swift's
test_strm_unsgnd_pyld_trl_no_trailing_crlf_ok), spaces around the size, the parameter name and its
value (`1c ; chunk-signature = sig `) and after a trailer's colon, a repeated trailer (the last one
counts), chunks of any size (AWS's InvalidChunkSizeError for signed chunks under 8 KiB other than
the last is not enforced).
"""  # noqa: E501

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
from collections.abc import AsyncIterator, Set
from typing import NoReturn, Protocol

from aiohttp import ClientPayloadError

from ..limits import MAX_CHUNK_LINE, MAX_CHUNK_SIZE
from . import sigv4
from .checksums import MALFORMED_TRAILER_CODE, MALFORMED_TRAILER_MESSAGE
from .errors import S3Error

SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
MODES = frozenset({SIGNED, SIGNED_TRAILER, UNSIGNED_TRAILER})
_ECDSA = frozenset(
    {
        "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD",
        "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER",
    }
)

MAX_TRAILER_LINES = 16
_HEX_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
_BLANKS = b" \t"
_EMPTY_SHA256 = hashlib.sha256().hexdigest()
_TRAILER_SIGNATURE = "x-amz-trailer-signature"


class ByteReader(Protocol):
    """What the decoder reads: aiohttp's StreamReader (`request.content`) has this shape."""

    async def readany(self) -> bytes: ...


class SeedSignature(Protocol):
    """What chunk signatures are chained from: `gateway.s3.auth.AuthResult` has this shape."""

    @property
    def signing_key(self) -> bytes: ...

    @property
    def signature(self) -> str: ...

    @property
    def amz_date(self) -> str: ...

    @property
    def scope(self) -> str: ...


def stored_content_encoding(value: str | None) -> str | None:
    """The Content-Encoding to store: the header without `aws-chunked`, None if nothing is
    left. `aws-chunked` describes the transfer, not the object, so it is stripped whatever the
    body (s3-tests test_object_content_encoding_aws_chunked); the other codings keep their
    order ("foo, aws-chunked, bar" is stored as "foo, bar", "aws-chunked, gzip" as "gzip":
    Swift's AWS-recorded test_strm_unsgnd_pyld_trl_custom_encoding_ok and _gzipped_declared_*).
    """
    if value is None:
        return None
    codings = [c.strip() for c in value.split(",")]
    kept = [c for c in codings if c and c.lower() != "aws-chunked"]
    return ", ".join(kept) or None


def _framing() -> S3Error:
    return S3Error("IncompleteBody", "The request body terminated unexpectedly")


def _malformed_trailer() -> S3Error:
    return S3Error(MALFORMED_TRAILER_CODE, MALFORMED_TRAILER_MESSAGE)


def _length_mismatch(expected: int, provided: int) -> S3Error:
    return S3Error(
        "IncompleteBody",
        "You did not provide the number of bytes specified by the Content-Length HTTP header",
        NumberBytesExpected=expected,
        NumberBytesProvided=provided,
    )


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() and c.isascii() else f"\\x{ord(c):02x}" for c in text)


class ChunkedDecoder:
    """Decodes one aws-chunked body from `reader`.

    `mode` is the request's x-amz-content-sha256; `auth` its verified seed signature (required
    for the signed modes); `expected_length` its x-amz-decoded-content-length; `trailer_names`
    the (lower-case) trailers x-amz-trailer announced. Iterate `chunks()` to the end; only then
    are the body, its signatures and its length verified and `trailers` filled in.
    """

    def __init__(
        self,
        reader: ByteReader,
        mode: str,
        *,
        auth: SeedSignature | None = None,
        expected_length: int | None,
        trailer_names: Set[str],
    ) -> None:
        if mode in _ECDSA:
            raise S3Error("NotImplemented", "ECDSA-signed aws-chunked bodies are not supported")
        if mode not in MODES:
            raise S3Error("InvalidRequest", f"{_printable(mode)} is not an aws-chunked payload")
        self._signed = mode != UNSIGNED_TRAILER
        self._with_trailer = mode != SIGNED
        if self._signed and auth is None:
            # Signed chunks chain from a verified request signature; an anonymous request has none.
            raise S3Error("AccessDenied")
        self._reader = reader
        self._signing_key = auth.signing_key if auth is not None else b""
        self._amz_date = auth.amz_date if auth is not None else ""
        self._scope = auth.scope if auth is not None else ""
        self._previous = auth.signature if auth is not None else ""
        self._expected = expected_length
        self._trailer_names = frozenset(n.lower() for n in trailer_names)
        self._buffer = bytearray()
        self._eof = False
        self._started = False
        self.trailers: dict[str, str] = {}
        self.decoded_length = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        """The decoded data, yielded as it arrives (a chunk's data is not held back until the
        chunk is complete). Raises S3Error, and only S3Error, on any fault of the body; a
        chunk's signature is checked when its data is complete, after it has been yielded, so
        nothing may be committed before the iteration ends."""
        if self._started:
            raise RuntimeError("an aws-chunked body can be read once")
        self._started = True
        while True:
            size, signature = await self._chunk_header()
            provided = self.decoded_length + size
            if self._expected is not None and provided > self._expected:
                raise _length_mismatch(self._expected, provided)
            if size == 0:
                self._verify_chunk(signature, _EMPTY_SHA256)
                break
            sha = hashlib.sha256() if self._signed else None
            remaining = size
            while remaining:
                piece = await self._take(remaining)
                remaining -= len(piece)
                self.decoded_length += len(piece)
                if sha is not None:
                    sha.update(piece)
                yield piece
            await self._crlf()
            self._verify_chunk(signature, sha.hexdigest() if sha is not None else "")
        if self._expected is not None and self.decoded_length != self._expected:
            raise _length_mismatch(self._expected, self.decoded_length)
        if await self._trailer_section():
            await self._end()

    # -- framing ---------------------------------------------------------------------------------

    async def _chunk_header(self) -> tuple[int, bytes]:
        line = await self._line()
        if line is None:
            raise _framing()
        size_part, semicolon, extension = line.partition(b";")
        size_part = size_part.strip(_BLANKS)
        if _HEX_SIZE.fullmatch(size_part) is None:
            raise _framing()
        size = int(size_part, 16)
        if size > MAX_CHUNK_SIZE:
            raise _framing()
        if not self._signed:
            return size, b""  # chunk extensions mean nothing without signatures
        if not semicolon:
            raise _framing()
        key, equals, value = extension.partition(b"=")
        value = value.strip(_BLANKS)
        if key.strip(_BLANKS) != b"chunk-signature":
            self._signature_mismatch(self._chunk_string_to_sign(_EMPTY_SHA256), value)
        if not equals or not value or b";" in value:
            raise _framing()
        return size, value

    async def _trailer_section(self) -> bool:
        """Reads what follows the final chunk up to the empty line; False if EOF came instead."""
        canonical: list[bytes] = []
        signature: bytes | None = None
        lines = 0
        ended = True
        while True:
            line = await self._line()
            if line is None:
                ended = False  # EOF where the final empty line belongs: AWS accepts it
                break
            if not line:
                break
            if not self._with_trailer:
                raise _framing()
            lines += 1
            if lines > MAX_TRAILER_LINES or signature is not None:
                raise _malformed_trailer()
            name, colon, value = line.partition(b":")
            name = name.strip(_BLANKS)
            value = value.strip(_BLANKS)
            if not colon:
                raise _malformed_trailer()
            lower = name.lower().decode("latin-1")
            if self._signed and lower == _TRAILER_SIGNATURE:
                signature = value
                continue
            if lower not in self._trailer_names:
                raise _malformed_trailer()
            self.trailers[lower] = value.decode("latin-1")  # a repeated trailer: the last counts
            canonical.append(name + b":" + value + b"\n")
        if self._signed and self._with_trailer:
            if signature is None:
                raise _framing()
            # With no trailer at all, the hashed text is a lone newline (as Swift found AWS to
            # expect).
            digest = hashlib.sha256(b"".join(canonical) or b"\n").hexdigest()
            string_to_sign = self._string_to_sign("AWS4-HMAC-SHA256-TRAILER", digest)
            self._check_signature(string_to_sign, signature)
        return ended

    async def _end(self) -> None:
        """Nothing may follow the final empty line."""
        while not self._buffer and not self._eof:
            await self._fill()
        if self._buffer:
            raise _framing()

    async def _line(self) -> bytes | None:
        """The next CRLF-terminated line without its CRLF; None at a clean EOF."""
        while True:
            end = self._buffer.find(b"\n", 0, MAX_CHUNK_LINE + 2)
            if end >= 0:
                if end == 0 or self._buffer[end - 1] != 0x0D:
                    raise _framing()
                line = bytes(self._buffer[: end - 1])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > MAX_CHUNK_LINE + 1:
                raise _framing()
            if self._eof:
                if self._buffer:
                    raise _framing()
                return None
            await self._fill()

    async def _crlf(self) -> None:
        while len(self._buffer) < 2 and not self._eof:
            await self._fill()
        if self._buffer[:2] != b"\r\n":
            raise _framing()
        del self._buffer[:2]

    async def _take(self, limit: int) -> bytes:
        """Up to `limit` bytes of chunk data: what is buffered, else what arrives next."""
        if self._buffer:
            piece = bytes(self._buffer[:limit])
            del self._buffer[:limit]
            return piece
        data = await self._read()
        if not data:
            self._eof = True
            raise _framing()
        if len(data) <= limit:
            return bytes(data)
        self._buffer += memoryview(data)[limit:]
        return bytes(data[:limit])

    async def _fill(self) -> None:
        data = await self._read()
        if data:
            self._buffer += data
        else:
            self._eof = True

    async def _read(self) -> bytes:
        try:
            return await self._reader.readany()
        except (ClientPayloadError, ConnectionError, asyncio.IncompleteReadError) as exc:
            raise _framing() from exc

    # -- signatures ------------------------------------------------------------------------------

    def _string_to_sign(self, algorithm: str, *hashes: str) -> str:
        return "\n".join((algorithm, self._amz_date, self._scope, self._previous, *hashes))

    def _chunk_string_to_sign(self, data_sha256: str) -> str:
        return self._string_to_sign("AWS4-HMAC-SHA256-PAYLOAD", _EMPTY_SHA256, data_sha256)

    def _verify_chunk(self, provided: bytes, data_sha256: str) -> None:
        if self._signed:
            self._check_signature(self._chunk_string_to_sign(data_sha256), provided)

    def _check_signature(self, string_to_sign: str, provided: bytes) -> None:
        computed = sigv4.signature_of(self._signing_key, string_to_sign)
        if not hmac.compare_digest(computed.encode(), provided):
            self._signature_mismatch(string_to_sign, provided)
        self._previous = computed

    def _signature_mismatch(self, string_to_sign: str, provided: bytes) -> NoReturn:
        raise S3Error(
            "SignatureDoesNotMatch",
            StringToSign=string_to_sign,
            SignatureProvided=_printable(provided.decode("latin-1")),
        )
