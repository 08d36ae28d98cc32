"""`s3gw migrate --blobs-to`: a gateway's blobs moved from its data folder to SeaweedFS and back,
each object read through a gateway started on the new tier, fsck --deep clean on each; a start
on the old tier is refused once they moved; a second move skips what is already there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.seaweed import SeaweedServer
from tests.server import GatewayProcess

MIB = 1 << 20


def _run(server: GatewayProcess, env: dict[str, str], *args: str) -> Any:
    full = {k: v for k, v in os.environ.items() if not k.startswith("S3GW_BLOBS")}
    full.pop("S3GW_CATALOG", None)
    full.update(env)
    if server.catalog is not None:
        full["S3GW_CATALOG"] = server.catalog
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args, "--data", str(server.data)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _fsck_clean(server: GatewayProcess, env: dict[str, str]) -> None:
    done = _run(server, env, "fsck", "--deep")
    assert done.returncode == 0 and "no damage found" in done.stdout, done.stdout + done.stderr
    assert "leftover" not in done.stdout, done.stdout


def _write(s3: Any) -> tuple[dict[str, bytes], dict[str, bytes], str]:
    """Objects of every kind (inline, plain, encrypted, multipart, a copy, versions) and a
    pending upload's part; (current objects, old versions by id, upload id)."""
    s3.create_bucket(Bucket="moved")
    s3.put_bucket_versioning(Bucket="moved", VersioningConfiguration={"Status": "Enabled"})
    objects = {
        "small": b"tiny",
        "plain": os.urandom(MIB + 1),
        "sealed": os.urandom(9 * MIB + 3),
    }
    s3.put_object(Bucket="moved", Key="small", Body=objects["small"])
    s3.put_object(Bucket="moved", Key="plain", Body=objects["plain"])
    s3.put_object(
        Bucket="moved", Key="sealed", Body=objects["sealed"], ServerSideEncryption="AES256"
    )
    old = os.urandom(MIB + 7)
    first = s3.put_object(Bucket="moved", Key="versioned", Body=old)["VersionId"]
    objects["versioned"] = os.urandom(MIB + 8)
    s3.put_object(Bucket="moved", Key="versioned", Body=objects["versioned"])
    parts = [os.urandom(5 * MIB), os.urandom(MIB)]
    upload = s3.create_multipart_upload(Bucket="moved", Key="mp")["UploadId"]
    etags = [
        s3.upload_part(Bucket="moved", Key="mp", UploadId=upload, PartNumber=n, Body=b)["ETag"]
        for n, b in enumerate(parts, 1)
    ]
    s3.complete_multipart_upload(
        Bucket="moved",
        Key="mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]},
    )
    objects["mp"] = b"".join(parts)
    s3.copy_object(Bucket="moved", Key="copy", CopySource={"Bucket": "moved", "Key": "mp"})
    objects["copy"] = objects["mp"]
    pending = s3.create_multipart_upload(Bucket="moved", Key="later")["UploadId"]
    s3.upload_part(Bucket="moved", Key="later", UploadId=pending, PartNumber=1, Body=parts[0])
    return objects, {first: old}, pending


def _read_all(s3: Any, objects: dict[str, bytes], versions: dict[str, bytes]) -> None:
    for key, data in objects.items():
        assert s3.get_object(Bucket="moved", Key=key)["Body"].read() == data, key
    for version, data in versions.items():
        got = s3.get_object(Bucket="moved", Key="versioned", VersionId=version)["Body"].read()
        assert got == data


def test_blobs_move_to_seaweed_and_back(
    tmp_path: Path, seaweed: SeaweedServer, catalog: str | None
) -> None:
    own = seaweed.bucket(f"moved-{os.getpid()}-{'sqlite' if catalog is None else 'pg'}")
    tier = {**seaweed.env(own), "S3GW_BLOBS": f"s3://{own}/t"}
    options = ("--workers", "1", "--default-encryption", "none")
    folder = GatewayProcess(tmp_path / "data", {}, *options, catalog=catalog).start()
    objects, versions, pending = _write(folder.client())
    folder.stop()
    on_files = len(list((tmp_path / "data" / "blobs").rglob("*")))

    # To SeaweedFS: the tier's endpoint and keys, --blobs-to naming where.
    to_s3 = {k: v for k, v in tier.items() if k != "S3GW_BLOBS"}
    done = _run(folder, to_s3, "migrate", "--blobs-to", tier["S3GW_BLOBS"])
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith("moved 7 blobs (") and ": 7 copied, 0 already there" in line, line
    assert "(3 also against their objects' MD5)" in line, line
    below = [k for k in seaweed.keys(own) if k.startswith("t/blobs/")]
    assert len(below) == 7 and on_files > 7  # blob files and their folders

    # The folder is no longer where its blobs are: a start there is one line, refused.
    refused = _run(folder, {}, "serve", "--address", "127.0.0.1:0")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"the blobs of {folder.data} were moved to {tier['S3GW_BLOBS']} by s3gw migrate "
        f"(blobs.moved): start with --blobs/S3GW_BLOBS {tier['S3GW_BLOBS']}, not folder"
    ]
    _fsck_clean(folder, tier)

    served = GatewayProcess(tmp_path / "data", tier, *options, catalog=catalog).start()
    s3 = served.client()
    _read_all(s3, objects, versions)
    objects["written-below"] = os.urandom(2 * MIB)
    s3.put_object(Bucket="moved", Key="written-below", Body=objects["written-below"])
    served.stop()

    # And back: what the folder kept is there already; the one blob written since is copied.
    done = _run(served, tier, "migrate", "--blobs-to", "folder")
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert "moved 8 blobs (" in line and ": 1 copied, 7 already there" in line, line
    again = _run(served, tier, "migrate", "--blobs-to", "folder")
    # Done once: the folder says where they are now.
    assert again.returncode == 2 and "were moved to folder" in again.stderr, again.stderr
    refused = _run(served, tier, "serve", "--address", "127.0.0.1:0")
    assert refused.returncode == 2 and "start with --blobs/S3GW_BLOBS unset" in refused.stderr
    _fsck_clean(served, {})

    back = GatewayProcess(tmp_path / "data", {}, *options, catalog=catalog).start()
    s3 = back.client()
    _read_all(s3, objects, versions)
    s3.complete_multipart_upload(
        Bucket="moved",
        Key="later",
        UploadId=pending,
        MultipartUpload={
            "Parts": [
                {"PartNumber": p["PartNumber"], "ETag": p["ETag"]}
                for p in s3.list_parts(Bucket="moved", Key="later", UploadId=pending)["Parts"]
            ]
        },
    )
    assert len(s3.get_object(Bucket="moved", Key="later")["Body"].read()) == 5 * MIB
    back.stop()
