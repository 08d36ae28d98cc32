"""The start-up sweep and fsck against blob ids at every boundary of the blobs/ab/cd fan-out.

A blob file is referenced or a leftover; the sweep must remove exactly the leftovers and fsck
must call exactly those leftovers (not damage). Ids are drawn around the directory boundaries
where a range worked out as text goes wrong: the `ffff` directory's "next prefix" is "10000",
which sorts below "ffff…", so a sweep by id range once found every referenced blob there
unknown and deleted it.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gateway.store import Store, fsck, open_store
from gateway.store.api import CatalogTx
from gateway.store.model import Extent, ObjectAttrs, ObjectInfo, StagedBlob

BOUNDARIES = [
    "0000",
    "00ff",
    "0100",
    "7fff",
    "8000",
    "fe00",
    "fefe",
    "feff",
    "ff00",
    "fffe",
    "ffff",
]
HEX = "0123456789abcdef"

blob_ids = st.builds(
    lambda prefix, rest: (prefix + rest)[:32],
    st.sampled_from(BOUNDARIES),
    st.one_of(
        st.text(st.sampled_from(HEX), min_size=28, max_size=28),
        st.sampled_from(["0" * 28, "f" * 28]),
    ),
)

_buckets = (f"b{n}" for n in itertools.count())


def _write_file(root: Path, blob_id: str, data: bytes) -> None:
    """A blob file where the folder blob store keeps blob `blob_id`."""
    path = root / "blobs" / blob_id[:2] / blob_id[2:4] / blob_id
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _reference(root: Path, blob_ids: list[str]) -> None:
    """One object per id, its one extent a file blob of that id, committed in the catalog."""
    bucket = next(_buckets)
    for blob_id in blob_ids:
        _write_file(root, blob_id, blob_id.encode())

    async def rows(tx: CatalogTx) -> None:
        for n, blob_id in enumerate(blob_ids):
            data = blob_id.encode()
            md5 = hashlib.md5(data)
            extent = Extent(blob_id, 0, len(data))
            await tx.add_intent(blob_id, "test", 2**62)  # as a writer records it first
            await tx.retain([extent], [StagedBlob(blob_id, len(data), md5.digest())])
            obj = ObjectInfo(
                bucket, f"key-{n}", len(data), md5.hexdigest(), 1, ObjectAttrs(), (extent,)
            )
            assert await tx.insert_object(obj)

    async def fill(store: Store) -> None:
        await store.create_bucket(bucket, "owner", "us-east-1")
        await store.catalog.write(rows)

    store = open_store(root)
    try:
        asyncio.run(fill(store))
    finally:
        store.close()


def _files_on_disk(root: Path) -> set[str]:
    return {p.name for p in (root / "blobs").rglob("*") if p.is_file()}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    referenced=st.lists(blob_ids, min_size=1, max_size=8, unique=True),
    leftovers=st.lists(blob_ids, max_size=8, unique=True),
)
@example(referenced=["ffff" + "0" * 28, "ffff" + "f" * 28], leftovers=["fffe" + "f" * 28])
@example(referenced=["0000" + "0" * 28, "00ff" + "f" * 28], leftovers=["ff00" + "0" * 28])
def test_sweep_removes_exactly_the_leftovers(
    tmp_path_factory: pytest.TempPathFactory, referenced: list[str], leftovers: list[str]
) -> None:
    root = tmp_path_factory.mktemp("data")
    leftovers = [b for b in leftovers if b not in referenced]
    _reference(root, referenced)
    for blob_id in leftovers:
        _write_file(root, blob_id, b"left by a crash")
    (root / "tmp" / "body-in-flight").write_bytes(b"x")

    before = fsck.check(root)
    assert before.damage == []  # leftovers are not damage
    assert sorted(before.orphan_files) == sorted(leftovers)
    assert before.tmp_files == ["body-in-flight"]

    store = open_store(root)
    try:
        assert asyncio.run(store.start()) == (1, len(leftovers))
    finally:
        store.close()
    assert _files_on_disk(root) == set(referenced)

    after = fsck.check(root, deep=True)
    assert after.damage == [] and after.orphan_files == [] and after.tmp_files == []


def test_a_file_outside_its_directory_is_swept_by_its_path(tmp_path: Path) -> None:
    """A stray file is removed where it lies, even where its name is no id of that folder."""
    _reference(tmp_path, ["abcd" + "0" * 28])
    stray = tmp_path / "blobs" / "ab" / "cd" / "not-an-id"
    stray.write_bytes(b"?")
    misplaced = tmp_path / "blobs" / "ff" / "ff" / ("0000" + "1" * 28)
    misplaced.parent.mkdir(parents=True)
    misplaced.write_bytes(b"?")
    assert sorted(fsck.check(tmp_path).orphan_files) == sorted([stray.name, misplaced.name])
    store = open_store(tmp_path)
    try:
        asyncio.run(store.start())
    finally:
        store.close()
    assert not stray.exists() and not misplaced.exists()
    assert _files_on_disk(tmp_path) == {"abcd" + "0" * 28}


def test_many_files_in_one_directory(tmp_path: Path) -> None:
    """More names in a directory than one lookup statement takes."""
    referenced = [f"ffff{n:028x}" for n in range(0, 1400, 2)]
    _reference(tmp_path, referenced)
    for n in range(1, 1400, 2):
        _write_file(tmp_path, f"ffff{n:028x}", b"left")
    store = open_store(tmp_path)
    try:
        assert asyncio.run(store.start()) == (0, 700)
    finally:
        store.close()
    assert _files_on_disk(tmp_path) == set(referenced)
    assert os.listdir(tmp_path / "tmp") == []
