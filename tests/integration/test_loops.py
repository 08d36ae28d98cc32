"""The gateway on either event loop: uvloop (the default) and asyncio (`--loop asyncio`). GETs
of file blobs go by sendfile on both: asyncio's `loop.sendfile`, and on uvloop, which has none,
`os.sendfile` on the connection's socket (gateway/s3/sendfile.py)."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from tests import raw
from tests.server import GatewayProcess


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_objects_on_each_event_loop(tmp_path, loop, catalog):
    # On each catalog too: the PostgreSQL driver's sockets are the event loop's.
    env = {"S3GW_LOOP": loop, "S3GW_WORKERS": "1"}
    server = GatewayProcess(tmp_path / "data", env, catalog=catalog).start()
    try:
        assert f"event loop: {loop}\n" in server.log
        s3 = server.client()
        s3.create_bucket(Bucket="loops")
        small, large = os.urandom(4096), os.urandom(3 * 1024 * 1024 + 17)  # inline, a file
        for key, body in (("small", small), ("large", large)):
            put = s3.put_object(Bucket="loops", Key=key, Body=body)
            assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
            assert s3.get_object(Bucket="loops", Key=key)["Body"].read() == body
            part = s3.get_object(Bucket="loops", Key=key, Range="bytes=100-4000")
            assert part["Body"].read() == body[100:4001]
    finally:
        server.stop()


def _loop_factory(setting: str, block_uvloop: bool) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        + ("sys.modules['uvloop'] = None\n" if block_uvloop else "")
        + "from gateway.server import _loop_factory\n"
        + f"f = _loop_factory({setting!r})\n"
        + "print('asyncio' if f is None else f.__module__)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_loop_setting():
    assert _loop_factory("uvloop", False).stdout.strip() == "uvloop"
    assert _loop_factory("asyncio", False).stdout.strip() == "asyncio"
    assert _loop_factory("asyncio", True).stdout.strip() == "asyncio"  # runs without uvloop
    # Without uvloop installed, asking for it fails and says why.
    missing = _loop_factory("uvloop", True)
    assert missing.returncode != 0 and "uvloop is not installed" in missing.stderr
    bad = _loop_factory("tokio", False)
    assert bad.returncode != 0 and "--loop must be asyncio or uvloop" in bad.stderr


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_client_leaving_mid_download_is_not_an_error(tmp_path, loop):
    """A download cut by the client (sendfile on either loop) drops that connection only: no
    error, no traceback in the log, and the server goes on."""
    server = GatewayProcess(tmp_path / "data", {"S3GW_LOOP": loop, "S3GW_WORKERS": "1"}).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="cut")
        body = os.urandom(64 * 1024 * 1024)
        s3.put_object(Bucket="cut", Key="big", Body=body)
        url = f"{server.url}/cut/big"
        port = int(server.url.rsplit(":", 1)[1])
        head = "".join(f"{k}: {v}\r\n" for k, v in raw.sign("GET", url).items())
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(f"GET /cut/big HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}\r\n".encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        # Leave with a reset, mid-body.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("went away" in x for x in server.log):
            time.sleep(0.1)
        log = "".join(server.log)
        assert "the client went away mid-response" in log
        assert "Traceback" not in log and "ERROR" not in log, log
        assert s3.get_object(Bucket="cut", Key="big")["Body"].read() == body
    finally:
        server.stop()
