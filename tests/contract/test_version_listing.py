"""ListObjectVersions through the Store over each backend, against an in-memory model: versions
and delete markers in one sequence (keys in byte order, newest first within a key), common
prefixes, key and version-id markers, max-keys, IsLatest; and a listing of current objects
that older versions never show up in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.store.api import CatalogTx
from gateway.store.model import NULL_VERSION, ListEntry, ObjectAttrs, ObjectInfo, VersionsPage
from gateway.store.versions import new_version_id, seq_of
from tests.contract.conftest import Harness
from tests.contract.model import listing_args, model_stream, utf8
from tests.contract.test_listing import SLOW

MTIME = 1_700_000_000_000_000_000

# A key's versions, newest first: (version id, is a delete marker).
History = list[tuple[str, bool]]
# What a listing yields, in order: ("version", key, version id, marker, latest) or
# ("prefix", common prefix, "", False, False).
Row = tuple[str, str, str, bool, bool]


def store_histories(
    h: Harness, bucket: str, keys: list[str], shapes: list[list[bool]], null_at: list[int]
) -> dict[str, History]:
    """Write each key's versions straight through the catalog protocol, as the Store lays
    them out: the latest in the objects table when it is an object, the rest in the versions
    table. `shapes[i]`: key i's versions newest first, True for a marker; `null_at[i]`: which
    of them is the null version (-1: none)."""
    histories: dict[str, History] = {}
    rows: list[tuple[ObjectInfo, bool]] = []  # (version, current)
    for key, shape, null in zip(keys, shapes, null_at, strict=True):
        history: History = []
        for age, marker in enumerate(shape):
            mtime = MTIME + 1000 * (len(shape) - age)  # newer ones later
            version_id = NULL_VERSION if age == null else new_version_id(mtime)
            size = 0 if marker else len(key.encode())
            version = ObjectInfo(
                bucket,
                key,
                size,
                "" if marker else f"{size:032x}",
                mtime,
                ObjectAttrs(),
                (),
                version_id=version_id,
                delete_marker=marker,
            )
            rows.append((version, age == 0 and not marker))
            history.append((version_id, marker))
        histories[key] = history

    async def write(tx: CatalogTx) -> None:
        for version, current in rows:
            if current:
                assert await tx.insert_object(version)
            else:
                await tx.insert_version(version, seq_of(version))

    h.write(write)
    return histories


def model_rows(
    histories: dict[str, History], prefix: str, delimiter: str, key_marker: str, version: str
) -> list[Row]:
    """Everything a listing from (`key_marker`, `version`) yields, in order."""
    rows: list[Row] = []
    if key_marker and version:
        ids = [v for v, _ in histories[key_marker]]
        after = ids.index(version) + 1
        for age, (vid, marker) in enumerate(histories[key_marker]):
            if age >= after:
                rows.append(("version", key_marker, vid, marker, age == 0))
    for kind, name in model_stream(histories, prefix, delimiter, key_marker):
        if kind == "prefix":
            rows.append(("prefix", name, "", False, False))
            continue
        for age, (vid, marker) in enumerate(histories[name]):
            rows.append(("version", name, vid, marker, age == 0))
    return rows


def rows_of(page: VersionsPage) -> list[Row]:
    """The page's entries and common prefixes merged back into one sequence."""
    entries: list[tuple[tuple[bytes, int], Row]] = [
        ((utf8(e.key), n), ("version", e.key, e.version_id, e.delete_marker, e.is_latest))
        for n, e in enumerate(page.entries)
    ]
    prefixes = [((utf8(p), -1), ("prefix", p, "", False, False)) for p in page.common_prefixes]
    return [row for _, row in sorted(entries + prefixes, key=lambda pair: pair[0])]


histories_strategy = st.lists(st.lists(st.booleans(), min_size=1, max_size=4), max_size=40)


def drawn_bucket(
    h: Harness, keys: list[str], shapes: list[list[bool]], data: st.DataObject
) -> tuple[str, dict[str, History]]:
    """A new bucket holding `keys` with the drawn histories (a latest marker over an object
    for keys beyond them), a null version somewhere in some of them."""
    shapes = (shapes + [[True, False]] * len(keys))[: len(keys)]
    null_at = [data.draw(st.integers(-1, len(s) - 1), label="null") for s in shapes]
    bucket = h.new_bucket()
    return bucket, store_histories(h, bucket, keys, shapes, null_at)


@SLOW
@given(args=listing_args(), shapes=histories_strategy, data=st.data())
def test_version_pages_return_everything_once_in_order(
    harness: Harness,
    args: tuple[list[str], str, str],
    shapes: list[list[bool]],
    data: st.DataObject,
) -> None:
    keys, prefix, delimiter = args
    bucket, histories = drawn_bucket(harness, keys, shapes, data)
    max_keys = data.draw(st.sampled_from([1, 2, 3, 5, 1000]), label="max_keys")
    expected = model_rows(histories, prefix, delimiter, "", "")
    seen: list[Row] = []
    key_marker = version_marker = ""
    for _ in range(len(expected) + 2):
        page = harness.run(
            harness.store.list_versions(
                bucket, prefix, delimiter, key_marker, version_marker, max_keys
            )
        )
        got = rows_of(page)
        assert len(got) <= max_keys
        seen += got
        if not page.truncated:
            break
        # The next page starts after the last entry returned: its key and id, or the last
        # common prefix and no id.
        last = got[-1]
        assert (page.next_key, page.next_version_id) == (
            (last[1], last[2]) if last[0] == "version" else (last[1], None)
        )
        key_marker, version_marker = page.next_key or "", page.next_version_id or ""
    assert seen == expected


@SLOW
@given(args=listing_args(), shapes=histories_strategy, data=st.data())
def test_a_page_from_any_marker_matches_the_model(
    harness: Harness,
    args: tuple[list[str], str, str],
    shapes: list[list[bool]],
    data: st.DataObject,
) -> None:
    keys, prefix, delimiter = args
    bucket, histories = drawn_bucket(harness, keys, shapes, data)
    # A key marker alone (any key, listed or not), or a key and one of its versions.
    key_marker = data.draw(st.sampled_from(["", *keys]), label="key_marker")
    version = ""
    if key_marker and data.draw(st.booleans(), label="with version"):
        cut = key_marker.find(delimiter, len(prefix)) if delimiter else -1
        if key_marker.startswith(prefix) and cut < 0:  # a key listed as itself
            version = data.draw(st.sampled_from([v for v, _ in histories[key_marker]]))
    max_keys = data.draw(st.sampled_from([0, 1, 2, 4, 1000]), label="max_keys")
    page = harness.run(
        harness.store.list_versions(bucket, prefix, delimiter, key_marker, version, max_keys)
    )
    stream = model_rows(histories, prefix, delimiter, key_marker, version)
    assert rows_of(page) == stream[:max_keys]
    assert page.truncated is (len(stream) > max_keys > 0)


def test_current_objects_listing_ignores_older_versions_and_markers(harness: Harness) -> None:
    h = harness
    bucket = h.new_bucket()
    keys = ["a", "b", "c/1", "c/2", "d"]
    # b's latest is a marker; every other key has two older versions under its latest.
    shapes = [[False, False, True], [True, False], [False, True, False], [False], [False, False]]
    store_histories(h, bucket, keys, shapes, [-1, 1, 2, 0, -1])
    page = h.run(h.store.list_objects(bucket, "", "/", "", 1000))
    assert [e.key for e in page.entries] == ["a", "d"] and page.common_prefixes == ("c/",)
    page = h.run(h.store.list_objects(bucket, "", "", "", 1000))
    assert [e.key for e in page.entries] == ["a", "c/1", "c/2", "d"]
    assert all(isinstance(e, ListEntry) and e.is_latest for e in page.entries)
