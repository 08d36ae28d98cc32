"""Upgrades that cannot lose data: every fixture of tests/fixtures/upgrade/ (a data folder, and
a SQL dump of its catalog for PostgreSQL, written by the gateway of one schema version: see
tests/upgrade/make_fixture.py) is opened by today's gateway on its catalog, which migrates it.
Everything the old gateway answered about its data is answered alike (bodies byte-exact, with
their metadata, tags, ACLs, versions, delete markers, locks, encryption, bucket settings, IAM
identities and policies; old keys still sign), the upload it left in progress completes, and
`s3gw fsck --deep` finds nothing; then it writes, restarts, and answers alike again.

Also: a catalog of a newer schema is refused in one line, an old node is refused by a catalog a
newer one migrated, and a migration that fails half-way leaves the old schema whole and says so
in one line.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import psycopg
import pytest

from gateway.store import outbox
from gateway.store.postgres.schema import SCHEMA_VERSION as POSTGRES_SCHEMA
from gateway.store.sqlite.schema import SCHEMA_VERSION as SQLITE_SCHEMA
from tests.conftest import _catalogs
from tests.postgres import PostgresServer, find_bin
from tests.server import GatewayProcess, s3gw
from tests.upgrade import dataset
from tests.upgrade.make_fixture import COMMITS, FIXTURES, SETTINGS, clients

# Every fixture, on its own kind of catalog (S3GW_TEST_CATALOGS may leave one kind out).
ALL_MANIFESTS = sorted(
    FIXTURES.glob("*.json"), key=lambda p: (p.stem.split("-v")[0], int(p.stem.split("-v")[1]))
)
MANIFESTS = [p for p in ALL_MANIFESTS if p.stem.split("-v")[0] in _catalogs()]
# What the test's own writes change: these answers differ after them, by design.
CHANGED_BY_WRITES = {
    ("list_buckets", None),
    ("list_objects_v2", dataset.PLAIN),
    ("list_object_versions", dataset.PLAIN),
    ("list_multipart_uploads", dataset.PLAIN),
    ("list_parts", dataset.PLAIN),
}
NEW = "upgrade-new"
LAST_PART = b"the last part, written by today's gateway"


def _manifest(path: Path) -> dataset.Manifest:
    return dataset.Manifest.loads(path.read_text())


def test_every_schema_version_has_its_fixture() -> None:
    # The next schema change adds its fixture (make_fixture.py) along with its COMMITS line.
    have = {p.stem for p in ALL_MANIFESTS}
    sqlite = {f"sqlite-v{n}" for n in range(1, SQLITE_SCHEMA + 1)}
    postgres = {f"postgresql-v{n}" for n in range(2, POSTGRES_SCHEMA + 1)}
    assert sqlite | postgres <= have, sorted(sqlite | postgres - have)
    assert set(COMMITS["sqlite"]) == set(range(1, SQLITE_SCHEMA + 1))
    assert set(COMMITS["postgresql"]) == set(range(2, POSTGRES_SCHEMA + 1))


def _restore(postgres: PostgresServer, dump: Path) -> str:
    url = postgres.database()
    psql = find_bin("psql")
    assert psql is not None
    subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", str(dump)],
        check=True,
        capture_output=True,
    )
    return url


def _open_fixture(
    manifest: Path, tmp: Path, request: pytest.FixtureRequest
) -> tuple[dataset.Manifest, Path, str | None]:
    """The fixture's data folder under `tmp`, and its catalog: None (the SQLite file in the
    folder), or a database of the test's PostgreSQL the dump was restored into."""
    fixture = _manifest(manifest)
    with tarfile.open(manifest.with_suffix("").with_suffix(".tar.gz")) as tar:
        tar.extractall(tmp, filter="data")
    if fixture.catalog == "sqlite":
        return fixture, tmp / "data", None
    postgres: PostgresServer = request.getfixturevalue("postgres")
    return fixture, tmp / "data", _restore(postgres, tmp / "catalog.sql")


def _gateway(data: Path, catalog: str | None) -> GatewayProcess:
    # The folder's own keys (its credentials.json), not the harness's: old keys must sign.
    env = {"S3GW_ACCESS_KEY": "", "S3GW_SECRET_KEY": "", **SETTINGS}
    return GatewayProcess(data, env, catalog=catalog)


def _schema(data: Path, catalog: str | None) -> int:
    if catalog is None:
        with sqlite3.connect(data / "catalog.sqlite3") as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
    with psycopg.connect(catalog) as conn:
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        assert row is not None
        return int(row[0])


def _fsck_clean(data: Path, catalog: str | None) -> None:
    done = s3gw("fsck", "--deep", data=data, catalog=catalog)
    assert done.returncode == 0, done.stdout + done.stderr


def _unchanged(check: dataset.Check) -> bool:
    return (check.call, check.args.get("Bucket")) not in CHANGED_BY_WRITES


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_an_old_data_folder_reads_back_whole_upgrades_and_keeps_working(
    manifest: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    fixture, data, catalog = _open_fixture(manifest, tmp_path, request)
    old_schema = _schema(data, catalog)
    assert old_schema == fixture.schema
    server = _gateway(data, catalog).start()
    try:
        assert _schema(data, catalog) == (SQLITE_SCHEMA if catalog is None else POSTGRES_SCHEMA)
        made = clients(server.url, fixture.credentials)
        assert dataset.verify(made, fixture.checks) == []
        s3 = made["s3"]
        # The upload the old gateway left in progress completes, its old part byte-exact.
        pending = fixture.pending_upload
        assert pending is not None
        where = {"Bucket": pending["bucket"], "Key": pending["key"]}
        upload = pending["upload_id"]
        old_parts = s3.list_parts(**where, UploadId=upload)["Parts"]
        assert [p["PartNumber"] for p in old_parts] == [1]
        last = s3.upload_part(**where, UploadId=upload, PartNumber=2, Body=LAST_PART)
        parts = [
            {"PartNumber": 1, "ETag": old_parts[0]["ETag"]},
            {"PartNumber": 2, "ETag": last["ETag"]},
        ]
        s3.complete_multipart_upload(**where, UploadId=upload, MultipartUpload={"Parts": parts})
        completed = s3.get_object(**where)
        assert completed["Body"].read() == dataset.body(dataset.PART_SIZE, 12) + LAST_PART
        assert completed["Metadata"] == {"p": "1"}
    finally:
        server.stop()
    _fsck_clean(data, catalog)

    # Today's writes beside the old data: a new object, a copy sharing an old blob, a new
    # version over an old one; then a restart.
    server = _gateway(data, catalog).start()
    try:
        s3 = clients(server.url, fixture.credentials)["s3"]
        s3.create_bucket(Bucket=NEW)
        s3.put_object(Bucket=NEW, Key="new.bin", Body=dataset.body(dataset.BLOB_SIZE, 99))
        s3.copy_object(
            Bucket=NEW, Key="copy.bin", CopySource={"Bucket": dataset.PLAIN, "Key": "blob.bin"}
        )
        s3.put_object(Bucket=dataset.PLAIN, Key="copy-of-blob.bin", Body=b"replaced")
    finally:
        server.stop()
    server = _gateway(data, catalog).start()
    try:
        made = clients(server.url, fixture.credentials)
        s3 = made["s3"]
        kept = [
            c for c in fixture.checks if _unchanged(c) and c.args.get("Key") != "copy-of-blob.bin"
        ]
        assert dataset.verify(made, kept) == []
        assert s3.get_object(Bucket=NEW, Key="new.bin")["Body"].read() == dataset.body(
            dataset.BLOB_SIZE, 99
        )
        blob = dataset.body(dataset.BLOB_SIZE, 2)
        assert s3.get_object(Bucket=NEW, Key="copy.bin")["Body"].read() == blob
        assert s3.get_object(Bucket=dataset.PLAIN, Key="blob.bin")["Body"].read() == blob
        got = s3.get_object(Bucket=dataset.PLAIN, Key="copy-of-blob.bin")["Body"].read()
        assert got == b"replaced"
        assert s3.get_object(**where)["ContentLength"] == dataset.PART_SIZE + len(LAST_PART)
    finally:
        server.stop()
    _fsck_clean(data, catalog)


def _serve_fails(data: Path, catalog: str | None) -> str:
    """`s3gw serve` that must refuse to start: its error output, checked to be one line."""
    args = [sys.executable, "-m", "gateway", "serve", "--data", str(data)]
    args += ["--address", "127.0.0.1:0"]
    if catalog is not None:
        args += ["--catalog", catalog]
    env = _gateway(data, catalog).env
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("kind", _catalogs())
def test_a_catalog_of_a_newer_schema_is_refused_in_one_line(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    newest = SQLITE_SCHEMA if kind == "sqlite" else POSTGRES_SCHEMA
    _, data, catalog = _open_fixture(FIXTURES / f"{kind}-v{newest}.json", tmp_path, request)
    _gateway(data, catalog).start().stop()  # as it is: opened
    newer = newest + 1
    if catalog is None:
        with sqlite3.connect(data / "catalog.sqlite3") as conn:
            conn.execute(f"PRAGMA user_version={newer}")
    else:
        with psycopg.connect(catalog) as conn:
            conn.execute("UPDATE schema_version SET version = %s", (newer,))
    line = _serve_fails(data, catalog)
    assert f"schema {newer} is newer than this gateway's" in line
    assert _schema(data, catalog) == newer  # and left alone


def _columns(data: Path, catalog: str | None, table: str) -> set[str]:
    if catalog is None:
        with sqlite3.connect(data / "catalog.sqlite3") as conn:
            return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    with psycopg.connect(catalog) as conn:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,)
        )
        return {row[0] for row in rows}


@pytest.mark.parametrize("kind", _catalogs())
def test_a_migration_that_fails_half_way_leaves_the_old_schema_whole(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The oldest fixture, and something in its catalog that a late step of the migration runs
    # into after the earlier steps have run: a column of the name step 5 (SQLite) adds, a view
    # where step 5 (PostgreSQL) indexes a table of that name.
    oldest = 1 if kind == "sqlite" else 2
    fixture, data, catalog = _open_fixture(FIXTURES / f"{kind}-v{oldest}.json", tmp_path, request)
    if catalog is None:
        obstacle, undo = (
            "ALTER TABLE buckets ADD COLUMN settings TEXT",
            "ALTER TABLE buckets DROP COLUMN settings",
        )
        early = ("parts", "checksum")  # step 2's column
    else:
        obstacle, undo = (
            "CREATE VIEW blob_intents AS SELECT id AS blob_id FROM blobs",
            "DROP VIEW blob_intents",
        )
        early = ("buckets", "object_lock")  # step 3's column
    _execute(data, catalog, obstacle)
    before = {t: _columns(data, catalog, t) for t in ("buckets", "objects", "parts", "uploads")}
    assert early[1] not in before[early[0]]

    line = _serve_fails(data, catalog)
    assert f"migrating the schema from {oldest} to " in line, line
    assert f"the catalog is still at schema {oldest} and unchanged" in line, line
    assert _schema(data, catalog) == oldest
    after = {t: _columns(data, catalog, t) for t in before}
    assert after == before  # the steps before the failing one were rolled back too

    # Once the obstacle is gone, the same catalog migrates and reads back whole.
    _execute(data, catalog, undo)
    server = _gateway(data, catalog).start()
    try:
        assert dataset.verify(clients(server.url, fixture.credentials), fixture.checks) == []
    finally:
        server.stop()


def _execute(data: Path, catalog: str | None, statement: str) -> None:
    if catalog is None:
        with sqlite3.connect(data / "catalog.sqlite3") as conn:
            conn.execute(statement)
    else:
        with psycopg.connect(catalog) as conn:
            conn.execute(statement)


def _old_source(commit: str, tmp: Path) -> Path | None:
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run(
        ["git", "-C", str(root), "archive", commit], capture_output=True, check=False
    )
    if found.returncode != 0:
        return None
    source = tmp / "old-source"
    source.mkdir()
    subprocess.run(["tar", "-x", "-C", str(source)], input=found.stdout, check=True)
    return source


def test_an_old_node_is_refused_by_a_catalog_a_newer_node_migrated(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A cluster upgraded node by node: the first new node migrates the shared catalog, and a
    # node still of the old version must not start on it (it would write rows without the
    # new schema's columns and tables). The gateway of PostgreSQL's schema 6, run from its
    # commit, on the catalog of its own fixture once today's gateway has migrated it.
    if "postgresql" not in _catalogs():
        pytest.skip("S3GW_TEST_CATALOGS leaves PostgreSQL out")
    commit = COMMITS["postgresql"][POSTGRES_SCHEMA - 1]
    source = _old_source(commit, tmp_path)
    if source is None:
        pytest.skip(f"no git history here to run {commit} from")
    fixture_path = FIXTURES / f"postgresql-v{POSTGRES_SCHEMA - 1}.json"
    _, data, catalog = _open_fixture(fixture_path, tmp_path, request)
    assert catalog is not None
    _gateway(data, catalog).start().stop()
    assert _schema(data, catalog) == POSTGRES_SCHEMA
    # The old node's catalog, opened as its start opens it (PostgresCatalog, which first of all
    # runs its schema.initialise); its own store package, so that no dependency it had and
    # this virtualenv lost (its XML parser's) is needed.
    opening = (
        "import concurrent.futures, sys\n"
        "from gateway.store.postgres import PostgresCatalog\n"
        "from gateway.store.errors import StoreError\n"
        "try:\n"
        "    PostgresCatalog(sys.argv[1], concurrent.futures.ThreadPoolExecutor(1))\n"
        "except StoreError as exc:\n"
        "    sys.exit(str(exc))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", opening, catalog],
        cwd=source,
        env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    wanted = f"schema {POSTGRES_SCHEMA} is newer than this gateway's ({POSTGRES_SCHEMA - 1})"
    assert wanted in done.stderr, done.stderr
    assert _schema(data, catalog) == POSTGRES_SCHEMA  # and left as the new node made it


# The last schema of each catalog before the outbox's partitions (schema 12 and 11).
_BEFORE_PARTITIONS = [p for p in MANIFESTS if p.stem in ("sqlite-v11", "postgresql-v10")]


@pytest.mark.parametrize("manifest", _BEFORE_PARTITIONS, ids=[p.stem for p in _BEFORE_PARTITIONS])
def test_waiting_events_keep_their_keys_partition(
    manifest: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Rows waiting in an outbox made before its partitions (a destination down at the
    upgrade) are each put in their key's partition by the migration, the one a new row of
    the key goes to: a key's events stay in one partition, in order."""
    _, data, catalog = _open_fixture(manifest, tmp_path, request)
    waiting = [("bucket-a", "k1"), ("bucket-a", "k2"), ("bucket-b", "k1"), ("bucket-a", "k1")]
    insert = "INSERT INTO outbox (bucket, key, event, version_id, time_ns, facts) VALUES "
    if catalog is None:
        with sqlite3.connect(data / "catalog.sqlite3") as conn:
            conn.executemany(
                insert + "(?, ?, 's3:ObjectCreated:Put', NULL, 1, '{}')",
                [(b, k.encode()) for b, k in waiting],
            )
    else:
        with psycopg.connect(catalog) as conn:
            conn.cursor().executemany(
                insert + "(%s, %s, 's3:ObjectCreated:Put', NULL, 1, '{}')",
                [(b, k.encode()) for b, k in waiting],
            )
    # The first start migrates; `s3gw fsck` opens the catalog as a start does.
    _fsck_clean(data, catalog)
    if catalog is None:
        with sqlite3.connect(data / "catalog.sqlite3") as conn:
            rows = conn.execute("SELECT bucket, key, part FROM outbox ORDER BY seq").fetchall()
    else:
        with psycopg.connect(catalog) as conn:
            rows = conn.execute("SELECT bucket, key, part FROM outbox ORDER BY seq").fetchall()
    assert [(b, bytes(k).decode()) for b, k, _ in rows] == waiting
    assert [p for _, _, p in rows] == [outbox.partition(b, k) for b, k in waiting]
    assert len({p for _, _, p in rows}) > 1  # not all left in one partition
