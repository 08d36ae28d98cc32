"""One pass of the aws command line over the endpoint, as people use it: mb, cp up, ls,
cp down, sync both ways, rm, rb."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ADDRESSING_STYLE, ENDPOINT, REGION, Buckets

MIB = 2**20


def _aws_program() -> str | None:
    # The one next to this Python first (the virtualenv's awscli), then the PATH's.
    beside = Path(sys.executable).parent / "aws"
    return str(beside) if beside.exists() else shutil.which("aws")


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_aws_cli_pass(s3, buckets: Buckets, tmp_path: Path):
    program = _aws_program()
    if program is None:
        # awscli is in the test extra: CI (.ci/run sets CI=1) must not pass by skipping it.
        if os.environ.get("CI"):
            pytest.fail("CI needs the aws command (the test extra's awscli)")
        pytest.skip("no aws command: pip install awscli")
    # Keys and AWS_CA_BUNDLE come from the environment; the addressing style the suite uses
    # is written in a config file of the test's own.
    config = tmp_path / "aws-config"
    config.write_text(f"[default]\ns3 =\n  addressing_style = {ADDRESSING_STYLE}\n")
    env = {**os.environ, "AWS_CONFIG_FILE": str(config), "AWS_DEFAULT_REGION": REGION}
    env.pop("AWS_PROFILE", None)

    def aws(*args: str) -> str:
        done = subprocess.run(
            [program, "--endpoint-url", ENDPOINT, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"aws {' '.join(args)}:\n{done.stderr}"
        return done.stdout

    name = buckets.name()  # deleted at the end if a step below fails before `rb`
    aws("s3", "mb", f"s3://{name}")
    assert name in aws("s3", "ls")

    # cp up: 9 MiB goes up as a multipart upload (aws-cli's threshold is 8 MiB).
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(9 * MIB))
    aws("s3", "cp", str(big), f"s3://{name}/up/big.bin")
    small = tmp_path / "with space.txt"
    small.write_text("hello\n")
    aws("s3", "cp", str(small), f"s3://{name}/up/with space.txt")
    assert s3.head_object(Bucket=name, Key="up/big.bin")["ETag"].endswith('-2"')

    listing = aws("s3", "ls", f"s3://{name}/up/")
    assert "big.bin" in listing and "with space.txt" in listing
    assert "PRE up/" in aws("s3", "ls", f"s3://{name}")

    # cp down
    down = tmp_path / "down.bin"
    aws("s3", "cp", f"s3://{name}/up/big.bin", str(down))
    assert hashlib.sha256(down.read_bytes()).digest() == hashlib.sha256(big.read_bytes()).digest()

    # sync up, again with one file changed and one new (only those go up), then down.
    local = tmp_path / "tree"
    files = {"a.txt": b"a", "sub/b.bin": os.urandom(1000), "sub/c d.txt": b"c"}
    # Dated a minute back: S3's LastModified is in whole seconds (AWS's form), and aws-cli's
    # sync uploads a file newer than its object, which one written in the upload's own second
    # would seem to be.
    past = time.time() - 60
    for relative, data in files.items():
        (local / relative).parent.mkdir(parents=True, exist_ok=True)
        (local / relative).write_bytes(data)
        os.utime(local / relative, (past, past))
    aws("s3", "sync", str(local), f"s3://{name}/tree")
    (local / "a.txt").write_bytes(b"a, longer now")
    (local / "sub/new.txt").write_bytes(b"new")
    for changed in ("a.txt", "sub/new.txt"):
        os.utime(local / changed, (past, past))
    again = aws("s3", "sync", str(local), f"s3://{name}/tree")
    uploaded = sorted(line.split(" to ")[-1] for line in again.splitlines() if "upload:" in line)
    assert uploaded == [f"s3://{name}/tree/a.txt", f"s3://{name}/tree/sub/new.txt"], again
    copy = tmp_path / "tree-down"
    aws("s3", "sync", f"s3://{name}/tree", str(copy))
    assert _tree(copy) == _tree(local)

    # rm one, rm the rest, rb
    aws("s3", "rm", f"s3://{name}/up/big.bin")
    assert "big.bin" not in aws("s3", "ls", f"s3://{name}/up/")
    aws("s3", "rm", "--recursive", f"s3://{name}")
    assert aws("s3", "ls", "--recursive", f"s3://{name}") == ""
    aws("s3", "rb", f"s3://{name}")
    assert name not in aws("s3", "ls")
