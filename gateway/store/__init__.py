"""Storage: a SQLite catalog over immutable, reference-counted blobs. Knows nothing of HTTP."""

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
from .store import ObjectReader, Store

__all__ = [
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
]
