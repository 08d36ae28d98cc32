"""Object Lock against the real server with boto3: the bucket's configuration, retention and
legal holds on writes and by their own operations, and enforcement, with AWS's codes."""

from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import sqlite3
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from gateway.store.sqlite.schema import SCHEMA_VERSION
from tests import raw
from tests.datadir import inspect
from tests.server import ACCESS_KEY, GatewayProcess

UTC = datetime.UTC
FUTURE = datetime.datetime(2140, 1, 1, tzinfo=UTC)
_names = itertools.count()


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def message(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Message"]


@pytest.fixture
def locked(s3) -> str:
    name = f"lock-bucket-{next(_names)}"
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    return name


def governance(days: int = 1) -> dict:  # type: ignore[type-arg]
    return {"Mode": "GOVERNANCE", "RetainUntilDate": _soon(days)}


def _soon(days: int) -> datetime.datetime:
    # Whole seconds: AWS keeps the date as given, and boto3 compares datetimes.
    now = datetime.datetime.now(UTC).replace(microsecond=0)
    return now + datetime.timedelta(days=days)


# --- the bucket's configuration --------------------------------------------------------------


def test_lock_configuration(s3, locked, bucket):
    assert s3.get_bucket_versioning(Bucket=locked)["Status"] == "Enabled"
    conf = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]
    assert conf == {"ObjectLockEnabled": "Enabled"}
    rule = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}
    s3.put_object_lock_configuration(
        Bucket=locked, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": rule}
    )
    conf = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]
    assert conf == {"ObjectLockEnabled": "Enabled", "Rule": rule}
    # Only ObjectLockEnabled: the default rule goes.
    s3.put_object_lock_configuration(
        Bucket=locked, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"}
    )
    conf = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]
    assert "Rule" not in conf
    # Versioning cannot be suspended on a lock bucket; enabling it again is fine.
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_versioning(Bucket=locked, VersioningConfiguration={"Status": "Suspended"})
    assert error(exc) == ("InvalidBucketState", 409)
    s3.put_bucket_versioning(Bucket=locked, VersioningConfiguration={"Status": "Enabled"})
    # A bucket without Object Lock: none to get, and none to put until versioning is Enabled.
    with pytest.raises(ClientError) as exc:
        s3.get_object_lock_configuration(Bucket=bucket)
    assert error(exc) == ("ObjectLockConfigurationNotFoundError", 404)
    for status in (None, "Suspended"):
        if status:
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})
        with pytest.raises(ClientError) as exc:
            s3.put_object_lock_configuration(
                Bucket=bucket, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"}
            )
        assert error(exc) == ("InvalidBucketState", 409)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object_lock_configuration(
        Bucket=bucket, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": rule}
    )
    assert s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]["Rule"]


@pytest.mark.parametrize(
    ("retention", "code"),
    [
        ({"Mode": "GOVERNANCE", "Days": 1, "Years": 1}, "MalformedXML"),
        ({"Mode": "governance", "Days": 1}, "MalformedXML"),
        ({"Mode": "abc", "Years": 1}, "MalformedXML"),
        ({"Mode": "GOVERNANCE"}, "MalformedXML"),
        ({"Mode": "GOVERNANCE", "Days": 0}, "InvalidRetentionPeriod"),
        ({"Mode": "COMPLIANCE", "Years": -1}, "InvalidRetentionPeriod"),
    ],
)
def test_bad_lock_configurations(s3, locked, retention, code):
    conf = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": retention}}
    with pytest.raises(ClientError) as exc:
        s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration=conf)
    assert error(exc) == (code, 400)
    conf = {"ObjectLockEnabled": "Disabled"}
    with pytest.raises(ClientError) as exc:
        s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration=conf)
    assert error(exc) == ("MalformedXML", 400)
    assert "Rule" not in s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]


# --- a lock on write -------------------------------------------------------------------------


def test_lock_headers_on_put_and_head(s3, locked):
    until = _soon(2)
    put = s3.put_object(
        Bucket=locked,
        Key="k",
        Body=b"x",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
        ObjectLockLegalHoldStatus="ON",
    )
    head = s3.head_object(Bucket=locked, Key="k")
    assert head["ObjectLockMode"] == "GOVERNANCE"
    assert head["ObjectLockRetainUntilDate"] == until
    assert head["ObjectLockLegalHoldStatus"] == "ON"
    got = s3.get_object(Bucket=locked, Key="k", VersionId=put["VersionId"])
    assert got["ObjectLockMode"] == "GOVERNANCE" and got["ObjectLockLegalHoldStatus"] == "ON"
    assert s3.get_object_retention(Bucket=locked, Key="k")["Retention"] == {
        "Mode": "GOVERNANCE",
        "RetainUntilDate": until,
    }
    assert s3.get_object_legal_hold(Bucket=locked, Key="k")["LegalHold"] == {"Status": "ON"}
    # A version without a lock says nothing of one.
    plain = s3.put_object(Bucket=locked, Key="plain", Body=b"x")
    head = s3.head_object(Bucket=locked, Key="plain")
    assert "ObjectLockMode" not in head and "ObjectLockLegalHoldStatus" not in head
    for call in (s3.get_object_retention, s3.get_object_legal_hold):
        with pytest.raises(ClientError) as exc:
            call(Bucket=locked, Key="plain", VersionId=plain["VersionId"])
        assert error(exc) == ("NoSuchObjectLockConfiguration", 404)


def test_bad_lock_headers_change_nothing(gateway, s3, locked, bucket):
    url = f"{gateway.url}/{locked}/k"
    until = _soon(1).strftime("%Y-%m-%dT%H:%M:%SZ")
    md5 = {"Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="}  # of the empty body
    cases = [
        ({"x-amz-object-lock-mode": "GOVERNANCE"}, "InvalidArgument"),
        ({"x-amz-object-lock-retain-until-date": until}, "InvalidArgument"),
        (
            {"x-amz-object-lock-mode": "governance", "x-amz-object-lock-retain-until-date": until},
            "InvalidArgument",
        ),
        (
            {
                "x-amz-object-lock-mode": "GOVERNANCE",
                "x-amz-object-lock-retain-until-date": "2001-01-01T00:00:00Z",
            },
            "InvalidArgument",
        ),
        ({"x-amz-object-lock-legal-hold": "MAYBE"}, "InvalidArgument"),
    ]
    for headers, code in cases:
        reply = raw.signed("PUT", url, {**headers, **md5})
        assert (reply.status, reply.code) == (400, code), headers
    reply = raw.signed("PUT", url, {"x-amz-object-lock-mode": "GOVERNANCE", **md5})
    assert b"<ArgumentName>x-amz-object-lock-retain-until-date</ArgumentName>" in reply.body
    bad_mode = {"x-amz-object-lock-mode": "abc", "x-amz-object-lock-retain-until-date": until}
    reply = raw.signed("PUT", url, {**bad_mode, **md5})
    assert b"Unknown wormMode directive." in reply.body
    # Lock parameters need Content-MD5 or a checksum (x-amz-content-sha256 is not enough).
    reply = raw.signed("PUT", f"{gateway.url}/{locked}/k2", {"x-amz-object-lock-legal-hold": "ON"})
    assert (reply.status, reply.code) == (400, "InvalidRequest")
    assert b"Content-MD5 OR x-amz-checksum- HTTP header is required" in reply.body
    # A bucket without Object Lock takes no lock headers.
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=b"x", ObjectLockLegalHoldStatus="ON")
    assert error(exc) == ("InvalidRequest", 400)
    assert message(exc) == "Bucket is missing Object Lock Configuration"
    assert "Versions" not in s3.list_object_versions(Bucket=locked)


def test_default_retention_applies_to_new_versions(gateway, s3, locked):
    s3.put_object_lock_configuration(
        Bucket=locked,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 2}},
        },
    )
    before = datetime.datetime.now(UTC)
    s3.put_object(Bucket=locked, Key="k", Body=b"x")
    head = s3.head_object(Bucket=locked, Key="k")
    assert head["ObjectLockMode"] == "GOVERNANCE"
    delta = head["ObjectLockRetainUntilDate"] - before
    assert datetime.timedelta(days=2) - datetime.timedelta(seconds=1) <= delta
    assert delta <= datetime.timedelta(days=2, minutes=5)
    # Headers on the write win over the default.
    s3.put_object(
        Bucket=locked,
        Key="k",
        Body=b"y",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=_soon(3),
    )
    assert s3.head_object(Bucket=locked, Key="k")["ObjectLockMode"] == "COMPLIANCE"
    # With a default retention every PUT needs Content-MD5 or a checksum.
    reply = raw.signed("PUT", f"{gateway.url}/{locked}/raw", body=b"data")
    assert (reply.status, reply.code) == (400, "InvalidRequest")


def test_copies_and_multipart_uploads_take_their_own_lock(s3, locked):
    until = _soon(1)
    src = s3.put_object(
        Bucket=locked,
        Key="src",
        Body=b"x",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
        ObjectLockLegalHoldStatus="ON",
    )
    s3.copy_object(Bucket=locked, Key="plain-copy", CopySource=f"{locked}/src")
    head = s3.head_object(Bucket=locked, Key="plain-copy")
    assert "ObjectLockMode" not in head and "ObjectLockLegalHoldStatus" not in head
    s3.copy_object(
        Bucket=locked,
        Key="locked-copy",
        CopySource={"Bucket": locked, "Key": "src", "VersionId": src["VersionId"]},
        ObjectLockLegalHoldStatus="ON",
    )
    assert s3.head_object(Bucket=locked, Key="locked-copy")["ObjectLockLegalHoldStatus"] == "ON"
    upload = s3.create_multipart_upload(
        Bucket=locked, Key="mp", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until
    )["UploadId"]
    part = s3.upload_part(Bucket=locked, Key="mp", UploadId=upload, PartNumber=1, Body=b"p")
    done = s3.complete_multipart_upload(
        Bucket=locked,
        Key="mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    head = s3.head_object(Bucket=locked, Key="mp", VersionId=done["VersionId"])
    assert (head["ObjectLockMode"], head["ObjectLockRetainUntilDate"]) == ("COMPLIANCE", until)
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=locked, Key="mp", VersionId=done["VersionId"])
    assert error(exc) == ("AccessDenied", 403)


# --- retention and legal hold by their operations --------------------------------------------


def test_retention_can_be_extended_and_shortened_only_as_aws_allows(s3, locked):
    vid = s3.put_object(Bucket=locked, Key="k", Body=b"x")["VersionId"]
    first, later = governance(2), governance(3)
    s3.put_object_retention(Bucket=locked, Key="k", Retention=first)
    s3.put_object_retention(Bucket=locked, Key="k", Retention=later)  # extending: fine
    assert s3.get_object_retention(Bucket=locked, Key="k")["Retention"] == later
    for change in (first, {"Mode": "COMPLIANCE", "RetainUntilDate": later["RetainUntilDate"]}):
        with pytest.raises(ClientError) as exc:
            s3.put_object_retention(Bucket=locked, Key="k", Retention=change)
        assert error(exc) == ("AccessDenied", 403)
        assert message(exc) == "Access Denied because object protected by object lock."
    s3.put_object_retention(
        Bucket=locked, Key="k", VersionId=vid, Retention=first, BypassGovernanceRetention=True
    )
    assert s3.get_object_retention(Bucket=locked, Key="k")["Retention"] == first
    compliance = {"Mode": "COMPLIANCE", "RetainUntilDate": first["RetainUntilDate"]}
    s3.put_object_retention(
        Bucket=locked, Key="k", Retention=compliance, BypassGovernanceRetention=True
    )
    for change in (governance(5), {"Mode": "COMPLIANCE", "RetainUntilDate": _soon(1)}):
        with pytest.raises(ClientError) as exc:  # COMPLIANCE: never, bypass or not
            s3.put_object_retention(
                Bucket=locked, Key="k", Retention=change, BypassGovernanceRetention=True
            )
        assert error(exc) == ("AccessDenied", 403)
    assert s3.get_object_retention(Bucket=locked, Key="k")["Retention"] == compliance


def test_the_bypass_needs_its_permission(s3, locked):
    """x-amz-bypass-governance-retention lifts a GOVERNANCE lock only for a caller with
    s3:BypassGovernanceRetention: the owner has it unless the policy denies it, and a Deny
    holds against DeleteObject, each key of DeleteObjects and PutObjectRetention."""
    vids = [
        s3.put_object(Bucket=locked, Key=key, Body=b"x", ObjectLockMode="GOVERNANCE",
                      ObjectLockRetainUntilDate=_soon(2))["VersionId"]
        for key in ("a", "b")
    ]  # fmt: skip
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:BypassGovernanceRetention",
        "Resource": f"arn:aws:s3:::{locked}/a",
    }
    s3.put_bucket_policy(Bucket=locked, Policy=json.dumps({"Statement": [deny]}))
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=locked, Key="a", VersionId=vids[0], BypassGovernanceRetention=True)
    assert error(exc) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as exc:
        s3.put_object_retention(
            Bucket=locked, Key="a", Retention={}, BypassGovernanceRetention=True
        )
    assert error(exc) == ("AccessDenied", 403)
    done = s3.delete_objects(
        Bucket=locked,
        Delete={
            "Objects": [{"Key": "a", "VersionId": vids[0]}, {"Key": "b", "VersionId": vids[1]}]
        },
        BypassGovernanceRetention=True,
    )
    # Decided key by key: b, which the Deny does not name, goes.
    assert [(e["Key"], e["Code"]) for e in done.get("Errors", [])] == [("a", "AccessDenied")]
    assert [d["Key"] for d in done["Deleted"]] == ["b"]
    assert s3.get_object_retention(Bucket=locked, Key="a")["Retention"]["Mode"] == "GOVERNANCE"
    s3.head_object(Bucket=locked, Key="a", VersionId=vids[0])
    # Without the Deny the owner has the permission.
    s3.delete_bucket_policy(Bucket=locked)
    s3.delete_object(Bucket=locked, Key="a", VersionId=vids[0], BypassGovernanceRetention=True)
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=locked, Key="a", VersionId=vids[0])
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_bad_retention_and_legal_hold_requests(gateway, s3, locked, bucket):
    s3.put_object(Bucket=locked, Key="k", Body=b"x")
    for bad in (
        {"Mode": "governance", "RetainUntilDate": FUTURE},
        {"Mode": "abc", "RetainUntilDate": FUTURE},
    ):
        with pytest.raises(ClientError) as exc:
            s3.put_object_retention(Bucket=locked, Key="k", Retention=bad)
        assert error(exc) == ("MalformedXML", 400)
    past = {"Mode": "GOVERNANCE", "RetainUntilDate": datetime.datetime(2001, 1, 1, tzinfo=UTC)}
    with pytest.raises(ClientError) as exc:
        s3.put_object_retention(Bucket=locked, Key="k", Retention=past)
    assert error(exc) == ("InvalidArgument", 400)
    assert message(exc) == "The retain until date must be in the future!"
    with pytest.raises(ClientError) as exc:
        s3.put_object_legal_hold(Bucket=locked, Key="k", LegalHold={"Status": "abc"})
    assert error(exc) == ("MalformedXML", 400)
    # A bucket without Object Lock: every one of them is InvalidRequest.
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for call, kwargs in (
        (s3.put_object_retention, {"Retention": governance()}),
        (s3.get_object_retention, {}),
        (s3.put_object_legal_hold, {"LegalHold": {"Status": "ON"}}),
        (s3.get_object_legal_hold, {}),
    ):
        with pytest.raises(ClientError) as exc:
            call(Bucket=bucket, Key="k", **kwargs)
        assert error(exc) == ("InvalidRequest", 400)
        assert message(exc) == "Bucket is missing Object Lock Configuration"
    assert "ObjectLockMode" not in s3.head_object(Bucket=locked, Key="k")


# --- enforcement -----------------------------------------------------------------------------


def test_a_locked_version_is_kept_until_its_lock_gives_way(s3, locked):
    vid = s3.put_object(Bucket=locked, Key="k", Body=b"x")["VersionId"]
    s3.put_object_retention(Bucket=locked, Key="k", Retention=governance())
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=locked, Key="k", VersionId=vid)
    assert error(exc) == ("AccessDenied", 403)
    assert message(exc) == "Access Denied because object protected by object lock."
    # A DELETE without an id still adds a marker; the version stays.
    marker = s3.delete_object(Bucket=locked, Key="k")
    assert marker["DeleteMarker"] is True
    s3.delete_object(Bucket=locked, Key="k", VersionId=marker["VersionId"])
    assert s3.get_object(Bucket=locked, Key="k")["Body"].read() == b"x"
    # A legal hold blocks even the bypass, until it is lifted.
    s3.put_object_legal_hold(Bucket=locked, Key="k", LegalHold={"Status": "ON"})
    with pytest.raises(ClientError) as exc:
        s3.delete_object(Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True)
    assert error(exc) == ("AccessDenied", 403)
    s3.put_object_legal_hold(Bucket=locked, Key="k", LegalHold={"Status": "OFF"})
    assert s3.head_object(Bucket=locked, Key="k")["ObjectLockLegalHoldStatus"] == "OFF"
    gone = s3.delete_object(Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True)
    assert gone["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert "Versions" not in s3.list_object_versions(Bucket=locked)


def test_delete_objects_reports_locked_versions(s3, locked):
    one = s3.put_object(Bucket=locked, Key="one", Body=b"1")["VersionId"]
    two = s3.put_object(Bucket=locked, Key="two", Body=b"2")["VersionId"]
    s3.put_object_retention(Bucket=locked, Key="one", Retention=governance())
    objects = [{"Key": "one", "VersionId": one}, {"Key": "two", "VersionId": two}]
    answer = s3.delete_objects(Bucket=locked, Delete={"Objects": objects})
    assert [(d["Key"], d["VersionId"]) for d in answer["Deleted"]] == [("two", two)]
    (failed,) = answer["Errors"]
    assert (failed["Key"], failed["VersionId"], failed["Code"]) == ("one", one, "AccessDenied")
    assert failed["Message"] == "Access Denied because object protected by object lock."
    answer = s3.delete_objects(
        Bucket=locked, Delete={"Objects": objects[:1]}, BypassGovernanceRetention=True
    )
    assert "Errors" not in answer and answer["Deleted"][0]["VersionId"] == one


def test_bypass_header_on_a_bucket_without_lock(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for value in (True, False):
        with pytest.raises(ClientError) as exc:
            s3.delete_object(Bucket=bucket, Key="k", BypassGovernanceRetention=value)
        assert error(exc) == ("InvalidArgument", 400)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    # DeleteObjects takes it there (ceph s3-tests empties every bucket so); see retention.py.
    answer = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "k"}]}, BypassGovernanceRetention=True
    )
    assert [d["Key"] for d in answer["Deleted"]] == ["k"]


# --- a data folder from before Object Lock ---------------------------------------------------

# The catalog as the gateway wrote it with versioning and before Object Lock (schema 3), frozen.
_SCHEMA_3 = """
CREATE TABLE buckets (name TEXT PRIMARY KEY, owner TEXT NOT NULL, region TEXT NOT NULL,
    created_ns INTEGER NOT NULL, versioning TEXT) WITHOUT ROWID;
CREATE TABLE objects (bucket TEXT NOT NULL, key BLOB NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, content_md5 TEXT, mtime_ns INTEGER NOT NULL, attrs TEXT NOT NULL,
    manifest TEXT NOT NULL, parts TEXT, upload_id TEXT, version_id TEXT,
    PRIMARY KEY (bucket, key)) WITHOUT ROWID;
CREATE TABLE versions (bucket TEXT NOT NULL, key BLOB NOT NULL, seq TEXT NOT NULL,
    is_null INTEGER NOT NULL, marker INTEGER NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, content_md5 TEXT, mtime_ns INTEGER NOT NULL, attrs TEXT NOT NULL,
    manifest TEXT NOT NULL, parts TEXT, upload_id TEXT,
    PRIMARY KEY (bucket, key, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX versions_null ON versions (bucket, key) WHERE is_null = 1;
CREATE TABLE uploads (id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key BLOB NOT NULL,
    initiated_ns INTEGER NOT NULL, owner TEXT NOT NULL, attrs TEXT NOT NULL);
CREATE INDEX uploads_by_key ON uploads (bucket, key, initiated_ns, id);
CREATE TABLE parts (upload_id TEXT NOT NULL, number INTEGER NOT NULL, size INTEGER NOT NULL,
    etag TEXT NOT NULL, mtime_ns INTEGER NOT NULL, manifest TEXT NOT NULL, checksum TEXT,
    PRIMARY KEY (upload_id, number)) WITHOUT ROWID;
CREATE TABLE blobs (id TEXT PRIMARY KEY, size INTEGER NOT NULL, refs INTEGER NOT NULL, data BLOB);
PRAGMA user_version=3;
"""


def test_a_data_folder_from_before_object_lock_upgrades_in_place(tmp_path: Path):
    from gateway.store.versions import new_version_id
    from gateway.users import _user

    data = tmp_path / "data"
    data.mkdir()
    owner = _user(ACCESS_KEY, "unused").canonical_id
    old_id, new_id = (
        new_version_id(1_700_000_000_000_000_000),
        new_version_id(1_800_000_000 * 10**9),
    )
    attrs = json.dumps({"content_type": "text/plain", "headers": {}, "meta": {}})
    conn = sqlite3.connect(data / "catalog.sqlite3")
    conn.executescript(_SCHEMA_3)
    conn.execute("INSERT INTO buckets VALUES ('old', ?, 'us-east-1', 1, 'Enabled')", (owner,))
    for blob, content in (("b1", b"older"), ("b2", b"newer")):
        conn.execute("INSERT INTO blobs VALUES (?, 5, 1, ?)", (blob, content))
    conn.execute(
        "INSERT INTO objects VALUES "
        "('old', ?, 5, ?, NULL, 1800000000000000000, ?, ?, NULL, NULL, ?)",
        (b"k", hashlib.md5(b"newer").hexdigest(), attrs, json.dumps([["b2", 0, 5]]), new_id),
    )
    conn.execute(
        "INSERT INTO versions VALUES "
        "('old', ?, ?, 0, 0, 5, ?, NULL, 1700000000000000000, ?, ?, NULL, NULL)",
        (b"k", old_id, hashlib.md5(b"older").hexdigest(), attrs, json.dumps([["b1", 0, 5]])),
    )
    conn.execute("INSERT INTO uploads VALUES ('u1', 'old', ?, 1, ?, ?)", (b"mp", owner, attrs))
    conn.commit()
    conn.close()
    server = GatewayProcess(data).start()
    try:
        s3 = server.client()
        assert s3.get_object(Bucket="old", Key="k")["Body"].read() == b"newer"
        assert s3.get_object(Bucket="old", Key="k", VersionId=old_id)["Body"].read() == b"older"
        listed = s3.list_object_versions(Bucket="old")["Versions"]
        assert [(v["VersionId"], v["IsLatest"]) for v in listed] == [
            (new_id, True),
            (old_id, False),
        ]
        # The upload begun before the upgrade completes, unlocked as it asked nothing.
        etag = s3.upload_part(Bucket="old", Key="mp", UploadId="u1", PartNumber=1, Body=b"p")[
            "ETag"
        ]
        s3.complete_multipart_upload(
            Bucket="old",
            Key="mp",
            UploadId="u1",
            MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]},
        )
        assert "ObjectLockMode" not in s3.head_object(Bucket="old", Key="mp")
        s3.put_object(Bucket="old", Key="k", Body=b"newest")  # `new_id` moves to `versions`
        s3.delete_object(Bucket="old", Key="k", VersionId=old_id)  # nothing locks it
        # The new columns hold a lock on every table that keeps one.
        s3.create_bucket(Bucket="new", ObjectLockEnabledForBucket=True)
        s3.put_object(Bucket="new", Key="k", Body=b"x", ObjectLockLegalHoldStatus="ON")
        s3.put_object(Bucket="new", Key="k", Body=b"y")
        (older,) = [
            v["VersionId"]
            for v in s3.list_object_versions(Bucket="new")["Versions"]
            if not v["IsLatest"]
        ]
        hold = s3.get_object_legal_hold(Bucket="new", Key="k", VersionId=older)["LegalHold"]
        assert hold == {"Status": "ON"}
        s3.put_object_legal_hold(
            Bucket="new", Key="k", VersionId=older, LegalHold={"Status": "OFF"}
        )
        for v in s3.list_object_versions(Bucket="new")["Versions"]:
            s3.delete_object(Bucket="new", Key="k", VersionId=v["VersionId"])
    finally:
        server.stop()
    conn = sqlite3.connect(data / "catalog.sqlite3")
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
    inspect(data).assert_clean()
