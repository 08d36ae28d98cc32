"""An in-memory model of S3's listing, and the keys the listing properties are drawn from."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import strategies as st

from gateway.store.model import ListPage

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
