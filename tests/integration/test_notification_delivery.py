"""Bucket notifications, slice 2 (docs/notifications.md): object events recorded in the outbox
with the change and delivered by the worker to a webhook receiver on loopback. The filter's
exact matches, each front door (PUT, POST form, copy, Complete, delete; the console's and
lifecycle's go through the same Store writes), every field of AWS's record, a destination
that refuses twice, and a receiver down while objects are written and the gateway SIGKILLed:
every record arrives. On both catalogs."""

from __future__ import annotations

import collections
import concurrent.futures
import http.server
import json
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_notifications import _client
from tests.integration.test_post_object import form_of, post
from tests.postgres import PostgresServer
from tests.reliability.harness import CrashableGateway
from tests.server import GatewayProcess

WAIT = 90.0  # seconds a test waits for records (a lease to lapse after a crash included)


class Receiver:
    """A webhook endpoint on 127.0.0.1 (on `port`, or one of the system's): keeps each POST's
    path and JSON body, and answers 503 to the next `refuse` POSTs, else 200."""

    def __init__(self, port: int = 0) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.refuse = 0
        self.arrived = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.arrived:
                    receiver.received.append((self.path, json.loads(body)))
                    status = 503 if receiver.refuse > 0 else 200
                    receiver.refuse = max(0, receiver.refuse - 1)
                    receiver.arrived.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def all(self, path: str) -> list[dict[str, Any]]:
        """Every POST to `path`, refused ones included, in arrival order."""
        with self.arrived:
            return [body for p, body in self.received if p == path]

    def records(self, path: str) -> list[dict[str, Any]]:
        return [r for body in self.all(path) for r in body.get("Records", [])]

    def wait_for(self, path: str, key: str, count: int = 1) -> list[dict[str, Any]]:
        """The records of `path` once `count` of them name `key` (URL-encoded as records
        carry it), waiting at most WAIT seconds."""
        deadline = time.monotonic() + WAIT
        found: list[dict[str, Any]] = []
        with self.arrived:
            while time.monotonic() < deadline:
                found = [r for p, b in self.received if p == path for r in b.get("Records", [])]
                if sum(r["s3"]["object"]["key"] == key for r in found) >= count:
                    return found
                self.arrived.wait(1.0)
        raise AssertionError(f"no {count} records of {key} at {path} within {WAIT} s: {found}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[GatewayProcess]:
    # A lifecycle "day" of a second, so that an expiration happens within the test.
    gateway = GatewayProcess(
        tmp_path_factory.mktemp("delivery") / "data",
        {"S3GW_LIFECYCLE_DAY": "1"},
        catalog=module_catalog,
    ).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def receiver(module_catalog: str | None) -> Iterator[Receiver]:
    # One per catalog: the module's tests run on each, with the same bucket and topic names.
    found = Receiver()
    yield found
    found.close()


def _topic(server: GatewayProcess, name: str, url: str) -> str:
    sns = _client(server, "sns")
    return sns.create_topic(Name=name, Attributes={"push-endpoint": url})["TopicArn"]


def _summary(records: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(r["eventName"], r["s3"]["object"]["key"], r["s3"]["configurationId"]) for r in records]


def test_filters_and_front_doors(server: GatewayProcess, receiver: Receiver) -> None:
    s3 = _client(server, "s3")
    s3.create_bucket(Bucket="doors")
    arn = _topic(server, "doors", f"{receiver.url}/doors")
    rules = [{"Name": "prefix", "Value": "images/"}, {"Name": "suffix", "Value": ".jpg"}]
    s3.put_bucket_notification_configuration(
        Bucket="doors",
        NotificationConfiguration={
            "TopicConfigurations": [
                {
                    "Id": "jpg-images",
                    "TopicArn": arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": rules}},
                },
                {
                    "Id": "removed",
                    "TopicArn": arn,
                    "Events": ["s3:ObjectRemoved:Delete"],
                    "Filter": {"Key": {"FilterRules": rules[:1]}},
                },
            ]
        },
        SkipDestinationValidation=True,
    )
    s3.put_object(Bucket="doors", Key="images/a.jpg", Body=b"a")  # Put
    s3.put_object(Bucket="doors", Key="images/a.png", Body=b"x")  # the wrong suffix
    s3.put_object(Bucket="doors", Key="other/a.jpg", Body=b"x")  # the wrong prefix
    s3.put_object(Bucket="doors", Key="images/red flower.jpg", Body=b"r")
    s3.copy_object(  # Copy
        Bucket="doors", Key="images/b.jpg", CopySource={"Bucket": "doors", "Key": "images/a.jpg"}
    )
    signed = s3.generate_presigned_post("doors", "images/p.jpg", ExpiresIn=600)  # Post
    assert post(signed["url"], form_of(signed, b"posted")).status == 204
    upload = s3.create_multipart_upload(Bucket="doors", Key="images/c.jpg")["UploadId"]
    etag = s3.upload_part(
        Bucket="doors", Key="images/c.jpg", UploadId=upload, PartNumber=1, Body=b"c"
    )["ETag"]
    s3.complete_multipart_upload(  # CompleteMultipartUpload
        Bucket="doors",
        Key="images/c.jpg",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    s3.delete_object(Bucket="doors", Key="images/a.png")  # Delete (any suffix)
    s3.delete_object(Bucket="doors", Key="other/a.jpg")  # the wrong prefix
    s3.delete_objects(Bucket="doors", Delete={"Objects": [{"Key": "images/b.jpg"}]})
    # An event the configuration does not name (a tag set put) makes no record.
    s3.put_object_tagging(
        Bucket="doors", Key="images/a.jpg", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}
    )
    s3.put_object(Bucket="doors", Key="images/last.jpg", Body=b"z")
    # Each key's records in the order of its changes; keys are delivered side by side, so
    # the records of different keys may come in another order.
    records = receiver.wait_for("/doors", "images/last.jpg")
    deadline = time.monotonic() + WAIT
    while len(records) < 8 and time.monotonic() < deadline:
        time.sleep(0.1)
        records = receiver.records("/doors")
    assert sorted(_summary(records)) == sorted(
        [
            ("ObjectCreated:Put", "images/a.jpg", "jpg-images"),
            ("ObjectCreated:Put", "images/red+flower.jpg", "jpg-images"),
            ("ObjectCreated:Copy", "images/b.jpg", "jpg-images"),
            ("ObjectCreated:Post", "images/p.jpg", "jpg-images"),
            ("ObjectCreated:CompleteMultipartUpload", "images/c.jpg", "jpg-images"),
            ("ObjectRemoved:Delete", "images/a.png", "removed"),
            ("ObjectRemoved:Delete", "images/b.jpg", "removed"),
            ("ObjectCreated:Put", "images/last.jpg", "jpg-images"),
        ]
    )
    for key in ("images/b.jpg",):  # a Copy, then its Delete
        events = [event for event, name, _ in _summary(records) if name == key]
        assert events == ["ObjectCreated:Copy", "ObjectRemoved:Delete"]
    # Each message holds one record.
    assert all(len(body["Records"]) == 1 for body in receiver.all("/doors"))


def test_every_field_of_the_record(server: GatewayProcess, receiver: Receiver) -> None:
    """AWS's "Event message structure" (notification-content-structure.html), field by field."""
    s3 = _client(server, "s3")
    s3.create_bucket(Bucket="fields")
    s3.put_bucket_versioning(Bucket="fields", VersioningConfiguration={"Status": "Enabled"})
    arn = _topic(server, "fields", f"{receiver.url}/fields")
    s3.put_bucket_notification_configuration(
        Bucket="fields",
        NotificationConfiguration={
            "TopicConfigurations": [
                {
                    "Id": "all",
                    "TopicArn": arn,
                    "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
                }
            ]
        },
    )
    first = s3.put_object(Bucket="fields", Key="doc.txt", Body=b"hello")
    second = s3.put_object(Bucket="fields", Key="doc.txt", Body=b"hello again")
    removed = s3.delete_object(Bucket="fields", Key="doc.txt")
    records = receiver.wait_for("/fields", "doc.txt", 3)
    assert [r["eventName"] for r in records] == [
        "ObjectCreated:Put",
        "ObjectCreated:Put",
        "ObjectRemoved:DeleteMarkerCreated",
    ]
    put = records[0]
    meta = first["ResponseMetadata"]
    assert set(put) == {
        "eventVersion",
        "eventSource",
        "awsRegion",
        "eventTime",
        "eventName",
        "userIdentity",
        "requestParameters",
        "responseElements",
        "s3",
    }
    assert put["eventVersion"] == "2.1"
    assert put["eventSource"] == "aws:s3"
    assert put["awsRegion"] == "us-east-1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", put["eventTime"])
    owner = s3.list_buckets()["Owner"]["ID"]
    assert put["userIdentity"] == {"principalId": owner}
    assert put["requestParameters"] == {"sourceIPAddress": "127.0.0.1"}
    assert put["responseElements"] == {
        "x-amz-request-id": meta["RequestId"],
        "x-amz-id-2": meta["HostId"],
    }
    assert put["s3"] == {
        "s3SchemaVersion": "1.0",
        "configurationId": "all",
        "bucket": {
            "name": "fields",
            "ownerIdentity": {"principalId": owner},
            "arn": "arn:aws:s3:::fields",
        },
        "object": {
            "key": "doc.txt",
            "size": 5,
            "eTag": first["ETag"].strip('"'),
            "versionId": first["VersionId"],
            "sequencer": put["s3"]["object"]["sequencer"],
        },
    }
    assert records[1]["s3"]["object"]["versionId"] == second["VersionId"]
    assert records[1]["s3"]["object"]["size"] == len(b"hello again")
    marker = records[2]["s3"]["object"]
    # A removal has no size and no ETag; the marker made is its version.
    assert marker["versionId"] == removed["VersionId"]
    assert "size" not in marker and "eTag" not in marker
    # The sequencer: 18 upper-case hex digits or more, increasing with each change of the key.
    sequencers = [r["s3"]["object"]["sequencer"] for r in records]
    assert all(re.fullmatch(r"[0-9A-F]{18,}", s) for s in sequencers)
    assert [int(s, 16) for s in sequencers] == sorted({int(s, 16) for s in sequencers})


def test_a_destination_that_refuses_twice(server: GatewayProcess, receiver: Receiver) -> None:
    s3 = _client(server, "s3")
    s3.create_bucket(Bucket="refusing")
    arn = _topic(server, "refusing", f"{receiver.url}/refusing")
    s3.put_bucket_notification_configuration(
        Bucket="refusing",
        NotificationConfiguration={
            "TopicConfigurations": [
                {"Id": "c", "TopicArn": arn, "Events": ["s3:ObjectCreated:Put"]}
            ]
        },
    )
    with receiver.arrived:
        receiver.refuse = 2
    s3.put_object(Bucket="refusing", Key="first", Body=b"1")
    receiver.wait_for("/refusing", "first", 3)
    # Acknowledged at the third POST: removed from the outbox, never sent again (the next
    # record arrives after it, and it was sent three times in all).
    s3.put_object(Bucket="refusing", Key="second", Body=b"2")
    records = receiver.wait_for("/refusing", "second")
    assert [r["s3"]["object"]["key"] for r in records] == ["first"] * 3 + ["second"]
    assert len({r["s3"]["object"]["sequencer"] for r in records[:3]}) == 1
    # Counted: the refusals as failed attempts, the acknowledgements as deliveries.
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    values = dict(re.findall(r"^(s3gw_notif\w+) (\S+)$", text, re.MULTILINE))
    assert float(values["s3gw_notification_failures_total"]) >= 2
    assert float(values["s3gw_notifications_delivered_total"]) >= 2
    assert "s3gw_notifications_pending" in values


def _oldest(gateway: GatewayProcess, arn: str) -> float | None:
    with urllib.request.urlopen(f"{gateway.url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    found = re.search(
        rf'^s3gw_notifications_oldest_seconds{{destination="{re.escape(arn)}"}} (\S+)$',
        text,
        re.MULTILINE,
    )
    return float(found.group(1)) if found else None


def test_the_oldest_waiting_record_per_destination(
    server: GatewayProcess, receiver: Receiver
) -> None:
    """s3gw_notifications_oldest_seconds: a destination that refuses shows how long its oldest
    record has waited; once it takes them, 0."""
    s3 = _client(server, "s3")
    s3.create_bucket(Bucket="waiting")
    arn = _topic(server, "waiting", f"{receiver.url}/waiting")
    s3.put_bucket_notification_configuration(
        Bucket="waiting",
        NotificationConfiguration={
            "TopicConfigurations": [
                {"Id": "w", "TopicArn": arn, "Events": ["s3:ObjectCreated:Put"]}
            ]
        },
    )
    with receiver.arrived:
        receiver.refuse = 10_000
    try:
        s3.put_object(Bucket="waiting", Key="k", Body=b"1")
        deadline = time.monotonic() + WAIT
        age = None
        while time.monotonic() < deadline:
            age = _oldest(server, arn)
            if age is not None and age > 0.5:
                break
            time.sleep(0.2)
        assert age is not None and age > 0.5
    finally:
        with receiver.arrived:
            receiver.refuse = 0
    receiver.wait_for("/waiting", "k", 2)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and _oldest(server, arn) != 0:
        time.sleep(0.2)
    assert _oldest(server, arn) == 0


def test_tagging_acl_and_lifecycle_events(server: GatewayProcess, receiver: Receiver) -> None:
    s3 = _client(server, "s3")
    s3.create_bucket(Bucket="changes", ObjectOwnership="ObjectWriter")
    arn = _topic(server, "changes", f"{receiver.url}/changes")
    s3.put_bucket_notification_configuration(
        Bucket="changes",
        NotificationConfiguration={
            "TopicConfigurations": [
                {
                    "Id": "attrs",
                    "TopicArn": arn,
                    "Events": ["s3:ObjectTagging:*", "s3:ObjectAcl:Put"],
                },
                {"Id": "expiry", "TopicArn": arn, "Events": ["s3:LifecycleExpiration:*"]},
            ]
        },
    )
    put = s3.put_object(Bucket="changes", Key="t", Body=b"t")  # not configured: no record
    tags = {"TagSet": [{"Key": "k", "Value": "v"}]}
    s3.put_object_tagging(Bucket="changes", Key="t", Tagging=tags)
    s3.delete_object_tagging(Bucket="changes", Key="t")
    s3.put_object_acl(Bucket="changes", Key="t", ACL="private")
    s3.put_bucket_lifecycle_configuration(
        Bucket="changes",
        LifecycleConfiguration={
            "Rules": [{"ID": "r", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}}]
        },
    )
    records = receiver.wait_for("/changes", "t", 4)
    assert _summary(records) == [
        ("ObjectTagging:Put", "t", "attrs"),
        ("ObjectTagging:Delete", "t", "attrs"),
        ("ObjectAcl:Put", "t", "attrs"),
        ("LifecycleExpiration:Delete", "t", "expiry"),
    ]
    assert records[0]["s3"]["object"]["eTag"] == put["ETag"].strip('"')
    # The lifecycle worker is the service itself, as on AWS.
    assert records[3]["userIdentity"] == {"principalId": "s3.amazonaws.com"}


def test_a_bucket_without_notifications_records_nothing(
    server: GatewayProcess, receiver: Receiver
) -> None:
    s3 = _client(server, "s3")
    s3.create_bucket(Bucket="quiet")
    s3.put_object(Bucket="quiet", Key="images/a.jpg", Body=b"a")
    s3.delete_object(Bucket="quiet", Key="images/a.jpg")
    # A configuration put afterwards does not reach back: only the write after it is sent.
    arn = _topic(server, "quiet", f"{receiver.url}/quiet")
    s3.put_bucket_notification_configuration(
        Bucket="quiet",
        NotificationConfiguration={
            "TopicConfigurations": [{"Id": "c", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    s3.put_object(Bucket="quiet", Key="after", Body=b"b")
    records = receiver.wait_for("/quiet", "after")
    assert _summary(records) == [("ObjectCreated:Put", "after", "c")]


def test_nothing_is_lost_across_a_crash(tmp_path: Path, catalog: str | None) -> None:
    """The receiver down while objects are written, the gateway SIGKILLed and started again,
    the receiver back: every record arrives (at least once), each key's in order."""
    receiver = Receiver()
    port = receiver.port
    gateway = CrashableGateway(tmp_path / "data", {"S3GW_WORKERS": "1"}, catalog=catalog)
    gateway.start()
    try:
        s3 = _client(gateway, "s3")
        s3.create_bucket(Bucket="crash")
        arn = _topic(gateway, "crash", f"{receiver.url}/crash")
        s3.put_bucket_notification_configuration(
            Bucket="crash",
            NotificationConfiguration={
                "TopicConfigurations": [
                    {"Id": "c", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}
                ]
            },
        )
        receiver.close()  # refused connections from now on
        keys = [f"k{n}" for n in range(12)]
        for key in keys:
            s3.put_object(Bucket="crash", Key=key, Body=key.encode())
        for n in range(3):  # one key written again: its records arrive in order
            s3.put_object(Bucket="crash", Key="again", Body=str(n).encode())
        gateway.crash()
        gateway.start()
        receiver = Receiver(port)
        records = receiver.wait_for("/crash", "again", 3)
        for key in keys:
            records = receiver.wait_for("/crash", key)
        assert {r["s3"]["object"]["key"] for r in records} == {*keys, "again"}
        again = [
            r["s3"]["object"]["sequencer"] for r in records if r["s3"]["object"]["key"] == "again"
        ]
        assert [int(s, 16) for s in again] == sorted(int(s, 16) for s in again)
        assert len(set(again)) == 3
    finally:
        gateway.stop()
        receiver.close()


def _metric(gateway: GatewayProcess, name: str) -> float:
    with urllib.request.urlopen(f"{gateway.url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_an_event_older_than_the_retention_is_dropped(tmp_path: Path, catalog: str | None) -> None:
    receiver = Receiver()
    gateway = GatewayProcess(
        tmp_path / "data", {"S3GW_NOTIFY_RETENTION": "1"}, catalog=catalog
    ).start()
    try:
        s3, sns = _client(gateway, "s3"), _client(gateway, "sns")
        s3.create_bucket(Bucket="kept")
        # Nobody listens there: its events wait, and go once they are a second old.
        arn = _topic(gateway, "kept", "http://127.0.0.1:9/kept")
        s3.put_bucket_notification_configuration(
            Bucket="kept",
            NotificationConfiguration={
                "TopicConfigurations": [
                    {"Id": "c", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}
                ]
            },
            SkipDestinationValidation=True,
        )
        s3.put_object(Bucket="kept", Key="old", Body=b"o")
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if _metric(gateway, "s3gw_notifications_dropped_total") >= 1:
                break
            time.sleep(0.2)
        assert _metric(gateway, "s3gw_notifications_dropped_total") >= 1
        sns.set_topic_attributes(
            TopicArn=arn, AttributeName="push-endpoint", AttributeValue=f"{receiver.url}/kept"
        )
        s3.put_object(Bucket="kept", Key="new", Body=b"n")
        records = receiver.wait_for("/kept", "new")
        assert _summary(records) == [("ObjectCreated:Put", "new", "c")]
    finally:
        gateway.stop()
        receiver.close()


def _notifying_nodes(
    url: str, tmp_path: Path, bucket: str, receiver: Receiver
) -> list[GatewayProcess]:
    """Two nodes (one of two processes, one of one) on the PostgreSQL catalog `url` and one
    data folder, and `bucket` made with every object created sent to `receiver` at
    `/BUCKET`. The caller stops the nodes; if the set-up fails, they are stopped here."""
    nodes: list[GatewayProcess] = []
    try:
        for n in (2, 1):
            env = {"S3GW_CATALOG": url, "S3GW_WORKERS": str(n)}
            nodes.append(GatewayProcess(tmp_path / "data", env).start())
        s3 = _client(nodes[0], "s3")
        s3.create_bucket(Bucket=bucket)
        # Made on one node, used by the other's worker: topics are the catalog's.
        arn = _topic(nodes[0], bucket, f"{receiver.url}/{bucket}")
        s3.put_bucket_notification_configuration(
            Bucket=bucket,
            NotificationConfiguration={
                "TopicConfigurations": [
                    {"Id": "c", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}
                ]
            },
        )
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def test_two_nodes_writing_at_once(postgres: PostgresServer, tmp_path: Path) -> None:
    """Two nodes (one of two processes) on one PostgreSQL catalog and data folder, writes
    spread over both at once: every record is delivered, each at most twice (one holder of
    the lease delivers at a time; a change of holder may send a record again)."""
    receiver = Receiver()
    url = postgres.database()
    nodes: list[GatewayProcess] = []
    try:
        nodes = _notifying_nodes(url, tmp_path, "both", receiver)

        def write(n: int) -> None:
            client = _client(nodes[n % 2], "s3")
            for i in range(15):
                client.put_object(Bucket="both", Key=f"n{n}-{i}", Body=b"x")

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(write, range(4)))
        keys = {f"n{n}-{i}" for n in range(4) for i in range(15)}
        for key in sorted(keys):
            records = receiver.wait_for("/both", key)
        arrived = [r["s3"]["object"]["key"] for r in records]
        assert set(arrived) == keys
        counts = collections.Counter(arrived)
        assert max(counts.values()) <= 2, counts
    finally:
        for node in nodes:
            node.stop()
        receiver.close()


def _partition_holders(catalog: str) -> collections.Counter[str]:
    import psycopg

    with psycopg.connect(catalog, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT holder FROM leases WHERE name LIKE 'notifications/p/%%' AND expires_ns > %s",
            (time.time_ns(),),
        ).fetchall()
    return collections.Counter(holder for (holder,) in rows)


def test_the_nodes_share_the_partitions_of_a_backlog(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """Two nodes (three worker processes) on one PostgreSQL catalog and a backlog made while
    the destination is down: the processes share the outbox's partitions out between them
    (each partition one holder), and once the destination is back every record arrives, each
    key's in order, all of them at most twice."""
    receiver = Receiver()
    port = receiver.port
    url = postgres.database()
    nodes: list[GatewayProcess] = []
    try:
        nodes = _notifying_nodes(url, tmp_path, "shared", receiver)
        for node in nodes:
            node.allow(r"notifications: arn:aws:sns:")  # the destination down: a warning
        receiver.close()
        keys = [f"k{n}" for n in range(40)]

        def write(n: int) -> None:
            client = _client(nodes[n % 2], "s3")
            for key in keys:
                client.put_object(Bucket="shared", Key=key, Body=str(n).encode())

        for n in range(3):  # each key three times, one round after another: its order known
            write(n)
        # Every process with rows to deliver is a member, and the partitions are dealt out
        # at their next rebalances (a third of the lease apart).
        deadline = time.monotonic() + 60
        holders = _partition_holders(url)
        while len(holders) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
            holders = _partition_holders(url)
        assert len(holders) == 3, holders
        assert sum(holders.values()) == 16 and max(holders.values()) <= 6, holders
        receiver = Receiver(port)
        for key in keys:
            records = receiver.wait_for("/shared", key, 3)
        arrived = collections.defaultdict(list)
        for r in records:
            arrived[r["s3"]["object"]["key"]].append(int(r["s3"]["object"]["sequencer"], 16))
        assert set(arrived) == set(keys)
        for key, sequencers in arrived.items():
            assert sorted(set(sequencers)) == sorted(set(sequencers), key=sequencers.index), key
            assert len(set(sequencers)) == 3 and len(sequencers) <= 6, (key, sequencers)
    finally:
        for node in nodes:
            node.stop()
        receiver.close()
