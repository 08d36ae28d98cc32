"""The values of a request's policy condition keys (aws:SourceIp, s3:prefix, ...), read only
when a policy statement asks for one (list_amazons3.html, "Condition keys for Amazon S3";
reference_policies_condition-keys.html for the global aws:* keys)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from aiohttp import web

from ..store import ObjectAttrs
from . import tagging
from .auth import AuthResult
from .authorize import is_anonymous

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


def lookup(
    request: web.Request, auth: AuthResult, obj: ObjectAttrs | None
) -> Callable[[str], list[str] | None]:
    """The request's condition values by lower-case key; None for a key it has no value for."""

    def value(key: str) -> list[str] | None:
        # Exactly the value the operation reads: a repeated header arrives joined into one
        # (middleware.join_repeated_headers), and of a repeated query parameter the first
        # counts, here as in every operation (aiohttp's MultiDict.get; S3 answers with the
        # first too). Taking every value would let a condition hold on one occurrence while
        # the operation used another.
        if key in _HEADER_KEYS:
            found = request.headers.get(_HEADER_KEYS[key])
            return None if found is None else [found]
        if key in _QUERY_KEYS:
            found = request.query.get(_QUERY_KEYS[key])
            return None if found is None else [found]
        signed = not is_anonymous(auth.user)
        if key == "aws:sourceip":
            return [request.remote] if request.remote else None
        if key == "aws:securetransport":
            return ["true" if request.secure else "false"]
        if key == "aws:currenttime":
            return [dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")]
        if key == "aws:epochtime":
            return [str(int(time.time()))]
        if key in ("aws:principalarn", "aws:principalaccount", "aws:userid", "aws:username"):
            if not signed:
                return None
            user = auth.user
            return [
                {
                    "aws:principalarn": f"arn:aws:iam::{user.canonical_id}:root",
                    "aws:principalaccount": user.canonical_id,
                    "aws:userid": user.canonical_id,
                    "aws:username": user.display_name,
                }[key]
            ]
        if key == "aws:principaltype":
            return ["Account" if signed else "Anonymous"]
        if key == "s3:signatureversion":
            if not signed:
                return None
            return ["AWS4-HMAC-SHA256" if auth.scope else "AWS"]
        if key == "s3:authtype":
            if not signed:
                return None
            return ["REST-HEADER" if "authorization" in request.headers else "REST-QUERY-STRING"]
        if key.startswith("s3:existingobjecttag/"):
            tags = dict(obj.tags) if obj is not None else {}
            wanted = key.partition("/")[2]
            # Tag keys are case-sensitive; policy keys arrive lower-cased.
            found = [v for k, v in tags.items() if k.lower() == wanted]
            return found or None
        if key.startswith("s3:requestobjecttag/") or key == "s3:requestobjecttagkeys":
            raw = request.headers.get("x-amz-tagging")
            if raw is None:
                return None
            # The operation's own parsing (its errors too), not a second one of our own.
            pairs = tagging.from_header(raw)
            if key == "s3:requestobjecttagkeys":
                return [k for k, _ in pairs]
            wanted = key.partition("/")[2]
            return [v for k, v in pairs if k.lower() == wanted] or None
        return None

    return value
