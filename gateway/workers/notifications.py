"""The notifications worker: delivers the outbox's events (gateway/store/outbox.py) to the
destinations each names, at least once, in order for each key.

The outbox is split in partitions by key (store/outbox.py, PARTITIONS): each is delivered by one
process at a time, whatever number of worker processes and nodes share the catalog, the one
holding its lease "notifications/p/N" (Store.hold_share). The processes with rows to deliver
share the partitions out between them (each a member of the work, its lease
"notifications/m/HOLDER"): a process that joins gets its share once the others gave theirs
back, at their next rebalance (at most every LEASE_SECONDS / 3, at the start of a pass). The
leases are renewed while the holder works and given back on a clean stop, and when the whole
outbox is empty; a holder that dies leaves them to lapse (LEASE_SECONDS), and the others take
them over.

A pass reads its partitions' first rows in order. For each row, each configuration it fired gets
AWS's record (notify/records.py) at its topic's endpoint, through the sender of the endpoint's
scheme (notify/targets.py: the webhook, NATS, MQTT, Redis, AMQP); the row is removed once every
one of them acknowledged (a 2xx, the broker's ack). A destination that fails (a 5xx, a
refused connection, no answer in time) is not tried again in that pass, and a row that could
not be delivered holds back the later rows of its key (the order for a key is the order of its
changes); other keys go on. Failed rows are tried again after a pause that doubles up to
BACKOFF_MAX. A destination that acknowledged a row is not sent it again while this process
holds the lease; after a crash or a change of holder it may be (at least once, never lost).

A topic deleted since the change was recorded has nowhere to go, nor has another account's
topic whose Policy no longer allows the bucket's account: its records are dropped, with a
warning naming the topic. So is an event that has waited longer than the retention
(--notify-retention, a week by default). Both are counted (s3gw_notifications_dropped).

A row's replication targets (a destination bucket's ARN, store/outbox.py) are copies to make:
replication/copier.py makes each, and once every rule of a new version is done with, the
version's status says COMPLETED (or FAILED: a copy that can never be made). Such a row is not
dropped for its age: it waits for its destination (docs/replication.md).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping

from .. import metrics
from ..notify import records, topics
from ..notify.networks import Networks
from ..notify.targets import Senders
from ..notify.topics import Topic
from ..replication.copier import ORIGIN, Replicator
from ..replication.matching import CREATED
from ..store import Store, StoreError, outbox
from ..store.model import OutboxRecord
from ..store.outbox import Facts

log = logging.getLogger(__name__)

LEASE = "notifications"  # the work's leases: LEASE/p/N, partition N's; LEASE/m/HOLDER, a member
# The s3Operation of a failed replication's event, by the change's event.
_OPERATIONS = {
    outbox.MARKER: "DELETE_MARKER_PUT",
    outbox.TAGGED: "OBJECT_TAGGING_PUT",
    outbox.UNTAGGED: "OBJECT_TAGGING_DELETE",
}
# Short, so that a holder that died (SIGKILL, a lost node) is taken over within seconds; the
# holder renews it once a third has gone.
LEASE_SECONDS = 15.0
PAGE = 200
# Keys delivered at once in a pass: a key's rows go one after another (its order), different
# keys side by side, so that a destination's round trip is not paid once per row in turn.
KEYS_AT_ONCE = 16
# Delivered rows are removed this many at a time (one catalog transaction each): what a crash
# of the holder leaves to deliver again is the rows in flight and at most two such batches.
ACK_EVERY = 64
IDLE = 0.25  # seconds between looks at an empty outbox
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 10.0

# (row, configuration id, destination ARN): a delivery acknowledged.
_Sent = tuple[int, str, str]


class NotificationWorker:
    def __init__(
        self,
        store: Store,
        region: str,
        networks: Networks,
        open_secret: Callable[[str], bytes] | None,
        retention: float = 604_800.0,
        replicator: Replicator | None = None,
        accounts: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        # The gateway's accounts' canonical ids by number: whose registry another account's
        # topic ARN names (none given: the bucket owners' own topics only).
        self.accounts: Mapping[str, str] = accounts or {}
        self.retention_ns = int(retention * 1e9)
        self.region = region
        self.networks = networks
        self.open_secret = open_secret
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.held: frozenset[int] = frozenset()  # the partitions this process delivers
        self.held_at: float | None = None  # monotonic time the leases were last renewed
        self.balanced_at = 0.0  # monotonic time of the last rebalance (hold_share)
        self._holding = asyncio.Lock()  # one renewal at a time (a pass delivers keys at once)
        self.backoff = 0.0
        self.sent: set[_Sent] = set()
        # Destinations failing now: a warning when one starts failing, a line when it is back
        # (not one per retry of a destination down for days).
        self.failing: set[str] = set()
        self.sender = Senders(networks)  # the sender of each endpoint's scheme
        self.replicator = replicator  # the copies of replication rules (None: none made)
        # Rows a rule failed for good (their status FAILED), with what the event says of it.
        self.gave_up: dict[int, dict[str, str]] = {}
        self.waiting: set[str] = set()  # destinations with a record waiting (their age shown)
        self.rules: set[tuple[str, str]] = set()  # (bucket, rule) with a copy waiting (shown)

    async def run_forever(self) -> None:
        unavailable = False
        try:
            while True:
                try:
                    pause = await self.pass_once()
                    unavailable = False
                except asyncio.CancelledError:
                    raise
                except StoreError as exc:
                    # The catalog down or full: said once, tried again until it is back.
                    if not unavailable:
                        log.warning("notifications: the outbox cannot be read now: %s", exc)
                    unavailable = True
                    pause = self._failed()
                except Exception:  # a pass that fails is tried again, never fatal
                    log.exception("notifications: a delivery pass failed")
                    pause = self._failed()
                await asyncio.sleep(pause)
        finally:
            await self.sender.close()
            if self.replicator is not None:
                self.replicator.close()

    async def pass_once(self) -> float:
        """A pass if there is anything to deliver; the pause before the next. A process that
        holds no partition takes some only when the outbox has rows: an idle gateway, or a
        bucket without notifications, writes nothing for it."""
        if not self.held and not await self.store.read_outbox(1):
            await self.release_lease()  # a member that waited for a share: none is needed now
            return IDLE
        return await self.run_once() if await self._hold(rebalance=True) else LEASE_SECONDS / 3

    async def _hold(self, rebalance: bool = False) -> bool:
        """Renew the partitions' leases once a third of them has gone (taking the share of
        them due, when `rebalance`: at the start of a pass); whether any is held."""
        now = time.monotonic()
        renew = self.held_at is None or now - self.held_at >= LEASE_SECONDS / 3
        balance = rebalance and now - self.balanced_at >= LEASE_SECONDS / 3
        if not renew and not balance:
            return bool(self.held)
        held = await self.store.hold_share(
            LEASE, self.holder, outbox.PARTITIONS, LEASE_SECONDS, balance
        )
        if self.held - held:
            self.sent.clear()  # rows of partitions another holder delivers now
        self.held, self.held_at = held, now
        self.balanced_at = now if balance else self.balanced_at
        if not held:
            metrics.NOTIFY_PENDING.set(0)  # other holders count them now
            self._oldest([])
        return bool(held)

    async def _acknowledge(self, seqs: list[int]) -> None:
        """Remove rows every destination has acknowledged."""
        if not seqs:
            return
        await self.store.acknowledge(seqs)
        finished = set(seqs)
        self.sent = {s for s in self.sent if s[0] not in finished}
        metrics.NOTIFY_PENDING.dec(len(seqs))

    async def _holds(self, part: int) -> bool:
        """Whether this process still holds partition `part`, its leases renewed if due (the
        keys a pass delivers side by side: one of them renews at a time)."""
        async with self._holding:
            await self._hold()
        return part in self.held

    async def release_lease(self) -> None:
        """Give the leases back (on a clean stop, or with nothing to deliver), so that other
        processes, or a restarted gateway, deliver at once."""
        if self.held_at is None:
            return
        self.held, self.held_at, self.balanced_at = frozenset(), None, 0.0
        self.sent.clear()
        try:
            await self.store.drop_share(LEASE, self.holder)
        except Exception:  # they lapse on their own; the stop goes on
            log.warning("notifications: could not give back the leases")

    def _failed(self) -> float:
        self.backoff = min(BACKOFF_MAX, max(BACKOFF_FIRST, self.backoff * 2))
        return self.backoff

    async def run_once(self) -> float:
        """One pass over the outbox's first rows; the pause before the next."""
        parts = sorted(self.held)
        each = max(1, PAGE // len(parts))  # rows of each partition this pass
        rows = await self.store.read_outbox(each, parts)
        full = any(n == each for n in collections.Counter(r.part for r in rows).values())
        metrics.NOTIFY_PENDING.set(await self.store.count_outbox(parts) if full else len(rows))
        if not rows:
            self._oldest([])
            if not await self.store.read_outbox(1):
                # Nothing in flight anywhere: the leases go back (no renewal while idle), and
                # are taken again by whichever processes see a row first.
                await self.release_lease()
            return IDLE
        found: dict[str, dict[str, str]] = {}  # topics' documents by account, read once a pass
        opened: dict[tuple[str, str, str], Topic | None] = {}  # (ARN, bucket, owner): a topic
        failed: set[str] = set()  # destinations that failed in this pass
        held: set[tuple[str, str]] = set()  # keys with a row not delivered
        done: list[int] = []
        expired = time.time_ns() - self.retention_ns
        chains: dict[tuple[str, str], list[OutboxRecord]] = {}  # each key's rows, in order
        for row in rows:
            if row.time_ns < expired and outbox.BUCKET_ARN not in row.facts:
                # Waited longer than the retention: dropped, counted (--notify-retention). A
                # row with a replication rule's copy to make waits for its destination instead.
                log.warning(
                    "notifications: an event of %s older than the retention is dropped", row.bucket
                )
                metrics.NOTIFY_DROPPED.inc()
                done.append(row.seq)
                continue
            chains.setdefault((row.bucket, row.key), []).append(row)
        parsed = {row.seq: Facts.from_json(row.facts) for row in rows}  # once a pass
        lost = False
        turns = asyncio.Semaphore(KEYS_AT_ONCE)
        unacknowledged: list[int] = []  # delivered in this pass, still in the outbox

        async def deliver_key(key: tuple[str, str], chain: list[OutboxRecord]) -> None:
            nonlocal lost
            async with turns:
                for row in chain:
                    # A long pass (slow destinations) renews the lease as it goes, and stops if
                    # another holder took it: two holders delivering at once would break a
                    # key's order.
                    if lost or not await self._holds(row.part):
                        lost = True
                        return
                    if not await self._deliver(row, parsed[row.seq], found, opened, failed):
                        held.add(key)  # its later rows wait for this one
                        return
                    done.append(row.seq)
                    unacknowledged.append(row.seq)
                    if len(unacknowledged) >= ACK_EVERY:
                        # Removed as the pass goes, a few at a time: what a crash of this
                        # holder leaves to deliver again is what was in flight, not the page.
                        batch = unacknowledged[:]
                        unacknowledged.clear()
                        await self._acknowledge(batch)

        dropped = done[:]  # rows dropped above, before any delivery
        await asyncio.gather(*(deliver_key(key, chain) for key, chain in chains.items()))
        await self._acknowledge(dropped + unacknowledged)
        finished = set(done)
        self._oldest([(r, parsed[r.seq]) for r in rows if r.seq not in finished])
        if held:
            return self._failed()
        self.backoff = 0.0
        return 0.0 if full else IDLE

    def _oldest(self, waiting: list[tuple[OutboxRecord, Facts]]) -> None:
        """What this pass's page still waits for (0 for what has nothing waiting now):
        s3gw_notifications_oldest_seconds per destination (a topic's ARN, a replication
        rule's bucket ARN), the age of its oldest record; s3gw_replication_pending and
        _pending_bytes per replication rule (source bucket, rule id), its copies and their
        sizes."""
        now = time.time_ns()
        oldest: dict[str, int] = {}
        pending: dict[tuple[str, str], tuple[int, int]] = {}
        for row, facts in waiting:
            for configuration_id, arn in facts.targets:
                if (row.seq, configuration_id, arn) in self.sent:
                    continue
                oldest[arn] = min(oldest.get(arn, row.time_ns), row.time_ns)
                if arn.startswith(outbox.BUCKET_ARN):
                    count, size = pending.get((row.bucket, configuration_id), (0, 0))
                    copied = (facts.size or 0) if row.event in CREATED else 0
                    pending[(row.bucket, configuration_id)] = (count + 1, size + copied)
        for arn in self.waiting - oldest.keys():
            metrics.NOTIFY_OLDEST.labels(arn).set(0)
        for arn, since in oldest.items():
            metrics.NOTIFY_OLDEST.labels(arn).set(max(0.0, (now - since) / 1e9))
        self.waiting = set(oldest)
        for rule in self.rules - pending.keys():
            metrics.REPLICATION_PENDING.labels(*rule).set(0)
            metrics.REPLICATION_PENDING_BYTES.labels(*rule).set(0)
        for rule, (count, size) in pending.items():
            metrics.REPLICATION_PENDING.labels(*rule).set(count)
            metrics.REPLICATION_PENDING_BYTES.labels(*rule).set(size)
        self.rules = set(pending)

    async def _deliver(
        self,
        row: OutboxRecord,
        facts: Facts,
        found: dict[str, dict[str, str]],
        opened: dict[tuple[str, str, str], Topic | None],
        failed: set[str],
    ) -> bool:
        """Send the row to each destination that has not acknowledged it; True when all
        have."""
        change = records.ObjectEvent(
            event=row.event,
            bucket=row.bucket,
            bucket_owner=facts.owner,
            key=row.key,
            time_ns=row.time_ns,
            sequencer=row.seq,
            principal=facts.principal,
            source_ip=facts.source_ip,
            request_id=facts.request_id,
            host_id=facts.host_id,
            size=facts.size,
            etag=facts.etag,
            version_id=row.version_id,
            detail=facts.detail,
        )
        complete = True
        for configuration_id, arn in facts.targets:
            if (row.seq, configuration_id, arn) in self.sent:
                continue
            if arn in failed:
                complete = False
                continue
            if outbox.is_replication((configuration_id, arn)):
                if not await self._replicate(row, facts, configuration_id, arn, failed):
                    complete = False
                continue
            topic = await self._topic(row.bucket, facts.owner, arn, found, opened)
            if topic is None or not topic.endpoint:
                # Deleted since (or made without an endpoint), or another account's topic
                # whose Policy no longer allows the bucket's: nowhere to deliver to.
                log.warning(
                    "notifications: %s is gone, has no endpoint or does not allow the bucket's "
                    "account now; its event is dropped",
                    arn,
                )
                metrics.NOTIFY_DROPPED.inc()
                continue
            body = records.message([records.record(change, self.region, configuration_id)])
            delivery = await self.sender.send(topic, body)
            if delivery.acknowledged:
                self.sent.add((row.seq, configuration_id, arn))
                metrics.NOTIFY_DELIVERED.inc()
                if arn in self.failing:
                    self.failing.discard(arn)
                    log.info("notifications: %s acknowledges again", topic.arn)
                continue
            metrics.NOTIFY_FAILED.inc()
            if arn not in self.failing:
                self.failing.add(arn)
                log.warning(
                    "notifications: %s: %s (tried again until it acknowledges)",
                    topic.arn,
                    delivery.reason,
                )
            failed.add(arn)
            complete = False
        if complete and any(map(outbox.is_replication, facts.targets)):
            await self._replicated(row)
        return complete

    async def _replicate(
        self, row: OutboxRecord, facts: Facts, rule_id: str, arn: str, failed: set[str]
    ) -> bool:
        """Copy the row's version for one replication rule (replication/copier.py); True when
        that is done with (copied, or failed for good: the version says FAILED)."""
        if self.replicator is None:
            failed.add(arn)
            return False
        outcome = await self.replicator.copy(row, facts.owner, rule_id, arn)
        if not outcome.done:
            metrics.REPLICATION_FAILURES.labels(row.bucket, rule_id).inc()
            if arn not in self.failing:
                self.failing.add(arn)
                log.warning(
                    "replication: %s: %s (tried again until it takes it)", arn, outcome.reason
                )
            failed.add(arn)
            return False
        self.sent.add((row.seq, rule_id, arn))
        if arn in self.failing:
            self.failing.discard(arn)
            log.info("replication: %s takes copies again", arn)
        if outcome.failed:
            metrics.REPLICATION_FAILED.labels(row.bucket, rule_id).inc()
            self.gave_up[row.seq] = {
                "replicationRuleId": rule_id,
                "destinationBucket": arn,
                "s3Operation": _OPERATIONS.get(row.event, "OBJECT_PUT"),
                "requestTime": records.iso8601(row.time_ns),
                "failureReason": outcome.code,
            }
            log.warning(
                "replication: %s of %s to %s failed: %s", row.key, row.bucket, arn, outcome.reason
            )
        else:
            metrics.REPLICATED.labels(row.bucket, rule_id).inc()
        return True

    async def _replicated(self, row: OutboxRecord) -> None:
        """Every rule of the row's new version is done with: its status COMPLETED, or FAILED
        if a rule could not copy it. A delete marker shows no status, and a tag change leaves
        the version's as its copy made it."""
        failure = self.gave_up.pop(row.seq, None)
        if row.event in CREATED and row.version_id is not None:
            status = "COMPLETED" if failure is None else "FAILED"
            await self.store.set_replication(
                row.bucket, row.key, row.version_id, status, ORIGIN, failure
            )

    async def _topic(
        self,
        bucket: str,
        owner: str,
        arn: str,
        found: dict[str, dict[str, str]],
        opened: dict[tuple[str, str, str], Topic | None],
    ) -> Topic | None:
        """The topic a destination ARN names, in the registry of the ARN's account (the
        bucket owner's, or another account's whose topic's Policy allows the bucket's events:
        notify/topics.py), or None if it is gone or no longer allows them. The Policy is
        judged at each delivery, as SNS judges each Publish; the topics are read once a
        pass (`found`, by account), and each is opened and judged once a pass for a bucket
        (`opened`)."""
        seen = (arn, bucket, owner)
        if seen not in opened:
            opened[seen] = await self._open_topic(bucket, owner, arn, found)
        return opened[seen]

    async def _open_topic(
        self, bucket: str, owner: str, arn: str, found: dict[str, dict[str, str]]
    ) -> Topic | None:
        named = topics.parse_arn(arn)
        if named is None or self.open_secret is None:
            return None
        account = topics.registry_account(named, owner, self.accounts)
        if account is None:
            return None
        if account not in found:
            found[account] = await self.store.get_docs("topics", account)
        doc = found[account].get(named.name)
        if doc is None:
            return None
        topic = Topic.from_doc(account, named.name, self.region, doc, self.open_secret)
        return topic if topic.publishes(bucket, owner) else None
