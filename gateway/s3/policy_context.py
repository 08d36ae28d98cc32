"""The values of a request's policy condition keys (aws:SourceIp, s3:prefix, ...), read only
when a policy statement asks for one (list_amazons3.html, "Condition keys for Amazon S3";
reference_policies_condition-keys.html for the global aws:* keys)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiohttp import web

from ..store import ObjectAttrs
from ..users import User
from . import tagging
from .auth import AuthResult, is_nobody

# s3:<name> keys that are a request header of the same name.
_HEADER_KEYS = {
    "s3:x-amz-acl": "x-amz-acl",
    "s3:x-amz-grant-read": "x-amz-grant-read",
    "s3:x-amz-grant-write": "x-amz-grant-write",
    "s3:x-amz-grant-read-acp": "x-amz-grant-read-acp",
    "s3:x-amz-grant-write-acp": "x-amz-grant-write-acp",
    "s3:x-amz-grant-full-control": "x-amz-grant-full-control",
    "s3:x-amz-copy-source": "x-amz-copy-source",
    "s3:x-amz-metadata-directive": "x-amz-metadata-directive",
    "s3:x-amz-storage-class": "x-amz-storage-class",
    "s3:x-amz-server-side-encryption": "x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id": "x-amz-server-side-encryption-aws-kms-key-id",
    "s3:x-amz-server-side-encryption-customer-algorithm": (
        "x-amz-server-side-encryption-customer-algorithm"
    ),
    "s3:x-amz-content-sha256": "x-amz-content-sha256",
    "s3:object-lock-mode": "x-amz-object-lock-mode",
    "s3:object-lock-retain-until-date": "x-amz-object-lock-retain-until-date",
    "s3:object-lock-legal-hold": "x-amz-object-lock-legal-hold",
    "s3:x-amz-object-ownership": "x-amz-object-ownership",
    "aws:referer": "referer",
    "aws:useragent": "user-agent",
    "s3:if-match": "if-match",
    "s3:if-none-match": "if-none-match",
}
_QUERY_KEYS = {
    "s3:prefix": "prefix",
    "s3:delimiter": "delimiter",
    "s3:max-keys": "max-keys",
    "s3:versionid": "versionId",
}


@dataclass(frozen=True)
class Caller:
    """What a policy's condition keys are read from: the request as its caller sent it. An
    S3 request fills it from itself (`lookup`); the console from the browser's request and
    the values of the S3 operation it performs (`for_console`), so that a condition judges
    the same address, transport, time and identity whichever door the user came through."""

    user: User
    remote: str | None
    secure: bool
    headers: Mapping[str, str]
    query: Mapping[str, str]
    # "AWS4-HMAC-SHA256" or "AWS" for a signed S3 request; None for anonymous ones and the
    # console's (which no signature authenticates).
    signature_version: str | None = None
    auth_type: str | None = None  # REST-HEADER, REST-QUERY-STRING; None as above
    # The tags a tagging write's body sets (PutObjectTagging); None: see x-amz-tagging.
    tags: tagging.TagSet | None = None


def lookup(
    request: web.BaseRequest,
    auth: AuthResult,
    obj: ObjectAttrs | None,
    tags: tagging.TagSet | None = None,
) -> Callable[[str], list[str] | None]:
    """An S3 request's condition values by lower-case key; None for a key it has no value
    for. `tags`: those its body sets (PutObjectTagging), read before it was decided."""
    signed = not is_nobody(auth.user)
    caller = Caller(
        auth.user,
        request.remote,
        request.secure,
        request.headers,
        request.query,
        signature_version=("AWS4-HMAC-SHA256" if auth.scope else "AWS") if signed else None,
        auth_type=(
            ("REST-HEADER" if "authorization" in request.headers else "REST-QUERY-STRING")
            if signed
            else None
        ),
        tags=tags,
    )
    return values(caller, obj)


# The browser's own headers that a console action carries to its S3 operation: the others
# (x-amz-acl, ...) the console never reads, so no condition may be judged on them.
_CONSOLE_HEADERS = ("user-agent", "referer")


def for_console(
    request: web.BaseRequest, user: User, sent: Mapping[str, str], obj: ObjectAttrs | None
) -> Callable[[str], list[str] | None]:
    """The condition values of a console action: the browser's address, transport and
    agent, the signed-in user, the time, and `sent`, the parameters and headers the S3
    operation the action performs would carry (prefix, delimiter, x-amz-copy-source, ...;
    their names never clash)."""
    headers = {name: request.headers[name] for name in _CONSOLE_HEADERS if name in request.headers}
    return values(Caller(user, request.remote, request.secure, {**headers, **sent}, sent), obj)


PRINCIPAL_KEYS = frozenset(
    ("aws:principalarn", "aws:principalaccount", "aws:userid", "aws:username", "aws:principaltype")
)


def principal_value(user: User, key: str) -> list[str] | None:
    """Who signed, as the global condition keys (and policy variables) name it
    (reference_policies_condition-keys.html): an account's root, an IAM user, or a role's
    session (which has no aws:username)."""
    identity = user.identity
    if identity is None:
        found = {
            "aws:principalarn": f"arn:aws:iam::{user.account}:root",
            "aws:principalaccount": user.account,
            "aws:userid": user.account,
            "aws:username": user.display_name,
            "aws:principaltype": "Account",
        }[key]
        return [found]
    session = ":assumed-role/" in identity.arn
    role = next((a for a in identity.arns if ":role/" in a), identity.arn)
    found = {
        "aws:principalarn": role if session else identity.arn,
        "aws:principalaccount": user.account,
        "aws:userid": identity.user_id,
        "aws:username": None if session else identity.arn.rpartition("/")[2],
        "aws:principaltype": "AssumedRole" if session else "User",
    }[key]
    return None if found is None else [found]


def principal_tag(user: User, key: str) -> list[str] | None:
    """aws:PrincipalTag/<key>: the IAM user's or the session's role's tag of that key (tag
    keys compare without regard to case in this key, as IAM's do)."""
    wanted = key.partition("/")[2]
    identity = user.identity
    tags = identity.tags if identity is not None else ()
    found = [v for k, v in tags if k.lower() == wanted]
    return found or None


def values(caller: Caller, obj: ObjectAttrs | None) -> Callable[[str], list[str] | None]:
    """The condition values of `caller`'s request on `obj` (its attrs, where the bucket's
    policy reads its tags), by lower-case key."""

    def value(key: str) -> list[str] | None:
        # Exactly the value the operation reads: a repeated header arrives joined into one
        # (protocol.join_repeated_headers), and of a repeated query parameter the first
        # counts, here as in every operation (aiohttp's MultiDict.get; S3 answers with the
        # first too). Taking every value would let a condition hold on one occurrence while
        # the operation used another.
        if key in _HEADER_KEYS:
            found = caller.headers.get(_HEADER_KEYS[key])
            return None if found is None else [found]
        if key in _QUERY_KEYS:
            found = caller.query.get(_QUERY_KEYS[key])
            return None if found is None else [found]
        signed = not is_nobody(caller.user)
        if key == "aws:sourceip":
            return [caller.remote] if caller.remote else None
        if key == "aws:securetransport":
            return ["true" if caller.secure else "false"]
        if key == "aws:currenttime":
            return [dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")]
        if key == "aws:epochtime":
            return [str(int(time.time()))]
        if key.startswith("aws:principaltag/"):
            return principal_tag(caller.user, key) if signed else None
        if key in PRINCIPAL_KEYS:
            return (
                principal_value(caller.user, key)
                if signed
                else (["Anonymous"] if key == "aws:principaltype" else None)
            )
        if key == "s3:signatureversion":
            return None if caller.signature_version is None else [caller.signature_version]
        if key == "s3:authtype":
            return None if caller.auth_type is None else [caller.auth_type]
        if key.startswith("s3:existingobjecttag/"):
            tags = dict(obj.tags) if obj is not None else {}
            wanted = key.partition("/")[2]
            # Tag keys are case-sensitive; policy keys arrive lower-cased.
            found = [v for k, v in tags.items() if k.lower() == wanted]
            return found or None
        if key.startswith("s3:requestobjecttag/") or key == "s3:requestobjecttagkeys":
            pairs = caller.tags
            if pairs is None:
                raw = caller.headers.get("x-amz-tagging")
                if raw is None:
                    return None
                # The operation's own parsing (its errors too), not a second one of ours.
                pairs = tagging.from_header(raw)
            if key == "s3:requestobjecttagkeys":
                return [k for k, _ in pairs]
            wanted = key.partition("/")[2]
            return [v for k, v in pairs if k.lower() == wanted] or None
        return None

    return value
