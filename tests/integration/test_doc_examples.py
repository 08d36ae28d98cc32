"""The docs' examples run as written (issue 47: a new user followed them literally, and some
failed). Every fenced shell or Python block of README.md and docs/*.md carries a mark on the
line before its fence:

- `<!-- example -->`: run, in order, against a gateway this test starts for the doc (its
  generated keys in its data folder, as `make run` makes them);
- `<!-- example: tls -->`: the same against a second gateway of the doc's, started with
  `--tls-self-signed`;
- `<!-- not run: WHY -->`: it cannot run here (Docker, a remote host, the test suite itself);
  each is listed as a skipped test with its reason (`pytest -rs`).

An unmarked block fails, so a new example is either run or says why not. What is changed
before a block runs, and nothing else: `http://127.0.0.1:9000` and `https://localhost:9000`
become the gateway's address, `./data` its data folder, `.venv/bin/` the test's virtualenv
(whose `aws` and `s3gw` come first on PATH). Shell blocks run in bash with `set -euo
pipefail` (a failing command fails the example) in one working folder per doc; the `AWS_*`
variables a block exports carry over to the doc's later blocks, shell or Python, as they
would in a reader's shell.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.server import GatewayProcess

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
SHELL = {"sh", "bash", "shell", "console"}
PYTHON = {"python", "py", "python3"}
_FENCE = re.compile(r"^( *)```(\S*)\s*$")
_MARK = re.compile(r"^\s*<!-- (?:example(?:: (tls))?|not run: (.+?)) -->\s*$")
# What a block carries to the next: the credentials, region and CA bundle a reader exports.
_CARRY = (
    "import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
    "if k.startswith('AWS_')}))"
)


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # the fence's, 1-based
    language: str
    code: str
    marked: bool
    gateway: str  # "plain" or "tls"
    not_run: str  # why, for a block marked not run

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def doc_blocks(doc: Path) -> list[Block]:
    """The fenced shell and Python blocks of a doc, with their marks."""
    lines = doc.read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, language = opening.group(1), opening.group(2).lower()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        if language in SHELL | PYTHON:
            mark = _MARK.match(lines[i - 1]) if i else None
            code = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : end])
            blocks.append(
                Block(
                    doc=doc,
                    line=i + 1,
                    language=language,
                    code=code + "\n",
                    marked=mark is not None,
                    gateway="tls" if mark and mark.group(1) else "plain",
                    not_run=(mark.group(2) or "") if mark else "",
                )
            )
        i = end + 1
    return blocks


ALL = [block for doc in DOCS for block in doc_blocks(doc)]


def test_every_shell_and_python_block_is_marked() -> None:
    unmarked = [block.where for block in ALL if not block.marked]
    assert not unmarked, (
        "mark each block `<!-- example -->`, `<!-- example: tls -->` or "
        f"`<!-- not run: WHY -->` on the line before its fence: {unmarked}"
    )


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(
            b, marks=pytest.mark.skip(reason=f"{b.where} not run: {b.not_run}"), id=b.where
        )
        for b in ALL
        if b.not_run
    ],
)
def test_blocks_not_run(block: Block) -> None:
    """Listed, each with its reason, as skipped (`pytest -rs`)."""


class DocRun:
    """A doc's gateways (started when a block first needs one), its working folder and what
    its blocks have exported so far."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.work = folder / "work"
        (self.work / "home").mkdir(parents=True)
        self.gateways: dict[str, GatewayProcess] = {}
        self.carried: dict[str, str] = {}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3GW_"))} | {
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(self.work / "home"),
            # The machine's own aws-cli configuration stays out of it.
            "AWS_CONFIG_FILE": str(self.work / "home" / "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.work / "home" / "aws-credentials"),
        }

    def gateway(self, kind: str) -> GatewayProcess:
        if kind not in self.gateways:
            # Keys generated into the data folder, as on a first `make run`.
            env = {"S3GW_ACCESS_KEY": "", "S3GW_SECRET_KEY": "", "S3GW_WORKERS": "2"}
            args = ("--tls-self-signed",) if kind == "tls" else ()
            self.gateways[kind] = GatewayProcess(self.folder / f"data-{kind}", env, *args).start()
        return self.gateways[kind]

    def stop(self) -> None:
        for gateway in self.gateways.values():
            gateway.stop()

    def code(self, block: Block) -> str:
        gateway = self.gateway(block.gateway)
        port = gateway.url.rpartition(":")[2]
        code = block.code.replace("http://127.0.0.1:9000", f"http://127.0.0.1:{port}")
        code = code.replace("https://localhost:9000", f"https://localhost:{port}")
        code = re.sub(r"(?<![\w/.])\./data\b", str(gateway.data), code)
        return code.replace(".venv/bin/", f"{BIN}/")

    def run(self, block: Block) -> subprocess.CompletedProcess[str]:
        code = self.code(block)
        env = self.env | self.carried
        if block.language in PYTHON:
            cmd = [sys.executable, "-c", code]
        else:
            carry = self.folder / "carried.json"
            script = f'set -euo pipefail\n{code}\n{sys.executable} -c "{_CARRY}" > {carry}\n'
            cmd = ["bash", "-c", script]
        out = subprocess.run(
            cmd, cwd=self.work, env=env, capture_output=True, text=True, timeout=300
        )
        if out.returncode == 0 and block.language not in PYTHON:
            self.carried = json.loads((self.folder / "carried.json").read_text())
        return out


@pytest.fixture
def doc_run(tmp_path: Path) -> Iterator[DocRun]:
    run = DocRun(tmp_path)
    yield run
    run.stop()


RUN = [doc for doc in DOCS if any(b.marked and not b.not_run for b in doc_blocks(doc))]


@pytest.mark.parametrize("doc", RUN, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run_as_written(doc: Path, doc_run: DocRun) -> None:
    examples = [b for b in doc_blocks(doc) if b.marked and not b.not_run]
    assert examples
    for block in examples:
        out = doc_run.run(block)
        assert out.returncode == 0, (
            f"{block.where} failed ({out.returncode}):\n{doc_run.code(block)}\n"
            f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
        )
