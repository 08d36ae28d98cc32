"""Server-side encryption against the real gateway, with boto3, aws-cli and raw requests:
SSE-S3, SSE-KMS and SSE-C round trips (ranges, parts, multipart with the key on every part),
AWS's errors, bucket default encryption, copies between modes (metadata-only where the
ciphertext can be shared), fsck --deep, master key rotation, and no plaintext anywhere in the
data folder."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from tests import REPOSITORY, awscli, raw
from tests.server import GatewayProcess

MARKER = b"SSE-PLAINTEXT-MARKER-7f3a9c"
KEY_A = os.urandom(32)
KEY_B = os.urandom(32)
KMS_KEYS = """
[[key]]
id = "testkey-1"

[[key]]
id = "testkey-2"

[[key]]
id = "retired"
enabled = false
"""
ARN_1 = "arn:aws:kms:us-east-1:000000000000:key/testkey-1"
ARN_2 = "arn:aws:kms:us-east-1:000000000000:key/testkey-2"


def sse_c(key: bytes, copy: bool = False) -> dict[str, str]:
    """boto3's SSE-C arguments (it sends the key base64 and its MD5)."""
    prefix = "CopySource" if copy else ""
    return {f"{prefix}SSECustomerAlgorithm": "AES256", f"{prefix}SSECustomerKey": key}  # type: ignore[dict-item]


def c_headers(key: bytes) -> dict[str, str]:
    return {
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key": base64.b64encode(key).decode(),
        "x-amz-server-side-encryption-customer-key-md5": base64.b64encode(
            hashlib.md5(key).digest()
        ).decode(),
    }


def body(size: int) -> bytes:
    unit = MARKER + os.urandom(997)
    return (unit * (size // len(unit) + 1))[:size]


def code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    r = exc.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]


def start_gateway(
    root: Path,
    bucket_defaults: str = "legacy",
    kms_keys: str = KMS_KEYS,
    catalog: str | None = None,
    **env: str,
) -> GatewayProcess:
    """A gateway with the KMS keys above (or `kms_keys`) that takes SSE-C over HTTP (its
    tests' transport); its new buckets allow SSE-C unless `bucket_defaults` is "aws".
    `env`: more S3GW_* settings."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "kms.toml").write_text(kms_keys)
    options = ["--kms-keys", str(root / "kms.toml"), "--sse-c-over-http", "allow"]
    options += ["--bucket-defaults", bucket_defaults]
    return GatewayProcess(
        root / "data", env or None, *options, "--workers", "1", catalog=catalog
    ).start()


@pytest.fixture(scope="module")
def enc_gateway(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[GatewayProcess]:
    server = start_gateway(tmp_path_factory.mktemp("sse"), catalog=module_catalog)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3e(enc_gateway: GatewayProcess) -> Any:
    return enc_gateway.client()


_n = iter(range(10**6))


@pytest.fixture
def ebucket(s3e: Any) -> str:
    name = f"enc-{next(_n)}"
    s3e.create_bucket(Bucket=name)
    return name


def blob_files(gw: GatewayProcess) -> set[Path]:
    return {p for p in (gw.data / "blobs").rglob("*") if p.is_file()}


# --- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 13, 1000, 200_000, 3 * 1024 * 1024 + 17])
def test_sse_s3_round_trip_etag_is_md5_and_ranges(s3e: Any, ebucket: str, size: int) -> None:
    data = body(size)
    put = s3e.put_object(Bucket=ebucket, Key="k", Body=data, ServerSideEncryption="AES256")
    assert put["ServerSideEncryption"] == "AES256"
    assert put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    got = s3e.get_object(Bucket=ebucket, Key="k")
    assert got["ServerSideEncryption"] == "AES256"
    assert got["Body"].read() == data
    assert s3e.head_object(Bucket=ebucket, Key="k")["ServerSideEncryption"] == "AES256"
    for start, end in ((0, 0), (1, 70_000), (65_530, 65_545), (size - 3, size - 1)):
        if 0 <= start <= end < size:
            part = s3e.get_object(Bucket=ebucket, Key="k", Range=f"bytes={start}-{end}")
            assert part["Body"].read() == data[start : end + 1]
            assert part["ContentRange"] == f"bytes {start}-{end}/{size}"


def test_plain_objects_claim_no_encryption(s3e: Any, ebucket: str) -> None:
    put = s3e.put_object(Bucket=ebucket, Key="p", Body=b"plain")
    assert "ServerSideEncryption" not in put
    assert "ServerSideEncryption" not in s3e.get_object(Bucket=ebucket, Key="p")
    with pytest.raises(ClientError) as exc:
        s3e.get_bucket_encryption(Bucket=ebucket)
    assert code(exc) == (404, "ServerSideEncryptionConfigurationNotFoundError")


def test_sse_kms_round_trip_echoes_the_arn_and_etag_is_not_md5(s3e: Any, ebucket: str) -> None:
    data = body(300_000)
    put = s3e.put_object(
        Bucket=ebucket,
        Key="k",
        Body=data,
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId="testkey-1",
        BucketKeyEnabled=True,
    )
    assert put["ServerSideEncryption"] == "aws:kms"
    assert put["SSEKMSKeyId"] == ARN_1
    assert put["BucketKeyEnabled"] is True
    assert put["ETag"] != f'"{hashlib.md5(data).hexdigest()}"'
    again = s3e.put_object(
        Bucket=ebucket, Key="k2", Body=data, ServerSideEncryption="aws:kms", SSEKMSKeyId=ARN_1
    )
    assert again["ETag"] != put["ETag"]
    got = s3e.get_object(Bucket=ebucket, Key="k", Range="bytes=100-200000")
    assert got["SSEKMSKeyId"] == ARN_1
    assert got["Body"].read() == data[100:200001]
    # No key id: the default aws/s3 key.
    default = s3e.put_object(Bucket=ebucket, Key="d", Body=b"x", ServerSideEncryption="aws:kms")
    assert default["SSEKMSKeyId"].startswith("arn:aws:kms:us-east-1:000000000000:key/")
    # GET must not ask for an encryption (AWS: 400).
    with pytest.raises(ClientError) as exc:
        s3e.get_object(Bucket=ebucket, Key="k", SSECustomerAlgorithm="AES256", SSECustomerKey=KEY_A)
    assert code(exc)[0] == 400


def test_kms_errors(s3e: Any, ebucket: str, enc_gateway: GatewayProcess) -> None:
    url = f"{enc_gateway.url}/{ebucket}/x"
    for headers, expected in (
        (
            {
                "x-amz-server-side-encryption": "aws:kms",
                "x-amz-server-side-encryption-aws-kms-key-id": "nope",
            },
            "KMS.NotFoundException",
        ),
        (
            {
                "x-amz-server-side-encryption": "aws:kms",
                "x-amz-server-side-encryption-aws-kms-key-id": "retired",
            },
            "KMS.DisabledException",
        ),
        ({"x-amz-server-side-encryption-aws-kms-key-id": "testkey-1"}, "InvalidArgument"),
        (
            {
                "x-amz-server-side-encryption": "AES256",
                "x-amz-server-side-encryption-aws-kms-key-id": "testkey-1",
            },
            "InvalidArgument",
        ),
        ({"x-amz-server-side-encryption": "aes:kms"}, "InvalidArgument"),
        ({"x-amz-server-side-encryption": "aws:kms", **c_headers(KEY_A)}, "InvalidArgument"),
    ):
        reply = raw.signed("PUT", url, headers, b"data")
        assert (reply.status, reply.code) == (400, expected), headers
    assert s3e.list_objects_v2(Bucket=ebucket)["KeyCount"] == 0


def test_sse_c_round_trip_and_errors(s3e: Any, ebucket: str, enc_gateway: GatewayProcess) -> None:
    data = body(200_000)
    put = s3e.put_object(Bucket=ebucket, Key="c", Body=data, **sse_c(KEY_A))
    key_md5 = base64.b64encode(hashlib.md5(KEY_A).digest()).decode()
    assert put["SSECustomerAlgorithm"] == "AES256"
    assert put["SSECustomerKeyMD5"] == key_md5
    assert put["ETag"] != f'"{hashlib.md5(data).hexdigest()}"'
    got = s3e.get_object(Bucket=ebucket, Key="c", Range="bytes=5-70000", **sse_c(KEY_A))
    assert got["Body"].read() == data[5:70001]
    assert got["SSECustomerKeyMD5"] == key_md5
    assert s3e.head_object(Bucket=ebucket, Key="c", **sse_c(KEY_A))["ContentLength"] == len(data)
    # Without the key, and with another one (AWS: 400 and 403).
    with pytest.raises(ClientError) as exc:
        s3e.get_object(Bucket=ebucket, Key="c")
    assert code(exc) == (400, "InvalidRequest")
    with pytest.raises(ClientError) as exc:
        s3e.get_object(Bucket=ebucket, Key="c", **sse_c(KEY_B))
    assert code(exc) == (403, "AccessDenied")
    with pytest.raises(ClientError) as exc:
        s3e.head_object(Bucket=ebucket, Key="c", **sse_c(KEY_B))
    assert code(exc)[0] == 403
    # Malformed requests change nothing.
    url = f"{enc_gateway.url}/{ebucket}/bad"
    good = c_headers(KEY_A)
    no_algorithm = {k: v for k, v in good.items() if not k.endswith("algorithm")}
    no_md5 = {k: v for k, v in good.items() if not k.endswith("md5")}
    no_key = {k: v for k, v in good.items() if k.endswith("algorithm")}
    wrong_md5 = {
        **good,
        "x-amz-server-side-encryption-customer-key-md5": "AAAAAAAAAAAAAAAAAAAAAA==",
    }
    short_key = {**good, "x-amz-server-side-encryption-customer-key": "c2hvcnQ="}
    other_algorithm = {**good, "x-amz-server-side-encryption-customer-algorithm": "AES128"}
    for headers, expected in (
        (no_algorithm, "InvalidArgument"),
        (no_md5, "InvalidArgument"),
        (no_key, "InvalidArgument"),
        (wrong_md5, "InvalidArgument"),
        (short_key, "InvalidArgument"),
        (other_algorithm, "InvalidEncryptionAlgorithmError"),
        ({**good, "x-amz-server-side-encryption": "AES256"}, "InvalidArgument"),
    ):
        reply = raw.signed("PUT", url, headers, b"data")
        assert (reply.status, reply.code) == (400, expected), headers
    assert [o["Key"] for o in s3e.list_objects_v2(Bucket=ebucket)["Contents"]] == ["c"]


def test_sse_c_refused_over_http_by_default(gateway: GatewayProcess, s3: Any, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="c", Body=b"x", **sse_c(KEY_A))
    assert code(exc) == (400, "InvalidRequest")
    assert "secure connection" in exc.value.response["Error"]["Message"]
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_multipart_sse_c_key_on_every_part(
    s3e: Any, ebucket: str, enc_gateway: GatewayProcess
) -> None:
    parts = [body(5 * 1024 * 1024 + 100), body(1234)]
    up = s3e.create_multipart_upload(Bucket=ebucket, Key="m", **sse_c(KEY_A))
    assert up["SSECustomerAlgorithm"] == "AES256"
    uid = up["UploadId"]
    # A part without the key, or with another key.
    with pytest.raises(ClientError) as exc:
        s3e.upload_part(Bucket=ebucket, Key="m", UploadId=uid, PartNumber=1, Body=parts[0])
    assert code(exc) == (400, "InvalidRequest")
    with pytest.raises(ClientError) as exc:
        s3e.upload_part(
            Bucket=ebucket, Key="m", UploadId=uid, PartNumber=1, Body=parts[0], **sse_c(KEY_B)
        )
    assert code(exc) == (400, "InvalidRequest")
    done = []
    for n, data in enumerate(parts, 1):
        r = s3e.upload_part(
            Bucket=ebucket, Key="m", UploadId=uid, PartNumber=n, Body=data, **sse_c(KEY_A)
        )
        assert r["SSECustomerAlgorithm"] == "AES256"
        assert r["ETag"] != f'"{hashlib.md5(data).hexdigest()}"'
        done.append({"PartNumber": n, "ETag": r["ETag"]})
    # The same part sent again keeps its ETag (clients complete with the first one).
    again = s3e.upload_part(
        Bucket=ebucket, Key="m", UploadId=uid, PartNumber=2, Body=parts[1], **sse_c(KEY_A)
    )
    assert again["ETag"] == done[1]["ETag"]
    # Complete needs no key, but a wrong one is refused.
    with pytest.raises(ClientError) as exc:
        s3e.complete_multipart_upload(
            Bucket=ebucket, Key="m", UploadId=uid, MultipartUpload={"Parts": done}, **sse_c(KEY_B)
        )
    assert code(exc) == (400, "InvalidRequest")
    s3e.complete_multipart_upload(
        Bucket=ebucket, Key="m", UploadId=uid, MultipartUpload={"Parts": done}
    )
    whole = b"".join(parts)
    got = s3e.get_object(Bucket=ebucket, Key="m", **sse_c(KEY_A))
    assert got["Body"].read() == whole
    with pytest.raises(ClientError) as exc:
        s3e.get_object_attributes(Bucket=ebucket, Key="m", ObjectAttributes=["ObjectSize"])
    assert code(exc) == (400, "InvalidRequest")
    # (botocore does not encode SSE-C keys for GetObjectAttributes: sent by hand.)
    url = f"{enc_gateway.url}/{ebucket}/m?attributes"
    asked = {"x-amz-object-attributes": "ObjectSize", **c_headers(KEY_A)}
    attributes = raw.signed("GET", url, asked)
    assert attributes.status == 200
    assert f"<ObjectSize>{len(whole)}</ObjectSize>".encode() in attributes.body
    second = s3e.get_object(Bucket=ebucket, Key="m", PartNumber=2, **sse_c(KEY_A))
    assert second["Body"].read() == parts[1]
    # A range across the parts' boundary (two blobs, two data keys).
    edge = len(parts[0])
    r = s3e.get_object(
        Bucket=ebucket, Key="m", Range=f"bytes={edge - 10}-{edge + 10}", **sse_c(KEY_A)
    )
    assert r["Body"].read() == whole[edge - 10 : edge + 11]


def test_multipart_sse_kms_and_bucket_default(s3e: Any, ebucket: str) -> None:
    s3e.put_bucket_encryption(
        Bucket=ebucket,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": {
                        "SSEAlgorithm": "aws:kms",
                        "KMSMasterKeyID": "testkey-2",
                    }
                }
            ]
        },
    )
    rule = s3e.get_bucket_encryption(Bucket=ebucket)["ServerSideEncryptionConfiguration"]
    assert rule["Rules"][0]["ApplyServerSideEncryptionByDefault"]["KMSMasterKeyID"] == "testkey-2"
    put = s3e.put_object(Bucket=ebucket, Key="plain-request", Body=b"x" * 10)
    assert (put["ServerSideEncryption"], put["SSEKMSKeyId"]) == ("aws:kms", ARN_2)
    up = s3e.create_multipart_upload(Bucket=ebucket, Key="m")
    assert up["SSEKMSKeyId"] == ARN_2
    data = body(5 * 1024 * 1024)
    r = s3e.upload_part(Bucket=ebucket, Key="m", UploadId=up["UploadId"], PartNumber=1, Body=data)
    s3e.complete_multipart_upload(
        Bucket=ebucket,
        Key="m",
        UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]},
    )
    got = s3e.get_object(Bucket=ebucket, Key="m")
    assert got["SSEKMSKeyId"] == ARN_2
    assert got["Body"].read() == data
    s3e.delete_bucket_encryption(Bucket=ebucket)
    assert "ServerSideEncryption" not in s3e.put_object(Bucket=ebucket, Key="after", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3e.put_bucket_encryption(
            Bucket=ebucket,
            ServerSideEncryptionConfiguration={
                "Rules": [
                    {
                        "ApplyServerSideEncryptionByDefault": {
                            "SSEAlgorithm": "AES256",
                            "KMSMasterKeyID": "testkey-1",
                        }
                    }
                ]
            },
        )
    assert code(exc) == (400, "InvalidArgument")


def test_a_bucket_can_block_sse_c(s3e: Any, ebucket: str, enc_gateway: GatewayProcess) -> None:
    document = (
        b"<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault>"
        b"<SSEAlgorithm>AES256</SSEAlgorithm></ApplyServerSideEncryptionByDefault>"
        b"<BlockedEncryptionTypes><EncryptionType>SSE-C</EncryptionType>"
        b"</BlockedEncryptionTypes></Rule></ServerSideEncryptionConfiguration>"
    )
    assert raw.signed("PUT", f"{enc_gateway.url}/{ebucket}?encryption", body=document).status == 200
    with pytest.raises(ClientError) as exc:
        s3e.put_object(Bucket=ebucket, Key="c", Body=b"x", **sse_c(KEY_A))
    assert code(exc) == (403, "AccessDenied")
    assert s3e.put_object(Bucket=ebucket, Key="s", Body=b"x")["ServerSideEncryption"] == "AES256"
    got = raw.signed("GET", f"{enc_gateway.url}/{ebucket}?encryption")
    assert b"<EncryptionType>SSE-C</EncryptionType>" in got.body


def test_new_buckets_block_sse_c_unless_legacy(
    tmp_path: Path, s3e: Any, ebucket: str, catalog: str | None
) -> None:
    """AWS's default since April 2026: a new bucket refuses SSE-C writes (403 AccessDenied)
    and GetBucketEncryption says so; PutBucketEncryption's BlockedEncryptionTypes NONE
    allows them, SSE-C blocks them again, and objects already written stay readable with
    their key. Under --bucket-defaults legacy (the s3-tests runner's) SSE-C is allowed."""
    # legacy (the module's gateway): allowed, and no configuration to report.
    assert s3e.put_object(Bucket=ebucket, Key="c", Body=b"x", **sse_c(KEY_A))["ETag"]
    with pytest.raises(ClientError) as exc:
        s3e.get_bucket_encryption(Bucket=ebucket)
    assert code(exc) == (404, "ServerSideEncryptionConfigurationNotFoundError")
    gw = start_gateway(tmp_path, "aws", catalog=catalog)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="blocked")
        rules = s3.get_bucket_encryption(Bucket="blocked")["ServerSideEncryptionConfiguration"][
            "Rules"
        ]
        # AWS's default since January 2023: SSE-S3, with SSE-C blocked.
        assert rules == [
            {
                "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"},
                "BucketKeyEnabled": False,
                "BlockedEncryptionTypes": {"EncryptionType": ["SSE-C"]},
            }
        ]
        s3.put_object(Bucket="blocked", Key="src", Body=b"source")
        refused = [
            lambda: s3.put_object(Bucket="blocked", Key="c", Body=b"x", **sse_c(KEY_A)),
            lambda: s3.create_multipart_upload(Bucket="blocked", Key="m", **sse_c(KEY_A)),
            lambda: s3.copy_object(
                Bucket="blocked", Key="c", CopySource={"Bucket": "b", "Key": "src"}, **sse_c(KEY_A)
            ),
        ]
        for attempt in refused:
            with pytest.raises(ClientError) as exc:
                attempt()
            assert code(exc) == (403, "AccessDenied")
        assert [o["Key"] for o in s3.list_objects_v2(Bucket="blocked")["Contents"]] == ["src"]
        assert s3.list_multipart_uploads(Bucket="blocked").get("Uploads", []) == []
        # Other writes are not blocked, and are encrypted by the default.
        assert s3.put_object(Bucket="blocked", Key="p", Body=b"p")["ServerSideEncryption"] == (
            "AES256"
        )
        assert s3.put_object(Bucket="blocked", Key="s", Body=b"s", ServerSideEncryption="AES256")
        # Unblocked deliberately: SSE-C writes work.
        allow = {"Rules": [{"BlockedEncryptionTypes": {"EncryptionType": ["NONE"]}}]}
        s3.put_bucket_encryption(Bucket="blocked", ServerSideEncryptionConfiguration=allow)
        s3.put_object(Bucket="blocked", Key="c", Body=b"customer", **sse_c(KEY_A))
        # A default-encryption change that does not mention blocking keeps it as it is.
        sse_s3 = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        s3.put_bucket_encryption(
            Bucket="blocked", ServerSideEncryptionConfiguration={"Rules": [sse_s3]}
        )
        rules = s3.get_bucket_encryption(Bucket="blocked")["ServerSideEncryptionConfiguration"][
            "Rules"
        ]
        assert rules[0]["BlockedEncryptionTypes"] == {"EncryptionType": ["NONE"]}
        s3.put_object(Bucket="blocked", Key="c2", Body=b"x", **sse_c(KEY_A))
        # Blocked again: writes refused, the existing SSE-C object still read with its key.
        block = {**sse_s3, "BlockedEncryptionTypes": {"EncryptionType": ["SSE-C"]}}
        s3.put_bucket_encryption(
            Bucket="blocked", ServerSideEncryptionConfiguration={"Rules": [block]}
        )
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket="blocked", Key="c3", Body=b"x", **sse_c(KEY_A))
        assert code(exc) == (403, "AccessDenied")
        assert (
            s3.get_object(Bucket="blocked", Key="c", **sse_c(KEY_A))["Body"].read() == b"customer"
        )
        assert s3.head_object(Bucket="blocked", Key="c", **sse_c(KEY_A))["ContentLength"] == 8
        # Deleting the default encryption goes back to SSE-S3 ("resets the default encryption
        # for the bucket as SSE-S3", DeleteBucketEncryption) and does not unblock SSE-C.
        s3.delete_bucket_encryption(Bucket="blocked")
        rules = s3.get_bucket_encryption(Bucket="blocked")["ServerSideEncryptionConfiguration"][
            "Rules"
        ]
        assert rules == [
            {
                "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"},
                "BucketKeyEnabled": False,
                "BlockedEncryptionTypes": {"EncryptionType": ["SSE-C"]},
            }
        ]
        assert s3.put_object(Bucket="blocked", Key="p2", Body=b"p")["ServerSideEncryption"] == (
            "AES256"
        )
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket="blocked", Key="c3", Body=b"x", **sse_c(KEY_A))
        assert code(exc) == (403, "AccessDenied")
    finally:
        gw.stop()


def test_every_object_is_encrypted_by_default_and_none_keeps_plaintext(
    tmp_path: Path, catalog: str | None
) -> None:
    """AWS's default since January 2023: an object written without encryption headers is
    SSE-S3, and says so on PUT, GET, HEAD, CopyObject, UploadPart and Complete; its bytes are
    not on disk in the clear; copies stay metadata (the same blobs). `--default-encryption
    none` keeps plaintext at rest and says nothing."""
    data = body(6 * 1024 * 1024)
    gw = start_gateway(tmp_path / "default", "aws", catalog=catalog)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="enc")
        assert s3.put_object(Bucket="enc", Key="k", Body=data)["ServerSideEncryption"] == "AES256"
        got = s3.get_object(Bucket="enc", Key="k")
        assert got["ServerSideEncryption"] == "AES256" and got["Body"].read() == data
        assert s3.head_object(Bucket="enc", Key="k")["ServerSideEncryption"] == "AES256"
        assert got["ETag"] == '"' + hashlib.md5(data).hexdigest() + '"'  # SSE-S3: the MD5
        copied = s3.copy_object(Bucket="enc", Key="copy", CopySource={"Bucket": "enc", "Key": "k"})
        assert copied["ServerSideEncryption"] == "AES256"
        assert copied["CopyObjectResult"]["ETag"] == got["ETag"]
        upload = s3.create_multipart_upload(Bucket="enc", Key="mp")
        assert upload["ServerSideEncryption"] == "AES256"
        part = s3.upload_part(
            Bucket="enc", Key="mp", UploadId=upload["UploadId"], PartNumber=1, Body=data
        )
        assert part["ServerSideEncryption"] == "AES256"
        done = s3.complete_multipart_upload(
            Bucket="enc", Key="mp", UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )  # fmt: skip
        assert done["ServerSideEncryption"] == "AES256"
        assert s3.get_object(Bucket="enc", Key="mp")["Body"].read() == data
        assert _scan(gw.data) == []  # no plaintext on disk
    finally:
        gw.stop()
    plain = start_gateway(tmp_path / "none", "aws", catalog=catalog, S3GW_DEFAULT_ENCRYPTION="none")
    try:
        s3 = plain.client()
        s3.create_bucket(Bucket="plain")
        assert "ServerSideEncryption" not in s3.put_object(Bucket="plain", Key="k", Body=data)
        assert "ServerSideEncryption" not in s3.get_object(Bucket="plain", Key="k")
        assert _scan(plain.data) != []
        rules = s3.get_bucket_encryption(Bucket="plain")["ServerSideEncryptionConfiguration"]
        assert rules["Rules"] == [{"BlockedEncryptionTypes": {"EncryptionType": ["SSE-C"]}}]
    finally:
        plain.stop()


def test_dsse_kms_two_layers_echoed_and_round_trips(
    s3e: Any, ebucket: str, enc_gateway: GatewayProcess
) -> None:
    """aws:kms:dsse is accepted and echoed as AWS does (with the key's ARN, no bucket key),
    on PUT, GET, HEAD, multipart and as a bucket default; ranges across chunks read back; a
    copy from a one-layer SSE-KMS source is encrypted again (new blobs), a DSSE-KMS to
    DSSE-KMS copy shares the blobs."""
    data = body(300_000)
    put = s3e.put_object(
        Bucket=ebucket,
        Key="d",
        Body=data,
        ServerSideEncryption="aws:kms:dsse",
        SSEKMSKeyId="testkey-1",
        BucketKeyEnabled=True,
    )
    assert (put["ServerSideEncryption"], put["SSEKMSKeyId"]) == ("aws:kms:dsse", ARN_1)
    assert "BucketKeyEnabled" not in put
    assert put["ETag"].strip('"') != hashlib.md5(data).hexdigest()
    got = s3e.get_object(Bucket=ebucket, Key="d")
    assert got["Body"].read() == data
    assert (got["ServerSideEncryption"], got["SSEKMSKeyId"]) == ("aws:kms:dsse", ARN_1)
    assert s3e.head_object(Bucket=ebucket, Key="d")["ServerSideEncryption"] == "aws:kms:dsse"
    part = s3e.get_object(Bucket=ebucket, Key="d", Range="bytes=65000-140000")
    assert part["Body"].read() == data[65000:140001]
    # Multipart.
    up = s3e.create_multipart_upload(
        Bucket=ebucket, Key="m", ServerSideEncryption="aws:kms:dsse", SSEKMSKeyId=ARN_2
    )
    assert up["ServerSideEncryption"] == "aws:kms:dsse"
    piece = body(5 * 1024 * 1024)
    etags = [
        s3e.upload_part(Bucket=ebucket, Key="m", UploadId=up["UploadId"], PartNumber=n, Body=piece)[
            "ETag"
        ]
        for n in (1, 2)
    ]
    parts = [{"PartNumber": n, "ETag": e} for n, e in zip((1, 2), etags, strict=True)]
    done = s3e.complete_multipart_upload(
        Bucket=ebucket, Key="m", UploadId=up["UploadId"], MultipartUpload={"Parts": parts}
    )
    assert (done["ServerSideEncryption"], done["SSEKMSKeyId"]) == ("aws:kms:dsse", ARN_2)
    assert s3e.get_object(Bucket=ebucket, Key="m")["Body"].read() == piece + piece
    # Copies: SSE-KMS (one layer) -> DSSE-KMS with the same key writes new blobs; DSSE-KMS
    # -> DSSE-KMS shares them.
    s3e.put_object(
        Bucket=ebucket, Key="k1", Body=data, ServerSideEncryption="aws:kms", SSEKMSKeyId=ARN_1
    )
    before = blob_files(enc_gateway)
    copied = s3e.copy_object(
        Bucket=ebucket,
        Key="k2",
        CopySource={"Bucket": ebucket, "Key": "k1"},
        ServerSideEncryption="aws:kms:dsse",
        SSEKMSKeyId=ARN_1,
    )
    assert copied["ServerSideEncryption"] == "aws:kms:dsse"
    assert len(blob_files(enc_gateway) - before) == 1
    before = blob_files(enc_gateway)
    s3e.copy_object(
        Bucket=ebucket,
        Key="k3",
        CopySource={"Bucket": ebucket, "Key": "k2"},
        ServerSideEncryption="aws:kms:dsse",
        SSEKMSKeyId=ARN_1,
    )
    assert blob_files(enc_gateway) == before
    for key in ("k2", "k3"):
        assert s3e.get_object(Bucket=ebucket, Key=key)["Body"].read() == data
    # As the bucket's default.
    default = {
        "ApplyServerSideEncryptionByDefault": {
            "SSEAlgorithm": "aws:kms:dsse",
            "KMSMasterKeyID": ARN_2,
        }
    }
    s3e.put_bucket_encryption(
        Bucket=ebucket, ServerSideEncryptionConfiguration={"Rules": [default]}
    )
    put = s3e.put_object(Bucket=ebucket, Key="plain-request", Body=b"x")
    assert (put["ServerSideEncryption"], put["SSEKMSKeyId"]) == ("aws:kms:dsse", ARN_2)


def test_reads_refused_once_the_kms_key_is_disabled(tmp_path: Path, catalog: str | None) -> None:
    """An SSE-KMS or DSSE-KMS object whose key is disabled afterwards (in the keys file) is
    not decrypted: GET and copies answer 400 KMS.DisabledException, as AWS; HEAD, which
    decrypts nothing, still answers; objects under other keys are unaffected."""
    gw = start_gateway(tmp_path, catalog=catalog)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="kms")
        for key, mode in (("one", "aws:kms"), ("two", "aws:kms:dsse")):
            s3.put_object(
                Bucket="kms", Key=key, Body=b"secret", ServerSideEncryption=mode, SSEKMSKeyId=ARN_1
            )
        s3.put_object(
            Bucket="kms", Key="other", Body=b"x", ServerSideEncryption="aws:kms", SSEKMSKeyId=ARN_2
        )
    finally:
        gw.stop()
    disabled = KMS_KEYS.replace('id = "testkey-1"\n', 'id = "testkey-1"\nenabled = false\n')
    assert disabled != KMS_KEYS
    gw = start_gateway(tmp_path, kms_keys=disabled, catalog=catalog)
    try:
        s3 = gw.client()
        for key in ("one", "two"):
            with pytest.raises(ClientError) as exc:
                s3.get_object(Bucket="kms", Key=key)
            assert code(exc) == (400, "KMS.DisabledException")
            with pytest.raises(ClientError) as exc:
                s3.copy_object(Bucket="kms", Key="copy", CopySource={"Bucket": "kms", "Key": key})
            assert code(exc) == (400, "KMS.DisabledException")
            assert s3.head_object(Bucket="kms", Key=key)["SSEKMSKeyId"] == ARN_1
        assert s3.get_object(Bucket="kms", Key="other")["Body"].read() == b"x"
        assert [o["Key"] for o in s3.list_objects_v2(Bucket="kms")["Contents"]] == [
            "one",
            "other",
            "two",
        ]
    finally:
        gw.stop()


# --- copies ------------------------------------------------------------------------------------


def test_copies_between_modes(s3e: Any, ebucket: str, enc_gateway: GatewayProcess) -> None:
    data = body(2 * 1024 * 1024 + 5)
    md5 = f'"{hashlib.md5(data).hexdigest()}"'
    s3e.put_object(Bucket=ebucket, Key="plain", Body=data)
    files = len(blob_files(enc_gateway))

    # plain -> SSE-S3: re-encrypted (a new blob), ETag kept (the MD5).
    r = s3e.copy_object(
        Bucket=ebucket, Key="s3", CopySource=f"{ebucket}/plain", ServerSideEncryption="AES256"
    )
    assert r["ServerSideEncryption"] == "AES256"
    assert r["CopyObjectResult"]["ETag"] == md5
    assert len(blob_files(enc_gateway)) == files + 1

    # SSE-S3 -> SSE-KMS: metadata only (the data key is wrapped again), no new blob.
    r = s3e.copy_object(
        Bucket=ebucket,
        Key="kms",
        CopySource=f"{ebucket}/s3",
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId="testkey-1",
    )
    assert r["SSEKMSKeyId"] == ARN_1
    assert len(blob_files(enc_gateway)) == files + 1
    assert s3e.get_object(Bucket=ebucket, Key="kms")["Body"].read() == data

    # SSE-KMS -> SSE-S3: metadata only again, and the ETag is the MD5 without reading.
    r = s3e.copy_object(
        Bucket=ebucket, Key="s3b", CopySource=f"{ebucket}/kms", ServerSideEncryption="AES256"
    )
    assert r["CopyObjectResult"]["ETag"] == md5
    assert len(blob_files(enc_gateway)) == files + 1

    # SSE-S3 -> SSE-C: re-encrypted under the customer's key.
    s3e.copy_object(Bucket=ebucket, Key="c", CopySource=f"{ebucket}/s3", **sse_c(KEY_A))
    assert len(blob_files(enc_gateway)) == files + 2
    # SSE-C -> SSE-C, same key: shared; another key: re-encrypted.
    s3e.copy_object(
        Bucket=ebucket,
        Key="c2",
        CopySource=f"{ebucket}/c",
        **sse_c(KEY_A),
        **sse_c(KEY_A, copy=True),
    )
    assert len(blob_files(enc_gateway)) == files + 2
    s3e.copy_object(
        Bucket=ebucket,
        Key="c3",
        CopySource=f"{ebucket}/c",
        **sse_c(KEY_B),
        **sse_c(KEY_A, copy=True),
    )
    assert len(blob_files(enc_gateway)) == files + 3
    assert s3e.get_object(Bucket=ebucket, Key="c3", **sse_c(KEY_B))["Body"].read() == data
    # SSE-C source without its key: AWS's 400.
    with pytest.raises(ClientError) as exc:
        s3e.copy_object(Bucket=ebucket, Key="x", CopySource=f"{ebucket}/c")
    assert code(exc) == (400, "InvalidRequest")
    # SSE-C -> plain: the plaintext MD5 as ETag (AWS).
    r = s3e.copy_object(
        Bucket=ebucket, Key="p2", CopySource=f"{ebucket}/c3", **sse_c(KEY_B, copy=True)
    )
    assert r["CopyObjectResult"]["ETag"] == md5
    assert "ServerSideEncryption" not in r
    assert s3e.get_object(Bucket=ebucket, Key="p2")["Body"].read() == data

    # UploadPartCopy of a range from an SSE-C source into an SSE-S3 upload.
    up = s3e.create_multipart_upload(Bucket=ebucket, Key="mp", ServerSideEncryption="AES256")
    part = s3e.upload_part_copy(
        Bucket=ebucket,
        Key="mp",
        UploadId=up["UploadId"],
        PartNumber=1,
        CopySource=f"{ebucket}/c",
        CopySourceRange="bytes=10-99999",
        **sse_c(KEY_A, copy=True),
    )
    assert part["CopyPartResult"]["ETag"] == f'"{hashlib.md5(data[10:100000]).hexdigest()}"'
    s3e.complete_multipart_upload(
        Bucket=ebucket,
        Key="mp",
        UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )
    assert s3e.get_object(Bucket=ebucket, Key="mp")["Body"].read() == data[10:100000]


# --- aws-cli -----------------------------------------------------------------------------------


def test_aws_cli_round_trips(
    enc_gateway: GatewayProcess, s3e: Any, ebucket: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.write_bytes(body(9 * 1024 * 1024))  # multipart for aws-cli (8 MiB threshold)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY_A)
    for args, sse_args in (
        (["--sse", "AES256"], []),
        (["--sse", "aws:kms", "--sse-kms-key-id", "testkey-1"], []),
        (
            ["--sse-c", "AES256", "--sse-c-key", f"fileb://{key_file}"],
            ["--sse-c", "AES256", "--sse-c-key", f"fileb://{key_file}"],
        ),
    ):
        up = awscli.run(enc_gateway.url, "s3", "cp", str(src), f"s3://{ebucket}/f", *args)
        assert up.returncode == 0, up.stderr
        out = tmp_path / "out"
        down = awscli.run(enc_gateway.url, "s3", "cp", f"s3://{ebucket}/f", str(out), *sse_args)
        assert down.returncode == 0, down.stderr
        assert out.read_bytes() == src.read_bytes()
    head = s3e.head_object(Bucket=ebucket, Key="f", **sse_c(KEY_A))
    assert head["SSECustomerAlgorithm"] == "AES256"


# --- on disk -----------------------------------------------------------------------------------


def _scan(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and MARKER in p.read_bytes()]


def test_no_plaintext_in_the_data_folder(tmp_path: Path) -> None:
    """Every file of the data folder (blobs, tmp/ while a body streams in, the catalog and its
    WAL) after encrypted PUTs of small and large bodies carrying a marker."""
    gw = start_gateway(tmp_path)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="bkt")
        for n, extra in enumerate(
            (
                {"ServerSideEncryption": "AES256"},
                {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "testkey-1"},
                sse_c(KEY_A),
            )
        ):
            for size in (40, 60_000, 3 * 1024 * 1024):
                s3.put_object(Bucket="bkt", Key=f"{n}-{size}", Body=body(size), **extra)
        up = s3.create_multipart_upload(Bucket="bkt", Key="mp", ServerSideEncryption="AES256")
        uid = up["UploadId"]
        s3.upload_part(Bucket="bkt", Key="mp", UploadId=uid, PartNumber=1, Body=body(100))
        # A body half received: what tmp/ holds meanwhile.
        url = f"{gw.url}/bkt/streaming"
        total = 4 * 1024 * 1024
        headers = raw.sign(
            "PUT", url, {"x-amz-server-side-encryption": "AES256"}, payload_hash="UNSIGNED-PAYLOAD"
        )
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        conn.putrequest("PUT", parts.path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.putheader("Host", parts.netloc)
        conn.putheader("Content-Length", str(total))
        conn.endheaders()
        first = body(3 * 1024 * 1024)
        conn.send(first)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            staged = [p for p in (gw.data / "tmp").iterdir() if p.stat().st_size > 1024 * 1024]
            if staged:
                break
            time.sleep(0.05)
        assert staged, "the body never reached tmp/"
        assert _scan(gw.data) == []
        conn.send(body(total - len(first)))
        assert conn.getresponse().status == 200
        conn.close()
        assert (gw.data / "catalog.sqlite3-wal").exists()
        assert _scan(gw.data) == []
        # The same PUTs without encryption do leave the marker: the scan can see it.
        s3.put_object(Bucket="bkt", Key="plain", Body=body(40))
        assert _scan(gw.data) != []
    finally:
        gw.stop()


def test_fsck_deep_verifies_encrypted_objects_and_rotation_keeps_them(
    tmp_path: Path, catalog: str | None
) -> None:
    gw = GatewayProcess(tmp_path / "data", None, "--workers", "1", catalog=catalog).start()
    data = body(300_000)
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="bkt")
        s3.put_object(Bucket="bkt", Key="k", Body=data, ServerSideEncryption="AES256")
        s3.put_object(Bucket="bkt", Key="small", Body=b"tiny", ServerSideEncryption="AES256")
    finally:
        gw.stop()

    fsck = gw.s3gw("fsck", "--deep")
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    rotated = gw.s3gw("keys", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    gw = GatewayProcess(tmp_path / "data", None, "--workers", "1", catalog=catalog).start()
    try:
        assert gw.client().get_object(Bucket="bkt", Key="k")["Body"].read() == data
    finally:
        gw.stop()
    # One flipped bit in the middle of the blob: fsck --deep names the object.
    (blob,) = [p for p in (tmp_path / "data" / "blobs").rglob("*") if p.is_file()]
    raw_bytes = bytearray(blob.read_bytes())
    raw_bytes[len(raw_bytes) // 2] ^= 1
    blob.write_bytes(bytes(raw_bytes))
    fsck = gw.s3gw("fsck", "--deep")
    assert fsck.returncode == 1
    assert "bkt/k: encrypted bytes fail" in fsck.stdout


def test_bench_s3_has_an_encrypted_column() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "s3", "--servers",
         "gateway_1_worker,gateway_sse_s3", "--seconds", "0.3", "--repeats", "1",
         "--large-mib", "8", "--json"],
        capture_output=True, text=True, timeout=300, cwd=REPOSITORY,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["errors"] == []
    encrypted = result["servers"]["gateway_sse_s3"]["workloads"]
    assert encrypted["put_c64"]["ops_per_s"] > 0 and encrypted["large_get"]["mib_s"] > 0
    assert result["ceilings"]["aes_gcm_mib_s"] > 0
    ratios = {r["key"]: r for r in result["ratios"]}
    assert ratios["sse_large_put_vs_ceiling"]["value"] is not None
    assert ratios["sse_put_c64_vs_plain"]["value"] is not None
