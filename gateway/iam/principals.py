"""Who an access key is: an account's root (the users file), an IAM user's key, or temporary
credentials from STS, as the `User` authentication verifies a signature with and authorisation
judges.

Roots are fixed at start. IAM's keys live in the catalog: the first request with a key reads
it (the access keys' index, then its user's row, its groups' and their managed policies' rows:
nothing else of its account), and the answer is kept for at most `ttl` seconds
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
from ..users import Identity, User, account_number
from . import view
from .account import Account, change, read

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
    account: str,
    role: dict[str, Any],
    policies: list[str],
    session: str,
    session_policy: str | None,
    session_tags: Mapping[str, str] | None = None,
) -> Identity:
    """A session of `role` (whose identity policies are `policies`)."""
    number = account_number(account)
    role_arn = f"arn:aws:iam::{number}:role{role['path']}{role['name']}"
    assumed = f"arn:aws:sts::{number}:assumed-role/{role['name']}/{session}"
    return Identity(
        arn=assumed,
        user_id=f"{role['id']}:{session}",
        arns=frozenset({assumed, role_arn}),
        policies=_policies(policies),
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
        self.by_number = {u.account: u for u in roots.values()}
        self._store = store
        self.keys = keys
        self._ttl = ttl
        self._clock = clock
        self._wall = wall
        self._cache: dict[str, tuple[float, User]] = {}

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
        """Drop every key kept: a change made on this worker counts here at once."""
        self._cache.clear()

    @property
    def master(self) -> bytes | None:
        """The master key session tokens are sealed and opened under, the folder's current
        one: after `s3gw keys rotate` (on any node sharing the folder) no worker opens a token
        sealed under the retired key, nor seals a new one under it. Looking costs a stat of
        keys.json (read again only when it changed), and only requests with a session token
        and STS's calls look."""
        if self.keys is None:
            return None
        self.keys.refresh()
        return self.keys.master

    async def reseal(self) -> None:
        """Each account's IAM secret keys sealed under the master key (before the keyring's
        `iam` key) sealed under that key instead, once, so that a rotation of the master
        leaves them readable. Every worker may run it at start: the change is made once."""
        if self._store is None or self.keys is None:
            return
        keys = self.keys
        store = self._store
        legacy = '"secret":"iam:'

        def reseal(entry: dict[str, Any]) -> None:
            for key in entry["keys"].values():
                resealed = keys.reseal_iam_secret(key["secret"])
                if resealed is not None:
                    key["secret"] = resealed

        for account in self.by_account:
            users = await store.list_iam_entities(account, "user", containing=legacy)
            root = await store.get_iam_account(account)
            if not users and legacy not in (root or ""):
                continue

            def run(acc: Account, users: tuple[str, ...] = tuple(users)) -> None:
                for entry in [acc.root(), *(acc.doc["users"].get(name) for name in users)]:
                    if entry is not None:
                        reseal(entry)

            await change(store, account, run)

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

    async def _key_user(self, access_key: str) -> User | None:
        if self._store is None or self.keys is None:
            return None
        owner = await self._store.access_key_owner(access_key)
        root = self.by_account.get(owner[0] if owner else "")
        if owner is None or root is None:
            return None
        found = await _read(
            self._store, root.canonical_id, _key_holder(access_key), owner, access_key=access_key
        )
        if found is None:
            return None
        sealed, identity = found
        secret = self.keys.open_iam_secret(sealed).decode()
        return User(access_key, secret, root.display_name, root.canonical_id, identity)

    async def _token_user(self, access_key: str, token: str) -> tuple[User | None, float]:
        """Who the credentials of a session token are (None: their origin is gone), and
        when they expire."""
        claims = open_token(self.master, token)  # the folder's current master (`master`)
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
        elif claims["kind"] == "user":
            assert self._store is not None
            parent = claims["parent"]
            owner = await self._store.access_key_owner(parent)
            if owner is None or owner[0] != root.canonical_id:
                return None, claims["exp"]
            found = await _read(
                self._store, root.canonical_id, _key_holder(parent), owner, access_key=parent
            )
            if found is None:
                return None, claims["exp"]
            identity = found[1]
        else:
            assert self._store is not None

            def session(acc: Account) -> Identity | None:
                role = acc.doc["roles"].get(claims["role"].lower())
                if role is None or role["id"] != claims["role_id"]:
                    return None
                return role_identity(
                    acc.id, role, acc.role_policies(role), claims["session"],
                    claims.get("policy"), claims.get("tags"),
                )  # fmt: skip

            need = view.Need(rows=(("roles", claims["role"].lower()),))
            identity = await _read(self._store, root.canonical_id, session, need=need)
            if identity is None:  # the role is gone (or another by its name): so is its session
                return None, claims["exp"]
        user = User(access_key, claims["sk"], root.display_name, root.canonical_id, identity, token)
        return user, claims["exp"]


def _key_holder(
    access_key: str,
) -> Callable[[Account], tuple[str, Identity | None] | None]:
    """The rule that finds an active access key: its sealed secret, and its user's identity
    (None for one of the root's own keys); None if it is not active or not there."""

    def find(acc: Account) -> tuple[str, Identity | None] | None:
        holder = acc.user_of_key(access_key)
        if holder is None or holder["keys"][access_key]["status"] != "Active":
            return None
        identity = None if acc.is_root(holder) else user_identity(acc, holder)
        return holder["keys"][access_key]["secret"], identity

    return find


async def _read(
    store: Store,
    account: str,
    rule: Callable[[Account], Any],
    owner: tuple[str, str] | None = None,
    need: view.Need = view.NOTHING,
    access_key: str = "",
) -> Any:
    """`rule` on the rows of `account` it reads; `owner` (`access_key`'s account and user,
    as the index has them) names the row to read first."""
    loaded = view.Loaded()
    if owner is not None:
        loaded.keys[access_key] = owner[1]
        need = view.Need(rows=(("users", owner[1]),)) if owner[1] else view.Need(account=True)
    return await read(store, account, rule, need, loaded)


def check_token(user: User, token: str | None) -> None:
    """Temporary credentials are valid with their own session token alone, and a token goes
    with temporary credentials alone."""
    if user.session_token != (token or ""):
        raise S3Error("InvalidToken")


def request_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The session token a request carries (header, or a presigned URL's parameter)."""
    return headers.get("x-amz-security-token") or query.get("X-Amz-Security-Token")
