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
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from tests.postgres import USER, PostgresServer, _free_port, find_bin, unavailable_reason
from tests.process import children
from tests.reliability.harness import Settings, client, generate, report
from tests.server import GatewayProcess

KiB = 1 << 10
# Small bodies stay in the catalog (inline), larger ones are blob files: both kinds of PUT.
SIZES = (1 * KiB, 3 * KiB, 100 * KiB)
WRITERS = 4
RETRYABLE = {"ServiceUnavailable", "SlowDown"}
BUCKET = "failover"

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def _sigkill_postmaster(data: Path) -> None:
    """SIGKILL the postmaster of `data` and every process it started."""
    pid = int((data / "postmaster.pid").read_text().split()[0])
    for victim in [pid, *children(pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)


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
        _sigkill_postmaster(self.data)


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


class Writers:
    """Four threads PUTting distinct keys through one gateway until stopped; each request's
    outcome, and the phase of the failover it was sent in (the test moves `phase` on)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.puts: list[Put] = []
        self.phase = "before"
        self.marks: dict[str, float] = {}  # phase -> when the test moved to it
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,)) for n in range(WRITERS)]

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def move(self, phase: str) -> None:
        self.marks[phase], self.phase = time.monotonic(), phase

    def _run(self, n: int) -> None:
        s3 = client(self.url)
        for i in range(1_000_000):
            if self._stop.is_set():
                return
            key, seed, size = f"w{n}/{i:06d}", n * 1_000_000 + i, SIZES[i % len(SIZES)]
            sent = self.phase
            try:
                s3.put_object(Bucket=BUCKET, Key=key, Body=generate(seed, size))
                outcome = "200"
            except botocore.exceptions.ClientError as exc:
                status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
                outcome = f"{status} {exc.response['Error']['Code']}"
            except (
                botocore.exceptions.ConnectionError,
                botocore.exceptions.HTTPClientError,
            ) as exc:
                outcome = f"connection: {type(exc).__name__}"
            with self._lock:
                self.puts.append(Put(key, seed, size, outcome, sent, time.monotonic()))
            if outcome != "200":
                time.sleep(0.05)  # a client backing off, as an SDK's retry would

    def acked(self, phase: str | None = None) -> int:
        with self._lock:
            return sum(1 for p in self.puts if p.outcome == "200" and phase in (None, p.phase))

    def failed(self, phase: str) -> int:
        with self._lock:
            return sum(1 for p in self.puts if p.outcome != "200" and p.phase == phase)

    def check(self, s3: Any, name: str) -> None:
        """Every failure retryable; every acknowledged PUT readable with its bytes; the
        figures reported."""
        outcomes = Counter(p.outcome for p in self.puts)
        failed = [p for p in self.puts if p.outcome != "200"]
        # Never a 500, nor any answer but a retryable 503 or a lost connection.
        wrong = [
            p
            for p in failed
            if not p.outcome.startswith("connection: ")
            and not (p.outcome.startswith("503 ") and p.outcome.split()[1] in RETRYABLE)
        ]
        assert not wrong, Counter(p.outcome for p in wrong)
        acknowledged = [p for p in self.puts if p.outcome == "200"]
        for p in acknowledged:
            body = s3.get_object(Bucket=BUCKET, Key=p.key)["Body"].read()
            assert body == generate(p.seed, p.size), p.key
        killed, promoted = self.marks["killed"], self.marks["promoted"]
        first_after = min(p.ended for p in acknowledged if p.phase == "promoted")
        lost_window = max((p.ended for p in failed), default=killed) - killed
        failures = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()) if k != "200")
        report(
            f"{name}: {len(acknowledged)} PUTs acknowledged, every one readable with its "
            f"bytes; {len(failed)} failed ({failures or 'none'}), within {lost_window:.2f} s "
            f"of the SIGKILL; a primary again {promoted - killed:.2f} s after it; "
            f"first write acknowledged {first_after - promoted:.2f} s after that"
        )


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
    gateway = GatewayProcess(tmp_path / "data", {"S3GW_CATALOG": url}).start()
    try:
        s3 = client(gateway.url)
        s3.create_bucket(Bucket=BUCKET)
        with Writers(gateway.url) as writers:
            _wait(lambda: writers.acked() >= before, 120, f"{before} PUTs before the failover")
            primary.sigkill()
            writers.move("killed")
            # Some requests meet the dead primary before the promotion (bounded: the writers
            # may all be between requests).
            deadline = time.monotonic() + 5
            while writers.failed("killed") < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            standby.promote()
            writers.move("promoted")
            _wait(
                lambda: writers.acked("promoted") >= after, 120, f"{after} PUTs after the promotion"
            )
        writers.check(s3, "pg failover")
        assert not any("Traceback" in line for line in gateway.log)
    finally:
        gateway.stop()


# --- the recipe: etcd and two Patroni nodes from deploy/patroni/ -----------------------------

RECIPE = Path(__file__).resolve().parents[2] / "deploy" / "patroni"


def _patroni_unavailable() -> str | None:
    missing = [name for name in ("patroni", "etcd") if shutil.which(name) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian: apt-get install patroni etcd-server)"
    return unavailable_reason()


class PatroniNode:
    """One node of the recipe: its deploy/patroni file with this machine's loopback addresses,
    ports and folders put in, and shorter timings (`ttl` 20, Patroni's least, instead of 30)
    so that a failover takes seconds rather than most of a minute. Run as `postgres`."""

    def __init__(self, name: str, folder: Path, etcd: str) -> None:
        import yaml

        self.name = name
        self.folder = folder
        self.rest, self.port = _free_port(), _free_port()
        config = yaml.safe_load((RECIPE / f"{name}.yml").read_text())
        config["restapi"] = {"listen": f"127.0.0.1:{self.rest}"} | {
            "connect_address": f"127.0.0.1:{self.rest}"
        }
        config["etcd3"] = {"hosts": etcd}
        dcs = config["bootstrap"]["dcs"]
        dcs.update(ttl=20, loop_wait=2, retry_timeout=5)
        config["bootstrap"]["pg_hba"] = [
            line.replace("10.0.0.0/24", "127.0.0.1/32") for line in config["bootstrap"]["pg_hba"]
        ]
        pg = config["postgresql"]
        pg["listen"] = pg["connect_address"] = f"127.0.0.1:{self.port}"
        pg["data_dir"] = str(folder / "data")
        # The recipe's /usr/lib/postgresql/15/bin where it is, else the folder pg_ctl is in.
        pg_ctl = Path(find_bin("pg_ctl") or "pg_ctl").resolve()
        if not (Path(pg["bin_dir"]) / "pg_controldata").exists():
            pg["bin_dir"] = str(pg_ctl.parent)
        pg["pgpass"] = str(folder / "pgpass")
        pg["parameters"]["unix_socket_directories"] = str(folder)
        self.superuser = pg["authentication"]["superuser"]
        self.config = folder / f"{name}.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = folder / "patroni.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = ["patroni", str(self.config)]
        if os.geteuid() == 0:
            args = ["runuser", "-u", USER, "--", *args]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def role(self) -> str | None:
        """ "primary", "sync" (the synchronous standby) or None, from Patroni's REST API."""
        for role in ("primary", "sync"):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.rest}/{role}", timeout=2):
                    return role
            except (urllib.error.URLError, OSError):
                continue
        return None

    def sigkill(self) -> None:
        """The host lost: Patroni and every PostgreSQL process of its data folder (Patroni
        starts PostgreSQL in a session of its own: killing Patroni's leaves it serving)."""
        if (self.folder / "data" / "postmaster.pid").exists():
            _sigkill_postmaster(self.folder / "data")
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # Patroni's session: its postgres too
            self.proc.wait(timeout=30)
            self.proc = None

    def url(self, database: str = "postgres") -> str:
        user, password = self.superuser["username"], self.superuser["password"]
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"


@pytest.fixture
def patroni_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[PatroniNode]]:
    reason = _patroni_unavailable()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("yaml")
    folder = Path(tempfile.mkdtemp(prefix="s3gw-patroni-"))
    client_port, peer_port = _free_port(), _free_port()
    etcd = subprocess.Popen(
        [
            *("etcd", "--name", "e1", "--data-dir", str(folder / "etcd")),
            *("--listen-client-urls", f"http://127.0.0.1:{client_port}"),
            *("--advertise-client-urls", f"http://127.0.0.1:{client_port}"),
            *("--listen-peer-urls", f"http://127.0.0.1:{peer_port}"),
            *("--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}"),
            *("--initial-cluster", f"e1=http://127.0.0.1:{peer_port}"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    nodes: list[PatroniNode] = []
    try:
        for name in ("db1", "db2"):
            own = folder / name
            own.mkdir()
            if os.geteuid() == 0:  # mkdtemp's folder is 0700: PostgreSQL's user must enter it
                import pwd

                entry = pwd.getpwnam(USER)
                os.chown(folder, entry.pw_uid, entry.pw_gid)
                os.chown(own, entry.pw_uid, entry.pw_gid)
            nodes.append(PatroniNode(name, own, f"127.0.0.1:{client_port}"))
        try:
            nodes[0].start()
            _wait(lambda: nodes[0].role() == "primary", 30, "db1 bootstrapped as the primary")
            nodes[1].start()
            _wait(lambda: nodes[1].role() == "sync", 120, "db2 the synchronous standby")
        except AssertionError as exc:
            logs = "".join(
                f"\n--- {n.log}\n{n.log.read_text()[-3000:]}" for n in nodes if n.log.exists()
            )
            raise AssertionError(f"{exc}{logs}") from None
        yield nodes
    finally:
        for node in nodes:
            node.sigkill()
        etcd.terminate()
        etcd.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def test_the_patroni_recipe_fails_over_under_writers(
    patroni_pair: list[PatroniNode], tmp_path: Path
) -> None:
    """The recipe's files, two nodes and etcd: the primary's host lost (SIGKILL of Patroni
    and PostgreSQL) under four writers; Patroni promotes the synchronous standby once the
    leader key expires; every acknowledged PUT is there, and writes go on."""
    import psycopg

    db1, db2 = patroni_pair
    with psycopg.connect(db1.url(), autocommit=True) as conn:
        conn.execute("CREATE ROLE s3gw LOGIN PASSWORD 's3gw-secret'")
        conn.execute("CREATE DATABASE s3gw OWNER s3gw")
    url = (
        f"postgresql://s3gw:s3gw-secret@127.0.0.1:{db1.port},127.0.0.1:{db2.port}/s3gw"
        "?target_session_attrs=read-write&connect_timeout=3"
    )
    gateway = GatewayProcess(tmp_path / "data", {"S3GW_CATALOG": url}).start()
    try:
        s3 = client(gateway.url)
        s3.create_bucket(Bucket=BUCKET)
        with Writers(gateway.url) as writers:
            _wait(lambda: writers.acked() >= 200, 120, "200 PUTs before the failover")
            db1.sigkill()
            writers.move("killed")
            _wait(lambda: db2.role() == "primary", 120, "Patroni promoting db2")
            writers.move("promoted")
            try:
                _wait(lambda: writers.acked("promoted") >= 100, 120, "100 PUTs after promotion")
            except AssertionError as exc:
                with psycopg.connect(db2.url(), autocommit=True) as conn:
                    sync = conn.execute("SHOW synchronous_standby_names").fetchone()
                outcomes = Counter((p.phase, p.outcome) for p in writers.puts)
                tail = db2.log.read_text()[-2000:]
                detail = f"{outcomes}, db2 synchronous: {sync}\n{tail}"
                raise AssertionError(f"{exc}: {detail}") from None
        writers.check(s3, "patroni failover")
        assert not any("Traceback" in line for line in gateway.log)
    finally:
        gateway.stop()
