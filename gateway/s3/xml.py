"""S3 XML: parsing request bodies (untrusted, hardened) and rendering responses."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable
from xml.etree.ElementTree import Element, ParseError, XMLParser
from xml.parsers import expat

from .errors import S3Error
from .xmltext import escape

NS = "http://s3.amazonaws.com/doc/2006-03-01/"

# A node is (tag, value): value is text, a number, a sequence of nodes, or None (omitted).
Node = tuple[str, "str | int | bool | Iterable[Node] | None"]


def _emit(out: list[str], nodes: Iterable[Node]) -> None:
    for tag, value in nodes:
        if value is None:
            continue
        if isinstance(value, bool):
            out.append(f"<{tag}>{'true' if value else 'false'}</{tag}>")
        elif isinstance(value, str | int):
            out.append(f"<{tag}>{escape(str(value))}</{tag}>")
        else:
            # A tag may carry attributes ("Grantee xsi:type=..."): close it by its name alone.
            out.append(f"<{tag}>")
            _emit(out, value)
            out.append(f"</{tag.split(' ', 1)[0]}>")


def render(root: str, nodes: Iterable[Node] | str, namespace: bool = True) -> bytes:
    """A response document: `<root xmlns=S3>` holding nodes (or text); a few of AWS's
    answers (POST Object's PostResponse) carry no namespace."""
    opening = f'<{root} xmlns="{NS}">' if namespace else f"<{root}>"
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n', opening]
    if isinstance(nodes, str):
        out.append(escape(nodes))
    else:
        _emit(out, nodes)
    out.append(f"</{root}>")
    return "".join(out).encode()


def iso8601(ns: int) -> str:
    """Timestamps in XML: ISO 8601 with milliseconds and Z, as S3 writes them."""
    dt = datetime.datetime.fromtimestamp(ns // 1_000_000_000, datetime.UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns // 1_000_000 % 1000:03d}Z"


def iso8601_seconds(ns: int) -> str:
    """Timestamps in listings (ListObjects, ListObjectVersions, ListBuckets,
    ListMultipartUploads, ListParts): whole seconds, ".000Z", as AWS writes them there
    (LocalStack's test_s3_list_*_timestamp_precision, run against AWS)."""
    dt = datetime.datetime.fromtimestamp(ns // 1_000_000_000, datetime.UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.000Z")


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(ns: int) -> str:
    """Timestamps in headers (Last-Modified): RFC 1123, whole seconds. Formatted by hand,
    as email.utils.formatdate would (English names whatever the locale), at a fraction of its
    cost: every GET and HEAD sends one."""
    t = time.gmtime(ns // 1_000_000_000)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


# --- parsing ----------------------------------------------------------------------------------


# Request documents are small trees: the deepest S3 schema (lifecycle's Rule/Filter/And/Tag/Key,
# replication's Destination/Metrics/EventThreshold/Minutes) is 6 levels. A deeper body is no S3
# document, and a deep tree would recurse in whatever walks it (ElementTree's own tostring).
MAX_DEPTH = 32
# A configuration document (64 KiB at most) of S3's elements holds a few thousand; the
# operations whose documents are larger (DeleteObjects, Complete, lifecycle) pass their own.
MAX_ELEMENTS = 10_000


class _Refused(Exception):
    """A DTD, an entity declaration, or a document over its bounds."""


def _refuse(*_: object) -> None:
    raise _Refused


def _check(body: bytes, max_elements: int) -> None:
    """Read the whole body with expat, refusing on the first DOCTYPE (so no entity is ever
    declared, internal, external or parameter: no billion laughs, no XXE), the first element past
    `max_elements` or past MAX_DEPTH. expat decodes the body as the second pass will (BOM,
    encoding declaration, UTF-16 included), so what this pass accepts is what that one reads.
    Only the start of an element calls back into Python; the rest runs in C."""
    checker = expat.ParserCreate()
    checker.StartDoctypeDeclHandler = _refuse
    # Unreachable without a DOCTYPE; set so that no later change to the line above opens them.
    checker.EntityDeclHandler = _refuse
    checker.UnparsedEntityDeclHandler = _refuse
    checker.ExternalEntityRefHandler = _refuse
    ended: list[str] = []
    started = 0

    def start(_name: str, _attributes: dict[str, str]) -> None:
        nonlocal started
        started += 1
        if started > max_elements or started - len(ended) > MAX_DEPTH:
            raise _Refused

    checker.StartElementHandler = start
    checker.EndElementHandler = ended.append  # a C call: depth is started - ended
    checker.Parse(body, True)


def parse(body: bytes, max_elements: int = MAX_ELEMENTS) -> Element:
    """Parse an untrusted request body: no DTDs, no entities, at most `max_elements` elements
    and MAX_DEPTH levels, namespaces stripped. Both passes run in C (expat, then ElementTree's
    accelerated builder): a 2 MiB body costs milliseconds of the event loop, not seconds."""
    if not body.strip():
        raise S3Error("MalformedXML")
    try:
        _check(body, max_elements)
        builder = XMLParser()
        builder.feed(body)
        root = builder.close()
    except (_Refused, expat.ExpatError, ParseError, ValueError, LookupError) as exc:
        # LookupError: a declaration naming an encoding Python does not know; ValueError, one
        # expat cannot use (multi-byte).
        raise S3Error("MalformedXML") from exc
    for el in root.iter():
        tag = el.tag
        if tag[0] == "{":
            el.tag = tag[tag.index("}") + 1 :]
    return root


def child_text(el: Element, tag: str) -> str | None:
    found = el.find(tag)
    if found is None:
        return None
    return found.text or ""
