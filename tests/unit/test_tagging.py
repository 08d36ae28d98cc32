"""The `x-amz-tagging` header and the `<Tagging>` document, as AWS reads them."""

from __future__ import annotations

import pytest

from gateway.s3 import tagging
from gateway.s3.errors import S3Error


@pytest.mark.parametrize(
    ("header", "tags"),
    [
        ("a=1&b=2", (("a", "1"), ("b", "2"))),
        ("a&b", (("a", ""), ("b", ""))),  # two tags with empty values
        ("a=1&&&b=2&", (("a", "1"), ("b", "2"))),  # empty segments are skipped
        ("k%20x=v%2Bw", (("k x", "v+w"),)),
        ("k+x=1", (("k x", "1"),)),
        ("", ()),
    ],
)
def test_header_forms(header: str, tags: tagging.TagSet) -> None:
    assert tagging.from_header(header) == tags


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ("a=1&a=2", "InvalidArgument"),  # a key twice
        ("a=%ff", "InvalidArgument"),  # not UTF-8
        ("a=1,b=2", "InvalidTag"),  # a comma is no tag character
        ("=v", "InvalidTag"),  # an empty key
        ("aws:x=1", "InvalidTag"),
    ],
)
def test_bad_headers(header: str, code: str) -> None:
    with pytest.raises(S3Error) as exc:
        tagging.from_header(header)
    assert exc.value.code == code


def test_a_document_round_trips_sorted_by_key() -> None:
    tags = (("z", "last?no"), ("a", ""))
    with pytest.raises(S3Error):  # "?" is not allowed
        tagging.from_xml(tagging.render(tags), 10)
    tags = (("z", "1"), ("a", ""), ("ünï", "ç ode+-=._:/@"))
    assert tagging.from_xml(tagging.render(tags), 10) == tuple(sorted(tags))
    assert tagging.decode(tagging.encode(tags)) == tuple(sorted(tags))
    assert tagging.from_header("b=1&a=2") == (("a", "2"), ("b", "1"))
