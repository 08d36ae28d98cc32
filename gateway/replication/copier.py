"""The copies replication makes: one outbox row's version (store/outbox.py), for one rule, at
the rule's destination. The notifications worker (workers/notifications.py) hands each
replication target of a row here, so that replication is delivered as events are: at least
once, in order per key, retried while the destination cannot take it.

- **A bucket of this gateway**: the version is written there with its id, time, metadata,
  tags and Object Lock, sharing the source's blobs (Store.put_replica: no byte is copied),
  with status REPLICA. Allowed as AWS allows it: the same account, or the destination's
  bucket policy grants the action to the source's account or to the configuration's Role
  (authorize.replication_allowed).
- **A bucket of another S3 endpoint** that the operator named (--replication-remotes): the
  bytes are read (decrypted) and sent with the object's headers, metadata and tags; an object
  made by a multipart upload goes as a multipart upload with the same part sizes, so its
  `-N` ETag is the same there. A delete marker is a DELETE without a version id. That
  endpoint gives its own version ids.

An outcome is `done` (the destination has it), `failed` (it never will: a permission, a
destination gone or misconfigured; not tried again, the source says FAILED), or neither (the
destination cannot take it now: tried again later, the source says PENDING).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import quote, urlsplit
from xml.sax.saxutils import escape

from ..notify.networks import Networks, OutsideNetworks, literal
from ..notify.webhook import BoundResolver
from ..s3.authorize import replication_allowed
from ..s3.ops.objects import user_metadata_header
from ..store import Store, StoreError, outbox, versions
from ..store.errors import NoSuchBucket, NoSuchKey
from ..store.model import ObjectAttrs, ObjectInfo, Origin, OutboxRecord
from ..tiers.client import S3Client, S3Failed, Target
from .configuration import Configuration, Rule
from .remotes import KIND as REMOTES
from .remotes import Remote, from_doc

log = logging.getLogger(__name__)

# The replication worker's changes, as an event record names who made them.
ORIGIN = Origin(principal="s3.amazonaws.com", replica=True)
# A version at most this big goes to a remote endpoint in one PUT; a bigger one that was not
# a multipart upload goes in parts of PART bytes (its ETag there is then a `-N` one).
SINGLE_PUT = 64 * 1024**2
PART = 16 * 1024**2
# Statuses of a remote that say "not now" rather than "never".
_TRANSIENT = frozenset((408, 429))


@dataclass(frozen=True)
class Outcome:
    done: bool
    failed: bool = False
    reason: str = ""
    # AWS's failure reason (the replication event's failureReason), for a copy that failed.
    code: str = ""


DONE = Outcome(True)


def _failed(code: str, reason: str) -> Outcome:
    return Outcome(True, failed=True, reason=reason, code=code)


def _action(event: str) -> str:
    if event == outbox.MARKER:
        return "s3:ReplicateDelete"
    if event in (outbox.TAGGED, outbox.UNTAGGED):
        return "s3:ReplicateTags"
    return "s3:ReplicateObject"


def _with_class(attrs: ObjectAttrs, rule: Rule) -> ObjectAttrs:
    """The destination's storage class: the rule's, else the source's."""
    if not rule.destination.storage_class:
        return attrs
    headers = {**attrs.headers, "x-amz-storage-class": rule.destination.storage_class}
    return replace(attrs, headers=headers)


class Replicator:
    def __init__(
        self,
        store: Store,
        remotes: Mapping[str, Remote],
        networks: Networks,
        open_secret: Callable[[str], bytes],
    ) -> None:
        self.store = store
        self.remotes = remotes  # the operator's (--replication-remotes)
        self.networks = networks  # where an account's own remotes may resolve
        self.open_secret = open_secret  # what opens their secret keys
        self._resolver: BoundResolver | None = None
        self._clients: dict[tuple[str, str], tuple[Remote, S3Client]] = {}

    def close(self) -> None:
        for _, client in self._clients.values():
            client.close()
        self._clients.clear()

    async def copy(self, row: OutboxRecord, owner: str, rule_id: str, arn: str) -> Outcome:
        """Copy the row's version for the rule `rule_id` to the bucket `arn` names."""
        source = await self.store.get_bucket(row.bucket)
        document = None if source is None else source.settings.get(outbox.REPLICATION)
        if document is None:
            return _failed(
                "SrcBucketReplicationConfigMissing",
                "the bucket has no replication configuration now",
            )
        config = Configuration.from_document(document)
        rule = next((r for r in config.rules if r.id == rule_id), None)
        if rule is None:
            return _failed("SrcBucketReplicationConfigMissing", f"the rule {rule_id} is gone")
        if row.version_id is None:
            return _failed("SrcVersionNotFound", "the version has no id")
        try:
            version = await self.store.head_object(row.bucket, row.key, row.version_id)
        except versions.DeleteMarker as exc:
            version = exc.marker
        except (NoSuchKey, NoSuchBucket, versions.NoSuchVersion):
            return DONE  # deleted since: nothing left to copy
        if version.attrs.sse_key is not None:
            return _failed("SrcObjectNotEligible", "SSE-C objects are not replicated")
        version = replace(version, attrs=_with_class(version.attrs, rule))
        name = arn.removeprefix(outbox.BUCKET_ARN)
        remote = await self._remote(owner, name)  # a remote wins over a bucket here
        destination = None if remote is not None else await self.store.get_bucket(name)
        if destination is not None:
            action = _action(row.event)
            if not replication_allowed(destination, owner, config.role, action, row.key):
                return _failed("DstPutObjectNotPermitted", f"{action} on {name} is not allowed")
            if destination.versioning != versions.ENABLED:
                return _failed("DstBucketUnversioned", f"versioning is not enabled on {name}")
            if row.event in (outbox.TAGGED, outbox.UNTAGGED):
                tags = version.attrs.tags
                try:
                    await self.store.update_attrs(
                        name, row.key, version.version_id, lambda v: replace(v.attrs, tags=tags)
                    )
                    return DONE
                except (NoSuchKey, versions.NoSuchVersion, versions.DeleteMarker):
                    pass  # not copied yet: the whole version goes
            await self.store.put_replica(name, version, ORIGIN)
            return DONE
        if remote is None:
            return _failed("DstBucketNotFound", f"no bucket {name} here, and no remote names it")
        try:
            await self._send(owner, remote, row, version, rule)
        except S3Failed as exc:
            if 400 <= exc.status < 500 and exc.status not in _TRANSIENT:
                return _failed("DstPutObjectNotPermitted", f"{name}: HTTP {exc.status} {exc.code}")
            return Outcome(False, reason=f"{name}: HTTP {exc.status} {exc.code}")
        except OutsideNetworks as exc:
            return Outcome(False, reason=f"{name}: {exc}")  # DNS may change: tried again
        except OSError as exc:
            return Outcome(False, reason=f"{name}: {type(exc).__name__}")
        return DONE

    # -- a remote endpoint --

    async def _remote(self, owner: str, name: str) -> Remote | None:
        """The remote a rule of `owner`'s names: the operator's, else the account's own."""
        found = self.remotes.get(name)
        if found is not None:
            return found
        doc = (await self.store.get_docs(REMOTES, owner)).get(name)
        return None if doc is None else from_doc(name, doc, self.open_secret)

    def _client(self, owner: str, remote: Remote) -> S3Client:
        """A client per destination, made again when the remote was changed since."""
        kept = self._clients.get((owner, remote.bucket))
        if kept is not None and kept[0] == remote:
            return kept[1]
        if kept is not None:
            kept[1].close()
        resolver = None
        if remote.bounded:
            host = urlsplit(remote.endpoint).hostname or ""
            address = literal(host)
            if address is not None:  # an address: aiohttp resolves nothing, checked here
                self.networks.check(host, [address])
            resolver = self._resolver = self._resolver or BoundResolver(self.networks)
        target = Target(
            remote.endpoint,
            remote.bucket,
            "",
            remote.region,
            remote.access_key,
            remote.secret_key,
            path_style=remote.addressing_style != "virtual",
            ca_file=None if remote.ca_file is None else str(remote.ca_file),
        )
        # As many connections as keys the notifications worker copies at once (KEYS_AT_ONCE).
        client = S3Client(target, connections=16, resolver=resolver)
        self._clients[(owner, remote.bucket)] = (remote, client)
        return client

    async def _send(
        self, owner: str, remote: Remote, row: OutboxRecord, version: ObjectInfo, rule: Rule
    ) -> None:
        client = self._client(owner, remote)
        if version.delete_marker:
            await client.call("DELETE", row.key, what="replicate a delete marker")
            return
        if row.event in (outbox.TAGGED, outbox.UNTAGGED):
            body = _tagging(version.attrs.tags)
            try:
                await client.call(
                    "PUT", row.key, [("tagging", "")], body=body, what="replicate tags"
                )
                return
            except S3Failed as exc:
                if exc.status != 404:
                    raise
        headers = {**_headers(version), **_encryption(version.attrs, rule)}
        sizes = list(version.parts) or _pieces(version.size)
        if len(sizes) <= 1 and version.size <= SINGLE_PUT and not version.parts:
            data = await self._read(version, 0, version.size)
            await client.call("PUT", row.key, headers=headers, body=data, what="replicate")
            return
        answer = await client.call(
            "POST", row.key, [("uploads", "")], headers=headers, what="replicate (start)"
        )
        upload_id = answer.xml().findtext("{*}UploadId") or ""
        try:
            etags = []
            start = 0
            for number, size in enumerate(sizes, 1):
                data = await self._read(version, start, size)
                start += size
                query = [("partNumber", str(number)), ("uploadId", upload_id)]
                part = await client.call("PUT", row.key, query, body=data, what="replicate a part")
                etags.append(part.headers.get("ETag", ""))
            listed = "".join(
                f"<Part><PartNumber>{n}</PartNumber><ETag>{escape(e)}</ETag></Part>"
                for n, e in enumerate(etags, 1)
            )
            body = f"<CompleteMultipartUpload>{listed}</CompleteMultipartUpload>".encode()
            await client.call(
                "POST", row.key, [("uploadId", upload_id)], body=body, what="replicate (end)"
            )
        except BaseException:
            # Else the remote's own lifecycle, or its listing, cleans it up.
            with contextlib.suppress(OSError, S3Failed):
                await client.call(
                    "DELETE", row.key, [("uploadId", upload_id)], what="replicate (abort)"
                )
            raise

    async def _read(self, version: ObjectInfo, start: int, size: int) -> bytes:
        reader = self.store.reader(version)
        try:
            await reader.open()
        except FileNotFoundError as exc:
            reader.close()
            raise StoreError("the version's bytes are gone") from exc
        try:
            return b"".join([piece async for piece in reader.chunks(start, size)])
        finally:
            reader.close()


def _pieces(size: int) -> list[int]:
    if size <= SINGLE_PUT:
        return [size]
    count, rest = divmod(size, PART)
    return [PART] * count + ([rest] if rest else [])


def _headers(version: ObjectInfo) -> dict[str, str]:
    attrs = version.attrs
    headers = {"Content-Type": attrs.content_type, **attrs.headers}
    for name, value in attrs.meta.items():
        headers[f"x-amz-meta-{name}"] = user_metadata_header(value)
    if attrs.tags:
        headers["x-amz-tagging"] = "&".join(
            f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in attrs.tags
        )
    return headers


def _encryption(attrs: ObjectAttrs, rule: Rule) -> dict[str, str]:
    """How the remote is asked to encrypt the copy: an SSE-KMS version (which only a rule with
    SseKmsEncryptedObjects copies) under the rule's ReplicaKmsKeyID. Any other version takes
    the destination bucket's default encryption (SSE-S3 on AWS since 2023, and here): no
    header, which S3 implementations without server-side encryption (SeaweedFS answers 500
    to one) would refuse."""
    if attrs.kms_encrypted and rule.destination.replica_kms_key:
        return {
            "x-amz-server-side-encryption": "aws:kms",
            "x-amz-server-side-encryption-aws-kms-key-id": rule.destination.replica_kms_key,
        }
    return {}


def _tagging(tags: tuple[tuple[str, str], ...]) -> bytes:
    listed = "".join(
        f"<Tag><Key>{escape(k)}</Key><Value>{escape(v)}</Value></Tag>" for k, v in tags
    )
    return f"<Tagging><TagSet>{listed}</TagSet></Tagging>".encode()
