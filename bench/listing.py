"""Listing latency: one page of 1,000 in a bucket of 10,000 keys, in one of 1,000,000, and in a
versioned one of 10,000 keys holding 1,000,000 older versions.

The buckets are filled directly through the catalog (a million PUTs would take the benchmark's
whole budget); the pages are then timed through the real server, from a lean signed HTTP client
that does not parse the XML (boto3's parsing would dominate the figure). A page is
index range scans, and a delimiter listing seeks past each common prefix, so the cost of a page
should not grow with the bucket: the large/small ratio should be close to 1. Older versions live
in a table of their own (store/versions.py), so the versioned/small ratio should be close to 1
too.

The same catalog is then moved into PostgreSQL (`s3gw migrate`'s COPY, one transaction, and an
ANALYZE) and the same pages are timed through a gateway on it: the 1M/10k ratio there must stay
below 1.5 too (issue 15). The database is a server of the run's own (as the tests start one,
fsync on) or made on the server `--catalog-url` names; where PostgreSQL is not installed, its
rows are skipped with the reason.

The web console's folder page is timed too, against the ListObjectsV2 page it amounts to (a
prefix, the delimiter `/`, 100 entries) in the large bucket: it lists through the same store
call, so the console/S3 ratio should be close to 1 whatever the bucket's size.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import statistics
import sys
import tempfile
import time
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from bench import loadgen
from bench.postgres import ENV_URL, BenchDatabases
from gateway.store import StoreError, open_store
from gateway.store.api import CatalogTx
from gateway.store.migrate import migrate
from gateway.store.model import NULL_VERSION, ObjectAttrs, ObjectInfo
from gateway.store.versions import ENABLED, new_version_id, seq_of
from tests.process import ACCESS_KEY, SECRET_KEY, GatewayProcess

OWNER_KEY = ACCESS_KEY
EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"
# Issue 15's target, on each catalog: a page in the large bucket / the same in the small one.
TARGET_RATIO = 1.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--small", type=int, default=10_000, help="keys in the small bucket")
    parser.add_argument("--large", type=int, default=1_000_000, help="keys in the large bucket")
    parser.add_argument(
        "--versions",
        type=int,
        default=1_000_000,
        help="older versions in the versioned bucket (of as many keys as the small one)",
    )
    parser.add_argument("--repeats", type=int, default=15, help="pages timed per case")
    parser.add_argument(
        "--catalog-url",
        default=os.environ.get(ENV_URL),
        help="a PostgreSQL server (postgresql://user@host:port/db) to make the benchmark's "
        f"database on ({ENV_URL}; default: start one of the run's own)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def key_name(i: int) -> str:
    # 100 top-level "directories" of 100 sub-directories: structure for delimiter listings.
    return f"dir{i % 100:03d}/sub{i // 100 % 100:03d}/object-{i:08d}"


def fill(
    data: Path, buckets: dict[str, int], owner: str, versions: dict[str, int] | None = None
) -> None:
    """Create buckets of empty objects (no blobs needed), 50,000 rows per transaction; the
    buckets named in `versions` get that many older versions too, spread over their keys."""
    asyncio.run(_fill(data, buckets, owner, versions or {}))


def _row(bucket: str, i: int, mtime_ns: int, version_id: str = NULL_VERSION) -> ObjectInfo:
    return ObjectInfo(
        bucket, key_name(i), 0, EMPTY_MD5, mtime_ns, ObjectAttrs(), (), version_id=version_id
    )


async def _fill(data: Path, buckets: dict[str, int], owner: str, versions: dict[str, int]) -> None:
    store = open_store(data)
    try:
        for name, count in buckets.items():
            await store.create_bucket(name, owner, "us-east-1")
            older = versions.get(name, 0)
            if older:
                await store.set_versioning(name, ENABLED)
            start_ns = time.time_ns() - 10**12  # older versions first, 1 µs apart
            for start in range(0, max(count, older), 50_000):

                async def batch(
                    tx: CatalogTx,
                    name: str = name,
                    rows: range = range(start, min(start + 50_000, count)),
                    old: range = range(start, min(start + 50_000, older)),
                    first_ns: int = start_ns,
                    keys: int = count,
                ) -> None:
                    for i in rows:
                        await tx.insert_object(_row(name, i, time.time_ns()))
                    for n in old:
                        mtime = first_ns + n * 1000
                        version = _row(name, n % keys, mtime, new_version_id(mtime))
                        await tx.insert_version(version, seq_of(version))

                await store.catalog.write(batch, long=True)
    finally:
        store.close()


def fill_for_gateway(
    data: Path, buckets: dict[str, int], versions: dict[str, int] | None = None
) -> None:
    """`fill`, with buckets owned by the user GatewayProcess starts the gateway with."""
    from gateway.config import Settings
    from gateway.users import load_users

    users, _ = load_users(
        Settings(data=data, host="", port=0, access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    )
    started = time.perf_counter()
    fill(data, buckets, users[OWNER_KEY].canonical_id, versions)
    print(f"filled the catalog in {time.perf_counter() - started:.1f} s", file=sys.stderr)


CASES: dict[str, dict[str, str]] = {
    "first page": {},
    "page from the middle": {"start-after": "dir050/"},
    "delimiter at the root": {"delimiter": "/"},
    "delimiter under a prefix": {"prefix": "dir042/", "delimiter": "/"},
}


def _median_ms(client: loadgen.Client, bucket: str, params: dict[str, str], repeats: int) -> float:
    times = []
    # Signed as sent: the query in S3's canonical encoding.
    query = urlencode(
        {"list-type": "2", "max-keys": "1000", **params}, quote_via=quote, safe="-_.~"
    )
    for _ in range(repeats):
        response = client.request("GET", f"/{bucket}?{query}")
        times.append(response.seconds * 1000)
        if response.status != 200 or b"<KeyCount>0<" in response.body:
            raise RuntimeError(f"listing failed: {response.status} {response.body[:200]!r}")
    return statistics.median(times)


def measure(client: loadgen.Client, repeats: int) -> dict[str, Any]:
    rows = []
    for case, params in CASES.items():
        small = _median_ms(client, "small", params, repeats)
        large = _median_ms(client, "large", params, repeats)
        versioned = _median_ms(client, "versioned", params, repeats)
        rows.append(
            {
                "case": case,
                "small_ms": small,
                "large_ms": large,
                "ratio": large / small,
                "versioned_ms": versioned,
                "versioned_ratio": versioned / small,
            }
        )
    return {"rows": rows}


CONSOLE_FOLDER = "dir042/"  # 100 sub-folders: a full console page


class ConsoleSession:
    """A signed-in console session on one kept-alive connection."""

    def __init__(self, url: str) -> None:
        where = urlsplit(url)
        self.conn = http.client.HTTPConnection(where.hostname or "", where.port)
        self.cookies: dict[str, str] = {}
        form = self.request("GET", "/signin")[1].decode()
        token = re.search(r'name="csrf" value="([^"]+)"', form)
        if token is None:
            raise RuntimeError("the console's sign-in page has no form token")
        fields = {"csrf": token.group(1), "access_key": ACCESS_KEY, "secret_key": SECRET_KEY}
        status, _ = self.request("POST", "/signin", urlencode(fields).encode())
        if status != 303 or "s3gw_console" not in self.cookies:
            raise RuntimeError(f"the console refused the sign-in: {status}")

    def request(self, method: str, target: str, body: bytes = b"") -> tuple[int, bytes]:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        self.conn.request(method, target, body or None, headers)
        response = self.conn.getresponse()
        answer = response.read()
        for value in response.headers.get_all("Set-Cookie") or []:
            self.cookies.update({k: m.value for k, m in SimpleCookie(value).items()})
        return response.status, answer


def measure_console(
    client: loadgen.Client, console: ConsoleSession, repeats: int
) -> dict[str, float]:
    """A console folder page and its ListObjectsV2 page, in the large bucket."""
    query = urlencode(
        {"list-type": "2", "max-keys": "100", "prefix": CONSOLE_FOLDER, "delimiter": "/"},
        quote_via=quote,
        safe="-_.~",
    )
    target = "/bucket?" + urlencode({"name": "large", "prefix": CONSOLE_FOLDER})
    s3, pages = [], []
    for _ in range(repeats):
        response = client.request("GET", f"/large?{query}")
        if response.status != 200:
            raise RuntimeError(f"listing failed: {response.status}")
        s3.append(response.seconds * 1000)
        started = time.perf_counter()
        status, page = console.request("GET", target)
        pages.append((time.perf_counter() - started) * 1000)
        if status != 200 or page.count(b"<tr>") < 100:
            raise RuntimeError(f"the console's page failed: {status}")
    s3_ms, console_ms = statistics.median(s3), statistics.median(pages)
    return {"s3_ms": s3_ms, "console_ms": console_ms, "ratio": console_ms / s3_ms}


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each case's large/small ratio on each catalog measured, against TARGET_RATIO."""
    judged = []
    for catalog, rows in (("SQLite", result["rows"]), ("PostgreSQL", _pg_rows(result))):
        for r in rows:
            judged.append(
                {
                    "name": f"{catalog} {r['case']}: large / small",
                    "value": r["ratio"],
                    "target": f"< {TARGET_RATIO:g}",
                    "met": r["ratio"] < TARGET_RATIO,
                }
            )
    return judged


def _pg_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list(result.get("postgresql", {}).get("rows", []))


def _table(rows: list[dict[str, Any]]) -> list[str]:
    head = f"{'case':<26} {'small':>10} {'large':>10} {'ratio':>7} {'versioned':>12} {'ratio':>7}"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['case']:<26} {r['small_ms']:>7.2f} ms {r['large_ms']:>7.2f} ms {r['ratio']:>7.2f}"
            f" {r['versioned_ms']:>9.2f} ms {r['versioned_ratio']:>7.2f}"
        )
    return lines


def render(result: dict[str, Any], small: int, large: int, versions: int) -> str:
    lines = [
        f"ListObjectsV2, one page of 1000, median latency: {small:,} keys vs {large:,} keys, "
        f"and {small:,} keys over {versions:,} older versions",
        "SQLite:",
        *_table(result["rows"]),
    ]
    c = result.get("console")
    if c is not None:
        lines.append(
            f"console folder page ({CONSOLE_FOLDER}, 100 entries, {large:,} keys): "
            f"{c['console_ms']:.2f} ms vs ListObjectsV2's same page {c['s3_ms']:.2f} ms, "
            f"ratio {c['ratio']:.2f}"
        )
    pg = result.get("postgresql", {})
    if "rows" in pg:
        lines.append(
            f"PostgreSQL ({pg['server']}; the same catalog moved in by s3gw migrate in "
            f"{pg['filled_s']:.1f} s):"
        )
        lines += _table(pg["rows"])
    else:
        lines.append(pg.get("skipped") or pg.get("failed") or "PostgreSQL: not measured")
    lines.append("targets:")
    for t in result["targets"]:
        verdict = "met" if t["met"] else "NOT met"
        lines.append(f"  {t['name']}: {t['value']:.2f} (target {t['target']}: {verdict})")
    return "\n".join(lines)


def _measure_postgres(data: Path, databases: BenchDatabases, repeats: int) -> dict[str, Any]:
    """The SQLite catalog of `data` moved into a new PostgreSQL database, and its pages timed
    through a gateway on it; or why not."""
    problem = databases.unavailable()
    if problem is None:
        try:
            url = databases.database()
        except RuntimeError as e:
            problem = str(e)
    if problem is not None:
        return {"skipped": f"PostgreSQL: skipped: {problem}"}
    started = time.perf_counter()
    try:
        moved = migrate(data, url).rows
    except StoreError as e:
        return {"failed": f"PostgreSQL: filling the catalog failed: {e}"}
    # The planner's statistics, as a database in service has them (autovacuum would make them
    # within a minute of the load, perhaps in the middle of the timed pages).
    databases.analyze(url)
    filled = time.perf_counter() - started
    print(f"moved the catalog into PostgreSQL in {filled:.1f} s", file=sys.stderr)
    server = GatewayProcess(data, {"S3GW_LOG_LEVEL": "warning"}, catalog=url).start()
    try:
        client = loadgen.Client(loadgen.Signer(server.url))
        result = measure(client, repeats)
        client.close()
    finally:
        server.stop()
    return {**result, "filled_s": filled, "server": databases.description, "moved_rows": moved}


def run(args: argparse.Namespace) -> int:
    databases = BenchDatabases(args.catalog_url)
    try:
        with tempfile.TemporaryDirectory(prefix="s3gw-bench-") as tmp:
            data = Path(tmp) / "data"
            fill_for_gateway(
                data,
                {"small": args.small, "large": args.large, "versioned": args.small},
                {"versioned": args.versions},
            )
            env = {"S3GW_LOG_LEVEL": "warning", "S3GW_CONSOLE_ADDRESS": "127.0.0.1:0"}
            server = GatewayProcess(data, env).start()
            try:
                client = loadgen.Client(loadgen.Signer(server.url))
                result = measure(client, args.repeats)
                console_url = next(
                    m.group(1) for line in server.log if (m := re.search(r"console on (\S+)", line))
                )
                console = ConsoleSession(console_url)
                result["console"] = measure_console(client, console, args.repeats)
                console.conn.close()
                client.close()
            finally:
                server.stop()
            # After the SQLite gateway has stopped: the move needs the folder to itself.
            result["postgresql"] = _measure_postgres(data, databases, args.repeats)
    finally:
        databases.close()
    result["targets"] = targets(result)
    print(
        json.dumps(result, indent=2)
        if args.json
        else render(result, args.small, args.large, args.versions)
    )
    return 0
