"""Conditional requests: If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since.

AWS evaluates them as RFC 7232 does (GetObject and CopyObject API pages): If-Match first (when
present, If-Unmodified-Since is not consulted), then If-Unmodified-Since, then If-None-Match
(when present, If-Modified-Since is not consulted), then If-Modified-Since. A failed If-Match or
If-Unmodified-Since is 412 PreconditionFailed; a failed If-None-Match or If-Modified-Since is
304 Not Modified on GET/HEAD and 412 on a copy source. Dates that do not parse are ignored, as
is a date in the future.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

from .. import digest
from .errors import S3Error

_ASCTIME = re.compile(r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} [0-9]{4}")


def _date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
        if parsed.tzinfo is None:
            # asctime dates carry no zone and mean GMT (RFC 7231 7.1.1.1); any other date
            # without a zone is not an HTTP-date.
            if not _ASCTIME.fullmatch(value.strip()):
                return None
            parsed = parsed.replace(tzinfo=datetime.UTC)
        stamp = parsed.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return stamp if stamp <= time.time() else None


def evaluate(headers: Mapping[str, str], etag: str, mtime_ns: int, prefix: str = "") -> bool:
    """Check the preconditions (header names optionally prefixed, e.g. x-amz-copy-source-).

    Returns False when the answer is 304 Not Modified; raises 412 PreconditionFailed.
    With a prefix (a copy source) a not-modified condition is a 412 as well.
    """
    modified = mtime_ns // 1_000_000_000  # Last-Modified has whole seconds

    def failed(name: str) -> S3Error:
        return S3Error("PreconditionFailed", Condition=prefix + name)

    if_match = headers.get(prefix + "if-match")
    if if_match is not None:
        if not digest.matches(if_match, etag):
            raise failed("If-Match")
    else:
        since = _date(headers.get(prefix + "if-unmodified-since"))
        if since is not None and modified > since:
            raise failed("If-Unmodified-Since")
    if_none_match = headers.get(prefix + "if-none-match")
    if if_none_match is not None:
        if digest.matches(if_none_match, etag):
            if prefix:
                raise failed("If-None-Match")
            return False
    else:
        since = _date(headers.get(prefix + "if-modified-since"))
        if since is not None and modified <= since:
            if prefix:
                raise failed("If-Modified-Since")
            return False
    return True
