"""Bucket notifications' pure parts (gateway/notify/): the configuration as AWS parses and
refuses it, which configurations an event and key fire, the records as AWS's "Event message
structure" page shows them, topics' ARNs and attributes, and the networks bound."""

from __future__ import annotations

import json

import pytest

from gateway.notify import configuration, events, records, topics
from gateway.notify.networks import Networks, OutsideNetworks, networks, parse_cidrs
from gateway.s3.errors import S3Error
from gateway.users import account_number

TOPIC = "arn:aws:sns:us-east-1:acct:t1"
HOST_ID = "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"  # AWS's example


def _doc(*targets: str) -> bytes:
    return (
        '<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        + "".join(targets)
        + "</NotificationConfiguration>"
    ).encode()


def _topic(
    ident: str, events_: tuple[str, ...], prefix: str | None = None, suffix: str | None = None,
    arn: str = TOPIC, kind: str = "Topic",
) -> str:  # fmt: skip
    rules = "".join(
        f"<FilterRule><Name>{n}</Name><Value>{v}</Value></FilterRule>"
        for n, v in (("prefix", prefix), ("suffix", suffix))
        if v is not None
    )
    filt = f"<Filter><S3Key>{rules}</S3Key></Filter>" if rules else ""
    evs = "".join(f"<Event>{e}</Event>" for e in events_)
    return (
        f"<{kind}Configuration><Id>{ident}</Id><{kind}>{arn}</{kind}>{evs}{filt}"
        f"</{kind}Configuration>"
    )


def _refused(body: bytes) -> S3Error:
    with pytest.raises(S3Error) as caught:
        configuration.parse(body)
    return caught.value


# -- events ----------------------------------------------------------------------------------


def test_wildcards_expand_to_their_family() -> None:
    assert events.expand("s3:ObjectCreated:*") == {
        "s3:ObjectCreated:Put",
        "s3:ObjectCreated:Post",
        "s3:ObjectCreated:Copy",
        "s3:ObjectCreated:CompleteMultipartUpload",
    }
    assert events.expand("s3:ObjectRemoved:Delete") == {"s3:ObjectRemoved:Delete"}
    assert events.expand("s3:ObjectCreated:Nope") == frozenset()
    assert events.expand("s3:*") == frozenset()


def test_record_names_have_no_s3_prefix() -> None:
    assert events.record_name("s3:ObjectCreated:Put") == "ObjectCreated:Put"


# -- parsing and AWS's refusals -----------------------------------------------------------------


def test_round_trip_keeps_every_kind_id_event_and_filter() -> None:
    body = _doc(
        _topic("a", ("s3:ObjectCreated:*",), prefix="images/", suffix=".jpg"),
        _topic("b", ("s3:ObjectRemoved:Delete",), arn="arn:aws:sqs:us-east-1:acct:q", kind="Queue"),
        _topic(
            "c",
            ("s3:ObjectTagging:*",),
            arn="arn:aws:lambda:us-east-1:acct:function:f",
            kind="CloudFunction",
        ),
    )
    config = configuration.parse(body)
    assert [(t.kind, t.id, t.arn) for t in config.targets] == [
        ("TopicConfiguration", "a", TOPIC),
        ("QueueConfiguration", "b", "arn:aws:sqs:us-east-1:acct:q"),
        ("CloudFunctionConfiguration", "c", "arn:aws:lambda:us-east-1:acct:function:f"),
    ]
    assert (config.targets[0].prefix, config.targets[0].suffix) == ("images/", ".jpg")
    rendered = configuration.render(config)
    assert b"<Name>Prefix</Name><Value>images/</Value>" in rendered
    assert b"<Queue>arn:aws:sqs:us-east-1:acct:q</Queue>" in rendered
    assert configuration.parse(rendered) == config


def test_a_configuration_without_an_id_gets_one() -> None:
    body = _doc(
        f"<TopicConfiguration><Topic>{TOPIC}</Topic><Event>s3:ObjectCreated:Put</Event>"
        "</TopicConfiguration>"
    )
    (target,) = configuration.parse(body).targets
    assert len(target.id) >= 16


def test_empty_configuration_renders_the_empty_element() -> None:
    assert configuration.parse(_doc()).targets == ()
    assert configuration.render(configuration.EMPTY).endswith(
        b'<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"</NotificationConfiguration>"
    )


def test_unknown_event_is_refused_as_aws_refuses_it() -> None:
    err = _refused(_doc(_topic("a", ("s3:ObjectCreated:Teleport",))))
    assert (err.code, err.status, err.message) == (
        "InvalidArgument",
        400,
        "The event is not supported for notifications",
    )


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            "<FilterRule><Name>middle</Name><Value>x</Value></FilterRule>",
            "filter rule name must be either prefix or suffix",
        ),
        (
            "<FilterRule><Name>prefix</Name><Value>a</Value></FilterRule>"
            "<FilterRule><Name>Prefix</Name><Value>b</Value></FilterRule>",
            "Cannot specify more than one prefix rule in a filter.",
        ),
        (
            f"<FilterRule><Name>suffix</Name><Value>{'x' * 1025}</Value></FilterRule>",
            "Size of filter rule value cannot exceed 1024 bytes in UTF-8 representation",
        ),
    ],
)
def test_bad_filter_rules_are_refused(rules: str, message: str) -> None:
    body = _doc(
        f"<TopicConfiguration><Id>a</Id><Topic>{TOPIC}</Topic><Event>s3:ObjectCreated:Put</Event>"
        f"<Filter><S3Key>{rules}</S3Key></Filter></TopicConfiguration>"
    )
    err = _refused(body)
    assert (err.code, err.message) == ("InvalidArgument", message)


OVERLAP = (
    "Configurations overlap. Configurations on the same bucket cannot share a common event type."
)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # A wildcard and one of its events, no filters.
        (("s3:ObjectCreated:*", None, None), ("s3:ObjectCreated:Put", None, None)),
        # Prefixes one of which starts the other.
        (("s3:ObjectCreated:Put", "images/", None), ("s3:ObjectCreated:Put", "images/jpg", None)),
        # A prefix on one, a suffix on the other: images/x.jpg matches both.
        (("s3:ObjectCreated:Put", "images", None), ("s3:ObjectCreated:Put", None, "jpg")),
        # Suffixes one of which ends the other.
        (("s3:ObjectRemoved:*", None, ".jpg"), ("s3:ObjectRemoved:Delete", None, "g")),
    ],
)
def test_overlapping_configurations_are_refused(
    a: tuple[str, str | None, str | None], b: tuple[str, str | None, str | None]
) -> None:
    err = _refused(_doc(_topic("a", (a[0],), a[1], a[2]), _topic("b", (b[0],), b[1], b[2])))
    assert (err.code, err.status, err.message) == ("InvalidArgument", 400, OVERLAP)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # Different event types.
        (("s3:ObjectCreated:*", None, None), ("s3:ObjectRemoved:*", None, None)),
        # Same event, prefixes apart.
        (("s3:ObjectCreated:Put", "images/", None), ("s3:ObjectCreated:Put", "logs/", None)),
        # Same event and prefix, suffixes apart (AWS's own valid example).
        (("s3:ObjectCreated:Put", "images/", ".jpg"), ("s3:ObjectCreated:Put", "images/", ".png")),
    ],
)
def test_configurations_apart_are_accepted(
    a: tuple[str, str | None, str | None], b: tuple[str, str | None, str | None]
) -> None:
    config = configuration.parse(
        _doc(_topic("a", (a[0],), a[1], a[2]), _topic("b", (b[0],), b[1], b[2]))
    )
    assert len(config.targets) == 2


@pytest.mark.parametrize(
    "body",
    [
        b"<Other/>",
        _doc(
            "<TopicConfiguration><Id>a</Id><Event>s3:ObjectCreated:Put</Event></TopicConfiguration>"
        ),
        _doc(f"<TopicConfiguration><Id>a</Id><Topic>{TOPIC}</Topic></TopicConfiguration>"),
        _doc("<Unknown/>"),
    ],
)
def test_malformed_documents(body: bytes) -> None:
    assert _refused(body).code == "MalformedXML"


# -- matching -----------------------------------------------------------------------------------


def test_matching_by_event_prefix_and_suffix() -> None:
    config = configuration.parse(
        _doc(
            _topic("jpg", ("s3:ObjectCreated:*",), prefix="images/", suffix=".jpg"),
            _topic("gone", ("s3:ObjectRemoved:Delete",)),
        )
    )

    def fired(event: str, key: str) -> list[str]:
        return [t.id for t in config.matching(event, key)]

    assert fired("s3:ObjectCreated:Put", "images/a.jpg") == ["jpg"]
    assert fired("s3:ObjectCreated:CompleteMultipartUpload", "images/a.jpg") == ["jpg"]
    assert fired("s3:ObjectCreated:Put", "docs/a.jpg") == []  # the wrong prefix
    assert fired("s3:ObjectCreated:Put", "images/a.png") == []  # the wrong suffix
    assert fired("s3:ObjectCreated:Put", "Images/a.jpg") == []  # case counts
    assert fired("s3:ObjectRemoved:Delete", "images/a.jpg") == ["gone"]
    assert fired("s3:ObjectRemoved:DeleteMarkerCreated", "images/a.jpg") == []
    assert fired("s3:ObjectTagging:Put", "images/a.jpg") == []


def test_stored_documents_are_parsed_once() -> None:
    text = configuration.render(configuration.parse(_doc(_topic("a", ("s3:ObjectAcl:Put",)))))
    assert configuration.stored(text.decode()) is configuration.stored(text.decode())
    assert configuration.stored(None) is configuration.EMPTY


# -- records ------------------------------------------------------------------------------------


def test_a_record_as_aws_event_message_structure_shows_it() -> None:
    change = records.ObjectEvent(
        event="s3:ObjectCreated:Put",
        bucket="amzn-s3-demo-bucket",
        bucket_owner="A3NL1KOZZKExample",
        key="red flower.jpg",
        time_ns=0,
        sequencer=0x0055AED6DCD90281E5,
        principal="AIDAJDPLRKLG7UEXAMPLE",
        source_ip="172.16.0.1",
        request_id="C3D13FE58DE4C810",
        host_id=HOST_ID,
        size=1024,
        etag='"d41d8cd98f00b204e9800998ecf8427e"',
        version_id="096fKKXTRTtl3on89fVO.nfljtsv6qko",
    )
    body = json.loads(records.message([records.record(change, "us-west-2", "testConfigRule")]))
    assert body == {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-west-2",
                "eventTime": "1970-01-01T00:00:00.000Z",
                "eventName": "ObjectCreated:Put",
                "userIdentity": {"principalId": "AIDAJDPLRKLG7UEXAMPLE"},
                "requestParameters": {"sourceIPAddress": "172.16.0.1"},
                "responseElements": {
                    "x-amz-request-id": "C3D13FE58DE4C810",
                    "x-amz-id-2": HOST_ID,
                },
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "testConfigRule",
                    "bucket": {
                        "name": "amzn-s3-demo-bucket",
                        "ownerIdentity": {"principalId": "A3NL1KOZZKExample"},
                        "arn": "arn:aws:s3:::amzn-s3-demo-bucket",
                    },
                    "object": {
                        "key": "red+flower.jpg",
                        "size": 1024,
                        "eTag": "d41d8cd98f00b204e9800998ecf8427e",
                        "versionId": "096fKKXTRTtl3on89fVO.nfljtsv6qko",
                        "sequencer": "0055AED6DCD90281E5",
                    },
                },
            }
        ]
    }


def test_a_delete_record_has_no_size_or_etag() -> None:
    change = records.ObjectEvent(
        "s3:ObjectRemoved:Delete", "b", "o", "a/b=c d", 0, 1, "p", "127.0.0.1", "r", "h"
    )
    obj = records.record(change, "us-east-1", "c")["s3"]["object"]
    assert obj == {"key": "a/b%3Dc+d", "sequencer": "000000000000000001"}


def test_sequencers_increase_as_text_too() -> None:
    assert records.sequencer(9) < records.sequencer(10) < records.sequencer(2**40)


def test_the_test_event_is_flat() -> None:
    body = json.loads(records.s3_test_event("bkt", 1_413_215_822_089_000_000, "RID", "HID"))
    assert body == {
        "Service": "Amazon S3",
        "Event": "s3:TestEvent",
        "Time": "2014-10-13T15:57:02.089Z",
        "Bucket": "bkt",
        "RequestId": "RID",
        "HostId": "HID",
    }


# -- topics -------------------------------------------------------------------------------------


def test_destination_arns_name_a_topic() -> None:
    assert topics.parse_arn("arn:aws:sns:us-east-1:123456789012:t1") == topics.Named(
        "sns", "us-east-1", "123456789012", "t1"
    )
    assert topics.parse_arn("arn:aws:sqs:eu-west-1:123456789012:q") == topics.Named(
        "sqs", "eu-west-1", "123456789012", "q"
    )
    assert topics.parse_arn(
        "arn:aws:lambda:us-east-1:123456789012:function:f:prod"
    ) == topics.Named("lambda", "us-east-1", "123456789012", "f")
    # An ARN written with the account's canonical id (before accounts had numbers) names the
    # same account, by its number.
    assert topics.parse_arn("arn:aws:sns:us-east-1:acct:t1") == topics.Named(
        "sns", "us-east-1", account_number("acct"), "t1"
    )
    assert topics.parse_arn("arn:aws:s3:::bucket") is None
    assert topics.parse_arn("arn:aws:sns:us-east-1:acct:bad/name") is None


def test_a_topic_keeps_its_endpoint_sealed_and_shows_only_its_origin() -> None:
    seal = {}

    def sealer(secret: bytes) -> str:
        seal["x"] = secret
        return "sealed:x"

    topic = topics.Topic("acct", "t", "us-east-1").with_attribute(
        "push-endpoint", "https://user:pw@hooks.example:8443/path/token?key=s3cret"
    )
    topic = topic.with_attribute("verify-ssl", "false").with_attribute("OpaqueData", "od")
    doc = topic.to_doc(sealer)
    assert "s3cret" not in doc and "pw@" not in doc
    back = topics.Topic.from_doc("acct", "t", "us-east-1", doc, lambda s: seal["x"])
    assert back == topic
    shown = back.shown()
    assert shown["push-endpoint"] == "https://hooks.example:8443"
    assert shown["verify-ssl"] == "false" and shown["OpaqueData"] == "od"
    assert "s3cret" not in json.dumps(shown) and "s3cret" not in repr(back)


@pytest.mark.parametrize(
    ("endpoint", "secure", "ok"),
    [
        ("http://127.0.0.1:9/x", False, True),
        ("https://u:p@host/x", True, True),
        ("https://u:p@host/x", False, False),  # a password in the clear
        ("ftp://host/x", False, False),
        ("http:///x", False, False),
        ("", False, True),
    ],
)
def test_endpoints(endpoint: str, secure: bool, ok: bool) -> None:
    if ok:
        topics.check_endpoint(endpoint, secure)
    else:
        with pytest.raises(topics.TopicError) as caught:
            topics.check_endpoint(endpoint, secure)
        assert caught.value.code == "InvalidParameter"


# -- networks -----------------------------------------------------------------------------------


def test_the_default_refuses_link_local_only() -> None:
    default = Networks()
    assert default.allows("127.0.0.1") and default.allows("10.1.2.3") and default.allows("::1")
    assert not default.allows("169.254.169.254")
    assert not default.allows("::ffff:169.254.169.254")
    assert not default.allows("fe80::1%eth0")
    with pytest.raises(OutsideNetworks):
        default.check("metadata", ["10.0.0.1", "169.254.169.254"])


def test_listed_networks_allow_only_themselves() -> None:
    bound = networks(("10.0.0.0/8", "fd00::/8"))
    assert bound.allows("10.9.9.9") and bound.allows("fd00::5")
    assert not bound.allows("127.0.0.1") and not bound.allows("192.168.1.1")
    assert networks(("169.254.169.254/32",)).allows("169.254.169.254")  # when listed


def test_cidrs_are_checked() -> None:
    assert [str(n) for n in parse_cidrs("10.0.0.1, ::1")] == ["10.0.0.1/32", "::1/128"]
    with pytest.raises(ValueError, match="not a CIDR"):
        parse_cidrs("10.0.0.0/33")
