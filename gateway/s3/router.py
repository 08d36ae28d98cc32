"""Routing: a pure function from (method, path, query, headers) to one S3 operation.

Path-style addressing, `/bucket/key`, always; virtual-hosted style, `bucket.DOMAIN/key`, when a
domain is configured. The key is everything after `/bucket/`, percent-decoded
and otherwise untouched: `../x`, `a//b` and a leading `/` are ordinary keys (S3 does not
normalise paths), so the raw path is parsed here, never a normalised one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import unquote

from .errors import S3Error

# Bucket sub-resources, in the order they are looked for, and the name of the configuration
# they read or write (GET -> Get<name>, PUT -> Put<name>, DELETE -> Delete<name>).
_BUCKET_SUBRESOURCES = {
    "acl": "BucketAcl",
    "accelerate": "BucketAccelerateConfiguration",
    "analytics": "BucketAnalyticsConfiguration",
    "cors": "BucketCors",
    "encryption": "BucketEncryption",
    "intelligent-tiering": "BucketIntelligentTieringConfiguration",
    "inventory": "BucketInventoryConfiguration",
    "lifecycle": "BucketLifecycleConfiguration",
    "location": "BucketLocation",
    "logging": "BucketLogging",
    "metrics": "BucketMetricsConfiguration",
    "notification": "BucketNotificationConfiguration",
    "object-lock": "ObjectLockConfiguration",
    "ownershipControls": "BucketOwnershipControls",
    "policy": "BucketPolicy",
    "policyStatus": "BucketPolicyStatus",
    "publicAccessBlock": "PublicAccessBlock",
    "replication": "BucketReplication",
    "requestPayment": "BucketRequestPayment",
    "tagging": "BucketTagging",
    "versioning": "BucketVersioning",
    "website": "BucketWebsite",
}

_OBJECT_SUBRESOURCES = {
    "acl": "ObjectAcl",
    "attributes": "ObjectAttributes",
    "legal-hold": "ObjectLegalHold",
    "retention": "ObjectRetention",
    "tagging": "ObjectTagging",
    "torrent": "ObjectTorrent",
}

_VERBS = {"GET": "Get", "PUT": "Put", "DELETE": "Delete"}

# Every operation the router can name (implemented or not: the dispatcher answers the others
# NotImplemented by name).
_NAMES = {
    "ListBuckets", "CreateBucket", "HeadBucket", "DeleteBucket", "ListObjects", "ListObjectsV2",
    "ListObjectVersions", "ListMultipartUploads", "DeleteObjects", "PostObject", "HeadObject",
    "GetObject", "PutObject", "CopyObject", "DeleteObject", "CreateMultipartUpload", "UploadPart",
    "UploadPartCopy", "CompleteMultipartUpload", "AbortMultipartUpload", "ListParts",
    "RestoreObject", "SelectObjectContent", "OptionsPreflight", "PostBucketLogging",
    *(verb + name for verb in _VERBS.values() for name in _BUCKET_SUBRESOURCES.values()),
    *(verb + name for verb in _VERBS.values() for name in _OBJECT_SUBRESOURCES.values()),
}  # fmt: skip
# Every operation the router can name (implemented or not: the dispatcher answers the others
# NotImplemented by name); a str, so that it compares and formats as its name.
Op = StrEnum("Op", [(name, name) for name in sorted(_NAMES)], module=__name__)  # type: ignore[misc]


@dataclass(frozen=True)
class Endpoint:
    """What a request asks for, read once from its method, path, query and headers."""

    operation: Op
    bucket: str | None = None
    key: str | None = None
    upload_id: str | None = None  # ?uploadId
    part_number: str | None = None  # ?partNumber as sent: each operation judges it in its words
    version_id: str | None = None  # ?versionId


def split_path(raw_path: str) -> tuple[str | None, str | None]:
    """`/bucket/key` -> (bucket, key), percent-decoded; None for what is absent."""
    if not raw_path.startswith("/"):
        raise S3Error("InvalidURI")
    rest = raw_path[1:]
    if not rest:
        return None, None
    bucket, sep, key = rest.partition("/")
    try:
        bucket = unquote(bucket, errors="strict")
        key = unquote(key, errors="strict") if sep else ""
    except UnicodeDecodeError as exc:
        raise S3Error("InvalidURI") from exc
    if not bucket:
        raise S3Error("InvalidURI")
    return bucket, (key or None)


def bucket_from_host(host: str, domain: str | None) -> str | None:
    """Virtual-hosted style: `bucket.DOMAIN[:port]` names the bucket; the path is the key."""
    if not domain:
        return None
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.lower().rstrip(".")
    suffix = "." + domain.lower()
    if name.endswith(suffix) and len(name) > len(suffix):
        return name[: -len(suffix)]
    return None


def route(
    method: str,
    raw_path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    domain: str | None = None,
) -> Endpoint:
    host_bucket = bucket_from_host(headers.get("host", ""), domain)
    if host_bucket is not None:
        _, key = split_path("/" + host_bucket + raw_path)
        bucket: str | None = host_bucket
    else:
        bucket, key = split_path(raw_path)
    if method == "OPTIONS" and bucket is not None:
        # A browser's CORS preflight, for any bucket or object (answered from its rules).
        return Endpoint(Op.OptionsPreflight, bucket, key)
    if bucket is None:
        if method == "GET":
            return Endpoint(Op.ListBuckets)
        raise S3Error("MethodNotAllowed")
    if key is None:
        return Endpoint(Op(_bucket_operation(method, query)), bucket)
    return Endpoint(
        Op(_object_operation(method, query, headers)),
        bucket,
        key,
        upload_id=query.get("uploadId"),
        part_number=query.get("partNumber"),
        version_id=query.get("versionId"),
    )


def _bucket_operation(method: str, query: Mapping[str, str]) -> str:
    if method == "HEAD":
        return "HeadBucket"
    if method == "POST":
        if "logging" in query:
            return "PostBucketLogging"  # RGW's flush extension (ops/bucketlog.py)
        return "DeleteObjects" if "delete" in query else "PostObject"
    verb = _VERBS.get(method)
    if verb is None:
        raise S3Error("MethodNotAllowed")
    if method == "GET":
        if "uploads" in query:
            return "ListMultipartUploads"
        if "versions" in query:
            return "ListObjectVersions"
    for sub, name in _BUCKET_SUBRESOURCES.items():
        if sub in query:
            return verb + name
    return {
        "GET": "ListObjectsV2" if query.get("list-type") == "2" else "ListObjects",
        "PUT": "CreateBucket",
        "DELETE": "DeleteBucket",
    }[method]


def _object_operation(method: str, query: Mapping[str, str], headers: Mapping[str, str]) -> str:
    copy = "x-amz-copy-source" in headers
    if method == "HEAD":
        return "HeadObject"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
        if "restore" in query:
            return "RestoreObject"
        if "select" in query:
            return "SelectObjectContent"
        raise S3Error("MethodNotAllowed")
    verb = _VERBS.get(method)
    if verb is None:
        raise S3Error("MethodNotAllowed")
    if "uploadId" in query:
        if method == "PUT":
            return "UploadPartCopy" if copy else "UploadPart"
        return {"GET": "ListParts", "DELETE": "AbortMultipartUpload"}[method]
    for sub, name in _OBJECT_SUBRESOURCES.items():
        if sub in query:
            return verb + name
    if method == "PUT":
        return "CopyObject" if copy else "PutObject"
    return verb + "Object"
