"""Object and bucket tags: the `x-amz-tagging` header (URL query form), the `<Tagging>`
document, and AWS's limits and errors for both (userguide/object-tagging.html,
tagging-managing.html).

A tag set is a tuple of (key, value) pairs sorted by key, as AWS lists them; it is stored as
such in the object's attrs (or, for a bucket, its settings).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from . import xml
from .errors import S3Error, invalid_argument

TagSet = tuple[tuple[str, str], ...]

MAX_OBJECT_TAGS = 10
MAX_BUCKET_TAGS = 50
MAX_KEY_CHARS = 128
MAX_VALUE_CHARS = 256
MAX_TAGGING_XML = 64 * 1024

# "Letters, numbers, and spaces representable in UTF-8, and the following characters:
# + - = . _ : / @" (tagging-managing.html).
_ALLOWED = re.compile(r"[\w\s+\-=._:/@]*")

_HEADER_FORM = (
    "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters "
    "without tag name duplicates."
)


def from_header(value: str | None) -> TagSet:
    """`x-amz-tagging: k1=v1&k2=v2` (URL-encoded); absent: no tags. `a&b` is two tags with
    empty values; empty segments are skipped."""
    if value is None:
        return ()
    tags: list[tuple[str, str]] = []
    for segment in value.split("&"):
        if not segment:
            continue
        key, _, val = segment.partition("=")
        try:
            key = unquote(key.replace("+", " "), errors="strict")
            val = unquote(val.replace("+", " "), errors="strict")
        except UnicodeDecodeError as exc:
            raise invalid_argument(_HEADER_FORM, "x-amz-tagging", value) from exc
        tags.append((key, val))
    if len({k for k, _ in tags}) != len(tags):
        raise invalid_argument(_HEADER_FORM, "x-amz-tagging", value)
    return check(tuple(sorted(tags)), MAX_OBJECT_TAGS)


def from_xml(body: bytes, limit: int) -> TagSet:
    """A `<Tagging><TagSet><Tag><Key/><Value/></Tag>…</TagSet></Tagging>` document."""
    root = xml.parse(body)
    tag_set = root.find("TagSet")
    if root.tag != "Tagging" or tag_set is None:
        raise S3Error("MalformedXML")
    tags: list[tuple[str, str]] = []
    for tag in tag_set:
        key, value = xml.child_text(tag, "Key"), xml.child_text(tag, "Value")
        if tag.tag != "Tag" or key is None or value is None:
            raise S3Error("MalformedXML")
        tags.append((key, value))
    if len({k for k, _ in tags}) != len(tags):
        raise S3Error("InvalidTag", "Cannot provide multiple Tags with the same key")
    return check(tuple(sorted(tags)), limit)


def check(tags: TagSet, limit: int) -> TagSet:
    """AWS's limits: the count (BadRequest, as AWS answers it for objects), then each key and
    value (InvalidTag)."""
    if len(tags) > limit:
        kind = "Object" if limit == MAX_OBJECT_TAGS else "Bucket"
        raise S3Error("BadRequest", f"{kind} tags cannot be greater than {limit}")
    for key, value in tags:
        if not key or len(key) > MAX_KEY_CHARS or not _ALLOWED.fullmatch(key):
            raise S3Error("InvalidTag", "The TagKey you have provided is invalid", TagKey=key)
        if len(value) > MAX_VALUE_CHARS or not _ALLOWED.fullmatch(value):
            raise S3Error("InvalidTag", "The TagValue you have provided is invalid", TagKey=key)
        if key.startswith("aws:"):
            message = (
                "Your TagKey cannot be prefixed with aws:"
                if limit == MAX_OBJECT_TAGS
                else "System tags cannot be added/updated by requester"
            )
            raise S3Error("InvalidTag", message, TagKey=key)
    return tags


def render(tags: TagSet) -> bytes:
    nodes: list[xml.Node] = [("Tag", [("Key", key), ("Value", value)]) for key, value in tags]
    return xml.render("Tagging", [("TagSet", nodes)])


def encode(tags: TagSet) -> str:
    """A bucket's tag set as its settings store it (the rendered document)."""
    return render(tags).decode()


def decode(document: str) -> TagSet:
    return from_xml(document.encode(), MAX_BUCKET_TAGS)
