"""A full disk and a read-only data folder: writes fail with a clear 503 and change nothing,
reads go on, and the gateway recovers by itself once the disk takes writes again.

The data folder is a small tmpfs mounted for the test (the tests run as root here and in CI).
"""

from __future__ import annotations

import os
import subprocess

import pytest
from botocore.exceptions import ClientError

from tests.datadir import inspect
from tests.server import GatewayProcess

MIB = 2**20


@pytest.fixture
def small_disk(tmp_path, catalog):
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    server = GatewayProcess(
        mount / "data",
        {"S3GW_WORKERS": "1"},
        catalog=catalog,
        # The test fills the disk on purpose: the failed commits and writes are logged.
        allow=("database or disk is full", "No space left on device"),
    ).start()
    try:
        yield server, mount
    finally:
        server.stop()
        subprocess.run(["umount", "-l", str(mount)], check=False)


def code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    r = exc.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def test_disk_full_then_recovered(small_disk):
    server, _ = small_disk
    s3 = server.client()
    s3.create_bucket(Bucket="full")
    kept = os.urandom(2 * MIB)
    s3.put_object(Bucket="full", Key="kept", Body=kept)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket="full", Key="too-big", Body=os.urandom(40 * MIB))
    assert code(exc) == ("ServiceUnavailable", 503)
    assert "full" in exc.value.response["Error"]["Message"]
    inspect(server.data, server.catalog).assert_clean()  # the partial body is gone
    assert s3.get_object(Bucket="full", Key="kept")["Body"].read() == kept  # reads go on
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="full")["Contents"]] == ["kept"]
    # Space comes back (here: the gateway never kept the failed body): writes work again.
    s3.put_object(Bucket="full", Key="after", Body=os.urandom(4 * MIB))
    assert s3.head_object(Bucket="full", Key="after")["ContentLength"] == 4 * MIB


def test_read_only_folder_then_writable(small_disk):
    server, _ = small_disk
    s3 = server.client()
    s3.create_bucket(Bucket="read-only")
    s3.put_object(Bucket="read-only", Key="kept", Body=b"readable")
    # A read-only bind mount over the data folder: whatever the gateway opens from now on is
    # read-only (the catalog it already has open stays writable, so the test writes a body
    # large enough to need a new blob file).
    folder = str(server.data)
    subprocess.run(["mount", "--bind", folder, folder], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", folder], check=True)
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket="read-only", Key="new", Body=os.urandom(2 * MIB))
        assert code(exc) == ("ServiceUnavailable", 503)
        assert "read-only" in exc.value.response["Error"]["Message"]
        assert s3.get_object(Bucket="read-only", Key="kept")["Body"].read() == b"readable"
    finally:
        subprocess.run(["umount", folder], check=True)
    body = os.urandom(2 * MIB)
    s3.put_object(Bucket="read-only", Key="new", Body=body)
    assert s3.get_object(Bucket="read-only", Key="new")["Body"].read() == body
    inspect(server.data, server.catalog).assert_clean()
