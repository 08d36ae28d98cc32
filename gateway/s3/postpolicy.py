"""A POST form's policy document: parsed, and the form judged against it (pure).

The grammar is AWS's (sigv4-HTTPPOSTConstructPolicy.html, HTTPPOSTForms): `{"expiration":
ISO 8601, "conditions": [...]}`, a condition being `{"field": "value"}` (exact),
`["eq", "$field", "value"]`, `["starts-with", "$field", "prefix"]` or
`["content-length-range", min, max]`. Field names compare without case, values with it. Every
field of the form needs a condition, but for the signature itself, the file, the policy and
names beginning with `x-ignore-`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import S3Error

# Fields no condition needs to name (sigv4-HTTPPOSTConstructPolicy.html; HTTPPOSTForms for
# SigV2's AWSAccessKeyId and signature).
EXEMPT = frozenset({"x-amz-signature", "awsaccesskeyid", "signature", "file", "policy"})
EXEMPT_PREFIX = "x-ignore-"
_EXPIRATION = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z")


def invalid_policy(detail: str) -> S3Error:
    return S3Error("InvalidPolicyDocument", f"Invalid Policy: {detail}")


def denied(detail: str) -> S3Error:
    return S3Error("AccessDenied", f"Invalid according to Policy: {detail}")


@dataclass(frozen=True)
class Condition:
    op: str  # "eq" or "starts-with"
    field: str  # lowercase, without the "$"
    value: str
    shown: str  # as AWS echoes a failed condition: the condition as JSON

    def holds(self, actual: str | None) -> bool:
        if actual is None:
            return False
        return actual == self.value if self.op == "eq" else actual.startswith(self.value)


@dataclass(frozen=True)
class Policy:
    expiration: dt.datetime
    conditions: tuple[Condition, ...]
    length_range: tuple[int, int] | None = None  # content-length-range, bytes


def decode(policy_b64: str) -> Policy:
    """The policy field (base64 JSON) as a Policy; InvalidPolicyDocument if it is not one."""
    try:
        raw = base64.b64decode(policy_b64.encode(), validate=True)
        document = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeError) as exc:
        raise invalid_policy("Invalid JSON.") from exc
    if not isinstance(document, dict):
        raise invalid_policy("Invalid JSON.")
    # The keys are case-sensitive (s3-tests: "CONDITIONS" is refused).
    if "expiration" not in document:
        raise invalid_policy("Policy missing expiration.")
    if "conditions" not in document:
        raise invalid_policy("Policy missing conditions.")
    expiration = _expiration(document["expiration"])
    raw_conditions = document["conditions"]
    if not isinstance(raw_conditions, list):
        raise invalid_policy("Invalid conditions.")
    conditions: list[Condition] = []
    length_range = None
    for item in raw_conditions:
        if isinstance(item, dict):
            if len(item) != 1:
                raise invalid_policy(
                    "Invalid Simple-Condition: Simple-Conditions must have exactly one "
                    "property specified."
                )
            ((name, value),) = item.items()
            if not isinstance(value, str):
                raise invalid_policy(f"Invalid Simple-Condition: value of {name} must be a string.")
            shown = json.dumps(["eq", f"${name}", value])
            conditions.append(Condition("eq", name.lower(), value, shown))
        elif isinstance(item, list) and item and isinstance(item[0], str):
            op = item[0].lower()
            if op == "content-length-range":
                length_range = _length_range(item)
            elif op in ("eq", "starts-with"):
                if len(item) != 3 or not all(isinstance(x, str) for x in item):
                    raise invalid_policy(f"Invalid Condition: wrong format for {item[0]}.")
                name = item[1]
                if not name.startswith("$"):
                    # AWS: a field named without its `$` fails as a condition.
                    conditions.append(Condition(op, "\0", item[2], json.dumps(item)))
                    continue
                conditions.append(Condition(op, name[1:].lower(), item[2], json.dumps(item)))
            else:
                raise invalid_policy(f"Invalid Condition: unknown operation {item[0]}.")
        else:
            raise invalid_policy("Invalid Condition.")
    return Policy(expiration, tuple(conditions), length_range)


def _expiration(value: object) -> dt.datetime:
    # ISO 8601 in UTC as AWS writes it, "2007-12-01T12:00:00.000Z" (s3-tests refuses Python's
    # str() of a datetime, which fromisoformat alone would take).
    if isinstance(value, str) and _EXPIRATION.fullmatch(value):
        try:
            return dt.datetime.fromisoformat(value[:-1]).replace(tzinfo=dt.UTC)
        except ValueError:
            pass
    raise invalid_policy(f"Invalid 'expiration' value: '{value}'")


def _length_range(item: list[object]) -> tuple[int, int]:
    if len(item) != 3:
        raise invalid_policy("Invalid Condition: wrong format for content-length-range.")

    def bound(x: object) -> int:
        # Integers, or their decimal strings; anything else fails as a condition (403).
        if isinstance(x, bool):
            raise denied(f"Policy Condition failed: {json.dumps(item)}")
        if isinstance(x, int):
            return x
        if isinstance(x, str) and x.strip().lstrip("-").isdigit():
            return int(x)
        raise denied(f"Policy Condition failed: {json.dumps(item)}")

    low, high = bound(item[1]), bound(item[2])
    if low < 0 or high < low:
        raise invalid_policy("Invalid Condition: content-length-range must be 0 <= min <= max.")
    return low, high


def check(policy: Policy, fields: Mapping[str, str], bucket: str, now: dt.datetime) -> None:
    """Is the form (lowercase field names, the key with ${filename} expanded) sent to `bucket`
    within the policy? AccessDenied with AWS's reason if not. The file's size is judged as it
    streams (`length_range`)."""
    if now >= policy.expiration:
        raise denied("Policy expired.")
    for condition in policy.conditions:
        # `bucket` is the bucket posted to, whatever a field of that name says.
        actual = bucket if condition.field == "bucket" else fields.get(condition.field)
        if not condition.holds(actual):
            raise denied(f"Policy Condition failed: {condition.shown}")
    covered = {c.field for c in policy.conditions}
    extra = [
        name
        for name in fields
        if name not in covered and name not in EXEMPT and not name.startswith(EXEMPT_PREFIX)
    ]
    if extra:
        raise denied(f"Extra input fields: {', '.join(extra)}")
