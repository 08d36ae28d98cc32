"""The benchmarks' load generator against the real server, and `s3gw bench s3` end to end."""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from gateway.bench import loadgen, s3


def test_load_generator_puts_then_gets(gateway, bucket, s3):
    signer = loadgen.Signer(gateway.url)
    body = os.urandom(4096)
    put = loadgen.run(gateway.url, loadgen.put_requests(signer, bucket, 4, 8, body), 1.0)
    assert put.errors == {}
    assert put.ops > 0 and put.client_cpu_s > 0
    # Each connection goes round its 8 keys in order, as far as the second allows (a slow
    # catalog on a loaded machine may not get round them all).
    allowed = {loadgen.small_key(c, n) for c in range(4) for n in range(8)}
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    keys = {o["Key"] for o in listed}
    assert keys <= allowed
    for c in range(4):  # every connection wrote its keys from the first, in turn
        written = sum(loadgen.small_key(c, n) in keys for n in range(8))
        assert written > 0 and keys >= {loadgen.small_key(c, n) for n in range(written)}
    assert len(keys) > 4  # and went on past the first
    assert {o["Size"] for o in listed} == {4096}
    assert s3.get_object(Bucket=bucket, Key=max(keys))["Body"].read() == body

    get = loadgen.run(gateway.url, loadgen.get_requests(signer, bucket, sorted(keys), 4), 1.0, 4096)
    assert get.errors == {}
    assert get.ops > 0 and get.percentile_ms(0.5) <= get.percentile_ms(0.99)


def test_load_generator_counts_errors_not_operations(gateway, bucket):
    signer = loadgen.Signer(gateway.url)
    missing = loadgen.get_requests(signer, bucket, ["nothing-here"], 2)
    result = loadgen.run(gateway.url, missing, 0.2, 4096)
    assert result.ops == 0
    assert set(result.errors) == {"404"} and result.errors["404"] > 0


class _Framings(socketserver.StreamRequestHandler):
    """Answers 4 KiB in turn chunked, then with Connection: close (and closes): framings the
    gateway does not use, which the load generator must still read."""

    answered = 0

    def handle(self) -> None:
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self.rfile.readline()
                if not line:
                    return
                head += line
            _Framings.answered += 1
            if _Framings.answered % 2:  # in two writes: the client sees a partial body
                chunk = b"800\r\n" + b"x" * 2048 + b"\r\n"
                self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk)
                time.sleep(0.002)
                self.wfile.write(chunk + b"0\r\n\r\n")
            else:
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\nConnection: close\r\n\r\n"
                    + b"x" * 4096
                )
                return


@pytest.fixture
def framings() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Framings)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_load_generator_reads_chunked_bodies_and_reconnects(framings):
    request = b"GET /b/k HTTP/1.1\r\nHost: test\r\n\r\n"
    result = loadgen.run(framings, [[request], [request]], 0.3, 4096)
    assert result.errors == {}
    assert result.ops > 2 and result.reconnects > 0


def test_bench_s3_json_end_to_end():
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "bench", "s3", "--servers", "gateway_1_worker",
         "--seconds", "0.3", "--repeats", "1", "--large-mib", "8", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result) >= {"config", "servers", "ceilings", "load_generator", "ratios", "errors"}
    assert result["errors"] == []
    assert set(result["servers"]) == {"gateway_1_worker", "trivial"}
    workloads = result["servers"]["gateway_1_worker"]["workloads"]
    assert set(workloads) == set(s3.WORKLOADS)
    assert workloads["put_c64"]["ops_per_s"] > 0 and workloads["large_get"]["mib_s"] > 0
    assert result["load_generator"]["put_c64_client_cpu_us_per_op"] > 0
    assert "[1/" in out.stderr  # the progress display


def test_bench_copy_json_end_to_end():
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "bench", "copy", "--sizes", "1,2", "--repeats", "1",
         "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [r["size_mib"] for r in result["rows"]] == [1, 2]
    assert all(r["copy_object_ms"] > 0 and r["upload_part_copy_ms"] > 0 for r in result["rows"])
    # The copy from an old version: timed at both ends of the sizes (the bench fails if a copy
    # did not come from the old version), its ratio to the 1 MiB CopyObject reported.
    assert set(result["old_version_copy_ms"]) == {"1", "2"}
    assert all(ms > 0 for ms in result["old_version_copy_ms"].values())
    smallest = result["rows"][0]["copy_object_ms"]
    assert result["ratio_old_version_copy"] == result["old_version_copy_ms"]["2"] / smallest
    assert result["ratio_old_version_copy_same_kind"] > 0
