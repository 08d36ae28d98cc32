"""Versions through the Store over each backend: what each versioning state makes of a write
and a delete, the null version, delete markers, removal by id with the next version promoted,
and reference counts (a blob lives while any version uses it)."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from gateway.store import errors
from gateway.store.model import NULL_VERSION, ObjectAttrs
from gateway.store.versions import DeleteMarker, NoSuchVersion, is_version_id
from tests.contract.conftest import Harness
from tests.contract.test_writes import _chunks, file_blobs, files, put, read, refs, settle


def versioned(h: Harness, status: str = "Enabled") -> str:
    b = h.new_bucket()
    h.run(h.store.set_versioning(b, status))
    return b


def head(h: Harness, b: str, key: str, version_id: str | None = None):  # type: ignore[no-untyped-def]
    return h.run(h.store.head_object(b, key, version_id))


def read_version(h: Harness, b: str, key: str, version_id: str) -> bytes:
    async def go() -> bytes:
        reader = await h.store.open_object(b, key, version_id)
        try:
            return b"".join([c async for c in reader.chunks(0, reader.info.size)])
        finally:
            reader.close()

    return h.run(go())


def delete(h: Harness, b: str, key: str, version_id: str | None = None):  # type: ignore[no-untyped-def]
    (done,) = h.run(h.store.delete_versions(b, [(key, version_id)]))
    return done


def test_versioning_state_is_kept_on_the_bucket(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    assert h.run(h.store.get_bucket(b)).versioning is None
    for status in ("Suspended", "Enabled", "Suspended"):
        assert h.run(h.store.set_versioning(b, status)).versioning == status
        assert h.run(h.store.get_bucket(b)).versioning == status
    with pytest.raises(errors.NoSuchBucket):
        h.run(h.store.set_versioning("no-such-bucket", "Enabled"))


def test_unversioned_writes_replace_the_null_version(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    first = put(h, b, "k", os.urandom(30))
    second = put(h, b, "k", os.urandom(30))
    settle(h)
    assert first.version_id == second.version_id == NULL_VERSION
    assert first.extents[0].blob not in files(h)
    (done,) = h.run(h.store.delete_objects(b, ["k"]))
    assert (done.delete_marker, done.marker_version_id) == (False, None)
    assert h.run(h.store.delete_bucket(b)) is None


def test_enabled_writes_keep_every_version(harness: Harness) -> None:
    h = harness
    b = versioned(h)
    bodies = [os.urandom(20 + n) for n in range(4)]
    objs = [put(h, b, "k", data) for data in bodies]
    ids = [o.version_id for o in objs]
    assert all(is_version_id(v) and v != NULL_VERSION for v in ids)
    assert len(set(ids)) == 4 and sorted(ids) == ids[::-1]  # newest first
    assert [o.mtime_ns for o in objs] == sorted(o.mtime_ns for o in objs)
    for obj, data in zip(objs, bodies, strict=True):
        assert head(h, b, "k", obj.version_id) == obj
        assert read_version(h, b, "k", obj.version_id) == data
        assert refs(h)[obj.extents[0].blob] == 1 and obj.extents[0].blob in files(h)
    assert head(h, b, "k") == objs[-1]
    assert read(h, b, "k") == bodies[-1]
    # ListObjects sees the key once.
    assert [e.key for e in h.run(h.store.list_objects(b, "", "", "", 10)).entries] == ["k"]


def test_markers_hide_and_removal_by_id_promotes(harness: Harness) -> None:
    h = harness
    b = versioned(h)
    old = put(h, b, "k", b"old bytes")
    new = put(h, b, "k", b"new bytes")
    done = delete(h, b, "k")
    assert done.delete_marker and is_version_id(done.marker_version_id)
    marker = done.marker_version_id
    with pytest.raises(DeleteMarker) as exc:
        head(h, b, "k")
    assert (exc.value.code, exc.value.by_id, exc.value.marker.version_id) == (
        "NoSuchKey",
        False,
        marker,
    )
    with pytest.raises(DeleteMarker) as exc:
        head(h, b, "k", marker)
    assert exc.value.code == "MethodNotAllowed" and exc.value.by_id
    assert h.run(h.store.list_objects(b, "", "", "", 10)).entries == ()
    assert head(h, b, "k", old.version_id) == old
    # Removing the marker: the newest object is the latest again.
    removed = delete(h, b, "k", marker)
    assert (removed.delete_marker, removed.marker_version_id) == (True, marker)
    assert head(h, b, "k") == new
    # Removing the latest object promotes the one before it.
    removed = delete(h, b, "k", new.version_id)
    assert (removed.version_id, removed.delete_marker) == (new.version_id, False)
    settle(h)
    assert head(h, b, "k") == old and new.extents[0].blob not in files(h)
    with pytest.raises(NoSuchVersion):
        head(h, b, "k", new.version_id)
    # An id that names nothing: no error, nothing changes.
    assert delete(h, b, "k", new.version_id).version_id == new.version_id
    assert head(h, b, "k") == old
    delete(h, b, "k", old.version_id)
    with pytest.raises(errors.NoSuchKey) as plain:
        head(h, b, "k")
    assert not isinstance(plain.value, DeleteMarker)
    h.run(h.store.delete_bucket(b))  # nothing left: no version, no marker
    assert files(h) == file_blobs(h)


def test_suspended_writes_and_deletes_replace_the_null_version(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    before = put(h, b, "k", b"from before versioning")  # the null version
    h.run(h.store.set_versioning(b, "Enabled"))
    real = put(h, b, "k", b"a real version")
    assert head(h, b, "k", NULL_VERSION) == before
    h.run(h.store.set_versioning(b, "Suspended"))
    null = put(h, b, "k", os.urandom(50))  # replaces the noncurrent null version
    settle(h)
    assert null.version_id == NULL_VERSION and null.mtime_ns > real.mtime_ns
    assert before.extents[0].blob not in refs(h) and before.extents[0].blob not in files(h)
    assert head(h, b, "k") == null and head(h, b, "k", real.version_id) == real
    done = delete(h, b, "k")  # a null marker replaces the null object
    assert (done.delete_marker, done.marker_version_id) == (True, NULL_VERSION)
    assert null.extents[0].blob not in files(h)
    with pytest.raises(DeleteMarker):
        head(h, b, "k", NULL_VERSION)
    done = delete(h, b, "k")  # and the next replaces that marker
    assert done.marker_version_id == NULL_VERSION
    assert delete(h, b, "k", NULL_VERSION).delete_marker
    assert head(h, b, "k") == real  # no marker left on top: the real version is the latest
    assert files(h) == file_blobs(h)


def test_a_version_is_later_than_the_latest_even_when_the_clock_goes_back(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    b = versioned(h)
    first = put(h, b, "k", b"1")
    monkeypatch.setattr(time, "time_ns", lambda: first.mtime_ns - 10**12)  # 1000 s earlier
    second = put(h, b, "k", b"2")
    marker = delete(h, b, "k").marker_version_id
    monkeypatch.undo()
    assert second.mtime_ns == first.mtime_ns + 1
    assert marker < second.version_id < first.version_id  # newest first still
    assert delete(h, b, "k", marker).delete_marker
    assert head(h, b, "k") == second


def test_concurrent_versioned_writers_keep_every_version_counted(harness: Harness) -> None:
    h = harness
    b = versioned(h)
    bodies = [os.urandom(64 + n) for n in range(30)]

    async def storm() -> list[object]:
        async def one(n: int) -> object:
            if n % 3 == 2:
                return await h.store.delete_objects(b, ["k"])
            blob = await h.store.stage(_chunks(bodies[n]))
            return await h.store.put_object(b, "k", blob, ObjectAttrs())

        return await asyncio.gather(*(one(n) for n in range(30)), return_exceptions=True)

    outcomes = h.run(storm())
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    settle(h)
    written = [o for n, o in enumerate(outcomes) if n % 3 != 2]
    for obj in written:
        assert head(h, b, "k", obj.version_id) == obj  # type: ignore[attr-defined]
    assert files(h) == file_blobs(h)
    # Every version holds exactly its own blob.
    blobs = {obj.extents[0].blob for obj in written}  # type: ignore[attr-defined]
    assert {blob: refs(h)[blob] for blob in blobs} == dict.fromkeys(blobs, 1)
