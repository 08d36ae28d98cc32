"""Policy variables (reference_policies_variables.html): `${aws:username}` and its kin in a
policy's resources and condition values take the request's values, in the 2012-10-17 language
only; a variable without a value matches nothing, unless it has a default."""

from __future__ import annotations

import json

from gateway.s3 import policy
from gateway.s3.policy import Caller, Effect, Kind, PolicyRequest
from gateway.users import account_number


def _identity(version: str, statement: dict[str, object]) -> policy.Policy:
    return policy.parse(
        json.dumps({"Version": version, "Statement": [statement]}), "", Kind.IDENTITY
    )


def _ask(doc: policy.Policy, resource: str, values: dict[str, str]) -> Effect | None:
    def lookup(key: str) -> list[str] | None:
        return [values[key]] if key in values else None

    return doc.evaluate(
        PolicyRequest(Caller(account_number("acct")), "s3:PutObject", resource, lookup)
    )


HOME = {"Effect": "Allow", "Action": "s3:PutObject",
        "Resource": "arn:aws:s3:::team/home/${aws:username}/*"}  # fmt: skip


def test_a_resource_takes_the_callers_name() -> None:
    doc = _identity("2012-10-17", HOME)
    alice = {"aws:username": "alice"}
    assert _ask(doc, "arn:aws:s3:::team/home/alice/notes", alice) is Effect.ALLOW
    assert _ask(doc, "arn:aws:s3:::team/home/bob/notes", alice) is None
    # No name (a role's session has none): the resource matches nothing.
    assert _ask(doc, "arn:aws:s3:::team/home//notes", {}) is None


def test_variables_are_text_in_the_old_language() -> None:
    doc = _identity("2008-10-17", HOME)
    assert _ask(doc, "arn:aws:s3:::team/home/alice/x", {"aws:username": "alice"}) is None
    literal = "arn:aws:s3:::team/home/${aws:username}/x"
    assert _ask(doc, literal, {"aws:username": "alice"}) is Effect.ALLOW


def test_a_default_and_a_condition_value() -> None:
    doc = _identity("2012-10-17", {
        "Effect": "Allow", "Action": "s3:PutObject", "Resource": "*",
        "Condition": {"StringLike": {"s3:prefix": "home/${aws:username, 'guest'}/*"}},
    })  # fmt: skip
    assert _ask(doc, "x", {"s3:prefix": "home/alice/a", "aws:username": "alice"}) is Effect.ALLOW
    assert _ask(doc, "x", {"s3:prefix": "home/alice/a", "aws:username": "bob"}) is None
    assert _ask(doc, "x", {"s3:prefix": "home/guest/a"}) is Effect.ALLOW


def test_a_resource_without_variables_is_untouched() -> None:
    doc = _identity(
        "2012-10-17",
        {
            "Effect": "Allow",
            "Action": "s3:PutObject",
            "Resource": ["arn:aws:s3:::a/*", "arn:aws:s3:::${aws:username}/*"],
        },
    )
    assert _ask(doc, "arn:aws:s3:::a/k", {}) is Effect.ALLOW
    assert _ask(doc, "arn:aws:s3:::carol/k", {"aws:username": "carol"}) is Effect.ALLOW


def test_what_a_variable_brings_is_text_not_a_wildcard() -> None:
    doc = _identity("2012-10-17", HOME)
    # A value holding * or ? matches only those characters.
    star = {"aws:username": "*"}
    assert _ask(doc, "arn:aws:s3:::team/home/bob/notes", star) is None
    assert _ask(doc, "arn:aws:s3:::team/home/*/notes", star) is Effect.ALLOW
    assert _ask(doc, "arn:aws:s3:::team/home/b/notes", {"aws:username": "?"}) is None
    # ${*} is the character itself.
    literal = _identity("2012-10-17", {"Effect": "Allow", "Action": "s3:PutObject",
                                       "Resource": "arn:aws:s3:::team/${*}"})  # fmt: skip
    assert _ask(literal, "arn:aws:s3:::team/anything", {}) is None
    assert _ask(literal, "arn:aws:s3:::team/*", {}) is Effect.ALLOW
    # The same under StringLike.
    like = _identity("2012-10-17", {
        "Effect": "Allow", "Action": "s3:PutObject", "Resource": "*",
        "Condition": {"StringLike": {"s3:prefix": "home/${aws:username}/*"}},
    })  # fmt: skip
    assert _ask(like, "x", {"s3:prefix": "home/bob/a", "aws:username": "*"}) is None
    assert _ask(like, "x", {"s3:prefix": "home/*/a", "aws:username": "*"}) is Effect.ALLOW
