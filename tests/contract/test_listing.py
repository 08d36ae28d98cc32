"""Listing through the Store over each backend, against the in-memory model of S3: objects and
multipart uploads, prefixes, any delimiter, markers, max-keys, keys of any code point."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.store import errors
from gateway.store.api import CatalogTx
from gateway.store.model import ObjectAttrs, ObjectInfo
from tests.contract.conftest import Harness
from tests.contract.model import (
    ALPHABET,
    LISTING_KEYS,
    LISTING_TABLE,
    Item,
    check_page,
    items_of,
    keys_strategy,
    listing_args,
    model_page,
    model_stream,
    utf8,
)

MTIME = 1_700_000_000_000_000_000
SLOW = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def row(bucket: str, key: str) -> ObjectInfo:
    size = len(key.encode())
    return ObjectInfo(bucket, key, size, f"{size:032x}", MTIME + size, ObjectAttrs(), ())


def put_keys(h: Harness, bucket: str, keys: list[str]) -> None:
    """Rows straight through the catalog protocol: one transaction for the lot."""

    async def rows(tx: CatalogTx) -> None:
        for key in keys:
            assert await tx.insert_object(row(bucket, key))

    h.write(rows)


@SLOW
@given(args=listing_args(), data=st.data())
def test_list_objects_page_matches_model(
    harness: Harness, args: tuple[list[str], str, str], data: st.DataObject
) -> None:
    keys, prefix, delimiter = args
    bucket = harness.new_bucket()
    put_keys(harness, bucket, keys)
    full = model_stream(keys, prefix, delimiter, "")
    after = data.draw(
        st.one_of(
            st.just(""),
            st.sampled_from(keys or [""]),  # a key (a NextMarker that was a key)
            st.sampled_from([name for _, name in full] or [""]),  # a key or common prefix
            st.text(st.sampled_from(ALPHABET), max_size=4),  # anything
        ),
        label="after",
    )
    max_keys = data.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 1000]), label="max_keys")
    page = harness.run(harness.store.list_objects(bucket, prefix, delimiter, after, max_keys))
    expected, truncated = model_page(keys, prefix, delimiter, after, max_keys)
    check_page(page, expected, truncated)
    # Entries carry their object's size, ETag and mtime.
    for entry in page.entries:
        info = row(bucket, entry.key)
        assert (entry.size, entry.etag, entry.mtime_ns) == (info.size, info.etag, info.mtime_ns)


@SLOW
@given(args=listing_args(), max_keys=st.sampled_from([1, 2, 3, 4, 5, 1000]))
def test_list_objects_pagination_returns_everything_once(
    harness: Harness, args: tuple[list[str], str, str], max_keys: int
) -> None:
    keys, prefix, delimiter = args
    bucket = harness.new_bucket()
    put_keys(harness, bucket, keys)
    expected = model_stream(keys, prefix, delimiter, "")
    got: list[Item] = []
    after = ""
    for _ in range(len(keys) + 2):  # more pages than items means the listing loops
        page = harness.run(harness.store.list_objects(bucket, prefix, delimiter, after, max_keys))
        items = items_of(page)
        assert len(items) <= max_keys
        got += items
        if not page.truncated:
            break
        # A truncated page is never empty, or the client would ask for it forever.
        assert items and page.last == items[-1][1]
        after = page.last  # NextMarker / NextContinuationToken
    else:
        pytest.fail(f"listing did not end: {got}")
    assert got == expected


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(keys=keys_strategy, other=keys_strategy)
def test_list_objects_sees_only_its_bucket(
    harness: Harness, keys: list[str], other: list[str]
) -> None:
    bucket, neighbour = harness.new_bucket(), harness.new_bucket()
    put_keys(harness, bucket, keys)
    put_keys(harness, neighbour, other)
    page = harness.run(harness.store.list_objects(bucket, "", "", "", 1000))
    assert [e.key for e in page.entries] == sorted(keys, key=utf8)


@pytest.mark.parametrize(
    ("prefix", "delimiter", "after", "max_keys", "expected", "truncated"), LISTING_TABLE
)
def test_list_objects_examples(
    harness: Harness,
    prefix: str,
    delimiter: str,
    after: str,
    max_keys: int,
    expected: list[Item],
    truncated: bool,
) -> None:
    bucket = harness.new_bucket()
    put_keys(harness, bucket, LISTING_KEYS)
    assert model_page(LISTING_KEYS, prefix, delimiter, after, max_keys) == (expected, truncated)
    page = harness.run(harness.store.list_objects(bucket, prefix, delimiter, after, max_keys))
    check_page(page, expected, truncated)


def test_unknown_bucket(harness: Harness) -> None:
    with pytest.raises(errors.NoSuchBucket):
        harness.run(harness.store.list_objects("no-such-bucket", "", "", "", 1000))
    with pytest.raises(errors.NoSuchBucket):
        harness.run(harness.store.list_uploads("no-such-bucket", "", "", "", "", 1000))


# --- multipart uploads: the same roll-up, ordered by key then initiation ------------------------


@SLOW
@given(args=listing_args(), max_uploads=st.sampled_from([1, 2, 3, 1000]), twice=st.booleans())
def test_list_uploads_pages_return_the_model_once(
    harness: Harness, args: tuple[list[str], str, str], max_uploads: int, twice: bool
) -> None:
    keys, prefix, delimiter = args
    bucket = harness.new_bucket()
    created: dict[str, list[str]] = {}
    for key in keys * (2 if twice else 1):  # several uploads of one key
        upload = harness.run(harness.store.create_upload(bucket, key, "owner", ObjectAttrs()))
        created.setdefault(key, []).append(upload.id)
    expected: list[tuple[str, str]] = []
    for kind, name in model_stream(keys, prefix, delimiter, ""):
        if kind == "key":
            expected += [("upload", upload_id) for upload_id in created[name]]
        else:
            expected.append(("prefix", name))
    got: list[tuple[str, str]] = []
    key_marker = upload_id_marker = ""
    for _ in range(2 * len(keys) + 2):
        page = harness.run(
            harness.store.list_uploads(
                bucket, prefix, delimiter, key_marker, upload_id_marker, max_uploads
            )
        )
        merged = [(u.key, 0, ("upload", u.id)) for u in page.uploads]
        merged += [(p, 1, ("prefix", p)) for p in page.common_prefixes]
        merged.sort(key=lambda m: (utf8(m[0]), m[1]))
        items = [item for _, _, item in merged]
        assert len(items) <= max_uploads
        got += items
        if not page.truncated:
            break
        assert items
        # The next markers, as ListMultipartUploads works them out.
        last_upload = page.uploads[-1] if page.uploads else None
        last_prefix = page.common_prefixes[-1] if page.common_prefixes else None
        if last_upload is not None and (last_prefix is None or last_upload.key > last_prefix):
            key_marker, upload_id_marker = last_upload.key, last_upload.id
        else:
            key_marker, upload_id_marker = last_prefix or "", ""
    else:
        pytest.fail(f"upload listing did not end: {got}")
    # Uploads of one key come in initiation order; their ids are opaque.
    assert got == expected
