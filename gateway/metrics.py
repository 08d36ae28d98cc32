"""Prometheus metrics for GET /metrics: requests, latency, bytes, what is stored, and how
copies got their ETags. One registry per process (each worker of a gateway is a process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry()

REQUESTS = Counter(
    "s3gw_requests", "S3 requests answered", ["operation", "status"], registry=REGISTRY
)
LATENCY = Histogram(
    "s3gw_request_seconds",
    "Time from request to answer, by operation",
    ["operation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
BYTES_IN = Counter("s3gw_received_bytes", "Request body bytes received", registry=REGISTRY)
BYTES_OUT = Counter("s3gw_sent_bytes", "Response bytes sent", registry=REGISTRY)
COPY_ETAGS = Counter(
    "s3gw_copy_etags",
    "Whole-object copies by how their ETag was obtained: reused (no byte read) or computed",
    ["how"],
    registry=REGISTRY,
)
MD5_BYTES = Counter("s3gw_md5_hashed_bytes", "Bytes hashed with MD5 for ETags", registry=REGISTRY)


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
REGISTRY.register(STORED)


def render() -> bytes:
    return generate_latest(REGISTRY)
