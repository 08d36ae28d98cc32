"""A data folder and its catalog know each other: the first start gives both one id, and a
start (or fsck --repair) with another catalog that holds objects of its own is refused before
its sweep or reclaimer could call the folder's files orphans."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tests.integration.test_startup import gateway
from tests.server import GatewayProcess

BODY = os.urandom(256 * 1024)  # over --inline-max: a blob file


def _files(data: Path) -> list[Path]:
    return sorted(p for p in (data / "blobs").rglob("*") if p.is_file())


def _served(data: Path, catalog: str | None, key: str) -> None:
    """Start a gateway on `data`, store `key` (a blob file), stop it."""
    server = GatewayProcess(data, catalog=catalog).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="kept")
        s3.put_object(Bucket="kept", Key=key, Body=BODY)
    finally:
        server.stop()


def _args(data: Path, catalog: str | None) -> list[str]:
    return ["--data", str(data), *(["--catalog", catalog] if catalog else [])]


def _refused(done, *, says: str) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if " INFO " not in line]
    assert len(said) == 1 and says in said[0], done.stderr
    return said[0]


def _swap_sqlite(data: Path, catalog_of: Path, keep: Path) -> None:
    """Put the SQLite catalog of folder `catalog_of` into `data`, its own moved to `keep`."""
    keep.mkdir()
    for path in data.glob("catalog.sqlite3*"):
        path.rename(keep / path.name)
    for path in catalog_of.glob("catalog.sqlite3*"):
        path.rename(data / path.name)


def test_another_catalog_with_objects_is_refused_and_deletes_nothing(tmp_path, catalog, request):
    """Two folders, each served by its own catalog, each holding an object. Started with the
    other's catalog, a folder is refused in one line, and so is fsck --repair: nothing is
    deleted, although every file is unknown to that catalog. With its own catalog back, it
    serves its object."""
    first, second = tmp_path / "first", tmp_path / "second"
    other = None if catalog is None else request.getfixturevalue("postgres").database()
    _served(first, catalog, "mine")
    _served(second, other, "theirs")
    files = _files(first)
    assert files
    if catalog is None:
        _swap_sqlite(first, catalog_of=second, keep=tmp_path / "first-catalog")

    start = gateway("serve", *_args(first, other), "--address", "127.0.0.1:0")
    line = _refused(start, says="not this catalog's")
    assert str(first) in line and "nothing was changed" in line
    repair = gateway("fsck", *_args(first, other), "--repair")
    _refused(repair, says="nothing was repaired")
    assert _files(first) == files

    if catalog is None:
        _swap_sqlite(first, catalog_of=tmp_path / "first-catalog", keep=tmp_path / "other")
    server = GatewayProcess(first, catalog=catalog).start()
    try:
        assert server.client().get_object(Bucket="kept", Key="mine")["Body"].read() == BODY
    finally:
        server.stop()
    assert _files(first) == files


def _forget_ids(data: Path, catalog: str | None) -> None:
    """Make the pair look as it did before catalogs had ids."""
    (data / "catalog-id").unlink()
    if catalog is None:
        conn = sqlite3.connect(data / "catalog.sqlite3")
        with conn:
            conn.execute("DELETE FROM catalog_id")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(catalog, autocommit=True) as conn:
            conn.execute("DELETE FROM catalog_id")


def _catalog_id(data: Path, catalog: str | None) -> str:
    if catalog is None:
        conn = sqlite3.connect(data / "catalog.sqlite3")
        (found,) = conn.execute("SELECT id FROM catalog_id").fetchone()
        conn.close()
        return found
    import psycopg

    with psycopg.connect(catalog) as conn:
        row = conn.execute("SELECT id FROM catalog_id").fetchone()
        assert row is not None
        return row[0]


def test_a_pair_from_before_ids_is_paired_at_its_next_start(tmp_path, catalog):
    """A folder and catalog that served together before ids existed get one id each, the
    same, at the next start, which serves their object. Its two workers each check the pair,
    and change nothing."""
    data = tmp_path / "data"
    _served(data, catalog, "mine")
    paired = (data / "catalog-id").read_text().strip()
    assert paired and _catalog_id(data, catalog) == paired
    _forget_ids(data, catalog)

    server = GatewayProcess(data, {"S3GW_WORKERS": "2"}, catalog=catalog).start()
    try:
        s3 = server.client()
        for n in range(4):  # over both workers' connections
            assert s3.get_object(Bucket="kept", Key="mine")["Body"].read() == BODY, n
    finally:
        server.stop()
    again = (data / "catalog-id").read_text().strip()
    assert again and _catalog_id(data, catalog) == again
    assert list((data / "tmp").iterdir()) == []


def test_a_catalog_without_id_is_refused_by_a_folder_paired_with_another(tmp_path, catalog):
    """A catalog that holds objects but no id, over a folder whose id another catalog gave
    it, is another catalog (or one from before ids, which the operator can say by removing
    the folder's id file): refused, until then."""
    data = tmp_path / "data"
    _served(data, catalog, "mine")
    files = _files(data)
    ours = (data / "catalog-id").read_text()
    _forget_ids(data, catalog)
    (data / "catalog-id").write_text("0" * 32 + "\n")  # another catalog's

    start = gateway("serve", *_args(data, catalog), "--address", "127.0.0.1:0")
    _refused(start, says="remove the folder's catalog-id file")
    assert _files(data) == files

    (data / "catalog-id").unlink()
    server = GatewayProcess(data, catalog=catalog).start()
    try:
        assert server.client().get_object(Bucket="kept", Key="mine")["Body"].read() == BODY
    finally:
        server.stop()
    assert (data / "catalog-id").read_text() != ours  # a new pair, as before ids
    assert _catalog_id(data, catalog) == (data / "catalog-id").read_text().strip()
