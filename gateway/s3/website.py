"""Website configurations: the `<WebsiteConfiguration>` document checked as AWS checks it
(API_PutBucketWebsite.html, API_RoutingRule.html, API_Redirect.html; the messages are those
LocalStack's tests recorded against AWS), rendered for GetBucketWebsite, and the routing rules'
matching and redirect targets that the website endpoint applies (gateway/website/).

A bucket keeps the document rendered from what was parsed (Store settings, "website"), so
that GetBucketWebsite answers the elements AWS knows, in its order.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote
from xml.etree.ElementTree import Element

from . import xml
from .errors import S3Error, invalid_argument

SETTING = "website"
# "You can have up to 50 routing rules" (website-hosting-custom-domain-walkthrough, and the
# RoutingRules element's description in API_PutBucketWebsite).
MAX_ROUTING_RULES = 50
MAX_WEBSITE_ELEMENTS = 16 + 12 * MAX_ROUTING_RULES
PROTOCOLS = ("http", "https")
_BAD_PROTOCOL = (
    "Invalid protocol, protocol can be http or https. If not defined the protocol will be "
    "selected automatically."
)


@dataclass(frozen=True)
class Redirect:
    """Where a routing rule (or RedirectAllRequestsTo, host and protocol only) sends a request;
    an absent part keeps the request's own."""

    host_name: str | None = None
    protocol: str | None = None
    replace_key_prefix_with: str | None = None
    replace_key_with: str | None = None
    http_redirect_code: str | None = None


@dataclass(frozen=True)
class RoutingRule:
    redirect: Redirect
    key_prefix_equals: str | None = None
    http_error_code_returned_equals: str | None = None

    def matches(self, key: str, error_status: int | None) -> bool:
        """Before the lookup (`error_status` None) a rule without an error-code condition whose
        prefix the key has; after an error, a rule naming that status (and the key's prefix,
        when it names one too)."""
        if self.key_prefix_equals is not None and not key.startswith(self.key_prefix_equals):
            return False
        if error_status is None:
            return self.http_error_code_returned_equals is None
        return self.http_error_code_returned_equals == str(error_status)


@dataclass(frozen=True)
class WebsiteConfiguration:
    index_suffix: str | None = None
    error_key: str | None = None
    redirect_all: Redirect | None = None
    routing_rules: tuple[RoutingRule, ...] = ()

    def rule_for(self, key: str, error_status: int | None = None) -> RoutingRule | None:
        """The first routing rule that applies (AWS applies them in order, the first wins)."""
        return next((r for r in self.routing_rules if r.matches(key, error_status)), None)


def location(rule: RoutingRule, key: str, host: str, scheme: str) -> tuple[int, str]:
    """A routing rule's answer to a request for `key`: its status (301 unless the rule says)
    and its Location, absolute, with the request's host and scheme where the rule names none.
    ReplaceKeyPrefixWith replaces the KeyPrefixEquals part of the key (all of an empty one)."""
    redirect = rule.redirect
    if redirect.replace_key_with is not None:
        key = redirect.replace_key_with
    elif redirect.replace_key_prefix_with is not None:
        prefix = rule.key_prefix_equals or ""
        key = redirect.replace_key_prefix_with + key[len(prefix) :]
    status = int(redirect.http_redirect_code or 301)
    return status, redirect_all_location(redirect, "/" + key, host, scheme)


def redirect_all_location(redirect: Redirect, path: str, host: str, scheme: str) -> str:
    """`path` (a key with its leading slash, unencoded) at the redirect's host and protocol."""
    encoded = quote(path, safe="/!$&'()*+,;=:@~")
    return f"{redirect.protocol or scheme}://{redirect.host_name or host}{encoded}"


# --- parsing and checking ---------------------------------------------------------------------


def parse_configuration(body: bytes) -> WebsiteConfiguration:
    root = xml.parse(body, MAX_WEBSITE_ELEMENTS)
    if root.tag != "WebsiteConfiguration":
        raise S3Error("MalformedXML")
    present = {child.tag for child in root}
    if not present <= {"IndexDocument", "ErrorDocument", "RedirectAllRequestsTo", "RoutingRules"}:
        raise S3Error("MalformedXML")
    for tag in present:
        if len(root.findall(tag)) > 1:
            raise S3Error("MalformedXML")
    everything = root.find("RedirectAllRequestsTo")
    if everything is not None:
        if len(present) > 1:
            raise invalid_argument(
                "RedirectAllRequestsTo cannot be provided in conjunction with other Routing Rules.",
                "RedirectAllRequestsTo",
                "not null",
            )
        host = xml.child_text(everything, "HostName")
        if not host:
            raise S3Error("MalformedXML")
        return WebsiteConfiguration(
            redirect_all=Redirect(host_name=host, protocol=_protocol(everything))
        )
    index = root.find("IndexDocument")
    if index is None:
        raise invalid_argument(
            "A value for IndexDocument Suffix must be provided if RedirectAllRequestsTo is empty",
            "IndexDocument",
            "null",
        )
    suffix = xml.child_text(index, "Suffix")
    if not suffix or "/" in suffix:
        raise invalid_argument(
            "The IndexDocument Suffix is not well formed", "IndexDocument", suffix or None
        )
    error_key = None
    error = root.find("ErrorDocument")
    if error is not None:
        error_key = xml.child_text(error, "Key")
        if not error_key:
            raise S3Error("MalformedXML")
    rules: tuple[RoutingRule, ...] = ()
    routing = root.find("RoutingRules")
    if routing is not None:
        elements = list(routing)
        if not elements or len(elements) > MAX_ROUTING_RULES:
            raise S3Error("MalformedXML")
        rules = tuple(_routing_rule(el) for el in elements)
    return WebsiteConfiguration(suffix, error_key, None, rules)


def _protocol(el: Element) -> str | None:
    protocol = xml.child_text(el, "Protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        raise S3Error("InvalidRequest", _BAD_PROTOCOL)
    return protocol


def _routing_rule(el: Element) -> RoutingRule:
    if el.tag != "RoutingRule":
        raise S3Error("MalformedXML")
    target = el.find("Redirect")
    if target is None:
        raise S3Error("MalformedXML")
    prefix = code = None
    condition = el.find("Condition")
    if condition is not None:
        prefix = xml.child_text(condition, "KeyPrefixEquals")
        code = xml.child_text(condition, "HttpErrorCodeReturnedEquals")
        if prefix is None and code is None:
            raise S3Error(
                "InvalidRequest",
                "Condition cannot be empty. To redirect all requests without a condition, the "
                "condition element shouldn't be present.",
            )
        if code is not None and not (code.isdigit() and len(code) == 3 and code[0] in "45"):
            raise S3Error(
                "InvalidRequest",
                f"The provided HTTP error code ({code}) is not valid. Valid codes are 4XX or 5XX.",
            )
    replace_prefix = xml.child_text(target, "ReplaceKeyPrefixWith")
    replace_key = xml.child_text(target, "ReplaceKeyWith")
    if replace_prefix is not None and replace_key is not None:
        raise S3Error(
            "InvalidRequest", "You can only define ReplaceKeyPrefix or ReplaceKey but not both."
        )
    redirect_code = xml.child_text(target, "HttpRedirectCode")
    if redirect_code is not None and not (
        redirect_code.isdigit()
        and len(redirect_code) == 3
        and redirect_code[0] == "3"
        and redirect_code != "300"
    ):
        raise S3Error(
            "InvalidRequest",
            f"The provided HTTP redirect code ({redirect_code}) is not valid. Valid codes are "
            "3XX except 300.",
        )
    redirect = Redirect(
        host_name=xml.child_text(target, "HostName") or None,
        protocol=_protocol(target),
        replace_key_prefix_with=replace_prefix,
        replace_key_with=replace_key,
        http_redirect_code=redirect_code,
    )
    return RoutingRule(redirect, prefix, code)


# --- rendering --------------------------------------------------------------------------------


def _redirect_nodes(redirect: Redirect) -> list[xml.Node]:
    return [
        ("HostName", redirect.host_name),
        ("HttpRedirectCode", redirect.http_redirect_code),
        ("Protocol", redirect.protocol),
        ("ReplaceKeyPrefixWith", redirect.replace_key_prefix_with),
        ("ReplaceKeyWith", redirect.replace_key_with),
    ]


def _rule_nodes(rule: RoutingRule) -> Iterable[xml.Node]:
    if rule.key_prefix_equals is not None or rule.http_error_code_returned_equals is not None:
        yield (
            "Condition",
            [
                ("HttpErrorCodeReturnedEquals", rule.http_error_code_returned_equals),
                ("KeyPrefixEquals", rule.key_prefix_equals),
            ],
        )
    yield "Redirect", _redirect_nodes(rule.redirect)


def render_configuration(config: WebsiteConfiguration) -> bytes:
    """The document GetBucketWebsite answers (and the form the bucket setting stores)."""
    nodes: list[xml.Node] = []
    if config.redirect_all is not None:
        everything = config.redirect_all
        nodes.append(
            (
                "RedirectAllRequestsTo",
                [("HostName", everything.host_name), ("Protocol", everything.protocol)],
            )
        )
    if config.index_suffix is not None:
        nodes.append(("IndexDocument", [("Suffix", config.index_suffix)]))
    if config.error_key is not None:
        nodes.append(("ErrorDocument", [("Key", config.error_key)]))
    if config.routing_rules:
        nodes.append(
            ("RoutingRules", [("RoutingRule", list(_rule_nodes(r))) for r in config.routing_rules])
        )
    return xml.render("WebsiteConfiguration", nodes)


@functools.lru_cache(maxsize=256)
def configuration_of(stored: str) -> WebsiteConfiguration:
    """A bucket's stored document, parsed once per distinct document."""
    return parse_configuration(stored.encode())
