"""A PostgreSQL server of our own: a cluster in a temporary folder, on a free port of
127.0.0.1, run as the `postgres` system user (PostgreSQL refuses to run as root, and the tests and
benchmarks may run as root), stopped and deleted at the end. The tests' fixtures and the
benchmarks' PostgreSQL configurations (bench/postgres.py) start it.

The cluster's default collation is ICU's en-US where the server has ICU: text there sorts by
language rules, not by bytes, so a key compared as text would list out of S3's order. The
adapter must not depend on it.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import pwd
import random
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "postgres"


def find_bin(name: str) -> str | None:
    """A PostgreSQL program: on PATH, or in the folder Debian's packages put it."""
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return candidate
    return None


def unavailable_reason() -> str | None:
    """Why no server can be started here (None: it can)."""
    if find_bin("initdb") is None or find_bin("pg_ctl") is None:
        return "PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(USER)
        except KeyError:
            return f"running as root and there is no {USER!r} user to run PostgreSQL as"
    return None


def _free_port() -> int:
    """A port free now, below the kernel's ephemeral range: one the kernel hands out (a bind
    to port 0) may become the local port of some outgoing connection before the server given
    it binds it (seen: a Patroni standby's PostgreSQL failing with "Address already in use")."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randint(max(1024, low - 12000), low - 1)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster; `database()` makes a fresh database on it."""

    def __init__(self, *, durable: bool = False) -> None:
        """`durable`: fsync at commit as production does (benchmarks); tests run without."""
        self.folder = Path(tempfile.mkdtemp(prefix="s3gw-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = _free_port()
        self.durable = durable
        self._names = (f"db{n}" for n in itertools.count())
        if os.geteuid() == 0:
            entry = pwd.getpwnam(USER)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self._run(self._initdb_args())

    def _run(self, args: list[str]) -> None:
        if os.geteuid() == 0:
            args = ["runuser", "-u", USER, "--", *args]
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )

    def _initdb_args(self) -> list[str]:
        initdb = find_bin("initdb")
        assert initdb is not None
        args = [initdb, "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8"]
        icu = ["--locale-provider=icu", "--icu-locale=en-US", "--locale=C.UTF-8"]
        probe = subprocess.run([initdb, "--help"], capture_output=True, text=True, check=False)
        return args + (icu if "--locale-provider" in probe.stdout else ["--locale=C"])

    def start(self) -> PostgresServer:
        pg_ctl = find_bin("pg_ctl")
        assert pg_ctl is not None
        options = [
            f"-p {self.port}",
            f"-k {self.folder}",  # the unix socket in our folder, not /var/run/postgresql
            "-c listen_addresses=127.0.0.1",
            "-c max_connections=300",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        start = [pg_ctl, "start", "-w", "-D", str(self.data), "-l", str(self.log)]
        self._run([*start, "-o", " ".join(options)])
        # pg_ctl detaches the server: a run that ends without its teardown (an interrupted
        # session, a script that exits early) must not leave it behind.
        atexit.register(self.close)
        return self

    def stop(self) -> None:
        pg_ctl = find_bin("pg_ctl")
        assert pg_ctl is not None
        self._run([pg_ctl, "stop", "-w", "-m", "fast", "-D", str(self.data)])

    def close(self) -> None:
        if self.folder.exists():
            with contextlib.suppress(RuntimeError):
                self.stop()
            shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = next(self._names)
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)
