"""PostObject (browser form uploads) against the running gateway: boto3's presigned POST
(SigV4), a SigV2 form as s3-tests signs them, the policy's checks with AWS's errors, and what
the gateway stored."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import os
import secrets
import zlib

import pytest
from botocore.exceptions import ClientError

from tests import raw
from tests.server import ACCESS_KEY, SECRET_KEY

Field = tuple[str, str | bytes]


def multipart(fields: list[Field], filename: str = "upload.bin") -> tuple[str, bytes]:
    """A form body in the order given; the field named `file` is sent as a file."""
    boundary = "----s3gw" + secrets.token_hex(8)
    out = []
    for name, value in fields:
        data = value.encode() if isinstance(value, str) else value
        disposition = f'form-data; name="{name}"'
        extra = ""
        if name.lower() == "file":
            disposition += f'; filename="{filename}"'
            extra = "Content-Type: application/octet-stream\r\n"
        out.append(
            f"--{boundary}\r\nContent-Disposition: {disposition}\r\n{extra}\r\n".encode()
            + data
            + b"\r\n"
        )
    out.append(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", b"".join(out)


def post(url: str, fields: list[Field], filename: str = "upload.bin") -> raw.Reply:
    content_type, body = multipart(fields, filename)
    return raw.send("POST", url, {"Content-Type": content_type}, body)


def message(reply: raw.Reply) -> str:
    start = reply.body.find(b"<Message>")
    return reply.body[start + 9 : reply.body.find(b"</Message>")].decode()


@pytest.fixture(scope="module")
def s3v4(gateway):
    # boto3 signs a presigned POST with SigV2 unless told otherwise.
    return gateway.client(signature_version="s3v4")


def presigned(s3, bucket: str, key: str, fields=None, conditions=None, expires: int = 600):
    return s3.generate_presigned_post(
        bucket, key, Fields=fields, Conditions=conditions, ExpiresIn=expires
    )


def form_of(signed: dict, file: bytes, **extra: str) -> list[Field]:
    return [*signed["fields"].items(), *extra.items(), ("file", file)]


def v2_form(bucket: str, conditions: list, fields: list[Field], expires_in: int = 600):
    """A SigV2 form, signed as s3-tests signs them (HMAC-SHA1 of the base64 policy)."""
    expiration = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expires_in)
    document = {"expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ"), "conditions": conditions}
    policy = base64.b64encode(json.dumps(document).encode()).decode()
    signature = base64.b64encode(
        hmac.new(SECRET_KEY.encode(), policy.encode(), hashlib.sha1).digest()
    ).decode()
    return [
        *fields[:-1],
        ("AWSAccessKeyId", ACCESS_KEY),
        ("policy", policy),
        ("signature", signature),
        fields[-1],
    ]


def test_boto3_presigned_post_sigv2(s3, bucket):
    signed = presigned(s3, bucket, "v2")
    assert "signature" in signed["fields"]
    reply = post(signed["url"], form_of(signed, b"two"))
    assert reply.status == 204, reply.body
    assert s3.get_object(Bucket=bucket, Key="v2")["Body"].read() == b"two"


def test_boto3_presigned_post_end_to_end(s3, s3v4, bucket):
    data = os.urandom(1000)
    signed = presigned(s3v4, bucket, "uploads/${filename}")
    assert signed["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256"
    reply = post(signed["url"], form_of(signed, data), filename="C:\\docs\\photo.jpg")
    assert reply.status == 204, reply.body
    assert reply.body == b""
    etag = f'"{hashlib.md5(data).hexdigest()}"'
    assert reply.headers["etag"] == etag
    assert reply.headers["location"].endswith(f"/{bucket}/uploads/photo.jpg")
    got = s3.get_object(Bucket=bucket, Key="uploads/photo.jpg")
    assert got["Body"].read() == data
    assert got["ETag"] == etag
    assert got["ContentType"] == "binary/octet-stream"


def test_a_large_file_streams_and_gets_putobjects_etag(s3, s3v4, bucket):
    data = os.urandom(9 * 1024 * 1024 + 17)  # several store batches, a boundary split anywhere
    signed = presigned(s3v4, bucket, "big")
    reply = post(signed["url"], form_of(signed, data))
    assert reply.status == 204, reply.body
    s3.put_object(Bucket=bucket, Key="same-by-put", Body=data)
    head = s3.head_object(Bucket=bucket, Key="big")
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == s3.head_object(Bucket=bucket, Key="same-by-put")["ETag"]
    assert hashlib.sha256(s3.get_object(Bucket=bucket, Key="big")["Body"].read()).digest() == (
        hashlib.sha256(data).digest()
    )


def test_success_status_and_redirect(s3, s3v4, bucket):
    signed = presigned(
        s3v4, bucket, "k201", {"success_action_status": "201"}, [{"success_action_status": "201"}]
    )
    reply = post(signed["url"], form_of(signed, b"abc"))
    assert reply.status == 201
    etag = '"900150983cd24fb0d6963f7d28e17f72"'
    assert b"<Bucket>" + bucket.encode() + b"</Bucket><Key>k201</Key>" in reply.body
    assert b"<ETag>&quot;900150983cd24fb0d6963f7d28e17f72&quot;</ETag>" in reply.body or (
        f"<ETag>{etag}</ETag>".encode() in reply.body
    )
    assert reply.body.startswith(b"<?xml") and b"<PostResponse" in reply.body
    # Without a namespace, as AWS sends it: a plain find("Key") reads it.
    from xml.etree import ElementTree

    assert ElementTree.fromstring(reply.body).findtext("Key") == "k201"

    signed = presigned(
        s3v4, bucket, "k200", {"success_action_status": "200"}, [{"success_action_status": "200"}]
    )
    reply = post(signed["url"], form_of(signed, b"abc"))
    assert (reply.status, reply.body) == (200, b"")

    target = "http://app.example/done?x=1"
    signed = presigned(
        s3v4,
        bucket,
        "k303",
        {"success_action_redirect": target},
        [{"success_action_redirect": target}],
    )
    reply = post(signed["url"], form_of(signed, b"abc"))
    assert reply.status == 303
    assert reply.headers["location"] == (
        f"{target}&bucket={bucket}&key=k303&etag=%22900150983cd24fb0d6963f7d28e17f72%22"
    )
    for key in ("k201", "k200", "k303"):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"abc"


@pytest.mark.parametrize("name", ["success_action_redirect", "redirect"])
@pytest.mark.parametrize("breaker", ["\r", "\n", "\r\n"], ids=["cr", "lf", "crlf"])
def test_a_redirect_with_a_line_break_is_refused_before_storing(gateway, s3, bucket, name, breaker):
    # A Location header cannot hold it: the object used to be stored and the connection
    # dropped with a traceback. The form is refused before its file is read.
    target = f"http://app.example/done{breaker}Set-Cookie: a=b"
    conditions = [["starts-with", "$key", ""], ["starts-with", f"${name}", ""]]
    form = v2_form(bucket, conditions, [("key", "k"), (name, target), ("file", "x")])
    before = len(gateway.log)
    reply = post(f"{gateway.url}/{bucket}", form)
    assert (reply.status, reply.code) == (400, "InvalidArgument"), reply.body
    assert f"<ArgumentName>{name}</ArgumentName>".encode() in reply.body
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    logged = "".join(gateway.log[before:])
    assert "Traceback" not in logged, logged


def test_fields_set_metadata_and_fields_after_the_file_are_ignored(s3, s3v4, bucket):
    signed = presigned(
        s3v4,
        bucket,
        "meta",
        {"Content-Type": "text/plain", "x-amz-meta-colour": "blue", "Cache-Control": "no-cache"},
        [
            {"Content-Type": "text/plain"},
            {"x-amz-meta-colour": "blue"},
            ["starts-with", "$Cache-Control", ""],
        ],
    )
    fields = [*form_of(signed, b"hello"), ("x-amz-meta-after", "ignored")]
    reply = post(signed["url"], fields)
    assert reply.status == 204, reply.body
    head = s3.head_object(Bucket=bucket, Key="meta")
    assert head["ContentType"] == "text/plain"
    assert head["Metadata"] == {"colour": "blue"}
    assert head["CacheControl"] == "no-cache"


def test_metadata_fields_are_rfc_2047_decoded_as_headers_are(s3, s3v4, bucket):
    """A form's x-amz-meta-* fields are stored as a PUT's headers are: encoded words decoded,
    and GET and HEAD send the non-ASCII value back as one encoded word (UsingMetadata.html)."""
    fields = {"x-amz-meta-raw": "caf\xe9", "x-amz-meta-encoded": "=?UTF-8?Q?caf=C3=A9?="}
    signed = presigned(s3v4, bucket, "meta", fields, [{k: v} for k, v in fields.items()])
    reply = post(signed["url"], form_of(signed, b"hello"))
    assert reply.status == 204, reply.body
    word = "=?UTF-8?B?Y2Fmw6k=?="
    assert s3.head_object(Bucket=bucket, Key="meta")["Metadata"] == {"raw": word, "encoded": word}
    assert s3.get_object(Bucket=bucket, Key="meta")["Metadata"] == {"raw": word, "encoded": word}


def test_a_checksum_field_is_verified(s3, s3v4, bucket):
    data = b"checked"
    good = base64.b64encode(hashlib.sha256(data).digest()).decode()
    signed = presigned(
        s3v4, bucket, "sum", {"x-amz-checksum-sha256": good}, [{"x-amz-checksum-sha256": good}]
    )
    reply = post(signed["url"], form_of(signed, data))
    assert reply.status == 204, reply.body
    assert reply.headers["x-amz-checksum-sha256"] == good
    got = s3.head_object(Bucket=bucket, Key="sum", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == good

    bad = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    signed = presigned(
        s3v4, bucket, "badsum", {"x-amz-checksum-sha256": bad}, [{"x-amz-checksum-sha256": bad}]
    )
    reply = post(signed["url"], form_of(signed, data))
    assert (reply.status, reply.code) == (400, "BadDigest")
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="badsum")


def test_a_checksum_algorithm_field_with_its_value_is_verified(s3, s3v4, bucket):
    # The form minio-go's PostPolicy.SetChecksum sends: the algorithm's name beside its value.
    data = b"named"
    good = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    fields = {"x-amz-checksum-algorithm": "CRC32", "x-amz-checksum-crc32": good}
    signed = presigned(s3v4, bucket, "named", fields, [{k: v} for k, v in fields.items()])
    reply = post(signed["url"], form_of(signed, data))
    assert reply.status == 204, reply.body
    assert reply.headers["x-amz-checksum-crc32"] == good
    got = s3.head_object(Bucket=bucket, Key="named", ChecksumMode="ENABLED")
    assert (got["ChecksumCRC32"], got["ChecksumType"]) == (good, "FULL_OBJECT")


def test_a_checksum_algorithm_field_alone_gets_that_checksum(s3, s3v4, bucket):
    data = b"computed for the form"
    fields = {"x-amz-checksum-algorithm": "sha1"}
    signed = presigned(s3v4, bucket, "alone", fields, [fields])
    reply = post(signed["url"], form_of(signed, data))
    assert reply.status == 204, reply.body
    want = base64.b64encode(hashlib.sha1(data).digest()).decode()
    assert reply.headers["x-amz-checksum-sha1"] == want
    got = s3.head_object(Bucket=bucket, Key="alone", ChecksumMode="ENABLED")
    assert (got["ChecksumSHA1"], got["ChecksumType"]) == (want, "FULL_OBJECT")
    assert "ChecksumCRC64NVME" not in got


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # Another algorithm than the value's: refused as PutObject refuses it.
        ("SHA256", "crc32"),
        ("MD5", None),  # not an algorithm S3 knows
    ],
)
def test_a_wrong_checksum_algorithm_field_is_refused(s3, s3v4, bucket, name, value):
    data = b"refused"
    fields = {"x-amz-checksum-algorithm": name}
    if value == "crc32":
        fields["x-amz-checksum-crc32"] = base64.b64encode(
            zlib.crc32(data).to_bytes(4, "big")
        ).decode()
    signed = presigned(s3v4, bucket, "refused", fields, [{k: v} for k, v in fields.items()])
    reply = post(signed["url"], form_of(signed, data))
    assert (reply.status, reply.code) == (400, "InvalidRequest"), reply.body
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="refused")


def test_a_checksum_field_outside_the_policy_is_an_extra_input_field(s3v4, bucket):
    # AWS's answer to a form whose policy does not name its x-amz-checksum-sha256 field, as a
    # public report of it quotes: 403 AccessDenied "Invalid according to Policy: Extra input
    # fields: x-amz-checksum-sha256". Every form field must be covered by a condition
    # (sigv4-HTTPPOSTConstructPolicy.html); the checksum fields are no exception.
    data = b"uncovered"
    value = base64.b64encode(hashlib.sha256(data).digest()).decode()
    signed = presigned(s3v4, bucket, "uncovered")
    reply = post(signed["url"], form_of(signed, data, **{"x-amz-checksum-sha256": value}))
    assert (reply.status, reply.code) == (403, "AccessDenied")
    extra = "Invalid according to Policy: Extra input fields: x-amz-checksum-sha256"
    assert message(reply) == extra


def test_sigv2_form_as_s3_tests_signs_it(gateway, s3, bucket):
    # s3-tests' buckets take ACLs (its runner's legacy defaults): an `acl` field is allowed.
    s3.delete_bucket_ownership_controls(Bucket=bucket)
    conditions = [
        {"bucket": bucket},
        ["starts-with", "$key", "foo"],
        {"acl": "private"},
        ["starts-with", "$Content-Type", "text/plain"],
        ["content-length-range", 0, 1024],
    ]
    fields: list[Field] = [
        ("key", "foo.txt"),
        ("acl", "private"),
        ("Content-Type", "text/plain"),
        ("file", "bar"),
    ]
    reply = post(f"{gateway.url}/{bucket}", v2_form(bucket, conditions, fields))
    assert reply.status == 204, reply.body
    assert s3.get_object(Bucket=bucket, Key="foo.txt")["Body"].read() == b"bar"


@pytest.mark.parametrize(
    ("conditions", "fields", "status", "code", "text"),
    [
        (
            [["starts-with", "$key", "foo"]],
            [("key", "bar.txt"), ("file", "x")],
            403,
            "AccessDenied",
            'Invalid according to Policy: Policy Condition failed: ["starts-with", "$key", "foo"]',
        ),
        (
            [["starts-with", "$key", ""]],
            [("key", "k"), ("Content-Type", "text/plain"), ("file", "x")],
            403,
            "AccessDenied",
            "Invalid according to Policy: Extra input fields: content-type",
        ),
        (
            [["starts-with", "$key", ""], ["content-length-range", 0, 3]],
            [("key", "k"), ("file", "four")],
            400,
            "EntityTooLarge",
            "Your proposed upload exceeds the maximum allowed size",
        ),
        (
            [["starts-with", "$key", ""], ["content-length-range", 10, 30]],
            [("key", "k"), ("file", "four")],
            400,
            "EntityTooSmall",
            None,
        ),
        (
            [{"bucket": "another-bucket"}, ["starts-with", "$key", ""]],
            [("key", "k"), ("file", "x")],
            403,
            "AccessDenied",
            "Invalid according to Policy: Policy Condition failed: "
            '["eq", "$bucket", "another-bucket"]',
        ),
        (
            [{"key": "k", "acl": "private"}],
            [("key", "k"), ("file", "x")],
            400,
            "InvalidPolicyDocument",
            "Invalid Policy: Invalid Simple-Condition: Simple-Conditions must have exactly one "
            "property specified.",
        ),
    ],
)
def test_policy_refusals_store_nothing(gateway, s3, bucket, conditions, fields, status, code, text):
    reply = post(f"{gateway.url}/{bucket}", v2_form(bucket, conditions, fields))
    assert (reply.status, reply.code) == (status, code), reply.body
    if text is not None:
        assert message(reply) == text
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_expired_policy(gateway, s3, bucket):
    form = v2_form(bucket, [["starts-with", "$key", ""]], [("key", "k"), ("file", "x")], -5)
    reply = post(f"{gateway.url}/{bucket}", form)
    assert (reply.status, reply.code) == (403, "AccessDenied")
    assert message(reply) == "Invalid according to Policy: Policy expired."


def test_malformed_forms(gateway, s3, s3v4, bucket):
    url = f"{gateway.url}/{bucket}"
    signed = presigned(s3v4, bucket, "k")
    fields = dict(signed["fields"])

    reply = raw.send("POST", url, {"Content-Type": "text/plain"}, b"key=k")
    assert (reply.status, reply.code) == (412, "PreconditionFailed")
    assert b"<Condition>Bucket POST must be of the enclosure-type multipart/form-data" in reply.body

    # A signature field missing: AWS names it (with its two spaces).
    partial = [(n, v) for n, v in fields.items() if n != "x-amz-signature"] + [("file", "x")]
    reply = post(url, partial)
    assert (reply.status, reply.code) == (400, "InvalidArgument")
    assert message(reply) == (
        "Bucket POST must contain a field named 'X-Amz-Signature'.  If it is specified, "
        "please check the order of the fields."
    )
    no_key = [(n, v) for n, v in fields.items() if n != "key"] + [("file", "x")]
    reply = post(url, no_key)
    assert (reply.status, reply.code) == (400, "InvalidArgument")

    wrong = {**fields, "x-amz-signature": "0" * 64}
    reply = post(url, [*wrong.items(), ("file", "x")])
    assert (reply.status, reply.code) == (403, "SignatureDoesNotMatch")

    # The file after every field, or nothing is stored: no file at all.
    reply = post(url, list(fields.items()))
    assert (reply.status, reply.code) == (400, "IncorrectNumberOfFilesInPostRequest")

    big = [("x-ignore-padding", "p" * 21 * 1024), *fields.items(), ("file", "x")]
    reply = post(url, big)
    assert (reply.status, reply.code) == (400, "MaxPostPreDataLengthExceededError")

    # A body cut off inside the file: nothing stored.
    content_type, body = multipart([*fields.items(), ("file", b"y" * 5000)])
    reply = raw.send("POST", url, {"Content-Type": content_type}, body[:-200])
    assert reply.status == 400
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0

    reply = post(url, [("key", "k"), ("policy", fields["policy"]), ("file", "x")])
    assert (reply.status, reply.code) == (403, "AccessDenied")


def test_anonymous_forms_are_refused(gateway, s3, bucket):
    # Until the authorisation work lets public buckets take anonymous writes, a bucket is
    # its owner's alone.
    reply = post(f"{gateway.url}/{bucket}", [("key", "k"), ("file", "x")])
    assert (reply.status, reply.code) == (403, "AccessDenied")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_minio_presigned_post_policy(gateway, s3, bucket):
    # minio-py is in the test extra: missing, the test fails rather than skips.
    import minio
    from minio.datatypes import PostPolicy

    host = gateway.url.removeprefix("http://")
    client = minio.Minio(host, ACCESS_KEY, SECRET_KEY, secure=False, region="us-east-1")
    policy = PostPolicy(bucket, dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10))
    policy.add_equals_condition("key", "from-minio")
    form = client.presigned_post_policy(policy)
    reply = post(f"{gateway.url}/{bucket}", [*form.items(), ("key", "from-minio"), ("file", "m")])
    assert reply.status == 204, reply.body
    assert s3.get_object(Bucket=bucket, Key="from-minio")["Body"].read() == b"m"


def test_a_tagging_field_tags_the_object(s3, s3v4, bucket):
    document = "<Tagging><TagSet><Tag><Key>team</Key><Value>web</Value></Tag></TagSet></Tagging>"
    signed = presigned(s3v4, bucket, "tagged", {"tagging": document}, [{"tagging": document}])
    reply = post(signed["url"], form_of(signed, b"body"))
    assert reply.status == 204, reply.body
    tags = s3.get_object_tagging(Bucket=bucket, Key="tagged")["TagSet"]
    assert tags == [{"Key": "team", "Value": "web"}]
    # Not a <Tagging> document: MalformedXML, and nothing stored.
    signed = presigned(s3v4, bucket, "bad", {"tagging": "team=web"}, [{"tagging": "team=web"}])
    reply = post(signed["url"], form_of(signed, b"body"))
    assert reply.status == 400 and b"MalformedXML" in reply.body
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["tagged"]


def test_forms_are_encrypted_as_puts_are(s3, s3v4, bucket):
    fields = {"x-amz-server-side-encryption": "AES256"}
    signed = presigned(s3v4, bucket, "sse", fields, [fields])
    reply = post(signed["url"], form_of(signed, b"secret body"))
    assert reply.status == 204, reply.body
    assert reply.headers["x-amz-server-side-encryption"] == "AES256"
    assert s3.head_object(Bucket=bucket, Key="sse")["ServerSideEncryption"] == "AES256"
    # The bucket's default applies to a form that asks nothing.
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    signed = presigned(s3v4, bucket, "default")
    assert post(signed["url"], form_of(signed, b"body")).status == 204
    got = s3.get_object(Bucket=bucket, Key="default")
    assert got["ServerSideEncryption"] == "AES256" and got["Body"].read() == b"body"


@pytest.mark.parametrize(
    "condition",
    [
        {"Bool": {"aws:SecureTransport": "false"}},
        {"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
        {"StringEquals": {"s3:x-amz-acl": "private"}},
        {"StringEquals": {"s3:signatureversion": "AWS4-HMAC-SHA256"}},
    ],
)
def test_a_policys_conditions_judge_a_form_as_the_put_it_is(s3, s3v4, bucket, condition):
    """A bucket policy's Deny refuses a form upload on the same condition values a PutObject
    from the same client would carry (address, transport, the form's fields as headers, how
    it was signed): nothing stored. Without the Deny the same form stores the object."""
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:PutObject",
        "Resource": f"arn:aws:s3:::{bucket}/*",
        "Condition": condition,
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": [deny]}))
    try:
        signed = presigned(
            s3v4, bucket, "denied", fields={"acl": "private"}, conditions=[{"acl": "private"}]
        )
        reply = post(signed["url"], form_of(signed, b"x"))
        assert (reply.status, reply.code) == (403, "AccessDenied"), reply.body
        assert s3.list_objects_v2(Bucket=bucket, Prefix="denied")["KeyCount"] == 0
    finally:
        s3.delete_bucket_policy(Bucket=bucket)
    reply = post(signed["url"], form_of(signed, b"x"))
    assert reply.status == 204, reply.body
    assert s3.get_object(Bucket=bucket, Key="denied")["Body"].read() == b"x"
