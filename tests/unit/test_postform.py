"""The form upload's body parser (streamed, file last) and its policy checks."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.s3 import postform, postpolicy
from gateway.s3.errors import S3Error

BOUNDARY = "xYzZY"


def body(fields: list[tuple[str, bytes]], boundary: str = BOUNDARY, close: bool = True) -> bytes:
    out = b""
    for name, value in fields:
        extra = '; filename="a.txt"' if name == "file" else ""
        out += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode()
            + value
            + b"\r\n"
        )
    return out + (f"--{boundary}--\r\n".encode() if close else b"")


async def _chunks(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    at = 0
    for cut in sorted(set(cuts)):
        if at < cut < len(data):
            yield data[at:cut]
            at = cut
    yield data[at:]


def parse(data: bytes, cuts: list[int] = ()) -> tuple[postform.Form, bytes]:  # type: ignore[assignment]
    async def run() -> tuple[postform.Form, bytes]:
        reader = postform.FormReader(_chunks(data, list(cuts)), BOUNDARY.encode())
        form = await reader.read_fields()
        file = b"".join([c async for c in reader.file_chunks()])
        return form, file

    return asyncio.run(run())


@settings(max_examples=200, deadline=None)
@given(
    content=st.binary(max_size=300),
    value=st.text(max_size=40).filter(lambda v: "\r" not in v),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=8),
)
def test_any_split_of_the_body_reads_the_same(content: bytes, value: str, cuts: list[int]) -> None:
    # The file may hold anything, the delimiter's own beginnings included.
    data = body([("Key", b"k"), ("x-amz-meta-v", value.encode()), ("file", content)])
    form, file = parse(data, cuts)
    assert file == content
    assert form.fields == {"key": "k", "x-amz-meta-v": value}
    assert form.names == ["Key", "x-amz-meta-v", "file"]
    assert form.filename == "a.txt"


def test_file_resembling_the_delimiter() -> None:
    tricky = b"\r\n--xYzZ\r\n--xYzZYX"[:-2] + b"\r\n-"
    _, file = parse(body([("key", b"k"), ("file", tricky)]))
    assert file == tricky


def test_fields_after_the_file_are_not_read() -> None:
    form, file = parse(body([("key", b"k"), ("file", b"data"), ("acl", b"public-read")]))
    assert file == b"data"
    assert "acl" not in form.fields


def test_first_of_a_repeated_field_counts_and_names_are_lowercased() -> None:
    form, _ = parse(body([("KEY", b"first"), ("key", b"second"), ("file", b"")]))
    assert form.fields == {"key": "first"}


def test_content_disposition_parameters() -> None:
    data = (
        b'--xYzZY\r\nContent-Disposition: form-data; name="file"; '
        b'filename="C:\\dir\\x;y.txt"\r\nContent-Type: text/plain\r\n\r\nabc\r\n--xYzZY--'
    )
    form, file = parse(data)
    assert (form.filename, form.file_content_type, file) == (
        "C:\\dir\\x;y.txt",
        "text/plain",
        b"abc",
    )


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (body([("key", b"k")]), "IncorrectNumberOfFilesInPostRequest"),
        (body([("key", b"k"), ("file", b"abc")], close=False)[:-2], "MalformedPOSTRequest"),
        (b"no delimiter at all", "MalformedPOSTRequest"),
        (b"--xYzZY\r\nContent-Type: text/plain\r\n\r\nv\r\n--xYzZY--", "MalformedPOSTRequest"),
        (b"--xYzZY\r\nbroken header\r\n\r\nv\r\n--xYzZY--", "MalformedPOSTRequest"),
        (
            b'--xYzZY\r\nContent-Disposition: form-data; name="k"\r\n\r\n\xff\r\n--xYzZY--',
            "MalformedPOSTRequest",
        ),
        (
            b"--xYzZY\r\nContent-Disposition: form-data\r\n\r\nv\r\n--xYzZY--",
            "MalformedPOSTRequest",
        ),
        (body([("key", b"k" * 21_000), ("file", b"x")]), "MaxPostPreDataLengthExceededError"),
        (b"--xYzZY\r\n" + b"X: y\r\n" * 4000, "MaxPostPreDataLengthExceededError"),
    ],
)
def test_malformed_bodies(data: bytes, code: str) -> None:
    with pytest.raises(S3Error) as info:
        parse(data, [7, 100])
    assert info.value.code == code


@pytest.mark.parametrize(
    ("content_type", "boundary"),
    [
        ("multipart/form-data; boundary=abc", b"abc"),
        ('Multipart/Form-Data; charset=utf-8; boundary="a b:c"', b"a b:c"),
        ("multipart/form-data", None),
        ("multipart/mixed; boundary=abc", None),
        ("application/x-www-form-urlencoded", None),
        (None, None),
        ("multipart/form-data; boundary=" + "b" * 71, None),
    ],
)
def test_boundary_of(content_type: str | None, boundary: bytes | None) -> None:
    assert postform.boundary_of(content_type) == boundary


# --- the policy ------------------------------------------------------------------------------

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def policy(conditions: object, expiration: object = "2026-06-01T13:00:00.000Z") -> str:
    document = {"expiration": expiration, "conditions": conditions}
    return base64.b64encode(json.dumps(document).encode()).decode()


def test_policy_conditions() -> None:
    p = postpolicy.decode(
        policy(
            [
                {"bucket": "b"},
                ["starts-with", "$key", "user/"],
                ["eq", "$Content-Type", "image/png"],
                {"x-amz-meta-a": "1"},
                ["content-length-range", 1, "10"],
            ]
        )
    )
    assert p.length_range == (1, 10)
    fields = {"key": "user/x", "content-type": "image/png", "x-amz-meta-a": "1"}
    postpolicy.check(p, fields, "b", NOW)
    # Exempt fields need no condition.
    postpolicy.check(
        p, {**fields, "policy": "…", "x-amz-signature": "…", "x-ignore-me": "1"}, "b", NOW
    )
    failures = [
        ({**fields, "key": "other/x"}, "b", '["starts-with", "$key", "user/"]'),
        ({**fields, "content-type": "image/PNG"}, "b", '["eq", "$Content-Type", "image/png"]'),
        (fields, "c", '["eq", "$bucket", "b"]'),
        (
            {k: v for k, v in fields.items() if k != "x-amz-meta-a"},
            "b",
            '["eq", "$x-amz-meta-a", "1"]',
        ),
    ]
    for form, bucket, shown in failures:
        with pytest.raises(S3Error) as info:
            postpolicy.check(p, form, bucket, NOW)
        assert info.value.code == "AccessDenied"
        assert (
            info.value.message == f"Invalid according to Policy: Policy Condition failed: {shown}"
        )
    with pytest.raises(S3Error) as info:
        postpolicy.check(p, {**fields, "acl": "private", "tagging": "x"}, "b", NOW)
    assert info.value.message == "Invalid according to Policy: Extra input fields: acl, tagging"
    with pytest.raises(S3Error) as info:
        postpolicy.check(p, fields, "b", NOW + dt.timedelta(hours=2))
    assert info.value.message == "Invalid according to Policy: Policy expired."


def test_a_condition_without_its_dollar_fails() -> None:
    p = postpolicy.decode(policy([["eq", "key", "k"]]))
    with pytest.raises(S3Error) as info:
        postpolicy.check(p, {"key": "k"}, "b", NOW)
    assert info.value.code == "AccessDenied"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("%%%", "Invalid Policy: Invalid JSON."),
        (base64.b64encode(b"[1]").decode(), "Invalid Policy: Invalid JSON."),
        (
            base64.b64encode(b'{"conditions": []}').decode(),
            "Invalid Policy: Policy missing expiration.",
        ),
        (
            base64.b64encode(b'{"expiration": "2026-06-01T13:00:00Z", "CONDITIONS": []}').decode(),
            "Invalid Policy: Policy missing conditions.",
        ),
        (policy([], "tomorrow"), "Invalid Policy: Invalid 'expiration' value: 'tomorrow'"),
        (
            policy([], "2026-06-01 13:00:00+00:00"),
            "Invalid Policy: Invalid 'expiration' value: '2026-06-01 13:00:00+00:00'",
        ),
        (
            policy([["content-length-range", -1, 0]]),
            "Invalid Policy: Invalid Condition: content-length-range must be 0 <= min <= max.",
        ),
        (
            policy([["content-length-range", 0]]),
            "Invalid Policy: Invalid Condition: wrong format for content-length-range.",
        ),
        (
            policy([{}]),
            "Invalid Policy: Invalid Simple-Condition: Simple-Conditions must have exactly one "
            "property specified.",
        ),
        (
            policy([{"a": "1", "b": "2"}]),
            "Invalid Policy: Invalid Simple-Condition: Simple-Conditions must have exactly one "
            "property specified.",
        ),
        (
            policy([["matches", "$key", "k"]]),
            "Invalid Policy: Invalid Condition: unknown operation matches.",
        ),
    ],
)
def test_invalid_policies(raw: str, message: str) -> None:
    with pytest.raises(S3Error) as info:
        postpolicy.decode(raw)
    assert (info.value.code, info.value.status, info.value.message) == (
        "InvalidPolicyDocument",
        400,
        message,
    )


def test_length_range_bounds_that_are_not_integers_fail_as_a_condition() -> None:
    with pytest.raises(S3Error) as info:
        postpolicy.decode(policy([["content-length-range", "a", 10]]))
    assert info.value.code == "AccessDenied"
