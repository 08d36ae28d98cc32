"""The router as a table: (method, raw path, query, headers) -> (operation, bucket, key)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.s3.errors import S3Error
from gateway.s3.router import Endpoint, Op, bucket_from_host, route, split_path

COPY = {"x-amz-copy-source": "/src/key"}
UPLOAD = {"uploadId": "u1"}

# (method, raw path, query, headers, operation, bucket, key)
TABLE: list[tuple[str, str, dict[str, str], dict[str, str], str, str | None, str | None]] = [
    # service
    ("GET", "/", {}, {}, "ListBuckets", None, None),
    # buckets
    ("PUT", "/b", {}, {}, "CreateBucket", "b", None),
    ("PUT", "/b/", {}, {}, "CreateBucket", "b", None),
    ("HEAD", "/b", {}, {}, "HeadBucket", "b", None),
    ("DELETE", "/b", {}, {}, "DeleteBucket", "b", None),
    ("GET", "/b", {}, {}, "ListObjects", "b", None),
    ("GET", "/b/", {"prefix": "p", "marker": "m"}, {}, "ListObjects", "b", None),
    ("GET", "/b", {"list-type": "2"}, {}, "ListObjectsV2", "b", None),
    ("GET", "/b", {"list-type": "1"}, {}, "ListObjects", "b", None),
    ("GET", "/b", {"list-type": "2", "start-after": "x"}, {}, "ListObjectsV2", "b", None),
    ("GET", "/b", {"location": ""}, {}, "GetBucketLocation", "b", None),
    ("GET", "/b", {"uploads": ""}, {}, "ListMultipartUploads", "b", None),
    ("GET", "/b", {"versions": ""}, {}, "ListObjectVersions", "b", None),
    ("POST", "/b", {"delete": ""}, {}, "DeleteObjects", "b", None),
    ("POST", "/b", {}, {}, "PostObject", "b", None),
    # CORS preflights, whatever the resource and query (a presigned URL's included)
    ("OPTIONS", "/b", {}, {}, "OptionsPreflight", "b", None),
    ("OPTIONS", "/b/k", {"X-Amz-Signature": "s"}, {}, "OptionsPreflight", "b", "k"),
    ("GET", "/b", {"acl": ""}, {}, "GetBucketAcl", "b", None),
    ("PUT", "/b", {"acl": ""}, {}, "PutBucketAcl", "b", None),
    ("GET", "/b", {"tagging": ""}, {}, "GetBucketTagging", "b", None),
    ("PUT", "/b", {"tagging": ""}, {}, "PutBucketTagging", "b", None),
    ("DELETE", "/b", {"tagging": ""}, {}, "DeleteBucketTagging", "b", None),
    ("GET", "/b", {"versioning": ""}, {}, "GetBucketVersioning", "b", None),
    ("PUT", "/b", {"versioning": ""}, {}, "PutBucketVersioning", "b", None),
    ("GET", "/b", {"policy": ""}, {}, "GetBucketPolicy", "b", None),
    ("PUT", "/b", {"policy": ""}, {}, "PutBucketPolicy", "b", None),
    ("DELETE", "/b", {"policy": ""}, {}, "DeleteBucketPolicy", "b", None),
    ("GET", "/b", {"policyStatus": ""}, {}, "GetBucketPolicyStatus", "b", None),
    ("GET", "/b", {"cors": ""}, {}, "GetBucketCors", "b", None),
    ("PUT", "/b", {"cors": ""}, {}, "PutBucketCors", "b", None),
    ("DELETE", "/b", {"cors": ""}, {}, "DeleteBucketCors", "b", None),
    ("GET", "/b", {"lifecycle": ""}, {}, "GetBucketLifecycleConfiguration", "b", None),
    ("PUT", "/b", {"lifecycle": ""}, {}, "PutBucketLifecycleConfiguration", "b", None),
    ("DELETE", "/b", {"lifecycle": ""}, {}, "DeleteBucketLifecycleConfiguration", "b", None),
    ("GET", "/b", {"encryption": ""}, {}, "GetBucketEncryption", "b", None),
    ("PUT", "/b", {"encryption": ""}, {}, "PutBucketEncryption", "b", None),
    ("DELETE", "/b", {"encryption": ""}, {}, "DeleteBucketEncryption", "b", None),
    ("GET", "/b", {"website": ""}, {}, "GetBucketWebsite", "b", None),
    ("PUT", "/b", {"website": ""}, {}, "PutBucketWebsite", "b", None),
    ("DELETE", "/b", {"website": ""}, {}, "DeleteBucketWebsite", "b", None),
    ("GET", "/b", {"logging": ""}, {}, "GetBucketLogging", "b", None),
    ("GET", "/b", {"notification": ""}, {}, "GetBucketNotificationConfiguration", "b", None),
    ("GET", "/b", {"replication": ""}, {}, "GetBucketReplication", "b", None),
    ("GET", "/b", {"requestPayment": ""}, {}, "GetBucketRequestPayment", "b", None),
    ("GET", "/b", {"accelerate": ""}, {}, "GetBucketAccelerateConfiguration", "b", None),
    ("GET", "/b", {"analytics": ""}, {}, "GetBucketAnalyticsConfiguration", "b", None),
    ("GET", "/b", {"inventory": ""}, {}, "GetBucketInventoryConfiguration", "b", None),
    ("GET", "/b", {"metrics": ""}, {}, "GetBucketMetricsConfiguration", "b", None),
    (
        "GET",
        "/b",
        {"intelligent-tiering": ""},
        {},
        "GetBucketIntelligentTieringConfiguration",
        "b",
        None,
    ),
    ("GET", "/b", {"object-lock": ""}, {}, "GetObjectLockConfiguration", "b", None),
    ("PUT", "/b", {"object-lock": ""}, {}, "PutObjectLockConfiguration", "b", None),
    ("GET", "/b", {"ownershipControls": ""}, {}, "GetBucketOwnershipControls", "b", None),
    ("DELETE", "/b", {"ownershipControls": ""}, {}, "DeleteBucketOwnershipControls", "b", None),
    ("GET", "/b", {"publicAccessBlock": ""}, {}, "GetPublicAccessBlock", "b", None),
    ("PUT", "/b", {"publicAccessBlock": ""}, {}, "PutPublicAccessBlock", "b", None),
    ("DELETE", "/b", {"publicAccessBlock": ""}, {}, "DeletePublicAccessBlock", "b", None),
    # objects
    ("PUT", "/b/k", {}, {}, "PutObject", "b", "k"),
    ("PUT", "/b/k", {}, COPY, "CopyObject", "b", "k"),
    ("GET", "/b/k", {}, {}, "GetObject", "b", "k"),
    ("GET", "/b/k", {"versionId": "v", "response-content-type": "t"}, {}, "GetObject", "b", "k"),
    ("GET", "/b/k", {"partNumber": "1"}, {}, "GetObject", "b", "k"),
    ("HEAD", "/b/k", {}, {}, "HeadObject", "b", "k"),
    ("HEAD", "/b/k", {"uploadId": "u"}, {}, "HeadObject", "b", "k"),
    ("DELETE", "/b/k", {}, {}, "DeleteObject", "b", "k"),
    ("POST", "/b/k", {"uploads": ""}, {}, "CreateMultipartUpload", "b", "k"),
    ("POST", "/b/k", UPLOAD, {}, "CompleteMultipartUpload", "b", "k"),
    ("POST", "/b/k", {"restore": ""}, {}, "RestoreObject", "b", "k"),
    ("POST", "/b/k", {"select": "", "select-type": "2"}, {}, "SelectObjectContent", "b", "k"),
    ("PUT", "/b/k", {**UPLOAD, "partNumber": "1"}, {}, "UploadPart", "b", "k"),
    ("PUT", "/b/k", {**UPLOAD, "partNumber": "2"}, COPY, "UploadPartCopy", "b", "k"),
    ("GET", "/b/k", UPLOAD, {}, "ListParts", "b", "k"),
    ("DELETE", "/b/k", UPLOAD, {}, "AbortMultipartUpload", "b", "k"),
    ("GET", "/b/k", {"acl": ""}, {}, "GetObjectAcl", "b", "k"),
    ("PUT", "/b/k", {"acl": ""}, {}, "PutObjectAcl", "b", "k"),
    ("GET", "/b/k", {"tagging": ""}, {}, "GetObjectTagging", "b", "k"),
    ("PUT", "/b/k", {"tagging": ""}, {}, "PutObjectTagging", "b", "k"),
    # A tagging or ACL PUT carries no copy source, but even with one it is not a copy.
    ("PUT", "/b/k", {"tagging": ""}, COPY, "PutObjectTagging", "b", "k"),
    ("DELETE", "/b/k", {"tagging": ""}, {}, "DeleteObjectTagging", "b", "k"),
    ("GET", "/b/k", {"attributes": ""}, {}, "GetObjectAttributes", "b", "k"),
    ("GET", "/b/k", {"legal-hold": ""}, {}, "GetObjectLegalHold", "b", "k"),
    ("PUT", "/b/k", {"retention": ""}, {}, "PutObjectRetention", "b", "k"),
    ("GET", "/b/k", {"torrent": ""}, {}, "GetObjectTorrent", "b", "k"),
    # Keys are taken verbatim from the raw path: no normalisation of dots or slashes.
    ("GET", "/b/../x", {}, {}, "GetObject", "b", "../x"),
    ("GET", "/b/./x", {}, {}, "GetObject", "b", "./x"),
    ("GET", "/b/..", {}, {}, "GetObject", "b", ".."),
    ("GET", "/b/a//b", {}, {}, "GetObject", "b", "a//b"),
    ("GET", "/b//lead", {}, {}, "GetObject", "b", "/lead"),
    ("PUT", "/b/dir/", {}, {}, "PutObject", "b", "dir/"),
    ("PUT", "/b//", {}, {}, "PutObject", "b", "/"),
    ("GET", "/b/a%20b", {}, {}, "GetObject", "b", "a b"),
    ("GET", "/b/a%2Fb", {}, {}, "GetObject", "b", "a/b"),
    ("GET", "/b/a%2fb", {}, {}, "GetObject", "b", "a/b"),
    ("GET", "/b/a+b", {}, {}, "GetObject", "b", "a+b"),
    ("GET", "/b/a%2Bb", {}, {}, "GetObject", "b", "a+b"),
    ("GET", "/b/%25", {}, {}, "GetObject", "b", "%"),
    ("GET", "/b/100%", {}, {}, "GetObject", "b", "100%"),
    ("GET", "/b/%zz", {}, {}, "GetObject", "b", "%zz"),
    ("GET", "/b/%E2%82%AC", {}, {}, "GetObject", "b", "\u20ac"),
    ("GET", "/b/%F0%9F%98%80", {}, {}, "GetObject", "b", "\U0001f600"),
    ("GET", "/b/%00", {}, {}, "GetObject", "b", "\x00"),
    ("GET", "/b/a?b", {}, {}, "GetObject", "b", "a?b"),
    # The bucket is percent-decoded too.
    ("GET", "/my%2Dbucket/k", {}, {}, "GetObject", "my-bucket", "k"),
]


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "operation", "bucket", "key"),
    TABLE,
    ids=[f"{m} {p} {sorted(q)} {sorted(h)}" for m, p, q, h, *_ in TABLE],
)
def test_route(
    method: str,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
    operation: str,
    bucket: str | None,
    key: str | None,
) -> None:
    found = route(method, path, query, headers)
    assert (found.operation, found.bucket, found.key) == (operation, bucket, key)
    assert isinstance(found.operation, Op)


def test_the_endpoint_carries_the_identifiers_an_operation_needs() -> None:
    query = {"uploadId": "u-1", "partNumber": "7", "versionId": "v-2"}
    assert route("PUT", "/b/k", query, {}) == Endpoint(
        Op.UploadPart, "b", "k", upload_id="u-1", part_number="7", version_id="v-2"
    )
    assert route("GET", "/b/k", {}, {}) == Endpoint(Op.GetObject, "b", "k")
    # A bucket's endpoint has none of them, whatever the query holds.
    assert route("GET", "/b", {"uploadId": "u"}, {}) == Endpoint(Op.ListObjects, "b")


def test_table_covers_every_operation_the_brief_names() -> None:
    names = {row[4] for row in TABLE}
    required = {
        "ListBuckets",
        "CreateBucket",
        "HeadBucket",
        "DeleteBucket",
        "ListObjects",
        "ListObjectsV2",
        "GetBucketLocation",
        "ListMultipartUploads",
        "ListObjectVersions",
        "DeleteObjects",
        "PostObject",
        "PutObject",
        "CopyObject",
        "GetObject",
        "HeadObject",
        "DeleteObject",
        "CreateMultipartUpload",
        "CompleteMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "ListParts",
        "AbortMultipartUpload",
        "GetObjectAcl",
        "PutObjectAcl",
        "GetObjectTagging",
        "PutObjectTagging",
        "DeleteObjectTagging",
    }
    assert required <= names


@pytest.mark.parametrize(
    ("method", "path", "query"),
    [
        ("PUT", "/", {}),
        ("DELETE", "/", {}),
        ("HEAD", "/", {}),
        ("POST", "/", {}),
        ("OPTIONS", "/", {}),  # CORS rules are a bucket's
        ("PATCH", "/b", {}),
        ("get", "/b", {}),  # methods are case-sensitive (RFC 9110 9.1)
        ("PATCH", "/b/k", {}),
        ("POST", "/b/k", {}),  # no uploads/uploadId/restore/select: not an S3 operation
        ("TRACE", "/b/k", {"uploadId": "u"}),
    ],
)
def test_method_not_allowed(method: str, path: str, query: dict[str, str]) -> None:
    with pytest.raises(S3Error) as info:
        route(method, path, query, {})
    assert info.value.code == "MethodNotAllowed"
    assert info.value.status == 405


@pytest.mark.parametrize(
    "path",
    [
        "/b/%FF",  # not UTF-8
        "/b/%C3",  # truncated sequence
        "/b/%C3%28",  # invalid continuation byte
        "/b/%ED%A0%80",  # an encoded surrogate (invalid in UTF-8)
        "/b/%C0%AF",  # overlong "/"
        "/%FF/k",  # the bucket too
        "//k",  # empty bucket name
        "b/k",  # not absolute
        "",
    ],
)
def test_invalid_uri(path: str) -> None:
    with pytest.raises(S3Error) as info:
        route("GET", path, {}, {})
    assert info.value.code == "InvalidURI"
    assert info.value.status == 400


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", (None, None)),
        ("/b", ("b", None)),
        ("/b/", ("b", None)),
        ("/b/k", ("b", "k")),
        ("/b/k/", ("b", "k/")),
        ("/b/a/../b", ("b", "a/../b")),
        ("/b///", ("b", "//")),
    ],
)
def test_split_path(path: str, expected: tuple[str | None, str | None]) -> None:
    assert split_path(path) == expected


# Paths built from pieces that exercise the decoder: escapes (valid or not), slashes, dots.
_path_piece = st.one_of(
    st.text(max_size=4),
    st.sampled_from(["/", "//", "..", ".", "%", "%2", "%2F", "%FF", "%C3", "%C3%A9", "%00", "+"]),
    st.builds(lambda b: f"%{b:02X}", st.integers(0, 255)),
)
_paths = st.one_of(st.text(), st.lists(_path_piece, max_size=12).map("".join))
_query_names = st.sampled_from(
    ["uploads", "uploadId", "delete", "acl", "tagging", "list-type", "versions", "location"]
)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD", "PATCH", "get", ""]),
    path=_paths,
    query=st.dictionaries(st.one_of(_query_names, st.text(max_size=5)), st.text(max_size=5)),
    copy=st.booleans(),
)
def test_route_raises_only_s3_errors(
    method: str, path: str, query: dict[str, str], copy: bool
) -> None:
    headers = COPY if copy else {}
    try:
        result = route(method, path, query, headers)
    except S3Error as exc:
        assert exc.code in {"InvalidURI", "MethodNotAllowed"}
        return
    assert isinstance(result, Endpoint)
    assert result.operation
    # Whatever routed has a bucket unless it is ListBuckets, and a key never loses its bytes.
    assert (result.bucket is None) == (result.operation == "ListBuckets")
    if result.key is not None:
        assert result.key != ""


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1),
    safe=st.sampled_from(["", "/", "/+", "/+.~!$&'()*,;=:@"]),
)
def test_percent_encoded_key_round_trips(key: str, safe: str) -> None:
    # Whatever a client escapes (SDKs differ on '/' and '+'), the key arrives byte for byte.
    assert route("GET", "/b/" + quote(key, safe=safe), {}, {}) == Endpoint("GetObject", "b", key)


@pytest.mark.parametrize(
    ("host", "domain", "bucket"),
    [
        ("b.s3.localhost:9000", "s3.localhost", "b"),
        ("my.dotted.bucket.s3.localhost", "s3.localhost", "my.dotted.bucket"),
        ("B.S3.LOCALHOST:9000", "s3.localhost", "b"),
        ("s3.localhost:9000", "s3.localhost", None),
        ("127.0.0.1:9000", "s3.localhost", None),
        ("b.s3.localhost:9000", None, None),
        ("evil-s3.localhost", "s3.localhost", None),
    ],
)
def test_bucket_from_host(host: str, domain: str | None, bucket: str | None) -> None:
    assert bucket_from_host(host, domain) == bucket


def test_virtual_hosted_routes() -> None:
    headers = {"host": "photos.s3.localhost:9000"}
    assert route("GET", "/", {}, headers, "s3.localhost") == Endpoint("ListObjects", "photos")
    assert route("GET", "/a//b", {}, headers, "s3.localhost") == Endpoint(
        "GetObject", "photos", "a//b"
    )
    assert route("PUT", "/", {}, headers, "s3.localhost") == Endpoint("CreateBucket", "photos")
    # Path style still works on the bare domain.
    assert route("GET", "/photos/k", {}, {"host": "s3.localhost"}, "s3.localhost") == Endpoint(
        "GetObject", "photos", "k"
    )
