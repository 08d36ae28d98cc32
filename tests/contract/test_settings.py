"""What changes beside the bytes, over each backend: a bucket's configuration documents by name
(CORS, policy, ACL, ...), and a version's attrs (its ACL, its tags), each changed without
touching the others."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from gateway.store import errors
from tests.contract.conftest import Harness
from tests.contract.test_writes import put


def test_bucket_settings_are_set_and_deleted_one_by_one(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    assert h.run(h.store.get_bucket(b)).settings == {}
    h.run(h.store.set_bucket_setting(b, "cors", "<CORSConfiguration/>"))
    h.run(h.store.set_bucket_setting(b, "policy", '{"Version": "2012-10-17"}'))
    after = h.run(h.store.set_bucket_setting(b, "cors", "<CORSConfiguration>2</CORSConfiguration>"))
    expected = {
        "cors": "<CORSConfiguration>2</CORSConfiguration>",
        "policy": '{"Version": "2012-10-17"}',
    }
    assert after.settings == expected
    assert h.run(h.store.get_bucket(b)).settings == expected
    # Other changes to the bucket keep them.
    h.run(h.store.set_versioning(b, "Enabled"))
    assert h.run(h.store.get_bucket(b)).settings == expected
    h.run(h.store.set_bucket_setting(b, "cors", None))
    h.run(h.store.set_bucket_setting(b, "missing", None))  # deleting what is not set is fine
    bucket = h.run(h.store.get_bucket(b))
    assert (bucket.settings, bucket.versioning) == (
        {"policy": '{"Version": "2012-10-17"}'},
        "Enabled",
    )
    with pytest.raises(errors.NoSuchBucket):
        h.run(h.store.set_bucket_setting(f"{b}-none", "cors", "x"))


def test_concurrent_settings_of_one_bucket_are_all_kept(harness: Harness) -> None:
    """Each put reads and writes the bucket in its own transaction: twenty at once, none lost."""
    h = harness
    b = h.new_bucket()

    async def all_at_once() -> None:
        await asyncio.gather(*(h.store.set_bucket_setting(b, f"s{n}", str(n)) for n in range(20)))

    h.run(all_at_once())
    assert h.run(h.store.get_bucket(b)).settings == {f"s{n}": str(n) for n in range(20)}


def test_update_attrs_changes_one_version_only(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    h.run(h.store.set_versioning(b, "Enabled"))
    old = put(h, b, "k", b"old")
    new = put(h, b, "k", b"new")

    def tagged(value: str):  # type: ignore[no-untyped-def]
        return lambda version: replace(version.attrs, meta={**version.attrs.meta, "t": value})

    changed = h.run(h.store.update_attrs(b, "k", old.version_id, tagged("old")))
    assert changed.attrs.meta == {"t": "old"} and changed.etag == old.etag
    h.run(h.store.update_attrs(b, "k", None, tagged("latest")))  # the latest: `new`
    assert h.run(h.store.head_object(b, "k", old.version_id)).attrs.meta == {"t": "old"}
    latest = h.run(h.store.head_object(b, "k"))
    assert (latest.version_id, latest.attrs.meta, latest.size) == (
        new.version_id,
        {"t": "latest"},
        3,
    )
    # The lock is kept beside it (one row, both columns).
    assert latest.lock == new.lock
    with pytest.raises(errors.NoSuchKey):
        h.run(h.store.update_attrs(b, "absent", None, tagged("x")))


def test_update_attrs_of_a_null_version_in_an_unversioned_bucket(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    put(h, b, "k", b"data")
    h.run(h.store.update_attrs(b, "k", None, lambda v: replace(v.attrs, content_type="text/plain")))
    got = h.run(h.store.head_object(b, "k"))
    assert (got.attrs.content_type, got.size, got.version_id) == ("text/plain", 4, "null")


def test_attrs_keep_owner_acl_and_tags(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    put(h, b, "k", b"data")
    tags = (("b", "2"), ("a", "1"))  # in the order given, not sorted

    def change(version):  # type: ignore[no-untyped-def]
        return replace(version.attrs, owner="writer", acl='{"grants": []}', tags=tags)

    h.run(h.store.update_attrs(b, "k", None, change))
    got = h.run(h.store.head_object(b, "k")).attrs
    assert (got.owner, got.acl, got.tags) == ("writer", '{"grants": []}', tags)
    # A plain object stores none of them.
    put(h, b, "plain", b"x")
    plain = h.run(h.store.head_object(b, "plain")).attrs
    assert (plain.owner, plain.acl, plain.tags) == (None, None, ())


def test_deletes_answer_in_the_request_order(harness: Harness) -> None:
    """Keys are deleted in byte order (no deadlock between nodes), answered in the order given."""
    h = harness
    b = h.new_bucket()
    for key in ("a", "b", "c"):
        put(h, b, key, key.encode())
    done = h.run(h.store.delete_versions(b, [("c", None), ("zz", None), ("a", None)]))
    assert [d.key for d in done] == ["c", "zz", "a"]  # type: ignore[union-attr]
    assert [e.key for e in h.run(h.store.list_objects(b, "", "", "", 10)).entries] == ["b"]
