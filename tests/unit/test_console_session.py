"""The console's sessions and CSRF tokens (gateway/console/session.py), and the share links it
presigns, checked by the gateway's own SigV4 verifier."""

from __future__ import annotations

import stat
from dataclasses import replace

import pytest

from gateway.console.session import SESSION_SECONDS, Sessions, SignInLimits, folder_secret
from gateway.s3.auth import Authenticator, SignedRequest
from gateway.s3.errors import S3Error
from gateway.s3.sigv4 import presigned_url
from gateway.users import User

ALICE = User("AKIAALICE", "alice-secret-alice-secret", "alice", "a" * 64)
BOB = User("AKIABOB", "bob-secret-bob-secret-bob", "bob", "b" * 64)
USERS = {u.access_key: u for u in (ALICE, BOB)}
NOW = 1_800_000_000.0


def sessions(secret: bytes = b"k" * 32, users=USERS, now: float = NOW) -> Sessions:
    return Sessions(secret, users, clock=lambda: now)


def test_sign_in_with_a_users_keys_gives_a_token_that_names_them():
    made = sessions().sign_in("AKIAALICE", ALICE.secret_key)
    assert made is not None
    session, token = made
    again = sessions().verify(token)
    assert again is not None and again.user == ALICE and again.nonce == session.nonce
    assert again.expires == NOW + SESSION_SECONDS


@pytest.mark.parametrize(
    ("access", "secret"),
    [("AKIAALICE", BOB.secret_key), ("AKIANOBODY", ALICE.secret_key), ("AKIAALICE", "")],
)
def test_wrong_keys_sign_no_one_in(access, secret):
    assert sessions().sign_in(access, secret) is None


def _token() -> str:
    made = sessions().sign_in("AKIAALICE", ALICE.secret_key)
    assert made is not None
    return made[1]


def test_a_tampered_token_is_refused():
    token = _token()
    user, expires, nonce, mac = token.split(".")
    bob = "QUtJQUJPQg"  # base64url of AKIABOB
    for forged in (
        f"{bob}.{expires}.{nonce}.{mac}",  # another user
        f"{user}.{int(expires) + 3600}.{nonce}.{mac}",  # a longer life
        f"{user}.{expires}.{'0' * 32}.{mac}",  # another nonce (another CSRF token)
        f"{user}.{expires}.{nonce}.{'0' * 64}",
        f"{user}.{expires}.{nonce}",
        "",
        "garbage",
        f"!!.{expires}.{nonce}.{mac}",
    ):
        assert sessions().verify(forged) is None, forged


def test_a_session_expires():
    token = _token()
    assert sessions(now=NOW + SESSION_SECONDS - 1).verify(token) is not None
    assert sessions(now=NOW + SESSION_SECONDS).verify(token) is None


def test_another_data_folders_secret_does_not_accept_the_token():
    assert sessions(secret=b"x" * 32).verify(_token()) is None


def test_a_user_removed_or_given_a_new_secret_is_signed_out():
    token = _token()
    assert sessions(users={"AKIABOB": BOB}).verify(token) is None
    renewed = User("AKIAALICE", "a-new-secret-for-alice!!", "alice", "a" * 64)
    assert sessions(users={"AKIAALICE": renewed}).verify(token) is None


def test_the_token_names_its_access_key_for_the_lookup_before_it_is_verified():
    # The console reads an IAM user's key (Principals.prepare) before verifying its session.
    _, token = sessions().sign_in("AKIAALICE", ALICE.secret_key)
    assert sessions().access_key(token) == "AKIAALICE"
    assert sessions().access_key("not.a.token") is None
    assert sessions().access_key(None) is None


def test_temporary_credentials_sign_no_one_in():
    # Valid only with their session token, which the sign-in form does not take.
    temporary = replace(ALICE, access_key="ASIATEMP", session_token="sts:sealed")
    users = {**USERS, "ASIATEMP": temporary}
    assert sessions(users=users).sign_in("ASIATEMP", ALICE.secret_key) is None
    # Nor does a session of the same key hold if the key is now temporary credentials.
    _, token = sessions(users={"ASIATEMP": replace(temporary, session_token="")}).sign_in(
        "ASIATEMP", ALICE.secret_key
    )
    assert sessions(users=users).verify(token) is None


def test_csrf_token_is_bound_to_its_session():
    made = sessions().sign_in("AKIAALICE", ALICE.secret_key)
    assert made is not None
    nonce = made[0].nonce
    token = sessions().csrf(nonce)
    assert sessions().check_csrf(nonce, token)
    other = sessions().sign_in("AKIAALICE", ALICE.secret_key)
    assert other is not None and other[0].nonce != nonce
    assert not sessions().check_csrf(other[0].nonce, token)  # another session's
    assert not sessions().check_csrf(nonce, None)
    assert not sessions().check_csrf(nonce, "")
    assert not sessions().check_csrf(None, token)
    assert not sessions(secret=b"x" * 32).check_csrf(nonce, token)


def test_folder_secret_is_made_once_and_private(tmp_path):
    first = folder_secret(tmp_path)
    assert len(first) == 32
    assert folder_secret(tmp_path) == first
    assert stat.S_IMODE((tmp_path / "console.key").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["console.key"]  # no temporary left


def _verify(url: str, host: str, now: float) -> User:
    path, _, query = url.split("://", 1)[1].partition("/")[2].partition("?")
    request = SignedRequest("GET", "/" + path, query, {"host": host})
    return Authenticator(USERS, "us-east-1", clock=lambda: now).authenticate(request).user


@pytest.mark.parametrize("key", ["plain.txt", "a dir/ünï cödé+&=?.bin", "x//../y"])
def test_share_link_is_accepted_by_the_gateways_verifier(key):
    url = presigned_url(
        "http://127.0.0.1:9000", "127.0.0.1:9000", f"/bkt/{key}", ALICE, "us-east-1", 3600, NOW
    )
    assert _verify(url, "127.0.0.1:9000", NOW + 10) == ALICE


def test_share_link_names_a_version_and_expires():
    url = presigned_url("http://h:1", "h:1", "/b/k", ALICE, "us-east-1", 60, NOW, "v1")
    assert "versionId=v1" in url
    assert _verify(url, "h:1", NOW) == ALICE
    with pytest.raises(S3Error) as refused:
        _verify(url, "h:1", NOW + 61)
    assert refused.value.code == "AccessDenied"
    with pytest.raises(S3Error) as changed:
        _verify(url.replace("versionId=v1", "versionId=v2"), "h:1", NOW)
    assert changed.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3Error):
        _verify(url, "other:1", NOW)  # the Host is signed


def test_failed_sign_ins_wait_until_the_oldest_leaves_the_window():
    now = [1000.0]
    limits = SignInLimits(clock=lambda: now[0], window=900, per_key=5, per_address=20)
    for _ in range(5):
        assert limits.refused("AKIAALICE", "192.0.2.1") is None
        limits.failed("AKIAALICE", "192.0.2.1")
        now[0] += 10
    # Failures at 1000..1040: free again when the one of 1000 is 900 s old.
    assert limits.refused("AKIAALICE", "192.0.2.1") == ("key", 850)
    assert limits.refused("AKIABOB", "192.0.2.1") is None  # another key
    now[0] = 1900.5
    assert limits.refused("AKIAALICE", "192.0.2.1") is None
    limits.failed("AKIAALICE", "192.0.2.1")
    assert limits.refused("AKIAALICE", "192.0.2.1") == ("key", 10)


def test_a_sign_in_clears_its_keys_count_not_its_addresss():
    limits = SignInLimits(clock=lambda: NOW, per_key=2, per_address=3)
    limits.failed("AKIAALICE", "192.0.2.1")
    limits.failed("AKIAALICE", "192.0.2.1")
    assert limits.refused("AKIAALICE", "192.0.2.9") == ("key", 900)
    limits.succeeded("AKIAALICE")
    assert limits.refused("AKIAALICE", "192.0.2.9") is None
    limits.failed("AKIABOB", "192.0.2.1")
    assert limits.refused("AKIAALICE", "192.0.2.1") == ("address", 900)
    assert limits.refused("AKIAALICE", "192.0.2.2") is None  # another address
