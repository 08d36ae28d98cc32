"""The Range header of GetObject/HeadObject (RFC 7233, one range: S3 serves no multi-range).

A header that does not parse is ignored (the whole object is sent, as RFC 7233 and S3 do); a
range that starts past the end is 416 InvalidRange.
"""

from __future__ import annotations

import re

from .errors import S3Error

_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)")
_HUGE = 10**20  # larger than any object: a longer number means the same to us


def byte_offset(digits: str) -> int:
    # int() refuses strings over 4,300 digits; anything past 20 is just "huge".
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 20 else _HUGE


def _before(last: str, first: str) -> bool:
    """Whether the number `last` is below `first`, compared exactly: both may be past _HUGE,
    where byte_offset makes them equal (bytes=100000000000000000001-100000000000000000000 is
    last < first, a range to ignore, not one to refuse)."""
    last, first = last.lstrip("0"), first.lstrip("0")
    return (len(last), last) < (len(first), first)


def parse_range(value: str | None, size: int) -> tuple[int, int] | None:
    """(first byte, length) of the requested range, or None for the whole object."""
    if value is None:
        return None
    m = _RANGE.fullmatch(value.strip())
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    if not first and not last:
        return None
    if not first:
        # Suffix range: the last N bytes.
        n = byte_offset(last)
        if n == 0 or size == 0:
            raise unsatisfiable(value, size)
        n = min(n, size)
        return size - n, n
    start = byte_offset(first)
    end = byte_offset(last) if last else size - 1
    if last and _before(last, first):
        return None
    if start >= size:
        raise unsatisfiable(value, size)
    end = min(end, size - 1)
    return start, end - start + 1


def unsatisfiable(value: str, size: int) -> S3Error:
    return S3Error("InvalidRange", RangeRequested=value, ActualObjectSize=size)
