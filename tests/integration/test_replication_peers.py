"""Bucket replication (docs/replication.md) with peers the rest of the suite does not have: moto's
server as a foreign S3 destination (bytes, metadata, tags, a multipart object's `-N` ETag), and
two source nodes on one PostgreSQL catalog and data folder writing at once to a second gateway
(every version COMPLETED, every key's latest bytes there, copies beyond one per version
counted: at least once, with few duplicates)."""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.workers.notifications import ACK_EVERY, KEYS_AT_ONCE
from tests.integration.test_replication import _multipart, _replicate, _rule, _versioned
from tests.postgres import PostgresServer
from tests.reliability.harness import CrashableGateway
from tests.server import GatewayProcess

WAIT = 60.0  # seconds a test waits for its copies
MOTO_KEY, MOTO_SECRET = "moto-access-key", "moto-secret-key"  # moto takes any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _remotes(path: Path, endpoint: str, key: str, secret: str, *buckets: str) -> Path:
    path.write_text(
        "".join(
            f"""
[[remote]]
bucket_arn = "arn:aws:s3:::{name}"
endpoint = "{endpoint}"
region = "us-east-1"
access_key = "{key}"
secret_key = "{secret}"
"""
            for name in buckets
        )
    )
    return path


class MotoServer:
    """`moto_server` (moto[server], the test extra) on a free port of 127.0.0.1."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> MotoServer:
        beside = Path(sys.executable).parent / "moto_server"
        program = [str(beside)] if beside.exists() else [shutil.which("moto_server") or ""]
        if not program[0]:
            program = [sys.executable, "-m", "moto.server"]
        log = open(self.folder / "moto.log", "wb")  # noqa: SIM115 (the child writes it)
        self.proc = subprocess.Popen(
            [*program, "-H", "127.0.0.1", "-p", str(self.port)], stdout=log, stderr=log
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                self.client().list_buckets()
                return self
            except Exception:  # not listening yet: any of botocore's errors
                time.sleep(0.2)
        self.close()
        tail = (self.folder / "moto.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"moto_server did not start: {tail}")

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=MOTO_KEY,
            aws_secret_access_key=MOTO_SECRET,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
        )

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto")).start()
    yield server
    server.close()


def _until_completed(s3: Any, bucket: str, versions: dict[str, str]) -> dict[str, str | None]:
    """Waits until every (version id → key) says COMPLETED; the statuses last seen."""
    deadline = time.monotonic() + WAIT
    seen: dict[str, str | None] = {}
    waiting = dict(versions)
    while waiting and time.monotonic() < deadline:
        for version_id, key in list(waiting.items()):
            status = s3.head_object(Bucket=bucket, Key=key, VersionId=version_id).get(
                "ReplicationStatus"
            )
            seen[version_id] = status
            if status == "COMPLETED":
                del waiting[version_id]
        if waiting:
            time.sleep(0.2)
    return seen


def _history(s3: Any, bucket: str) -> dict[str, list[str]]:
    """Each key's versions' ETags, oldest first; no delete marker among them."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        assert not page.get("DeleteMarkers")
        for v in page.get("Versions", []):  # newest first, per key
            found[v["Key"]].insert(0, v["ETag"])
    return found


def _aws_multipart_etag(parts: list[bytes]) -> str:
    """What AWS answers for an upload of these parts: the MD5 of the parts' MD5s, `-N`."""
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def test_moto_gets_bytes_metadata_tags_and_the_multipart_etag(
    moto: MotoServer, tmp_path: Path
) -> None:
    far = moto.client()
    far.create_bucket(Bucket="offsite-moto")
    remotes = _remotes(
        tmp_path / "remotes.toml", moto.endpoint, MOTO_KEY, MOTO_SECRET, "offsite-moto"
    )
    gateway = GatewayProcess(tmp_path / "data", {"S3GW_REPLICATION_REMOTES": str(remotes)}).start()
    try:
        s3 = gateway.client()
        _versioned(s3, "src-moto")
        _replicate(s3, "src-moto", _rule("all", "offsite-moto"))
        put = s3.put_object(
            Bucket="src-moto",
            Key="dir/a b.txt",
            Body=b"hello moto",
            Metadata={"colour": "red", "k": "v"},
            ContentType="text/plain",
            Tagging="team=blue&x=1",
        )
        parts = [b"p" * 5 * 1024**2, b"q" * 5 * 1024**2, b"r" * 1000]
        done = _multipart(s3, "src-moto", "big", parts)
        assert done["ETag"] == _aws_multipart_etag(parts)
        seen = _until_completed(
            s3, "src-moto", {put["VersionId"]: "dir/a b.txt", done["VersionId"]: "big"}
        )
        assert set(seen.values()) == {"COMPLETED"}, seen

        copy = far.get_object(Bucket="offsite-moto", Key="dir/a b.txt")
        assert copy["Body"].read() == b"hello moto"
        assert copy["ETag"] == put["ETag"]
        assert copy["Metadata"] == {"colour": "red", "k": "v"}
        assert copy["ContentType"] == "text/plain"
        tags = far.get_object_tagging(Bucket="offsite-moto", Key="dir/a b.txt")["TagSet"]
        assert sorted((t["Key"], t["Value"]) for t in tags) == [("team", "blue"), ("x", "1")]

        big = far.get_object(Bucket="offsite-moto", Key="big")
        assert big["Body"].read() == b"".join(parts)
        assert big["Metadata"] == {"kind": "parts"}
        # The same part sizes there, so the same `-N` ETag: AWS's, on both sides.
        assert big["ETag"] == done["ETag"] == _aws_multipart_etag(parts)
        for number, part in enumerate(parts, 1):
            head = far.head_object(Bucket="offsite-moto", Key="big", PartNumber=number)
            assert head["ContentLength"] == len(part)
    finally:
        gateway.stop()


def _write_on_both(nodes: list[Any], bucket: str, keys: int, size: int = 0) -> dict[str, str]:
    """Each node PUTs `keys` keys at once with the other (a thread each), the second half of
    the first node's keys being the first half of the second's: written by both. Every body
    is its own. The version ids the PUTs answered, each with its key."""
    half = keys // 2

    def write(node: int) -> dict[str, str]:
        client = nodes[node].client()
        written = {}
        for n in range(node * half, node * half + keys):
            key = f"k{n:03d}"
            body = f"{key} from node {node}".encode().ljust(size, b".")
            answer = client.put_object(Bucket=bucket, Key=key, Body=body)
            written[answer["VersionId"]] = key
        return written

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = pool.map(write, range(2))
    versions = {**first, **second}
    assert len(versions) == 2 * keys  # every PUT its own version
    return versions


def _in_order_runs(copied: list[str], source: list[str]) -> bool:
    """`copied` is `source` delivered in order, with replays: every next copy is the version
    after the one before it, or a replay from an earlier one; every version arrives; the
    last copy is the latest."""
    at = [source.index(e) for e in copied if e in source]
    if len(at) != len(copied) or set(at) != set(range(len(source))):
        return False
    reached = -1  # the furthest version delivered so far
    for before, now in zip([-1, *at], at, strict=False):
        if now != before + 1 and now > reached:
            return False  # skipped ahead of every delivery: out of order
        reached = max(reached, now)
    return at[-1] == len(source) - 1


def _check_copies(s3: Any, far: Any, bucket: str, versions: dict[str, str]) -> int:
    """Every version written says COMPLETED, the destination's bucket of the same name with
    far- before it has every key's latest bytes and each key's versions in the source's order;
    the copies it got beyond one per version (how many it holds: it is versioned)."""
    seen = _until_completed(s3, bucket, versions)
    assert set(seen.values()) == {"COMPLETED"}, collections.Counter(seen.values())
    keys = sorted(set(versions.values()))
    for key in keys:
        latest = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert far.get_object(Bucket=f"far-{bucket}", Key=key)["Body"].read() == latest, key
    source, copied = _history(s3, bucket), _history(far, f"far-{bucket}")
    assert sorted(copied) == keys
    # In order per key, at least once: the destination's versions are runs of the source's
    # in the source's order, each run going on from where a delivery started (a replay after
    # the holder's death starts again at a version not yet acknowledged, never later than the
    # next one due), and the last run ends with the latest.
    for key in keys:
        assert _in_order_runs(copied[key], source[key]), (key, copied[key], source[key])
    written = collections.Counter(versions.values())
    extra = {k: len(copied[k]) - written[k] for k in keys if len(copied[k]) != written[k]}
    duplicates = sum(extra.values())
    print(
        f"{bucket}: versions written {len(versions)}, copies received "
        f"{sum(len(e) for e in copied.values())}, duplicates {duplicates} {extra}"
    )
    assert all(n > 0 for n in extra.values()), extra  # none missing
    return duplicates


def _pair(
    tmp_path: Path, remote: GatewayProcess, bucket: str, catalog: str, **env: str
) -> list[CrashableGateway]:
    """Two nodes on one PostgreSQL catalog and data folder, each in a session of its own (a
    crash kills its workers too), with the remote bucket far-BUCKET; BUCKET made on them,
    versioned, replicating every version there."""
    remotes = _remotes(
        tmp_path / "remotes.toml",
        remote.url,
        remote.env["S3GW_ACCESS_KEY"],
        remote.env["S3GW_SECRET_KEY"],
        f"far-{bucket}",
    )
    _versioned(remote.client(), f"far-{bucket}")
    common = {"S3GW_CATALOG": catalog, "S3GW_REPLICATION_REMOTES": str(remotes), **env}
    nodes = []
    for workers in (2, 1):
        node = CrashableGateway(tmp_path / "data", {**common, "S3GW_WORKERS": str(workers)})
        nodes.append(node)
        node.start()
    s3 = nodes[0].client()
    _versioned(s3, bucket)
    _replicate(s3, bucket, _rule("all", f"far-{bucket}"))
    return nodes


def _remote(tmp_path: Path) -> GatewayProcess:
    """The destination: a second gateway, on a port it keeps across a restart."""
    address = f"127.0.0.1:{_free_port()}"
    return GatewayProcess(tmp_path / "remote" / "data", {}, "--address", address).start()


def test_two_source_nodes_on_postgresql_copy_every_version(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """Two nodes (two processes) on one PostgreSQL catalog and data folder, PUTs on both at
    once, some keys written by both: every version says COMPLETED, the destination (a second
    gateway, a remote) has every key's latest bytes, and the copies beyond one per version
    (the destination is versioned: one version per copy it got) are few."""
    remote = _remote(tmp_path)
    nodes: list[CrashableGateway] = []
    try:
        nodes = _pair(tmp_path, remote, "peers", postgres.database())
        versions = _write_on_both(nodes, "peers", 50)
        assert len(set(versions.values())) == 75
        duplicates = _check_copies(nodes[1].client(), remote.client(), "peers", versions)
        assert duplicates <= len(versions) // 10, duplicates  # at least once, rarely more
    finally:
        for node in nodes:
            node.stop()
        remote.stop()


def _holder(catalog: str, nodes: list[CrashableGateway]) -> CrashableGateway | None:
    """The node whose process holds the most of the notifications worker's partitions (a
    lease's holder names the process: host:pid:token); a node's processes are its
    session's."""
    import psycopg

    with psycopg.connect(catalog, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT holder, count(*) FROM leases WHERE name LIKE 'notifications/p/%' "
            "GROUP BY holder ORDER BY count(*) DESC"
        ).fetchall()
    if not rows:
        return None
    pid = int(rows[0][0].split(":")[1])
    try:
        group = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None
    return next((n for n in nodes if n.proc is not None and n.proc.pid == group), None)


def test_the_holder_killed_mid_backlog_loses_nothing(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """The same two nodes, a backlog made while the destination is down; it comes back, and
    the node delivering most (the holder of most partitions) is SIGKILLed once copies arrive:
    the other node takes its partitions over when their leases lapse, and copies the rest.
    Nothing is lost; copies made twice (sent by the dead holder, not yet marked done) are
    counted, and few."""
    remote = _remote(tmp_path)
    catalog = postgres.database()
    nodes: list[CrashableGateway] = []
    try:
        nodes = _pair(tmp_path, remote, "handover", catalog)
        for node in nodes:
            node.allow(r"replication: arn:aws:s3:::far-handover")  # the remote down: a warning
        remote.stop()
        try:
            versions = _write_on_both(nodes, "handover", 100, size=512 * 1024)
        finally:
            remote.start()
        far = remote.client()
        deadline = time.monotonic() + WAIT
        holder = None
        while time.monotonic() < deadline:
            if far.list_objects_v2(Bucket="far-handover", MaxKeys=1)["KeyCount"]:
                holder = _holder(catalog, nodes)
                break
            time.sleep(0.02)
        assert holder is not None, "no copy arrived, or no node holds the lease"
        holder.crash()
        survivor = next(n for n in nodes if n is not holder)
        print(f"holder {nodes.index(holder)} killed")
        duplicates = _check_copies(survivor.client(), far, "handover", versions)
        # At least once: what the dead holder had delivered and not yet removed from the
        # outbox is copied again, at most the keys it had in flight (KEYS_AT_ONCE), the rows
        # delivered since its last acknowledgement (fewer than ACK_EVERY) and a batch being
        # acknowledged (ACK_EVERY).
        assert duplicates <= KEYS_AT_ONCE + 2 * ACK_EVERY, duplicates
    finally:
        for node in nodes:
            node.stop()
        remote.stop()
