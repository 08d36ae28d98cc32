"""kill -9 of a gateway whose blobs are on SeaweedFS while large PUTs and a multipart upload
stream in: every acknowledged object and part survives with its bytes, fsck is clean, copies
write nothing below, deletes release what is below, and once every object is gone and the
reclaimer has run (a lease of two seconds) nothing is left in the bucket below but its
catalog-id."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from botocore.exceptions import BotoCoreError, ClientError

from tests.seaweed import SeaweedServer
from tests.server import GatewayProcess

MIB = 1 << 20
# Above the tier's PART_SIZE (8 MiB): each goes below as a multipart upload, so a kill finds
# uploads in progress there.
PUT_SIZE = 19 * MIB + 11
PART_SIZE = 9 * MIB + 5
WRITERS = 3


def _bytes(seed: str, size: int) -> bytes:
    """The body of `seed`: the same bytes whenever asked (a PUT whose answer the kill cut
    may have landed; if it did, it must hold exactly these)."""
    return random.Random(seed).randbytes(size)


def _below(seaweed: SeaweedServer, bucket: str) -> list[str]:
    return sorted(seaweed.keys(bucket))


def _blobs(seaweed: SeaweedServer, bucket: str) -> set[str]:
    return {k for k in seaweed.keys(bucket) if k != "t/catalog-id"}


def _uploads_below(seaweed: SeaweedServer, bucket: str) -> list[Any]:
    return seaweed.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def _intents(server: GatewayProcess) -> int:
    """The blob intents the catalog holds (writes in flight, or a killed writer's not yet
    reclaimed), read beside the running gateway."""
    query = "SELECT count(*) FROM blob_intents"
    if server.catalog is None:
        with sqlite3.connect(f"file:{server.data / 'catalog.sqlite3'}?mode=ro", uri=True) as conn:
            return int(conn.execute(query).fetchone()[0])
    with psycopg.connect(server.catalog, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
        return int(row[0]) if row else 0


def _fsck(server: GatewayProcess, env: dict[str, str]) -> str:
    run_env = {**os.environ, **env}
    run_env.pop("S3GW_CATALOG", None)
    if server.catalog is not None:
        run_env["S3GW_CATALOG"] = server.catalog
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "fsck", "--deep", "--data", str(server.data)],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no damage found" in done.stdout, done.stdout
    return done.stdout


def _wait(what: str, condition: Any, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_kill_mid_upload_then_delete_everything_leaves_nothing_below(
    tmp_path: Path, seaweed: SeaweedServer, catalog: str | None
) -> None:
    own = seaweed.bucket(f"crash-{os.getpid()}-{'sqlite' if catalog is None else 'pg'}")
    env = {**seaweed.env(own), "S3GW_BLOBS": f"s3://{own}/t"}
    # One process, so that the SIGKILL takes the whole gateway; a short lease, so that the
    # reclaimer takes what the killed one left without a start-up sweep (PostgreSQL's case).
    options = ("--workers", "1", "--blob-lease", "2", "--default-encryption", "none")
    server = GatewayProcess(tmp_path / "data", env, *options, catalog=catalog).start()
    s3 = server.client()
    s3.create_bucket(Bucket="crash")

    acknowledged: dict[str, bytes] = {}
    attempted: set[str] = set()
    parts_done: dict[int, str] = {}  # part number -> ETag, of parts acknowledged
    stop = threading.Event()
    lock = threading.Lock()

    def writer(n: int) -> None:
        client = server.client()
        for i in range(10_000):
            if stop.is_set():
                return
            key = f"w{n}/{i}"
            data = _bytes(key, PUT_SIZE)
            with lock:
                attempted.add(key)
            try:
                client.put_object(Bucket="crash", Key=key, Body=data)
            except (BotoCoreError, ClientError):  # the gateway died under it
                return
            with lock:
                acknowledged[key] = data

    upload = s3.create_multipart_upload(Bucket="crash", Key="mp")["UploadId"]

    def parts() -> None:
        client = server.client()
        for number in range(1, 10_000):
            if stop.is_set():
                return
            try:
                etag = client.upload_part(
                    Bucket="crash",
                    Key="mp",
                    UploadId=upload,
                    PartNumber=number,
                    Body=_bytes(f"part{number}", PART_SIZE),
                )["ETag"]
            except (BotoCoreError, ClientError):
                return
            with lock:
                parts_done[number] = etag

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(WRITERS)]
    threads.append(threading.Thread(target=parts, daemon=True))
    for thread in threads:
        thread.start()
    # Kill once some PUTs and a part were acknowledged and uploads are in progress below.
    _wait(
        "no PUT or part was acknowledged",
        lambda: len(acknowledged) >= 2 and len(parts_done) >= 1,
        120,
    )
    _wait("no upload was under way below", lambda: _uploads_below(seaweed, own), 60)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(60)
    assert acknowledged and parts_done

    server.start()
    s3 = server.client()
    for key, data in acknowledged.items():
        assert s3.get_object(Bucket="crash", Key=key)["Body"].read() == data, key
    # A PUT whose answer the kill cut either landed whole or not at all.
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket="crash").get("Contents", [])}
    assert set(acknowledged) <= listed <= attempted
    for key in listed - set(acknowledged):
        assert s3.get_object(Bucket="crash", Key=key)["Body"].read() == _bytes(key, PUT_SIZE)
    # The upload and its acknowledged parts outlived the kill; complete with those.
    kept = {
        p["PartNumber"] for p in s3.list_parts(Bucket="crash", Key="mp", UploadId=upload)["Parts"]
    }
    assert set(parts_done) <= kept
    numbers = sorted(parts_done)
    s3.complete_multipart_upload(
        Bucket="crash",
        Key="mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": parts_done[n]} for n in numbers]},
    )
    whole = b"".join(_bytes(f"part{n}", PART_SIZE) for n in numbers)
    assert s3.get_object(Bucket="crash", Key="mp")["Body"].read() == whole

    # What the killed gateway left below (uploads in progress, objects no commit named) is
    # gone: by the start-up sweep (SQLite) or by the reclaimer once the intents lapsed.
    _wait("the killed gateway's uploads stayed below", lambda: not _uploads_below(seaweed, own))
    objects = sorted(listed | {"mp"})
    # One blob below per PUT, one per part kept.
    named = len(listed) + len(numbers)
    _wait("orphans stayed below", lambda: len(_blobs(seaweed, own)) == named)
    # A write killed after its intent was recorded and before anything went below leaves
    # only the intent: the reclaimer takes it once the lease lapsed.
    _wait("the killed gateway's intents stayed", lambda: _intents(server) == 0)

    server.stop()
    report = _fsck(server, env)
    assert "leftover" not in report, report
    server.start()
    s3 = server.client()

    # Copies are manifests: CopyObject and UploadPartCopy write nothing below.
    count = len(_blobs(seaweed, own))
    s3.copy_object(Bucket="crash", Key="copy", CopySource={"Bucket": "crash", "Key": "mp"})
    part_copy = s3.create_multipart_upload(Bucket="crash", Key="pc")["UploadId"]
    etag = s3.upload_part_copy(
        Bucket="crash",
        Key="pc",
        UploadId=part_copy,
        PartNumber=1,
        CopySource={"Bucket": "crash", "Key": min(listed)},
        CopySourceRange=f"bytes={MIB}-{6 * MIB}",
    )["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(
        Bucket="crash",
        Key="pc",
        UploadId=part_copy,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    assert len(_blobs(seaweed, own)) == count
    assert s3.get_object(Bucket="crash", Key="copy")["Body"].read() == whole

    # Deleting the source keeps what the copy still names; deleting the copy releases it.
    s3.delete_object(Bucket="crash", Key="mp")
    assert len(_blobs(seaweed, own)) == count
    s3.delete_object(Bucket="crash", Key="copy")
    _wait(
        "the copy's blobs stayed below", lambda: len(_blobs(seaweed, own)) == count - len(numbers)
    )
    for key in [*objects, "pc"]:
        s3.delete_object(Bucket="crash", Key=key)
    _wait("deleted objects' blobs stayed below", lambda: not _blobs(seaweed, own))
    server.stop()
    assert _below(seaweed, own) == ["t/catalog-id"]
    assert not _uploads_below(seaweed, own)
    report = _fsck(server, env)
    assert "leftover" not in report, report
