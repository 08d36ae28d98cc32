"""Runs the real gateway as a child process on an ephemeral port: for the benchmarks and the
integration tests (boto3 is needed, from the test extra)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ACCESS_KEY = "TESTACCESSKEY0000001"
SECRET_KEY = "test-secret-key-0000000000000000000000001"
_LISTENING = re.compile(r"listening on (https?://\S+)")


class GatewayProcess:
    """`python -m gateway serve` on 127.0.0.1:0 with a data folder (and the catalog in it, or
    in the PostgreSQL database `catalog` names); stops when told."""

    def __init__(
        self, data: Path, env: dict[str, str] | None = None, *args: str, catalog: str | None = None
    ) -> None:
        self.data = data
        self.catalog = catalog
        self.env = {
            **os.environ,
            "S3GW_ACCESS_KEY": ACCESS_KEY,
            "S3GW_SECRET_KEY": SECRET_KEY,
            # No load balancer watches these gateways: a stop needs no drain (a test of the
            # drain sets its own).
            "S3GW_DRAIN_SECONDS": "0",
            **(env or {}),
        }
        self.args = args
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.log: list[str] = []

    def start(self) -> GatewayProcess:
        cmd = [sys.executable, "-m", "gateway", "serve", "--data", str(self.data)]
        cmd += ["--address", "127.0.0.1:0", *self.args]
        if self.catalog is not None:
            cmd += ["--catalog", self.catalog]
        self.proc = subprocess.Popen(
            cmd, env=self.env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            m = _LISTENING.search(line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("gateway did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def client(
        self,
        access_key: str = ACCESS_KEY,
        secret_key: str = SECRET_KEY,
        verify: str | None = None,
        **config: Any,
    ) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name="us-east-1",
            verify=verify,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                **config,
            ),
        )
