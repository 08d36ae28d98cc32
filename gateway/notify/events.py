"""S3's event names and the matching of one event against a bucket's configuration: which of its
configurations a given event name and key fire.

The names are AWS's ("Supported event types for SQS, SNS, and Lambda", notification-how-to-
event-types-and-destinations.html); a configuration names them with the `s3:` prefix, a record
without it (`ObjectCreated:Put`)."""

from __future__ import annotations

from collections.abc import Iterable

# Every event a configuration may name, wildcards included.
EVENT_TYPES: dict[str, tuple[str, ...]] = {
    "s3:TestEvent": (),
    "s3:ObjectCreated": ("Put", "Post", "Copy", "CompleteMultipartUpload"),
    "s3:ObjectRemoved": ("Delete", "DeleteMarkerCreated"),
    "s3:ObjectRestore": ("Post", "Completed", "Delete"),
    "s3:ReducedRedundancyLostObject": (),
    "s3:Replication": (
        "OperationFailedReplication",
        "OperationMissedThreshold",
        "OperationReplicatedAfterThreshold",
        "OperationNotTracked",
    ),
    "s3:LifecycleExpiration": ("Delete", "DeleteMarkerCreated"),
    "s3:LifecycleTransition": (),
    "s3:IntelligentTiering": (),
    "s3:ObjectTagging": ("Put", "Delete"),
    "s3:ObjectAcl": ("Put",),
}
# The concrete events (no wildcard): what a record's eventName can be, with the `s3:` prefix.
CONCRETE: frozenset[str] = frozenset(
    [f"{family}:{kind}" for family, kinds in EVENT_TYPES.items() for kind in kinds]
    + [family for family, kinds in EVENT_TYPES.items() if not kinds and family != "s3:TestEvent"]
)
# Names a configuration may use: every concrete one and each family's `:*`.
CONFIGURABLE: frozenset[str] = CONCRETE | {
    f"{family}:*" for family, kinds in EVENT_TYPES.items() if kinds
}


def expand(name: str) -> frozenset[str]:
    """The concrete events a configured name stands for (`s3:ObjectCreated:*` is the four
    kinds of ObjectCreated); empty for a name that is not one."""
    if name in CONCRETE:
        return frozenset((name,))
    family, sep, star = name.rpartition(":")
    if sep and star == "*" and EVENT_TYPES.get(family):
        return frozenset(f"{family}:{kind}" for kind in EVENT_TYPES[family])
    return frozenset()


def fires(configured: Iterable[str], event: str) -> bool:
    """Does a configuration naming `configured` fire for `event` (with its `s3:` prefix)?"""
    return any(event in expand(name) for name in configured)


def key_matches(key: str, prefix: str | None, suffix: str | None) -> bool:
    """A filter's S3Key rules: both must hold (an absent rule holds for every key). AWS
    compares the key as stored, case-sensitively; a key shorter than prefix plus suffix
    matches when each holds on its own ("abc" matches prefix "ab" and suffix "bc")."""
    return (not prefix or key.startswith(prefix)) and (not suffix or key.endswith(suffix))


def record_name(event: str) -> str:
    """The eventName of a record: without `s3:` (`ObjectCreated:Put`), as AWS sends it (MinIO
    keeps the prefix; clients written for AWS do not expect it)."""
    return event.removeprefix("s3:")
