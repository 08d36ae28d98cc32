"""A bucket's leases (the lifecycle worker's, one holder at a time across processes and nodes),
over each backend: taken, refused while another holds them, given back by their holder alone."""

from __future__ import annotations

import pytest

from gateway.store import errors
from tests.contract.conftest import Harness


def test_a_held_lease_is_refused_to_another_holder(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    assert h.run(h.store.take_lease(b, "lifecycle", "first", 600))
    assert not h.run(h.store.take_lease(b, "lifecycle", "second", 600))
    # Its holder renews it; another lease of the bucket is another matter.
    assert h.run(h.store.take_lease(b, "lifecycle", "first", 600))
    assert h.run(h.store.take_lease(b, "other", "second", 600))


def test_a_released_lease_is_taken_at_once_by_another_holder(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    assert h.run(h.store.take_lease(b, "lifecycle", "first", 600))
    assert h.run(h.store.release_lease(b, "lifecycle", "first"))
    assert h.run(h.store.take_lease(b, "lifecycle", "second", 600))
    # Released, it leaves nothing in the bucket's settings.
    h.run(h.store.release_lease(b, "lifecycle", "second"))
    assert h.run(h.store.get_bucket(b)).settings == {}


def test_a_release_by_another_holder_does_nothing(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    assert h.run(h.store.take_lease(b, "lifecycle", "first", 600))
    assert not h.run(h.store.release_lease(b, "lifecycle", "second"))
    assert not h.run(h.store.take_lease(b, "lifecycle", "second", 600))
    # Nor does a release of a lease nobody holds, or of the holder's own other lease.
    assert not h.run(h.store.release_lease(b, "other", "first"))
    assert h.run(h.store.take_lease(b, "lifecycle", "first", 600))


def test_a_release_in_a_bucket_gone_does_nothing(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    assert h.run(h.store.take_lease(b, "lifecycle", "first", 600))
    h.run(h.store.delete_bucket(b))
    assert not h.run(h.store.release_lease(b, "lifecycle", "first"))
    with pytest.raises(errors.NoSuchBucket):
        h.run(h.store.take_lease(b, "lifecycle", "first", 600))
