"""Several gateway nodes on one PostgreSQL catalog and one data folder (issue 15): real node
processes, a real PostgreSQL, boto3 spread over the nodes. A write acknowledged by one node is
seen by the others at once; nodes racing on the same keys leave one state and exact reference
counts (fsck over the database, all nodes stopped); a node killed mid-upload leaves the others
serving."""

from __future__ import annotations

import concurrent.futures
import hashlib
import http.client
import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from gateway.store import fsck
from tests import raw
from tests.postgres import PostgresServer
from tests.process import GatewayProcess

BUCKET = "shared"
MIB = 1 << 20
LEASE = "S3GW_BLOB_LEASE"


@dataclass
class Cluster:
    data: Path
    url: str
    nodes: list[GatewayProcess]

    env: dict[str, str] = field(default_factory=dict)

    def start_node(self, workers: int = 1) -> GatewayProcess:
        node = GatewayProcess(
            self.data, {"S3GW_CATALOG": self.url, "S3GW_WORKERS": str(workers), **self.env}
        ).start()
        self.nodes.append(node)
        return node

    def clients(self) -> list[Any]:
        return [node.client() for node in self.nodes if node.proc is not None]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def fsck(self, deep: bool = True) -> fsck.Report:
        return fsck.check(self.data, deep=deep, catalog_url=self.url)


@pytest.fixture
def cluster(postgres: PostgresServer, tmp_path: Path) -> Iterator[Cluster]:
    """Three nodes (one with two worker processes) on a database of the test's own."""
    yield from _cluster(Cluster(tmp_path / "data", postgres.database(), []))


@pytest.fixture
def leased(postgres: PostgresServer, tmp_path: Path) -> Iterator[Cluster]:
    """The same, with a blob lease of one second: a dead writer's blob is reclaimed soon."""
    yield from _cluster(Cluster(tmp_path / "data", postgres.database(), [], {LEASE: "1.0"}))


def _cluster(c: Cluster) -> Iterator[Cluster]:
    try:
        for workers in (1, 2, 1):
            c.start_node(workers)
        c.nodes[0].client().create_bucket(Bucket=BUCKET)
        yield c
    finally:
        c.stop()
    for node in c.nodes:
        assert not [line for line in node.log if "Traceback" in line], "".join(node.log)


def test_a_write_on_one_node_is_seen_by_the_others_at_once(cluster: Cluster) -> None:
    a, b, c = cluster.clients()
    body = os.urandom(300_000)  # a blob file, not an inline row
    a.put_object(Bucket=BUCKET, Key="doc", Body=body)
    assert b.get_object(Bucket=BUCKET, Key="doc")["Body"].read() == body
    assert c.head_object(Bucket=BUCKET, Key="doc")["ContentLength"] == len(body)
    assert [o["Key"] for o in c.list_objects_v2(Bucket=BUCKET)["Contents"]] == ["doc"]
    b.copy_object(Bucket=BUCKET, Key="copy", CopySource=f"{BUCKET}/doc")
    a.delete_object(Bucket=BUCKET, Key="doc")
    with pytest.raises(ClientError) as gone:
        c.head_object(Bucket=BUCKET, Key="doc")
    assert gone.value.response["Error"]["Code"] == "404"
    # The copy shares the blob: the delete on one node freed nothing the copy uses.
    assert a.get_object(Bucket=BUCKET, Key="copy")["Body"].read() == body
    # A bucket made on one node is one bucket for all (making it again in us-east-1 is
    # answered 200, as AWS does for its owner, and makes nothing new).
    c.create_bucket(Bucket=BUCKET)
    assert [x["Name"] for x in b.list_buckets()["Buckets"]] == [BUCKET]


def test_nodes_racing_on_the_same_keys_leave_one_state(cluster: Cluster) -> None:
    clients = cluster.clients()
    keys = [f"k{n}" for n in range(4)]
    bodies = {n: os.urandom(70_000 + n) for n in range(24)}  # files: above --inline-max
    rng = random.Random(15)
    plan = [(rng.choice(range(3)), rng.choice(keys), n) for n in range(240)]
    lock = threading.Lock()
    acknowledged: dict[str, list[bytes | None]] = {key: [] for key in keys}

    def act(node: int, key: str, n: int) -> None:
        s3 = clients[node]
        op = n % 6
        try:
            if op < 3:
                body = bodies[n % len(bodies)]
                s3.put_object(Bucket=BUCKET, Key=key, Body=body)
                outcome: bytes | None = body
            elif op < 5:
                source = keys[(keys.index(key) + 1) % len(keys)]
                s3.copy_object(Bucket=BUCKET, Key=key, CopySource=f"{BUCKET}/{source}")
                outcome = b"copied"
            else:
                s3.delete_object(Bucket=BUCKET, Key=key)
                outcome = None
        except ClientError as exc:
            # A copy may be refused by the race, and only a copy: its source deleted meanwhile
            # (NoSuchKey), or rewritten under it at every attempt (503 SlowDown, which SDKs
            # retry; a loaded machine makes it likely with 12 writers on 4 keys).
            assert op in (3, 4), exc.response
            assert exc.response["Error"]["Code"] in ("NoSuchKey", "SlowDown"), exc.response
            return
        with lock:
            acknowledged[key].append(outcome)

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda step: act(*step), plan))

    # Every node sees the same final state, and each key holds a body some write gave it.
    known = set(bodies.values())
    views = []
    for s3 in clients:
        view = {}
        for key in keys:
            try:
                view[key] = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "NoSuchKey"
                view[key] = None
        views.append(view)
    assert views[0] == views[1] == views[2]
    for key, body in views[0].items():
        assert body is None or body in known
        assert acknowledged[key], f"{key} was never written, yet it is {body!r:.20}"

    cluster.stop()
    report = cluster.fsck()
    assert report.damage == [], report.render()


def test_multipart_through_three_nodes(cluster: Cluster) -> None:
    a, b, c = cluster.clients()
    upload = a.create_multipart_upload(Bucket=BUCKET, Key="big")["UploadId"]
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(1000)]
    etags = []
    for number, (s3, body) in enumerate(zip((a, b, c), parts, strict=True), start=1):
        answer = s3.upload_part(
            Bucket=BUCKET, Key="big", UploadId=upload, PartNumber=number, Body=body
        )
        etags.append({"PartNumber": number, "ETag": answer["ETag"]})
    listed = b.list_parts(Bucket=BUCKET, Key="big", UploadId=upload)["Parts"]
    assert [p["PartNumber"] for p in listed] == [1, 2, 3]
    done = c.complete_multipart_upload(
        Bucket=BUCKET, Key="big", UploadId=upload, MultipartUpload={"Parts": etags}
    )
    folded = hashlib.md5(
        b"".join(hashlib.md5(p).digest() for p in parts), usedforsecurity=False
    ).hexdigest()
    assert done["ETag"] == f'"{folded}-3"'
    assert a.get_object(Bucket=BUCKET, Key="big")["Body"].read() == b"".join(parts)
    # Completed once: a retried Complete on another node gets the same answer (as AWS gives a
    # retry), and the object is the one the first made.
    again = b.complete_multipart_upload(
        Bucket=BUCKET, Key="big", UploadId=upload, MultipartUpload={"Parts": etags}
    )
    assert again["ETag"] == done["ETag"]
    head = c.head_object(Bucket=BUCKET, Key="big")
    assert head["ETag"] == done["ETag"] and head["ContentLength"] == sum(map(len, parts))


def test_a_node_killed_mid_upload_leaves_the_others_serving(cluster: Cluster) -> None:
    victim, other, third = cluster.nodes
    s3 = other.client()
    s3.put_object(Bucket=BUCKET, Key="before", Body=b"kept")
    # An 8 MiB PUT of which 2 MiB have reached the node when it is killed.
    url = f"{victim.url}/{BUCKET}/cut"
    size = 8 * MIB
    headers = raw.sign("PUT", url, {"Content-Length": str(size)}, payload_hash="UNSIGNED-PAYLOAD")
    conn = http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=30)
    conn.putrequest("PUT", urlsplit(url).path, skip_host=True, skip_accept_encoding=True)
    for name, value in {"Host": urlsplit(url).netloc, **headers}.items():
        conn.putheader(name, value)
    conn.endheaders()
    conn.send(os.urandom(2 * MIB))
    victim.kill()
    conn.close()

    assert s3.get_object(Bucket=BUCKET, Key="before")["Body"].read() == b"kept"
    third.client().put_object(Bucket=BUCKET, Key="after", Body=b"still serving")
    assert s3.get_object(Bucket=BUCKET, Key="after")["Body"].read() == b"still serving"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key="cut")

    # The others were serving: the restarted node does not sweep (a blob they are publishing
    # is not in the catalog yet) ...
    restarted = cluster.start_node()
    assert any("no start-up sweep" in line for line in restarted.log)
    # ... and with every node stopped, what the kill left is a leftover, never damage.
    cluster.stop()
    report = cluster.fsck()
    assert report.damage == [], report.render()


def test_a_node_alone_sweeps_what_a_crash_left(cluster: Cluster) -> None:
    cluster.stop()
    leftover = cluster.data / "tmp" / "left-by-a-crash"
    leftover.write_bytes(b"x")
    node = cluster.start_node()
    assert not leftover.exists()
    assert not any("no start-up sweep" in line for line in node.log)


def _start_put(node: GatewayProcess, key: str, size: int) -> http.client.HTTPConnection:
    """A PUT of `size` bytes whose headers are sent, and none of its body yet."""
    url = f"{node.url}/{BUCKET}/{key}"
    parts = urlsplit(url)
    headers = raw.sign("PUT", url, {"Content-Length": str(size)}, payload_hash="UNSIGNED-PAYLOAD")
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.putrequest("PUT", parts.path, skip_host=True, skip_accept_encoding=True)
    for name, value in {"Host": parts.netloc, **headers}.items():
        conn.putheader(name, value)
    conn.endheaders()
    return conn


def _intents(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT blob_id FROM blob_intents")]


def _wait_for(what: str, ready: Any, serve: Any = None, tries: int = 600) -> None:
    """Poll `ready` (calling `serve` between tries, the other nodes' ordinary work)."""
    for _ in range(tries):
        if ready():
            return
        if serve is not None:
            serve()
        time.sleep(0.05)
    raise AssertionError(f"never saw: {what}")


def test_the_nodes_left_reclaim_a_killed_nodes_upload_while_serving(leased: Cluster) -> None:
    victim, other, third = leased.nodes
    s3, s3b = other.client(), third.client()
    s3.put_object(Bucket=BUCKET, Key="before", Body=b"kept")
    conn = _start_put(victim, "cut", 8 * MIB)
    conn.send(os.urandom(2 * MIB))  # a file from the first MiB on: an intent, a body in tmp/
    _wait_for("the victim's intent", lambda: _intents(leased.url))
    (orphan,) = _intents(leased.url)
    _wait_for("its body in tmp/", lambda: (leased.data / "tmp" / orphan).exists())
    victim.kill()
    conn.close()

    served = []

    def serve() -> None:
        n = len(served)
        body = os.urandom(100_000 + n)  # files, each through its own intent
        s3.put_object(Bucket=BUCKET, Key=f"k{n % 5}", Body=body)
        assert s3b.get_object(Bucket=BUCKET, Key=f"k{n % 5}")["Body"].read() == body
        served.append(n)

    # Once the lease lapses the others take the intent and the body, while they serve.
    _wait_for(
        "the orphan reclaimed",
        lambda: not _intents(leased.url) and not (leased.data / "tmp" / orphan).exists(),
        serve,
    )
    assert served, "the reclaim came before any request: nothing shows it ran while serving"
    assert s3.get_object(Bucket=BUCKET, Key="before")["Body"].read() == b"kept"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key="cut")
    leased.stop()
    report = leased.fsck()
    assert report.damage == [], report.render()
    assert (report.orphan_files, report.tmp_files, report.intents) == ([], [], []), report.render()


def test_a_slow_upload_past_the_lease_keeps_its_blob(leased: Cluster) -> None:
    """A body that takes several leases to arrive, reclaimers running on every node: the
    writer renews its intent as the bytes come, and its object is made whole."""
    writer, reader, _ = leased.nodes
    body = os.urandom(3 * MIB)
    conn = _start_put(writer, "slow", len(body))
    conn.send(body[:MIB])
    for start in range(MIB, len(body), 64 * 1024):  # 32 pieces, 0.15 s apart: 4.8 s
        time.sleep(0.15)
        conn.send(body[start : start + 64 * 1024])
    answer = conn.getresponse()
    assert answer.status == 200, answer.read()
    conn.close()
    got = reader.client().get_object(Bucket=BUCKET, Key="slow")["Body"].read()
    assert got == body
    assert _intents(leased.url) == []
    leased.stop()
    report = leased.fsck()
    assert report.damage == [], report.render()
    assert (report.orphan_files, report.tmp_files, report.intents) == ([], [], []), report.render()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_node_joining_with_the_wrong_catalog_is_refused(cluster, postgres, workers):
    """A node started on the shared folder with another, new database (a URL mistyped, a
    database nobody migrated into) does not sweep, as others serve; it would still run the
    reclaimer, which would call every file an orphan. It refuses to start instead, and the
    cluster's objects keep their files. (A forgotten --catalog, SQLite, finds the folder in
    use: refused already.)"""
    from tests.integration.test_startup import gateway

    s3 = cluster.nodes[0].client()
    body = os.urandom(256 * 1024)
    s3.put_object(Bucket=BUCKET, Key="big", Body=body)
    files = sorted(p for p in (cluster.data / "blobs").rglob("*") if p.is_file())
    assert files
    args = ["serve", "--data", str(cluster.data), "--address", "127.0.0.1:0"]
    refused = gateway(
        *args,
        "--workers",
        str(workers),
        env={"S3GW_CATALOG": postgres.database()},
    )
    # One line says why (after the start's INFO lines: this start got that far).
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    said = [line for line in refused.stderr.splitlines() if " INFO " not in line]
    assert len(said) == 1 and "another catalog" in said[0], refused.stderr
    assert sorted(p for p in (cluster.data / "blobs").rglob("*") if p.is_file()) == files
    for node in cluster.nodes:
        assert node.client().get_object(Bucket=BUCKET, Key="big")["Body"].read() == body
