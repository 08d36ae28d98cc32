"""One write path: how a body or a copy becomes an object (or a part), whoever asks.

The S3 operations, the POST form, the console and log delivery each turn their own input into
the values below (the bucket, the key, the body's chunks, the attrs, the encryption asked for)
and call these functions; the S3 rules in between are decided here once: a new bucket's
defaults, staging and checking a body, the ETag and content-MD5 rule of each encryption, the
copy's choice between sharing the source's blobs (re-wrapping their keys) and re-encrypting
its bytes, and the default checksum. Nothing here knows HTTP: no aiohttp, no request context
(`tests/unit/test_layers.py` holds both, and that nothing else calls the Store's writes).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from .. import digest, metrics
from ..config import Settings
from ..store import ObjectAttrs, ObjectInfo, ObjectReader, StagedBlob, Store, crypto
from ..store.errors import SourceChanged
from ..store.model import NO_LOCK, NO_ORIGIN, ObjectLock, Origin, Part, Upload, WriteCondition
from ..store.outbox import COPY, POST, PUT
from . import checksums, grants, sse
from .authorize import ACL as ACL_SETTING
from .authorize import BLOCK_ALL, BUCKET_OWNER_ENFORCED, OWNERSHIP, PUBLIC_ACCESS_BLOCK
from .errors import S3Error

T = TypeVar("T")

# --- buckets -------------------------------------------------------------------------------


def default_encryption(settings: Settings) -> sse.DefaultRule | None:
    """A bucket's default encryption rule when it has set none of its own (new, or after
    DeleteBucketEncryption): AWS's (SSE-S3, SSE-C blocked) unless the settings say
    `--bucket-defaults legacy` (none) or `--default-encryption none` (SSE-C blocked only)."""
    if settings.bucket_defaults != "aws":
        return None
    if settings.default_encryption == "none":
        return sse.SSE_C_BLOCKED
    return sse.SSE_S3_DEFAULT


def new_bucket_settings(
    settings: Settings, ownership: str | None = None, acl: grants.Acl | None = None
) -> dict[str, str]:
    """A new bucket's ownership controls, public access block, default encryption and ACL:
    AWS's defaults (BucketOwnerEnforced, everything blocked, SSE-S3 with SSE-C blocked)
    unless the settings say otherwise, and the ownership and ACL the creator asked for
    (already parsed)."""
    bucket_defaults = settings.bucket_defaults
    made: dict[str, str] = {}
    rule = default_encryption(settings)
    if rule is not None:
        made["encryption"] = sse.render_configuration(rule)
    if bucket_defaults == "aws":
        ownership = ownership or BUCKET_OWNER_ENFORCED
        made[PUBLIC_ACCESS_BLOCK] = BLOCK_ALL.to_json()
    if ownership is not None:
        made[OWNERSHIP] = ownership
    if acl is not None and not acl.only_owner():
        if ownership == BUCKET_OWNER_ENFORCED:
            raise S3Error("InvalidBucketAclWithObjectOwnership")
        if acl.is_public() and bucket_defaults == "aws":
            raise S3Error("AccessDenied")  # the public access block it is born with
        made[ACL_SETTING] = acl.to_json()
    return made


# --- bodies --------------------------------------------------------------------------------


def default_checksum() -> checksums.Checksum:
    """AWS's default checksum of an object written without one (CRC64NVME), computed in the
    pass that hashes the MD5: give it to `stage` as an observer."""
    return checksums.DEFAULT.new()


def whole_object_checksum(algorithm: checksums.Algorithm, value: str) -> dict[str, str]:
    """The stored (and answered) checksum headers of an object's whole bytes."""
    return {algorithm.header: value, "x-amz-checksum-type": checksums.FULL_OBJECT}


async def stage(
    store: Store,
    chunks: AsyncIterable[bytes],
    encryption: sse.Requested = sse.PLAIN,
    observers: Sequence[digest.Digest] = (),
    check: Callable[[StagedBlob], None] | None = None,
) -> StagedBlob:
    """Receive a body into a staged blob (encrypted as `encryption` says, hashed into
    `observers` on the way), then `check` it (its signed hash, Content-MD5, size, checksum):
    a body that fails is dropped before anything refers to it."""
    blob = await store.stage(chunks, observers, encryption.encryption)
    if check is not None:
        try:
            check(blob)
        except BaseException:
            await store.discard(blob)
            raise
    return blob


async def put(
    store: Store,
    bucket: str,
    key: str,
    blob: StagedBlob,
    attrs: ObjectAttrs,
    encryption: sse.Requested = sse.PLAIN,
    condition: WriteCondition | None = None,
    lock: ObjectLock = NO_LOCK,
    origin: Origin = NO_ORIGIN,
    event: str | None = None,
) -> ObjectInfo:
    """A staged body becomes the key's object: its attrs take the encryption's headers; its
    ETag is the MD5 where the encryption keeps it one (sse.Requested.etag), and the MD5 of
    the bytes is kept unless a customer key sealed them (SSE-C keeps no MD5 of its bytes).
    The event it makes for the bucket's notifications is ObjectCreated:Put, :Post for a POST
    form's body (`origin.form`), or `event` (a copy's), recorded with `origin`."""
    return await store.put_object(
        bucket,
        key,
        blob,
        encryption.attrs(attrs),
        condition,
        lock,
        etag=encryption.etag(blob.md5.hex()),
        keep_md5=encryption.sse_key is None,
        event=event or (POST if origin.form else PUT),
        origin=origin,
    )


async def put_body(
    store: Store,
    bucket: str,
    key: str,
    chunks: AsyncIterable[bytes],
    attrs: ObjectAttrs,
    encryption: sse.Requested = sse.PLAIN,
    origin: Origin = NO_ORIGIN,
) -> ObjectInfo:
    """A body sent whole with no checksum of its own (a console upload, a log object), written
    as a PutObject without one: AWS's default checksum computed in the MD5's pass. A commit
    that fails drops the staged blob (Store._write), unless its outcome is unknown."""
    checksum = default_checksum()
    blob = await stage(store, chunks, encryption, [checksum])
    attrs = replace(attrs, checksums=whole_object_checksum(checksums.DEFAULT, checksum.value()))
    return await put(store, bucket, key, blob, attrs, encryption, origin=origin)


async def upload_part(
    store: Store,
    upload: Upload,
    number: int,
    blob: StagedBlob,
    checksum: str | None,
    encryption: sse.Requested,
) -> Part:
    """A staged body becomes part `number` of `upload`, with its checksum (the upload's
    algorithm's, or the default one Complete combines)."""
    return await store.upload_part(upload, number, blob, checksum, encryption.etag(blob.md5.hex()))


def default_of_parts(upload: Upload, parts: Sequence[Part]) -> dict[str, str]:
    """The checksum of an object completed from an upload that named no algorithm: the
    default, combined from its parts' (none where a part has none)."""
    if sse.CUSTOMER + "algorithm" in upload.attrs.sse:
        # AWS adds no default checksum to an SSE-C multipart object (LocalStack's AWS
        # recordings; a PutObject with SSE-C gets one).
        return {}
    return checksums.default_of_parts([(p.checksum, p.size) for p in parts])


def object_checksum(
    upload: Upload,
    parts: Sequence[Part],
    sent: Mapping[int, Mapping[str, str]],
    headers: Mapping[str, str],
) -> dict[str, str]:
    """The object's checksum from its parts' (COMPOSITE or FULL_OBJECT, as the upload
    asked); every part must have had one, matching what Complete names: `sent`, the parts'
    checksums by part number as the request names them (ChecksumCRC32: value), and `headers`,
    the request's x-amz-checksum-type and x-amz-checksum-<alg>. An upload that named no
    algorithm gets the default, combined from its parts'."""
    kind = upload.attrs.checksums.get("type")
    named_kind = headers.get("x-amz-checksum-type")
    if named_kind is not None and named_kind.strip().upper() != kind:
        # AWS's words, "null" for an upload created without a checksum (LocalStack's AWS
        # recordings of test_multipart_parts_checksum_exceptions_*, Feb 2026).
        raise S3Error(
            "InvalidRequest",
            f"The upload was created using the {kind or 'null'} checksum mode. The "
            "complete request must use the same checksum mode.",
        )
    name = upload.attrs.checksums.get("algorithm")
    algorithm = checksums.algorithm(name) if name else None
    # An upload that chose none gets the default's (CRC64NVME), which Complete may name.
    kept = algorithm or checksums.DEFAULT
    for other in checksums.ALGORITHMS.values():
        if other is not kept and other.header in headers:
            # The object's checksum named under another algorithm than the upload's (or for
            # an upload that chose none): it cannot be checked against the parts', and is
            # refused rather than ignored.
            raise S3Error(
                "InvalidRequest",
                f"The upload was created using the {(name or 'null').lower()} checksum "
                f"algorithm. The complete request must not name a {other.name.lower()} "
                "checksum.",
            )
    if algorithm is None:
        for part in parts:
            if sent.get(part.number):
                # A part's checksum named for an upload that has none: AWS's InvalidPart
                # (LocalStack's AWS recording of test_complete_multipart_parts_checksum_
                # default, Feb 2026).
                raise S3Error(
                    "InvalidPart", UploadId=upload.id, PartNumber=part.number, ETag=part.etag
                )
        made = default_of_parts(upload, parts)
        expected = headers.get(kept.header)
        if expected is not None and made.get(kept.header) not in (None, expected):
            raise S3Error(
                "BadDigest",
                f"The {kept.name} you specified did not match the calculated checksum.",
            )
        return made
    field = f"Checksum{algorithm.name}"
    for part in parts:
        named = sent.get(part.number, {}).get(field)
        if part.checksum is None:
            raise S3Error(
                "InvalidRequest",
                f"The upload was created using a {algorithm.name.lower()} checksum. The "
                "complete request must include the checksum for each part. It was missing "
                f"for part {part.number} in the request.",
            )
        if named is not None and named != part.checksum:
            raise S3Error("InvalidPart", UploadId=upload.id, PartNumber=part.number)
    pairs = [(p.checksum, p.size) for p in parts if p.checksum is not None]
    if kind == checksums.COMPOSITE:
        value = checksums.composite(algorithm, [v for v, _ in pairs])
    else:
        value = checksums.full_object(algorithm, pairs)
    # Complete may name the object's checksum it expects (x-amz-checksum-<alg>).
    expected = headers.get(algorithm.header)
    if expected is not None and expected != value:
        raise S3Error(
            "BadDigest",
            f"The {algorithm.name} you specified did not match the calculated checksum.",
        )
    return {algorithm.header: value, "x-amz-checksum-type": kind}


async def complete(
    store: Store,
    upload_id: str,
    bucket: str,
    key: str,
    chosen: Sequence[tuple[int, str]],
    sent: Mapping[int, Mapping[str, str]] | None = None,
    headers: Mapping[str, str] | None = None,
    condition: WriteCondition | None = None,
    origin: Origin = NO_ORIGIN,
) -> ObjectInfo:
    """CompleteMultipartUpload: the object made of the `chosen` (part number, ETag) parts,
    its checksum as `object_checksum` decides (`sent`, `headers`: what the request names)."""

    def checksum(upload: Upload, parts: Sequence[Part]) -> dict[str, str]:
        return object_checksum(upload, parts, sent or {}, headers or {})

    return await store.complete_upload(
        upload_id, bucket, key, chosen, checksum, condition, origin=origin
    )


# --- copies --------------------------------------------------------------------------------


def known_md5(source: ObjectInfo) -> str | None:
    """The MD5 of the source's bytes if the catalog has it (SSE-C and SSE-KMS ETags are not
    MD5s: only a remembered content MD5 counts for them)."""
    if digest.is_plain(source.etag) and source.attrs.etag_is_md5:
        return source.etag
    return source.content_md5


async def whole_md5(
    store: Store, source: ObjectInfo, source_key: bytes | None
) -> tuple[str, str | None]:
    """(MD5 of the source's bytes, the MD5 if it had to be computed, to remember)."""
    known = known_md5(source)
    if known:
        metrics.COPY_ETAGS.labels("reused").inc()
        return known, None
    computed = (await store.content_md5(source, customer_key=source_key)).hex()
    metrics.COPY_ETAGS.labels("computed").inc()
    # An SSE-C object keeps no MD5 of its bytes (docs/encryption.md).
    return computed, computed if source.attrs.sse_key is None else None


def whole_checksum(source: ObjectInfo, algorithm: checksums.Algorithm) -> str | None:
    """The source's own `algorithm` checksum of its whole bytes (FULL_OBJECT), if it has one:
    known without reading them."""
    sums = source.attrs.checksums
    if sums.get("x-amz-checksum-type", checksums.FULL_OBJECT) != checksums.FULL_OBJECT:
        return None
    return sums.get(algorithm.header)


@contextlib.asynccontextmanager
async def opened(
    store: Store, source: ObjectInfo, source_key: bytes | None
) -> AsyncIterator[ObjectReader]:
    """The source's bytes, open for reading (SourceChanged if they went meanwhile)."""
    reader = store.reader(source, source_key)
    try:
        try:
            await reader.open()
        except FileNotFoundError as exc:
            raise SourceChanged() from exc
        yield reader
    finally:
        reader.close()


async def hash_range(
    store: Store,
    source: ObjectInfo,
    source_key: bytes | None,
    start: int,
    length: int,
    digests: Sequence[digest.Digest],
) -> None:
    """Read a range of the source's bytes once into each of `digests`, each piece hashed off
    the event loop while the next is read."""

    def update(piece: bytes) -> None:
        for d in digests:
            d.update(piece)

    loop = asyncio.get_running_loop()
    hashing: asyncio.Future[None] | None = None
    async with opened(store, source, source_key) as reader:
        async for piece in reader.chunks(start, length):
            if hashing is not None:
                await hashing
            hashing = loop.run_in_executor(store.pool, update, piece)
        if hashing is not None:
            await hashing


async def copy_checksum(
    store: Store, source: ObjectInfo, source_key: bytes | None, algorithm: checksums.Algorithm
) -> dict[str, str]:
    """A copy's checksum headers under `algorithm`: the source's own when it has that
    algorithm's whole-object value, else computed from the source's bytes. AWS answers a copy
    asked for another algorithm with that algorithm's FULL_OBJECT checksum (LocalStack's AWS
    recordings of test_s3_copy_object_with_checksum, Feb 2026)."""
    value = whole_checksum(source, algorithm)
    if value is None:
        checksum = algorithm.new()
        await hash_range(store, source, source_key, 0, source.size, [checksum])
        value = checksum.value()
    return whole_object_checksum(algorithm, value)


def reuses_ciphertext(source: ObjectInfo, dest: sse.Requested) -> bool:
    """Can the destination share the source's blobs (metadata only)? Plain to plain; server-
    managed keys on both sides (the data keys are wrapped again); the same customer key on
    both sides. Anything else is re-encrypted (docs/encryption.md, "Copies")."""
    if not source.extents:
        return True
    source_customer = source.attrs.sse_key is not None
    source_plain = not source.attrs.sse
    if dest.encryption is None:
        return source_plain
    if dest.server_managed:
        # A DSSE-KMS destination needs two layers: a one-layer source is encrypted again.
        assert dest.encryption is not None
        single = source.attrs.sse.get(sse.SSE) != sse.DSSE
        return not source_plain and not source_customer and not (dest.encryption.dual and single)
    assert dest.customer_key is not None
    return source_customer and crypto.fingerprint_matches(
        dest.customer_key, source.attrs.sse_key or ""
    )


async def reencrypt(
    store: Store,
    source: ObjectInfo,
    source_key: bytes | None,
    start: int,
    length: int,
    dest: sse.Requested,
    observers: Sequence[digest.Digest] = (),
) -> StagedBlob:
    """Stream the source's plaintext (a range of it) through a new blob under `dest`, hashed
    on the way into `observers` too."""
    async with opened(store, source, source_key) as reader:
        return await store.stage(reader.chunks(start, length), observers, dest.encryption)


# A copy whose source is replaced meanwhile (SourceChanged) looks it up again, this many times
# in all, then answers SlowDown.
COPY_ATTEMPTS = 3


async def retry_copy(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt`, a copy that looks its source up itself, run again while the source is
    replaced under it (SourceChanged), COPY_ATTEMPTS times in all; then SlowDown."""
    for _ in range(COPY_ATTEMPTS):
        try:
            return await attempt()
        except SourceChanged:
            continue
    raise S3Error("SlowDown")


async def copy(
    store: Store,
    source: ObjectInfo,
    source_key: bytes | None,
    bucket: str,
    key: str,
    attrs: ObjectAttrs,
    dest: sse.Requested,
    lock: ObjectLock = NO_LOCK,
    condition: WriteCondition | None = None,
    origin: Origin = NO_ORIGIN,
) -> ObjectInfo:
    """A whole-object copy: over the source's blobs (their keys re-wrapped for a server-
    managed destination) where the ciphertext can be shared, the ETag reused when it is a
    known MD5 (DESIGN.md's ideas 2 and 3); else the source's bytes re-encrypted into a new
    blob. `attrs`: the destination's, before its encryption's headers. SourceChanged if the
    source went meanwhile (the caller looks it up again)."""
    attrs = dest.attrs(attrs)
    if not reuses_ciphertext(source, dest):
        blob = await reencrypt(store, source, source_key, 0, source.size, dest)
        return await put(
            store, bucket, key, blob, attrs, dest, condition, lock=lock, origin=origin, event=COPY
        )
    rewrap = dest.encryption if dest.server_managed else None
    if dest.etag_is_md5:
        etag, learnt = await whole_md5(store, source, source_key)
        content_md5 = None
    else:
        etag, learnt = dest.etag(""), None
        content_md5 = (known_md5(source) or "") if dest.sse_key is None else ""
    return await store.copy_object(
        source, bucket, key, attrs, etag, learnt, lock, rewrap, content_md5, condition, origin
    )


@dataclass(frozen=True)
class CopiedPart:
    part: Part
    checksum: str | None  # the part's checksum under the algorithm asked for


async def copy_part(
    store: Store,
    upload: Upload,
    number: int,
    source: ObjectInfo,
    source_key: bytes | None,
    start: int,
    length: int,
    dest: sse.Requested,
    algorithm: checksums.Algorithm | None,
) -> CopiedPart:
    """UploadPartCopy: a range of the source becomes part `number`, over the source's blobs
    where the ciphertext can be shared. The part's checksum is `algorithm`'s (the upload's,
    which Complete needs of every part), else the default, unannounced, read only in a pass
    that reads the range anyway (its MD5): a copy that needs neither stays metadata only, and
    Complete then gives the object no default checksum. SourceChanged as `copy`."""
    wanted = algorithm or checksums.DEFAULT
    whole = (start, length) == (0, source.size)
    value = whole_checksum(source, wanted) if whole else None
    checksum = wanted.new() if value is None else None
    if not reuses_ciphertext(source, dest):
        observers = [checksum] if checksum is not None else []
        blob = await reencrypt(store, source, source_key, start, length, dest, observers)
        value = checksum.value() if checksum is not None else value
        return CopiedPart(await upload_part(store, upload, number, blob, value, dest), value)
    etag, learnt, md5 = "", None, None
    if not dest.etag_is_md5:
        etag = dest.etag("")
    elif whole and known_md5(source):
        etag, learnt = await whole_md5(store, source, source_key)
    else:
        # The part's ETag is the MD5 of the copied range: read, but never written.
        md5 = digest.md5()
    summed = checksum if md5 is not None or algorithm is not None else None
    digests = [d for d in (md5, summed) if d is not None]
    if digests:
        await hash_range(store, source, source_key, start, length, digests)
    if summed is not None:
        value = summed.value()
    if md5 is not None:
        metrics.MD5_BYTES.inc(length)
        etag = md5.hexdigest()
        if whole:
            metrics.COPY_ETAGS.labels("computed").inc()
            # An SSE-C object keeps no MD5 of its bytes (docs/encryption.md).
            learnt = etag if source.attrs.sse_key is None else None
    rewrap = dest.encryption if dest.server_managed else None
    part = await store.upload_part_copy(
        upload, number, source, start, length, etag, learnt, rewrap, value
    )
    return CopiedPart(part, value)
