"""The Store's IAM rows: an account's own row (its root's keys), one row per user, group, role
and customer managed policy (gateway/iam/ holds what they mean), and the indexes that go with
them (access keys, group members, policy attachments).

A change reads only the rows its rule needs and writes only the rows it changed, in one
transaction that holds the account's own row: the changes of one account are made one at a
time (their rules read counts and indexes of the whole account), and no other account's
changes or reads wait for them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .api import CatalogTx, IdentityReader
from .core import StoreCore
from .model import IamWrite

T = TypeVar("T")


@dataclass
class IdentityChange(Generic[T]):
    """What a change of an account's identities makes: the rows it writes (empty: none), and
    the caller's answer."""

    result: T
    write: IamWrite = field(default_factory=IamWrite)


class Identities(StoreCore):
    """IAM's reads (api.IdentityReader, each a statement of its own) and its one write."""

    async def get_iam_account(self, account: str) -> str | None:
        return await self._read.get_iam_account(account)

    async def get_iam_entities(
        self, account: str, kind: str, names: Sequence[str]
    ) -> dict[str, str]:
        return await self._read.get_iam_entities(account, kind, names)

    async def list_iam_entities(
        self, account: str, kind: str, containing: str | None = None
    ) -> dict[str, str]:
        return await self._read.list_iam_entities(account, kind, containing)

    async def iam_counts(self, account: str) -> dict[str, int]:
        return await self._read.iam_counts(account)

    async def iam_attachment_counts(self, account: str, arns: Sequence[str]) -> dict[str, int]:
        return await self._read.iam_attachment_counts(account, arns)

    async def iam_group_members(self, account: str, group: str) -> list[str]:
        return await self._read.iam_group_members(account, group)

    async def access_key_owner(self, access_key: str) -> tuple[str, str] | None:
        return await self._read.access_key_owner(access_key)

    async def change_identities(
        self,
        account: str,
        change: Callable[[IdentityReader, str | None], Awaitable[IdentityChange[T]]],
    ) -> T:
        """Run `change` with the transaction's reads and the account's own row as it is now
        (None: it has none), holding that row; store what it made. `change` may run more than
        once (a conflict with another node's write runs the transaction again), so it keeps
        nothing of a run but its answer."""

        async def commit(tx: CatalogTx) -> T:
            current = await tx.lock_iam_account(account)
            made = await change(tx, current)
            if made.write:
                await tx.write_identities(account, made.write)
            return made.result

        return await self._write(commit)
