"""IAM's wildcard as policies match it (`*` any run, none included; `?` exactly one
character): a table, a property test against a regular-expression model on small alphabets,
and patterns that made the old backtracking matcher run for minutes."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.s3 import policy
from gateway.s3.wildcard import wildcard

# The patterns that made the old matcher run for minutes: a hang fails the test, well before
# the suite's own bound (pytest-timeout is in the test extra).
hang_guard = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("", "", True),
        ("", "a", False),
        ("*", "", True),
        ("*", "anything/at all", True),
        ("**", "", True),
        ("?", "", False),
        ("?", "a", True),
        ("?", "ab", False),
        ("??", "ab", True),
        ("a", "a", True),
        ("a", "A", False),
        ("abc", "abcd", False),
        ("abc*", "abc", True),
        ("abc*", "abcdef", True),
        ("abc*", "ab", False),
        ("*abc", "abc", True),
        ("*abc", "xxabc", True),
        ("*abc", "abcx", False),
        ("*b*", "abc", True),
        ("*b*", "ac", False),
        ("a*a", "a", False),  # the prefix and the suffix may not overlap
        ("a*a", "aa", True),
        ("a?c", "abc", True),
        ("a?c", "ac", False),
        ("*?", "", False),
        ("*?", "x", True),
        ("*a?c*", "zzabzabcz", True),
        ("*a?c*", "zzabzabz", False),
        ("a*b*c", "abbbbc", True),
        ("a*b*c", "acb", False),
        ("*ab*ab", "abab", True),
        ("*ab*ab", "abxab", True),
        ("*ab*ab", "aba", False),
        # Everything but `*` and `?` is literal, regular expressions' specials included.
        ("a.c", "abc", False),
        ("a.c", "a.c", True),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("a+", "aa", False),
        ("x\\y", "x\\y", True),
        ("line*end", "line\nend", True),
        ("arn:aws:s3:::bkt/home/*", "arn:aws:s3:::bkt/home/a/b", True),
        ("arn:aws:s3:::bkt/home/*", "arn:aws:s3:::bkt/homer", False),
        ("arn:aws:s3:::b?t/*", "arn:aws:s3:::bkt/k", True),
    ],
)
def test_table(pattern: str, text: str, expected: bool) -> None:
    assert wildcard(pattern).matches(text) is expected


def test_case() -> None:
    assert wildcard("s3:Get*", ignore_case=True).matches("s3:GETOBJECT")
    assert wildcard("S3:LIST?UCKET", ignore_case=True).matches("s3:ListBucket")
    assert not wildcard("s3:Get*").matches("s3:getObject")
    assert not wildcard("s3:Get*", ignore_case=True).matches("s3:PutObject")


def model(pattern: str, text: str) -> bool:
    """The meaning, stated as a regular expression (fine on the small inputs here)."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(body, text, re.DOTALL) is not None


@given(st.text("ab*?", max_size=10), st.text("abc", max_size=14))
def test_agrees_with_the_model(pattern: str, text: str) -> None:
    assert wildcard(pattern).matches(text) is model(pattern, text)


@given(st.text("aB*?", max_size=8), st.text("AbB", max_size=10))
def test_ignore_case_agrees_with_the_model(pattern: str, text: str) -> None:
    assert wildcard(pattern, ignore_case=True).matches(text) is model(pattern.lower(), text.lower())


@hang_guard
def test_many_stars_against_long_text() -> None:
    """Patterns that held a worker: with a backtracking regular expression, each star
    multiplies the attempts (`*a` ten times against 1,024 `a`s is about 1024^10)."""
    stars = "*a" * 10 + "*b"
    assert not wildcard(stars).matches("a" * 1024)
    assert wildcard(stars).matches("a" * 1024 + "b")
    reported = "arn:aws:s3:::bkt/" + "*a" * 11 + "*b"  # 41 characters after the bucket
    key = "arn:aws:s3:::bkt/" + "a" * 300
    assert not wildcard(reported).matches(key)
    assert not wildcard("*a?" * 10 + "*b").matches("a" * 1024)
    # And through the policy, as a Resource and as a StringLike value, on each request.
    statements = [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": reported},
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::bkt/*",
            "Condition": {"StringLike": {"aws:Referer": stars}},
        },
    ]
    parsed = policy.parse(json.dumps({"Statement": statements}), "bkt")
    referer = {"aws:referer": ["a" * 1024]}
    request = policy.PolicyRequest(policy.Caller(None), "s3:GetObject", key, referer.get)
    assert parsed.evaluate(request) is None
    referer["aws:referer"] = ["a" * 1024 + "b"]
    assert parsed.evaluate(request) is policy.Effect.ALLOW
