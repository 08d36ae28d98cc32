"""Another account's topic as a bucket's destination (docs/notifications.md, "the registry
rule"; s3-tests' test_cross_account_topic_publish): refused with 403 AccessDenied until the
topic's Policy allows sns:Publish to the bucket's account, in Ceph's form (the account's root
ARN, as IAM's GetUser shows it) or AWS's (the service s3.amazonaws.com with aws:SourceArn);
an explicit Deny wins; the test event and the bucket's events reach the other account's
webhook; a Policy replaced by one that no longer allows drops the next events (counted). Two
accounts of a users file, on both catalogs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.integration.accounts import ALT_NUMBER, Accounts, accounts_fixture
from tests.integration.test_notification_delivery import WAIT, Receiver, _metric
from tests.integration.test_notifications import _client

accounts = accounts_fixture("aws")
OWNER_KEY = ("OWNERACCESSKEY000001", "owner-secret")  # the topics' account
ALT_KEY = ("ALTACCESSKEY00000001", "alt-secret")  # the buckets' account
CREATED = ["s3:ObjectCreated:*"]


@pytest.fixture(scope="module")
def receiver(accounts: Accounts) -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def _topic(accounts: Accounts, name: str, url: str, policy: str | None = None) -> str:
    sns = _client(accounts.server, "sns", OWNER_KEY)
    attributes = {"push-endpoint": url}
    if policy is not None:
        attributes["Policy"] = policy
    return sns.create_topic(Name=name, Attributes=attributes)["TopicArn"]


def _set_policy(accounts: Accounts, arn: str, policy: str) -> None:
    sns = _client(accounts.server, "sns", OWNER_KEY)
    sns.set_topic_attributes(TopicArn=arn, AttributeName="Policy", AttributeValue=policy)


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _publish(arn: str, principal: object, effect: str = "Allow", **extra: Any) -> dict[str, Any]:
    return {
        "Effect": effect,
        "Principal": principal,
        "Action": "sns:Publish",
        "Resource": arn,
        **extra,
    }


def _alt_root_arn(accounts: Accounts) -> str:
    """What s3-tests names the bucket's account by: IAM's GetUser of its root."""
    return _client(accounts.server, "iam", ALT_KEY).get_user()["User"]["Arn"]


def _put(accounts: Accounts, bucket: str, arn: str) -> tuple[str, int] | None:
    """(code, status) of the bucket's account's PutBucketNotificationConfiguration naming
    the topic; None when it is accepted."""
    try:
        accounts.alt.put_bucket_notification_configuration(
            Bucket=bucket,
            NotificationConfiguration={
                "TopicConfigurations": [{"Id": "x", "TopicArn": arn, "Events": CREATED}]
            },
        )
    except ClientError as exc:
        return exc.response["Error"]["Code"], exc.response["ResponseMetadata"]["HTTPStatusCode"]
    return None


def _configured(accounts: Accounts, bucket: str) -> list[str]:
    got = accounts.alt.get_bucket_notification_configuration(Bucket=bucket)
    return [c["TopicArn"] for c in got.get("TopicConfigurations", [])]


def test_refused_without_a_policy_and_nothing_kept(accounts: Accounts, receiver: Receiver) -> None:
    arn = _topic(accounts, "xa-none", f"{receiver.url}/xa-none")
    accounts.alt.create_bucket(Bucket="xa-none")
    assert _put(accounts, "xa-none", arn) == ("AccessDenied", 403)
    assert _configured(accounts, "xa-none") == []
    assert receiver.all("/xa-none") == []  # not even the test event
    # A Policy for some other account, or for another action, allows nothing either.
    _set_policy(accounts, arn, _policy(_publish(arn, {"AWS": "111111111111"})))
    assert _put(accounts, "xa-none", arn) == ("AccessDenied", 403)
    _set_policy(
        accounts,
        arn,
        _policy({**_publish(arn, {"AWS": ALT_NUMBER}), "Action": "sns:GetTopicAttributes"}),
    )
    assert _put(accounts, "xa-none", arn) == ("AccessDenied", 403)
    # The other account's topic that does not exist stays AWS's 400.
    missing = arn.rsplit(":", 1)[0] + ":xa-no-such-topic"
    assert _put(accounts, "xa-none", missing) == ("InvalidArgument", 400)
    # Nor may the bucket's account read or change the topic (s3-tests' test_cross_account_topic).
    sns_alt = _client(accounts.server, "sns", ALT_KEY)
    with pytest.raises(ClientError) as caught:
        sns_alt.set_topic_attributes(TopicArn=arn, AttributeName="Policy", AttributeValue="")
    assert caught.value.response["Error"]["Code"] == "AuthorizationError"


def test_accepted_with_a_policy_naming_the_accounts_root(
    accounts: Accounts, receiver: Receiver
) -> None:
    arn = _topic(accounts, "xa-root", f"{receiver.url}/xa-root")
    accounts.alt.create_bucket(Bucket="xa-root")
    assert _put(accounts, "xa-root", arn) == ("AccessDenied", 403)
    root = _alt_root_arn(accounts)
    assert root == f"arn:aws:iam::{ALT_NUMBER}:root"
    policy = _policy(_publish(arn, {"AWS": root}))
    _set_policy(accounts, arn, policy)
    assert _put(accounts, "xa-root", arn) is None
    assert _configured(accounts, "xa-root") == [arn]
    # The test event went to the other account's endpoint.
    (event,) = receiver.all("/xa-root")
    assert event["Event"] == "s3:TestEvent" and event["Bucket"] == "xa-root"
    # The topic's owner sees the Policy as it was set.
    sns = _client(accounts.server, "sns", OWNER_KEY)
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["Policy"] == policy


def test_s3_as_the_service_with_the_buckets_arn(accounts: Accounts, receiver: Receiver) -> None:
    arn = _topic(accounts, "xa-service", f"{receiver.url}/xa-service")
    condition = {
        "ArnLike": {"aws:SourceArn": "arn:aws:s3:::xa-service-yes"},
        "StringEquals": {"aws:SourceAccount": ALT_NUMBER},
    }
    _set_policy(
        accounts, arn, _policy(_publish(arn, {"Service": "s3.amazonaws.com"}, Condition=condition))
    )
    for bucket in ("xa-service-yes", "xa-service-no"):
        accounts.alt.create_bucket(Bucket=bucket)
    assert _put(accounts, "xa-service-yes", arn) is None
    assert _put(accounts, "xa-service-no", arn) == ("AccessDenied", 403)
    assert _configured(accounts, "xa-service-no") == []


def test_an_explicit_deny_wins(accounts: Accounts, receiver: Receiver) -> None:
    arn = _topic(accounts, "xa-deny", f"{receiver.url}/xa-deny")
    accounts.alt.create_bucket(Bucket="xa-deny")
    allow = _publish(arn, "*")
    deny = _publish(arn, {"AWS": f"arn:aws:iam::{ALT_NUMBER}:root"}, effect="Deny")
    _set_policy(accounts, arn, _policy(allow, deny))
    assert _put(accounts, "xa-deny", arn) == ("AccessDenied", 403)
    _set_policy(accounts, arn, _policy(allow))
    assert _put(accounts, "xa-deny", arn) is None


def test_a_policy_that_is_no_policy_is_refused(accounts: Accounts, receiver: Receiver) -> None:
    arn = _topic(accounts, "xa-bad", f"{receiver.url}/xa-bad")
    sns = _client(accounts.server, "sns", OWNER_KEY)
    for text in ("{not json", json.dumps({"Version": "2012-10-17"})):
        with pytest.raises(ClientError) as caught:
            sns.set_topic_attributes(TopicArn=arn, AttributeName="Policy", AttributeValue=text)
        assert caught.value.response["Error"]["Code"] == "InvalidParameter"
    with pytest.raises(ClientError) as caught:
        _topic(accounts, "xa-bad-2", f"{receiver.url}/xa-bad", policy="[]")
    assert caught.value.response["Error"]["Code"] == "InvalidParameter"
    # Empty: no policy (s3-tests' test_account_topic sets it so).
    sns.set_topic_attributes(TopicArn=arn, AttributeName="Policy", AttributeValue="")


def test_events_delivered_then_dropped_once_the_policy_no_longer_allows(
    accounts: Accounts, receiver: Receiver
) -> None:
    server = accounts.server
    arn = _topic(accounts, "xa-live", f"{receiver.url}/xa-live")
    _set_policy(accounts, arn, _policy(_publish(arn, {"AWS": ALT_NUMBER})))
    accounts.alt.create_bucket(Bucket="xa-live")
    assert _put(accounts, "xa-live", arn) is None
    accounts.alt.put_object(Bucket="xa-live", Key="one", Body=b"1")
    (record,) = receiver.wait_for("/xa-live", "one")
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["bucket"]["arn"] == "arn:aws:s3:::xa-live"
    assert record["s3"]["configurationId"] == "x"
    # The topic's owner takes the permission back: the next event is judged, and dropped.
    dropped = _metric(server, "s3gw_notifications_dropped_total")
    _set_policy(accounts, arn, _policy(_publish(arn, {"AWS": "111111111111"})))
    accounts.alt.put_object(Bucket="xa-live", Key="two", Body=b"2")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if _metric(server, "s3gw_notifications_dropped_total") > dropped:
            break
        time.sleep(0.2)
    assert _metric(server, "s3gw_notifications_dropped_total") == dropped + 1
    keys = [r["s3"]["object"]["key"] for r in receiver.records("/xa-live")]
    assert keys == ["one"]
