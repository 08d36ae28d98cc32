"""The outbox's partitions and their shared leases (store/outbox.py, Store.hold_share), over
each backend: a key's rows are all in its partition, a holder reads its partitions' rows in
order, and the processes with work share the partitions out between them, one holder each,
taking over those of a holder that stopped renewing."""

from __future__ import annotations

import time

from gateway.store import outbox
from gateway.store.api import CatalogTx
from tests.contract.conftest import Harness

_FACTS = outbox.Facts("owner", "p", "127.0.0.1", "r", "h", 1, "etag", (("c", "arn"),)).to_json()
_PARTS = outbox.PARTITIONS


def _append(h: Harness, bucket: str, key: str) -> None:
    async def append(tx: CatalogTx) -> None:
        part = outbox.partition(bucket, key)
        await tx.append_outbox(bucket, key, outbox.PUT, None, 1, _FACTS, part)

    h.write(append)


def _empty(h: Harness) -> None:
    rows = h.run(h.store.read_outbox(1_000_000))
    h.run(h.store.acknowledge([r.seq for r in rows]))


def test_a_partitions_rows_are_read_in_order_and_alone(harness: Harness) -> None:
    h = harness
    _empty(h)
    keys = [f"k{n}" for n in range(40)]
    for _ in range(3):
        for key in keys:
            _append(h, "bucket", key)
    every = h.run(h.store.read_outbox(1_000))
    assert len(every) == 120
    assert all(r.part == outbox.partition("bucket", r.key) for r in every)
    assert len({r.part for r in every}) > 1  # the keys spread over partitions
    some = sorted({r.part for r in every})[:2]
    rows = h.run(h.store.read_outbox(1_000, some))
    assert [r.seq for r in rows] == [r.seq for r in every if r.part in some]  # in order
    assert h.run(h.store.count_outbox(some)) == len(rows)
    assert h.run(h.store.count_outbox()) == 120
    # At most `limit` of each partition: each one's first rows.
    first = h.run(h.store.read_outbox(2, some))
    for part in some:
        assert [r.seq for r in first if r.part == part] == [r.seq for r in rows if r.part == part][
            :2
        ]
    assert h.run(h.store.read_outbox(10, [])) == []
    _empty(h)


def test_the_partitions_are_shared_out_and_taken_over(harness: Harness) -> None:
    h = harness
    group = f"work-{time.time_ns()}"
    first = h.run(h.store.hold_share(group, "first", _PARTS, 600))
    assert first == frozenset(range(_PARTS))  # alone: all of them
    # A second process joins: a member at once, but every partition is held.
    assert h.run(h.store.hold_share(group, "second", _PARTS, 600)) == frozenset()
    # A renewal without a rebalance keeps them; the first's next rebalance gives half back.
    assert h.run(h.store.hold_share(group, "first", _PARTS, 600, rebalance=False)) == first
    kept = h.run(h.store.hold_share(group, "first", _PARTS, 600))
    assert len(kept) == _PARTS // 2
    second = h.run(h.store.hold_share(group, "second", _PARTS, 600))
    assert second == frozenset(range(_PARTS)) - kept  # one holder each, none left out
    # The first stops renewing (a lease of a fraction of a second lapses): the second takes
    # its partitions over; a third process would find none free.
    assert h.run(h.store.hold_share(group, "first", _PARTS, 0.05, rebalance=False)) == kept
    time.sleep(0.1)
    assert h.run(h.store.hold_share(group, "second", _PARTS, 600)) == frozenset(range(_PARTS))
    assert h.run(h.store.hold_share(group, "first", _PARTS, 600, rebalance=False)) == frozenset()
    # The first is still a member (it asked): a third process joining counts it.
    assert len(h.run(h.store.hold_share(group, "third", _PARTS, 600))) == 0  # none free
    # Given back, they are free at once, and a member that leaves no longer counts.
    h.run(h.store.drop_share(group, "second"))
    h.run(h.store.drop_share(group, "first"))
    assert h.run(h.store.hold_share(group, "third", _PARTS, 600)) == frozenset(range(_PARTS))
    # Another group's leases are another matter.
    assert h.run(h.store.hold_share(group + "x", "second", 4, 600)) == frozenset(range(4))
    h.run(h.store.drop_share(group, "third"))
    h.run(h.store.drop_share(group + "x", "second"))
