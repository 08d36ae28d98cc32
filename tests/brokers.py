"""Real message brokers for the notification targets' tests (tests/integration/
test_notify_brokers.py): each started from Debian's package (`nats-server`, `mosquitto`,
`redis-server`, `rabbitmq-server`; .ci/run installs them) on a free port of 127.0.0.1, with
its state in a temporary folder, and stopped at the end. Where a broker's program is missing
the test skips, saying which package to install, unless CI=1 (then it fails)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gateway.tls import self_signed

START = 60.0  # seconds a broker may take to listen (RabbitMQ takes a few)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _program(name: str, package: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/lib/rabbitmq/bin")
    if found is None:
        message = f"{name} is not installed (apt-get install {package})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


class Broker:
    """One broker process (and its children, in a session of its own) on `port`."""

    program = ""
    package = ""
    scheme = ""

    def __init__(self, folder: Path, port: int = 0) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def command(self, program: str) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self) -> Broker:
        program = _program(self.program, self.package)
        log = open(self.folder / "broker.log", "ab")  # noqa: SIM115 (the process keeps it)
        self.process = subprocess.Popen(
            self.command(program),
            cwd=self.folder,
            env=self.environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + START
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.program} exited: {self.log()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.program} did not listen within {START} s: {self.log()[-2000:]}")

    def log(self) -> str:
        path = self.folder / "broker.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Nats(Broker):
    program, package, scheme = "nats-server", "nats-server", "nats"

    def command(self, program: str) -> list[str]:
        # JetStream on (a persistent topic's publish is acked by a stream), its store here.
        store = self.folder / "jetstream"
        return [program, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(store)]


class Mosquitto(Broker):
    """`persistence`: sessions (and their queued QoS 1 messages) kept across a restart."""

    program, package, scheme = "mosquitto", "mosquitto", "mqtt"

    def __init__(
        self, folder: Path, port: int = 0, persistence: bool = False, tls: bool = False
    ) -> None:
        super().__init__(folder, port)
        self.persistence = persistence
        self.tls = tls
        if tls:
            self.scheme = "mqtts"

    def command(self, program: str) -> list[str]:
        config = self.folder / "mosquitto.conf"
        kept = f"persistence true\npersistence_location {self.folder}/\n"
        # Root stays root (mosquitto started as root becomes the `mosquitto` user otherwise),
        # so that the broker reads and writes this test's private folder: its certificate,
        # and the persistence file it saves at a stop (refused as `mosquitto`, which lost the
        # sessions, and so the test's records, whenever the gateway's retry came first).
        text = f"listener {self.port} 127.0.0.1\nallow_anonymous true\nuser root\n"
        text += kept if self.persistence else "persistence false\n"
        if self.tls:
            # The gateway's own self-signed certificate for 127.0.0.1 (trusted by nobody).
            cert, key = self_signed(self.folder)
            text += f"certfile {cert}\nkeyfile {key}\n"
        config.write_text(text)
        return [program, "-c", str(config)]


class Redis(Broker):
    """`password`: the default user's (requirepass)."""

    program, package, scheme = "redis-server", "redis-server", "redis"

    def __init__(self, folder: Path, port: int = 0, password: str = "") -> None:
        super().__init__(folder, port)
        self.password = password

    def command(self, program: str) -> list[str]:
        return [
            program,
            *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder)),
            *("--save", "", "--appendonly", "no", "--protected-mode", "no"),
            *(("--requirepass", self.password) if self.password else ()),
        ]


class RabbitMQ(Broker):
    """A node of its own (name, ports, Mnesia and log folders, cookie under its HOME), no
    plugins; the AMQP port listens once the broker is booted (about 5 s)."""

    program, package, scheme = "rabbitmq-server", "rabbitmq-server", "amqp"

    def __init__(self, folder: Path, port: int = 0) -> None:
        super().__init__(folder, port)
        self.dist_port = free_port()
        # Erlang's port mapper of its own, stopped with the node (it outlives it otherwise).
        self.epmd_port = free_port()
        self.node = f"s3gwtest{self.port}@localhost"

    def stop(self) -> None:
        super().stop()
        epmd = shutil.which("epmd") or next(
            iter(glob.glob("/usr/lib/erlang/erts-*/bin/epmd")), None
        )
        if epmd is not None:
            subprocess.run(
                [epmd, "-port", str(self.epmd_port), "-kill"],
                env={**os.environ, "ERL_EPMD_PORT": str(self.epmd_port)},
                capture_output=True,
                check=False,
            )

    def environment(self) -> dict[str, str]:
        (self.folder / "plugins").write_text("[].\n")
        return {
            **os.environ,
            "HOME": str(self.folder),
            "RABBITMQ_NODENAME": self.node,
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.folder / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.folder / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.folder / "plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.folder / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.folder / "advanced.config"),
        }

    def command(self, program: str) -> list[str]:
        # Debian's /usr/sbin/rabbitmq-server runs the node as the `rabbitmq` user, who cannot
        # write to this test's folder; the script it wraps runs it as whoever calls it.
        inner = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
        return [str(inner) if inner.exists() else program]
