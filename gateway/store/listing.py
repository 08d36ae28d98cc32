"""The listing roll-up, once for every kind of listing (objects, uploads, and versions to come).

A listing is an ordered scan of rows by key (UTF-8 bytes, then whatever orders rows of one
key) from a cursor, where every key that holds the delimiter after the prefix is rolled up into
its common prefix, which counts as one entry. Each common prefix costs one seek: the scan jumps
past every key below it instead of reading them, so a page costs the same whatever the bucket
holds. Bounds are worked out on bytes, never on text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from .api import Cursor

T = TypeVar("T")

# (cursor, inclusive, end, limit) -> up to `limit` rows (position, item) in order, after (or
# from) the cursor, keys below `end`; a row's position is its sort key, the key's bytes first.
Seek = Callable[[Cursor, bool, bytes | None, int], Awaitable[list[tuple[Cursor, T]]]]
_FIRST_BATCH = 8


@dataclass(frozen=True)
class Rolled(Generic[T]):
    items: list[T]
    prefixes: tuple[str, ...]
    truncated: bool
    last: str | None  # the key or common prefix the page ended on (where the next starts)


def successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string that starts with `prefix`."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


async def roll_up(
    seek: Seek[T],
    prefix: bytes,
    delimiter: bytes,
    cursor: Cursor,
    inclusive: bool,
    max_items: int,
) -> Rolled[T]:
    """One page: rows after `cursor` whose keys start with `prefix`, rolled up by
    `delimiter`, at most `max_items` entries (items and common prefixes together)."""
    if max_items <= 0:
        return Rolled([], (), False, None)  # s3-tests test_bucket_list_maxkeys_zero
    upper = successor(prefix)
    marker = cursor[0]
    if delimiter and len(cursor) == 1 and not inclusive and marker.startswith(prefix):
        # A marker that is itself a common prefix (a NextMarker we returned): skip what it
        # rolled up, or the next page would repeat it.
        cut = marker.find(delimiter, len(prefix))
        if cut >= 0 and cut + len(delimiter) == len(marker):
            nxt = successor(marker)
            if nxt is None:
                return Rolled([], (), False, None)
            cursor, inclusive = (nxt,), True
    if cursor[0] < prefix:
        cursor, inclusive = (prefix,), True

    items: list[T] = []
    prefixes: list[str] = []
    last: str | None = None
    # Rows are asked for in batches that grow while they hold no common prefix: a scan that
    # meets a prefix at once wastes at most a batch before it seeks past the prefix (a page
    # with 20 prefixes read 20 full pages of rows when every scan asked for a page's worth).
    batch = _FIRST_BATCH if delimiter else max_items + 1
    while True:
        want = max_items - len(items) - len(prefixes)
        ask = min(want + 1, batch)  # one row beyond the page tells whether it is truncated
        rows = await seek(cursor, inclusive, upper, ask)
        seek_to: bytes | None = None
        for position, item in rows:
            if want == 0:
                return Rolled(items, tuple(prefixes), True, last)
            want -= 1
            key = position[0]
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut < 0:
                items.append(item)
                last = key.decode()
                continue
            common = key[: cut + len(delimiter)]
            prefixes.append(common.decode())
            last = prefixes[-1]
            seek_to = successor(common)
            break
        else:
            if len(rows) < ask:  # the rows ran out before the page filled
                return Rolled(items, tuple(prefixes), False, last)
            # Every row of the batch was an item: go on after the last one, asking for more.
            cursor, inclusive = rows[-1][0], False
            batch *= 2
            continue
        if seek_to is None:  # a prefix of 0xFF bytes only: nothing can follow it
            return Rolled(items, tuple(prefixes), False, last)
        cursor, inclusive = (seek_to,), True
        if want == 0:
            more = await seek(cursor, inclusive, upper, 1)
            return Rolled(items, tuple(prefixes), bool(more), last)
