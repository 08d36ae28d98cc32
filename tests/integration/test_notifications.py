"""Bucket notifications, slice 1 (docs/notifications.md), against the real gateway: topics made,
read, changed, listed and deleted with boto3's `sns` client; the configuration's round trip and
AWS's refusals with boto3's `s3` client; AWS's s3:TestEvent arriving at a webhook receiver on
loopback; --notify-networks refusing a link-local endpoint, and a narrowed bound refusing
loopback. On both catalogs."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import psycopg
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.process import ACCESS_KEY, SECRET_KEY
from tests.server import GatewayProcess


class Receiver:
    """A webhook endpoint on 127.0.0.1: keeps each POST's path and JSON body; answers
    `status` (200 unless a test says otherwise)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.status = 200
        self.arrived = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.arrived:
                    receiver.received.append((self.path, json.loads(body)))
                    receiver.arrived.notify_all()
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def messages(self, path: str) -> list[dict[str, Any]]:
        with self.arrived:
            return [body for p, body in self.received if p == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _client(
    server: GatewayProcess, service: str, key: tuple[str, str] = (ACCESS_KEY, SECRET_KEY)
) -> Any:
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
    # No IAM cache: a policy put is in force at the next request.
    gateway = GatewayProcess(
        tmp_path_factory.mktemp("notify") / "data",
        {"S3GW_IAM_CACHE_SECONDS": "0"},
        catalog=module_catalog,
    ).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def receiver(server: GatewayProcess) -> Iterator[Receiver]:
    """One per module's gateway (so per catalog: what one catalog's tests sent is not
    counted in the other's)."""
    found = Receiver()
    yield found
    found.close()


def _error(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = caught.value.response["Error"]
    return error["Code"], error.get("Message", "")


def _config(arn: str, *events: str, prefix: str | None = None, ident: str = "c1") -> dict:
    one: dict[str, Any] = {"Id": ident, "TopicArn": arn, "Events": list(events)}
    if prefix is not None:
        one["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}
    return {"TopicConfigurations": [one]}


def test_topics_crud(server: GatewayProcess, receiver: Receiver) -> None:
    sns = _client(server, "sns")
    endpoint = f"{receiver.url}/crud/secret-token?key=hush"
    made = sns.create_topic(
        Name="crud", Attributes={"push-endpoint": endpoint, "OpaqueData": "od-1"}
    )
    arn = made["TopicArn"]
    assert arn.startswith("arn:aws:sns:us-east-1:") and arn.endswith(":crud")
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["TopicArn"] == arn and attributes["OpaqueData"] == "od-1"
    # The endpoint is shown without its path and query (they may be secrets).
    assert attributes["push-endpoint"] == receiver.url
    assert "secret-token" not in json.dumps(attributes) and "hush" not in json.dumps(attributes)
    sns.set_topic_attributes(TopicArn=arn, AttributeName="OpaqueData", AttributeValue="od-2")
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["OpaqueData"] == "od-2"
    assert arn in [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    sns.delete_topic(TopicArn=arn)
    assert arn not in [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    with pytest.raises(ClientError) as caught:
        sns.get_topic_attributes(TopicArn=arn)
    assert _error(caught)[0] == "NotFound"
    sns.delete_topic(TopicArn=arn)  # again: no error, as SNS


def test_topic_secrets_are_sealed_at_rest(server: GatewayProcess, receiver: Receiver) -> None:
    sns = _client(server, "sns")
    sns.create_topic(
        Name="sealed", Attributes={"push-endpoint": f"{receiver.url}/x/tok-4f9a2b?sig=zz81"}
    )
    # The catalog's topics table, read as it is kept.
    if server.catalog is None:
        with contextlib.closing(sqlite3.connect(server.data / "catalog.sqlite3")) as conn:
            rows = conn.execute("SELECT name, doc FROM topics").fetchall()
    else:
        with psycopg.connect(server.catalog) as conn:
            rows = conn.execute("SELECT name, doc FROM topics").fetchall()
    text = "".join(name + doc for name, doc in rows)
    assert "sealed" in text and "tok-4f9a2b" not in text and "zz81" not in text


def test_bad_topic_requests(server: GatewayProcess) -> None:
    sns = _client(server, "sns")
    for name, attributes in [
        ("bad/name", {}),
        ("scheme", {"push-endpoint": "ftp://127.0.0.1/x"}),
        ("attr", {"no-such-attribute": "x"}),
        # A password over plain HTTP is refused (the request would carry it in the clear).
        ("pw", {"push-endpoint": "http://u:p@127.0.0.1:9/x"}),
    ]:
        with pytest.raises(ClientError) as caught:
            sns.create_topic(Name=name, Attributes=attributes)
        assert _error(caught)[0] == "InvalidParameter", name
    with pytest.raises(ClientError) as caught:
        sns.get_topic_attributes(TopicArn="arn:aws:sns:us-east-1:someone-else:t")
    assert _error(caught)[0] == "AuthorizationError"


def test_link_local_endpoints_are_refused_by_default(server: GatewayProcess) -> None:
    sns = _client(server, "sns")
    for endpoint in ("http://169.254.169.254/latest/meta-data", "http://[fe80::1]:80/x"):
        with pytest.raises(ClientError) as caught:
            sns.create_topic(Name="metadata", Attributes={"push-endpoint": endpoint})
        code, message = _error(caught)
        assert code == "InvalidParameter" and "--notify-networks" in message
    arn = sns.create_topic(Name="later")["TopicArn"]
    with pytest.raises(ClientError) as caught:
        sns.set_topic_attributes(
            TopicArn=arn, AttributeName="push-endpoint", AttributeValue="http://169.254.1.1/"
        )
    assert _error(caught)[0] == "InvalidParameter"
    assert "--notify-networks" in _error(caught)[1]


def test_configuration_round_trip_and_the_test_event(
    server: GatewayProcess, receiver: Receiver
) -> None:
    s3, sns = _client(server, "s3"), _client(server, "sns")
    s3.create_bucket(Bucket="round-trip")
    empty = s3.get_bucket_notification_configuration(Bucket="round-trip")
    assert not {k for k in empty if k != "ResponseMetadata"}
    arn = sns.create_topic(Name="rt", Attributes={"push-endpoint": f"{receiver.url}/rt"})[
        "TopicArn"
    ]
    config = {
        "TopicConfigurations": [
            {
                "Id": "images",
                "TopicArn": arn,
                "Events": ["s3:ObjectCreated:*"],
                "Filter": {
                    "Key": {
                        "FilterRules": [
                            {"Name": "prefix", "Value": "images/"},
                            {"Name": "suffix", "Value": ".jpg"},
                        ]
                    }
                },
            }
        ],
        "QueueConfigurations": [
            {
                "Id": "removals",
                "QueueArn": arn.replace(":sns:", ":sqs:"),  # the same registry's topic
                "Events": ["s3:ObjectRemoved:Delete"],
            }
        ],
    }
    s3.put_bucket_notification_configuration(Bucket="round-trip", NotificationConfiguration=config)
    got = s3.get_bucket_notification_configuration(Bucket="round-trip")
    (topic,) = got["TopicConfigurations"]
    assert (topic["Id"], topic["TopicArn"], topic["Events"]) == (
        "images",
        arn,
        ["s3:ObjectCreated:*"],
    )
    rules = {r["Name"].lower(): r["Value"] for r in topic["Filter"]["Key"]["FilterRules"]}
    assert rules == {"prefix": "images/", "suffix": ".jpg"}
    assert got["QueueConfigurations"][0]["Id"] == "removals"
    # One test event per destination (both configurations name the same topic).
    tests = receiver.messages("/rt")
    assert len(tests) == 1
    assert {k: tests[0][k] for k in ("Service", "Event", "Bucket")} == {
        "Service": "Amazon S3",
        "Event": "s3:TestEvent",
        "Bucket": "round-trip",
    }
    assert tests[0]["RequestId"] and tests[0]["HostId"] and tests[0]["Time"].endswith("Z")
    # A PUT replaces the whole configuration.
    s3.put_bucket_notification_configuration(
        Bucket="round-trip",
        NotificationConfiguration=_config(arn, "s3:ObjectTagging:Put", ident="only"),
    )
    got = s3.get_bucket_notification_configuration(Bucket="round-trip")
    assert [c["Id"] for c in got["TopicConfigurations"]] == ["only"]
    assert "QueueConfigurations" not in got
    # An empty configuration removes it.
    s3.put_bucket_notification_configuration(Bucket="round-trip", NotificationConfiguration={})
    got = s3.get_bucket_notification_configuration(Bucket="round-trip")
    assert not {k for k in got if k != "ResponseMetadata"}


def test_refusals(server: GatewayProcess, receiver: Receiver) -> None:
    s3, sns = _client(server, "s3"), _client(server, "sns")
    s3.create_bucket(Bucket="refusals")
    arn = sns.create_topic(Name="ref", Attributes={"push-endpoint": f"{receiver.url}/ref"})[
        "TopicArn"
    ]

    def put(config: dict, **extra: Any) -> tuple[str, str]:
        with pytest.raises(ClientError) as caught:
            s3.put_bucket_notification_configuration(
                Bucket="refusals", NotificationConfiguration=config, **extra
            )
        return _error(caught)

    assert put(_config(arn, "s3:ObjectCreated:Teleport")) == (
        "InvalidArgument",
        "The event is not supported for notifications",
    )
    overlapping = {
        "TopicConfigurations": [
            {"Id": "a", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]},
            {"Id": "b", "TopicArn": arn, "Events": ["s3:ObjectCreated:Put"]},
        ]
    }
    assert put(overlapping) == (
        "InvalidArgument",
        "Configurations overlap. Configurations on the same bucket cannot share a common "
        "event type.",
    )
    missing = arn.rsplit(":", 1)[0] + ":no-such-topic"
    assert put(_config(missing, "s3:ObjectCreated:Put")) == (
        "InvalidArgument",
        "Unable to validate the following destination configurations",
    )
    # Nothing of a refused PUT was kept.
    got = s3.get_bucket_notification_configuration(Bucket="refusals")
    assert not {k for k in got if k != "ResponseMetadata"}


def test_a_destination_that_does_not_acknowledge(
    server: GatewayProcess, receiver: Receiver
) -> None:
    s3, sns = _client(server, "s3"), _client(server, "sns")
    s3.create_bucket(Bucket="unacknowledged")
    arn = sns.create_topic(Name="down", Attributes={"push-endpoint": f"{receiver.url}/down"})[
        "TopicArn"
    ]
    receiver.status = 503
    try:
        with pytest.raises(ClientError) as caught:
            s3.put_bucket_notification_configuration(
                Bucket="unacknowledged",
                NotificationConfiguration=_config(arn, "s3:ObjectCreated:Put"),
            )
    finally:
        receiver.status = 200
    assert _error(caught) == (
        "InvalidArgument",
        "Unable to validate the following destination configurations",
    )
    assert len(receiver.messages("/down")) == 1  # it was asked, and said no
    got = s3.get_bucket_notification_configuration(Bucket="unacknowledged")
    assert "TopicConfigurations" not in got
    # Unreachable, but validation skipped: kept, and nothing sent.
    closed = sns.create_topic(
        Name="closed", Attributes={"push-endpoint": "http://127.0.0.1:9/closed"}
    )["TopicArn"]
    with pytest.raises(ClientError) as caught:
        s3.put_bucket_notification_configuration(
            Bucket="unacknowledged",
            NotificationConfiguration=_config(closed, "s3:ObjectCreated:Put"),
        )
    assert _error(caught)[0] == "InvalidArgument"
    s3.put_bucket_notification_configuration(
        Bucket="unacknowledged",
        NotificationConfiguration=_config(closed, "s3:ObjectCreated:Put"),
        SkipDestinationValidation=True,
    )
    got = s3.get_bucket_notification_configuration(Bucket="unacknowledged")
    assert got["TopicConfigurations"][0]["TopicArn"] == closed


def test_a_narrowed_bound_refuses_loopback(tmp_path: Path) -> None:
    gateway = GatewayProcess(
        tmp_path / "data", {"S3GW_NOTIFY_NETWORKS": "10.0.0.0/8"}, catalog=None
    ).start()
    try:
        sns = _client(gateway, "sns")
        with pytest.raises(ClientError) as caught:
            sns.create_topic(Name="loop", Attributes={"push-endpoint": "http://127.0.0.1:9/x"})
        assert _error(caught)[0] == "InvalidParameter"
        # Inside the bound: made (10.0.0.0/8 need not answer for a topic to exist).
        assert sns.create_topic(Name="inside", Attributes={"push-endpoint": "http://10.1.2.3:9/x"})[
            "TopicArn"
        ].endswith(":inside")
    finally:
        gateway.stop()


def test_sns_actions_are_judged_by_iam_policies(server: GatewayProcess) -> None:
    """An IAM user may do with topics what its policies allow (sns:*), nothing else."""
    iam = _client(server, "iam")
    iam.create_user(UserName="topics-user")
    made = iam.create_access_key(UserName="topics-user")["AccessKey"]
    sns = _client(server, "sns", (made["AccessKeyId"], made["SecretAccessKey"]))
    with pytest.raises(ClientError) as caught:
        sns.list_topics()
    assert _error(caught)[0] == "AuthorizationError"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["sns:ListTopics", "sns:CreateTopic"], "Resource": "*"}
        ],
    }
    iam.put_user_policy(
        UserName="topics-user", PolicyName="topics", PolicyDocument=json.dumps(policy)
    )
    arn = sns.create_topic(Name="by-iam-user")["TopicArn"]
    assert arn in [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    with pytest.raises(ClientError) as caught:
        sns.delete_topic(TopicArn=arn)  # not allowed
    assert _error(caught)[0] == "AuthorizationError"
    # The root's view: the topic is its account's.
    assert arn in [t["TopicArn"] for t in _client(server, "sns").list_topics()["Topics"]]


def _catalog_sql(gateway: GatewayProcess, sql: str) -> list[tuple[Any, ...]]:
    """Run `sql` on the gateway's catalog as it is kept (SQLite file or PostgreSQL)."""
    if gateway.catalog is None:
        with contextlib.closing(sqlite3.connect(gateway.data / "catalog.sqlite3")) as conn:
            rows = conn.execute(sql).fetchall()
            conn.commit()
            return rows
    with psycopg.connect(gateway.catalog) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


def test_topics_kept_in_files_are_imported(tmp_path: Path, catalog: str | None) -> None:
    """Slice 1 kept topics in DATA/topics/<sha256 of the account>.json; the first start with
    the catalog's table moves them into it, and the folder becomes topics.imported."""
    gateway = GatewayProcess(tmp_path / "data", catalog=catalog).start()
    try:
        sns = _client(gateway, "sns")
        arn = sns.create_topic(
            Name="old", Attributes={"push-endpoint": "http://127.0.0.1:9/old?token=t0k"}
        )["TopicArn"]
    finally:
        gateway.stop()
    ((account, doc),) = _catalog_sql(gateway, "SELECT account, doc FROM topics")
    _catalog_sql(gateway, "DELETE FROM topics")
    folder = gateway.data / "topics"
    folder.mkdir()
    name = hashlib.sha256(account.encode()).hexdigest() + ".json"
    (folder / name).write_text(json.dumps({"account": account, "topics": {"old": doc}}))
    gateway.start()
    try:
        got = _client(gateway, "sns").get_topic_attributes(TopicArn=arn)["Attributes"]
        assert got["push-endpoint"] == "http://127.0.0.1:9"
        assert not folder.exists() and (gateway.data / "topics.imported" / name).exists()
        assert _catalog_sql(gateway, "SELECT name FROM topics") == [("old",)]
    finally:
        gateway.stop()
