"""--min-body-rate: a body that trickles is dropped with RequestTimeout; a slow one is not.

A byte every 15 s against a 5 GiB Content-Length never tripped --body-timeout (no read waits
20 s) and held an upload slot for hours; 256 of them turned every upload into 503 SlowDown.
The servers here run with a window (--body-timeout) of 1 s so that the answer comes quickly.
"""

from __future__ import annotations

import hashlib
import os
import select
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests import raw
from tests.datadir import inspect
from tests.server import GatewayProcess

FIVE_GIB = 5 * 2**30
PATIENCE_S = 60  # generous: the answer is expected within seconds


def _open_put(url: str, length: int) -> socket.socket:
    """A signed UNSIGNED-PAYLOAD PUT of `length` bytes, headers sent, body not yet."""
    parts = urlsplit(url)
    headers = raw.sign("PUT", url, payload_hash="UNSIGNED-PAYLOAD")
    head = [f"PUT {parts.path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {length}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    sock = socket.create_connection((parts.hostname, parts.port), timeout=PATIENCE_S)
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    return sock


def _send_paced(sock: socket.socket, pieces: list[bytes], pause: float) -> tuple[bool, bytes]:
    """Send `pieces` with `pause` between them, stopping early if the server answers; then
    whether it answered before every piece was sent, and the answer (its first bytes)."""
    early = False
    for piece in pieces:
        readable, _, _ = select.select([sock], [], [], pause)
        if readable:
            early = True
            break
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            early = True
            break
    sock.settimeout(PATIENCE_S)
    try:
        return early, sock.recv(65536)
    except ConnectionResetError:
        return early, b""


def _start(tmp_path: Path, catalog: str | None) -> GatewayProcess:
    return GatewayProcess(
        tmp_path / "data",
        {"S3GW_WORKERS": "1"},
        "--body-timeout",
        "1",
        "--min-body-rate",
        "1000",
        catalog=catalog,
    ).start()


def test_a_trickling_body_gets_request_timeout_and_leaves_nothing(
    tmp_path: Path, catalog: str | None
) -> None:
    server = _start(tmp_path, catalog)
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="trickle")
        sock = _open_put(f"{server.url}/trickle/k", FIVE_GIB)
        # A first burst larger than --inline-max (the body goes to a tmp file), then a byte
        # at a time, each well inside --body-timeout: only the rate can stop it.
        pieces = [os.urandom(200 * 1024)] + [b"x"] * int(PATIENCE_S / 0.25)
        early, answer = _send_paced(sock, pieces, 0.25)
        sock.close()
        assert early, "no answer while the body was still trickling"
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"<Code>RequestTimeout</Code>" in answer
        assert (
            b"<Message>Your socket connection to the server was not read from or written to "
            b"within the timeout period.</Message>" in answer
        )
        deadline = time.monotonic() + PATIENCE_S
        while inspect(server.data, catalog).tmp_files and time.monotonic() < deadline:
            time.sleep(0.1)
        inspect(server.data, catalog).assert_clean()
        assert s3.list_objects_v2(Bucket="trickle")["KeyCount"] == 0
        # The slot is free again: an upload goes through.
        s3.put_object(Bucket="trickle", Key="after", Body=b"fine")
    finally:
        server.stop()


def test_a_slow_body_above_the_rate_is_stored(tmp_path: Path, catalog: str | None) -> None:
    server = _start(tmp_path, catalog)
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="slow")
        body = os.urandom(320 * 1024)
        pieces = [body[i : i + 8192] for i in range(0, len(body), 8192)]
        sock = _open_put(f"{server.url}/slow/k", len(body))
        # 8 KiB every 0.1 s: about 80 KB/s, over several 1 s windows.
        early, answer = _send_paced(sock, pieces, 0.1)
        sock.close()
        assert not early, answer[:300]
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
        stored = s3.get_object(Bucket="slow", Key="k")["Body"].read()
        assert hashlib.md5(stored).digest() == hashlib.md5(body).digest()
    finally:
        server.stop()
