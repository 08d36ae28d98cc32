"""`s3gw migrate`: move a data folder's SQLite catalog into a PostgreSQL database. The SQL of
each side is its adapter's (sqlite/export.py, postgres/load.py); this is the procedure.

Blob files stay where they are: both catalogs name them by the same ids, and rows.py stores
the same text in both, so a catalog moves table by table, row for row. The tables are taken
from the SQLite file itself (every table in it, whatever the schema version adds), each copied
into the PostgreSQL table of the same name and columns; the only conversions are the ones the
column types ask for (SQLite's 0/1 flags become booleans, BLOB keys bytea).

One PostgreSQL transaction holds the whole copy and its checks: a run that fails at any point
(a lost connection, a check that disagrees, ^C) leaves the target as empty as it found it, and
running the same command again is the way to resume. A resumable copy in several transactions
would leave a half-filled catalog that a gateway could be started on, and the refusal of a
target that already holds data (which keeps a catalog from being merged into another) would
have to tell a half-done run of ours from someone's data.

Checks before the commit, inside that transaction: the number of rows of every table and the
blobs' total reference count; then a random sample of objects, versions, uploads and buckets
read through both adapters' own readers (the gateway's code paths, not the copy's SQL) must
give equal values, inline bytes included.

The folder is held exclusively the whole time (as fsck does): a gateway serving it could write
rows after they were copied. Once committed, a marker file (sqlite/export.py) names the
catalog's new home, and the SQLite catalog refuses to open while it is there: a gateway
started on the old catalog by mistake would serve stale data, and its start-up sweep would
delete every blob written since through PostgreSQL. The old file is kept, for going back
before anything was written through PostgreSQL (delete the marker).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import open_export, open_import
from .api import CatalogReader
from .blobs import FolderLock
from .errors import StoreError

if TYPE_CHECKING:
    from . import SqliteExport

BATCH = 1000
SAMPLE = 100


class MigrateError(StoreError):
    """Why the migration did not run or did not commit: one line for the operator."""


@dataclasses.dataclass
class Summary:
    source: Path
    target: str
    rows: dict[str, int]
    verified: dict[str, int]
    seconds: float

    def render(self) -> str:
        lines = [f"migrated {self.source} into {self.target} in {self.seconds:.1f} s"]
        width = max((len(t) for t in self.rows), default=0)
        lines += [f"  {table:<{width}}  {count:>10} rows" for table, count in self.rows.items()]
        checked = ", ".join(f"{n} {what}" for what, n in self.verified.items())
        lines.append(f"verified: row counts of {len(self.rows)} tables; read alike: {checked}")
        lines.append(
            f"start every gateway on this folder with --catalog {self.target} (S3GW_CATALOG); "
            "catalog.sqlite3 is kept, and refused while catalog.moved is there"
        )
        return "\n".join(lines)


def migrate(
    root: Path,
    url: str,
    *,
    batch: int = BATCH,
    sample: int = SAMPLE,
    progress: Callable[[str], None] = lambda line: None,
) -> Summary:
    """Copy the catalog of the data folder `root` into the empty PostgreSQL database `url`,
    check it, commit it, and mark the folder as moved. Raises StoreError (MigrateError), or
    FolderInUse while a gateway serves the folder."""
    if not root.is_dir():
        raise MigrateError(f"{root} is not a folder")
    if not (root / "catalog.sqlite3").exists():
        raise MigrateError(f"{root} holds no catalog.sqlite3: nothing to migrate")
    lock = FolderLock(root)
    try:
        lock.exclusive(str(root), wait=0)
        started = time.monotonic()
        source = open_export(root)
        try:
            where, rows, verified = asyncio.run(_migrate(source, url, batch, sample, progress))
            # Once the commit is done: a failed run leaves the folder as it was.
            source.mark_moved(where)
        finally:
            source.close()
        return Summary(source.path, where, rows, verified, time.monotonic() - started)
    finally:
        lock.close()


async def _migrate(
    source: SqliteExport,
    url: str,
    batch: int,
    sample: int,
    progress: Callable[[str], None],
) -> tuple[str, dict[str, int], dict[str, int]]:
    target = await open_import(url)
    where = target.where
    try:
        async with target.transaction():
            columns = await target.columns()
            holding = await target.tables_with_rows()
            if holding:
                # Copying into it would merge two catalogs (and two sets of reference
                # counts), which nothing can undo.
                raise MigrateError(
                    f"{where} already holds a catalog (rows in {', '.join(holding)}): "
                    "migrate only into an empty database"
                )
            rows: dict[str, int] = {}
            for table in source.tables():
                names = source.columns(table)
                kinds = columns.get(table)
                if kinds is None:
                    raise MigrateError(f"{where} has no table {table!r}: a newer SQLite schema?")
                missing = [n for n in names if n not in kinds]
                if missing:
                    raise MigrateError(f"{where}: table {table} has no column {', '.join(missing)}")
                batches = source.rows(table, names, batch)
                rows[table] = await target.copy(table, names, kinds, batches)
                progress(f"{table}: {rows[table]} rows")
            # The outbox's numbers are its records' sequencers: they go on after the last one
            # SQLite gave, delivered and deleted ones included (store/outbox.py).
            await target.continue_sequence("outbox", "seq", source.sequence("outbox"))
            for table, copied in rows.items():
                have, landed = source.count(table), await target.count(table)
                if not have == copied == landed:
                    raise MigrateError(
                        f"table {table}: {have} rows in SQLite, {copied} copied, "
                        f"{landed} in PostgreSQL"
                    )
            if source.total_refs() != await target.total_refs():
                raise MigrateError(
                    f"blob references: {source.total_refs()} in SQLite, "
                    f"{await target.total_refs()} in PostgreSQL"
                )
            verified = await _compare(source, target.reader, sample)
    except StoreError as exc:
        raise MigrateError(f"{exc} (nothing was committed; the target is as it was)") from exc
    finally:
        await target.close()
    return where, rows, verified


async def _compare(source: SqliteExport, new: CatalogReader, sample: int) -> dict[str, int]:
    """Read a random sample through both adapters' readers; any difference is an error."""
    old = source.reader
    checked = {"buckets": 0, "objects": 0, "inline bodies": 0, "versions": 0, "uploads": 0}

    def differ(what: str, a: object, b: object) -> None:
        if a != b:
            raise MigrateError(f"{what} reads differently: SQLite {a!r}, PostgreSQL {b!r}")

    buckets = await old.list_buckets(None)
    differ("the bucket list", buckets, await new.list_buckets(None))
    checked["buckets"] = len(buckets)
    for bucket, key in source.sample_objects(sample):
        name = f"object {bucket}/{key.decode(errors='replace')}"
        obj = await old.get_object(bucket, key.decode())
        differ(name, obj, await new.get_object(bucket, key.decode()))
        checked["objects"] += 1
        if obj is not None:
            blobs = [e.blob for e in obj.extents]
            inline = await old.read_inline(blobs)
            differ(f"{name}'s inline bytes", inline, await new.read_inline(blobs))
            checked["inline bodies"] += len(inline)
    for bucket, key in source.sample_version_keys(sample):
        name = f"the versions of {bucket}/{key.decode(errors='replace')}"
        end = key + b"\0"  # this key's rows only
        entries = await old.scan_versions(bucket, (key,), True, end, 1000)
        differ(name, entries, await new.scan_versions(bucket, (key,), True, end, 1000))
        for _, entry in entries:
            version = await old.get_version(bucket, entry.key, entry.version_id)
            differ(name, version, await new.get_version(bucket, entry.key, entry.version_id))
            checked["versions"] += 1
    for upload_id in source.sample_uploads(sample):
        name = f"upload {upload_id}"
        differ(name, await old.get_upload(upload_id), await new.get_upload(upload_id))
        parts = await old.list_parts(upload_id, 0, 10000)
        differ(f"{name}'s parts", parts, await new.list_parts(upload_id, 0, 10000))
        checked["uploads"] += 1
    return checked
