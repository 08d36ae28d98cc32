"""Which replication rules copy a change (the Store's `replicas`, store/outbox.py): the bucket's
configuration (configuration.py) read against the event, the key and the version's tags, as
AWS's "What is replicated" page says:

- a new object or version (ObjectCreated's kinds) goes to every rule that applies to it;
- a delete marker made by a DELETE without a version id goes only where the rule's
  DeleteMarkerReplication is Enabled (never a rule with a tag filter, which AWS refuses);
- a DELETE of a version by its id, and lifecycle's expirations, are never replicated;
- a tag change (ObjectTagging's kinds) goes to the rules that apply to the version's tags now;
- a change that is itself a replica goes on only where ReplicaModifications is Enabled, so
  two buckets replicating to each other do not copy back and forth;
- a version encrypted with SSE-KMS goes only where SourceSelectionCriteria's
  SseKmsEncryptedObjects is Enabled (AWS's default is not to replicate them).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..store import outbox
from .configuration import Configuration

CREATED = frozenset((outbox.PUT, outbox.POST, outbox.COPY, outbox.COMPLETE))
TAGGING = frozenset((outbox.TAGGED, outbox.UNTAGGED))


def replicas(
    document: str, event: str, key: str, tags: Mapping[str, str], replica: bool, kms: bool
) -> list[tuple[str, str]]:
    """The (rule id, destination bucket ARN) pairs a change is copied to (`kms`: the version
    is encrypted with SSE-KMS)."""
    if event not in CREATED and event not in TAGGING and event != outbox.MARKER:
        return []
    rules = Configuration.from_document(document).rules_for(key, tags)
    if replica:
        rules = [r for r in rules if r.replica_modifications]
    if kms:
        rules = [r for r in rules if r.sse_kms_objects]
    if event == outbox.MARKER:
        rules = [r for r in rules if r.delete_markers and not r.tags]
    return [(r.id, outbox.BUCKET_ARN + r.destination.bucket) for r in rules]
