"""A resync (gateway/replication/resync.py) over a Store of its own, on SQLite: versions that
span listing pages are queued oldest first per key, delete markers and versions no rule applies
to are not, each queued version is PENDING with one outbox row naming its rules, and a second
run queues them again only while they are not COMPLETED."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.replication import matching, resync
from gateway.store import ObjectAttrs, open_store, outbox

_CONFIG = """<ReplicationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Role>arn:aws:iam::123456789012:role/replication</Role>
<Rule><ID>logs</ID><Priority>1</Priority><Filter><Prefix>logs/</Prefix></Filter>
<Status>Enabled</Status><DeleteMarkerReplication><Status>Disabled</Status>
</DeleteMarkerReplication><Destination><Bucket>arn:aws:s3:::dst</Bucket></Destination></Rule>
</ReplicationConfiguration>"""


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


def test_versions_across_pages_are_queued_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resync, "PAGE", 2)  # a key's versions span pages

    async def run() -> None:
        store = open_store(tmp_path / "data")
        store.replicas = matching.replicas
        try:
            await store.create_bucket("src", "owner", "us-east-1")
            await store.set_versioning("src", "Enabled")
            made: dict[str, list[str]] = {}
            for key in ("logs/a", "logs/a", "logs/a", "logs/b", "other", "logs/gone"):
                blob = await store.stage(_body(key.encode()))
                put = await store.put_object("src", key, blob, ObjectAttrs())
                assert put.version_id is not None
                made.setdefault(key, []).append(put.version_id)
            await store.delete_objects("src", ["logs/gone"])  # its marker is not queued
            await store.set_bucket_setting("src", outbox.REPLICATION, _CONFIG)

            summary = await resync.resync(store, "src")
            assert (summary.queued, summary.replicated, summary.skipped) == (5, 0, 1)
            rows = await store.read_outbox(100)
            assert [(r.key, r.version_id) for r in rows] == [
                *[("logs/a", v) for v in made["logs/a"]],
                ("logs/b", made["logs/b"][0]),
                ("logs/gone", made["logs/gone"][0]),
            ]
            for row in rows:
                assert row.event == outbox.PUT
                assert outbox.Facts.from_json(row.facts).targets == (("logs", "arn:aws:s3:::dst"),)
                found = await store.head_object("src", row.key, row.version_id)
                assert found.attrs.replication == "PENDING"

            # One copied since: the next run counts it, and queues the others again.
            first = made["logs/a"][0]
            await store.set_replication("src", "logs/a", first, "COMPLETED")
            summary = await resync.resync(store, "src", "logs")
            assert (summary.queued, summary.replicated, summary.skipped) == (4, 1, 1)

            with pytest.raises(resync.ResyncError, match="no enabled rule 'other'"):
                await resync.resync(store, "src", "other")
        finally:
            store.close()

    asyncio.run(run())
