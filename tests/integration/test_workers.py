"""Several worker processes on one port: they share the folder, and live and die together."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.process import children
from tests.server import GatewayProcess


@pytest.fixture
def two_workers(tmp_path, catalog):
    server = GatewayProcess(tmp_path / "data", {"S3GW_WORKERS": "2"}, catalog=catalog).start()
    yield server
    server.stop()


def test_workers_share_the_store(two_workers):
    assert two_workers.proc is not None
    assert len(children(two_workers.proc.pid)) == 2
    s3 = two_workers.client()
    s3.create_bucket(Bucket="shared")

    def write(i: int) -> None:
        client = two_workers.client()  # a connection of its own: lands on either worker
        client.put_object(Bucket="shared", Key=f"k{i}", Body=f"body {i}".encode())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(64)))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="shared")["Contents"]]
    assert sorted(keys) == sorted(f"k{i}" for i in range(64))
    for i in (0, 31, 63):
        assert s3.get_object(Bucket="shared", Key=f"k{i}")["Body"].read() == f"body {i}".encode()


def test_a_dead_worker_is_replaced(two_workers):
    assert two_workers.proc is not None
    before = children(two_workers.proc.pid)
    victim = next(iter(before))
    # The parent logs the death it sees, at ERROR: provoked here.
    two_workers.allow(rf"worker {victim} exited with -9; starting another")
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = children(two_workers.proc.pid)
        if len(now) == 2 and now != before:
            break
        time.sleep(0.1)
    assert len(now) == 2 and now != before
    s3 = two_workers.client()
    s3.create_bucket(Bucket="still-serving")
    assert "still-serving" in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_workers_die_with_their_parent(tmp_path, catalog):
    server = GatewayProcess(tmp_path / "data", {"S3GW_WORKERS": "2"}, catalog=catalog).start()
    assert server.proc is not None
    workers = children(server.proc.pid)
    server.client().create_bucket(Bucket="survives")
    server.kill()  # SIGKILL the parent: the workers must not keep the port and the folder
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.05)
    assert not any(Path(f"/proc/{w}").exists() for w in workers)
    server.start()
    try:
        assert [b["Name"] for b in server.client().list_buckets()["Buckets"]] == ["survives"]
    finally:
        server.stop()
