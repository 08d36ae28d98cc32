"""Real clients as users run them: aws-cli, and the README's own examples."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests import awscli
from tests.server import GatewayProcess

ROOT = Path(__file__).resolve().parents[2]
BIN = awscli.BIN


def test_aws_cli_round_trip(gateway, tmp_path):
    def aws(*args: str) -> str:
        return awscli.ok(gateway.url, *args)

    source = tmp_path / "up.bin"
    data = os.urandom(3 * 2**20 + 5)
    source.write_bytes(data)
    aws("s3", "mb", "s3://cli-bucket")
    aws("s3", "cp", str(source), "s3://cli-bucket/dir/up.bin")
    aws("s3", "cp", str(source), "s3://cli-bucket/with space.bin")
    listing = aws("s3", "ls", "--recursive", "s3://cli-bucket")
    assert "dir/up.bin" in listing and "with space.bin" in listing
    assert "dir/" in aws("s3", "ls", "s3://cli-bucket")
    down = tmp_path / "down.bin"
    aws("s3", "cp", "s3://cli-bucket/dir/up.bin", str(down))
    assert hashlib.md5(down.read_bytes()).hexdigest() == hashlib.md5(data).hexdigest()
    head = aws("s3api", "head-object", "--bucket", "cli-bucket", "--key", "dir/up.bin")
    assert hashlib.md5(data).hexdigest() in head
    aws("s3", "rm", "--recursive", "s3://cli-bucket")
    aws("s3", "rb", "s3://cli-bucket")
    assert "cli-bucket" not in aws("s3", "ls")


def _readme_block(heading: str, language: str, containing: str = "") -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(rf"```{language}\n(.*?)```", section, re.S)
    found = [b for b in blocks if containing in b]
    assert found, f"no {language} block under {heading}"
    return found[0]


@pytest.fixture
def readme_gateway(tmp_path):
    """A gateway as `make run` starts it: credentials generated into its data folder."""
    server = GatewayProcess(tmp_path / "data", {"S3GW_ACCESS_KEY": "", "S3GW_SECRET_KEY": ""})
    yield server.start()
    server.stop()


def _as_run_here(snippet: str, server: GatewayProcess) -> str:
    # The README speaks of `make run`'s address and data folder; this server has its own.
    return snippet.replace("http://127.0.0.1:9000", server.url).replace("./data", str(server.data))


def test_readme_examples(readme_gateway, tmp_path):
    credentials = _as_run_here(_readme_block("Two commands", "sh", "eval"), readme_gateway)
    cli = _as_run_here(_readme_block("With aws-cli", "sh"), readme_gateway)
    boto = _as_run_here(_readme_block("With boto3", "python"), readme_gateway)
    (tmp_path / "example.py").write_text(boto)
    script = f"set -e\n{credentials}\n{cli}\npython example.py\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3GW_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
    )
    out = subprocess.run(
        ["bash", "-c", script.replace(".venv/bin/", f"{BIN}/")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "hello" in out.stdout  # the aws-cli block downloads hello.txt to stdout
    assert "b'meow'" in out.stdout  # the boto3 block prints the body it read back
