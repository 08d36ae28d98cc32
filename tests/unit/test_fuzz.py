"""Fuzzing the pure parsers of the protocol layer: whatever the input, the only exception that
may escape is S3Error (which the handler renders as S3's XML error; anything else is a 500).

The per-module tests already feed random bytes to the chunked decoder and the XML parser, a
restricted alphabet to the range parser, and garbage Authorization headers and presigned
queries to the authenticator. These cover what they do not:

- aws-chunked bodies built from a grammar of near-miss framing (size lines, extensions, line
  endings, trailers), read through a reader that may fail mid-stream as a dropped connection
  does, in any of the three modes and with any mode string;
- any text at all as a Range header, any text and any size as x-amz-copy-source-range, any text
  as x-amz-copy-source (and an encode/parse round trip);
- routing with virtual-hosted style (any Host header, any domain);
- SigV4 and SigV2 authentication with bytes that are not UTF-8 (as aiohttp hands them over:
  surrogate-escaped), repeated headers, SigV2 garbage, and a property: changing any character
  of a valid signature never authenticates;
- XML documents built from a grammar (declarations, doctypes, entities, namespaces, CDATA,
  comments, processing instructions, nesting);
- the flexible-checksum headers (x-amz-checksum-*, x-amz-trailer, x-amz-sdk-checksum-algorithm)
  and the trailer values checked against a computed checksum.
"""

from __future__ import annotations

import asyncio
import os
import string
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import ClientPayloadError
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from gateway.s3 import checksums, xml
from gateway.s3.auth import ANONYMOUS, Authenticator, SignedRequest
from gateway.s3.chunked import SIGNED, SIGNED_TRAILER, UNSIGNED_TRAILER, ChunkedDecoder
from gateway.s3.errors import S3Error
from gateway.s3.ops.copy import CopySource, parse_copy_range, parse_copy_source
from gateway.s3.ranges import parse_range
from gateway.s3.router import Endpoint, bucket_from_host, route
from gateway.users import User
from tests import raw
from tests.server import ACCESS_KEY, SECRET_KEY

# FUZZ_EXAMPLES=5000 for a longer hunt than `make test` affords.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "250")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def wire_text(data: bytes) -> str:
    """Bytes as aiohttp hands them to the application: UTF-8, undecodable bytes escaped."""
    return data.decode("utf-8", "surrogateescape")


# Text of every kind: any code point (surrogates too: they are what undecodable bytes become).
any_text = st.text(st.characters(), max_size=60)
wire_strings = st.one_of(any_text, st.binary(max_size=60).map(wire_text))


# --- aws-chunked ------------------------------------------------------------------------------


class FlakyReader:
    """request.content's readany(): the body in pieces, then b"" (EOF), or an exception at
    `fail_at` bytes, as aiohttp raises when the client goes away."""

    def __init__(self, body: bytes, sizes: list[int], fail_at: int | None, error: Exception):
        self.body = body
        self.sizes = sizes or [len(body) or 1]
        self.fail_at = fail_at
        self.error = error
        self.at = 0
        self.reads = 0

    async def readany(self) -> bytes:
        if self.fail_at is not None and self.at >= self.fail_at:
            raise self.error
        size = self.sizes[self.reads % len(self.sizes)]
        self.reads += 1
        end = len(self.body) if self.fail_at is None else min(len(self.body), self.fail_at)
        piece = self.body[self.at : min(self.at + size, max(end, self.at + 1))]
        self.at += len(piece)
        return piece


class Seed:
    signing_key = b"k" * 32
    signature = "0" * 64
    amz_date = "20240524T120000Z"
    scope = "20240524/us-east-1/s3/aws4_request"


def drain(chunks: AsyncIterator[bytes]) -> bytes:
    """Run an async iterator that never really waits (the reader answers at once) to its end,
    without an event loop: a suspension would mean the decoder waits on something else."""
    out = bytearray()
    while True:
        step = chunks.__anext__()
        try:
            step.send(None)
        except StopIteration as done:
            out += done.value
        except StopAsyncIteration:
            return bytes(out)
        else:
            step.close()
            raise AssertionError("the decoder suspended on something other than its reader")


def size_lines(n: int) -> st.SearchStrategy[str]:
    """The size line of an n-byte chunk, written well or badly."""
    return st.sampled_from(
        [
            *[f"{n:x}"] * 12,  # mostly right, so that decoding gets past the first chunk
            f"{n:X}",
            f"{n:08x}",
            f" {n:x} ",
            f"{n:x}\t",
            f"0x{n:x}",
            f"-{n:x}",
            f"+{n:x}",
            f"{n}",
            "",
            "g",
            "f" * 17,
            "1" * 16,
            "\u0661",
        ]
    )


extensions = st.sampled_from(
    [
        "",
        ";chunk-signature=" + "0" * 64,
        ";chunk-signature=" + "a" * 64,
        ";chunk-signature=",
        ";chunk-signature",
        ";chunk-signature=" + "0" * 64 + ";x=y",
        "; chunk-signature = " + "0" * 64 + " ",
        ";x=y",
        ";",
        ";=",
        ";chunk-signature=\xff",
    ]
)
line_ends = st.sampled_from(["\r\n"] * 20 + ["\n", "\r", "", "\r\r\n", "\n\r"])
trailer_lines = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "x-amz-checksum-crc32",
                "X-Amz-Checksum-CRC32",
                "x-amz-checksum-sha256",
                "x-amz-trailer-signature",
                "x-amz-meta-a",
                "",
                " ",
            ]
        ),
        st.sampled_from([":", ": ", "", "::"]),
        st.sampled_from(["AAAAAA==", "", "0" * 64, "not base64", "\x00", "\xff"]),
        line_ends,
    ),
    max_size=4,
)


@st.composite
def framed_bodies(draw: st.DrawFn) -> bytes:
    """A body in the shape of aws-chunked, every part of it possibly wrong."""
    out = []
    for _ in range(draw(st.integers(0, 4))):
        data = draw(st.binary(max_size=40))
        announced = draw(st.one_of(st.just(len(data)), st.integers(0, 70)))
        out.append(
            draw(size_lines(announced)).encode("utf-8")
            + draw(extensions).encode("latin-1")
            + draw(line_ends).encode()
            + data
            + draw(line_ends).encode()
        )
    if draw(st.sampled_from([True, True, True, False])):  # the final chunk, mostly
        out.append(b"0" + draw(extensions).encode("latin-1") + draw(line_ends).encode())
        for name, colon, value, end in draw(trailer_lines):
            out.append((name + colon + value + end).encode("latin-1"))
        out.append(draw(st.sampled_from([b"\r\n", b"", b"\n", b"\r\ngarbage", b"\r\n\r\n"])))
    return b"".join(out)


reader_errors = st.sampled_from(
    [
        ClientPayloadError("Response payload is not completed"),
        ConnectionResetError(104, "Connection reset by peer"),
        asyncio.IncompleteReadError(b"", 10),
    ]
)


@FUZZ
@given(
    mode=st.sampled_from([SIGNED, SIGNED_TRAILER, UNSIGNED_TRAILER]),
    body=framed_bodies(),
    expected=st.none() | st.integers(0, 200) | st.just(2**63),
    names=st.sets(st.sampled_from(["x-amz-checksum-crc32", "x-amz-checksum-sha256", "x"])),
    sizes=st.lists(st.integers(1, 30), max_size=6),
    fail_at=st.none() | st.integers(0, 300),
    error=reader_errors,
)
def test_chunked_grammar_raises_only_s3_errors(
    mode: str,
    body: bytes,
    expected: int | None,
    names: set[str],
    sizes: list[int],
    fail_at: int | None,
    error: Exception,
) -> None:
    reader = FlakyReader(body, sizes, fail_at, error)
    decoder = ChunkedDecoder(
        reader, mode, auth=Seed(), expected_length=expected, trailer_names=names
    )
    try:
        data = drain(decoder.chunks())
    except S3Error:
        return
    # Accepted: then it really was a whole body of the announced length, all of it read.
    assert fail_at is None or fail_at >= len(body)
    if expected is not None:
        assert len(data) == expected
    assert set(decoder.trailers) <= names


@FUZZ
@given(
    mode=wire_strings,
    with_auth=st.booleans(),
    expected=st.none() | st.integers(-(2**70), 2**70),
)
def test_chunked_any_mode_string(mode: str, with_auth: bool, expected: int | None) -> None:
    reader = FlakyReader(b"0\r\n\r\n", [], None, ConnectionResetError())
    try:
        decoder = ChunkedDecoder(
            reader,
            mode,
            auth=Seed() if with_auth else None,
            expected_length=expected,
            trailer_names=frozenset(),
        )
        drain(decoder.chunks())
    except S3Error:
        pass


# --- ranges -----------------------------------------------------------------------------------

sizes = st.one_of(st.integers(0, 50), st.integers(0, 2**63))


@FUZZ
@given(
    header=st.one_of(wire_strings, wire_strings.map(lambda t: "bytes=" + t)),
    size=sizes,
)
@example(header="bytes=0-1\u2003", size=10)  # str.strip() strips Unicode spaces too
@example(header="bytes=\u0661-\u0662", size=10)
def test_parse_range_any_text(header: str, size: int) -> None:
    try:
        got = parse_range(header, size)
    except S3Error as exc:
        assert exc.code == "InvalidRange"
        return
    if got is not None:
        start, length = got
        assert start >= 0 and length >= 1 and start + length <= size


digits = st.one_of(st.integers(0, 99).map(str), st.integers(0, 10**40).map(str))


@FUZZ
@given(
    value=st.one_of(
        st.none(),
        wire_strings,
        st.builds(lambda a, b: f"bytes={a}-{b}", digits, digits),
        st.builds(lambda a, b, sep: f"bytes={a}{sep}{b}", digits, digits, st.sampled_from(" ,=\t")),
    ),
    size=sizes,
)
def test_parse_copy_range(value: str | None, size: int) -> None:
    try:
        start, length = parse_copy_range(value, size)
    except S3Error as exc:
        assert exc.code in {"InvalidArgument", "InvalidRequest"}
        return
    assert start >= 0 and start + length <= size
    assert length >= 1 or (value is None and size == 0)


# --- copy sources -----------------------------------------------------------------------------


@FUZZ
@given(
    value=st.one_of(
        wire_strings, st.builds("/{}/{}?versionId={}".format, any_text, any_text, any_text)
    )
)
@example(value="/b/%FF")
@example(value="b/k?versionId=")
@example(value="%2Fb%2Fk")
def test_parse_copy_source_any_text(value: str) -> None:
    try:
        source = parse_copy_source(value)
    except S3Error as exc:
        assert exc.code in {"InvalidArgument", "NoSuchVersion"}
        return
    assert source.bucket and source.key
    assert "/" not in source.bucket


keys = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)
buckets = st.text(string.ascii_lowercase + string.digits + ".-", min_size=3, max_size=20)


@FUZZ
@given(bucket=buckets, key=keys, slash=st.booleans(), safe=st.sampled_from(["", "/"]))
def test_parse_copy_source_round_trips(bucket: str, key: str, slash: bool, safe: str) -> None:
    """What SDKs send (the key URL-encoded, "/" kept or not) names exactly that key."""
    value = ("/" if slash else "") + bucket + "/" + quote(key, safe=safe)
    assume("?versionId=" not in value)
    assert parse_copy_source(value) == CopySource(bucket, key)


# --- routing ----------------------------------------------------------------------------------


@FUZZ
@given(
    method=st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "get"]),
    path=wire_strings.map(lambda t: "/" + t) | wire_strings,
    host=wire_strings,
    domain=st.none() | st.sampled_from(["s3.localhost", "localhost", "S3.Example.COM", "", "."]),
    query=st.dictionaries(wire_strings, wire_strings, max_size=3),
)
@example(method="GET", path="/", host="b.s3.localhost", domain="s3.localhost", query={})
@example(method="PUT", path="/%FF", host=".s3.localhost", domain="s3.localhost", query={})
def test_route_virtual_hosted(
    method: str, path: str, host: str, domain: str | None, query: dict[str, str]
) -> None:
    headers = {"host": host}
    try:
        result = route(method, path, query, headers, domain)
    except S3Error as exc:
        assert exc.code in {"InvalidURI", "MethodNotAllowed"}
        return
    assert isinstance(result, Endpoint)
    assert (result.bucket is None) == (result.operation == "ListBuckets")
    named = bucket_from_host(host, domain)
    if named is not None:
        assert result.bucket == named


# --- authentication ---------------------------------------------------------------------------

USER = User(ACCESS_KEY, SECRET_KEY, "fuzz", "f" * 64)
AUTH = Authenticator({USER.access_key: USER}, "us-east-1")
HOST = "127.0.0.1:9000"


def signed_request(method: str, path: str, query: str, headers: dict[str, str]) -> SignedRequest:
    """A request botocore signed now (the authenticator's clock is the real one)."""
    url = f"http://{HOST}{path}" + (f"?{query}" if query else "")
    signed = raw.sign(method, url, headers)
    return SignedRequest(method, path, query, {"host": HOST, **signed})


def headers_of(pairs: list[tuple[str, str]]) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(pairs))


auth_header_names = st.sampled_from(
    [
        "authorization",
        "x-amz-date",
        "date",
        "x-amz-content-sha256",
        "host",
        "x-amz-security-token",
        "content-md5",
        "content-type",
    ]
)


@FUZZ
@given(
    method=st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD"]),
    path=wire_strings,
    query=wire_strings,
    pairs=st.lists(st.tuples(auth_header_names, wire_strings), max_size=8),
)
def test_authenticate_undecodable_and_repeated_headers(
    method: str, path: str, query: str, pairs: list[tuple[str, str]]
) -> None:
    """Every field may hold bytes that were not UTF-8, and any header may come twice."""
    request = SignedRequest(method, path, query, headers_of(pairs))
    # An S3Error, or (nothing that claims a signature) the anonymous caller: never a user.
    try:
        result = AUTH.authenticate(request)
    except S3Error:
        return
    assert result.user is ANONYMOUS


sigv2 = st.builds(
    lambda key, sig: f"AWS {key}:{sig}",
    st.one_of(st.just(ACCESS_KEY), wire_strings),
    wire_strings,
) | wire_strings.map(lambda t: "AWS " + t)


@FUZZ
@given(
    authorization=sigv2,
    date=st.none() | wire_strings | st.just("Fri, 24 May 2024 12:00:00 GMT"),
    amz_date=st.none() | wire_strings,
    path=wire_strings,
    host_bucket=st.none() | wire_strings,
)
def test_authenticate_sigv2_header_garbage(
    authorization: str, date: str | None, amz_date: str | None, path: str, host_bucket: str | None
) -> None:
    pairs = [("authorization", authorization)]
    if date is not None:
        pairs.append(("date", date))
    if amz_date is not None:
        pairs.append(("x-amz-date", amz_date))
    request = SignedRequest("GET", path, "", headers_of(pairs), host_bucket)
    with pytest.raises(S3Error):
        AUTH.authenticate(request)


@FUZZ
@given(
    params=st.lists(
        st.tuples(
            st.sampled_from(["AWSAccessKeyId", "Signature", "Expires", "x", "AWSAccessKeyId%00"]),
            st.one_of(wire_strings, st.just(ACCESS_KEY), st.integers(0, 10**30).map(str)),
        ),
        max_size=5,
    ),
    path=wire_strings,
)
def test_authenticate_sigv2_query_garbage(params: list[tuple[str, str]], path: str) -> None:
    query = "&".join(f"{n}={v}" for n, v in params)
    request = SignedRequest("GET", path, query, headers_of([("host", HOST)]))
    try:
        result = AUTH.authenticate(request)
    except S3Error:
        return
    # Without AWSAccessKeyId or Signature the request claims no one: anonymous.
    assert result.user is ANONYMOUS, "garbage authenticated"
    assert not any(n in ("AWSAccessKeyId", "Signature") for n, _ in params)


@settings(max_examples=60, deadline=None)
@given(
    key=keys,
    position=st.integers(0, 63),
    replacement=st.characters(exclude_categories=("Cs",)),
    presigned=st.booleans(),
)
def test_a_changed_signature_never_authenticates(
    key: str, position: int, replacement: str, presigned: bool
) -> None:
    path = "/bucket/" + quote(key, safe="/")
    request = signed_request("PUT", path, "", {"x-amz-meta-a": "b"})
    assert AUTH.authenticate(request).user == USER  # the unchanged request verifies
    headers = dict(request.headers)
    authorization = headers["Authorization"]
    prefix, _, signature = authorization.rpartition("Signature=")
    assume(signature[position] != replacement)
    changed = signature[:position] + replacement + signature[position + 1 :]
    headers["Authorization"] = prefix + "Signature=" + changed
    with pytest.raises(S3Error) as info:
        AUTH.authenticate(SignedRequest("PUT", path, "", headers))
    assert info.value.code in {"SignatureDoesNotMatch", "AuthorizationHeaderMalformed"}


# --- XML --------------------------------------------------------------------------------------

# Encodings expat (or Python's codecs, through expat) knows. An unknown name is a separate,
# deterministic test below.
encodings = st.sampled_from(
    ["UTF-8", "utf-8", "UTF-16", "ISO-8859-1", "US-ASCII", "latin1", "cp1252", "UTF-32", "utf_8"]
)
names = st.sampled_from(["Delete", "Object", "Key", "Quiet", "a", "x:Key", "Part", "ETag"])


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    parts: list[str] = []
    if draw(st.booleans()):
        enc = draw(encodings)
        parts.append(
            f'<?xml version="{draw(st.sampled_from(["1.0", "1.1", "2.0", ""]))}" encoding="{enc}"?>'
        )
    if draw(st.booleans()):
        parts.append(
            draw(
                st.sampled_from(
                    [
                        "<!DOCTYPE Delete>",
                        '<!DOCTYPE d [<!ENTITY e "x">]>',
                        '<!DOCTYPE d [<!ENTITY e SYSTEM "file:///etc/passwd">]>',
                        '<!DOCTYPE d SYSTEM "http://127.0.0.1:9/x.dtd">',
                        '<!DOCTYPE d [<!ENTITY % p "x"> %p;]>',
                        "<!DOCTYPE",
                    ]
                )
            )
        )
    depth = draw(st.integers(0, 6))
    opened = [draw(names) for _ in range(depth)]
    for name in opened:
        ns = draw(
            st.sampled_from(
                ["", ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"', ' xmlns:x="u"', ' x:y="1"']
            )
        )
        parts.append(f"<{name}{ns}>")
        parts.append(
            draw(
                st.sampled_from(
                    [
                        "",
                        "text",
                        "&e;",
                        "&amp;",
                        "&#0;",
                        "&#x10FFFF;",
                        "<![CDATA[<x>]]>",
                        "<!-- c -->",
                        "<?pi x?>",
                        "&",
                        "<",
                        "]]>",
                        "\x00",
                        "\ud800",
                    ]
                )
            )
        )
    for name in reversed(opened[: len(opened) - draw(st.integers(0, 1))]):
        parts.append(f"</{name}>")
    text = "".join(parts)
    return text.encode("utf-8", "surrogatepass")


@FUZZ
@given(body=documents())
def test_xml_documents_raise_only_malformed_xml(body: bytes) -> None:
    try:
        root = xml.parse(body)
    except S3Error as exc:
        assert exc.code == "MalformedXML"
        return
    assert isinstance(root.tag, str) and "}" not in root.tag
    for el in root.iter():
        assert not (isinstance(el.tag, str) and el.tag.startswith("{"))


@pytest.mark.parametrize("encoding", ["x-no-such-encoding", "utf-7x", "EBCDIC-XYZ"])
def test_xml_declaring_an_unknown_encoding_is_malformed(encoding: str) -> None:
    body = f'<?xml version="1.0" encoding="{encoding}"?><Delete/>'.encode()
    with pytest.raises(S3Error) as info:
        xml.parse(body)
    assert info.value.code == "MalformedXML"


# --- flexible checksums -----------------------------------------------------------------------

checksum_headers = st.sampled_from(
    [
        "x-amz-checksum-crc32",
        "x-amz-checksum-crc32c",
        "x-amz-checksum-crc64nvme",
        "x-amz-checksum-sha1",
        "x-amz-checksum-sha256",
        "x-amz-checksum-md5",
        "x-amz-checksum-",
        "x-amz-sdk-checksum-algorithm",
        "x-amz-checksum-algorithm",
        "x-amz-checksum-type",
        "x-amz-trailer",
        "x-amz-content-sha256",
        "content-md5",
    ]
)
checksum_values = st.one_of(
    wire_strings,
    st.sampled_from(
        [
            "CRC32",
            "crc32c",
            "SHA256",
            "AAAAAA==",
            "AAAAAAAAAAA=",
            "x-amz-checksum-crc32",
            "x-amz-checksum-crc32,",
            ",x-amz-checksum-crc32",
            "x-amz-checksum-crc32,x-amz-checksum-sha1",
            "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        ]
    ),
)


@FUZZ
@given(
    pairs=st.lists(st.tuples(checksum_headers, checksum_values), max_size=5),
    trailers=st.dictionaries(checksum_headers, checksum_values, max_size=2),
    data=st.binary(max_size=50),
)
def test_checksum_headers_and_trailers_raise_only_s3_errors(
    pairs: list[tuple[str, str]], trailers: dict[str, str], data: bytes
) -> None:
    try:
        request = checksums.parse_request(headers_of(pairs))
        if request is None:
            return
        computed: Any = request.new()
        computed.update(data)
        value = request.check(computed, trailers)
    except S3Error:
        return
    assert value == computed.value()
