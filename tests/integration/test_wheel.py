"""The package as the image installs it: a wheel (`pip install .`), not this source tree.

The wheel is built from a copy of what the image's build context keeps (pyproject.toml,
README.md, gateway/), installed into a new virtualenv, and `s3gw serve` is started from that
virtualenv with the console on: its page and its static files answer, and S3 does. A wheel
carries only .py files unless pyproject.toml lists the rest as package data; without the
console's files the console cannot start, which must be one line naming the file and the
setting, exit status 2.

Speed: the virtualenv gets the wheel alone (--no-deps) and reaches the dependencies through a
.pth file naming this interpreter's site-packages, listed after its own: `gateway` is imported
from the wheel (checked), the rest as installed for the tests, and nothing is downloaded.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from tests.server import ACCESS_KEY, SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
# What the Dockerfile's `pip install .` sees of the tree (.dockerignore keeps the rest out),
# and the benchmarks and the tests' harness, which a `pip install .` of a clone sees too and
# which must stay out of the wheel.
BUILD_CONTEXT = ("pyproject.toml", "README.md", "gateway")
NOT_SHIPPED = ("bench", "tests")
_LISTENING = re.compile(r"listening on (https?://\S+)")
_CONSOLE = re.compile(r"console on (https?://\S+)")
CONSOLE_ON = ("--address", "127.0.0.1:0", "--console-address", "127.0.0.1:0")


@dataclass
class Installed:
    """A virtualenv with the wheel installed."""

    venv: Path
    package: Path  # its gateway/ folder, in the virtualenv's site-packages
    wheel: Path

    @property
    def s3gw(self) -> Path:
        return self.venv / "bin" / "s3gw"


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in BUILD_CONTEXT + NOT_SHIPPED:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    dist = work / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, source)
    (wheel,) = dist.glob("s3gw-*.whl")

    venv = work / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python]
    _run(*pip, "install", "--quiet", "--no-deps", "--no-compile", wheel)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    site = Path(str(site).strip())
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "zz_test_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))

    # Imported from the wheel, not from this tree (run outside it: no cwd on sys.path).
    where = _run(python, "-c", "import gateway; print(gateway.__file__)", cwd=work).strip()
    assert Path(where).parent == site / "gateway", where
    return Installed(venv, site / "gateway", wheel)


def _environment(**extra: str) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("S3GW_", "AWS_")) and k not in ("PYTHONPATH", "PYTHONHOME")
    }
    return {**clean, "S3GW_ACCESS_KEY": ACCESS_KEY, "S3GW_SECRET_KEY": SECRET_KEY, **extra}


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str = ""
    console: str = ""
    log: list[str] = field(default_factory=list)


@pytest.fixture
def served(installed: Installed, tmp_path: Path) -> Iterator[Served]:
    proc = subprocess.Popen(
        [installed.s3gw, "serve", "--data", tmp_path / "data", "--workers", "1", *CONSOLE_ON],
        cwd=tmp_path,
        env=_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = Served(proc)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            server.log.append(line)
            if m := _CONSOLE.search(line):
                server.console = m.group(1)
            if m := _LISTENING.search(line):
                server.url = m.group(1)
                break
        assert server.url and server.console, "did not start:\n" + "".join(server.log)
        threading.Thread(target=lambda: server.log.extend(proc.stderr), daemon=True).start()
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, "".join(server.log)


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return reply.status, reply.headers.get("Content-Type", ""), reply.read()


def test_the_installed_wheel_serves_s3_and_the_console_with_its_static_files(served):
    status, kind, page = _get(served.console + "/signin")
    assert status == 200 and kind.startswith("text/html"), (status, kind)
    assert b'href="/static/console.css"' in page and b'src="/static/console.js"' in page
    for name, expected in (("console.css", "text/css"), ("console.js", "javascript")):
        status, kind, body = _get(f"{served.console}/static/{name}")
        assert status == 200 and expected in kind, (name, status, kind)
        assert body == (ROOT / "gateway" / "console" / "static" / name).read_bytes()

    s3 = boto3.client(
        "s3",
        endpoint_url=served.url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    s3.create_bucket(Bucket="wheel")
    s3.put_object(Bucket="wheel", Key="k", Body=b"from the wheel")
    assert s3.get_object(Bucket="wheel", Key="k")["Body"].read() == b"from the wheel"


def test_the_wheel_holds_the_product_and_nothing_else(installed):
    """The package and its metadata: no benchmark, no test harness, no C source of a
    benchmark; the console's static files are there."""
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"gateway"}
    assert not [n for n in names if n.startswith(("gateway/bench/", "bench/", "tests/"))]
    assert not [n for n in names if n.endswith(".c")]
    assert "gateway/console/static/console.js" in names
    assert "gateway/s3/writes.py" in names


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_console_without_its_files_is_one_start_up_line(installed, tmp_path, workers):
    static = installed.package / "console" / "static"
    hidden = static.with_name("static.hidden")
    static.rename(hidden)
    try:
        done = subprocess.run(
            [
                installed.s3gw,
                "serve",
                "--data",
                tmp_path / "data",
                "--workers",
                workers,
                *CONSOLE_ON,
            ],
            cwd=tmp_path,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        hidden.rename(static)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    # Which file is missing, and which setting turned the console on.
    assert str(static / "console.css") in line, line
    assert "--console-address/S3GW_CONSOLE_ADDRESS" in line, line
    # Nothing was left listening, and no data folder was made.
    assert not (tmp_path / "data").exists()
