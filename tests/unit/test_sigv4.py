"""SigV4's text against a second signer: awscrt's native one (the signer of botocore's CRT
auth and of the AWS CLI v2), an implementation independent of both botocore's Python signer
and ours. Each request is signed by awscrt and must verify here with the very signature
awscrt made; the pieces sped up for issue 45 are checked against their plain forms."""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import hmac
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from gateway.s3 import sigv4
from gateway.s3.auth import Authenticator, SignedRequest
from gateway.s3.errors import S3Error
from gateway.users import User

awscrt_auth = pytest.importorskip("awscrt.auth")
awscrt_http = pytest.importorskip("awscrt.http")

REGION = "eu-west-1"
HOST = "s3.example.com"
ALICE = User("AKIDALICE", "alice/secret+key=", "alice", "a" * 64)
TEMPORARY = User("ASIATEMP", "temp-secret", "temp", "t" * 64, session_token="token/+=")
SIGNED_AT = dt.datetime(2024, 5, 24, 12, 0, 0, tzinfo=dt.UTC)
EPOCH = calendar.timegm(SIGNED_AT.timetuple())
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def authenticator() -> Authenticator:
    users = {u.access_key: u for u in (ALICE, TEMPORARY)}
    return Authenticator(users, REGION, clock=lambda: EPOCH)


def crt_signed(
    method: str,
    path: str,
    query: str = "",
    headers: list[tuple[str, str]] | None = None,
    payload_hash: str = EMPTY_SHA256,
    user: User = ALICE,
) -> SignedRequest:
    """The request as the gateway sees it once awscrt has signed it (as S3 clients do: the
    path neither normalised nor encoded again, the payload hash declared in
    x-amz-content-sha256)."""
    request = awscrt_http.HttpRequest(
        method,
        path + (f"?{query}" if query else ""),
        awscrt_http.HttpHeaders([("host", HOST), *(headers or [])]),
    )
    config = awscrt_auth.AwsSigningConfig(
        algorithm=awscrt_auth.AwsSigningAlgorithm.V4,
        signature_type=awscrt_auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
        credentials_provider=awscrt_auth.AwsCredentialsProvider.new_static(
            user.access_key, user.secret_key, user.session_token or None
        ),
        region=REGION,
        service="s3",
        date=SIGNED_AT,
        use_double_uri_encode=False,
        should_normalize_uri_path=False,
        signed_body_value=payload_hash,
        signed_body_header_type=awscrt_auth.AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256,
    )
    awscrt_auth.aws_sign_request(request, config).result()
    wire: CIMultiDict[str] = CIMultiDict()
    for name, value in request.headers:
        wire.add(name, value)
    return SignedRequest(method, path, query, wire)


def verifies_as_signed(request: SignedRequest) -> None:
    """Our expected signature is awscrt's: the request verifies, and with that signature."""
    made = request.headers["Authorization"].rpartition("Signature=")[2]
    assert authenticator().authenticate(request).signature == made


KEYS = [
    "plain.txt",
    "with space",
    "unicodé/ключ/日本",
    "a+b",
    "%2F",
    "a%2Fb",
    "a//b",
    "//leading",
    "trailing/",
    "~tilde~",
    "100%",
    "!$'()*,;:@[]=&",
    "tab\there",
]


@pytest.mark.parametrize("key", KEYS)
def test_keys(key: str) -> None:
    verifies_as_signed(crt_signed("PUT", f"/bucket/{quote(key, safe='/~')}"))


@pytest.mark.parametrize(
    "query",
    [
        "uploads",
        "uploads=",
        "a=",
        "a=&b=",
        "a=2&a=1&a=",
        "z=1&a=2&a=1&m",
        "a-b=1&a=2",
        "list-type=2&prefix=a%2Fb%20c&max-keys=10",
        "delimiter=%2F&encoding-type=url&prefix=%E2%82%AC%20",
        "key=%2B%3D%26%25",
        "partNumber=1&uploadId=abc~def",
    ],
)
def test_queries(query: str) -> None:
    verifies_as_signed(crt_signed("GET", "/bucket", query))


@pytest.mark.parametrize(
    "headers",
    [
        [("x-amz-meta-a", "  runs   of    spaces  ")],
        [("x-amz-meta-a", "\ttabs\tand \t spaces\t")],
        [("x-amz-meta-a", "")],
        [("x-amz-meta-a", "one"), ("x-amz-meta-a", "  two  three ")],  # repeated: joined by ","
        [("X-Amz-Meta-Mixed-Case", "v"), ("content-type", "text/plain; charset=utf-8")],
        [("content-md5", "1B2M2Y8AsgTpgAmY7PhCfg=="), ("x-amz-checksum-crc32", "AAAAAA==")],
        [("x-amz-meta-unicode", "日本 é")],
    ],
)
def test_headers(headers: list[tuple[str, str]]) -> None:
    verifies_as_signed(crt_signed("PUT", "/bucket/key", headers=headers))


@pytest.mark.parametrize(
    "payload_hash",
    [
        EMPTY_SHA256,
        sigv4.UNSIGNED_PAYLOAD,
        *sorted(
            mode for mode in sigv4.STREAMING_PAYLOADS if "ECDSA" not in mode
        ),  # ECDSA is refused later, by the body's decoder; its seed signature is SigV4's
    ],
)
def test_payload_hashes(payload_hash: str) -> None:
    verifies_as_signed(crt_signed("PUT", "/bucket/key", payload_hash=payload_hash))


def test_session_token_is_signed() -> None:
    request = crt_signed("GET", "/bucket/key", user=TEMPORARY)
    assert request.headers["x-amz-security-token"] == TEMPORARY.session_token
    verifies_as_signed(request)


_KEY_TEXT = st.text(st.sampled_from("abcXYZ019 -_.~+/%=&!*'()é日\t"), min_size=1, max_size=24)
_HEADER_TEXT = st.text(st.sampled_from("abc XYZ 019 \t\t  ,;=/+é日"), max_size=24)


@settings(max_examples=150, deadline=None)
@given(
    key=_KEY_TEXT,
    query=st.lists(st.tuples(_KEY_TEXT, st.text(st.sampled_from("ab +/=&é"), max_size=6))),
    metas=st.lists(st.tuples(st.sampled_from(["a", "b", "Mixed"]), _HEADER_TEXT), max_size=4),
)
def test_varied_requests(
    key: str, query: list[tuple[str, str]], metas: list[tuple[str, str]]
) -> None:
    raw_query = "&".join(f"{quote(n, safe='~')}={quote(v, safe='~')}" for n, v in query)
    headers = [(f"x-amz-meta-{name}", value) for name, value in metas]
    verifies_as_signed(crt_signed("PUT", f"/bucket/{quote(key, safe='/~')}", raw_query, headers))


# -- the fast forms against their plain ones ------------------------------------------------


def plain_canonical_headers(
    headers: dict[str, list[str]], signed: tuple[str, ...]
) -> tuple[str, bool]:
    missing = any(name not in headers for name in signed)
    lines = [
        f"{name}:{','.join(' '.join(v.split()) for v in headers.get(name, []))}\n"
        for name in signed
    ]
    return "".join(lines), missing


_NAMES = st.sampled_from(["host", "x-amz-date", "x-amz-meta-a", "x-amz-meta-b", "content-type"])


@given(
    sent=st.lists(st.tuples(_NAMES, _HEADER_TEXT), max_size=8),
    signed=st.lists(_NAMES, min_size=1, max_size=5, unique=True),
)
def test_canonical_headers_as_plainly_built(sent: list[tuple[str, str]], signed: list[str]) -> None:
    headers = sigv4.header_values(CIMultiDict(sent))
    got = sigv4.canonical_headers(headers, tuple(signed))
    assert got == plain_canonical_headers(headers, tuple(signed))


@given(sent=st.lists(_NAMES, max_size=6), signed=st.lists(_NAMES, min_size=1, unique=True))
def test_unsigned_amz_headers_named_in_order(sent: list[str], signed: list[str]) -> None:
    headers = {name: ["v"] for name in sent}
    expected = sorted(n for n in headers if n.startswith("x-amz-") and n not in signed)
    if not expected:
        sigv4.refuse_unsigned_amz_headers(headers, tuple(signed))
        return
    with pytest.raises(S3Error) as caught:
        sigv4.refuse_unsigned_amz_headers(headers, tuple(signed))
    assert caught.value.fields["HeadersNotSigned"] == ", ".join(expected)


@given(
    key=st.binary(min_size=32, max_size=32),
    texts=st.lists(st.text(st.characters(exclude_categories=["Cs"])), max_size=4),
)
def test_signature_of_is_hmac_sha256(key: bytes, texts: list[str]) -> None:
    # Several strings under one key: the keyed HMAC it copies must stay unused.
    for text in texts:
        expected = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        assert sigv4.signature_of(key, text) == expected
