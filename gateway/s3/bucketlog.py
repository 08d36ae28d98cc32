"""Server access logging: a bucket's logging configuration (PutBucketLogging's
BucketLoggingStatus, checked as AWS checks it), the records AWS writes for each request, and
the names of the log objects. Pure: no request, no store.

The record is AWS's documented format (userguide/LogFormat.html): space-separated fields, `-`
for a field with no value, the time in brackets and the request line, referrer and user agent
in double quotes.
"""

from __future__ import annotations

import datetime
import json
import secrets
import urllib.parse
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from . import grants, xml
from .errors import S3Error, invalid_argument

# The name of the bucket setting that holds the configuration.
SETTING = "logging"
SIMPLE = "SimplePrefix"
PARTITIONED = "PartitionedPrefix"
DATE_SOURCES = ("EventTime", "DeliveryTime")
_LOGGING_PERMISSIONS = ("FULL_CONTROL", "READ", "WRITE")
_XSI = "{http://www.w3.org/2001/XMLSchema-instance}type"
_GRANTEE_ELEMENTS = {"CanonicalUser": "ID", "Group": "URI", "AmazonCustomerByEmail": "EmailAddress"}


@dataclass(frozen=True)
class TargetGrant:
    kind: str  # CanonicalUser, Group or AmazonCustomerByEmail
    value: str  # the ID, URI or email address
    permission: str


@dataclass(frozen=True)
class LoggingConfig:
    target_bucket: str
    target_prefix: str
    grants: tuple[TargetGrant, ...] = ()
    key_format: str = SIMPLE
    date_source: str = "EventTime"  # PartitionedPrefix's PartitionDateSource
    # When it was set: GetBucketLogging's Last-Modified (RGW sends it; s3-tests reads it).
    modified_ns: int = field(default=0, compare=False)

    def to_json(self) -> str:
        return json.dumps(
            {
                "bucket": self.target_bucket,
                "prefix": self.target_prefix,
                "grants": [[g.kind, g.value, g.permission] for g in self.grants],
                "format": self.key_format,
                "date_source": self.date_source,
                "modified_ns": self.modified_ns,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> LoggingConfig:
        doc = json.loads(text)
        return cls(
            doc["bucket"],
            doc["prefix"],
            tuple(TargetGrant(*g) for g in doc["grants"]),
            doc["format"],
            doc["date_source"],
            doc.get("modified_ns", 0),
        )


def parse_status(body: bytes) -> LoggingConfig | None:
    """A BucketLoggingStatus document: its LoggingEnabled, or None (an empty status, which
    disables logging). MalformedXML for anything AWS's schema refuses."""
    root = xml.parse(body)
    if root.tag != "BucketLoggingStatus":
        raise S3Error("MalformedXML")
    enabled = root.find("LoggingEnabled")
    if enabled is None:
        return None
    target = enabled.findtext("TargetBucket")
    prefix = enabled.findtext("TargetPrefix")
    # Both are required members of LoggingEnabled (the API reference); an empty prefix is one.
    if not target or prefix is None:
        raise S3Error("MalformedXML")
    key_format, date_source = _key_format(enabled.find("TargetObjectKeyFormat"))
    return LoggingConfig(
        target.strip(), prefix, _grants(enabled.find("TargetGrants")), key_format, date_source
    )


def _key_format(el: Element | None) -> tuple[str, str]:
    if el is None:
        return SIMPLE, "EventTime"
    chosen = [child for child in el if child.tag in (SIMPLE, PARTITIONED)]
    if len(chosen) != 1 or len(list(el)) != 1:
        raise S3Error("MalformedXML")
    if chosen[0].tag == SIMPLE:
        return SIMPLE, "EventTime"
    source = chosen[0].findtext("PartitionDateSource")
    if source is None:
        return PARTITIONED, "EventTime"
    if source not in DATE_SOURCES:
        raise S3Error("MalformedXML")
    return PARTITIONED, source


def _grants(el: Element | None) -> tuple[TargetGrant, ...]:
    if el is None:
        return ()
    out = []
    for grant in el.findall("Grant"):
        grantee = grant.find("Grantee")
        permission = grant.findtext("Permission")
        if grantee is None or permission not in _LOGGING_PERMISSIONS:
            raise S3Error("MalformedXML")
        kind = grantee.get(_XSI, "")
        element = _GRANTEE_ELEMENTS.get(kind)
        value = grantee.findtext(element) if element else None
        if not value:
            raise S3Error("MalformedXML")
        if kind == "Group" and value.strip() not in grants.GROUPS:
            raise invalid_argument("Invalid group uri", "Group/URI", value)
        out.append(TargetGrant(kind, value.strip(), permission))
    return tuple(out)


def render_status(config: LoggingConfig | None) -> bytes:
    """GetBucketLogging's answer: an empty BucketLoggingStatus when logging is off."""
    if config is None:
        return xml.render("BucketLoggingStatus", [])
    nodes: list[xml.Node] = [("TargetBucket", config.target_bucket)]
    if config.grants:
        nodes.append(
            (
                "TargetGrants",
                [
                    (
                        "Grant",
                        [
                            (
                                f'Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                                f'xsi:type="{g.kind}"',
                                [(_GRANTEE_ELEMENTS[g.kind], g.value)],
                            ),
                            ("Permission", g.permission),
                        ],
                    )
                    for g in config.grants
                ],
            )
        )
    nodes.append(("TargetPrefix", config.target_prefix))
    if config.key_format == SIMPLE:
        key_format: xml.Node = ("SimplePrefix", [])
    else:
        key_format = ("PartitionedPrefix", [("PartitionDateSource", config.date_source)])
    nodes.append(("TargetObjectKeyFormat", [key_format]))
    return xml.render("BucketLoggingStatus", [("LoggingEnabled", nodes)])


# --- records -----------------------------------------------------------------------------------

# The operation field: REST.<method>.<resource>, in AWS's words for each (LogFormat.html and
# the records it shows). Unlisted operations are named from their HTTP method and "BUCKET" or
# "OBJECT".
_OPERATION_NAMES = {
    "ListObjects": "REST.GET.BUCKET",
    "ListObjectsV2": "REST.GET.BUCKET",
    "ListObjectVersions": "REST.GET.BUCKETVERSIONS",
    "ListMultipartUploads": "REST.GET.UPLOADS",
    "ListBuckets": "REST.GET.SERVICE",
    "CopyObject": "REST.COPY.OBJECT",
    "UploadPart": "REST.PUT.PART",
    "UploadPartCopy": "REST.COPY.PART",
    "CreateMultipartUpload": "REST.POST.UPLOADS",
    "CompleteMultipartUpload": "REST.POST.UPLOAD",
    "AbortMultipartUpload": "REST.DELETE.UPLOAD",
    "ListParts": "REST.GET.UPLOAD",
    "DeleteObjects": "REST.POST.MULTI_OBJECT_DELETE",
    "PostObject": "REST.POST.OBJECT",
    "GetBucketAcl": "REST.GET.ACL",
    "PutBucketAcl": "REST.PUT.ACL",
    "GetObjectAcl": "REST.GET.ACL",
    "PutObjectAcl": "REST.PUT.ACL",
    "GetBucketLogging": "REST.GET.LOGGING_STATUS",
    "PutBucketLogging": "REST.PUT.LOGGING_STATUS",
    "GetObjectTagging": "REST.GET.OBJECT_TAGGING",
    "PutObjectTagging": "REST.PUT.OBJECT_TAGGING",
    "DeleteObjectTagging": "REST.DELETE.OBJECT_TAGGING",
    "GetBucketTagging": "REST.GET.TAGGING",
    "PutBucketTagging": "REST.PUT.TAGGING",
    "DeleteBucketTagging": "REST.DELETE.TAGGING",
    "GetBucketVersioning": "REST.GET.VERSIONING",
    "PutBucketVersioning": "REST.PUT.VERSIONING",
    "GetBucketLocation": "REST.GET.LOCATION",
    "GetBucketPolicy": "REST.GET.BUCKETPOLICY",
    "PutBucketPolicy": "REST.PUT.BUCKETPOLICY",
    "DeleteBucketPolicy": "REST.DELETE.BUCKETPOLICY",
    # The website endpoint's reads (gateway/website/): WEBSITE.<method>.OBJECT (LogFormat.html).
    "WebsiteGetObject": "WEBSITE.GET.OBJECT",
    "WebsiteHeadObject": "WEBSITE.HEAD.OBJECT",
    "GetBucketWebsite": "REST.GET.WEBSITE",
    "PutBucketWebsite": "REST.PUT.WEBSITE",
    "DeleteBucketWebsite": "REST.DELETE.WEBSITE",
    "GetBucketCors": "REST.GET.CORS",
    "PutBucketCors": "REST.PUT.CORS",
    "DeleteBucketCors": "REST.DELETE.CORS",
    "GetBucketLifecycleConfiguration": "REST.GET.LIFECYCLE",
    "PutBucketLifecycleConfiguration": "REST.PUT.LIFECYCLE",
    "DeleteBucketLifecycleConfiguration": "REST.DELETE.LIFECYCLE",
    "GetBucketEncryption": "REST.GET.ENCRYPTION",
    "PutBucketEncryption": "REST.PUT.ENCRYPTION",
    "DeleteBucketEncryption": "REST.DELETE.ENCRYPTION",
    "GetObjectRetention": "REST.GET.RETENTION",
    "PutObjectRetention": "REST.PUT.RETENTION",
    "GetObjectLegalHold": "REST.GET.LEGAL_HOLD",
    "PutObjectLegalHold": "REST.PUT.LEGAL_HOLD",
    "GetObjectAttributes": "REST.GET.OBJECT_ATTRIBUTES",
    "OptionsPreflight": "REST.OPTIONS.PREFLIGHT",
    "PostBucketLogging": "REST.POST.LOGGING",  # the RGW extension
}


def operation_name(operation: str, method: str, has_key: bool) -> str:
    named = _OPERATION_NAMES.get(operation)
    if named is not None:
        return named
    return f"REST.{method}.{'OBJECT' if has_key else 'BUCKET'}"


@dataclass(frozen=True)
class Record:
    """One request, as server access logging records it."""

    bucket_owner: str
    bucket: str
    time_s: float
    remote_ip: str | None
    requester: str | None  # canonical id; None: anonymous
    request_id: str
    operation: str
    key: str | None
    request_uri: str | None  # "METHOD /path?query HTTP/1.1"; None for a BATCH record
    status: int
    error_code: str | None
    bytes_sent: int
    object_size: int | None
    total_ms: int
    turnaround_ms: int | None
    referer: str | None
    user_agent: str | None
    version_id: str | None
    host_id: str
    signature_version: str | None  # SigV2, SigV4
    cipher_suite: str | None
    auth_type: str | None  # AuthHeader, QueryString
    host_header: str | None
    tls_version: str | None
    acl_required: bool = False


def _plain(value: object) -> str:
    if value is None or value == "":
        return "-"
    return str(value)


def _quoted(value: str | None) -> str:
    if not value:
        return '"-"'
    # A double quote inside would end the field for every log reader.
    return '"' + value.replace("\\", "%5C").replace('"', "%22") + '"'


def format_time(time_s: float) -> str:
    when = datetime.datetime.fromtimestamp(time_s, datetime.UTC)
    return when.strftime("[%d/%b/%Y:%H:%M:%S +0000]")


def format_record(r: Record) -> str:
    """One line of a log object (without its newline)."""
    # The key is URL-encoded (LogFormat.html: "The key part of the request, URL encoded").
    key = urllib.parse.quote(r.key, safe="/") if r.key else None
    fields = [
        _plain(r.bucket_owner),
        _plain(r.bucket),
        format_time(r.time_s),
        _plain(r.remote_ip),
        _plain(r.requester),
        _plain(r.request_id),
        r.operation,
        _plain(key),
        _quoted(r.request_uri),
        str(r.status),
        _plain(r.error_code),
        _plain(r.bytes_sent or None),
        _plain(r.object_size),
        str(r.total_ms),
        _plain(r.turnaround_ms),
        _quoted(r.referer),
        _quoted(r.user_agent),
        _plain(r.version_id),
        _plain(r.host_id),
        _plain(r.signature_version),
        _plain(r.cipher_suite),
        _plain(r.auth_type),
        _plain(r.host_header),
        _plain(r.tls_version),
        "-",  # access point ARN: there are no access points here
        "Yes" if r.acl_required else "-",
    ]
    return " ".join(fields)


def object_key(
    config: LoggingConfig,
    source_bucket: str,
    source_account: str,
    region: str,
    event_s: float,
    delivery_s: float,
) -> str:
    """A log object's name, as AWS names them (userguide/ServerLogs.html#server-log-keyname-
    format): TargetPrefix + YYYY-mm-DD-HH-MM-SS-UniqueString, or with PartitionedPrefix
    TargetPrefix + SourceAccountId/SourceRegion/SourceBucket/YYYY/MM/DD/ + the same."""
    delivered = datetime.datetime.fromtimestamp(delivery_s, datetime.UTC)
    unique = secrets.token_hex(8).upper()
    name = delivered.strftime("%Y-%m-%d-%H-%M-%S-") + unique
    if config.key_format == SIMPLE:
        return config.target_prefix + name
    partition_s = event_s if config.date_source == "EventTime" else delivery_s
    day = datetime.datetime.fromtimestamp(partition_s, datetime.UTC).strftime("%Y/%m/%d")
    return f"{config.target_prefix}{source_account}/{region}/{source_bucket}/{day}/{name}"
