"""An account's replication remotes made at runtime on the console's Remotes page
(gateway/console/remotes.py, docs/replication.md "Remote destinations"), against a real
gateway on each catalog and a second gateway on loopback as the remote: a rule may name a
remote once it is added (not before, not after it is deleted); the copies reach it; the secret
key is on no page and, sealed, nowhere in the catalog; another account does not see it or
name it; an IAM user needs s3:PutReplicationConfiguration; an endpoint outside
--notify-networks (link-local) and a secret key that a proxy forwarded over plain HTTP are
refused."""

from __future__ import annotations

import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from botocore.exceptions import ClientError

from tests.integration.test_console import ALICE, BOB, Console, Session
from tests.integration.test_console_iam import _name, client, policy, start
from tests.server import GatewayProcess

WAIT = 60.0  # seconds for a copy


@pytest.fixture(scope="module")
def far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(tmp_path_factory.mktemp("far") / "data", {}).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def console(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[Console]:
    server = start(tmp_path_factory.mktemp("console-remotes"), module_catalog)
    yield Console(server)
    server.stop()


def _rules(destination: str) -> dict[str, Any]:
    return {
        "Role": "arn:aws:iam::123456789012:role/copier",
        "Rules": [
            {
                "ID": "off-site",
                "Priority": 1,
                "Status": "Enabled",
                "Filter": {},
                "DeleteMarkerReplication": {"Status": "Disabled"},
                "Destination": {"Bucket": f"arn:aws:s3:::{destination}"},
            }
        ],
    }


def _versioned(s3: Any, name: str) -> None:
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})


def _catalog_text(server: GatewayProcess) -> str:
    """Everything the catalog holds of the remotes: the SQLite catalog's files (the database
    and its WAL) as text, or the PostgreSQL table's documents."""
    if server.catalog is None:
        return "".join(
            p.read_bytes().decode("latin-1") for p in Path(server.data).rglob("*") if p.is_file()
        )
    with psycopg.connect(server.catalog) as conn:
        return "".join(doc for (doc,) in conn.execute("SELECT doc FROM remotes"))


def _add(session: Session, far: GatewayProcess, bucket: str, **extra: str) -> tuple[int, str]:
    fields = {
        "bucket": bucket,
        "endpoint": far.url,
        "region": "us-east-1",
        "access_key": far.env["S3GW_ACCESS_KEY"],
        "secret_key": far.env["S3GW_SECRET_KEY"],
        "addressing_style": "path",
    }
    return session.act("/remotes", **{**fields, **extra})


def test_a_remote_added_on_the_console_takes_the_copies(
    console: Console, far: GatewayProcess
) -> None:
    alice = Session(console, ALICE)
    s3, far_s3 = client(console, "s3", ALICE), far.client()
    source, destination = _name("src"), _name("far")
    _versioned(s3, source)
    _versioned(far_s3, destination)
    with pytest.raises(ClientError) as refused:  # not a remote yet, nor a bucket here
        s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_rules(destination))
    assert refused.value.response["Error"]["Message"] == "Destination bucket must exist."

    status, page = _add(alice, far, destination)
    assert status == 200, page
    secret = far.env["S3GW_SECRET_KEY"]
    assert f"arn:aws:s3:::{destination}" in page and far.url in page
    assert far.env["S3GW_ACCESS_KEY"] in page and secret not in page
    assert secret not in _catalog_text(console.server)  # sealed

    s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_rules(destination))
    put = s3.put_object(Bucket=source, Key="a b", Body=b"far away", Metadata={"k": "v"})
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        status_now = s3.head_object(Bucket=source, Key="a b").get("ReplicationStatus")
        if status_now == "COMPLETED":
            break
        time.sleep(0.2)
    assert status_now == "COMPLETED"
    copy = far_s3.get_object(Bucket=destination, Key="a b")
    assert copy["Body"].read() == b"far away" and copy["ETag"] == put["ETag"]
    assert copy["Metadata"] == {"k": "v"}

    # Bob, another account, neither sees Alice's remote nor may name it.
    bob = Session(console, BOB)
    assert f"arn:aws:s3:::{destination}" not in bob.get("/remotes")[1]
    bob_s3 = client(console, "s3", BOB)
    bob_source = _name("bob")
    _versioned(bob_s3, bob_source)
    with pytest.raises(ClientError):
        bob_s3.put_bucket_replication(
            Bucket=bob_source, ReplicationConfiguration=_rules(destination)
        )

    # Deleted: a new configuration may no longer name it.
    status, page = alice.act("/remotes/delete", bucket=destination)
    assert status == 200 and f"arn:aws:s3:::{destination}" not in page
    with pytest.raises(ClientError):
        s3.put_bucket_replication(Bucket=source, ReplicationConfiguration=_rules(destination))


def test_what_is_refused(console: Console, far: GatewayProcess) -> None:
    alice = Session(console, ALICE)
    # An endpoint that resolves where metadata services answer (the default bound).
    status, page = _add(alice, far, _name("meta"), endpoint="http://169.254.169.254")
    assert status == 400 and "outside --notify-networks" in page, page
    # Not an endpoint.
    status, page = _add(alice, far, _name("bad"), endpoint="ftp://example.com")
    assert status == 400 and "endpoint must be http(s)://HOST[:PORT]" in page, page
    # A secret key that a proxy forwarded over plain HTTP may have crossed a network.
    name = _name("proxied")
    fields = {
        "csrf": alice.csrf(),
        "bucket": name,
        "endpoint": far.url,
        "region": "us-east-1",
        "access_key": "AKIAPROXIED",
        "secret_key": "never-in-the-clear",
    }
    request = urllib.request.Request(
        alice.url + "/remotes",
        data=urllib.parse.urlencode(fields).encode(),
        method="POST",
        headers={"X-Forwarded-For": "203.0.113.7"},
    )
    status, page = alice._open(request)
    assert status == 400 and "HTTPS only" in page, page
    assert name not in alice.get("/remotes")[1]


def test_an_iam_user_needs_put_replication_configuration(console: Console) -> None:
    iam = client(console, "iam", ALICE)
    user = _name("reader")
    iam.create_user(UserName=user)
    iam.put_user_policy(
        UserName=user,
        PolicyName="read",
        PolicyDocument=policy(
            {"Effect": "Allow", "Action": "s3:GetReplicationConfiguration", "Resource": "*"}
        ),
    )
    made = iam.create_access_key(UserName=user)["AccessKey"]
    reader = Session(console, (made["AccessKeyId"], made["SecretAccessKey"]))
    status, page = reader.get("/remotes")
    assert status == 200 and "Add a remote" in page, page
    status, page = reader.act(
        "/remotes",
        bucket=_name("nope"),
        endpoint="http://127.0.0.1:9",
        region="us-east-1",
        access_key="AKIAX",
        secret_key="y",
    )
    assert status == 403 and "s3:PutReplicationConfiguration" in page, page
    # Without s3:GetReplicationConfiguration, not even the list.
    iam.delete_user_policy(UserName=user, PolicyName="read")
    status, page = reader.get("/remotes")
    assert status == 403 and "s3:GetReplicationConfiguration" in page, page
