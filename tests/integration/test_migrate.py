"""`s3gw migrate`: a gateway's SQLite catalog moved into a real PostgreSQL, then served from there.

A gateway on SQLite is filled with boto3 (plain, inline and file bodies, odd keys, copies,
versions with delete markers, a completed and an unfinished multipart upload, tags, ACLs,
metadata, bucket configurations, an SSE-S3 object), stopped, migrated, and started again on
the same folder with `--catalog postgresql://…`: every listing, version, upload, part, byte,
ETag and setting reads back as it did, the unfinished upload completes there, and fsck on the
PostgreSQL catalog is clean. Then the refusals: a gateway serving the folder, a target that
holds a catalog, the old SQLite catalog after the move, and the operator's mistakes (one line,
exit status 2).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.postgres import PostgresServer
from tests.server import GatewayProcess

MIB = 2**20
PART = 5 * MIB


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args], capture_output=True, text=True, timeout=300
    )


def migrate(data: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return run("migrate", "--data", str(data), "--to", url, *flags)


def fill(s3: Any) -> str:
    """Everything a catalog holds; the id of the upload left unfinished."""
    s3.create_bucket(Bucket="plain")
    s3.put_object(
        Bucket="plain",
        Key="small.txt",
        Body=b"inline bytes",
        ContentType="text/plain",
        Metadata={"colour": "blue"},
        Tagging="team=storage&tier=hot",
    )
    s3.put_object(Bucket="plain", Key="large.bin", Body=os.urandom(2 * MIB))
    s3.copy_object(Bucket="plain", Key="copy of large.bin", CopySource="plain/large.bin")
    for key in ("dir/ü ñ.txt", "dir/sub/../x", "a\tb", "Z-upper", "z-lower"):
        s3.put_object(Bucket="plain", Key=key, Body=key.encode() * 3)
    s3.put_bucket_ownership_controls(
        Bucket="plain",
        OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]},
    )
    s3.delete_public_access_block(Bucket="plain")
    s3.put_object_acl(Bucket="plain", Key="small.txt", ACL="public-read")
    s3.put_object(
        Bucket="plain", Key="secret.bin", Body=os.urandom(100_000), ServerSideEncryption="AES256"
    )
    s3.put_bucket_tagging(Bucket="plain", Tagging={"TagSet": [{"Key": "env", "Value": "test"}]})
    s3.put_bucket_cors(
        Bucket="plain",
        CORSConfiguration={
            "CORSRules": [{"AllowedMethods": ["GET"], "AllowedOrigins": ["https://example.com"]}]
        },
    )
    # A finished multipart object (its ETag is "-2"), from a file part and a copied part.
    done = s3.create_multipart_upload(Bucket="plain", Key="mp.bin")["UploadId"]
    e1 = s3.upload_part(
        Bucket="plain", Key="mp.bin", UploadId=done, PartNumber=1, Body=os.urandom(PART)
    )["ETag"]
    e2 = s3.upload_part_copy(
        Bucket="plain", Key="mp.bin", UploadId=done, PartNumber=2, CopySource="plain/large.bin"
    )["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(
        Bucket="plain",
        Key="mp.bin",
        UploadId=done,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )
    pending = s3.create_multipart_upload(
        Bucket="plain", Key="pending.bin", Metadata={"stage": "upload"}
    )["UploadId"]
    s3.upload_part(
        Bucket="plain", Key="pending.bin", UploadId=pending, PartNumber=1, Body=b"p" * PART
    )
    s3.upload_part(Bucket="plain", Key="pending.bin", UploadId=pending, PartNumber=2, Body=b"q")

    s3.create_bucket(Bucket="versioned")
    s3.put_object(Bucket="versioned", Key="k", Body=b"null version, before versioning")
    s3.put_bucket_versioning(Bucket="versioned", VersioningConfiguration={"Status": "Enabled"})
    for n in range(3):
        s3.put_object(Bucket="versioned", Key="k", Body=f"version {n}".encode())
    s3.delete_object(Bucket="versioned", Key="k")  # a delete marker on top
    s3.put_object(Bucket="versioned", Key="gone", Body=b"soon hidden")
    s3.delete_object(Bucket="versioned", Key="gone")
    s3.delete_object(Bucket="versioned", Key="gone")  # two markers
    s3.put_object(Bucket="versioned", Key="live", Body=os.urandom(300_000))
    s3.create_bucket(Bucket="empty")
    return pending


def snapshot(s3: Any) -> dict[str, Any]:
    """What a client can read of everything: listings, versions, uploads, bytes, settings."""
    out: dict[str, Any] = {"buckets": [b["Name"] for b in s3.list_buckets()["Buckets"]]}
    for bucket in out["buckets"]:
        listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        out[bucket] = {
            "objects": [(o["Key"], o["ETag"], o["Size"], o["LastModified"]) for o in listed],
            "versioning": s3.get_bucket_versioning(Bucket=bucket).get("Status"),
        }
        versions = s3.list_object_versions(Bucket=bucket)
        out[bucket]["versions"] = [
            (v["Key"], v["VersionId"], v["IsLatest"], v["ETag"], v["Size"])
            for v in versions.get("Versions", [])
        ]
        out[bucket]["markers"] = [
            (m["Key"], m["VersionId"], m["IsLatest"]) for m in versions.get("DeleteMarkers", [])
        ]
        for key, version, *_ in out[bucket]["versions"]:
            got = s3.get_object(Bucket=bucket, Key=key, VersionId=version)
            out[bucket][f"bytes {key} {version}"] = (
                hashlib.sha256(got["Body"].read()).hexdigest(),
                got["ETag"],
                got.get("ContentType"),
                got.get("Metadata"),
                got.get("ServerSideEncryption"),
            )
            tags = s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version)["TagSet"]
            out[bucket][f"tags {key} {version}"] = tags
            acl = s3.get_object_acl(Bucket=bucket, Key=key, VersionId=version)
            out[bucket][f"acl {key} {version}"] = acl["Grants"]
        uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        out[bucket]["uploads"] = [(u["Key"], u["UploadId"], u["Initiated"]) for u in uploads]
        for u in uploads:
            parts = s3.list_parts(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"])["Parts"]
            out[bucket][f"parts {u['UploadId']}"] = [
                (p["PartNumber"], p["ETag"], p["Size"]) for p in parts
            ]
    out["plain"]["tagging"] = s3.get_bucket_tagging(Bucket="plain")["TagSet"]
    out["plain"]["cors"] = s3.get_bucket_cors(Bucket="plain")["CORSRules"]
    return out


@pytest.fixture(scope="module")
def moved(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A folder filled on SQLite and migrated: its data, the URL, what it read before, the
    unfinished upload and migrate's output."""
    data = tmp_path_factory.mktemp("migrate") / "data"
    gateway = GatewayProcess(data).start()
    try:
        s3 = gateway.client()
        pending = fill(s3)
        # Two events waiting in the outbox (their topic's endpoint never answers).
        sns = _iam(gateway, "sns")
        arn = sns.create_topic(Name="t", Attributes={"push-endpoint": "http://127.0.0.1:9/"})
        s3.put_bucket_notification_configuration(
            Bucket="empty",
            NotificationConfiguration={"TopicConfigurations": [
                {"TopicArn": arn["TopicArn"], "Events": ["s3:ObjectRemoved:*"]}]},
            SkipDestinationValidation=True,
        )  # fmt: skip
        s3.delete_object(Bucket="empty", Key="nothing")
        s3.delete_object(Bucket="empty", Key="nothing")
        before = snapshot(s3)
        # An IAM user and its key, made on SQLite, move with the catalog.
        iam = _iam(gateway)
        iam.create_user(UserName="mover")
        listing = {"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"}
        document = json.dumps({"Version": "2012-10-17", "Statement": [listing]})
        iam.put_user_policy(UserName="mover", PolicyName="list", PolicyDocument=document)
        key = iam.create_access_key(UserName="mover")["AccessKey"]
        url = postgres.database()
        busy = migrate(data, url)
        assert busy.returncode == 2, busy.stdout
        assert busy.stderr.count("\n") == 1 and "in use by a running gateway" in busy.stderr
    finally:
        gateway.stop()
    done = migrate(data, url, "--batch", "3", "--sample", "50")  # batches smaller than tables
    assert done.returncode == 0, done.stderr
    return {"data": data, "url": url, "before": before, "pending": pending, "out": done.stdout,
            "key": (key["AccessKeyId"], key["SecretAccessKey"])}  # fmt: skip


def _iam(gateway: GatewayProcess, service: str = "iam") -> Any:
    import boto3

    from tests.process import ACCESS_KEY, SECRET_KEY

    return boto3.client(service, endpoint_url=gateway.url, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1")  # fmt: skip


def test_summary_names_every_table_and_the_checks(moved):
    out = moved["out"]
    for table in ("buckets", "objects", "versions", "uploads", "parts", "blobs"):
        assert f"  {table} " in out, out
    assert " 3 buckets" in out and "verified: row counts" in out, out
    assert "postgresql://postgres@" in out, out


def test_the_outbox_moves_and_its_numbers_go_on(moved):
    """The events waiting in the outbox move with the catalog, and PostgreSQL's identity gives
    numbers after the last one SQLite gave (they are the records' sequencers)."""
    with psycopg.connect(moved["url"]) as conn:
        rows = conn.execute("SELECT seq, event FROM outbox ORDER BY seq").fetchall()
        assert [event for _, event in rows] == ["s3:ObjectRemoved:Delete"] * 2
        (last,) = conn.execute("SELECT last_value FROM outbox_seq_seq").fetchone()
        assert last == rows[-1][0]
        topics = conn.execute("SELECT name FROM topics").fetchall()
    assert topics == [("t",)]


def test_postgresql_gateway_reads_everything_back_then_fsck_is_clean(moved):
    gateway = GatewayProcess(moved["data"], catalog=moved["url"]).start()
    try:
        s3 = gateway.client()
        after = snapshot(s3)
        assert after == moved["before"]
        # The IAM user's key works on PostgreSQL, with its policy.
        mover = gateway.client(*moved["key"])
        assert {b["Name"] for b in mover.list_buckets()["Buckets"]} >= {"plain"}
        assert [u["UserName"] for u in _iam(gateway).list_users()["Users"]] == ["mover"]
        # The unfinished upload goes on where it was: its parts and blobs moved with it.
        parts = moved["before"]["plain"][f"parts {moved['pending']}"]
        s3.complete_multipart_upload(
            Bucket="plain",
            Key="pending.bin",
            UploadId=moved["pending"],
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e, _ in parts]},
        )
        body = s3.get_object(Bucket="plain", Key="pending.bin")["Body"].read()
        assert body == b"p" * PART + b"q"
        # Reference counts moved too: deleting one of two objects sharing a blob keeps it.
        s3.delete_object(Bucket="plain", Key="large.bin")
        kept = s3.get_object(Bucket="plain", Key="copy of large.bin")["Body"].read()
        assert hashlib.sha256(kept).hexdigest() == next(
            digest
            for name, (digest, *_) in (
                (n, v) for n, v in moved["before"]["plain"].items() if n.startswith("bytes ")
            )
            if name.startswith("bytes large.bin ")
        )
    finally:
        gateway.stop()
    checked = run("fsck", "--data", str(moved["data"]), "--catalog", moved["url"], "--deep")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no damage found" in checked.stdout


def test_old_sqlite_catalog_is_refused_after_the_move(moved):
    data = moved["data"]
    served = run("serve", "--data", str(data), "--address", "127.0.0.1:0")
    assert served.returncode == 2
    assert served.stderr.count("\n") == 1, served.stderr
    assert "migrated to postgresql://postgres@" in served.stderr
    assert (data / "catalog.sqlite3").exists()  # kept, for going back
    again = migrate(data, moved["url"])
    assert again.returncode == 2 and "already migrated" in again.stderr


def test_refuses_a_target_that_holds_a_catalog(moved, tmp_path):
    data = tmp_path / "other"
    gateway = GatewayProcess(data).start()
    try:
        gateway.client().create_bucket(Bucket="plain")
    finally:
        gateway.stop()
    refused = migrate(data, moved["url"])
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "already holds a catalog" in refused.stderr
    assert not (data / "catalog.moved").exists()
    # Nothing of it reached the target; the folder still serves from SQLite.
    gateway = GatewayProcess(data).start()
    try:
        assert [b["Name"] for b in gateway.client().list_buckets()["Buckets"]] == ["plain"]
    finally:
        gateway.stop()


def test_a_failed_check_commits_nothing(postgres, tmp_path):
    data = tmp_path / "data"
    gateway = GatewayProcess(data).start()
    try:
        s3 = gateway.client()
        s3.create_bucket(Bucket="bbb")
        s3.put_object(Bucket="bbb", Key="k", Body=b"x")
    finally:
        gateway.stop()
    url = postgres.database()
    # An upload whose id PostgreSQL's text refuses (NUL): the copy fails after the tables
    # before it (blobs, buckets, objects, parts) were copied.
    with sqlite3.connect(data / "catalog.sqlite3") as conn:
        conn.execute(
            "INSERT INTO uploads (id, bucket, key, initiated_ns, owner, attrs) "
            "VALUES (?, 'bbb', x'6b', 0, 'o', '{}')",
            ("bad\x00id",),
        )
    failed = migrate(data, url)
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1, failed.stderr
    assert "nothing was committed" in failed.stderr
    assert not (data / "catalog.moved").exists()
    with psycopg.connect(url) as conn:
        for table in ("blobs", "buckets", "objects"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)


def test_operator_mistakes_are_one_line(postgres, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    url = postgres.database()
    cases = {
        "holds no catalog.sqlite3": migrate(empty, url),
        "is not a folder": migrate(tmp_path / "nowhere", url),
        "must be sqlite or a postgresql://": migrate(empty, "mysql://u:hunter2@h/db"),
        "--to must be a postgresql:// URL": migrate(empty, "sqlite"),
        "--to is required": run("migrate", "--data", str(empty)),
    }
    data = tmp_path / "data"
    GatewayProcess(data).start().stop()
    port = postgres.port + 1 if postgres.port < 65535 else postgres.port - 1
    cases["cannot reach postgresql://postgres@127.0.0.1"] = migrate(
        data, f"postgresql://postgres:hunter2@127.0.0.1:{port}/nothing"
    )
    for expected, done in cases.items():
        assert done.returncode == 2, (expected, done.stdout, done.stderr)
        assert expected in done.stderr, (expected, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "hunter2" not in done.stderr  # the password is never repeated
    assert not (data / "catalog.moved").exists()
