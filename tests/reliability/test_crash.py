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

At the end every upload is aborted and every object deleted: the blob files must all go.

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
    Contents,
    CrashableGateway,
    MiB,
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
    referenced_files,
    report,
    verify,
    verify_library,
)

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
    kills = rounds_done = verified = damage = clean_restarts = 0
    losses: list[str] = []
    failures: list[str] = []
    started = time.monotonic()
    try:
        for number in range(rounds):
            workload.url = server.url
            workload.stop.clear()
            workers = [
                Worker(workload, f"{seed}/{number}/{i}", checksums=i == 0)
                for i in range(reliability.threads)
            ]
            for worker in workers:
                worker.start()
            time.sleep(rng.uniform(0.1, 3.0 if reliability.long else 2.0))
            workload.stop.set()  # no new request; those in flight are cut by the kill
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
            f"objects_verified={verified} losses={len(losses)} fsck_damage={damage} "
            f"clean_restarts={clean_restarts} "
            f"seconds={time.monotonic() - started:.0f} (replay: {reliability.replay})"
        )
        report(f"crash: statuses {stats.tally()}")
    assert not stats.server_errors(), stats.server_errors()
    assert not stats.problems, stats.problems
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
