"""`s3gw replicate resync`: queue a bucket's existing versions for its replication rules, as
AWS's S3 Batch Replication does for "existing objects" (objects made before a rule, or whose
copy failed). Every version that is an object (not a delete marker) and that an enabled rule
applies to now, and whose copies are not made already (COMPLETED), gets status PENDING and an
outbox row naming its rules, one catalog transaction per version (Store.requeue_replication):
the notifications worker of a running gateway, or of the next one started, copies it as it
copies a new write. Running it again queues only what is still not COMPLETED: it resumes.

Only catalog rows are written, never a blob: it runs beside a gateway serving the folder (the
folder held shared, as the gateway's own workers hold it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..store import Store, outbox
from ..store.errors import NoSuchBucket
from ..store.model import ListEntry
from .configuration import Configuration

# Versions per ListObjectVersions page.
PAGE = 1000


class ResyncError(Exception):
    """What stops a resync before it queues anything: one line for the operator."""


@dataclass
class Summary:
    bucket: str
    queued: int = 0
    replicated: int = 0
    skipped: int = 0

    @property
    def seen(self) -> int:
        return self.queued + self.replicated + self.skipped

    def render(self) -> str:
        return (
            f"{self.bucket}: queued {self.queued}, already replicated {self.replicated}, "
            f"skipped {self.skipped} not matching (of {self.seen} versions)"
        )


async def check(store: Store, bucket: str, rule_id: str | None) -> Configuration:
    """The bucket's replication configuration, with the rule asked for among its enabled ones;
    ResyncError otherwise."""
    found = await store.get_bucket(bucket)
    if found is None:
        raise ResyncError(f"no such bucket: {bucket}")
    document = found.settings.get(outbox.REPLICATION)
    if document is None:
        raise ResyncError(f"the bucket {bucket} has no replication configuration")
    config = Configuration.from_document(document)
    enabled = [r.id for r in config.rules if r.enabled]
    if rule_id is not None and rule_id not in enabled:
        known = ", ".join(enabled) or "none"
        raise ResyncError(f"no enabled rule {rule_id!r} in {bucket}'s configuration ({known})")
    if not enabled:
        raise ResyncError(f"the bucket {bucket}'s replication rules are all disabled")
    return config


async def resync(
    store: Store,
    bucket: str,
    rule_id: str | None = None,
    progress: Callable[[Summary], None] = lambda summary: None,
) -> Summary:
    """Queue the bucket's existing versions (see the module); `progress` hears of each."""
    await check(store, bucket, rule_id)
    summary = Summary(bucket)
    key_marker = version_marker = ""
    held: list[ListEntry] = []  # the last key of a page, whose older versions may follow
    while True:
        try:
            page = await store.list_versions(bucket, "", "", key_marker, version_marker, PAGE)
        except NoSuchBucket:
            raise ResyncError(f"no such bucket: {bucket} (deleted meanwhile)") from None
        entries = held + [e for e in page.entries if not e.delete_marker]
        held = []
        if page.truncated and entries:
            last = entries[-1].key
            held = [e for e in entries if e.key == last]
            entries = [e for e in entries if e.key != last]
        await _queue(store, bucket, rule_id, entries, summary, progress)
        if not page.truncated:
            break
        key_marker, version_marker = page.next_key or "", page.next_version_id or ""
    return summary


async def _queue(
    store: Store,
    bucket: str,
    rule_id: str | None,
    entries: list[ListEntry],
    summary: Summary,
    progress: Callable[[Summary], None],
) -> None:
    # A listing gives a key's versions newest first; they are queued oldest first, so that
    # the worker, in order per key, copies them in the order they were made.
    start = 0
    while start < len(entries):
        end = start
        while end < len(entries) and entries[end].key == entries[start].key:
            end += 1
        for entry in reversed(entries[start:end]):
            outcome = await store.requeue_replication(bucket, entry.key, entry.version_id, rule_id)
            if outcome == outbox.QUEUED:
                summary.queued += 1
            elif outcome == outbox.REPLICATED:
                summary.replicated += 1
            else:
                summary.skipped += 1
            progress(summary)
        start = end
