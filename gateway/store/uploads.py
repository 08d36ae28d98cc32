"""The Store's multipart uploads: made, parts written or copied over shared blobs, listed,
completed into one object without copying a byte, aborted."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from .. import digest
from ..limits import MAX_OBJECT_SIZE, MIN_PART_SIZE
from . import crypto, errors, listing, outbox
from .api import CatalogReader, CatalogTx
from .core import (
    LONG,
    StoreCore,
    check_write,
    require_bucket,
    require_unchanged,
)
from .model import (
    NO_LOCK,
    NO_ORIGIN,
    Extent,
    ObjectAttrs,
    ObjectInfo,
    ObjectLock,
    Origin,
    Part,
    StagedBlob,
    Upload,
    UploadsPage,
    WriteCondition,
    slice_extents,
)


class Uploads(StoreCore):
    async def create_upload(
        self,
        bucket: str,
        key: str,
        owner: str,
        attrs: ObjectAttrs,
        lock: ObjectLock = NO_LOCK,
    ) -> Upload:
        """A multipart upload; the object Complete makes gets `lock` (or the default)."""
        upload = Upload(secrets.token_urlsafe(32), bucket, key, time.time_ns(), owner, attrs, lock)

        async def commit(tx: CatalogTx) -> Upload:
            await require_bucket(tx, bucket)
            await tx.insert_upload(upload)
            return upload

        return await self._write(commit)

    async def get_upload(self, upload_id: str, bucket: str, key: str) -> Upload:
        """The upload, which must be for this bucket and key (else NoSuchUpload, as on AWS)."""
        return await _upload(self._read, upload_id, bucket, key)

    async def upload_part(
        self,
        upload: Upload,
        number: int,
        blob: StagedBlob,
        checksum: str | None = None,
        etag: str | None = None,
    ) -> Part:
        """A part from a staged blob; its ETag is the blob's MD5 unless `etag` is given."""
        part = Part(
            upload.id,
            number,
            blob.size,
            etag or blob.md5.hex(),
            0,
            (Extent(blob.id, 0, blob.size, blob.key),) if blob.size else (),
            checksum,
        )

        async def commit(tx: CatalogTx) -> Part:
            await _upload(tx, upload.id, upload.bucket, upload.key)  # not aborted meanwhile
            final = replace(part, mtime_ns=time.time_ns())
            await _put_part(tx, final, [blob] if blob.size else [])
            return final

        return await self._write(commit, [] if blob.data is not None else [blob.id])

    async def upload_part_copy(
        self,
        upload: Upload,
        number: int,
        source: ObjectInfo,
        start: int,
        length: int,
        etag: str,
        learnt_md5: str | None = None,
        rewrap: crypto.Encryption | None = None,
        checksum: str | None = None,
    ) -> Part:
        """A part over a slice of the source's extents: the bytes are not copied (`rewrap`:
        as in copy_object; `checksum`: the slice's, in the upload's algorithm)."""
        extents = slice_extents(source.extents, start, length)
        if rewrap is not None:
            extents = self.rewrap(extents, rewrap)

        async def commit(tx: CatalogTx) -> Part:
            await _upload(tx, upload.id, upload.bucket, upload.key)
            await require_unchanged(tx, source)
            if learnt_md5 is not None:
                await tx.remember_content_md5(source, learnt_md5)
            part = Part(
                upload.id,
                number,
                length,
                etag,
                time.time_ns(),
                extents,
                checksum,
            )
            await _put_part(tx, part, [])
            return part

        return await self._write(commit)

    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]:
        return await self._read.list_parts(upload_id, after, limit)

    async def complete_upload(
        self,
        upload_id: str,
        bucket: str,
        key: str,
        chosen: Sequence[tuple[int, str]],
        checksums_of: Callable[[Upload, Sequence[Part]], dict[str, str]],
        condition: WriteCondition | None = None,
        origin: Origin = NO_ORIGIN,
    ) -> ObjectInfo:
        """Make the object from the chosen (part number, ETag) pairs, in ascending order.

        The object's manifest is the parts' manifests end to end: no byte is copied. Every
        part must exist with that ETag (InvalidPart) and all but the last be at least 5 MiB
        (EntityTooSmall). Parts not chosen are released with the upload. A retried Complete of
        an upload that made the current object is answered with that object, as AWS does.
        """

        async def commit(tx: CatalogTx) -> ObjectInfo:
            try:
                upload = await _upload(tx, upload_id, bucket, key)
            except errors.NoSuchUpload:
                done = await tx.get_object(bucket, key)
                if done is not None and done.upload_id == upload_id:
                    return done
                raise
            await check_write(tx, bucket, key, condition)
            parts = {p.number: p for p in await tx.list_parts(upload.id, 0, -1)}
            picked: list[Part] = []
            for number, etag in chosen:
                part = parts.get(number)
                if part is None or part.etag != etag:
                    raise errors.InvalidPart(UploadId=upload.id, PartNumber=number, ETag=etag)
                picked.append(part)
            for part in picked[:-1]:
                if part.size < MIN_PART_SIZE:
                    raise errors.EntityTooSmall(
                        ProposedSize=part.size, MinSizeAllowed=MIN_PART_SIZE, PartNumber=part.number
                    )
            size = sum(p.size for p in picked)
            if size > MAX_OBJECT_SIZE:
                raise errors.EntityTooLarge(ProposedSize=size, MaxSizeAllowed=MAX_OBJECT_SIZE)
            obj = ObjectInfo(
                bucket=bucket,
                key=key,
                size=size,
                etag=digest.multipart_etag_of_hex(p.etag for p in picked),
                mtime_ns=time.time_ns(),
                attrs=replace(
                    upload.attrs,
                    checksums=checksums_of(upload, picked),
                    part_checksums=_part_checksums(picked),
                ),
                extents=tuple(e for p in picked for e in p.extents),
                parts=tuple(p.size for p in picked),
                upload_id=upload.id,
                lock=upload.lock,
            )
            # References the parts' blobs before the upload lets go.
            final = await self._put(tx, obj, [], outbox.COMPLETE, origin)
            for part in await tx.delete_upload(upload.id):
                await tx.release(part.extents)
            return final

        return await self._write(commit, long=len(chosen) > LONG)

    async def abort_upload(self, upload_id: str, bucket: str, key: str) -> None:
        async def commit(tx: CatalogTx) -> None:
            await _upload(tx, upload_id, bucket, key)
            for part in await tx.delete_upload(upload_id):
                await tx.release(part.extents)

        await self._write(commit, long=True, frees=True)  # any number of parts

    async def list_uploads(
        self,
        bucket: str,
        prefix: str,
        delimiter: str,
        key_marker: str,
        upload_id_marker: str,
        max_uploads: int,
    ) -> UploadsPage:
        """Uploads by key, then by initiation time; common prefixes as in list_objects."""

        async def page(reader: CatalogReader) -> UploadsPage:
            await require_bucket(reader, bucket)
            cursor: tuple[object, ...] = (key_marker.encode(),)
            inclusive = False
            if key_marker and upload_id_marker:
                # Resume inside the marker key, after that upload.
                marker = await reader.get_upload(upload_id_marker)
                if marker is not None:
                    cursor = (key_marker.encode(), marker.initiated_ns, marker.id)
            rolled = await listing.roll_up(
                lambda c, i, end, n: reader.scan_uploads(bucket, c, i, end, n),
                prefix.encode(),
                delimiter.encode(),
                cursor,
                inclusive,
                max_uploads,
            )
            return UploadsPage(tuple(rolled.items), rolled.prefixes, rolled.truncated)

        return await self.catalog.scan(page)


def _part_checksums(parts: Sequence[Part]) -> tuple[str, ...]:
    """What the parts' own checksums were, when every part had one (the upload's algorithm's)."""
    if parts and all(p.checksum is not None for p in parts):
        return tuple(p.checksum for p in parts if p.checksum is not None)
    return ()


async def _upload(reader: CatalogReader, upload_id: str, bucket: str, key: str) -> Upload:
    upload = await reader.get_upload(upload_id)
    if upload is None or upload.bucket != bucket or upload.key != key:
        raise errors.NoSuchUpload(UploadId=upload_id)
    return upload


async def _put_part(tx: CatalogTx, part: Part, new_blobs: Sequence[StagedBlob]) -> None:
    """Store a part, replacing one with the same number: references before releases."""
    await tx.retain(part.extents, new_blobs)
    old = await tx.put_part(part)
    if old is not None:
        await tx.release(old.extents)
