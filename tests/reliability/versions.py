"""The crash harness on a versioned bucket: a model of every version of a few keys, workers that
put, delete (markers), remove versions by id, copy from versions and read them back, and the
check that a restart kept exactly what was acknowledged.

What S3 promises, and the model states, per key:

- every version (or delete marker) whose write was acknowledged is there, with its ETag and its
  bytes, until a removal of its id is acknowledged; then it is gone for good;
- a version nobody acknowledged exists only where a write whose answer never came (cut by the
  kill) may have made it: each such write accounts for at most one version of its content;
- acknowledged versions are listed newest first in real-time order (a write that began after
  another's answer is the newer), exactly one entry is the latest, and a GET of the key answers
  what the latest entry says;
- the null version (written while versioning is Suspended, replaced by each such write, and
  removed by its id `null`) is one slot: its state follows the real-time model of harness.History.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import botocore.exceptions

from tests.reliability.harness import (
    ABSENT,
    SMALL_SIZES,
    Contents,
    History,
    KiB,
    MiB,
    Outcome,
    Stats,
    Verdict,
    Worker,
    Write,
)

ENABLED, SUSPENDED = "Enabled", "Suspended"
MARKER = "marker"  # the state of a delete marker (ETags are hex: no clash)
NULL = "null"

WEIGHTS = {
    "put": 30,
    "delete": 12,
    "remove": 25,
    "copy": 8,
    "get": 15,
}


@dataclass(frozen=True)
class Made:
    """When an acknowledged write made a (non-null) version: for the real-time order check."""

    state: str
    start: float
    end: float


class Versions:
    """Shared by the workers of the versioned rounds: where to send, the model, statistics."""

    def __init__(self, bucket: str, keys: Iterable[str], contents: Contents, stats: Stats) -> None:
        self.bucket = bucket
        self.keys = list(keys)
        self.contents = contents
        self.stats = stats
        self.weights = WEIGHTS
        self.mode = ENABLED
        self.url = ""
        self.stop = threading.Event()
        self._lock = threading.Lock()
        # Non-null versions the last check found or an acknowledged write made since: id -> state.
        self.known: dict[str, dict[str, str]] = {k: {} for k in self.keys}
        self.made: dict[str, dict[str, Made]] = {k: {} for k in self.keys}
        # States a cut write may have added as a version of an id nobody was told.
        self.cut: dict[str, Counter[str]] = {k: Counter() for k in self.keys}
        self.removing: set[tuple[str, str]] = set()  # removals sent (answered or not)
        self.removed: set[tuple[str, str]] = set()  # removals acknowledged
        self.null = History(self.keys)
        self.clock0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.clock0

    # -- what the workers record --------------------------------------------------------------

    def made_version(self, key: str, vid: str, state: str, out: Outcome) -> str | None:
        """An acknowledged write made version `vid`; a problem if that id was seen before."""
        with self._lock:
            if vid in self.known[key] or vid == NULL:
                return f"{key}: version id {vid} given twice"
            self.known[key][vid] = state
            self.made[key][vid] = Made(state, out.start, out.end)
        return None

    def maybe_made(self, key: str, state: str) -> None:
        with self._lock:
            self.cut[key][state] += 1

    def removal_sent(self, key: str, vid: str) -> None:
        with self._lock:
            self.removing.add((key, vid))

    def removal_acknowledged(self, key: str, vid: str) -> None:
        with self._lock:
            self.removed.add((key, vid))

    def snapshot(self, key: str) -> dict[str, str]:
        with self._lock:
            return dict(self.known[key])

    def was_removing(self, key: str, vid: str) -> bool:
        with self._lock:
            return (key, vid) in self.removing


class VersionsWorker(Worker):
    """A worker of the versioned rounds (harness.Worker's loop and calls, these operations)."""

    w: Versions  # type: ignore[assignment]

    def key(self) -> str:
        return self.rng.choice(self.w.keys)

    def _null_write(self, key: str, out: Outcome, state: str | None, what: str) -> None:
        if out.ok is False:
            return
        self.w.null.record(key, Write(frozenset({state}), out.start, out.end, what))

    def op_put(self) -> None:
        key = self.key()
        size = self.rng.choice(SMALL_SIZES)
        if self.rng.random() < 0.15:
            size = self.rng.randint(200 * KiB, 2 * MiB)
        content, data = self.fresh(size)
        out = self.call("PutObject", self.s3.put_object, Bucket=self.w.bucket, Key=key, Body=data)
        if out.ok and out.response["ETag"].strip('"') != content.etag:
            self.w.stats.problem(f"PUT {key}: ETag {out.response['ETag']}, sent {content.etag}")
        self._wrote(key, out, content.etag, f"put {size}")

    def _wrote(self, key: str, out: Outcome, state: str, what: str) -> None:
        """A write that makes a version when Enabled, replaces the null one when Suspended."""
        if self.w.mode == SUSPENDED:
            vid = out.response.get("VersionId") if out.ok else None
            if vid not in (None, NULL):
                self.w.stats.problem(f"{what} {key} while Suspended: version id {vid}")
            self._null_write(key, out, state, what)
        elif out.ok:
            vid = out.response.get("VersionId")
            problem = self.w.made_version(key, vid, state, out) if vid else f"{what} {key}: no id"
            if problem:
                self.w.stats.problem(problem)
        elif out.ok is None:
            self.w.maybe_made(key, state)

    def op_delete(self) -> None:
        key = self.key()
        out = self.call("DeleteObject", self.s3.delete_object, Bucket=self.w.bucket, Key=key)
        if out.ok and out.response.get("DeleteMarker") is not True:
            self.w.stats.problem(f"DELETE {key}: no marker ({out.response})")
        if self.w.mode == SUSPENDED:
            if out.ok and out.response.get("VersionId") != NULL:
                self.w.stats.problem(f"DELETE {key} while Suspended: {out.response}")
            self._null_write(key, out, MARKER, "null marker")
        else:
            self._wrote(key, out, MARKER, "marker")

    def op_remove(self) -> None:
        """DELETE ?versionId= of a version (or marker) the model knows, or of the null one."""
        key = self.key()
        vid = self.rng.choice([*self.w.snapshot(key), NULL])
        self.w.removal_sent(key, vid)
        out = self.call(
            "DeleteObject (version)",
            self.s3.delete_object,
            Bucket=self.w.bucket,
            Key=key,
            VersionId=vid,
        )
        if out.ok is False:
            return
        if vid == NULL:
            self._null_write(key, out, ABSENT, "null removed")
        elif out.ok:
            self.w.removal_acknowledged(key, vid)

    def _a_version(self) -> tuple[str, str, str] | None:
        """(key, id, ETag) of a version (not a marker) the model knows, if any."""
        key = self.key()
        versions = [(v, s) for v, s in self.w.snapshot(key).items() if s != MARKER]
        if not versions:
            return None
        vid, state = self.rng.choice(versions)
        return key, vid, state

    def _gone(self, op: str, key: str, vid: str, out: Outcome) -> None:
        """An answer other than success: NoSuchVersion only for a version being removed."""
        if (
            out.ok is False
            and not (out.code == "NoSuchVersion" and self.w.was_removing(key, vid))
            and out.code != "SlowDown"
        ):
            self.w.stats.problem(f"{op} {key}?versionId={vid}: {out.status} {out.code}")

    def op_copy(self) -> None:
        source = self._a_version()
        if source is None:
            return
        src, vid, state = source
        dst = self.key()
        out = self.call(
            "CopyObject (version)",
            self.s3.copy_object,
            Bucket=self.w.bucket,
            Key=dst,
            CopySource={"Bucket": self.w.bucket, "Key": src, "VersionId": vid},
        )
        if out.ok:
            etag = out.response["CopyObjectResult"]["ETag"].strip('"')
            if etag != state or out.response.get("CopySourceVersionId") != vid:
                self.w.stats.problem(f"COPY {src}?versionId={vid}: {out.response}")
        self._gone("COPY", src, vid, out)
        self._wrote(dst, out, state, f"copy of {src} {vid}")

    def op_get(self) -> None:
        source = self._a_version()
        if source is None:
            return
        key, vid, state = source
        out = self.call(
            "GetObject (version)",
            self.s3.get_object,
            read_body=True,
            Bucket=self.w.bucket,
            Key=key,
            VersionId=vid,
        )
        self._gone("GET", key, vid, out)
        if not out.ok:
            return
        content = self.w.contents.get(state)
        etag = out.response["ETag"].strip('"')
        if etag != state or content is None or out.response["Data"] != content.data():
            self.w.stats.problem(f"GET {key}?versionId={vid}: not the version's bytes ({etag})")


# --- the check -------------------------------------------------------------------------------


@dataclass
class Entry:
    vid: str
    state: str  # ETag or MARKER
    latest: bool


@dataclass
class Listed:
    versions: list[Entry] = field(default_factory=list)  # newest first
    markers: list[Entry] = field(default_factory=list)  # newest first

    def all(self) -> list[Entry]:
        return self.versions + self.markers


def _listing(s3: Any, bucket: str) -> dict[str, Listed]:
    out: dict[str, Listed] = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            entry = Entry(v["VersionId"], v["ETag"].strip('"'), v["IsLatest"])
            out.setdefault(v["Key"], Listed()).versions.append(entry)
        for m in page.get("DeleteMarkers", []):
            entry = Entry(m["VersionId"], MARKER, m["IsLatest"])
            out.setdefault(m["Key"], Listed()).markers.append(entry)
    return out


def _order(key: str, entries: list[Entry], made: dict[str, Made]) -> list[str]:
    """Real-time order: a version whose write began after another's answer is listed first."""
    position = {e.vid: n for n, e in enumerate(entries)}
    losses = []
    for a, first in made.items():
        for b, second in made.items():
            newer_first = position.get(b, -1) < position.get(a, -1)
            if a in position and b in position and first.end < second.start and not newer_first:
                losses.append(f"{key}: version {b} (written after {a}) is listed older")
    return losses


def verify_versions(s3: Any, model: Versions) -> Verdict:
    """Every acknowledged version and marker is there (unless its removal was acknowledged) with
    its bytes; nothing else but what cut writes may have made; the null version as the model
    allows; the order, the latest entry, GET of each key and ListObjectsV2 agree."""
    verdict = Verdict()
    bucket = model.bucket
    listing = _listing(s3, bucket)
    unknown = set(listing) - set(model.keys)
    if unknown:
        verdict.losses.append(f"versions of keys nobody wrote: {sorted(unknown)}")
    current: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        current.update(o["Key"] for o in page.get("Contents", []))
    for key in model.keys:
        found = listing.get(key, Listed())
        entries = found.all()
        named = {e.vid: e.state for e in entries if e.vid != NULL}
        nulls = [e.state for e in entries if e.vid == NULL]
        losses: list[str] = []
        if len(nulls) > 1 or len(named) + len(nulls) != len(entries):
            losses.append(f"{key}: a version id listed twice: {[e.vid for e in entries]}")
        known = model.known[key]
        for vid, state in known.items():
            if (key, vid) in model.removed:
                if vid in named:
                    losses.append(f"{key}: version {vid} is back after its removal")
            elif vid in named:
                if named[vid] != state:
                    losses.append(f"{key}: version {vid} holds {named[vid]}, was {state}")
            elif (key, vid) not in model.removing:
                losses.append(f"{key}: acknowledged version {vid} ({state}) is missing")
        extra = Counter(state for vid, state in named.items() if vid not in known)
        unaccounted = extra - model.cut[key]
        if unaccounted:
            losses.append(
                f"{key}: versions no write made: {dict(unaccounted)} "
                f"(cut writes could make {dict(model.cut[key])})"
            )
        null_state = nulls[0] if nulls else ABSENT
        allowed = model.null.candidates(key)
        if null_state not in allowed:
            losses.append(
                f"{key}: null version {null_state}, allowed {sorted(map(str, allowed))}; "
                f"history: {model.null.describe(key)}"
            )
        losses += _order(key, found.versions, model.made[key])
        losses += _order(key, found.markers, model.made[key])
        latest = [e for e in entries if e.latest]
        if len(latest) != (1 if entries else 0):
            losses.append(f"{key}: {len(latest)} entries are the latest")
        else:
            losses += _check_reads(s3, model, key, found, latest[0] if latest else None, current)
        for entry in found.versions:
            problem = _check_bytes(s3, model, key, entry)
            if problem:
                losses.append(problem)
            else:
                verdict.verified += 1
        verdict.losses += losses
        if not losses:
            _rebase(model, key, named, null_state)
    return verdict


def _check_reads(
    s3: Any, model: Versions, key: str, found: Listed, latest: Entry | None, current: set[str]
) -> list[str]:
    """GET of the key and ListObjectsV2 show the latest entry (nothing for a marker)."""
    shown = latest is not None and latest.state != MARKER
    losses = []
    if shown != (key in current):
        losses.append(f"{key}: latest {latest}, ListObjectsV2 lists it: {key in current}")
    try:
        got = s3.get_object(Bucket=model.bucket, Key=key)
        got["Body"].close()
        state: str | None = got["ETag"].strip('"')
    except botocore.exceptions.ClientError as exc:
        if exc.response["Error"]["Code"] != "NoSuchKey":
            raise
        state = ABSENT
    if state != (latest.state if shown and latest else ABSENT):
        losses.append(f"{key}: GET answers {state}, the latest entry is {latest}")
    return losses


def _check_bytes(s3: Any, model: Versions, key: str, entry: Entry) -> str | None:
    content = model.contents.get(entry.state)
    if content is None:
        return f"{key}: version {entry.vid} has ETag {entry.state} of no content sent"
    got = s3.get_object(Bucket=model.bucket, Key=key, VersionId=entry.vid)
    data = got["Body"].read()
    if got["ETag"].strip('"') != entry.state or data != content.data():
        return f"{key}: version {entry.vid}: {len(data)} bytes that are not its content"
    return None


def _rebase(model: Versions, key: str, named: dict[str, str], null_state: str | None) -> None:
    """The next round starts from what was found (the check proved it acceptable)."""
    model.known[key] = dict(named)
    model.made[key] = {}
    model.cut[key] = Counter()
    model.removing = {(k, v) for k, v in model.removing if k != key}
    model.removed = {(k, v) for k, v in model.removed if k != key}
    model.null.rebase(key, null_state)
