"""Bucket operations and their errors against the real server."""

from __future__ import annotations

import re

import boto3
import pytest
from botocore.exceptions import ClientError

from tests import raw
from tests.server import ACCESS_KEY, SECRET_KEY, GatewayProcess


def error_code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_create_list_head_delete(s3):
    s3.create_bucket(Bucket="lifecycle-bucket")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "lifecycle-bucket" in names
    head = s3.head_bucket(Bucket="lifecycle-bucket")
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-bucket-region"] == "us-east-1"
    s3.delete_bucket(Bucket="lifecycle-bucket")
    assert "lifecycle-bucket" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as exc:
        s3.head_bucket(Bucket="lifecycle-bucket")
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket="lifecycle-bucket")
    assert error_code(exc) == "NoSuchBucket"


def test_list_buckets_owner_and_dates(s3, bucket):
    listing = s3.list_buckets()
    assert listing["Owner"]["ID"]
    mine = [b for b in listing["Buckets"] if b["Name"] == bucket]
    assert len(mine) == 1 and mine[0]["CreationDate"].year >= 2024


@pytest.mark.parametrize(
    "name",
    [
        "ab",
        "a" * 64,
        "UpperCase",
        "under_score",
        "-leading-dash",
        "trailing-dash-",
        "double..dot",
        "192.168.5.4",
        "xn--punycode",
        "sthree-reserved",
        "name-s3alias",
        ".leading-dot",
    ],
)
def test_invalid_bucket_names(s3, name):
    with pytest.raises(ClientError) as exc:
        s3.create_bucket(Bucket=name)
    assert error_code(exc) == "InvalidBucketName"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


@pytest.mark.parametrize("name", ["abc", "a" * 63, "with.dots.ok", "0-numbers-9"])
def test_valid_bucket_names(s3, name):
    s3.create_bucket(Bucket=name)
    s3.delete_bucket(Bucket=name)


def test_recreating_your_own_bucket(s3, bucket):
    # AWS, in us-east-1: 200, the objects kept (the ACL reset: test_acl.py; elsewhere 409).
    s3.put_object(Bucket=bucket, Key="k", Body=b"kept")
    assert s3.create_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"kept"


def test_recreating_your_own_bucket_outside_us_east_1(tmp_path, catalog):
    """Outside us-east-1 AWS answers 409 BucketAlreadyOwnedByYou (API_CreateBucket.html) and
    changes nothing; the 200 that resets the ACL is us-east-1's legacy alone."""
    import boto3
    from botocore.config import Config

    server = GatewayProcess(tmp_path / "data", {"S3GW_REGION": "eu-west-1"}, catalog=catalog)
    server.start()
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=server.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="eu-west-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        where = {"LocationConstraint": "eu-west-1"}
        s3.create_bucket(Bucket="mine", CreateBucketConfiguration=where)
        with pytest.raises(ClientError) as exc:
            s3.create_bucket(Bucket="mine", CreateBucketConfiguration=where)
        assert error_code(exc) == "BucketAlreadyOwnedByYou"
        assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    finally:
        server.stop()


def test_list_buckets_pages(s3):
    for name in ("page-a-1", "page-a-2", "page-a-3"):
        s3.create_bucket(Bucket=name)
    seen, token = [], None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        page = s3.list_buckets(MaxBuckets=2, Prefix="page-a-", **kw)
        seen += [b["Name"] for b in page["Buckets"]]
        token = page.get("ContinuationToken")
        if not token:
            break
    assert seen == ["page-a-1", "page-a-2", "page-a-3"]


def test_list_object_versions_of_an_unversioned_bucket(s3, bucket):
    for key in ("a", "b/c"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    versions = s3.list_object_versions(Bucket=bucket)["Versions"]
    assert [(v["Key"], v["VersionId"], v["IsLatest"]) for v in versions] == [
        ("a", "null", True),
        ("b/c", "null", True),
    ]
    page = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["b/"]


def test_bucket_not_empty(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket=bucket)
    assert error_code(exc) == "BucketNotEmpty"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    s3.delete_object(Bucket=bucket, Key="k")
    s3.delete_bucket(Bucket=bucket)


def test_location_constraint(s3):
    with pytest.raises(ClientError) as exc:
        s3.create_bucket(
            Bucket="elsewhere", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
    assert error_code(exc) == "IllegalLocationConstraintException"
    # In us-east-1 naming the region itself is InvalidLocationConstraint, as on AWS.
    with pytest.raises(ClientError) as exc:
        s3.create_bucket(
            Bucket="elsewhere", CreateBucketConfiguration={"LocationConstraint": "us-east-1"}
        )
    assert error_code(exc) == "InvalidLocationConstraint"
    assert "elsewhere" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_get_bucket_location_and_versioning(s3, bucket):
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] is None
    versioning = s3.get_bucket_versioning(Bucket=bucket)
    assert "Status" not in versioning


def test_malformed_create_bucket_body(gateway):
    url = f"{gateway.url}/malformed-body"
    reply = raw.signed("PUT", url, body=b"<CreateBucketConfiguration><oops>")
    assert reply.status == 400
    assert reply.code == "MalformedXML"
    assert raw.signed("HEAD", url).status == 404


def test_delete_objects(s3, bucket):
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"k{i}", Body=b"x")
    result = s3.delete_objects(
        Bucket=bucket,
        Delete={"Objects": [{"Key": "k0"}, {"Key": "k1"}, {"Key": "never-existed"}]},
    )
    assert sorted(d["Key"] for d in result["Deleted"]) == ["k0", "k1", "never-existed"]
    assert "Errors" not in result
    quiet = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "k2"}], "Quiet": True})
    assert "Deleted" not in quiet
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert left == ["k3", "k4"]


def test_delete_objects_per_key_errors(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    result = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "k", "VersionId": "v123"}, {"Key": "z"}]}
    )
    assert result["Errors"][0]["Code"] == "NoSuchVersion"
    assert [d["Key"] for d in result["Deleted"]] == ["z"]
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"


def test_delete_objects_limits(gateway, s3, bucket):
    with pytest.raises(ClientError) as exc:
        s3.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": f"k{i}"} for i in range(1001)]}
        )
    assert error_code(exc) == "MalformedXML"
    url = f"{gateway.url}/{bucket}?delete"
    body = b"<Delete><Object><Key>k</Key></Object></Delete>"
    reply = raw.signed("POST", url, body=body)  # no Content-MD5
    assert reply.status == 400 and reply.code == "InvalidRequest"
    reply = raw.signed("POST", url, {"Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA=="}, body=body)
    assert reply.status == 400 and reply.code == "BadDigest"
    xxe = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<Delete><Object><Key>&x;</Key></Object></Delete>"
    )
    import base64
    import hashlib

    md5 = base64.b64encode(hashlib.md5(xxe).digest()).decode()
    reply = raw.signed("POST", url, {"Content-MD5": md5}, body=xxe)
    assert reply.status == 400 and reply.code == "MalformedXML"


def test_method_not_allowed_on_service(gateway):
    reply = raw.signed("PUT", f"{gateway.url}/")
    assert reply.status == 405
    assert reply.code == "MethodNotAllowed"


def test_expected_bucket_owner(s3, bucket):
    """x-amz-expected-bucket-owner names the account the client expects, by its 12-digit id
    (GetCallerIdentity's Account): another account's is 403, a value that is no account id
    (the canonical id, say) 400 InvalidBucketOwnerAWSAccountID, as AWS answers, and neither
    changes anything; the right one (or none) goes through. Copies check their source's
    owner by x-amz-source-expected-bucket-owner the same way."""
    sts = boto3.client(
        "sts",
        endpoint_url=s3.meta.endpoint_url,
        region_name=s3.meta.region_name,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    owner = sts.get_caller_identity()["Account"]
    assert re.fullmatch(r"[0-9]{12}", owner)
    canonical = s3.list_buckets()["Owner"]["ID"]
    s3.put_object(Bucket=bucket, Key="kept", Body=b"v1", ExpectedBucketOwner=owner)
    other = "1" * 12 if owner != "1" * 12 else "2" * 12
    for call, kw in [
        (s3.list_objects_v2, {}),
        (s3.put_object, {"Key": "kept", "Body": b"v2"}),
        (s3.get_object, {"Key": "kept"}),
        (s3.delete_object, {"Key": "kept"}),
    ]:
        for given, status, code in [
            (other, 403, "AccessDenied"),
            (canonical, 400, "InvalidBucketOwnerAWSAccountID"),
            (owner + "0", 400, "InvalidBucketOwnerAWSAccountID"),
        ]:
            with pytest.raises(ClientError) as exc:
                call(Bucket=bucket, ExpectedBucketOwner=given, **kw)
            assert error_code(exc) == code
            assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert s3.get_object(Bucket=bucket, Key="kept")["Body"].read() == b"v1"

    source = {"Bucket": bucket, "Key": "kept"}
    for given, code in [(other, "AccessDenied"), (canonical, "InvalidBucketOwnerAWSAccountID")]:
        with pytest.raises(ClientError) as exc:
            s3.copy_object(
                Bucket=bucket, Key="copy", CopySource=source, ExpectedSourceBucketOwner=given
            )
        assert error_code(exc) == code
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="copy")
    s3.copy_object(Bucket=bucket, Key="copy", CopySource=source, ExpectedSourceBucketOwner=owner)
    assert s3.get_object(Bucket=bucket, Key="copy")["Body"].read() == b"v1"
