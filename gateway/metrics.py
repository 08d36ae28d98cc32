"""Prometheus metrics for GET /metrics: requests, latency, bytes, what is stored, and how
copies got their ETags.

With several worker processes each keeps its counters in prometheus_client's multiprocess
files (`use_directory`, called in each worker before it counts anything) and a scrape, whichever
worker answers it, adds them all up.

Each S3 request is tallied in plain numbers of its process (`TALLY`), folded into those counters
within FOLD_S and before every render: prometheus_client's label lookup, its locks and its
writes to the multiprocess files cost about a tenth of a small GET's CPU when paid per request.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    values,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# The stored totals are at most this old (plus STORED_CHECK_S and one scan) when scraped.
STORED_REFRESH_S = 5.0
STORED_CHECK_S = 1.0
STORED_COST_RATIO = 20
# In the multiprocess directory; deadlines in it are time.monotonic(), which on Linux is one
# clock for every process.
STORED_FILE = "stored.json"


class StoredCollector(Collector):
    """Objects and bytes stored, from a snapshot of the catalog that a background task keeps
    fresh (`keep_fresh`), never computed by a scrape.

    Counting them is a scan of the catalog (about 80 ms at a million objects): done per scrape,
    a flood of unsigned GET /metrics kept the I/O threads scanning and a 200 kB PUT took
    seconds. Every process runs `keep_fresh`; the snapshot and a lock sit in the multiprocess
    directory, so that one scan per interval serves all workers, whichever is alive.
    """

    def __init__(self) -> None:
        self.scan: Callable[[], tuple[int, int]] | None = None
        # What a failing scan raises (the store's errors: given with `scan`, since metrics
        # sits below the store), logged and tried again at the next interval.
        self.scan_errors: tuple[type[Exception], ...] = (OSError,)
        self._latest: dict[str, float] | None = None  # one process: no file needed

    def collect(self) -> Iterator[GaugeMetricFamily]:
        latest = self._read()
        if latest is None:  # not counted yet: absent rather than a wrong zero
            return
        yield GaugeMetricFamily("s3gw_objects", "Objects stored", value=latest["objects"])
        yield GaugeMetricFamily(
            "s3gw_stored_bytes", "Bytes of the objects stored", value=latest["bytes"]
        )

    async def keep_fresh(self) -> None:
        """Refresh the snapshot whenever it is due, until cancelled (one per process)."""
        failing = False
        while True:
            try:
                await asyncio.to_thread(self.refresh)  # not the store's I/O threads
                failing = False
            except self.scan_errors as exc:
                if not failing:  # once, not every second
                    log.warning("cannot count the objects stored: %s", exc)
                failing = True
            await asyncio.sleep(STORED_CHECK_S)

    def refresh(self) -> bool:
        """Scan the catalog if the snapshot is due and no other process is scanning; blocking.
        Returns whether this call scanned."""
        if self.scan is None or not self._due():
            return False
        if _directory is None:
            self._latest = self._count(self.scan)
            return True
        with open(_directory / "stored.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another worker is counting
            if not self._due():  # another worker counted while we waited for the lock
                return False
            latest = self._count(self.scan)
            tmp = _directory / f"stored.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(latest))
            os.replace(tmp, _directory / STORED_FILE)  # readers see the old or the new
        return True

    def _due(self) -> bool:
        latest = self._read()
        return latest is None or time.monotonic() >= latest["due"]

    @staticmethod
    def _count(scan: Callable[[], tuple[int, int]]) -> dict[str, float]:
        started = time.monotonic()
        objects, size = scan()
        SCANS.inc()
        took = time.monotonic() - started
        # A catalog so large that a scan takes seconds is counted less often: the background
        # work stays under 1/STORED_COST_RATIO of a core.
        due = started + max(STORED_REFRESH_S, took * STORED_COST_RATIO)
        return {"objects": objects, "bytes": size, "due": due}

    def _read(self) -> dict[str, float] | None:
        if _directory is None:
            return self._latest
        try:
            return json.loads((_directory / STORED_FILE).read_text())
        except (OSError, ValueError):
            return None


STORED = StoredCollector()
_directory: Path | None = None


def _define(registry: CollectorRegistry | None) -> None:
    global REQUESTS, LATENCY, BYTES_IN, BYTES_OUT, COPY_ETAGS, MD5_BYTES, SCANS
    global LOG_RECORDS_DROPPED, NOTIFY_PENDING, NOTIFY_DELIVERED, NOTIFY_FAILED, NOTIFY_DROPPED
    global REPLICATED, REPLICATION_FAILURES, REPLICATION_FAILED, NOTIFY_OLDEST
    global REPLICATION_PENDING, REPLICATION_PENDING_BYTES
    REQUESTS = Counter(
        "s3gw_requests", "S3 requests answered", ["operation", "status"], registry=registry
    )
    LATENCY = Histogram(
        "s3gw_request_seconds",
        "Time from request to answer, by operation",
        ["operation"],
        buckets=_BUCKETS,
        registry=registry,
    )
    BYTES_IN = Counter("s3gw_received_bytes", "Request body bytes received", registry=registry)
    BYTES_OUT = Counter("s3gw_sent_bytes", "Response bytes sent", registry=registry)
    COPY_ETAGS = Counter(
        "s3gw_copy_etags",
        "Whole-object copies by how their ETag was obtained: reused (no byte read) or computed",
        ["how"],
        registry=registry,
    )
    MD5_BYTES = Counter(
        "s3gw_md5_hashed_bytes", "Bytes hashed with MD5 for ETags", registry=registry
    )
    SCANS = Counter(
        "s3gw_stored_scans",
        "Catalog scans that counted s3gw_objects and s3gw_stored_bytes (in the background, "
        "one every few seconds whatever the scrapes)",
        registry=registry,
    )
    LOG_RECORDS_DROPPED = Counter(
        "s3gw_log_records_dropped",
        "Server access log records not delivered, by reason: target_gone (the target bucket "
        "was deleted), target_owner_changed (it now belongs to another account) or "
        "write_failed",
        ["reason"],
        registry=registry,
    )
    NOTIFY_PENDING = Gauge(
        "s3gw_notifications_pending",
        "Events in the outbox not yet acknowledged by every destination (as the workers "
        "holding the outbox's partitions last counted them, summed over the processes)",
        registry=registry,
        multiprocess_mode="livesum",
    )
    NOTIFY_DELIVERED = Counter(
        "s3gw_notifications_delivered",
        "Event messages a destination acknowledged",
        registry=registry,
    )
    NOTIFY_FAILED = Counter(
        "s3gw_notification_failures",
        "Deliveries of event messages that failed (each is tried again, with backoff)",
        registry=registry,
    )
    NOTIFY_DROPPED = Counter(
        "s3gw_notifications_dropped",
        "Events dropped undelivered: older than --notify-retention, or their topic is gone",
        registry=registry,
    )
    NOTIFY_OLDEST = Gauge(
        "s3gw_notifications_oldest_seconds",
        "Per destination (a topic's ARN, a replication rule's bucket ARN): the age of the "
        "oldest outbox record still waiting for it, among the first rows of their partitions "
        "the workers last read (0: nothing waiting)",
        ["destination"],
        registry=registry,
        multiprocess_mode="livemax",
    )
    REPLICATED = Counter(
        "s3gw_replicated",
        "Per replication rule (source bucket, rule id): versions, delete markers and tag "
        "changes copied to its destination",
        ["bucket", "rule"],
        registry=registry,
    )
    REPLICATION_FAILURES = Counter(
        "s3gw_replication_failures",
        "Per replication rule: copies the destination could not take now (each is tried "
        "again, with backoff)",
        ["bucket", "rule"],
        registry=registry,
    )
    REPLICATION_FAILED = Counter(
        "s3gw_replication_failed",
        "Per replication rule: copies that will never be made (a permission or configuration "
        "error): FAILED",
        ["bucket", "rule"],
        registry=registry,
    )
    REPLICATION_PENDING = Gauge(
        "s3gw_replication_pending",
        "Per replication rule (source bucket, rule id): copies still to make, among the first "
        "outbox rows of their partitions the workers last read (summed over the processes)",
        ["bucket", "rule"],
        registry=registry,
        multiprocess_mode="livesum",
    )
    REPLICATION_PENDING_BYTES = Gauge(
        "s3gw_replication_pending_bytes",
        "Per replication rule: the size of the versions whose copies are still to make (as "
        "s3gw_replication_pending counts them)",
        ["bucket", "rule"],
        registry=registry,
        multiprocess_mode="livesum",
    )


REGISTRY = CollectorRegistry()
REGISTRY.register(STORED)
_define(REGISTRY)


def use_directory(directory: Path) -> None:
    """Count in multiprocess files under `directory` (one gateway, several workers)."""
    global _directory, TALLY
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    values.ValueClass = values.MultiProcessValue()
    _directory = directory
    _define(None)  # the multiprocess collector reads them from the files
    TALLY = RequestTally()


# A request is in the Prometheus counters at most this long after it was answered (unless the
# event loop was held up longer); a render with several workers waits FOLD_WAIT_S for the
# others' folds, so that a scrape sees every request answered before it arrived.
FOLD_S = 0.1
FOLD_WAIT_S = 2.5 * FOLD_S


class RequestTally:
    """What S3Middleware counts for each request (s3gw_requests, s3gw_request_seconds,
    s3gw_received_bytes, s3gw_sent_bytes), in plain numbers, added to the Prometheus values
    once per FOLD_S for all the requests since. Used from the event loop's thread only."""

    def __init__(self) -> None:
        self._requests: dict[tuple[str, int], int] = {}
        # Per operation: the sum of the seconds, then a count per histogram bucket (+Inf last).
        self._latency: dict[str, list[float]] = {}
        self._received = 0
        self._sent = 0
        self._due = False

    def count(self, operation: str, status: int, seconds: float, received: int, sent: int) -> None:
        key = (operation, status)
        requests = self._requests
        requests[key] = requests.get(key, 0) + 1
        latency = self._latency.get(operation)
        if latency is None:
            latency = self._latency[operation] = [0.0] * (len(_BUCKETS) + 2)
        latency[0] += seconds
        # The histogram's rule: the first bucket whose bound is >= the value.
        latency[1 + bisect.bisect_left(_BUCKETS, seconds)] += 1
        self._received += received
        self._sent += sent
        if not self._due:
            self._due = True
            try:
                asyncio.get_running_loop().call_later(FOLD_S, self.fold)
            except RuntimeError:  # no event loop to fold later: now
                self.fold()

    def fold(self) -> None:
        """Add what was counted since the last fold to the Prometheus values."""
        self._due = False
        requests, self._requests = self._requests, {}
        latency, self._latency = self._latency, {}
        received, sent = self._received, self._sent
        self._received = self._sent = 0
        for (operation, status), n in requests.items():
            REQUESTS.labels(operation, str(status)).inc(n)
        for operation, tally in latency.items():
            child = LATENCY.labels(operation)
            # What Histogram.observe does for one value (its sum, the count of the first bucket
            # that holds it), done once for many: prometheus_client has no public call for it.
            child._sum.inc(tally[0])
            for bucket, n in zip(child._buckets, tally[1:], strict=True):
                if n:
                    bucket.inc(n)
        if received:
            BYTES_IN.inc(received)
        if sent:
            BYTES_OUT.inc(sent)


TALLY = RequestTally()


# Threads start when first used: none exists in a parent that forks workers.
RENDERING = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="metrics")
# A render adds up every worker's files: about 10 ms of Python holding the GIL. Renders are
# spaced so that they take at most 1/RENDER_COST_RATIO of a thread, whatever the scrapes.
RENDER_COST_RATIO = 10


class Renderer:
    """Scrapes share renders: a scrape waits for the next render to start (so it sees every
    count made before it arrived) and gets its text, with one render at a time per process and
    pauses between them. A flood of unsigned scrapes then costs what a flood of any request
    costs; before, each scrape rendered, and the render thread starved the event loop of the
    GIL (a 200 kB PUT took four times as long)."""

    def __init__(self) -> None:
        self._next: asyncio.Task[bytes] | None = None  # not started yet: scrapes join it
        self._last: asyncio.Task[bytes] | None = None
        self._not_before = 0.0

    async def render(self) -> bytes:
        if self._next is None:
            self._next = asyncio.create_task(self._render(self._last))
            self._last = self._next
        # Shielded: a scrape whose client leaves does not cancel the others' render.
        return await asyncio.shield(self._next)

    async def _render(self, previous: asyncio.Task[bytes] | None) -> bytes:
        loop = asyncio.get_running_loop()
        if previous is not None:
            await asyncio.wait([previous])
        if (pause := self._not_before - loop.time()) > 0:
            await asyncio.sleep(pause)
        self._next = None  # whoever comes from now on may have missed this render's counts
        if _directory is not None:
            await asyncio.sleep(FOLD_WAIT_S)  # the other workers fold what they counted
        TALLY.fold()
        started = loop.time()
        text = await loop.run_in_executor(RENDERING, render)
        took = loop.time() - started
        self._not_before = loop.time() + took * (RENDER_COST_RATIO - 1)
        return text


def render() -> bytes:
    if _directory is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(_directory))
    registry.register(STORED)
    return generate_latest(registry)
