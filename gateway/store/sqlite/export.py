"""The SQLite catalog read for `s3gw migrate` (store/migrate.py): its tables, their rows in
batches, counts and random samples, in one snapshot; and the marker that retires the file
once its rows live elsewhere."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import errors
from ..api import CatalogReader
from .queries import SqliteReader
from .schema import connect, initialise

# Written into the data folder once its catalog moved; names where (no password).
MOVED_MARKER = "catalog.moved"


def moved_to(root: Path) -> str | None:
    """Where `s3gw migrate` moved the folder's catalog (None: it did not)."""
    marker = root / MOVED_MARKER
    return marker.read_text().strip() if marker.exists() else None


class SqliteExport:
    """A data folder's catalog file, read in one snapshot (the folder must be held alone)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        moved = moved_to(path.parent)
        if moved is not None:
            raise errors.StoreError(f"{path.parent}'s catalog was already migrated, to {moved}")
        try:
            # An older catalog is brought to this gateway's schema first, as a start would.
            initialise(path)
            self.conn = connect(path)
            self.conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise errors.StoreError(f"cannot read {path}: {exc}") from exc
        self.reader: CatalogReader = SqliteReader(self.conn)

    def close(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()

    def mark_moved(self, where: str) -> None:
        (self.path.parent / MOVED_MARKER).write_text(where + "\n")

    def tables(self) -> list[str]:
        return [
            name
            for (name,) in self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]

    def columns(self, table: str) -> list[str]:
        return [row[1] for row in self.conn.execute(f'PRAGMA table_info("{table}")')]

    def rows(self, table: str, columns: list[str], batch: int) -> Iterator[list[Any]]:
        quoted = ", ".join(f'"{c}"' for c in columns)
        cursor = self.conn.execute(f'SELECT {quoted} FROM "{table}"')
        while rows := cursor.fetchmany(batch):
            yield rows

    def sequence(self, table: str) -> int:
        """The last number an AUTOINCREMENT table gave (0: none), rows deleted since
        included."""
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,))
        found = row.fetchone()
        return int(found[0]) if found else 0

    def count(self, table: str) -> int:
        return int(self.conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])

    def total_refs(self) -> int:
        return int(self.conn.execute("SELECT total(refs) FROM blobs").fetchone()[0])

    def sample_objects(self, n: int) -> list[tuple[str, bytes]]:
        return self.conn.execute(
            "SELECT bucket, key FROM objects ORDER BY random() LIMIT ?", (n,)
        ).fetchall()

    def sample_version_keys(self, n: int) -> list[tuple[str, bytes]]:
        return self.conn.execute(
            "SELECT DISTINCT bucket, key FROM versions ORDER BY random() LIMIT ?", (n,)
        ).fetchall()

    def sample_uploads(self, n: int) -> list[str]:
        rows = self.conn.execute("SELECT id FROM uploads ORDER BY random() LIMIT ?", (n,))
        return [upload_id for (upload_id,) in rows]
