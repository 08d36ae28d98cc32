"""An account's IAM identities as the rows one call has read: Account's rules (account.py) run
on this view, and a rule that reaches for a row or a fact the view has not read raises
Unloaded; `run` then reads it (with everything else the rule asked for at once) and runs the
rule again, from the rows as stored. A rule is a pure function of what it reads, so running it
again is safe; what a run changed is then compared with the rows as read (`written`), and
only the rows that differ are written.

The facts besides rows are the store's indexes (api.IdentityReader): the account's counts, a
group's members, a managed policy's attachments, an access key's owner. Each is the stored
answer corrected by the rows this run holds (their state as read taken out, their state now
put in), so that it stays true whatever the run changed.

An account made in memory (`complete`) has nothing behind it: every row is in the view.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..store.api import IdentityReader
from ..store.model import IamRow, IamWrite

T = TypeVar("T")

# The account's parts and the kind of their rows.
KINDS = {"users": "user", "groups": "group", "roles": "role", "policies": "policy"}
# What a rule's re-runs may read before the view gives up (a rule that keeps asking for what
# it was given is a bug, not a slow account).
MAX_RUNS = 12

Entry = dict[str, Any]


def dump(entry: Entry) -> str:
    return json.dumps(entry, separators=(",", ":"), sort_keys=True)


def empty_root() -> Entry:
    # The root's own access keys beside its users-file key (CreateAccessKey without a
    # UserName, signed by the root), as AWS lets a root have up to two.
    return {"name": "", "keys": {}}


@dataclass(frozen=True)
class Need:
    """What a rule asked for that the view had not read."""

    rows: tuple[tuple[str, str], ...] = ()  # (part, lower-case name)
    parts: tuple[str, ...] = ()  # every row of a part
    counts: bool = False  # the account's counts
    attachments: tuple[str, ...] = ()  # managed policy ARNs
    members: tuple[str, ...] = ()  # groups (lower-case names)
    keys: tuple[str, ...] = ()  # access keys' owners
    account: bool = False  # the account's own row


NOTHING = Need()


class Unloaded(Exception):
    """The rule needs what the view has not read: `run` reads it and runs the rule again."""

    def __init__(self, need: Need) -> None:
        super().__init__(need)
        self.need = need


@dataclass
class Loaded:
    """What a call has read of an account, kept across the runs of its rule."""

    complete: bool = False  # made in memory: nothing is stored, every row is here
    account: str | None = None  # the account's own row as read (None: none)
    account_read: bool = False
    rows: dict[tuple[str, str], str | None] = field(default_factory=dict)  # None: no such row
    whole: set[str] = field(default_factory=set)  # parts read whole
    counts: dict[str, int] | None = None
    attachments: dict[str, int] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)
    keys: dict[str, str | None] = field(default_factory=dict)  # None: not this account's

    def holds(self, need: Need) -> bool:
        """Does it answer everything `need` asks (so that asking again is a bug)?"""
        return (
            all(r in self.rows or r[0] in self.whole for r in need.rows)
            and all(p in self.whole for p in need.parts)
            and (not need.counts or self.counts is not None)
            and all(a in self.attachments for a in need.attachments)
            and all(g in self.members for g in need.members)
            and all(k in self.keys for k in need.keys)
            and (not need.account or self.account_read)
        )

    async def read(self, reader: IdentityReader, account: str, need: Need) -> None:
        """Read what `need` asks and is not read yet."""
        by_part: dict[str, list[str]] = {}
        for part, name in need.rows:
            if (part, name) not in self.rows and part not in self.whole:
                by_part.setdefault(part, []).append(name)
        for part, names in by_part.items():
            found = await reader.get_iam_entities(account, KINDS[part], names)
            for name in names:
                self.rows[(part, name)] = found.get(name)
        for part in need.parts:
            if part not in self.whole:
                found = await reader.list_iam_entities(account, KINDS[part])
                # Rows read before keep their text: a run compares its changes with them.
                for name, doc in found.items():
                    self.rows.setdefault((part, name), doc)
                self.whole.add(part)
        if need.counts and self.counts is None:
            self.counts = await reader.iam_counts(account)
        arns = [a for a in need.attachments if a not in self.attachments]
        if arns:
            found_counts = await reader.iam_attachment_counts(account, arns)
            for arn in arns:
                self.attachments[arn] = found_counts.get(arn, 0)
        for group in need.members:
            if group not in self.members:
                self.members[group] = await reader.iam_group_members(account, group)
        for key in need.keys:
            if key not in self.keys:
                owner = await reader.access_key_owner(key)
                self.keys[key] = owner[1] if owner is not None and owner[0] == account else None
        if need.account and not self.account_read:
            self.account = await reader.get_iam_account(account)
            self.account_read = True


class Part:
    """One part of the account (users, groups, roles or policies) as a run sees it: a map of
    lower-case names to entries, read row by row as the rule asks."""

    def __init__(self, name: str, loaded: Loaded) -> None:
        self.name = name
        self._loaded = loaded
        self.entries: dict[str, Entry | None] = {}  # parsed (or made) this run

    def _known(self, key: str) -> bool:
        return (
            key in self.entries
            or (self.name, key) in self._loaded.rows
            or self.name in self._loaded.whole
            or self._loaded.complete
        )

    def require(self, keys: Iterable[str]) -> None:
        """Every one of `keys` read (one Unloaded for all those that are not)."""
        missing = tuple(dict.fromkeys(k for k in keys if not self._known(k)))
        if missing:
            raise Unloaded(Need(rows=tuple((self.name, k) for k in missing)))

    def get(self, key: str) -> Entry | None:
        if key not in self.entries:
            self.require([key])
            text = self._loaded.rows.get((self.name, key))
            self.entries[key] = json.loads(text) if text is not None else None
        return self.entries[key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __getitem__(self, key: str) -> Entry:
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def __setitem__(self, key: str, entry: Entry) -> None:
        self.entries[key] = entry

    def __delitem__(self, key: str) -> None:
        self[key]  # read before it goes: its row is then deleted
        self.entries[key] = None

    def _whole(self) -> None:
        if not (self._loaded.complete or self.name in self._loaded.whole):
            raise Unloaded(Need(parts=(self.name,)))

    def keys(self) -> list[str]:
        self._whole()
        stored = [name for (part, name) in self._loaded.rows if part == self.name]
        names = dict.fromkeys([*stored, *self.entries])
        return [name for name in names if self.get(name) is not None]

    def values(self) -> list[Entry]:
        return [self[name] for name in self.keys()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        if self._loaded.complete or self.name in self._loaded.whole:
            return len(self.keys())
        if self._loaded.counts is None:
            raise Unloaded(Need(counts=True))
        stored = self._loaded.counts.get(KINDS[self.name], 0)
        return stored + sum(
            (entry is not None) - (self.original(name) is not None)
            for name, entry in self.entries.items()
        )

    def original(self, key: str) -> Entry | None:
        """The entry as read (None: there was none)."""
        text = self._loaded.rows.get((self.name, key))
        return json.loads(text) if text is not None else None


class View:
    """The account's parts and own row as one run of a rule sees them."""

    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded
        self.parts = {name: Part(name, loaded) for name in KINDS}
        self._root: Entry | None = None

    def is_root(self, entry: Entry) -> bool:
        return self._root is not None and entry is self._root

    def root(self) -> Entry:
        if self._root is None:
            if not (self.loaded.complete or self.loaded.account_read):
                raise Unloaded(Need(account=True))
            text = self.loaded.account
            self._root = json.loads(text) if text is not None else empty_root()
        return self._root

    def counts(self) -> None:
        """The account's counts read (raises Unloaded), so that every part's len is known."""
        if not self.loaded.complete and self.loaded.counts is None:
            raise Unloaded(Need(counts=True))

    def access_keys(self) -> int:
        """How many access keys the account's users hold (its root's not counted)."""
        users = self.parts["users"]
        if self.loaded.complete:
            return sum(len(u["keys"]) for u in users.values())
        self.counts()
        assert self.loaded.counts is not None
        return self.loaded.counts.get("access_key", 0) + sum(
            len((entry or {}).get("keys", {})) - len((users.original(name) or {}).get("keys", {}))
            for name, entry in users.entries.items()
        )

    def members(self, group: str) -> list[str]:
        """The users (lower-case names) in `group` (lower-case), as this run left them."""
        users = self.parts["users"]
        stored: list[str] = []
        if not self.loaded.complete:
            if group not in self.loaded.members:
                raise Unloaded(Need(members=(group,)))
            stored = [u for u in self.loaded.members[group] if u not in users.entries]
        changed = [u for u, e in users.entries.items() if e is not None and group in e["groups"]]
        return sorted({*stored, *changed})

    def attachments(self, arns: Sequence[str]) -> dict[str, int]:
        """How many users, groups and roles each of `arns` is attached to, as this run left
        them."""
        holders = [self.parts[p] for p in ("users", "groups", "roles")]
        counts = dict.fromkeys(arns, 0)
        if not self.loaded.complete:
            missing = tuple(a for a in arns if a not in self.loaded.attachments)
            if missing:
                raise Unloaded(Need(attachments=missing))
            for arn in arns:
                counts[arn] = self.loaded.attachments[arn]
                for part in holders:
                    for name in part.entries:
                        was = part.original(name)
                        counts[arn] -= was is not None and arn in was["attached"]
        for arn in arns:
            for part in holders:
                for entry in part.entries.values():
                    counts[arn] += entry is not None and arn in entry["attached"]
        return counts

    def key_owner(self, access_key: str) -> Entry | None:
        """The root's or user's entry that holds `access_key` (None: none of this account)."""
        users = self.parts["users"]
        for entry in users.entries.values():
            if entry is not None and access_key in entry["keys"]:
                return entry
        if self.loaded.complete:
            root = self.root()
            return root if access_key in root["keys"] else None
        if access_key not in self.loaded.keys:
            raise Unloaded(Need(keys=(access_key,)))
        name = self.loaded.keys[access_key]
        if name == "":
            root = self.root()
            return root if access_key in root["keys"] else None
        if name is None or name in users.entries:
            return None  # (a user this run holds, looked at above)
        entry = users.get(name)
        return entry if entry is not None and access_key in entry["keys"] else None

    def written(self) -> IamWrite:
        """The rows this run changed, and their index entries."""
        rows: list[IamRow] = []
        keys_added: list[tuple[str, str]] = []
        keys_removed: list[str] = []
        members: tuple[list[tuple[str, str]], list[tuple[str, str]]] = ([], [])  # added, removed
        attached: tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]] = ([], [])

        def links(kind: str, entry: Entry | None, name: str) -> tuple[set[Any], ...]:
            if entry is None:
                return set(), set(), set()
            keys = {(k, name) for k in entry.get("keys", {})} if kind == "user" else set()
            groups = {(g, name) for g in entry.get("groups", [])} if kind == "user" else set()
            arns = {(a, kind, name) for a in entry.get("attached", [])}
            return keys, groups, arns

        for part_name, kind in KINDS.items():
            part = self.parts[part_name]
            for name, entry in part.entries.items():
                was = part.original(name)
                if entry == was:
                    continue
                new = (part_name, name) not in self.loaded.rows or was is None
                rows.append(IamRow(kind, name, None if entry is None else dump(entry), new))
                old_links, new_links = links(kind, was, name), links(kind, entry, name)
                keys_removed += [k for k, _ in old_links[0] - new_links[0]]
                keys_added += sorted(new_links[0] - old_links[0])
                members[1].extend(sorted(old_links[1] - new_links[1]))
                members[0].extend(sorted(new_links[1] - old_links[1]))
                attached[1].extend(sorted(old_links[2] - new_links[2]))
                attached[0].extend(sorted(new_links[2] - old_links[2]))
        account_doc = None
        if self._root is not None:
            was_root = json.loads(self.loaded.account) if self.loaded.account else empty_root()
            if self._root != was_root:
                account_doc = dump(self._root)
                keys_removed += [k for k in was_root["keys"] if k not in self._root["keys"]]
                keys_added += [(k, "") for k in self._root["keys"] if k not in was_root["keys"]]
        if self.loaded.account is None and (account_doc is not None or rows):
            # The account's first row: the one its later changes hold.
            account_doc = dump(self._root if self._root is not None else empty_root())
        return IamWrite(
            account_doc=account_doc,
            account_new=self.loaded.account is None,
            rows=tuple(rows),
            keys_added=tuple(keys_added),
            keys_removed=tuple(keys_removed),
            members_added=tuple(members[0]),
            members_removed=tuple(members[1]),
            attached=tuple(attached[0]),
            detached=tuple(attached[1]),
        )


async def run(
    reader: IdentityReader,
    account: str,
    loaded: Loaded,
    rule: Callable[[View], T],
) -> tuple[T, View]:
    """`rule` run on a view of `loaded`, reading through `reader` what it asks for, until it
    answers (or raises what it raises)."""
    for _ in range(MAX_RUNS):
        view = View(loaded)
        try:
            return rule(view), view
        except Unloaded as asked:
            if loaded.holds(asked.need):
                raise RuntimeError(
                    f"an IAM rule asked again for what it had: {asked.need}"
                ) from None
            await loaded.read(reader, account, asked.need)
    raise RuntimeError("an IAM rule kept asking for more rows")
