"""Runs the real gateway as a child process on an ephemeral port: for the benchmarks and the
integration tests (boto3 is needed, from the test extra)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ACCESS_KEY = "TESTACCESSKEY0000001"
SECRET_KEY = "test-secret-key-0000000000000000000000001"
_LISTENING = re.compile(r"listening on (https?://\S+)")
# How long a gateway may take to listen: its start-up is well under a second, but two loaded
# cores and a PostgreSQL catalog's first connection have made it take several.
START_TIMEOUT = 60.0

# A log record's first line: the text format's time (gateway/logs.py, TEXT_FORMAT) or a JSON
# object. Other lines (a traceback's) belong to the record before them.
_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} |\{")
_ERROR = re.compile(
    r"\A\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (ERROR|CRITICAL) "
    r'|\A\{.*"level": "(error|critical)"'
    r"|Traceback \(most recent call last\)"
    r'|"traceback": '
)


def _is_error(record: str) -> bool:
    """A record logged at ERROR or above, or one carrying a traceback at any level."""
    return _ERROR.search(record) is not None


# Every gateway a test process started, until its log has been judged after its stop:
# tests/conftest.py fails the test in whose time a gateway logged an error it did not allow.
watched: list[GatewayProcess] = []


def take_problems() -> list[str]:
    """What the gateways logged or how they exited, unexpected, since the last call: each item
    names its gateway's data folder. Stopped gateways are forgotten once judged."""
    found = []
    for server in list(watched):
        found += [f"[{server.data}] {text}" for text in server._take_problems()]
        if server.proc is None:
            watched.remove(server)
    return found


class GatewayProcess:
    """`python -m gateway serve` on 127.0.0.1:0 with a data folder (and the catalog in it, or
    in the PostgreSQL database `catalog` names); stops when told.

    Its log is judged: a record at ERROR or above, or a traceback, that `allow` does not name
    fails the test in whose time it was logged, and so does a stop that does not end in exit
    status 0 (tests/conftest.py)."""

    def __init__(
        self,
        data: Path,
        env: dict[str, str] | None = None,
        *args: str,
        catalog: str | None = None,
        allow: tuple[str, ...] = (),
    ) -> None:
        self.data = data
        self.catalog = catalog
        self.env = {
            **os.environ,
            "S3GW_ACCESS_KEY": ACCESS_KEY,
            "S3GW_SECRET_KEY": SECRET_KEY,
            # No load balancer watches these gateways: a stop needs no drain (a test of the
            # drain sets its own).
            "S3GW_DRAIN_SECONDS": "0",
            # Its temporary files (the metrics' folder, which a SIGKILLed gateway cannot
            # remove) beside its data, in the test's own folder, not the machine's /tmp.
            "TMPDIR": str(data.parent),
            **(env or {}),
        }
        self.args = args
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.log: list[str] = []
        # A session of its own (tests/reliability: a crash kills its workers too).
        self.own_session = False
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        # Each record: [its text, None (not judged yet) | "ok" | "allowed" | "reported"].
        self._records: list[list[Any]] = []
        self._allowed: list[re.Pattern[str]] = []
        self._exits: list[str] = []
        self.allow(*allow)

    def start(self, timeout: float = START_TIMEOUT) -> GatewayProcess:
        """Starts the gateway and waits, at most `timeout` seconds, until it listens: a gateway
        that hangs in its start-up fails the test rather than stalling it."""
        cmd = [sys.executable, "-m", "gateway", "serve", "--data", str(self.data)]
        cmd += ["--address", "127.0.0.1:0", *self.args]
        if self.catalog is not None:
            cmd += ["--catalog", self.catalog]
        self.url = ""
        # An event of this start's own: the reader of a process before it (killed, its stderr
        # ending now) must not wake this start's wait.
        listening = self._listening = threading.Event()
        self.proc = subprocess.Popen(
            cmd,
            env=self.env,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=self.own_session,
        )
        self._reader = threading.Thread(
            target=self._drain, args=(self.proc, listening), daemon=True
        )
        self._reader.start()
        if not watched.count(self):
            watched.append(self)
        if not listening.wait(timeout) or not self.url:
            proc, self.proc = self.proc, None
            hung = proc.poll() is None
            if hung:
                proc.kill()
            proc.wait(timeout=30)
            self._reader.join(timeout=10)
            # Its log is this failure's message, not reported a second time at teardown.
            self._take_problems()
            why = (
                f"gateway did not listen within {timeout:g} s"
                if hung
                else f"gateway did not start (exit status {proc.returncode})"
            )
            raise RuntimeError(why + ":\n" + "".join(self.log))
        return self

    def _drain(self, proc: subprocess.Popen[str], listening: threading.Event) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._take(line)
            if not listening.is_set():
                m = _LISTENING.search(line)
                if m:
                    self.url = m.group(1)
                    listening.set()
        listening.set()  # the end of its stderr: it will not listen now

    def _take(self, line: str) -> None:
        with self._lock:
            self.log.append(line)
            if _RECORD.match(line) or not self._records:
                self._records.append([line, None])
            else:  # a traceback's lines belong to the record that logged it
                record = self._records[-1]
                record[0] += line
                if record[1] == "ok":
                    record[1] = None  # judged again, whole

    def allow(self, *patterns: str) -> GatewayProcess:
        """Log records that a test provokes on purpose (regular expressions searched in the
        record, its traceback included): not counted as the server's errors."""
        self._allowed += [re.compile(p) for p in patterns]
        return self

    def _take_problems(self) -> list[str]:
        """The error records and tracebacks logged since the last call (and an unexpected exit
        status), less those `allow` names."""
        found: list[str] = []
        with self._lock:
            for record in self._records:
                if record[1] is not None:
                    continue
                text = record[0]
                if not _is_error(text):
                    record[1] = "ok"
                elif any(p.search(text) for p in self._allowed):
                    record[1] = "allowed"
                else:
                    record[1] = "reported"
                    found.append(text)
            found += self._exits
            self._exits = []
        return found

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        ran = proc.poll() is None
        if ran:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self._exits.append(f"exit: did not stop within 30 s of signal {sig}\n")
        if self._reader is not None:
            # Its last lines (the shutdown's errors among them) read before they are judged;
            # bounded, as a worker left behind may hold the pipe open.
            self._reader.join(timeout=10)
        # A gateway stopped by SIGTERM or SIGINT exits 0; one that ended on its own before
        # the test stopped it, or failed its shutdown, did not.
        status = f"exit status {proc.returncode}"
        if (
            (sig != signal.SIGKILL or not ran)
            and proc.returncode != 0
            and not any(p.search(status) for p in self._allowed)
        ):
            how = f"after signal {sig}" if ran else "before the test stopped it"
            self._exits.append(f"{status} {how}\n")

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def client(
        self,
        access_key: str = ACCESS_KEY,
        secret_key: str = SECRET_KEY,
        verify: str | None = None,
        **config: Any,
    ) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name="us-east-1",
            verify=verify,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                **config,
            ),
        )


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found
