"""Writes through the Store over each backend: reference counts through PUT, copy,
UploadPartCopy, Complete and delete (blob files freed exactly when the last reference goes),
conditional writes, a copy whose source changed, concurrent writers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from gateway import digest
from gateway.store import errors
from gateway.store.api import CatalogTx
from gateway.store.model import Extent, ObjectAttrs, ObjectInfo, StagedBlob, WriteCondition
from tests.contract.conftest import Harness

MIB = 1 << 20


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 256 * 1024):
        yield data[start : start + 256 * 1024]
    if not data:
        return


def stage(h: Harness, data: bytes) -> StagedBlob:
    return h.run(h.store.stage(_chunks(data)))


def put(h: Harness, bucket: str, key: str, data: bytes, **kw: object):  # type: ignore[no-untyped-def]
    return h.run(h.store.put_object(bucket, key, stage(h, data), ObjectAttrs(), **kw))  # type: ignore[arg-type]


def refs(h: Harness) -> dict[str, int]:
    async def scan() -> dict[str, int]:
        return {row.id: row.refs async for row in h.store.catalog.audit.audit_blobs()}

    return h.run(scan())


def file_blobs(h: Harness) -> set[str]:
    """Blobs the catalog keeps in files (not inline)."""

    async def scan() -> set[str]:
        return {row.id async for row in h.store.catalog.audit.audit_blobs() if not row.inline}

    return h.run(scan())


def files(h: Harness) -> set[str]:
    return {p.name for p in (h.root / "blobs").rglob("*") if p.is_file()}


def settle(h: Harness) -> None:
    """Released files are freed after the answer of a write that is not a delete (by a task
    of the event loop, which runs while the harness waits)."""
    for _ in range(100):
        if files(h) <= file_blobs(h):
            return
        h.run(asyncio.sleep(0.01))


def read(h: Harness, bucket: str, key: str) -> bytes:
    async def go() -> bytes:
        reader = await h.store.open_object(bucket, key)
        try:
            return b"".join([c async for c in reader.chunks(0, reader.info.size)])
        finally:
            reader.close()

    return h.run(go())


def test_a_shared_blob_lives_until_its_last_reference(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    data = os.urandom(100)
    a = put(h, b, "a", data)
    (blob,) = {e.blob for e in a.extents}
    copy = h.run(h.store.copy_object(a, b, "copy", ObjectAttrs(), a.etag))
    assert copy.extents == a.extents and copy.etag == a.etag
    assert refs(h)[blob] == 2 and blob in files(h)
    put(h, b, "a", b"other bytes")  # replacing one keeps the blob for the other
    settle(h)
    assert refs(h)[blob] == 1 and blob in files(h)
    assert read(h, b, "copy") == data
    h.run(h.store.delete_objects(b, ["copy", "missing"]))  # a delete frees before answering
    assert blob not in refs(h) and blob not in files(h)


def test_replacing_an_object_by_a_copy_of_itself_keeps_its_blob(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    a = put(h, b, "a", os.urandom(50))
    again = h.run(h.store.copy_object(a, b, "a", ObjectAttrs("text/plain"), a.etag))
    settle(h)
    assert again.extents == a.extents
    assert refs(h)[a.extents[0].blob] == 1 and a.extents[0].blob in files(h)


def test_an_unversioned_overwrite_releases_the_replaced_blob_once(harness: Harness) -> None:
    # One reference less per overwrite, for blobs in files and inline (4 bytes or less here):
    # a leak leaves a count or a file behind, a double release frees the blob a copy uses.
    h = harness
    b = h.new_bucket()
    before = refs(h)
    data = os.urandom(100)
    a = put(h, b, "k", data)
    (shared,) = {e.blob for e in a.extents}
    h.run(h.store.copy_object(a, b, "copy", ObjectAttrs(), a.etag))
    blobs = [shared]
    for body in (os.urandom(100), b"ab", b"cd", os.urandom(60)):
        blobs.append(put(h, b, "k", body).extents[0].blob)
        settle(h)
        assert refs(h) == {**before, shared: 1, blobs[-1]: 1}
        assert files(h) == file_blobs(h)
        assert read(h, b, "k") == body
    assert read(h, b, "copy") == data
    h.run(h.store.delete_objects(b, ["k", "copy"]))
    assert refs(h) == before and files(h) == file_blobs(h)


def test_drop_object_gives_the_rows_extents_alone(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    # Straight into the catalog: the manifest's encodings round-trip, a sealed key included
    # (no blob rows: drop_object leaves the references to its caller).
    extents = (Extent("blob-a", 0, 5), Extent("blob-b", 2, 3, "sealed-key"))
    obj = ObjectInfo(b, "k/\u00e9", 8, "e" * 32, 1, ObjectAttrs("text/plain"), extents)

    async def insert(tx: CatalogTx) -> bool:
        return await tx.insert_object(obj)

    async def drop(tx: CatalogTx) -> tuple[Extent, ...] | None:
        return await tx.drop_object(b, obj.key)

    assert h.write(insert) == (True, [])
    assert h.write(drop) == (extents, [])
    assert h.run(h.store.catalog.reader.get_object(b, obj.key)) is None
    assert h.write(drop) == (None, [])


def test_a_copy_from_a_source_that_changed_is_refused(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    a = put(h, b, "a", os.urandom(20))
    put(h, b, "a", os.urandom(20))  # the version `a` is gone
    with pytest.raises(errors.SourceChanged):
        h.run(h.store.copy_object(a, b, "copy", ObjectAttrs(), a.etag))
    h.run(h.store.delete_objects(b, ["a"]))
    # Gone: changed too (the caller looks it up again, and answers what it finds then).
    with pytest.raises(errors.SourceChanged):
        h.run(h.store.copy_object(a, b, "copy", ObjectAttrs(), a.etag))
    assert h.run(h.store.list_objects(b, "", "", "", 10)).entries == ()


def test_multipart_references_through_part_copy_and_complete(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    source_bytes = os.urandom(1000)
    source = put(h, b, "source", source_bytes)
    upload = h.run(h.store.create_upload(b, "mp", "owner", ObjectAttrs()))
    first = os.urandom(5 * MIB)
    p1 = h.run(h.store.upload_part(upload, 1, stage(h, first)))
    p2 = h.run(
        h.store.upload_part_copy(
            upload, 2, source, 100, 300, digest.md5_of(source_bytes[100:400]).hexdigest()
        )
    )
    unused = h.run(h.store.upload_part(upload, 3, stage(h, os.urandom(10))))
    assert refs(h)[source.extents[0].blob] == 2  # the object and the part
    obj = h.run(
        h.store.complete_upload(upload.id, b, "mp", [(1, p1.etag), (2, p2.etag)], lambda u, p: {})
    )
    settle(h)
    assert obj.etag == digest.multipart_etag_of_hex([p1.etag, p2.etag])
    assert read(h, b, "mp") == first + source_bytes[100:400]
    assert unused.extents[0].blob not in refs(h) and unused.extents[0].blob not in files(h)
    # A retried Complete is answered with the object it made.
    again = h.run(
        h.store.complete_upload(upload.id, b, "mp", [(1, p1.etag), (2, p2.etag)], lambda u, p: {})
    )
    assert again == obj
    h.run(h.store.delete_objects(b, ["source"]))
    assert read(h, b, "mp")[-300:] == source_bytes[100:400]  # the slice keeps its blob
    h.run(h.store.delete_objects(b, ["mp"]))
    assert refs(h) == {} or not set(refs(h)) & {e.blob for e in obj.extents}
    assert not files(h) & {e.blob for e in obj.extents}


def test_complete_checks_its_parts(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    upload = h.run(h.store.create_upload(b, "k", "owner", ObjectAttrs()))
    small = h.run(h.store.upload_part(upload, 1, stage(h, b"12345678")))
    last = h.run(h.store.upload_part(upload, 2, stage(h, b"x")))
    with pytest.raises(errors.InvalidPart):
        h.run(h.store.complete_upload(upload.id, b, "k", [(1, "0" * 32)], lambda u, p: {}))
    with pytest.raises(errors.EntityTooSmall):
        h.run(
            h.store.complete_upload(
                upload.id, b, "k", [(1, small.etag), (2, last.etag)], lambda u, p: {}
            )
        )
    with pytest.raises(errors.NoSuchUpload):
        h.run(h.store.complete_upload(upload.id, b, "other", [(2, last.etag)], lambda u, p: {}))
    h.run(h.store.abort_upload(upload.id, b, "k"))
    assert small.extents[0].blob not in files(h) and last.extents[0].blob not in files(h)


def test_conditional_writes(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    first = put(h, b, "k", b"one", condition=WriteCondition(if_none_match="*"))
    with pytest.raises(errors.PreconditionFailed):
        put(h, b, "k", b"two", condition=WriteCondition(if_none_match="*"))
    with pytest.raises(errors.PreconditionFailed):
        put(h, b, "k", b"two", condition=WriteCondition(if_match='"' + "0" * 32 + '"'))
    with pytest.raises(errors.NoSuchKey):
        put(h, b, "absent", b"two", condition=WriteCondition(if_match="*"))
    second = put(h, b, "k", b"two", condition=WriteCondition(if_match=f'"{first.etag}"'))
    assert read(h, b, "k") == b"two" and second.etag == digest.md5_of(b"two").hexdigest()
    settle(h)
    # The refused writes left nothing behind.
    assert files(h) == file_blobs(h)


def test_buckets(harness: Harness) -> None:
    h = harness
    b = h.new_bucket("owner")
    with pytest.raises(errors.BucketAlreadyOwnedByYou):
        h.run(h.store.create_bucket(b, "owner", "us-east-1"))
    with pytest.raises(errors.BucketAlreadyExists):
        h.run(h.store.create_bucket(b, "someone-else", "us-east-1"))
    put(h, b, "k", b"data")
    with pytest.raises(errors.BucketNotEmpty):
        h.run(h.store.delete_bucket(b))
    upload = h.run(h.store.create_upload(b, "pending", "owner", ObjectAttrs()))
    part = h.run(h.store.upload_part(upload, 1, stage(h, b"pending part")))
    h.run(h.store.delete_objects(b, ["k"]))
    h.run(h.store.delete_bucket(b))  # its uploads go with it
    assert h.run(h.store.get_bucket(b)) is None
    assert part.extents[0].blob not in files(h)
    with pytest.raises(errors.NoSuchBucket):
        put(h, b, "k", b"data")


def test_concurrent_writers_leave_one_state_and_right_counts(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    bodies = [os.urandom(64 + n) for n in range(40)]
    source = put(h, b, "source", os.urandom(100))

    async def storm() -> list[object]:
        async def one(n: int) -> object:
            if n % 4 == 3:
                return await h.store.copy_object(source, b, "k", ObjectAttrs(), source.etag)
            if n % 4 == 2:
                return await h.store.delete_objects(b, ["k"])
            blob = await h.store.stage(_chunks(bodies[n]))
            return await h.store.put_object(b, "k", blob, ObjectAttrs())

        return await asyncio.gather(*(one(n) for n in range(40)), return_exceptions=True)

    outcomes = h.run(storm())
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    settle(h)
    final = h.run(h.store.list_objects(b, "", "", "", 10)).entries
    assert [e.key for e in final] in (["k", "source"], ["source"])
    # Every file blob on disk is referenced, every reference has its file.
    assert files(h) == file_blobs(h)


def test_several_extents_of_one_blob_are_counted_each(harness: Harness) -> None:
    h = harness
    b = h.new_bucket()
    data = os.urandom(5 * MIB + 10)
    source = put(h, b, "source", data)
    (blob,) = {e.blob for e in source.extents}
    upload = h.run(h.store.create_upload(b, "twice", "owner", ObjectAttrs()))
    parts = [
        h.run(h.store.upload_part_copy(upload, 1, source, 0, 5 * MIB, "a" * 32)),
        h.run(h.store.upload_part_copy(upload, 2, source, 0, 10, "b" * 32)),
    ]
    assert refs(h)[blob] == 3
    obj = h.run(
        h.store.complete_upload(
            upload.id, b, "twice", [(p.number, p.etag) for p in parts], lambda u, p: {}
        )
    )
    assert [e.blob for e in obj.extents] == [blob, blob] and refs(h)[blob] == 3
    h.run(h.store.delete_objects(b, ["source"]))
    assert refs(h)[blob] == 2
    h.run(h.store.delete_objects(b, ["twice"]))
    assert blob not in refs(h) and blob not in files(h)
