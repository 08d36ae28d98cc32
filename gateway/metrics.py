"""Prometheus metrics for GET /metrics: requests, latency, bytes, what is stored, and how
copies got their ETags.

With several worker processes each keeps its counters in prometheus_client's multiprocess
files (`use_directory`, called in each worker before it counts anything) and a scrape, whichever
worker answers it, adds them all up.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class StoredCollector(Collector):
    """Objects and bytes stored, read from the catalog when scraped."""

    def __init__(self) -> None:
        self.source: Callable[[], tuple[int, int]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.source is None:
            return
        objects, size = self.source()
        yield GaugeMetricFamily("s3gw_objects", "Objects stored", value=objects)
        yield GaugeMetricFamily("s3gw_stored_bytes", "Bytes of the objects stored", value=size)


STORED = StoredCollector()
_directory: Path | None = None


def _define(registry: CollectorRegistry | None) -> None:
    global REQUESTS, LATENCY, BYTES_IN, BYTES_OUT, COPY_ETAGS, MD5_BYTES
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


REGISTRY = CollectorRegistry()
REGISTRY.register(STORED)
_define(REGISTRY)


def use_directory(directory: Path) -> None:
    """Count in multiprocess files under `directory` (one gateway, several workers)."""
    global _directory
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    values.ValueClass = values.MultiProcessValue()
    _directory = directory
    _define(None)  # the multiprocess collector reads them from the files


def render() -> bytes:
    if _directory is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(_directory))
    registry.register(STORED)
    return generate_latest(registry)
