"""A catalog that fails over: a gateway on two PostgreSQL 15 servers in plain streaming
replication (synchronous: a commit waits for the standby), given as a libpq multi-host URL with
`target_session_attrs=read-write`. Four writers PUT distinct keys; the primary is SIGKILLed
mid-run and the standby promoted (what Patroni does, docs/scaling.md, by hand here).

What must hold: every PUT acknowledged (200) is readable afterwards with its bytes (a commit
acknowledged under synchronous replication is on the standby); a request that met the failover
got a retryable 503 (ServiceUnavailable or SlowDown) or lost its connection, never a 500; the
gateway logged no error and no traceback (the harness fails the test on either); writes succeed
again after the promotion. `make test` runs a short form; RELIABILITY_LONG=1 writes longer on
each side of the failover.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import botocore.exceptions
import pytest

from tests.postgres import USER, PostgresServer, _free_port, find_bin, unavailable_reason
from tests.reliability.harness import Settings, client, generate, report
from tests.server import GatewayProcess

KiB = 1 << 10
# Small bodies stay in the catalog (inline), larger ones are blob files: both kinds of PUT.
SIZES = (1 * KiB, 3 * KiB, 100 * KiB)
WRITERS = 4
RETRYABLE = {"ServiceUnavailable", "SlowDown"}

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


class Standby(PostgresServer):
    """A streaming standby of `primary`, made by pg_basebackup -R (its primary_conninfo and
    standby.signal written), on a port of its own."""

    def __init__(self, primary: PostgresServer) -> None:
        # PostgresServer's folder and port, without its initdb: the data is the primary's copy.
        self.folder = Path(tempfile.mkdtemp(prefix="s3gw-pg-standby-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = _free_port()
        self.durable = False
        if os.geteuid() == 0:
            import pwd

            entry = pwd.getpwnam(USER)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        basebackup = find_bin("pg_basebackup")
        assert basebackup is not None
        self._run(
            [
                *(basebackup, "-h", "127.0.0.1", "-p", str(primary.port), "-U", USER),
                *("-D", str(self.data), "-R", "-X", "stream", "--checkpoint=fast"),
            ]
        )

    def promote(self) -> None:
        pg_ctl = find_bin("pg_ctl")
        assert pg_ctl is not None
        self._run([pg_ctl, "promote", "-w", "-D", str(self.data)])


class SynchronousPrimary(PostgresServer):
    """A primary whose commits wait for a standby's flush (synchronous_commit on, any standby
    synchronous). fsync stays off: the test kills processes, not the machine."""

    def start(self) -> PostgresServer:
        pg_ctl = find_bin("pg_ctl")
        assert pg_ctl is not None
        options = [
            f"-p {self.port}",
            f"-k {self.folder}",
            "-c listen_addresses=127.0.0.1",
            "-c max_connections=100",
            "-c fsync=off",
            "-c full_page_writes=off",
            "-c synchronous_commit=on",
            "-c synchronous_standby_names='*'",
        ]
        start = [pg_ctl, "start", "-w", "-D", str(self.data), "-l", str(self.log)]
        self._run([*start, "-o", " ".join(options)])
        atexit.register(self.close)  # as PostgresServer.start: never left behind
        return self

    def sigkill(self) -> None:
        """SIGKILL the postmaster and every process it started, as a lost host would."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    children.append(int(entry.name))
        for victim in [pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)


def _start_standby(standby: Standby) -> None:
    pg_ctl = find_bin("pg_ctl")
    assert pg_ctl is not None
    options = [
        f"-p {standby.port}",
        f"-k {standby.folder}",
        "-c listen_addresses=127.0.0.1",
        "-c max_connections=100",
        "-c fsync=off",
        "-c full_page_writes=off",
        "-c synchronous_standby_names=''",  # once promoted it has no standby to wait for
    ]
    start = [pg_ctl, "start", "-w", "-D", str(standby.data), "-l", str(standby.log)]
    standby._run([*start, "-o", " ".join(options)])
    atexit.register(standby.close)


@dataclass(frozen=True)
class Put:
    key: str
    seed: int
    size: int
    outcome: str  # "200", "503 ServiceUnavailable", "connection: ...", ...
    phase: str  # when the request was sent: "before" the SIGKILL, "killed", "promoted"
    ended: float


@pytest.fixture
def pair() -> Iterator[tuple[SynchronousPrimary, Standby]]:
    primary = SynchronousPrimary()
    primary.start()
    standby: Standby | None = None
    try:
        standby = Standby(primary)
        _start_standby(standby)
        yield primary, standby
    finally:
        if standby is not None:
            standby.close()
        primary.close()


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.05)


def test_acknowledged_puts_survive_the_primary_s_loss(
    pair: tuple[SynchronousPrimary, Standby], tmp_path: Path, reliability: Settings
) -> None:
    primary, standby = pair
    import psycopg

    with psycopg.connect(primary.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE s3gw")
        # The standby is streaming, and synchronous: a commit waits for it.
        _wait(
            lambda: (
                conn.execute(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'"
                ).fetchone()[0]
                == 1
            ),
            30,
            "the standby streaming synchronously",
        )
    url = (
        f"postgresql://{USER}@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/s3gw"
        "?target_session_attrs=read-write&connect_timeout=3"
    )
    before, after = (2000, 1000) if reliability.long else (200, 100)
    data = tmp_path / "data"
    gateway = GatewayProcess(data, {"S3GW_CATALOG": url}).start()
    try:
        s3 = client(gateway.url)
        s3.create_bucket(Bucket="failover")
        puts: list[Put] = []
        lock = threading.Lock()
        stop = threading.Event()
        phase = ["before"]  # moved on by the test as it kills and promotes

        def writer(n: int) -> None:
            s3 = client(gateway.url)
            for i in range(1_000_000):
                if stop.is_set():
                    return
                key, seed, size = f"w{n}/{i:06d}", n * 1_000_000 + i, SIZES[i % len(SIZES)]
                sent = phase[0]
                try:
                    s3.put_object(Bucket="failover", Key=key, Body=generate(seed, size))
                    outcome = "200"
                except botocore.exceptions.ClientError as exc:
                    status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
                    outcome = f"{status} {exc.response['Error']['Code']}"
                except (
                    botocore.exceptions.ConnectionError,
                    botocore.exceptions.HTTPClientError,
                ) as exc:
                    outcome = f"connection: {type(exc).__name__}"
                with lock:
                    puts.append(Put(key, seed, size, outcome, sent, time.monotonic()))
                if outcome != "200":
                    time.sleep(0.05)  # a client backing off, as an SDK's retry would

        def acked(sent: str | None = None) -> int:
            with lock:
                return sum(1 for p in puts if p.outcome == "200" and sent in (None, p.phase))

        threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(4)]
        for thread in threads:
            thread.start()
        try:
            _wait(lambda: acked() >= before, 120, f"{before} PUTs before the failover")
            primary.sigkill()
            killed_at, phase[0] = time.monotonic(), "killed"
            # Some requests meet the dead primary before the promotion (bounded: the writers
            # may all be between requests).
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                with lock:
                    if sum(1 for p in puts if p.phase == "killed" and p.outcome != "200") >= 4:
                        break
                time.sleep(0.05)
            standby.promote()
            promoted_at, phase[0] = time.monotonic(), "promoted"
            _wait(lambda: acked("promoted") >= after, 120, f"{after} PUTs after the promotion")
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=120)

        outcomes = Counter(p.outcome for p in puts)
        failed = [p for p in puts if p.outcome != "200"]
        # Never a 500, nor any answer but a retryable 503 or a lost connection.
        wrong = [
            p
            for p in failed
            if not p.outcome.startswith("connection: ")
            and not (p.outcome.startswith("503 ") and p.outcome.split()[1] in RETRYABLE)
        ]
        assert not wrong, Counter(p.outcome for p in wrong)
        # Every acknowledged PUT is there, with its bytes, read through the promoted standby.
        acknowledged = [p for p in puts if p.outcome == "200"]
        for p in acknowledged:
            body = s3.get_object(Bucket="failover", Key=p.key)["Body"].read()
            assert body == generate(p.seed, p.size), p.key
        first_after = min(p.ended for p in acknowledged if p.phase == "promoted")
        lost_window = max((p.ended for p in failed), default=killed_at) - killed_at
        failures = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()) if k != "200")
        report(
            f"pg failover: {len(acknowledged)} PUTs acknowledged, every one readable with its "
            f"bytes; {len(failed)} failed ({failures or 'none'}), within {lost_window:.2f} s "
            f"of the SIGKILL; standby promoted {promoted_at - killed_at:.2f} s after it; "
            f"first write acknowledged {first_after - promoted_at:.2f} s after the promotion"
        )
        assert not any("Traceback" in line for line in gateway.log)
    finally:
        gateway.stop()
