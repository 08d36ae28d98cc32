"""Storage: a catalog over immutable, reference-counted blobs. Knows nothing of HTTP.

`open_store` is where a backend is chosen: the catalog (SQLite in the data folder, or a
PostgreSQL database shared by several nodes), and blob files under the data folder.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import crypto
from .api import BlobStore, Catalog
from .errors import StoreError
from .model import (
    Bucket,
    DeleteCondition,
    Extent,
    ListEntry,
    ListPage,
    ObjectAttrs,
    ObjectInfo,
    Part,
    StagedBlob,
    Upload,
    UploadsPage,
    WriteCondition,
)
from .reader import ObjectReader
from .sqlite import SqliteCatalog
from .sqlite.export import SqliteExport
from .staging import BATCH
from .store import Store

if TYPE_CHECKING:
    from .postgres.load import PostgresImport


def has_catalog(root: Path) -> bool:
    """Does the data folder hold a catalog (has a gateway ever started there)?"""
    return (root / "catalog.sqlite3").exists()


def open_catalog(root: Path, pool: concurrent.futures.Executor, url: str | None = None) -> Catalog:
    """The catalog `url` names: None or "sqlite" for the SQLite file of the data folder (made
    if it has none), `postgresql://...` for a PostgreSQL database (its schema made or
    migrated)."""
    if url is None or url == "sqlite":
        return SqliteCatalog(root / "catalog.sqlite3", pool)
    if url.startswith(("postgresql://", "postgres://")):
        # Imported here: a gateway on SQLite never loads the PostgreSQL driver.
        from .postgres import PostgresCatalog

        return PostgresCatalog(url, pool)
    raise StoreError(
        f"unknown catalog {url.split('://')[0]!r}: use sqlite or postgresql://user@host/db"
    )


def open_export(root: Path) -> SqliteExport:
    """The data folder's SQLite catalog, read for `s3gw migrate`."""
    return SqliteExport(root / "catalog.sqlite3")


async def open_import(url: str) -> PostgresImport:
    """The empty PostgreSQL catalog `s3gw migrate` fills."""
    from .postgres.load import PostgresImport

    return await PostgresImport.connect(url)


def open_store(
    root: Path,
    *,
    inline_max: int = 64 * 1024,
    io_threads: int = 16,
    shared: bool = False,
    catalog_url: str | None = None,
    blob_lease: float = 300.0,
    keys: crypto.Keyring | None = None,
    blobs: Callable[[concurrent.futures.Executor], BlobStore] | None = None,
) -> Store:
    """The store of a data folder (see Store for `shared` and `blob_lease`), over the catalog
    `catalog_url` names (see open_catalog), its blobs in the data folder or in what `blobs`
    makes (gateway/tiers/: the composition root above the store picks it)."""
    return Store(
        root,
        lambda pool: open_catalog(root, pool, catalog_url),
        inline_max=inline_max,
        io_threads=io_threads,
        shared=shared,
        blob_lease=blob_lease,
        keys=keys,
        blobs=blobs,
    )


__all__ = [
    "BATCH",
    "Bucket",
    "DeleteCondition",
    "Extent",
    "ListEntry",
    "ListPage",
    "ObjectAttrs",
    "ObjectInfo",
    "ObjectReader",
    "Part",
    "StagedBlob",
    "Store",
    "StoreError",
    "Upload",
    "UploadsPage",
    "WriteCondition",
    "has_catalog",
    "open_catalog",
    "open_store",
]
