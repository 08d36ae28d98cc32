"""The messages a destination receives, exactly as AWS sends them: an event's record ("Event
message structure", notification-content-structure.html) and the test message a PUT of a
configuration sends each destination.

Pure functions of values: the outbox's consumer (the next slice) builds a record from what the
write path committed; nothing here reads a request or the store."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from ..s3.xml import iso8601
from . import events


@dataclass(frozen=True)
class ObjectEvent:
    """What a record says of one change: the event (with its `s3:` prefix), the bucket and
    key, the object's size, ETag and version where the event has them (a delete has no size
    and no ETag), who asked from where, the request's ids, when, and its sequencer (a number
    that increases with each change of the key)."""

    event: str
    bucket: str
    bucket_owner: str
    key: str
    time_ns: int
    sequencer: int
    principal: str
    source_ip: str
    request_id: str
    host_id: str
    size: int | None = None
    etag: str | None = None  # as S3 answers it, quotes included (they are taken off here)
    version_id: str | None = None
    # A replication event's replicationEventData (rule, destination, operation, time, reason).
    detail: Mapping[str, str] | None = None


def encoded_key(key: str) -> str:
    """The key as a record carries it: URL-encoded form-style (`red flower.jpg` is
    `red+flower.jpg`), its `/` kept, as AWS's records show (clients decode it with
    unquote_plus)."""
    return quote_plus(key, safe="/")


def sequencer(number: int) -> str:
    """A sequencer as AWS writes one: upper-case hexadecimal, 18 digits (longer when the
    number needs it; AWS says to compare two after right-padding the shorter with zeros)."""
    return format(number, "018X")


def record(change: ObjectEvent, region: str, configuration_id: str) -> dict[str, Any]:
    """One element of `Records`, for the configuration `configuration_id` it fired."""
    obj: dict[str, Any] = {"key": encoded_key(change.key)}
    if change.size is not None:
        obj["size"] = change.size
    if change.etag is not None:
        obj["eTag"] = change.etag.strip('"')
    if change.version_id is not None:
        obj["versionId"] = change.version_id
    obj["sequencer"] = sequencer(change.sequencer)
    found: dict[str, Any] = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": region,
        "eventTime": iso8601(change.time_ns),
        "eventName": events.record_name(change.event),
        "userIdentity": {"principalId": change.principal},
        "requestParameters": {"sourceIPAddress": change.source_ip},
        "responseElements": {
            "x-amz-request-id": change.request_id,
            "x-amz-id-2": change.host_id,
        },
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": configuration_id,
            "bucket": {
                "name": change.bucket,
                "ownerIdentity": {"principalId": change.bucket_owner},
                "arn": f"arn:aws:s3:::{change.bucket}",
            },
            "object": obj,
        },
    }
    if change.detail is not None:
        found["replicationEventData"] = dict(change.detail)
    return found


def message(records: list[dict[str, Any]]) -> bytes:
    """The body a destination receives: {"Records": [...]}."""
    return json.dumps({"Records": records}, separators=(",", ":")).encode()


def s3_test_event(bucket: str, time_ns: int, request_id: str, host_id: str) -> bytes:
    """What a PUT of a configuration sends each destination to check it (AWS's s3:TestEvent:
    a flat document, no Records)."""
    return json.dumps(
        {
            "Service": "Amazon S3",
            "Event": "s3:TestEvent",
            "Time": iso8601(time_ns),
            "Bucket": bucket,
            "RequestId": request_id,
            "HostId": host_id,
        },
        separators=(",", ":"),
    ).encode()
