"""Random sequences of versioned writes through the Store over each backend, checked after every
step against a model of S3's versioning: PUT, copy (from the latest or an older version),
DELETE, DELETE of one version by id, and versioning turned on and suspended, in any order.

After every step: each key's versions and delete markers, newest first, are the model's (as
ListObjectVersions and GET by id see them), the latest is what GET and ListObjects see, every
blob's reference count equals the references of every version, and the blob files on disk
are exactly those the catalog keeps in files."""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from gateway.store import errors
from gateway.store.model import NULL_VERSION, ObjectAttrs
from gateway.store.versions import DeleteMarker, NoSuchVersion
from tests.contract.conftest import Harness
from tests.contract.test_versions import read_version
from tests.contract.test_writes import file_blobs, files, read, settle, stage

KEYS = st.sampled_from(["a", "b", "dir/c"])
# Inline (up to the harness's 4 bytes) and file blobs.
SIZES = st.sampled_from([0, 3, 10, 1000])
# A version as the model keeps it: (id, bytes), bytes None for a delete marker.
Version = tuple[str, bytes | None]


def test_versioned_writes_match_the_model(harness: Harness) -> None:
    h = harness

    class VersionModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.bucket = h.new_bucket()
            self.state: str | None = None
            self.keys: dict[str, list[Version]] = {}  # newest first

        # --- steps ---------------------------------------------------------------------------

        @rule(status=st.sampled_from(["Enabled", "Suspended"]))
        def set_versioning(self, status: str) -> None:
            h.run(h.store.set_versioning(self.bucket, status))
            self.state = status

        @rule(key=KEYS, size=SIZES)
        def put(self, key: str, size: int) -> None:
            data = os.urandom(size)
            obj = h.run(h.store.put_object(self.bucket, key, stage(h, data), ObjectAttrs()))
            self._add(key, obj.version_id, data)

        @rule(source=KEYS, pick=st.integers(0, 3), latest=st.booleans(), key=KEYS)
        def copy(self, source: str, pick: int, latest: bool, key: str) -> None:
            history = self.keys.get(source, [])
            if latest or not history:
                wanted, expected = None, history[0] if history else None
            else:
                expected = history[pick % len(history)]
                wanted = expected[0]
            try:
                obj = h.run(h.store.head_object(self.bucket, source, wanted))
            except (errors.NoSuchKey, NoSuchVersion, DeleteMarker):
                # Nothing to copy from: no version, or a delete marker.
                assert expected is None or expected[1] is None
                return
            assert expected is not None and expected[1] is not None
            copy = h.run(h.store.copy_object(obj, self.bucket, key, ObjectAttrs(), obj.etag))
            assert copy.extents == obj.extents  # metadata only
            self._add(key, copy.version_id, expected[1])

        @rule(key=KEYS)
        def delete(self, key: str) -> None:
            (done,) = h.run(h.store.delete_objects(self.bucket, [key]))
            if self.state is None:
                assert not done.delete_marker
                self.keys.pop(key, None)
                return
            assert done.delete_marker and done.marker_version_id is not None
            self._add(key, done.marker_version_id, None)

        @rule(key=KEYS, pick=st.integers(0, 3))
        def delete_version(self, key: str, pick: int) -> None:
            history = self.keys.get(key, [])
            # A version of the key, or an id that names nothing (not an error).
            version_id = history[pick % len(history)][0] if history else "0" * 32
            if self.state is None and version_id != NULL_VERSION:
                return  # the protocol layer refuses such ids before the store sees them
            (done,) = h.run(h.store.delete_versions(self.bucket, [(key, version_id)]))
            removed = [v for v in history if v[0] == version_id]
            assert done.delete_marker is bool(removed and removed[0][1] is None)
            self.keys[key] = [v for v in history if v[0] != version_id]

        def _add(self, key: str, version_id: str, data: bytes | None) -> None:
            """A new latest version, as S3 makes it in the bucket's state."""
            history = self.keys.get(key, [])
            if self.state == "Enabled":
                assert version_id != NULL_VERSION
                assert all(version_id < v for v, _ in history)  # ids sort newest first
            else:
                # Unversioned or suspended: the null version is replaced, wherever it was.
                assert version_id == NULL_VERSION
                history = [v for v in history if v[0] != NULL_VERSION]
            self.keys[key] = [(version_id, data), *history]

        # --- checks --------------------------------------------------------------------------

        @invariant()
        def versions_are_the_models(self) -> None:
            page = h.run(h.store.list_versions(self.bucket, "", "", "", "", 1000))
            assert not page.truncated
            listed = [(e.key, e.version_id, e.delete_marker, e.is_latest) for e in page.entries]
            assert listed == [
                (key, vid, data is None, age == 0)
                for key in sorted(self.keys)
                for age, (vid, data) in enumerate(self.keys[key])
            ]
            for key, history in self.keys.items():
                for vid, data in history:
                    if data is not None:
                        assert read_version(h, self.bucket, key, vid) == data

        @invariant()
        def the_latest_is_what_get_and_listing_see(self) -> None:
            current = sorted(k for k, hist in self.keys.items() if hist and hist[0][1] is not None)
            page = h.run(h.store.list_objects(self.bucket, "", "", "", 1000))
            assert [e.key for e in page.entries] == current
            for key in current:
                assert read(h, self.bucket, key) == self.keys[key][0][1]

        @invariant()
        def references_and_files_are_exact(self) -> None:
            settle(h)

            async def audit() -> tuple[dict[str, int], Counter[str]]:
                audit = h.store.catalog.audit
                counts = {row.id: row.refs async for row in audit.audit_blobs()}
                found: Counter[str] = Counter()
                async for obj in audit.audit_objects():
                    found.update(e.blob for e in obj.extents)
                async for part, _ in audit.audit_parts():
                    found.update(e.blob for e in part.extents)
                return counts, found

            counts, found = h.run(audit())
            assert counts == dict(found)
            assert files(h) == file_blobs(h)

    run_state_machine_as_test(
        VersionModel,
        settings=settings(
            max_examples=40,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
