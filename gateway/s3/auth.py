"""Authentication for S3: who sent a request. One way per kind of proof (SigV4 header,
presigned SigV4, SigV2 header, presigned SigV2, a POST form's signed policy, none at all),
each returning the same identity value (AuthResult); one skew check and one user lookup for
all. SigV4's text is sigv4.py, SigV2's sigv2.py.

The rules are AWS's own:
https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html and
https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html.
Every failure is an `S3Error` with the code (and, where AWS adds them, the fields) S3 answers.

The body is not read here: `AuthResult.payload_hash` tells the caller what to check it against
while streaming it, and `signing_key` lets it verify aws-chunked chunk signatures.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol
from urllib.parse import unquote

from gateway.s3 import postform, sigv2, sigv4
from gateway.s3.errors import S3Error
from gateway.users import User

_SIGV4_FIELDS = ("x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature")
_SIGV2_FIELDS = ("awsaccesskeyid", "signature")

# The caller of an unsigned request (no user of the users file has an empty access key).
ANONYMOUS = User(access_key="", secret_key="", display_name="anonymous", canonical_id="")

# AWS refuses header-signed requests whose time is more than 15 minutes off the server's.
MAX_SKEW_SECONDS = 15 * 60

_QUERY_AUTH_PARAMS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Signature",
    "X-Amz-Date",
    "X-Amz-SignedHeaders",
    "X-Amz-Expires",
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


# A NamedTuple, not a frozen dataclass: as immutable, and made in half the time (a frozen
# dataclass's __init__ sets each of its seven fields through object.__setattr__), once per
# signed request.
class _Claim(NamedTuple):
    """A parsed signature claim, the same for header and query auth."""

    credential: sigv4.Credential
    signed_headers: tuple[str, ...]
    signature: str
    amz_date: str
    when: dt.datetime
    payload_hash: str
    # Presigned URLs sign their query without X-Amz-Signature (sigv4-query-string-auth.html).
    excluded_param: str | None


class KeySource(Protocol):
    """Where the users beyond the users file come from (IAM's keys, temporary credentials:
    gateway/iam/principals.py): `prepare` makes a key the request names known to the
    mapping, so that the signature checks stay synchronous; `check_token` refuses temporary
    credentials without their session token, and a token without them."""

    async def prepare(self, access_key: str, token: str | None) -> None: ...

    def check_token(self, user: User, token: str | None) -> None: ...


class Authenticator:
    """Verifies SigV4 requests against a fixed set of users and one region."""

    def __init__(
        self,
        users: Mapping[str, User],
        region: str,
        clock: Callable[[], float] = time.time,
        keys: KeySource | None = None,
    ) -> None:
        self._users = users
        self._region = region
        self._clock = clock
        self._keys = keys

    async def identify(
        self, request: SignedRequest, service: str = sigv4.SERVICE, body_hash: str | None = None
    ) -> AuthResult:
        """`authenticate`, for any key: IAM's and temporary credentials are looked up first
        (KeySource.prepare), and a session token checked against the credentials it goes
        with."""
        if self._keys is None:
            return self.authenticate(request, service, body_hash)
        access_key = claimed_key(request.headers, request.query_string)
        query = request.query_string
        token = request.headers.get("x-amz-security-token")
        if token is None and "ecurity-" in query:  # the query is split only for a token
            token = _query_value(query, "X-Amz-Security-Token") or _query_value(
                query,
                "x-amz-security-token",  # SigV2's presigned URLs name it in lower case
            )
        if access_key:
            await self._keys.prepare(access_key, token)
        result = self.authenticate(request, service, body_hash)
        if not is_nobody(result.user):
            self._keys.check_token(result.user, token)
        return result

    def authenticate(
        self, request: SignedRequest, service: str = sigv4.SERVICE, body_hash: str | None = None
    ) -> AuthResult:
        """Verifies a SigV4 header-signed or presigned (query) request; raises S3Error.
        `service`: the one its credential's scope must name; a service other than S3 signs
        the hash of its body (`body_hash`), not an x-amz-content-sha256 header."""
        headers = sigv4.header_values(request.headers)
        params = sigv4.split_query(request.query_string)
        names = {unquote(name) for name, _ in params}
        authorization = sigv4.joined(headers, "authorization")
        presigned = "X-Amz-Algorithm" in names or "X-Amz-Credential" in names
        if authorization is not None and presigned:
            raise S3Error(
                "InvalidArgument",
                "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, "
                "Signature query string parameter or the Authorization header should be "
                "specified",
                ArgumentName="Authorization",
                ArgumentValue=sigv4.printable(authorization),
            )
        if authorization is not None and authorization.startswith("AWS "):
            return self._v2_header(request, headers, params, authorization)
        if authorization is not None:
            claim = self._header_claim(authorization, headers, service, body_hash)
        elif presigned:
            claim = self._query_claim(params, headers, service)
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

    def _header_claim(
        self,
        authorization: str,
        headers: Mapping[str, list[str]],
        service: str = sigv4.SERVICE,
        body_hash: str | None = None,
    ) -> _Claim:
        algorithm, _, rest = authorization.strip().partition(" ")
        if algorithm != sigv4.ALGORITHM:
            # AWS's answer to an Authorization header of a kind it does not know.
            raise S3Error(
                "InvalidArgument",
                "Unsupported Authorization Type",
                ArgumentName="Authorization",
                ArgumentValue=sigv4.printable(authorization),
            )
        components = sigv4.authorization_components(rest)
        credential = sigv4.parse_credential(components["Credential"], sigv4.HEADER)
        signed_headers = sigv4.parse_signed_headers(components["SignedHeaders"], sigv4.HEADER)
        amz_date, when = sigv4.header_date(headers)
        self._check_scope(credential, amz_date, sigv4.HEADER, service)

        payload_hash = sigv4.joined(headers, "x-amz-content-sha256")
        if service != sigv4.SERVICE and body_hash is not None:
            payload_hash = body_hash
        if payload_hash is None:
            raise S3Error(
                "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"
            )
        sigv4.check_payload_hash(payload_hash)
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
        self,
        params: list[tuple[str, str]],
        headers: Mapping[str, list[str]],
        service: str = sigv4.SERVICE,
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
        if auth["X-Amz-Algorithm"] != sigv4.ALGORITHM:
            raise S3Error(
                "AuthorizationQueryParametersError",
                f'X-Amz-Algorithm only supports "{sigv4.ALGORITHM}"',
            )
        credential = sigv4.parse_credential(auth["X-Amz-Credential"], sigv4.QUERY)
        signed_headers = sigv4.parse_signed_headers(auth["X-Amz-SignedHeaders"], sigv4.QUERY)
        amz_date = auth["X-Amz-Date"]
        when = sigv4.parse_amz_date(amz_date)
        if when is None:
            raise S3Error(
                "AuthorizationQueryParametersError",
                "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"",
            )
        expires = sigv4.parse_expires(auth["X-Amz-Expires"])
        self._check_scope(credential, amz_date, sigv4.QUERY, service)
        self._check_presigned_window(when, expires, auth["X-Amz-Expires"])

        # A presigned URL cannot know its body; it is unsigned unless the client chose to sign
        # an x-amz-content-sha256 header, in which case that value is the one it hashed.
        payload_hash = sigv4.UNSIGNED_PAYLOAD
        if "x-amz-content-sha256" in signed_headers:
            sent = sigv4.joined(headers, "x-amz-content-sha256")
            if sent is not None:
                sigv4.check_payload_hash(sent)
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
                    "Expires": sigv4.iso8601(start + expires),
                    "ServerTime": sigv4.iso8601(now),
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
                ArgumentValue=sigv4.printable(authorization),
            )
        user = self._user(access_key)
        amz_date = sigv4.joined(headers, "x-amz-date")
        date = amz_date if amz_date is not None else sigv4.joined(headers, "date")
        when = sigv4.parse_http_date(date) if date else None
        if when is None or when.timestamp() < 0:
            raise S3Error(
                "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
            )
        self._check_skew(when, date)
        # With x-amz-date the Date line is empty (it is signed among the x-amz-* headers);
        # some clients sign the Date header anyway, so that form is tried second.
        date_lines = [""] if amz_date is not None else []
        date_lines.append(sigv4.joined(headers, "date") or "")
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
                Expires=sigv4.iso8601(int(expires)),
                ServerTime=sigv4.iso8601(now),
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
                sigv2.signature(user.secret_key, text).encode(), sigv4.wire_bytes(provided)
            ):
                return AuthResult(
                    user=user,
                    payload_hash=sigv4.UNSIGNED_PAYLOAD,
                    signature=provided,
                    signing_key=b"",
                    amz_date="",
                    scope="",
                )
        raise S3Error(
            "SignatureDoesNotMatch",
            AWSAccessKeyId=user.access_key,
            StringToSign=sigv4.printable(first),
            SignatureProvided=sigv4.printable(provided),
            StringToSignBytes=sigv4.spelled_bytes(first),
        )

    # -- a POST form's signed policy --------------------------------------------------------

    async def identify_form(self, fields: Mapping[str, str]) -> AuthResult:
        """`post_form`, for any key (as `identify`): the form's x-amz-security-token field
        goes with temporary credentials."""
        token = fields.get("x-amz-security-token")
        if self._keys is not None:
            access_key = fields.get("x-amz-credential", "").partition("/")[0] or fields.get(
                "awsaccesskeyid"
            )
            if access_key:
                await self._keys.prepare(access_key, token)
        result = self.post_form(fields)
        if self._keys is not None and not is_nobody(result.user):
            self._keys.check_token(result.user, token)
        return result

    def post_form(self, fields: Mapping[str, str]) -> AuthResult:
        """Who signed a browser's upload form (field names lower-case): SigV4 (`x-amz-
        algorithm`, `x-amz-credential`, `x-amz-date`, `x-amz-signature`: the hex HMAC-SHA256
        of the base64 policy under the day's signing key), SigV2 (`AWSAccessKeyId`,
        `signature`: the base64 HMAC-SHA1 of the policy), or nobody: an anonymous form. The
        body is never signed (the policy bounds it)."""
        v4 = [name for name in _SIGV4_FIELDS if name in fields]
        v2 = [name for name in _SIGV2_FIELDS if name in fields]
        if not v4 and not v2:
            if "policy" in fields:
                raise S3Error("AccessDenied")  # a policy nobody signed
            return anonymous({})
        for name in (*(_SIGV4_FIELDS if v4 else _SIGV2_FIELDS), "policy"):
            if name not in fields:
                raise postform.missing(name)
        policy = fields["policy"]
        scope = ""
        if not v4:
            user = self._user(fields["awsaccesskeyid"])
            expected = sigv2.signature(user.secret_key, policy)
            provided = fields["signature"]
        else:
            if fields["x-amz-algorithm"] != sigv4.ALGORITHM:
                raise S3Error(
                    "InvalidArgument",
                    f"Only {sigv4.ALGORITHM} is supported",
                    ArgumentName="X-Amz-Algorithm",
                    ArgumentValue=fields["x-amz-algorithm"],
                )
            credential = fields["x-amz-credential"]
            parts = credential.split("/")
            if len(parts) != 5 or parts[3] != sigv4.SERVICE or parts[4] != sigv4.TERMINATOR:
                raise S3Error(
                    "InvalidArgument",
                    "The credential is malformed: AKID/yyyymmdd/region/s3/aws4_request",
                    ArgumentName="X-Amz-Credential",
                    ArgumentValue=credential,
                )
            access_key, date, region = parts[:3]
            user = self._user(access_key)
            if region != self._region:
                raise S3Error(
                    "InvalidArgument",
                    f"the region '{region}' is wrong; expecting '{self._region}'",
                    ArgumentName="X-Amz-Credential",
                    ArgumentValue=credential,
                )
            if fields["x-amz-date"][:8] != date:
                raise S3Error(
                    "InvalidArgument",
                    "Invalid credential date. Date is not the same as X-Amz-Date.",
                    ArgumentName="X-Amz-Date",
                    ArgumentValue=fields["x-amz-date"],
                )
            key = sigv4.signing_key(user.secret_key, date, region, sigv4.SERVICE)
            expected = hmac.new(key, policy.encode(), hashlib.sha256).hexdigest()
            provided = fields["x-amz-signature"]
            scope = "/".join(parts[1:])
        if not hmac.compare_digest(expected.encode(), provided.encode("utf-8", "replace")):
            raise S3Error("SignatureDoesNotMatch", AWSAccessKeyId=user.access_key)
        return AuthResult(
            user=user,
            payload_hash=sigv4.UNSIGNED_PAYLOAD,
            signature=provided,
            signing_key=b"",
            amz_date=fields.get("x-amz-date", ""),
            scope=scope,
        )

    # -- shared -----------------------------------------------------------------------------

    def _check_skew(self, when: dt.datetime, sent: str) -> None:
        """Header-signed requests must be within 15 minutes of the server's clock."""
        now = self._clock()
        if abs(now - when.timestamp()) > MAX_SKEW_SECONDS:
            raise S3Error(
                "RequestTimeTooSkewed",
                RequestTime=sent,
                ServerTime=sigv4.iso8601(now),
                MaxAllowedSkewMilliseconds=MAX_SKEW_SECONDS * 1000,
            )

    def _user(self, access_key: str) -> User:
        user = self._users.get(access_key)
        if user is None:
            raise S3Error("InvalidAccessKeyId", AWSAccessKeyId=sigv4.printable(access_key))
        return user

    def _check_scope(
        self,
        credential: sigv4.Credential,
        amz_date: str,
        dialect: sigv4.Dialect,
        service: str = sigv4.SERVICE,
    ) -> None:
        if credential.terminator != sigv4.TERMINATOR:
            raise S3Error(
                dialect.code,
                f'{dialect.prefix}incorrect terminal "{sigv4.printable(credential.terminator)}". '
                f'This endpoint uses "{sigv4.TERMINATOR}".',
            )
        if credential.service != service:
            raise S3Error(
                dialect.code,
                f'{dialect.prefix}incorrect service "{sigv4.printable(credential.service)}". '
                f'This endpoint belongs to "{service}".',
            )
        # IAM and STS are global: SDKs sign them for us-east-1 whatever the Region (and with
        # region_name="" for an empty one; the signature covers the scope it names).
        if credential.region != self._region and service == sigv4.SERVICE:
            raise S3Error(
                dialect.code,
                f"{dialect.prefix}the region '{sigv4.printable(credential.region)}' is wrong; "
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

        signing_key = sigv4.signing_key(
            user.secret_key, credential.date, credential.region, credential.service
        )
        canonical_headers, missing = sigv4.canonical_headers(headers, claim.signed_headers)
        tail = f"{canonical_headers}\n{';'.join(claim.signed_headers)}\n{claim.payload_hash}"
        provided = sigv4.wire_bytes(claim.signature)
        # Both lines of the string to sign before the hash are the same for every form.
        head = f"{sigv4.ALGORITHM}\n{claim.amz_date}\n{credential.scope}\n"

        attempts: list[tuple[str, str]] = []
        for uri, query in sigv4.forms(request.raw_path, params, claim.excluded_param):
            canonical_request = f"{request.method}\n{uri}\n{query}\n{tail}"
            if attempts and attempts[0][0] == canonical_request:
                continue
            string_to_sign = head + hashlib.sha256(sigv4.wire_bytes(canonical_request)).hexdigest()
            attempts.append((canonical_request, string_to_sign))
            if missing:
                # A signed header the request lacks can never verify; report AWS's form only.
                break
            expected = sigv4.signature_of(signing_key, string_to_sign)
            if hmac.compare_digest(expected.encode(), provided):
                sigv4.refuse_unsigned_amz_headers(headers, claim.signed_headers)
                return AuthResult(
                    user=user,
                    payload_hash=sigv4.result_payload_hash(claim.payload_hash),
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
            SignatureProvided=sigv4.printable(claim.signature),
            StringToSignBytes=sigv4.spelled_bytes(string_to_sign),
            CanonicalRequest=sigv4.printable(canonical_request),
            CanonicalRequestBytes=sigv4.spelled_bytes(canonical_request),
        )


def is_nobody(user: User) -> bool:
    return user is ANONYMOUS or user.access_key == ""


def _query_value(query_string: str, name: str) -> str | None:
    for raw_name, raw_value in sigv4.split_query(query_string):
        if unquote(raw_name) == name:
            return unquote(raw_value)
    return None


def claimed_key(headers: Mapping[str, str], query_string: str) -> str | None:
    """The access key a request says it is signed with (before anything is verified)."""
    authorization = headers.get("authorization")
    if authorization is not None:
        if authorization.startswith("AWS "):
            return authorization[4:].rpartition(":")[0].strip() or None
        _, found, rest = authorization.partition("Credential=")
        return rest.partition("/")[0].strip() if found else None
    if "X-Amz-Credential" in query_string:
        credential = _query_value(query_string, "X-Amz-Credential")
        return credential.partition("/")[0] if credential else None
    if "AWSAccessKeyId" in query_string:
        return _query_value(query_string, "AWSAccessKeyId")
    return None


def anonymous(headers: Mapping[str, list[str]]) -> AuthResult:
    """An unsigned request: it goes on to authorisation as the anonymous caller, which
    allows it only where an ACL or a bucket policy lets everyone in. Its body is unsigned
    (an aws-chunked one without chunk signatures: the only kind it can send)."""
    mode = sigv4.joined(headers, "x-amz-content-sha256")
    unsigned_chunks = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    return AuthResult(
        user=ANONYMOUS,
        payload_hash=unsigned_chunks if mode == unsigned_chunks else sigv4.UNSIGNED_PAYLOAD,
        signature="",
        signing_key=b"",
        amz_date="",
        scope="",
    )
