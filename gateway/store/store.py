"""The Store service: what the protocol layer calls. Knows nothing of HTTP.

S3's storage rules live here, once, over the Catalog and BlobStore protocols (api.py):
conditional writes, references taken before they are dropped, Complete's checks, a copy's
source unchanged, bucket rules, the listing roll-up (listing.py), and blobs freed only after
the commit that released them. Which backend holds the catalog is the composition root's
choice (`open_store`); nothing here speaks SQL or knows the data folder's layout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable

from . import errors, listing, versions
from .api import BlobStore, Catalog, CatalogReader, Stray
from .buckets import Buckets
from .core import (
    Latest,
    lookup,
    require_bucket,
)
from .identities import Identities
from .model import (
    ListPage,
    ObjectInfo,
    VersionsPage,
)
from .objects import Objects
from .reader import ObjectReader
from .topics import Topics
from .uploads import Uploads

__all__ = ["Latest", "Store", "leftover_files", "paired"]

log = logging.getLogger(__name__)


class Store(Buckets, Objects, Uploads, Identities, Topics):
    """The Store: its buckets (buckets.py), objects and versions (objects.py) and multipart
    uploads (uploads.py) and IAM's rows (identities.py) over what they share (core.py); here,
    the start-up sweep and reads."""

    async def start(self) -> tuple[int, int]:
        """Sweep what a crash left, then let other processes of this gateway share the folder.
        Returns (tmp entries removed, orphan blob files removed)."""
        swept = await self.sweep()
        self.lock.shared()
        return swept

    async def sweep(self) -> tuple[int, int]:
        """Empty tmp/ and trash/, and remove blob files the catalog does not reference: what
        a crash left.

        Runs holding the folder exclusively, before requests are served (a blob being
        published is not yet in the catalog). One blob directory at a time: bounded memory.
        """
        await self.check_folder()
        tmp = await self.files.empty_leftovers()
        orphans = 0
        async for stale in leftover_files(self._read, self.files):
            log.info("start-up sweep: removing %d unreferenced blob files", len(stale))
            await self.files.remove(stale)
            orphans += len(stale)
        # Every intent is a dead writer's (the folder is ours alone), its files gone now.
        await self.catalog.write(lambda tx: tx.drop_intents(None))
        # Topics kept in files before the catalog had a table for them (topics.py).
        await self.import_topic_files()
        return tmp, orphans

    async def check_folder(self) -> None:
        """Refuse a data folder whose blob files another catalog references (`paired`);
        pair them if neither has met another. Every start asks, alone or joining others."""
        try:
            await paired(self.catalog, self.files, claim=True)
        except errors.StoreError as exc:
            raise errors.StoreError(f"{exc}; nothing was changed") from None

    def totals(self) -> tuple[int, int]:
        """(objects, bytes) stored; blocking, from any thread."""
        return self.catalog.totals()

    async def writable(self) -> bool:
        """Can the catalog and the blob store take writes? (readiness)"""
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(self.pool, self.catalog.writable):
            return False
        return await self.files.writable()

    async def head_object(
        self, bucket: str, key: str, version_id: str | None = None, latest: Latest = None
    ) -> ObjectInfo:
        """The key's latest version, or the version `version_id` ("null": the null version).
        NoSuchKey, NoSuchVersion, or versions.DeleteMarker when the latest version, or the
        version asked for, is a delete marker. `latest`: the latest version, read already
        (get_bucket_and_object)."""
        if latest is not None and version_id is None:
            return latest[0]
        return await lookup(self._read, bucket, key, version_id)

    async def open_object(
        self,
        bucket: str,
        key: str,
        version_id: str | None = None,
        check: Callable[[ObjectInfo], bytes | None] | None = None,
        latest: Latest = None,
    ) -> ObjectReader:
        """Look an object up and open what its bytes need, as one consistent snapshot.
        `check` judges the version before anything is read (an SSE-C request's key) and gives
        the customer key its data keys need. `latest`: the latest version, read already
        (get_bucket_and_object), used on the first attempt."""
        for _attempt in range(5):
            # The latest version and its inline bytes in one round trip when it is an object.
            found = latest if version_id is None else None
            if found is None and version_id is None:
                found = await self._read.get_object_inline(bucket, key)
            latest = None  # a version replaced since is looked up again
            obj, known = found or (await self.head_object(bucket, key, version_id), None)
            customer_key = check(obj) if check is not None else None
            reader = self.reader(obj, customer_key, known)
            try:
                await reader.open()
            except FileNotFoundError:
                # Replaced or deleted between the lookup and the open: look again.
                reader.close()
                continue
            return reader
        raise errors.StoreError("object kept changing while being opened")

    async def list_objects(
        self, bucket: str, prefix: str, delimiter: str, after: str, max_keys: int
    ) -> ListPage:
        """One page of a listing: keys > `after` that start with `prefix`, with keys that
        contain `delimiter` after the prefix rolled up into common prefixes."""

        async def page(reader: CatalogReader) -> ListPage:
            await require_bucket(reader, bucket)
            rolled = await listing.roll_up(
                lambda c, i, end, n: reader.scan_objects(bucket, c, i, end, n),
                prefix.encode(),
                delimiter.encode(),
                (after.encode(),),
                False,
                max_keys,
            )
            return ListPage(tuple(rolled.items), rolled.prefixes, rolled.truncated, rolled.last)

        return await self.catalog.scan(page)

    async def list_versions(
        self,
        bucket: str,
        prefix: str,
        delimiter: str,
        key_marker: str,
        version_id_marker: str,
        max_keys: int,
    ) -> VersionsPage:
        """One page of ListObjectVersions (versions.list_page)."""

        async def page(reader: CatalogReader) -> VersionsPage:
            await require_bucket(reader, bucket)
            return await versions.list_page(
                reader, bucket, prefix, delimiter, key_marker, version_id_marker, max_keys
            )

        return await self.catalog.scan(page)


async def paired(catalog: Catalog, files: BlobStore, *, claim: bool) -> None:
    """Raise StoreError unless `files` hold this catalog's blobs: else the start-up sweep,
    the reclaimer and fsck's repair would delete another catalog's objects as orphans.

    A new, empty catalog over a folder that holds blob files is a gateway started without its
    --catalog (a SQLite catalog made where PostgreSQL held the rows) or on a database nobody
    migrated into. A catalog that holds objects of its own is told apart by its id, which the
    folder records too: the first start of a pair gives both the same one (with `claim`) and
    every later start compares them."""
    knows = False
    async with contextlib.aclosing(catalog.audit.audit_blobs()) as rows:
        async for _ in rows:
            knows = True
            break
    if not knows:
        async with contextlib.aclosing(files.walk()) as found:
            async for _ in found:
                raise errors.StoreError(
                    "it holds blob files but this catalog knows no blob: they are another "
                    "catalog's objects (start with the catalog that served the folder, "
                    "--catalog / S3GW_CATALOG, or move a SQLite catalog with s3gw migrate; "
                    "only if every object was deleted are they orphans: remove blobs/ then)"
                )
    folder = await files.catalog_id(None)
    ours, _ = await catalog.write(lambda tx: tx.claim_id(None))
    if ours is None and folder is not None and knows:
        raise errors.StoreError(
            f"its blob files are catalog {folder}'s, and this catalog, which holds objects, "
            "has no id: it is another catalog (--catalog / S3GW_CATALOG), or one that served "
            "this folder before catalogs had ids (then remove the folder's catalog-id file)"
        )
    if claim and ours is None:
        proposed = folder or secrets.token_hex(16)
        ours, _ = await catalog.write(lambda tx: tx.claim_id(proposed))
    if claim and folder is None and ours is not None:
        folder = await files.catalog_id(ours)
    if folder is not None and ours is not None and folder != ours:
        raise errors.StoreError(
            f"its blob files are catalog {folder}'s, not this catalog's ({ours}): start with "
            "the catalog that served the folder (--catalog / S3GW_CATALOG)"
        )


async def leftover_files(reader: CatalogReader, blobs: BlobStore) -> AsyncIterator[list[Stray]]:
    """Blob files the catalog does not know, one directory at a time: what a crash (or a
    worker killed mid-request) left. The start-up sweep removes them and fsck calls them
    leftovers, not damage: both ask here, so they cannot disagree. Only while no gateway
    serves the store (a blob being published is not in the catalog yet)."""
    async for found in blobs.walk():
        known = await reader.file_blobs_among([entry.name for entry in found])
        stale = [entry for entry in found if entry.name not in known]
        if stale:
            yield stale
