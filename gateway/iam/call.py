"""One IAM or STS call: who made it, for which account, with what parameters, and how it reads
and changes the account's rows (view.py); the paging and time formats every answer uses."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..store import Store
from ..users import User, numbered
from . import account as model
from . import view
from .account import Account, IamError
from .principals import Principals

T = TypeVar("T")


class Entries(list[dict[str, Any]]):
    """A map in IAM's XML: <entry><key>..</key><value>..</value></entry> items (a plain list
    is <member> items)."""


MAX_ITEMS = 100


@dataclass
class Call:
    """One IAM or STS request: who made it, for which account, with what parameters."""

    user: User
    params: Mapping[str, str]
    store: Store
    principals: Principals
    master: bytes

    @property
    def account(self) -> str:
        return self.user.canonical_id

    def get(self, name: str) -> str | None:
        return self.params.get(name)

    def named(self) -> view.Need:
        """The rows the call's parameters name, read before its rule first runs (most rules
        need them and nothing else), and the counts a Create checks its quota with."""
        rows = [(part, (self.get(param) or "").lower())
                for param, part in (("UserName", "users"), ("NewUserName", "users"),
                                    ("GroupName", "groups"), ("NewGroupName", "groups"),
                                    ("RoleName", "roles"))]  # fmt: skip
        arn = numbered(self.get("PolicyArn") or "")
        if arn.startswith(f"arn:aws:iam::{self.user.account}:policy/"):
            rows.append(("policies", arn.rpartition("/")[2].lower()))
        if self.get("Action") in ("CreatePolicy",):
            rows.append(("policies", (self.get("PolicyName") or "").lower()))
        action = self.get("Action") or ""
        counts = action in ("CreateUser", "CreateGroup", "CreateRole", "CreatePolicy")
        return view.Need(rows=tuple(r for r in rows if r[1]), counts=counts)

    async def read(self, rule: Callable[[Account], T]) -> T:
        """`rule` run on the rows of the caller's account it reads."""
        return await model.read(self.store, self.account, rule, self.named())

    async def change(self, rule: Callable[[Account], T]) -> T:
        """`rule` run on the rows of the caller's account it reads, alone among the
        account's changes; the rows it changed written."""
        result = await model.change(self.store, self.account, rule, self.named())
        # Whatever changed (a key, a policy, a group, a role), this worker reads every key
        # afresh: the sessions made from a key or a role are cached under keys of their own.
        self.principals.forget()
        return result


def iso_time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def page(call: Call, items: list[Any], name: str, key: Callable[[Any], str]) -> dict[str, Any]:
    """A list answer with IAM's Marker paging (the marker: the next item's sort key)."""
    items = sorted(items, key=key)
    marker = call.get("Marker")
    if marker:
        items = [i for i in items if key(i) >= marker]
    limit = call.get("MaxItems")
    size = MAX_ITEMS
    if limit is not None:
        # IAM's MaxItems is 1 to 1000 (each List action's reference); anything else is
        # refused, never taken as the default.
        if not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= 1000):
            raise IamError(
                "ValidationError",
                f"1 validation error detected: Value '{limit}' at 'maxItems' failed to satisfy "
                "constraint: Member must have value between 1 and 1000",
            )
        size = int(limit)
    shown, rest = items[:size], items[size:]
    out: dict[str, Any] = {name: shown, "IsTruncated": bool(rest)}
    if rest:
        out["Marker"] = key(rest[0])
    return out


def under(entries: view.Part, prefix: str | None) -> list[dict[str, Any]]:
    return [e for e in entries.values() if e["path"].startswith(prefix or "/")]


def arn_of(user: User) -> str:
    return user.identity.arn if user.identity else f"arn:aws:iam::{user.account}:root"


MAX_TAGS = 50  # tags per user, role or session (IAM's and STS's quota)


def members(call: Call, prefix: str) -> list[dict[str, str]]:
    """A list parameter of the query protocol: `prefix.member.N[.Field]`, in N's order."""
    found: dict[int, dict[str, str]] = {}
    for name, value in call.params.items():
        head, _, rest = name.partition(f"{prefix}.member.")
        if head or not rest:
            continue
        number, _, field = rest.partition(".")
        if number.isascii() and number.isdigit():
            found.setdefault(int(number), {})[field] = value
    return [found[n] for n in sorted(found)]


def tags_of(call: Call) -> dict[str, str]:
    tags: dict[str, str] = {}
    for member in members(call, "Tags"):
        key, value = member.get("Key", ""), member.get("Value", "")
        if not 1 <= len(key) <= 128 or len(value) > 256:
            raise IamError(
                "ValidationError",
                "A tag's key must have 1 to 128 characters and its value up to 256",
            )
        tags[key] = value
    return tags
