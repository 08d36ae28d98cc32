"""Flexible checksums and aws-chunked bodies through the real server."""

from __future__ import annotations

import base64
import hashlib
import os
import zlib

import pytest
from botocore.exceptions import ClientError

from tests import awscli, raw
from tests.datadir import inspect


def crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def test_default_boto3_checksum_is_stored_and_returned(s3, bucket):
    data = os.urandom(100_000)
    put = s3.put_object(Bucket=bucket, Key="k", Body=data)  # boto3 adds a CRC32 by default
    assert put["ChecksumCRC32"] == crc32(data)
    got = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == crc32(data)
    assert got["Body"].read() == data
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == crc32(data) and head["ChecksumType"] == "FULL_OBJECT"
    assert "ChecksumCRC32" not in s3.head_object(Bucket=bucket, Key="k")
    ranged = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED", Range="bytes=0-9")
    assert "ChecksumCRC32" not in ranged  # a checksum of the whole cannot vouch for a part
    copied = s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k")
    assert copied["CopyObjectResult"]["ETag"] == put["ETag"]
    assert s3.head_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")["ChecksumCRC32"] == (
        crc32(data)
    )


def test_copy_with_a_checksum_algorithm_computes_it(s3, bucket):
    # AWS: a copy asked for another algorithm gets that algorithm's FULL_OBJECT checksum of
    # the bytes, and every CopyObjectResult names the copy's checksum (LocalStack's AWS
    # recordings of test_s3_copy_object_with_checksum).
    data = b'{"key": "value"}'
    s3.put_object(Bucket=bucket, Key="k", Body=data)  # CRC32, boto3's default
    sha = base64.b64encode(hashlib.sha256(data).digest()).decode()
    copied = s3.copy_object(
        Bucket=bucket,
        Key="k",
        CopySource=f"{bucket}/k",
        ChecksumAlgorithm="SHA256",
        MetadataDirective="REPLACE",
    )["CopyObjectResult"]
    assert (copied["ChecksumSHA256"], copied["ChecksumType"]) == (sha, "FULL_OBJECT")
    attrs = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["Checksum"])
    assert attrs["Checksum"] == {"ChecksumSHA256": sha, "ChecksumType": "FULL_OBJECT"}
    # A plain copy keeps the source's checksum, and says so.
    kept = s3.copy_object(Bucket=bucket, Key="d", CopySource=f"{bucket}/k")["CopyObjectResult"]
    assert kept["ChecksumSHA256"] == sha
    # The same algorithm as the source's whole-object one: kept, not recomputed differently.
    again = s3.copy_object(
        Bucket=bucket, Key="e", CopySource=f"{bucket}/d", ChecksumAlgorithm="SHA256"
    )["CopyObjectResult"]
    assert again["ChecksumSHA256"] == sha
    crc = s3.copy_object(
        Bucket=bucket, Key="f", CopySource=f"{bucket}/d", ChecksumAlgorithm="CRC32"
    )["CopyObjectResult"]
    assert crc["ChecksumCRC32"] == crc32(data) and "ChecksumSHA256" not in crc


def test_copy_of_a_composite_object_gets_a_full_object_checksum(s3, bucket):
    # The copy is one part: AWS gives it the FULL_OBJECT checksum of the same algorithm
    # (LocalStack's AWS recordings of test_complete_multipart_parts_checksum_composite).
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", ChecksumAlgorithm="SHA256")
    bodies = [b"a" * (5 * 1024 * 1024), b"b" * 10]
    parts = []
    for n, body in enumerate(bodies, 1):
        got = s3.upload_part(
            Bucket=bucket,
            Key="mp",
            UploadId=up["UploadId"],
            PartNumber=n,
            Body=body,
            ChecksumAlgorithm="SHA256",
        )
        sha = got["ChecksumSHA256"]
        parts.append({"PartNumber": n, "ETag": got["ETag"], "ChecksumSHA256": sha})
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=up["UploadId"], MultipartUpload={"Parts": parts}
    )
    assert done["ChecksumType"] == "COMPOSITE" and done["ChecksumSHA256"].endswith("-2")
    copied = s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/mp")
    whole = base64.b64encode(hashlib.sha256(b"".join(bodies)).digest()).decode()
    result = copied["CopyObjectResult"]
    assert (result["ChecksumSHA256"], result["ChecksumType"]) == (whole, "FULL_OBJECT")
    head = s3.head_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert (head["ChecksumSHA256"], head["ChecksumType"]) == (whole, "FULL_OBJECT")


@pytest.mark.parametrize("kind", ["COMPOSITE", "FULL_OBJECT"])
def test_upload_part_copy_into_a_checksum_upload(s3, bucket, kind):
    # AWS computes the copied range's checksum in the upload's algorithm, answers it, and
    # Complete combines it like an uploaded part's (LocalStack's AWS recordings of
    # test_multipart_upload_part_copy_checksum).
    data = os.urandom(5 * 1024 * 1024 + 14)  # every part but the last is 5 MiB at least
    s3.put_object(Bucket=bucket, Key="src", Body=data)
    up = s3.create_multipart_upload(
        Bucket=bucket, Key="mp", ChecksumAlgorithm="CRC32", ChecksumType=kind
    )["UploadId"]
    copied = s3.upload_part_copy(
        Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, CopySource=f"{bucket}/src"
    )["CopyPartResult"]
    assert copied["ChecksumCRC32"] == crc32(data)
    listing = s3.list_parts(Bucket=bucket, Key="mp", UploadId=up)
    assert (listing["ChecksumAlgorithm"], listing["ChecksumType"]) == ("CRC32", kind)
    (listed_upload,) = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert (listed_upload["ChecksumAlgorithm"], listed_upload["ChecksumType"]) == ("CRC32", kind)
    assert listing["Parts"][0]["ChecksumCRC32"] == crc32(data)
    ranged = s3.upload_part_copy(
        Bucket=bucket,
        Key="mp",
        UploadId=up,
        PartNumber=2,
        CopySource=f"{bucket}/src",
        CopySourceRange="bytes=5-6",
    )["CopyPartResult"]
    assert ranged["ChecksumCRC32"] == crc32(data[5:7])
    parts = [
        {"PartNumber": 1, "ETag": copied["ETag"], "ChecksumCRC32": copied["ChecksumCRC32"]},
        {"PartNumber": 2, "ETag": ranged["ETag"], "ChecksumCRC32": ranged["ChecksumCRC32"]},
    ]
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={"Parts": parts}
    )
    assert done["ChecksumType"] == kind
    if kind == "FULL_OBJECT":
        assert done["ChecksumCRC32"] == crc32(data + data[5:7])


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
def test_each_algorithm(s3, bucket, algorithm):
    data = os.urandom(70_000)
    put = s3.put_object(Bucket=bucket, Key=algorithm, Body=data, ChecksumAlgorithm=algorithm)
    value = put[f"Checksum{algorithm}"]
    got = s3.get_object(Bucket=bucket, Key=algorithm, ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == value
    assert got["Body"].read() == data  # botocore validated the body against the checksum too


def test_wrong_checksum_is_bad_digest_and_stores_nothing(s3, bucket, gateway):
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=b"data", ChecksumCRC32=crc32(b"other"))
    assert exc.value.response["Error"]["Code"] == "BadDigest"
    assert "CRC32" in exc.value.response["Error"]["Message"]
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_malformed_checksum_header(gateway, bucket):
    url = f"{gateway.url}/{bucket}/k"
    reply = raw.signed("PUT", url, {"x-amz-checksum-crc32": "not base64!"}, body=b"x")
    assert (reply.status, reply.code) == (400, "InvalidRequest")


@pytest.mark.parametrize("trailer", [False, True])
def test_signed_aws_chunked_put(gateway, s3, bucket, trailer):
    chunks = [os.urandom(64 * 1024), os.urandom(64 * 1024), os.urandom(1000)]
    data = b"".join(chunks)
    url = f"{gateway.url}/{bucket}/chunked"
    trailers = [("x-amz-checksum-crc32", crc32(data))] if trailer else None
    headers, body = raw.signed_chunked_put(url, chunks, trailers, {"Content-Type": "text/x"})
    reply = raw.send("PUT", url, headers, body)
    assert reply.status == 200, reply.body
    got = s3.get_object(Bucket=bucket, Key="chunked", ChecksumMode="ENABLED")
    assert got["Body"].read() == data  # the framing was removed, not stored
    assert "ContentEncoding" not in got  # aws-chunked is not the object's encoding
    assert got["ContentType"] == "text/x"
    if trailer:
        assert got["ChecksumCRC32"] == crc32(data)


def test_damaged_aws_chunked_bodies_are_refused(gateway, s3, bucket):
    url = f"{gateway.url}/{bucket}/damaged"
    chunks = [os.urandom(10_000), os.urandom(500)]
    headers, body = raw.signed_chunked_put(url, chunks)
    at = body.index(b"\r\n") + 2 + 100  # a byte of the first chunk's data
    flipped = body[:at] + bytes([body[at] ^ 1]) + body[at + 1 :]
    assert raw.send("PUT", url, headers, flipped).code == "SignatureDoesNotMatch"
    assert raw.send("PUT", url, headers, body[:-40]).code == "IncompleteBody"
    headers, body = raw.signed_chunked_put(url, chunks, [("x-amz-checksum-crc32", crc32(b"x"))])
    assert raw.send("PUT", url, headers, body).code == "BadDigest"
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    inspect(gateway.data, gateway.catalog).assert_clean()


def test_aws_cli_put_object_with_crc32c(gateway, s3, bucket, tmp_path):
    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(50_000))
    out = awscli.ok(
        gateway.url, "s3api", "put-object", "--bucket", bucket, "--key", "cli",
        "--body", str(source), "--checksum-algorithm", "CRC32C",
    )  # fmt: skip
    assert "ChecksumCRC32C" in out
    head = s3.head_object(Bucket=bucket, Key="cli", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32C"] in out


MIB = 2**20


def _multipart(s3, bucket, key, parts, algorithm, kind=None, expect=None):
    extra = {"ChecksumType": kind} if kind else {}
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key=key, ChecksumAlgorithm=algorithm, **extra
    )
    assert upload["ChecksumAlgorithm"] == algorithm
    done = []
    for number, data in enumerate(parts, 1):
        part = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=number,
            Body=data, ChecksumAlgorithm=algorithm,
        )  # fmt: skip
        done.append(
            {"PartNumber": number, "ETag": part["ETag"],
             f"Checksum{algorithm}": part[f"Checksum{algorithm}"]}
        )  # fmt: skip
    listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=upload["UploadId"])["Parts"]
    assert [p[f"Checksum{algorithm}"] for p in listed] == [d[f"Checksum{algorithm}"] for d in done]
    named = {f"Checksum{algorithm}": expect} if expect else {}
    return s3.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": done},
        **named,
    )


def test_multipart_composite_checksum(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(1000)]
    binary = b"".join(zlib.crc32(p).to_bytes(4, "big") for p in parts)
    expected = f"{crc32(binary)}-2"
    with pytest.raises(ClientError) as exc:  # Complete names a checksum the parts don't make
        _multipart(s3, bucket, "composite", parts, "CRC32", expect=f"{crc32(b'x')}-2")
    assert exc.value.response["Error"]["Code"] == "BadDigest"
    # Complete may name the object's checksum (what s3-tests does): that one is right.
    result = _multipart(s3, bucket, "composite", parts, "CRC32", expect=expected)
    assert result["ChecksumCRC32"] == expected and result["ChecksumType"] == "COMPOSITE"
    head = s3.head_object(Bucket=bucket, Key="composite", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == expected
    got = s3.get_object(Bucket=bucket, Key="composite", ChecksumMode="ENABLED")
    assert got["Body"].read() == b"".join(parts)


def test_multipart_full_object_checksum(s3, bucket):
    from awscrt import checksums as crt

    parts = [os.urandom(5 * MIB), os.urandom(3 * MIB)]
    result = _multipart(s3, bucket, "full", parts, "CRC32C", "FULL_OBJECT")
    whole = crt.crc32c(b"".join(parts)).to_bytes(4, "big")
    assert result["ChecksumCRC32C"] == base64.b64encode(whole).decode()
    assert result["ChecksumType"] == "FULL_OBJECT"
    got = s3.get_object(Bucket=bucket, Key="full", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32C"] == result["ChecksumCRC32C"]
    assert got["Body"].read() == b"".join(parts)  # botocore validated the whole-object CRC
    # The whole object's CRC vouches for no part alone: AWS sends none with a part.
    part = s3.get_object(Bucket=bucket, Key="full", PartNumber=2, ChecksumMode="ENABLED")
    assert "ChecksumCRC32C" not in part and "ChecksumType" not in part
    assert part["Body"].read() == parts[1]


def test_complete_must_name_the_uploads_checksum_type(s3, bucket):
    # AWS refuses a Complete whose x-amz-checksum-type is not the upload's ("null" for an
    # upload without a checksum), and the upload stays (LocalStack's AWS recordings).
    cases = [
        ("CRC32C", "FULL_OBJECT", "COMPOSITE"),
        ("CRC32", None, "FULL_OBJECT"),
        (None, None, "FULL_OBJECT"),
    ]
    for algorithm, kind, named in cases:
        created = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        typed = {"ChecksumType": kind} if kind else {}
        up = s3.create_multipart_upload(Bucket=bucket, Key="k", **created, **typed)["UploadId"]
        part = s3.upload_part(
            Bucket=bucket, Key="k", UploadId=up, PartNumber=1, Body=b"abc", **created
        )
        listed = {"PartNumber": 1, "ETag": part["ETag"]}
        if algorithm:
            listed[f"Checksum{algorithm}"] = part[f"Checksum{algorithm}"]
        with pytest.raises(ClientError) as exc:
            s3.complete_multipart_upload(
                Bucket=bucket,
                Key="k",
                UploadId=up,
                ChecksumType=named,
                MultipartUpload={"Parts": [listed]},
            )
        mode = kind or ("COMPOSITE" if algorithm else "null")
        assert exc.value.response["Error"]["Code"] == "InvalidRequest"
        assert exc.value.response["Error"]["Message"] == (
            f"The upload was created using the {mode} checksum mode. The complete request must "
            "use the same checksum mode."
        )
        assert s3.list_parts(Bucket=bucket, Key="k", UploadId=up)["Parts"]


def test_multipart_checksum_errors(s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm="CRC32")
    with pytest.raises(ClientError) as exc:
        s3.upload_part(
            Bucket=bucket, Key="k", UploadId=upload["UploadId"], PartNumber=1, Body=b"x",
            ChecksumAlgorithm="SHA256",
        )  # fmt: skip
    assert exc.value.response["Error"]["Code"] == "InvalidRequest"
    with pytest.raises(ClientError) as exc:
        s3.create_multipart_upload(
            Bucket=bucket, Key="k", ChecksumAlgorithm="SHA256", ChecksumType="FULL_OBJECT"
        )
    assert exc.value.response["Error"]["Code"] == "InvalidRequest"


def crc64nvme(data: bytes) -> str:
    from awscrt import checksums as crt

    return base64.b64encode(crt.crc64nvme(data).to_bytes(8, "big")).decode()


@pytest.fixture
def plain_s3(gateway):
    """A client that sends no checksum unless an operation requires one, as older SDKs did."""
    return gateway.client(request_checksum_calculation="when_required")


@pytest.mark.parametrize("size", [10, 3 * 1024 * 1024 + 7])  # inline, and a file of batches
def test_an_object_sent_without_a_checksum_gets_the_default_crc64nvme(plain_s3, bucket, size):
    # AWS: "the object was uploaded without a checksum (and Amazon S3 added the default
    # checksum, CRC64NVME...)" (API_Checksum.html), a FULL_OBJECT one.
    s3 = plain_s3
    data = os.urandom(size)
    put = s3.put_object(Bucket=bucket, Key="k", Body=data)
    want = crc64nvme(data)
    assert (put["ChecksumCRC64NVME"], put["ChecksumType"]) == (want, "FULL_OBJECT")
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert (head["ChecksumCRC64NVME"], head["ChecksumType"]) == (want, "FULL_OBJECT")
    got = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert got["ChecksumCRC64NVME"] == want and got["Body"].read() == data
    attrs = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["Checksum"])
    assert attrs["Checksum"] == {"ChecksumCRC64NVME": want, "ChecksumType": "FULL_OBJECT"}
    copied = s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k")
    assert copied["CopyObjectResult"]["ChecksumCRC64NVME"] == want
    # A checksum the client sent is the object's, and the only one.
    sent = s3.put_object(Bucket=bucket, Key="s", Body=data, ChecksumAlgorithm="CRC32")
    assert "ChecksumCRC64NVME" not in sent
    head = s3.head_object(Bucket=bucket, Key="s", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == crc32(data) and "ChecksumCRC64NVME" not in head


def test_a_multipart_upload_without_an_algorithm_gets_the_default_crc64nvme(plain_s3, bucket):
    # The parts say nothing of it (ListParts, UploadPart); Complete, HEAD and
    # GetObjectAttributes give the whole object's FULL_OBJECT CRC64NVME (LocalStack's AWS
    # recordings of multipart uploads without a checksum, 2025-2026).
    s3 = plain_s3
    first, second = os.urandom(5 * 1024 * 1024), os.urandom(1000)
    s3.put_object(Bucket=bucket, Key="src", Body=second)
    up = s3.create_multipart_upload(Bucket=bucket, Key="k")
    assert "ChecksumAlgorithm" not in up
    uid = up["UploadId"]
    one = s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=first)
    assert not [k for k in one if k.startswith("Checksum")]
    # A whole-object copy of a source with the default checksum takes it as the part's.
    two = s3.upload_part_copy(
        Bucket=bucket, Key="k", UploadId=uid, PartNumber=2, CopySource=f"{bucket}/src"
    )["CopyPartResult"]
    listed = s3.list_parts(Bucket=bucket, Key="k", UploadId=uid)
    assert "ChecksumAlgorithm" not in listed
    assert all(not [k for k in p if k.startswith("Checksum")] for p in listed["Parts"])
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="k",
        UploadId=uid,
        MultipartUpload={
            "Parts": [
                {"PartNumber": 1, "ETag": one["ETag"]},
                {"PartNumber": 2, "ETag": two["ETag"]},
            ]
        },
    )
    want = crc64nvme(first + second)
    assert (done["ChecksumCRC64NVME"], done["ChecksumType"]) == (want, "FULL_OBJECT")
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert (head["ChecksumCRC64NVME"], head["ChecksumType"]) == (want, "FULL_OBJECT")
    attrs = s3.get_object_attributes(
        Bucket=bucket, Key="k", ObjectAttributes=["Checksum", "ObjectParts"]
    )
    assert attrs["Checksum"] == {"ChecksumCRC64NVME": want, "ChecksumType": "FULL_OBJECT"}
    assert attrs["ObjectParts"] == {"TotalPartsCount": 2}


@pytest.mark.parametrize("encryption", [None, "AES256"])  # shared blobs; bytes re-encrypted
def test_a_partial_part_copy_counts_in_the_default_crc64nvme(plain_s3, bucket, encryption):
    # A ranged UploadPartCopy reads its range (its ETag is the range's MD5): its default
    # checksum is computed in the same pass, as UploadPart's is, so Complete's FULL_OBJECT
    # CRC64NVME is the whole object's.
    s3 = plain_s3
    first, source = os.urandom(5 * 1024 * 1024), os.urandom(3000)
    s3.put_object(Bucket=bucket, Key="src", Body=source)
    sse = {"ServerSideEncryption": encryption} if encryption else {}
    uid = s3.create_multipart_upload(Bucket=bucket, Key="k", **sse)["UploadId"]
    one = s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=first)
    two = s3.upload_part_copy(
        Bucket=bucket,
        Key="k",
        UploadId=uid,
        PartNumber=2,
        CopySource=f"{bucket}/src",
        CopySourceRange="bytes=100-2099",
    )["CopyPartResult"]
    assert two["ETag"] == f'"{hashlib.md5(source[100:2100]).hexdigest()}"'
    assert not [k for k in two if k.startswith("Checksum")]  # the default is not announced
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="k",
        UploadId=uid,
        MultipartUpload={
            "Parts": [
                {"PartNumber": 1, "ETag": one["ETag"]},
                {"PartNumber": 2, "ETag": two["ETag"]},
            ]
        },
    )
    want = crc64nvme(first + source[100:2100])
    assert (done["ChecksumCRC64NVME"], done["ChecksumType"]) == (want, "FULL_OBJECT")
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert (head["ChecksumCRC64NVME"], head["ChecksumType"]) == (want, "FULL_OBJECT")


def test_a_part_sent_with_another_checksum_still_counts_in_the_default(plain_s3, bucket):
    s3 = plain_s3
    data = os.urandom(1000)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    part = s3.upload_part(
        Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=data, ChecksumAlgorithm="CRC32"
    )
    assert part["ChecksumCRC32"] == crc32(data)
    assert "ChecksumAlgorithm" not in s3.list_parts(Bucket=bucket, Key="k", UploadId=uid)
    # Naming a part's checksum to an upload created without an algorithm: InvalidPart (AWS).
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="k",
            UploadId=uid,
            MultipartUpload={
                "Parts": [{"PartNumber": 1, "ETag": part["ETag"], "ChecksumCRC32": crc32(data)}]
            },
        )
    assert exc.value.response["Error"]["Code"] == "InvalidPart"
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="k",
        UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert (done["ChecksumCRC64NVME"], done["ChecksumType"]) == (crc64nvme(data), "FULL_OBJECT")


def test_upload_file_with_boto3s_defaults(s3, bucket, tmp_path):
    # boto3 (s3transfer) sends a large file in 8 MiB parts and, with its default checksum
    # setting, creates the upload with ChecksumAlgorithm=CRC32 and no ChecksumType: AWS makes
    # that COMPOSITE (LocalStack's AWS recordings of test_multipart_checksum_type_default_for_
    # checksum[CRC32], Feb 2026), so the object's checksum is the CRC32 of the parts' CRC32s,
    # "-5"; GetObjectAttributes lists the parts, and gives the object's value without "-5".
    part = 8 * 1024 * 1024
    data = os.urandom(5 * part)
    path = tmp_path / "forty"
    path.write_bytes(data)
    s3.upload_file(str(path), bucket, "forty")
    pieces = [data[i : i + part] for i in range(0, len(data), part)]
    sums = [crc32(p) for p in pieces]
    whole = base64.b64encode(
        zlib.crc32(b"".join(base64.b64decode(s) for s in sums)).to_bytes(4, "big")
    ).decode()
    head = s3.head_object(Bucket=bucket, Key="forty", ChecksumMode="ENABLED")
    assert (head["ChecksumCRC32"], head["ChecksumType"]) == (f"{whole}-5", "COMPOSITE")
    assert head["ETag"].endswith('-5"')
    attrs = s3.get_object_attributes(
        Bucket=bucket, Key="forty", ObjectAttributes=["Checksum", "ObjectParts", "ObjectSize"]
    )
    assert attrs["Checksum"] == {"ChecksumCRC32": whole, "ChecksumType": "COMPOSITE"}
    listed = attrs["ObjectParts"]
    assert (listed["TotalPartsCount"], listed["IsTruncated"], listed["MaxParts"]) == (
        5,
        False,
        1000,
    )
    assert [(p["PartNumber"], p["Size"], p["ChecksumCRC32"]) for p in listed["Parts"]] == [
        (n, part, s) for n, s in enumerate(sums, 1)
    ]
    got = s3.get_object(Bucket=bucket, Key="forty", PartNumber=2, ChecksumMode="ENABLED")
    assert (got["ChecksumCRC32"], got["ChecksumType"]) == (sums[1], "COMPOSITE")
    back = tmp_path / "back"
    s3.download_file(bucket, "forty", str(back))  # botocore skips a composite value
    assert back.read_bytes() == data
