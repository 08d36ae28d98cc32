"""Conditional deletes as AWS answers them on general purpose buckets (since 2025): If-Match
(an ETag, or `*`) on DeleteObject and the ETag element of DeleteObjects, judged against the
key's current object (or the version named by id) in the delete's own transaction, and the
size and time conditions of AWS's directory buckets; a failed condition deletes nothing."""

from __future__ import annotations

import datetime

import pytest
from botocore.exceptions import ClientError

from tests import raw


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def test_if_match_on_delete_object(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["ETag"]
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=bucket, Key="k", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert error(exc) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"one"
    s3.delete_object(Bucket=bucket, Key="k", IfMatch=etag)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    # No object: NoSuchKey, whatever the condition (`*` asks that one exists).
    for condition in ("*", etag):
        with pytest.raises(ClientError) as exc:
            s3.delete_object(Bucket=bucket, Key="k", IfMatch=condition)
        assert error(exc) == ("NoSuchKey", 404)
    s3.put_object(Bucket=bucket, Key="k", Body=b"two")
    s3.delete_object(Bucket=bucket, Key="k", IfMatch="*")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_if_match_in_a_versioned_bucket_judges_the_current_object(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=bucket, Key="k", IfMatch='"ffffffffffffffffffffffffffffffff"')
    assert error(exc) == ("PreconditionFailed", 412)
    marker = s3.delete_object(Bucket=bucket, Key="k", IfMatch=put["ETag"])
    assert marker["DeleteMarker"] is True
    # Under a delete marker there is no current object.
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=bucket, Key="k", IfMatch="*")
    assert error(exc) == ("NoSuchKey", 404)
    versions = s3.list_object_versions(Bucket=bucket)
    assert len(versions["Versions"]) == 1 and len(versions["DeleteMarkers"]) == 1


def test_etag_elements_of_delete_objects(s3, bucket):
    a = s3.put_object(Bucket=bucket, Key="a", Body=b"a")["ETag"]
    s3.put_object(Bucket=bucket, Key="b", Body=b"b")
    answer = s3.delete_objects(
        Bucket=bucket,
        Delete={
            "Objects": [
                {"Key": "a", "ETag": a},
                {"Key": "b", "ETag": '"00000000000000000000000000000000"'},
                {"Key": "missing", "ETag": "*"},
                {"Key": "plain"},
            ]
        },
    )
    assert [d["Key"] for d in answer["Deleted"]] == ["a", "plain"]
    assert {(e["Key"], e["Code"]) for e in answer["Errors"]} == {
        ("b", "PreconditionFailed"),
        ("missing", "NoSuchKey"),
    }
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["b"]


def test_conditions_on_a_version_by_id(s3, bucket):
    """With a versionId the condition is judged against that version; a version already gone
    is no error (a removal by id never is)."""
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=bucket, Key="k", Body=b"old")
    s3.put_object(Bucket=bucket, Key="k", Body=b"newer")
    vid = old["VersionId"]
    head = s3.head_object(Bucket=bucket, Key="k", VersionId=vid)
    for condition in (
        {"IfMatch": '"ffffffffffffffffffffffffffffffff"'},
        {"IfMatchSize": 4},
        {"IfMatchLastModifiedTime": datetime.datetime(2015, 1, 1, tzinfo=datetime.UTC)},
    ):
        with pytest.raises(ClientError) as exc:
            s3.delete_object(Bucket=bucket, Key="k", VersionId=vid, **condition)
        assert error(exc) == ("PreconditionFailed", 412), condition
    s3.delete_object(
        Bucket=bucket,
        Key="k",
        VersionId=vid,
        IfMatch=old["ETag"],
        IfMatchSize=3,
        IfMatchLastModifiedTime=head["LastModified"],
    )
    assert vid not in {v["VersionId"] for v in s3.list_object_versions(Bucket=bucket)["Versions"]}
    answer = s3.delete_object(Bucket=bucket, Key="k", VersionId=vid, IfMatchSize=99)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"newer"


def test_size_and_time_elements_of_delete_objects(s3, bucket):
    s3.put_object(Bucket=bucket, Key="a", Body=b"12345")
    s3.put_object(Bucket=bucket, Key="b", Body=b"1")
    when = s3.head_object(Bucket=bucket, Key="a")["LastModified"]
    answer = s3.delete_objects(
        Bucket=bucket,
        Delete={
            "Objects": [
                {"Key": "a", "Size": 5, "LastModifiedTime": when},
                {"Key": "b", "Size": 2},
                {"Key": "gone", "Size": 2},  # no object: nothing to delete, no error
            ]
        },
    )
    assert [d["Key"] for d in answer["Deleted"]] == ["a", "gone"]
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [("b", "PreconditionFailed")]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["b"]


def test_a_bad_size_condition_is_refused(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    reply = raw.signed("DELETE", f"{gateway.url}/{bucket}/k", {"x-amz-if-match-size": "-1"})
    assert reply.status == 400 and b"InvalidArgument" in reply.body
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
