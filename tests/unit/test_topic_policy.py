"""Who may publish a bucket's events to a topic (authorize.decide_topic_publish, as a pure
function): the bucket owner's own topics always; another account's only as its Policy allows
sns:Publish to S3 acting for the bucket's account, in the principal forms Ceph RGW's tests
and AWS's documentation use. And what a topic's Policy attribute may be (SNS's
InvalidParameter)."""

from __future__ import annotations

import json

import pytest

from gateway.notify import topics
from gateway.s3.authorize import decide_topic_publish
from gateway.users import account_number

OWNER = "topic-owner-id"  # canonical ids, as buckets and topics are kept
ALT = "bucket-owner-id"
OTHER = "someone-else-id"
TOPIC = f"arn:aws:sns:us-east-1:{account_number(OWNER)}:t"


def _policy(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _allow(principal: object, **extra: object) -> dict:
    return {
        "Effect": "Allow",
        "Principal": principal,
        "Action": "sns:Publish",
        "Resource": TOPIC,
        **extra,
    }


def publishes(text: str | None, bucket: str = "b", owner: str = ALT) -> bool:
    return decide_topic_publish(TOPIC, text, bucket, owner)


def test_the_owners_own_topic_needs_no_policy() -> None:
    assert publishes(None, owner=OWNER)
    # An explicit Deny is not read for the topic's own account (Ceph's rule: no policy needed).
    assert publishes(_policy({**_allow("*"), "Effect": "Deny"}), owner=OWNER)


def test_another_accounts_topic_without_a_policy_refuses() -> None:
    assert not publishes(None)
    assert not publishes("")


@pytest.mark.parametrize(
    "principal",
    [
        {"AWS": f"arn:aws:iam::{account_number(ALT)}:root"},  # what GetUser shows a root
        {"AWS": account_number(ALT)},
        {"AWS": [f"arn:aws:iam::{account_number(OTHER)}:root", account_number(ALT)]},
        {"AWS": f"arn:aws:iam::{ALT}:root"},  # an ARN written with the canonical id
        "*",
        {"AWS": "*"},
        {"Service": "s3.amazonaws.com"},
    ],
)
def test_principals_that_name_the_bucket_owners_account_or_s3(principal: object) -> None:
    assert publishes(_policy(_allow(principal)))


@pytest.mark.parametrize(
    "principal",
    [
        {"AWS": f"arn:aws:iam::{account_number(OTHER)}:root"},
        {"AWS": account_number(OTHER)},
        {"Service": "sqs.amazonaws.com"},
    ],
)
def test_principals_that_name_someone_else(principal: object) -> None:
    assert not publishes(_policy(_allow(principal)))


def test_only_publish_on_this_topic_is_granted() -> None:
    principal = {"AWS": account_number(ALT)}
    assert not publishes(_policy({**_allow(principal), "Action": "sns:GetTopicAttributes"}))
    assert not publishes(_policy({**_allow(principal), "Resource": TOPIC + "-other"}))
    assert publishes(_policy({**_allow(principal), "Action": "SNS:Publish"}))  # any case
    assert publishes(_policy({**_allow(principal), "Action": "sns:*", "Resource": "*"}))


@pytest.mark.parametrize(
    ("condition", "bucket", "allowed"),
    [
        ({"ArnLike": {"aws:SourceArn": "arn:aws:s3:::b"}}, "b", True),
        ({"ArnLike": {"aws:SourceArn": "arn:aws:s3:*:*:b"}}, "b", True),
        ({"ArnEquals": {"aws:SourceArn": "arn:aws:s3:::b"}}, "b", True),
        ({"StringEquals": {"aws:SourceArn": "arn:aws:s3:::b"}}, "b", True),
        ({"StringLike": {"aws:SourceArn": "arn:aws:s3:::b*"}}, "b2", True),
        ({"ArnLike": {"aws:SourceArn": "arn:aws:s3:::b"}}, "other", False),
        ({"StringEquals": {"aws:SourceAccount": account_number(ALT)}}, "b", True),
        ({"StringEquals": {"aws:SourceAccount": account_number(OTHER)}}, "b", False),
        (
            {
                "ArnLike": {"aws:SourceArn": "arn:aws:s3:::b"},
                "StringEquals": {"aws:SourceAccount": account_number(ALT)},
            },
            "b",
            True,
        ),
    ],
)
def test_s3_as_the_service_with_aws_conditions(condition: dict, bucket: str, allowed: bool) -> None:
    text = _policy(_allow({"Service": "s3.amazonaws.com"}, Condition=condition))
    assert publishes(text, bucket) is allowed


def test_an_explicit_deny_wins() -> None:
    allow = _allow({"AWS": account_number(ALT)})
    deny = {**_allow({"Service": "s3.amazonaws.com"}), "Effect": "Deny"}
    assert not publishes(_policy(allow, deny))
    narrowed = {
        **_allow("*"),
        "Effect": "Deny",
        "Condition": {"StringNotEquals": {"aws:SourceArn": "arn:aws:s3:::b"}},
    }
    assert publishes(_policy(allow, narrowed), "b")
    assert not publishes(_policy(allow, narrowed), "c")


def test_a_stored_policy_that_does_not_parse_allows_nothing() -> None:
    assert not publishes("{not json")
    assert not publishes(json.dumps({"Statement": [{"Effect": "Allow"}]}))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "Policies must be valid JSON and the first byte must be '{'"),
        ("[]", "Policies must be valid JSON and the first byte must be '{'"),
        (json.dumps({"Version": "2012-10-17"}), "Missing required field Statement"),
        (
            _policy({"Effect": "Allow", "Action": "sns:Publish", "Resource": TOPIC}),
            "Missing required field Principal",
        ),
        (
            _policy({**_allow("*"), "Action": "s3:GetObject"}),
            "Policy statement action out of service scope!",
        ),
        (
            _policy(_allow("*", Condition={"StringEquals": {"s3:prefix": "x"}})),
            "Policy has an invalid condition key",
        ),
    ],
)
def test_a_policy_attribute_sns_would_refuse(text: str, message: str) -> None:
    topic = topics.Topic(OWNER, "t", "us-east-1")
    with pytest.raises(topics.TopicError) as refused:
        topic.with_attribute("Policy", text)
    assert refused.value.code == "InvalidParameter"
    assert refused.value.message == f"Invalid parameter: Policy Error: {message}"


def test_a_policy_attribute_is_kept_and_an_empty_one_means_none() -> None:
    topic = topics.Topic(OWNER, "t", "us-east-1")
    text = _policy(_allow({"AWS": account_number(ALT)}))
    kept = topic.with_attribute("Policy", text)
    assert kept.shown()["Policy"] == text
    assert kept.publishes("b", ALT)
    # s3-tests' test_account_topic sets an empty Policy: accepted (no policy).
    emptied = kept.with_attribute("Policy", "")
    assert not emptied.publishes("b", ALT)


def test_the_registry_of_an_arn_is_its_accounts() -> None:
    accounts = {account_number(OWNER): OWNER}
    named = topics.parse_arn(TOPIC)
    assert named is not None
    assert topics.registry_account(named, ALT, accounts) == OWNER
    assert topics.registry_account(named, OWNER, {}) == OWNER
    unknown = topics.parse_arn(f"arn:aws:sns:us-east-1:{account_number(OTHER)}:t")
    assert unknown is not None and topics.registry_account(unknown, ALT, accounts) is None
