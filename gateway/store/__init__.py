"""Storage: a catalog over immutable, reference-counted blobs. Knows nothing of HTTP.

`open_store` is where a backend is chosen: the SQLite catalog in the data folder, and blob
files under it.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from .api import Catalog
from .errors import StoreError
from .model import (
    Bucket,
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
from .staging import BATCH
from .store import Store


def has_catalog(root: Path) -> bool:
    """Does the data folder hold a catalog (has a gateway ever started there)?"""
    return (root / "catalog.sqlite3").exists()


def open_catalog(root: Path, pool: concurrent.futures.Executor) -> Catalog:
    """The catalog of a data folder (made if it has none)."""
    return SqliteCatalog(root / "catalog.sqlite3", pool)


def open_store(
    root: Path, *, inline_max: int = 64 * 1024, io_threads: int = 16, shared: bool = False
) -> Store:
    """The store of a data folder (see Store for `shared`)."""
    return Store(
        root,
        lambda pool: open_catalog(root, pool),
        inline_max=inline_max,
        io_threads=io_threads,
        shared=shared,
    )


__all__ = [
    "BATCH",
    "Bucket",
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
