"""The blob tier's SigV4 signer (gateway/tiers/client.py) signs as botocore does: the same
Authorization for the same request, query strings and odd keys included."""

from __future__ import annotations

import datetime as dt
import hashlib
from unittest import mock

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.tiers.client import S3Client, Target, sign

TARGET = Target("http://127.0.0.1:8333", "blobs", "p/", "eu-west-3", "AKID", "secret/key+")
EMPTY = hashlib.sha256(b"").hexdigest()
NOW = dt.datetime(2026, 12, 5, 1, 2, 3, tzinfo=dt.UTC)


def botocore_authorization(method: str, url: str, headers: dict[str, str]) -> str:
    request = AWSRequest(method=method, url=url, headers=headers)
    auth = S3SigV4Auth(Credentials(TARGET.access_key, TARGET.secret_key), "s3", TARGET.region)
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW.replace(tzinfo=None)):
        auth.add_auth(request)
    return request.headers["Authorization"]


@pytest.mark.parametrize(
    ("method", "key", "query", "extra"),
    [
        ("GET", "p/blobs/ab/abcdef", [], {"Range": "bytes=0-99"}),
        ("PUT", "p/blobs/ab/abcdef", [("partNumber", "3"), ("uploadId", "x_y-z.1")], {}),
        ("GET", "", [("list-type", "2"), ("prefix", "p/blobs/"), ("delimiter", "/")], {}),
        ("POST", "p/blobs/ab/abcdef", [("uploads", "")], {}),
        ("PUT", "p/catalog-id", [], {"If-None-Match": "*"}),
        ("GET", "", [("continuation-token", "a+b/c=="), ("list-type", "2")], {}),
    ],
)
def test_signatures_match_botocores(method, key, query, extra):  # type: ignore[no-untyped-def]
    client = S3Client(TARGET)
    path = client.base + key
    # botocore hashes even an empty body: given the same hash, the rest must agree.
    headers = {**extra, "x-amz-content-sha256": EMPTY}
    canonical_query = sign(TARGET, method, client.host, path, query, headers, NOW)
    url = f"https://{client.host}{path}" + (f"?{canonical_query}" if canonical_query else "")
    theirs = botocore_authorization(
        method,
        url,
        {
            **extra,
            "x-amz-content-sha256": EMPTY,
            "X-Amz-Date": headers["x-amz-date"],
        },
    )
    ours = headers["Authorization"]
    # botocore signs the headers it is given (Range, If-None-Match too); ours signs host and
    # x-amz-*: compare the signed header lists apart from the signatures.
    if extra:
        assert (
            ours.split("SignedHeaders=")[1].split(",")[0] == "host;x-amz-content-sha256;x-amz-date"
        )
    else:
        assert ours == theirs
