"""The gateway's users: the main user (its keys from the environment, or generated on first
start and kept in the data folder) and the users of a users file."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import secrets
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Settings, StartError, read_toml, setting_name

CREDENTIALS_FILE = "credentials.json"


@dataclass(frozen=True)
class Identity:
    """Who, within an account, signed a request with an IAM key or temporary credentials
    (gateway/iam/): an IAM user, or a role's session. An account's root has none."""

    arn: str  # arn:aws:iam::ACCOUNT:user/PATH/NAME, arn:aws:sts::ACCOUNT:assumed-role/R/S
    user_id: str  # AIDA..., or AROA...:SESSION for a role's session
    # The ARNs a bucket or trust policy's Principal may name it by (a session: its role's
    # too, but the session policy then still applies, see `direct_arns`).
    arns: frozenset[str]
    policies: tuple[Any, ...]  # its identity policies, parsed (policy.Policy)
    # A role session's session policy (parsed), which narrows `policies`; None: none.
    session_policy: Any = None
    # The ARNs that grant past the session policy when a resource policy names them.
    direct_arns: frozenset[str] = frozenset()
    # The user's or role's tags: aws:PrincipalTag/<key> in policies (attribute-based access).
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class User:
    """The account a request acts for (the owner of what it makes) and who signed it."""

    access_key: str
    secret_key: str
    display_name: str
    canonical_id: str  # the account's
    identity: Identity | None = None  # None: the account's root
    session_token: str = ""  # temporary credentials (STS) are valid only with their token
    # The address an e-mail grant names this user by, under --email-grants resolve ("": none).
    email: str = ""

    @property
    def account(self) -> str:
        """The account's 12-digit id (ARNs, GetCallerIdentity, policies' principals,
        x-amz-expected-bucket-owner), beside its canonical id (ACLs, Owner)."""
        return account_number(self.canonical_id)

    @property
    def name(self) -> str:
        """Who made a request, for the access log: the IAM user or role session, or the
        account's display name."""
        return self.identity.arn if self.identity is not None else self.display_name

    @property
    def requester(self) -> str:
        """A server access log record's Requester: the IAM identity's ARN, or the root's
        canonical id (AWS's LogFormat.html)."""
        return self.identity.arn if self.identity is not None else self.canonical_id


ACCOUNT_NUMBER = re.compile(r"[0-9]{12}")


@functools.lru_cache(maxsize=1024)
def account_number(canonical_id: str) -> str:
    """An account's 12-digit id, as AWS's ARNs carry it, made from its canonical id (which
    AWS keeps apart: 64 hex digits, in ACLs and Owner elements). Made, not kept: every node,
    every catalog and every restart gives the same one, and so does any ARN written with the
    canonical id before (see `numbered`). A canonical id that is already 12 digits is its own
    number, so that a users file can choose an account's number."""
    if ACCOUNT_NUMBER.fullmatch(canonical_id):
        return canonical_id
    digest = hashlib.sha256(b"s3gw-account:" + canonical_id.encode()).digest()
    return f"{int.from_bytes(digest[:8], 'big') % 10**12:012d}"


# The account field of an IAM, STS, SNS, SQS or Lambda ARN.
_ARN_ACCOUNT = re.compile(r"(arn:aws[a-z-]*:(?:iam|sts|sns|sqs|lambda):[^:]*:)([^:]*)(?=:)")


def numbered(text: str) -> str:
    """`text` with an ARN's account named by its number: this gateway wrote its ARNs with
    the canonical id before it had numbers, and a policy, trust policy or configuration kept
    since still names accounts that way. AWS's own (`aws`), an empty one, a number already,
    or one with a wildcard or a policy variable are kept as they are."""
    m = _ARN_ACCOUNT.match(text)
    if m is None:
        return text
    account = m.group(2)
    if (
        account in ("", "aws")
        or ACCOUNT_NUMBER.fullmatch(account)
        or any(c in account for c in "*?$")
    ):
        return text
    return m.group(1) + account_number(account) + text[m.end() :]


def _random(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _user(
    access: str, secret: str, display_name: str = "s3gw", canonical_id: str = "", email: str = ""
) -> User:
    # The default canonical id is derived from the access key: stable across restarts.
    return User(
        access_key=access,
        secret_key=secret,
        display_name=display_name,
        canonical_id=canonical_id or hashlib.sha256(b"s3gw-user:" + access.encode()).hexdigest(),
        email=email,
    )


# Letters, digits and a few marks: a key with "/", ",", "=", ":" or a space could not be parsed
# back out of a SigV4 Credential or a SigV2 Authorization header (AWS's own are [A-Z0-9]).
_ACCESS_KEY = re.compile(r"[A-Za-z0-9._~+-]+")
_CANONICAL_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_USER_FIELDS = {"access_key", "secret_key", "display_name", "canonical_id", "email"}
# AWS lets no one choose a secret key (it makes 40 characters); MinIO, which does, asks for
# at least 8, and so do we, of the users file and of S3GW_SECRET_KEY alike.
MIN_SECRET_KEY = 8


def _check_keys(where: str, access: str, secret: str, secret_where: str | None = None) -> None:
    """Usable keys, or a StartError naming `where` (`secret_where` for the secret's own)."""
    if not access:
        raise StartError(f"{where}: the access key is empty")
    if not _ACCESS_KEY.fullmatch(access):
        raise StartError(
            f"{where}: access key {access!r} may hold letters, digits and . _ ~ + - only"
        )
    where = secret_where or where
    if not secret:
        raise StartError(f"{where}: the secret key of {access} is empty")
    if len(secret) < MIN_SECRET_KEY:
        raise StartError(
            f"{where}: the secret key of {access} must be at least {MIN_SECRET_KEY} characters"
        )


def _one_account_each(where: str, users: Iterable[User]) -> None:
    """Two users with one canonical id would be one account (each other's buckets, objects
    and grants), which nobody means: refused; so are two with one account number (a canonical
    id of 12 digits that is another's number, or, once in a million million, two made
    alike)."""
    seen: dict[str, str] = {}
    numbers: dict[str, str] = {}
    for user in users:
        other = seen.setdefault(user.canonical_id, user.access_key)
        if other != user.access_key:
            raise StartError(
                f"{where}: users {other} and {user.access_key} have one canonical_id "
                f"{user.canonical_id}; each user is an account of its own"
            )
        other = numbers.setdefault(user.account, user.access_key)
        if other != user.access_key:
            raise StartError(
                f"{where}: users {other} and {user.access_key} have one account id "
                f"{user.account}; give one of them another canonical_id"
            )


def read_users_file(path: Path) -> list[User]:
    """A TOML users file: `[[user]]` tables with access_key, secret_key, and optionally
    display_name, canonical_id and email."""
    where, document = read_toml(path, "users")
    entries = document.get("user")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise StartError(f"{where}: users are [[user]] tables (one per user), not [user]")
    if set(document) != {"user"}:
        raise StartError(f"{where}: unknown {sorted(set(document) - {'user'})[0]!r}")
    users: list[User] = []
    seen: set[str] = set()
    emails: dict[str, str] = {}
    for i, entry in enumerate(entries, 1):
        unknown = set(entry) - _USER_FIELDS
        if unknown:
            raise StartError(f"{where}: user {i} has an unknown field {sorted(unknown)[0]!r}")
        for name in ("access_key", "secret_key"):
            if not isinstance(entry.get(name), str):
                raise StartError(f"{where}: user {i} has no {name} (a string)")
        access, secret = entry["access_key"], entry["secret_key"]
        _check_keys(f"{where}: user {i}", access, secret)
        if access in seen:
            raise StartError(f"{where}: access key {access} is defined twice")
        seen.add(access)
        canonical_id = entry.get("canonical_id", "")
        if canonical_id != "" and (
            not isinstance(canonical_id, str) or not _CANONICAL_ID.fullmatch(canonical_id)
        ):
            # It is the account's name in ARNs, policies' principals and ACL grants: `*`
            # would read as "everyone" there, and a space or `:` would split them.
            raise StartError(
                f"{where}: user {i}'s canonical_id {canonical_id!r} must be 1 to 128 letters, "
                "digits, . _ or -"
            )
        email = entry.get("email", "")
        if not isinstance(email, str):
            raise StartError(f"{where}: user {i} has an email that is not a string")
        # A grant by e-mail address names one account (--email-grants resolve).
        if email and emails.setdefault(email.lower(), access) != access:
            raise StartError(f"{where}: users {emails[email.lower()]} and {access} have one email")
        users.append(
            _user(
                access,
                secret,
                str(entry.get("display_name", access)),
                canonical_id,
                email,
            )
        )
    _one_account_each(where, users)
    return users


def main_user(settings: Settings, *, create: bool) -> tuple[User, Path | None, bool]:
    """The gateway's own user, whose keys a users file does not replace (its buckets would be
    stranded): S3GW_ACCESS_KEY/S3GW_SECRET_KEY, or else the pair kept in the data folder,
    generated on first start when `create`. Returns it, the file its keys are kept in (None:
    the environment), and whether they were generated now."""
    if settings.access_key and settings.secret_key:
        _check_keys(
            setting_name("access-key"),
            settings.access_key,
            settings.secret_key,
            setting_name("secret-key"),
        )
        return _user(settings.access_key, settings.secret_key), None, False
    if settings.access_key or settings.secret_key:
        raise StartError(
            f"set both {setting_name('access-key')} and {setting_name('secret-key')}, or neither"
        )
    path = settings.data / CREDENTIALS_FILE
    if path.exists() or not create:
        try:
            stored = json.loads(path.read_text())
            return _user(stored["access_key"], stored["secret_key"]), path, False
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StartError(f"cannot read the gateway's keys from {path}: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    access = "S3GW" + _random(string.ascii_uppercase + string.digits, 16)
    secret = _random(string.ascii_letters + string.digits, 40)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"access_key": access, "secret_key": secret}, f)
        f.flush()
        os.fsync(f.fileno())
    return _user(access, secret), path, True


def load_users(settings: Settings) -> tuple[dict[str, User], Path | None]:
    """The users the gateway accepts, keyed by access key, the main user first; and the file
    the main user's keys are kept in (None: the environment).

    A users file adds users to the main user; an entry with the main user's access key
    replaces it (another secret or display name, the same buckets).
    """
    main, path, _ = main_user(settings, create=True)
    users = {main.access_key: main}
    if settings.users is not None:
        for user in read_users_file(settings.users):
            users[user.access_key] = user
        # The main user beside the file's (unless an entry replaced it).
        _one_account_each(f"{setting_name('users')} {settings.users}", users.values())
    return users, path
