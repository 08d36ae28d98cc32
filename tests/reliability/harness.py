"""A mixed S3 workload against a real gateway, a model of what each key may hold, and checks
of the data folder: the machinery of the crash and concurrency tests.

Contents are never kept in memory: each body is `generate(seed, size)` (or a slice of one, or
several end to end), so any object read back can be compared byte for byte with what was sent,
and the seed printed with a failure names the bytes.

The model (`History`) follows S3's promise per key: a write that got a 2xx is in effect from some
moment between its request and its answer. The key may therefore end in the state of any
acknowledged write that no other acknowledged write *started after it ended* (real-time order),
or in the state of a write whose answer never came (cut by the kill), which may or may not have
landed but never partly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.exceptions
import urllib3.exceptions
from botocore.config import Config

from gateway.store.crypto import stored_size
from tests.server import ACCESS_KEY, SECRET_KEY, GatewayProcess

KiB = 1 << 10
MiB = 1 << 20
MIN_PART = 5 * MiB  # every part but the last (S3's minimum)
# Around the inline limit (64 KiB: kept in SQLite) and the write batch (1 MiB: a blob file).
SMALL_SIZES = (0, 1, 100, 4 * KiB, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 200 * KiB, MiB)


@dataclass(frozen=True)
class Settings:
    """How much to run: environment variables, so that `make test-reliability` picks the long
    form without a pytest option (which only the root conftest could add)."""

    long: bool
    rounds: int
    seed: int
    threads: int

    @classmethod
    def from_environment(cls) -> Settings:
        """RELIABILITY_LONG=1: the long form (many rounds); RELIABILITY_ROUNDS, RELIABILITY_SEED
        and RELIABILITY_THREADS override its parts. Without a seed one is drawn and printed."""
        long = os.environ.get("RELIABILITY_LONG", "").strip() not in ("", "0")
        return cls(
            long=long,
            rounds=_int("RELIABILITY_ROUNDS", 80 if long else 5),
            seed=_int("RELIABILITY_SEED", random.SystemRandom().randrange(10**9)),
            threads=_int("RELIABILITY_THREADS", 6),
        )

    @property
    def replay(self) -> str:
        form = "RELIABILITY_LONG=1 " if self.long else ""
        return f"{form}RELIABILITY_SEED={self.seed} RELIABILITY_ROUNDS={self.rounds}"


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


# Summary lines of the runs, printed again at the end of the pytest session (conftest.py).
SUMMARIES: list[str] = []


def report(line: str) -> None:
    print(line, flush=True)
    SUMMARIES.append(line)


def generate(seed: int, size: int) -> bytes:
    """The first `size` bytes of the stream named `seed` (whole 32-bit words are drawn, so that
    a shorter stream is a prefix of a longer one: randbytes alone differs in the last word)."""
    return random.Random(seed).randbytes((size + 3) // 4 * 4)[:size]


# --- contents --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """`length` bytes from `start` of the stream generate(seed, ...)."""

    seed: int
    start: int
    length: int

    def data(self) -> bytes:
        return generate(self.seed, self.start + self.length)[self.start :]


@dataclass(frozen=True)
class Content:
    """Bytes the workload sent (or asked to be made): pieces end to end."""

    pieces: tuple[Piece, ...]
    size: int
    md5: str  # of the bytes: the ETag of a PUT or a copy
    etag: str  # what S3 shows: the MD5, or md5(part MD5s)-N for a multipart object

    def data(self) -> bytes:
        return b"".join(p.data() for p in self.pieces)


class Contents:
    """Every content ever attempted, by ETag and by MD5 (a copy of a multipart object has the
    MD5 of its bytes as ETag)."""

    def __init__(self) -> None:
        self._by_tag: dict[str, Content] = {}
        self._lock = threading.Lock()

    def _add(self, content: Content) -> Content:
        with self._lock:
            self._by_tag.setdefault(content.etag, content)
            self._by_tag.setdefault(content.md5, content)
        return content

    def new(self, pieces: Iterable[Piece]) -> tuple[Content, bytes]:
        pieces = tuple(pieces)
        data = b"".join(p.data() for p in pieces)
        md5 = hashlib.md5(data).hexdigest()
        return self._add(Content(pieces, len(data), md5, md5)), data

    def multipart(self, parts: list[Content]) -> Content:
        pieces = tuple(p for part in parts for p in part.pieces)
        data = b"".join(p.data() for p in pieces)
        binary = b"".join(bytes.fromhex(part.md5) for part in parts)
        etag = f"{hashlib.md5(binary).hexdigest()}-{len(parts)}"
        content = Content(pieces, len(data), hashlib.md5(data).hexdigest(), etag)
        return self._add(content)

    def get(self, tag: str) -> Content | None:
        with self._lock:
            return self._by_tag.get(tag)


# --- the model -------------------------------------------------------------------------------

ABSENT = None  # the state of a deleted (or never written) key


@dataclass(frozen=True)
class Write:
    possible: frozenset[str | None]  # ETags the key may hold after it; ABSENT: deleted
    start: float
    end: float  # math.inf: no answer came (cut by the kill)
    what: str = ""


class History:
    """Per key, the writes of the current round, and the state the last check found."""

    def __init__(self, keys: Iterable[str]) -> None:
        start = Write(frozenset({ABSENT}), -1, -1)
        self._writes: dict[str, list[Write]] = {k: [start] for k in keys}
        self._lock = threading.Lock()

    @property
    def keys(self) -> list[str]:
        return list(self._writes)

    def record(self, key: str, write: Write) -> None:
        with self._lock:
            self._writes[key].append(write)

    def candidates(self, key: str) -> set[str | None]:
        """States the key may be in: writes no acknowledged write started after."""
        with self._lock:
            writes = list(self._writes[key])
        acked_starts = [w.start for w in writes if w.end != math.inf]
        latest_start = max(acked_starts, default=-math.inf)
        out: set[str | None] = set()
        for w in writes:
            if latest_start > w.end:
                continue  # superseded: an acknowledged write began after this one ended
            out |= w.possible
        return out

    def ever(self, key: str) -> set[str | None]:
        """Every state the key may have had this round (what a cut copy may have read)."""
        with self._lock:
            return {s for w in self._writes[key] for s in w.possible}

    def describe(self, key: str) -> str:
        with self._lock:
            writes = list(self._writes[key])
        return "; ".join(
            f"{w.what or 'start'} {sorted(map(str, w.possible))} "
            f"[{w.start:.3f}, {'cut' if w.end == math.inf else f'{w.end:.3f}'}]"
            for w in writes
        )

    def rebase(self, key: str, observed: str | None) -> None:
        """The next round starts from what was found (the check proved it acceptable)."""
        with self._lock:
            self._writes[key] = [Write(frozenset({observed}), -1, -1, "found")]


# --- statistics ------------------------------------------------------------------------------


# The 4xx answers the workload provokes itself, by operation: a read or copy of a key that a
# concurrent delete removed, a range past the end of a short object. Any other 4xx is a
# refusal the run did not ask for (a CopyObject or a Complete that always answered 400 would
# otherwise leave the model unchanged and pass).
PROVOKED = {
    "GetObject": {"404 NoSuchKey", "416 InvalidRange"},
    "CopyObject": {"404 NoSuchKey"},
    "UploadPartCopy": {"404 NoSuchKey"},
    # tests/reliability/versions.py: a version a concurrent removal took (its worker judges
    # the finer rule, that the removal was sent).
    "GetObject (version)": {"404 NoSuchVersion"},
    "CopyObject (version)": {"404 NoSuchVersion"},
}

# The S3 operations each of the workload's kinds sends (the multipart kind: the whole upload).
OPERATIONS = {
    "put_small": ("PutObject",),
    "put_large": ("PutObject",),
    "copy": ("CopyObject",),
    "delete": ("DeleteObject",),
    "delete_objects": ("DeleteObjects",),
    "get": ("GetObject",),
    "multipart": (
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
    ),
}


# A multipart upload is several requests over seconds (5 MiB parts): a round of the crash
# tests (0.1-2 s before its SIGKILL) may cut every one before its Complete. The concurrency
# test, which crashes nothing, requires them; the crash tests require the rest.
MULTI_REQUEST = frozenset(
    {"CreateMultipartUpload", "UploadPart", "UploadPartCopy", "CompleteMultipartUpload"}
)


def operations(weights: dict[str, int]) -> set[str]:
    """The S3 operations a workload of these weights sends."""
    return {op for kind, weight in weights.items() if weight for op in OPERATIONS[kind]}


@dataclass
class Stats:
    statuses: Counter[tuple[str, str]] = field(default_factory=Counter)  # (op, status/code)
    succeeded: Counter[str] = field(default_factory=Counter)  # 2xx answers, by operation
    acknowledged: int = 0
    cut: int = 0
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, op: str, result: str, acked: bool = False) -> None:
        with self.lock:
            self.statuses[(op, result)] += 1
            if acked:
                self.acknowledged += 1
                self.succeeded[op] += 1
            if result == "cut":
                self.cut += 1

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def server_errors(self, allowed: Iterable[str] = ("503 SlowDown",)) -> dict[str, int]:
        """5xx answers (and timeouts, which hide a stuck request) other than `allowed`."""
        allow = set(allowed)
        return {
            f"{op} {result}": n
            for (op, result), n in sorted(self.statuses.items())
            if (result.startswith("5") or result == "timeout") and result not in allow
        }

    def client_errors(self, provoked: dict[str, set[str]] = PROVOKED) -> dict[str, int]:
        """4xx answers the workload did not provoke (PROVOKED)."""
        return {
            f"{op} {result}": n
            for (op, result), n in sorted(self.statuses.items())
            if result.startswith("4") and result not in provoked.get(op, set())
        }

    def shortfalls(self, ops: Iterable[str], minimum: int) -> dict[str, int]:
        """Operations that succeeded fewer than `minimum` times: a kind that always failed (or
        never ran) proves nothing about the server's state."""
        return {op: self.succeeded[op] for op in sorted(ops) if self.succeeded[op] < minimum}

    def failures(self, ops: Iterable[str], minimum: int) -> list[str]:
        """Everything that fails a run in its answers: 5xx and timeouts, 4xx it did not
        provoke, operations that did not succeed `minimum` times, and the workers' problems."""
        found = [f"server error: {k} x{n}" for k, n in self.server_errors().items()]
        found += [f"refused: {k} x{n}" for k, n in self.client_errors().items()]
        found += [
            f"{op} succeeded {n} times (at least {minimum} needed)"
            for op, n in self.shortfalls(ops, minimum).items()
        ]
        return found + list(self.problems)

    def tally(self) -> str:
        by_result: Counter[str] = Counter()
        for (_op, result), n in self.statuses.items():
            by_result[result] += n
        return ", ".join(f"{r}: {n}" for r, n in sorted(by_result.items()))


# --- the process -----------------------------------------------------------------------------


class CrashableGateway(GatewayProcess):
    """The gateway in a session of its own, so that a crash kills every process of it (the
    parent and its workers) at once, as a power cut or the OOM killer of a cgroup would."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.own_session = True

    def crash(self) -> None:
        """SIGKILL the whole process group, and wait until every member is gone."""
        assert self.proc is not None
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        deadline = time.monotonic() + 10
        while group_alive(pgid):
            if time.monotonic() > deadline:
                raise AssertionError("gateway processes survived SIGKILL of their group")
            time.sleep(0.02)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        proc = self.proc
        super().stop(sig)
        if proc is not None:
            # Workers left behind would hold the folder: make sure the group is gone.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def group_alive(pgid: int) -> list[int]:
    """Processes of a group that still run (zombies waiting to be reaped do not count)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def client(url: str, checksums: bool = False) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            connect_timeout=5,
            read_timeout=60,
            # boto3's CRC32 of every body costs the client CPU that the server needs here;
            # one worker in a few keeps the default, so both kinds of request are exercised.
            request_checksum_calculation="when_supported" if checksums else "when_required",
            response_checksum_validation="when_required",
            max_pool_connections=4,
        ),
    )


# --- the data folder -------------------------------------------------------------------------


def disk_usage(data: Path) -> tuple[int, int]:
    """(bytes in blob files, bytes of the file blobs that objects and pending parts reference)."""
    conn = sqlite3.connect(f"file:{data / 'catalog.sqlite3'}?mode=ro", uri=True)
    try:
        sizes = dict(conn.execute("SELECT id, size FROM blobs WHERE data IS NULL"))
        referenced: set[str] = set()
        encrypted: set[str] = set()  # an extent with a sealed data key: its file is sealed
        manifests = (
            "SELECT manifest FROM objects UNION ALL SELECT manifest FROM versions "
            "UNION ALL SELECT manifest FROM parts"
        )
        for (manifest,) in conn.execute(manifests):
            for extent in json.loads(manifest):
                referenced.add(extent[0])
                if len(extent) > 3:
                    encrypted.add(extent[0])
    finally:
        conn.close()
    on_disk = sum(p.stat().st_size for p in (data / "blobs").rglob("*") if p.is_file())
    needed = sum(
        stored_size(size) if blob in encrypted else size
        for blob, size in sizes.items()
        if blob in referenced
    )
    return on_disk, needed


def referenced_files(data: Path) -> set[Path]:
    """The blob files that objects and pending parts reference (the gateway stopped)."""
    conn = sqlite3.connect(f"file:{data / 'catalog.sqlite3'}?mode=ro", uri=True)
    try:
        files = {blob for (blob,) in conn.execute("SELECT id FROM blobs WHERE data IS NULL")}
    finally:
        conn.close()
    return {data / "blobs" / b[:2] / b[2:4] / b for b in files}


def fsck(data: Path, deep: bool = True, catalog: str | None = None) -> tuple[int, list[str], str]:
    """(exit status, DAMAGE lines, whole output) of `s3gw fsck` (the gateway must be stopped)."""
    cmd = [sys.executable, "-m", "gateway", "fsck", "--data", str(data)]
    cmd += ["--catalog", catalog] if catalog else []
    done = subprocess.run(
        [*cmd, "--deep"] if deep else cmd, capture_output=True, text=True, timeout=300
    )
    output = done.stdout + done.stderr
    damage = [line for line in output.splitlines() if line.startswith("DAMAGE")]
    return done.returncode, damage, output


# --- the workload ----------------------------------------------------------------------------


@dataclass
class Outcome:
    ok: bool | None  # None: no answer (connection cut or refused)
    start: float
    end: float
    response: Any = None
    status: int = 0
    code: str = ""


@dataclass
class Library:
    """Objects written once before the workload and never changed: sources of ranged
    UploadPartCopy, whose bytes are then known exactly."""

    bucket: str
    big: Content  # larger than a part: 5 MiB ranges of it make non-last parts
    small: Content


class Workload:
    """Shared by the workers of one run: where to send, what may be at each key, statistics."""

    def __init__(
        self,
        bucket: str,
        keys: list[str],
        contents: Contents,
        library: Library,
        stats: Stats,
        weights: dict[str, int],
        large: tuple[int, int] = (MiB, 4 * MiB),
    ) -> None:
        self.bucket = bucket
        self.history = History(keys)
        self.contents = contents
        self.library = library
        self.stats = stats
        self.weights = weights
        self.large = large
        self.url = ""
        self.stop = threading.Event()
        self.clock0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.clock0


class Worker(threading.Thread):
    def __init__(
        self,
        workload: Workload,
        seed: str,
        checksums: bool = False,
        max_ops: int | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(name=f"worker-{seed}", daemon=True)
        self.w = workload
        self.url = url  # None: the workload's (one gateway); else this worker's node
        self.rng = random.Random(seed)
        self.checksums = checksums
        self.max_ops = max_ops
        self.s3: Any = None
        self.ops = 0

    def run(self) -> None:
        self.s3 = client(self.url or self.w.url, self.checksums)
        names = list(self.w.weights)
        weights = [self.w.weights[n] for n in names]
        try:
            while not self.w.stop.is_set():
                if self.max_ops is not None and self.ops >= self.max_ops:
                    return
                self.ops += 1
                name = self.rng.choices(names, weights)[0]
                getattr(self, "op_" + name)()
        except Exception as exc:  # a harness bug must fail the test, not vanish in a thread
            self.w.stats.problem(f"worker crashed: {exc!r}")
            raise

    # -- calls --------------------------------------------------------------------------------

    def call(self, op: str, fn: Callable[..., Any], read_body: bool = False, **kw: Any) -> Outcome:
        start = self.w.now()
        try:
            response = fn(**kw)
            if read_body:
                response["Data"] = response["Body"].read()
        except botocore.exceptions.ClientError as exc:
            meta = exc.response.get("ResponseMetadata", {})
            status = meta.get("HTTPStatusCode", 0)
            code = exc.response.get("Error", {}).get("Code", "")
            self.w.stats.count(op, f"{status} {code}".strip())
            return Outcome(False, start, self.w.now(), exc.response, status, code)
        except (
            botocore.exceptions.ReadTimeoutError,
            botocore.exceptions.ConnectTimeoutError,
        ):
            self.w.stats.count(op, "timeout")
            return Outcome(None, start, math.inf)
        except (
            botocore.exceptions.BotoCoreError,
            urllib3.exceptions.HTTPError,
            ConnectionError,
        ):
            self.w.stats.count(op, "cut")
            return Outcome(None, start, math.inf)
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 200)
        self.w.stats.count(op, str(status), acked=True)
        return Outcome(True, start, self.w.now(), response, status)

    def key(self) -> str:
        return self.rng.choice(self.w.history.keys)

    def fresh(self, size: int) -> tuple[Content, bytes]:
        return self.w.contents.new([Piece(self.rng.getrandbits(63), 0, size)])

    def wrote(self, key: str, out: Outcome, possible: Iterable[str | None], what: str) -> None:
        if out.ok is False:
            return  # answered with an error: nothing changed
        self.w.history.record(key, Write(frozenset(possible), out.start, out.end, what))

    # -- operations ---------------------------------------------------------------------------

    def op_put_small(self) -> None:
        self._put(self.rng.choice(SMALL_SIZES))

    def op_put_large(self) -> None:
        self._put(self.rng.randint(*self.w.large))

    def _put(self, size: int) -> None:
        key = self.key()
        content, data = self.fresh(size)
        out = self.call("PutObject", self.s3.put_object, Bucket=self.w.bucket, Key=key, Body=data)
        if out.ok and out.response["ETag"].strip('"') != content.etag:
            self.w.stats.problem(f"PUT {key}: ETag {out.response['ETag']}, sent {content.etag}")
        self.wrote(key, out, {content.etag}, f"put {size}")

    def op_copy(self) -> None:
        src, dst = self.key(), self.key()
        kw: dict[str, Any] = {}
        if src == dst:
            # A copy onto itself must change something; it takes references before it drops them.
            kw = {"MetadataDirective": "REPLACE", "Metadata": {"n": str(self.ops)}}
        out = self.call(
            "CopyObject",
            self.s3.copy_object,
            Bucket=self.w.bucket,
            Key=dst,
            CopySource={"Bucket": self.w.bucket, "Key": src},
            **kw,
        )
        if out.ok:
            etag = out.response["CopyObjectResult"]["ETag"].strip('"')
            if self.w.contents.get(etag) is None:
                self.w.stats.problem(f"COPY {src} -> {dst}: ETag {etag} of no content sent")
            self.wrote(dst, out, {etag}, f"copy from {src}")
        elif out.ok is None:
            # It may have copied any state the source had meanwhile (a copy's ETag is the MD5).
            possible = set()
            for tag in self.w.history.ever(src):
                content = self.w.contents.get(tag) if tag is not None else None
                if content is not None:
                    possible.add(content.md5)
            self.wrote(dst, out, possible, f"copy from {src}")

    def op_delete(self) -> None:
        key = self.key()
        out = self.call("DeleteObject", self.s3.delete_object, Bucket=self.w.bucket, Key=key)
        self.wrote(key, out, {ABSENT}, "delete")

    def op_delete_objects(self) -> None:
        keys = sorted(set(self.rng.sample(self.w.history.keys, min(3, len(self.w.history.keys)))))
        out = self.call(
            "DeleteObjects",
            self.s3.delete_objects,
            Bucket=self.w.bucket,
            Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
        )
        if out.ok and out.response.get("Errors"):
            self.w.stats.problem(f"DeleteObjects {keys}: {out.response['Errors']}")
        for key in keys:
            self.wrote(key, out, {ABSENT}, "delete (batch)")

    def op_get(self) -> None:
        """A read under concurrent writes returns one whole content, never a mix or a part."""
        key = self.key()
        kw: dict[str, Any] = {}
        ranged = self.rng.random() < 0.3
        if ranged:
            first = self.rng.randint(0, 100 * KiB)
            kw["Range"] = f"bytes={first}-{first + self.rng.randint(0, 2 * MiB)}"
        out = self.call(
            "GetObject", self.s3.get_object, read_body=True, Bucket=self.w.bucket, Key=key, **kw
        )
        if not out.ok:
            if out.ok is False and out.code not in ("NoSuchKey", "InvalidRange"):
                self.w.stats.problem(f"GET {key}: {out.status} {out.code}")
            return
        etag = out.response["ETag"].strip('"')
        content = self.w.contents.get(etag)
        if content is None:
            self.w.stats.problem(f"GET {key}: ETag {etag} of no content sent")
            return
        expected = content.data()
        if ranged:
            first, last = map(int, kw["Range"][6:].split("-"))
            expected = expected[first : last + 1]
        if out.response["Data"] != expected:
            self.w.stats.problem(
                f"GET {key} {kw}: {len(out.response['Data'])} bytes differ from content {etag} "
                f"({len(expected)} bytes expected)"
            )

    def op_multipart(self) -> None:
        key = self.key()
        bucket = self.w.bucket
        out = self.call(
            "CreateMultipartUpload", self.s3.create_multipart_upload, Bucket=bucket, Key=key
        )
        if not out.ok:
            return
        upload_id = out.response["UploadId"]
        count = self.rng.choice((1, 2, 2, 3))
        parts: list[Content] = []
        for number in range(1, count + 1):
            part = self._part(key, upload_id, number, last=number == count)
            if part is None:
                return  # cut (the upload stays pending) or refused (aborted)
            parts.append(part)
        ids = [{"PartNumber": n, "ETag": f'"{p.md5}"'} for n, p in enumerate(parts, 1)]
        roll = self.rng.random()
        if roll < 0.1:
            return  # left pending: its parts hold their blobs until aborted
        if roll < 0.2:
            self.call(
                "AbortMultipartUpload",
                self.s3.abort_multipart_upload,
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
            )
            return
        made = self.w.contents.multipart(parts)
        out = self.call(
            "CompleteMultipartUpload",
            self.s3.complete_multipart_upload,
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": ids},
        )
        if out.ok and out.response["ETag"].strip('"') != made.etag:
            self.w.stats.problem(f"Complete {key}: ETag {out.response['ETag']}, not {made.etag}")
        self.wrote(key, out, {made.etag}, f"complete {count} parts")
        if out.ok is False:
            self._abort(key, upload_id)

    def _abort(self, key: str, upload_id: str) -> None:
        self.call(
            "AbortMultipartUpload",
            self.s3.abort_multipart_upload,
            Bucket=self.w.bucket,
            Key=key,
            UploadId=upload_id,
        )

    def _part(self, key: str, upload_id: str, number: int, last: bool) -> Content | None:
        kinds = ("upload", "upload", "range", "whole") if last else ("upload", "range")
        kind = self.rng.choice(kinds)
        common = {"Bucket": self.w.bucket, "Key": key, "UploadId": upload_id, "PartNumber": number}
        lib = self.w.library
        if kind == "upload":
            size = self.rng.choice(SMALL_SIZES[1:]) if last else MIN_PART
            content, data = self.fresh(size)
            out = self.call("UploadPart", self.s3.upload_part, Body=data, **common)
            got = out.response["ETag"].strip('"') if out.ok else None
        elif kind == "range":
            # A slice of the library's big object: 5 MiB, or any length for the last part.
            length = MIN_PART if not last else self.rng.randint(1, 300 * KiB)
            first = self.rng.randint(0, lib.big.size - length)
            content = self.w.contents.new([Piece(lib.big.pieces[0].seed, first, length)])[0]
            out = self.call(
                "UploadPartCopy",
                self.s3.upload_part_copy,
                CopySource={"Bucket": lib.bucket, "Key": "big"},
                CopySourceRange=f"bytes={first}-{first + length - 1}",
                **common,
            )
            got = out.response["CopyPartResult"]["ETag"].strip('"') if out.ok else None
        else:
            # The whole of a key that others are rewriting: the part is whichever version the
            # server read, and its ETag (the MD5 of the bytes) says which.
            src = self.key()
            out = self.call(
                "UploadPartCopy",
                self.s3.upload_part_copy,
                CopySource={"Bucket": self.w.bucket, "Key": src},
                **common,
            )
            got = out.response["CopyPartResult"]["ETag"].strip('"') if out.ok else None
            found = self.w.contents.get(got) if got else None
            if out.ok and found is None:
                self.w.stats.problem(f"UploadPartCopy of {src}: ETag {got} of no content sent")
                return None
            content = found  # type: ignore[assignment]
        if out.ok is None:
            return None
        if not out.ok:
            self._abort(key, upload_id)
            return None
        if got != content.md5:
            self.w.stats.problem(f"part {number} of {key} ({kind}): ETag {got}, not {content.md5}")
            return None
        return content


# --- checks ----------------------------------------------------------------------------------


@dataclass
class Verdict:
    verified: int = 0  # objects read back whole and compared byte for byte
    absent: int = 0  # keys found absent, as the model allows
    losses: list[str] = field(default_factory=list)


def verify(s3: Any, workload: Workload, rebase: bool = True) -> Verdict:
    """Every key holds a state the model allows, with exactly the bytes of that content; no
    key the workload never wrote exists."""
    verdict = Verdict()
    bucket = workload.bucket
    listed: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        listed.update(o["Key"] for o in page.get("Contents", []))
    unknown = listed - set(workload.history.keys)
    if unknown:
        verdict.losses.append(f"keys nobody wrote: {sorted(unknown)}")
    for key in workload.history.keys:
        allowed = workload.history.candidates(key)
        try:
            response = s3.get_object(Bucket=bucket, Key=key)
            data = response["Body"].read()
            state: str | None = response["ETag"].strip('"')
        except botocore.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchKey":
                raise
            state, data = ABSENT, b""
        if (state is not ABSENT) != (key in listed):
            verdict.losses.append(f"{key}: GET says {state}, listing says {key in listed}")
        if state not in allowed:
            verdict.losses.append(
                f"{key}: holds {state}, allowed {sorted(map(str, allowed))}; "
                f"history: {workload.history.describe(key)}"
            )
            continue
        if state is ABSENT:
            verdict.absent += 1
        else:
            content = workload.contents.get(state)
            assert content is not None
            if data != content.data():
                verdict.losses.append(
                    f"{key}: ETag {state} but {len(data)} bytes that are not its content "
                    f"({content.size} bytes)"
                )
                continue
            verdict.verified += 1
        if rebase:
            workload.history.rebase(key, state)
    return verdict


def verify_library(s3: Any, library: Library) -> list[str]:
    losses = []
    for name, content in (("big", library.big), ("small", library.small)):
        response = s3.get_object(Bucket=library.bucket, Key=name)
        if response["ETag"].strip('"') != content.etag or response["Body"].read() != content.data():
            losses.append(f"library object {name} changed")
    return losses


def make_library(s3: Any, contents: Contents, bucket: str, seed: int) -> Library:
    s3.create_bucket(Bucket=bucket)
    rng = random.Random(seed)
    big, big_data = contents.new([Piece(rng.getrandbits(63), 0, MIN_PART + 512 * KiB)])
    small, small_data = contents.new([Piece(rng.getrandbits(63), 0, 100 * KiB)])
    s3.put_object(Bucket=bucket, Key="big", Body=big_data)
    s3.put_object(Bucket=bucket, Key="small", Body=small_data)
    return Library(bucket, big, small)


def empty_everything(s3: Any) -> None:
    """Abort every upload and remove every version and bucket: the space must all come back."""
    for bucket in s3.list_buckets()["Buckets"]:
        name = bucket["Name"]
        for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=name):
            for upload in page.get("Uploads", []):
                s3.abort_multipart_upload(
                    Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
                )
        # Every version and marker by its id (an unversioned bucket's objects are null ones):
        # a bucket keeps its older versions' blobs until each is removed.
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
            for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
                s3.delete_object(Bucket=name, Key=entry["Key"], VersionId=entry["VersionId"])
        s3.delete_bucket(Bucket=name)
