"""Small- and large-object throughput of the gateway (1 and 2 workers) beside a trivial aiohttp
server that reads a body and answers 200: the ceiling a Python HTTP server has on this machine.

The load generator is asyncio + aiohttp's client with one SigV4 signature per request
(botocore's signer, UNSIGNED-PAYLOAD); its own CPU per request is printed, measured against the
trivial server, so that what it costs is known. Peers written in other languages (SeaweedFS,
MinIO) and moto are measured only when installed; a missing peer is said, never faked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .process import ACCESS_KEY, SECRET_KEY, GatewayProcess

KIB = 1024
MIB = 1024 * KIB

TRIVIAL_SERVER = """
import sys
from aiohttp import web

async def handle(request):
    while await request.content.readany():
        pass
    return web.Response(text="")

app = web.Application()
app.router.add_route("*", "/{path:.*}", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=4.0, help="per small-object workload")
    parser.add_argument("--large-mib", type=int, default=256, help="size of the large object")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


class Signer:
    """SigV4 headers (UNSIGNED-PAYLOAD) by botocore's signer; a signature is reused for a
    minute for the same method and URL (well inside the 15-minute skew S3 allows), so the
    load generator spends its CPU on requests, not on HMACs."""

    def __init__(self) -> None:
        from botocore.auth import S3SigV4Auth
        from botocore.credentials import Credentials

        class Unsigned(S3SigV4Auth):
            def payload(self, request: Any) -> str:
                return "UNSIGNED-PAYLOAD"

        self.auth = Unsigned(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1")
        self.cache: dict[tuple[str, str], tuple[float, dict[str, str]]] = {}

    def headers(self, method: str, url: str) -> dict[str, str]:
        from botocore.awsrequest import AWSRequest

        cached = self.cache.get((method, url))
        now = time.monotonic()
        if cached is not None and now - cached[0] < 60:
            return cached[1]
        request = AWSRequest(method=method, url=url, headers={})
        self.auth.add_auth(request)
        headers = dict(request.headers.items())
        self.cache[(method, url)] = (now, headers)
        return headers


async def _small(
    endpoint: str, method: str, concurrency: int, seconds: float, body: bytes
) -> dict[str, Any]:
    import aiohttp

    signer = Signer()
    latencies: list[float] = []
    errors: dict[int, int] = {}
    deadline = time.perf_counter() + seconds
    cpu = time.process_time()
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(n: int) -> None:
            i = 0
            while time.perf_counter() < deadline:
                url = f"{endpoint}/bench/small-{n}-{i % 50}"
                i += 1
                start = time.perf_counter()
                async with session.request(
                    method,
                    url,
                    data=body if method == "PUT" else None,
                    headers=signer.headers(method, url),
                ) as response:
                    await response.read()
                    if response.status != 200:
                        errors[response.status] = errors.get(response.status, 0) + 1
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(worker(n) for n in range(concurrency)))
    cpu = time.process_time() - cpu
    latencies.sort()
    count = len(latencies)
    return {
        "ops_per_s": count / seconds,
        "p50_ms": latencies[count // 2] * 1000 if count else 0.0,
        "p99_ms": latencies[int(count * 0.99)] * 1000 if count else 0.0,
        "errors": errors,
        "client_cpu_us_per_op": cpu / count * 1e6 if count else 0.0,
    }


def _large(endpoint: str, size: int) -> dict[str, Any]:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    signer = Signer()
    block = os.urandom(MIB)
    url = f"{endpoint}/bench/large"
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    start = time.perf_counter()
    conn.putrequest("PUT", "/bench/large", skip_accept_encoding=True)
    for name, value in {**signer.headers("PUT", url), "Content-Length": str(size)}.items():
        if name.lower() != "host":
            conn.putheader(name, value)
    conn.endheaders()
    for _ in range(size // MIB):
        conn.send(block)
    response = conn.getresponse()
    response.read()
    put_s = time.perf_counter() - start
    start = time.perf_counter()
    conn.request("GET", "/bench/large", headers=signer.headers("GET", url))
    response = conn.getresponse()
    received = 0
    while chunk := response.read(4 * MIB):
        received += len(chunk)
    get_s = time.perf_counter() - start
    conn.close()
    return {"put_mib_s": size / MIB / put_s, "get_mib_s": received / MIB / get_s}


def _peak_rss_mib(pid: int) -> float:
    """Peak RSS of a process and its children (the workers)."""
    peak = 0.0
    for candidate in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{candidate}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return peak


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _gateway_run(workers: int, seconds: float, large: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="s3gw-bench-") as tmp:
        env = {"S3GW_LOG_LEVEL": "warning", "S3GW_WORKERS": str(workers)}
        server = GatewayProcess(Path(tmp) / "data", env).start()
        try:
            server.client().create_bucket(Bucket="bench")
            result = _workloads(server.url, seconds)
            result["large"] = _large(server.url, large)
            assert server.proc is not None
            result["peak_rss_mib"] = _peak_rss_mib(server.proc.pid)
        finally:
            server.stop()
    return result


# --- peers ------------------------------------------------------------------------------------

# `make bench` installs the peers into a virtualenv of their own (they are not our dependencies).
PEERS_BIN = Path(__file__).resolve().parents[2] / ".venv-peers" / "bin"


def _peer_program(name: str) -> str | None:
    candidate = PEERS_BIN / name
    return str(candidate) if candidate.exists() else shutil.which(name)


def _free_port(pair: bool = False) -> int:
    """A free port (with `pair`: also free at +10000, where SeaweedFS puts its gRPC port)."""
    import socket

    for _ in range(200):
        port = random.randint(20000, 50000)
        try:
            for p in (port, port + 10000) if pair else (port,):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port")


def _wait_http(url: str, seconds: float = 60) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


def _peer_command(name: str, data: Path) -> tuple[list[str], str] | None:
    if name == "SeaweedFS":
        weed = _peer_program("weed")
        if weed is None:
            return None
        s3 = _free_port()
        master, volume, filer = _free_port(True), _free_port(True), _free_port(True)
        return [
            weed, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-s3", f"-s3.port={s3}", f"-master.port={master}", f"-volume.port={volume}",
            f"-filer.port={filer}", "-master.volumeSizeLimitMB=1024",
        ], f"http://127.0.0.1:{s3}"  # fmt: skip
    moto = _peer_program("moto_server")
    if moto is None:
        return None
    port = _free_port()
    return [moto, "-H", "127.0.0.1", "-p", str(port)], f"http://127.0.0.1:{port}"


def _peer_run(name: str, seconds: float, large: int) -> dict[str, Any] | str:
    """The same workloads against a peer; a missing peer is a line saying so."""
    import boto3

    with tempfile.TemporaryDirectory(prefix="s3gw-bench-peer-") as tmp:
        command = _peer_command(name, Path(tmp))
        if command is None:
            return f"{name}: not installed (make bench installs it into .venv-peers)"
        argv, endpoint = command
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            _wait_http(endpoint + "/")
            client = boto3.client(
                "s3", endpoint_url=endpoint, region_name="us-east-1",
                aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            )  # fmt: skip
            for _ in range(50):  # SeaweedFS takes a moment to have a volume
                try:
                    client.create_bucket(Bucket="bench")
                    break
                except Exception:
                    time.sleep(0.2)
            result = _workloads(endpoint, seconds)
            result["large"] = _large(endpoint, large)
            result["peak_rss_mib"] = _peak_rss_mib(proc.pid)
            return result
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _workloads(endpoint: str, seconds: float) -> dict[str, Any]:
    body = os.urandom(4 * KIB)
    out: dict[str, Any] = {}
    for concurrency in (16, 64):
        out[f"put_c{concurrency}"] = asyncio.run(
            _small(endpoint, "PUT", concurrency, seconds, body)
        )
        out[f"get_c{concurrency}"] = asyncio.run(
            _small(endpoint, "GET", concurrency, seconds, body)
        )
    return out


def _trivial_run(seconds: float) -> dict[str, Any]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", TRIVIAL_SERVER, str(port)])
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        body = os.urandom(4 * KIB)
        return {
            "put_c64": asyncio.run(_small(endpoint, "PUT", 64, seconds, body)),
        }
    finally:
        proc.terminate()
        proc.wait()


SERVERS = ("gateway_1_worker", "gateway_2_workers", "SeaweedFS", "moto")


def render(result: dict[str, Any]) -> str:
    lines = ["4 KiB requests (ops/s, p50/p99 ms; client CPU per request)"]
    for name in SERVERS:
        r = result[name]
        if isinstance(r, str):  # a peer that is not installed
            lines.append(f"  {r}")
            continue
        lines.append(f"  {name}:")
        for workload in ("put_c16", "get_c16", "put_c64", "get_c64"):
            w = r[workload]
            lines.append(
                f"    {workload:<8} {w['ops_per_s']:>8.0f} ops/s  p50 {w['p50_ms']:6.2f}  "
                f"p99 {w['p99_ms']:7.2f}  errors {w['errors']}  "
                f"client {w['client_cpu_us_per_op']:.0f} us/op"
            )
        lines.append(
            f"    large: PUT {r['large']['put_mib_s']:.0f} MiB/s, GET "
            f"{r['large']['get_mib_s']:.0f} MiB/s; peak RSS {r['peak_rss_mib']:.0f} MiB"
        )
    trivial = result["trivial_aiohttp"]["put_c64"]
    one, two = result["gateway_1_worker"], result["gateway_2_workers"]
    lines += [
        f"  trivial aiohttp (read body, 200): put_c64 {trivial['ops_per_s']:.0f} ops/s, "
        f"client {trivial['client_cpu_us_per_op']:.0f} us/op",
        "ratios measured in this run:",
        f"  PUT c64, 2 workers / 1 worker: "
        f"{two['put_c64']['ops_per_s'] / one['put_c64']['ops_per_s']:.2f}",
        f"  PUT c64, gateway (2 workers) / trivial aiohttp: "
        f"{two['put_c64']['ops_per_s'] / trivial['ops_per_s']:.2f}",
    ]
    for peer in ("SeaweedFS", "moto"):
        other = result[peer]
        if isinstance(other, str):
            continue
        for workload in ("put_c64", "get_c64"):
            ratio = two[workload]["ops_per_s"] / other[workload]["ops_per_s"]
            lines.append(f"  {workload}, gateway (2 workers) / {peer}: {ratio:.2f}")
        for kind in ("put_mib_s", "get_mib_s"):
            ratio = two["large"][kind] / other["large"][kind]
            lines.append(f"  large {kind[:3].upper()}, gateway / {peer}: {ratio:.2f}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    large = args.large_mib * MIB
    result = {
        "gateway_1_worker": _gateway_run(1, args.seconds, large),
        "gateway_2_workers": _gateway_run(2, args.seconds, large),
        "trivial_aiohttp": _trivial_run(args.seconds),
    }
    for peer in ("SeaweedFS", "moto"):
        result[peer] = _peer_run(peer, args.seconds, large)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0
