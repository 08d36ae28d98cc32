"""Accounts' 12-digit ids (issue 49): made from the canonical id, the same everywhere, and ARNs
written with the canonical id (before accounts had numbers) naming the same account."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import StartError
from gateway.s3 import policy
from gateway.users import ACCOUNT_NUMBER, account_number, numbered, read_users_file

CANONICAL = "1cbc7b3e9f2ad177" * 4


def test_an_account_number_is_twelve_digits_made_from_the_canonical_id() -> None:
    number = account_number(CANONICAL)
    assert ACCOUNT_NUMBER.fullmatch(number)
    assert account_number(CANONICAL) == number  # stable
    assert account_number(CANONICAL[:-1] + "0") != number
    # A canonical id of 12 digits is its own number: a users file can choose one.
    assert account_number("000123456789") == "000123456789"
    assert account_number("testx-user") != account_number("testy-user")


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        (f"arn:aws:iam::{CANONICAL}:user/a/b", "arn:aws:iam::{n}:user/a/b"),
        (f"arn:aws:iam::{CANONICAL}:root", "arn:aws:iam::{n}:root"),
        (f"arn:aws:sts::{CANONICAL}:assumed-role/r/s", "arn:aws:sts::{n}:assumed-role/r/s"),
        (f"arn:aws:sns:us-east-1:{CANONICAL}:topic", "arn:aws:sns:us-east-1:{n}:topic"),
        ("arn:aws:iam::123456789012:user/x", "arn:aws:iam::123456789012:user/x"),
        (
            "arn:aws:iam::aws:policy/AmazonS3FullAccess",
            "arn:aws:iam::aws:policy/AmazonS3FullAccess",
        ),
        ("arn:aws:iam::*:user/x", "arn:aws:iam::*:user/x"),
        (
            "arn:aws:iam::${aws:PrincipalAccount}:user/x",
            "arn:aws:iam::${aws:PrincipalAccount}:user/x",
        ),
        ("arn:aws:iam:::user/x", "arn:aws:iam:::user/x"),
        ("arn:aws:s3:::bucket/key", "arn:aws:s3:::bucket/key"),
        ("*", "*"),
    ],
)
def test_numbered_names_an_arns_account_by_its_number(given: str, wanted: str) -> None:
    assert numbered(given) == wanted.replace("{n}", account_number(CANONICAL))


def _caller(account: str, arns: frozenset[str] = frozenset()) -> policy.Caller:
    return policy.Caller(account, arns, root=not arns)


def _allows(doc: str, caller: policy.Caller, resource: str = "*") -> bool:
    parsed = policy.parse(doc, "", policy.Kind.IDENTITY)
    request = policy.PolicyRequest(
        caller, "s3:GetObject", resource, lambda key: [caller.account or ""]
    )
    return parsed.evaluate(request) is policy.Effect.ALLOW


@pytest.mark.parametrize(
    "principal",
    [
        CANONICAL,
        f"arn:aws:iam::{CANONICAL}:root",
        "{n}",
        "arn:aws:iam::{n}:root",
    ],
)
def test_a_policy_naming_an_account_by_either_id_names_it(principal: str) -> None:
    number = account_number(CANONICAL)
    doc = (
        '{"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", '
        f'"Principal": {{"AWS": "{principal.format(n=number)}"}}}}]}}'
    )
    parsed = policy.parse(doc, "", policy.Kind.TRUST)
    for account, wanted in ((number, True), (account_number("someone-else"), False)):
        request = policy.PolicyRequest(_caller(account), "s3:GetObject", "*", lambda key: None)
        assert (parsed.evaluate(request) is policy.Effect.ALLOW) is wanted


def test_resources_and_conditions_written_with_the_canonical_id_still_match() -> None:
    number = account_number(CANONICAL)
    doc = (
        '{"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", '
        f'"Resource": "arn:aws:iam::{CANONICAL}:user/*", '
        f'"Condition": {{"StringEquals": {{"aws:PrincipalAccount": "{CANONICAL}"}}}}}}]}}'
    )
    assert _allows(doc, _caller(number), f"arn:aws:iam::{number}:user/alice")
    assert not _allows(doc, _caller(number), "arn:aws:iam::123456789012:user/alice")
    assert not _allows(doc, _caller(account_number("other")), f"arn:aws:iam::{number}:user/a")


def test_two_users_with_one_account_number_are_refused(tmp_path: Path) -> None:
    users = tmp_path / "users.toml"
    users.write_text(
        '[[user]]\naccess_key = "A1"\nsecret_key = "secret-one"\ncanonical_id = "x1"\n'
        f'[[user]]\naccess_key = "A2"\nsecret_key = "secret-two"\n'
        f'canonical_id = "{account_number("x1")}"\n'
    )
    with pytest.raises(StartError, match="one account id"):
        read_users_file(users)
