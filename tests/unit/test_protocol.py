"""What aiohttp's parser refuses, as S3 errors (the wire is tested in test_hostile.py)."""

from __future__ import annotations

import pytest
from aiohttp.http_exceptions import (
    BadHttpMessage,
    BadHttpMethod,
    BadStatusLine,
    InvalidHeader,
    LineTooLong,
)

from gateway.s3.protocol import _one_line, parse_error


def test_a_line_over_the_limit_names_the_limit() -> None:
    error = parse_error(LineTooLong(b"aaaa...", 8190))
    assert (error.code, error.status) == ("RequestHeaderSectionTooLarge", 400)
    assert error.fields == {"MaxSizeAllowed": "8190"}


def test_too_many_headers_is_a_header_section_too_large() -> None:
    assert parse_error(BadHttpMessage("Too many headers received")).code == (
        "RequestHeaderSectionTooLarge"
    )


@pytest.mark.parametrize(
    "exc",
    [
        BadHttpMethod(error="Invalid method encountered:\n\n  b'F@O / HTTP/1.1'\n     ^"),
        BadStatusLine(error="Expected space after method"),
        BadHttpMessage("Empty Content-Length:\n\n  b''\n    ^"),
        InvalidHeader(b"x-a"),
        None,
    ],
    ids=["method", "request-line", "content-length", "header", "none"],
)
def test_anything_else_is_bad_request(exc: Exception | None) -> None:
    error = parse_error(exc)
    assert (error.code, error.status) == ("BadRequest", 400)
    assert error.message == "An error occurred when parsing the HTTP request."


def test_the_log_line_is_one_line_without_the_caret() -> None:
    exc = BadHttpMethod(error="Invalid method encountered:\n\n  b'F@O / HTTP/1.1'\n     ^")
    assert _one_line(exc) == "Invalid method encountered: b'F@O / HTTP/1.1'"
    assert "\n" not in _one_line(LineTooLong(b"x" * 500 + b"\n...", 8190))
    assert len(_one_line(LineTooLong(b"x" * 500, 8190))) <= 300


def test_the_error_document_has_no_resource() -> None:
    body = parse_error(None).to_xml("ID", "HOST")
    assert b"<Resource>" not in body
    assert body.endswith(b"<RequestId>ID</RequestId><HostId>HOST</HostId></Error>")
