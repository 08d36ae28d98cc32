"""aws-chunked decoding: AWS's published examples, botocore's own encoder, every alteration of a
signed stream, arbitrary read boundaries, and fuzzing.

The expected signatures are built here with a deliberately plain SigV4 implementation,
independent of gateway.s3.auth and gateway.s3.chunked, and checked against the values AWS
publishes. Expected error codes are AWS's where AWS was recorded answering (OpenStack Swift's
test/s3api/test_input_errors.py); "ours" marks the cases chunked.py's docstring lists as our own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import io
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pytest
from aiohttp import ClientPayloadError
from botocore import httpchecksum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.limits import MAX_CHUNK_LINE, MAX_CHUNK_SIZE
from gateway.s3 import checksums
from gateway.s3.checksums import CRC32, MALFORMED_TRAILER_CODE
from gateway.s3.chunked import (
    SIGNED,
    SIGNED_TRAILER,
    UNSIGNED_TRAILER,
    ChunkedDecoder,
    stored_content_encoding,
)
from gateway.s3.errors import S3Error

# --- an independent, straightforward SigV4 chunk signer ---------------------------------------

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's example secret key
AMZ_DATE = "20130524T000000Z"
SCOPE = "20130524/us-east-1/s3/aws4_request"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def hmac_sha256(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret: str = SECRET) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in SCOPE.split("/"):
        key = hmac_sha256(key, part)
    return key


KEY = signing_key()


@dataclass(frozen=True)
class Seed:
    """The fields of gateway.s3.auth.AuthResult the decoder uses."""

    signing_key: bytes
    signature: str
    amz_date: str = AMZ_DATE
    scope: str = SCOPE


def chunk_signature(previous: str, data: bytes, key: bytes = KEY) -> str:
    text = "\n".join(
        [
            "AWS4-HMAC-SHA256-PAYLOAD",
            AMZ_DATE,
            SCOPE,
            previous,
            EMPTY_SHA256,
            hashlib.sha256(data).hexdigest(),
        ]
    )
    return hmac_sha256(key, text).hex()


def trailer_signature(previous: str, trailers: Sequence[tuple[str, str]], key: bytes = KEY) -> str:
    # sigv4-streaming-trailers.html: each trailer as "name:value\n".
    canonical = "".join(f"{name}:{value}\n" for name, value in trailers)
    text = "\n".join(
        [
            "AWS4-HMAC-SHA256-TRAILER",
            AMZ_DATE,
            SCOPE,
            previous,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    return hmac_sha256(key, text).hex()


SEED = Seed(KEY, hashlib.sha256(b"any verified seed signature").hexdigest())


def signed_body(
    chunks: Sequence[bytes],
    trailers: Sequence[tuple[str, str]] | None = None,
    *,
    seed: str = SEED.signature,
    header: bytes = b"%x;chunk-signature=%s",
) -> bytes:
    """A signed aws-chunked body; with `trailers` (even empty), of the -TRAILER mode."""
    parts = []
    previous = seed
    for data in [*chunks, b""]:
        signature = chunk_signature(previous, data)
        parts.append(header % (len(data), signature.encode()) + b"\r\n")
        if data:
            parts.append(data + b"\r\n")
        previous = signature
    if trailers is not None:
        for name, value in trailers:
            parts.append(f"{name}:{value}\r\n".encode())
        parts.append(
            f"x-amz-trailer-signature:{trailer_signature(previous, trailers)}\r\n".encode()
        )
    parts.append(b"\r\n")
    return b"".join(parts)


def unsigned_body(chunks: Sequence[bytes], trailers: Sequence[tuple[str, str]] = ()) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(data), data) for data in chunks]
    parts.append(b"0\r\n")
    parts.extend(f"{name}:{value}\r\n".encode() for name, value in trailers)
    parts.append(b"\r\n")
    return b"".join(parts)


# --- driving the decoder ----------------------------------------------------------------------


class Pieces:
    """A reader handing out the body in the given piece sizes (the rest at once), then b""."""

    def __init__(self, body: bytes, sizes: Iterable[int] = ()) -> None:
        self._pieces: list[bytes] = []
        position = 0
        for size in sizes:
            if position >= len(body):
                break
            self._pieces.append(body[position : position + max(size, 1)])
            position += max(size, 1)
        if position < len(body):
            self._pieces.append(body[position:])
        self._pieces.reverse()
        self.reads = 0

    async def readany(self) -> bytes:
        self.reads += 1
        return self._pieces.pop() if self._pieces else b""


@dataclass
class Decoded:
    data: bytes
    trailers: dict[str, str]
    pieces: list[bytes]


def decode(
    body: bytes,
    mode: str,
    *,
    auth: Seed | None = SEED,
    expected_length: int | None = None,
    trailer_names: Iterable[str] = (),
    sizes: Iterable[int] = (),
) -> Decoded:
    async def run() -> Decoded:
        decoder = ChunkedDecoder(
            Pieces(body, sizes),
            mode,
            auth=auth if mode != UNSIGNED_TRAILER else None,
            expected_length=expected_length,
            trailer_names=set(trailer_names),
        )
        pieces = [piece async for piece in decoder.chunks()]
        assert decoder.decoded_length == sum(map(len, pieces))
        return Decoded(b"".join(pieces), decoder.trailers, pieces)

    return asyncio.run(run())


def failure(body: bytes, mode: str, **kwargs: object) -> S3Error:
    with pytest.raises(S3Error) as exc:
        decode(body, mode, **kwargs)  # type: ignore[arg-type]
    return exc.value


FRAMING = "The request body terminated unexpectedly"


def assert_framing(error: S3Error) -> None:
    assert (error.code, error.message) == ("IncompleteBody", FRAMING)


# --- (a) AWS's published examples -------------------------------------------------------------

# https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html, "Example: PUT Object"
DOC_SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
DOC_CHUNKS = (
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
)
# https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming-trailers.html
DOC_TRAILER_SEED = "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"
DOC_TRAILER_CHUNKS = (
    "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
    "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
    "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
)
DOC_TRAILER_SIGNATURE = "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435"
DOC_SIZES = (65536, 1024, 0)


def doc_seed(headers: dict[str, str], payload: str) -> str:
    names = sorted(headers)
    canonical = "\n".join(
        [
            "PUT",
            "/examplebucket/chunkObject.txt",
            "",
            *(f"{name}:{headers[name]}" for name in names),
            "",
            ";".join(names),
            payload,
        ]
    )
    text = "\n".join(
        ["AWS4-HMAC-SHA256", AMZ_DATE, SCOPE, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    return hmac_sha256(KEY, text).hex()


DOC_HEADERS = {
    "content-encoding": "aws-chunked",
    "host": "s3.amazonaws.com",
    "x-amz-date": AMZ_DATE,
    "x-amz-decoded-content-length": "66560",
    "x-amz-storage-class": "REDUCED_REDUNDANCY",
}


def doc_body(signatures: Sequence[str], trailer: bytes = b"") -> bytes:
    body = b""
    for size, signature in zip(DOC_SIZES, signatures, strict=True):
        body += b"%x;chunk-signature=%s\r\n" % (size, signature.encode())
        if size:
            body += b"a" * size + b"\r\n"
    return body + trailer + b"\r\n"


def test_aws_streaming_example() -> None:
    seed = doc_seed(
        {**DOC_HEADERS, "content-length": "66824", "x-amz-content-sha256": SIGNED}, SIGNED
    )
    assert seed == DOC_SEED
    previous = seed
    for size, documented in zip(DOC_SIZES, DOC_CHUNKS, strict=True):
        previous = chunk_signature(previous, b"a" * size)
        assert previous == documented

    body = doc_body(DOC_CHUNKS)
    assert len(body) == 66824  # the documented Content-Length
    decoded = decode(body, SIGNED, auth=Seed(KEY, DOC_SEED), expected_length=66560)
    assert decoded.data == b"a" * 66560
    assert decoded.trailers == {}


def test_aws_streaming_trailer_example() -> None:
    headers = {
        **DOC_HEADERS,
        "x-amz-content-sha256": SIGNED_TRAILER,
        "x-amz-trailer": "x-amz-checksum-crc32c",
    }
    assert doc_seed(headers, SIGNED_TRAILER) == DOC_TRAILER_SEED
    trailer = [("x-amz-checksum-crc32c", "sOO8/Q==")]
    assert trailer_signature(DOC_TRAILER_CHUNKS[-1], trailer) == DOC_TRAILER_SIGNATURE

    body = doc_body(
        DOC_TRAILER_CHUNKS,
        b"x-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:%s\r\n"
        % DOC_TRAILER_SIGNATURE.encode(),
    )
    request = checksums.parse_request(headers)
    assert request is not None and request.in_trailer
    decoded = decode(
        body,
        SIGNED_TRAILER,
        auth=Seed(KEY, DOC_TRAILER_SEED),
        expected_length=66560,
        trailer_names=request.trailer_names,
    )
    assert decoded.data == b"a" * 66560
    assert decoded.trailers == {"x-amz-checksum-crc32c": "sOO8/Q=="}
    assert request.check(request.algorithm.of(decoded.data), decoded.trailers) == "sOO8/Q=="


# --- (b) botocore's own aws-chunked encoder ---------------------------------------------------

BOTOCORE_CHECKSUMS = [
    (checksums.CRC32, httpchecksum.Crc32Checksum),
    (checksums.CRC32C, httpchecksum.CrtCrc32cChecksum),
    (checksums.CRC64NVME, httpchecksum.CrtCrc64NvmeChecksum),
    (checksums.SHA1, httpchecksum.Sha1Checksum),
    (checksums.SHA256, httpchecksum.Sha256Checksum),
]


@pytest.mark.parametrize(("alg", "checksum_cls"), BOTOCORE_CHECKSUMS, ids=lambda x: str(x))
@pytest.mark.parametrize("size", [0, 1, 5000])
@pytest.mark.parametrize("chunk_size", [None, 1000])
def test_botocore_unsigned_trailer_bodies(
    alg: checksums.Algorithm, checksum_cls: type, size: int, chunk_size: int | None
) -> None:
    data = os.urandom(size)
    wrapper = httpchecksum.AwsChunkedWrapper(
        io.BytesIO(data), checksum_cls=checksum_cls, checksum_name=alg.header, chunk_size=chunk_size
    )
    body = wrapper.read()
    headers = {
        "x-amz-content-sha256": UNSIGNED_TRAILER,
        "x-amz-sdk-checksum-algorithm": alg.name,
        "x-amz-trailer": alg.header,
    }
    request = checksums.parse_request(headers)
    assert request is not None
    decoded = decode(
        body, UNSIGNED_TRAILER, expected_length=size, trailer_names=request.trailer_names
    )
    assert decoded.data == data
    assert decoded.trailers == {alg.header: alg.of(data).value()}
    assert request.check(alg.of(decoded.data), decoded.trailers) == alg.of(data).value()


def test_botocore_body_without_checksum() -> None:
    body = httpchecksum.AwsChunkedWrapper(io.BytesIO(b"abc")).read()
    assert decode(body, UNSIGNED_TRAILER, expected_length=3).data == b"abc"


# --- (c) signed streams and their alterations -------------------------------------------------

CHUNKS = (b"x" * 20, b"y" * 13, b"z" * 7)
DATA = b"".join(CHUNKS)
CRC = CRC32.of(DATA).value()
TRAILERS = [("x-amz-checksum-crc32", CRC)]
NAMES = {"x-amz-checksum-crc32"}


def chunk_signatures(chunks: Sequence[bytes] = CHUNKS) -> list[str]:
    signatures, previous = [], SEED.signature
    for data in [*chunks, b""]:
        previous = chunk_signature(previous, data)
        signatures.append(previous)
    return signatures


@pytest.mark.parametrize("mode", [SIGNED, SIGNED_TRAILER])
def test_signed_streams_decode(mode: str) -> None:
    trailers = TRAILERS if mode == SIGNED_TRAILER else None
    decoded = decode(
        signed_body(CHUNKS, trailers), mode, expected_length=len(DATA), trailer_names=NAMES
    )
    assert decoded.data == DATA
    assert decoded.trailers == (dict(TRAILERS) if trailers else {})


def test_signed_chunks_of_varied_sizes_decode() -> None:
    chunks = [os.urandom(n) for n in (1, 8192, 100_000, 3)]
    body = signed_body(chunks, TRAILERS)
    decoded = decode(
        body, SIGNED_TRAILER, expected_length=sum(map(len, chunks)), trailer_names=NAMES
    )
    assert decoded.data == b"".join(chunks)


def flip(body: bytes, at: int) -> bytes:
    return body[:at] + bytes([body[at] ^ 0x01]) + body[at + 1 :]


def alter_signature(body: bytes, signature: str) -> bytes:
    at = body.index(signature.encode())
    return (
        body[:at]
        + (("0" if signature[0] != "0" else "1") + signature[1:]).encode()
        + body[at + 64 :]
    )


def signed_alterations() -> list[tuple[str, str, bytes, str]]:
    """(name, mode, altered body, expected code)."""
    cases = []
    for mode, trailers in ((SIGNED, None), (SIGNED_TRAILER, TRAILERS)):
        body = signed_body(CHUNKS, trailers)
        for data in CHUNKS:
            at = body.index(data) + len(data) // 2
            cases.append(
                (f"data byte of {data[:1]!r}", mode, flip(body, at), "SignatureDoesNotMatch")
            )
            cases.append(
                (
                    f"byte inserted in {data[:1]!r}",
                    mode,
                    body[:at] + b"q" + body[at:],
                    "IncompleteBody",
                )
            )
            cases.append(
                (
                    f"byte removed from {data[:1]!r}",
                    mode,
                    body[:at] + body[at + 1 :],
                    "IncompleteBody",
                )
            )
        for index, signature in enumerate(chunk_signatures()):
            cases.append(
                (
                    f"chunk signature {index}",
                    mode,
                    alter_signature(body, signature),
                    "SignatureDoesNotMatch",
                )
            )
        # The chain fixes the order: chunks 1 and 2 swapped, each with its own (valid) signature.
        first, second = body.index(b"14;"), body.index(b"d;")
        third = body.index(b"7;")
        swapped = body[:first] + body[second:third] + body[first:second] + body[third:]
        cases.append(("chunks swapped", mode, swapped, "SignatureDoesNotMatch"))
        # The final chunk signed as if it carried data (test_strm_sgnd_pyld_bad_final_signature).
        last = chunk_signatures()[-1]
        bogus = chunk_signature(chunk_signatures()[-2], b"x")
        cases.append(
            (
                "final chunk signed over data",
                mode,
                body.replace(last.encode(), bogus.encode()),
                "SignatureDoesNotMatch",
            )
        )
        cases.append(("extra byte at the end", mode, body + b"\x00", "IncompleteBody"))
        cases.append(("extra line at the end", mode, body + b"\r\n", "IncompleteBody"))
        cases.append(("missing final chunk", mode, body[: body.index(b"0;")], "IncompleteBody"))
        # Another seed, another key: the whole chain fails from its first chunk.
        cases.append(
            (
                "other seed",
                mode,
                signed_body(CHUNKS, trailers, seed="0" * 64),
                "SignatureDoesNotMatch",
            )
        )
    body = signed_body(CHUNKS, TRAILERS)
    other = CRC32.of(b"other").value()
    cases.append(
        (
            "trailer value",
            SIGNED_TRAILER,
            body.replace(CRC.encode(), other.encode()),
            "SignatureDoesNotMatch",
        )
    )
    tsig = trailer_signature(chunk_signatures()[-1], TRAILERS)
    cases.append(
        ("trailer signature", SIGNED_TRAILER, alter_signature(body, tsig), "SignatureDoesNotMatch")
    )
    without_signature = body.replace(b"x-amz-trailer-signature:" + tsig.encode() + b"\r\n", b"")
    # Swift: test_strm_sgnd_pyld_trl_missing_trl_sig (AWS answers IncompleteBody).
    cases.append(("trailer signature missing", SIGNED_TRAILER, without_signature, "IncompleteBody"))
    injected = body.replace(
        b"x-amz-trailer-signature",
        b"x-amz-checksum-crc32:%s\r\nx-amz-trailer-signature" % other.encode(),
    )
    cases.append(("unsigned trailer injected", SIGNED_TRAILER, injected, "SignatureDoesNotMatch"))
    appended = body[:-2] + b"x-amz-checksum-crc32:%s\r\n\r\n" % other.encode()
    cases.append(
        ("trailer after the trailer signature", SIGNED_TRAILER, appended, MALFORMED_TRAILER_CODE)
    )
    return cases


@pytest.mark.parametrize(
    ("mode", "body", "code"),
    [
        pytest.param(mode, body, code, id=f"{mode[-7:]}-{name}")
        for name, mode, body, code in signed_alterations()
    ],
)
def test_signed_alterations_are_rejected(mode: str, body: bytes, code: str) -> None:
    error = failure(body, mode, expected_length=len(DATA), trailer_names=NAMES)
    assert error.code == code
    if code == "IncompleteBody":
        assert error.message == FRAMING


def test_wrong_signing_key_is_rejected() -> None:
    error = failure(signed_body(CHUNKS), SIGNED, auth=Seed(signing_key("other"), SEED.signature))
    assert error.code == "SignatureDoesNotMatch"
    assert error.fields["StringToSign"].startswith("AWS4-HMAC-SHA256-PAYLOAD\n")


@pytest.mark.parametrize(
    ("mode", "trailers"), [(SIGNED, None), (SIGNED_TRAILER, TRAILERS), (UNSIGNED_TRAILER, TRAILERS)]
)
def test_truncation_at_every_position_is_rejected(
    mode: str, trailers: list[tuple[str, str]] | None
) -> None:
    body = (
        signed_body(CHUNKS, trailers)
        if mode != UNSIGNED_TRAILER
        else unsigned_body(CHUNKS, TRAILERS)
    )
    # EOF in place of the final empty line is accepted, as AWS accepts it
    # (test_strm_unsgnd_pyld_trl_no_trailing_crlf_ok); so, without a trailer signature, is EOF
    # right after the final chunk: the missing trailer is then the checksum's to refuse.
    accepted = {len(body) - 2}
    if mode == UNSIGNED_TRAILER:
        accepted.add(body.index(b"0\r\n") + 3)
    for end in range(len(body)):
        if end in accepted:
            decoded = decode(body[:end], mode, expected_length=len(DATA), trailer_names=NAMES)
            assert decoded.data == DATA
            continue
        error = failure(body[:end], mode, expected_length=len(DATA), trailer_names=NAMES)
        assert error.code == "IncompleteBody", end


def test_missing_trailer_is_refused_by_the_checksum() -> None:
    body = unsigned_body(CHUNKS)
    decoded = decode(body, UNSIGNED_TRAILER, expected_length=len(DATA), trailer_names=NAMES)
    request = checksums.RequestChecksum(CRC32, None, "x-amz-checksum-crc32")
    with pytest.raises(S3Error) as exc:
        request.check(CRC32.of(decoded.data), decoded.trailers)
    assert exc.value.code == MALFORMED_TRAILER_CODE


@pytest.mark.parametrize("mode", [SIGNED, SIGNED_TRAILER, UNSIGNED_TRAILER])
@pytest.mark.parametrize(
    ("expected", "provided"),
    [(len(DATA) + 1, len(DATA)), (len(DATA) - 1, 20 + 13 + 7), (10, 20), (0, 20)],
)
def test_decoded_length_mismatch(mode: str, expected: int, provided: int) -> None:
    # versitygw#1684 (AWS): IncompleteBody naming both numbers. A chunk that would overrun the
    # declared length is refused at its size line, before its data is read.
    body = {
        SIGNED: signed_body(CHUNKS),
        SIGNED_TRAILER: signed_body(CHUNKS, TRAILERS),
        UNSIGNED_TRAILER: unsigned_body(CHUNKS, TRAILERS),
    }[mode]
    error = failure(body, mode, expected_length=expected, trailer_names=NAMES)
    assert error.code == "IncompleteBody"
    assert error.message == (
        "You did not provide the number of bytes specified by the Content-Length HTTP header"
    )
    assert error.fields == {
        "NumberBytesExpected": str(expected),
        "NumberBytesProvided": str(provided),
    }


# --- framing, case by case --------------------------------------------------------------------

V = CRC32.of(b"abc").value()
ABC = b"3\r\nabc\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"zz\r\nabc\r\n0\r\n\r\n", "IncompleteBody"),
        (b"0x3\r\nabc\r\n0\r\n\r\n", "IncompleteBody"),
        (b"+3\r\nabc\r\n0\r\n\r\n", "IncompleteBody"),
        (b"-3\r\nabc\r\n0\r\n\r\n", "IncompleteBody"),  # AWS: 500
        (b"1_0\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n", "IncompleteBody"),
        (b"\xd9\xa3\r\nabc\r\n0\r\n\r\n", "IncompleteBody"),  # a non-ASCII digit
        (b"3\nabc\n0\n\n", "IncompleteBody"),  # test_strm_unsgnd_pyld_trl_no_cr
        (b"3\rabc\r0\r\r", "IncompleteBody"),  # test_strm_unsgnd_pyld_trl_no_lf
        (b"3\r\nabcd\r\n0\r\n\r\n", "IncompleteBody"),
        (b"3\r\nab\r\n0\r\n\r\n", "IncompleteBody"),
        (b"3\r\nabc0\r\n\r\n", "IncompleteBody"),
        (b"3\r\nabc\r\n", "IncompleteBody"),  # test_strm_unsgnd_pyld_trl_no_zero_chunk
        (b"", "IncompleteBody"),
        (random.Random(32).randbytes(32), "IncompleteBody"),  # ..._trl_not_encoded
        (ABC[:-1], "IncompleteBody"),  # test_strm_unsgnd_pyld_trl_no_trailing_lf
        (ABC + b"X", "IncompleteBody"),  # ours: AWS ignores bytes after the end
        (ABC + b"\r\n", "IncompleteBody"),  # ours, likewise
        (b"1" * 17 + b"\r\n", "IncompleteBody"),
        (b"%x\r\n" % (MAX_CHUNK_SIZE + 1), "IncompleteBody"),
        (b"3;" + b"x" * MAX_CHUNK_LINE + b"\r\nabc\r\n0\r\n\r\n", "IncompleteBody"),
        (b"3;" + b"x" * 10 * MAX_CHUNK_LINE, "IncompleteBody"),
        # Trailers (test_strm_unsgnd_pyld_trl_with_trailer_no_cr/_no_lf/_no_crlf):
        (b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32: %s\n" % V.encode(), "IncompleteBody"),
        (b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32: %s\r" % V.encode(), "IncompleteBody"),
        (b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32: %s" % V.encode(), "IncompleteBody"),
        # AWS answers MalformedTrailerError (it ignores what follows the empty line, so the
        # announced trailer is missing); we refuse the bytes after the end first.
        (b"3\r\nabc\r\n0\r\n\r\nx-amz-checksum-crc32: %s\r\n" % V.encode(), "IncompleteBody"),
        (b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32\r\n\r\n", MALFORMED_TRAILER_CODE),
        # test_strm_unsgnd_pyld_trl_extra_trailer, _mismatch_trailer, _unsupported_trailer_sent:
        (
            b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32:%s\r\nbonus: trailer\r\n\r\n" % V.encode(),
            MALFORMED_TRAILER_CODE,
        ),
        (b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32c:%s\r\n\r\n" % V.encode(), MALFORMED_TRAILER_CODE),
        (b"3\r\nabc\r\n0\r\nx-amz-checksum-bad:%s\r\n\r\n" % V.encode(), MALFORMED_TRAILER_CODE),
        (
            b"3\r\nabc\r\n0\r\nx-amz-trailer-signature:%s\r\n\r\n" % b"0" * 64,
            MALFORMED_TRAILER_CODE,
        ),
        (
            b"3\r\nabc\r\n0\r\n" + b"x-amz-checksum-crc32:%s\r\n" % V.encode() * 17 + b"\r\n",
            MALFORMED_TRAILER_CODE,
        ),
    ],
)
def test_unsigned_framing_errors(body: bytes, code: str) -> None:
    error = failure(body, UNSIGNED_TRAILER, trailer_names=NAMES)
    assert error.code == code
    if code == "IncompleteBody":
        assert error.message == FRAMING


@pytest.mark.parametrize(
    ("body", "trailers"),
    [
        (ABC, {}),
        (ABC[:-2], {}),  # test_strm_unsgnd_pyld_trl_no_trailing_crlf_ok
        (b" 3 \r\nabc\r\n0\r\n\r\n", {}),
        (b"3;foo=bar\r\nabc\r\n0\r\n\r\n", {}),  # extensions mean nothing unsigned
        (
            b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32: %s\r\n\r\n" % V.encode(),
            {"x-amz-checksum-crc32": V},
        ),
        # test_strm_unsgnd_pyld_trl_with_trailer_ok: a trailer, then EOF
        (
            b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32: %s\r\n" % V.encode(),
            {"x-amz-checksum-crc32": V},
        ),
        (
            b"3\r\nabc\r\n0\r\nX-Amz-Checksum-CRC32:%s\r\n\r\n" % V.encode(),
            {"x-amz-checksum-crc32": V},
        ),
        # test_strm_unsgnd_pyld_trl_bad_then_good_trailer_ok: the last one counts
        (
            b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-checksum-crc32:%s\r\n\r\n"
            % V.encode(),
            {"x-amz-checksum-crc32": V},
        ),
    ],
)
def test_unsigned_framing_accepted(body: bytes, trailers: dict[str, str]) -> None:
    decoded = decode(body, UNSIGNED_TRAILER, expected_length=3, trailer_names=NAMES)
    assert decoded.data == b"abc"
    assert decoded.trailers == trailers


def test_uppercase_hex_sizes() -> None:
    data = os.urandom(0xAB)
    body = b"AB\r\n" + data + b"\r\n0\r\n\r\n"
    assert decode(body, UNSIGNED_TRAILER).data == data


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (b"%x%.0s", "IncompleteBody"),  # test_strm_sgnd_pyld_no_signatures
        (b"%x;chunk-signature=%.0s", "IncompleteBody"),  # ..._blank_signatures
        (b"%x;chunk-signature=invalid%.0s", "SignatureDoesNotMatch"),  # ..._invalid_signatures
        (b"%x;chunk-signature=" + b"0" * 64 + b"%.0s", "SignatureDoesNotMatch"),  # ..._bad_
        (b"%x;extra=param;chunk-signature=%s", "SignatureDoesNotMatch"),  # ..._extra_param_before
        (b"%x;chunk-signature=%s;extra=param", "IncompleteBody"),  # ..._extra_param_after
        (b"%x;chunk-signature%.0s", "IncompleteBody"),
        (b"%x;chunk-signature=%s\xff", "SignatureDoesNotMatch"),
    ],
)
def test_signed_header_errors(header: bytes, code: str) -> None:
    error = failure(signed_body(CHUNKS, header=header), SIGNED, trailer_names=NAMES)
    assert error.code == code


@pytest.mark.parametrize(
    "header", [b"%x ; chunk-signature=%s", b"%x;chunk-signature = %s ", b"%X;chunk-signature=%s"]
)
def test_signed_header_spacing_accepted(header: bytes) -> None:
    # test_strm_sgnd_pyld_spaced_out_chunk_param_ok and _param_value_ok
    assert decode(signed_body(CHUNKS, header=header), SIGNED).data == DATA


def test_trailer_lines_in_a_mode_without_trailers() -> None:
    body = signed_body(CHUNKS)[:-2] + b"x-amz-checksum-crc32:%s\r\n\r\n" % CRC.encode()
    assert_framing(failure(body, SIGNED, trailer_names=NAMES))


def test_zero_chunk_mid_stream() -> None:
    # test_strm_unsgnd_pyld_trl_zero_chunk_mid_stream: AWS stops at the first 0 chunk.
    body = b"4\r\nabcd\r\n0\r\n\r\n3\r\nefg\r\n0\r\n\r\n"
    error = failure(body, UNSIGNED_TRAILER, expected_length=7)
    assert error.fields == {"NumberBytesExpected": "7", "NumberBytesProvided": "4"}


def test_signed_trailer_mode_without_trailers() -> None:
    # No trailer announced: the trailer signature covers a lone newline.
    body = signed_body(CHUNKS, [])
    assert b"\nx-amz-trailer-signature:" in body
    previous = chunk_signatures()[-1]
    text = "\n".join(
        ["AWS4-HMAC-SHA256-TRAILER", AMZ_DATE, SCOPE, previous, hashlib.sha256(b"\n").hexdigest()]
    )
    signature = hmac_sha256(KEY, text).hex()
    body = body.replace(trailer_signature(previous, []).encode(), signature.encode())
    assert decode(body, SIGNED_TRAILER).data == DATA


# --- modes, misuse and the reader -------------------------------------------------------------


def test_modes() -> None:
    reader = Pieces(ABC)
    for mode in (
        "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD",
        "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER",
    ):
        with pytest.raises(S3Error) as exc:
            ChunkedDecoder(reader, mode, auth=SEED, expected_length=None, trailer_names=set())
        assert exc.value.code == "NotImplemented"
    with pytest.raises(S3Error) as exc:
        ChunkedDecoder(reader, "UNSIGNED-PAYLOAD", expected_length=None, trailer_names=set())
    assert exc.value.code == "InvalidRequest"
    for mode in (SIGNED, SIGNED_TRAILER):
        with pytest.raises(S3Error) as exc:
            ChunkedDecoder(reader, mode, auth=None, expected_length=None, trailer_names=set())
        assert exc.value.code == "AccessDenied"


async def test_read_once() -> None:
    decoder = ChunkedDecoder(Pieces(ABC), UNSIGNED_TRAILER, expected_length=3, trailer_names=set())
    assert [piece async for piece in decoder.chunks()] == [b"abc"]
    with pytest.raises(RuntimeError):
        async for _ in decoder.chunks():
            pass


async def test_a_broken_connection_is_an_incomplete_body() -> None:
    class Broken:
        async def readany(self) -> bytes:
            raise ClientPayloadError("Response payload is not completed")

    decoder = ChunkedDecoder(Broken(), UNSIGNED_TRAILER, expected_length=3, trailer_names=set())
    with pytest.raises(S3Error) as exc:
        async for _ in decoder.chunks():
            pass
    assert_framing(exc.value)


async def test_data_is_yielded_as_it_arrives() -> None:
    # A 1 MiB chunk whose second half has not arrived yet: its first half is yielded already.
    data = os.urandom(1 << 20)
    body = signed_body([data])
    half = body.index(data) + len(data) // 2
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    class Network:
        async def readany(self) -> bytes:
            return await queue.get()

    decoder = ChunkedDecoder(
        Network(), SIGNED, auth=SEED, expected_length=len(data), trailer_names=set()
    )
    stream = decoder.chunks()
    queue.put_nowait(body[:half])
    first = await asyncio.wait_for(anext(stream), 1)
    assert first == data[: len(data) // 2]
    queue.put_nowait(body[half:])
    queue.put_nowait(b"")
    rest = [piece async for piece in stream]
    assert first + b"".join(rest) == data


def test_pieces_pass_through_without_accumulating() -> None:
    # Reads inside a chunk's data are handed on as they are: no chunk is assembled in memory.
    data = os.urandom(1 << 20)
    body = unsigned_body([data])
    header = body.index(data)
    sizes = [header, *([64 * 1024] * 16)]
    decoded = decode(body, UNSIGNED_TRAILER, expected_length=len(data), sizes=sizes)
    assert [len(p) for p in decoded.pieces] == [64 * 1024] * 16


# --- (d) arbitrary read boundaries; (e) fuzzing -----------------------------------------------

MODES_AND_BODIES = st.sampled_from([SIGNED, SIGNED_TRAILER, UNSIGNED_TRAILER])


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[bytes], bytes]:
    mode = draw(MODES_AND_BODIES)
    chunks = draw(st.lists(st.binary(min_size=1, max_size=300), max_size=6))
    data = b"".join(chunks)
    trailers = [("x-amz-checksum-crc32", CRC32.of(data).value())]
    if mode == UNSIGNED_TRAILER:
        body = unsigned_body(chunks, trailers)
    else:
        body = signed_body(chunks, trailers if mode == SIGNED_TRAILER else None)
    return mode, chunks, body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(), sizes=st.lists(st.integers(1, 200), max_size=40))
def test_any_read_boundaries_decode_identically(
    stream: tuple[str, list[bytes], bytes], sizes: list[int]
) -> None:
    mode, chunks, body = stream
    data = b"".join(chunks)
    decoded = decode(body, mode, expected_length=len(data), trailer_names=NAMES, sizes=sizes)
    assert decoded.data == data
    whole = decode(body, mode, expected_length=len(data), trailer_names=NAMES)
    assert decoded.trailers == whole.trailers


def decode_or_s3_error(body: bytes, mode: str, **kwargs: object) -> None:
    with contextlib.suppress(S3Error):
        decode(body, mode, **kwargs)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    mode=MODES_AND_BODIES,
    body=st.binary(max_size=200),
    expected_length=st.none() | st.integers(0, 300),
    sizes=st.lists(st.integers(1, 50), max_size=10),
)
def test_random_bytes_raise_only_s3_errors(
    mode: str, body: bytes, expected_length: int | None, sizes: list[int]
) -> None:
    decode_or_s3_error(
        body, mode, expected_length=expected_length, trailer_names=NAMES, sizes=sizes
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=streams(),
    edits=st.lists(
        st.tuples(
            st.sampled_from(["replace", "insert", "delete"]),
            st.integers(0),
            st.binary(min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_damaged_streams_raise_only_s3_errors(
    stream: tuple[str, list[bytes], bytes], edits: list[tuple[str, int, bytes]]
) -> None:
    mode, chunks, body = stream
    for kind, position, data in edits:
        at = position % (len(body) + 1)
        if kind == "replace":
            body = body[:at] + data + body[at + len(data) :]
        elif kind == "insert":
            body = body[:at] + data + body[at:]
        else:
            body = body[:at] + body[at + len(data) :]
    decode_or_s3_error(body, mode, expected_length=sum(map(len, chunks)), trailer_names=NAMES)


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("aws-chunked", None),
        ("foo, aws-chunked, bar", "foo, bar"),  # test_strm_unsgnd_pyld_trl_custom_encoding_ok
        ("aws-chunked, gzip", "gzip"),
        ("gzip, aws-chunked", "gzip"),
        ("gzip", "gzip"),
        (None, None),
        ("AWS-Chunked", None),
    ],
)
def test_stored_content_encoding(sent: str | None, stored: str | None) -> None:
    assert stored_content_encoding(sent) == stored
