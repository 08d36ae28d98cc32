"""Temporary credentials (gateway/iam/principals.py): a session token is accepted with its own
key until its expiry, and refused altered, past its time, with another key, or once the key
that made it is gone."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from gateway.iam.principals import Principals, check_token, seal_token
from gateway.s3.errors import S3Error
from gateway.store.crypto import Keyring
from gateway.users import User

ROOT = User("ROOTKEY0001", "root-secret", "root", "acct-1")
MASTER = secrets.token_bytes(32)
KEYS = Keyring(MASTER, [("s3", secrets.token_bytes(32))], {}, "aws-s3")
NOW = 1_800_000_000.0


def _principals(now: float = NOW, roots: dict[str, User] | None = None) -> Principals:
    return Principals(roots or {ROOT.access_key: ROOT}, None, KEYS, ttl=60, wall=lambda: now)


def _token(**claims: object) -> str:
    base = {"kind": "root", "parent": ROOT.access_key, "ak": "ASIATEMP", "sk": "temp-secret",
            "exp": NOW + 900, "acc": ROOT.canonical_id}  # fmt: skip
    return seal_token(MASTER, {**base, **claims})


def _prepare(principals: Principals, key: str, token: str | None) -> None:
    asyncio.run(principals.prepare(key, token))


def test_a_token_gives_its_key_until_it_expires() -> None:
    token = _token()
    found = _principals()
    _prepare(found, "ASIATEMP", token)
    user = found["ASIATEMP"]
    assert (user.secret_key, user.canonical_id, user.session_token) == (
        "temp-secret", ROOT.canonical_id, token)  # fmt: skip
    check_token(user, token)
    with pytest.raises(S3Error) as refused:
        check_token(user, None)  # the key without its token
    assert refused.value.code == "InvalidToken"
    with pytest.raises(S3Error) as late:
        _prepare(_principals(now=NOW + 900), "ASIATEMP", token)
    assert late.value.code == "ExpiredToken"


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t[:-4] + ("AAAA" if not t.endswith("AAAA") else "BBBB"),  # altered
        lambda t: "sts:" + t.partition(":")[2][::-1],  # not ours
        lambda t: "s3gw-token",  # not a token at all
    ],
)
def test_an_altered_token_is_refused(change: object) -> None:
    with pytest.raises(S3Error) as refused:
        _prepare(_principals(), "ASIATEMP", change(_token()))  # type: ignore[operator]
    assert refused.value.code == "InvalidToken"


def test_a_token_goes_with_its_own_key_only() -> None:
    with pytest.raises(S3Error) as refused:
        _prepare(_principals(), "ASIAOTHER", _token())
    assert refused.value.code == "InvalidToken"


def test_a_token_goes_with_the_key_that_made_it() -> None:
    # The root's key replaced (another access key in the users file): its sessions end.
    other = User("ROOTKEY0002", "root-secret-2", "root", "acct-1")
    found = _principals(roots={other.access_key: other})
    _prepare(found, "ASIATEMP", _token())
    with pytest.raises(KeyError):
        found["ASIATEMP"]
