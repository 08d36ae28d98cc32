"""The suite's own guards, shown failing: a test that hangs fails at the per-test timeout
(pyproject.toml) instead of stalling the run, and a gateway that logs a traceback, or exits with
a status other than 0, fails the test in whose time it did (tests/conftest.py, judged by
tests/process.py). Each runs pytest in a child process on a small test file and reads its
verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest on `source` (a test module) in a folder of its own, with the suite's conftest
    loaded as a plugin (its gateway log check) and none of the project's configuration."""
    (tmp_path / "test_inner.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    cmd += ["-q", "--rootdir", str(tmp_path), "-c", os.devnull]
    cmd += ["-o", "asyncio_default_fixture_loop_scope=function", *args, "test_inner.py"]
    return subprocess.run(
        cmd,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        # The child's own bound is the one under test; this one only keeps a broken guard from
        # hanging the suite in its turn.
        timeout=240,
    )


def test_a_hanging_test_fails_at_its_timeout(tmp_path: Path) -> None:
    done = _pytest(
        tmp_path,
        "import threading\n\n"
        "def test_hangs():\n"
        "    threading.Event().wait()  # never set\n\n"
        "def test_after_it():\n"
        "    pass\n",
        "--timeout=2",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Timeout" in out and "1 failed, 1 passed" in out, out


def test_the_suite_has_a_timeout() -> None:
    # The bound is configuration, not only a plugin that happens to be installed.
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert 0 < config["ini_options"]["timeout"] <= 600
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("pytest-timeout") for d in extra["optional-dependencies"]["test"])


# A gateway that fails a GET with a traceback: the object's blob file replaced by a folder
# (a 1 MiB body is a file, not inline in the catalog), so opening it raises IsADirectoryError
# and the gateway cuts the answer, logging the traceback.
_BROKEN_BLOB = """
import shutil
from pathlib import Path

import pytest

from tests.server import GatewayProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = GatewayProcess(tmp_path_factory.mktemp("data")).start()
    yield server
    server.stop()


def break_a_read(server, allow=()):
    server.allow(*allow)
    s3 = server.client()
    s3.create_bucket(Bucket="broken")
    s3.put_object(Bucket="broken", Key="k", Body=b"x" * (1 << 20))
    (blob,) = [p for p in (server.data / "blobs").rglob("*") if p.is_file()]
    blob.unlink()
    blob.mkdir()
    # The answer's head is sent before the file is opened: the body is cut short.
    with pytest.raises(Exception, match="IncompleteRead|InternalError"):
        s3.get_object(Bucket="broken", Key="k")["Body"].read()
"""


def test_a_gateway_traceback_fails_the_test(tmp_path: Path) -> None:
    done = _pytest(
        tmp_path,
        _BROKEN_BLOB + "\n\ndef test_reads(server):\n    break_a_read(server)\n",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    # The test itself passed; its teardown failed, naming the gateway's traceback.
    assert "1 passed, 1 error" in out, out
    assert "a gateway logged errors" in out and "Traceback" in out, out
    assert "IsADirectoryError" in out, out


def test_a_traceback_the_test_allows_passes(tmp_path: Path) -> None:
    done = _pytest(
        tmp_path,
        _BROKEN_BLOB
        + "\n\ndef test_reads(server):\n"
        + "    break_a_read(server, allow=['IsADirectoryError'])\n",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "1 passed" in out and "error" not in out, out


def test_a_gateway_that_died_fails_the_test(tmp_path: Path) -> None:
    done = _pytest(
        tmp_path,
        "import os, signal\n"
        "from tests.server import GatewayProcess\n\n"
        "def test_dies(tmp_path):\n"
        "    server = GatewayProcess(tmp_path).start()\n"
        "    os.kill(server.proc.pid, signal.SIGKILL)\n"
        "    server.proc.wait()\n"
        "    server.stop()\n",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "exit status -9 before the test stopped it" in out, out


def test_a_gateway_that_never_listens_fails_its_start(tmp_path: Path) -> None:
    # A start-up that hangs (here: SIGSTOP before it could listen) is a failure within the
    # bound, not a wait without end.
    done = _pytest(
        tmp_path,
        "import os, signal, subprocess\n"
        "import pytest\n"
        "from tests import process\n"
        "from tests.server import GatewayProcess\n\n"
        "def test_start(tmp_path, monkeypatch):\n"
        "    popen = subprocess.Popen\n"
        "    def stopped(*args, **kwargs):\n"
        "        proc = popen(*args, **kwargs)\n"
        "        os.kill(proc.pid, signal.SIGSTOP)\n"
        "        return proc\n"
        "    monkeypatch.setattr(process.subprocess, 'Popen', stopped)\n"
        "    with pytest.raises(RuntimeError, match='did not listen within 2 s'):\n"
        "        GatewayProcess(tmp_path).start(timeout=2)\n",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "1 passed" in out, out
