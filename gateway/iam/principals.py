"""Who an access key is: an account's root (the users file), an IAM user's key, or temporary
credentials from STS, as the `User` authentication verifies a signature with and authorisation
judges.

Roots are fixed at start. IAM's keys live in the catalog: the first request with a key reads
it (its account's document), and the answer is kept for at most `ttl` seconds
(--iam-cache-seconds), so that a key made on any node works at once, and a key deactivated or
deleted on any node stops working within `ttl` (at once on the worker that changed it).

Temporary credentials carry themselves: the session token is the credentials' secret, expiry
and origin sealed under the data folder's master key (every node of a cluster shares it), so
no node stores them; each use still checks that their origin stands (the key that made them,
or the role they assumed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..s3 import policy
from ..s3.errors import S3Error
from ..store import Store, crypto
from ..store.identities import IdentityChange
from ..users import Identity, User
from .account import Account

TOKEN_LABEL = "sts"


def seal_token(master: bytes, claims: Mapping[str, Any]) -> str:
    return crypto.seal_secret(master, TOKEN_LABEL, json.dumps(claims).encode())


def open_token(master: bytes | None, token: str) -> dict[str, Any]:
    """The claims of a session token; InvalidToken if it is not one this gateway sealed."""
    if master is None or not token.startswith(TOKEN_LABEL + ":"):
        raise S3Error("InvalidToken")
    try:
        claims = json.loads(crypto.open_secret(master, token))
    except (crypto.WrongKey, ValueError):
        raise S3Error("InvalidToken") from None
    if not isinstance(claims, dict):
        raise S3Error("InvalidToken")
    return claims


def _policies(texts: list[str]) -> tuple[policy.Policy, ...]:
    return tuple(policy.cached(t, "", policy.Kind.IDENTITY) for t in texts)


def user_identity(account: Account, user: dict[str, Any]) -> Identity:
    arn = account.arn("user", user["path"], user["name"])
    return Identity(
        arn=arn,
        user_id=user["id"],
        arns=frozenset({arn}),
        policies=_policies(account.user_policies(user)),
        direct_arns=frozenset({arn}),
        tags=tuple((user.get("tags") or {}).items()),
    )


def role_identity(
    account: Account,
    role: dict[str, Any],
    session: str,
    session_policy: str | None,
    session_tags: Mapping[str, str] | None = None,
) -> Identity:
    role_arn = account.arn("role", role["path"], role["name"])
    assumed = f"arn:aws:sts::{account.id}:assumed-role/{role['name']}/{session}"
    return Identity(
        arn=assumed,
        user_id=f"{role['id']}:{session}",
        arns=frozenset({assumed, role_arn}),
        policies=_policies(account.role_policies(role)),
        session_policy=(
            None
            if session_policy is None
            else policy.cached(session_policy, "", policy.Kind.IDENTITY)
        ),
        direct_arns=frozenset({assumed}),
        # A session tag replaces the role's tag of the same key (id_session-tags.html).
        tags=tuple({**(role.get("tags") or {}), **(session_tags or {})}.items()),
    )


class Principals(Mapping[str, User]):
    """The Authenticator's users: the roots, and what `prepare` found of IAM's keys and
    temporary credentials (a Mapping, so that the signature checks stay synchronous)."""

    def __init__(
        self,
        roots: Mapping[str, User],
        store: Store | None,
        keys: crypto.Keyring | None,
        ttl: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.roots = roots
        self.by_account = {u.canonical_id: u for u in roots.values()}
        self._store = store
        self.keys = keys
        self._refreshed = float("-inf")  # when the master key was last looked at
        self._ttl = ttl
        self._clock = clock
        self._wall = wall
        self._cache: dict[str, tuple[float, User]] = {}
        # Accounts' documents as read, for the same bound: the keys of one account looked up
        # within it read and parse its document once (an account of thousands of users has a
        # document of megabytes).
        self._documents: dict[str, tuple[float, Account]] = {}

    # -- Mapping --

    def __getitem__(self, access_key: str) -> User:
        root = self.roots.get(access_key)
        if root is not None:
            return root
        # `prepare` has just read it afresh if it was older than the bound.
        return self._cache[access_key][1]

    def __iter__(self) -> Iterator[str]:
        return iter(self.roots)

    def __len__(self) -> int:
        return len(self.roots)

    def forget(self) -> None:
        """Drop every key and document kept: a change made on this worker counts here at
        once."""
        self._cache.clear()
        self._documents.clear()

    @property
    def master(self) -> bytes | None:
        """The master key session tokens are sealed and opened under: looked at again at most
        once per bound, so that after `s3gw keys rotate` (on any node sharing the folder)
        every worker refuses the tokens sealed under the retired key within it."""
        if self.keys is None:
            return None
        if self._clock() >= self._refreshed + self._ttl:
            self._refreshed = self._clock()
            self.keys.refresh()
        return self.keys.master

    async def reseal(self) -> None:
        """Each account's IAM secret keys sealed under the master key (before the keyring's
        `iam` key) sealed under that key instead, once, so that a rotation of the master
        leaves them readable. Every worker may run it at start: the change is made once."""
        if self._store is None or self.keys is None:
            return
        keys = self.keys

        def run(text: str | None) -> IdentityChange[None]:
            acc = Account.load("", text)
            changed = False
            for user in [acc.doc["root"], *acc.doc["users"].values()]:
                for key in user["keys"].values():
                    resealed = keys.reseal_iam_secret(key["secret"])
                    if resealed is not None:
                        key["secret"], changed = resealed, True
            return IdentityChange(None, acc.dump() if changed else None)

        for account in self.by_account:
            text = await self._store.get_identities(account)
            if text is not None and '"secret":"iam:' in text:
                await self._store.change_identities(account, run)

    # -- finding --

    def check_token(self, user: User, token: str | None) -> None:
        check_token(user, token)

    async def prepare(self, access_key: str, token: str | None) -> None:
        """Make `access_key` (with its session token, if the request sent one) known to
        __getitem__ if it is anyone's; nothing if it is no one's (authentication then
        answers InvalidAccessKeyId)."""
        if not token:
            if access_key in self.roots:
                return
            found = self._cache.get(access_key)
            if found is not None and found[0] >= self._clock():
                return  # (temporary credentials without their token: check_token refuses)
            self._cache.pop(access_key, None)
            user = await self._key_user(access_key)
        else:
            found = self._cache.get(access_key)
            if found is not None and found[0] >= self._clock() and found[1].session_token == token:
                return
            self._cache.pop(access_key, None)
            user, expires = await self._token_user(access_key, token)
            if user is not None:  # kept never past the credentials' own expiry
                keep = min(self._ttl, expires - self._wall())
                self._cache[access_key] = (self._clock() + keep, user)
            return
        if user is not None:
            self._cache[access_key] = (self._clock() + self._ttl, user)

    async def _document(self, account: str, has: Callable[[Account], bool]) -> Account:
        """The account's document, read at most once per bound (never changed here), unless
        the copy kept lacks what is looked for (`has`): a key or role made since, on any
        node, is found at once."""
        assert self._store is not None
        found = self._documents.get(account)
        if found is not None and found[0] >= self._clock() and has(found[1]):
            return found[1]
        document = Account.load(account, await self._store.get_identities(account))
        self._documents[account] = (self._clock() + self._ttl, document)
        return document

    async def _key_user(self, access_key: str) -> User | None:
        if self._store is None or self.keys is None:
            return None
        account_id = await self._store.account_of_key(access_key)
        root = self.by_account.get(account_id or "")
        if root is None:
            return None
        account = await self._document(
            root.canonical_id, lambda acc: acc.user_of_key(access_key) is not None
        )
        user = account.user_of_key(access_key)
        if user is None or user["keys"][access_key]["status"] != "Active":
            return None
        secret = self.keys.open_iam_secret(user["keys"][access_key]["secret"]).decode()
        identity = None if account.is_root(user) else user_identity(account, user)
        return User(access_key, secret, root.display_name, root.canonical_id, identity)

    async def _token_user(self, access_key: str, token: str) -> tuple[User | None, float]:
        """Who the credentials of a session token are (None: their origin is gone), and
        when they expire."""
        claims = open_token(self.master, token)
        if claims.get("ak") != access_key:
            raise S3Error("InvalidToken")
        if self._wall() >= claims["exp"]:
            raise S3Error("ExpiredToken")
        root = self.by_account.get(claims["acc"])
        if root is None:
            raise S3Error("InvalidToken")
        identity = None
        if claims["kind"] == "root":
            if root.access_key != claims["parent"]:
                return None, claims["exp"]  # the root's key changed: what it made goes too
        else:

            def has(acc: Account) -> bool:
                if claims["kind"] == "user":
                    return acc.user_of_key(claims["parent"]) is not None
                role = acc.doc["roles"].get(claims["role"].lower())
                return role is not None and role["id"] == claims["role_id"]

            account = await self._document(root.canonical_id, has)
            if claims["kind"] == "user":
                user = account.user_of_key(claims["parent"])
                if user is None or user["keys"][claims["parent"]]["status"] != "Active":
                    return None, claims["exp"]
                identity = None if account.is_root(user) else user_identity(account, user)
            else:
                role = account.doc["roles"].get(claims["role"].lower())
                if role is None or role["id"] != claims["role_id"]:
                    return None, claims["exp"]
                identity = role_identity(
                    account, role, claims["session"], claims.get("policy"), claims.get("tags")
                )
        user = User(access_key, claims["sk"], root.display_name, root.canonical_id, identity, token)
        return user, claims["exp"]


def check_token(user: User, token: str | None) -> None:
    """Temporary credentials are valid with their own session token alone, and a token goes
    with temporary credentials alone."""
    if user.session_token != (token or ""):
        raise S3Error("InvalidToken")


def request_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The session token a request carries (header, or a presigned URL's parameter)."""
    return headers.get("x-amz-security-token") or query.get("X-Amz-Security-Token")
