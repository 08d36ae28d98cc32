"""MD5 and ETags: checked against hashlib and hand computations."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import digest

EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"


def test_md5_is_a_fresh_md5_digest() -> None:
    d = digest.md5()
    assert d.hexdigest() == EMPTY_MD5
    d.update(b"hello ")
    d.update(memoryview(b"world"))
    assert d.hexdigest() == hashlib.md5(b"hello world").hexdigest()
    assert d.digest() == hashlib.md5(b"hello world").digest()
    assert digest.md5().hexdigest() == EMPTY_MD5  # not shared state


def test_md5_of() -> None:
    # s3-tests test_object_write_check_etag: "bar"
    assert digest.md5_of(b"bar").hexdigest() == "37b51d194a7513e45b56f6524f2d51f2"
    assert digest.md5_of(bytearray(b"012345678")).hexdigest() == "22975d8a5ed1b91445f6c55ac121505b"


@pytest.mark.parametrize(
    ("quoted", "plain"),
    [
        (f'"{EMPTY_MD5}"', EMPTY_MD5),
        (EMPTY_MD5, EMPTY_MD5),
        (f'  "{EMPTY_MD5}"  ', EMPTY_MD5),
        (f'W/"{EMPTY_MD5}"', EMPTY_MD5),
        (f' W/"{EMPTY_MD5}-3"', f"{EMPTY_MD5}-3"),
        ('""', ""),
        ("*", "*"),
    ],
)
def test_unquote(quoted: str, plain: str) -> None:
    assert digest.unquote(quoted) == plain


def test_quote() -> None:
    assert digest.quote(EMPTY_MD5) == f'"{EMPTY_MD5}"'


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(blacklist_characters='"'), max_size=40).map(str.strip))
def test_unquote_inverts_quote(etag: str) -> None:
    assert digest.unquote(digest.quote(etag)) == etag


@pytest.mark.parametrize(
    ("etag", "plain"),
    [
        (EMPTY_MD5, True),
        ("0" * 32, True),
        (None, False),
        ("", False),
        (EMPTY_MD5.upper(), False),  # we write lower-case hex; anything else is not ours
        (EMPTY_MD5[:-1], False),
        (EMPTY_MD5 + "0", False),
        (f"{EMPTY_MD5}-2", False),
        (f'"{EMPTY_MD5}"', False),
        ("g" * 32, False),
        (EMPTY_MD5 + "\n", False),
    ],
)
def test_is_plain(etag: str | None, plain: bool) -> None:
    assert digest.is_plain(etag) is plain


def test_multipart_etag_by_hand() -> None:
    parts = [b"a" * 5 * 1024 * 1024, b"b" * 5 * 1024 * 1024, b"tail"]
    binary = [hashlib.md5(p).digest() for p in parts]
    expected = hashlib.md5(b"".join(binary)).hexdigest() + "-3"
    assert digest.multipart_etag(binary) == expected
    # Not the MD5 of the hex strings, nor of the data.
    assert digest.multipart_etag(binary) != (
        hashlib.md5("".join(hashlib.md5(p).hexdigest() for p in parts).encode()).hexdigest() + "-3"
    )
    assert not digest.multipart_etag(binary).startswith(hashlib.md5(b"".join(parts)).hexdigest())


def test_multipart_etag_known_value() -> None:
    # One part "1": md5(md5(b"1").digest()) computed independently.
    one = bytes.fromhex("c4ca4238a0b923820dcc509a6f75849b")
    assert digest.multipart_etag([one]) == hashlib.md5(one).hexdigest() + "-1"
    assert digest.multipart_etag(iter([one, one])) == hashlib.md5(one + one).hexdigest() + "-2"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=20))
def test_multipart_etag_property(parts: list[bytes]) -> None:
    md5s = [hashlib.md5(p).digest() for p in parts]
    etag = digest.multipart_etag(md5s)
    assert etag == f"{hashlib.md5(b''.join(md5s)).hexdigest()}-{len(parts)}"
    assert not digest.is_plain(etag)


@pytest.mark.parametrize(
    ("condition", "etag", "matched"),
    [
        (EMPTY_MD5, EMPTY_MD5, True),
        (f'"{EMPTY_MD5}"', EMPTY_MD5, True),
        (f'W/"{EMPTY_MD5}"', EMPTY_MD5, True),
        ("*", EMPTY_MD5, True),
        ("*", f"{EMPTY_MD5}-4", True),
        (f'"x", "{EMPTY_MD5}"', EMPTY_MD5, True),
        (f'"x",{EMPTY_MD5}', EMPTY_MD5, True),
        ('"x", "y", "*"', EMPTY_MD5, True),
        (f'"{EMPTY_MD5}-2"', f"{EMPTY_MD5}-2", True),
        ('"x"', EMPTY_MD5, False),
        ('"x", "y"', EMPTY_MD5, False),
        ("", EMPTY_MD5, False),
        (f'"{EMPTY_MD5}"', f"{EMPTY_MD5}-2", False),
        (f'"{EMPTY_MD5}-2"', EMPTY_MD5, False),
        (f'"{EMPTY_MD5.upper()}"', EMPTY_MD5, False),
        (f'"{EMPTY_MD5[:-1]}"', EMPTY_MD5, False),
    ],
)
def test_matches(condition: str, etag: str, matched: bool) -> None:
    assert digest.matches(condition, etag) is matched


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=0, max_size=6),
    cuts=st.lists(st.integers(0, 300), max_size=8),
)
def test_part_digests_match_each_slice(sizes: list[int], cuts: list[int]) -> None:
    """However the stream is chunked, each part's digest is the MD5 of exactly its bytes
    (empty parts included)."""
    data = bytes(range(256))[: sum(sizes)]
    parts = digest.PartDigests(sizes, digest.md5)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for lo, hi in itertools.pairwise(bounds):
        parts.update(data[lo:hi])
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    assert parts.digests() == [
        hashlib.md5(data[s : s + n]).digest() for s, n in zip(starts, sizes, strict=True)
    ]


def test_part_digests_of_a_short_stream_hold_only_the_full_parts() -> None:
    parts = digest.PartDigests([3, 3], digest.md5)
    parts.update(b"abcd")
    assert parts.digests() == [hashlib.md5(b"abc").digest()]
