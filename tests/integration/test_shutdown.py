"""A graceful stop (docker stop's SIGTERM): no new connections, and the transfers in flight,
an upload whose body is still arriving and a download, finish before the gateway exits."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.raw import sign
from tests.server import GatewayProcess

UPLOAD = 4 * 2**20
DOWNLOAD = 48 * 2**20


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=60)


def _head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The status line and headers of a response, and what came after them."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {got!r}"
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    return head, rest


def _request(method: str, url: str, headers: dict[str, str]) -> bytes:
    target = urlsplit(url).path
    lines = [f"{method} {target} HTTP/1.1", f"Host: {urlsplit(url).netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items() if name.lower() != "host"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _refused(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_lets_an_upload_and_a_download_in_flight_finish(tmp_path, workers, catalog):
    env = {"S3GW_WORKERS": str(workers)}
    server = GatewayProcess(tmp_path / "data", env, catalog=catalog).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="stop")
        large = os.urandom(DOWNLOAD)
        s3.put_object(Bucket="stop", Key="large", Body=large)

        # An upload whose handler is running (it invited the body) and has half of it.
        body = os.urandom(UPLOAD)
        url = f"{server.url}/stop/uploaded"
        headers = sign("PUT", url, {"Expect": "100-continue", "Content-Length": str(UPLOAD)}, body)
        upload = _connect(server.url)
        upload.sendall(_request("PUT", url, headers))
        head, _ = _head(upload)
        assert head.startswith(b"HTTP/1.1 100"), head
        upload.sendall(body[: UPLOAD // 2])

        # A download that has started: the rest waits in the gateway for us to read it.
        url = f"{server.url}/stop/large"
        download = _connect(server.url)
        download.sendall(_request("GET", url, sign("GET", url)))
        head, received = _head(download)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert f"content-length: {DOWNLOAD}".encode() in head.lower(), head

        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while not _refused(server.url):  # every process has stopped accepting
            assert time.monotonic() < deadline, "the port still accepts connections"
            time.sleep(0.05)

        upload.sendall(body[UPLOAD // 2 :])
        head, _ = _head(upload)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"connection: close" in head.lower()
        digest, size = hashlib.md5(received), len(received)
        while size < DOWNLOAD:
            chunk = download.recv(1 << 20)
            assert chunk, f"the download was cut at {size} of {DOWNLOAD} bytes"
            digest.update(chunk)
            size += len(chunk)
        upload.close()
        download.close()
        assert server.proc.wait(timeout=30) == 0
        assert digest.hexdigest() == hashlib.md5(large).hexdigest()
        log = "".join(server.log)
        assert "shutting down" in log and "shut down in" in log, log
    finally:
        server.stop()

    server = GatewayProcess(tmp_path / "data", env, catalog=catalog).start()
    try:
        got = server.client().get_object(Bucket="stop", Key="uploaded")["Body"].read()
        assert got == body
    finally:
        server.stop()
