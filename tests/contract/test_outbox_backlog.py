"""A destination's backlog (Store.outbox_backlog, store/outbox.py), over each backend: the
outbox rows whose targets name its ARN exactly (not a longer ARN it begins, not `_` as a
wildcard), counted within a bound of the first rows and said to be a lower bound past it."""

from __future__ import annotations

from gateway.store import outbox
from gateway.store.api import CatalogTx
from tests.contract.conftest import Harness

_A = "arn:aws:sns:us-east-1:123456789012:t_1"
_A_LONGER = _A + "0"
_A_LIKE = "arn:aws:sns:us-east-1:123456789012:tx1"  # what `t_1` matches as a LIKE pattern


def _append(h: Harness, key: str, *arns: str) -> None:
    targets = tuple((f"config-{n}", arn) for n, arn in enumerate(arns))
    facts = outbox.Facts("owner", "p", "127.0.0.1", "r", "h", 1, "etag", targets).to_json()

    async def append(tx: CatalogTx) -> None:
        await tx.append_outbox(
            "bucket", key, outbox.PUT, None, 1, facts, outbox.partition("bucket", key)
        )

    h.write(append)


def test_a_backlog_counts_the_rows_naming_its_destination(harness: Harness) -> None:
    h = harness
    before = h.run(h.store.read_outbox(1_000_000))
    h.run(h.store.acknowledge([r.seq for r in before]))
    assert h.run(h.store.outbox_backlog(_A)) == outbox.Backlog(0, False)

    _append(h, "a", _A)
    _append(h, "b", _A_LONGER)
    _append(h, "c", _A_LONGER, _A)
    _append(h, "d", _A_LIKE)
    _append(h, "e", _A)
    assert h.run(h.store.outbox_backlog(_A)) == outbox.Backlog(3, False)
    assert h.run(h.store.outbox_backlog(_A_LONGER)) == outbox.Backlog(2, False)
    assert h.run(h.store.outbox_backlog(_A_LIKE)) == outbox.Backlog(1, False)
    # Within the first rows only: a lower bound, "N+".
    assert h.run(h.store.outbox_backlog(_A, within=2)) == outbox.Backlog(1, True)
    assert str(h.run(h.store.outbox_backlog(_A, within=3))) == "2+"

    rows = h.run(h.store.read_outbox(100))
    h.run(h.store.acknowledge([r.seq for r in rows if r.key in ("a", "c")]))
    assert h.run(h.store.outbox_backlog(_A)) == outbox.Backlog(1, False)
    h.run(h.store.acknowledge([r.seq for r in rows]))
    assert h.run(h.store.outbox_backlog(_A)) == outbox.Backlog(0, False)
