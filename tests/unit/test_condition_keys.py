"""Every condition key a policy may name (security review 4, H2): each key the gateway
supplies has a request that sets it and one that does not, here; each key AWS defines and the
gateway never supplies is absent from every request and listed in docs/iam.md; any other key is
refused when the policy is put. A key added to the accepted set without a row here fails."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.iam.account import Account
from gateway.iam.call import Call
from gateway.iam.judged import judged
from gateway.iam.sts import trust_values
from gateway.s3 import policy
from gateway.s3.errors import S3Error
from gateway.s3.policy_context import Caller, values
from gateway.store import ObjectAttrs
from gateway.users import Identity, User

ROOT = Path(__file__).resolve().parents[2]
ALICE = User("AK", "sk", "alice", "alice-id")
TAGGED = User(
    "AK2", "sk", "bob", "acct",
    identity=Identity("arn:aws:iam::acct:user/bob", "AIDABOB", frozenset(), (),
                      tags=(("team", "blue"),)),
)  # fmt: skip
NOBODY = User("", "", "", "")


def s3(key: str, **caller: object) -> list[str] | None:
    """`key`'s value in an S3 request made of `caller`'s fields (and `obj`)."""
    obj = caller.pop("obj", None)
    fields: dict[str, object] = {"user": ALICE, "remote": None, "secure": False, "headers": {},
                                 "query": {}}  # fmt: skip
    fields.update(caller)
    return values(Caller(**fields), obj)(key)  # type: ignore[arg-type]


def iam(key: str, action: str, **params: str) -> list[str] | None:
    """`key`'s value in an IAM request by an IAM user of an account that holds a tagged user
    `victim` and a tagged role `svc`."""
    acc = Account.load("acct", None)
    acc.create_user("victim", None)["tags"] = {"Team": "blue"}
    acc.create_role("svc", None, json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "acct"}, "Action": "sts:AssumeRole"}]}),
        None, None)["tags"] = {"Team": "red"}  # fmt: skip
    call = Call(TAGGED, {"Action": action, **params}, None, None, b"")  # type: ignore[arg-type]
    if action == "AssumeRole":
        found = trust_values(call, acc.doc["roles"]["svc"])
    else:
        found = dict(judged(call, action, acc).values)
    return found.get(key)


TAGS = {"Tags.member.1.Key": "Team", "Tags.member.1.Value": "green"}

# key -> (its value in a request that sets it, the same in one that does not)
Row = tuple[Callable[[], list[str] | None], Callable[[], list[str] | None]]
HEADER = {
    "s3:x-amz-acl": "x-amz-acl", "s3:x-amz-grant-read": "x-amz-grant-read",
    "s3:x-amz-grant-write": "x-amz-grant-write", "s3:x-amz-grant-read-acp": "x-amz-grant-read-acp",
    "s3:x-amz-grant-write-acp": "x-amz-grant-write-acp",
    "s3:x-amz-grant-full-control": "x-amz-grant-full-control",
    "s3:x-amz-copy-source": "x-amz-copy-source",
    "s3:x-amz-metadata-directive": "x-amz-metadata-directive",
    "s3:x-amz-storage-class": "x-amz-storage-class",
    "s3:x-amz-server-side-encryption": "x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id":
        "x-amz-server-side-encryption-aws-kms-key-id",
    "s3:x-amz-server-side-encryption-customer-algorithm":
        "x-amz-server-side-encryption-customer-algorithm",
    "s3:x-amz-content-sha256": "x-amz-content-sha256",
    "s3:object-lock-mode": "x-amz-object-lock-mode",
    "s3:object-lock-retain-until-date": "x-amz-object-lock-retain-until-date",
    "s3:object-lock-legal-hold": "x-amz-object-lock-legal-hold",
    "s3:x-amz-object-ownership": "x-amz-object-ownership",
    "aws:referer": "referer", "aws:useragent": "user-agent",
    "s3:if-match": "if-match", "s3:if-none-match": "if-none-match",
}  # fmt: skip
QUERY = {"s3:prefix": "prefix", "s3:delimiter": "delimiter", "s3:max-keys": "max-keys",
         "s3:versionid": "versionId"}  # fmt: skip


def _rows() -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for key, header in HEADER.items():
        rows[key] = (lambda k=key, h=header: s3(k, headers={h: "v"}), lambda k=key: s3(k))
    for key, name in QUERY.items():
        rows[key] = (lambda k=key, n=name: s3(k, query={n: "v"}), lambda k=key: s3(k))
    rows.update({
        "aws:sourceip": (lambda: s3("aws:sourceip", remote="10.1.2.3"),
                         lambda: s3("aws:sourceip")),
        # Always valued: "false" is the request over plain HTTP.
        "aws:securetransport": (lambda: s3("aws:securetransport", secure=True),
                                lambda: ["false"] if s3("aws:securetransport") == ["false"]
                                else None),
        "aws:principalarn": (lambda: s3("aws:principalarn"),
                             lambda: s3("aws:principalarn", user=NOBODY)),
        "aws:principalaccount": (lambda: s3("aws:principalaccount"),
                                 lambda: s3("aws:principalaccount", user=NOBODY)),
        "aws:userid": (lambda: s3("aws:userid"), lambda: s3("aws:userid", user=NOBODY)),
        "aws:username": (lambda: s3("aws:username"), lambda: s3("aws:username", user=NOBODY)),
        "aws:principaltype": (lambda: s3("aws:principaltype"),
                              lambda: s3("aws:principaltype", user=NOBODY)),
        "aws:principaltag/": (lambda: s3("aws:principaltag/team", user=TAGGED),
                              lambda: s3("aws:principaltag/team")),
        "s3:signatureversion": (lambda: s3("s3:signatureversion",
                                           signature_version="AWS4-HMAC-SHA256"),
                                lambda: s3("s3:signatureversion")),
        "s3:authtype": (lambda: s3("s3:authtype", auth_type="REST-HEADER"),
                        lambda: s3("s3:authtype")),
        "s3:existingobjecttag/": (
            lambda: s3("s3:existingobjecttag/team", obj=ObjectAttrs(tags=(("Team", "a"),))),
            lambda: s3("s3:existingobjecttag/team", obj=ObjectAttrs())),
        "s3:requestobjecttag/": (
            lambda: s3("s3:requestobjecttag/team", headers={"x-amz-tagging": "Team=a"}),
            lambda: s3("s3:requestobjecttag/team")),
        "s3:requestobjecttagkeys": (
            lambda: s3("s3:requestobjecttagkeys", tags=(("Team", "a"),)),
            lambda: s3("s3:requestobjecttagkeys")),
        "aws:requesttag/": (lambda: iam("aws:requesttag/team", "TagUser", UserName="victim",
                                        **TAGS),
                            lambda: iam("aws:requesttag/team", "GetUser", UserName="victim")),
        "aws:tagkeys": (lambda: iam("aws:tagkeys", "CreateUser", UserName="new", **TAGS),
                        lambda: iam("aws:tagkeys", "CreateUser", UserName="new")),
        "aws:resourcetag/": (lambda: iam("aws:resourcetag/team", "GetUser", UserName="victim"),
                             lambda: iam("aws:resourcetag/team", "GetUser", UserName="other")),
        "iam:resourcetag/": (lambda: iam("iam:resourcetag/team", "GetRole", RoleName="svc"),
                             lambda: iam("iam:resourcetag/team", "ListRoles")),
        "sts:externalid": (lambda: iam("sts:externalid", "AssumeRole", ExternalId="x"),
                           lambda: iam("sts:externalid", "AssumeRole")),
        "sts:rolesessionname": (lambda: iam("sts:rolesessionname", "AssumeRole",
                                            RoleSessionName="ss"),
                                lambda: iam("sts:rolesessionname", "AssumeRole")),
    })  # fmt: skip
    return rows


ROWS = _rows()
# Keys every request has a value for (a clock): "not set" has no meaning.
ALWAYS = {"aws:currenttime": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "aws:epochtime": r"\d+"}


def test_every_supplied_key_has_a_row() -> None:
    assert set(ROWS) | set(ALWAYS) == set(policy.SUPPLIED_KEYS)


@pytest.mark.parametrize("key", sorted(ROWS))
def test_a_request_that_sets_the_key_and_one_that_does_not(key: str) -> None:
    setting, not_setting = ROWS[key]
    found = setting()
    assert found and all(isinstance(v, str) and v for v in found), key
    absent = not_setting()
    if key == "aws:securetransport":
        assert absent == ["false"] and found == ["true"]
    elif key == "aws:principaltype":
        assert absent == ["Anonymous"]
    else:
        assert absent is None, key


@pytest.mark.parametrize("key", sorted(ALWAYS))
def test_the_clock_keys_are_always_valued(key: str) -> None:
    (value,) = s3(key, user=NOBODY) or [""]
    assert re.fullmatch(ALWAYS[key], value)


@pytest.mark.parametrize("key", sorted(policy.ABSENT_KEYS))
def test_a_key_the_gateway_never_supplies_is_absent_and_documented(key: str) -> None:
    full = {"user": TAGGED, "remote": "10.0.0.1", "secure": True,
            "headers": {h: "v" for h in HEADER.values()}, "query": {n: "v" for n in QUERY.values()},
            "signature_version": "AWS4-HMAC-SHA256", "auth_type": "REST-HEADER",
            "tags": (("a", "b"),), "obj": ObjectAttrs(tags=(("a", "b"),))}  # fmt: skip
    assert s3(key, **full) is None
    assert iam(key, "AssumeRole", ExternalId="x", RoleSessionName="ss", **TAGS) is None
    doc = (ROOT / "docs" / "iam.md").read_text().lower()
    assert f"`{key}`" in doc, f"docs/iam.md does not list {key} among the keys never supplied"


@pytest.mark.parametrize(
    ("key", "kind"),
    [("aws:NoSuchKey", policy.Kind.IDENTITY), ("s3:nosuchkey", policy.Kind.BUCKET),
     ("iam:ResourceTag/team", policy.Kind.BUCKET), ("ec2:Region", policy.Kind.IDENTITY),
     ("aws:ResourceTag/", policy.Kind.IDENTITY)],
)  # fmt: skip
def test_any_other_key_is_refused(key: str, kind: policy.Kind) -> None:
    statement = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
                 "Condition": {"StringEquals": {key: "x"}}}  # fmt: skip
    if kind is policy.Kind.BUCKET:
        statement["Principal"] = "*"
    text = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    with pytest.raises(S3Error) as refused:
        policy.parse(text, "b", kind)
    assert refused.value.message == "Policy has an invalid condition key"
