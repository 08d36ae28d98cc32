"""Make the upgrade fixture of one catalog schema version, with that version's own gateway.

    .venv/bin/python -m tests.upgrade.make_fixture sqlite 9
    .venv/bin/python -m tests.upgrade.make_fixture postgresql 8

The commit that introduced the version (COMMITS; a new schema version adds its line here) is
exported into a temporary folder, its gateway started on a fresh data folder (and, for
PostgreSQL, a fresh database of a server of our own), the data set of dataset.py written
through the S3 and IAM APIs and read back, and the gateway stopped with SIGTERM. Then:

    tests/fixtures/upgrade/<catalog>-v<N>.tar.gz   data/ (the folder: blobs, keys, credentials,
                                                   and the SQLite catalog), and catalog.sql for
                                                   PostgreSQL (pg_dump, plain, no owner)
    tests/fixtures/upgrade/<catalog>-v<N>.json     the manifest: the commit, what the old gateway
                                                   took, and what it answered (dataset.Check)

tests/integration/test_upgrade.py opens every fixture there with today's gateway. Old commits
run with this checkout's virtualenv: the dependencies have not changed since the first.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from tests.postgres import PostgresServer, find_bin
from tests.upgrade import dataset

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "upgrade"

# The commit that introduced each schema version (`git log -G'SCHEMA_VERSION = [0-9]' --
# gateway/`; SQLite's 4 came with the merge of Object Lock), but for SQLite's 1: its first
# commit had no multipart uploads, so the fixture is the last commit at schema 1 (6d1eec1,
# ea3a145's parent), which had them. PostgreSQL's schema 1 has none: no gateway could be
# started on PostgreSQL before schema 2 (1067d5d added --catalog).
COMMITS = {
    "sqlite": {
        1: "6d1eec1",
        2: "ea3a145",
        3: "4763a18",
        4: "0694e92",
        5: "01690c9",
        6: "0538bff",
        7: "c6099e1",
        8: "54c5449",
        9: "ecfc257",
        10: "d16f25c",
        11: "7544f36",
        12: "1d39e5a",
    },
    "postgresql": {
        2: "1067d5d",
        3: "0c21ef8",
        4: "01690c9",
        5: "0538bff",
        6: "c6099e1",
        7: "54c5449",
        8: "ecfc257",
        9: "d16f25c",
        10: "7544f36",
        11: "1d39e5a",
    },
}

# Reads an old version answered wrongly, left out of its fixture's checks (why, for each): the
# data they would cover is checked by other reads.
LEAVE_OUT = {
    # Versioning's first slice listed only the current objects, each as its null version
    # (ListObjectVersions came whole with the versions table's reads, later at schema 3); the
    # versions themselves are read one by one by their ids.
    "4763a18": {"list_object_versions"},
}

# What every gateway of the fixtures runs with, old and new: SSE-C over plain HTTP (the tests
# speak HTTP), and buckets with ACLs on, so that the ACLs written are kept.
SETTINGS = {"S3GW_SSE_C_OVER_HTTP": "allow", "S3GW_BUCKET_DEFAULTS": "legacy"}


def fixture_paths(catalog: str, schema: int) -> tuple[Path, Path]:
    stem = FIXTURES / f"{catalog}-v{schema}"
    return stem.with_suffix(".tar.gz"), stem.with_suffix(".json")


def _old_dependencies(source: Path) -> Path:
    """A folder for the commit's dependencies that this virtualenv no longer has (defusedxml,
    before its XML parser was our own; psycopg_pool, before the pool was ours): installed
    there, on the commit's PYTHONPATH only, so that this virtualenv stays as it is."""
    wanted = tomllib.loads((source / "pyproject.toml").read_text())["project"]["dependencies"]
    folder = Path(tempfile.gettempdir()) / "s3gw-fixture-deps"
    have = {
        (d.metadata["Name"] or "").lower().replace("_", "-")
        for d in importlib.metadata.distributions(path=[*sys.path, str(folder)])
    }
    missing = []
    for requirement in wanted:
        name = re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0]
        if name.lower().replace("_", "-") not in have:
            missing.append(requirement)
    if missing:
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(folder)]
        subprocess.run([*pip, *missing], check=True)
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _client(service: str, url: str, key: dict[str, str]) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        aws_access_key_id=key["access_key"],
        aws_secret_access_key=key["secret_key"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def clients(url: str, credentials: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The data set's clients on the gateway at `url`: "s3" and "iam" as the folder's root,
    "s3:<user>" as each IAM user the manifest holds a key of."""
    made = {
        "s3": _client("s3", url, credentials["root"]),
        "iam": _client("iam", url, credentials["root"]),
    }
    for name, key in credentials.items():
        if name != "root":
            made[f"s3:{name}"] = _client("s3", url, key)
    return made


def _wait(proc: subprocess.Popen[bytes], port: int, data: Path, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the old gateway exited ({proc.returncode}):\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                if (data / "credentials.json").exists():
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the old gateway did not start:\n{log.read_text()}")


def make(catalog: str, schema: int, commit: str) -> tuple[Path, Path]:
    with tempfile.TemporaryDirectory(prefix=f"s3gw-fixture-{catalog}-v{schema}-") as tmp:
        work = Path(tmp)
        source, data, log = work / "src", work / "data", work / "gateway.log"
        source.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
        postgres = PostgresServer().start() if catalog == "postgresql" else None
        try:
            url = postgres.database() if postgres else None
            manifest = _run(source, data, log, url, catalog, schema, commit)
            if postgres is not None and url is not None:
                dump = find_bin("pg_dump")
                assert dump is not None
                sql = subprocess.run(
                    [dump, "--no-owner", "--no-privileges", "--dbname", url],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                (work / "catalog.sql").write_text(sql)
        finally:
            if postgres is not None:
                postgres.close()
        tar_path, json_path = fixture_paths(catalog, schema)
        FIXTURES.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tar_path, "w:gz", compresslevel=9) as tar:
            tar.add(data, arcname="data")
            if catalog == "postgresql":
                tar.add(work / "catalog.sql", arcname="catalog.sql")
        json_path.write_text(manifest.dumps())
        return tar_path, json_path


def _run(
    source: Path, data: Path, log: Path, url: str | None, catalog: str, schema: int, commit: str
) -> dataset.Manifest:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("S3GW_")}
    path = f"{source}{os.pathsep}{_old_dependencies(source)}"
    env |= SETTINGS | {"PYTHONPATH": path, "S3GW_DRAIN_SECONDS": "0"}
    cmd = [sys.executable, "-m", "gateway", "serve", "--data", str(data)]
    cmd += ["--address", f"127.0.0.1:{port}"]
    if url is not None:
        cmd += ["--catalog", url]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=source, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait(proc, port, data, log)
        root = json.loads((data / "credentials.json").read_text())
        credentials = {"root": {"access_key": root["access_key"], "secret_key": root["secret_key"]}}
        made = clients(f"http://127.0.0.1:{port}", credentials)
        writer = dataset.Writer(made)
        writer.write()
        alice = getattr(writer, "alice", None)
        if alice is not None:
            credentials["alice"] = alice
            made = clients(f"http://127.0.0.1:{port}", credentials)
            writer.clients = made
        checks = writer.record(leave_out=LEAVE_OUT.get(commit, set()))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    if proc.returncode != 0:
        raise RuntimeError(f"the old gateway stopped with {proc.returncode}:\n{log.read_text()}")
    return dataset.Manifest(
        catalog=catalog,
        schema=schema,
        commit=commit,
        credentials=credentials,
        features=sorted(set(writer.features)),
        pending_upload=writer.pending,
        checks=checks,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("catalog", choices=sorted(COMMITS))
    parser.add_argument("schema", type=int)
    parser.add_argument("--commit", help="the commit to run (default: COMMITS' entry)")
    args = parser.parse_args()
    commit = args.commit or COMMITS[args.catalog].get(args.schema)
    if commit is None:
        parser.error(f"no commit known for {args.catalog} schema {args.schema}: give --commit")
    tar_path, json_path = make(args.catalog, args.schema, commit)
    manifest = dataset.Manifest.loads(json_path.read_text())
    print(f"{tar_path.relative_to(ROOT)}: {tar_path.stat().st_size // 1024} KiB")
    print(f"{json_path.relative_to(ROOT)}: {len(manifest.checks)} checks")
    print(f"features: {', '.join(manifest.features)}")


if __name__ == "__main__":
    main()
