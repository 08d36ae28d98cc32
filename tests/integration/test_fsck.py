"""`s3gw fsck` on a real data folder: clean after real traffic, and each kind of damage found."""

from __future__ import annotations

import json
import os

import pytest

from tests.datadir import catalog_sql
from tests.server import GatewayProcess

MIB = 2**20


@pytest.fixture
def fresh_gateway(tmp_path, catalog):
    """Plaintext at rest: these tests corrupt blob files and read fsck's check of the bytes'
    MD5; an encrypted object's check (its chunks' tags) is test_encryption's."""
    server = GatewayProcess(
        tmp_path / "data", {"S3GW_DEFAULT_ENCRYPTION": "none"}, catalog=catalog
    ).start()
    yield server
    server.stop()


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
    busy = fresh_gateway.s3gw("fsck")
    assert busy.returncode == 2 and "in use" in busy.stderr  # refuses while serving
    fresh_gateway.stop()
    return fresh_gateway


def _blob_files(data):
    return sorted(p for p in (data / "blobs").rglob("*") if p.is_file())


def test_clean_after_real_traffic(populated):
    result = populated.s3gw("fsck", "--deep")
    assert result.returncode == 0, result.stdout
    assert "checked 5 objects, 1 parts" in result.stdout
    assert "no damage found" in result.stdout


def test_orphans_and_counts_are_repaired(populated):
    data = populated.data
    (data / "blobs" / "ff" / "ee").mkdir(parents=True)
    (data / "blobs" / "ff" / "ee" / "ffee0000").write_bytes(b"orphan")
    (data / "tmp" / "leftover").write_bytes(b"x")
    with catalog_sql(data, populated.catalog) as conn:
        conn.execute("UPDATE blobs SET refs = refs + 5 WHERE id = (SELECT min(id) FROM blobs)")
    found = populated.s3gw("fsck")
    assert found.returncode == 1
    assert "orphan blob file ffee0000" in found.stdout
    assert "stray tmp file leftover" in found.stdout
    assert "references" in found.stdout
    repaired = populated.s3gw("fsck", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert "repaired: leftovers" in repaired.stdout and "repaired: counts" in repaired.stdout
    assert populated.s3gw("fsck", "--deep").returncode == 0


def test_missing_and_corrupt_blobs_are_damage(populated):
    files = _blob_files(populated.data)
    with open(files[0], "r+b") as f:  # flip one byte: only --deep can see it
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))
    assert populated.s3gw("fsck").returncode == 0
    deep = populated.s3gw("fsck", "--deep")
    assert deep.returncode == 1 and "bytes hash to" in deep.stdout
    files[1].unlink()
    result = populated.s3gw("fsck", "--repair")
    assert result.returncode == 1  # a missing blob cannot be repaired
    assert "file missing" in result.stdout


def _blob_of(server: GatewayProcess, bucket: str, key: str, extent: int = 0) -> str:
    with catalog_sql(server.data, server.catalog) as conn:
        (manifest,) = conn.execute(
            "SELECT manifest FROM objects WHERE bucket = ? AND key = ?", (bucket, key.encode())
        ).fetchone()
    return json.loads(manifest)[extent][0]


def _flip_byte(path, offset: int = 0) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def _blob_path(data, blob_id: str):
    return data / "blobs" / blob_id[:2] / blob_id[2:4] / blob_id


def test_deep_checks_every_part_of_multipart_objects_and_pending_parts(fresh_gateway):
    s3 = fresh_gateway.client()
    s3.create_bucket(Bucket="deep")
    upload = s3.create_multipart_upload(Bucket="deep", Key="mp")["UploadId"]
    etags = [
        s3.upload_part(Bucket="deep", Key="mp", UploadId=upload, PartNumber=n, Body=body)["ETag"]
        for n, body in ((1, os.urandom(5 * MIB)), (2, os.urandom(300 * 1024)))
    ]
    s3.complete_multipart_upload(
        Bucket="deep",
        Key="mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]},
    )
    pending = s3.create_multipart_upload(Bucket="deep", Key="pending")["UploadId"]
    s3.upload_part(
        Bucket="deep", Key="pending", UploadId=pending, PartNumber=3, Body=os.urandom(200 * 1024)
    )
    fresh_gateway.stop()
    data = fresh_gateway.data
    assert fresh_gateway.s3gw("fsck", "--deep").returncode == 0

    _flip_byte(_blob_path(data, _blob_of(fresh_gateway, "deep", "mp", extent=1)), 1000)
    with catalog_sql(data, fresh_gateway.catalog) as conn:
        (manifest,) = conn.execute("SELECT manifest FROM parts").fetchone()
    _flip_byte(_blob_path(data, json.loads(manifest)[0][0]))
    assert fresh_gateway.s3gw("fsck").returncode == 0  # sizes and references are still right
    deep = fresh_gateway.s3gw("fsck", "--deep")
    assert deep.returncode == 1, deep.stdout
    assert "DAMAGE: deep/mp: ETag" in deep.stdout
    assert f"DAMAGE: upload {pending} part 3: ETag" in deep.stdout


def test_a_restart_keeps_blobs_whose_id_starts_with_ffff(fresh_gateway):
    """The start-up sweep once deleted every referenced blob in blobs/ff/ff/ (one blob in
    65,536 on every restart). The object's blob is renamed to such an id while stopped."""
    s3 = fresh_gateway.client()
    s3.create_bucket(Bucket="edge")
    body = os.urandom(300_000)
    s3.put_object(Bucket="edge", Key="k", Body=body)
    fresh_gateway.stop()
    data = fresh_gateway.data
    old = _blob_of(fresh_gateway, "edge", "k")
    new = "ffff" + old[4:]
    with catalog_sql(data, fresh_gateway.catalog) as conn:
        conn.execute("UPDATE blobs SET id = ? WHERE id = ?", (new, old))
        conn.execute("UPDATE objects SET manifest = replace(manifest, ?, ?)", (old, new))
    _blob_path(data, new).parent.mkdir(parents=True, exist_ok=True)
    os.rename(_blob_path(data, old), _blob_path(data, new))
    assert fresh_gateway.s3gw("fsck", "--deep").returncode == 0

    fresh_gateway.start()
    assert fresh_gateway.client().get_object(Bucket="edge", Key="k")["Body"].read() == body
    fresh_gateway.stop()
    assert _blob_path(data, new).exists()
    assert fresh_gateway.s3gw("fsck", "--deep").returncode == 0


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_leftovers_of_a_killed_worker_are_not_damage(tmp_path, catalog):
    """A worker killed mid-upload leaves its body in tmp/; a clean stop does not sweep (the
    next start does). fsck lists it as a leftover and exits 0, as the sweep sees it."""
    import socket
    import time

    server = GatewayProcess(tmp_path / "data", None, "--workers", "2", catalog=catalog).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="left")
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            # Unsigned payload, so the body streams into tmp/ without a signature check first.
            request = s3.generate_presigned_url(
                "put_object", Params={"Bucket": "left", "Key": "big"}, ExpiresIn=60
            )
            path = request.split(port, 1)[1]
            sock.sendall(
                f"PUT {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Content-Length: {64 * MIB}\r\n\r\n".encode()
            )
            sock.sendall(os.urandom(4 * MIB))
            deadline = time.monotonic() + 30
            while not os.listdir(tmp_path / "data" / "tmp"):
                assert time.monotonic() < deadline, "the body never reached tmp/"
                time.sleep(0.05)
            for worker in _children(server.proc.pid):
                os.kill(worker, 9)
        server.stop()
    finally:
        server.stop()
    assert os.listdir(tmp_path / "data" / "tmp")  # what the kill left
    result = server.s3gw("fsck", "--deep")
    assert result.returncode == 0, result.stdout
    assert "leftover: stray tmp file" in result.stdout
    assert "no damage found" in result.stdout


def test_deep_recomputes_the_stored_checksums(fresh_gateway):
    """What the gateway stored for each kind of checksum is what fsck recomputes (a clean
    folder passes), and a wrong stored value is damage."""
    s3 = fresh_gateway.client()
    s3.create_bucket(Bucket="sums")
    s3.put_object(Bucket="sums", Key="crc32c", Body=b"x" * 1000, ChecksumAlgorithm="CRC32C")
    s3.put_object(Bucket="sums", Key="sha256", Body=os.urandom(300_000), ChecksumAlgorithm="SHA256")
    for key, algorithm, kind in (("composite", "CRC32", "COMPOSITE"), ("full", "CRC64NVME", None)):
        extra = {"ChecksumType": kind} if kind else {}
        upload = s3.create_multipart_upload(
            Bucket="sums", Key=key, ChecksumAlgorithm=algorithm, **extra
        )["UploadId"]
        parts = []
        for number, body in ((1, os.urandom(5 * MIB)), (2, b"tail")):
            part = s3.upload_part(
                Bucket="sums",
                Key=key,
                UploadId=upload,
                PartNumber=number,
                Body=body,
                ChecksumAlgorithm=algorithm,
            )
            parts.append(
                {
                    "PartNumber": number,
                    "ETag": part["ETag"],
                    f"Checksum{algorithm}": part[f"Checksum{algorithm}"],
                }
            )
        s3.complete_multipart_upload(
            Bucket="sums", Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
        )
    pending = s3.create_multipart_upload(Bucket="sums", Key="pending", ChecksumAlgorithm="SHA1")
    s3.upload_part(
        Bucket="sums",
        Key="pending",
        UploadId=pending["UploadId"],
        PartNumber=1,
        Body=b"p" * 100,
        ChecksumAlgorithm="SHA1",
    )
    fresh_gateway.stop()
    data = fresh_gateway.data
    clean = fresh_gateway.s3gw("fsck", "--deep")
    assert clean.returncode == 0, clean.stdout

    with catalog_sql(data, fresh_gateway.catalog) as conn:
        for key in ("crc32c", "composite"):
            (attrs,) = conn.execute(
                "SELECT attrs FROM objects WHERE key = ?", (key.encode(),)
            ).fetchone()
            decoded = json.loads(attrs)
            header = next(h for h in decoded["checksums"] if h != "x-amz-checksum-type")
            decoded["checksums"][header] = "AAAAAA==" + ("-2" if key == "composite" else "")
            conn.execute(
                "UPDATE objects SET attrs = ? WHERE key = ?", (json.dumps(decoded), key.encode())
            )
        conn.execute("UPDATE parts SET checksum = 'AAAAAAAAAAAAAAAAAAAAAAAAAAA='")
    deep = fresh_gateway.s3gw("fsck", "--deep")
    assert deep.returncode == 1
    damage = [line for line in deep.stdout.splitlines() if line.startswith("DAMAGE")]
    assert len(damage) == 3, deep.stdout
    assert any(line.startswith("DAMAGE: sums/crc32c: checksum AAAAAA==") for line in damage)
    assert any(line.startswith("DAMAGE: sums/composite: checksum AAAAAA==-2") for line in damage)
    assert any(
        line.startswith(f"DAMAGE: upload {pending['UploadId']} part 1: checksum") for line in damage
    )


def test_deep_recomputes_the_default_checksum_of_pending_parts(fresh_gateway):
    """A part of an upload that named no algorithm keeps the default CRC64NVME for Complete:
    a flipped byte in its file is checksum damage, as it is for an object's."""
    s3 = fresh_gateway.client(request_checksum_calculation="when_required")
    s3.create_bucket(Bucket="parts")
    s3.put_object(Bucket="parts", Key="src", Body=os.urandom(300 * 1024))
    pending = s3.create_multipart_upload(Bucket="parts", Key="pending")["UploadId"]
    s3.upload_part(
        Bucket="parts", Key="pending", UploadId=pending, PartNumber=1, Body=os.urandom(200 * 1024)
    )
    # A ranged copy: a slice of the source's blob, whose default checksum is checked too.
    s3.upload_part_copy(
        Bucket="parts",
        Key="pending",
        UploadId=pending,
        PartNumber=2,
        CopySource="parts/src",
        CopySourceRange="bytes=10-99999",
    )
    fresh_gateway.stop()
    data = fresh_gateway.data
    clean = fresh_gateway.s3gw("fsck", "--deep")
    assert clean.returncode == 0, clean.stdout

    with catalog_sql(data, fresh_gateway.catalog) as conn:
        (manifest,) = conn.execute("SELECT manifest FROM parts WHERE number = 1").fetchone()
    _flip_byte(_blob_path(data, json.loads(manifest)[0][0]), 5000)
    deep = fresh_gateway.s3gw("fsck", "--deep")
    assert deep.returncode == 1, deep.stdout
    assert f"DAMAGE: upload {pending} part 1: checksum" in deep.stdout
    assert f"upload {pending} part 2" not in deep.stdout
