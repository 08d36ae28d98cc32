"""Authentication failures seen through real clients: each gets AWS's code, nothing changes."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests import awscli, raw
from tests.server import ACCESS_KEY, SECRET_KEY


def error_code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_wrong_secret(gateway, bucket):
    bad = gateway.client(secret_key="wrong-secret")
    with pytest.raises(ClientError) as exc:
        bad.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert error_code(exc) == "SignatureDoesNotMatch"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert gateway.client().list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_unknown_access_key(gateway, bucket):
    bad = gateway.client(access_key="AKIDUNKNOWN000000000")
    with pytest.raises(ClientError) as exc:
        bad.list_objects_v2(Bucket=bucket)
    assert error_code(exc) == "InvalidAccessKeyId"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_anonymous_is_denied(gateway, bucket, s3):
    s3.put_object(Bucket=bucket, Key="k", Body=b"secret")
    for method in ("GET", "PUT", "DELETE", "HEAD"):
        reply = raw.send(
            method, f"{gateway.url}/{bucket}/k", body=b"x" if method == "PUT" else None
        )
        assert reply.status == 403
        if method != "HEAD":
            assert reply.code == "AccessDenied"
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"secret"


def test_presigned_get_and_put(gateway, bucket):
    import urllib.request

    s3 = gateway.client(signature_version="s3v4")

    put_url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=60
    )
    req = urllib.request.Request(put_url, data=b"presigned body", method="PUT")
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 200
    get_url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=60
    )
    with urllib.request.urlopen(get_url) as resp:
        assert resp.read() == b"presigned body"
    tampered = get_url.replace("X-Amz-Expires=60", "X-Amz-Expires=61")
    reply = raw.send("GET", tampered)
    assert reply.status == 403 and reply.code == "SignatureDoesNotMatch"


def test_presigned_expiry_out_of_range(gateway, bucket):
    """X-Amz-Expires=0 has expired when signed: 403. Past a week or negative is malformed:
    400 AuthorizationQueryParametersError (AWS's answers, ceph/s3-tests#462)."""
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    gateway.client().put_object(Bucket=bucket, Key="p", Body=b"x")
    for expires, status, code in (
        (0, 403, "AccessDenied"),
        (604801, 400, "AuthorizationQueryParametersError"),
        (-7, 400, "AuthorizationQueryParametersError"),
    ):
        # botocore's own signer: the CRT one boto3 may pick refuses an expiry below 1.
        request = AWSRequest(method="GET", url=f"{gateway.url}/{bucket}/p")
        credentials = Credentials(ACCESS_KEY, SECRET_KEY)
        S3SigV4QueryAuth(credentials, "s3", "us-east-1", expires=expires).add_auth(request)
        reply = raw.send("GET", request.prepare().url)
        assert (reply.status, reply.code) == (status, code), expires


def test_error_document_shape(gateway, bucket):
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/missing")
    assert reply.status == 404
    assert reply.headers["content-type"] == "application/xml"
    assert reply.code == "NoSuchKey"
    request_id = reply.headers["x-amz-request-id"]
    assert f"<RequestId>{request_id}</RequestId>".encode() in reply.body
    assert b"<Resource>" not in reply.body  # AWS's errors carry none
    assert ACCESS_KEY.encode() not in reply.body


def test_default_boto3_presigned_url_is_v2_and_works(gateway, s3, bucket):
    import urllib.request

    s3.put_object(Bucket=bucket, Key="v2 key/ü", Body=b"signed the old way")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "v2 key/ü"}, ExpiresIn=60
    )
    assert "AWSAccessKeyId=" in url and "Signature=" in url
    with urllib.request.urlopen(url) as resp:
        assert resp.read() == b"signed the old way"
    reply = raw.send("GET", url.replace("Expires=", "Expires=1"))
    assert reply.status == 403


@pytest.mark.parametrize(
    "config", ["", "[default]\ns3 =\n    signature_version = s3v4\n"], ids=["default", "s3v4"]
)
def test_aws_cli_presign(gateway, s3, bucket, config):
    import urllib.request

    s3.put_object(Bucket=bucket, Key="shared file.txt", Body=b"presigned by aws-cli")
    url = awscli.ok(
        gateway.url, "s3", "presign", f"s3://{bucket}/shared file.txt", config=config
    ).strip()
    assert ("X-Amz-Signature=" in url) == bool(config)
    with urllib.request.urlopen(url) as resp:
        assert resp.read() == b"presigned by aws-cli"


def test_presigned_head_delete_and_upload_part(gateway, bucket):
    import urllib.request

    s3 = gateway.client(signature_version="s3v4")
    s3.put_object(Bucket=bucket, Key="p", Body=b"12345")

    def call(method: str, operation: str, data: bytes | None = None, **params) -> int:
        url = s3.generate_presigned_url(
            operation, Params={"Bucket": bucket, **params}, ExpiresIn=60
        )
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method)) as r:
            return r.status

    assert call("HEAD", "head_object", Key="p") == 200
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    assert call("PUT", "upload_part", b"part", Key="mp", UploadId=upload, PartNumber=1) == 200
    assert [
        p["Size"] for p in s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload)["Parts"]
    ] == [4]
    assert call("DELETE", "delete_object", Key="p") == 204
    assert s3.list_objects_v2(Bucket=bucket, Prefix="p")["KeyCount"] == 0


def test_no_version_ids_without_versioning(s3, bucket):
    # rclone follows an x-amz-version-id with ?versionId= requests: never send one.
    responses = [
        s3.put_object(Bucket=bucket, Key="k", Body=b"x"),
        s3.get_object(Bucket=bucket, Key="k"),
        s3.head_object(Bucket=bucket, Key="k"),
        s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k"),
        s3.delete_object(Bucket=bucket, Key="c"),
    ]
    for response in responses:
        headers = response["ResponseMetadata"]["HTTPHeaders"]
        assert "x-amz-version-id" not in headers
        assert "x-amz-copy-source-version-id" not in headers


def test_boto3_with_signature_version_2(gateway):
    s3 = gateway.client(signature_version="s3")
    s3.create_bucket(Bucket="sigv2-bucket")
    s3.put_object(Bucket="sigv2-bucket", Key="a b", Body=b"v2")
    assert [o["Key"] for o in s3.list_objects(Bucket="sigv2-bucket")["Contents"]] == ["a b"]
    assert s3.get_object(Bucket="sigv2-bucket", Key="a b")["Body"].read() == b"v2"


def test_signature_covers_the_query_as_the_gateway_reads_it(gateway, s3, bucket):
    """A "+" in a query is a space. A request signed for prefix "a+b" (sent as a%2Bb) and
    replayed with a bare "+" asks for prefix "a b": it must not verify, or a signature would
    buy a listing it never covered."""
    for key in ("a b", "a+b"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    base = f"{gateway.url}/{bucket}"

    def listed(reply: raw.Reply) -> list[str]:
        assert reply.status == 200, reply.body
        return [part.split(b"</Key>")[0].decode() for part in reply.body.split(b"<Key>")[1:]]

    signed_plus = raw.sign("GET", f"{base}?prefix=a%2Bb")
    assert listed(raw.send("GET", f"{base}?prefix=a%2Bb", signed_plus)) == ["a+b"]
    replayed = raw.send("GET", f"{base}?prefix=a+b", signed_plus)
    assert (replayed.status, replayed.code) == (403, "SignatureDoesNotMatch")
    # Signed as the space it means, a bare "+" verifies and lists "a b".
    signed_space = raw.sign("GET", f"{base}?prefix=a%20b")
    assert listed(raw.send("GET", f"{base}?prefix=a+b", signed_space)) == ["a b"]

    # The same for presigned URLs, V4 and V2 (whose signed resource holds response-*).
    for version in ("s3v4", "s3"):
        client = gateway.client(signature_version=version)
        url = client.generate_presigned_url(
            "get_object",
            Params={"Bucket": bucket, "Key": "a b", "ResponseContentType": "text/a+b"},
            ExpiresIn=60,
        )
        assert "text%2Fa%2Bb" in url
        good = raw.send("GET", url)
        assert (good.status, good.headers["content-type"]) == (200, "text/a+b"), version
        bad = raw.send("GET", url.replace("text%2Fa%2Bb", "text%2Fa+b"))
        assert (bad.status, bad.code) == (403, "SignatureDoesNotMatch"), version
