"""The console's Topics page (gateway/console/topics.py) and a bucket's event notifications on
its page (gateway/console/browse.py), over plain HTTP against a real gateway on each catalog:
a topic made in the console is boto3's `sns` client's, and one deleted there is gone; an IAM
user refused sns:CreateTopic and sns:DeleteTopic by its policy is refused them in the console
too; an endpoint's secrets never on a page; a bucket's configuration shown with its
destination's backlog, which grows while the destination refuses and falls back to 0 once it
takes its records. And in a real browser (headless Chromium): a topic made by clicking, and
both pages at a phone's width without horizontal scrolling.

S3GW_CONSOLE_SCREENSHOTS=DIR saves the Topics screenshot of docs/console.md into DIR."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.test_console import ALICE, BOB, Console, Session, _shoot, _sign_in, _text
from tests.integration.test_console_iam import ALICE_NUMBER, _name, client, policy, start
from tests.integration.test_notification_delivery import Receiver
from tests.webdriver import Browser, browser_for_test

WAIT = 90.0  # seconds for the worker's backoff (at most 10 s) and a delivery


@pytest.fixture(scope="module")
def console(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[Console]:
    server = start(tmp_path_factory.mktemp("console-notify"), module_catalog)
    yield Console(server)
    server.stop()


@pytest.fixture(scope="module")
def receiver(module_catalog: str | None) -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def _arns(console: Console, keys: tuple[str, ...] = ALICE) -> list[str]:
    return [t["TopicArn"] for t in client(console, "sns", keys).list_topics()["Topics"]]


def test_a_topic_made_in_the_console_is_the_sns_apis(console: Console) -> None:
    alice = Session(console, ALICE)
    name = _name("made")
    arn = f"arn:aws:sns:us-east-1:{ALICE_NUMBER}:{name}"
    status, page = alice.act(
        "/topics",
        name=name,
        endpoint="http://127.0.0.1:9/hook/tok-4f9a2b?sig=zz81",
        verify_ssl="true",
        attributes="OpaqueData=from-the-console\namqp-exchange=events",
    )
    assert status == 200 and arn in page, page
    assert arn in _arns(console)
    shown = client(console, "sns", ALICE).get_topic_attributes(TopicArn=arn)["Attributes"]
    assert shown["push-endpoint"] == "http://127.0.0.1:9"
    assert shown["OpaqueData"] == "from-the-console" and shown["verify-ssl"] == "true"
    # The endpoint as GetTopicAttributes shows it: its path and query may be secrets.
    assert "<code>http://127.0.0.1:9</code>" in page and "OpaqueData=from-the-console" in page
    assert "tok-4f9a2b" not in page and "zz81" not in page

    # One made with boto3 is on the page; the console's delete is DeleteTopic.
    other = client(console, "sns", ALICE).create_topic(Name=_name("api"))["TopicArn"]
    assert other in alice.get("/topics")[1]
    status, page = alice.act("/topics/delete", arn=arn)
    assert status == 200 and arn not in page and other in page
    assert arn not in _arns(console) and other in _arns(console)
    log = "".join(console.server.log)
    assert re.search(r"ConsoleCreateTopic POST /topics 303 .* user=CONSOLEALICE", log)
    assert re.search(r"ConsoleDeleteTopic POST /topics/delete 303 .* user=CONSOLEALICE", log)


def test_the_console_refuses_what_the_api_refuses(console: Console) -> None:
    alice = Session(console, ALICE)
    before = _arns(console)
    # A password over plain HTTP (the console's here) is refused, and not said back.
    status, page = alice.act(
        "/topics", name=_name("pw"), endpoint="http://user:pw-s3cr3t@127.0.0.1:9/x"
    )
    assert status == 400 and "InvalidParameter" in page and 'role="alert"' in page, page
    assert "pw-s3cr3t" not in page
    for fields in (
        {"name": "bad/name"},
        {"name": _name("scheme"), "endpoint": "ftp://127.0.0.1/x"},
        {"name": _name("attr"), "attributes": "no-such-attribute=1"},
        {"name": _name("link-local"), "endpoint": "http://169.254.169.254/latest"},
    ):
        status, page = alice.act("/topics", **fields)
        assert status == 400 and "InvalidParameter" in page, (fields, page)
    assert _arns(console) == before


def test_an_iam_user_is_allowed_what_its_policy_allows(console: Console) -> None:
    iam = client(console, "iam", ALICE)
    user = _name("reader")
    iam.create_user(UserName=user)
    reads = {"Effect": "Allow", "Action": ["sns:ListTopics", "sns:GetTopicAttributes"]}
    iam.put_user_policy(
        UserName=user, PolicyName="reads", PolicyDocument=policy({**reads, "Resource": "*"})
    )
    made = iam.create_access_key(UserName=user)["AccessKey"]
    keys = (made["AccessKeyId"], made["SecretAccessKey"])
    kept = client(console, "sns", ALICE).create_topic(Name=_name("kept"))["TopicArn"]

    reader = Session(console, keys)
    status, page = reader.get("/topics")
    assert status == 200 and kept in page, page
    name = _name("refused")
    status, page = reader.act("/topics", name=name, endpoint="http://127.0.0.1:9/x")
    assert status == 403 and "AuthorizationError" in page and "sns:CreateTopic" in page, page
    status, page = reader.act("/topics/delete", arn=kept)
    assert status == 403 and "sns:DeleteTopic" in page, page
    arns = _arns(console)
    assert kept in arns and not any(a.endswith(":" + name) for a in arns)

    # Allowed CreateTopic, the same user makes one.
    creates = {"Effect": "Allow", "Action": "sns:CreateTopic", "Resource": "*"}
    iam.put_user_policy(UserName=user, PolicyName="creates", PolicyDocument=policy(creates))
    status, page = reader.act("/topics", name=name, endpoint="http://127.0.0.1:9/x")
    assert status == 200 and f"arn:aws:sns:us-east-1:{ALICE_NUMBER}:{name}" in page, page


def _backlog(alice: Session, bucket: str, arn: str) -> str:
    status, page = alice.get("/bucket", name=bucket)
    assert status == 200, page
    found = re.search(rf"<td><code>{re.escape(arn)}</code></td><td>([0-9]+\+?)</td>", page)
    assert found is not None, page
    return found.group(1)


def _wait_for_backlog(alice: Session, bucket: str, arn: str, wanted: str) -> None:
    deadline = time.monotonic() + WAIT
    shown = _backlog(alice, bucket, arn)
    while shown != wanted and time.monotonic() < deadline:
        time.sleep(0.5)
        shown = _backlog(alice, bucket, arn)
    assert shown == wanted, f"the backlog shows {shown}, not {wanted}, after {WAIT} s"


def test_a_buckets_configuration_and_its_destinations_backlog(
    console: Console, receiver: Receiver
) -> None:
    alice = Session(console, ALICE)
    s3 = client(console, "s3", ALICE)
    bucket, topic = _name("events"), _name("hook")
    s3.create_bucket(Bucket=bucket)
    status, page = alice.get("/bucket", name=bucket)
    assert status == 200 and "No notification configuration." in page, page

    path = f"/{topic}"
    status, page = alice.act("/topics", name=topic, endpoint=receiver.url + path)
    assert status == 200, page
    arn = f"arn:aws:sns:us-east-1:{ALICE_NUMBER}:{topic}"
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "TopicConfigurations": [
                {
                    "Id": "new-logs",
                    "TopicArn": arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "logs/"}]}},
                }
            ]
        },
    )
    status, page = alice.get("/bucket", name=bucket)
    assert "<td>new-logs</td><td>Topic</td><td>s3:ObjectCreated:*</td>" in page, page
    assert "<td>prefix logs/</td>" in page
    assert _backlog(alice, bucket, arn) == "0"

    # The destination refuses (503): each event waits in the outbox, counted on the page.
    receiver.refuse = 1_000_000
    for n in range(3):
        s3.put_object(Bucket=bucket, Key=f"logs/{n}", Body=b"x")
    s3.put_object(Bucket=bucket, Key="other/not-fired", Body=b"x")  # no row: the filter
    _wait_for_backlog(alice, bucket, arn, "3")

    # It takes them again: every record arrives, and the backlog is 0.
    with receiver.arrived:
        receiver.refuse = 0
    receiver.wait_for(path, "logs/2")
    _wait_for_backlog(alice, bucket, arn, "0")
    delivered = {r["s3"]["object"]["key"] for r in receiver.records(path)}
    assert delivered == {"logs/0", "logs/1", "logs/2"}


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = browser_for_test()
    opened.set_size(1280, 900)
    yield opened
    opened.close()


def _overflow(browser: Browser) -> Any:
    return browser.run(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth;"
    )


def test_topics_in_a_browser_and_at_a_phones_width(console: Console, browser: Browser) -> None:
    s3 = client(console, "s3", ALICE)
    bucket, topic = _name("phone"), _name("clicked-with-a-long-name-for-a-narrow-screen")
    arn = f"arn:aws:sns:us-east-1:{ALICE_NUMBER}:{topic}"
    _sign_in(browser, console, ALICE)
    browser.get(console.url + "/topics")
    browser.type("input[name=name]", topic)
    browser.type("input[name=endpoint]", "http://127.0.0.1:9/hook/a-long-path-token-0123456789")
    browser.click("form[action='/topics'] button")
    browser.wait_for_text(arn)
    assert arn in _arns(console)
    _shoot(browser, "topics")

    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "TopicConfigurations": [
                {"Id": "all-created", "TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}
            ]
        },
        SkipDestinationValidation=True,
    )
    browser.set_size(390, 844)
    for page in ("/topics", f"/bucket?name={bucket}"):
        browser.get(console.url + page)
        assert arn in _text(browser)
        assert _overflow(browser) <= 0, page
    # The delete button, on a phone.
    browser.get(console.url + "/topics")
    browser.click(f"form[action='/topics/delete'] input[value='{arn}'] ~ button")
    browser.wait_for_url(console.url + "/topics")
    deadline = time.monotonic() + WAIT
    while arn in _arns(console) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert arn not in _arns(console)


def test_a_buckets_replication_rules_and_their_backlog(console: Console) -> None:
    """The bucket page lists its replication rules (read-only) with each destination's
    backlog, 0 once the copies are made."""
    alice = Session(console, ALICE)
    s3 = client(console, "s3", ALICE)
    source, destination = _name("copied"), _name("copies")
    for name in (source, destination):
        s3.create_bucket(Bucket=name)
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    status, page = alice.get("/bucket", name=source)
    assert status == 200 and 'id="replication"' not in page
    s3.put_bucket_replication(
        Bucket=source,
        ReplicationConfiguration={
            "Role": "arn:aws:iam::123456789012:role/copier",
            "Rules": [
                {
                    "ID": "logs-out",
                    "Priority": 1,
                    "Status": "Enabled",
                    "Filter": {"Prefix": "logs/"},
                    "DeleteMarkerReplication": {"Status": "Disabled"},
                    "Destination": {"Bucket": f"arn:aws:s3:::{destination}"},
                }
            ],
        },
    )
    s3.put_object(Bucket=source, Key="logs/a", Body=b"a")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        head = s3.head_object(Bucket=source, Key="logs/a")
        if head.get("ReplicationStatus") == "COMPLETED":
            break
        time.sleep(0.2)
    assert head.get("ReplicationStatus") == "COMPLETED"
    status, page = alice.get("/bucket", name=source)
    assert "<td>logs-out</td><td>Enabled</td><td>prefix logs/</td>" in page, page
    assert _backlog(alice, source, f"arn:aws:s3:::{destination}") == "0"


def test_existing_objects_are_replicated_from_the_bucket_page(console: Console) -> None:
    """The bucket page's "Replicate existing objects" queues what was written before the
    rule, as `s3gw replicate resync` does: it is copied, and says COMPLETED."""
    alice = Session(console, ALICE)
    s3 = client(console, "s3", ALICE)
    source, destination = _name("before"), _name("after")
    for name in (source, destination):
        s3.create_bucket(Bucket=name)
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=source, Key="old", Body=b"made before the rule")
    status, page = alice.get("/bucket", name=source)
    assert "Replicate existing objects" not in page  # no rule yet
    s3.put_bucket_replication(
        Bucket=source,
        ReplicationConfiguration={
            "Role": "arn:aws:iam::123456789012:role/copier",
            "Rules": [
                {
                    "ID": "all",
                    "Priority": 1,
                    "Status": "Enabled",
                    "Filter": {},
                    "DeleteMarkerReplication": {"Status": "Disabled"},
                    "Destination": {"Bucket": f"arn:aws:s3:::{destination}"},
                }
            ],
        },
    )
    assert s3.head_object(Bucket=source, Key="old").get("ReplicationStatus") is None
    status, page = alice.get("/bucket", name=source)
    assert "Replicate existing objects" in page
    status, page = alice.act("/bucket/replication/resync", bucket=source)
    assert status == 200 and "queued in the background" in page, page
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if s3.head_object(Bucket=source, Key="old").get("ReplicationStatus") == "COMPLETED":
            break
        time.sleep(0.2)
    assert s3.head_object(Bucket=source, Key="old").get("ReplicationStatus") == "COMPLETED"
    copied = s3.get_object(Bucket=destination, Key="old")
    assert copied["Body"].read() == b"made before the rule"
    assert copied["ReplicationStatus"] == "REPLICA"
    # Bob may not: AccessDenied, nothing queued.
    bob = Session(console, BOB)
    status, page = bob.act("/bucket/replication/resync", bucket=source)
    assert status == 403 and "AccessDenied" in page, page
