"""A bucket's NotificationConfiguration (PutBucketNotificationConfiguration's document): parsed,
checked as AWS checks it, rendered as GetBucketNotificationConfiguration answers it, and the
configurations an event fires (`matching`).

AWS's refusals (each 400 InvalidArgument, as MinIO's table of AWS's errors and moto's tests of
AWS record them): an event name that is none of S3's ("The event is not supported for
notifications"), a filter rule other than prefix or suffix, two rules of one kind, a value over
1,024 bytes, and two configurations whose events and filters overlap ("Configurations overlap.
Configurations on the same bucket cannot share a common event type."). Destinations that do
not exist are refused by the operation, which knows the topics (ops/notification.py).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from ..s3 import xml
from ..s3.errors import S3Error
from . import events

# The three kinds of configuration, by element, with the element naming their destination.
KINDS = {
    "TopicConfiguration": "Topic",
    "QueueConfiguration": "Queue",
    "CloudFunctionConfiguration": "CloudFunction",
}
# "The document is limited to 64 KB" is not written for notifications; AWS's other bucket
# configuration documents are (CORS, lifecycle), and no real one comes near.
MAX_NOTIFICATION_XML = 64 * 1024
MAX_FILTER_VALUE = 1024  # bytes of UTF-8 (AWS: "Size of filter rule value cannot exceed 1024")
MAX_CONFIGURATIONS = 100
SETTING = "notification"

_OVERLAP = (
    "Configurations overlap. Configurations on the same bucket cannot share a common event type."
)


@dataclass(frozen=True)
class Target:
    """One Topic-, Queue- or CloudFunctionConfiguration: its Id, destination ARN, events
    (as configured, wildcards kept) and key filter."""

    kind: str  # TopicConfiguration, QueueConfiguration or CloudFunctionConfiguration
    id: str
    arn: str
    events: tuple[str, ...]
    prefix: str | None = None
    suffix: str | None = None

    def fires(self, event: str, key: str) -> bool:
        return events.fires(self.events, event) and events.key_matches(
            key, self.prefix, self.suffix
        )


@dataclass(frozen=True)
class Configuration:
    targets: tuple[Target, ...] = ()

    def matching(self, event: str, key: str) -> tuple[Target, ...]:
        """The configurations that `event` (`s3:ObjectCreated:Put`) on `key` fires, in the
        document's order: each makes one record, for its own destination."""
        return tuple(t for t in self.targets if t.fires(event, key))


EMPTY = Configuration()


def _malformed() -> S3Error:
    return S3Error("MalformedXML")


def _invalid(message: str) -> S3Error:
    return S3Error("InvalidArgument", message)


def _filter(el: Element) -> tuple[str | None, str | None]:
    rules: dict[str, str] = {}
    for part in el:
        if part.tag != "S3Key":
            raise _malformed()
        for rule in part:
            if rule.tag != "FilterRule":
                raise _malformed()
            name = (xml.child_text(rule, "Name") or "").lower()
            value = xml.child_text(rule, "Value")
            if name not in ("prefix", "suffix"):
                raise _invalid("filter rule name must be either prefix or suffix")
            if value is None:
                raise _malformed()
            if name in rules:
                raise _invalid(f"Cannot specify more than one {name} rule in a filter.")
            if len(value.encode()) > MAX_FILTER_VALUE:
                raise _invalid(
                    "Size of filter rule value cannot exceed 1024 bytes in UTF-8 representation"
                )
            rules[name] = value
    return rules.get("prefix") or None, rules.get("suffix") or None


def _target(el: Element) -> Target:
    destination = KINDS[el.tag]
    ident, arn, names = None, None, []
    prefix = suffix = None
    for child in el:
        text = (child.text or "").strip()
        if child.tag == "Id":
            ident = text
        elif child.tag == destination:
            arn = text
        elif child.tag == "Event":
            names.append(text)
        elif child.tag == "Filter":
            prefix, suffix = _filter(child)
        else:
            raise _malformed()
    if not arn or not names:
        raise _malformed()
    for name in names:
        if name not in events.CONFIGURABLE:
            raise _invalid("The event is not supported for notifications")
    # AWS gives a configuration without an Id one of its own.
    return Target(
        el.tag, ident or secrets.token_urlsafe(24), arn, tuple(dict.fromkeys(names)), prefix, suffix
    )


def _affixes_overlap(a: str | None, b: str | None, ends: bool) -> bool:
    """Could one key satisfy both rules? Two prefixes can when one starts the other (an absent
    rule starts everything); two suffixes when one ends the other."""
    if not a or not b:
        return True
    return (a.endswith(b) or b.endswith(a)) if ends else (a.startswith(b) or b.startswith(a))


def overlap(a: Target, b: Target) -> bool:
    """AWS's rule: two configurations overlap when they share an event type and one key could
    match both filters ("Examples of valid notification configurations with object key name
    filtering": overlapping prefixes, or a prefix on one and a suffix on the other)."""
    share = set().union(*map(events.expand, a.events)) & set().union(*map(events.expand, b.events))
    return (
        bool(share)
        and _affixes_overlap(a.prefix, b.prefix, ends=False)
        and _affixes_overlap(a.suffix, b.suffix, ends=True)
    )


def parse(body: bytes) -> Configuration:
    """The document a PUT sends, checked whole (nothing of a refused one is kept)."""
    root = xml.parse(body)
    if root.tag != "NotificationConfiguration":
        raise _malformed()
    targets = []
    for el in root:
        if el.tag == "EventBridgeConfiguration":
            raise S3Error(
                "NotImplemented", "EventBridge destinations are not available on this gateway"
            )
        if el.tag not in KINDS:
            raise _malformed()
        targets.append(_target(el))
    if len(targets) > MAX_CONFIGURATIONS:
        raise _invalid(f"A notification configuration holds at most {MAX_CONFIGURATIONS}")
    for i, a in enumerate(targets):
        for b in targets[i + 1 :]:
            if overlap(a, b):
                raise _invalid(_OVERLAP)
    return Configuration(tuple(targets))


def render(config: Configuration) -> bytes:
    """GetBucketNotificationConfiguration's answer (and the form the bucket setting keeps); an
    empty configuration is AWS's empty element."""
    return xml.render(
        "NotificationConfiguration",
        [(t.kind, list(_target_nodes(t))) for t in config.targets],
    )


def _target_nodes(t: Target) -> Iterable[xml.Node]:
    yield ("Id", t.id)
    yield (KINDS[t.kind], t.arn)
    yield from (("Event", name) for name in t.events)
    rules = [("Prefix", t.prefix), ("Suffix", t.suffix)]
    kept = [("FilterRule", [("Name", n), ("Value", v)]) for n, v in rules if v is not None]
    if kept:
        yield ("Filter", [("S3Key", kept)])


@functools.lru_cache(maxsize=1024)
def stored(document: str | None) -> Configuration:
    """A bucket's kept document as a configuration, parsed once per distinct text: every write
    into the bucket will ask it which configurations fire."""
    return EMPTY if document is None else parse(document.encode())


def destinations(document: str, event: str, key: str) -> tuple[tuple[str, str], ...]:
    """The (configuration id, destination ARN) pairs a bucket's kept document fires for `event`
    on `key`: what the Store records in the outbox with the change (store/outbox.py)."""
    return tuple((t.id, t.arn) for t in stored(document).matching(event, key))
