"""AWS Signature Version 4 as text: its constants, the parsing of what a request claims
(Authorization's components, the credential's scope, the signed headers, dates, the payload
hash), the canonical request and the string to sign, the signing key, and presigned URLs.
Pure functions: auth.py decides with them who sent a request.

https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html and
https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote, unquote_to_bytes

from gateway.s3.errors import S3Error
from gateway.users import User

# A presigned URL lives at most seven days (sigv4-query-string-auth.html, X-Amz-Expires).
MAX_EXPIRES_SECONDS = 7 * 24 * 60 * 60
ALGORITHM = "AWS4-HMAC-SHA256"


SERVICE = "s3"


TERMINATOR = "aws4_request"


UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"


STREAMING_PAYLOADS = frozenset(
    {
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
        "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD",
        "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER",
    }
)


# [0-9], not \d: \d also matches non-ASCII digits, which int() and strptime accept.
_AMZ_DATE = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z")


_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


_INTEGER = re.compile(r"[+-]?[0-9]+")


# AWS UriEncode keeps only the unreserved characters; quote() keeps letters and digits itself.
_UNRESERVED = "-_.~"


CONTENT_SHA256_MESSAGE = (
    "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, "
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, "
    "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER "
    "or a valid sha256 value."
)


# eq=False: there are two, compared by identity, and hashed cheaply as cache keys.
@dataclass(frozen=True, eq=False)
class Dialect:
    """How malformed credentials are reported: header and query auth use different codes."""

    code: str
    prefix: str


HEADER = Dialect("AuthorizationHeaderMalformed", "The authorization header is malformed; ")


QUERY = Dialect(
    "AuthorizationQueryParametersError", "Error parsing the X-Amz-Credential parameter; "
)


@dataclass(frozen=True)
class Credential:
    access_key: str
    date: str
    region: str
    service: str
    terminator: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/{self.terminator}"


# Sent unsigned by SDKs and harmless: the body's hash is checked against the body anyway.
_UNSIGNED_ALLOWED = frozenset({"x-amz-content-sha256"})


def refuse_unsigned_amz_headers(headers: Mapping[str, list[str]], signed: tuple[str, ...]) -> None:
    """Every x-amz-* header that changes what a request does must be signed: otherwise anyone
    holding a presigned URL (or replaying a request) could add x-amz-copy-source,
    x-amz-meta-*... AWS answers 403 AccessDenied naming them."""
    # A loop, not sorted() over a generator: almost every request has none to report.
    unsigned = []
    for name in headers:
        if name.startswith("x-amz-") and name not in signed and name not in _UNSIGNED_ALLOWED:
            unsigned.append(name)
    if unsigned:
        unsigned.sort()
        raise S3Error(
            "AccessDenied",
            "There were headers present in the request which were not signed",
            HeadersNotSigned=", ".join(unsigned),
        )


def presigned_url(
    origin: str,
    host: str,
    path: str,
    user: User,
    region: str,
    expires: int,
    now: float | None = None,
    version_id: str | None = None,
) -> str:
    """A presigned GET of `path` (bucket and key, not encoded), signed by the rules
    Authenticator verifies (sigv4-query-string-auth.html): host the only signed header, the
    payload unsigned. `origin` is scheme://host[:port]; `host`, its Host header; `version_id`, a
    version to read rather than the latest."""
    when = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.UTC)
    amz_date, date = when.strftime("%Y%m%dT%H%M%SZ"), when.strftime("%Y%m%d")
    scope = f"{date}/{region}/{SERVICE}/{TERMINATOR}"
    raw_path = quote(path.encode(), safe="/" + _UNRESERVED)
    params = [
        ("X-Amz-Algorithm", ALGORITHM),
        ("X-Amz-Credential", f"{user.access_key}/{scope}"),
        ("X-Amz-Date", amz_date),
        ("X-Amz-Expires", str(expires)),
        ("X-Amz-SignedHeaders", "host"),
    ]
    if version_id is not None:
        params.append(("versionId", version_id))
    query = "&".join(f"{n}={quote(v, safe=_UNRESERVED)}" for n, v in params)
    canonical = f"GET\n{canonical_uri(raw_path)}\n{_canonical_query(split_query(query), None)}"
    canonical += f"\nhost:{host}\n\nhost\n{UNSIGNED_PAYLOAD}"
    to_sign = "\n".join(
        (ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest())
    )
    key = signing_key(user.secret_key, date, region, SERVICE)
    signature = signature_of(key, to_sign)
    return f"{origin}{raw_path}?{query}&X-Amz-Signature={signature}"


@functools.lru_cache(maxsize=1024)
def signing_key(secret_key: str, date: str, region: str, service: str) -> bytes:
    """Derives the SigV4 signing key; cached because it changes once a day per user."""
    key = hmac.new(f"AWS4{secret_key}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, TERMINATOR):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def signature_of(key: bytes, string_to_sign: str) -> str:
    """HMAC-SHA256(signing key, StringToSign) in lower-case hex: a request's signature, or a
    chunk's. The HMAC keyed once per signing key is copied, not keyed again: keying hashes
    two blocks (the key's inner and outer pads) that are the same for every request of the
    day (1.0 µs against hmac.digest's 1.45: docs/performance.md, issue 45)."""
    keyed = _keyed_hmac(key).copy()
    keyed.update(string_to_sign.encode())
    return keyed.hexdigest()


@functools.lru_cache(maxsize=1024)
def _keyed_hmac(key: bytes) -> hmac.HMAC:
    # "sha256" by name: OpenSSL's HMAC, whose copy() copies its context in C.
    return hmac.new(key, digestmod="sha256")


def wire_bytes(text: str) -> bytes:
    """The bytes a string stood for on the wire.

    aiohttp decodes the request line and headers as UTF-8 with surrogateescape, so undoing that
    gives back the bytes the client signed; "surrogatepass" keeps any other lone surrogate from
    escaping as a UnicodeEncodeError instead of an S3 error.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def printable(text: str) -> str:
    """Wire text fit for an error body: bytes that were not UTF-8 become U+FFFD.

    Echoing a surrogate-escaped header into <Error> would fail to encode and turn a 403 into
    a 500.
    """
    return wire_bytes(text).decode("utf-8", "replace")


def spelled_bytes(text: str) -> str:
    """StringToSignBytes, CanonicalRequestBytes: the bytes the gateway signed, each as two
    lower-case hex digits, space-separated ("41 57 53 34 ..."), as AWS's SignatureDoesNotMatch
    spells them; they show what a printed string hides (a \r, a trailing space, an odd byte)."""
    return wire_bytes(text).hex(" ")


def header_values(headers: Mapping[str, str]) -> dict[str, list[str]]:
    """Lowercase name -> every value sent, in order.

    items() of a multidict yields each occurrence of a repeated header, which SigV4 joins
    with ","; a plain dict simply has one value per name.
    """
    values: dict[str, list[str]] = {}
    for name, value in headers.items():
        values.setdefault(name.lower(), []).append(value)
    return values


def joined(headers: Mapping[str, list[str]], name: str) -> str | None:
    values = headers.get(name)
    return None if values is None else ",".join(values)


def authorization_components(rest: str) -> dict[str, str]:
    components: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name not in ("Credential", "SignedHeaders", "Signature"):
            raise S3Error(
                "AuthorizationHeaderMalformed",
                f"{HEADER.prefix}the authorization component {part.strip()!r} is malformed.",
            )
        if name in components:
            raise S3Error(
                "AuthorizationHeaderMalformed",
                f"{HEADER.prefix}the authorization component {name} is given twice.",
            )
        components[name] = value.strip()
    if len(components) != 3:
        raise S3Error(
            "AuthorizationHeaderMalformed",
            f"{HEADER.prefix}the authorization header requires three components: "
            "Credential, SignedHeaders, and Signature.",
        )
    return components


# Parsed credentials, signed-header lists and dates are cached: a client sends the same few
# again and again (one credential per key and day, one header list per kind of request, one
# date per second). Bounded, and a malformed value raises and is never cached.
_PARSED_CACHE = 256


@functools.lru_cache(maxsize=_PARSED_CACHE)
def parse_credential(value: str, dialect: Dialect) -> Credential:
    # Access key ids never contain "/", so the scope splits unambiguously.
    parts = value.split("/")
    if len(parts) != 5:
        raise S3Error(
            dialect.code,
            f"{dialect.prefix}the Credential is mal-formed; "
            'expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".',
        )
    return Credential(*parts)


@functools.lru_cache(maxsize=_PARSED_CACHE)
def parse_signed_headers(value: str, dialect: Dialect) -> tuple[str, ...]:
    # Kept in the client's order: that is the order it built its canonical headers in.
    names = tuple(name.lower() for name in value.split(";"))
    if not value or "" in names:
        raise S3Error(dialect.code, f"{dialect.prefix}SignedHeaders {value!r} is malformed.")
    # Without host a signature could be replayed against another bucket or endpoint.
    if "host" not in names:
        raise S3Error(dialect.code, f"{dialect.prefix}SignedHeaders must include host.")
    return names


def header_date(headers: Mapping[str, list[str]]) -> tuple[str, dt.datetime]:
    """(basic ISO 8601 date for the string to sign, the same instant) from x-amz-date or Date."""
    amz_date = joined(headers, "x-amz-date")
    if amz_date is not None:
        when = parse_amz_date(amz_date)
        if when is not None:
            return amz_date, when
    else:
        date = joined(headers, "date")
        when = parse_http_date(date) if date is not None else None
        if when is not None:
            return when.strftime("%Y%m%dT%H%M%SZ"), when
    raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")


@functools.lru_cache(maxsize=_PARSED_CACHE)
def parse_amz_date(value: str) -> dt.datetime | None:
    # strptime alone would accept one-digit fields; the wire format is fixed-width.
    m = _AMZ_DATE.fullmatch(value)
    if m is None:
        return None
    try:
        return dt.datetime(*map(int, m.groups()), tzinfo=dt.UTC)
    except ValueError:
        return None


def parse_http_date(value: str) -> dt.datetime | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        # RFC 1123 dates in HTTP are GMT; "-0000" parses as naive.
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC)


def parse_expires(value: str) -> int:
    """X-Amz-Expires as AWS reads it: a negative value or one past a week is malformed (400,
    with AWS's texts as recorded in moodle-tool_objectfs#270 and bryanjos/aws_auth#31, and
    ceph/s3-tests#462 for the status); 0 is well formed, a URL that expired when it was signed
    (403 "Request has expired" from the window check, as s3-tests'
    test_object_raw_get_x_amz_expires_out_range_zero sees on AWS)."""
    if not _INTEGER.fullmatch(value):
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires should be a number")
    expires = int(value)
    if expires < 0:
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires must be non-negative")
    if expires > MAX_EXPIRES_SECONDS:
        raise S3Error(
            "AuthorizationQueryParametersError",
            "X-Amz-Expires must be less than a week (in seconds); that is, the given "
            "X-Amz-Expires must be less than 604800 seconds",
        )
    return expires


def check_payload_hash(value: str) -> None:
    if value == UNSIGNED_PAYLOAD or value in STREAMING_PAYLOADS or _SHA256_HEX.fullmatch(value):
        return
    raise S3Error(
        "InvalidArgument",
        CONTENT_SHA256_MESSAGE,
        ArgumentName="x-amz-content-sha256",
        ArgumentValue=printable(value),
    )


def result_payload_hash(value: str) -> str:
    # The caller compares against hashlib's lowercase hexdigest; modes are case-sensitive.
    return value.lower() if _SHA256_HEX.fullmatch(value) else value


def iso8601(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def uri_encode(raw: str, safe: str) -> str:
    # Decode to bytes, not text: a "%FF" that is not UTF-8 must survive re-encoding as "%FF".
    return quote(unquote_to_bytes(wire_bytes(raw)), safe=safe)


# What UriEncode leaves as it is (no "%", nothing to escape): most paths and query values are
# already canonical, and need no decoding and re-encoding.
_CANONICAL_PATH = re.compile(r"[A-Za-z0-9/_.~-]*")


_CANONICAL_QUERY_PART = re.compile(r"[A-Za-z0-9_.~-]*")


def query_part(raw: str) -> str:
    if _CANONICAL_QUERY_PART.fullmatch(raw):
        return raw
    return uri_encode(_plus_is_space(raw), _UNRESERVED)


def canonical_uri(raw_path: str) -> str:
    # S3 is the one service whose path is neither normalised nor double-encoded: "a//b" and
    # "../x" are key names, not path syntax (sig-v4-header-based-auth.html, CanonicalURI).
    if _CANONICAL_PATH.fullmatch(raw_path):
        return raw_path or "/"
    return uri_encode(raw_path, "/" + _UNRESERVED) or "/"


def split_query(query_string: str) -> list[tuple[str, str]]:
    """Raw (name, value) pairs as sent; a bare "uploads" has the value ""."""
    pairs = []
    for part in query_string.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((name, value))
    return pairs


def _canonical_query(params: list[tuple[str, str]], excluded: str | None) -> str:
    # A "+" in a query is a space (form decoding): that is how the handler reads it (aiohttp's
    # request.query), so that is what is signed. Were it kept as "+", "prefix=a%2Bb" and
    # "prefix=a+b" would share one canonical form, and a request signed for "a+b" could be
    # replayed to list "a b". SDKs send a space as %20 and a "+" as %2B, so they never notice.
    # Sorting the (name, value) pairs, not "name=value" strings, is AWS's order.
    if not params:
        return ""  # a GetObject's or PutObject's: no sort of an empty generator
    encoded = sorted(
        (query_part(name), query_part(value))
        for name, value in params
        if excluded is None or unquote(name) != excluded
    )
    return "&".join(f"{name}={value}" for name, value in encoded)


def _plus_is_space(raw: str) -> str:
    return raw.replace("+", "%20")


def _verbatim_query(params: list[tuple[str, str]], excluded: str | None) -> str:
    pairs = sorted((name, value) for name, value in params if name != excluded)
    return "&".join(f"{name}={value}" for name, value in pairs)


def forms(
    raw_path: str, params: list[tuple[str, str]], excluded: str | None
) -> Iterator[tuple[str, str]]:
    """The (canonical URI, canonical query) pairs a signature may have been made over.

    AWS's canonical form first; then the path and query exactly as sent, because some clients
    sign what they send (botocore signs its URL's path and query verbatim) and encode
    differently from UriEncode, e.g. keep "%2F" in a key or "/" in a query value. The second
    form still covers every byte the server will interpret. A generator: a request that
    verifies on the first form never builds the second.
    """
    yield canonical_uri(raw_path), _canonical_query(params, excluded)
    yield raw_path or "/", _verbatim_query(params, excluded)


def canonical_headers(
    headers: Mapping[str, list[str]], signed: tuple[str, ...]
) -> tuple[str, bool]:
    """The CanonicalHeaders block (each line ends in a newline) and whether any is missing."""
    lines = []
    missing = False
    for name in signed:
        values = headers.get(name)
        # Trimall: strip, and collapse inner whitespace runs to one space, as the SDKs do.
        # A header sent once (nearly all) is trimmed without a generator over its values.
        if values is None:
            missing = True
            lines.append(f"{name}:\n")
        elif len(values) == 1:
            lines.append(f"{name}:{' '.join(values[0].split())}\n")
        else:
            lines.append(f"{name}:{','.join(' '.join(value.split()) for value in values)}\n")
    return "".join(lines), missing
