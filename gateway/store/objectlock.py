"""Object Lock: S3's retention and legal-hold rules, once, over the Catalog protocol.

A bucket with Object Lock keeps versioning Enabled for good. Each version may hold a retention
(GOVERNANCE or COMPLIANCE until a date) and a legal hold; while either holds, the version
cannot be removed by its id, and its retention can only be extended. GOVERNANCE gives way to a
request that says `x-amz-bypass-governance-retention: true`; COMPLIANCE and a legal hold to
nothing. Deleting a key without an id still adds a delete marker: the locked version stays.
"""

from __future__ import annotations

from dataclasses import replace

from .errors import StoreError
from .model import NO_LOCK, Bucket, ObjectLock

GOVERNANCE = "GOVERNANCE"
COMPLIANCE = "COMPLIANCE"
MODES = (GOVERNANCE, COMPLIANCE)
DAY_NS = 86_400 * 10**9
LOCKED = "Access Denied because object protected by object lock."


class ObjectLocked(StoreError):
    """A locked version cannot be removed, nor its retention shortened or removed."""

    code = "AccessDenied"

    def __init__(self) -> None:
        super().__init__(LOCKED)


class InvalidBucketState(StoreError):
    code = "InvalidBucketState"


NEEDS_VERSIONING = "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"
KEEPS_VERSIONING = (
    "An Object Lock configuration is present on this bucket, so the versioning state cannot "
    "be changed."
)


def on_write(bucket: Bucket, requested: ObjectLock, now_ns: int) -> ObjectLock:
    """A new version's lock: what the write asked for, and the bucket's default retention when
    it named no mode."""
    if not bucket.object_lock:
        return NO_LOCK
    rule = bucket.default_retention
    if requested.mode is not None or rule is None:
        return requested
    days = rule.days if rule.days is not None else 365 * (rule.years or 0)
    return replace(requested, mode=rule.mode, retain_until_ns=now_ns + days * DAY_NS)


def retained(lock: ObjectLock, now_ns: int) -> bool:
    return lock.mode is not None and (lock.retain_until_ns or 0) > now_ns


def protected(lock: ObjectLock, bypass: bool, now_ns: int) -> bool:
    """Does the lock keep the version from being removed by this request?"""
    if lock.legal_hold == "ON":
        return True
    if not retained(lock, now_ns):
        return False
    return lock.mode == COMPLIANCE or not bypass


def check_retention(
    old: ObjectLock, mode: str | None, until_ns: int | None, bypass: bool, now_ns: int
) -> None:
    """May a retention in force become (`mode`, `until_ns`) (None, None: removed)? Extending
    it always may; shortening, removing it or changing its mode only a GOVERNANCE one, with
    the bypass."""
    if not retained(old, now_ns):
        return
    extends = mode == old.mode and until_ns is not None and until_ns >= (old.retain_until_ns or 0)
    if extends:
        return
    if old.mode == COMPLIANCE or not bypass:
        raise ObjectLocked()
