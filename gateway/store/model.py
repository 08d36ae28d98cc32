"""The store's values: frozen dataclasses in, frozen dataclasses out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The version id of an object written while its bucket's versioning was never set or suspended.
NULL_VERSION = "null"


@dataclass(frozen=True)
class Extent:
    """`length` bytes of blob `blob` starting at `offset`: one piece of an object's manifest."""

    blob: str
    offset: int
    length: int
    # An encrypted blob's data key, sealed (crypto.py); offsets and lengths are plaintext's.
    key: str | None = None


@dataclass(frozen=True)
class DefaultRetention:
    """A bucket's default Object Lock retention: new versions get it unless a write names
    one (exactly one of days and years)."""

    mode: str  # GOVERNANCE or COMPLIANCE
    days: int | None = None
    years: int | None = None


@dataclass(frozen=True)
class Bucket:
    name: str
    owner: str
    region: str
    created_ns: int
    # None until PutBucketVersioning first sets it; then "Enabled" or "Suspended" (there is no
    # way back to None, as on S3).
    versioning: str | None = None
    # Object Lock, once enabled, stays enabled (and versioning with it).
    object_lock: bool = False
    default_retention: DefaultRetention | None = None
    # The bucket's configuration documents by name ("cors", "policy", "acl", "tagging", ...),
    # each as its operation stores it; an absent name is a configuration never set (or
    # deleted). Read with the bucket, so a request's authorisation reads no more rows.
    settings: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ObjectLock:
    """A version's Object Lock settings: a retention (mode and date) and a legal hold, each
    unset until a write or PutObjectRetention / PutObjectLegalHold sets it."""

    mode: str | None = None  # GOVERNANCE or COMPLIANCE
    retain_until_ns: int | None = None
    legal_hold: str | None = None  # ON or OFF


NO_LOCK = ObjectLock()


@dataclass(frozen=True)
class ObjectAttrs:
    """What the client set on an object: system metadata headers and user metadata.

    `headers` holds the user-controlled system metadata (Content-Type, Cache-Control,
    Content-Disposition, Content-Encoding, Content-Language, Expires, ...), lower-case names.
    `meta` holds `x-amz-meta-*` values by their lower-case suffix.
    """

    content_type: str = "binary/octet-stream"
    headers: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    # Verified flexible checksums of the bytes, as the headers that return them
    # (x-amz-checksum-crc32: ..., x-amz-checksum-type: FULL_OBJECT); sent only when asked for.
    checksums: dict[str, str] = field(default_factory=dict)
    # Who wrote the object (a canonical id; None: the bucket's owner), and its access control
    # list as the ACL operations store it (None: the owner's full control only).
    owner: str | None = None
    acl: str | None = None
    # The object's tags, in the order they were given.
    tags: tuple[tuple[str, str], ...] = ()
    # A multipart object's parts' flexible checksums, in part order, when its upload had an
    # algorithm (GetObjectAttributes lists them); empty otherwise.
    part_checksums: tuple[str, ...] = ()
    # Server-side encryption: the headers that describe it in answers (x-amz-server-side-
    # encryption, the KMS key's ARN, SSE-C's algorithm and key MD5); empty for a plain object.
    sse: dict[str, str] = field(default_factory=dict)
    # SSE-C: a salted HMAC that recognises the customer's key (the key is never stored).
    sse_key: str | None = None
    # Replication (x-amz-replication-status): PENDING, COMPLETED or FAILED on a version a
    # rule copies elsewhere, REPLICA on such a copy; None for every other version.
    replication: str | None = None

    @property
    def kms_encrypted(self) -> bool:
        """SSE-KMS (or its dual-layer kind): replicated only where a rule asks for them."""
        return self.sse.get("x-amz-server-side-encryption", "").startswith("aws:kms")

    @property
    def etag_is_md5(self) -> bool:
        """Is the ETag of an object (or part) with these attrs the MD5 of its bytes? Not under
        SSE-C or SSE-KMS: "The ETag in the response is not the MD5 of the object data"."""
        return (
            self.sse.get("x-amz-server-side-encryption", "AES256") == "AES256"
            and "x-amz-server-side-encryption-customer-algorithm" not in self.sse
        )


@dataclass(frozen=True)
class ObjectInfo:
    bucket: str
    key: str
    size: int
    etag: str  # unquoted
    mtime_ns: int
    attrs: ObjectAttrs
    extents: tuple[Extent, ...]
    # The MD5 of the bytes when known: equal to etag for plain objects; for multipart objects
    # it is learnt the first time their bytes are hashed (a copy), so the next copy reads nothing.
    content_md5: str | None = None
    # Sizes of the parts of a completed multipart upload, in order; empty otherwise.
    parts: tuple[int, ...] = ()
    # The multipart upload that created the object, so that a retried Complete is answered.
    upload_id: str | None = None
    version_id: str = NULL_VERSION
    # A delete marker: a version without bytes that says "deleted" (size 0, no ETag).
    delete_marker: bool = False
    lock: ObjectLock = NO_LOCK


@dataclass(frozen=True)
class Upload:
    """A multipart upload in progress: what CreateMultipartUpload set, for the final object."""

    id: str
    bucket: str
    key: str
    initiated_ns: int
    owner: str
    attrs: ObjectAttrs
    lock: ObjectLock = NO_LOCK  # what CreateMultipartUpload asked for the object


@dataclass(frozen=True)
class Part:
    upload_id: str
    number: int
    size: int
    etag: str  # MD5 hex of the part's bytes
    mtime_ns: int
    extents: tuple[Extent, ...]
    checksum: str | None = None  # the flexible checksum UploadPart verified (its algorithm's)


@dataclass(frozen=True)
class UploadsPage:
    uploads: tuple[Upload, ...]
    common_prefixes: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True)
class ListEntry:
    key: str
    size: int
    etag: str
    mtime_ns: int
    version_id: str = NULL_VERSION
    delete_marker: bool = False
    is_latest: bool = True
    # What a listing shows of the object's attrs: its stored checksum headers
    # (x-amz-checksum-crc64nvme, x-amz-checksum-type...) and its storage class, if one was set.
    checksums: tuple[tuple[str, str], ...] = ()
    storage_class: str | None = None


@dataclass(frozen=True)
class ListPage:
    entries: tuple[ListEntry, ...]
    common_prefixes: tuple[str, ...]
    truncated: bool
    # The last key or common prefix returned: where the next page starts (exclusive).
    last: str | None


@dataclass(frozen=True)
class VersionsPage:
    """A page of ListObjectVersions: versions and delete markers, keys ascending and newest
    first within a key."""

    entries: tuple[ListEntry, ...]
    common_prefixes: tuple[str, ...]
    truncated: bool
    # Where the next page starts: the last entry's key and version id (or the last common
    # prefix, and None), as AWS's NextKeyMarker / NextVersionIdMarker.
    next_key: str | None
    next_version_id: str | None


@dataclass(frozen=True)
class Deleted:
    """What a delete did to one key (DeleteObject, an entry of DeleteObjects)."""

    key: str
    # The version asked for (None: the key alone, which deletes the latest version).
    version_id: str | None
    # A delete marker was made (the key alone, in a bucket whose versioning was ever set), or
    # the version removed was one.
    delete_marker: bool = False
    marker_version_id: str | None = None


def slice_extents(extents: tuple[Extent, ...], start: int, length: int) -> tuple[Extent, ...]:
    """The extents that hold bytes [start, start + length) of a manifest: a range of an
    object is itself a manifest over the same blobs."""
    out: list[Extent] = []
    pos = 0
    end = start + length
    for e in extents:
        lo, hi = max(start, pos), min(end, pos + e.length)
        if lo < hi:
            out.append(Extent(e.blob, e.offset + lo - pos, hi - lo, e.key))
        pos += e.length
        if pos >= end:
            break
    return tuple(out)


@dataclass(frozen=True)
class StagedBlob:
    """A blob that has been written and made durable but that no object references yet.

    Either `data` (small bodies, stored inline in the catalog) or a file under blobs/.
    """

    id: str
    size: int
    md5: bytes
    data: bytes | None = None
    # Encrypted: the data key, sealed; `data` and the file hold ciphertext, `size` is the
    # plaintext's.
    key: str | None = None


@dataclass(frozen=True)
class DeleteCondition:
    """A conditional delete: what the version deleted (the key's current object, or the one
    named by id) must be. If-Match is AWS's on every bucket; the size and time conditions are
    its directory buckets', taken here too rather than ignored."""

    if_match: str | None = None  # an ETag, or `*`
    size: int | None = None
    modified_s: int | None = None  # Last-Modified, in whole seconds as HTTP gives it


@dataclass(frozen=True)
class WriteCondition:
    """A conditional write (PutObject, CompleteMultipartUpload): checked in the transaction
    that makes the write, so two racing writers cannot both pass."""

    if_match: str | None = None  # the current object's ETag must match this (`*`: exist)
    if_none_match: str | None = None  # the current object must not match this (`*`: none)


@dataclass(frozen=True)
class IamRow:
    """One IAM entity's row: a user, group, role or customer managed policy of an account, by
    its lower-case name (IAM's names are unique without regard to case), holding its JSON."""

    kind: str  # user, group, role, policy
    name: str
    doc: str | None  # None: the row is deleted
    new: bool = False  # no row had the name before this write


@dataclass(frozen=True)
class IamWrite:
    """What one change of an account's identities writes: the rows it changed, and no other.
    The indexes go with their entities' rows: an access key's account and user, a group's
    members, a managed policy's attachments (user, group or role)."""

    account_doc: str | None = None  # the account's own row (its root's keys); None: unchanged
    account_new: bool = False  # the account had no row yet
    rows: tuple[IamRow, ...] = ()
    keys_added: tuple[tuple[str, str], ...] = ()  # (access key, user name; "" the root)
    keys_removed: tuple[str, ...] = ()
    members_added: tuple[tuple[str, str], ...] = ()  # (group name, user name)
    members_removed: tuple[tuple[str, str], ...] = ()
    attached: tuple[tuple[str, str, str], ...] = ()  # (policy ARN, kind, name)
    detached: tuple[tuple[str, str, str], ...] = ()

    def __bool__(self) -> bool:
        return any(
            (self.account_doc is not None, self.rows, self.keys_added, self.keys_removed,
             self.members_added, self.members_removed, self.attached, self.detached)
        )  # fmt: skip


@dataclass(frozen=True)
class Origin:
    """Who asked for a change, from where, in which request: what an event record says of it
    (gateway/notify/records.py). Each door makes one for its request and the write path hands
    it down; the gateway's own changes (lifecycle) make theirs."""

    principal: str = ""
    source_ip: str = ""
    request_id: str = ""
    host_id: str = ""
    # A body sent by a browser's POST form: its object's event is ObjectCreated:Post.
    form: bool = False
    # The replication worker's copy of a version from another bucket (its status REPLICA).
    replica: bool = False


NO_ORIGIN = Origin()


@dataclass(frozen=True)
class OutboxRecord:
    """A row of the outbox (outbox.py): what changed (the event, with its `s3:` prefix), where,
    when, and the facts a consumer needs (JSON text: outbox.Facts)."""

    seq: int
    bucket: str
    key: str
    event: str
    version_id: str | None
    time_ns: int
    facts: str
    part: int = 0  # its partition (outbox.partition)
