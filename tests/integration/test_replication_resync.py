"""`s3gw replicate resync` (docs/replication.md, "Existing objects"): versions written before a
bucket's replication configuration are queued by the command, run on the data folder while the
gateway serves it, and the gateway's worker copies them as it copies new writes: the
destination has them with their version ids, the sources say COMPLETED; a second run queues
nothing; --rule limits it to one rule; its mistakes are one line and exit status 2."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.server import GatewayProcess

WAIT = 60.0  # seconds a test waits for a copy


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(
        tmp_path_factory.mktemp("resync") / "data", catalog=module_catalog
    ).start()
    yield gateway
    gateway.stop()


def _versioned(s3: Any, *names: str) -> None:
    for name in names:
        s3.create_bucket(Bucket=name)
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})


def _replicate(s3: Any, bucket: str, *rules: tuple[str, str, str]) -> None:
    """Rules as (ID, prefix, destination bucket), in priority order."""
    s3.put_bucket_replication(
        Bucket=bucket,
        ReplicationConfiguration={
            "Role": "arn:aws:iam::123456789012:role/replication",
            "Rules": [
                {
                    "ID": rule_id,
                    "Priority": n,
                    "Status": "Enabled",
                    "Filter": {"Prefix": prefix},
                    "DeleteMarkerReplication": {"Status": "Disabled"},
                    "Destination": {"Bucket": f"arn:aws:s3:::{destination}"},
                }
                for n, (rule_id, prefix, destination) in enumerate(rules, 1)
            ],
        },
    )


def _status(s3: Any, bucket: str, key: str, version_id: str) -> str | None:
    return s3.head_object(Bucket=bucket, Key=key, VersionId=version_id).get("ReplicationStatus")


def _until_completed(s3: Any, bucket: str, key: str, version_id: str) -> None:
    deadline = time.monotonic() + WAIT
    seen = None
    while time.monotonic() < deadline:
        seen = _status(s3, bucket, key, version_id)
        if seen == "COMPLETED":
            return
        time.sleep(0.1)
    raise AssertionError(f"{bucket}/{key} {version_id}: {seen}, not COMPLETED after {WAIT} s")


def _versions(s3: Any, bucket: str) -> list[tuple[str, str]]:
    listed = s3.list_object_versions(Bucket=bucket)
    return sorted((v["Key"], v["VersionId"]) for v in listed.get("Versions", []))


def _absent(s3: Any, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        return exc.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    return False


def test_existing_versions_are_queued_and_copied_once(server: GatewayProcess) -> None:
    s3 = server.client()
    _versioned(s3, "old-src", "old-dst")
    written = []
    for key, body in (("a", b"one"), ("a", b"two"), ("b", b"three"), ("logs/c", b"four")):
        put = s3.put_object(Bucket="old-src", Key=key, Body=body)
        written.append((key, put["VersionId"]))
    gone = s3.put_object(Bucket="old-src", Key="gone", Body=b"five")
    written.append(("gone", gone["VersionId"]))
    s3.delete_object(Bucket="old-src", Key="gone")  # a delete marker: not queued
    _replicate(s3, "old-src", ("all", "", "old-dst"))
    # Made before the configuration: no status, and nothing copied by the rule.
    assert all(_status(s3, "old-src", key, vid) is None for key, vid in written)

    done = server.s3gw("replicate", "resync", "old-src")
    assert done.returncode == 0, done.stderr
    assert "queued 5, already replicated 0, skipped 0" in done.stdout

    for key, vid in written:
        _until_completed(s3, "old-src", key, vid)
    assert _versions(s3, "old-dst") == sorted(written)
    for key, vid in written:
        copy = s3.head_object(Bucket="old-dst", Key=key, VersionId=vid)
        assert copy["ReplicationStatus"] == "REPLICA"
    # The key's latest version there is its latest here: the copies kept their order.
    assert s3.get_object(Bucket="old-dst", Key="a")["Body"].read() == b"two"
    # The delete marker stayed here: the copy of "gone" is its destination's latest.
    assert _absent(s3, "old-src", "gone") and not _absent(s3, "old-dst", "gone")

    again = server.s3gw("replicate", "resync", "old-src")
    assert again.returncode == 0, again.stderr
    assert "queued 0, already replicated 5, skipped 0" in again.stdout


def test_rule_limits_the_resync_to_that_rule(server: GatewayProcess) -> None:
    s3 = server.client()
    _versioned(s3, "two-src", "two-logs", "two-rest")
    logs = s3.put_object(Bucket="two-src", Key="logs/1", Body=b"log")["VersionId"]
    other = s3.put_object(Bucket="two-src", Key="other/1", Body=b"other")["VersionId"]
    _replicate(s3, "two-src", ("logs", "logs/", "two-logs"), ("rest", "other/", "two-rest"))

    done = server.s3gw("replicate", "resync", "two-src", "--rule", "logs")
    assert done.returncode == 0, done.stderr
    assert "queued 1, already replicated 0, skipped 1" in done.stdout
    _until_completed(s3, "two-src", "logs/1", logs)
    assert _versions(s3, "two-logs") == [("logs/1", logs)]
    assert _status(s3, "two-src", "other/1", other) is None
    assert _versions(s3, "two-rest") == []

    # The other rule's turn: "logs/1" is not its to copy.
    rest = server.s3gw("replicate", "resync", "two-src", "--rule", "rest")
    assert rest.returncode == 0, rest.stderr
    assert "queued 1, already replicated 0, skipped 1" in rest.stdout
    _until_completed(s3, "two-src", "other/1", other)
    assert _versions(s3, "two-rest") == [("other/1", other)]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("no-such-bucket",), "no such bucket: no-such-bucket"),
        (("plain",), "the bucket plain has no replication configuration"),
        (("ruled", "--rule", "nope"), "no enabled rule 'nope' in ruled's configuration (only)"),
    ],
)
def test_mistakes_are_one_line_and_status_2(
    server: GatewayProcess, args: tuple[str, ...], line: str
) -> None:
    s3 = server.client()
    if not any(b["Name"] == "plain" for b in s3.list_buckets()["Buckets"]):
        _versioned(s3, "plain", "ruled", "ruled-dst")
        _replicate(s3, "ruled", ("only", "", "ruled-dst"))
    done = server.s3gw("replicate", "resync", *args)
    assert done.returncode == 2
    assert done.stderr == f"s3gw replicate resync: {line}\n"
    assert done.stdout == ""


def test_queued_while_stopped_copied_at_the_next_start(fresh_gateway: GatewayProcess) -> None:
    s3 = fresh_gateway.client()
    _versioned(s3, "cold-src", "cold-dst")
    vid = s3.put_object(Bucket="cold-src", Key="k", Body=b"cold")["VersionId"]
    _replicate(s3, "cold-src", ("all", "", "cold-dst"))
    fresh_gateway.stop()
    done = fresh_gateway.s3gw("replicate", "resync", "cold-src")
    assert done.returncode == 0, done.stderr
    assert "queued 1, already replicated 0, skipped 0" in done.stdout
    fresh_gateway.start()
    s3 = fresh_gateway.client()
    _until_completed(s3, "cold-src", "k", vid)
    assert _versions(s3, "cold-dst") == [("k", vid)]
