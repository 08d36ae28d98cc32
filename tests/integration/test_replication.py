"""Bucket replication's delivery (docs/replication.md): a rule's copies made from the outbox, to a
bucket of the same gateway and to a second gateway on loopback named by --replication-remotes;
statuses PENDING, COMPLETED and REPLICA; filters, delete markers, tag changes, multipart
ETags; the destination down while objects are written; two buckets replicating to each other
without a loop."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.integration.test_notification_delivery import Receiver, _topic
from tests.reliability.harness import CrashableGateway
from tests.seaweed import ACCESS_KEY as SEAWEED_KEY
from tests.seaweed import SECRET_KEY as SEAWEED_SECRET
from tests.seaweed import SeaweedServer
from tests.server import GatewayProcess

WAIT = 60.0  # seconds a test waits for a copy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A second gateway, on a port of its own it keeps across a restart."""
    port = _free_port()
    gateway = GatewayProcess(
        tmp_path_factory.mktemp("remote") / "data", {}, "--address", f"127.0.0.1:{port}"
    ).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None, remote: GatewayProcess
) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("replication")
    remotes = folder / "remotes.toml"
    remotes.write_text(
        "".join(
            f"""
[[remote]]
bucket_arn = "arn:aws:s3:::{name}"
endpoint = "{remote.url}"
region = "us-east-1"
access_key = "{remote.env["S3GW_ACCESS_KEY"]}"
secret_key = "{remote.env["S3GW_SECRET_KEY"]}"
"""
            for name in ("far", "far-down", "far-sse")
        )
    )
    gateway = GatewayProcess(
        folder / "data",
        {"S3GW_REPLICATION_REMOTES": str(remotes)},
        catalog=module_catalog,
        # A destination down is said once, as a warning (not an error).
    ).start()
    yield gateway
    gateway.stop()


def _versioned(s3: Any, *names: str) -> None:
    for name in names:
        s3.create_bucket(Bucket=name)
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})


def _rule(rule_id: str, destination: str, priority: int = 1, **extra: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "ID": rule_id,
        "Priority": priority,
        "Status": "Enabled",
        "Filter": extra.pop("Filter", {"Prefix": ""}),
        "DeleteMarkerReplication": {"Status": extra.pop("markers", "Disabled")},
        "Destination": {"Bucket": f"arn:aws:s3:::{destination}"},
    }
    rule.update(extra)
    return rule


def _replicate(s3: Any, bucket: str, *rules: dict[str, Any]) -> None:
    s3.put_bucket_replication(
        Bucket=bucket,
        ReplicationConfiguration={
            "Role": "arn:aws:iam::123456789012:role/replication",
            "Rules": list(rules),
        },
    )


def _status(s3: Any, bucket: str, key: str, version_id: str | None = None) -> str | None:
    args = {"VersionId": version_id} if version_id else {}
    found = s3.head_object(Bucket=bucket, Key=key, **args)
    return found.get("ReplicationStatus")


def _until_status(
    s3: Any, bucket: str, key: str, wanted: str, version_id: str | None = None
) -> None:
    deadline = time.monotonic() + WAIT
    seen = None
    while time.monotonic() < deadline:
        seen = _status(s3, bucket, key, version_id)
        if seen == wanted:
            return
        time.sleep(0.1)
    raise AssertionError(f"{bucket}/{key}: {seen}, not {wanted}, after {WAIT} s")


def _until_present(s3: Any, bucket: str, key: str, version_id: str | None = None) -> Any:
    args = {"VersionId": version_id} if version_id else {}
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            return s3.head_object(Bucket=bucket, Key=key, **args)
        except ClientError as exc:
            if exc.response["ResponseMetadata"]["HTTPStatusCode"] != 404:
                raise
        time.sleep(0.1)
    raise AssertionError(f"{bucket}/{key} did not arrive in {WAIT} s")


def _multipart(s3: Any, bucket: str, key: str, parts: list[bytes]) -> dict[str, Any]:
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, Metadata={"kind": "parts"})
    done = [
        {
            "PartNumber": n,
            "ETag": s3.upload_part(
                Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=n, Body=body
            )["ETag"],
        }
        for n, body in enumerate(parts, 1)
    ]
    return s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": done}
    )


def test_a_bucket_here_gets_each_version_as_it_was(server: GatewayProcess) -> None:
    s3 = server.client()
    _versioned(s3, "src-here", "dst-here")
    _replicate(
        s3,
        "src-here",
        _rule("logs", "dst-here", Filter={"Prefix": "logs/"}, markers="Enabled"),
    )
    put = s3.put_object(
        Bucket="src-here",
        Key="logs/a.txt",
        Body=b"first",
        Metadata={"colour": "red"},
        ContentType="text/plain",
        Tagging="team=blue",
    )
    assert put.get("ReplicationStatus") is None or put["ReplicationStatus"] == "PENDING"
    _until_status(s3, "src-here", "logs/a.txt", "COMPLETED")
    copy = s3.head_object(Bucket="dst-here", Key="logs/a.txt")
    assert copy["ReplicationStatus"] == "REPLICA"
    assert copy["VersionId"] == put["VersionId"]
    assert copy["ETag"] == put["ETag"]
    assert copy["Metadata"] == {"colour": "red"}
    assert copy["ContentType"] == "text/plain"
    got = s3.get_object(Bucket="dst-here", Key="logs/a.txt")
    assert got["Body"].read() == b"first"
    tags = s3.get_object_tagging(Bucket="dst-here", Key="logs/a.txt")["TagSet"]
    assert tags == [{"Key": "team", "Value": "blue"}]

    # A key outside every filter stays put, and says nothing of replication.
    s3.put_object(Bucket="src-here", Key="other.txt", Body=b"x")
    # A multipart object keeps its -N ETag; a copy is a new version that goes too.
    done = _multipart(s3, "src-here", "logs/big", [b"a" * 5 * 1024**2, b"b" * 1024])
    copied = s3.copy_object(
        Bucket="src-here", Key="logs/copied", CopySource={"Bucket": "src-here", "Key": "logs/a.txt"}
    )
    for key in ("logs/big", "logs/copied"):
        _until_status(s3, "src-here", key, "COMPLETED")
    assert s3.head_object(Bucket="dst-here", Key="logs/big")["ETag"] == done["ETag"]
    assert done["ETag"].endswith('-2"')
    assert s3.head_object(Bucket="dst-here", Key="logs/copied")["VersionId"] == copied["VersionId"]
    assert _status(s3, "src-here", "other.txt") is None
    with pytest.raises(ClientError):
        s3.head_object(Bucket="dst-here", Key="other.txt")

    # A tag change follows the version.
    s3.put_object_tagging(
        Bucket="src-here", Key="logs/a.txt", Tagging={"TagSet": [{"Key": "team", "Value": "red"}]}
    )
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        tags = s3.get_object_tagging(Bucket="dst-here", Key="logs/a.txt")["TagSet"]
        if tags == [{"Key": "team", "Value": "red"}]:
            break
        time.sleep(0.1)
    assert tags == [{"Key": "team", "Value": "red"}]

    # A delete marker follows the rule (Enabled); a DELETE of a version by its id does not.
    s3.put_object(Bucket="src-here", Key="logs/b.txt", Body=b"b")
    _until_status(s3, "src-here", "logs/b.txt", "COMPLETED")
    marker = s3.delete_object(Bucket="src-here", Key="logs/a.txt")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        listed = s3.list_object_versions(Bucket="dst-here", Prefix="logs/a.txt")
        if listed.get("DeleteMarkers"):
            break
        time.sleep(0.1)
    assert [m["VersionId"] for m in listed["DeleteMarkers"]] == [marker["VersionId"]]
    b_version = s3.head_object(Bucket="src-here", Key="logs/b.txt")["VersionId"]
    s3.delete_object(Bucket="src-here", Key="logs/b.txt", VersionId=b_version)
    s3.put_object(Bucket="src-here", Key="logs/sync", Body=b"s")  # after the delete, in order
    _until_status(s3, "src-here", "logs/sync", "COMPLETED")
    assert s3.get_object(Bucket="dst-here", Key="logs/b.txt")["Body"].read() == b"b"


def test_a_second_gateway_gets_bytes_metadata_tags_and_etags(
    server: GatewayProcess, remote: GatewayProcess
) -> None:
    s3, far = server.client(), remote.client()
    _versioned(s3, "src-far")
    _versioned(far, "far")
    _replicate(s3, "src-far", _rule("all", "far", markers="Enabled"))
    put = s3.put_object(
        Bucket="src-far", Key="a b.txt", Body=b"hello", Metadata={"k": "v"}, Tagging="x=1"
    )
    done = _multipart(s3, "src-far", "big", [b"p" * 5 * 1024**2, b"q" * 100])
    for key in ("a b.txt", "big"):
        _until_status(s3, "src-far", key, "COMPLETED")
    copy = far.get_object(Bucket="far", Key="a b.txt")
    assert copy["Body"].read() == b"hello"
    assert copy["ETag"] == put["ETag"] and copy["Metadata"] == {"k": "v"}
    assert far.get_object_tagging(Bucket="far", Key="a b.txt")["TagSet"] == [
        {"Key": "x", "Value": "1"}
    ]
    big = far.get_object(Bucket="far", Key="big")
    assert big["ETag"] == done["ETag"] and big["Metadata"] == {"kind": "parts"}
    assert big["Body"].read() == b"p" * 5 * 1024**2 + b"q" * 100
    s3.delete_object(Bucket="src-far", Key="a b.txt")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if far.list_object_versions(Bucket="far", Prefix="a b.txt").get("DeleteMarkers"):
            break
        time.sleep(0.1)
    assert far.list_object_versions(Bucket="far", Prefix="a b.txt").get("DeleteMarkers")


def test_a_destination_down_keeps_versions_pending_until_it_is_back(
    server: GatewayProcess, remote: GatewayProcess
) -> None:
    s3, far = server.client(), remote.client()
    _versioned(s3, "src-down")
    _versioned(far, "far-down")
    _replicate(s3, "src-down", _rule("all", "far-down"))
    server.allow(r"replication: arn:aws:s3:::far-down")
    remote.stop()
    try:
        for n in range(3):
            s3.put_object(Bucket="src-down", Key=f"k{n}", Body=f"v{n}".encode())
        time.sleep(1.0)  # the worker has tried, and failed, by now
        assert [_status(s3, "src-down", f"k{n}") for n in range(3)] == ["PENDING"] * 3
        # The rule's metrics: three copies of two bytes each waiting, failures counted.
        deadline = time.monotonic() + WAIT
        while _rule_metric(server, "pending", "src-down") != 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _rule_metric(server, "pending", "src-down") == 3
        assert _rule_metric(server, "pending_bytes", "src-down") == 6
        assert (_rule_metric(server, "failures_total", "src-down") or 0) >= 1
    finally:
        remote.start()
    far = remote.client()
    for n in range(3):
        _until_status(s3, "src-down", f"k{n}", "COMPLETED")
        assert far.get_object(Bucket="far-down", Key=f"k{n}")["Body"].read() == f"v{n}".encode()
    deadline = time.monotonic() + WAIT
    while _rule_metric(server, "pending", "src-down") != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _rule_metric(server, "pending", "src-down") == 0
    assert _rule_metric(server, "pending_bytes", "src-down") == 0
    assert _rule_metric(server, "replicated_total", "src-down", "s3gw_") == 3


def _rule_metric(
    gateway: GatewayProcess, name: str, bucket: str, prefix: str = "s3gw_replication_"
) -> float | None:
    """A replication metric of the rule `all` of `bucket`, as /metrics shows it."""
    with urllib.request.urlopen(f"{gateway.url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    found = re.search(
        rf'^{prefix}{name}{{bucket="{re.escape(bucket)}",rule="all"}} (\S+)$', text, re.MULTILINE
    )
    return float(found.group(1)) if found else None


def test_encrypted_versions_are_encrypted_as_the_rule_asks_at_the_remote(
    server: GatewayProcess, remote: GatewayProcess
) -> None:
    """SSE-S3 versions are copied and encrypted by the destination's default (SSE-S3 there,
    as on AWS); SSE-KMS versions only by a
    rule with SseKmsEncryptedObjects, under its ReplicaKmsKeyID; a rule without it leaves
    them uncopied, with no status (AWS's default)."""
    s3, far = server.client(), remote.client()
    _versioned(s3, "src-sse", "src-kms-off")
    _versioned(far, "far-sse")
    kms_rule = _rule(
        "sse",
        "far-sse",
        SourceSelectionCriteria={"SseKmsEncryptedObjects": {"Status": "Enabled"}},
    )
    kms_rule["Destination"]["EncryptionConfiguration"] = {"ReplicaKmsKeyID": "alias/aws/s3"}
    _replicate(s3, "src-sse", kms_rule)
    got = s3.get_bucket_replication(Bucket="src-sse")["ReplicationConfiguration"]["Rules"][0]
    assert got["Destination"]["EncryptionConfiguration"] == {"ReplicaKmsKeyID": "alias/aws/s3"}
    s3.put_object(Bucket="src-sse", Key="s3", Body=b"sse-s3", ServerSideEncryption="AES256")
    s3.put_object(Bucket="src-sse", Key="kms", Body=b"sse-kms", ServerSideEncryption="aws:kms")
    for key in ("s3", "kms"):
        _until_status(s3, "src-sse", key, "COMPLETED")
    copied = far.get_object(Bucket="far-sse", Key="s3")
    assert copied["Body"].read() == b"sse-s3" and copied["ServerSideEncryption"] == "AES256"
    copied = far.get_object(Bucket="far-sse", Key="kms")
    assert copied["Body"].read() == b"sse-kms" and copied["ServerSideEncryption"] == "aws:kms"
    # Under the replica key: the one the remote gives the alias for its own writes.
    own = far.put_object(
        Bucket="far-sse", Key="own", Body=b"", ServerSideEncryption="aws:kms",
        SSEKMSKeyId="alias/aws/s3",
    )  # fmt: skip
    assert copied["SSEKMSKeyId"] == own["SSEKMSKeyId"]

    # Without SseKmsEncryptedObjects: the SSE-KMS version is not copied, and says nothing.
    _replicate(s3, "src-kms-off", _rule("plain", "far-sse"))
    s3.put_object(Bucket="src-kms-off", Key="secret", Body=b"k", ServerSideEncryption="aws:kms")
    s3.put_object(Bucket="src-kms-off", Key="open", Body=b"o")
    _until_status(s3, "src-kms-off", "open", "COMPLETED")
    assert _status(s3, "src-kms-off", "secret") is None
    with pytest.raises(ClientError):
        far.head_object(Bucket="far-sse", Key="secret")


def test_two_buckets_replicating_to_each_other_copy_each_version_once(
    server: GatewayProcess,
) -> None:
    s3 = server.client()
    _versioned(s3, "ping", "pong")
    _replicate(s3, "ping", _rule("to-pong", "pong"))
    _replicate(s3, "pong", _rule("to-ping", "ping"))
    s3.put_object(Bucket="ping", Key="from-ping", Body=b"1")
    s3.put_object(Bucket="pong", Key="from-pong", Body=b"2")
    _until_status(s3, "ping", "from-ping", "COMPLETED")
    _until_status(s3, "pong", "from-pong", "COMPLETED")
    assert _status(s3, "pong", "from-ping") == "REPLICA"
    assert _status(s3, "ping", "from-pong") == "REPLICA"
    s3.put_object(Bucket="ping", Key="sync", Body=b"s")  # the worker has passed the replicas
    _until_status(s3, "ping", "sync", "COMPLETED")
    for bucket in ("ping", "pong"):
        versions = s3.list_object_versions(Bucket=bucket)["Versions"]
        counts: dict[str, int] = {}
        for v in versions:
            counts[v["Key"]] = counts.get(v["Key"], 0) + 1
        assert set(counts.values()) == {1}, (bucket, counts)


def test_a_copy_that_can_never_be_made_fails_and_says_so(server: GatewayProcess) -> None:
    """A destination whose versioning was suspended after the rule was put: the version says
    FAILED, never retried, and the source bucket's s3:Replication:* configuration gets AWS's
    OperationFailedReplication record with its replicationEventData."""
    s3 = server.client()
    receiver = Receiver()
    try:
        _versioned(s3, "src-failing", "dst-unversioned")
        _replicate(s3, "src-failing", _rule("all", "dst-unversioned"))
        s3.put_bucket_versioning(
            Bucket="dst-unversioned", VersioningConfiguration={"Status": "Suspended"}
        )
        arn = _topic(server, "failures", f"{receiver.url}/failures")
        s3.put_bucket_notification_configuration(
            Bucket="src-failing",
            NotificationConfiguration={
                "TopicConfigurations": [
                    {"Id": "f", "TopicArn": arn, "Events": ["s3:Replication:*"]}
                ]
            },
        )
        server.allow(r"replication: .* failed: versioning is not enabled")
        put = s3.put_object(Bucket="src-failing", Key="k", Body=b"v")
        _until_status(s3, "src-failing", "k", "FAILED")
        [record] = receiver.wait_for("/failures", "k")
        assert record["eventName"] == "Replication:OperationFailedReplication"
        assert record["s3"]["object"]["versionId"] == put["VersionId"]
        detail = record["replicationEventData"]
        assert detail["replicationRuleId"] == "all"
        assert detail["destinationBucket"] == "arn:aws:s3:::dst-unversioned"
        assert detail["s3Operation"] == "OBJECT_PUT"
        assert detail["failureReason"] == "DstBucketUnversioned"
    finally:
        receiver.close()


@pytest.fixture(scope="module")
def seaweed() -> Iterator[SeaweedServer]:
    server = SeaweedServer().start()
    yield server
    server.close()


def test_a_foreign_s3_gets_the_copies(
    seaweed: SeaweedServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SeaweedFS (another implementation of S3) as the destination: same bytes, metadata,
    tags and ETags, a multipart object's `-N` one too."""
    seaweed.bucket("offsite")
    folder = tmp_path_factory.mktemp("to-seaweed")
    (folder / "remotes.toml").write_text(
        f"""
[[remote]]
bucket_arn = "arn:aws:s3:::offsite"
endpoint = "{seaweed.endpoint}"
region = "us-east-1"
access_key = "{SEAWEED_KEY}"
secret_key = "{SEAWEED_SECRET}"
"""
    )
    gateway = GatewayProcess(
        folder / "data", {"S3GW_REPLICATION_REMOTES": str(folder / "remotes.toml")}
    ).start()
    try:
        s3, far = gateway.client(), seaweed.client()
        _versioned(s3, "src-sw")
        _replicate(s3, "src-sw", _rule("all", "offsite"))
        put = s3.put_object(
            Bucket="src-sw", Key="dir/a.txt", Body=b"hello", Metadata={"k": "v"}, Tagging="t=1"
        )
        done = _multipart(s3, "src-sw", "big", [b"p" * 5 * 1024**2, b"q" * 10])
        for key in ("dir/a.txt", "big"):
            _until_status(s3, "src-sw", key, "COMPLETED")
        copy = far.get_object(Bucket="offsite", Key="dir/a.txt")
        assert copy["Body"].read() == b"hello"
        assert copy["ETag"] == put["ETag"] and copy["Metadata"] == {"k": "v"}
        tags = far.get_object_tagging(Bucket="offsite", Key="dir/a.txt")["TagSet"]
        assert tags == [{"Key": "t", "Value": "1"}]
        big = far.get_object(Bucket="offsite", Key="big")
        assert big["Body"].read() == b"p" * 5 * 1024**2 + b"q" * 10
        assert big["ETag"] == done["ETag"]
    finally:
        gateway.stop()


def test_nothing_is_lost_across_a_crash(
    tmp_path: Path, catalog: str | None, remote: GatewayProcess
) -> None:
    """The destination down while versions are written, the source SIGKILLed and started
    again, the destination back: every version is copied, and says COMPLETED."""
    suffix = "pg" if catalog else "lite"
    far, bucket = f"far-crash-{suffix}", f"src-crash-{suffix}"
    remotes = tmp_path / "remotes.toml"
    remotes.write_text(
        f"""
[[remote]]
bucket_arn = "arn:aws:s3:::{far}"
endpoint = "{remote.url}"
region = "us-east-1"
access_key = "{remote.env["S3GW_ACCESS_KEY"]}"
secret_key = "{remote.env["S3GW_SECRET_KEY"]}"
"""
    )
    _versioned(remote.client(), far)
    gateway = CrashableGateway(
        tmp_path / "data",
        {"S3GW_WORKERS": "1", "S3GW_REPLICATION_REMOTES": str(remotes)},
        catalog=catalog,
    )
    gateway.start()
    gateway.allow(rf"replication: arn:aws:s3:::{far}")
    try:
        s3 = gateway.client()
        _versioned(s3, bucket)
        _replicate(s3, bucket, _rule("all", far))
        remote.stop()
        try:
            keys = [f"{bucket}/k{n}" for n in range(8)]
            versions = {
                k: s3.put_object(Bucket=bucket, Key=k, Body=k.encode())["VersionId"] for k in keys
            }
            gateway.crash()
            gateway.start()
        finally:
            remote.start()
        s3 = gateway.client()  # its new address
        for key, version_id in versions.items():
            _until_status(s3, bucket, key, "COMPLETED", version_id)
            got = remote.client().get_object(Bucket=far, Key=key)["Body"].read()
            assert got == key.encode()
    finally:
        gateway.stop()
