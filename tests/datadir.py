"""Looks into a gateway's data folder from outside, to check what a request left behind."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class DataState:
    tmp_files: list[str]
    blob_files: set[str]
    file_blobs: set[str]  # blobs the catalog says live in files
    inline_blobs: set[str]
    refs: dict[str, int]  # refcount column
    references: Counter[str]  # references actually found in manifests

    @property
    def orphan_files(self) -> set[str]:
        return self.blob_files - self.file_blobs

    @property
    def missing_files(self) -> set[str]:
        return self.file_blobs - self.blob_files

    def assert_clean(self) -> None:
        """No stray tmp file, no orphan or missing blob file, every count right."""
        assert self.tmp_files == []
        assert self.orphan_files == set()
        assert self.missing_files == set()
        assert self.refs == dict(self.references)


class CatalogSQL:
    """A connection to a stopped gateway's catalog, whichever it is: statements are written
    with `?` placeholders (SQLite's), and keys are bytes on both (BLOB, bytea)."""

    def __init__(self, conn: Any, postgresql: bool) -> None:
        self.conn = conn
        self.postgresql = postgresql

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        if self.postgresql:
            sql = sql.replace("?", "%s")
        return self.conn.execute(sql, params)


@contextlib.contextmanager
def catalog_sql(data: Path, catalog: str | None = None) -> Iterator[CatalogSQL]:
    """The catalog of the folder `data`: its SQLite file (None) or the PostgreSQL database
    `catalog` names; what the statements changed is committed at the end."""
    if catalog is None:
        conn: Any = sqlite3.connect(data / "catalog.sqlite3")
    else:
        import psycopg

        conn = psycopg.connect(catalog)
    try:
        yield CatalogSQL(conn, catalog is not None)
        conn.commit()
    finally:
        conn.close()


def inspect(data: Path, catalog: str | None = None) -> DataState:
    """The folder's state, its catalog read from the SQLite file in it or from the PostgreSQL
    database `catalog` names (the tables and columns read here are the same in both)."""
    if catalog is None:
        conn = sqlite3.connect(f"file:{data / 'catalog.sqlite3'}?mode=ro", uri=True)
    else:
        import psycopg

        conn = psycopg.connect(catalog, autocommit=True)
    try:
        file_blobs, inline_blobs, refs = set(), set(), {}
        for blob_id, count, inline in conn.execute("SELECT id, refs, data IS NOT NULL FROM blobs"):
            (inline_blobs if inline else file_blobs).add(blob_id)
            refs[blob_id] = count
        references: Counter[str] = Counter()
        manifests = (
            "SELECT manifest FROM objects UNION ALL SELECT manifest FROM versions "
            "UNION ALL SELECT manifest FROM parts"
        )
        for (manifest,) in conn.execute(manifests):
            references.update(extent[0] for extent in json.loads(manifest))
    finally:
        conn.close()
    blob_files = {p.name for p in (data / "blobs").rglob("*") if p.is_file()}
    tmp_files = sorted(p.name for p in (data / "tmp").iterdir())
    return DataState(tmp_files, blob_files, file_blobs, inline_blobs, refs, references)
