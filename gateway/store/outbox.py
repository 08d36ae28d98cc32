"""The outbox: a change that someone outside may need to hear about (an object created or
removed) is recorded as a row, in the catalog transaction of the change itself, so that the
record is committed exactly when the change is (DESIGN.md, "Events: one outbox, several
consumers"). Consumers (gateway/workers/notifications.py) read the rows in order, and a row is
removed once every destination it names has acknowledged it.

One row per change, not per destination: what changed (bucket, key, event, version id, time)
and its facts (the object's size and ETag, the bucket's owner, who asked from where, the
request's ids) and the notification configurations it fired (their ids and destinations),
decided when the change committed. The row's `seq` is the records' sequencer: it only grows
(both catalogs never use a number twice), and two changes of one key commit in the order of
their numbers (the second waits for the first's row lock before it takes its number).

A write records a row only when the bucket has a notification configuration (its
"notification" setting) that fires for the event and key: a bucket without one pays one
dictionary look-up. Which configurations fire is the protocol's to say (a configuration is
AWS's XML, gateway/notify/configuration.py); the application gives the Store that function as
`Store.destinations`, so that storage stays free of S3's wire formats.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .api import CatalogTx
from .model import Bucket, Origin

# The bucket setting that holds its notification configuration.
SETTING = "notification"

# Events, with their `s3:` prefix (AWS's names; gateway/notify/events.py has them all).
PUT = "s3:ObjectCreated:Put"
POST = "s3:ObjectCreated:Post"
COPY = "s3:ObjectCreated:Copy"
COMPLETE = "s3:ObjectCreated:CompleteMultipartUpload"
DELETE = "s3:ObjectRemoved:Delete"
MARKER = "s3:ObjectRemoved:DeleteMarkerCreated"
EXPIRED = "s3:LifecycleExpiration:Delete"
EXPIRED_MARKER = "s3:LifecycleExpiration:DeleteMarkerCreated"
TAGGED = "s3:ObjectTagging:Put"
UNTAGGED = "s3:ObjectTagging:Delete"
ACL = "s3:ObjectAcl:Put"
REPLICATION_FAILED = "s3:Replication:OperationFailedReplication"

# The bucket setting that holds its replication configuration (gateway/replication/).
REPLICATION = "replication"

# (a bucket's notification document, an event, a key) -> the (configuration id, destination
# ARN) pairs it fires, in the document's order (empty: none).
Destinations = Callable[[str, str, str], Sequence[tuple[str, str]]]
# (a bucket's replication document, an event, a key, the version's tags, whether the change
# is itself a replica, whether the version is SSE-KMS) -> the (rule id, destination bucket ARN
# `arn:aws:s3:::NAME`) pairs it is copied to (empty: none).
Replicas = Callable[[str, str, str, Mapping[str, str], bool, bool], Sequence[tuple[str, str]]]

# The outbox's partitions: a key's rows are all in one (partition()), and each is delivered by
# one process at a time (the worker's lease on it), so several processes deliver at once and a
# key's order is kept. Fixed: a key's partition must not change while it has rows waiting.
PARTITIONS = 16


def partition(bucket: str, key: str) -> int:
    """The partition of a key's rows: a stable hash of the bucket and the key (CRC-32, the same
    on every node and every version of the gateway)."""
    return zlib.crc32(bucket.encode() + b"/" + key.encode()) % PARTITIONS


# A target's destination ARN names a bucket (replication), else a topic (notifications).
BUCKET_ARN = "arn:aws:s3:::"


# How many of the outbox's first rows a destination's backlog looks at (Backlog).
BACKLOG_WITHIN = 10_000


@dataclass(frozen=True)
class Backlog:
    """How many rows of the outbox name one destination: rows not yet acknowledged by every
    destination they name (the one asked about may have had its record already; the row
    stays until all have). Only the first BACKLOG_WITHIN rows are looked at, in order, so
    that the count costs one bounded read by the primary key however long the outbox
    grew: `more` says the outbox holds more rows than that, and `count` is then a lower
    bound (shown "N+")."""

    count: int
    more: bool

    def __str__(self) -> str:
        return f"{self.count}+" if self.more else str(self.count)


def naming(arn: str) -> str:
    """The text a row's facts hold when one of its targets is `arn`: a target is
    `["configuration id","arn"]` in Facts.to_json, so `,"arn"]` matches that ARN only (not a
    longer one it begins, nor an id, whose quotes JSON escapes)."""
    return "," + json.dumps(arn) + "]"


def is_replication(target: tuple[str, str]) -> bool:
    return target[1].startswith(BUCKET_ARN)


# What a resync (`s3gw replicate resync`) does with an existing version.
QUEUED = "queued"
REPLICATED = "replicated"
SKIPPED = "skipped"


def requeued(
    status: str | None, sse_c: bool, fired: Sequence[tuple[str, str]], rule_id: str | None
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Whether a resync queues an existing version again, and for which replication rules:
    `fired` is what a new write of it would reach now, `rule_id` the one rule asked for (None:
    every rule). Queued unless no rule applies to it (nor to an SSE-C object, whose key the
    gateway never has, nor to a replica: S3 Batch Replication's "eligible" objects), or its
    copies are made already (COMPLETED); PENDING and FAILED versions are queued again, as
    Batch Replication retries them."""
    targets = tuple(t for t in fired if is_replication(t) and (rule_id is None or t[0] == rule_id))
    if not targets or sse_c or status == "REPLICA":
        return SKIPPED, ()
    if status == "COMPLETED":
        return REPLICATED, ()
    return QUEUED, targets


def fired(
    bucket: Bucket,
    destinations: Destinations | None,
    replicas: Replicas | None,
    event: str,
    key: str,
    tags: Sequence[tuple[str, str]] = (),
    replica: bool = False,
    kms: bool = False,
) -> tuple[tuple[str, str], ...]:
    """What `event` on `key` must reach: the notification configurations it fires and the
    replication rules that copy it (each consumer's targets in one row)."""
    found: list[tuple[str, str]] = []
    document = bucket.settings.get(SETTING)
    if document is not None and destinations is not None:
        found += destinations(document, event, key)
    document = bucket.settings.get(REPLICATION)
    if document is not None and replicas is not None:
        found += replicas(document, event, key, dict(tags), replica, kms)
    return tuple(found)


@dataclass(frozen=True)
class Facts:
    """A row's facts: what a record says beyond the row's columns."""

    owner: str
    principal: str
    source_ip: str
    request_id: str
    host_id: str
    size: int | None
    etag: str | None
    # The configurations the change fired: (configuration id, destination ARN).
    targets: tuple[tuple[str, str], ...]
    # What an event of replication's says of the copy (AWS's replicationEventData).
    detail: Mapping[str, str] | None = None

    def to_json(self) -> str:
        found: dict[str, Any] = {
            "owner": self.owner,
            "principal": self.principal,
            "ip": self.source_ip,
            "request": self.request_id,
            "host": self.host_id,
            "size": self.size,
            "etag": self.etag,
            "targets": [list(t) for t in self.targets],
        }
        if self.detail is not None:
            found["detail"] = dict(self.detail)
        return json.dumps(found, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Facts:
        found: dict[str, Any] = json.loads(text)
        return cls(
            found["owner"],
            found["principal"],
            found["ip"],
            found["request"],
            found["host"],
            found.get("size"),
            found.get("etag"),
            tuple((str(i), str(a)) for i, a in found["targets"]),
            found.get("detail"),
        )


async def record(
    tx: CatalogTx,
    fired: Sequence[tuple[str, str]],
    bucket: Bucket,
    key: str,
    event: str,
    origin: Origin,
    time_ns: int,
    version_id: str | None = None,
    size: int | None = None,
    etag: str | None = None,
    detail: Mapping[str, str] | None = None,
) -> None:
    """Record `event` on `key` in `tx` for the targets it `fired` (none: nothing is written)."""
    if not fired:
        return
    facts = Facts(
        bucket.owner,
        origin.principal,
        origin.source_ip,
        origin.request_id,
        origin.host_id,
        size,
        etag,
        tuple(fired),
        detail,
    )
    # A version id on a bucket whose versioning was ever set ("null" included), as AWS's
    # records carry it; none on an unversioned bucket.
    shown = version_id if bucket.versioning is not None else None
    await tx.append_outbox(
        bucket.name, key, event, shown, time_ns, facts.to_json(), partition(bucket.name, key)
    )
