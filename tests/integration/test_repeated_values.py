"""A repeated query parameter or header against the real server: the bucket policy judges
exactly the value the operation uses (the review's H1). Anonymous requests, sent by hand
(http.client), on a bucket whose policy lets anyone in only under a condition."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from tests.integration.accounts import accounts_fixture, error

legacy = accounts_fixture("legacy")


def send(url: str, method: str, target: str, headers: list[tuple[str, str]], body: bytes = b""):  # type: ignore[no-untyped-def]
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest(method, target)
        for name, value in headers:
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        conn.send(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_a_repeated_prefix_cannot_widen_a_listing(legacy):
    b = legacy.new_bucket()
    for key in ("dir/a", "dir/b", "secret/c"):
        legacy.owner.put_object(Bucket=b, Key=key, Body=b"x")
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:ListBucket",
        "Resource": f"arn:aws:s3:::{b}",
        "Condition": {"StringLike": {"s3:prefix": "dir/*"}},
    }
    legacy.owner.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [statement]}))
    url = legacy.server.url
    status, body = send(url, "GET", f"/{b}?list-type=2&prefix=dir/", [])
    assert status == 200 and b"dir/a" in body and b"secret" not in body
    # The first value counts, for the policy and the listing alike: "" is refused ...
    status, body = send(url, "GET", f"/{b}?list-type=2&prefix=&prefix=dir/", [])
    assert status == 403 and b"secret" not in body
    # ... and dir/ lists dir/ only.
    status, body = send(url, "GET", f"/{b}?list-type=2&prefix=dir/&prefix=", [])
    assert status == 200 and b"dir/a" in body and b"secret" not in body


def test_a_repeated_acl_header_cannot_pass_an_acl_condition(legacy):
    b = legacy.new_bucket()
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:PutObject",
        "Resource": f"arn:aws:s3:::{b}/*",
        "Condition": {"StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control"}},
    }
    legacy.owner.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [statement]}))
    url = legacy.server.url
    two = [("x-amz-acl", "private"), ("x-amz-acl", "bucket-owner-full-control")]
    for headers in (two, two[::-1]):
        # One header, "private,bucket-owner-full-control": the condition does not hold.
        status, _ = send(url, "PUT", f"/{b}/k", headers, b"data")
        assert status == 403
        assert error(legacy.owner.head_object, Bucket=b, Key="k") == ("404", 404)
    status, _ = send(url, "PUT", f"/{b}/k", two[1:], b"data")
    assert status == 200
    assert legacy.owner.get_object(Bucket=b, Key="k")["Body"].read() == b"data"


def test_a_repeated_canned_acl_is_no_canned_acl(legacy):
    """What AWS receives of two x-amz-acl lines is one comma-joined value: InvalidArgument,
    signed or not, and nothing is written."""
    b = legacy.new_bucket()
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:PutObject",
        "Resource": f"arn:aws:s3:::{b}/*",
    }
    legacy.owner.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [statement]}))
    two = [("x-amz-acl", "private"), ("x-amz-acl", "public-read")]
    status, body = send(legacy.server.url, "PUT", f"/{b}/k", two, b"data")
    assert status == 400 and b"<Code>InvalidArgument</Code>" in body
    assert b"private,public-read" in body
    assert error(legacy.owner.head_object, Bucket=b, Key="k") == ("404", 404)
