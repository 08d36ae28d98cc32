"""Object and bucket tagging through boto3 and aws-cli: tags on PUT, CreateMultipartUpload and
copies (with the tagging directive), Put/Get/DeleteObjectTagging by version, the tag count on
GET/HEAD, Put/Get/DeleteBucketTagging, and AWS's limits and errors, each of which changes
nothing."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests import awscli, raw


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def tag_set(pairs: list[tuple[str, str]]) -> dict:  # type: ignore[type-arg]
    return {"TagSet": [{"Key": k, "Value": v} for k, v in pairs]}


def tags_of(s3, bucket: str, key: str, **kw: str) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    got = s3.get_object_tagging(Bucket=bucket, Key=key, **kw)["TagSet"]
    return [(t["Key"], t["Value"]) for t in got]


def test_tags_on_put_are_listed_by_key_and_counted(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="b=2&a=1&empty=&sp%20ace=v%2Bw")
    assert tags_of(s3, bucket, "k") == [("a", "1"), ("b", "2"), ("empty", ""), ("sp ace", "v+w")]
    assert (
        s3.head_object(Bucket=bucket, Key="k")["ResponseMetadata"]["HTTPHeaders"][
            "x-amz-tagging-count"
        ]
        == "4"
    )
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["TagCount"] == 4 and got["Body"].read() == b"x"
    # No tags: no count header, and an empty set.
    s3.put_object(Bucket=bucket, Key="plain", Body=b"y")
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="plain")
    assert tags_of(s3, bucket, "plain") == []
    # An overwrite without tags drops them.
    s3.put_object(Bucket=bucket, Key="k", Body=b"z")
    assert tags_of(s3, bucket, "k") == []


def test_put_get_delete_object_tagging(s3, bucket):
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"data")
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tag_set([("x", "1"), ("y", "2")]))
    assert tags_of(s3, bucket, "k") == [("x", "1"), ("y", "2")]
    head = s3.head_object(Bucket=bucket, Key="k")
    # The bytes, ETag and time are the object's own still.
    assert head["ETag"] == put["ETag"] and head["ContentLength"] == 4
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"data"
    answer = s3.delete_object_tagging(Bucket=bucket, Key="k")
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert tags_of(s3, bucket, "k") == []
    with pytest.raises(ClientError) as exc:
        s3.get_object_tagging(Bucket=bucket, Key="absent")
    assert error(exc) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as exc:
        s3.put_object_tagging(Bucket=bucket, Key="absent", Tagging=tag_set([("a", "b")]))
    assert error(exc) == ("NoSuchKey", 404)


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([(f"k{n}", "v") for n in range(11)], ("BadRequest", 400)),  # over 10
        ([("a", "1"), ("a", "2")], ("InvalidTag", 400)),  # a key twice
        ([("k" * 129, "v")], ("InvalidTag", 400)),
        ([("k", "v" * 257)], ("InvalidTag", 400)),
        ([("bad,key", "v")], ("InvalidTag", 400)),
        ([("aws:owner", "v")], ("InvalidTag", 400)),
    ],
)
def test_bad_tag_sets_are_refused_and_change_nothing(s3, bucket, pairs, expected):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="keep=me")
    with pytest.raises(ClientError) as exc:
        s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tag_set(pairs))
    assert error(exc) == expected
    assert tags_of(s3, bucket, "k") == [("keep", "me")]


def test_the_limits_themselves_are_allowed(s3, bucket):
    pairs = [(f"{n}" + "k" * 127, "v" * 256) for n in range(10)]
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tag_set(pairs))
    assert tags_of(s3, bucket, "k") == pairs


def test_a_bad_tagging_header_is_refused_and_writes_nothing(s3, bucket):
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="a=1&a=2")
    assert error(exc) == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as exc:
        s3.put_object(
            Bucket=bucket, Key="k", Body=b"x", Tagging="&".join(f"k{n}=v" for n in range(11))
        )
    assert error(exc) == ("BadRequest", 400)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_malformed_tagging_documents_change_nothing(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="keep=me")
    url = f"{gateway.url}/{bucket}/k?tagging"
    for body in (
        b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",  # no Value
        b"<Tagging><TagSet><Tag><Value>a</Value></Tag></TagSet></Tagging>",  # no Key
        b"<Tagging/>",  # no TagSet
        b"<Other><TagSet/></Other>",
        b"not xml",
    ):
        reply = raw.signed("PUT", url, body=body)
        assert (reply.status, b"<Code>MalformedXML</Code>" in reply.body) == (400, True), body
    assert tags_of(s3, bucket, "k") == [("keep", "me")]
    # An empty value is a value.
    empty = b"<Tagging><TagSet><Tag><Key>a</Key><Value></Value></Tag></TagSet></Tagging>"
    assert raw.signed("PUT", url, body=empty).status == 200
    assert tags_of(s3, bucket, "k") == [("a", "")]


def test_tags_on_multipart_and_copies(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="m=1")
    part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
    )
    assert tags_of(s3, bucket, "mp") == [("m", "1")]
    source = {"Bucket": bucket, "Key": "mp"}
    # COPY (the default) takes the source's tags and ignores the request's header.
    s3.copy_object(Bucket=bucket, Key="c1", CopySource=source, Tagging="ignored=1")
    assert tags_of(s3, bucket, "c1") == [("m", "1")]
    s3.copy_object(
        Bucket=bucket, Key="c2", CopySource=source, Tagging="new=2", TaggingDirective="REPLACE"
    )
    assert tags_of(s3, bucket, "c2") == [("new", "2")]
    s3.copy_object(Bucket=bucket, Key="c3", CopySource=source, TaggingDirective="REPLACE")
    assert tags_of(s3, bucket, "c3") == []
    # Onto itself, REPLACE of the tags alone is a change (no InvalidRequest).
    s3.copy_object(
        Bucket=bucket, Key="mp", CopySource=source, Tagging="self=1", TaggingDirective="REPLACE"
    )
    assert tags_of(s3, bucket, "mp") == [("self", "1")]
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="c4", CopySource=source, TaggingDirective="MERGE")
    assert error(exc) == ("InvalidArgument", 400)


def test_tags_by_version(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=bucket, Key="k", Body=b"old", Tagging="v=old")["VersionId"]
    new = s3.put_object(Bucket=bucket, Key="k", Body=b"new", Tagging="v=new")["VersionId"]
    answer = s3.put_object_tagging(
        Bucket=bucket, Key="k", VersionId=old, Tagging=tag_set([("v", "changed")])
    )
    assert answer["VersionId"] == old
    assert tags_of(s3, bucket, "k", VersionId=old) == [("v", "changed")]
    assert tags_of(s3, bucket, "k") == [("v", "new")]
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["VersionId"] == new
    # The latest version is a delete marker: changing tags is 405, as AWS answers.
    s3.delete_object(Bucket=bucket, Key="k")
    with pytest.raises(ClientError) as exc:
        s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tag_set([("a", "b")]))
    assert error(exc) == ("MethodNotAllowed", 405)
    assert tags_of(s3, bucket, "k", VersionId=old) == [("v", "changed")]


def test_bucket_tagging(s3, bucket):
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_tagging(Bucket=bucket)
    assert error(exc) == ("NoSuchTagSet", 404)
    pairs = [(f"k{n}", f"v{n}") for n in range(50)]
    answer = s3.put_bucket_tagging(Bucket=bucket, Tagging=tag_set(pairs))
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204
    got = s3.get_bucket_tagging(Bucket=bucket)["TagSet"]
    assert [(t["Key"], t["Value"]) for t in got] == sorted(pairs)
    for bad, expected in (
        ([(f"k{n}", "v") for n in range(51)], ("BadRequest", 400)),
        ([("aws:x", "v")], ("InvalidTag", 400)),
    ):
        with pytest.raises(ClientError) as exc:
            s3.put_bucket_tagging(Bucket=bucket, Tagging=tag_set(bad))
        assert error(exc) == expected
    assert len(s3.get_bucket_tagging(Bucket=bucket)["TagSet"]) == 50  # unchanged
    assert s3.delete_bucket_tagging(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_tagging(Bucket=bucket)
    assert error(exc) == ("NoSuchTagSet", 404)


def test_aws_cli_object_tagging(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    tagging = json.dumps(tag_set([("team", "storage")]))
    awscli.ok(
        gateway.url, "s3api", "put-object-tagging", "--bucket", bucket, "--key", "k",
        "--tagging", tagging,
    )  # fmt: skip
    out = awscli.ok(gateway.url, "s3api", "get-object-tagging", "--bucket", bucket, "--key", "k")
    assert json.loads(out)["TagSet"] == [{"Key": "team", "Value": "storage"}]
