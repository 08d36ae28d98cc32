"""Conditional requests: RFC 7232 evaluation order with AWS's documented outcomes."""

from __future__ import annotations

from email.utils import formatdate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.s3.conditions import evaluate
from gateway.s3.errors import S3Error

ETAG = "9e107d9d372bb6826bd81d3542a419d6"
OTHER = "e4d909c290d0fb1ca068ffaddf22cbd0"
# Last modified at 1_700_000_000.75 s: Last-Modified says 1_700_000_000 (whole seconds).
SECONDS = 1_700_000_000
MTIME_NS = SECONDS * 1_000_000_000 + 750_000_000
COPY = "x-amz-copy-source-"


# A day after now for as long as this code lives, and the same on every collection (test ids).
FUTURE = 4102444800  # 2100-01-01


def date(seconds: float) -> str:
    return formatdate(seconds, usegmt=True)


AT = date(SECONDS)  # the object's Last-Modified
BEFORE = date(SECONDS - 1)
AFTER = date(SECONDS + 1)


def check(headers: dict[str, str], prefix: str = "") -> bool | str:
    """True (proceed), False (304) or the Condition of the 412."""
    try:
        return evaluate(headers, ETAG, MTIME_NS, prefix)
    except S3Error as exc:
        assert exc.code == "PreconditionFailed"
        assert exc.status == 412
        return exc.fields["Condition"]


# (headers, outcome): True = proceed, False = 304 Not Modified, str = 412 with that Condition.
GET_TABLE: list[tuple[dict[str, str], bool | str]] = [
    ({}, True),
    # If-Match: quoted, unquoted, weak, lists, *
    ({"if-match": f'"{ETAG}"'}, True),
    ({"if-match": ETAG}, True),
    ({"if-match": f'W/"{ETAG}"'}, True),
    ({"if-match": f' "{ETAG}" '}, True),
    ({"if-match": f'"{OTHER}", "{ETAG}"'}, True),
    ({"if-match": f'"{OTHER}",W/"{ETAG}"'}, True),
    ({"if-match": "*"}, True),
    ({"if-match": f'"{OTHER}"'}, "If-Match"),
    ({"if-match": f'"{OTHER}", "{OTHER[::-1]}"'}, "If-Match"),
    ({"if-match": f'"{ETAG.upper()}"'}, "If-Match"),  # ETags compare exactly
    ({"if-match": f'"{ETAG}-1"'}, "If-Match"),
    # If-Unmodified-Since, whole seconds: equal to Last-Modified holds
    ({"if-unmodified-since": AT}, True),
    ({"if-unmodified-since": AFTER}, True),
    ({"if-unmodified-since": BEFORE}, "If-Unmodified-Since"),
    # If-None-Match
    ({"if-none-match": f'"{ETAG}"'}, False),
    ({"if-none-match": ETAG}, False),
    ({"if-none-match": f'W/"{ETAG}"'}, False),  # weak comparison (RFC 7232 3.2)
    ({"if-none-match": f'"{OTHER}", "{ETAG}"'}, False),
    ({"if-none-match": "*"}, False),
    ({"if-none-match": f'"{OTHER}"'}, True),
    # If-Modified-Since, whole seconds: equal to Last-Modified is not modified
    ({"if-modified-since": AT}, False),
    ({"if-modified-since": AFTER}, False),
    ({"if-modified-since": BEFORE}, True),
    # AWS: If-Match true and If-Unmodified-Since false -> 200
    ({"if-match": f'"{ETAG}"', "if-unmodified-since": BEFORE}, True),
    ({"if-match": f'"{OTHER}"', "if-unmodified-since": AFTER}, "If-Match"),
    # AWS: If-None-Match false and If-Modified-Since true -> 304
    ({"if-none-match": f'"{ETAG}"', "if-modified-since": BEFORE}, False),
    # If-None-Match true: If-Modified-Since is not consulted (RFC 7232 3.3)
    ({"if-none-match": f'"{OTHER}"', "if-modified-since": AT}, True),
    # 412 comes before 304
    ({"if-match": f'"{OTHER}"', "if-none-match": f'"{ETAG}"'}, "If-Match"),
    ({"if-match": f'"{OTHER}"', "if-modified-since": AT}, "If-Match"),
    ({"if-unmodified-since": BEFORE, "if-none-match": f'"{ETAG}"'}, "If-Unmodified-Since"),
    ({"if-unmodified-since": BEFORE, "if-modified-since": AT}, "If-Unmodified-Since"),
    # all four, all true: proceed
    (
        {
            "if-match": ETAG,
            "if-unmodified-since": AT,
            "if-none-match": OTHER,
            "if-modified-since": BEFORE,
        },
        True,
    ),
    # Dates that do not parse are ignored
    ({"if-unmodified-since": "yesterday"}, True),
    ({"if-unmodified-since": "2001-01-01T00:00:00Z"}, True),
    ({"if-unmodified-since": ""}, True),
    ({"if-modified-since": "garbage"}, True),
    # (each of these, were it read as a date, would be after Last-Modified: a 304)
    ({"if-modified-since": "Thu, 32 Nov 2023 25:61:61 GMT"}, True),
    ({"if-modified-since": "Wed, 15 Nov 2023 00:00:00"}, True),  # no zone: not an HTTP-date
    ({"if-modified-since": "2023-11-15T00:00:00Z"}, True),
    # Dates in the future are ignored (an If-Modified-Since from the future would be a 304)
    ({"if-modified-since": date(FUTURE)}, True),
    ({"if-modified-since": "Fri, 01 Jan 9999 00:00:00 GMT"}, True),
    # Other HTTP-date spellings that do parse
    ({"if-modified-since": "Tuesday, 14-Nov-23 22:13:20 GMT"}, False),  # RFC 850
    ({"if-modified-since": "Tue, 14 Nov 2023 22:13:20 +0000"}, False),
    ({"if-unmodified-since": "Tue, 14 Nov 2023 23:13:19 +0100"}, "If-Unmodified-Since"),
    # Header names in other prefixes are not ours
    ({COPY + "if-match": f'"{OTHER}"'}, True),
    ({COPY + "if-none-match": f'"{ETAG}"'}, True),
]


@pytest.mark.parametrize(("headers", "outcome"), GET_TABLE, ids=[str(h) for h, _ in GET_TABLE])
def test_get_preconditions(headers: dict[str, str], outcome: bool | str) -> None:
    assert check(headers) == outcome


def test_last_modified_spellings_agree() -> None:
    # The table's RFC 850 and numeric-zone dates are the object's own second.
    assert date(SECONDS) == "Tue, 14 Nov 2023 22:13:20 GMT"


# CopyObject / UploadPartCopy: the same headers prefixed by x-amz-copy-source-, and a
# not-modified outcome is a 412 naming the condition (AWS CopyObject docs; LocalStack's
# test_s3_copy_object_preconditions recorded against AWS).
COPY_TABLE: list[tuple[dict[str, str], bool | str]] = [
    ({}, True),
    ({"if-match": f'"{OTHER}"', "if-none-match": ETAG}, True),  # unprefixed: ignored
    ({COPY + "if-match": f'"{ETAG}"'}, True),
    ({COPY + "if-match": f'"{OTHER}"'}, COPY + "If-Match"),
    ({COPY + "if-unmodified-since": BEFORE}, COPY + "If-Unmodified-Since"),
    ({COPY + "if-unmodified-since": AT}, True),
    ({COPY + "if-none-match": f'"{ETAG}"'}, COPY + "If-None-Match"),
    ({COPY + "if-none-match": "*"}, COPY + "If-None-Match"),
    ({COPY + "if-none-match": f'"{OTHER}"'}, True),
    ({COPY + "if-modified-since": AT}, COPY + "If-Modified-Since"),
    ({COPY + "if-modified-since": BEFORE}, True),
    ({COPY + "if-modified-since": date(FUTURE)}, True),
    # AWS: if-match true and if-unmodified-since false -> copy
    ({COPY + "if-match": ETAG, COPY + "if-unmodified-since": BEFORE}, True),
    # AWS: if-none-match false and if-modified-since true -> 412
    (
        {COPY + "if-none-match": ETAG, COPY + "if-modified-since": BEFORE},
        COPY + "If-None-Match",
    ),
    # The order AWS checks them in: If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since
    ({COPY + "if-match": OTHER, COPY + "if-none-match": ETAG}, COPY + "If-Match"),
    (
        {COPY + "if-unmodified-since": BEFORE, COPY + "if-none-match": ETAG},
        COPY + "If-Unmodified-Since",
    ),
    (
        {COPY + "if-unmodified-since": BEFORE, COPY + "if-modified-since": AT},
        COPY + "If-Unmodified-Since",
    ),
]


@pytest.mark.parametrize(("headers", "outcome"), COPY_TABLE, ids=[str(h) for h, _ in COPY_TABLE])
def test_copy_source_preconditions(headers: dict[str, str], outcome: bool | str) -> None:
    assert check(headers, COPY) == outcome


@pytest.mark.parametrize(
    ("mtime_ns", "outcome"),
    [
        (SECONDS * 1_000_000_000, False),
        (SECONDS * 1_000_000_000 + 999_999_999, False),  # the same second
        ((SECONDS + 1) * 1_000_000_000, True),  # one second later: modified
        ((SECONDS - 1) * 1_000_000_000 + 999_999_999, False),
    ],
)
def test_if_modified_since_has_second_granularity(mtime_ns: int, outcome: bool) -> None:
    assert evaluate({"if-modified-since": AT}, ETAG, mtime_ns) is outcome


@pytest.mark.parametrize(
    ("mtime_ns", "raises"),
    [
        (SECONDS * 1_000_000_000 + 999_999_999, False),
        ((SECONDS + 1) * 1_000_000_000, True),
    ],
)
def test_if_unmodified_since_has_second_granularity(mtime_ns: int, raises: bool) -> None:
    if raises:
        with pytest.raises(S3Error, match="PreconditionFailed"):
            evaluate({"if-unmodified-since": AT}, ETAG, mtime_ns)
    else:
        assert evaluate({"if-unmodified-since": AT}, ETAG, mtime_ns) is True


def test_asctime_date_is_honoured() -> None:
    assert check({"if-modified-since": "Tue Nov 14 22:13:20 2023"}) is False


def test_overflowing_date_is_ignored() -> None:
    assert check({"if-modified-since": "Tue, 14 Nov 99999999999999999999 22:13:20 GMT"}) is True


_date_like = st.one_of(
    st.text(max_size=40),
    st.builds(
        "{}, {} {} {} {}:{}:{} {}".format,
        st.sampled_from(["Mon", "Tue", "Xyz", ""]),
        st.integers(-5, 40),
        st.sampled_from(["Jan", "Feb", "Nov", "Dec", "Foo"]),
        st.integers(0, 10**6),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
        st.sampled_from(["GMT", "UTC", "+0000", "-0000", "+2359", "-9999", "EST", "", "Z"]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(
        st.sampled_from(["if-match", "if-none-match", "if-modified-since", "if-unmodified-since"]),
        unique=True,
    ),
    values=st.lists(_date_like, min_size=4, max_size=4),
    prefix=st.sampled_from(["", COPY]),
)
def test_any_header_values_give_proceed_304_or_412(
    names: list[str], values: list[str], prefix: str
) -> None:
    headers = {prefix + name: value for name, value in zip(names, values, strict=False)}
    try:
        outcome = evaluate(headers, ETAG, MTIME_NS, prefix)
    except S3Error as exc:
        assert exc.code == "PreconditionFailed"
        assert exc.fields["Condition"].startswith(prefix + "If-")
        return
    # Proceed (True) or 304 Not Modified (False): both are answers a GET may give to any
    # values; what the property checks is that nothing else (an exception, None) comes out.
    assert outcome is True or outcome is False
    if prefix:
        assert outcome is True  # a copy source is never "not modified": it is a 412
