"""Bucket replication's configuration API (docs/replication.md) against the real gateway, with
boto3: Put/Get/DeleteBucketReplication's round trip, AWS's refusals, the versioning rules on
source and destination, a --replication-remotes destination accepted and an unknown one
refused, and who may (a bucket policy's Deny, an IAM user without the action). On both
catalogs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.process import ACCESS_KEY, SECRET_KEY
from tests.server import GatewayProcess

ROOT = Path(__file__).resolve().parents[2]
ROLE = "arn:aws:iam::123456789012:role/replication"
REMOTES = """
[[remote]]
bucket_arn = "arn:aws:s3:::offsite"
endpoint = "https://s3.example.net"
region = "eu-west-1"
access_key = "AK"
secret_key = "SK"
"""


def _client(server: GatewayProcess, service: str = "s3", key: tuple[str, str] | None = None) -> Any:
    key = key or (ACCESS_KEY, SECRET_KEY)
    return boto3.client(
        service,
        endpoint_url=server.url,
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("replication")
    remotes = folder / "remotes.toml"
    remotes.write_text(REMOTES)
    gateway = GatewayProcess(
        folder / "data",
        {"S3GW_IAM_CACHE_SECONDS": "0", "S3GW_REPLICATION_REMOTES": str(remotes)},
        catalog=module_catalog,
    ).start()
    yield gateway
    gateway.stop()


def _bucket(s3: Any, name: str, versioning: str | None = "Enabled") -> str:
    s3.create_bucket(Bucket=name)
    if versioning:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning})
    return name


def _rule(dest: str, ident: str = "r1", priority: int = 1, **extra: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "ID": ident,
        "Priority": priority,
        "Filter": {"Prefix": "logs/"},
        "Status": "Enabled",
        "Destination": {"Bucket": f"arn:aws:s3:::{dest}"},
        "DeleteMarkerReplication": {"Status": "Disabled"},
    }
    rule.update(extra)
    return rule


def _config(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"Role": ROLE, "Rules": list(rules)}


def _error(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    response = caught.value.response
    return (
        response["Error"]["Code"],
        response["Error"].get("Message", ""),
        response["ResponseMetadata"]["HTTPStatusCode"],
    )


def test_round_trip(server: GatewayProcess) -> None:
    s3 = _client(server)
    source, dest = _bucket(s3, "rt-source"), _bucket(s3, "rt-dest")
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_replication(Bucket=source)
    assert _error(caught)[0::2] == ("ReplicationConfigurationNotFoundError", 404)
    rules = [
        _rule(dest),
        _rule(
            dest,
            "tagged",
            2,
            Filter={
                "And": {"Prefix": "t/", "Tags": [{"Key": "k", "Value": "v"}]},
            },
            SourceSelectionCriteria={"ReplicaModifications": {"Status": "Enabled"}},
            ExistingObjectReplication={"Status": "Enabled"},
        ),
        _rule(
            "offsite",
            "remote",
            3,
            Filter={"Tag": {"Key": "offsite", "Value": "yes"}},
            Destination={
                "Bucket": "arn:aws:s3:::offsite",
                "Account": "210987654321",
                "StorageClass": "STANDARD_IA",
                "AccessControlTranslation": {"Owner": "Destination"},
            },
        ),
    ]
    s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_config(*rules))
    got = s3.get_bucket_replication(Bucket=source)["ReplicationConfiguration"]
    assert got == _config(*rules)
    # A rule without an ID gets one, kept across reads.
    s3.put_bucket_replication(
        Bucket=source, ReplicationConfiguration=_config({**_rule(dest), "ID": ""})
    )
    first = s3.get_bucket_replication(Bucket=source)["ReplicationConfiguration"]
    assert first["Rules"][0]["ID"]
    again = s3.get_bucket_replication(Bucket=source)["ReplicationConfiguration"]
    assert again == first
    assert s3.delete_bucket_replication(Bucket=source)["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_replication(Bucket=source)
    assert _error(caught)[0] == "ReplicationConfigurationNotFoundError"
    # Deleting what is not there is 204 too.
    assert s3.delete_bucket_replication(Bucket=source)["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_v1_rules(server: GatewayProcess) -> None:
    s3 = _client(server)
    source, dest = _bucket(s3, "v1-source"), _bucket(s3, "v1-dest")
    rule = {
        "ID": "old",
        "Prefix": "x/",
        "Status": "Enabled",
        "Destination": {"Bucket": f"arn:aws:s3:::{dest}"},
    }
    s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_config(rule))
    assert s3.get_bucket_replication(Bucket=source)["ReplicationConfiguration"] == _config(rule)


def test_refusals(server: GatewayProcess) -> None:
    s3 = _client(server)
    source, dest = _bucket(s3, "no-source"), _bucket(s3, "no-dest")
    unversioned = _bucket(s3, "no-unversioned", None)
    suspended = _bucket(s3, "no-suspended", "Suspended")
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        (
            unversioned,
            _config(_rule(dest)),
            "InvalidRequest",
            "Versioning must be 'Enabled' on the bucket to apply a replication configuration",
        ),
        (
            suspended,
            _config(_rule(dest)),
            "InvalidRequest",
            "Versioning must be 'Enabled' on the bucket to apply a replication configuration",
        ),
        (
            source,
            _config(_rule("no-such-bucket")),
            "InvalidRequest",
            "Destination bucket must exist.",
        ),
        (
            source,
            _config(_rule(unversioned)),
            "InvalidRequest",
            "Destination bucket must have versioning enabled.",
        ),
        (
            source,
            _config(_rule(suspended)),
            "InvalidRequest",
            "Destination bucket must have versioning enabled.",
        ),
        (
            source,
            _config(_rule(source)),
            "InvalidRequest",
            "Destination bucket cannot be the same as the source bucket.",
        ),
        (
            source,
            _config(_rule(dest), _rule(dest, "r2", 1)),
            "InvalidRequest",
            "Found duplicate priority 1.",
        ),
        (
            source,
            _config(_rule(dest), _rule(dest, "r1", 2)),
            "InvalidArgument",
            "Rule Id must be unique.",
        ),
        (
            source,
            _config(
                _rule(
                    dest,
                    Filter={"Tag": {"Key": "k", "Value": "v"}},
                    DeleteMarkerReplication={"Status": "Enabled"},
                )
            ),
            "InvalidRequest",
            "Delete marker replication is not supported if any Tag filter is specified. Please "
            "refer to S3 Developer Guide for more information.",
        ),
        (
            source,
            _config({k: v for k, v in _rule(dest).items() if k != "Priority"}),
            "InvalidRequest",
            "Priority must be specified for this version of Cross Region Replication "
            "configuration schema.Please refer to S3 Developer Guide for more information.",
        ),
        (
            source,
            _config({**_rule(dest), "Destination": {"Bucket": dest}}),
            "InvalidArgument",
            "Invalid bucket ARN.",
        ),
    ]
    for bucket, config, code, message in cases:
        with pytest.raises(ClientError) as caught:
            s3.put_bucket_replication(Bucket=bucket, ReplicationConfiguration=config)
        assert _error(caught) == (code, message, 400), (bucket, config)
    # Nothing of a refused configuration was kept.
    for bucket in (source, unversioned, suspended):
        with pytest.raises(ClientError) as caught:
            s3.get_bucket_replication(Bucket=bucket)
        assert _error(caught)[0] == "ReplicationConfigurationNotFoundError"


def test_remote_destinations(server: GatewayProcess) -> None:
    s3 = _client(server)
    source = _bucket(s3, "remote-source")
    # Named in the remotes file: accepted without a bucket of that name here.
    s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_config(_rule("offsite")))
    with pytest.raises(ClientError) as caught:
        s3.put_bucket_replication(
            Bucket=source, ReplicationConfiguration=_config(_rule("elsewhere"))
        )
    assert _error(caught) == ("InvalidRequest", "Destination bucket must exist.", 400)
    # The refused PUT left the one before in place.
    rules = s3.get_bucket_replication(Bucket=source)["ReplicationConfiguration"]["Rules"]
    assert rules[0]["Destination"]["Bucket"] == "arn:aws:s3:::offsite"


def test_versioning_is_not_suspended_under_a_configuration(server: GatewayProcess) -> None:
    s3 = _client(server)
    source, dest = _bucket(s3, "keep-source"), _bucket(s3, "keep-dest")
    s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_config(_rule(dest)))
    with pytest.raises(ClientError) as caught:
        s3.put_bucket_versioning(Bucket=source, VersioningConfiguration={"Status": "Suspended"})
    assert _error(caught)[0::2] == ("InvalidBucketState", 409)
    # Enabled again is no change, and allowed.
    s3.put_bucket_versioning(Bucket=source, VersioningConfiguration={"Status": "Enabled"})
    s3.delete_bucket_replication(Bucket=source)
    s3.put_bucket_versioning(Bucket=source, VersioningConfiguration={"Status": "Suspended"})
    assert s3.get_bucket_versioning(Bucket=source)["Status"] == "Suspended"


def test_who_may(server: GatewayProcess) -> None:
    s3 = _client(server)
    source, dest = _bucket(s3, "who-source"), _bucket(s3, "who-dest")
    s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_config(_rule(dest)))
    iam = _client(server, "iam")
    iam.create_user(UserName="replicator")
    made = iam.create_access_key(UserName="replicator")["AccessKey"]
    user = _client(server, key=(made["AccessKeyId"], made["SecretAccessKey"]))
    # No policy: nothing.
    for call in (
        lambda: user.get_bucket_replication(Bucket=source),
        lambda: user.put_bucket_replication(
            Bucket=source, ReplicationConfiguration=_config(_rule(dest))
        ),
        lambda: user.delete_bucket_replication(Bucket=source),
    ):
        with pytest.raises(ClientError) as caught:
            call()
        assert _error(caught)[0::2] == ("AccessDenied", 403)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:GetReplicationConfiguration", "s3:PutReplicationConfiguration"],
                "Resource": f"arn:aws:s3:::{source}",
            }
        ],
    }
    iam.put_user_policy(UserName="replicator", PolicyName="r", PolicyDocument=json.dumps(policy))
    assert user.get_bucket_replication(Bucket=source)["ReplicationConfiguration"]["Role"] == ROLE
    user.put_bucket_replication(Bucket=source, ReplicationConfiguration=_config(_rule(dest)))
    # A bucket policy's Deny of the Put action stops Put and Delete, not Get; the owner too.
    deny = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:PutReplicationConfiguration",
                "Resource": f"arn:aws:s3:::{source}",
            }
        ],
    }
    s3.put_bucket_policy(Bucket=source, Policy=json.dumps(deny))
    for client in (user, s3):
        with pytest.raises(ClientError) as caught:
            client.delete_bucket_replication(Bucket=source)
        assert _error(caught)[0] == "AccessDenied"
        with pytest.raises(ClientError) as caught:
            client.put_bucket_replication(
                Bucket=source, ReplicationConfiguration=_config(_rule(dest))
            )
        assert _error(caught)[0] == "AccessDenied"
        assert client.get_bucket_replication(Bucket=source)["ReplicationConfiguration"]
    s3.delete_bucket_policy(Bucket=source)
    s3.delete_bucket_replication(Bucket=source)


def test_a_remotes_file_mistake_stops_the_start_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "remotes.toml"
    path.write_text(REMOTES + REMOTES)
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("S3GW_")}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--data", str(data), "--address",
         "127.0.0.1:0", "--replication-remotes", str(path)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    for word in ("--replication-remotes", "S3GW_REPLICATION_REMOTES", str(path), "twice"):
        assert word in line, line
    assert not data.exists()
