"""`make run` lets the environment choose: S3GW_ADDRESS, S3GW_DATA and S3GW_CONSOLE_ADDRESS
count unless the make variable (ADDRESS, DATA, CONSOLE_ADDRESS) is given, which wins (issue 47:
the Makefile passed its own --address, --data and --console-address, so the environment was
silently ignored)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _make_run(env: dict[str, str], *variables: str) -> Iterator[str]:
    """`make run VARIABLES` with the environment `env` (S3GW_* and make's own variables of the
    test's environment left out), the gateway being this test's Python's (its virtualenv's
    `s3gw`, not rebuilt); its start-up banner, once it listens."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("S3GW_", "MAKE", "MFLAGS"))
        and k not in ("DATA", "ADDRESS", "CONSOLE_ADDRESS")
    }
    clean |= {"S3GW_DRAIN_SECONDS": "0", "S3GW_WORKERS": "1", **env}
    cmd = ["make", "--no-print-directory", "-C", str(ROOT), "-o", ".venv/.installed-run"]
    cmd += [f"BIN={Path(sys.executable).parent}", "run", *variables]
    proc = subprocess.Popen(
        cmd,
        env=clean,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # make and the gateway it runs: one group, stopped together
    )
    banner: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            banner.append(line)
            if "listening on" in line:
                break
        else:
            raise AssertionError("make run did not start a gateway:\n" + "".join(banner))
        yield "".join(banner)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def _ready(address: str) -> int:
    with urllib.request.urlopen(f"http://{address}/health/ready", timeout=10) as response:
        return response.status


def test_make_run_listens_where_the_environment_says(tmp_path: Path) -> None:
    address = f"127.0.0.1:{_free_port()}"
    console = f"127.0.0.1:{_free_port()}"
    env = {
        "S3GW_ADDRESS": address,
        "S3GW_DATA": str(tmp_path / "data"),
        "S3GW_CONSOLE_ADDRESS": console,
    }
    with _make_run(env) as banner:
        assert f"listening on http://{address}" in banner
        assert f"console on http://{console}" in banner
        assert _ready(address) == 200
    # The generated keys went into the folder S3GW_DATA names.
    assert (tmp_path / "data" / "credentials.json").is_file()


def test_a_make_variable_given_still_wins(tmp_path: Path) -> None:
    env_address = f"127.0.0.1:{_free_port()}"
    address = f"127.0.0.1:{_free_port()}"
    console = f"127.0.0.1:{_free_port()}"
    env = {
        "S3GW_ADDRESS": env_address,
        "S3GW_DATA": str(tmp_path / "env-data"),
        "S3GW_CONSOLE_ADDRESS": f"127.0.0.1:{_free_port()}",
    }
    data = tmp_path / "data"
    variables = (f"ADDRESS={address}", f"DATA={data}", f"CONSOLE_ADDRESS={console}")
    with _make_run(env, *variables) as banner:
        assert f"listening on http://{address}" in banner
        assert f"console on http://{console}" in banner
        assert _ready(address) == 200
    assert (data / "credentials.json").is_file()
    assert not (tmp_path / "env-data").exists()


def test_an_empty_console_address_in_the_environment_turns_the_console_off(
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{_free_port()}"
    env = {"S3GW_ADDRESS": address, "S3GW_DATA": str(tmp_path), "S3GW_CONSOLE_ADDRESS": ""}
    with _make_run(env) as banner:
        assert f"listening on http://{address}" in banner
        assert not re.search(r"console on", banner)
