"""The benchmarks' PostgreSQL databases: on a server a URL names, or on the tests' server
(tests/postgres.py) started for the run."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

from tests.postgres import PostgresServer, find_bin, unavailable_reason

# --- the benchmarks' databases ------------------------------------------------------------------

ENV_URL = "S3GW_BENCH_CATALOG"
# The catalog's tables counted at the end of a configuration's run: proof that its workloads
# stored what they said (objects, versions, blobs kept in files or inline).
COUNTED = ("buckets", "objects", "versions", "blobs")


class BenchDatabases:
    """Fresh databases for a benchmark's PostgreSQL configurations: on the server `url` names
    (`--catalog-url`, S3GW_BENCH_CATALOG; made with CREATE DATABASE and dropped at the end), or
    else on a server of the run's own, started on first use with fsync on, as production runs.
    """

    def __init__(self, url: str | None = None) -> None:
        self.url = url
        self.server: PostgresServer | None = None
        self.made: list[str] = []
        self.rows: dict[str, dict[str, int]] = {}
        self.problem: str | None = None
        self.description = "none"

    def unavailable(self) -> str | None:
        """Why no database can be had here (None: one can)."""
        return self.problem or (None if self.url else unavailable_reason())

    def database(self) -> str:
        """A new, empty database's URL; RuntimeError (one line) if none can be had."""
        import psycopg
        from psycopg import conninfo

        try:
            if self.url is None:
                if self.server is None:
                    self.server = PostgresServer(durable=True).start()
                    self.description = f"a server of the run's own ({_version()}), fsync on"
                return self.server.database()
            name = f"s3gw_bench_{os.getpid()}_{len(self.made)}"
            with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            self.made.append(name)
            self.description = "the server --catalog-url names"
            return conninfo.make_conninfo(self.url, dbname=name)
        except (RuntimeError, OSError, psycopg.Error) as e:
            self.problem = " ".join(str(e).split())[:300]
            raise RuntimeError(self.problem) from e

    def count_rows(self, url: str) -> dict[str, int]:
        import psycopg

        counts = {}
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            for table in COUNTED:
                row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                counts[table] = int(row[0]) if row else -1
        return counts

    def analyze(self, url: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            conn.execute("ANALYZE")

    def cpu_seconds(self) -> float | None:
        """CPU the server of our own has used so far (None for a server elsewhere): its
        processes' and, through the postmaster's cutime, its exited backends'."""
        if self.server is None:
            return None
        try:
            postmaster = int((self.server.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return tree_cpu_seconds(postmaster)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.url is not None and self.made:
            import psycopg

            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn,
            ):
                for name in self.made:
                    conn.execute(f"DROP DATABASE IF EXISTS {name}")
            self.made = []


def _version() -> str:
    postgres = find_bin("postgres")
    if postgres is None:
        return "PostgreSQL"
    done = subprocess.run([postgres, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or postgres


def tree_cpu_seconds(root: int) -> float:
    """utime + stime of `root` and its descendants, and of the children it has reaped."""
    ticks, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
        if pid == root:  # the backends that have exited: reaped by the postmaster
            ticks += int(fields[13]) + int(fields[14])
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError):
                todo += [int(p) for p in (task / "children").read_text().split()]
    return ticks / os.sysconf("SC_CLK_TCK")
