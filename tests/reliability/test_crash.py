"""Crash recovery: a mixed concurrent workload, SIGKILL at random moments, restart, check.

Each round runs the workload (PUT small and large, CopyObject, multipart with UploadPart and
UploadPartCopy, DELETE, DeleteObjects, GET, all over the same few keys) against the gateway,
kills every process of it with SIGKILL at a random moment, restarts it on the same folder and
checks:

- every key holds a state the model allows (an acknowledged write not superseded by a later
  acknowledged one, or a write cut by the kill), with exactly that content's bytes and ETag;
- no key nobody wrote exists, and the library objects written before the workload are intact;
- the start-up sweep left the folder clean (no tmp file, no orphan or missing blob, counts
  right) and the blob files hold exactly the bytes that objects and pending parts reference;
- stopped, `s3gw fsck --deep` exits 0, and the restart after it (no crash) removes no blob
  file the catalog references.

Every other round (round 3 with versioning Suspended, the others Enabled) drives a versioned
bucket instead (versions.py): puts, delete markers, removals by version id, copies from and
reads of versions. After each restart that bucket is checked too: every acknowledged version
and marker is there with its bytes unless its removal was acknowledged, no version but those
cut writes may have made, the null version as the model allows, and the order and the latest
entry right.

At the end every upload is aborted and every version removed: the blob files must all go.

`make test` runs a short form; `make test-reliability` the long one (RELIABILITY_LONG=1).
The seed and the command that replays the run are printed with the summary line.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from pathlib import Path

from tests.datadir import inspect
from tests.reliability.harness import (
    MULTI_REQUEST,
    Contents,
    CrashableGateway,
    MiB,
    Piece,
    Settings,
    Stats,
    Worker,
    Workload,
    client,
    disk_usage,
    empty_everything,
    fsck,
    group_alive,
    make_library,
    operations,
    referenced_files,
    report,
    verify,
    verify_library,
)
from tests.reliability.versions import ENABLED, SUSPENDED, Versions, VersionsWorker, verify_versions

WEIGHTS = {
    "put_small": 30,
    "put_large": 12,
    "copy": 15,
    "delete": 8,
    "delete_objects": 4,
    "multipart": 8,
    "get": 15,
}
KEYS = [f"key-{i}" for i in range(10)] + ["dir/../odd key", "ключ/ü"]
VERSIONED_KEYS = [f"v-{i}" for i in range(5)] + ["dir/../odd key", "ключ/ü"]


def versioning_of(number: int) -> str | None:
    """The versioned bucket's state in round `number`; None: the round is the plain bucket's."""
    if number % 2 == 0:
        return None
    return SUSPENDED if number == 3 else ENABLED


def test_crash_recovery(tmp_path: Path, reliability: Settings) -> None:
    seed, rounds = reliability.seed, reliability.rounds
    rng = random.Random(seed)
    data = tmp_path / "data"
    server = CrashableGateway(data).start()
    stats = Stats()
    contents = Contents()
    s3 = client(server.url)
    library = make_library(s3, contents, "library", rng.getrandbits(63))
    s3.create_bucket(Bucket="crash")
    workload = Workload("crash", KEYS, contents, library, stats, WEIGHTS)
    s3.create_bucket(Bucket="versioned")
    versions = Versions("versioned", VERSIONED_KEYS, contents, stats)
    kills = rounds_done = verified = damage = clean_restarts = 0
    versioned_rounds = versions_verified = 0
    losses: list[str] = []
    failures: list[str] = []
    started = time.monotonic()
    try:
        for number in range(rounds):
            mode = versioning_of(number)
            target: Workload | Versions = workload
            kind: type[Worker] = Worker
            if mode is not None:
                s3.put_bucket_versioning(
                    Bucket="versioned", VersioningConfiguration={"Status": mode}
                )
                versions.mode, target, kind = mode, versions, VersionsWorker
                versioned_rounds += 1
            target.url = server.url
            target.stop.clear()
            workers = [
                kind(target, f"{seed}/{number}/{i}", checksums=i == 0)  # type: ignore[arg-type]
                for i in range(reliability.threads)
            ]
            for worker in workers:
                worker.start()
            time.sleep(rng.uniform(0.1, 3.0 if reliability.long else 2.0))
            target.stop.set()  # no new request; those in flight are cut by the kill
            server.crash()
            kills += 1
            for worker in workers:
                worker.join(60)
            stuck = [w.name for w in workers if w.is_alive()]
            if stuck:
                failures.append(f"round {number}: workers never returned: {stuck}")
                break

            server.start()
            if rng.random() < 0.15:
                # A crash of the restarted gateway before it served anything: recovery itself
                # must leave nothing to recover from.
                server.crash()
                kills += 1
                server.start()
            s3 = client(server.url)
            try:
                inspect(data).assert_clean()  # the start-up sweep removed what the kill left
            except AssertionError as exc:
                failures.append(f"round {number}: data folder not clean after restart: {exc}")
            on_disk, needed = disk_usage(data)
            if on_disk != needed:
                failures.append(
                    f"round {number}: blob files hold {on_disk} bytes, references need {needed}"
                )
            verdict = verify(s3, workload)
            verified += verdict.verified
            losses += [f"round {number}: {loss}" for loss in verdict.losses]
            losses += [f"round {number}: {loss}" for loss in verify_library(s3, library)]
            # The versioned bucket after every crash, whichever bucket the round wrote.
            versioned = verify_versions(s3, versions)
            versions_verified += versioned.verified
            losses += [f"round {number} (versioned): {loss}" for loss in versioned.losses]
            last = number == rounds - 1
            if not reliability.long or number % 5 == 4 or last:
                server.stop()
                status, found, output = fsck(data)
                damage += len(found)
                if status != 0:
                    failures.append(f"round {number}: fsck --deep exit {status}:\n{output}")
                # A restart without a crash must remove nothing the catalog references.
                referenced = referenced_files(data)
                server.start()
                clean_restarts += 1
                removed = sorted(p.name for p in referenced if not p.exists())
                if removed:
                    failures.append(f"round {number}: a clean restart removed {removed}")
                s3 = client(server.url)
            rounds_done += 1
            if losses or failures or stats.problems:
                break

        # Everything goes: the blob files with it.
        empty_everything(s3)
        on_disk, needed = disk_usage(data)
        files = [p for p in (data / "blobs").rglob("*") if p.is_file()]
        if on_disk or needed or files:
            failures.append(f"after deleting everything: {len(files)} blob files, {on_disk} bytes")
        server.stop()
        status, found, output = fsck(data)
        damage += len(found)
        if status != 0:
            failures.append(f"final fsck --deep exit {status}:\n{output}")
    finally:
        if server.proc is not None:
            server.stop()
        report(
            f"crash: seed={seed} rounds={rounds_done} kills={kills} "
            f"ops_acknowledged={stats.acknowledged} ops_cut={stats.cut} "
            f"objects_verified={verified} versioned_rounds={versioned_rounds} "
            f"versions_verified={versions_verified} losses={len(losses)} fsck_damage={damage} "
            f"clean_restarts={clean_restarts} "
            f"seconds={time.monotonic() - started:.0f} (replay: {reliability.replay})"
        )
        report(f"crash: statuses {stats.tally()}")
    assert not stats.server_errors(), stats.server_errors()
    assert not stats.problems, stats.problems
    # Every kind of operation was acknowledged at least once over the rounds (the crashes cut
    # some), and nothing was refused that the workload did not provoke.
    required = operations(WEIGHTS) - MULTI_REQUEST
    assert not stats.failures(required, minimum=1), stats.failures(required, minimum=1)
    assert not losses, losses
    assert not failures, failures
    assert damage == 0


def test_sigkill_of_the_parent_leaves_no_worker_behind(tmp_path: Path) -> None:
    """A crash of the parent alone (the OOM killer, kill -9 of the pid a supervisor knows) must
    not leave workers answering for a gateway that no longer exists, nor block its restart."""
    server = CrashableGateway(tmp_path / "data").start()
    assert server.proc is not None
    pgid = server.proc.pid
    s3 = client(server.url)
    s3.create_bucket(Bucket="parent")
    s3.put_object(Bucket="parent", Key="k", Body=b"x" * MiB)
    server.kill()  # SIGKILL of the parent's pid only
    try:
        deadline = time.monotonic() + 10
        while group_alive(pgid):
            assert time.monotonic() < deadline, f"workers still running: {group_alive(pgid)}"
            time.sleep(0.05)
        again = CrashableGateway(tmp_path / "data").start()
        try:
            body = client(again.url).get_object(Bucket="parent", Key="k")["Body"].read()
            assert body == b"x" * MiB
            inspect(again.data).assert_clean()
        finally:
            again.stop()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def test_the_versioned_check_finds_a_lost_and_an_unknown_version(tmp_path: Path) -> None:
    """verify_versions is what the crash rounds rely on: it must see a version gone behind the
    model's back and one nobody acknowledged."""
    server = CrashableGateway(tmp_path / "data").start()
    try:
        s3 = client(server.url)
        s3.create_bucket(Bucket="versioned")
        s3.put_bucket_versioning(Bucket="versioned", VersioningConfiguration={"Status": ENABLED})
        contents, stats = Contents(), Stats()
        versions = Versions("versioned", ["a", "b"], contents, stats)
        versions.url = server.url
        worker = VersionsWorker(versions, "check", max_ops=40)
        worker.run()
        assert not stats.problems, stats.problems
        assert verify_versions(s3, versions).losses == []
        a = versions.snapshot("a")
        kept = [vid for vid, state in a.items() if state != "marker"]
        assert kept, a  # 40 operations over two keys put something on each
        s3.delete_object(Bucket="versioned", Key="a", VersionId=kept[0])
        _, data = contents.new([Piece(7, 0, 10)])
        s3.put_object(Bucket="versioned", Key="b", Body=data)
        losses = verify_versions(s3, versions).losses
        assert any(f"acknowledged version {kept[0]}" in loss for loss in losses), losses
        assert any("b: versions no write made" in loss for loss in losses), losses
    finally:
        server.stop()
