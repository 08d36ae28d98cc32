"""Server access logging, pure parts: the BucketLoggingStatus document as AWS checks it, the
record line (LogFormat.html) and the log objects' names (ServerLogs.html)."""

from __future__ import annotations

import re
import shlex

import pytest

from gateway.s3 import bucketlog
from gateway.s3.errors import S3Error


def status(enabled: str) -> bytes:
    return (
        '<BucketLoggingStatus xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{enabled}</BucketLoggingStatus>"
    ).encode()


def test_empty_status_disables():
    assert bucketlog.parse_status(status("")) is None


def test_configuration_round_trip():
    body = status(
        "<LoggingEnabled><TargetBucket>logs</TargetBucket><TargetPrefix>p/</TargetPrefix>"
        "<TargetGrants><Grant><Grantee "
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group">'
        "<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee>"
        "<Permission>READ</Permission></Grant></TargetGrants>"
        "<TargetObjectKeyFormat><PartitionedPrefix><PartitionDateSource>DeliveryTime"
        "</PartitionDateSource></PartitionedPrefix></TargetObjectKeyFormat></LoggingEnabled>"
    )
    config = bucketlog.parse_status(body)
    assert config is not None
    assert (config.target_bucket, config.target_prefix) == ("logs", "p/")
    assert (config.key_format, config.date_source) == ("PartitionedPrefix", "DeliveryTime")
    assert bucketlog.LoggingConfig.from_json(config.to_json()) == config
    # What GetBucketLogging answers parses back to the same configuration.
    assert bucketlog.parse_status(bucketlog.render_status(config)) == config


@pytest.mark.parametrize(
    "enabled",
    [
        "<LoggingEnabled><TargetPrefix>p</TargetPrefix></LoggingEnabled>",
        "<LoggingEnabled><TargetBucket>b</TargetBucket></LoggingEnabled>",
        "<LoggingEnabled><TargetBucket>b</TargetBucket><TargetPrefix>p</TargetPrefix>"
        "<TargetObjectKeyFormat><PartitionedPrefix><PartitionDateSource>kaboom"
        "</PartitionDateSource></PartitionedPrefix></TargetObjectKeyFormat></LoggingEnabled>",
        "<LoggingEnabled><TargetBucket>b</TargetBucket><TargetPrefix>p</TargetPrefix>"
        "<TargetObjectKeyFormat><SimplePrefix/><PartitionedPrefix/></TargetObjectKeyFormat>"
        "</LoggingEnabled>",
        "<LoggingEnabled><TargetBucket>b</TargetBucket><TargetPrefix>p</TargetPrefix>"
        "<TargetGrants><Grant><Permission>READ_ACP</Permission></Grant></TargetGrants>"
        "</LoggingEnabled>",
    ],
)
def test_malformed(enabled):
    with pytest.raises(S3Error) as exc:
        bucketlog.parse_status(status(enabled))
    assert exc.value.code == "MalformedXML"


def record(**changes: object) -> bucketlog.Record:
    fields: dict[str, object] = {
        "bucket_owner": "owner-id",
        "bucket": "src",
        "time_s": 1549411238.5,
        "remote_ip": "192.0.2.3",
        "requester": None,
        "request_id": "3E57427F3EXAMPLE",
        "operation": "REST.GET.OBJECT",
        "key": 'a "b" c',
        "request_uri": 'GET /src/a%20"b" HTTP/1.1',
        "status": 200,
        "error_code": None,
        "bytes_sent": 0,
        "object_size": 7,
        "total_ms": 3,
        "turnaround_ms": None,
        "referer": None,
        "user_agent": 'agent "quoted" [x]',
        "version_id": None,
        "host_id": "3E57427F3EXAMPLE",
        "signature_version": None,
        "cipher_suite": None,
        "auth_type": None,
        "host_header": "s3.example",
        "tls_version": None,
    }
    fields.update(changes)
    return bucketlog.Record(**fields)  # type: ignore[arg-type]


def test_record_has_26_fields_a_log_reader_splits():
    line = bucketlog.format_record(record())
    assert "[06/Feb/2019:00:00:38 +0000]" in line
    chunks = shlex.split(line.replace("[", '"').replace("]", '"'))
    assert len(chunks) == 26
    assert chunks[4] == "-"  # anonymous
    assert chunks[7] == "a%20%22b%22%20c"  # the key, URL-encoded
    assert chunks[11] == "-"  # no bytes sent
    assert chunks[12] == "7"
    assert chunks[25] == "-"


def test_operation_names():
    assert bucketlog.operation_name("PutObject", "PUT", True) == "REST.PUT.OBJECT"
    assert bucketlog.operation_name("ListObjectsV2", "GET", False) == "REST.GET.BUCKET"
    assert bucketlog.operation_name("UploadPart", "PUT", True) == "REST.PUT.PART"
    assert bucketlog.operation_name("CompleteMultipartUpload", "POST", True) == "REST.POST.UPLOAD"


def test_object_keys():
    simple = bucketlog.LoggingConfig("logs", "log/")
    key = bucketlog.object_key(simple, "src", "acct", "us-east-1", 0, 1549411238)
    assert re.fullmatch(r"log/2019-02-06-00-00-38-[0-9A-F]{16}", key)
    assert key != bucketlog.object_key(simple, "src", "acct", "us-east-1", 0, 1549411238)
    by_event = bucketlog.LoggingConfig("logs", "", key_format="PartitionedPrefix")
    key = bucketlog.object_key(by_event, "src", "acct", "eu-west-1", 1549324800, 1549411238)
    assert re.fullmatch(r"acct/eu-west-1/src/2019/02/05/2019-02-06-00-00-38-[0-9A-F]{16}", key)
    by_delivery = bucketlog.LoggingConfig(
        "logs", "p/", key_format="PartitionedPrefix", date_source="DeliveryTime"
    )
    key = bucketlog.object_key(by_delivery, "src", "acct", "eu-west-1", 1549324800, 1549411238)
    assert key.startswith("p/acct/eu-west-1/src/2019/02/06/2019-02-06-00-00-38-")
