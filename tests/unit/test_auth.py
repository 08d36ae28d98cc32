"""SigV4 verification against what botocore signs, AWS's published examples, and tampering."""

from __future__ import annotations

import calendar
import contextlib
import dataclasses
import datetime as dt
import hashlib
import hmac
import importlib.util
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from email.utils import formatdate
from typing import Any
from unittest import mock
from urllib.parse import quote, urlsplit

import boto3
import pytest
from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.utils import percent_encode_sequence
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from gateway.s3 import auth, sigv4
from gateway.s3.auth import Authenticator, AuthResult, SignedRequest
from gateway.s3.errors import S3Error
from gateway.users import User

REGION = "eu-west-1"
HOST = "s3.example.com"
ALICE = User("AKIDALICE", "alice/secret+key=", "alice", "a" * 64)
BOB = User("AKIDBOB", "bob-secret", "bob", "b" * 64)
STRANGER = User("AKIDSTRANGER", "whatever", "stranger", "c" * 64)
# botocore reads the time as a naive UTC datetime.
SIGNED_AT = dt.datetime(2024, 5, 24, 12, 0, 0)
EPOCH = calendar.timegm(SIGNED_AT.timetuple())
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def authenticator(now: float = EPOCH, region: str = REGION) -> Authenticator:
    return Authenticator({u.access_key: u for u in (ALICE, BOB)}, region, clock=lambda: now)


@contextmanager
def frozen(at: dt.datetime = SIGNED_AT) -> Iterator[None]:
    # With awscrt installed botocore signs with its CRT signers, which read the clock in
    # botocore.crt.auth: freeze both.
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch("botocore.auth.get_current_datetime", return_value=at))
        if importlib.util.find_spec("awscrt") is not None:
            stack.enter_context(
                mock.patch("botocore.crt.auth.get_current_datetime", return_value=at)
            )
        yield


def on_the_wire(method: str, url: str, headers: Mapping[str, object]) -> SignedRequest:
    """The request as the gateway sees it once botocore's HTTP client has sent it."""
    parts = urlsplit(url)
    wire: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        wire.add(name, value.decode() if isinstance(value, bytes) else str(value))
    # botocore signs the URL's host; the HTTP client adds the header when it sends.
    wire.setdefault("Host", parts.netloc)
    return SignedRequest(method, parts.path or "/", parts.query, wire)


def object_path(key: str, bucket: str = "bucket") -> str:
    # How botocore's serializer puts a key in the URL (greedy label: "/" and "~" kept).
    return f"/{bucket}/{quote(key, safe='/~')}"


def sign(
    method: str = "GET",
    path: str = "/bucket/key",
    query: str = "",
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    *,
    unsigned: bool = False,
    user: User = ALICE,
    region: str = REGION,
    at: dt.datetime = SIGNED_AT,
    signer: type[SigV4Auth] = S3SigV4Auth,
) -> SignedRequest:
    url = f"http://{HOST}{path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    if unsigned:
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    with frozen(at):
        signer(Credentials(user.access_key, user.secret_key), "s3", region).add_auth(request)
    prepared = request.prepare()
    return on_the_wire(prepared.method, prepared.url, prepared.headers)


def presign(
    method: str = "GET",
    path: str = "/bucket/key",
    query: str = "",
    headers: Mapping[str, str] | None = None,
    *,
    expires: int = 3600,
    user: User = ALICE,
    region: str = REGION,
    at: dt.datetime = SIGNED_AT,
) -> SignedRequest:
    url = f"http://{HOST}{path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, headers=dict(headers or {}))
    credentials = Credentials(user.access_key, user.secret_key)
    with frozen(at):
        S3SigV4QueryAuth(credentials, "s3", region, expires=expires).add_auth(request)
    prepared = request.prepare()
    return on_the_wire(prepared.method, prepared.url, prepared.headers)


def with_header(request: SignedRequest, name: str, value: str | None) -> SignedRequest:
    headers = CIMultiDict(request.headers)
    headers.popall(name, None)
    if value is not None:
        headers[name] = value
    return dataclasses.replace(request, headers=headers)


def flip_last(text: str) -> str:
    return text[:-1] + ("1" if text.endswith("0") else "0")


def signature_of(request: SignedRequest) -> str:
    return request.headers["Authorization"].rpartition("Signature=")[2]


def rejects(request: SignedRequest, code: str, now: float = EPOCH) -> S3Error:
    with pytest.raises(S3Error) as caught:
        authenticator(now).authenticate(request)
    assert caught.value.code == code, caught.value
    return caught.value


def botocore_log(caplog: pytest.LogCaptureFixture, label: str) -> str:
    """What botocore logged as its CanonicalRequest or StringToSign for the last signing."""
    found = [
        str(record.args[0])
        for record in caplog.records
        if record.msg == f"{label}:\n%s" and isinstance(record.args, tuple)
    ]
    assert found, f"botocore logged no {label}"
    return found[-1]


# -- AWS's published examples: an oracle independent of botocore ----------------------------

AWS_USER = User(
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "example", "e" * 64
)
AWS_NOW = calendar.timegm((2013, 5, 24, 0, 0, 0))


def aws_authenticator(now: float = AWS_NOW) -> Authenticator:
    return Authenticator({AWS_USER.access_key: AWS_USER}, "us-east-1", clock=lambda: now)


def test_aws_example_get_object() -> None:
    # sig-v4-header-based-auth.html, "Example: GET Object".
    request = SignedRequest(
        "GET",
        "/test.txt",
        "",
        CIMultiDict(
            {
                "Host": "examplebucket.s3.amazonaws.com",
                "Range": "bytes=0-9",
                "x-amz-content-sha256": EMPTY_SHA256,
                "x-amz-date": "20130524T000000Z",
                "Authorization": "AWS4-HMAC-SHA256 "
                "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
            }
        ),
    )
    result = aws_authenticator().authenticate(request)
    assert result == AuthResult(
        user=AWS_USER,
        payload_hash=EMPTY_SHA256,
        signature="f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        signing_key=result.signing_key,
        amz_date="20130524T000000Z",
        scope="20130524/us-east-1/s3/aws4_request",
    )


def test_aws_example_put_object_with_date_and_special_character() -> None:
    # sig-v4-header-based-auth.html, "Example: PUT Object": "$" is percent-encoded in the path.
    request = SignedRequest(
        "PUT",
        "/test%24file.text",
        "",
        {
            "Host": "examplebucket.s3.amazonaws.com",
            "Date": "Fri, 24 May 2013 00:00:00 GMT",
            "x-amz-date": "20130524T000000Z",
            "x-amz-storage-class": "REDUCED_REDUNDANCY",
            "x-amz-content-sha256": hashlib.sha256(b"Welcome to Amazon S3.").hexdigest(),
            "Authorization": "AWS4-HMAC-SHA256 "
            "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"
            "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
        },
    )
    result = aws_authenticator().authenticate(request)
    assert result.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
    assert result.payload_hash == hashlib.sha256(b"Welcome to Amazon S3.").hexdigest()


def test_aws_example_presigned_url() -> None:
    # sigv4-query-string-auth.html, the example presigned GET, valid for 24 hours.
    query = (
        "X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    )
    request = SignedRequest("GET", "/test.txt", query, {"Host": "examplebucket.s3.amazonaws.com"})
    result = aws_authenticator(now=AWS_NOW + 86400).authenticate(request)
    assert result.payload_hash == "UNSIGNED-PAYLOAD"
    with pytest.raises(S3Error) as caught:
        aws_authenticator(now=AWS_NOW + 86401).authenticate(request)
    assert caught.value.code == "AccessDenied"


# -- header-signed requests from botocore ---------------------------------------------------


def test_signed_body_hash_verifies(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="botocore.auth")
    request = sign("PUT", "/bucket/key", body=b"hello", headers={"x-amz-meta-color": "blue"})
    result = authenticator().authenticate(request)

    assert result.user == ALICE
    assert result.payload_hash == hashlib.sha256(b"hello").hexdigest()
    assert result.signature == signature_of(request)
    assert result.amz_date == "20240524T120000Z"
    assert result.scope == f"20240524/{REGION}/s3/aws4_request"
    # The key is what later verifies aws-chunked chunk signatures: it must reproduce the seed.
    string_to_sign = botocore_log(caplog, "StringToSign")
    assert (
        hmac.new(result.signing_key, string_to_sign.encode(), hashlib.sha256).hexdigest()
        == result.signature
    )


def test_unsigned_payload_verifies() -> None:
    request = sign("PUT", "/bucket/key", body=b"hello", unsigned=True)
    assert request.headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert authenticator().authenticate(request).payload_hash == "UNSIGNED-PAYLOAD"


@pytest.mark.parametrize("mode", sorted(sigv4.STREAMING_PAYLOADS))
def test_streaming_modes_verify_and_pass_through(mode: str) -> None:
    # Plain SigV4Auth keeps a preset x-amz-content-sha256, as SDKs do for aws-chunked bodies.
    request = sign(
        "PUT",
        "/bucket/key",
        headers={
            "X-Amz-Content-SHA256": mode,
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": "5",
        },
        signer=SigV4Auth,
    )
    result = authenticator().authenticate(request)
    assert result.payload_hash == mode
    assert result.signature == signature_of(request)


def test_uppercase_payload_hash_is_reported_lowercase() -> None:
    digest = hashlib.sha256(b"body").hexdigest().upper()
    request = sign("PUT", headers={"X-Amz-Content-SHA256": digest}, signer=SigV4Auth)
    assert authenticator().authenticate(request).payload_hash == digest.lower()


def test_date_header_instead_of_x_amz_date() -> None:
    # botocore signs with Date, and sends no x-amz-date, when the request has a Date header.
    request = sign(headers={"Date": "placeholder"})
    assert "x-amz-date" not in request.headers
    result = authenticator().authenticate(request)
    assert result.amz_date == "20240524T120000Z"


def test_repeated_headers_are_joined_with_commas() -> None:
    signed = sign(headers={"x-amz-meta-list": "a,b"})
    headers = CIMultiDict(signed.headers)
    headers.popall("x-amz-meta-list")
    headers.add("X-Amz-Meta-List", "a")
    headers.add("x-amz-meta-list", "  b ")
    request = dataclasses.replace(signed, headers=headers)
    assert authenticator().authenticate(request).user == ALICE
    assert rejects(with_header(signed, "x-amz-meta-list", "b,a"), "SignatureDoesNotMatch")


def test_header_values_are_trimmed_and_spaces_collapsed() -> None:
    request = sign(headers={"x-amz-meta-note": "  two   spaces  here "})
    assert request.headers["x-amz-meta-note"] == "  two   spaces  here "
    assert authenticator().authenticate(request).user == ALICE


def test_plain_dict_headers_with_any_case() -> None:
    signed = sign(headers={"x-amz-meta-color": "blue"})
    plain = {name.upper(): value for name, value in signed.headers.items()}
    assert authenticator().authenticate(dataclasses.replace(signed, headers=plain)).user == ALICE


def test_unsigned_headers_may_change() -> None:
    request = with_header(sign(), "User-Agent", "something else")
    assert authenticator().authenticate(request).user == ALICE


KEYS = [
    "plain.txt",
    "with space",
    "unicodé/ключ/日本",
    "../x",
    "a/../../b",
    "./",
    "a//b",
    "/leading",
    "~tilde~",
    "a+b",
    "a=b",
    "a&b",
    "100%",
    "%2F",
    "!$'()*,;:@[]",
    "tab\there",
]


@pytest.mark.parametrize("key", KEYS)
def test_keys_header_signed(key: str) -> None:
    request = sign("PUT", object_path(key), body=b"x")
    assert authenticator().authenticate(request).user == ALICE


@pytest.mark.parametrize("key", KEYS)
def test_keys_presigned(key: str) -> None:
    request = presign("GET", object_path(key))
    assert authenticator().authenticate(request).payload_hash == "UNSIGNED-PAYLOAD"


QUERIES = [
    "uploads",
    "uploads=",
    "list-type=2&prefix=a%2Fb%20c&max-keys=10",
    "partNumber=1&uploadId=abc",
    "tagging&versionId=1",
    "a=1&a=1&b=1",
    "z=1&a=2&a=1&m",
    "a-b=1&a=2",
    "delimiter=%2F&encoding-type=url&prefix=%E2%82%AC%20",
    "key=%2B%3D%26%25",
]


@pytest.mark.parametrize("query", QUERIES)
def test_queries_header_signed(query: str) -> None:
    request = sign("GET", "/bucket", query)
    assert authenticator().authenticate(request).user == ALICE


@pytest.mark.parametrize("query", QUERIES)
def test_queries_presigned(query: str) -> None:
    request = presign("GET", "/bucket", query)
    assert authenticator().authenticate(request).user == ALICE


# -- canonical forms and the verbatim fallback ----------------------------------------------


@pytest.mark.parametrize(
    ("signed_path", "sent_path"),
    [
        ("/bucket/a%21b", "/bucket/a!b"),  # encoded by the signer, sent bare
        ("/bucket/%C3%A9", "/bucket/%c3%a9"),  # lowercase escapes on the wire
        ("/bucket/a%20b", "/bucket/a b"),
    ],
)
def test_path_is_canonicalised_with_uri_encode(signed_path: str, sent_path: str) -> None:
    request = dataclasses.replace(sign(path=signed_path), raw_path=sent_path)
    assert authenticator().authenticate(request).user == ALICE


@pytest.mark.parametrize("path", ["/bucket/a%2Fb", "/bucket/%e2%82%ac", "/bucket/a%7Eb"])
def test_path_signed_as_sent_is_accepted(path: str) -> None:
    # The canonical form differs from what botocore signed; only the verbatim retry matches.
    assert sigv4.canonical_uri(path) != path
    assert authenticator().authenticate(sign(path=path)).user == ALICE


def test_query_signed_as_sent_is_accepted() -> None:
    request = sign(path="/bucket", query="prefix=a/b%20c&delimiter=/")
    assert authenticator().authenticate(request).user == ALICE


@pytest.mark.parametrize(
    ("signed_query", "sent_query"),
    [
        ("prefix=a%2Fb%20c&marker=~", "prefix=a/b%20c&marker=%7E"),
        ("k=%E2%82%AC", "k=%e2%82%ac"),
        # Pairs sort by name first: "a" < "a-b", though "a-b=" < "a=" as whole strings.
        ("a-b=1&a=2", "a-b=%31&a=2"),
    ],
)
def test_query_is_canonicalised_with_uri_encode(signed_query: str, sent_query: str) -> None:
    # botocore signed the canonical form verbatim; the wire form differs, so only UriEncode
    # of the decoded parameters can reproduce what was signed.
    request = dataclasses.replace(sign(path="/bucket", query=signed_query), query_string=sent_query)
    assert authenticator().authenticate(request).user == ALICE


def test_plus_in_query_is_a_space_as_the_handler_reads_it() -> None:
    # aiohttp's request.query (what the operations read) decodes "+" as a space, as S3 does:
    # the signature must cover that reading. A request signed for "a+b" (%2B) replayed with a
    # bare "+" would list "a b"; it must not verify.
    replayed = dataclasses.replace(
        sign(path="/bucket", query="prefix=a%2Bb"), query_string="prefix=a+b"
    )
    rejects(replayed, "SignatureDoesNotMatch")
    as_space = dataclasses.replace(
        sign(path="/bucket", query="prefix=a%20b"), query_string="prefix=a+b"
    )
    assert authenticator().authenticate(as_space).user == ALICE
    assert authenticator().authenticate(sign(path="/bucket", query="prefix=a%2Bb")).user == ALICE


def test_empty_path_is_slash() -> None:
    request = dataclasses.replace(sign(path="/"), raw_path="")
    assert authenticator().authenticate(request).user == ALICE


def test_signing_key_is_cached() -> None:
    sigv4.signing_key.cache_clear()
    authenticator().authenticate(sign())
    authenticator().authenticate(sign(path="/bucket/other"))
    info = sigv4.signing_key.cache_info()
    assert (info.misses, info.hits) == (1, 1)


# Characters that matter to UriEncode: unreserved, reserved, "%" escapes (good and bad),
# "+", spaces, non-ASCII, and bytes that were not UTF-8 (surrogate-escaped by aiohttp).
_WIRE_TEXT = st.lists(
    st.sampled_from([*"aZ09-_.~/%+ !*'()&=?#[]", "%2F", "%7e", "%C3%A9", "%zz", "é", "\udcff"]),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_WIRE_TEXT)
def test_canonical_uri_shortcut_equals_uri_encode(raw: str) -> None:
    # A path that is canonical already is returned as it is: that must be exactly what
    # decoding and re-encoding it gives, for every path.
    assert sigv4.canonical_uri(raw) == (sigv4.uri_encode(raw, "/-_.~") or "/")


@settings(max_examples=300, deadline=None)
@given(_WIRE_TEXT)
def test_query_part_shortcut_equals_uri_encode(raw: str) -> None:
    assert sigv4.query_part(raw) == sigv4.uri_encode(raw.replace("+", "%20"), "-_.~")


def test_parsed_credentials_are_cached_and_errors_are_not() -> None:
    sigv4.parse_credential.cache_clear()
    authenticator().authenticate(sign())
    authenticator().authenticate(sign(path="/bucket/other"))
    info = sigv4.parse_credential.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    # A malformed credential is refused each time it is sent, and takes no cache entry.
    for _ in range(2):
        with pytest.raises(S3Error) as caught:
            sigv4.parse_credential("AKIDALICE/20240524/eu-west-1/s3", sigv4.HEADER)
        assert caught.value.code == "AuthorizationHeaderMalformed"
    assert sigv4.parse_credential.cache_info().currsize == 1


def test_a_wrong_signature_is_refused_after_a_right_one_was_cached() -> None:
    # Nothing about the signature itself is cached: the same request with one hex digit
    # changed is refused, whatever verified before it.
    request = sign()
    assert authenticator().authenticate(request).user == ALICE
    authorization = request.headers["Authorization"]
    flipped = authorization[:-1] + ("0" if authorization[-1] != "0" else "1")
    headers = CIMultiDict(request.headers)
    headers["Authorization"] = flipped
    rejects(dataclasses.replace(request, headers=headers), "SignatureDoesNotMatch")


# -- a real boto3 client ----------------------------------------------------------------------


class _Sent(Exception):
    """Stops the client once it has signed its request."""


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://{HOST}",
        region_name=REGION,
        aws_access_key_id=ALICE.access_key,
        aws_secret_access_key=ALICE.secret_key,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"total_max_attempts": 1},
        ),
    )
    yield s3
    s3.close()


def sent_by(client: Any, operation: str, **params: object) -> SignedRequest:
    captured = []

    def capture(request: AWSRequest, **_: object) -> None:
        captured.append(request)
        raise _Sent

    events = client.meta.events
    events.register("before-send", capture)
    try:
        with frozen(), pytest.raises(_Sent):
            getattr(client, operation)(**params)
    finally:
        events.unregister("before-send", capture)
    (request,) = captured
    return on_the_wire(request.method, request.url, request.headers)


@pytest.mark.parametrize(
    ("operation", "params"),
    [
        ("put_object", {"Bucket": "b", "Key": "a b/../x+y=z&%~", "Body": b"hello"}),
        ("put_object", {"Bucket": "b", "Key": "k", "Body": b"x", "Metadata": {"m": "  v  v "}}),
        ("get_object", {"Bucket": "b", "Key": "/lead//x", "Range": "bytes=0-9"}),
        ("list_objects_v2", {"Bucket": "b", "Prefix": "a/b c", "MaxKeys": 3}),
        ("create_multipart_upload", {"Bucket": "b", "Key": "ключ"}),
        ("upload_part", {"Bucket": "b", "Key": "k", "UploadId": "u+1", "PartNumber": 2}),
        ("delete_objects", {"Bucket": "b", "Delete": {"Objects": [{"Key": "k"}]}}),
    ],
)
def test_boto3_client_requests_verify(client: Any, operation: str, params: dict[str, Any]) -> None:
    request = sent_by(client, operation, **params)
    result = authenticator().authenticate(request)
    assert result.user == ALICE
    assert result.payload_hash == request.headers["x-amz-content-sha256"].lower()


@pytest.mark.parametrize("operation", ["get_object", "put_object"])
def test_boto3_presigned_urls_verify(client: Any, operation: str) -> None:
    with frozen():
        url = client.generate_presigned_url(
            operation, Params={"Bucket": "b", "Key": "p q/ü"}, ExpiresIn=60
        )
    method = "GET" if operation == "get_object" else "PUT"
    request = on_the_wire(method, url, {})
    assert authenticator(now=EPOCH + 60).authenticate(request).user == ALICE
    rejects(request, "AccessDenied", now=EPOCH + 61)


# -- presigned URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_presigned_verifies(method: str) -> None:
    request = presign(method, "/bucket/key", expires=300)
    result = authenticator(now=EPOCH + 299).authenticate(request)
    assert result.payload_hash == "UNSIGNED-PAYLOAD"
    assert (
        result.signature
        == dict(p.split("=", 1) for p in request.query_string.split("&"))["X-Amz-Signature"]
    )
    assert result.scope == f"20240524/{REGION}/s3/aws4_request"


def test_presigned_with_signed_payload_hash() -> None:
    digest = hashlib.sha256(b"body").hexdigest()
    request = presign("PUT", headers={"x-amz-content-sha256": digest})
    assert authenticator().authenticate(request).payload_hash == digest
    rejects(with_header(request, "x-amz-content-sha256", EMPTY_SHA256), "SignatureDoesNotMatch")


def test_presigned_expired() -> None:
    error = rejects(presign(expires=60), "AccessDenied", now=EPOCH + 61)
    assert error.message == "Request has expired"
    assert error.fields == {
        "X-Amz-Expires": "60",
        "Expires": "2024-05-24T12:01:00Z",
        "ServerTime": "2024-05-24T12:01:01Z",
    }


def test_presigned_not_yet_valid() -> None:
    error = rejects(presign(), "AccessDenied", now=EPOCH - 16 * 60)
    assert error.message == "Request is not valid yet"
    assert authenticator(now=EPOCH - 14 * 60).authenticate(presign()).user == ALICE


@pytest.mark.parametrize(
    "tamper",
    [
        lambda q: q.replace("X-Amz-Expires=3600", "X-Amz-Expires=7200"),
        lambda q: q.replace("uploadId=abc", "uploadId=abd"),
        lambda q: q + "&versionId=1",
        lambda q: q.replace("partNumber=1&", ""),
        lambda q: q.replace("X-Amz-Signature=", "X-Amz-Signature=0"),
    ],
)
def test_presigned_tampered_query(tamper: Callable[[str], str]) -> None:
    request = presign("PUT", "/bucket/key", "partNumber=1&uploadId=abc")
    assert authenticator().authenticate(request).user == ALICE
    tampered = dataclasses.replace(request, query_string=tamper(request.query_string))
    assert tampered.query_string != request.query_string
    rejects(tampered, "SignatureDoesNotMatch")


def test_presigned_tampered_path_and_method() -> None:
    request = presign("GET", "/bucket/key")
    rejects(dataclasses.replace(request, raw_path="/bucket/kez"), "SignatureDoesNotMatch")
    rejects(dataclasses.replace(request, method="DELETE"), "SignatureDoesNotMatch")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("X-Amz-Expires=3600", "X-Amz-Expires=-1"),
        ("X-Amz-Expires=3600", "X-Amz-Expires=604801"),
        ("X-Amz-Expires=3600", "X-Amz-Expires=soon"),
        ("X-Amz-Expires=3600&", ""),
        ("&X-Amz-Signature=", "&X-Amz-Nothing="),
        ("X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=AWS4-HMAC-SHA1"),
        ("X-Amz-Date=20240524T120000Z", "X-Amz-Date=2024-05-24T12%3A00%3A00Z"),
        ("X-Amz-Date=20240524T120000Z", "X-Amz-Date=20240524T120000Z&X-Amz-Date=20240524T120000Z"),
        ("X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=x-amz-date"),
        ("X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders="),
        ("%2Fs3%2F", "%2Fec2%2F"),
        ("%2Faws4_request", "%2Faws4_request%2Fmore"),
        ("%2Faws4_request", "%2Faws5_request"),
        ("%2F20240524%2F", "%2F20240523%2F"),
    ],
)
def test_presigned_malformed_parameters(old: str, new: str) -> None:
    request = presign()
    assert old in request.query_string
    broken = dataclasses.replace(request, query_string=request.query_string.replace(old, new))
    rejects(broken, "AuthorizationQueryParametersError")


def test_presigned_expires_zero_has_expired_when_signed() -> None:
    """X-Amz-Expires=0 is well formed: the URL expired the moment it was signed (403)."""
    error = rejects(presign(expires=0), "AccessDenied", now=EPOCH + 1)
    assert error.message == "Request has expired"
    assert error.fields["X-Amz-Expires"] == "0"


def test_presigned_expires_out_of_range_is_malformed() -> None:
    """Past a week or negative: 400 AuthorizationQueryParametersError, AWS's texts."""
    error = rejects(presign(expires=604801), "AuthorizationQueryParametersError")
    assert error.status == 400
    assert error.message == (
        "X-Amz-Expires must be less than a week (in seconds); that is, the given "
        "X-Amz-Expires must be less than 604800 seconds"
    )
    error = rejects(presign(expires=-7), "AuthorizationQueryParametersError")
    assert (error.status, error.message) == (400, "X-Amz-Expires must be non-negative")


def test_presigned_expires_a_week_is_allowed() -> None:
    request = presign(expires=604800)
    assert authenticator(now=EPOCH + 604800).authenticate(request).user == ALICE


def test_presigned_wrong_region() -> None:
    error = rejects(presign(region="us-east-1"), "AuthorizationQueryParametersError")
    assert "the region 'us-east-1' is wrong; expecting 'eu-west-1'" in error.message
    assert error.fields["Region"] == REGION


def test_presigned_unknown_key() -> None:
    error = rejects(presign(user=STRANGER), "InvalidAccessKeyId")
    assert error.fields == {"AWSAccessKeyId": STRANGER.access_key}


def test_presigned_and_authorization_header_together() -> None:
    request = presign()
    both = with_header(request, "Authorization", sign().headers["Authorization"])
    error = rejects(both, "InvalidArgument")
    assert error.fields["ArgumentName"] == "Authorization"


# -- each alteration rejected with the right code -------------------------------------------


def base_request() -> SignedRequest:
    return sign(
        "PUT",
        "/bucket/key",
        "partNumber=1&uploadId=abc",
        headers={"x-amz-meta-color": "blue"},
        body=b"hello",
    )


ALTERATIONS = {
    "method": lambda r: dataclasses.replace(r, method="POST"),
    "path": lambda r: dataclasses.replace(r, raw_path="/bucket/kez"),
    "query value": lambda r: dataclasses.replace(r, query_string="partNumber=2&uploadId=abc"),
    "query added": lambda r: dataclasses.replace(r, query_string=r.query_string + "&acl"),
    "signed header": lambda r: with_header(r, "x-amz-meta-color", "red"),
    "signed header missing": lambda r: with_header(r, "x-amz-meta-color", None),
    "host": lambda r: with_header(r, "Host", "evil.example.com"),
    "payload hash": lambda r: with_header(
        r, "x-amz-content-sha256", hashlib.sha256(b"other").hexdigest()
    ),
    "payload unsigned": lambda r: with_header(r, "x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
    "date within skew": lambda r: with_header(r, "x-amz-date", "20240524T120100Z"),
    "signature": lambda r: with_header(r, "Authorization", flip_last(r.headers["Authorization"])),
}


@pytest.mark.parametrize("alteration", ALTERATIONS.values(), ids=ALTERATIONS.keys())
def test_alteration_breaks_signature(
    alteration: Callable[[SignedRequest], SignedRequest],
) -> None:
    request = base_request()
    assert authenticator().authenticate(request).user == ALICE
    altered = alteration(request)
    assert altered != request
    error = rejects(altered, "SignatureDoesNotMatch")
    assert error.fields["AWSAccessKeyId"] == ALICE.access_key
    assert error.fields["SignatureProvided"] == signature_of(altered)
    assert error.fields["CanonicalRequest"].startswith(f"{altered.method}\n")
    assert error.fields["StringToSign"].startswith("AWS4-HMAC-SHA256\n")


def test_wrong_secret_reports_what_botocore_signed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="botocore.auth")
    impostor = dataclasses.replace(ALICE, secret_key="not-alice's")
    request = sign("GET", object_path("a b"), "prefix=x&list-type=2", user=impostor)
    error = rejects(request, "SignatureDoesNotMatch")
    # The debug fields must be exactly what the client hashed, or they mislead the user.
    assert error.fields["CanonicalRequest"] == botocore_log(caplog, "CanonicalRequest")
    assert error.fields["StringToSign"] == botocore_log(caplog, "StringToSign")


def test_signature_of_another_user_is_rejected() -> None:
    request = sign(user=BOB)
    assert authenticator().authenticate(request).user == BOB
    as_alice = with_header(
        request,
        "Authorization",
        request.headers["Authorization"].replace(BOB.access_key, ALICE.access_key),
    )
    rejects(as_alice, "SignatureDoesNotMatch")


def test_unknown_access_key() -> None:
    error = rejects(sign(user=STRANGER), "InvalidAccessKeyId")
    assert error.fields == {"AWSAccessKeyId": STRANGER.access_key}


@pytest.mark.parametrize("offset", [-16 * 60, 16 * 60])
def test_clock_skew_over_15_minutes(offset: int) -> None:
    error = rejects(sign(), "RequestTimeTooSkewed", now=EPOCH + offset)
    assert error.fields["RequestTime"] == "20240524T120000Z"
    assert error.fields["MaxAllowedSkewMilliseconds"] == "900000"
    expected = dt.datetime.fromtimestamp(EPOCH + offset, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert error.fields["ServerTime"] == expected


@pytest.mark.parametrize("offset", [-14 * 60, 14 * 60, 15 * 60])
def test_clock_skew_within_15_minutes(offset: int) -> None:
    assert authenticator(now=EPOCH + offset).authenticate(sign()).user == ALICE


def test_wrong_region() -> None:
    error = rejects(sign(region="us-east-1"), "AuthorizationHeaderMalformed")
    assert error.message == (
        "The authorization header is malformed; the region 'us-east-1' is wrong; "
        "expecting 'eu-west-1'"
    )
    assert error.fields == {"Region": REGION}


def test_no_authentication_is_the_anonymous_caller() -> None:
    # Unsigned requests go on to authorisation (which lets them in only where an ACL or a
    # policy is public), as anonymous with an unsigned body.
    request = SignedRequest("GET", "/bucket/key", "", {"Host": HOST})
    for r in (request, dataclasses.replace(request, query_string="X-Amz-Foo=1&uploads")):
        result = authenticator().authenticate(r)
        assert result.user is auth.ANONYMOUS
        assert result.payload_hash == "UNSIGNED-PAYLOAD"


def _v2_signed(
    method: str, url: str, headers: dict[str, str] | None = None, secret: str = ALICE.secret_key
) -> SignedRequest:
    """A request signed by botocore's own Signature Version 2 signer (HmacV1Auth)."""
    request = AWSRequest(method=method, url=url, headers=headers or {})
    with mock.patch("botocore.auth.formatdate", return_value=formatdate(EPOCH, usegmt=True)):
        HmacV1Auth(Credentials(ALICE.access_key, secret)).add_auth(request)
    return on_the_wire(method, url, request.headers)


@pytest.mark.parametrize(
    ("method", "url", "headers"),
    [
        ("GET", f"https://{HOST}/bucket/key", {}),
        ("PUT", f"https://{HOST}/bucket/a%20b/%C3%BC", {"Content-Type": "text/plain"}),
        ("PUT", f"https://{HOST}/bucket/k?acl", {"x-amz-acl": "private", "x-amz-meta-b": " 2 "}),
        ("GET", f"https://{HOST}/bucket/k?response-content-type=text%2Fhtml&other=1", {}),
        ("POST", f"https://{HOST}/bucket/k?uploadId=u1", {"Content-MD5": "AAAA"}),
    ],
)
def test_signature_v2_header(method: str, url: str, headers: dict[str, str]) -> None:
    request = _v2_signed(method, url, headers)
    result = authenticator().authenticate(request)
    assert result.user == ALICE
    assert result.payload_hash == "UNSIGNED-PAYLOAD"
    rejects(_v2_signed(method, url, headers, secret="wrong"), "SignatureDoesNotMatch")
    rejects(dataclasses.replace(request, method="DELETE"), "SignatureDoesNotMatch")
    rejects(dataclasses.replace(request, raw_path=request.raw_path + "x"), "SignatureDoesNotMatch")
    rejects(request, "RequestTimeTooSkewed", now=EPOCH + 16 * 60)


def test_signature_v2_unsigned_query_parameters_do_not_matter() -> None:
    request = _v2_signed("GET", f"https://{HOST}/bucket?prefix=a")
    changed = dataclasses.replace(request, query_string="prefix=b")  # not a sub-resource
    assert authenticator().authenticate(changed).user == ALICE
    rejects(dataclasses.replace(request, query_string="acl"), "SignatureDoesNotMatch")


def test_signature_v2_presigned() -> None:
    request = AWSRequest(method="GET", url=f"https://{HOST}/bucket/p%20q")
    with mock.patch("botocore.auth.time.time", return_value=EPOCH):
        HmacV1QueryAuth(Credentials(ALICE.access_key, ALICE.secret_key), expires=60).add_auth(
            request
        )
    wire = on_the_wire("GET", request.url, {})
    assert authenticator(now=EPOCH + 60).authenticate(wire).user == ALICE
    error = rejects(wire, "AccessDenied", now=EPOCH + 61)
    assert error.message == "Request has expired"
    tampered = dataclasses.replace(
        wire,
        query_string=wire.query_string.replace(f"Expires={EPOCH + 60}", f"Expires={EPOCH + 99}"),
    )
    rejects(tampered, "SignatureDoesNotMatch")
    unknown = dataclasses.replace(
        wire, query_string=wire.query_string.replace("AKIDALICE", "AKIDNOBODY")
    )
    rejects(unknown, "InvalidAccessKeyId")


def test_unknown_authorization_type() -> None:
    error = rejects(with_header(sign(), "Authorization", "Bearer token"), "InvalidArgument")
    assert error.message == "Unsupported Authorization Type"
    assert error.fields["ArgumentName"] == "Authorization"


def _authorization(
    credential: str = f"AKIDALICE/20240524/{REGION}/s3/aws4_request",
    signed_headers: str = "host;x-amz-content-sha256;x-amz-date",
) -> str:
    return (
        f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed_headers}, "
        f"Signature={'0' * 64}"
    )


MALFORMED = {
    "no Credential": "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=abc",
    "no SignedHeaders": f"AWS4-HMAC-SHA256 Credential=AKIDALICE/20240524/{REGION}/s3/"
    "aws4_request, Signature=abc",
    "no Signature": _authorization().rpartition(",")[0],
    "nothing": "AWS4-HMAC-SHA256",
    "unknown component": _authorization() + ", Foo=bar",
    "component twice": _authorization() + ", Signature=abc",
    "component without =": _authorization() + ", Signature",
    "credential 4 parts": _authorization(credential="AKIDALICE/20240524/eu-west-1/s3"),
    "credential 6 parts": _authorization(credential=f"AK/x/20240524/{REGION}/s3/aws4_request"),
    "terminator": _authorization(credential=f"AKIDALICE/20240524/{REGION}/s3/aws4"),
    "service": _authorization(credential=f"AKIDALICE/20240524/{REGION}/ec2/aws4_request"),
    "credential date": _authorization(credential=f"AKIDALICE/20240523/{REGION}/s3/aws4_request"),
    "host not signed": _authorization(signed_headers="x-amz-content-sha256;x-amz-date"),
    "empty SignedHeaders": _authorization(signed_headers=""),
    "empty header name": _authorization(signed_headers="host;;x-amz-date"),
}


@pytest.mark.parametrize("value", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_authorization_header(value: str) -> None:
    request = with_header(sign(), "Authorization", value)
    rejects(request, "AuthorizationHeaderMalformed")


def test_credential_date_message() -> None:
    request = with_header(sign(), "Authorization", MALFORMED["credential date"])
    error = rejects(request, "AuthorizationHeaderMalformed")
    assert error.message == "Invalid credential date. Date is not the same as X-Amz-Date."


@pytest.mark.parametrize(
    "value", ["yesterday", "20240524T120000", "2024524T120000Z", "20241324T120000Z"]
)
def test_unparseable_x_amz_date(value: str) -> None:
    error = rejects(with_header(sign(), "x-amz-date", value), "AccessDenied")
    assert error.message == "AWS authentication requires a valid Date or x-amz-date header"


def test_no_date_at_all() -> None:
    request = with_header(sign(), "x-amz-date", None)
    rejects(request, "AccessDenied")
    rejects(with_header(request, "Date", "not a date"), "AccessDenied")


def test_missing_content_sha256() -> None:
    error = rejects(with_header(sign(), "x-amz-content-sha256", None), "InvalidRequest")
    assert error.message == "Missing required header for this request: x-amz-content-sha256"


@pytest.mark.parametrize("value", ["abc", "0" * 63, "g" * 64, "UNSIGNED", "STREAMING-FOO", ""])
def test_invalid_content_sha256(value: str) -> None:
    error = rejects(with_header(sign(), "x-amz-content-sha256", value), "InvalidArgument")
    assert error.message == sigv4.CONTENT_SHA256_MESSAGE
    assert error.fields["ArgumentName"] == "x-amz-content-sha256"


# aiohttp hands over header bytes that are not UTF-8 as surrogate escapes.
NOT_UTF8 = b"caf\xe9".decode("utf-8", "surrogateescape")
ECHOING_ERRORS = {
    "signed header": (
        lambda r: with_header(r, "x-amz-meta-color", NOT_UTF8),
        "SignatureDoesNotMatch",
    ),
    "signature": (
        lambda r: with_header(r, "Authorization", r.headers["Authorization"] + NOT_UTF8),
        "SignatureDoesNotMatch",
    ),
    "authorization type": (
        lambda r: with_header(r, "Authorization", "Bearer " + NOT_UTF8),
        "InvalidArgument",
    ),
    "payload hash": (
        lambda r: with_header(r, "x-amz-content-sha256", NOT_UTF8),
        "InvalidArgument",
    ),
    "region": (
        lambda r: with_header(
            r, "Authorization", _authorization(f"AKIDALICE/20240524/{NOT_UTF8}/s3/aws4_request")
        ),
        "AuthorizationHeaderMalformed",
    ),
    "access key": (
        lambda r: with_header(
            r, "Authorization", _authorization(f"{NOT_UTF8}/20240524/{REGION}/s3/aws4_request")
        ),
        "InvalidAccessKeyId",
    ),
}


@pytest.mark.parametrize(("alteration", "code"), ECHOING_ERRORS.values(), ids=ECHOING_ERRORS.keys())
def test_errors_echoing_non_utf8_bytes_still_render(
    alteration: Callable[[SignedRequest], SignedRequest], code: str
) -> None:
    error = rejects(alteration(base_request()), code)
    body = error.to_xml("request-id", "host-id").decode()
    assert "caf\ufffd" in body


# -- properties -------------------------------------------------------------------------------

# The X-Amz-* authentication parameters are reserved: a request carrying them is presigned.
query_names = st.text(min_size=1, max_size=12).filter(
    lambda name: name not in auth._QUERY_AUTH_PARAMS
)
queries = st.lists(st.tuples(query_names, st.text(max_size=12)), max_size=5)


@settings(max_examples=150, deadline=None)
@given(key=st.text(min_size=1, max_size=40), query=queries, presigned=st.booleans())
def test_any_key_and_query_signed_by_botocore_verifies(
    key: str, query: list[tuple[str, str]], presigned: bool
) -> None:
    path = object_path(key)
    query_string = percent_encode_sequence(query)
    if presigned:
        request = presign("GET", path, query_string)
    else:
        request = sign("PUT", path, query_string, body=key.encode())
    assert authenticator().authenticate(request).user == ALICE


garbage = st.text(max_size=80)
near_miss_authorization = st.builds(
    lambda sep, parts: "AWS4-HMAC-SHA256 " + sep.join(parts),
    st.sampled_from([",", ", ", " ,", ";"]),
    st.lists(
        st.one_of(
            garbage,
            st.builds(
                "Credential={}".format, st.text(alphabet="AKID/2024052eu-wst1s3_rq", max_size=50)
            ),
            st.builds("SignedHeaders={}".format, st.text(alphabet="host;x-amzdte", max_size=30)),
            st.builds("Signature={}".format, garbage),
        ),
        max_size=5,
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    authorization=st.one_of(garbage, near_miss_authorization),
    amz_date=st.one_of(st.none(), garbage, st.just("20240524T120000Z")),
    content_sha256=st.one_of(st.none(), garbage, st.just("UNSIGNED-PAYLOAD")),
)
def test_garbage_authorization_only_raises_s3_error(
    authorization: str, amz_date: str | None, content_sha256: str | None
) -> None:
    headers: dict[str, str] = {"Host": HOST, "Authorization": authorization}
    if amz_date is not None:
        headers["x-amz-date"] = amz_date
    if content_sha256 is not None:
        headers["x-amz-content-sha256"] = content_sha256
    with pytest.raises(S3Error):
        authenticator().authenticate(SignedRequest("GET", "/bucket/key", "", headers))


@settings(max_examples=300, deadline=None)
@given(
    path=garbage,
    query=st.lists(
        st.tuples(
            st.one_of(st.sampled_from(auth._QUERY_AUTH_PARAMS), st.text(max_size=10)),
            st.one_of(garbage, st.sampled_from(["AWS4-HMAC-SHA256", "20240524T120000Z", "60"])),
        ),
        max_size=8,
    ).map(lambda pairs: "&".join(f"{name}={value}" for name, value in pairs)),
)
def test_garbage_presigned_query_only_raises_s3_error(path: str, query: str) -> None:
    request = SignedRequest("GET", path, query, {"Host": HOST})
    # An S3Error, or (no auth parameter recognised) the anonymous caller: never a user.
    try:
        result = authenticator().authenticate(request)
    except S3Error:
        return
    assert result.user is auth.ANONYMOUS
