"""A bucket's ReplicationConfiguration (PutBucketReplication's document): parsed, checked as
AWS checks it, rendered as GetBucketReplication answers it, and the rules an object version is
replicated by (`Configuration.rules_for`).

Two schemas, as AWS accepts them ("Replication configuration", "Backward compatibility"):
V2 rules carry a `Filter` (Prefix, Tag, or And of both), a `Priority` and a
`DeleteMarkerReplication`; V1 rules a bare `Prefix` and none of those three, and their delete
markers are replicated (V1's behaviour). One document holds rules of one schema.

AWS's refusals, with the messages services that answer as AWS does record (OpenStack Swift's
s3api replication controller, MinIO): InvalidRequest for a missing Priority or
DeleteMarkerReplication in V2 ("... must be specified for this version of Cross Region
Replication configuration schema..."), a duplicate priority ("Found duplicate priority N."),
delete-marker replication on a tag-filtered rule, more than 1,000 rules, a missing destination
bucket, AccessControlTranslation without Account; InvalidArgument for a duplicate rule ID
("Rule Id must be unique."), an ID over 255 characters and a destination that is no bucket ARN;
MalformedXML for anything outside the schema. Whether a destination exists is the operation's
question (s3/ops/replication.py), which knows the buckets and the remotes.

The bucket keeps the configuration as its "replication" setting: the canonical XML that
`to_document` renders (every rule with its ID, generated ones included), which is also what
GetBucketReplication answers; `from_document` reads it back (cached per distinct text).
"""

from __future__ import annotations

import base64
import functools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from ..s3 import xml
from ..s3.errors import S3Error, invalid_argument

SETTING = "replication"
MAX_RULES = 1000
MAX_ID_CHARS = 255
MAX_PREFIX_CHARS = 1024
MAX_PRIORITY = 2**31 - 1
# "The maximum size of a replication configuration is 2 MB" (AWS::S3::Bucket
# ReplicationConfiguration); a rule with an And of ten tags is under 40 elements.
MAX_REPLICATION_XML = 2 * 1024 * 1024
MAX_REPLICATION_ELEMENTS = 2 + 40 * MAX_RULES
BUCKET_ARN = "arn:aws:s3:::"
# Destination.StorageClass's values (the API reference's StorageClass enum, less the
# directory buckets' EXPRESS_ONEZONE).
STORAGE_CLASSES = frozenset({
    "STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
    "GLACIER", "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW",
})  # fmt: skip

_SCHEMA = (
    "must be specified for this version of Cross Region Replication configuration schema. "
    "Please refer to S3 Developer Guide for more information."
)
# AWS's own text, its missing space after "schema." included.
_NO_PRIORITY = (
    "Priority must be specified for this version of Cross Region Replication configuration "
    "schema.Please refer to S3 Developer Guide for more information."
)
_TAGGED_DELETE_MARKERS = (
    "Delete marker replication is not supported if any Tag filter is specified. Please refer "
    "to S3 Developer Guide for more information."
)


@dataclass(frozen=True)
class Destination:
    bucket: str  # the bucket's name (the ARN's last part)
    account: str | None = None
    storage_class: str | None = None
    # AccessControlTranslation Owner=Destination: the replica is owned by the destination's
    # account.
    owner_override: bool = False
    # EncryptionConfiguration's ReplicaKmsKeyID: the KMS key a copy of an SSE-KMS version is
    # encrypted with at a remote destination (it needs SseKmsEncryptedObjects).
    replica_kms_key: str | None = None

    @property
    def arn(self) -> str:
        return BUCKET_ARN + self.bucket


@dataclass(frozen=True)
class Rule:
    id: str
    # None: a V1 rule (a bare Prefix, no Filter); V2 rules always have one (0..2^31-1).
    priority: int | None
    enabled: bool
    prefix: str
    tags: tuple[tuple[str, str], ...]  # all must be on a version for it to match
    delete_markers: bool  # DeleteMarkerReplication Enabled (always, for V1 rules)
    replica_modifications: bool  # SourceSelectionCriteria.ReplicaModifications Enabled
    destination: Destination
    existing_objects: bool | None = None  # ExistingObjectReplication, None when absent
    sse_kms_objects: bool = False  # SourceSelectionCriteria.SseKmsEncryptedObjects Enabled

    @property
    def v1(self) -> bool:
        return self.priority is None

    def matches(self, key: str, tags: Mapping[str, str]) -> bool:
        return key.startswith(self.prefix) and all(tags.get(k) == v for k, v in self.tags)


@dataclass(frozen=True)
class Configuration:
    role: str
    rules: tuple[Rule, ...]

    def rules_for(self, key: str, tags: Mapping[str, str]) -> list[Rule]:
        """The enabled rules an object version (`key` with `tags`) is replicated by: one per
        destination bucket, the matching rule of the highest Priority where several name the
        same one (AWS: "if there are two or more rules with the same destination bucket, then
        objects will be replicated according to the rule with the highest priority"); in the
        document's order."""
        chosen: dict[str, Rule] = {}
        for rule in self.rules:
            if not rule.enabled or not rule.matches(key, tags):
                continue
            held = chosen.get(rule.destination.bucket)
            if held is None or (rule.priority or 0) > (held.priority or 0):
                chosen[rule.destination.bucket] = rule
        kept = set(map(id, chosen.values()))
        return [rule for rule in self.rules if id(rule) in kept]

    def to_document(self) -> str:
        """What the bucket's "replication" setting keeps: the canonical XML (render)."""
        return render(self).decode()

    @staticmethod
    def from_document(document: str) -> Configuration:
        """A kept setting as a configuration (parsed once per distinct text)."""
        return _stored(document)


def _malformed() -> S3Error:
    return S3Error("MalformedXML")


def _invalid_request(message: str) -> S3Error:
    return S3Error("InvalidRequest", message)


def generated_id() -> str:
    """An ID for a rule sent without one, shaped as AWS's (base64 of a UUID's text)."""
    return base64.b64encode(str(uuid.uuid4()).encode()).decode()


def _children(el: Element, allowed: Iterable[str]) -> dict[str, Element]:
    """`el`'s children by tag: each at most once, none outside `allowed` (else MalformedXML)."""
    found: dict[str, Element] = {}
    names = set(allowed)
    for child in el:
        if child.tag not in names or child.tag in found:
            raise _malformed()
        found[child.tag] = child
    return found


def _text(el: Element | None) -> str | None:
    return None if el is None else (el.text or "").strip()


def _status(el: Element | None) -> bool | None:
    """A `<Status>Enabled|Disabled</Status>` child of `el` (None: `el` absent)."""
    if el is None:
        return None
    status = _text(_children(el, ("Status",)).get("Status"))
    if status not in ("Enabled", "Disabled"):
        raise _malformed()
    return status == "Enabled"


def _tag(el: Element) -> tuple[str, str]:
    parts = _children(el, ("Key", "Value"))
    if "Key" not in parts or "Value" not in parts:
        raise _malformed()
    return (parts["Key"].text or "", parts["Value"].text or "")


def _filter(el: Element) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A V2 Filter: empty (every key), a Prefix, a Tag, or an And of a Prefix and Tags."""
    children = list(el)
    if not children:
        return "", ()
    if len(children) != 1:
        raise _malformed()
    only = children[0]
    if only.tag == "Prefix":
        return only.text or "", ()
    if only.tag == "Tag":
        return "", (_tag(only),)
    if only.tag != "And":
        raise _malformed()
    prefix = ""
    tags: list[tuple[str, str]] = []
    for part in only:
        if part.tag == "Prefix" and not prefix:
            prefix = part.text or ""
        elif part.tag == "Tag":
            tags.append(_tag(part))
        else:
            raise _malformed()
    if len({k for k, _ in tags}) != len(tags):
        raise _invalid_request("Duplicate Tag Keys are not allowed.")
    return prefix, tuple(tags)


def _destination(el: Element) -> Destination:
    parts = _children(
        el,
        (
            "Bucket", "Account", "StorageClass", "AccessControlTranslation",
            "EncryptionConfiguration", "ReplicationTime", "Metrics",
        ),
    )  # fmt: skip
    arn = _text(parts.get("Bucket"))
    if not arn:
        raise _invalid_request("Destination bucket must be specified.")
    name = arn[len(BUCKET_ARN) :] if arn.startswith(BUCKET_ARN) else ""
    if not name or "/" in name:
        raise invalid_argument("Invalid bucket ARN.", "Bucket", arn)
    account = _text(parts.get("Account")) or None
    storage_class = _text(parts.get("StorageClass"))
    if storage_class is not None and storage_class not in STORAGE_CLASSES:
        raise _malformed()
    owner_override = False
    if "AccessControlTranslation" in parts:
        owner = _children(parts["AccessControlTranslation"], ("Owner",)).get("Owner")
        if _text(owner) != "Destination":
            raise _malformed()
        if account is None:
            raise _invalid_request(
                "Account must be specified when AccessControlTranslation is specified"
            )
        owner_override = True
    replica_kms_key = None
    if "EncryptionConfiguration" in parts:
        found = _children(parts["EncryptionConfiguration"], ("ReplicaKmsKeyID",))
        replica_kms_key = _text(found.get("ReplicaKmsKeyID"))
        if not replica_kms_key:
            raise _malformed()
    for name_ in ("ReplicationTime", "Metrics"):
        if name_ in parts and _enabled_feature(parts[name_]):
            raise S3Error("NotImplemented", f"{name_} is not available on this gateway")
    return Destination(name, account, storage_class, owner_override, replica_kms_key)


def _enabled_feature(el: Element) -> bool:
    """ReplicationTime or Metrics: its Status (with Time or EventThreshold beside it)."""
    status = None
    for child in el:
        if child.tag == "Status":
            status = _text(child)
        elif child.tag not in ("Time", "EventThreshold"):
            raise _malformed()
    if status not in ("Enabled", "Disabled"):
        raise _malformed()
    return status == "Enabled"


def _source_selection(el: Element | None) -> tuple[bool, bool]:
    """(ReplicaModifications, SseKmsEncryptedObjects), each Enabled or not."""
    if el is None:
        return False, False
    parts = _children(el, ("ReplicaModifications", "SseKmsEncryptedObjects"))
    return bool(_status(parts.get("ReplicaModifications"))), bool(
        _status(parts.get("SseKmsEncryptedObjects"))
    )


def _rule(el: Element) -> Rule:
    parts = _children(
        el,
        (
            "ID", "Priority", "Prefix", "Filter", "Status", "SourceSelectionCriteria",
            "ExistingObjectReplication", "Destination", "DeleteMarkerReplication",
        ),
    )  # fmt: skip
    ident = _text(parts.get("ID")) or generated_id()
    if len(ident) > MAX_ID_CHARS:
        raise invalid_argument(f"The maximum value is {MAX_ID_CHARS} characters.", "ID", ident)
    enabled = _status_text(parts.get("Status"))
    if "Destination" not in parts:
        raise _malformed()
    destination = _destination(parts["Destination"])
    replica_modifications, sse_kms = _source_selection(parts.get("SourceSelectionCriteria"))
    existing = _status(parts.get("ExistingObjectReplication"))
    if sse_kms and destination.replica_kms_key is None:
        raise _invalid_request(
            "ReplicaKmsKeyID must be specified if SseKmsEncryptedObjects tag is present."
        )
    if destination.replica_kms_key is not None and not sse_kms:
        raise _invalid_request(
            "SseKmsEncryptedObjects must be specified if EncryptionConfiguration is present."
        )
    if "Filter" in parts:
        if "Prefix" in parts:
            raise _malformed()
        prefix, tags = _filter(parts["Filter"])
        if "Priority" not in parts:
            raise _invalid_request(_NO_PRIORITY)
        priority = _priority(_text(parts["Priority"]) or "")
        delete_markers = _status(parts.get("DeleteMarkerReplication"))
        if delete_markers is None:
            raise _invalid_request("DeleteMarkerReplication " + _SCHEMA)
        if delete_markers and tags:
            raise _invalid_request(_TAGGED_DELETE_MARKERS)
    elif "Prefix" in parts:
        # V1: Priority and DeleteMarkerReplication belong to V2's schema, which a rule
        # without a Filter is not.
        if "Priority" in parts or "DeleteMarkerReplication" in parts:
            raise _malformed()
        prefix, tags, priority, delete_markers = parts["Prefix"].text or "", (), None, True
    else:
        raise _malformed()
    if len(prefix) > MAX_PREFIX_CHARS:
        raise invalid_argument(
            f"The maximum value is {MAX_PREFIX_CHARS} characters.", "Prefix", prefix
        )
    return Rule(
        ident, priority, enabled, prefix, tags, delete_markers, replica_modifications,
        destination, existing, sse_kms,
    )  # fmt: skip


def _status_text(el: Element | None) -> bool:
    status = _text(el)
    if status not in ("Enabled", "Disabled"):
        raise _malformed()
    return status == "Enabled"


def _priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _malformed() from None
    if not 0 <= value <= MAX_PRIORITY:
        raise _invalid_request(f"Priority must be between 0 and {MAX_PRIORITY}.")
    return value


def parse(body: bytes) -> Configuration:
    """The document a PUT sends, checked whole (nothing of a refused one is kept)."""
    root = xml.parse(body, MAX_REPLICATION_ELEMENTS)
    if root.tag != "ReplicationConfiguration":
        raise _malformed()
    role = None
    elements: list[Element] = []
    for el in root:
        if el.tag == "Role" and role is None:
            role = (el.text or "").strip()
        elif el.tag == "Rule":
            elements.append(el)
        else:
            raise _malformed()
    if role is None or not elements:
        raise _malformed()
    if len(elements) > MAX_RULES:
        raise _invalid_request(
            f"The number of replication rules must not exceed the allowed limit of {MAX_RULES} "
            "rules."
        )
    rules = tuple(map(_rule, elements))
    if len({r.v1 for r in rules}) > 1:
        raise _malformed()  # one schema per document
    ids: set[str] = set()
    priorities: set[int] = set()
    for rule in rules:
        if rule.id in ids:
            raise invalid_argument("Rule Id must be unique.", "ID", rule.id)
        ids.add(rule.id)
        if rule.priority is not None:
            if rule.priority in priorities:
                raise _invalid_request(f"Found duplicate priority {rule.priority}.")
            priorities.add(rule.priority)
    return Configuration(role, rules)


def _enabled(flag: bool) -> str:
    return "Enabled" if flag else "Disabled"


def _rule_nodes(rule: Rule) -> Iterable[xml.Node]:
    yield ("ID", rule.id)
    if rule.v1:
        yield ("Prefix", rule.prefix)
    else:
        yield ("Priority", rule.priority)
        tag_nodes: list[xml.Node] = [("Tag", [("Key", k), ("Value", v)]) for k, v in rule.tags]
        if not rule.tags:
            shown: list[xml.Node] = [("Prefix", rule.prefix)] if rule.prefix else []
        elif len(rule.tags) == 1 and not rule.prefix:
            shown = tag_nodes
        else:
            shown = [("And", [*([("Prefix", rule.prefix)] if rule.prefix else []), *tag_nodes])]
        yield ("Filter", shown)
    yield ("Status", _enabled(rule.enabled))
    selection: list[xml.Node] = []
    if rule.replica_modifications:
        selection.append(("ReplicaModifications", [("Status", "Enabled")]))
    if rule.sse_kms_objects:
        selection.append(("SseKmsEncryptedObjects", [("Status", "Enabled")]))
    if selection:
        yield ("SourceSelectionCriteria", selection)
    if rule.existing_objects is not None:
        yield ("ExistingObjectReplication", [("Status", _enabled(rule.existing_objects))])
    d = rule.destination
    yield (
        "Destination",
        [
            ("Bucket", d.arn),
            ("Account", d.account),
            ("StorageClass", d.storage_class),
            ("AccessControlTranslation", [("Owner", "Destination")] if d.owner_override else None),
            (
                "EncryptionConfiguration",
                [("ReplicaKmsKeyID", d.replica_kms_key)] if d.replica_kms_key else None,
            ),
        ],
    )
    if not rule.v1:
        yield ("DeleteMarkerReplication", [("Status", _enabled(rule.delete_markers))])


def render(config: Configuration) -> bytes:
    """GetBucketReplication's answer (and the form the bucket setting keeps)."""
    return xml.render(
        "ReplicationConfiguration",
        [("Role", config.role), *(("Rule", list(_rule_nodes(r))) for r in config.rules)],
    )


@functools.lru_cache(maxsize=1024)
def _stored(document: str) -> Configuration:
    return parse(document.encode())
