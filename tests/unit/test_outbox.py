"""The outbox's values (gateway/store/outbox.py) and which configurations an event fires
(gateway/notify/configuration.destinations, what the Store records in a row)."""

from __future__ import annotations

from gateway.notify import configuration
from gateway.store import outbox

_DOC = """<NotificationConfiguration>
<TopicConfiguration><Id>jpg</Id><Topic>arn:aws:sns:us-east-1:a:t</Topic>
<Event>s3:ObjectCreated:*</Event>
<Filter><S3Key><FilterRule><Name>prefix</Name><Value>images/</Value></FilterRule>
<FilterRule><Name>suffix</Name><Value>.jpg</Value></FilterRule></S3Key></Filter>
</TopicConfiguration>
<QueueConfiguration><Id>gone</Id><Queue>arn:aws:sqs:us-east-1:a:q</Queue>
<Event>s3:ObjectRemoved:Delete</Event></QueueConfiguration>
</NotificationConfiguration>"""


def test_destinations_follow_the_filter_and_the_events() -> None:
    fire = configuration.destinations
    assert fire(_DOC, outbox.PUT, "images/a.jpg") == (("jpg", "arn:aws:sns:us-east-1:a:t"),)
    assert fire(_DOC, outbox.COMPLETE, "images/a.jpg") == (("jpg", "arn:aws:sns:us-east-1:a:t"),)
    assert fire(_DOC, outbox.PUT, "images/a.png") == ()  # the wrong suffix
    assert fire(_DOC, outbox.PUT, "other/a.jpg") == ()  # the wrong prefix
    assert fire(_DOC, outbox.MARKER, "images/a.jpg") == ()  # an event not configured
    assert fire(_DOC, outbox.DELETE, "any") == (("gone", "arn:aws:sqs:us-east-1:a:q"),)


def test_the_store_names_events_as_aws_does() -> None:
    from gateway.notify import events

    named = [
        outbox.PUT,
        outbox.POST,
        outbox.COPY,
        outbox.COMPLETE,
        outbox.DELETE,
        outbox.MARKER,
        outbox.EXPIRED,
        outbox.EXPIRED_MARKER,
        outbox.TAGGED,
        outbox.UNTAGGED,
        outbox.ACL,
    ]
    assert all(name in events.CONCRETE for name in named)


def test_facts_round_trip() -> None:
    facts = outbox.Facts(
        "owner", "arn:aws:iam::1:user/u", "127.0.0.1", "R1", "H1", 5, "abc", (("c", "arn"),)
    )
    assert outbox.Facts.from_json(facts.to_json()) == facts
    removal = outbox.Facts("o", "", "", "", "", None, None, ())
    assert outbox.Facts.from_json(removal.to_json()) == removal


_TOPIC = ("jpg", "arn:aws:sns:us-east-1:a:t")
_LOGS = ("logs", "arn:aws:s3:::offsite")
_ALL = ("all", "arn:aws:s3:::backup")


def test_a_resync_queues_what_a_rule_copies_and_is_not_copied_yet() -> None:
    fired = (_TOPIC, _LOGS, _ALL)
    # Never copied, pending or failed: queued for the rules only, never to notifications.
    for status in (None, "PENDING", "FAILED"):
        assert outbox.requeued(status, False, fired, None) == (outbox.QUEUED, (_LOGS, _ALL))
    assert outbox.requeued(None, False, fired, "all") == (outbox.QUEUED, (_ALL,))
    # Copied already.
    assert outbox.requeued("COMPLETED", False, fired, None) == (outbox.REPLICATED, ())
    # Not the rules' to copy: none applies (or not the one asked for), SSE-C, a replica.
    assert outbox.requeued(None, False, (_TOPIC,), None) == (outbox.SKIPPED, ())
    assert outbox.requeued(None, False, fired, "other") == (outbox.SKIPPED, ())
    assert outbox.requeued(None, True, fired, None) == (outbox.SKIPPED, ())
    assert outbox.requeued("REPLICA", False, fired, None) == (outbox.SKIPPED, ())
    assert outbox.requeued("COMPLETED", False, (), None) == (outbox.SKIPPED, ())


def test_a_destinations_backlog_matches_its_own_arn_only() -> None:
    arn = "arn:aws:sns:us-east-1:123456789012:t_1"
    facts = outbox.Facts("o", "p", "ip", "r", "h", 1, "e", (("id", arn),)).to_json()
    assert outbox.naming(arn) in facts
    # Not a longer ARN it begins, nor an id that spells the ARN (JSON escapes its quotes).
    assert outbox.naming(arn[:-1]) not in facts
    spelled = outbox.Facts("o", "p", "ip", "r", "h", 1, "e", ((f'","{arn}"]', "x"),))
    assert outbox.naming(arn) not in spelled.to_json()
    assert str(outbox.Backlog(3, False)) == "3" and str(outbox.Backlog(3, True)) == "3+"
