"""Object Lock through the Store over each backend: a lock bucket keeps versioning Enabled, new
versions take the lock asked for or the bucket's default, a locked version cannot be removed
by its id (GOVERNANCE gives way to the bypass, COMPLIANCE and a legal hold to nothing) while a
delete marker can still be added, and a retention can only be extended without the bypass."""

from __future__ import annotations

import os
import time

import pytest

from gateway.store.model import NO_LOCK, DefaultRetention, Deleted, ObjectAttrs, ObjectLock
from gateway.store.objectlock import DAY_NS, InvalidBucketState, ObjectLocked
from gateway.store.versions import DeleteMarker
from tests.contract.conftest import Harness
from tests.contract.test_writes import file_blobs, files, put, settle, stage

HOUR_NS = 3600 * 10**9


def lock_bucket(h: Harness) -> str:
    b = h.new_bucket()
    h.run(h.store.set_versioning(b, "Enabled"))
    h.run(h.store.set_lock_configuration(b, None))
    return b


def remove(h: Harness, b: str, key: str, version_id: str, bypass: bool = False):  # type: ignore[no-untyped-def]
    (done,) = h.run(h.store.delete_versions(b, [(key, version_id)], [bypass]))
    return done


def test_a_lock_bucket_keeps_versioning_enabled(harness: Harness) -> None:
    h = harness
    plain = h.new_bucket()
    with pytest.raises(InvalidBucketState):  # versioning never set
        h.run(h.store.set_lock_configuration(plain, None))
    h.run(h.store.set_versioning(plain, "Suspended"))
    with pytest.raises(InvalidBucketState):
        h.run(h.store.set_lock_configuration(plain, None))
    h.run(h.store.set_versioning(plain, "Enabled"))
    rule = DefaultRetention("GOVERNANCE", days=1)
    bucket = h.run(h.store.set_lock_configuration(plain, rule))
    assert bucket.object_lock and bucket.default_retention == rule
    assert h.run(h.store.get_bucket(plain)) == bucket
    with pytest.raises(InvalidBucketState):
        h.run(h.store.set_versioning(plain, "Suspended"))
    h.run(h.store.set_versioning(plain, "Enabled"))  # enabling again is fine
    # Created with Object Lock: versioning Enabled at once, no default.
    name = f"{plain}-locked"
    created = h.run(h.store.create_bucket(name, "owner", "us-east-1", object_lock=True))
    assert (created.versioning, created.object_lock, created.default_retention) == (
        "Enabled",
        True,
        None,
    )
    assert h.run(h.store.get_bucket(name)) == created
    # A configuration without a rule removes the default.
    h.run(h.store.set_lock_configuration(plain, None))
    assert h.run(h.store.get_bucket(plain)).default_retention is None


def test_versions_take_the_lock_asked_for_or_the_default(harness: Harness) -> None:
    h = harness
    b = lock_bucket(h)
    plain = put(h, b, "plain", b"no default yet")
    assert plain.lock == NO_LOCK
    h.run(h.store.set_lock_configuration(b, DefaultRetention("COMPLIANCE", years=1)))
    before = time.time_ns()
    default = put(h, b, "k", b"locked by default")
    assert default.lock.mode == "COMPLIANCE"
    assert before + 365 * DAY_NS <= default.lock.retain_until_ns <= time.time_ns() + 365 * DAY_NS
    asked = ObjectLock("GOVERNANCE", time.time_ns() + HOUR_NS, "ON")
    named = h.run(h.store.put_object(b, "k", stage(h, b"x"), ObjectAttrs(), lock=asked))
    assert named.lock == asked
    assert h.run(h.store.head_object(b, "k", named.version_id)).lock == asked
    # A copy does not take its source's lock: the bucket's default applies.
    copy = h.run(h.store.copy_object(named, b, "copy", ObjectAttrs(), named.etag))
    assert copy.lock.mode == "COMPLIANCE" and copy.lock.legal_hold is None
    # Complete gives the object the lock its upload asked for.
    upload = h.run(h.store.create_upload(b, "mp", "owner", ObjectAttrs(), lock=asked))
    part = h.run(h.store.upload_part(upload, 1, stage(h, b"part")))
    done = h.run(h.store.complete_upload(upload.id, b, "mp", [(1, part.etag)], lambda u, p: {}))
    assert done.lock == asked
    # A bucket without Object Lock never locks, whatever it is asked.
    other = h.new_bucket()
    free = h.run(h.store.put_object(other, "k", stage(h, b"x"), ObjectAttrs(), lock=asked))
    assert free.lock == NO_LOCK


def test_a_locked_version_cannot_be_removed_by_its_id(harness: Harness) -> None:
    h = harness
    b = lock_bucket(h)
    future = time.time_ns() + HOUR_NS
    data = os.urandom(100)
    governance = h.run(
        h.store.put_object(
            b, "g", stage(h, data), ObjectAttrs(), lock=ObjectLock("GOVERNANCE", future)
        )
    )
    compliance = h.run(
        h.store.put_object(
            b, "c", stage(h, data), ObjectAttrs(), lock=ObjectLock("COMPLIANCE", future)
        )
    )
    held = h.run(h.store.put_object(b, "h", stage(h, data), ObjectAttrs(), lock=ObjectLock()))
    h.run(h.store.set_legal_hold(b, "h", None, "ON"))
    for obj in (governance, compliance, held):
        assert isinstance(remove(h, b, obj.key, obj.version_id), ObjectLocked)
        assert h.run(h.store.head_object(b, obj.key)) is not None  # still there
    assert isinstance(remove(h, b, "c", compliance.version_id, bypass=True), ObjectLocked)
    assert isinstance(remove(h, b, "h", held.version_id, bypass=True), ObjectLocked)
    # DeleteObjects: the locked entry fails alone, the others go ahead.
    loose = put(h, b, "loose", b"not locked")
    outcome = h.run(
        h.store.delete_versions(b, [("g", governance.version_id), ("loose", loose.version_id)])
    )
    assert isinstance(outcome[0], ObjectLocked) and outcome[0].code == "AccessDenied"
    assert isinstance(outcome[1], Deleted)
    # A delete without an id still adds a marker over a locked version.
    (marker,) = h.run(h.store.delete_objects(b, ["g"]))
    assert marker.delete_marker
    with pytest.raises(DeleteMarker):
        h.run(h.store.head_object(b, "g"))
    assert isinstance(remove(h, b, "g", governance.version_id), ObjectLocked)
    # GOVERNANCE gives way to the bypass; a legal hold to being lifted.
    assert isinstance(remove(h, b, "g", governance.version_id, bypass=True), Deleted)
    h.run(h.store.set_legal_hold(b, "h", held.version_id, "OFF"))
    assert h.run(h.store.head_object(b, "h")).lock.legal_hold == "OFF"
    assert isinstance(remove(h, b, "h", held.version_id), Deleted)
    settle(h)
    assert files(h) == file_blobs(h)


def test_a_retention_that_has_passed_no_longer_locks(harness: Harness) -> None:
    h = harness
    b = lock_bucket(h)
    past = ObjectLock("COMPLIANCE", time.time_ns() - 1)
    obj = h.run(h.store.put_object(b, "k", stage(h, b"x"), ObjectAttrs(), lock=past))
    # Its retention can be set anew, or removed, and the version removed.
    h.run(h.store.set_retention(b, "k", None, None, None))
    assert h.run(h.store.head_object(b, "k")).lock == NO_LOCK
    assert isinstance(remove(h, b, "k", obj.version_id), Deleted)


def test_retention_changes(harness: Harness) -> None:
    h = harness
    b = lock_bucket(h)
    until = time.time_ns() + HOUR_NS
    put(h, b, "k", b"x")
    set_retention = h.store.set_retention
    h.run(set_retention(b, "k", None, "GOVERNANCE", until))
    h.run(set_retention(b, "k", None, "GOVERNANCE", until + HOUR_NS))  # extending: fine
    for mode, date in (("GOVERNANCE", until), ("COMPLIANCE", until + HOUR_NS), (None, None)):
        with pytest.raises(ObjectLocked):  # shorter, another mode, removed: the bypass
            h.run(set_retention(b, "k", None, mode, date))
    h.run(set_retention(b, "k", None, "COMPLIANCE", until, bypass_governance=True))
    lock = h.run(h.store.head_object(b, "k")).lock
    assert (lock.mode, lock.retain_until_ns) == ("COMPLIANCE", until)
    h.run(set_retention(b, "k", None, "COMPLIANCE", until + 2 * HOUR_NS))
    for mode, date in (("COMPLIANCE", until), ("GOVERNANCE", until + 3 * HOUR_NS), (None, None)):
        with pytest.raises(ObjectLocked):  # COMPLIANCE: never, bypass or not
            h.run(set_retention(b, "k", None, mode, date, bypass_governance=True))
    # The legal hold is kept beside the retention, per version.
    h.run(h.store.set_legal_hold(b, "k", None, "ON"))
    lock = h.run(h.store.head_object(b, "k")).lock
    assert (lock.mode, lock.retain_until_ns, lock.legal_hold) == (
        "COMPLIANCE",
        until + 2 * HOUR_NS,
        "ON",
    )
