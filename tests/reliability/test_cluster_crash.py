"""Crash recovery with several nodes (issue 15): the crash harness's workload spread over three
gateway nodes on one PostgreSQL catalog and one data folder.

Each round the workers (each bound to one node) run PUT small and large, CopyObject, multipart
with UploadPart and UploadPartCopy, DELETE, DeleteObjects and GET over the same few keys; at a
random moment one node, or in some rounds two, is killed with SIGKILL (every process of it)
while the others keep serving; then the workers stop, the dead nodes start again and join the
others, and through another node:

- every key holds a state the model allows (an acknowledged write not superseded by a later
  acknowledged one, or a write cut by the kill), with exactly that content's bytes and ETag;
- no key nobody wrote exists, and the library objects written before the workload are intact.

No node starts alone until the end, so none sweeps: what a killed node left (bodies half
received, blob files not yet committed) is the serving nodes' to reclaim through its blob
intents (a lease of one second here; test_cluster.py checks that reclaim). At the end, every
node stopped, `s3gw fsck --deep` on the database finds no damage; a node started alone then
serves the same objects, and once every upload is aborted and every version removed no blob
file is left.

`make test` runs a short form; `make test-reliability` the long one (RELIABILITY_LONG=1).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from tests.postgres import PostgresServer
from tests.reliability.harness import (
    MULTI_REQUEST,
    Contents,
    CrashableGateway,
    Settings,
    Stats,
    Worker,
    Workload,
    client,
    empty_everything,
    fsck,
    make_library,
    operations,
    report,
    verify,
    verify_library,
)
from tests.reliability.test_crash import KEYS, WEIGHTS

NODES = 3


def test_cluster_crash_recovery(
    tmp_path: Path, reliability: Settings, postgres: PostgresServer
) -> None:
    seed = reliability.seed
    rng = random.Random(seed)
    data, catalog = tmp_path / "data", postgres.database()
    env = {"S3GW_CATALOG": catalog, "S3GW_BLOB_LEASE": "1.0"}
    nodes = [CrashableGateway(data, env) for _ in range(NODES)]
    for node in nodes:
        node.start()
    stats, contents = Stats(), Contents()
    s3 = client(nodes[0].url)
    library = make_library(s3, contents, "library", rng.getrandbits(63))
    s3.create_bucket(Bucket="crash")
    workload = Workload("crash", KEYS, contents, library, stats, WEIGHTS)
    kills = rounds_done = verified = damage = 0
    losses: list[str] = []
    failures: list[str] = []
    started = time.monotonic()
    try:
        for number in range(reliability.rounds):
            workload.stop.clear()
            workers = [
                Worker(workload, f"{seed}/{number}/{i}", checksums=i == 0, url=nodes[i % NODES].url)
                for i in range(reliability.threads)
            ]
            for worker in workers:
                worker.start()
            time.sleep(rng.uniform(0.1, 2.0))
            dead = rng.sample(range(NODES), 2 if rng.random() < 0.25 else 1)
            for index in dead:
                nodes[index].crash()
                kills += 1
            time.sleep(rng.uniform(0.0, 1.0))  # the others serve on meanwhile
            workload.stop.set()
            for worker in workers:
                worker.join(60)
            stuck = [w.name for w in workers if w.is_alive()]
            if stuck:
                failures.append(f"round {number}: workers never returned: {stuck}")
                break
            for index in dead:
                nodes[index].start()  # joins the nodes that serve: no sweep
            survivor = next(i for i in range(NODES) if i not in dead)
            s3 = client(nodes[survivor].url)
            verdict = verify(s3, workload)
            verified += verdict.verified
            losses += [f"round {number}: {loss}" for loss in verdict.losses]
            losses += [f"round {number}: {loss}" for loss in verify_library(s3, library)]
            rounds_done += 1
            if losses or failures or stats.problems:
                break

        time.sleep(2.5)  # past the lease: the killed nodes' leftovers are reclaimed
        for node in nodes:
            node.stop()
        status, found, output = fsck(data, catalog=catalog)
        damage += len(found)
        if status != 0:
            failures.append(f"fsck --deep exit {status}:\n{output}")

        alone = nodes[0].start()
        s3 = client(alone.url)
        verdict = verify(s3, workload)
        losses += [f"after a lone start: {loss}" for loss in verdict.losses]
        empty_everything(s3)
        files = [p for p in (data / "blobs").rglob("*") if p.is_file()]
        if files:
            failures.append(f"after deleting everything: {len(files)} blob files")
    finally:
        for node in nodes:
            if node.proc is not None:
                node.stop()
        report(
            f"cluster crash: seed={seed} nodes={NODES} rounds={rounds_done} kills={kills} "
            f"ops_acknowledged={stats.acknowledged} ops_cut={stats.cut} "
            f"objects_verified={verified} losses={len(losses)} fsck_damage={damage} "
            f"seconds={time.monotonic() - started:.0f} (replay: {reliability.replay})"
        )
        report(f"cluster crash: statuses {stats.tally()}")
    for node in nodes:
        assert not [line for line in node.log if "Traceback" in line], "".join(node.log)
    assert not stats.server_errors(), stats.server_errors()
    assert not stats.problems, stats.problems
    # Every kind of operation acknowledged at least once over the rounds, nothing refused
    # that the workload did not provoke.
    required = operations(WEIGHTS) - MULTI_REQUEST
    assert not stats.failures(required, minimum=1), stats.failures(required, minimum=1)
    assert not losses, losses
    assert not failures, failures
    assert damage == 0
