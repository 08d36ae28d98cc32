"""The gateway process the integration tests drive (shared with the benchmarks), and the `s3gw`
commands run on its data folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import process
from tests.process import ACCESS_KEY, SECRET_KEY

__all__ = ["ACCESS_KEY", "SECRET_KEY", "GatewayProcess", "s3gw"]


def s3gw(
    *args: str, data: Path, catalog: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`s3gw ARGS --data DATA` run to its end, on the folder's catalog: the SQLite file in it
    (None) or the PostgreSQL database `catalog` names, given as S3GW_CATALOG so that every
    command finds it whether or not it takes --catalog."""
    env = {k: v for k, v in os.environ.items() if k != "S3GW_CATALOG"}
    if catalog is not None:
        env["S3GW_CATALOG"] = catalog
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args, "--data", str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class GatewayProcess(process.GatewayProcess):
    """The gateway on a data folder and its catalog; `s3gw` runs a command on the same two."""

    def s3gw(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return s3gw(*args, data=self.data, catalog=self.catalog, timeout=timeout)
