"""Object Lock headers: `x-amz-object-lock-*` on writes (PUT, copies, CreateMultipartUpload)
and reads (GET, HEAD), and `x-amz-bypass-governance-retention`, with AWS's errors for them.
What a lock keeps from happening is the Store's rule (store/objectlock.py)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping

from ..store import Bucket
from ..store.model import NO_LOCK, ObjectInfo, ObjectLock
from ..store.objectlock import MODES
from . import checksums, xml
from .authorize import BYPASS_GOVERNANCE, Allowed
from .errors import S3Error, invalid_argument

MISSING = "Bucket is missing Object Lock Configuration"
MODE = "x-amz-object-lock-mode"
UNTIL = "x-amz-object-lock-retain-until-date"
HOLD = "x-amz-object-lock-legal-hold"
BYPASS = "x-amz-bypass-governance-retention"
HOLD_STATES = ("ON", "OFF")


def lock_bucket(bucket: Bucket | None) -> Bucket:
    """The request's bucket, which must have Object Lock (AWS: 400 InvalidRequest)."""
    if bucket is None or not bucket.object_lock:
        raise S3Error("InvalidRequest", MISSING)
    return bucket


def retain_until(value: str, name: str) -> int:
    """A retain-until date: ISO 8601 with a zone, in the future; in nanoseconds."""
    try:
        when = datetime.datetime.fromisoformat(value.strip())
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise invalid_argument("The retain until date must be a valid ISO 8601 date", name, value)
    ns = int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000
    if ns <= time.time_ns():
        raise invalid_argument("The retain until date must be in the future!", name, value)
    return ns


def lock_from_headers(headers: Mapping[str, str], bucket: Bucket | None) -> ObjectLock:
    """The lock a write asks for (NO_LOCK when it names none)."""
    mode, until, hold = (headers.get(name) for name in (MODE, UNTIL, HOLD))
    if mode is None and until is None and hold is None:
        return NO_LOCK
    lock_bucket(bucket)
    if (mode is None) != (until is None):
        raise invalid_argument(
            f"{UNTIL} and {MODE} must both be supplied", MODE if mode is None else UNTIL
        )
    if mode is not None and mode not in MODES:
        raise invalid_argument("Unknown wormMode directive.", MODE, mode)
    if hold is not None and hold not in HOLD_STATES:
        raise invalid_argument("Legal Hold must be either of 'ON' or 'OFF'", HOLD, hold)
    until_ns = retain_until(until, UNTIL) if until is not None else None
    return ObjectLock(mode, until_ns, hold)


def require_integrity(
    headers: Mapping[str, str], bucket: Bucket | None, lock: ObjectLock, what: str
) -> None:
    """AWS wants Content-MD5 or a flexible checksum on a write that sets a lock, or that the
    bucket's default retention will lock (`what`: "Put Object", "Put Part")."""
    locks = lock != NO_LOCK or (bucket is not None and bucket.default_retention is not None)
    if locks and not checksums.has_integrity_header(headers):
        raise S3Error(
            "InvalidRequest",
            f"Content-MD5 OR x-amz-checksum- HTTP header is required for {what} requests with "
            "Object Lock parameters",
        )


def asks_bypass(headers: Mapping[str, str], bucket: Bucket | None, strict: bool = True) -> bool:
    """Whether x-amz-bypass-governance-retention asks to lift GOVERNANCE locks: refused on a
    bucket without Object Lock, even when `false`, as AWS answers DeleteObject (LocalStack's
    recording). Not `strict` (DeleteObjects), it is ignored there instead: ceph s3-tests
    empties every bucket of every test with DeleteObjects and this header, so a refusal would
    fail the whole suite, and AWS's own API text names no such error.

    Asking is not enough: the bypass is granted key by key (`bypass_governance`)."""
    value = headers.get(BYPASS)
    if value is None:
        return False
    if bucket is None or not bucket.object_lock:
        if not strict:
            return False
        raise invalid_argument(
            f"{BYPASS} is only applicable to Object Lock enabled buckets.", BYPASS, value
        )
    return value.strip().lower() == "true"


def bypass_governance(
    asked: bool, allowed: Allowed | None, key: str, version_id: str | None
) -> bool:
    """Whether a request that `asked` lifts a GOVERNANCE lock on this version: only with
    s3:BypassGovernanceRetention, decided by the one authorisation function (`allowed`, the
    dispatcher's) on the request's own values. Without it the lock holds, and the store
    answers AccessDenied where a lock is in the way (and nothing where none is, as on AWS)."""
    return asked and allowed is not None and allowed(BYPASS_GOVERNANCE, key, version_id)


def lock_headers(obj: ObjectInfo) -> dict[str, str]:
    """What GET and HEAD say of a version's lock."""
    headers = {}
    if obj.lock.mode is not None and obj.lock.retain_until_ns is not None:
        headers[MODE] = obj.lock.mode
        headers[UNTIL] = xml.iso8601(obj.lock.retain_until_ns)
    if obj.lock.legal_hold is not None:
        headers[HOLD] = obj.lock.legal_hold
    return headers
