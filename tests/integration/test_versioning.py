"""Versioning against the real server with boto3: bucket states, versions and delete markers on
every read and write path, and the codes and headers AWS answers with."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests import awscli, raw
from tests.datadir import DataState, inspect
from tests.server import ACCESS_KEY, GatewayProcess

MIB = 1 << 20
# AWS's ids are 32 URL-safe characters; ours too.
VERSION_ID = re.compile(r"[A-Za-z0-9._-]{32}")


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def headers(response: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return response["ResponseMetadata"]["HTTPHeaders"]


def versioning(s3, bucket: str, status: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


@pytest.fixture
def versioned(s3, bucket) -> str:
    versioning(s3, bucket, "Enabled")
    return bucket


def state(gateway: GatewayProcess) -> DataState:
    """The gateway's data folder and catalog, whichever catalog it runs on."""
    return inspect(gateway.data, gateway.catalog)


def body(s3, bucket: str, key: str, **kw: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


# --- Put/GetBucketVersioning -----------------------------------------------------------------


def test_versioning_states(s3, bucket):
    # A new bucket has no state: an empty configuration.
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    # Suspending a never-versioned bucket is accepted (AWS), then Enabled, then Suspended again.
    for status in ("Suspended", "Enabled", "Enabled", "Suspended"):
        versioning(s3, bucket, status)
        assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == status
    # MFADelete: Disabled is accepted beside the status (s3-tests sends it).
    s3.put_bucket_versioning(
        Bucket=bucket, VersioningConfiguration={"Status": "Enabled", "MFADelete": "Disabled"}
    )
    answer = s3.get_bucket_versioning(Bucket=bucket)
    assert answer["Status"] == "Enabled" and "MFADelete" not in answer


def _config(inner: str) -> str:
    return f"<VersioningConfiguration>{inner}</VersioningConfiguration>"


@pytest.mark.parametrize(
    ("document", "code", "status"),
    [
        (_config("<Status>enabled</Status>"), "MalformedXML", 400),
        (_config("<Status>Disabled</Status>"), "MalformedXML", 400),
        (_config(""), "IllegalVersioningConfigurationException", 400),
        ("<Versioning><Status>Enabled</Status></Versioning>", "MalformedXML", 400),
        # AWS's answer without a valid x-amz-mfa.
        (_config("<Status>Enabled</Status><MfaDelete>Enabled</MfaDelete>"), "AccessDenied", 403),
    ],
)
def test_bad_versioning_configurations_change_nothing(gateway, s3, bucket, document, code, status):
    reply = raw.signed("PUT", f"{gateway.url}/{bucket}?versioning", body=document.encode())
    assert (reply.status, reply.code) == (status, code)
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)


# --- writes make versions; reads name them ---------------------------------------------------


def test_every_put_makes_a_version_readable_by_its_id(s3, versioned):
    ids = []
    for n in range(3):
        put = s3.put_object(Bucket=versioned, Key="k", Body=f"v{n}".encode())
        assert VERSION_ID.fullmatch(put["VersionId"])
        ids.append(put["VersionId"])
    assert len(set(ids)) == 3
    # Ids order newest first (the id's first characters are an inverted timestamp).
    assert sorted(ids, reverse=True) == ids
    for n, vid in enumerate(ids):
        got = s3.get_object(Bucket=versioned, Key="k", VersionId=vid)
        assert got["Body"].read() == f"v{n}".encode() and got["VersionId"] == vid
        assert s3.head_object(Bucket=versioned, Key="k", VersionId=vid)["VersionId"] == vid
    latest = s3.get_object(Bucket=versioned, Key="k")
    assert latest["Body"].read() == b"v2" and latest["VersionId"] == ids[-1]
    assert s3.head_object(Bucket=versioned, Key="k")["VersionId"] == ids[-1]
    # ListObjects shows the key once, as its latest version.
    listed = s3.list_objects_v2(Bucket=versioned)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("k", 2)]


def test_delete_without_id_adds_a_marker(gateway, s3, versioned):
    put = s3.put_object(Bucket=versioned, Key="k", Body=b"data")
    gone = s3.delete_object(Bucket=versioned, Key="k")
    assert gone["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert gone["DeleteMarker"] is True and VERSION_ID.fullmatch(gone["VersionId"])
    marker = gone["VersionId"]
    # GET and HEAD of the key: 404 NoSuchKey, saying which marker hides it.
    reply = raw.signed("GET", f"{gateway.url}/{versioned}/k")
    assert (reply.status, reply.code) == (404, "NoSuchKey")
    assert reply.headers["x-amz-delete-marker"] == "true"
    assert reply.headers["x-amz-version-id"] == marker
    reply = raw.signed("HEAD", f"{gateway.url}/{versioned}/k")
    assert reply.status == 404 and reply.body == b""
    assert reply.headers["x-amz-delete-marker"] == "true"
    assert reply.headers["x-amz-version-id"] == marker
    assert "Contents" not in s3.list_objects_v2(Bucket=versioned)
    # The version is still there, by its id.
    assert body(s3, versioned, "k", VersionId=put["VersionId"]) == b"data"
    # Each further DELETE stacks another marker, even on a key that never existed.
    again = s3.delete_object(Bucket=versioned, Key="k")
    assert again["DeleteMarker"] and again["VersionId"] not in (marker, put["VersionId"])
    never = s3.delete_object(Bucket=versioned, Key="never-written")
    assert never["DeleteMarker"] and VERSION_ID.fullmatch(never["VersionId"])


def test_a_marker_by_its_id(gateway, s3, versioned):
    s3.put_object(Bucket=versioned, Key="k", Body=b"data")
    marker = s3.delete_object(Bucket=versioned, Key="k")["VersionId"]
    url = f"{gateway.url}/{versioned}/k?versionId={marker}"
    reply = raw.signed("GET", url)
    assert (reply.status, reply.code) == (405, "MethodNotAllowed")
    assert b"<Method>GET</Method>" in reply.body
    assert b"<ResourceType>DeleteMarker</ResourceType>" in reply.body
    assert reply.headers["x-amz-delete-marker"] == "true"
    assert reply.headers["x-amz-version-id"] == marker
    assert reply.headers["allow"] == "DELETE"
    assert reply.headers["last-modified"].endswith(" GMT")
    reply = raw.signed("HEAD", url)
    assert reply.status == 405 and reply.body == b""
    assert reply.headers["x-amz-delete-marker"] == "true"
    # Removing the marker brings the object back.
    removed = s3.delete_object(Bucket=versioned, Key="k", VersionId=marker)
    assert removed["DeleteMarker"] is True and removed["VersionId"] == marker
    assert body(s3, versioned, "k") == b"data"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=versioned)["Contents"]] == ["k"]


def test_delete_by_id_removes_that_version_and_promotes_the_next(gateway, s3, versioned):
    ids = [s3.put_object(Bucket=versioned, Key="k", Body=b"%d" % n)["VersionId"] for n in range(3)]
    # An older version: gone for good, the latest unchanged.
    removed = s3.delete_object(Bucket=versioned, Key="k", VersionId=ids[0])
    assert removed["VersionId"] == ids[0] and "DeleteMarker" not in removed
    assert body(s3, versioned, "k") == b"2"
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=versioned, Key="k", VersionId=ids[0])
    assert error(exc) == ("NoSuchVersion", 404)
    # The latest: the next newest takes its place.
    s3.delete_object(Bucket=versioned, Key="k", VersionId=ids[2])
    got = s3.get_object(Bucket=versioned, Key="k")
    assert got["Body"].read() == b"1" and got["VersionId"] == ids[1]
    # Removing an id that names nothing is not an error (idempotent, as on S3).
    again = s3.delete_object(Bucket=versioned, Key="k", VersionId=ids[2])
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 204
    s3.delete_object(Bucket=versioned, Key="k", VersionId=ids[1])
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=versioned, Key="k")
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    # No marker was left: the key is simply gone.
    reply = raw.signed("GET", f"{gateway.url}/{versioned}/k")
    assert reply.code == "NoSuchKey" and "x-amz-delete-marker" not in reply.headers
    state(gateway).assert_clean()


def test_bad_and_unknown_version_ids(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    url = f"{gateway.url}/{bucket}/k"
    well_formed = "0" * 32
    # Never versioned: any id but null is invalid; `null` works and names no version.
    for method in ("GET", "HEAD", "DELETE"):
        reply = raw.signed(method, f"{url}?versionId={well_formed}")
        assert reply.status == 400, method
    reply = raw.signed("GET", f"{url}?versionId={well_formed}")
    assert reply.code == "InvalidArgument" and b"Invalid version id specified" in reply.body
    got = s3.get_object(Bucket=bucket, Key="k", VersionId="null")
    assert got["Body"].read() == b"x" and "x-amz-version-id" not in headers(got)
    versioning(s3, bucket, "Enabled")
    # Versioned: an id of our form that names nothing is NoSuchVersion; another form, invalid.
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k", VersionId=well_formed)
    assert error(exc) == ("NoSuchVersion", 404)
    reply = raw.signed("GET", f"{url}?versionId={well_formed}")
    assert f"<VersionId>{well_formed}</VersionId>".encode() in reply.body
    for bad in ("abc", "0" * 33, "z" * 32):
        reply = raw.signed("GET", f"{url}?versionId={bad}")
        assert (reply.status, reply.code) == (400, "InvalidArgument"), bad
        reply = raw.signed("DELETE", f"{url}?versionId={bad}")
        assert (reply.status, reply.code) == (400, "InvalidArgument"), bad
    reply = raw.signed("GET", f"{url}?versionId=")
    assert (reply.status, reply.code) == (400, "InvalidArgument")
    assert body(s3, bucket, "k") == b"x"  # nothing changed


# --- the null version ------------------------------------------------------------------------


def test_objects_from_before_versioning_are_the_null_version(gateway, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"before")
    versioning(s3, bucket, "Enabled")
    head = s3.head_object(Bucket=bucket, Key="k")
    assert head["VersionId"] == "null"  # versioning was set: the id is sent, `null`
    new = s3.put_object(Bucket=bucket, Key="k", Body=b"after")["VersionId"]
    assert body(s3, bucket, "k") == b"after"
    assert body(s3, bucket, "k", VersionId="null") == b"before"
    # Removing the newer version brings the null one back as the latest.
    s3.delete_object(Bucket=bucket, Key="k", VersionId=new)
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == b"before" and got["VersionId"] == "null"
    removed = s3.delete_object(Bucket=bucket, Key="k", VersionId="null")
    assert removed["VersionId"] == "null"
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k")
    assert error(exc) == ("NoSuchKey", 404)
    state(gateway).assert_clean()


def test_suspended_writes_replace_the_null_version_only(gateway, s3, versioned):
    kept = s3.put_object(Bucket=versioned, Key="k", Body=b"kept")["VersionId"]
    versioning(s3, versioned, "Suspended")
    put = s3.put_object(Bucket=versioned, Key="k", Body=b"null 1")
    assert "x-amz-version-id" not in headers(put)  # AWS: no id for a suspended PUT
    got = s3.get_object(Bucket=versioned, Key="k")
    assert got["Body"].read() == b"null 1" and got["VersionId"] == "null"
    before = state(gateway).blob_files
    s3.put_object(Bucket=versioned, Key="k", Body=b"null 2" * 20000)  # a file blob
    assert body(s3, versioned, "k", VersionId="null") == b"null 2" * 20000
    assert body(s3, versioned, "k", VersionId=kept) == b"kept"
    # A DELETE without an id writes a null marker, which replaces the null object for good.
    gone = s3.delete_object(Bucket=versioned, Key="k")
    assert gone["DeleteMarker"] is True and gone["VersionId"] == "null"
    reply = raw.signed("GET", f"{gateway.url}/{versioned}/k?versionId=null")
    assert (reply.status, reply.code) == (405, "MethodNotAllowed")
    assert state(gateway).blob_files == before  # the null object's blob is freed
    assert body(s3, versioned, "k", VersionId=kept) == b"kept"
    # Removing the null marker makes the real version the latest again.
    s3.delete_object(Bucket=versioned, Key="k", VersionId="null")
    assert body(s3, versioned, "k") == b"kept"
    state(gateway).assert_clean()


def test_version_ids_are_sent_only_where_versioning_was_set(s3, bucket):
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for response in (
        put,
        s3.get_object(Bucket=bucket, Key="k"),
        s3.head_object(Bucket=bucket, Key="k"),
    ):
        assert "x-amz-version-id" not in headers(response)
    assert "x-amz-delete-marker" not in headers(s3.delete_object(Bucket=bucket, Key="k"))
    # The 404 that follows has no delete-marker header either: "If false, this response
    # header does not appear in the response" (API_HeadObject.html).
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=bucket, Key="k")
    assert "x-amz-delete-marker" not in exc.value.response["ResponseMetadata"]["HTTPHeaders"]
    versioning(s3, bucket, "Suspended")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert headers(s3.get_object(Bucket=bucket, Key="k"))["x-amz-version-id"] == "null"
    assert headers(s3.head_object(Bucket=bucket, Key="k"))["x-amz-version-id"] == "null"


# --- ListObjectVersions ----------------------------------------------------------------------


def _history(s3, bucket: str) -> dict[str, list[str]]:
    """Writes a/1 (two versions), a/2 (a version under a marker), b (three versions) and c
    (a version, a marker, a version); gives each key's version ids newest first."""
    ids: dict[str, list[str]] = {}

    def put(key: str) -> None:
        made = s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
        ids.setdefault(key, []).insert(0, made["VersionId"])

    def delete(key: str) -> None:
        made = s3.delete_object(Bucket=bucket, Key=key)
        ids.setdefault(key, []).insert(0, made["VersionId"])

    put("a/1")
    put("a/1")
    put("a/2")
    delete("a/2")
    for _ in range(3):
        put("b")
    put("c")
    delete("c")
    put("c")
    return ids


def test_list_object_versions(s3, versioned):
    ids = _history(s3, versioned)
    owner = s3.list_buckets()["Owner"]["ID"]
    listing = s3.list_object_versions(Bucket=versioned)
    assert listing["IsTruncated"] is False and listing["KeyMarker"] == ""
    versions = [(v["Key"], v["VersionId"], v["IsLatest"]) for v in listing["Versions"]]
    markers = [(m["Key"], m["VersionId"], m["IsLatest"]) for m in listing["DeleteMarkers"]]
    assert versions == [
        ("a/1", ids["a/1"][0], True),
        ("a/1", ids["a/1"][1], False),
        ("a/2", ids["a/2"][1], False),
        ("b", ids["b"][0], True),
        ("b", ids["b"][1], False),
        ("b", ids["b"][2], False),
        ("c", ids["c"][0], True),
        ("c", ids["c"][2], False),
    ]
    assert markers == [("a/2", ids["a/2"][0], True), ("c", ids["c"][1], False)]
    for v in listing["Versions"]:
        assert v["Size"] == len(v["Key"]) and v["StorageClass"] == "STANDARD"
        assert v["ETag"] == f'"{hashlib.md5(v["Key"].encode()).hexdigest()}"'
        assert v["Owner"]["ID"] == owner
    assert all(m["Owner"]["ID"] == owner for m in listing["DeleteMarkers"])
    # Newest first within a key, by time too.
    b_times = [v["LastModified"] for v in listing["Versions"] if v["Key"] == "b"]
    assert b_times == sorted(b_times, reverse=True)
    # Prefix, delimiter and common prefixes.
    rolled = s3.list_object_versions(Bucket=versioned, Delimiter="/")
    assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["a/"]
    assert {v["Key"] for v in rolled["Versions"]} == {"b", "c"}
    inside = s3.list_object_versions(Bucket=versioned, Prefix="a/", Delimiter="/")
    assert "CommonPrefixes" not in inside
    assert [(v["Key"], v["VersionId"]) for v in inside["Versions"]][-1] == ("a/2", ids["a/2"][1])
    assert inside["DeleteMarkers"][0]["Key"] == "a/2"


def test_list_object_versions_pages(s3, versioned):
    ids = _history(s3, versioned)
    everything = [(k, v) for k in sorted(ids) for v in ids[k]]
    seen: list[tuple[str, str]] = []
    kwargs: dict[str, str] = {}
    while True:
        page = s3.list_object_versions(Bucket=versioned, MaxKeys=3, **kwargs)
        # boto3 splits the one sequence in two: merge it back in the order it must have had.
        entries = [(e["Key"], e["VersionId"]) for e in page.get("Versions", [])]
        entries += [(e["Key"], e["VersionId"]) for e in page.get("DeleteMarkers", [])]
        entries.sort(key=everything.index)
        assert len(entries) == 3 or not page["IsTruncated"]
        seen += entries
        if not page["IsTruncated"]:
            break
        # The next page starts after the last entry returned (a marker's id when it is one).
        assert (page["NextKeyMarker"], page["NextVersionIdMarker"]) == seen[-1]
        kwargs = {
            "KeyMarker": page["NextKeyMarker"],
            "VersionIdMarker": page["NextVersionIdMarker"],
        }
    assert seen == everything
    # A key marker alone starts after every version of that key.
    after = s3.list_object_versions(Bucket=versioned, KeyMarker="b")
    assert {v["Key"] for v in after["Versions"]} == {"c"}
    # With a common prefix as the next marker, the page after it skips what it rolled up.
    first = s3.list_object_versions(Bucket=versioned, Delimiter="/", MaxKeys=1)
    assert first["IsTruncated"] and first["NextKeyMarker"] == "a/"
    assert "NextVersionIdMarker" not in first
    rest = s3.list_object_versions(Bucket=versioned, Delimiter="/", KeyMarker="a/")
    assert {v["Key"] for v in rest["Versions"]} == {"b", "c"}


def test_list_object_versions_arguments(gateway, s3, versioned):
    s3.put_object(Bucket=versioned, Key="sp ace/é\x01", Body=b"x")
    encoded = s3.list_object_versions(Bucket=versioned, EncodingType="url", Delimiter="/")
    assert encoded["EncodingType"] == "url"
    assert [p["Prefix"] for p in encoded["CommonPrefixes"]] == ["sp+ace/"]
    inside = s3.list_object_versions(Bucket=versioned, EncodingType="url", Prefix="sp ace/")
    assert inside["Versions"][0]["Key"] == "sp+ace/%C3%A9%01"
    assert inside["Prefix"] == "sp+ace/"
    url = f"{gateway.url}/{versioned}?versions"
    reply = raw.signed("GET", f"{url}&version-id-marker={'0' * 32}")
    assert (reply.status, reply.code) == (400, "InvalidArgument")
    assert b"A version-id marker cannot be specified without a key marker." in reply.body
    reply = raw.signed("GET", f"{url}&key-marker=a&version-id-marker=nonsense")
    assert (reply.status, reply.code) == (400, "InvalidArgument")
    reply = raw.signed("GET", f"{url}&max-keys=-1")
    assert (reply.status, reply.code) == (400, "InvalidArgument")


def test_list_object_versions_with_aws_cli(gateway, s3, versioned):
    ids = _history(s3, versioned)
    command = ["s3api", "list-object-versions", "--bucket", versioned, "--prefix", "c"]
    out = json.loads(awscli.ok(gateway.url, *command))
    assert [v["VersionId"] for v in out["Versions"]] == [ids["c"][0], ids["c"][2]]
    assert [(m["VersionId"], m["IsLatest"]) for m in out["DeleteMarkers"]] == [(ids["c"][1], False)]


# --- DeleteObjects ---------------------------------------------------------------------------


def test_delete_objects_with_versions(s3, versioned):
    old = s3.put_object(Bucket=versioned, Key="k", Body=b"old")["VersionId"]
    s3.put_object(Bucket=versioned, Key="k", Body=b"new")
    s3.put_object(Bucket=versioned, Key="m", Body=b"m")
    marker = s3.delete_object(Bucket=versioned, Key="m")["VersionId"]
    answer = s3.delete_objects(
        Bucket=versioned,
        Delete={
            "Objects": [
                {"Key": "k"},  # a marker, for a key that exists
                {"Key": "never"},  # and for one that never did
                {"Key": "m", "VersionId": marker},  # a marker removed by its id
                {"Key": "k", "VersionId": old},  # a version removed by its id
                {"Key": "k", "VersionId": "0" * 32},  # an id naming nothing: deleted (idempotent)
                {"Key": "k", "VersionId": "not-an-id"},  # a malformed id
            ]
        },
    )
    deleted = {(d["Key"], d.get("VersionId")): d for d in answer["Deleted"]}
    made = deleted[("k", None)]
    assert made["DeleteMarker"] is True and VERSION_ID.fullmatch(made["DeleteMarkerVersionId"])
    assert deleted[("never", None)]["DeleteMarker"] is True
    removed = deleted[("m", marker)]
    assert removed["DeleteMarker"] is True and removed["DeleteMarkerVersionId"] == marker
    assert "DeleteMarker" not in deleted[("k", old)]
    assert ("k", "0" * 32) in deleted
    (failed,) = answer["Errors"]
    assert failed["Code"] == "NoSuchVersion"
    assert (failed["Key"], failed["VersionId"]) == ("k", "not-an-id")
    # The marker on m is gone: m is back; k is hidden by its new marker; old is gone.
    assert body(s3, versioned, "m") == b"m"
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=versioned, Key="k")
    assert error(exc) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=versioned, Key="k", VersionId=old)
    assert error(exc) == ("NoSuchVersion", 404)
    # Quiet: only errors.
    quiet = s3.delete_objects(
        Bucket=versioned,
        Delete={"Objects": [{"Key": "m"}, {"Key": "m", "VersionId": "x"}], "Quiet": True},
    )
    assert "Deleted" not in quiet and [e["Code"] for e in quiet["Errors"]] == ["NoSuchVersion"]


def test_delete_objects_on_a_bucket_never_versioned(s3, bucket):
    s3.put_object(Bucket=bucket, Key="a", Body=b"a")
    s3.put_object(Bucket=bucket, Key="b", Body=b"b")
    answer = s3.delete_objects(
        Bucket=bucket,
        Delete={
            "Objects": [
                {"Key": "a"},
                {"Key": "b", "VersionId": "null"},
                {"Key": "c", "VersionId": "0" * 32},
            ]
        },
    )
    assert sorted(
        (d["Key"], d.get("VersionId"), d.get("DeleteMarker")) for d in answer["Deleted"]
    ) == [
        ("a", None, None),
        ("b", "null", None),
    ]
    assert [e["Code"] for e in answer["Errors"]] == ["NoSuchVersion"]
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


# --- copies and multipart uploads make versions ----------------------------------------------


def test_copy_from_an_older_version_is_metadata_only(gateway, s3, versioned):
    data = os.urandom(2 * MIB)
    first = s3.put_object(Bucket=versioned, Key="src", Body=data, CacheControl="max-age=9")
    s3.put_object(Bucket=versioned, Key="src", Body=b"newer")
    before = state(gateway).blob_files
    copy = s3.copy_object(
        Bucket=versioned,
        Key="dst",
        CopySource={"Bucket": versioned, "Key": "src", "VersionId": first["VersionId"]},
    )
    # The plain-MD5 ETag is reused and no byte is written, whatever version it comes from.
    assert copy["CopyObjectResult"]["ETag"] == first["ETag"]
    assert state(gateway).blob_files == before
    assert copy["CopySourceVersionId"] == first["VersionId"]
    assert "cache-control" not in headers(copy)  # the object's headers are not the answer's
    assert s3.head_object(Bucket=versioned, Key="dst")["CacheControl"] == "max-age=9"
    assert VERSION_ID.fullmatch(copy["VersionId"]) and copy["VersionId"] != first["VersionId"]
    assert body(s3, versioned, "dst") == data
    assert body(s3, versioned, "dst", VersionId=copy["VersionId"]) == data
    # Restoring an old version onto its own key is a copy of it there.
    restored = s3.copy_object(
        Bucket=versioned,
        Key="src",
        CopySource={"Bucket": versioned, "Key": "src", "VersionId": first["VersionId"]},
    )
    assert body(s3, versioned, "src") == data and restored["VersionId"] != first["VersionId"]
    # Into a bucket never versioned: no id for the copy, the source's id still said.
    plain = f"{versioned}-plain"
    s3.create_bucket(Bucket=plain)
    other = s3.copy_object(
        Bucket=plain, Key="c", CopySource=f"{versioned}/src?versionId={first['VersionId']}"
    )
    assert "VersionId" not in other and other["CopySourceVersionId"] == first["VersionId"]
    assert "x-amz-copy-source-version-id" not in headers(
        s3.copy_object(Bucket=plain, Key="d", CopySource=f"{plain}/c")
    )
    # Removing the source version leaves the copies' bytes alone.
    s3.delete_object(Bucket=versioned, Key="src", VersionId=first["VersionId"])
    assert body(s3, plain, "c") == data
    state(gateway).assert_clean()


def test_copy_sources_that_are_delete_markers(gateway, s3, versioned):
    s3.put_object(Bucket=versioned, Key="src", Body=b"x")
    marker = s3.delete_object(Bucket=versioned, Key="src")["VersionId"]
    with pytest.raises(ClientError) as exc:  # the latest is a marker
        s3.copy_object(Bucket=versioned, Key="dst", CopySource=f"{versioned}/src")
    assert error(exc) == ("NoSuchKey", 404)
    url = f"{gateway.url}/{versioned}/dst"
    reply = raw.signed("PUT", url, {"x-amz-copy-source": f"{versioned}/src?versionId={marker}"})
    assert (reply.status, reply.code) == (400, "InvalidRequest")
    assert b"may not specifically refer to a delete marker by version id" in reply.body
    assert "x-amz-delete-marker" not in reply.headers  # the marker is the source's, not ours
    reply = raw.signed("PUT", url, {"x-amz-copy-source": f"{versioned}/src?versionId={'0' * 32}"})
    assert (reply.status, reply.code) == (404, "NoSuchVersion")
    reply = raw.signed("PUT", url, {"x-amz-copy-source": f"{versioned}/src?versionId=bad"})
    assert (reply.status, reply.code) == (400, "InvalidArgument")


def test_upload_part_copy_from_an_older_version(gateway, s3, versioned):
    data = os.urandom(6 * MIB)
    first = s3.put_object(Bucket=versioned, Key="src", Body=data)
    s3.put_object(Bucket=versioned, Key="src", Body=b"newer")
    upload = s3.create_multipart_upload(Bucket=versioned, Key="mp")["UploadId"]
    before = state(gateway).blob_files
    source = {"Bucket": versioned, "Key": "src", "VersionId": first["VersionId"]}

    def copy_part(number: int, **extra: str) -> dict:  # type: ignore[type-arg]
        return s3.upload_part_copy(
            Bucket=versioned,
            Key="mp",
            UploadId=upload,
            PartNumber=number,
            CopySource=source,
            **extra,
        )

    part = copy_part(1)
    assert part["CopyPartResult"]["ETag"] == first["ETag"]  # the whole plain-MD5 source
    assert part["CopySourceVersionId"] == first["VersionId"]
    ranged = copy_part(2, CopySourceRange="bytes=0-9")
    assert ranged["CopyPartResult"]["ETag"] == f'"{hashlib.md5(data[:10]).hexdigest()}"'
    assert state(gateway).blob_files == before
    done = s3.complete_multipart_upload(
        Bucket=versioned,
        Key="mp",
        UploadId=upload,
        MultipartUpload={
            "Parts": [
                {"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]},
                {"PartNumber": 2, "ETag": ranged["CopyPartResult"]["ETag"]},
            ]
        },
    )
    assert VERSION_ID.fullmatch(done["VersionId"])
    assert body(s3, versioned, "mp", VersionId=done["VersionId"]) == data + data[:10]
    state(gateway).assert_clean()


def test_complete_makes_a_version(s3, versioned):
    def upload(data: bytes) -> dict:  # type: ignore[type-arg]
        uid = s3.create_multipart_upload(Bucket=versioned, Key="mp")["UploadId"]
        etag = s3.upload_part(Bucket=versioned, Key="mp", UploadId=uid, PartNumber=1, Body=data)
        return s3.complete_multipart_upload(
            Bucket=versioned,
            Key="mp",
            UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag["ETag"]}]},
        )

    first, second = upload(b"one"), upload(b"two")
    assert VERSION_ID.fullmatch(first["VersionId"]) and first["VersionId"] != second["VersionId"]
    assert body(s3, versioned, "mp", VersionId=first["VersionId"]) == b"one"
    assert body(s3, versioned, "mp") == b"two"
    listed = s3.list_object_versions(Bucket=versioned)["Versions"]
    assert [v["VersionId"] for v in listed] == [second["VersionId"], first["VersionId"]]
    assert all(v["ETag"].endswith('-1"') for v in listed)
    versioning(s3, versioned, "Suspended")
    third = upload(b"three")
    assert "VersionId" not in third  # a suspended Complete sends no id, as a suspended PUT
    assert body(s3, versioned, "mp", VersionId="null") == b"three"


def test_fsck_counts_every_version(tmp_path, catalog):
    data = tmp_path / "data"
    server = GatewayProcess(data, catalog=catalog).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="fsck")
        versioning(s3, "fsck", "Enabled")
        big = os.urandom(MIB)
        first = s3.put_object(Bucket="fsck", Key="k", Body=big)["VersionId"]
        s3.put_object(Bucket="fsck", Key="k", Body=b"second")
        s3.copy_object(Bucket="fsck", Key="c", CopySource=f"fsck/k?versionId={first}")
        s3.delete_object(Bucket="fsck", Key="k")
        s3.delete_object(Bucket="fsck", Key="c")
    finally:
        server.stop()

    def fsck(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "gateway", "fsck", "--data", str(data), *args]
        command += [] if catalog is None else ["--catalog", catalog]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    result = fsck("--deep")
    assert result.returncode == 0, result.stdout
    assert "no damage found" in result.stdout
    # Only noncurrent versions reference the big blob now (twice): a wrong count is found.
    count = f"SELECT refs FROM blobs WHERE size = {MIB}"
    spoil = f"UPDATE blobs SET refs = 1 WHERE size = {MIB}"
    if catalog is None:
        with sqlite3.connect(data / "catalog.sqlite3") as conn:
            assert conn.execute(count).fetchall() == [(2,)]
            conn.execute(spoil)
    else:
        import psycopg

        with psycopg.connect(catalog, autocommit=True) as conn:
            assert conn.execute(count).fetchall() == [(2,)]
            conn.execute(spoil)
    result = fsck()
    assert result.returncode == 1 and "count 1, references 2" in result.stdout


def test_object_acls_of_versions_and_markers(s3, versioned):
    s3.delete_bucket_ownership_controls(Bucket=versioned)  # ACLs on, as the recordings had
    vid = s3.put_object(Bucket=versioned, Key="k", Body=b"x")["VersionId"]
    marker = s3.delete_object(Bucket=versioned, Key="k")["VersionId"]
    acl = s3.get_object_acl(Bucket=versioned, Key="k", VersionId=vid)
    assert acl["Grants"][0]["Permission"] == "FULL_CONTROL"
    # AWS is not consistent with itself here; these are its answers (S3-SEMANTICS.md).
    with pytest.raises(ClientError) as exc:
        s3.get_object_acl(Bucket=versioned, Key="k")
    assert error(exc) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as exc:
        s3.get_object_acl(Bucket=versioned, Key="k", VersionId=marker)
    assert error(exc) == ("MethodNotAllowed", 405)
    with pytest.raises(ClientError) as exc:
        s3.put_object_acl(Bucket=versioned, Key="k", ACL="private")
    assert error(exc) == ("MethodNotAllowed", 405)
    s3.put_object_acl(Bucket=versioned, Key="k", ACL="private", VersionId=vid)


# --- buckets and blobs -----------------------------------------------------------------------


def test_a_bucket_with_versions_or_markers_is_not_empty(gateway, s3, versioned):
    vid = s3.put_object(Bucket=versioned, Key="k", Body=b"x" * 100_000)["VersionId"]
    marker = s3.delete_object(Bucket=versioned, Key="k")["VersionId"]
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket=versioned)
    assert error(exc) == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket=versioned, Key="k", VersionId=vid)
    with pytest.raises(ClientError) as exc:  # the marker alone still counts
        s3.delete_bucket(Bucket=versioned)
    assert error(exc) == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket=versioned, Key="k", VersionId=marker)
    s3.delete_bucket(Bucket=versioned)
    state(gateway).assert_clean()


def test_a_blob_is_freed_when_its_last_version_goes(gateway, s3, versioned):
    data = b"v" * 200_000  # above --inline-max: a blob file
    before = state(gateway).blob_files
    first = s3.put_object(Bucket=versioned, Key="k", Body=data)["VersionId"]
    (blob,) = state(gateway).blob_files - before
    s3.put_object(Bucket=versioned, Key="k", Body=b"small")  # the first is noncurrent now
    s3.delete_object(Bucket=versioned, Key="k")  # and a marker on top
    now = state(gateway)
    assert blob in now.blob_files and now.refs[blob] == 1
    now.assert_clean()
    s3.delete_object(Bucket=versioned, Key="k", VersionId=first)
    assert blob not in state(gateway).blob_files
    state(gateway).assert_clean()


# --- a data folder from before versioning ----------------------------------------------------

# The catalog as the gateway wrote it before versioning (schema 2), frozen here.
_SCHEMA_2 = """
CREATE TABLE buckets (name TEXT PRIMARY KEY, owner TEXT NOT NULL, region TEXT NOT NULL,
    created_ns INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE objects (bucket TEXT NOT NULL, key BLOB NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, content_md5 TEXT, mtime_ns INTEGER NOT NULL, attrs TEXT NOT NULL,
    manifest TEXT NOT NULL, parts TEXT, upload_id TEXT, PRIMARY KEY (bucket, key)) WITHOUT ROWID;
CREATE TABLE uploads (id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key BLOB NOT NULL,
    initiated_ns INTEGER NOT NULL, owner TEXT NOT NULL, attrs TEXT NOT NULL);
CREATE INDEX uploads_by_key ON uploads (bucket, key, initiated_ns, id);
CREATE TABLE parts (upload_id TEXT NOT NULL, number INTEGER NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, mtime_ns INTEGER NOT NULL, manifest TEXT NOT NULL, checksum TEXT,
    PRIMARY KEY (upload_id, number)) WITHOUT ROWID;
CREATE TABLE blobs (id TEXT PRIMARY KEY, size INTEGER NOT NULL, refs INTEGER NOT NULL, data BLOB);
PRAGMA user_version=2;
"""


def test_a_data_folder_from_before_versioning_upgrades_in_place(tmp_path: Path):
    from gateway.users import _user

    data = tmp_path / "data"
    data.mkdir()
    owner = _user(ACCESS_KEY, "unused").canonical_id
    conn = sqlite3.connect(data / "catalog.sqlite3")
    conn.executescript(_SCHEMA_2)
    attrs = json.dumps({"content_type": "text/plain", "headers": {}, "meta": {}})
    conn.execute("INSERT INTO buckets VALUES ('old', ?, 'us-east-1', 1)", (owner,))
    conn.execute("INSERT INTO blobs VALUES ('b1', 5, 1, ?)", (b"hello",))
    conn.execute(
        "INSERT INTO objects VALUES ('old', ?, 5, ?, NULL, 1700000000000000000, ?, ?, NULL, NULL)",
        (b"k", hashlib.md5(b"hello").hexdigest(), attrs, json.dumps([["b1", 0, 5]])),
    )
    conn.commit()
    conn.close()
    server = GatewayProcess(data).start()
    try:
        s3 = server.client()
        assert s3.get_object(Bucket="old", Key="k")["Body"].read() == b"hello"
        (version,) = s3.list_object_versions(Bucket="old")["Versions"]
        assert (version["Key"], version["VersionId"], version["IsLatest"]) == ("k", "null", True)
        versioning(s3, "old", "Enabled")
        s3.put_object(Bucket="old", Key="k", Body=b"new")
        assert body(s3, "old", "k", VersionId="null") == b"hello"
        assert body(s3, "old", "k") == b"new"
    finally:
        server.stop()
    inspect(data).assert_clean()


def test_a_copy_whose_source_version_is_removed_meanwhile_is_no_such_version(s3, versioned):
    """CopyObject ?versionId= names a version: if a removal by its id commits while the copy
    hashes the source (a multipart source whose MD5 is not known yet), the answer is the one a
    lookup would give then, NoSuchVersion, not NoSuchKey (the crash harness met it)."""
    big = os.urandom(48 * MIB)
    s3.put_object(Bucket=versioned, Key="big", Body=big)
    codes = []
    for attempt in range(8):
        # Parts copied from `big`: nothing is written, and the version's MD5 is not known.
        upload = s3.create_multipart_upload(Bucket=versioned, Key="src")["UploadId"]
        parts = []
        for n in range(3):
            part = s3.upload_part_copy(
                Bucket=versioned,
                Key="src",
                UploadId=upload,
                PartNumber=n + 1,
                CopySource=f"{versioned}/big",
                CopySourceRange=f"bytes={n * 16 * MIB}-{(n + 1) * 16 * MIB - 1}",
            )
            parts.append({"PartNumber": n + 1, "ETag": part["CopyPartResult"]["ETag"]})
        vid = s3.complete_multipart_upload(
            Bucket=versioned, Key="src", UploadId=upload, MultipartUpload={"Parts": parts}
        )["VersionId"]
        source = {"Bucket": versioned, "Key": "src", "VersionId": vid}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            copy = pool.submit(s3.copy_object, Bucket=versioned, Key="dst", CopySource=source)
            time.sleep(0.01 * attempt)  # a removal at different moments of the copy
            s3.delete_object(Bucket=versioned, Key="src", VersionId=vid)
            try:
                copy.result()
            except ClientError as exc:
                status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
                codes.append((exc.response["Error"]["Code"], status))
    assert codes, "every copy committed before the removal: the race was never run"
    assert set(codes) == {("NoSuchVersion", 404)}, codes
