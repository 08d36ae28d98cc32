"""The bucket-policy language: parsing with AWS's MalformedPolicy messages, and evaluation
(Deny over Allow, principals, actions, resources, conditions)."""

from __future__ import annotations

import json

import pytest

from gateway.s3 import policy
from gateway.s3.errors import S3Error
from gateway.s3.policy import Caller, Effect, PolicyRequest
from gateway.users import account_number

BUCKET = "bkt"
ALICE = Caller(account_number("alice-id"))
BOB = Caller(account_number("bob-id"))
ANON = Caller(None)


def doc(*statements: dict, **top: object) -> str:
    return json.dumps({"Version": "2012-10-17", **top, "Statement": list(statements)})


def stmt(**kw: object) -> dict:
    base: dict[str, object] = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{BUCKET}/*",
    }
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


def verdict(
    text: str,
    caller: Caller = ALICE,
    action: str = "s3:GetObject",
    key: str | None = "k",
    values: dict[str, list[str]] | None = None,
) -> Effect | None:
    resource = f"arn:aws:s3:::{BUCKET}" + (f"/{key}" if key is not None else "")
    lookup = (values or {}).get
    return policy.parse(text, BUCKET).evaluate(PolicyRequest(caller, action, resource, lookup))


def malformed(text: str | bytes) -> str:
    with pytest.raises(S3Error) as exc:
        policy.parse(text, BUCKET)
    assert exc.value.code == "MalformedPolicy" and exc.value.status == 400
    return exc.value.message


# -- parsing -------------------------------------------------------------------------------------


def test_recorded_messages() -> None:
    # LS api.snap:2910, recorded on AWS.
    assert malformed("") == "Policies must be valid JSON and the first byte must be '{'"
    assert malformed("not json") == "Policies must be valid JSON and the first byte must be '{'"
    assert malformed("[]") == "Policies must be valid JSON and the first byte must be '{'"
    assert malformed("{}") == "Missing required field Statement"


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (stmt(Effect="Maybe"), "Invalid effect: Maybe"),
        (stmt(Action="s3:FlyAway"), "Policy has invalid action"),
        (stmt(Action="ec2:RunInstances"), "Policy has invalid action"),
        (stmt(Resource="arn:aws:s3:::other/*"), "Policy has invalid resource"),
        (stmt(Resource="*"), "Policy has invalid resource"),
        (stmt(Principal={"AWS": "not an arn!"}), "Invalid principal in policy"),
        (stmt(Principal={"Nobody": "x"}), "Invalid principal in policy"),
        (stmt(Principal=None, NotPrincipal={"AWS": "bob-id"}), None),  # Allow + NotPrincipal
        (stmt(Condition={"StringEqualz": {"aws:Referer": "x"}}), "Invalid Condition type"),
        (stmt(Condition={"StringEquals": {"s3:nonsense": "x"}}), "invalid condition key"),
        (stmt(Condition={"IpAddress": {"aws:SourceIp": "300.1.1.1/8"}}), "Invalid Condition"),
        (stmt(Principal=None), "Missing required field Principal"),
        (stmt(Action=None), "Missing required field Action"),
        (stmt(Resource=None), "Missing required field Resource"),
        (stmt(Action="s3:GetObject", NotAction="s3:PutObject"), "Action and NotAction"),
    ],
)
def test_malformed_statements(statement: dict, message: str | None) -> None:
    got = malformed(doc(statement))
    if message is not None:
        assert message.lower() in got.lower()


def test_version_size_and_duplicates() -> None:
    assert "version" in malformed(json.dumps({"Version": "2020-01-01", "Statement": [stmt()]}))
    # 20 KB, measured without whitespace (so padding does not count).
    padded = doc(stmt()).replace(",", "," + " " * 30_000, 1)
    policy.parse(padded, BUCKET)
    many = doc(*[stmt(Sid=f"s{i}") for i in range(200)])
    assert "size" in malformed(many)
    assert "Duplicate" in malformed('{"Statement": [], "Statement": []}')


def test_single_statement_object_and_2008_version() -> None:
    text = json.dumps({"Version": "2008-10-17", "Statement": stmt()})
    assert verdict(text) is Effect.ALLOW


# -- evaluation ----------------------------------------------------------------------------------


def test_deny_beats_allow_and_no_match_is_no_verdict() -> None:
    text = doc(stmt(), stmt(Effect="Deny", Resource=f"arn:aws:s3:::{BUCKET}/secret/*"))
    assert verdict(text, key="public/a") is Effect.ALLOW
    assert verdict(text, key="secret/a") is Effect.DENY
    assert verdict(text, action="s3:PutObject") is None
    assert verdict(text, key=None, action="s3:ListBucket") is None


def test_principals() -> None:
    anyone = doc(stmt(Principal={"AWS": "*"}))
    assert verdict(anyone, ANON) is Effect.ALLOW
    for principal in (
        {"AWS": "arn:aws:iam::alice-id:root"},
        {"AWS": ["bob-id", "alice-id"]},
        {"CanonicalUser": "alice-id"},
        {"AWS": "arn:aws:iam::alice-id:user/anyone"},
    ):
        text = doc(stmt(Principal=principal))
        assert verdict(text, ALICE) is Effect.ALLOW, principal
        assert verdict(text, ANON) is None
    assert verdict(doc(stmt(Principal={"AWS": "bob-id"})), ALICE) is None
    # A user name is no identity: display names are not unique.
    assert verdict(doc(stmt(Principal={"AWS": "arn:aws:iam::bob-id:user/alice"})), ALICE) is None
    assert verdict(doc(stmt(Principal={"Service": "logging.s3.amazonaws.com"})), ALICE) is None
    not_bob = doc(stmt(Effect="Deny", Principal=None, NotPrincipal={"AWS": "bob-id"}))
    assert verdict(not_bob, ALICE) is Effect.DENY
    assert verdict(not_bob, ANON) is Effect.DENY
    assert verdict(not_bob, BOB) is None


def test_actions_and_resources_with_wildcards() -> None:
    text = doc(stmt(Action=["s3:Get*", "s3:List?ucket"], Resource=f"arn:aws:s3:::{BUCKET}*"))
    assert verdict(text, action="s3:GetObjectAcl") is Effect.ALLOW
    assert verdict(text, action="s3:ListBucket", key=None) is Effect.ALLOW
    assert verdict(text, action="s3:PutObject") is None
    # Action names are case-insensitive; resources are not.
    assert verdict(doc(stmt(Action="S3:getobject")), action="s3:GetObject") is Effect.ALLOW
    nr = doc(stmt(Resource=None, NotResource=f"arn:aws:s3:::{BUCKET}/private/*"))
    assert verdict(nr, key="open") is Effect.ALLOW
    assert verdict(nr, key="private/x") is None
    na = doc(stmt(Action=None, NotAction="s3:Delete*"))
    assert verdict(na, action="s3:PutObject") is Effect.ALLOW
    assert verdict(na, action="s3:DeleteObject") is None
    assert verdict(doc(stmt(Action="*")), action="s3:PutBucketAcl") is Effect.ALLOW


def cond(condition: dict, values: dict[str, list[str]] | None) -> bool:
    return verdict(doc(stmt(Condition=condition)), values=values) is Effect.ALLOW


def test_string_conditions() -> None:
    eq = {"StringEquals": {"s3:x-amz-acl": ["public-read", "private"]}}
    assert cond(eq, {"s3:x-amz-acl": ["private"]})
    assert not cond(eq, {"s3:x-amz-acl": ["authenticated-read"]})
    assert not cond(eq, None)
    ne = {"StringNotEquals": {"s3:x-amz-acl": "public-read"}}
    assert cond(ne, {"s3:x-amz-acl": ["private"]})
    assert cond(ne, None)  # an absent key is "not equal"
    like = {"StringLike": {"aws:Referer": "http://www.example.com/*"}}
    assert cond(like, {"aws:referer": ["http://www.example.com/index.html"]})
    assert not cond(like, {"aws:referer": ["http://example.com/"]})
    if_exists = {"StringLikeIfExists": {"aws:Referer": "http://www.example.com/*"}}
    assert cond(if_exists, None)
    assert not cond(if_exists, {"aws:referer": ["http://evil/"]})
    ic = {"StringEqualsIgnoreCase": {"s3:x-amz-metadata-directive": "replace"}}
    assert cond(ic, {"s3:x-amz-metadata-directive": ["REPLACE"]})


def test_numeric_date_bool_ip_arn_null() -> None:
    assert cond({"NumericLessThanEquals": {"s3:max-keys": "10"}}, {"s3:max-keys": ["10"]})
    assert not cond({"NumericLessThan": {"s3:max-keys": 10}}, {"s3:max-keys": ["11"]})
    assert not cond({"NumericEquals": {"s3:max-keys": "1"}}, {"s3:max-keys": ["x"]})
    before = {"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}
    assert cond(before, {"aws:currenttime": ["2026-11-30T12:00:00Z"]})
    assert not cond(before, {"aws:currenttime": ["2031-01-01T00:00:00Z"]})
    secure = {"Bool": {"aws:SecureTransport": "false"}}
    assert cond(secure, {"aws:securetransport": ["false"]})
    assert not cond(secure, {"aws:securetransport": ["true"]})
    assert cond({"Bool": {"aws:SecureTransport": False}}, {"aws:securetransport": ["false"]})
    ip = {"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "2001:db8::/32"]}}
    assert cond(ip, {"aws:sourceip": ["10.1.2.3"]})
    assert cond(ip, {"aws:sourceip": ["2001:db8::1"]})
    assert not cond(ip, {"aws:sourceip": ["127.0.0.1"]})
    assert cond({"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, {"aws:sourceip": ["127.0.0.1"]})
    arn = {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:root"}}
    assert cond(arn, {"aws:principalarn": ["arn:aws:iam::alice-id:root"]})
    null = {"Null": {"s3:x-amz-server-side-encryption": "true"}}
    assert cond(null, None)
    assert not cond(null, {"s3:x-amz-server-side-encryption": ["AES256"]})


# Every condition operator with a value it accepts, and a request value it rejects.
OPERATOR_CASES = [
    ("StringEquals", "a", "b"),
    ("StringNotEquals", "a", "a"),
    ("StringEqualsIgnoreCase", "a", "b"),
    ("StringNotEqualsIgnoreCase", "a", "A"),
    ("StringLike", "a*", "b"),
    ("StringNotLike", "a*", "ab"),
    ("NumericEquals", "1", "2"),
    ("NumericNotEquals", "1", "1"),
    ("NumericLessThan", "1", "2"),
    ("NumericLessThanEquals", "1", "2"),
    ("NumericGreaterThan", "1", "0"),
    ("NumericGreaterThanEquals", "1", "0"),
    ("DateEquals", "2020-01-01T00:00:00Z", "2021-01-01T00:00:00Z"),
    ("DateNotEquals", "2020-01-01T00:00:00Z", "2020-01-01T00:00:00Z"),
    ("DateLessThan", "2020-01-01T00:00:00Z", "2021-01-01T00:00:00Z"),
    ("DateLessThanEquals", "2020-01-01T00:00:00Z", "2021-01-01T00:00:00Z"),
    ("DateGreaterThan", "2020-01-01T00:00:00Z", "2019-01-01T00:00:00Z"),
    ("DateGreaterThanEquals", "2020-01-01T00:00:00Z", "2019-01-01T00:00:00Z"),
    ("Bool", "true", "false"),
    ("BinaryEquals", "QUJD", "REVG"),
    ("IpAddress", "10.0.0.0/8", "192.168.0.1"),
    ("NotIpAddress", "10.0.0.0/8", "10.1.2.3"),
    ("ArnEquals", "arn:aws:iam::a:root", "arn:aws:iam::b:root"),
    ("ArnNotEquals", "arn:aws:iam::a:root", "arn:aws:iam::a:root"),
    ("ArnLike", "arn:aws:iam::*:root", "arn:aws:s3:::b"),
    ("ArnNotLike", "arn:aws:iam::*:root", "arn:aws:iam::a:root"),
]


@pytest.mark.parametrize(("operator", "wanted", "rejected"), OPERATOR_CASES)
@pytest.mark.parametrize("quantifier", ["", "ForAnyValue:", "ForAllValues:"])
def test_every_operator_with_if_exists_holds_on_an_absent_key(
    operator: str, wanted: str, rejected: str, quantifier: str
) -> None:
    # reference_policies_elements_condition_operators.html: "If the key is not present,
    # evaluate the condition element as true" (every operator but Null).
    condition = {f"{quantifier}{operator}IfExists": {"aws:Referer": wanted}}
    assert cond(condition, None)
    # Present, the key is judged as without IfExists.
    assert not cond(condition, {"aws:referer": [rejected]})


def test_null_has_no_if_exists() -> None:
    message = malformed(doc(stmt(Condition={"NullIfExists": {"aws:Referer": "true"}})))
    assert message == "Invalid Condition type : NullIfExists"


def test_set_operators_and_tags() -> None:
    any_of = {"ForAnyValue:StringEquals": {"s3:RequestObjectTagKeys": ["a", "b"]}}
    assert cond(any_of, {"s3:requestobjecttagkeys": ["z", "b"]})
    assert not cond(any_of, {"s3:requestobjecttagkeys": []})
    all_of = {"ForAllValues:StringEquals": {"s3:RequestObjectTagKeys": ["a", "b"]}}
    assert cond(all_of, {"s3:requestobjecttagkeys": ["a"]})
    assert not cond(all_of, {"s3:requestobjecttagkeys": ["a", "z"]})
    assert cond(all_of, None)
    tag = {"StringEquals": {"s3:ExistingObjectTag/security": "public"}}
    assert cond(tag, {"s3:existingobjecttag/security": ["public"]})
    assert not cond(tag, None)


def test_conditions_are_anded_within_a_statement() -> None:
    both = {
        "StringEquals": {"s3:prefix": "home/"},
        "NumericLessThan": {"s3:max-keys": "100"},
    }
    assert cond(both, {"s3:prefix": ["home/"], "s3:max-keys": ["5"]})
    assert not cond(both, {"s3:prefix": ["home/"], "s3:max-keys": ["500"]})


def test_is_public() -> None:
    def public(**kw: object) -> bool:
        return policy.parse(doc(stmt(**kw)), BUCKET).is_public()

    assert public()
    assert public(Principal={"AWS": "*"})
    assert not public(Principal={"AWS": "arn:aws:iam::alice-id:root"})
    assert not public(Condition={"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}})
    assert public(Condition={"StringLike": {"aws:Referer": "*"}})
    assert not public(Effect="Deny")


# "The meaning of public" (access-control-block-public-access.html): an Allow to everyone is
# public unless a condition fixes the caller: a key naming the caller or its network, present
# and equal to fixed values.
FIXED_VPC = {"aws:SourceVpc": "vpc-91237329"}


@pytest.mark.parametrize(
    ("condition", "public"),
    [
        (None, True),
        ({"StringEquals": FIXED_VPC}, False),
        ({"StringEqualsIgnoreCase": FIXED_VPC}, False),
        ({"StringLike": FIXED_VPC}, False),  # Like without a wildcard is a fixed value
        ({"StringLike": {"aws:SourceVpc": "vpc-*"}}, True),  # AWS's own example
        ({"StringLike": {"aws:SourceVpc": "vpc-9123732?"}}, True),
        ({"StringLike": {"aws:userid": "AROLEID:*"}}, True),
        ({"StringEquals": {"aws:userid": "AIDAEXAMPLE"}}, False),
        ({"StringEquals": {"aws:SourceAccount": ["111122223333", "444455556666"]}}, False),
        ({"StringEquals": {"aws:SourceAccount": ["111122223333", "${aws:username}"]}}, True),
        ({"ArnEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:111122223333:topic"}}, False),
        ({"ArnLike": {"aws:SourceArn": "arn:aws:sns:*:111122223333:topic"}}, True),
        ({"StringEquals": {"aws:SourceOwner": "111122223333"}}, False),
        ({"StringEquals": {"aws:SourceVpce": "vpce-1a2b3c4d"}}, False),
        ({"StringEquals": {"aws:PrincipalOrgID": "o-abc123"}}, False),
        ({"StringEquals": {"s3:DataAccessPointAccount": "111122223333"}}, False),
        ({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, False),
        ({"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "2001:db8::/32"]}}, False),
        ({"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}, True),
        ({"IpAddress": {"aws:SourceIp": "::/0"}}, True),
        ({"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "0.0.0.0/0"]}}, True),
        # Every address as a union of smaller networks (security review 4, M2).
        ({"IpAddress": {"aws:SourceIp": ["0.0.0.0/1", "128.0.0.0/1"]}}, True),
        ({"IpAddress": {"aws:SourceIp": ["128.0.0.0/1", "10.0.0.0/8", "0.0.0.0/1"]}}, True),
        ({"IpAddress": {"aws:SourceIp": ["::/1", "8000::/1"]}}, True),
        ({"IpAddress": {"aws:SourceIp": ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2"]}}, False),
        ({"IpAddress": {"aws:SourceIp": ["0.0.0.0/1", "8000::/1"]}}, False),
        # The key may be absent, or anything but the value lets a caller through.
        ({"StringEqualsIfExists": FIXED_VPC}, True),
        ({"IpAddressIfExists": {"aws:SourceIp": "10.0.0.0/8"}}, True),
        ({"StringNotEquals": FIXED_VPC}, True),
        ({"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, True),
        ({"Null": {"aws:SourceVpc": "false"}}, True),
        ({"ForAllValues:StringEquals": FIXED_VPC}, True),
        ({"ForAnyValue:StringEquals": FIXED_VPC}, False),
        # Keys that do not name the caller fix nothing, whatever the operator.
        ({"StringEquals": {"aws:Referer": "http://www.example.com/"}}, True),
        ({"Bool": {"aws:SecureTransport": "true"}}, True),
        ({"StringEquals": {"s3:x-amz-acl": "private"}}, True),
        # Conditions are ANDed: one that fixes the caller is enough.
        ({"StringEquals": FIXED_VPC, "StringLike": {"aws:Referer": "*"}}, False),
        ({"StringEqualsIfExists": FIXED_VPC, "StringLike": {"aws:Referer": "*"}}, True),
    ],
)
def test_the_meaning_of_public(condition: dict | None, public: bool) -> None:
    text = doc(stmt(Condition=condition))
    assert policy.parse(text, BUCKET).is_public() is public
    assert policy.parse(text.replace('"*"', '{"AWS": "*"}', 1), BUCKET).is_public() is public


def test_public_is_any_public_statement() -> None:
    fixed = stmt(Principal={"AWS": "alice-id"})
    assert not policy.parse(doc(fixed, stmt(Effect="Deny")), BUCKET).is_public()
    both = doc(fixed, stmt(Condition={"StringEqualsIfExists": FIXED_VPC}))
    assert policy.parse(both, BUCKET).is_public()
    # Everyone together with named accounts is still everyone.
    mixed = stmt(Principal={"AWS": ["alice-id", "*"]})
    assert policy.parse(doc(mixed), BUCKET).is_public()


def test_cached_parses_once() -> None:
    text = doc(stmt())
    assert policy.cached(text, BUCKET) is policy.cached(text, BUCKET)
