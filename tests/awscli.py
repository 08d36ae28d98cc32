"""Runs aws-cli (from the test extra, next to this Python) against a gateway, isolated from
the machine's own AWS configuration."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.server import ACCESS_KEY, SECRET_KEY

BIN = Path(sys.executable).parent


def run(
    endpoint: str, *args: str, config: str = "", timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """`aws --endpoint-url ENDPOINT ARGS` with the test user's keys; `config` is the text of
    an aws-cli config file (e.g. `[default]` `s3 =` settings)."""
    with tempfile.NamedTemporaryFile("w", suffix=".cfg") as cfg:
        cfg.write(config)
        cfg.flush()
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": cfg.name,
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }
        return subprocess.run(
            [str(BIN / "aws"), "--endpoint-url", endpoint, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def ok(endpoint: str, *args: str, config: str = "") -> str:
    """Like run(), asserting success; the standard output."""
    out = run(endpoint, *args, config=config)
    assert out.returncode == 0, out.stderr
    return out.stdout
