"""S3 XML: escaping, rendering, hardened parsing and timestamps."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from email.utils import formatdate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.s3 import xml
from gateway.s3.errors import S3Error

HEADER = b'<?xml version="1.0" encoding="UTF-8"?>\n'
NS = "http://s3.amazonaws.com/doc/2006-03-01/"


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain", "plain"),
        ("a&b", "a&amp;b"),
        ("<Key>", "&lt;Key&gt;"),
        ("&amp;", "&amp;amp;"),
        ("a\rb", "a&#13;b"),  # or the reader would turn it into \n
        ("a\r\nb", "a&#13;\nb"),
        ("tab\there", "tab\there"),
        ("line\nfeed", "line\nfeed"),
        # What XML 1.0 cannot carry: hexadecimal references, as S3 writes them ("&#x1b;")
        ("\x00", "&#x0;"),
        ("\x01\x08\x0b\x0c\x1b\x1f", "&#x1;&#x8;&#xb;&#xc;&#x1b;&#x1f;"),
        ("a\ufffeb\uffff", "a&#xfffe;b&#xffff;"),
        ("\x7f\ufffd", "\x7f\ufffd"),  # allowed in XML 1.0
        ("quote\"'", "quote\"'"),  # text content: quotes need no escaping
        ("caf\u00e9 \U0001f600", "caf\u00e9 \U0001f600"),
        ("", ""),
    ],
)
def test_escape(text: str, escaped: str) -> None:
    assert xml.escape(text) == escaped


def test_render_nested_nodes() -> None:
    body = xml.render(
        "ListBucketResult",
        [
            ("Name", "b"),
            ("Prefix", ""),
            ("Marker", None),  # None is omitted
            ("MaxKeys", 1000),
            ("IsTruncated", False),
            (
                "Contents",
                [("Key", "a&b"), ("ETag", '"abc"'), ("Size", 0), ("Owner", [("ID", "o")])],
            ),
            ("Contents", [("Key", "x"), ("Size", 3)]),
            ("Versioned", True),
            ("CommonPrefixes", []),
        ],
    )
    assert (
        body
        == HEADER
        + (
            f'<ListBucketResult xmlns="{NS}">'
            "<Name>b</Name><Prefix></Prefix><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
            '<Contents><Key>a&amp;b</Key><ETag>"abc"</ETag><Size>0</Size><Owner><ID>o</ID></Owner>'
            "</Contents><Contents><Key>x</Key><Size>3</Size></Contents>"
            "<Versioned>true</Versioned><CommonPrefixes></CommonPrefixes></ListBucketResult>"
        ).encode()
    )
    root = ET.fromstring(body)
    assert root.tag == f"{{{NS}}}ListBucketResult"
    assert [c.findtext(f"{{{NS}}}Key") for c in root.iter(f"{{{NS}}}Contents")] == ["a&b", "x"]


def test_render_generator_nodes() -> None:
    body = xml.render("R", (("N", str(i)) for i in range(3)))
    assert body == HEADER + f'<R xmlns="{NS}"><N>0</N><N>1</N><N>2</N></R>'.encode()


def test_render_text_root() -> None:
    body = xml.render("LocationConstraint", "eu-west-1")
    assert (
        body == HEADER + f'<LocationConstraint xmlns="{NS}">eu-west-1</LocationConstraint>'.encode()
    )
    assert ET.fromstring(body).text == "eu-west-1"
    assert xml.render("LocationConstraint", "") == (
        HEADER + f'<LocationConstraint xmlns="{NS}"></LocationConstraint>'.encode()
    )
    assert b"&lt;" in xml.render("R", "<")


def test_render_is_utf8() -> None:
    body = xml.render("R", [("Key", "\u20ac\U0001f600")])
    assert "\u20ac\U0001f600".encode() in body


# Characters XML 1.0 allows in a document (the Char production), control characters aside.
_xml_text = st.text(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="".join(chr(c) for c in range(0x20) if c not in (9, 10, 13))
        + "\ufffe\uffff",
    )
)


@settings(max_examples=200, deadline=None)
@given(key=_xml_text, size=st.integers(0, 2**63), flag=st.booleans())
def test_render_round_trips_through_a_parser(key: str, size: int, flag: bool) -> None:
    body = xml.render("R", [("Contents", [("Key", key), ("Size", size), ("Flag", flag)])])
    root = xml.parse(body)
    contents = root.find("Contents")
    assert contents is not None
    assert xml.child_text(contents, "Key") == key  # \r included, thanks to &#13;
    assert xml.child_text(contents, "Size") == str(size)
    assert xml.child_text(contents, "Flag") == ("true" if flag else "false")


def test_parse_strips_namespaces() -> None:
    root = xml.parse(
        f'<Delete xmlns="{NS}"><Object><Key>a</Key></Object><Quiet>true</Quiet></Delete>'.encode()
    )
    assert root.tag == "Delete"
    assert [el.tag for el in root.iter()] == ["Delete", "Object", "Key", "Quiet"]
    obj = root.find("Object")
    assert obj is not None
    assert xml.child_text(obj, "Key") == "a"
    assert xml.child_text(root, "Quiet") == "true"
    assert xml.child_text(root, "Missing") is None


def test_parse_strips_prefixed_namespaces() -> None:
    root = xml.parse(f'<s3:A xmlns:s3="{NS}"><s3:B>x</s3:B><C/></s3:A>'.encode())
    assert root.tag == "A"
    assert xml.child_text(root, "B") == "x"
    assert xml.child_text(root, "C") == ""


def test_parse_without_namespace_and_with_declaration() -> None:
    root = xml.parse(b'<?xml version="1.0" encoding="UTF-8"?>\n<A><B> sp </B></A>')
    assert xml.child_text(root, "B") == " sp "


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<Delete><Object><Key>&lol9;</Key></Object></Delete>"""


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   \n\t",
        b"not xml",
        b"<Delete>",
        b"<A></B>",
        b"<A>&undefined;</A>",
        b"<A>\xff</A>",  # not UTF-8
        b"<A/><B/>",  # two roots
        BILLION_LAUGHS,
        b'<!DOCTYPE A [<!ENTITY e "x">]><A>&e;</A>',
        b'<!DOCTYPE A [<!ENTITY e SYSTEM "file:///etc/passwd">]><A>&e;</A>',
        b'<!DOCTYPE A SYSTEM "http://example.com/a.dtd"><A/>',
        b"<!DOCTYPE A><A/>",  # any DTD at all
    ],
    ids=[
        "empty",
        "blank",
        "text",
        "unclosed",
        "mismatched",
        "undefined-entity",
        "bad-utf8",
        "two-roots",
        "billion-laughs",
        "internal-entity",
        "external-entity",
        "external-dtd",
        "bare-doctype",
    ],
)
def test_parse_rejects_as_malformed_xml(body: bytes) -> None:
    with pytest.raises(S3Error) as info:
        xml.parse(body)
    assert info.value.code == "MalformedXML"
    assert info.value.status == 400


def _utf16(document: bytes, codec: str) -> bytes:
    """The document in UTF-16 (with a BOM for "utf-16"), saying so in its declaration."""
    text = document.decode().replace('<?xml version="1.0"?>', "")
    return ('<?xml version="1.0" encoding="UTF-16"?>' + text).encode(codec)


DTDS = {
    "billion-laughs": BILLION_LAUGHS,
    "internal-entity": b'<!DOCTYPE A [<!ENTITY e "x">]><A>&e;</A>',
    "external-entity": b'<!DOCTYPE A [<!ENTITY e SYSTEM "file:///etc/passwd">]><A>&e;</A>',
    "parameter-entity": b'<!DOCTYPE A [<!ENTITY % p SYSTEM "http://127.0.0.1:9/p"> %p;]><A/>',
    "unused-entity": b'<!DOCTYPE A [<!ENTITY e "x">]><A/>',
    "bare-doctype": b"<!DOCTYPE A><A/>",
}


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("name", list(DTDS))
def test_parse_rejects_a_dtd_in_utf16(name: str, codec: str) -> None:
    with pytest.raises(S3Error) as info:
        xml.parse(_utf16(DTDS[name], codec))
    assert info.value.code == "MalformedXML"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_parse_reads_utf16(codec: str) -> None:
    """The control for the test above: UTF-16 itself is read, so the DTD is what is refused."""
    root = xml.parse(
        _utf16(f'<Delete xmlns="{NS}"><Object><Key>é</Key></Object></Delete>'.encode(), codec)
    )
    assert root.tag == "Delete"
    assert xml.child_text(root.find("Object"), "Key") == "é"  # type: ignore[arg-type]


def _nested(depth: int) -> bytes:
    return b"<a>" * depth + b"</a>" * depth


def test_parse_takes_documents_to_the_depth_limit() -> None:
    root = xml.parse(_nested(xml.MAX_DEPTH))
    assert len(list(root.iter())) == xml.MAX_DEPTH


@pytest.mark.parametrize(
    "body",
    [
        _nested(xml.MAX_DEPTH + 1),
        _nested(200_000),  # 1.4 MB: refused at the 33rd level, not built
        b"<a>" * 500_000,  # never closed
    ],
    ids=["one-too-deep", "deep", "deep-unclosed"],
)
def test_parse_refuses_deeper_documents(body: bytes) -> None:
    with pytest.raises(S3Error) as info:
        xml.parse(body)
    assert info.value.code == "MalformedXML"


@pytest.mark.parametrize("limit", [1, 3, 6002])
def test_parse_counts_elements(limit: int) -> None:
    """`max_elements` elements are taken, one more is refused, however they nest."""
    flat = b"<r>" + b"<a/>" * (limit - 1) + b"</r>"
    assert len(list(xml.parse(flat, limit).iter())) == limit
    with pytest.raises(S3Error) as info:
        xml.parse(b"<r>" + b"<a/>" * limit + b"</r>", limit)
    assert info.value.code == "MalformedXML"


def test_parse_refuses_a_flat_body_past_the_default_limit() -> None:
    """A DeleteObjects-sized body of 214,000 empty elements (1.5 MB)."""
    with pytest.raises(S3Error) as info:
        xml.parse(b"<Delete>" + b"<a></a>" * 214_000 + b"</Delete>")
    assert info.value.code == "MalformedXML"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=100).map(str.encode))
def test_parse_raises_only_malformed_xml(body: bytes) -> None:
    try:
        root = xml.parse(body)
    except S3Error as exc:
        assert exc.code == "MalformedXML"
    else:
        assert isinstance(root.tag, str) and not root.tag.startswith("{")


@pytest.mark.parametrize(
    ("ns", "expected"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (999_999, "1970-01-01T00:00:00.000Z"),  # truncated, not rounded
        (1_000_000, "1970-01-01T00:00:00.001Z"),
        (1_999_999_999, "1970-01-01T00:00:01.999Z"),
        (1_700_000_000_123_456_789, "2023-11-14T22:13:20.123Z"),
        (951_782_400_000_000_000, "2000-02-29T00:00:00.000Z"),
    ],
)
def test_iso8601(ns: int, expected: str) -> None:
    assert xml.iso8601(ns) == expected


@pytest.mark.parametrize(
    ("ns", "expected"),
    [
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (1_700_000_000_999_999_999, "Tue, 14 Nov 2023 22:13:20 GMT"),  # whole seconds
        (951_782_400_000_000_000, "Tue, 29 Feb 2000 00:00:00 GMT"),
    ],
)
def test_http_date(ns: int, expected: str) -> None:
    assert xml.http_date(ns) == expected


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=253402300799 * 10**9))  # up to 9999-12-31
def test_http_date_is_what_formatdate_says(ns: int) -> None:
    assert xml.http_date(ns) == formatdate(ns // 10**9, usegmt=True)
