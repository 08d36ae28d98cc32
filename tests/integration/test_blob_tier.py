"""A gateway whose blobs are objects in a bucket of SeaweedFS (--blobs s3://…, gateway/tiers/),
driven with boto3: PUT and ranged GETs, multipart, copies and UploadPartCopy (which write
nothing below), versions, deletes and lifecycle expiry (which release what is below), a deep
fsck over the bucket, and a SIGKILL mid-upload that loses nothing acknowledged."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.seaweed import SeaweedServer
from tests.server import GatewayProcess

MIB = 1 << 20
MARKER = b"PLAINTEXT-MARKER-OF-THE-BLOB-TIER"
_buckets = iter(range(10**6))


def _body(size: int) -> bytes:
    piece = MARKER + os.urandom(4096)
    return (piece * (size // len(piece) + 1))[:size]


@pytest.fixture(scope="module")
def below(seaweed: SeaweedServer, module_catalog: str | None) -> str:
    """The bucket below this module's gateway (one per catalog)."""
    return seaweed.bucket(f"tier-{os.getpid()}-{'sqlite' if module_catalog is None else 'pg'}")


@pytest.fixture(scope="module")
def tier(
    tmp_path_factory: pytest.TempPathFactory,
    seaweed: SeaweedServer,
    below: str,
    module_catalog: str | None,
) -> Iterator[GatewayProcess]:
    """On each catalog: with PostgreSQL, the nodes' case (no start-up sweep: intents)."""
    data = tmp_path_factory.mktemp("tier") / "data"
    # Plaintext unless a request asks: a test sees both kinds below.
    options = ("--lifecycle-day", "1", "--default-encryption", "none")
    server = GatewayProcess(data, seaweed.env(below), *options, catalog=module_catalog).start()
    yield server
    server.stop()


@pytest.fixture
def s3(tier: GatewayProcess) -> Any:
    return tier.client()


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"tier-{next(_buckets)}"
    s3.create_bucket(Bucket=name)
    return name


def blobs_below(seaweed: SeaweedServer, below: str) -> list[str]:
    return seaweed.keys(below, "blobs/blobs/")


def fsck(server: GatewayProcess, seaweed: SeaweedServer, below: str) -> str:
    """`s3gw fsck --deep` on the stopped gateway's folder and its bucket: exit status 0."""
    env = {**os.environ, **seaweed.env(below)}
    env.pop("S3GW_CATALOG", None)
    if server.catalog is not None:
        env["S3GW_CATALOG"] = server.catalog
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "fsck", "--deep", "--data", str(server.data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no damage found" in done.stdout
    return done.stdout


def test_put_and_ranged_gets_over_blobs_below(s3, bucket, seaweed, below):
    before = set(blobs_below(seaweed, below))
    small, medium, large = b"tiny", _body(3 * MIB + 7), _body(21 * MIB + 5)
    for key, data in (("small", small), ("medium", medium), ("large", large)):
        s3.put_object(Bucket=bucket, Key=key, Body=data, ServerSideEncryption="AES256")
    new = set(blobs_below(seaweed, below)) - before
    # The small one is inline in the catalog; each other is one object below (the large one
    # sent as a multipart upload there), and ciphertext.
    assert len(new) == 2
    for key in new:
        stored = seaweed.client().get_object(Bucket=below, Key=key)["Body"].read()
        assert MARKER not in stored and len(stored) > 3 * MIB
    assert s3.get_object(Bucket=bucket, Key="small")["Body"].read() == small
    assert s3.get_object(Bucket=bucket, Key="large")["Body"].read() == large
    for first, last in ((0, 0), (5, 70_000), (8 * MIB - 3, 8 * MIB + 100_000), (21 * MIB, None)):
        spec = f"bytes={first}-" + ("" if last is None else str(last))
        got = s3.get_object(Bucket=bucket, Key="large", Range=spec)["Body"].read()
        assert got == large[first : None if last is None else last + 1]
    got = s3.get_object(Bucket=bucket, Key="medium", Range="bytes=-100")["Body"].read()
    assert got == medium[-100:]


def test_bodies_up_to_256_kib_stay_in_the_catalog_by_default(s3, bucket, seaweed, below):
    # The tier's --inline-max default (a read below costs a round trip to the store).
    before = set(blobs_below(seaweed, below))
    kept, sent = _body(256 * 1024), _body(256 * 1024 + 1)
    s3.put_object(Bucket=bucket, Key="kept", Body=kept)
    assert set(blobs_below(seaweed, below)) == before
    s3.put_object(Bucket=bucket, Key="sent", Body=sent)
    assert len(set(blobs_below(seaweed, below)) - before) == 1
    assert s3.get_object(Bucket=bucket, Key="kept")["Body"].read() == kept
    assert s3.get_object(Bucket=bucket, Key="sent")["Body"].read() == sent


def test_plaintext_objects_go_below_as_they_are(s3, bucket, seaweed, below):
    before = set(blobs_below(seaweed, below))
    data = _body(2 * MIB)
    s3.put_object(Bucket=bucket, Key="plain", Body=data)
    (new,) = set(blobs_below(seaweed, below)) - before
    assert seaweed.client().get_object(Bucket=below, Key=new)["Body"].read() == data
    got = s3.get_object(Bucket=bucket, Key="plain", Range="bytes=100-199")["Body"].read()
    assert got == data[100:200]


def test_multipart_copy_and_part_copy_write_nothing_below(s3, bucket, seaweed, below):
    parts = [_body(5 * MIB), _body(MIB + 3)]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    etags = [
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=n, Body=b)["ETag"]
        for n, b in enumerate(parts, 1)
    ]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]},
    )
    whole = b"".join(parts)
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == whole
    count = len(blobs_below(seaweed, below))
    s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "mp"})
    upload = s3.create_multipart_upload(Bucket=bucket, Key="pc")["UploadId"]
    copied = s3.upload_part_copy(
        Bucket=bucket,
        Key="pc",
        UploadId=upload,
        PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "mp"},
        CopySourceRange=f"bytes={MIB}-{6 * MIB}",
    )["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="pc",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": copied}]},
    )
    assert len(blobs_below(seaweed, below)) == count  # copies are metadata
    assert s3.get_object(Bucket=bucket, Key="copy")["Body"].read() == whole
    assert s3.get_object(Bucket=bucket, Key="pc")["Body"].read() == whole[MIB : 6 * MIB + 1]


def test_versions_and_deletes_release_what_is_below(s3, bucket, seaweed, below):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    first, second = _body(MIB + 1), _body(MIB + 2)
    before = set(blobs_below(seaweed, below))
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=first)["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="v", Body=second)["VersionId"]
    assert len(set(blobs_below(seaweed, below)) - before) == 2
    assert s3.get_object(Bucket=bucket, Key="v", VersionId=v1)["Body"].read() == first
    assert s3.get_object(Bucket=bucket, Key="v")["Body"].read() == second
    s3.delete_object(Bucket=bucket, Key="v")  # a delete marker: both versions stay
    assert len(set(blobs_below(seaweed, below)) - before) == 2
    s3.delete_object(Bucket=bucket, Key="v", VersionId=v1)
    assert len(set(blobs_below(seaweed, below)) - before) == 1
    s3.delete_object(Bucket=bucket, Key="v", VersionId=v2)
    assert set(blobs_below(seaweed, below)) - before == set()
    with pytest.raises(ClientError):
        s3.get_object(Bucket=bucket, Key="v", VersionId=v2)


def test_lifecycle_expiry_releases_what_is_below(s3, bucket, seaweed, below):
    before = set(blobs_below(seaweed, below))
    s3.put_object(Bucket=bucket, Key="old/a", Body=_body(MIB + 9))
    assert len(set(blobs_below(seaweed, below)) - before) == 1
    rule = {"ID": "old", "Status": "Enabled", "Filter": {"Prefix": "old/"}}
    rules = [{**rule, "Expiration": {"Days": 1}}]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    deadline = time.monotonic() + 60
    while s3.list_objects_v2(Bucket=bucket).get("KeyCount"):
        assert time.monotonic() < deadline, "the object did not expire"
        time.sleep(0.5)
    deadline = time.monotonic() + 30
    while set(blobs_below(seaweed, below)) - before:
        assert time.monotonic() < deadline, "the expired object's blob stayed below"
        time.sleep(0.2)


def test_fsck_deep_is_clean_over_the_bucket(tier, s3, bucket, seaweed, below):
    s3.put_object(Bucket=bucket, Key="checked", Body=_body(9 * MIB))
    tier.stop()
    try:
        report = fsck(tier, seaweed, below)
        assert "leftover" not in report
        # A blob below that the catalog does not know is a leftover, not damage.
        seaweed.client().put_object(Bucket=below, Key="blobs/blobs/ee/" + "ee" * 16, Body=b"x")
        report = fsck(tier, seaweed, below)
        assert "leftover: orphan blob file " + "ee" * 16 in report
    finally:
        seaweed.client().delete_object(Bucket=below, Key="blobs/blobs/ee/" + "ee" * 16)
        tier.start()
    got = tier.client().get_object(Bucket=bucket, Key="checked")["Body"].read()
    assert len(got) == 9 * MIB


def test_sigkill_mid_upload_loses_nothing_acknowledged(
    tmp_path: Path, seaweed: SeaweedServer, catalog: str | None
) -> None:
    """On SQLite, one node: its start-up sweep aborts what the killed one left below. On
    PostgreSQL, the nodes' case: no sweep; the blob's intent lapses (a lease of two seconds
    here) and the reclaimer aborts the upload below."""
    own = seaweed.bucket(f"kill-{os.getpid()}-{'sqlite' if catalog is None else 'pg'}")
    # One process: the SIGKILL takes the whole gateway.
    options = ["--workers", "1"] + ([] if catalog is None else ["--blob-lease", "2"])
    server = GatewayProcess(tmp_path / "data", seaweed.env(own), *options, catalog=catalog)
    server.start()
    s3 = server.client()
    s3.create_bucket(Bucket="crash")
    acknowledged = {f"k{n}": _body(MIB + n) for n in range(3)}
    for key, data in acknowledged.items():
        s3.put_object(Bucket="crash", Key=key, Body=data)
    sent, killed = threading.Event(), threading.Event()

    def body() -> Iterator[bytes]:
        for n in range(200):
            if killed.is_set():
                return
            if n == 3:
                sent.set()
            yield os.urandom(MIB)
            if n >= 3:
                time.sleep(0.05)

    def upload() -> None:
        with contextlib.suppress(Exception):  # the gateway dies under it
            s3.upload_fileobj(_Stream(body()), "crash", "big")

    thread = threading.Thread(target=upload, daemon=True)
    thread.start()
    assert sent.wait(60)
    deadline = time.monotonic() + 30
    while not seaweed.client().list_multipart_uploads(Bucket=own).get("Uploads"):
        assert time.monotonic() < deadline, "the body never reached the store below"
        time.sleep(0.05)
    server.kill()
    killed.set()
    thread.join(60)
    server.start()
    try:
        s3 = server.client()
        for key, data in acknowledged.items():
            got = s3.get_object(Bucket="crash", Key=key)["Body"].read()
            assert hashlib.md5(got).digest() == hashlib.md5(data).digest()
        assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="crash")["Contents"]) == sorted(
            acknowledged
        )
        # The start-up sweep, or the reclaimer, aborted what the killed gateway left below.
        deadline = time.monotonic() + 30
        while seaweed.client().list_multipart_uploads(Bucket=own).get("Uploads"):
            assert time.monotonic() < deadline, "the killed gateway's upload stayed below"
            time.sleep(0.2)
    finally:
        server.stop()
    report = fsck(server, seaweed, own)
    assert "leftover" not in report


class _Stream:
    """A file-like object over an iterator of pieces (boto3's upload_fileobj reads it)."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = pieces
        self.rest = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.rest) < size:
            piece = next(self.pieces, None)
            if piece is None:
                break
            self.rest += piece
        out, self.rest = (self.rest, b"") if size < 0 else (self.rest[:size], self.rest[size:])
        return out


def test_keys_from_a_credentials_file(tmp_path: Path, seaweed: SeaweedServer) -> None:
    """--blobs-credentials, as a Docker or Kubernetes secret gives them: a file, no keys in
    the environment; a file that cannot give them stops the start with one line."""
    own = seaweed.bucket(f"file-keys-{os.getpid()}")
    env = seaweed.env(own)
    secret = tmp_path / "blobs-credentials"
    secret.write_text(
        "[default]\n"
        f"aws_access_key_id = {env.pop('S3GW_BLOBS_ACCESS_KEY')}\n"
        f"aws_secret_access_key = {env.pop('S3GW_BLOBS_SECRET_KEY')}\n"
    )
    server = GatewayProcess(tmp_path / "data", {**env, "S3GW_BLOBS_CREDENTIALS": str(secret)})
    assert "S3GW_BLOBS_ACCESS_KEY" not in server.env
    server.start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="filed")
        data = _body(MIB + 5)
        s3.put_object(Bucket="filed", Key="k", Body=data)
        assert s3.get_object(Bucket="filed", Key="k")["Body"].read() == data
        assert len(blobs_below(seaweed, own)) == 1
    finally:
        server.stop()
    missing = tmp_path / "no-such-file"
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--data", str(tmp_path / "data")],
        env={**os.environ, **env, "S3GW_BLOBS_CREDENTIALS": str(missing)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"--blobs-credentials/S3GW_BLOBS_CREDENTIALS {missing}: cannot read it: "
        "No such file or directory"
    ]
