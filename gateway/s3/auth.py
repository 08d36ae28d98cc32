"""Authentication for S3: AWS Signature Version 4 (header-signed and presigned requests) and
Version 2 (sigv2.py), one skew check and one user lookup for both.

The rules are AWS's own:
https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html and
https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html.
Every failure is an `S3Error` with the code (and, where AWS adds them, the fields) S3 answers.

The body is not read here: `AuthResult.payload_hash` tells the caller what to check it against
while streaming it, and `signing_key` lets it verify aws-chunked chunk signatures.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import itertools
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote, unquote_to_bytes

from gateway.s3 import sigv2
from gateway.s3.errors import S3Error
from gateway.users import User

# The caller of an unsigned request (no user of the users file has an empty access key).
ANONYMOUS = User(access_key="", secret_key="", display_name="anonymous", canonical_id="")

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
# AWS refuses header-signed requests whose time is more than 15 minutes off the server's.
MAX_SKEW_SECONDS = 15 * 60
# A presigned URL lives at most seven days (sigv4-query-string-auth.html, X-Amz-Expires).
MAX_EXPIRES_SECONDS = 7 * 24 * 60 * 60

# [0-9], not \d: \d also matches non-ASCII digits, which int() and strptime accept.
_AMZ_DATE = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z")
_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")
_INTEGER = re.compile(r"[+-]?[0-9]+")
# AWS UriEncode keeps only the unreserved characters; quote() keeps letters and digits itself.
_UNRESERVED = "-_.~"
_QUERY_AUTH_PARAMS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Signature",
    "X-Amz-Date",
    "X-Amz-SignedHeaders",
    "X-Amz-Expires",
)
_CONTENT_SHA256_MESSAGE = (
    "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, "
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, "
    "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER "
    "or a valid sha256 value."
)


@dataclass(frozen=True)
class SignedRequest:
    """What authentication needs of an HTTP request, free of any web framework."""

    method: str
    raw_path: str  # exactly as sent on the wire, percent-encoded, without the query
    query_string: str  # exactly as sent, without the leading "?"
    # Case-insensitive; in production a multidict.CIMultiDictProxy whose items() yields every
    # occurrence of a repeated header, so repeated headers can be joined as SigV4 requires.
    headers: Mapping[str, str]
    # The bucket named by the Host header (virtual-hosted style): Signature Version 2 signs
    # "/bucket" + path, SigV4 the path alone.
    host_bucket: str | None = None


@dataclass(frozen=True)
class AuthResult:
    user: User
    # "UNSIGNED-PAYLOAD", a lowercase hex SHA-256 or a "STREAMING-..." mode; presigned URLs are
    # "UNSIGNED-PAYLOAD" unless they signed an x-amz-content-sha256 header.
    payload_hash: str
    signature: str  # the verified signature: the seed signature of an aws-chunked body
    signing_key: bytes
    amz_date: str  # "20130524T000000Z"
    scope: str  # "20130524/us-east-1/s3/aws4_request"


# eq=False: there are two, compared by identity, and hashed cheaply as cache keys.
@dataclass(frozen=True, eq=False)
class _Dialect:
    """How malformed credentials are reported: header and query auth use different codes."""

    code: str
    prefix: str


_HEADER = _Dialect("AuthorizationHeaderMalformed", "The authorization header is malformed; ")
_QUERY = _Dialect(
    "AuthorizationQueryParametersError", "Error parsing the X-Amz-Credential parameter; "
)


@dataclass(frozen=True)
class _Credential:
    access_key: str
    date: str
    region: str
    service: str
    terminator: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/{self.terminator}"


@dataclass(frozen=True)
class _Claim:
    """A parsed signature claim, the same for header and query auth."""

    credential: _Credential
    signed_headers: tuple[str, ...]
    signature: str
    amz_date: str
    when: dt.datetime
    payload_hash: str
    # Presigned URLs sign their query without X-Amz-Signature (sigv4-query-string-auth.html).
    excluded_param: str | None


class Authenticator:
    """Verifies SigV4 requests against a fixed set of users and one region."""

    def __init__(
        self,
        users: Mapping[str, User],
        region: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._users = users
        self._region = region
        self._clock = clock

    def authenticate(self, request: SignedRequest) -> AuthResult:
        """Verifies a SigV4 header-signed or presigned (query) request; raises S3Error."""
        headers = _header_values(request.headers)
        params = _split_query(request.query_string)
        names = {unquote(name) for name, _ in params}
        authorization = _joined(headers, "authorization")
        presigned = "X-Amz-Algorithm" in names or "X-Amz-Credential" in names
        if authorization is not None and presigned:
            raise S3Error(
                "InvalidArgument",
                "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, "
                "Signature query string parameter or the Authorization header should be "
                "specified",
                ArgumentName="Authorization",
                ArgumentValue=_printable(authorization),
            )
        if authorization is not None and authorization.startswith("AWS "):
            return self._v2_header(request, headers, params, authorization)
        if authorization is not None:
            claim = self._header_claim(authorization, headers)
        elif presigned:
            claim = self._query_claim(params, headers)
        elif "AWSAccessKeyId" in names and "Signature" in names:
            return self._v2_query(request, headers, params)
        elif "AWSAccessKeyId" in names or "Signature" in names:
            # Half a signature is a mistake to report, not an anonymous request.
            raise S3Error(
                "AccessDenied",
                "Query-string authentication requires the Signature, Expires and "
                "AWSAccessKeyId parameters",
            )
        else:
            return anonymous(headers)
        return self._verify(request, headers, params, claim)

    # -- header auth ------------------------------------------------------------------------

    def _header_claim(self, authorization: str, headers: Mapping[str, list[str]]) -> _Claim:
        algorithm, _, rest = authorization.strip().partition(" ")
        if algorithm != ALGORITHM:
            # AWS's answer to an Authorization header of a kind it does not know.
            raise S3Error(
                "InvalidArgument",
                "Unsupported Authorization Type",
                ArgumentName="Authorization",
                ArgumentValue=_printable(authorization),
            )
        components = _authorization_components(rest)
        credential = _parse_credential(components["Credential"], _HEADER)
        signed_headers = _parse_signed_headers(components["SignedHeaders"], _HEADER)
        amz_date, when = _header_date(headers)
        self._check_scope(credential, amz_date, _HEADER)

        payload_hash = _joined(headers, "x-amz-content-sha256")
        if payload_hash is None:
            raise S3Error(
                "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"
            )
        _check_payload_hash(payload_hash)
        return _Claim(
            credential=credential,
            signed_headers=signed_headers,
            signature=components["Signature"],
            amz_date=amz_date,
            when=when,
            payload_hash=payload_hash,
            excluded_param=None,
        )

    # -- query auth (presigned URLs) --------------------------------------------------------

    def _query_claim(
        self, params: list[tuple[str, str]], headers: Mapping[str, list[str]]
    ) -> _Claim:
        auth: dict[str, str] = {}
        for raw_name, raw_value in params:
            name = unquote(raw_name)
            if name in _QUERY_AUTH_PARAMS:
                if name in auth:
                    # Two values for one auth parameter make the signed request ambiguous.
                    raise S3Error(
                        "AuthorizationQueryParametersError",
                        f"Query-string authentication parameter {name} must be given once.",
                    )
                auth[name] = unquote(raw_value)
        if any(name not in auth for name in _QUERY_AUTH_PARAMS):
            raise S3Error(
                "AuthorizationQueryParametersError",
                "Query-string authentication version 4 requires the X-Amz-Algorithm, "
                "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and "
                "X-Amz-Expires parameters.",
            )
        if auth["X-Amz-Algorithm"] != ALGORITHM:
            raise S3Error(
                "AuthorizationQueryParametersError",
                f'X-Amz-Algorithm only supports "{ALGORITHM}"',
            )
        credential = _parse_credential(auth["X-Amz-Credential"], _QUERY)
        signed_headers = _parse_signed_headers(auth["X-Amz-SignedHeaders"], _QUERY)
        amz_date = auth["X-Amz-Date"]
        when = _parse_amz_date(amz_date)
        if when is None:
            raise S3Error(
                "AuthorizationQueryParametersError",
                "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"",
            )
        expires = _parse_expires(auth["X-Amz-Expires"])
        self._check_scope(credential, amz_date, _QUERY)
        self._check_presigned_window(when, expires, auth["X-Amz-Expires"])

        # A presigned URL cannot know its body; it is unsigned unless the client chose to sign
        # an x-amz-content-sha256 header, in which case that value is the one it hashed.
        payload_hash = UNSIGNED_PAYLOAD
        if "x-amz-content-sha256" in signed_headers:
            sent = _joined(headers, "x-amz-content-sha256")
            if sent is not None:
                _check_payload_hash(sent)
                payload_hash = sent
        return _Claim(
            credential=credential,
            signed_headers=signed_headers,
            signature=auth["X-Amz-Signature"],
            amz_date=amz_date,
            when=when,
            payload_hash=payload_hash,
            excluded_param="X-Amz-Signature",
        )

    def _check_presigned_window(self, when: dt.datetime, expires: int, sent: str) -> None:
        now = self._clock()
        start = when.timestamp()
        if now > start + expires:
            raise S3Error(
                "AccessDenied",
                "Request has expired",
                **{
                    "X-Amz-Expires": sent,
                    "Expires": _iso8601(start + expires),
                    "ServerTime": _iso8601(now),
                },
            )
        if start - now > MAX_SKEW_SECONDS:
            raise S3Error("AccessDenied", "Request is not valid yet")

    # -- Signature Version 2 ----------------------------------------------------------------

    def _v2_header(
        self,
        request: SignedRequest,
        headers: Mapping[str, list[str]],
        params: list[tuple[str, str]],
        authorization: str,
    ) -> AuthResult:
        access_key, sep, provided = authorization[4:].strip().rpartition(":")
        if not sep or not access_key:
            raise S3Error(
                "InvalidArgument",
                "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature",
                ArgumentName="Authorization",
                ArgumentValue=_printable(authorization),
            )
        user = self._user(access_key)
        amz_date = _joined(headers, "x-amz-date")
        date = amz_date if amz_date is not None else _joined(headers, "date")
        when = _parse_http_date(date) if date else None
        if when is None or when.timestamp() < 0:
            raise S3Error(
                "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
            )
        self._check_skew(when, date)
        # With x-amz-date the Date line is empty (it is signed among the x-amz-* headers);
        # some clients sign the Date header anyway, so that form is tried second.
        date_lines = [""] if amz_date is not None else []
        date_lines.append(_joined(headers, "date") or "")
        return self._v2_verify(request, headers, params, user, provided, date_lines)

    def _v2_query(
        self,
        request: SignedRequest,
        headers: Mapping[str, list[str]],
        params: list[tuple[str, str]],
    ) -> AuthResult:
        auth = {unquote(n): unquote(v) for n, v in params}
        expires = auth.get("Expires", "")
        if not expires.isdigit():
            raise S3Error(
                "AccessDenied", "Query-string authentication requires the Expires parameter"
            )
        now = self._clock()
        if now > int(expires):
            raise S3Error(
                "AccessDenied",
                "Request has expired",
                Expires=_iso8601(int(expires)),
                ServerTime=_iso8601(now),
            )
        user = self._user(auth["AWSAccessKeyId"])
        signed_params = [(n, v) for n, v in params if unquote(n) not in ("Signature",)]
        return self._v2_verify(request, headers, signed_params, user, auth["Signature"], [expires])

    def _v2_verify(
        self,
        request: SignedRequest,
        headers: Mapping[str, list[str]],
        params: list[tuple[str, str]],
        user: User,
        provided: str,
        date_lines: list[str],
    ) -> AuthResult:
        first = ""
        resource = request.raw_path
        if request.host_bucket is not None:
            resource = f"/{request.host_bucket}{request.raw_path}"
        resources = [resource]
        if resource.count("/") == 1 and resource != "/":
            # A bucket's resource is "/bucket/" (botocore signs it so) though the path may
            # be "/bucket".
            resources.append(resource + "/")
        for date_line, resource in itertools.product(date_lines, resources):
            text = sigv2.string_to_sign(request.method, resource, params, headers, date_line)
            first = first or text
            if hmac.compare_digest(
                sigv2.signature(user.secret_key, text).encode(), _wire_bytes(provided)
            ):
                return AuthResult(
                    user=user,
                    payload_hash=UNSIGNED_PAYLOAD,
                    signature=provided,
                    signing_key=b"",
                    amz_date="",
                    scope="",
                )
        raise S3Error(
            "SignatureDoesNotMatch",
            AWSAccessKeyId=user.access_key,
            StringToSign=_printable(first),
            SignatureProvided=_printable(provided),
        )

    # -- shared -----------------------------------------------------------------------------

    def _check_skew(self, when: dt.datetime, sent: str) -> None:
        """Header-signed requests must be within 15 minutes of the server's clock."""
        now = self._clock()
        if abs(now - when.timestamp()) > MAX_SKEW_SECONDS:
            raise S3Error(
                "RequestTimeTooSkewed",
                RequestTime=sent,
                ServerTime=_iso8601(now),
                MaxAllowedSkewMilliseconds=MAX_SKEW_SECONDS * 1000,
            )

    def _user(self, access_key: str) -> User:
        user = self._users.get(access_key)
        if user is None:
            raise S3Error("InvalidAccessKeyId", AWSAccessKeyId=_printable(access_key))
        return user

    def _check_scope(self, credential: _Credential, amz_date: str, dialect: _Dialect) -> None:
        if credential.terminator != TERMINATOR:
            raise S3Error(
                dialect.code,
                f'{dialect.prefix}incorrect terminal "{_printable(credential.terminator)}". '
                f'This endpoint uses "{TERMINATOR}".',
            )
        if credential.service != SERVICE:
            raise S3Error(
                dialect.code,
                f'{dialect.prefix}incorrect service "{_printable(credential.service)}". '
                f'This endpoint belongs to "{SERVICE}".',
            )
        if credential.region != self._region:
            raise S3Error(
                dialect.code,
                f"{dialect.prefix}the region '{_printable(credential.region)}' is wrong; "
                f"expecting '{self._region}'",
                Region=self._region,
            )
        if credential.date != amz_date[:8]:
            raise S3Error(
                dialect.code, "Invalid credential date. Date is not the same as X-Amz-Date."
            )

    def _verify(
        self,
        request: SignedRequest,
        headers: Mapping[str, list[str]],
        params: list[tuple[str, str]],
        claim: _Claim,
    ) -> AuthResult:
        credential = claim.credential
        user = self._user(credential.access_key)
        if claim.excluded_param is None:
            # Presigned URLs have their own window (X-Amz-Expires), checked while parsing.
            self._check_skew(claim.when, claim.amz_date)

        signing_key = _signing_key(
            user.secret_key, credential.date, credential.region, credential.service
        )
        canonical_headers, missing = _canonical_headers(headers, claim.signed_headers)
        tail = f"{canonical_headers}\n{';'.join(claim.signed_headers)}\n{claim.payload_hash}"
        provided = _wire_bytes(claim.signature)
        # Both lines of the string to sign before the hash are the same for every form.
        head = f"{ALGORITHM}\n{claim.amz_date}\n{credential.scope}\n"

        attempts: list[tuple[str, str]] = []
        for uri, query in _forms(request.raw_path, params, claim.excluded_param):
            canonical_request = f"{request.method}\n{uri}\n{query}\n{tail}"
            if attempts and attempts[0][0] == canonical_request:
                continue
            string_to_sign = head + hashlib.sha256(_wire_bytes(canonical_request)).hexdigest()
            attempts.append((canonical_request, string_to_sign))
            if missing:
                # A signed header the request lacks can never verify; report AWS's form only.
                break
            # hmac.digest: one call into OpenSSL, without an HMAC object per request.
            expected = hmac.digest(signing_key, string_to_sign.encode(), "sha256").hex()
            if hmac.compare_digest(expected.encode(), provided):
                _refuse_unsigned_amz_headers(headers, claim.signed_headers)
                return AuthResult(
                    user=user,
                    payload_hash=_result_payload_hash(claim.payload_hash),
                    signature=claim.signature,
                    signing_key=signing_key,
                    amz_date=claim.amz_date,
                    scope=credential.scope,
                )

        canonical_request, string_to_sign = attempts[0]
        raise S3Error(
            "SignatureDoesNotMatch",
            AWSAccessKeyId=credential.access_key,
            StringToSign=string_to_sign,
            SignatureProvided=_printable(claim.signature),
            CanonicalRequest=_printable(canonical_request),
        )


# Sent unsigned by SDKs and harmless: the body's hash is checked against the body anyway.
_UNSIGNED_ALLOWED = frozenset({"x-amz-content-sha256"})


def anonymous(headers: Mapping[str, list[str]]) -> AuthResult:
    """An unsigned request: it goes on to authorisation as the anonymous caller, which
    allows it only where an ACL or a bucket policy lets everyone in. Its body is unsigned
    (an aws-chunked one without chunk signatures: the only kind it can send)."""
    mode = _joined(headers, "x-amz-content-sha256")
    unsigned_chunks = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    return AuthResult(
        user=ANONYMOUS,
        payload_hash=unsigned_chunks if mode == unsigned_chunks else UNSIGNED_PAYLOAD,
        signature="",
        signing_key=b"",
        amz_date="",
        scope="",
    )


def _refuse_unsigned_amz_headers(headers: Mapping[str, list[str]], signed: tuple[str, ...]) -> None:
    """Every x-amz-* header that changes what a request does must be signed: otherwise anyone
    holding a presigned URL (or replaying a request) could add x-amz-copy-source,
    x-amz-meta-*... AWS answers 403 AccessDenied naming them."""
    unsigned = sorted(
        name
        for name in headers
        if name.startswith("x-amz-") and name not in signed and name not in _UNSIGNED_ALLOWED
    )
    if unsigned:
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
    canonical = f"GET\n{_canonical_uri(raw_path)}\n{_canonical_query(_split_query(query), None)}"
    canonical += f"\nhost:{host}\n\nhost\n{UNSIGNED_PAYLOAD}"
    to_sign = "\n".join(
        (ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest())
    )
    key = _signing_key(user.secret_key, date, region, SERVICE)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"{origin}{raw_path}?{query}&X-Amz-Signature={signature}"


@functools.lru_cache(maxsize=1024)
def _signing_key(secret_key: str, date: str, region: str, service: str) -> bytes:
    """Derives the SigV4 signing key; cached because it changes once a day per user."""
    key = hmac.new(f"AWS4{secret_key}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, TERMINATOR):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _wire_bytes(text: str) -> bytes:
    """The bytes a string stood for on the wire.

    aiohttp decodes the request line and headers as UTF-8 with surrogateescape, so undoing that
    gives back the bytes the client signed; "surrogatepass" keeps any other lone surrogate from
    escaping as a UnicodeEncodeError instead of an S3 error.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _printable(text: str) -> str:
    """Wire text fit for an error body: bytes that were not UTF-8 become U+FFFD.

    Echoing a surrogate-escaped header into <Error> would fail to encode and turn a 403 into
    a 500.
    """
    return _wire_bytes(text).decode("utf-8", "replace")


def _header_values(headers: Mapping[str, str]) -> dict[str, list[str]]:
    """Lowercase name -> every value sent, in order.

    items() of a multidict yields each occurrence of a repeated header, which SigV4 joins
    with ","; a plain dict simply has one value per name.
    """
    values: dict[str, list[str]] = {}
    for name, value in headers.items():
        values.setdefault(name.lower(), []).append(value)
    return values


def _joined(headers: Mapping[str, list[str]], name: str) -> str | None:
    values = headers.get(name)
    return None if values is None else ",".join(values)


def _authorization_components(rest: str) -> dict[str, str]:
    components: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name not in ("Credential", "SignedHeaders", "Signature"):
            raise S3Error(
                "AuthorizationHeaderMalformed",
                f"{_HEADER.prefix}the authorization component {part.strip()!r} is malformed.",
            )
        if name in components:
            raise S3Error(
                "AuthorizationHeaderMalformed",
                f"{_HEADER.prefix}the authorization component {name} is given twice.",
            )
        components[name] = value.strip()
    if len(components) != 3:
        raise S3Error(
            "AuthorizationHeaderMalformed",
            f"{_HEADER.prefix}the authorization header requires three components: "
            "Credential, SignedHeaders, and Signature.",
        )
    return components


# Parsed credentials, signed-header lists and dates are cached: a client sends the same few
# again and again (one credential per key and day, one header list per kind of request, one
# date per second). Bounded, and a malformed value raises and is never cached.
_PARSED_CACHE = 256


@functools.lru_cache(maxsize=_PARSED_CACHE)
def _parse_credential(value: str, dialect: _Dialect) -> _Credential:
    # Access key ids never contain "/", so the scope splits unambiguously.
    parts = value.split("/")
    if len(parts) != 5:
        raise S3Error(
            dialect.code,
            f"{dialect.prefix}the Credential is mal-formed; "
            'expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".',
        )
    return _Credential(*parts)


@functools.lru_cache(maxsize=_PARSED_CACHE)
def _parse_signed_headers(value: str, dialect: _Dialect) -> tuple[str, ...]:
    # Kept in the client's order: that is the order it built its canonical headers in.
    names = tuple(name.lower() for name in value.split(";"))
    if not value or "" in names:
        raise S3Error(dialect.code, f"{dialect.prefix}SignedHeaders {value!r} is malformed.")
    # Without host a signature could be replayed against another bucket or endpoint.
    if "host" not in names:
        raise S3Error(dialect.code, f"{dialect.prefix}SignedHeaders must include host.")
    return names


def _header_date(headers: Mapping[str, list[str]]) -> tuple[str, dt.datetime]:
    """(basic ISO 8601 date for the string to sign, the same instant) from x-amz-date or Date."""
    amz_date = _joined(headers, "x-amz-date")
    if amz_date is not None:
        when = _parse_amz_date(amz_date)
        if when is not None:
            return amz_date, when
    else:
        date = _joined(headers, "date")
        when = _parse_http_date(date) if date is not None else None
        if when is not None:
            return when.strftime("%Y%m%dT%H%M%SZ"), when
    raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")


@functools.lru_cache(maxsize=_PARSED_CACHE)
def _parse_amz_date(value: str) -> dt.datetime | None:
    # strptime alone would accept one-digit fields; the wire format is fixed-width.
    m = _AMZ_DATE.fullmatch(value)
    if m is None:
        return None
    try:
        return dt.datetime(*map(int, m.groups()), tzinfo=dt.UTC)
    except ValueError:
        return None


def _parse_http_date(value: str) -> dt.datetime | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        # RFC 1123 dates in HTTP are GMT; "-0000" parses as naive.
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC)


def _parse_expires(value: str) -> int:
    if not _INTEGER.fullmatch(value):
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires should be a number")
    expires = int(value)
    if expires < 0:
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires must be non-negative")
    if expires == 0:
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires must be at least 1")
    if expires > MAX_EXPIRES_SECONDS:
        raise S3Error(
            "AuthorizationQueryParametersError",
            "X-Amz-Expires must be less than a week (in seconds) that is; 604800",
        )
    return expires


def _check_payload_hash(value: str) -> None:
    if value == UNSIGNED_PAYLOAD or value in STREAMING_PAYLOADS or _SHA256_HEX.fullmatch(value):
        return
    raise S3Error(
        "InvalidArgument",
        _CONTENT_SHA256_MESSAGE,
        ArgumentName="x-amz-content-sha256",
        ArgumentValue=_printable(value),
    )


def _result_payload_hash(value: str) -> str:
    # The caller compares against hashlib's lowercase hexdigest; modes are case-sensitive.
    return value.lower() if _SHA256_HEX.fullmatch(value) else value


def _iso8601(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _uri_encode(raw: str, safe: str) -> str:
    # Decode to bytes, not text: a "%FF" that is not UTF-8 must survive re-encoding as "%FF".
    return quote(unquote_to_bytes(_wire_bytes(raw)), safe=safe)


# What UriEncode leaves as it is (no "%", nothing to escape): most paths and query values are
# already canonical, and need no decoding and re-encoding.
_CANONICAL_PATH = re.compile(r"[A-Za-z0-9/_.~-]*")
_CANONICAL_QUERY_PART = re.compile(r"[A-Za-z0-9_.~-]*")


def _query_part(raw: str) -> str:
    if _CANONICAL_QUERY_PART.fullmatch(raw):
        return raw
    return _uri_encode(_plus_is_space(raw), _UNRESERVED)


def _canonical_uri(raw_path: str) -> str:
    # S3 is the one service whose path is neither normalised nor double-encoded: "a//b" and
    # "../x" are key names, not path syntax (sig-v4-header-based-auth.html, CanonicalURI).
    if _CANONICAL_PATH.fullmatch(raw_path):
        return raw_path or "/"
    return _uri_encode(raw_path, "/" + _UNRESERVED) or "/"


def _split_query(query_string: str) -> list[tuple[str, str]]:
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
    encoded = sorted(
        (_query_part(name), _query_part(value))
        for name, value in params
        if excluded is None or unquote(name) != excluded
    )
    return "&".join(f"{name}={value}" for name, value in encoded)


def _plus_is_space(raw: str) -> str:
    return raw.replace("+", "%20")


def _verbatim_query(params: list[tuple[str, str]], excluded: str | None) -> str:
    pairs = sorted((name, value) for name, value in params if name != excluded)
    return "&".join(f"{name}={value}" for name, value in pairs)


def _forms(
    raw_path: str, params: list[tuple[str, str]], excluded: str | None
) -> Iterator[tuple[str, str]]:
    """The (canonical URI, canonical query) pairs a signature may have been made over.

    AWS's canonical form first; then the path and query exactly as sent, because some clients
    sign what they send (botocore signs its URL's path and query verbatim) and encode
    differently from UriEncode, e.g. keep "%2F" in a key or "/" in a query value. The second
    form still covers every byte the server will interpret. A generator: a request that
    verifies on the first form never builds the second.
    """
    yield _canonical_uri(raw_path), _canonical_query(params, excluded)
    yield raw_path or "/", _verbatim_query(params, excluded)


def _canonical_headers(
    headers: Mapping[str, list[str]], signed: tuple[str, ...]
) -> tuple[str, bool]:
    """The CanonicalHeaders block (each line ends in a newline) and whether any is missing."""
    lines = []
    missing = False
    for name in signed:
        values = headers.get(name)
        if values is None:
            missing = True
            values = []
        # Trimall: strip, and collapse inner whitespace runs to one space, as the SDKs do.
        lines.append(f"{name}:{','.join(' '.join(value.split()) for value in values)}\n")
    return "".join(lines), missing
