"""Lifecycle configurations: the `<LifecycleConfiguration>` document checked as AWS checks it,
its rules, which objects each applies to, and when they expire
(userguide/intro-lifecycle-rules.md, API_PutBucketLifecycleConfiguration.html).

A bucket keeps the document as it was put (Store settings, "lifecycle"); `rules` parses it
once per distinct document. The background worker (gateway/workers/lifecycle.py) applies the rules;
the `x-amz-expiration` header of PUT, GET and HEAD tells when the current version expires.
"""

from __future__ import annotations

import calendar
import datetime
import functools
import secrets
from dataclasses import dataclass
from xml.etree.ElementTree import Element, tostring

from . import xml
from .errors import S3Error, invalid_argument

DAY_NS = 86_400 * 10**9
MAX_RULES = 1000
MAX_ID_CHARS = 255
MAX_LIFECYCLE_XML = 1024 * 1024
# A rule's elements: ID, Status, a Filter with And, Prefix, sizes and tags, its actions with
# their fields (about 30 with a few tags); 64 each leaves room for more tags.
MAX_LIFECYCLE_ELEMENTS = 1 + 64 * MAX_RULES
STORAGE_CLASSES = {
    "GLACIER",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "DEEP_ARCHIVE",
    "GLACIER_IR",
}


@dataclass(frozen=True)
class Rule:
    id: str
    enabled: bool
    prefix: str = ""
    tags: tuple[tuple[str, str], ...] = ()
    size_gt: int | None = None
    size_lt: int | None = None
    expiration_days: int | None = None
    expiration_date_ns: int | None = None
    expired_object_delete_marker: bool = False
    noncurrent_days: int | None = None
    newer_noncurrent: int | None = None
    abort_days: int | None = None

    def applies(self, key: str, size: int, tags: tuple[tuple[str, str], ...]) -> bool:
        """Does the rule's filter take this object (its key, size and tags)?"""
        if not key.startswith(self.prefix):
            return False
        if self.size_gt is not None and not size > self.size_gt:
            return False
        if self.size_lt is not None and not size < self.size_lt:
            return False
        return all(tag in tags for tag in self.tags)

    def expires_at(self, mtime_ns: int, day_ns: int = DAY_NS) -> int | None:
        """When the current version written at `mtime_ns` expires under this rule."""
        if self.expiration_date_ns is not None:
            return self.expiration_date_ns
        if self.expiration_days is not None:
            return after_days(mtime_ns, self.expiration_days, day_ns)
        return None


def after_days(since_ns: int, days: int, day_ns: int = DAY_NS) -> int:
    """AWS: "adding the number of days specified in the rule to the object creation time and
    rounding the resulting time to the next day midnight UTC" (with `day_ns` a day: a test
    setting may shorten it; day boundaries are then multiples of it since the epoch)."""
    at = since_ns + days * day_ns
    return -(-at // day_ns) * day_ns


@functools.lru_cache(maxsize=256)
def rules(document: str) -> tuple[Rule, ...]:
    """The rules of a stored (already validated) document."""
    return parse(document.encode())


def expiration_header(
    document: str | None, key: str, size: int, tags: tuple[tuple[str, str], ...], mtime_ns: int
) -> str | None:
    """`x-amz-expiration` for the current version: the earliest enabled rule's date."""
    if document is None:
        return None
    found: tuple[int, str] | None = None
    for rule in rules(document):
        if not rule.enabled or not rule.applies(key, size, tags):
            continue
        at = rule.expires_at(mtime_ns)
        if at is not None and (found is None or at < found[0]):
            found = (at, rule.id)
    if found is None:
        return None
    return f'expiry-date="{xml.http_date(found[0])}", rule-id="{found[1]}"'


def with_ids(body: bytes) -> str:
    """The document to keep: a rule sent without an ID gets one, as AWS gives it (and lists
    it by)."""
    root = xml.parse(body, MAX_LIFECYCLE_ELEMENTS)
    for rule in root.findall("Rule"):
        if not xml.child_text(rule, "ID"):
            for old in rule.findall("ID"):
                rule.remove(old)
            element = Element("ID")
            element.text = secrets.token_urlsafe(24)
            rule.insert(0, element)
    return tostring(root, encoding="unicode")


# --- parsing and checking ---------------------------------------------------------------------


def parse(body: bytes) -> tuple[Rule, ...]:
    root = xml.parse(body, MAX_LIFECYCLE_ELEMENTS)
    if root.tag != "LifecycleConfiguration":
        raise S3Error("MalformedXML")
    elements = root.findall("Rule")
    if not elements or len(elements) > MAX_RULES:
        raise S3Error("MalformedXML")
    parsed = tuple(_rule(el, n) for n, el in enumerate(elements))
    ids = [r.id for r in parsed]
    if len(set(ids)) != len(ids):
        raise invalid_argument("Rule ID must be unique. Found same ID for more than one rule", "ID")
    return parsed


def _rule(el: Element, n: int) -> Rule:
    rule_id = xml.child_text(el, "ID")
    if rule_id is not None and len(rule_id) > MAX_ID_CHARS:
        raise invalid_argument("ID length should not exceed allowed limit of 255", "ID", rule_id)
    status = xml.child_text(el, "Status")
    if status not in ("Enabled", "Disabled"):
        raise S3Error("MalformedXML")
    prefix, tags, size_gt, size_lt = _filter(el)
    fields: dict[str, object] = {}
    expiration = el.find("Expiration")
    if expiration is not None:
        days = xml.child_text(expiration, "Days")
        date = xml.child_text(expiration, "Date")
        marker = xml.child_text(expiration, "ExpiredObjectDeleteMarker")
        if sum(v is not None for v in (days, date, marker)) != 1:
            raise S3Error("MalformedXML")
        if days is not None:
            fields["expiration_days"] = _days(days, "Days", "Expiration")
        if date is not None:
            fields["expiration_date_ns"] = _midnight(date)
        if marker is not None:
            if marker not in ("true", "false"):
                raise S3Error("MalformedXML")
            if tags:
                raise S3Error(
                    "InvalidRequest",
                    "ExpiredObjectDeleteMarker cannot be specified with object tag filters.",
                )
            fields["expired_object_delete_marker"] = marker == "true"
    noncurrent = el.find("NoncurrentVersionExpiration")
    if noncurrent is not None:
        days = xml.child_text(noncurrent, "NoncurrentDays")
        newer = xml.child_text(noncurrent, "NewerNoncurrentVersions")
        if days is None:
            raise S3Error("MalformedXML")
        fields["noncurrent_days"] = _days(days, "NoncurrentDays", "NoncurrentVersionExpiration")
        if newer is not None:
            count = _int(newer)
            if not 1 <= count <= 100:
                raise invalid_argument(
                    "NewerNoncurrentVersions must be between 1 and 100", "NewerNoncurrentVersions"
                )
            fields["newer_noncurrent"] = count
    abort = el.find("AbortIncompleteMultipartUpload")
    if abort is not None:
        days = xml.child_text(abort, "DaysAfterInitiation")
        if days is None:
            raise S3Error("MalformedXML")
        if tags:
            raise S3Error(
                "InvalidRequest",
                "AbortIncompleteMultipartUpload cannot be specified with Tags.",
            )
        fields["abort_days"] = _days(days, "DaysAfterInitiation", "AbortIncompleteMultipartUpload")
    transitions = [*el.findall("Transition"), *el.findall("NoncurrentVersionTransition")]
    for transition in transitions:
        _transition(transition)
    if not fields and not transitions:
        raise S3Error("InvalidRequest", "At least one action needs to be specified in a rule")
    return Rule(
        id=rule_id if rule_id else f"rule-{n + 1}",
        enabled=status == "Enabled",
        prefix=prefix,
        tags=tags,
        size_gt=size_gt,
        size_lt=size_lt,
        **fields,  # type: ignore[arg-type]
    )


def _filter(el: Element) -> tuple[str, tuple[tuple[str, str], ...], int | None, int | None]:
    """(prefix, tags, size greater than, size less than) from Filter or the legacy Prefix."""
    legacy = el.find("Prefix")
    flt = el.find("Filter")
    if (legacy is None) == (flt is None):
        raise S3Error("MalformedXML")
    if flt is None:
        return legacy.text or "", (), None, None  # type: ignore[union-attr]
    conditions = [c for c in flt if isinstance(c.tag, str)]
    if len(conditions) > 1:
        raise S3Error("MalformedXML")
    if not conditions:
        return "", (), None, None
    (cond,) = conditions
    # Two conditions side by side (Prefix beside Tag, as ceph's s3-tests send them) are
    # refused above: "When using more than one filter, you must wrap the filters in an <And>
    # element" (intro-lifecycle-rules.html; AWS answers MalformedXML, LocalStack's recording
    # test_put_bucket_lifecycle_conf_exc). An And joins predicates: an empty one joins none.
    parts = [c for c in cond if isinstance(c.tag, str)] if cond.tag == "And" else [cond]
    if not parts:
        raise S3Error("MalformedXML")
    prefix, tags, size_gt, size_lt = "", [], None, None
    for part in parts:
        if part.tag == "Prefix":
            prefix = part.text or ""
        elif part.tag == "Tag":
            key, value = xml.child_text(part, "Key"), xml.child_text(part, "Value")
            if key is None:
                raise S3Error("MalformedXML")
            # "If you specify only a Key element and no Value element, the rule will apply
            # only to objects that match the tag key and that do not have a value specified"
            # (intro-lifecycle-filters.html): the tag with an empty value.
            tags.append((key, value or ""))
        elif part.tag == "ObjectSizeGreaterThan":
            size_gt = _int(part.text or "")
        elif part.tag == "ObjectSizeLessThan":
            size_lt = _int(part.text or "")
        else:
            raise S3Error("MalformedXML")
    if len({k for k, _ in tags}) != len(tags):
        raise S3Error("InvalidRequest", "Duplicate Tag Keys are not allowed.")
    if size_gt is not None and size_lt is not None and size_gt >= size_lt:
        raise invalid_argument(
            "ObjectSizeGreaterThan must be less than ObjectSizeLessThan", "ObjectSizeGreaterThan"
        )
    return prefix, tuple(tags), size_gt, size_lt


def _transition(el: Element) -> None:
    """Transitions are checked and kept in the document; this gateway has one storage class,
    so they move nothing."""
    storage = xml.child_text(el, "StorageClass")
    if storage not in STORAGE_CLASSES:
        raise S3Error("InvalidStorageClass", StorageClassRequested=storage)
    days = xml.child_text(el, "Days") or xml.child_text(el, "NoncurrentDays")
    date = xml.child_text(el, "Date")
    if date is not None:
        _midnight(date)
    elif days is None or _int(days) < 0:
        raise S3Error("MalformedXML")


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError as exc:
        raise S3Error("MalformedXML") from exc


def _days(text: str, name: str, action: str) -> int:
    days = _int(text)
    if days <= 0:
        raise invalid_argument(f"'{name}' for {action} action must be a positive integer", name)
    return days


def _midnight(text: str) -> int:
    """An ISO 8601 date or date-time, which must be midnight UTC."""
    try:
        when = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise invalid_argument("Invalid date", "Date", text) from exc
    if len(text.strip()) < 10 or "-" not in text:
        raise invalid_argument("Invalid date", "Date", text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    when = when.astimezone(datetime.UTC)
    if (when.hour, when.minute, when.second, when.microsecond) != (0, 0, 0, 0):
        raise invalid_argument("'Date' must be at midnight GMT", "Date", text)
    return calendar.timegm(when.timetuple()) * 10**9
