"""Answers compared with AWS's, field by field (issue 49): the error document, listings,
owners, and the smaller differences. Each test asserts what AWS answered in LocalStack's
recordings of real AWS (tests/aws/services/s3/*.snapshot.json, Feb 2026) or in AWS's API
reference, named beside it."""

from __future__ import annotations

import base64
import socket
import xml.etree.ElementTree as ET

from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests import raw
from tests.server import ACCESS_KEY, SECRET_KEY

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def error_fields(reply: raw.Reply) -> dict[str, str]:
    """The <Error> document's children, in order."""
    root = ET.fromstring(reply.body)
    assert root.tag == "Error"
    return {child.tag: child.text or "" for child in root}


def assert_ids(reply: raw.Reply, fields: dict[str, str] | None = None) -> None:
    """x-amz-request-id and x-amz-id-2 are two values (id-2 a long base64 token, as AWS's),
    and the body's RequestId and HostId are those two."""
    request_id, host_id = reply.headers["x-amz-request-id"], reply.headers["x-amz-id-2"]
    assert request_id != host_id
    assert len(host_id) >= 56 and base64.b64decode(host_id, validate=True)
    if fields is not None:
        assert (fields["RequestId"], fields["HostId"]) == (request_id, host_id)
        assert list(fields)[-2:] == ["RequestId", "HostId"]


# -- the error document ------------------------------------------------------------------------


def test_no_such_key_names_the_key_and_no_resource(gateway, bucket):
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/missing/key")
    fields = error_fields(reply)
    assert (reply.status, fields["Code"]) == (404, "NoSuchKey")
    assert fields["Key"] == "missing/key"
    assert "Resource" not in fields
    assert_ids(reply, fields)


def test_no_such_bucket_names_the_bucket(gateway):
    reply = raw.signed("GET", f"{gateway.url}/no-such-bucket-49/k")
    fields = error_fields(reply)
    assert (reply.status, fields["Code"], fields["BucketName"]) == (
        404,
        "NoSuchBucket",
        "no-such-bucket-49",
    )
    assert "Resource" not in fields
    assert_ids(reply, fields)


def test_bucket_not_empty_says_versions_on_a_versioned_bucket(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    reply = raw.signed("DELETE", f"{gateway.url}/{bucket}")
    fields = error_fields(reply)
    assert (reply.status, fields["Code"], fields["BucketName"]) == (409, "BucketNotEmpty", bucket)
    assert fields["Message"] == "The bucket you tried to delete is not empty"
    assert "Resource" not in fields
    # Versioned: only a delete marker left still counts, and the message says so.
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.delete_object(Bucket=bucket, Key="k")
    reply = raw.signed("DELETE", f"{gateway.url}/{bucket}")
    fields = error_fields(reply)
    assert (reply.status, fields["Code"], fields["BucketName"]) == (409, "BucketNotEmpty", bucket)
    assert fields["Message"] == (
        "The bucket you tried to delete is not empty. You must delete all versions in the bucket."
    )
    assert_ids(reply, fields)


def test_precondition_failed_names_the_condition(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/k", {"If-Match": '"nope"'})
    fields = error_fields(reply)
    assert (reply.status, fields["Code"], fields["Condition"]) == (
        412,
        "PreconditionFailed",
        "If-Match",
    )
    assert "Resource" not in fields
    # The store's refusal of a conditional write names its condition too.
    reply = raw.signed("PUT", f"{gateway.url}/{bucket}/k", {"If-None-Match": "*"}, b"y")
    fields = error_fields(reply)
    assert (reply.status, fields["Code"], fields["Condition"]) == (
        412,
        "PreconditionFailed",
        "If-None-Match",
    )
    assert "Resource" not in fields
    assert_ids(reply, fields)


def test_signature_does_not_match_carries_what_aws_sends(gateway, bucket):
    url = f"{gateway.url}/{bucket}/k"
    headers = raw.sign("GET", url, secret_key="not-the-secret")
    reply = raw.send("GET", url, headers)
    fields = error_fields(reply)
    assert (reply.status, fields["Code"]) == (403, "SignatureDoesNotMatch")
    # AWS's order (its answers quoted in peers' tests and LocalStack's recordings).
    assert list(fields) == [
        "Code",
        "Message",
        "AWSAccessKeyId",
        "StringToSign",
        "SignatureProvided",
        "StringToSignBytes",
        "CanonicalRequest",
        "CanonicalRequestBytes",
        "RequestId",
        "HostId",
    ]
    assert fields["AWSAccessKeyId"] == ACCESS_KEY
    assert fields["StringToSignBytes"] == fields["StringToSign"].encode().hex(" ")
    assert fields["StringToSignBytes"].startswith("41 57 53 34 2d")  # "AWS4-"
    assert fields["CanonicalRequestBytes"] == fields["CanonicalRequest"].encode().hex(" ")
    assert fields["CanonicalRequest"].startswith(f"GET\n/{bucket}/k\n")
    assert_ids(reply, fields)


def test_unsigned_amz_header_on_a_presigned_url(gateway, bucket):
    request = AWSRequest(method="PUT", url=f"{gateway.url}/{bucket}/p")
    S3SigV4QueryAuth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1", 60).add_auth(request)
    reply = raw.send(
        "PUT",
        request.prepare().url,
        {"x-amz-meta-added": "1", "x-amz-acl": "private"},
        b"body",
    )
    fields = error_fields(reply)
    assert (reply.status, fields["Code"]) == (403, "AccessDenied")
    assert fields["Message"] == "There were headers present in the request which were not signed"
    assert fields["HeadersNotSigned"] == "x-amz-acl, x-amz-meta-added"
    assert list(fields) == ["Code", "Message", "HeadersNotSigned", "RequestId", "HostId"]
    assert_ids(reply, fields)


def test_ids_differ_on_success_head_and_delete_marker_answers(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert_ids(raw.signed("GET", f"{gateway.url}/{bucket}/k"))
    assert_ids(raw.signed("HEAD", f"{gateway.url}/{bucket}/missing"))
    # A latest delete marker is answered with its own headers (another renderer).
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.delete_object(Bucket=bucket, Key="k")
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/k")
    fields = error_fields(reply)
    assert (reply.status, fields["Code"], fields["Key"]) == (404, "NoSuchKey", "k")
    assert reply.headers["x-amz-delete-marker"] == "true"
    assert "Resource" not in fields
    assert_ids(reply, fields)


def test_ids_differ_on_a_request_the_parser_refuses(gateway):
    host, port = gateway.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(b"G@T / HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    pairs = [line.decode().split(": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line]
    headers = {name.lower(): value for name, value in pairs}
    reply = raw.Reply(400, headers, body)
    fields = error_fields(reply)
    assert fields["Code"] == "BadRequest"
    assert_ids(reply, fields)
