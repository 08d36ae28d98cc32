"""`s3gw fsck` on a real data folder: clean after real traffic, and each kind of damage found."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

MIB = 2**20


def fsck(data, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "fsck", "--data", str(data), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def populated(fresh_gateway):
    s3 = fresh_gateway.client()
    s3.create_bucket(Bucket="fsck")
    s3.put_object(Bucket="fsck", Key="small", Body=b"inline")
    s3.put_object(Bucket="fsck", Key="large", Body=os.urandom(2 * MIB))
    s3.copy_object(Bucket="fsck", Key="copy", CopySource="fsck/large")
    upload = s3.create_multipart_upload(Bucket="fsck", Key="mp")["UploadId"]
    e1 = s3.upload_part(
        Bucket="fsck", Key="mp", UploadId=upload, PartNumber=1, Body=os.urandom(5 * MIB)
    )["ETag"]
    e2 = s3.upload_part_copy(
        Bucket="fsck", Key="mp", UploadId=upload, PartNumber=2, CopySource="fsck/large"
    )["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(
        Bucket="fsck",
        Key="mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )
    s3.copy_object(Bucket="fsck", Key="mp-copy", CopySource="fsck/mp")  # learns its MD5
    pending = s3.create_multipart_upload(Bucket="fsck", Key="pending")["UploadId"]
    s3.upload_part(Bucket="fsck", Key="pending", UploadId=pending, PartNumber=1, Body=b"p" * 100)
    busy = fsck(fresh_gateway.data)
    assert busy.returncode == 2 and "in use" in busy.stderr  # refuses while serving
    fresh_gateway.stop()
    return fresh_gateway.data


def _blob_files(data):
    return sorted(p for p in (data / "blobs").rglob("*") if p.is_file())


def test_clean_after_real_traffic(populated):
    result = fsck(populated, "--deep")
    assert result.returncode == 0, result.stdout
    assert "checked 5 objects, 1 parts" in result.stdout
    assert "no damage found" in result.stdout


def test_orphans_and_counts_are_repaired(populated):
    (populated / "blobs" / "ff" / "ee").mkdir(parents=True)
    (populated / "blobs" / "ff" / "ee" / "ffee0000").write_bytes(b"orphan")
    (populated / "tmp" / "leftover").write_bytes(b"x")
    with sqlite3.connect(populated / "catalog.sqlite3") as conn:
        conn.execute("UPDATE blobs SET refs = refs + 5 WHERE id = (SELECT min(id) FROM blobs)")
    found = fsck(populated)
    assert found.returncode == 1
    assert "orphan blob file ffee0000" in found.stdout
    assert "stray tmp file leftover" in found.stdout
    assert "references" in found.stdout
    repaired = fsck(populated, "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert "repaired: orphans" in repaired.stdout and "repaired: counts" in repaired.stdout
    assert fsck(populated, "--deep").returncode == 0


def test_missing_and_corrupt_blobs_are_damage(populated):
    files = _blob_files(populated)
    with open(files[0], "r+b") as f:  # flip one byte: only --deep can see it
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))
    assert fsck(populated).returncode == 0
    deep = fsck(populated, "--deep")
    assert deep.returncode == 1 and "bytes hash to" in deep.stdout
    files[1].unlink()
    result = fsck(populated, "--repair")
    assert result.returncode == 1  # a missing blob cannot be repaired
    assert "file missing" in result.stdout
