"""CORS against the running gateway: the configuration operations, the unsigned preflight
OPTIONS, and the headers actual cross-origin requests get (AWS's answers, as recorded in
LocalStack's test_s3_cors snapshots)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests import raw

RULES = {
    "CORSRules": [
        {
            "AllowedOrigins": ["http://app.example"],
            "AllowedMethods": ["GET", "PUT"],
            "AllowedHeaders": ["x-amz-*", "content-type"],
            "ExposeHeaders": ["ETag", "x-amz-version-id"],
            "MaxAgeSeconds": 3000,
        },
        {"AllowedOrigins": ["*"], "AllowedMethods": ["HEAD"]},
    ]
}


def error(reply: raw.Reply, tag: str) -> str | None:
    start = reply.body.find(f"<{tag}>".encode())
    if start < 0:
        return None
    return reply.body[start + len(tag) + 2 : reply.body.find(f"</{tag}>".encode())].decode()


def cors_headers(reply: raw.Reply) -> dict[str, str]:
    return {
        k: v for k, v in reply.headers.items() if k.startswith("access-control-") or k == "vary"
    }


def test_configuration_operations(s3, bucket):
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_cors(Bucket=bucket)
    assert exc.value.response["Error"]["Code"] == "NoSuchCORSConfiguration"
    assert exc.value.response["Error"]["Message"] == "The CORS configuration does not exist"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    # Deleting what is not there is a 204 too.
    assert s3.delete_bucket_cors(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 204
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == RULES["CORSRules"]
    s3.delete_bucket_cors(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_cors(Bucket=bucket)
    assert exc.value.response["Error"]["Code"] == "NoSuchCORSConfiguration"


def test_invalid_configurations_change_nothing(s3, bucket):
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    bad = [
        (
            {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["MYMETHOD"]}]},
            "InvalidRequest",
        ),
        (
            {"CORSRules": [{"AllowedOrigins": ["*.*.a"], "AllowedMethods": ["GET"]}]},
            "InvalidRequest",
        ),
        ({"CORSRules": []}, "MalformedXML"),
    ]
    for config, code in bad:
        with pytest.raises(ClientError) as exc:
            s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=config)
        assert exc.value.response["Error"]["Code"] == code
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == RULES["CORSRules"]


def test_preflight(gateway, s3, bucket):
    url = f"{gateway.url}/{bucket}/some/key"
    allowed = {"Origin": "http://app.example", "Access-Control-Request-Method": "PUT"}

    reply = raw.send("OPTIONS", url)
    assert (reply.status, reply.code) == (400, "BadRequest")
    assert error(reply, "Message") == "Insufficient information. Origin request header needed."

    reply = raw.send("OPTIONS", f"{gateway.url}/no-such-bucket-here/k", allowed)
    assert (reply.status, reply.code) == (403, "AccessForbidden")
    assert error(reply, "Message") == "CORSResponse: Bucket not found"

    reply = raw.send("OPTIONS", url, allowed)
    assert (reply.status, reply.code) == (403, "AccessForbidden")
    assert error(reply, "Message") == "CORSResponse: CORS is not enabled for this bucket."
    assert (error(reply, "Method"), error(reply, "ResourceType")) == ("PUT", "BUCKET")

    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    reply = raw.send(
        "OPTIONS", url, {**allowed, "Access-Control-Request-Headers": "X-Amz-Date,Content-Type"}
    )
    assert reply.status == 200
    assert reply.body == b""
    assert cors_headers(reply) == {
        "access-control-allow-origin": "http://app.example",
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET, PUT",
        "access-control-allow-headers": "x-amz-date, content-type",
        "access-control-expose-headers": "ETag, x-amz-version-id",
        "access-control-max-age": "3000",
        "vary": "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    }
    # The second rule: any origin, HEAD only; `*` answered, no credentials.
    reply = raw.send(
        "OPTIONS", url, {"Origin": "http://other", "Access-Control-Request-Method": "HEAD"}
    )
    assert reply.status == 200
    assert reply.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in reply.headers

    refused = [
        {"Origin": "http://other", "Access-Control-Request-Method": "PUT"},
        {"Origin": "http://app.example", "Access-Control-Request-Method": "DELETE"},
        {**allowed, "Access-Control-Request-Headers": "authorization"},
    ]
    for headers in refused:
        reply = raw.send("OPTIONS", url, headers)
        assert (reply.status, reply.code) == (403, "AccessForbidden"), headers
        assert error(reply, "Message").startswith("CORSResponse: This CORS request is not allowed")
        assert error(reply, "ResourceType") == "OBJECT"
        assert cors_headers(reply) == {}

    # A presigned URL's query is no credential a preflight needs or checks.
    presigned = s3.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "k"}, ExpiresIn=60
    )
    reply = raw.send("OPTIONS", presigned, allowed)
    assert reply.status == 200
    assert reply.headers["access-control-allow-origin"] == "http://app.example"


def test_actual_requests_get_the_matched_rules_headers(gateway, s3, bucket):
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    # Over the inline size: a streamed answer, whose headers go out before the body.
    s3.put_object(Bucket=bucket, Key="big", Body=b"x" * 300_000)
    origin = {"Origin": "http://app.example"}
    expected = {
        "access-control-allow-origin": "http://app.example",
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET, PUT",
        "access-control-expose-headers": "ETag, x-amz-version-id",
        "access-control-max-age": "3000",
        "vary": "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    }
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/big", origin)
    assert reply.status == 200 and len(reply.body) == 300_000
    assert cors_headers(reply) == expected
    # Errors too: a browser reads nothing of an answer without them.
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/missing", origin)
    assert (reply.status, reply.code) == (404, "NoSuchKey")
    assert cors_headers(reply) == expected
    reply = raw.send("GET", f"{gateway.url}/{bucket}/big", origin)  # no signature
    assert reply.status == 403
    assert cors_headers(reply) == expected
    reply = raw.signed("PUT", f"{gateway.url}/{bucket}/new", origin, b"data")
    assert reply.status == 200
    assert cors_headers(reply) == expected
    # No rule for this origin and method, or no Origin at all: the answer as it is.
    for headers in ({"Origin": "http://other"}, {}, {"Origin": "http://app.example.evil"}):
        reply = raw.signed("GET", f"{gateway.url}/{bucket}/big", headers)
        assert reply.status == 200
        assert cors_headers(reply) == {}
    reply = raw.signed("DELETE", f"{gateway.url}/{bucket}/new", origin)
    assert reply.status == 204
    assert cors_headers(reply) == {}
    # The any-origin HEAD rule.
    reply = raw.signed("HEAD", f"{gateway.url}/{bucket}/big", {"Origin": "http://other"})
    assert reply.headers["access-control-allow-origin"] == "*"


def test_no_configuration_no_headers(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    reply = raw.signed("GET", f"{gateway.url}/{bucket}/k", {"Origin": "http://app.example"})
    assert reply.status == 200
    assert cors_headers(reply) == {}
