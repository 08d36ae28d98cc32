"""Request parsing: what an S3 request's headers and query parameters say, checked as AWS
checks them (the object's metadata, keys, part numbers, version ids, Content-MD5, conditional
deletes, response overrides). The operations, the POST form and the console read requests
through these, so that one spelling of a value means one thing wherever it arrives."""

from __future__ import annotations

import base64
import binascii
import email.utils
import re
from collections.abc import Callable, Mapping
from email.errors import HeaderParseError
from email.header import decode_header, make_header

from ..limits import MAX_KEY_BYTES, MAX_PART_NUMBER
from ..store import Bucket, DeleteCondition, ObjectAttrs
from ..store.model import NULL_VERSION
from ..store.versions import is_version_id
from . import checksums, tagging
from .context import Context
from .errors import S3Error, invalid_argument

MAX_USER_METADATA = 2048  # bytes of x-amz-meta-* names and values (AWS: 2 KB)


# User-controlled system metadata that S3 stores with an object and returns on GET/HEAD.
STORED_HEADERS = (
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "expires",
    "x-amz-website-redirect-location",
)


STORAGE_CLASSES = {
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "OUTPOSTS",
    "GLACIER_IR",
    "SNOW",
    "EXPRESS_ONEZONE",
}


# GetObject query parameters that override response headers (signed requests only, as on AWS).
RESPONSE_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}


# What no HTTP header value may carry (RFC 9110 5.5: the C0 controls but tab, and DEL): an
# override holding one could only be sent by splitting the header, so it is refused up front.
_NOT_IN_A_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def response_overrides(query: Mapping[str, str]) -> dict[str, str]:
    """The headers that GetObject's response-* parameters ask for, checked before anything is
    sent (aiohttp would refuse them once the answer is under way: a cut connection, or a 500)."""
    overrides = {}
    for param, header in RESPONSE_OVERRIDES.items():
        value = query.get(param)
        if value is None:
            continue
        if _NOT_IN_A_HEADER.search(value):
            raise invalid_argument(
                f"{param} must not contain control characters: an HTTP header cannot carry them",
                param,
            )
        overrides[header] = value
    return overrides


def parse_int(text: str) -> int:
    """A non-negative decimal of ASCII digits, or -1 (isdigit() and int() would take any
    Unicode digit, and int() refuses over 4,300 digits: past 18 it is just "huge")."""
    if not (text and text.isascii() and text.isdigit()):
        return -1
    return int(text) if len(text) <= 18 else 10**18


def part_number(ctx: Context) -> int:
    """The partNumber query parameter: 1 to 10,000."""
    raw = ctx.endpoint.part_number or ""
    number = parse_int(raw)
    if not 1 <= number <= MAX_PART_NUMBER:
        raise invalid_argument(
            "Part number must be an integer between 1 and 10000, inclusive", "partNumber", raw
        )
    return number


def check_key(key: str) -> str:
    size = len(key.encode())
    if size > MAX_KEY_BYTES:
        raise S3Error("KeyTooLongError", MaxSizeAllowed=MAX_KEY_BYTES, Size=size)
    return key


def user_metadata_value(value: str) -> str:
    """An x-amz-meta-* value as stored: "Values of such headers are character decoded as per
    RFC 2047 before storing" (UsingMetadata.html, "User-defined object metadata"), so
    `=?UTF-8?B?w6k=?=` is stored as `é`; a value without encoded words is kept as sent.
    objects.user_metadata_header encodes it again on the way out."""
    if "=?" not in value:
        return value
    try:
        return str(make_header(decode_header(value)))
    except (HeaderParseError, LookupError, UnicodeDecodeError):
        # A malformed encoded word (an unknown charset, bytes it cannot decode): the value
        # is kept as sent, which is ASCII and so can be sent back as it came.
        return value


def attrs_from_headers(headers: Mapping[str, str]) -> ObjectAttrs:
    """The metadata a PUT (or a copy with REPLACE) sets on an object."""
    stored = {name: headers[name] for name in STORED_HEADERS if name in headers}
    redirect = stored.get("x-amz-website-redirect-location")
    if redirect is not None and not redirect.startswith(("/", "http://", "https://")):
        # AWS's error table (ErrorResponses.html): the website endpoint answers it as a
        # Location, so it is a path of the site or an absolute URL.
        raise S3Error("InvalidRedirectLocation")
    storage_class = headers.get("x-amz-storage-class")
    if storage_class is not None:
        if storage_class not in STORAGE_CLASSES:
            raise S3Error("InvalidStorageClass", StorageClassRequested=storage_class)
        if storage_class != "STANDARD":
            stored["x-amz-storage-class"] = storage_class
    meta: dict[str, str] = {}
    size = 0
    for name, value in headers.items():
        lower = name.lower()
        if lower.startswith("x-amz-meta-"):
            suffix = lower[len("x-amz-meta-") :]
            try:
                value = user_metadata_value(value)
                size += len(suffix.encode()) + len(value.encode())
            except UnicodeEncodeError as exc:  # bytes that were not UTF-8 on the wire
                raise invalid_argument(
                    "User metadata must be UTF-8", name, value.encode(errors="replace").decode()
                ) from exc
            meta[suffix] = f"{meta[suffix]},{value}" if suffix in meta else value
    if size > MAX_USER_METADATA:
        raise S3Error("MetadataTooLarge", MaxSizeAllowed=MAX_USER_METADATA, Size=size)
    content_type = headers.get("content-type") or "binary/octet-stream"
    return ObjectAttrs(
        content_type=content_type,
        headers=stored,
        meta=meta,
        tags=tagging.from_header(headers.get("x-amz-tagging")),
    )


def content_md5(headers: Mapping[str, str]) -> bytes | None:
    """The decoded Content-MD5 header, or None. Malformed -> InvalidDigest (RFC 1864)."""
    value = headers.get("content-md5")
    if value is None:
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise S3Error("InvalidDigest", ContentMD5=value) from exc
    if len(raw) != 16:
        raise S3Error("InvalidDigest", ContentMD5=value)
    return raw


def version_param(ctx: Context) -> str | None:
    """?versionId, judged by `check_version_id`."""
    return check_version_id(ctx.endpoint.version_id, ctx.bucket_record)


def check_version_id(
    version_id: str | None, bucket: Bucket | None, name: str = "versionId"
) -> str | None:
    """A version id a request names (in `name`): "null", or an id of this gateway's form in a
    bucket whose versioning was ever set; anything else is AWS's InvalidArgument."""
    if version_id is None or version_id == NULL_VERSION:
        return version_id
    if version_id == "":
        raise invalid_argument("Version id cannot be the empty string", name, "")
    if bucket is None or bucket.versioning is None or not is_version_id(version_id):
        raise invalid_argument("Invalid version id specified", name, version_id)
    return version_id


def require_integrity_header(ctx: Context) -> None:
    """For the operations whose every request AWS wants Content-MD5 or a checksum on."""
    if not checksums.has_integrity_header(ctx.headers):
        raise S3Error("InvalidRequest", "Missing required header for this request: Content-Md5")


def delete_condition(
    etag: str | None, size: str | None, modified: str | None, seconds: Callable[[str], int]
) -> DeleteCondition | None:
    """A conditional delete's If-Match / ETag, size and Last-Modified (read by `seconds`)."""
    if etag is None and size is None and modified is None:
        return None
    if size is not None and not (size.isascii() and size.isdigit()):
        raise invalid_argument("Invalid size", "x-amz-if-match-size", size)
    return DeleteCondition(
        etag, int(size) if size is not None else None, seconds(modified) if modified else None
    )


def _http_date(text: str) -> int | None:
    """Whole seconds of an HTTP date (how the SDKs send a conditional delete's time, in the
    header and in DeleteObjects' LastModifiedTime alike); None if it is not one."""
    try:
        return int(email.utils.parsedate_to_datetime(text).timestamp())
    except (TypeError, ValueError):
        return None


def http_seconds(text: str) -> int:
    seconds = _http_date(text)
    if seconds is None:
        raise invalid_argument("Invalid date", "x-amz-if-match-last-modified-time", text)
    return seconds


def element_seconds(text: str) -> int:
    seconds = _http_date(text)
    if seconds is None:
        raise S3Error("MalformedXML")
    return seconds
