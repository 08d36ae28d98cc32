"""Topics: the destinations an account makes at runtime through the SNS-compatible API (sns.py),
as Ceph RGW has them (its attributes `push-endpoint`, `OpaqueData`, `persistent`, `verify-ssl`,
`cloudevents`), named `arn:aws:sns:REGION:ACCOUNT:NAME`.

A configuration's QueueConfiguration (`arn:aws:sqs:REGION:ACCOUNT:NAME`) and
CloudFunctionConfiguration (`arn:aws:lambda:REGION:ACCOUNT:function:NAME`) name a topic of the
same registry: ACCOUNT's topic NAME, whatever the ARN's service (docs/notifications.md). A
bucket's events go to its owner's own topics, or to another account's topic whose `Policy`
allows sns:Publish to the bucket's account (`Topic.publishes`, judged by
authorize.decide_topic_publish when a configuration is put and again at each delivery).

The push-endpoint is kept sealed (it may carry a password or a token) and is never shown whole:
GetTopicAttributes shows its scheme, host and port only."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from ..s3 import authorize, policy
from ..s3.errors import S3Error
from ..users import account_number
from . import targets

# Attributes a topic keeps and shows as they were given (Ceph's; meaningful to its senders).
KEPT = frozenset(
    {
        "OpaqueData",
        "persistent",
        "cloudevents",
        "amqp-exchange",
        "amqp-ack-level",
        "redis-type",
        "kafka-ack-level",
        "use-ssl",
        "ca-location",
        "mechanism",
        "max_retries",
        "retry_sleep_duration",
        "time_to_live",
        "Policy",
    }
)
ATTRIBUTES = KEPT | {"push-endpoint", "verify-ssl"}
# Attributes whose values a sender reads: anything else is refused at CreateTopic.
CHOICES = {
    "amqp-ack-level": ("none", "broker", "routable"),  # Ceph's (to_amqp.py)
    "redis-type": ("list", "stream"),  # to_redis.py
}
_NAME = re.compile(r"[A-Za-z0-9_-]{1,256}")
MAX_POLICY_BYTES = 30 * 1024  # a topic's Policy (SNS's attribute limit is larger than S3's 20 KB)
_TRUE = ("true", "1", "yes")


class TopicError(Exception):
    """An SNS error: its code, message and HTTP status (InvalidParameter, NotFound, ...)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def valid_name(name: str) -> bool:
    """SNS's rule: 1 to 256 of letters, digits, `-` and `_`."""
    return _NAME.fullmatch(name) is not None


def arn(region: str, account: str, name: str) -> str:
    return f"arn:aws:sns:{region}:{account}:{name}"


@dataclass(frozen=True)
class Named:
    """What a destination ARN names: the topic NAME of ACCOUNT in REGION."""

    service: str
    region: str
    account: str
    name: str


def parse_arn(text: str) -> Named | None:
    """`arn:aws:sns:R:A:N`, `arn:aws:sqs:R:A:N` or `arn:aws:lambda:R:A:function:N` (None:
    none of these)."""
    parts = text.split(":")
    if len(parts) < 6 or parts[0] != "arn" or not parts[1].startswith("aws"):
        return None
    # The account by its number (one written with the canonical id, as before numbers, too).
    service, region, account = parts[2], parts[3], account_number(parts[4])
    rest = parts[5:]
    if service == "lambda" and len(rest) >= 2 and rest[0] == "function":
        rest = [rest[1]]  # a qualifier (:alias or :version) is not part of the name
    if service not in ("sns", "sqs", "lambda") or len(rest) != 1 or not valid_name(rest[0]):
        return None
    return Named(service, region, account, rest[0])


def registry_account(named: Named, owner: str, accounts: Mapping[str, str]) -> str | None:
    """Whose registry holds the topic `named` names, by canonical id: the bucket owner's
    (`owner`) or another account of the gateway's (`accounts`: canonical ids by account
    number); None when no account has that number."""
    if named.account == account_number(owner):
        return owner
    return accounts.get(named.account)


def check_policy(text: str) -> None:
    """A `Policy` attribute SNS would keep: empty (no policy), or an access policy document
    (a Principal in each statement, SNS's actions); else InvalidParameter, as SNS answers."""
    if not text.strip():
        return
    try:
        policy.parse(text, kind=policy.Kind.TOPIC, max_bytes=MAX_POLICY_BYTES)
    except S3Error as exc:
        raise TopicError(
            "InvalidParameter", f"Invalid parameter: Policy Error: {exc.message}"
        ) from None


def check_endpoint(endpoint: str, secure: bool) -> None:
    """A push-endpoint this gateway can deliver to; a password in it only over HTTPS (Ceph's
    rule: it would otherwise cross the network in the clear)."""
    if not endpoint:
        return  # a topic without an endpoint: kept, delivers nowhere (Ceph's pull mode)
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        raise TopicError("InvalidParameter", "Invalid parameter: push-endpoint") from None
    if parts.scheme not in targets.TARGETS:
        raise TopicError(
            "InvalidParameter",
            f"Invalid parameter: push-endpoint: the scheme {parts.scheme or '(none)'!r} is not "
            f"served (only {', '.join(targets.TARGETS)})",
        )
    if (missing := targets.missing_extra(parts.scheme)) is not None:
        raise TopicError("InvalidParameter", f"Invalid parameter: push-endpoint: {missing}")
    if not parts.hostname:
        raise TopicError("InvalidParameter", "Invalid parameter: push-endpoint has no host")
    del port
    if parts.password is not None and not secure:
        raise TopicError(
            "InvalidParameter",
            "Invalid parameter: push-endpoint: a password is accepted over HTTPS only",
        )


def shown_endpoint(endpoint: str) -> str:
    """What GetTopicAttributes shows of an endpoint: scheme, host and port (its user,
    password, path and query may be secrets and stay sealed)."""
    if not endpoint:
        return ""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


@dataclass(frozen=True)
class Topic:
    account: str
    name: str
    region: str
    endpoint: str = ""  # the push-endpoint, open: in memory only, never logged
    verify_ssl: bool = True
    attributes: Mapping[str, str] = field(default_factory=dict)  # KEPT ones

    @property
    def arn(self) -> str:
        return arn(self.region, account_number(self.account), self.name)

    def __repr__(self) -> str:  # never the endpoint, in a log or a traceback
        return f"Topic({self.arn})"

    def with_attribute(self, name: str, value: str) -> Topic:
        if name == "push-endpoint":
            return replace(self, endpoint=value)
        if name == "verify-ssl":
            return replace(self, verify_ssl=value.strip().lower() in _TRUE)
        if name not in KEPT:
            raise TopicError("InvalidParameter", f"Invalid parameter: AttributeName: {name}")
        if name in CHOICES and value not in CHOICES[name]:
            raise TopicError(
                "InvalidParameter",
                f"Invalid parameter: {name}: one of {', '.join(CHOICES[name])}",
            )
        if name == "Policy":
            check_policy(value)
        return replace(self, attributes={**self.attributes, name: value})

    def publishes(self, bucket: str, bucket_owner: str) -> bool:
        """May `bucket` (of `bucket_owner`, a canonical id) publish its events here: the
        owner's own topic, or one whose Policy allows it (authorize.decide_topic_publish)."""
        return authorize.decide_topic_publish(
            self.arn, self.attributes.get("Policy"), bucket, bucket_owner
        )

    def shown(self) -> dict[str, str]:
        """GetTopicAttributes' map."""
        return {
            "TopicArn": self.arn,
            "Name": self.name,
            "Owner": account_number(self.account),
            "push-endpoint": shown_endpoint(self.endpoint),
            "verify-ssl": "true" if self.verify_ssl else "false",
            **self.attributes,
        }

    def to_doc(self, seal: Callable[[bytes], str]) -> str:
        return json.dumps(
            {
                "endpoint": seal(self.endpoint.encode()) if self.endpoint else "",
                "verify_ssl": self.verify_ssl,
                "attributes": dict(self.attributes),
            }
        )

    @classmethod
    def from_doc(
        cls, account: str, name: str, region: str, doc: str, open_: Callable[[str], bytes]
    ) -> Topic:
        found = json.loads(doc)
        sealed = found.get("endpoint") or ""
        return cls(
            account,
            name,
            region,
            open_(sealed).decode() if sealed else "",
            bool(found.get("verify_ssl", True)),
            dict(found.get("attributes") or {}),
        )
