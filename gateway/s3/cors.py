"""CORS: a bucket's rules (PutBucketCors's document, validated as AWS does) and which rule a
browser's request matches. Pure: no request, no store.

AWS's rules (PutBucketCors in the API reference; userguide/cors.html): a configuration holds 1
to 100 rules; S3 "uses the first CORSRule rule that matches": the Origin matches an
AllowedOrigin, the method (or a preflight's Access-Control-Request-Method) is an
AllowedMethod, and every header of Access-Control-Request-Headers matches an AllowedHeader.
An origin or header pattern holds at most one `*`, which stands for any run of characters,
the empty one included (s3-tests matches `startend` against `start*end`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from . import xml
from .errors import S3Error

# The name of the bucket setting that holds the configuration (as GetBucketCors answers it).
SETTING = "cors"
METHODS = ("GET", "PUT", "POST", "DELETE", "HEAD")
MAX_RULES = 100
MAX_ID = 255
# Every answer a rule shapes varies with these request headers (AWS sends exactly this).
VARY = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"
_RULE_ELEMENTS = {
    "ID",
    "AllowedMethod",
    "AllowedOrigin",
    "AllowedHeader",
    "ExposeHeader",
    "MaxAgeSeconds",
}


@dataclass(frozen=True)
class Pattern:
    """An AllowedOrigin or AllowedHeader: exact, or `prefix*suffix`."""

    prefix: str
    suffix: str | None = None  # None: no wildcard, the text must equal prefix

    @classmethod
    def of(cls, text: str) -> Pattern:
        prefix, star, suffix = text.partition("*")
        return cls(prefix, suffix if star else None)

    def matches(self, text: str) -> bool:
        if self.suffix is None:
            return text == self.prefix
        return (
            len(text) >= len(self.prefix) + len(self.suffix)
            and text.startswith(self.prefix)
            and text.endswith(self.suffix)
        )


@dataclass(frozen=True)
class CorsRule:
    origins: tuple[str, ...]
    methods: tuple[str, ...]
    headers: tuple[str, ...] = ()
    expose: tuple[str, ...] = ()
    max_age: int | None = None
    id: str | None = None

    @functools.cached_property
    def _origin_patterns(self) -> tuple[Pattern, ...]:
        return tuple(Pattern.of(o) for o in self.origins)

    @functools.cached_property
    def _header_patterns(self) -> tuple[Pattern, ...]:
        # Header names compare without case (the recorded AWS answers match
        # x-AMZ-server-SIDE-encryption against x-amz-server-side-encryption).
        return tuple(Pattern.of(h.lower()) for h in self.headers)

    @property
    def any_origin(self) -> bool:
        return "*" in self.origins

    def allows(self, origin: str, method: str, requested: Iterable[str] = ()) -> bool:
        if method not in self.methods:
            return False
        if not any(p.matches(origin) for p in self._origin_patterns):
            return False
        return all(any(p.matches(h) for p in self._header_patterns) for h in requested)


def requested_headers(value: str | None) -> list[str]:
    """Access-Control-Request-Headers as lowercase names (browsers send them comma-joined)."""
    if not value:
        return []
    return [name.strip().lower() for name in value.split(",") if name.strip()]


def match(
    rules: Iterable[CorsRule], origin: str, method: str, requested: Iterable[str] = ()
) -> CorsRule | None:
    """The first rule that allows the request, or None."""
    wanted = tuple(requested)
    for rule in rules:
        if rule.allows(origin, method, wanted):
            return rule
    return None


def answer_headers(rule: CorsRule, origin: str, requested: list[str]) -> dict[str, str]:
    """The headers a matched rule puts on a preflight's 200 and on the actual answer. With an
    origin of `*` AWS answers `*` and no Allow-Credentials; otherwise it echoes the Origin and
    allows credentials (test_s3_cors recordings of AWS)."""
    headers = {
        "Access-Control-Allow-Origin": "*" if rule.any_origin else origin,
        "Access-Control-Allow-Methods": ", ".join(rule.methods),
        "Vary": VARY,
    }
    if not rule.any_origin:
        headers["Access-Control-Allow-Credentials"] = "true"
    if requested:
        headers["Access-Control-Allow-Headers"] = ", ".join(requested)
    if rule.expose:
        headers["Access-Control-Expose-Headers"] = ", ".join(rule.expose)
    if rule.max_age is not None:
        headers["Access-Control-Max-Age"] = str(rule.max_age)
    return headers


# --- the configuration document --------------------------------------------------------------


def parse_configuration(body: bytes) -> tuple[CorsRule, ...]:
    """A PutBucketCors body as rules; AWS's errors for what it refuses."""
    root = xml.parse(body)
    if root.tag != "CORSConfiguration" or any(el.tag != "CORSRule" for el in root):
        raise S3Error("MalformedXML")
    rules = tuple(_rule(el) for el in root)
    if not 1 <= len(rules) <= MAX_RULES:
        raise S3Error("MalformedXML")
    return rules


def _rule(el: Element) -> CorsRule:
    values: dict[str, list[str]] = {}
    for child in el:
        if child.tag not in _RULE_ELEMENTS or len(child):
            raise S3Error("MalformedXML")
        values.setdefault(child.tag, []).append((child.text or "").strip())
    methods = values.get("AllowedMethod", [])
    origins = values.get("AllowedOrigin", [])
    if not methods or not origins:
        raise S3Error("MalformedXML")
    for method in methods:
        if method not in METHODS:
            raise S3Error(
                "InvalidRequest",
                "Found unsupported HTTP method in CORS config. Unsupported method is " + method,
            )
    for kind in ("AllowedOrigin", "AllowedHeader"):
        for text in values.get(kind, []):
            if text.count("*") > 1:
                raise S3Error(
                    "InvalidRequest", f'{kind} "{text}" can not have more than one wildcard.'
                )
    ids = values.get("ID", [])
    max_ages = values.get("MaxAgeSeconds", [])
    if len(ids) > 1 or len(max_ages) > 1 or any(len(i) > MAX_ID for i in ids):
        raise S3Error("MalformedXML")
    max_age = None
    if max_ages:
        text = max_ages[0]
        if not (text.isascii() and text.lstrip("-").isdigit() and len(text) <= 10):
            raise S3Error("MalformedXML")
        max_age = int(text)
    return CorsRule(
        origins=tuple(origins),
        methods=tuple(methods),
        headers=tuple(values.get("AllowedHeader", [])),
        expose=tuple(values.get("ExposeHeader", [])),
        max_age=max_age,
        id=ids[0] if ids else None,
    )


def render_configuration(rules: Iterable[CorsRule]) -> bytes:
    """The document GetBucketCors answers (and the form the bucket setting stores)."""
    return xml.render(
        "CORSConfiguration",
        [
            (
                "CORSRule",
                [
                    ("ID", rule.id),
                    *(("AllowedHeader", h) for h in rule.headers),
                    *(("AllowedMethod", m) for m in rule.methods),
                    *(("AllowedOrigin", o) for o in rule.origins),
                    *(("ExposeHeader", h) for h in rule.expose),
                    ("MaxAgeSeconds", rule.max_age),
                ],
            )
            for rule in rules
        ],
    )


@functools.lru_cache(maxsize=1024)
def rules_of(stored: str) -> tuple[CorsRule, ...]:
    """A bucket's stored configuration as rules, parsed once per distinct document: every
    request with an Origin reads them, and a bucket's document rarely changes."""
    return parse_configuration(stored.encode())
