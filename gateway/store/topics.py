"""The Store's account documents: each account's notification topics (gateway/notify/) and
replication remotes (gateway/replication/remotes.py), a document per name, read and changed
through `get_docs` and `change_docs`, kept in the catalog's table of that kind (`topics`,
`remotes`: account, name, doc), so that every node of a shared catalog sees them and `s3gw
migrate`'s catalog holds them.

Until schema 10 (SQLite) / 9 (PostgreSQL) they were files of the data folder, one JSON file per
account under DATA/topics/ ({"account": ..., "topics": {name: doc}}): `import_topic_files`
moves them into the table at the next start (a topic the table has already is kept as it is)
and renames the folder to DATA/topics.imported/.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TypeVar

from .api import CatalogTx
from .core import StoreCore

log = logging.getLogger(__name__)
T = TypeVar("T")

# An account's documents of one kind by name (api.ACCOUNT_DOCS: its topics, JSON documents
# gateway/notify/topics.py describes; its replication remotes, gateway/replication/remotes.py).
AccountDocs = dict[str, str]


class Topics(StoreCore):
    async def get_docs(self, kind: str, account: str) -> AccountDocs:
        """The account's documents of `kind` by name (empty: it has none)."""
        return await self._read.get_docs(kind, account)

    async def change_docs(
        self, kind: str, account: str, change: Callable[[AccountDocs], tuple[AccountDocs, T]]
    ) -> T:
        """Run `change` on the account's documents of `kind` as they are now, alone; keep what
        it returns (the new documents by name, and the caller's answer). `change` is pure: it
        may run more than once (a conflict with another node's write runs the transaction
        again)."""

        async def commit(tx: CatalogTx) -> T:
            current = await tx.lock_docs(kind, account)
            made, result = change(dict(current))
            for name in current.keys() - made.keys():
                await tx.delete_doc(kind, account, name)
            for name, doc in made.items():
                if current.get(name) != doc:
                    await tx.put_doc(kind, account, name, doc)
            return result

        return await self._write(commit)

    async def import_topic_files(self) -> int:
        """Move the topics a gateway before the table kept in files into the table (at start,
        the folder held alone); how many were imported."""
        folder = self.root / "topics"
        if not folder.is_dir():
            return 0
        loop = asyncio.get_running_loop()
        found: list[tuple[str, dict[str, str]]] = []
        for path in await loop.run_in_executor(self.pool, lambda: sorted(folder.glob("*.json"))):
            kept = json.loads(await loop.run_in_executor(self.pool, path.read_text))
            found.append(
                (str(kept["account"]), {str(k): str(v) for k, v in kept["topics"].items()})
            )

        async def commit(tx: CatalogTx) -> int:
            made = 0
            for account, docs in found:
                current = await tx.lock_docs("topics", account)
                for name, doc in docs.items():
                    if name not in current:
                        await tx.put_doc("topics", account, name, doc)
                        made += 1
            return made

        made = await self._write(commit)
        await loop.run_in_executor(self.pool, folder.rename, self.root / "topics.imported")
        log.info("imported %d notification topics from %s into the catalog", made, folder)
        return made
