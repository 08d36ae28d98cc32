"""Lifecycle rules' filters as AWS reads them (userguide intro-lifecycle-rules.html and
intro-lifecycle-filters.html; the errors LocalStack recorded against AWS in
test_put_bucket_lifecycle_conf_exc), and which objects each filter takes."""

from __future__ import annotations

import pytest

from gateway.s3 import lifecycle
from gateway.s3.errors import S3Error


def document(filter_xml: str) -> bytes:
    return (
        "<LifecycleConfiguration><Rule><ID>r</ID><Status>Enabled</Status>"
        f"<Filter>{filter_xml}</Filter><Expiration><Days>1</Days></Expiration></Rule>"
        "</LifecycleConfiguration>"
    ).encode()


def one_rule(filter_xml: str) -> lifecycle.Rule:
    (rule,) = lifecycle.parse(document(filter_xml))
    return rule


def tag(key: str, value: str | None) -> str:
    inner = f"<Key>{key}</Key>" + ("" if value is None else f"<Value>{value}</Value>")
    return f"<Tag>{inner}</Tag>"


def test_each_single_condition() -> None:
    assert one_rule("").applies("any", 0, ())
    assert one_rule("<Prefix>logs/</Prefix>").applies("logs/a", 0, ())
    assert not one_rule("<Prefix>logs/</Prefix>").applies("other", 0, ())
    by_tag = one_rule(tag("team", "a"))
    assert by_tag.applies("k", 0, (("other", "x"), ("team", "a")))  # extra tags don't matter
    assert not by_tag.applies("k", 0, (("team", "b"),))
    assert not by_tag.applies("k", 0, ())
    bigger = one_rule("<ObjectSizeGreaterThan>100</ObjectSizeGreaterThan>")
    assert bigger.applies("k", 101, ()) and not bigger.applies("k", 100, ())
    smaller = one_rule("<ObjectSizeLessThan>100</ObjectSizeLessThan>")
    assert smaller.applies("k", 99, ()) and not smaller.applies("k", 100, ())


def test_and_takes_only_objects_matching_every_condition() -> None:
    rule = one_rule(
        "<And><Prefix>p/</Prefix>"
        + tag("a", "1")
        + tag("b", "2")
        + "<ObjectSizeGreaterThan>10</ObjectSizeGreaterThan>"
        + "<ObjectSizeLessThan>20</ObjectSizeLessThan></And>"
    )
    both = (("a", "1"), ("b", "2"))
    assert rule.applies("p/x", 15, both)
    assert not rule.applies("q/x", 15, both)  # prefix
    assert not rule.applies("p/x", 15, (("a", "1"),))  # one tag missing
    assert not rule.applies("p/x", 15, (("a", "1"), ("b", "3")))  # a value differs
    assert not rule.applies("p/x", 10, both)  # not greater than 10
    assert not rule.applies("p/x", 20, both)  # not less than 20
    tags_only = one_rule("<And>" + tag("a", "1") + tag("b", "2") + "</And>")
    assert tags_only.prefix == "" and tags_only.tags == both


def test_a_tag_without_a_value_takes_that_key_with_an_empty_value() -> None:
    # intro-lifecycle-filters.html: "If you specify only a Key element and no Value element,
    # the rule will apply only to objects that match the tag key and that do not have a
    # value specified".
    rule = one_rule(tag("flag", None))
    assert rule.applies("k", 0, (("flag", ""),))
    assert not rule.applies("k", 0, (("flag", "x"),))
    inside_and = one_rule("<And><Prefix>p/</Prefix>" + tag("flag", None) + "</And>")
    assert inside_and.applies("p/k", 0, (("flag", ""),))


@pytest.mark.parametrize(
    "filter_xml",
    [
        # Two conditions side by side: "When using more than one filter, you must wrap the
        # filters in an <And> element"; AWS answers MalformedXML (recorded by LocalStack).
        "<Prefix>p/</Prefix>" + tag("a", "1"),
        "<Prefix></Prefix><ObjectSizeGreaterThan>500</ObjectSizeGreaterThan>",
        "<Prefix></Prefix><And><Prefix>p</Prefix></And>",
        "<And></And>",  # an And of nothing
        "<And><Prefix>p</Prefix><Unknown>1</Unknown></And>",
        "<Tag><Value>v</Value></Tag>",  # a tag needs its key
    ],
)
def test_malformed_filters(filter_xml: str) -> None:
    with pytest.raises(S3Error) as exc:
        lifecycle.parse(document(filter_xml))
    assert exc.value.code == "MalformedXML"


def test_duplicate_tag_keys_in_and() -> None:
    with pytest.raises(S3Error) as exc:
        lifecycle.parse(document("<And>" + tag("a", "1") + tag("a", "2") + "</And>"))
    assert exc.value.code == "InvalidRequest"
    assert exc.value.message == "Duplicate Tag Keys are not allowed."
