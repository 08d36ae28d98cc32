"""The Store's IAM rows: each account's identities as one document (gateway/iam/ holds what it
means), changed in one transaction with the access keys' index, so that a key and the user it
names are made, and go, together."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .api import CatalogTx
from .core import StoreCore

T = TypeVar("T")


@dataclass
class IdentityChange(Generic[T]):
    """What a change of an account's identities makes: the new document (None: unchanged),
    access keys made and deleted, and the caller's answer."""

    result: T
    doc: str | None = None
    keys_added: list[str] = field(default_factory=list)
    keys_removed: list[str] = field(default_factory=list)


class Identities(StoreCore):
    async def get_identities(self, account: str) -> str | None:
        return await self._read.get_identities(account)

    async def account_of_key(self, access_key: str) -> str | None:
        return await self._read.account_of_key(access_key)

    async def change_identities(
        self, account: str, change: Callable[[str | None], IdentityChange[T]]
    ) -> T:
        """Run `change` on the account's document as it is now (None: it has none), alone;
        store what it made. `change` is pure: it may run more than once (a conflict with
        another node's write runs the transaction again)."""

        async def commit(tx: CatalogTx) -> T:
            current = await tx.lock_identities(account)
            made = change(current)
            if made.doc is not None:
                await tx.put_identities(account, made.doc, new=current is None)
            for key in made.keys_removed:
                await tx.delete_access_key(key)
            for key in made.keys_added:
                await tx.put_access_key(key, account)
            return made.result

        return await self._write(commit)
