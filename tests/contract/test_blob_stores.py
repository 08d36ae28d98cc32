"""The blob half of the contract: every BlobStore adapter (api.BlobStore) behaves alike under
the Store: blob files in the data folder, and objects in a bucket of SeaweedFS (the S3 tier,
gateway/tiers/). Written once, published, read by ranges, kept readable while open however it
is freed, retired and purged, walked, reclaimed through intents, paired with its catalog, and
checked by fsck. The catalog is SQLite: the catalog half of the suite runs on every catalog."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.store import ObjectAttrs, Store, errors, fsck, open_catalog
from gateway.store.api import BlobStore
from gateway.tiers.client import Target
from gateway.tiers.s3 import PART_SIZE, S3Blobs
from tests.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer

MIB = 1 << 20
BLOB_STORES = ("files", "s3")
_prefixes = itertools.count()


class Blobs:
    """A Store (SQLite catalog, inline up to 4 bytes) over one BlobStore, driven from
    synchronous tests through one event loop."""

    def __init__(self, root: Path, target: Target | None) -> None:
        self.runner = asyncio.Runner()
        self.root = root
        self.target = target
        factory = None if target is None else (lambda pool: S3Blobs(target))
        self.factory = factory
        self.store = Store(root, lambda pool: open_catalog(root, pool), inline_max=4, blobs=factory)
        self.files: BlobStore = self.store.files
        self._names = (f"bucket-{n}" for n in itertools.count())

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.runner.run(coro)

    def names(self) -> set[str]:
        async def walk() -> set[str]:
            return {entry.name async for found in self.files.walk() for entry in found}

        return self.run(walk())

    def new_bucket(self) -> str:
        name = next(self._names)
        self.run(self.store.create_bucket(name, "owner", "us-east-1"))
        return name

    def close(self) -> None:
        self.store.close()
        self.runner.close()


@pytest.fixture(scope="module", params=BLOB_STORES)
def blobs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Blobs]:
    target = None
    if request.param == "s3":
        seaweed: SeaweedServer = request.getfixturevalue("seaweed")
        bucket = seaweed.bucket(f"contract-{os.getpid()}")
        target = Target(
            seaweed.endpoint, bucket, f"c{next(_prefixes)}/", "us-east-1", ACCESS_KEY, SECRET_KEY
        )
    h = Blobs(tmp_path_factory.mktemp(f"blobs-{request.param}"), target)
    h.run(h.store.start())
    yield h
    h.close()


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 256 * 1024):
        yield data[start : start + 256 * 1024]


async def _write(files: BlobStore, data: bytes, piece: int = MIB) -> str:
    writer = files.writer()
    for start in range(0, len(data), piece):
        await writer.append(data[start : start + piece])
    await writer.publish(b"")
    return writer.blob_id


async def _read(files: BlobStore, blob_id: str, offset: int, count: int) -> bytes:
    blob = await files.open(blob_id)
    try:
        out = b""
        while len(out) < count:
            out += await blob.read(offset + len(out), count - len(out))
        return out
    finally:
        blob.close()


@pytest.mark.parametrize("size", [1, 3 * MIB + 5, PART_SIZE + MIB + 7])
def test_a_blob_is_written_once_and_read_by_ranges(blobs: Blobs, size: int) -> None:
    data = os.urandom(size)
    blob_id = blobs.run(_write(blobs.files, data))
    assert blob_id in blobs.names()
    for offset, count in ((0, size), (size - 1, 1), (size // 3, min(size - size // 3, 70_001))):
        assert (
            blobs.run(_read(blobs.files, blob_id, offset, count)) == data[offset : offset + count]
        )

    async def size_of() -> int:
        blob = await blobs.files.open(blob_id)
        try:
            with pytest.raises(OSError):
                await blob.read(size, 1)  # past its end
            return blob.size()
        finally:
            blob.close()

    assert blobs.run(size_of()) == size
    blobs.run(blobs.files.delete([blob_id]))
    assert blob_id not in blobs.names()
    with pytest.raises(FileNotFoundError):
        blobs.run(blobs.files.open(blob_id))
    blobs.run(blobs.files.delete([blob_id]))  # gone already: nothing to do


def test_an_open_blob_stays_readable_when_it_is_freed(blobs: Blobs) -> None:
    data = os.urandom(2 * MIB)

    async def go() -> tuple[str, bytes]:
        blob_id = await _write(blobs.files, data)
        blob = await blobs.files.open(blob_id)
        await blobs.files.purge(await blobs.files.retire([blob_id]))
        try:
            return blob_id, await blob.read(MIB, 1000)
        finally:
            blob.close()

    blob_id, read = blobs.run(go())
    assert read == data[MIB : MIB + 1000]
    # Once closed, it goes (below, the delete a read held back runs after the close).
    for _ in range(200):
        if blob_id not in blobs.names():
            break
        blobs.run(asyncio.sleep(0.02))
    assert blob_id not in blobs.names()


def test_an_aborted_writer_leaves_nothing(blobs: Blobs) -> None:
    before = blobs.names()

    async def go() -> str:
        writer = blobs.files.writer()
        await writer.append(os.urandom(PART_SIZE + MIB))  # below, a part is on its way
        writer.abort()
        with pytest.raises(OSError, match="aborted"):
            await writer.append(b"late")
        return writer.blob_id

    blob_id = blobs.run(go())
    deadline = 200
    while (blobs.run(blobs.files.leftovers()) or blobs.names() - before) and deadline:
        blobs.run(asyncio.sleep(0.05))
        deadline -= 1
    assert blobs.run(blobs.files.leftovers()) == []
    assert blob_id not in blobs.names()


def test_a_body_being_received_is_a_leftover_until_emptied(blobs: Blobs) -> None:
    async def go() -> list[str]:
        writer = blobs.files.writer()
        await writer.append(os.urandom(PART_SIZE + MIB))
        return await blobs.files.leftovers()

    assert blobs.run(go()) != []
    assert blobs.run(blobs.files.empty_leftovers()) >= 1
    assert blobs.run(blobs.files.leftovers()) == []


def test_the_first_claim_of_a_catalog_id_wins(blobs: Blobs) -> None:
    # The Store's start paired the two already: the blob store keeps the catalog's id.
    ours = blobs.run(blobs.files.catalog_id(None))
    assert ours is not None
    assert blobs.run(blobs.files.catalog_id("another")) == ours


def test_objects_through_the_store_and_what_a_delete_frees(blobs: Blobs) -> None:
    bucket = blobs.new_bucket()
    data = os.urandom(PART_SIZE + 3 * MIB)

    async def go() -> bytes:
        blob = await blobs.store.stage(_chunks(data))
        await blobs.store.put_object(bucket, "k", blob, ObjectAttrs())
        source = await blobs.store.head_object(bucket, "k")
        await blobs.store.copy_object(source, bucket, "copy", ObjectAttrs(), blob.md5.hex())
        reader = await blobs.store.open_object(bucket, "copy")
        try:
            return b"".join([c async for c in reader.chunks(MIB, PART_SIZE)])
        finally:
            reader.close()

    before = blobs.names()
    assert blobs.run(go()) == data[MIB : MIB + PART_SIZE]
    (new,) = blobs.names() - before  # the copy shares the blob
    blobs.run(blobs.store.delete_objects(bucket, ["k"]))
    assert new in blobs.names()
    blobs.run(blobs.store.delete_objects(bucket, ["copy"]))
    assert new not in blobs.names()
    report = blobs.run(_fsck(blobs, deep=True))
    assert report.damage == [] and report.orphan_files == []


async def _fsck(blobs: Blobs, deep: bool) -> fsck.Report:
    return await fsck._check(blobs.store.catalog, blobs.files, deep, False, None)


def test_a_lapsed_intent_is_reclaimed_and_its_commit_refused(blobs: Blobs) -> None:
    bucket = blobs.new_bucket()
    kept = blobs.store.intents.lease
    blobs.store.intents.lease = 0.4
    try:
        blob = blobs.run(blobs.store.stage(_chunks(os.urandom(MIB + 10))))
        assert blob.id in blobs.names()
        blobs.run(asyncio.sleep(0.5))
        done = blobs.run(blobs.store.intents.reclaim())
        assert done.intents == 1
        assert blob.id not in blobs.names()
        with pytest.raises(errors.IntentLost):
            blobs.run(blobs.store.put_object(bucket, "k", blob, ObjectAttrs()))
    finally:
        blobs.store.intents.lease = kept


def test_old_blobs_that_nothing_names_are_reclaimed(blobs: Blobs) -> None:
    bucket = blobs.new_bucket()
    kept = blobs.run(blobs.store.stage(_chunks(os.urandom(MIB + 1))))
    blobs.run(blobs.store.put_object(bucket, "kept", kept, ObjectAttrs()))
    orphan = blobs.run(_write(blobs.files, os.urandom(MIB)))  # named by nothing
    lease = blobs.store.intents.lease
    blobs.store.intents.lease = 1.0
    try:
        # Older than the lease (object stores keep whole seconds: whatever the rounding).
        blobs.run(asyncio.sleep(1.6))
        pending = blobs.run(blobs.store.stage(_chunks(os.urandom(MIB + 2))))
        removed = 0
        for _ in range(len(blobs.run(blobs.files.folders())) + 1):
            removed += blobs.run(blobs.store.intents.reclaim()).files
        names = blobs.names()
        assert orphan not in names and removed >= 1
        assert kept.id in names and pending.id in names
        blobs.run(blobs.store.put_object(bucket, "pending", pending, ObjectAttrs()))
    finally:
        blobs.store.intents.lease = lease


def test_fsck_finds_a_missing_blob(blobs: Blobs) -> None:
    bucket = blobs.new_bucket()
    blob = blobs.run(blobs.store.stage(_chunks(os.urandom(MIB + 3))))
    blobs.run(blobs.store.put_object(bucket, "lost", blob, ObjectAttrs()))
    blobs.run(blobs.files.forget([blob.id]))  # as if the store below lost it
    try:
        report = blobs.run(_fsck(blobs, deep=True))
        assert report.missing_files == [blob.id]
    finally:
        with contextlib.suppress(errors.StoreError):
            blobs.run(blobs.store.delete_objects(bucket, ["lost"]))
