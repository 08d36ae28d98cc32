"""Many clients on the same few keys (and buckets) at once: every answer is S3's (no 500, no
request that never returns), and the final state is one of the acknowledged writes.

The gateway runs as `make run` starts it (one worker process per core, sharing the catalog), so
the writes also contend across processes for SQLite's one writer.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import botocore.exceptions

from tests.datadir import inspect
from tests.reliability.harness import (
    Contents,
    CrashableGateway,
    KiB,
    MiB,
    Settings,
    Stats,
    Worker,
    Workload,
    client,
    disk_usage,
    fsck,
    make_library,
    operations,
    report,
    verify,
    verify_library,
)

WEIGHTS = {
    "put_small": 25,
    "put_large": 6,
    "copy": 20,
    "delete": 10,
    "delete_objects": 5,
    "multipart": 8,
    "get": 26,
}
# Generous: a request that has not returned by then is stuck, not slow.
DEADLOCK_SECONDS = 120


def test_same_keys_written_copied_and_deleted_at_once(
    tmp_path: Path, reliability: Settings
) -> None:
    clients = 24 if reliability.long else 12
    ops = 150 if reliability.long else 60
    data = tmp_path / "data"
    server = CrashableGateway(data).start()
    try:
        s3 = client(server.url)
        contents, stats = Contents(), Stats()
        library = make_library(s3, contents, "library", reliability.seed)
        s3.create_bucket(Bucket="contended")
        keys = ["a", "b", "c"]
        workload = Workload(
            "contended", keys, contents, library, stats, WEIGHTS, large=(256 * KiB, 2 * MiB)
        )
        workload.url = server.url
        workers = [
            Worker(workload, f"{reliability.seed}/contended/{i}", checksums=i % 4 == 0, max_ops=ops)
            for i in range(clients)
        ]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(max(0.0, started + DEADLOCK_SECONDS - time.monotonic()))
        stuck = [w.name for w in workers if w.is_alive()]
        workload.stop.set()
        assert not stuck, f"requests still waiting after {DEADLOCK_SECONDS} s: {stuck}"
        seconds = time.monotonic() - started

        verdict = verify(s3, workload, rebase=False)
        losses = verdict.losses + verify_library(s3, library)
        inspect(data).assert_clean()
        on_disk, needed = disk_usage(data)
        report(
            f"concurrency: seed={reliability.seed} clients={clients} keys={len(keys)} "
            f"ops_acknowledged={stats.acknowledged} objects_verified={verdict.verified} "
            f"absent={verdict.absent} losses={len(losses)} seconds={seconds:.0f}"
        )
        report(f"concurrency: statuses {stats.tally()}")
        assert not stats.server_errors(), stats.server_errors()
        assert stats.cut == 0, "a connection was cut while the server ran"
        assert not stats.problems, stats.problems
        # Every kind of operation succeeded, and refused nothing it did not provoke.
        assert not stats.failures(operations(WEIGHTS), minimum=3), stats.failures(
            operations(WEIGHTS), minimum=3
        )
        assert not losses, losses
        assert on_disk == needed
        server.stop()
        status, damage, output = fsck(data)
        assert status == 0 and not damage, output
    finally:
        server.stop()


def _race(n: int, fn, *args) -> list[str]:  # type: ignore[no-untyped-def]
    """Run fn(i, *args) in n threads released at once; their results, in thread order."""
    barrier = threading.Barrier(n)
    results: list[str] = [""] * n

    def run(i: int) -> None:
        barrier.wait()
        results[i] = fn(i, *args)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLOCK_SECONDS)
    assert not any(t.is_alive() for t in threads), "a request never returned"
    return results


def _answer(call) -> str:  # type: ignore[no-untyped-def]
    try:
        response = call()
    except botocore.exceptions.ClientError as exc:
        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        return f"{status} {exc.response['Error']['Code']}"
    return str(response["ResponseMetadata"]["HTTPStatusCode"])


def _create(i: int, clients: list, name: str) -> str:  # type: ignore[type-arg]
    return _answer(lambda: clients[i].create_bucket(Bucket=name))


def _delete_while_writing(i: int, clients: list, name: str, delay: float) -> str:  # type: ignore[type-arg]
    s3 = clients[i]
    if i == 0:
        time.sleep(delay)  # sometimes before the PUTs commit, sometimes after
        return "delete " + _answer(lambda: s3.delete_bucket(Bucket=name))
    if i == 1:
        return "upload " + _answer(lambda: s3.create_multipart_upload(Bucket=name, Key="mp"))
    # 400 KiB to 1.4 MiB: staged in tmp/ (a blob file) while the bucket may go away.
    body = b"b" * (i * 200 * KiB)
    return "put " + _answer(lambda: s3.put_object(Bucket=name, Key=f"k{i}", Body=body))


def test_bucket_created_deleted_and_written_at_once(tmp_path: Path, reliability: Settings) -> None:
    data = tmp_path / "data"
    server = CrashableGateway(data).start()
    try:
        tally: Counter[str] = Counter()
        rng = random.Random(reliability.seed)
        for attempt in range(10 if reliability.long else 4):
            name = f"race-{attempt}"
            # New connections each time: a connection whose PUT was refused before its body
            # was read stalls the next request on it (see test_hostile's lingering test).
            clients = [client(server.url) for _ in range(8)]
            # Eight CreateBucket of one name: in us-east-1 AWS answers the owner's repeats with
            # 200 (resetting its ACL), elsewhere 409 BucketAlreadyOwnedByYou; one bucket either way.
            created = _race(8, _create, clients, name)
            tally.update(f"CreateBucket {a}" for a in created)
            assert set(created) <= {"200", "409 BucketAlreadyOwnedByYou"}, created
            names = [b["Name"] for b in clients[0].list_buckets()["Buckets"]]
            assert names.count(name) == 1

            # PUTs and an upload racing a DeleteBucket: either the bucket goes (and no PUT
            # succeeded) or it stays with every acknowledged object.
            delay = rng.choice([0.0, rng.uniform(0, 0.05), rng.uniform(0.05, 0.2)])
            results = _race(8, _delete_while_writing, clients, name, delay)
            tally.update(results)
            puts_ok = [r for r in results if r == "put 200"]
            existing = {b["Name"] for b in clients[0].list_buckets()["Buckets"]}
            if results[0] == "delete 204":
                assert not puts_ok, results
                assert name not in existing
            else:
                assert results[0] == "delete 409 BucketNotEmpty", results
                assert name in existing
                listed = clients[0].list_objects_v2(Bucket=name).get("Contents", [])
                assert len(listed) == len(puts_ok), (results, listed)
            assert not [r for r in results if r.split()[1].startswith("5")], results
            # A PUT refused at its commit (the bucket went) frees its staged blob file after
            # its answer, as every release is made after the commit: clean within a bound.
            deadline = time.monotonic() + 30
            while True:
                try:
                    inspect(data).assert_clean()
                    break
                except AssertionError:
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.1)
            for s3 in clients:
                s3.close()
        report(f"bucket races: {', '.join(f'{k}: {n}' for k, n in sorted(tally.items()))}")
        server.stop()
        status, damage, output = fsck(data)
        assert status == 0 and not damage, output
    finally:
        server.stop()
