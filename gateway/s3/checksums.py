"""Flexible checksums: CRC32, CRC32C, CRC64NVME, SHA1 and SHA256, as S3 takes and returns them.

A checksum travels as the base64 of its big-endian digest, in an `x-amz-checksum-<alg>` header
or in an aws-chunked trailer named by `x-amz-trailer`
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html).
Codes and messages are AWS's, as recorded against AWS by OpenStack Swift's
test/s3api/test_input_errors.py; where a case was not recorded, the docstring says what we chose.

CRC32 comes from zlib (it releases the GIL on large buffers); CRC32C and CRC64NVME from awscrt,
the implementation botocore itself uses; SHA from hashlib. Checksum objects have the `Digest`
shape (`update`, `digest`, `hexdigest`), so they can be fed as a `Payload` observer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from awscrt import checksums as crt

from .. import digest
from .errors import S3Error

HEADER_PREFIX = "x-amz-checksum-"
# x-amz-checksum-* headers that are not a checksum value.
_NOT_VALUES = frozenset({"x-amz-checksum-mode", "x-amz-checksum-type", "x-amz-checksum-algorithm"})
COMPOSITE = "COMPOSITE"
FULL_OBJECT = "FULL_OBJECT"

# AWS's answer to trailing data that does not fit (x-amz-trailer without an aws-chunked body, a
# trailer nobody announced, ...).
MALFORMED_TRAILER_CODE = "MalformedTrailerError"
MALFORMED_TRAILER_MESSAGE = (
    "The request contained trailing data that was not well-formed or did not conform to our "
    "published schema."
)
_MULTIPLE = "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."


class Checksum:
    """A running checksum of one algorithm."""

    algorithm: Algorithm

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        raise NotImplementedError

    def digest(self) -> bytes:
        raise NotImplementedError

    def hexdigest(self) -> str:
        return self.digest().hex()

    def value(self) -> str:
        """The checksum as the x-amz-checksum-* headers carry it: base64 of the digest."""
        return base64.b64encode(self.digest()).decode("ascii")


class _Crc(Checksum):
    def __init__(self, algorithm: Algorithm, update: Callable[[object, int], int]) -> None:
        self.algorithm = algorithm
        self._update = update
        self._crc = 0

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        self._crc = self._update(data, self._crc)

    def digest(self) -> bytes:
        return self._crc.to_bytes(self.algorithm.digest_size, "big")


class _Sha(Checksum):
    def __init__(self, algorithm: Algorithm, name: str) -> None:
        self.algorithm = algorithm
        self._hash = hashlib.new(name)

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        self._hash.update(data)

    def digest(self) -> bytes:
        return self._hash.digest()


@dataclass(frozen=True)
class _Crc2:
    """A reflected CRC's polynomial, for combining CRCs of adjacent pieces without their data.

    Polynomials over GF(2) modulo the CRC polynomial, in the CRC's reflected bit order: bit
    `width-1` is x^0. Combining uses crc(A+B) = crc(A) * x^(8*len(B)) + crc(B), which holds for
    CRCs whose initial value equals their final xor (all three here: all ones).
    """

    width: int
    reflected_poly: int

    def multiply(self, a: int, b: int) -> int:
        """a * b modulo the polynomial."""
        top = 1 << (self.width - 1)
        product = 0
        while a:
            if a & top:
                product ^= b
            a = (a << 1) & ((1 << self.width) - 1)
            b = (b >> 1) ^ self.reflected_poly if b & 1 else b >> 1
        return product

    def x_power_8n(self, n: int) -> int:
        """x^(8n) modulo the polynomial, by squaring: O(log n) multiplications."""
        result = 1 << (self.width - 1)  # 1
        square = 1 << (self.width - 9)  # x^8
        while n:
            if n & 1:
                result = self.multiply(result, square)
            square = self.multiply(square, square)
            n >>= 1
        return result

    def combine(self, crc1: int, crc2: int, length2: int) -> int:
        return self.multiply(self.x_power_8n(length2), crc1) ^ crc2


@dataclass(frozen=True, eq=False)
class Algorithm:
    name: str  # as AWS writes it in messages and in x-amz-sdk-checksum-algorithm: "CRC32"
    digest_size: int
    _new: Callable[[Algorithm], Checksum]
    # For CRCs: combination of two CRCs given the second piece's length (FULL_OBJECT).
    _combine: Callable[[int, int, int], int] | None = None

    @property
    def header(self) -> str:
        """The header (and trailer) that carries a value: "x-amz-checksum-crc32"."""
        return HEADER_PREFIX + self.name.lower()

    @property
    def is_crc(self) -> bool:
        return self._combine is not None

    def new(self) -> Checksum:
        return self._new(self)

    def of(self, data: bytes | bytearray | memoryview) -> Checksum:
        checksum = self.new()
        checksum.update(data)
        return checksum

    def decode(self, value: str) -> bytes | None:
        """The digest a base64 value stands for, or None if it is not one of this algorithm."""
        try:
            raw = binascii.a2b_base64(value.encode("ascii"), strict_mode=True)
        except (UnicodeEncodeError, binascii.Error, ValueError):
            return None
        return raw if len(raw) == self.digest_size else None

    def __repr__(self) -> str:
        return f"Algorithm({self.name})"


def _crc_combiner(native: str, width: int, reflected_poly: int) -> Callable[[int, int, int], int]:
    # Recent awscrt releases combine natively; older ones lack it, and the GF(2) method stands in.
    found = getattr(crt, native, None)
    if found is not None:
        return found
    return _Crc2(width, reflected_poly).combine


# The reflected polynomials of CRC-32 (ISO-HDLC), CRC-32C (Castagnoli) and CRC-64/NVME.
CRC32_MATH = _Crc2(32, 0xEDB88320)
CRC32C_MATH = _Crc2(32, 0x82F63B78)
CRC64NVME_MATH = _Crc2(64, 0x9A6C9329AC4BC9B5)

CRC32 = Algorithm(
    "CRC32",
    4,
    lambda a: _Crc(a, zlib.crc32),
    _crc_combiner("combine_crc32", 32, CRC32_MATH.reflected_poly),
)
CRC32C = Algorithm(
    "CRC32C",
    4,
    lambda a: _Crc(a, crt.crc32c),
    _crc_combiner("combine_crc32c", 32, CRC32C_MATH.reflected_poly),
)
CRC64NVME = Algorithm(
    "CRC64NVME",
    8,
    lambda a: _Crc(a, crt.crc64nvme),
    _crc_combiner("combine_crc64nvme", 64, CRC64NVME_MATH.reflected_poly),
)
SHA1 = Algorithm("SHA1", 20, lambda a: _Sha(a, "sha1"))
SHA256 = Algorithm("SHA256", 32, lambda a: _Sha(a, "sha256"))

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (CRC32, CRC32C, CRC64NVME, SHA1, SHA256)}

# What AWS gives an object uploaded without a checksum, as a FULL_OBJECT checksum: PutObject,
# POST, CompleteMultipartUpload of an upload created without an algorithm, and copies of such
# objects ("Amazon S3 added the default checksum, CRC64NVME", API_Checksum.html; LocalStack's
# AWS recordings since Jan 2025 show it on every new object).
DEFAULT = CRC64NVME
_BY_HEADER: dict[str, Algorithm] = {a.header: a for a in ALGORITHMS.values()}


def has_integrity_header(headers: Mapping[str, str]) -> bool:
    """Content-MD5 or a flexible checksum (as a header, or announced for a trailer): what AWS
    requires on the operations its model marks `requestChecksumRequired`."""
    return "content-md5" in headers or any(
        h.lower().startswith(("x-amz-checksum-", "x-amz-sdk-checksum-")) for h in headers
    )


def algorithm(name: str) -> Algorithm | None:
    """The algorithm of a name as clients send it (x-amz-sdk-checksum-algorithm,
    x-amz-checksum-algorithm), case-insensitively; None if unknown."""
    return ALGORITHMS.get(name.strip().upper())


def requested(headers: Mapping[str, str]) -> Algorithm | None:
    """The algorithm x-amz-checksum-algorithm asks S3 to compute (CreateMultipartUpload,
    CopyObject, a POST form's field), None if not sent; InvalidRequest if S3 knows no such
    algorithm (AWS's message, as LocalStack and versitygw reproduce it)."""
    name = headers.get("x-amz-checksum-algorithm")
    if name is None:
        return None
    found = algorithm(name)
    if found is None:
        raise S3Error(
            "InvalidRequest",
            "Checksum algorithm provided is unsupported. Please try again with any of the valid "
            "types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]",
        )
    return found


def by_header(name: str) -> Algorithm | None:
    """The algorithm a header or trailer name carries ("x-amz-checksum-crc32"), or None."""
    return _BY_HEADER.get(name.strip().lower())


def verify(expected: str, computed: Checksum) -> None:
    """Does the body's checksum match the value the client sent? BadDigest if not.

    Compares digests, not strings, so a differently padded but equal base64 value passes.
    """
    algorithm = computed.algorithm
    want = algorithm.decode(expected)
    if want is None or not hmac.compare_digest(want, computed.digest()):
        raise S3Error(
            "BadDigest",
            f"The {algorithm.name} you specified did not match the calculated checksum.",
        )


# --- the checksum a request carries -----------------------------------------------------------


@dataclass(frozen=True)
class RequestChecksum:
    """The checksum a PutObject/UploadPart request promises, from its headers.

    `value` is the (validated) x-amz-checksum-<alg> header, if sent; `trailer` the checksum trailer
    announced in x-amz-trailer (lower case), if any. At least one of the two is set. Both are set
    when the Java SDK v2 announces a trailer but sends the value in a header and no trailer
    (pgsty/silo#143): the header value is accepted then.
    """

    algorithm: Algorithm
    value: str | None
    trailer: str | None

    @property
    def in_trailer(self) -> bool:
        """The value is expected only in the aws-chunked trailer."""
        return self.value is None

    @property
    def trailer_names(self) -> frozenset[str]:
        """The trailer names the aws-chunked decoder may accept."""
        return frozenset({self.trailer}) if self.trailer else frozenset()

    def new(self) -> Checksum:
        return self.algorithm.new()

    def expected(self, trailers: Mapping[str, str]) -> str:
        """The value the body must match, once the body (and its trailers) has been read.

        A trailer that came wins over a header value; a malformed trailer value is InvalidRequest
        "Value for x-amz-checksum-crc32 trailing header is invalid."; an announced trailer that
        never came, with no header value to fall back on, is AWS's MalformedTrailerError.
        """
        if self.trailer is not None and self.trailer in trailers:
            value = trailers[self.trailer]
            if self.algorithm.decode(value) is None:
                raise S3Error(
                    "InvalidRequest", f"Value for {self.trailer} trailing header is invalid."
                )
            return value
        if self.value is not None:
            return self.value
        raise S3Error(MALFORMED_TRAILER_CODE, MALFORMED_TRAILER_MESSAGE)

    def check(self, computed: Checksum, trailers: Mapping[str, str]) -> str:
        """Verify the computed checksum against the expected value; return the value to store."""
        verify(self.expected(trailers), computed)
        return computed.value()


def _trailer_names(raw: str) -> list[str]:
    """The names in an x-amz-trailer header.

    AWS accepts trailing commas ("x-amz-checksum-crc32,", "x-amz-checksum-crc32,,",
    "x-amz-checksum-crc32, ") but not an empty name anywhere else (", x-amz-checksum-crc32",
    "x-amz-checksum-crc32, ,"): those are "not supported" (Swift's AWS-recorded
    test_strm_unsgnd_pyld_trl_with_commas_in_trailer_*).
    """
    items = raw.strip().split(",")
    while items and items[-1] == "":
        items.pop()
    return [item.strip().lower() for item in items]


def parse_request(headers: Mapping[str, str]) -> RequestChecksum | None:
    """The checksum a request carries (None if it carries none), checked as AWS checks it.

    `headers` is case-insensitive (aiohttp's CIMultiDictProxy: every occurrence of a repeated
    header counts). In AWS's order:

    | case | answer |
    |---|---|
    | two x-amz-checksum-* headers, two names in x-amz-trailer, or a header and a trailer of different algorithms | InvalidRequest "Expecting a single x-amz-checksum- header[. Multiple checksum Types are not allowed.]" |
    | x-amz-checksum-<unknown> | InvalidRequest "The algorithm type you specified in x-amz-checksum- header is invalid." |
    | x-amz-trailer names anything but a known x-amz-checksum-* | InvalidRequest "The value specified in the x-amz-trailer header is not supported" |
    | a header and a trailer of the same algorithm on a body that is not aws-chunked | InvalidRequest "Expecting a single x-amz-checksum- header" |
    | x-amz-trailer on a body that is not aws-chunked | MalformedTrailerError |
    | a malformed header value | InvalidRequest "Value for x-amz-checksum-crc32 header is invalid." |
    | x-amz-sdk-checksum-algorithm unknown, or not the algorithm sent | InvalidRequest "Value for x-amz-sdk-checksum-algorithm header is invalid." |
    | x-amz-sdk-checksum-algorithm with neither header nor trailer | InvalidRequest "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found." |
    """  # noqa: E501
    values: list[tuple[str, str]] = []
    trailer_raw: str | None = None
    sdk_raw: str | None = None
    streaming = False
    for name, raw_value in headers.items():
        lname = name.lower()
        if lname.startswith(HEADER_PREFIX) and lname not in _NOT_VALUES:
            values.append((lname, raw_value.strip()))
        elif lname == "x-amz-trailer":
            trailer_raw = raw_value if trailer_raw is None else f"{trailer_raw},{raw_value}"
        elif lname == "x-amz-sdk-checksum-algorithm":
            sdk_raw = raw_value
        elif lname == "x-amz-content-sha256":
            streaming = raw_value.strip().startswith("STREAMING-")

    if len(values) > 1:
        raise S3Error("InvalidRequest", _MULTIPLE)
    header: tuple[Algorithm, str, str] | None = None
    if values:
        header_name, header_value = values[0]
        found = by_header(header_name)
        if found is None:
            raise S3Error(
                "InvalidRequest",
                "The algorithm type you specified in x-amz-checksum- header is invalid.",
            )
        header = (found, header_name, header_value)

    trailer: Algorithm | None = None
    trailer_name: str | None = None
    if trailer_raw is not None:
        names = _trailer_names(trailer_raw)
        if not names:
            names = [""]  # an empty x-amz-trailer names nothing we support
        for n in names:
            if by_header(n) is None:
                raise S3Error(
                    "InvalidRequest",
                    "The value specified in the x-amz-trailer header is not supported",
                )
        if len(names) > 1:
            raise S3Error("InvalidRequest", _MULTIPLE)
        trailer_name = names[0]
        trailer = by_header(trailer_name)

    # The Java SDK v2 announces the trailer but sends the header on an aws-chunked body
    # (pgsty/silo#143); AWS accepts that. Anything else is two checksums.
    if header is not None and trailer is not None and (header[0] is not trailer or not streaming):
        raise S3Error("InvalidRequest", "Expecting a single x-amz-checksum- header")
    if trailer is not None and not streaming:
        raise S3Error(MALFORMED_TRAILER_CODE, MALFORMED_TRAILER_MESSAGE)

    if header is not None:
        alg, header_name, header_value = header
        if alg.decode(header_value) is None:
            raise S3Error("InvalidRequest", f"Value for {header_name} header is invalid.")
    chosen = header[0] if header is not None else trailer

    if sdk_raw is not None:
        sdk = algorithm(sdk_raw)
        if sdk is None or (chosen is not None and sdk is not chosen):
            raise S3Error(
                "InvalidRequest", "Value for x-amz-sdk-checksum-algorithm header is invalid."
            )
        if chosen is None:
            raise S3Error(
                "InvalidRequest",
                "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* "
                "or x-amz-trailer headers were found.",
            )
    if chosen is None:
        return None
    return RequestChecksum(
        algorithm=chosen,
        value=header[2] if header is not None else None,
        trailer=trailer_name,
    )


# --- multipart uploads ------------------------------------------------------------------------


def multipart_type(alg: Algorithm, requested: str | None) -> str:
    """The checksum type of a multipart upload (CreateMultipartUpload's x-amz-checksum-type).

    CRC64NVME defaults to FULL_OBJECT and cannot be COMPOSITE; SHA cannot be FULL_OBJECT;
    the other CRCs default to COMPOSITE (checking-object-integrity.html; the messages are AWS's as
    LocalStack and versitygw reproduce them).
    """
    if requested is None:
        return FULL_OBJECT if alg is CRC64NVME else COMPOSITE
    kind = requested.strip().upper()
    if kind not in (COMPOSITE, FULL_OBJECT):
        raise S3Error("InvalidRequest", "Value for x-amz-checksum-type header is invalid.")
    if (kind == FULL_OBJECT and not alg.is_crc) or (kind == COMPOSITE and alg is CRC64NVME):
        raise _type_not_allowed(kind, alg)
    return kind


def _type_not_allowed(kind: str, alg: Algorithm) -> S3Error:
    return S3Error(
        "InvalidRequest",
        f"The {kind} checksum type cannot be used with the {alg.name.lower()} checksum algorithm.",
    )


def _part_digests(alg: Algorithm, part_values: Iterable[str]) -> list[bytes]:
    digests = []
    for value in part_values:
        raw = alg.decode(value)
        if raw is None:
            raise S3Error("InvalidPart", f"A part's {alg.name} checksum is invalid.")
        digests.append(raw)
    return digests


def composite(alg: Algorithm, part_values: Sequence[str]) -> str:
    """The COMPOSITE checksum of a multipart object: the checksum of the parts' binary checksums,
    concatenated, as "<base64>-N"."""
    if alg is CRC64NVME:
        raise _type_not_allowed(COMPOSITE, alg)
    total = alg.new()
    for raw in _part_digests(alg, part_values):
        total.update(raw)
    return f"{total.value()}-{len(part_values)}"


def full_object(alg: Algorithm, parts: Sequence[tuple[str, int]]) -> str:
    """The FULL_OBJECT checksum of a multipart object, from each part's (checksum, length): the
    CRC of the whole object, combined without reading the data again. CRC algorithms only."""
    combine = alg._combine
    if combine is None:
        raise _type_not_allowed(FULL_OBJECT, alg)
    digests = _part_digests(alg, (value for value, _ in parts))
    crc = 0  # the CRC of nothing
    for raw, (_, length) in zip(digests, parts, strict=True):
        crc = combine(crc, int.from_bytes(raw, "big"), length)
    return base64.b64encode(crc.to_bytes(alg.digest_size, "big")).decode("ascii")


def default_of_parts(parts: Sequence[tuple[str | None, int]]) -> dict[str, str]:
    """The default checksum of a multipart object whose upload named no algorithm, from each
    part's (DEFAULT checksum or None, length); none if a part has none (a part copied from a
    range we did not read)."""
    if not parts or any(value is None for value, _ in parts):
        return {}
    value = full_object(DEFAULT, [(v, n) for v, n in parts if v is not None])
    return {DEFAULT.header: value, "x-amz-checksum-type": FULL_OBJECT}


# --- checking stored bytes (fsck --deep) --------------------------------------------------------


class StoredChecksum:
    """Recomputes a checksum the store kept, from the bytes: a whole-object value, or a
    COMPOSITE one ("<base64>-N": the checksum of the parts' binary checksums)."""

    def __init__(self, alg: Algorithm, expected: str, part_sizes: Sequence[int]) -> None:
        self.algorithm = alg
        self.expected = expected
        self._composite = expected.rpartition("-")[2].isdigit() and bool(part_sizes)
        self._whole = alg.new()
        self._parts = digest.PartDigests(part_sizes if self._composite else (), alg.new)

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        if self._composite:
            self._parts.update(data)
        else:
            self._whole.update(data)

    def actual(self) -> str:
        if not self._composite:
            return self._whole.value()
        parts = self._parts.digests()
        return f"{self.algorithm.of(b''.join(parts)).value()}-{len(parts)}"


def stored_checksum(stored: Mapping[str, str], part_sizes: Sequence[int]) -> StoredChecksum | None:
    """A checker for the checksum an object was stored with (its `x-amz-checksum-<alg>`
    value), or a pending part's (`{"algorithm": name, "value": v}`; no name: the DEFAULT an
    upload without an algorithm keeps), or None if it has none."""
    if "value" in stored:
        alg = algorithm(stored["algorithm"]) if "algorithm" in stored else DEFAULT
        value = stored.get("value")
    else:
        found = [(by_header(k), v) for k, v in stored.items() if k not in _NOT_VALUES]
        alg, value = found[0] if len(found) == 1 else (None, None)
    if alg is None or value is None:
        return None
    return StoredChecksum(alg, value, part_sizes)
