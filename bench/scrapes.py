"""PUT latency while unsigned GET /metrics floods the gateway, in a catalog of 1,000,000 objects.

/metrics needs no signature, so anyone who reaches the port can send it as fast as they like.
When a scrape counted the objects stored by scanning the catalog (about 80 ms at a million
objects, in the I/O threads), such a flood took a 200 kB PUT from ~15 ms to seconds. The
objects are put straight in the catalog (as `python -m bench list` does); the gateway then runs
with its default workers. PUTs of `--put-kib` are timed one at a time from a lean client,
first with the gateway otherwise idle, then while a separate process keeps `--flood`
connections sending GET /metrics back to back (loadgen's closed loop), then idle again. The
figure is the ratio of the median PUT with the flood to the median without it; the number of
catalog scans during the flood (s3gw_stored_scans_total) shows that scrapes no longer cause any.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import loadgen
from bench.listing import fill_for_gateway
from tests.process import GatewayProcess

KIB = 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--objects", type=int, default=1_000_000, help="objects in the catalog")
    parser.add_argument("--put-kib", type=int, default=200, help="size of each timed PUT")
    parser.add_argument("--puts", type=int, default=30, help="PUTs timed in each quiet phase")
    parser.add_argument("--flood", type=int, default=32, help="connections sending /metrics")
    parser.add_argument("--seconds", type=float, default=15, help="length of the flood")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _flood(url: str, path: str, connections: int, seconds: float, out: Any) -> None:
    host = url.split("://", 1)[1]
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    result = loadgen.run(url, [[request]] * connections, seconds)
    out.put({"per_s": result.ops_per_s, "errors": dict(result.errors)})


def _scans(client: loadgen.Client) -> float:
    # Unsigned, as a scraper sends it (a signed GET /metrics is S3's).
    client.conn.request("GET", "/metrics")
    response = client.conn.getresponse()
    text = response.read().decode()
    match = re.search(r"^s3gw_stored_scans_total (\S+)$", text, re.M)
    return float(match.group(1)) if match else float("nan")


def _put_ms(client: loadgen.Client, body: bytes, n: int) -> float:
    response = client.request("PUT", f"/put/object-{n % 8}", body)
    if response.status != 200:
        raise RuntimeError(f"PUT failed: {response.status} {response.body[:200]!r}")
    return response.seconds * 1000


def _flooded(
    client: loadgen.Client, body: bytes, path: str, args: argparse.Namespace
) -> dict[str, Any]:
    """PUTs timed while a separate process floods `path` (its load generator would take the
    GIL from the timed client if it ran in this one)."""
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    flooder = fork.Process(
        target=_flood, args=(client.signer.endpoint, path, args.flood, args.seconds, out)
    )
    scans_before = _scans(client)
    flooder.start()
    time.sleep(1)  # the flood's connections are open and sending
    times = []
    while flooder.is_alive() and out.empty():
        times.append(_put_ms(client, body, len(times)))
    flood = out.get(timeout=120)
    flooder.join()
    if not times:
        raise RuntimeError(f"no PUT completed during the flood of {path}")
    return {
        "path": path,
        "requests_per_s": flood["per_s"],
        "errors": flood["errors"],
        "catalog_scans": _scans(client) - scans_before,
        "puts": len(times),
        "put_p50_ms": statistics.median(times),
        "put_max_ms": max(times),
    }


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    client = loadgen.Client(loadgen.Signer(url))
    body = os.urandom(args.put_kib * KIB)
    for n in range(5):  # warm the connection and the catalog's pages
        _put_ms(client, body, n)
    quiet = [_put_ms(client, body, n) for n in range(args.puts)]
    floods = []
    # /health/live is the cheapest request there is: what any flood costs, for comparison.
    for path in ("/metrics", "/health/live"):
        floods.append(_flooded(client, body, path, args))
        quiet += [_put_ms(client, body, n) for n in range(args.puts)]
    client.close()
    p50_quiet = statistics.median(quiet)
    for flood in floods:
        flood["ratio"] = flood["put_p50_ms"] / p50_quiet
    return {
        "objects": args.objects,
        "put_kib": args.put_kib,
        "flood_connections": args.flood,
        "flood_seconds": args.seconds,
        "puts_quiet": len(quiet),
        "put_p50_quiet_ms": p50_quiet,
        "floods": floods,
    }


def render(r: dict[str, Any]) -> str:
    lines = [
        f"PUT of {r['put_kib']} KiB, one at a time, catalog of {r['objects']:,} objects; floods"
        f" of {r['flood_connections']} connections for {r['flood_seconds']:g} s",
        f"{'':<22} {'PUT p50':>10} {'PUT max':>10} {'ratio':>6} {'flood/s':>8} {'scans':>6}",
        f"{'quiet':<22} {r['put_p50_quiet_ms']:>7.1f} ms",
    ]
    for f in r["floods"]:
        lines.append(
            f"{'GET ' + f['path'] + ' flood':<22} {f['put_p50_ms']:>7.1f} ms"
            f" {f['put_max_ms']:>7.1f} ms {f['ratio']:>6.2f}"
            f" {f['requests_per_s']:>8,.0f} {f['catalog_scans']:>6g}"
            + (f"  errors {f['errors']}" if f["errors"] else "")
        )
    lines.append("ratio: PUT p50 during the flood / quiet; scans: catalog scans during the flood")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="s3gw-bench-") as tmp:
        data = Path(tmp) / "data"
        fill_for_gateway(data, {"stored": args.objects, "put": 0})
        server = GatewayProcess(data, {"S3GW_LOG_LEVEL": "warning"}).start()
        try:
            result = measure(server.url, args)
        finally:
            server.stop()
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0
