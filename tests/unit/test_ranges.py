"""The Range header (RFC 7233, one range) against a table and an independent model."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.s3.errors import S3Error
from gateway.s3.ranges import parse_range

UNSATISFIABLE = "416"

# (header, object size, (start, length) | None | UNSATISFIABLE)
TABLE: list[tuple[str | None, int, tuple[int, int] | str | None]] = [
    (None, 10, None),
    ("bytes=0-9", 10, (0, 10)),
    ("bytes=0-0", 10, (0, 1)),
    ("bytes=9-9", 10, (9, 1)),
    ("bytes=2-5", 10, (2, 4)),
    ("bytes=5-100", 10, (5, 5)),  # the end is clamped to the last byte
    ("bytes=0-18446744073709551616", 10, (0, 10)),
    ("bytes=3-", 10, (3, 7)),  # open-ended
    ("bytes=0-", 10, (0, 10)),
    ("bytes=9-", 10, (9, 1)),
    ("bytes=-3", 10, (7, 3)),  # suffix: the last 3 bytes
    ("bytes=-10", 10, (0, 10)),
    ("bytes=-11", 10, (0, 10)),  # a suffix longer than the object is the whole object
    ("bytes=-99999999999999999999999", 10, (0, 10)),
    ("bytes=007-008", 10, (7, 2)),  # leading zeros are digits like any other
    (" bytes=1-2 ", 10, (1, 2)),  # surrounding whitespace (OWS) is allowed
    # unsatisfiable: 416 InvalidRange
    ("bytes=10-", 10, UNSATISFIABLE),
    ("bytes=10-20", 10, UNSATISFIABLE),
    ("bytes=99999999999999999999-", 10, UNSATISFIABLE),
    ("bytes=" + "9" * 4000 + "-", 10, UNSATISFIABLE),  # below Python's 4300-digit int limit
    ("bytes=-0", 10, UNSATISFIABLE),  # RFC 7233 2.1: a zero suffix selects nothing
    ("bytes=0-0", 0, UNSATISFIABLE),
    ("bytes=0-", 0, UNSATISFIABLE),
    ("bytes=-1", 0, UNSATISFIABLE),  # our choice for an empty object: no byte to send
    ("bytes=-0", 0, UNSATISFIABLE),
    # invalid syntax is ignored: the whole object
    ("bytes=5-3", 10, None),  # last < first
    ("bytes=50-30", 10, None),  # invalid before unsatisfiable
    # last < first past 20 digits, where both ends clamp to the same "huge" number
    ("bytes=100000000000000000001-100000000000000000000", 10, None),
    ("bytes=" + "9" * 41 + "-" + "9" * 40, 10, None),
    ("bytes=" + "9" * 40 + "-" + "0" * 5 + "9" * 40, 10, UNSATISFIABLE),  # equal: first == last
    ("bytes=-", 10, None),
    ("bytes=0-1,3-4", 10, None),  # S3 serves no multi-range
    ("bytes=-1,0-1", 10, None),
    ("bytes=1-2-3", 10, None),
    ("bytes 0-1", 10, None),
    ("bytes=a-b", 10, None),
    ("bytes=1.5-2", 10, None),
    ("bytes=--1", 10, None),
    ("bytes=+1-2", 10, None),
    ("bytes= 1-2", 10, None),
    ("items=0-1", 10, None),
    ("", 10, None),
    ("garbage", 10, None),
    ("bytes=", 10, None),
    ("bytes=0-1;x", 10, None),
]


def _ids() -> list[str]:
    return [f"{h!r:.40}@{n}" for h, n, _ in TABLE]


@pytest.mark.parametrize(("header", "size", "expected"), TABLE, ids=_ids())
def test_parse_range(header: str | None, size: int, expected: tuple[int, int] | str | None) -> None:
    if expected == UNSATISFIABLE:
        with pytest.raises(S3Error) as info:
            parse_range(header, size)
        assert info.value.code == "InvalidRange"
        assert info.value.status == 416
        assert info.value.fields == {"RangeRequested": header, "ActualObjectSize": str(size)}
    else:
        assert parse_range(header, size) == expected


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=" + "9" * 5000 + "-", UNSATISFIABLE),
        ("bytes=0-" + "9" * 5000, (0, 10)),
        ("bytes=-" + "9" * 5000, (0, 10)),
    ],
    ids=["huge-first", "huge-last", "huge-suffix"],
)
def test_huge_numbers_do_not_crash(header: str, expected: tuple[int, int] | str) -> None:
    # aiohttp accepts header values up to 8190 bytes, so a client can send this.
    if expected == UNSATISFIABLE:
        with pytest.raises(S3Error) as info:
            parse_range(header, 10)
        assert info.value.code == "InvalidRange"
    else:
        assert parse_range(header, 10) == expected


def test_non_ascii_digits_are_not_a_range() -> None:
    # ARABIC-INDIC DIGIT ZERO / NINE: not DIGIT in RFC 5234, so the header does not parse.
    assert parse_range("bytes=\u0660-\u0669", 100) is None


# --- property: agreement with a model of RFC 7233 ------------------------------------------------


def model(first: int | None, last: int | None, size: int) -> tuple[int, int] | str | None:
    """RFC 7233 2.1 for one byte-range-spec, written from the RFC rather than the module."""
    if first is None:  # suffix-byte-range-spec: the last `last` bytes
        assert last is not None
        if last == 0 or size == 0:
            return UNSATISFIABLE
        n = min(last, size)
        return (size - n, n)
    if last is not None and last < first:
        return None  # syntactically invalid: the header is ignored
    if first >= size:
        return UNSATISFIABLE
    stop = size if last is None else min(last + 1, size)  # exclusive
    return (first, stop - first)


_numbers = st.one_of(st.integers(0, 40), st.integers(0, 10**30))
_sizes = st.one_of(st.integers(0, 40), st.integers(0, 2**63))


@settings(max_examples=500, deadline=None)
# Found by hypothesis: both ends past 20 digits, last < first (it answered 416, not the object).
@example(size=10, form="a-b", a=100000000000000000001, b=100000000000000000000, zeros=0)
@given(
    size=_sizes,
    form=st.sampled_from(["a-b", "a-", "-n"]),
    a=_numbers,
    b=_numbers,
    zeros=st.integers(0, 3),
)
def test_parse_range_agrees_with_model(size: int, form: str, a: int, b: int, zeros: int) -> None:
    pad = "0" * zeros
    if form == "a-b":
        header, expected = f"bytes={pad}{a}-{pad}{b}", model(a, b, size)
    elif form == "a-":
        header, expected = f"bytes={pad}{a}-", model(a, None, size)
    else:
        header, expected = f"bytes=-{pad}{b}", model(None, b, size)
    if expected == UNSATISFIABLE:
        with pytest.raises(S3Error) as info:
            parse_range(header, size)
        assert info.value.code == "InvalidRange"
    else:
        got = parse_range(header, size)
        assert got == expected
        if got is not None:
            start, length = got
            assert start >= 0 and length >= 1 and start + length <= size


@settings(max_examples=300, deadline=None)
@given(header=st.text(st.sampled_from("bytes=-0123456789, \t,xX"), max_size=20), size=_sizes)
def test_any_header_is_a_range_none_or_416(header: str, size: int) -> None:
    try:
        got = parse_range(header, size)
    except S3Error as exc:
        assert exc.code == "InvalidRange"
        return
    if got is not None:
        start, length = got
        assert start >= 0 and length >= 1 and start + length <= size
