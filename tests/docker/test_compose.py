"""`make test-docker`: the image and docker-compose.yml on a real Docker daemon.

What tests/integration/test_deploy.py cannot prove without an engine: that the image builds,
that the container comes up healthy (over HTTP and HTTPS), non-root and as locked down as the
compose file says, that aws-cli works against the published port, that a 64 MiB upload and a
64 MiB download in flight when `docker compose stop` sends SIGTERM both complete, and that
`down` then `up` keeps the data.

It runs under `docker compose` (v2) or `docker-compose` (v1), as its own project with its own
volume, image tag and loopback port, from an empty env file (a developer's .env does not leak
in), and removes its containers and volume at the end. `make test` skips it: it needs a daemon
and takes minutes. Where no daemon answers, it skips with the reason.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
BIN = Path(sys.executable).parent
SERVICE = "s3gw"
PROJECT = "s3gw-test-docker"
IMAGE = "s3gw:test-docker"
VOLUME = "s3gw-test-docker-data"
MiB = 1024 * 1024
TRANSFER = 64 * MiB

if os.environ.get("DOCKER_TESTS") != "1":
    pytest.skip(
        "needs a Docker daemon and minutes: run it with `make test-docker`",
        allow_module_level=True,
    )


def _compose_command() -> tuple[list[str], str]:
    """`docker compose` (v2) where the plugin is installed, else `docker-compose` (v1); and
    why the tests cannot run here ('' if they can)."""
    if shutil.which("docker") is None:
        return [], "no docker command on this machine"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["docker info failed"])[-1]
        return [], f"no Docker daemon answers: {reason}"
    v2 = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60)
    if v2.returncode == 0:
        return ["docker", "compose"], ""
    if shutil.which("docker-compose"):
        return ["docker-compose"], ""
    return [], "neither `docker compose` nor `docker-compose` is installed"


# Skipped, not failed, where Docker cannot run: the tests are collected (so that the run says
# why) and none of them starts anything.
COMPOSE, WHY_NOT = _compose_command()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Project:
    """This test's compose project: the repository's compose file, with the image tag
    overridden, and the port and volume given through the file's own variables."""

    work: Path
    port: int = field(default_factory=_free_port)
    console_port: int = field(default_factory=_free_port)
    settings: dict[str, str] = field(default_factory=dict)  # S3GW_* for the next `up`

    def __post_init__(self) -> None:
        self.override = self.work / "override.yml"
        self.override.write_text(f"services:\n  {SERVICE}:\n    image: {IMAGE}\n")
        self.env_file = self.work / "empty.env"
        self.env_file.write_text("")

    def env(self) -> dict[str, str]:
        kept = {k: v for k, v in os.environ.items() if not k.startswith(("S3GW_", "AWS_"))}
        return {
            **kept,
            "S3GW_PUBLISH": f"127.0.0.1:{self.port}",
            "S3GW_CONSOLE_PUBLISH": f"127.0.0.1:{self.console_port}",
            "S3GW_VOLUME": VOLUME,
            **self.settings,
        }

    def argv(self, *args: str) -> list[str]:
        files = ["-f", str(COMPOSE_FILE), "-f", str(self.override)]
        return [*COMPOSE, "--env-file", str(self.env_file), "-p", PROJECT, *files, *args]

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> str:
        done = subprocess.run(
            self.argv(*args),
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def container(self) -> str:
        cid = self.compose("ps", "-a", "-q", SERVICE).strip()
        assert cid, "no container for the service"
        return cid

    def inspect(self) -> dict[str, Any]:
        out = subprocess.run(
            ["docker", "inspect", self.container()],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        return json.loads(out)[0]

    def logs(self) -> str:
        return self.compose("logs", "--no-color", SERVICE, check=False)[-4000:]

    def wait_healthy(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while True:
            state = self.inspect()["State"]
            health = state.get("Health", {}).get("Status")
            if health == "healthy":
                return
            last = (state.get("Health", {}).get("Log") or [{}])[-1].get("Output", "")
            assert state["Status"] == "running", f"{state['Status']}:\n{self.logs()}"
            assert health != "unhealthy", f"unhealthy: {last}\n{self.logs()}"
            assert time.monotonic() < deadline, f"not healthy after {timeout} s: {last}"
            time.sleep(1)

    def credentials(self) -> dict[str, str]:
        """The README's `eval "$(docker compose exec -T s3gw s3gw credentials)"`, parsed."""
        out = self.compose("exec", "-T", SERVICE, "s3gw", "credentials")
        assert "\r" not in out, repr(out)
        exports = {}
        for line in out.splitlines():
            name, sep, value = line.removeprefix("export ").partition("=")
            assert line.startswith("export ") and sep, repr(line)
            exports[name] = value
        assert exports.keys() >= {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, exports
        return exports

    def client(self, keys: dict[str, str]) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
            region_name=keys.get("AWS_DEFAULT_REGION", "us-east-1"),
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1},
            ),
        )

    def aws(self, keys: dict[str, str], endpoint: str, *args: str, **env: str) -> str:
        config = self.work / "aws.cfg"
        config.write_text("")
        done = subprocess.run(
            [str(BIN / "aws"), "--endpoint-url", endpoint, *args],
            env={
                **self.env(),
                **keys,
                "AWS_CONFIG_FILE": str(config),
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                **env,
            },
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"aws {' '.join(args)}:\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    """Built and up (healthy); removed with its volume at the end. The tests below run in
    order on it."""
    project = Project(tmp_path_factory.mktemp("compose"))
    project.compose("down", "-v", "--remove-orphans", check=False)  # a crashed run's leftovers
    try:
        project.compose("build", timeout=1200)
        project.compose("up", "-d")
        project.wait_healthy()
        yield project
    finally:
        print(project.logs()[-1500:])
        project.compose("down", "-v", "--remove-orphans", check=False)


@pytest.fixture(scope="module")
def keys(project: Project) -> dict[str, str]:
    return project.credentials()


@pytest.fixture(autouse=True)
def up(project: Project) -> None:
    """Each test starts from a running, healthy gateway, whatever the one before it left."""
    project.compose("up", "-d")
    project.wait_healthy()


def test_container_runs_locked_down_on_loopback(project, keys):
    info = project.inspect()
    host = info["HostConfig"]
    assert info["Config"]["User"] == "10001:10001"
    assert project.compose("exec", "-T", SERVICE, "id", "-u").strip() == "10001"
    bindings = host["PortBindings"]["9000/tcp"]
    assert [(b["HostIp"], b["HostPort"]) for b in bindings] == [("127.0.0.1", str(project.port))]
    bindings = host["PortBindings"]["9001/tcp"]
    console = [(b["HostIp"], b["HostPort"]) for b in bindings]
    assert console == [("127.0.0.1", str(project.console_port))]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["LogConfig"]["Type"] == "json-file"
    assert host["LogConfig"]["Config"].keys() >= {"max-size", "max-file"}
    # The volume compose made has the fixed name the Dockerfile's `docker run` example uses:
    # that example prints the keys this gateway accepts.
    mounts = {m["Destination"]: m for m in info["Mounts"]}
    assert mounts["/data"]["Name"] == VOLUME
    run = ["docker", "run", "--rm", "-v", f"{VOLUME}:/data", IMAGE, "credentials"]
    printed = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    assert f"export AWS_ACCESS_KEY_ID={keys['AWS_ACCESS_KEY_ID']}\n" in printed.stdout
    # Every setting reaches the gateway (one that compose dropped would be missing here).
    env = dict(item.split("=", 1) for item in info["Config"]["Env"])
    assert env["S3GW_TLS_SELF_SIGNED"] == "0" and env["S3GW_BODY_TIMEOUT"] == "20.0"


def test_aws_cli_round_trip(project, keys, tmp_path):
    endpoint = f"http://127.0.0.1:{project.port}"
    body = os.urandom(20 * MiB)  # above aws-cli's 8 MiB threshold: a multipart upload
    (tmp_path / "up.bin").write_bytes(body)
    project.aws(keys, endpoint, "s3", "mb", "s3://docker")
    project.aws(keys, endpoint, "s3", "cp", str(tmp_path / "up.bin"), "s3://docker/big.bin")
    assert "big.bin" in project.aws(keys, endpoint, "s3", "ls", "s3://docker")
    project.aws(keys, endpoint, "s3", "cp", "s3://docker/big.bin", str(tmp_path / "down.bin"))
    assert (tmp_path / "down.bin").read_bytes() == body


@dataclass
class Transfer:
    """One request driven by hand over http.client, so that it can be held half done."""

    started: threading.Event = field(default_factory=threading.Event)
    status: int = 0
    etag: str = ""
    received: bytes = b""
    error: str = ""


def _upload(url: str, body: bytes, go: threading.Event, transfer: Transfer) -> None:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        conn.putrequest("PUT", f"{parts.path}?{parts.query}", skip_accept_encoding=True)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        half = len(body) // 2
        conn.send(body[:half])
        transfer.started.set()
        go.wait(120)
        # The rest after SIGTERM, over a few seconds: a stopping gateway must keep reading.
        for offset in range(half, len(body), MiB):
            conn.send(body[offset : offset + MiB])
            time.sleep(0.1)
        reply = conn.getresponse()
        transfer.status, transfer.etag = reply.status, reply.getheader("ETag", "")
        transfer.received = reply.read()
    except OSError as exc:
        transfer.error = repr(exc)
    finally:
        transfer.started.set()
        conn.close()


def _download(url: str, go: threading.Event, transfer: Transfer) -> None:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}")
        reply = conn.getresponse()
        transfer.status = reply.status
        chunks = [reply.read(8 * MiB)]
        transfer.started.set()
        go.wait(120)
        while chunk := reply.read(MiB):
            chunks.append(chunk)
            time.sleep(0.05)
        transfer.received = b"".join(chunks)
    except (OSError, http.client.HTTPException) as exc:
        transfer.error = repr(exc)
    finally:
        transfer.started.set()
        conn.close()


def test_transfers_in_flight_finish_across_stop_then_start(project, keys):
    s3 = project.client(keys)
    s3.create_bucket(Bucket="inflight")
    served = os.urandom(TRANSFER)
    s3.put_object(Bucket="inflight", Key="served.bin", Body=served)
    sent = os.urandom(TRANSFER)
    put_url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": "inflight", "Key": "sent.bin"}, ExpiresIn=900
    )
    get_url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": "inflight", "Key": "served.bin"}, ExpiresIn=900
    )
    cid = project.container()
    go = threading.Event()
    upload, download = Transfer(), Transfer()
    threads = [
        threading.Thread(target=_upload, args=(put_url, sent, go, upload)),
        threading.Thread(target=_download, args=(get_url, go, download)),
    ]
    for thread in threads:
        thread.start()
    assert upload.started.wait(120) and download.started.wait(120)
    assert not upload.error and not download.error, (upload.error, download.error)

    # Docker's own record of the SIGTERM: the transfers go on only once it has been sent.
    events = subprocess.Popen(
        ["docker", "events", "--filter", f"container={cid}", "--filter", "event=kill"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        stop = subprocess.Popen(
            project.argv("stop"),
            cwd=ROOT,
            env=project.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert events.stdout is not None
        killed = events.stdout.readline()
        assert "signal=15" in killed, killed
    finally:
        events.terminate()
        events.wait()
    go.set()
    for thread in threads:
        thread.join(180)
    stopped = stop.communicate(timeout=180)[0]
    assert stop.returncode == 0, stopped

    # Both finished within the grace period, whole, and the gateway then exited by itself
    # (137 would be docker's SIGKILL at the end of the grace period).
    problems = []
    if upload.error or upload.status != 200:
        problems.append(f"upload: {upload.status} {upload.error or upload.received[:300]!r}")
    elif upload.etag.strip('"') != hashlib.md5(sent).hexdigest():
        problems.append(f"upload: ETag {upload.etag}, not the MD5 of the bytes sent")
    if download.error or download.status != 200 or download.received != served:
        problems.append(
            f"download: {download.status} {download.error}, "
            f"{len(download.received)} of {len(served)} bytes"
            + ("" if download.received == served[: len(download.received)] else ", wrong bytes")
        )
    exit_code = project.inspect()["State"]["ExitCode"]
    if exit_code != 0:
        problems.append(f"the gateway exited with {exit_code}")
    assert not problems, "\n".join(problems) + "\n" + project.logs()[-1500:]

    project.compose("start")
    project.wait_healthy()
    s3 = project.client(keys)
    got = s3.get_object(Bucket="inflight", Key="sent.bin")["Body"].read()
    assert hashlib.md5(got).hexdigest() == hashlib.md5(sent).hexdigest()


def test_the_console_serves_its_page_and_static_files(project):
    # The image installs a wheel: the console's files are there only as package data.
    base = f"http://127.0.0.1:{project.console_port}"
    for path, kind in (("/signin", "text/html"), ("/static/console.css", "text/css")):
        with urllib.request.urlopen(base + path, timeout=30) as reply:
            assert reply.status == 200, path
            assert reply.headers["Content-Type"].startswith(kind), reply.headers["Content-Type"]


def test_down_then_up_keeps_data_and_keys(project, keys):
    s3 = project.client(keys)
    s3.create_bucket(Bucket="kept")
    body = os.urandom(3 * MiB)
    s3.put_object(Bucket="kept", Key="across/down and up.bin", Body=body)
    project.compose("down")  # no -v: the volume stays
    project.compose("up", "-d")
    project.wait_healthy()
    assert project.credentials() == keys
    s3 = project.client(keys)
    names = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert names >= {"docker", "kept"}, names
    got = s3.get_object(Bucket="kept", Key="across/down and up.bin")["Body"].read()
    assert got == body


def test_tls_variant_is_healthy_and_its_certificate_can_be_copied_out(project, keys, tmp_path):
    project.compose("down")
    project.settings = {"S3GW_TLS_SELF_SIGNED": "1"}  # as a line in .env would
    project.compose("up", "-d")
    project.wait_healthy()  # the health check speaks HTTPS now
    # The README's way out for the certificate the banner names.
    if COMPOSE[0] == "docker":
        project.compose("cp", f"{SERVICE}:/data/tls/localhost.crt", str(tmp_path))
    else:
        subprocess.run(
            ["docker", "cp", f"{project.container()}:/data/tls/localhost.crt", str(tmp_path)],
            check=True,
            timeout=60,
        )
    cert = tmp_path / "localhost.crt"
    assert cert.read_text().startswith("-----BEGIN CERTIFICATE-----")
    listed = project.aws(
        keys,
        f"https://localhost:{project.port}",
        "s3",
        "ls",
        "s3://docker",
        AWS_CA_BUNDLE=str(cert),
    )
    assert "big.bin" in listed
