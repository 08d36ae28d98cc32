"""The storage seam: what a catalog backend and a blob backend implement.

The Store service (store.py) holds S3's storage rules once and reaches storage only through
these protocols; an adapter (sqlite/ for the catalog, blobs.py for files) holds the SQL or the
file calls and nothing of S3's rules. Every call that may wait is a coroutine (or returns an
awaitable), so that a backend on a network or a slow disk never blocks the event loop.

Catalog calls are coroutines, so that a backend with a network round trip (PostgreSQL) can
await; a backend may also complete without ever suspending (SQLite on a local file), and
`complete_now` then runs the same coroutine to its end in the calling thread. The rules are
therefore written once, as coroutines, for both kinds.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, TypeVar

from .model import (
    Bucket,
    Extent,
    IamWrite,
    ListEntry,
    ObjectInfo,
    OutboxRecord,
    Part,
    StagedBlob,
    Upload,
)

T = TypeVar("T")

# A position in an ordered scan: the key's UTF-8 bytes, then (for uploads) the initiation time
# and the id. A scan returns the rows whose leading fields compare after it (or from it).
Cursor = tuple[Any, ...]

# An account's documents by name, each kind a table (account, name, doc) of its own: its
# notification topics (gateway/notify/topics.py) and its replication remotes
# (gateway/replication/remotes.py).
ACCOUNT_DOCS = ("topics", "remotes")


def doc_table(kind: str) -> str:
    """The table of a kind of account document (its name: only ACCOUNT_DOCS' are)."""
    if kind not in ACCOUNT_DOCS:
        raise ValueError(f"no account documents of kind {kind!r}")
    return kind


class CatalogReader(Protocol):
    """Reads; inside a transaction they see its writes."""

    async def get_bucket(self, name: str) -> Bucket | None: ...

    async def list_buckets(self, owner: str | None) -> list[Bucket]: ...

    async def get_object(self, bucket: str, key: str) -> ObjectInfo | None:
        """The key's current version, when it is an object (the objects table)."""
        ...

    async def get_version(self, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
        """A version kept in the versions table (noncurrent, or a delete marker), by its id;
        "null" names the key's null version there."""
        ...

    async def newest_version(self, bucket: str, key: str) -> ObjectInfo | None:
        """The first of the key's rows in the versions table (the newest of them)."""
        ...

    async def get_upload(self, upload_id: str) -> Upload | None: ...

    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]: ...

    async def scan_objects(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, ListEntry]]:
        """Up to `limit` objects in key byte order, after (or from) `cursor`, keys < `end`,
        each with its position: (key bytes,)."""
        ...

    async def scan_versions(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, ListEntry]]:
        """Rows of the versions table by (key bytes, seq), after (or from) `cursor` (one or
        both of those), keys < `end`, each with that position; `is_latest` False (the Store
        decides which version is the latest)."""
        ...

    async def scan_uploads(
        self, bucket: str, cursor: Cursor, inclusive: bool, end: bytes | None, limit: int
    ) -> list[tuple[Cursor, Upload]]:
        """Uploads by (key bytes, initiation time, id), after (or from) `cursor`, each with
        that position."""
        ...

    async def read_inline(self, blob_ids: Iterable[str]) -> dict[str, bytes]:
        """The bytes of the inline blobs among `blob_ids`."""
        ...

    async def file_blobs_among(self, blob_ids: Sequence[str]) -> set[str]:
        """Those of `blob_ids` that the catalog knows as blobs kept in files."""
        ...

    async def known_blobs_among(self, blob_ids: Sequence[str]) -> set[str]:
        """Those of `blob_ids` that are blobs or intents, read in one snapshot, intents
        first: a commit turns an intent into a blob at once, so a name in neither is no
        write's (intents.py)."""
        ...

    async def get_object_inline(
        self, bucket: str, key: str
    ) -> tuple[ObjectInfo, dict[str, bytes | None]] | None:
        """get_object, with what the catalog keeps of the first extent's blob in the same
        round trip: {blob id: its inline bytes, or None when it is in a file} (empty when its
        row is gone). An object of one extent (every object but a multipart one) then needs
        no other read before its bytes."""
        ...

    async def get_bucket_and_object(
        self, bucket: str, key: str
    ) -> tuple[Bucket, tuple[ObjectInfo, dict[str, bytes | None]] | None] | None:
        """get_bucket and get_object_inline in one statement: a GET's reads in one round trip
        and one snapshot. None when there is no such bucket; (bucket, None) when the key has
        no object (it may have versions: a delete marker is the latest)."""
        ...

    async def read_outbox(
        self, limit: int, parts: Sequence[int] | None = None
    ) -> list[OutboxRecord]:
        """The first `limit` rows of the outbox, in their order (outbox.py); of the partitions
        `parts` only (None: all), at most `limit` of each."""
        ...

    async def count_outbox(self, parts: Sequence[int] | None = None) -> int:
        """How many rows the outbox holds (in the partitions `parts`; None: all)."""
        ...

    async def count_outbox_naming(self, fragment: str, within: int) -> tuple[int, int]:
        """Of the outbox's first `within` rows (in order), how many were looked at and how
        many have `fragment` in their facts' text (outbox.naming: one destination's)."""
        ...

    async def get_docs(self, kind: str, account: str) -> dict[str, str]:
        """The account's documents of `kind` (ACCOUNT_DOCS: its notification topics, its
        replication remotes): name -> document (JSON)."""
        ...


@dataclass(frozen=True)
class BlobRow:
    id: str
    size: int
    refs: int
    inline: bool


class IdentityReader(Protocol):
    """IAM's rows (gateway/iam/): an account's own row, its entities' rows by kind and
    lower-case name, and the indexes that answer a rule without reading every entity."""

    async def get_iam_account(self, account: str) -> str | None:
        """The account's own row (its root's access keys, JSON), None: it has none yet."""
        ...

    async def get_iam_entities(
        self, account: str, kind: str, names: Sequence[str]
    ) -> dict[str, str]:
        """The rows of `names` (lower-case) of one kind: name -> JSON; an absent name is not
        there."""
        ...

    async def list_iam_entities(
        self, account: str, kind: str, containing: str | None = None
    ) -> dict[str, str]:
        """Every row of one kind of the account (those whose JSON holds `containing`)."""
        ...

    async def iam_counts(self, account: str) -> dict[str, int]:
        """How many rows of each kind the account has, and "access_key": its users' keys
        (not its root's); a kind it has none of is absent."""
        ...

    async def iam_attachment_counts(self, account: str, arns: Sequence[str]) -> dict[str, int]:
        """How many users, groups and roles of the account each managed policy is attached
        to (an ARN attached to none is absent)."""
        ...

    async def iam_group_members(self, account: str, group: str) -> list[str]:
        """The users (lower-case names) of a group."""
        ...

    async def access_key_owner(self, access_key: str) -> tuple[str, str] | None:
        """The account and the user (lower-case name; "" the account's root) an IAM access
        key belongs to, None: no such key."""
        ...


class Reader(CatalogReader, IdentityReader, Protocol):
    """What a catalog's reader serves: the Store's reads and IAM's."""


class CatalogAudit(Protocol):
    """Whole-catalog scans for fsck (a stopped gateway's data folder)."""

    def audit_blobs(self) -> AsyncIterator[BlobRow]: ...

    def audit_objects(self) -> AsyncIterator[ObjectInfo]:
        """Every version of every object: current objects, older versions, delete markers."""
        ...

    def audit_parts(self) -> AsyncIterator[tuple[Part, Upload | None]]:
        """Every pending part, with its upload (None if the upload row is gone)."""
        ...

    def audit_intents(self) -> AsyncIterator[str]:
        """The blob ids of every intent (all stale when no gateway serves)."""
        ...


class CatalogTx(CatalogReader, IdentityReader, Protocol):
    """One write, inside a transaction that commits (durably) before the write is answered.
    A write that raises is undone alone."""

    async def insert_bucket(self, bucket: Bucket) -> Bucket | None:
        """Create the bucket, or return the one that already has the name."""
        ...

    async def lock_bucket(self, name: str) -> Bucket | None:
        """get_bucket, for a change of its settings: no other transaction changes them until
        this one ends (writes into the bucket are not held up)."""
        ...

    async def update_bucket(self, bucket: Bucket) -> None:
        """Store a bucket's settings (versioning state, Object Lock and its default)."""
        ...

    async def delete_bucket(self, name: str) -> None: ...

    async def lock_iam_account(self, account: str) -> str | None:
        """get_iam_account, for a change of the account's identities: no other transaction
        changes them until this one ends (other accounts' are not held up)."""
        ...

    async def write_identities(self, account: str, write: IamWrite) -> None:
        """Store what a change of the account's identities made, under lock_iam_account's
        lock: deletions first, then rows and index entries (two writers making an account's
        first row at once: one of them fails and is tried again)."""
        ...

    async def bucket_is_empty(self, name: str) -> bool:
        """No object, no older version and no delete marker."""
        ...

    async def upload_ids(self, bucket: str) -> list[str]: ...

    async def retain(self, extents: Iterable[Extent], new_blobs: Iterable[StagedBlob] = ()) -> None:
        """One reference per extent; `new_blobs` are inserted with theirs, and the intents of
        those kept in files are deleted. Raises SourceChanged if a blob is gone (released
        meanwhile), IntentLost if a new file blob's intent is (reclaimed: its file is gone)."""
        ...

    async def release(self, extents: Iterable[Extent]) -> None:
        """Drop one reference per extent. Blobs that reach zero are deleted; those kept in
        files are handed back by `Catalog.write` once the transaction has committed."""
        ...

    async def insert_object(self, obj: ObjectInfo) -> bool:
        """Insert the row of a key that has none; False if the bucket does not exist."""
        ...

    async def delete_object(self, bucket: str, key: str) -> ObjectInfo | None:
        """Remove the row (its references are the caller's to release); the row, or None."""
        ...

    async def drop_object(self, bucket: str, key: str) -> tuple[Extent, ...] | None:
        """delete_object for a write that keeps nothing of the row (an unversioned bucket's
        PUT or DELETE): its extents alone (the caller's to release), or None if there was
        none. The row's attributes are neither read nor decoded."""
        ...

    async def insert_version(self, obj: ObjectInfo, seq: str) -> None:
        """Keep a version (an older object, or a delete marker) in the versions table, at
        position `seq` among its key's versions (ascending: newest first)."""
        ...

    async def update_version(self, version: ObjectInfo) -> None:
        """Store what may change on a version after it is written, its `attrs` (ACL, tags)
        and its `lock`, wherever the version is (current or not); `version` as read in this
        transaction, with those fields changed."""
        ...

    async def delete_version(self, bucket: str, key: str, version_id: str) -> ObjectInfo | None:
        """Remove a row of the versions table by its id ("null": the null version); the row,
        or None. Its references are the caller's to release."""
        ...

    async def remember_content_md5(self, obj: ObjectInfo, md5: str) -> None:
        """Record a multipart object's content MD5 on that version, current or not, if it
        still exists."""
        ...

    async def insert_upload(self, upload: Upload) -> None: ...

    async def put_part(self, part: Part) -> Part | None:
        """Store a part; the part it replaced (its references are the caller's to release)."""
        ...

    async def delete_upload(self, upload_id: str) -> list[Part]:
        """Forget an upload; its parts (their references are the caller's to release)."""
        ...

    async def set_refs(self, blob_id: str, refs: int) -> None:
        """Repair: set a blob's reference count; at zero the blob goes (as `release`)."""
        ...

    async def add_intent(self, blob_id: str, node: str, expires_ns: int) -> None:
        """Record that `node` is writing the file of blob `blob_id` (intents.py)."""
        ...

    async def renew_intent(self, blob_id: str, expires_ns: int) -> bool:
        """Move an intent's expiry; False if it is gone (reclaimed)."""
        ...

    async def drop_intents(self, blob_ids: Iterable[str] | None) -> None:
        """Forget these intents (their files are gone); None: every intent."""
        ...

    async def take_expired_intents(self, now_ns: int, limit: int) -> list[str]:
        """Delete up to `limit` intents that expired before `now_ns` and are not being
        renewed or committed meanwhile; their blob ids (whose files may go)."""
        ...

    async def claim_id(self, proposed: str | None) -> str | None:
        """The catalog's id; if it has none, `proposed` becomes it (None: only read)."""
        ...

    async def append_outbox(
        self,
        bucket: str,
        key: str,
        event: str,
        version_id: str | None,
        time_ns: int,
        facts: str,
        part: int,
    ) -> None:
        """Add a row to the outbox, numbered after every row before it, in the partition
        `part` (outbox.py)."""
        ...

    async def delete_outbox(self, seqs: Sequence[int]) -> None:
        """Remove these rows of the outbox (acknowledged)."""
        ...

    async def hold_lease(self, name: str, holder: str, now_ns: int, until_ns: int) -> bool:
        """Hold the lease `name` until `until_ns` if it is free, expired before `now_ns`, or
        `holder`'s already; False while another holder has it."""
        ...

    async def drop_lease(self, name: str, holder: str) -> None:
        """Give back the lease `name` if `holder` holds it."""
        ...

    async def live_leases(self, prefix: str, now_ns: int) -> dict[str, str]:
        """The leases whose names begin with `prefix` (no LIKE wildcard in it) and that have
        not expired before `now_ns`: name -> holder."""
        ...

    async def drop_leases(self, prefix: str, holder: str) -> None:
        """Give back every lease of `holder` whose name begins with `prefix`."""
        ...

    async def lock_docs(self, kind: str, account: str) -> dict[str, str]:
        """get_docs, for a change of the account's documents of `kind`: no other transaction
        changes those rows until this one ends."""
        ...

    async def put_doc(self, kind: str, account: str, name: str, doc: str) -> None:
        """Make or replace a document."""
        ...

    async def delete_doc(self, kind: str, account: str, name: str) -> None: ...


class Catalog(Protocol):
    """A catalog backend: point reads, scans, and transactions."""

    reader: Reader
    audit: CatalogAudit

    async def scan(self, fn: Callable[[CatalogReader], Awaitable[T]]) -> T:
        """Run a read of many statements (a listing page) where the backend runs long work."""
        ...

    def write(
        self, fn: Callable[[CatalogTx], Awaitable[T]], *, long: bool = False
    ) -> Awaitable[tuple[T, list[str]]]:
        """Run `fn` in a transaction and commit it. Gives (its result, the ids of file blobs it
        released). The outcome stands whatever becomes of the caller: a caller that goes away
        does not undo or abandon a write. `long`: many statements."""
        ...

    def totals(self) -> tuple[int, int]:
        """(objects, bytes) stored; blocking, from any thread."""
        ...

    def writable(self) -> bool:
        """Can it take writes now? (readiness)"""
        ...

    def close(self) -> None: ...


class BlobWriter(Protocol):
    """A new blob: bytes appended in order, then published (durable under its id) or aborted.
    Nothing references it until a catalog commit does."""

    blob_id: str

    def append(self, data: bytes | Sequence[bytes | memoryview]) -> Awaitable[None]:
        """Start writing `data` (bytes, or pieces in order) after what came before, at once;
        await the result. One append is in flight at a time (the caller awaits each before
        the next)."""
        ...

    async def publish(
        self,
        last: bytes | Sequence[bytes | memoryview] = b"",
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Append `last` and make the blob durable under its id: after this returns it
        survives a crash. `ready` is awaited before the blob appears under its id (its
        intent is recorded meanwhile, intents.py)."""
        ...

    def abort(self) -> None:
        """Remove what was written, and the blob if it was published, once the append in
        flight (if any) has finished: in the background, so a cancelled request can call it."""
        ...


class OpenBlob(Protocol):
    """A blob opened for reading. It stays readable while open, even if it is freed
    meanwhile, so a response under way never loses its bytes to a delete."""

    async def read(self, offset: int, count: int) -> bytes:
        """Between 1 and `count` bytes from `offset` (OSError if the blob is shorter)."""
        ...

    def size(self) -> int: ...

    def file(self) -> BinaryIO | None:
        """A file object of its own on the blob (the caller closes it), for sendfile; None
        where the backend keeps no file (then the response streams `read`s)."""
        ...

    def close(self) -> None: ...


class Stray(Protocol):
    """Something a walk of the blob store found: the caller compares `name` with the catalog's
    blob ids and passes the stray ones back to `remove`."""

    name: str


class BlobStore(Protocol):
    """Immutable blobs, each named by an id the Store chose."""

    def writer(self) -> BlobWriter: ...

    async def open(self, blob_id: str) -> OpenBlob:
        """FileNotFoundError if the blob is gone."""
        ...

    async def retire(self, blob_ids: Iterable[str]) -> Sequence[object]:
        """Take released blobs out of reach at once (their space may stay taken); `purge` the
        result to free it. Blobs already gone are skipped."""
        ...

    async def purge(self, retired: Iterable[object]) -> None: ...

    async def delete(self, blob_ids: Iterable[str]) -> None:
        """Retire and purge."""
        ...

    def walk(self) -> AsyncIterator[list[Stray]]:
        """Everything kept as a blob, one batch (a directory) at a time."""
        ...

    async def remove(self, found: Iterable[Stray]) -> None:
        """Remove what a walk found (an orphan a crash left)."""
        ...

    async def folders(self) -> list[str]:
        """Groups of blobs that a reclaimer looks through one at a time."""
        ...

    async def old_files(self, folder: str | None, age: float) -> list[Stray]:
        """What was not modified for `age` seconds: the blobs of `folder`, or with None the
        bodies being received and the freed blobs not yet purged."""
        ...

    async def forget(self, blob_ids: Iterable[str]) -> None:
        """Remove whatever is kept of these blobs, received in part or published."""
        ...

    async def leftovers(self) -> list[str]:
        """What a stopped gateway left half-done: bodies being received, blobs being freed."""
        ...

    async def empty_leftovers(self) -> int:
        """Remove the leftovers (when no gateway uses the store); how many there were."""
        ...

    async def writable(self) -> bool:
        """Can it take new blobs now? (readiness)"""
        ...

    async def catalog_id(self, proposed: str | None) -> str | None:
        """The id of the catalog whose blobs these are; if none is recorded, `proposed`
        becomes it, durably, the first of concurrent claims winning (None: only read)."""
        ...

    def close(self) -> None:
        """Let go of what it holds (connections); a closed store is not used again."""
        ...


def complete_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a backend that completes without awaiting) to
    its end in this thread."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a catalog call that must complete at once suspended")
