"""The drain before a graceful stop (--drain-seconds): on SIGTERM, every worker answers its
readiness probe 503 while it goes on serving S3 on the same port, so that a load balancer
(deploy/haproxy) takes it out of rotation before the port closes; then the usual graceful stop,
and the process exits."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request

import pytest

from tests.server import GatewayProcess

DRAIN = 3.0


def _ready(url: str) -> int:
    try:
        with urllib.request.urlopen(url + "/health/ready", timeout=10) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_drains_readiness_first_while_s3_is_still_served(tmp_path, workers, catalog):
    env = {"S3GW_WORKERS": str(workers), "S3GW_DRAIN_SECONDS": str(DRAIN)}
    server = GatewayProcess(tmp_path / "data", env, catalog=catalog).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="drain")
        s3.put_object(Bucket="drain", Key="before", Body=b"before")
        assert _ready(server.url) == 200

        assert server.proc is not None
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        while _ready(server.url) != 503:
            assert time.monotonic() - signalled < 2, "/health/ready still 200 after SIGTERM"
            time.sleep(0.05)
        # Every worker drains: each probe, on a new connection, finds one of them.
        assert [_ready(server.url) for _ in range(8)] == [503] * 8
        # Everything else is served as before, on new connections too.
        assert s3.get_object(Bucket="drain", Key="before")["Body"].read() == b"before"
        s3.put_object(Bucket="drain", Key="during", Body=b"during")
        fresh = server.client()
        assert fresh.get_object(Bucket="drain", Key="during")["Body"].read() == b"during"
        assert time.monotonic() - signalled < DRAIN, "the drain ended before the requests"

        assert server.proc.wait(timeout=DRAIN + 30) == 0, "".join(server.log)
        took = time.monotonic() - signalled
        assert took >= DRAIN - 0.2, f"exited {took:.1f} s after SIGTERM, within the drain"
        log = "".join(server.log)
        assert "draining" in log, log
    finally:
        server.stop()


def test_a_second_signal_ends_the_drain(tmp_path):
    env = {"S3GW_WORKERS": "1", "S3GW_DRAIN_SECONDS": "60"}
    server = GatewayProcess(tmp_path / "data", env).start()
    try:
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while _ready(server.url) != 503:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        hurried = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == 0
        assert time.monotonic() - hurried < 10
    finally:
        server.stop()
