"""AWS Signature Version 2 (https://docs.aws.amazon.com/AmazonS3/latest/userguide/RESTAuthentication.html).

Deprecated by AWS but still produced by clients people use: aws-cli v1's `aws s3 presign` and
boto3's `generate_presigned_url` with default settings make V2 URLs. The signature is
base64(HMAC-SHA1(secret, StringToSign)) over the method, three standard headers, the x-amz-*
headers and the resource (the path as sent plus the sub-resources that select what it is).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import unquote_plus

# Query parameters that are part of the signed resource (the sub-resources and the response
# header overrides); every other parameter is not signed.
SUBRESOURCES = frozenset(
    {
        "accelerate", "acl", "analytics", "cors", "delete", "inventory", "lifecycle",
        "location", "logging", "metrics", "notification", "object-lock", "partNumber",
        "policy", "replication", "requestPayment", "response-cache-control",
        "response-content-disposition", "response-content-encoding",
        "response-content-language", "response-content-type", "response-expires",
        "restore", "select", "select-type", "tagging", "torrent", "uploadId", "uploads",
        "versionId", "versioning", "versions", "website",
    }
)  # fmt: skip


def canonical_resource(raw_path: str, params: list[tuple[str, str]]) -> str:
    # Decoded as the handler decodes them ("+" is a space), so that the value signed is the
    # value used: response-content-type=a%2Bb and =a+b are different requests.
    signed = sorted(
        (unquote_plus(name), unquote_plus(value))
        for name, value in params
        if unquote_plus(name) in SUBRESOURCES
    )
    query = "&".join(f"{name}={value}" if value else name for name, value in signed)
    return (raw_path or "/") + (f"?{query}" if query else "")


def string_to_sign(
    method: str,
    raw_path: str,
    params: list[tuple[str, str]],
    headers: Mapping[str, list[str]],
    date_line: str,
) -> str:
    """`headers`: lower-case name -> every value sent."""

    def first(name: str) -> str:
        values = headers.get(name)
        return values[0].strip() if values else ""

    amz = sorted(
        (name, ",".join(v.strip() for v in values))
        for name, values in headers.items()
        if name.startswith("x-amz-")
    )
    lines = [method, first("content-md5"), first("content-type"), date_line]
    lines += [f"{name}:{value}" for name, value in amz]
    return "\n".join(lines) + "\n" + canonical_resource(raw_path, params)


def signature(secret_key: str, text: str) -> str:
    digest = hmac.new(secret_key.encode(), text.encode("utf-8", "surrogateescape"), hashlib.sha1)
    return base64.b64encode(digest.digest()).decode()
