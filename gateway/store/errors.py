"""Errors the store raises. Each carries the S3 code that names the same condition; the
protocol layer turns them into S3 errors (the store knows S3's concepts, not its wire format)."""

from __future__ import annotations


class StoreError(Exception):
    code = "InternalError"

    def __init__(self, message: str = "", **fields: object) -> None:
        super().__init__(message or self.code)
        self.message = message
        self.fields = fields


class NoSuchBucket(StoreError):
    code = "NoSuchBucket"


class NoSuchKey(StoreError):
    code = "NoSuchKey"


class BucketNotEmpty(StoreError):
    code = "BucketNotEmpty"


# AWS's message for a bucket that has had versioning (its older versions and delete markers
# count): LocalStack's recording test_delete_versioned_bucket_with_objects, Feb 2026.
NOT_EMPTY_VERSIONED = (
    "The bucket you tried to delete is not empty. You must delete all versions in the bucket."
)


class BucketAlreadyExists(StoreError):
    code = "BucketAlreadyExists"


class BucketAlreadyOwnedByYou(StoreError):
    code = "BucketAlreadyOwnedByYou"


class SourceChanged(StoreError):
    """The object an operation read from was replaced or deleted before it committed.
    Callers retry; if it keeps happening the client is asked to retry."""

    code = "SlowDown"


class NoSuchUpload(StoreError):
    code = "NoSuchUpload"


class InvalidPart(StoreError):
    code = "InvalidPart"


class EntityTooSmall(StoreError):
    code = "EntityTooSmall"


class EntityTooLarge(StoreError):
    code = "EntityTooLarge"


class PreconditionFailed(StoreError):
    code = "PreconditionFailed"


class StorageUnavailable(StoreError):
    """The storage cannot take writes now (full, or read-only): the storage's condition, not
    a bug. Clients retry 503 with backoff; the request changed nothing."""

    code = "ServiceUnavailable"


FULL = "The gateway's storage is full; writes fail until space is freed. Reads still work."
READ_ONLY = "The gateway's data folder is read-only; writes fail until it is writable again."


class CatalogUnavailable(StoreError):
    """The catalog's database cannot be reached (down, refusing connections, or every
    connection busy for too long). The request changed nothing; clients retry 503, and the
    node recovers by itself once the database answers again."""

    code = "ServiceUnavailable"


class CommitOutcomeUnknown(CatalogUnavailable):
    """The connection was lost while the database was committing: the write may or may not
    have been made. Blobs staged for it must not be freed on this error (a committed row may
    reference them); only a later check of the catalog can tell."""


class IntentLost(StoreError):
    """A staged blob's intent lapsed and was reclaimed before the commit that would have
    referenced it (its writer stalled for longer than the lease, docs/scaling.md): nothing
    was committed, and its file is gone or going. Clients retry 503."""

    code = "ServiceUnavailable"


INTENT_LOST = "The upload took longer than the gateway's blob lease; retry it."

CATALOG_DOWN = "The gateway cannot reach its catalog database; requests fail until it is back."
