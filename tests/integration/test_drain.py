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

# The drain: long enough that nothing in the test outlasts it on any machine; the test ends it
# with a second signal (a behaviour of its own, the test after this one).
DRAIN = 600.0


def _ready(url: str) -> int:
    try:
        with urllib.request.urlopen(url + "/health/ready", timeout=10) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _until_draining(server: GatewayProcess) -> None:
    """Waits (bounded) for the readiness probe to answer 503."""
    deadline = time.monotonic() + 30
    while _ready(server.url) != 503:
        assert time.monotonic() < deadline, "/health/ready still 200 after SIGTERM"
        time.sleep(0.05)


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
        server.proc.send_signal(signal.SIGTERM)
        _until_draining(server)
        # Every worker drains: each probe, on a new connection, finds one of them.
        assert [_ready(server.url) for _ in range(8)] == [503] * 8
        # Everything else is served as before, on new connections too.
        assert s3.get_object(Bucket="drain", Key="before")["Body"].read() == b"before"
        s3.put_object(Bucket="drain", Key="during", Body=b"during")
        fresh = server.client()
        assert fresh.get_object(Bucket="drain", Key="during")["Body"].read() == b"during"
        # Still draining: the process waits out its drain rather than exiting at the signal.
        assert server.proc.poll() is None, "".join(server.log)
        assert _ready(server.url) == 503
        log = "".join(server.log)
        assert "draining" in log, log
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0, "".join(server.log)
    finally:
        server.stop()


def test_the_drain_ends_by_itself(tmp_path):
    # A short drain, and no second signal: the process exits 0 at its end (the wait's bound
    # is far beyond the drain's).
    env = {"S3GW_WORKERS": "1", "S3GW_DRAIN_SECONDS": "1"}
    server = GatewayProcess(tmp_path / "data", env).start()
    try:
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0, "".join(server.log)
        assert "draining" in "".join(server.log)
    finally:
        server.stop()


def test_a_second_signal_ends_the_drain(tmp_path):
    # A drain of ten minutes: the wait below would time out if the second signal did not end it.
    env = {"S3GW_WORKERS": "1", "S3GW_DRAIN_SECONDS": str(DRAIN)}
    server = GatewayProcess(tmp_path / "data", env).start()
    try:
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        _until_draining(server)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
    finally:
        server.stop()
