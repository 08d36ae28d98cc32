"""CORS rules: the configuration document as AWS validates it, and rule matching."""

from __future__ import annotations

import pytest

from gateway.s3 import cors
from gateway.s3.errors import S3Error


def doc(*rules: str) -> bytes:
    body = "".join(f"<CORSRule>{r}</CORSRule>" for r in rules)
    return (
        '<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{body}</CORSConfiguration>"
    ).encode()


def rule(origins: list[str], methods: list[str], headers: tuple[str, ...] = ()) -> cors.CorsRule:
    return cors.CorsRule(tuple(origins), tuple(methods), headers)


@pytest.mark.parametrize(
    ("pattern", "origin", "matches"),
    [
        # s3-tests test_cors_origin_response's table
        ("*suffix", "foo.suffix", True),
        ("*suffix", "foo.suffix.get", False),
        ("start*end", "startend", True),
        ("start*end", "start12end", True),
        ("start*end", "0start12end", False),
        ("prefix*", "prefix", True),
        ("prefix*", "prefix.suffix", True),
        ("prefix*", "bla.prefix", False),
        # AWS (test_s3_cors recordings): a partial origin is no match
        ("http://*.origin.com", "http://test.origin.com", True),
        ("http://*.origin.com", "http://test.origin.com/", False),
        ("http://a.com", "http://a.com", True),
        ("http://a.com", "http://A.com", False),
        ("http://a.com", "http://a.com:80", False),
        ("*", "anything", True),
        ("ab*ba", "aba", False),  # prefix and suffix may not overlap
        ("", "", True),
    ],
)
def test_origin_patterns(pattern: str, origin: str, matches: bool) -> None:
    assert (cors.match([rule([pattern], ["GET"])], origin, "GET") is not None) is matches


def test_first_matching_rule_wins_and_method_must_be_allowed() -> None:
    put = rule(["*.put"], ["PUT"])
    get_any = rule(["*"], ["GET", "HEAD"])
    get_put = rule(["a.put"], ["GET"])
    rules = [put, get_put, get_any]
    assert cors.match(rules, "a.put", "PUT") is put
    assert cors.match(rules, "a.put", "GET") is get_put
    assert cors.match(rules, "b.put", "GET") is get_any
    assert cors.match(rules, "b.put", "DELETE") is None


def test_requested_headers_must_each_match_an_allowed_header_without_case() -> None:
    r = rule(["*"], ["GET"], ("x-amz-*", "Content-Type"))
    assert cors.match([r], "o", "GET", ["x-amz-date", "content-type"]) is r
    assert cors.match([r], "o", "GET", cors.requested_headers("X-Amz-Meta-A, CONTENT-TYPE")) is r
    assert cors.match([r], "o", "GET", ["x-amz-date", "authorization"]) is None
    # A rule without AllowedHeader allows no requested header (AWS: opt-get-headers, 403).
    bare = rule(["*"], ["GET"])
    assert cors.match([bare], "o", "GET", []) is bare
    assert cors.match([bare], "o", "GET", ["x-amz-date"]) is None
    star = rule(["*"], ["GET"], ("*",))
    assert cors.match([star], "o", "GET", ["anything", "x-y"]) is star


def test_requested_headers_parsing() -> None:
    assert cors.requested_headers(None) == []
    assert cors.requested_headers("") == []
    assert cors.requested_headers(" X-Amz-Date ,content-type,, ") == ["x-amz-date", "content-type"]


def test_answer_headers_as_aws_sends_them() -> None:
    r = cors.CorsRule(("http://a.com",), ("GET", "PUT"), ("*",), ("ETag", "x-amz-meta-a"), 3000)
    assert cors.answer_headers(r, "http://a.com", ["x-amz-date", "content-type"]) == {
        "Access-Control-Allow-Origin": "http://a.com",
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Allow-Methods": "GET, PUT",
        "Access-Control-Allow-Headers": "x-amz-date, content-type",
        "Access-Control-Expose-Headers": "ETag, x-amz-meta-a",
        "Access-Control-Max-Age": "3000",
        "Vary": cors.VARY,
    }
    # An origin of `*` answers `*`, without credentials; nothing requested, nothing allowed.
    any_origin = cors.CorsRule(("*",), ("GET",))
    assert cors.answer_headers(any_origin, "http://b.com", []) == {
        "Access-Control-Allow-Origin": "*",
        "Access-Control-Allow-Methods": "GET",
        "Vary": "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    }


def test_configuration_round_trip() -> None:
    body = doc(
        "<ID>r1</ID><AllowedOrigin>http://*.a.com</AllowedOrigin><AllowedOrigin>http://b</AllowedOrigin>"
        "<AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod>"
        "<AllowedHeader>x-amz-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader>"
        "<MaxAgeSeconds>3000</MaxAgeSeconds>",
        "<AllowedOrigin></AllowedOrigin><AllowedMethod>HEAD</AllowedMethod>",
    )
    rules = cors.parse_configuration(body)
    assert rules == (
        cors.CorsRule(
            ("http://*.a.com", "http://b"), ("GET", "PUT"), ("x-amz-*",), ("ETag",), 3000, "r1"
        ),
        cors.CorsRule(("",), ("HEAD",)),  # an empty origin is kept, as AWS keeps it
    )
    stored = cors.render_configuration(rules).decode()
    assert cors.rules_of(stored) == rules
    assert cors.rules_of(stored) is cors.rules_of(stored)  # parsed once


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (doc(), "MalformedXML", None),  # no rule
        (b"<CORSConfiguration><Rule/></CORSConfiguration>", "MalformedXML", None),
        (b"<Other/>", "MalformedXML", None),
        (b"not xml", "MalformedXML", None),
        (doc("<AllowedMethod>GET</AllowedMethod>"), "MalformedXML", None),  # no origin
        (doc("<AllowedOrigin>*</AllowedOrigin>"), "MalformedXML", None),  # no method
        (
            doc("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><Bad/>"),
            "MalformedXML",
            None,
        ),
        (
            doc(
                "<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
                "<MaxAgeSeconds>soon</MaxAgeSeconds>"
            ),
            "MalformedXML",
            None,
        ),
        (
            doc(*["<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"] * 101),
            "MalformedXML",
            None,
        ),
        (
            doc("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>MYMETHOD</AllowedMethod>"),
            "InvalidRequest",
            "Found unsupported HTTP method in CORS config. Unsupported method is MYMETHOD",
        ),
        (
            doc("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>get</AllowedMethod>"),
            "InvalidRequest",
            "Found unsupported HTTP method in CORS config. Unsupported method is get",
        ),
        (
            doc("<AllowedOrigin>http://*.*.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"),
            "InvalidRequest",
            'AllowedOrigin "http://*.*.com" can not have more than one wildcard.',
        ),
        (
            doc(
                "<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
                "<AllowedHeader>x-*-*</AllowedHeader>"
            ),
            "InvalidRequest",
            'AllowedHeader "x-*-*" can not have more than one wildcard.',
        ),
    ],
)
def test_invalid_configurations(body: bytes, code: str, message: str | None) -> None:
    with pytest.raises(S3Error) as info:
        cors.parse_configuration(body)
    assert info.value.code == code
    if message is not None:
        assert info.value.message == message


def test_a_hundred_rules_are_allowed() -> None:
    one = "<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
    assert len(cors.parse_configuration(doc(*[one] * 100))) == 100
