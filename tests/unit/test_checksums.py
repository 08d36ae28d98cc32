"""Flexible checksums: values equal botocore's, header parsing answers as AWS does, and CRC
combination equals the CRC of the concatenated data.

The AWS answers asserted here were recorded against AWS in OpenStack Swift's
test/s3api/test_input_errors.py (and versitygw#1659 for the trailer/algorithm mismatch).
"""

from __future__ import annotations

import base64
import os
import zlib

import pytest
from awscrt import checksums as crt
from botocore import httpchecksum
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.s3 import checksums
from gateway.s3.checksums import (
    ALGORITHMS,
    CRC32,
    CRC32C,
    CRC64NVME,
    MALFORMED_TRAILER_CODE,
    SHA1,
    SHA256,
    Algorithm,
    RequestChecksum,
    parse_request,
)
from gateway.s3.errors import S3Error

BOTOCORE = {
    CRC32: httpchecksum.Crc32Checksum,
    CRC32C: httpchecksum.CrtCrc32cChecksum,
    CRC64NVME: httpchecksum.CrtCrc64NvmeChecksum,
    SHA1: httpchecksum.Sha1Checksum,
    SHA256: httpchecksum.Sha256Checksum,
}
CRCS = (CRC32, CRC32C, CRC64NVME)
BODY = b"hello\n"
MULTIPLE = "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."


def botocore_value(alg: Algorithm, data: bytes) -> str:
    reference = BOTOCORE[alg]()
    reference.update(data)
    return reference.b64digest()


def check_error(exc: pytest.ExceptionInfo[S3Error], code: str, message: str | None) -> None:
    assert exc.value.code == code
    if message is not None:
        assert exc.value.message == message


# --- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("alg", list(ALGORITHMS.values()), ids=lambda a: a.name)
@pytest.mark.parametrize("size", [0, 1, 7, 4096, 1 << 20])
def test_values_equal_botocore(alg: Algorithm, size: int) -> None:
    data = os.urandom(size)
    assert alg.of(data).value() == botocore_value(alg, data)


@settings(max_examples=60, deadline=None)
@given(
    alg=st.sampled_from(list(ALGORITHMS.values())),
    pieces=st.lists(st.binary(max_size=300), max_size=8),
)
def test_incremental_updates_equal_botocore(alg: Algorithm, pieces: list[bytes]) -> None:
    running = alg.new()
    for piece in pieces:
        running.update(memoryview(piece))  # observers are fed memoryviews too
    assert running.value() == botocore_value(alg, b"".join(pieces))


def test_known_values() -> None:
    # "hello\n" -> NjowIA== (ministack#1497, as AWS returns it); 66560 x "a" -> sOO8/Q== is the
    # CRC32C in AWS's sigv4-streaming-trailers example.
    assert CRC32.of(BODY).value() == "NjowIA=="
    assert CRC32C.of(b"a" * 66560).value() == "sOO8/Q=="
    assert CRC64NVME.of(b"").value() == "AAAAAAAAAAA="


def test_checksum_is_a_digest() -> None:
    # The Payload feeds observers of the Digest shape: update, digest, hexdigest.
    running = SHA256.new()
    running.update(BODY)
    assert running.hexdigest() == running.digest().hex()
    assert len(CRC64NVME.new().digest()) == 8
    assert running.algorithm is SHA256


def test_header_names_and_lookup() -> None:
    assert [a.header for a in ALGORITHMS.values()] == [
        "x-amz-checksum-crc32",
        "x-amz-checksum-crc32c",
        "x-amz-checksum-crc64nvme",
        "x-amz-checksum-sha1",
        "x-amz-checksum-sha256",
    ]
    assert checksums.algorithm(" crc32c ") is CRC32C
    assert checksums.algorithm("md5") is None
    assert checksums.by_header("X-Amz-Checksum-SHA1") is SHA1
    assert checksums.by_header("x-amz-checksum-mode") is None


def test_requested_algorithm() -> None:
    # x-amz-checksum-algorithm: CreateMultipartUpload, CopyObject and a POST form's field.
    assert checksums.requested({}) is None
    assert checksums.requested({"x-amz-checksum-algorithm": "sha1"}) is SHA1
    with pytest.raises(S3Error) as exc:
        checksums.requested({"x-amz-checksum-algorithm": "MD5"})
    assert exc.value.code == "InvalidRequest"
    assert exc.value.message.startswith("Checksum algorithm provided is unsupported.")


@pytest.mark.parametrize(
    ("alg", "value", "valid"),
    [
        (CRC32, "NjowIA==", True),
        (CRC32, "NjowIA", False),  # padding is required
        (CRC32, "NjowIA==\n", False),
        (CRC32, "bad", False),
        (CRC32, "not=base-64", False),
        (CRC32, "AAAAAAAAAAA=", False),  # 8 bytes: a CRC64, not a CRC32
        (CRC64NVME, "AAAAAAAAAAA=", True),
        (SHA1, base64.b64encode(bytes(20)).decode(), True),
        (SHA256, base64.b64encode(bytes(31)).decode(), False),
        (CRC32, "Njow\u00e9A==", False),
        (CRC32, "", False),
    ],
)
def test_decode_validates_base64_and_length(alg: Algorithm, value: str, valid: bool) -> None:
    assert (alg.decode(value) is not None) is valid


@pytest.mark.parametrize("alg", list(ALGORITHMS.values()), ids=lambda a: a.name)
def test_verify(alg: Algorithm) -> None:
    computed = alg.of(BODY)
    checksums.verify(computed.value(), computed)
    with pytest.raises(S3Error) as exc:
        checksums.verify(alg.of(b"not the body").value(), computed)
    check_error(
        exc, "BadDigest", f"The {alg.name} you specified did not match the calculated checksum."
    )
    with pytest.raises(S3Error) as exc:
        checksums.verify("garbage", computed)
    assert exc.value.code == "BadDigest"


# --- parse_request ----------------------------------------------------------------------------

CRC = CRC32.of(BODY).value()
SHA = SHA256.of(BODY).value()
HEX = "0" * 64  # a hex x-amz-content-sha256: not aws-chunked
CHUNKED = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
SIGNED_CHUNKS = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


class Headers:
    """A case-insensitive multi-valued header list, like aiohttp's CIMultiDictProxy."""

    def __init__(self, *pairs: tuple[str, str]) -> None:
        self._pairs = list(pairs)

    def items(self) -> list[tuple[str, str]]:
        return list(self._pairs)


def test_no_checksum() -> None:
    assert parse_request(Headers(("x-amz-content-sha256", HEX))) is None
    # x-amz-checksum-mode/-type/-algorithm are not checksum values (AWS tolerates -type and
    # -algorithm on a PUT: test_strm_unsgnd_pyld_trl_crc_header_x_amz_checksum_*_ok).
    assert (
        parse_request(
            Headers(
                ("x-amz-checksum-mode", "ENABLED"),
                ("x-amz-checksum-type", "COMPOSITE"),
                ("x-amz-checksum-algorithm", "crc32"),
            )
        )
        is None
    )


def test_header_value() -> None:
    found = parse_request(
        Headers(("X-Amz-Checksum-CRC32", CRC), ("x-amz-sdk-checksum-algorithm", "CRC32"))
    )
    assert found == RequestChecksum(CRC32, CRC, None)
    assert not found.in_trailer
    assert found.trailer_names == frozenset()
    # The sdk algorithm is case-insensitive.
    assert parse_request(Headers((CRC32.header, CRC), ("x-amz-sdk-checksum-algorithm", "crc32")))


def test_trailer() -> None:
    found = parse_request(
        Headers(
            ("x-amz-content-sha256", CHUNKED),
            ("x-amz-sdk-checksum-algorithm", "CRC32"),
            ("x-amz-trailer", "x-amz-checksum-crc32"),
        )
    )
    assert found == RequestChecksum(CRC32, None, "x-amz-checksum-crc32")
    assert found.in_trailer
    assert found.trailer_names == {"x-amz-checksum-crc32"}


@pytest.mark.parametrize(
    "announced", ["x-amz-checksum-crc32,", "x-amz-checksum-crc32,,", "x-amz-checksum-crc32, "]
)
def test_trailer_with_trailing_commas(announced: str) -> None:
    # test_strm_unsgnd_pyld_trl_with_comma_in_trailer_ok, ..._with_commas_in_trailer_4 and _6
    found = parse_request(Headers(("x-amz-content-sha256", CHUNKED), ("x-amz-trailer", announced)))
    assert found is not None and found.trailer == "x-amz-checksum-crc32"


def test_java_sdk_header_value_with_announced_trailer() -> None:
    # Java SDK v2: signed chunks without a trailer, the value in a header, the trailer announced
    # anyway (pgsty/silo#143). AWS accepts it; the header value is the one to check.
    found = parse_request(
        Headers(
            ("x-amz-content-sha256", SIGNED_CHUNKS),
            ("x-amz-sdk-checksum-algorithm", "CRC32"),
            ("x-amz-checksum-crc32", CRC),
            ("x-amz-trailer", "x-amz-checksum-crc32"),
        )
    )
    assert found == RequestChecksum(CRC32, CRC, "x-amz-checksum-crc32")
    assert not found.in_trailer
    assert found.expected({}) == CRC


UNSUPPORTED_TRAILER = "The value specified in the x-amz-trailer header is not supported"
SDK_INVALID = "Value for x-amz-sdk-checksum-algorithm header is invalid."


@pytest.mark.parametrize(
    ("headers", "code", "message"),
    [
        pytest.param(
            [(CRC32C.header, CRC), (CRC32.header, CRC)],
            "InvalidRequest",
            MULTIPLE,
            id="two-headers",
        ),
        pytest.param(
            [("x-amz-sdk-checksum-algorithm", "sha256"), (CRC32C.header, CRC), (CRC32.header, CRC)],
            "InvalidRequest",
            MULTIPLE,
            id="two-headers-trump-algorithm-mismatch",
        ),
        pytest.param(
            [(CRC32.header, CRC), (CRC32.header, CRC)],
            "InvalidRequest",
            MULTIPLE,
            id="repeated-header",
        ),
        pytest.param(
            [("x-amz-checksum-bad", CRC)],
            "InvalidRequest",
            "The algorithm type you specified in x-amz-checksum- header is invalid.",
            id="unknown-algorithm-header",
        ),
        pytest.param(
            [(CRC32.header, "bad")],
            "InvalidRequest",
            "Value for x-amz-checksum-crc32 header is invalid.",
            id="malformed-crc32",
        ),
        pytest.param(
            [(SHA256.header, CRC)],
            "InvalidRequest",
            "Value for x-amz-checksum-sha256 header is invalid.",
            id="crc-length-in-sha256",
        ),
        pytest.param(
            [("x-amz-sdk-checksum-algorithm", "CRC32C"), (CRC32.header, CRC)],
            "InvalidRequest",
            SDK_INVALID,
            id="algorithm-mismatch",
        ),
        pytest.param(
            [("x-amz-sdk-checksum-algorithm", "MD5"), (CRC32.header, CRC)],
            "InvalidRequest",
            SDK_INVALID,
            id="unknown-sdk-algorithm",
        ),
        pytest.param(
            [("x-amz-sdk-checksum-algorithm", "CRC32")],
            "InvalidRequest",
            "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or "
            "x-amz-trailer headers were found.",
            id="sdk-algorithm-alone",
        ),
        pytest.param(
            [
                ("x-amz-content-sha256", CHUNKED),
                ("x-amz-sdk-checksum-algorithm", "sha1"),
                ("x-amz-trailer", "x-amz-checksum-crc64nvme"),
            ],
            "InvalidRequest",
            SDK_INVALID,
            id="trailer-algorithm-mismatch",  # versitygw#1659
        ),
        pytest.param(
            [("x-amz-content-sha256", HEX), ("x-amz-trailer", "x-amz-checksum-crc32")],
            MALFORMED_TRAILER_CODE,
            checksums.MALFORMED_TRAILER_MESSAGE,
            id="trailer-but-not-streaming",
        ),
        pytest.param(
            [
                ("x-amz-content-sha256", HEX),
                (CRC32.header, CRC),
                ("x-amz-trailer", "x-amz-checksum-crc32"),
            ],
            "InvalidRequest",
            "Expecting a single x-amz-checksum- header",
            id="same-in-header-and-trailer-not-streaming",
        ),
        pytest.param(
            [
                ("x-amz-content-sha256", CHUNKED),
                (CRC32.header, CRC),
                ("x-amz-trailer", "x-amz-checksum-crc32c"),
            ],
            "InvalidRequest",
            "Expecting a single x-amz-checksum- header",
            id="different-in-header-and-trailer",
        ),
        pytest.param(
            [
                ("x-amz-content-sha256", CHUNKED),
                ("x-amz-trailer", "x-amz-checksum-crc32, x-amz-checksum-crc32"),
            ],
            "InvalidRequest",
            MULTIPLE,
            id="duplicated-trailer",
        ),
        pytest.param(
            [
                ("x-amz-content-sha256", CHUNKED),
                (CRC32.header, CRC),
                ("x-amz-trailer", "x-amz-checksum-crc32, x-amz-checksum-crc32c"),
            ],
            "InvalidRequest",
            MULTIPLE,
            id="header-and-two-trailers",
        ),
        pytest.param(
            [
                ("x-amz-content-sha256", CHUNKED),
                (CRC32.header, CRC),
                (SHA256.header, SHA),
                ("x-amz-trailer", "x-amz-checksum-crc32"),
            ],
            "InvalidRequest",
            MULTIPLE,
            id="two-headers-and-trailer",
        ),
        pytest.param(
            [
                ("x-amz-content-sha256", CHUNKED),
                ("x-amz-trailer", "x-amz-checksum-crc32, x-amz-foo"),
            ],
            "InvalidRequest",
            UNSUPPORTED_TRAILER,
            id="unsupported-among-trailers",
        ),
        *(
            pytest.param(
                [("x-amz-content-sha256", CHUNKED), ("x-amz-trailer", announced)],
                "InvalidRequest",
                UNSUPPORTED_TRAILER,
                id=f"trailer-{announced!r}",
            )
            for announced in (
                ", x-amz-checksum-crc32, ,",
                ", x-amz-checksum-crc32",
                ",x-amz-checksum-crc32",
                "x-amz-checksum-crc32, ,",
                "x-amz-checksum-bad",
                "x-amz-content-sha256",
                "content-md5",
                "foo",
                "",
            )
        ),
    ],
)
def test_request_errors(headers: list[tuple[str, str]], code: str, message: str) -> None:
    with pytest.raises(S3Error) as exc:
        parse_request(Headers(*headers))
    check_error(exc, code, message)


def test_expected_value_resolution() -> None:
    in_trailer = RequestChecksum(CRC32, None, "x-amz-checksum-crc32")
    assert in_trailer.expected({"x-amz-checksum-crc32": CRC}) == CRC
    with pytest.raises(S3Error) as exc:
        in_trailer.expected({})  # announced, never sent
    check_error(exc, MALFORMED_TRAILER_CODE, checksums.MALFORMED_TRAILER_MESSAGE)
    with pytest.raises(S3Error) as exc:
        in_trailer.expected({"x-amz-checksum-crc32": "not=base-64"})
    check_error(exc, "InvalidRequest", "Value for x-amz-checksum-crc32 trailing header is invalid.")
    both = RequestChecksum(CRC32, CRC32.of(b"other").value(), "x-amz-checksum-crc32")
    assert both.expected({"x-amz-checksum-crc32": CRC}) == CRC  # the trailer, when it came


def test_check_returns_the_value_to_store() -> None:
    found = RequestChecksum(CRC32, None, "x-amz-checksum-crc32")
    computed = found.new()
    computed.update(BODY)
    assert found.check(computed, {"x-amz-checksum-crc32": CRC}) == CRC
    with pytest.raises(S3Error) as exc:
        found.check(computed, {"x-amz-checksum-crc32": CRC32.of(b"x").value()})
    assert exc.value.code == "BadDigest"


# --- multipart --------------------------------------------------------------------------------


def test_multipart_type() -> None:
    assert checksums.multipart_type(CRC64NVME, None) == "FULL_OBJECT"
    assert checksums.multipart_type(CRC32, None) == "COMPOSITE"
    assert checksums.multipart_type(SHA256, None) == "COMPOSITE"
    assert checksums.multipart_type(CRC32C, "full_object") == "FULL_OBJECT"
    for alg, kind, message in [
        (
            SHA256,
            "FULL_OBJECT",
            "The FULL_OBJECT checksum type cannot be used with the sha256 checksum algorithm.",
        ),
        (
            CRC64NVME,
            "COMPOSITE",
            "The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.",
        ),
        (CRC32, "BOTH", "Value for x-amz-checksum-type header is invalid."),
    ]:
        with pytest.raises(S3Error) as exc:
            checksums.multipart_type(alg, kind)
        check_error(exc, "InvalidRequest", message)


@pytest.mark.parametrize("alg", [CRC32, CRC32C, SHA1, SHA256], ids=lambda a: a.name)
def test_composite(alg: Algorithm) -> None:
    parts = [os.urandom(n) for n in (100, 1, 0, 5000)]
    values = [alg.of(p).value() for p in parts]
    expected = alg.of(b"".join(alg.of(p).digest() for p in parts)).value()
    assert checksums.composite(alg, values) == f"{expected}-4"


def test_composite_refusals() -> None:
    with pytest.raises(S3Error) as exc:
        checksums.composite(CRC64NVME, [CRC64NVME.of(b"").value()])
    assert exc.value.code == "InvalidRequest"
    with pytest.raises(S3Error) as exc:
        checksums.composite(CRC32, ["bad"])
    assert exc.value.code == "InvalidPart"
    with pytest.raises(S3Error) as exc:
        checksums.full_object(SHA256, [(SHA256.of(b"").value(), 0)])
    check_error(
        exc,
        "InvalidRequest",
        "The FULL_OBJECT checksum type cannot be used with the sha256 checksum algorithm.",
    )


@settings(max_examples=60, deadline=None)
@given(alg=st.sampled_from(CRCS), parts=st.lists(st.binary(max_size=2000), max_size=6))
def test_full_object_equals_crc_of_concatenation(alg: Algorithm, parts: list[bytes]) -> None:
    combined = checksums.full_object(alg, [(alg.of(p).value(), len(p)) for p in parts])
    assert combined == alg.of(b"".join(parts)).value()


MATH = {
    CRC32: (checksums.CRC32_MATH, zlib.crc32, crt.combine_crc32),
    CRC32C: (checksums.CRC32C_MATH, crt.crc32c, crt.combine_crc32c),
    CRC64NVME: (checksums.CRC64NVME_MATH, crt.crc64nvme, crt.combine_crc64nvme),
}


@settings(max_examples=100, deadline=None)
@given(alg=st.sampled_from(CRCS), first=st.binary(max_size=500), second=st.binary(max_size=500))
def test_gf2_combination_equals_concatenation(alg: Algorithm, first: bytes, second: bytes) -> None:
    # Our own GF(2) combination (the fallback for an awscrt without combine_*) against the CRC
    # of the concatenated data and against awscrt's native combination.
    math, crc, native = MATH[alg]
    combined = math.combine(crc(first), crc(second), len(second))
    assert combined == crc(first + second)
    assert combined == native(crc(first), crc(second), len(second))


@pytest.mark.parametrize("alg", CRCS, ids=lambda a: a.name)
def test_gf2_combination_of_large_lengths(alg: Algorithm) -> None:
    # Part lengths of real uploads (5 GiB) cannot be concatenated in a test; awscrt can check.
    math, crc, native = MATH[alg]
    for length in (5 * 1024**3, 10_000 * 5 * 1024**2 + 17, (1 << 40) - 1):
        a, b = crc(b"first"), crc(b"second")
        assert math.combine(a, b, length) == native(a, b, length)


# --- checking stored checksums (fsck --deep) ------------------------------------------------------


@pytest.mark.parametrize("alg", list(checksums.ALGORITHMS.values()), ids=lambda a: a.name)
def test_stored_checksum_of_a_whole_object(alg: checksums.Algorithm) -> None:
    data = bytes(range(256)) * 5
    check = checksums.stored_checksum({alg.header: alg.of(data).value()}, ())
    assert check is not None
    check.update(data[:100])
    check.update(data[100:])
    assert check.actual() == check.expected


@pytest.mark.parametrize("alg", [checksums.CRC32, checksums.SHA256], ids=lambda a: a.name)
def test_stored_checksum_of_a_composite_object(alg: checksums.Algorithm) -> None:
    pieces = [b"a" * 7, b"b" * 5, b"c"]
    value = checksums.composite(alg, [alg.of(p).value() for p in pieces])
    stored = {alg.header: value, "x-amz-checksum-type": checksums.COMPOSITE}
    check = checksums.stored_checksum(stored, [len(p) for p in pieces])
    assert check is not None
    check.update(b"".join(pieces))
    assert check.actual() == value
    bad = checksums.stored_checksum(stored, [len(p) for p in pieces])
    assert bad is not None
    bad.update(b"a" * 7 + b"b" * 4 + b"x" + b"c")
    assert bad.actual() != value


def test_stored_checksum_of_a_pending_part() -> None:
    check = checksums.stored_checksum({"algorithm": "CRC32C", "value": "x"}, ())
    assert check is not None and check.algorithm is checksums.CRC32C
    assert checksums.stored_checksum({}, ()) is None
    assert checksums.stored_checksum({"x-amz-checksum-type": "FULL_OBJECT"}, ()) is None
