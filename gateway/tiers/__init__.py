"""Blob tiers other than the data folder: the composition root's choice of BlobStore.

The store (gateway/store/) speaks no HTTP; the S3 tier does, so it lives here, beside it, and
is handed to the store as a factory (open_store's `blobs`). None: blob files in the data
folder, the default.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

from ..config import Settings, StartError, setting_name
from ..store.api import BlobStore
from .client import Target

# In the data folder, written by `s3gw migrate --blobs-to` (migrate.py) once every blob is on
# the tier it names: FOLDER, or the s3:// URL of --blobs.
MARKER = "blobs.moved"
FOLDER = "folder"


def check_moved(settings: Settings) -> None:
    """StartError if `s3gw migrate --blobs-to` moved the blobs to a tier other than --blobs':
    a gateway there would serve the old copies and write where no later start looks."""
    try:
        moved = (settings.data / MARKER).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing moved; a --data that is no folder is said by the folder's own check
    except OSError as exc:
        raise StartError(f"{settings.data / MARKER}: cannot read it: {exc.strerror}") from None
    where = settings.blobs or FOLDER
    if moved != where:
        wanted = "unset" if moved == FOLDER else moved
        raise StartError(
            f"the blobs of {settings.data} were moved to {moved} by s3gw migrate ({MARKER}): "
            f"start with {setting_name('blobs')} {wanted}, not {where}"
        )


def target(settings: Settings) -> Target | None:
    """Where --blobs puts blobs (None: the data folder)."""
    if settings.blobs is None:
        return None
    bucket, _, prefix = settings.blobs.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    return Target(
        endpoint=settings.blobs_endpoint or f"https://s3.{settings.blobs_region}.amazonaws.com",
        bucket=bucket,
        prefix=f"{prefix}/" if prefix else "",
        region=settings.blobs_region,
        access_key=settings.blobs_access_key or "",
        secret_key=settings.blobs_secret_key or "",
        path_style=settings.blobs_addressing == "path",
        ca_file=str(settings.blobs_ca) if settings.blobs_ca else None,
    )


def blob_store(
    settings: Settings, *, check: bool = True
) -> Callable[[concurrent.futures.Executor], BlobStore] | None:
    """The BlobStore factory open_store takes for these settings (None: the data folder's);
    StartError if the folder's blobs were moved elsewhere (unless not `check`)."""
    if check:
        check_moved(settings)
    where = target(settings)
    if where is None:
        return None
    from .s3 import S3Blobs

    return lambda pool: S3Blobs(where)
