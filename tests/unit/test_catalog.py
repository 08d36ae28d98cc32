"""The SQLite catalog: blob reference counts, and listing against an in-memory model of S3."""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
from collections.abc import Iterable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.store import catalog, errors
from gateway.store.model import Bucket, Extent, ListPage, ObjectAttrs, ObjectInfo, StagedBlob

MTIME = 1_700_000_000_000_000_000


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """One catalog for the module; every test (and every hypothesis example) uses new buckets."""
    path = tmp_path_factory.mktemp("catalog") / "catalog.sqlite3"
    catalog.initialise(path)
    connection = catalog.connect(path)
    # Each example commits; fsync on every one would make the property tests slow.
    connection.execute("PRAGMA synchronous=OFF")
    yield connection
    connection.close()


_bucket_names = (f"bucket-{n}" for n in itertools.count())


def new_bucket(conn: sqlite3.Connection) -> str:
    name = next(_bucket_names)
    with transaction(conn):
        catalog.create_bucket(conn, Bucket(name, "owner", "us-east-1", MTIME))
    return name


class transaction:
    """BEGIN ... COMMIT, or ROLLBACK if the block raises."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN")
        return self.conn

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


def obj(bucket: str, key: str, extents: Iterable[Extent] = ()) -> ObjectInfo:
    extents = tuple(extents)
    size = sum(e.length for e in extents) or len(key.encode())
    return ObjectInfo(
        bucket=bucket,
        key=key,
        size=size,
        etag=hashlib.md5(key.encode()).hexdigest(),
        mtime_ns=MTIME + size,
        attrs=ObjectAttrs(),
        extents=extents,
    )


# --- buckets ------------------------------------------------------------------------------------


def test_create_bucket_twice(conn: sqlite3.Connection) -> None:
    name = new_bucket(conn)
    with transaction(conn), pytest.raises(errors.BucketAlreadyOwnedByYou):
        catalog.create_bucket(conn, Bucket(name, "owner", "us-east-1", MTIME))
    with transaction(conn), pytest.raises(errors.BucketAlreadyExists):
        catalog.create_bucket(conn, Bucket(name, "someone-else", "us-east-1", MTIME))
    assert catalog.get_bucket(conn, name) == Bucket(name, "owner", "us-east-1", MTIME)


def test_unknown_bucket(conn: sqlite3.Connection) -> None:
    with pytest.raises(errors.NoSuchBucket):
        catalog.list_objects(conn, "no-such-bucket")
    with transaction(conn), pytest.raises(errors.NoSuchBucket):
        catalog.put_object(conn, obj("no-such-bucket", "k"))
    with transaction(conn), pytest.raises(errors.NoSuchBucket):
        catalog.delete_objects(conn, "no-such-bucket", ["k"])


# --- reference counts ---------------------------------------------------------------------------


def staged(blob_id: str, size: int = 10, data: bytes | None = None) -> StagedBlob:
    return StagedBlob(blob_id, size, hashlib.md5(data or b"").digest(), data)


def refs(conn: sqlite3.Connection, blob_id: str) -> int | None:
    row = conn.execute("SELECT refs FROM blobs WHERE id = ?", (blob_id,)).fetchone()
    return None if row is None else row[0]


_blob_ids = (f"blob-{n}" for n in itertools.count())


def test_shared_blob_survives_until_the_last_reference(conn: sqlite3.Connection) -> None:
    b = new_bucket(conn)
    f, g = next(_blob_ids), next(_blob_ids)
    extents = (Extent(f, 0, 10),)
    with transaction(conn):
        assert catalog.put_object(conn, obj(b, "a", extents), [staged(f)]) == []
    with transaction(conn):  # a copy: same extents, no new blob
        assert catalog.put_object(conn, obj(b, "b", extents)) == []
    assert refs(conn, f) == 2

    # Replacing one of them by other bytes keeps the blob for the other.
    with transaction(conn):
        assert catalog.put_object(conn, obj(b, "a", [Extent(g, 0, 5)]), [staged(g, 5)]) == []
    assert (refs(conn, f), refs(conn, g)) == (1, 1)

    # Deleting the last object that uses it releases the blob file.
    with transaction(conn):
        assert catalog.delete_objects(conn, b, ["b"]) == [f]
    assert refs(conn, f) is None
    with transaction(conn):
        assert catalog.delete_objects(conn, b, ["a", "a", "missing"]) == [g]
    assert refs(conn, g) is None
    assert catalog.get_object(conn, b, "a") is None


def test_deleting_one_of_two_keeps_the_blob(conn: sqlite3.Connection) -> None:
    b = new_bucket(conn)
    f = next(_blob_ids)
    extents = (Extent(f, 0, 10),)
    with transaction(conn):
        catalog.put_object(conn, obj(b, "a", extents), [staged(f)])
        catalog.put_object(conn, obj(b, "b", extents))
    with transaction(conn):
        assert catalog.delete_objects(conn, b, ["a"]) == []
    assert refs(conn, f) == 1
    info = catalog.get_object(conn, b, "b")
    assert info is not None and info.extents == extents
    with transaction(conn):
        assert catalog.delete_objects(conn, b, ["b"]) == [f]
    assert refs(conn, f) is None


def test_inline_blobs_are_not_files_to_unlink(conn: sqlite3.Connection) -> None:
    b = new_bucket(conn)
    i = next(_blob_ids)
    extents = (Extent(i, 0, 3),)
    with transaction(conn):
        catalog.put_object(conn, obj(b, "a", extents), [staged(i, 3, b"abc")])
        catalog.put_object(conn, obj(b, "b", extents))
    assert catalog.read_inline(conn, [i, i]) == {i: b"abc"}
    with transaction(conn):
        assert catalog.delete_objects(conn, b, ["a", "b"]) == []
    assert refs(conn, i) is None  # the row (and the bytes in it) are gone nonetheless
    assert catalog.read_inline(conn, [i]) == {}


def test_several_extents_of_one_blob(conn: sqlite3.Connection) -> None:
    b = new_bucket(conn)
    f = next(_blob_ids)
    extents = (Extent(f, 0, 4), Extent(f, 4, 6), Extent(f, 0, 10))
    with transaction(conn):
        catalog.put_object(conn, obj(b, "a", extents), [staged(f)])
    assert refs(conn, f) == 3
    with transaction(conn):  # fewer references to the same blob
        assert catalog.put_object(conn, obj(b, "a", extents[:1])) == []
    assert refs(conn, f) == 1
    with transaction(conn):
        assert catalog.delete_objects(conn, b, ["a"]) == [f]  # once, not once per extent
    assert refs(conn, f) is None


def test_replacing_an_object_by_itself_never_drops_the_blob_to_zero(
    conn: sqlite3.Connection,
) -> None:
    b = new_bucket(conn)
    f, i = next(_blob_ids), next(_blob_ids)
    extents = (Extent(f, 0, 10), Extent(i, 0, 2))
    with transaction(conn):
        catalog.put_object(conn, obj(b, "a", extents), [staged(f), staged(i, 2, b"hi")])
    # Record every reference count the blobs go through, and any deletion of them.
    conn.executescript(
        """
        CREATE TEMP TABLE IF NOT EXISTS refs_log (id TEXT, refs INTEGER);
        DELETE FROM refs_log;
        CREATE TEMP TRIGGER IF NOT EXISTS log_update AFTER UPDATE OF refs ON blobs
        BEGIN INSERT INTO refs_log VALUES (NEW.id, NEW.refs); END;
        CREATE TEMP TRIGGER IF NOT EXISTS log_delete AFTER DELETE ON blobs
        BEGIN INSERT INTO refs_log VALUES (OLD.id, -1); END;
        """
    )
    try:
        with transaction(conn):  # CopyObject onto itself with REPLACE: same manifest
            assert catalog.put_object(conn, obj(b, "a", extents)) == []
        log = conn.execute("SELECT id, refs FROM refs_log").fetchall()
    finally:
        conn.executescript("DROP TRIGGER log_update; DROP TRIGGER log_delete; DROP TABLE refs_log;")
    assert {blob for blob, _ in log} == {f, i}
    assert min(n for _, n in log) >= 1, log
    assert (refs(conn, f), refs(conn, i)) == (1, 1)
    assert catalog.read_inline(conn, [i]) == {i: b"hi"}


def test_retain_of_a_released_blob_is_source_changed(conn: sqlite3.Connection) -> None:
    b = new_bucket(conn)
    f = next(_blob_ids)
    with transaction(conn):
        catalog.put_object(conn, obj(b, "a", [Extent(f, 0, 10)]), [staged(f)])
    with transaction(conn):
        catalog.delete_objects(conn, b, ["a"])
    # A copy that read the old manifest must not resurrect (or silently miss) the blob.
    with transaction(conn), pytest.raises(errors.SourceChanged):
        catalog.put_object(conn, obj(b, "copy", [Extent(f, 0, 10)]))
    assert catalog.get_object(conn, b, "copy") is None


def test_release_returns_only_blobs_reaching_zero(conn: sqlite3.Connection) -> None:
    f, g, i = next(_blob_ids), next(_blob_ids), next(_blob_ids)
    with transaction(conn):
        catalog.retain(
            conn,
            [Extent(f, 0, 1), Extent(f, 1, 1), Extent(g, 0, 1), Extent(i, 0, 1)],
            [staged(f), staged(g), staged(i, 1, b"x")],
        )
        released = catalog.release(
            conn, [Extent(f, 0, 1), Extent(g, 0, 1), Extent(i, 0, 1), Extent("unknown", 0, 1)]
        )
    assert released == [g]
    assert (refs(conn, f), refs(conn, g), refs(conn, i)) == (1, None, None)


# --- listing: an in-memory model of S3 ----------------------------------------------------------

Item = tuple[str, str]  # ("key", key) or ("prefix", common prefix)


def utf8(s: str) -> bytes:
    return s.encode()


def model_stream(keys: Iterable[str], prefix: str, delimiter: str, after: str) -> list[Item]:
    """Every key and common prefix a listing from `after` returns, in order."""
    # A marker that is itself a common prefix (one a previous page returned) skips the keys it
    # rolled up, or the next page would return it again.
    skip: str | None = None
    if delimiter and after.startswith(prefix):
        i = after.find(delimiter, len(prefix))
        if i >= 0 and i + len(delimiter) == len(after):
            skip = after
    items: list[Item] = []
    seen: set[str] = set()
    for key in sorted(keys, key=utf8):
        if not key.startswith(prefix) or utf8(key) <= utf8(after):
            continue
        if skip is not None and key.startswith(skip):
            continue
        i = key.find(delimiter, len(prefix)) if delimiter else -1
        if i < 0:
            items.append(("key", key))
            continue
        common = key[: i + len(delimiter)]
        if common not in seen:
            seen.add(common)
            items.append(("prefix", common))
    return items


def model_page(
    keys: Iterable[str], prefix: str, delimiter: str, after: str, max_keys: int
) -> tuple[list[Item], bool]:
    stream = model_stream(keys, prefix, delimiter, after)
    if max_keys <= 0:
        return [], False
    return stream[:max_keys], len(stream) > max_keys


def items_of(page: ListPage) -> list[Item]:
    """The page's keys and common prefixes merged back into one stream, in byte order."""
    merged = [("key", e.key) for e in page.entries] + [("prefix", p) for p in page.common_prefixes]
    return sorted(merged, key=lambda item: utf8(item[1]))


def check_page(page: ListPage, expected: list[Item], truncated: bool) -> None:
    assert items_of(page) == expected
    # Each list is in byte order on its own (not just once merged).
    assert [utf8(e.key) for e in page.entries] == sorted(utf8(e.key) for e in page.entries)
    assert [utf8(p) for p in page.common_prefixes] == sorted(map(utf8, page.common_prefixes))
    assert page.truncated is truncated
    assert page.last == (expected[-1][1] if expected else None)


def put_keys(conn: sqlite3.Connection, bucket: str, keys: Iterable[str]) -> None:
    with transaction(conn):
        for key in keys:
            catalog.put_object(conn, obj(bucket, key))


# Characters chosen for their UTF-8 byte order: ASCII below and above '/', 2-, 3- and 4-byte
# sequences, U+E000..U+FFFF (above the surrogates, so UTF-16 order would put them after
# astral characters while UTF-8 puts them before), and astral characters such as emoji.
ALPHABET = ["a", "b", "/", "-", "0", "~", "\x7f", "\u00e9", "\u20ac", "\ue000", "\uff61"]
ALPHABET += ["\U0001f600", "\U00010000"]
# The ends of the byte range: NUL, and the highest code points of each UTF-8 length (U+00FF,
# U+FFFF, U+10FFFF: a prefix's successor is computed on bytes, never on text).
ALPHABET += ["\x00", "\u00ff", "\uffff", "\U0010ffff"]
DELIMITERS = ["", "/", "//", "a/", "-/", "\u00e9", "\U0001f600", "ab", "\uff61\U0001f600"]
DELIMITERS += ["\U0010ffff", "\x00"]

keys_strategy = st.lists(
    st.text(st.sampled_from(ALPHABET), min_size=1, max_size=7), unique=True, max_size=30
)


@st.composite
def listing_args(draw: st.DrawFn) -> tuple[list[str], str, str]:
    keys = draw(keys_strategy)
    delimiter = draw(st.sampled_from(DELIMITERS))
    # Keys that contain the delimiter at odd places, and keys that are prefixes of others.
    extra = draw(
        st.lists(
            st.tuples(st.sampled_from(keys or ["k"]), st.integers(0, 7), st.booleans()),
            max_size=8,
        )
    )
    for key, at, insert in extra:
        # Either the delimiter inserted somewhere, or a prefix of an existing key.
        key = key[:at] + delimiter + key[at:] if insert and delimiter else key[: max(at, 1)]
        if key not in keys:
            keys.append(key)
    prefix = draw(
        st.one_of(
            st.just(""),
            st.sampled_from(keys or [""]).flatmap(
                lambda k: st.integers(0, len(k)).map(lambda n: k[:n])
            ),
            st.text(st.sampled_from(ALPHABET), max_size=2),
        )
    )
    return keys, prefix, delimiter


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=listing_args(), data=st.data())
def test_list_objects_page_matches_model(
    conn: sqlite3.Connection, args: tuple[list[str], str, str], data: st.DataObject
) -> None:
    keys, prefix, delimiter = args
    bucket = new_bucket(conn)
    put_keys(conn, bucket, keys)
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
    page = catalog.list_objects(conn, bucket, prefix, delimiter, after, max_keys)
    expected, truncated = model_page(keys, prefix, delimiter, after, max_keys)
    check_page(page, expected, truncated)
    # Entries carry their object's size, ETag and mtime.
    for entry in page.entries:
        info = obj(bucket, entry.key)
        assert (entry.size, entry.etag, entry.mtime_ns) == (info.size, info.etag, info.mtime_ns)


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=listing_args(), max_keys=st.sampled_from([1, 2, 3, 4, 5, 1000]))
def test_list_objects_pagination_returns_everything_once(
    conn: sqlite3.Connection, args: tuple[list[str], str, str], max_keys: int
) -> None:
    keys, prefix, delimiter = args
    bucket = new_bucket(conn)
    put_keys(conn, bucket, keys)
    expected = model_stream(keys, prefix, delimiter, "")

    got: list[Item] = []
    after = ""
    for _ in range(len(keys) + 2):  # more pages than items means the listing loops
        page = catalog.list_objects(conn, bucket, prefix, delimiter, after, max_keys)
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
    assert len({name for _, name in got}) == len(got)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(keys=keys_strategy, other=keys_strategy)
def test_list_objects_sees_only_its_bucket(
    conn: sqlite3.Connection, keys: list[str], other: list[str]
) -> None:
    bucket, neighbour = new_bucket(conn), new_bucket(conn)
    put_keys(conn, bucket, keys)
    put_keys(conn, neighbour, other)
    page = catalog.list_objects(conn, bucket)
    assert [e.key for e in page.entries] == sorted(keys, key=utf8)


# Worked examples, to read alongside the model.
LISTING_KEYS = ["a", "a/", "a/1", "a/2/x", "a//b", "ab", "b/1", "b/2", "c", "\U0001f600", "\uff61"]
LISTING_TABLE: list[tuple[str, str, str, int, list[Item], bool]] = [
    # prefix, delimiter, after, max_keys -> items, truncated
    (
        "",
        "/",
        "",
        1000,
        [
            ("key", "a"),
            ("prefix", "a/"),
            ("key", "ab"),
            ("prefix", "b/"),
            ("key", "c"),
            ("key", "\uff61"),  # U+FF61 is 3 bytes, 0xEF...: before the 4-byte emoji
            ("key", "\U0001f600"),
        ],
        False,
    ),
    ("", "/", "", 2, [("key", "a"), ("prefix", "a/")], True),
    ("", "/", "a/", 2, [("key", "ab"), ("prefix", "b/")], True),  # after a common prefix
    ("", "/", "a/1", 2, [("prefix", "a/"), ("key", "ab")], True),  # after a key inside one
    ("", "/", "b/", 1000, [("key", "c"), ("key", "\uff61"), ("key", "\U0001f600")], False),
    # "/" (0x2F) sorts before "1" (0x31): "a//" comes before "a/1".
    (
        "a/",
        "/",
        "",
        1000,
        [("key", "a/"), ("prefix", "a//"), ("key", "a/1"), ("prefix", "a/2/")],
        False,
    ),
    ("a", "/", "", 1000, [("key", "a"), ("prefix", "a/"), ("key", "ab")], False),
    ("a/", "", "a/1", 1000, [("key", "a/2/x")], False),  # "a//b" < "a/1"
    ("", "", "", 0, [], False),  # s3-tests test_bucket_list_maxkeys_zero
    ("", "/", "", 0, [], False),
    ("z", "/", "", 1000, [], False),
    ("", "", "\U0001f600", 1000, [], False),
    ("b", "/", "", 1, [("prefix", "b/")], False),
    (
        "",
        "//",
        "",
        1000,
        [
            ("key", "a"),
            ("key", "a/"),
            ("prefix", "a//"),
            ("key", "a/1"),
            ("key", "a/2/x"),
            ("key", "ab"),
            ("key", "b/1"),
            ("key", "b/2"),
            ("key", "c"),
            ("key", "\uff61"),
            ("key", "\U0001f600"),
        ],
        False,
    ),
]


@pytest.mark.parametrize(
    ("prefix", "delimiter", "after", "max_keys", "expected", "truncated"), LISTING_TABLE
)
def test_list_objects_examples(
    conn: sqlite3.Connection,
    prefix: str,
    delimiter: str,
    after: str,
    max_keys: int,
    expected: list[Item],
    truncated: bool,
) -> None:
    bucket = new_bucket(conn)
    put_keys(conn, bucket, LISTING_KEYS)
    assert model_page(LISTING_KEYS, prefix, delimiter, after, max_keys) == (expected, truncated)
    check_page(
        catalog.list_objects(conn, bucket, prefix, delimiter, after, max_keys), expected, truncated
    )
