"""The authorisation decision as a pure function, and the ACL model it reads: who may do
what on a bucket, from its owner, ACLs, ownership controls, public access block and policy."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from gateway.s3 import grants
from gateway.s3.auth import ANONYMOUS
from gateway.s3.authorize import (
    ACL,
    BLOCK_ALL,
    OWNERSHIP,
    POLICY,
    PUBLIC_ACCESS_BLOCK,
    Access,
    PublicAccessBlock,
    decide,
)
from gateway.s3.errors import S3Error
from gateway.store import Bucket, ObjectAttrs
from gateway.users import User

OWNER = User("OWNER", "s", "owner", "owner-id")
ALT = User("ALT", "s", "alt", "alt-id")


def bucket(**settings: str) -> Bucket:
    return Bucket("b", "owner-id", "us-east-1", 0, settings=settings)


def acl(name: str, owner: str = "owner-id") -> str:
    return grants.canned(name, owner, "owner-id").to_json()


def allowed(b: Bucket, user: User, operation: str, key: str | None = None, **kw) -> bool:
    return decide(Access(user, operation, b, key, **kw))


def test_owner_only_by_default() -> None:
    b = bucket()
    assert allowed(b, OWNER, "ListObjects")
    assert allowed(b, OWNER, "GetObject", "k")
    assert not allowed(b, ALT, "ListObjects")
    assert not allowed(b, ANONYMOUS, "GetObject", "k")
    assert not allowed(b, ALT, "GetBucketVersioning")


def test_bucket_acl_permissions() -> None:
    b = bucket(**{ACL: acl("public-read")})
    assert allowed(b, ANONYMOUS, "ListObjects")
    assert not allowed(b, ANONYMOUS, "PutObject", "k")
    assert not allowed(b, ALT, "GetBucketAcl")  # READ is not READ_ACP
    b = bucket(**{ACL: acl("authenticated-read")})
    assert allowed(b, ALT, "ListObjects") and not allowed(b, ANONYMOUS, "ListObjects")
    b = bucket(**{ACL: acl("public-read-write")})
    assert allowed(b, ANONYMOUS, "PutObject", "k") and allowed(b, ALT, "DeleteObject", "k")


def test_object_acl_and_object_owner() -> None:
    b = bucket(**{ACL: acl("public-read-write")})
    mine = ObjectAttrs(owner="alt-id")
    assert allowed(b, ALT, "GetObject", "k", obj=mine)
    # The bucket's owner does not read an object another account owns and keeps private...
    assert not allowed(b, OWNER, "GetObject", "k", obj=mine)
    # ...unless its ACL grants it, or ACLs are disabled (everything is the bucket owner's).
    shared = ObjectAttrs(owner="alt-id", acl=acl("bucket-owner-read", "alt-id"))
    assert allowed(b, OWNER, "GetObject", "k", obj=shared)
    enforced = bucket(**{ACL: acl("private"), OWNERSHIP: "BucketOwnerEnforced"})
    assert allowed(enforced, OWNER, "GetObject", "k", obj=mine)
    public_object = ObjectAttrs(acl=acl("public-read"))
    assert allowed(bucket(), ANONYMOUS, "GetObject", "k", obj=public_object)
    assert not allowed(enforced, ANONYMOUS, "GetObject", "k", obj=public_object)


def test_public_access_block() -> None:
    ignore = PublicAccessBlock(ignore_public_acls=True).to_json()
    b = bucket(**{ACL: acl("public-read"), PUBLIC_ACCESS_BLOCK: ignore})
    assert not allowed(b, ANONYMOUS, "ListObjects")
    to_alt = grants.Acl("owner-id", (grants.Grant("id", "alt-id", "READ"),)).to_json()
    shared = bucket(**{ACL: to_alt, PUBLIC_ACCESS_BLOCK: BLOCK_ALL.to_json()})
    assert allowed(shared, ALT, "ListObjects")  # a grant to one account is not public


def policy_of(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def test_policy_allow_deny_and_restriction() -> None:
    everyone = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::b/*"}  # fmt: skip
    b = bucket(**{POLICY: policy_of(everyone)})
    assert allowed(b, ANONYMOUS, "GetObject", "k")
    assert not allowed(b, ANONYMOUS, "ListObjects")
    # Allows reach only objects the bucket's owner owns.
    assert not allowed(b, ANONYMOUS, "GetObject", "k", obj=ObjectAttrs(owner="alt-id"))
    deny = {**everyone, "Effect": "Deny"}
    b = bucket(**{POLICY: policy_of(everyone, deny)})
    assert not allowed(b, OWNER, "GetObject", "k")  # binds the owner too
    assert allowed(b, OWNER, "GetBucketPolicy")  # but not over the policy itself
    assert allowed(b, OWNER, "DeleteBucketPolicy")
    restrict = PublicAccessBlock(restrict_public_buckets=True).to_json()
    b = bucket(**{POLICY: policy_of(everyone), PUBLIC_ACCESS_BLOCK: restrict})
    assert not allowed(b, ANONYMOUS, "GetObject", "k")
    assert allowed(b, OWNER, "GetObject", "k")


def test_versions_and_conditions() -> None:
    only_latest = {"Effect": "Allow", "Principal": {"AWS": "alt-id"}, "Action": "s3:GetObject",
                   "Resource": "arn:aws:s3:::b/*"}  # fmt: skip
    b = bucket(**{POLICY: policy_of(only_latest)})
    assert allowed(b, ALT, "GetObject", "k")
    assert not allowed(b, ALT, "GetObject", "k", version_id="v1")  # s3:GetObjectVersion
    with_ip = {**only_latest, "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}
    b = bucket(**{POLICY: policy_of(with_ip)})

    def from_ip(ip: str) -> Callable[[str], list[str] | None]:
        return lambda key: [ip] if key == "aws:sourceip" else None

    assert allowed(b, ALT, "GetObject", "k", conditions=from_ip("10.9.9.9"))
    assert not allowed(b, ALT, "GetObject", "k", conditions=from_ip("192.168.0.1"))


# -- the ACL model -------------------------------------------------------------------------------


def known(canonical_id: str) -> bool:
    return canonical_id in ("owner-id", "alt-id")


def test_canned_acls() -> None:
    assert grants.canned("private", "o", "o").only_owner()
    assert grants.canned("public-read-write", "o", "o").is_public()
    log = grants.canned("log-delivery-write", "o", "o")
    assert [(g.value, g.permission) for g in log.grants] == [
        (grants.LOG_DELIVERY, "WRITE"),
        (grants.LOG_DELIVERY, "READ_ACP"),
        ("o", "FULL_CONTROL"),
    ]
    # The bucket-owner ACLs give the bucket's owner a grant on another account's object...
    full = grants.canned("bucket-owner-full-control", "w", "o")
    assert full.grants_to("o", "WRITE_ACP")
    # ...and are the owner's alone on the bucket owner's own resources.
    assert grants.canned("bucket-owner-read", "o", "o").only_owner()


def test_grant_headers() -> None:
    headers = {
        "x-amz-grant-read": f'id="alt-id", uri="{grants.ALL_USERS}"',
        "x-amz-grant-full-control": "id=owner-id",
    }
    got = grants.from_headers(headers, "owner-id", "owner-id", known)
    assert got is not None
    assert [(g.kind, g.value, g.permission) for g in got.grants] == [
        ("id", "alt-id", "READ"),
        ("uri", grants.ALL_USERS, "READ"),
        ("id", "owner-id", "FULL_CONTROL"),
    ]
    assert grants.from_headers({}, "o", "o", known) is None
    for bad, code in (
        ({"x-amz-acl": "everyone"}, "InvalidArgument"),
        ({"x-amz-acl": "private", "x-amz-grant-read": "id=alt-id"}, "InvalidRequest"),
        ({"x-amz-grant-read": "who=alt-id"}, "InvalidArgument"),
        ({"x-amz-grant-read": "id=stranger"}, "InvalidArgument"),
    ):
        with pytest.raises(S3Error) as exc:
            grants.from_headers(bad, "owner-id", "owner-id", known)
        assert exc.value.code == code, bad


def test_grants_by_email_address_are_resolved_to_canonical_users() -> None:
    """Parsed as given; `resolve_emails` makes them canonical users' grants (or its lookup
    raises), the other grants kept in their places."""
    headers = {"x-amz-grant-read": 'emailAddress="alt@example.com", id=owner-id'}
    got = grants.from_headers(headers, "owner-id", "owner-id", known)
    assert got is not None
    assert got.grants[0] == grants.Grant("email", "alt@example.com", "READ")
    ids = {"alt@example.com": "alt-id"}
    resolved = grants.resolve_emails(got, ids.__getitem__)
    assert resolved == grants.Acl(
        "owner-id",
        (grants.Grant("id", "alt-id", "READ"), grants.Grant("id", "owner-id", "READ")),
    )
    plain = grants.private("owner-id")
    assert grants.resolve_emails(plain, ids.__getitem__) is plain
    with pytest.raises(KeyError):
        grants.resolve_emails(
            replace(got, grants=(grants.Grant("email", "x@y", "READ"),)), ids.__getitem__
        )


def test_stored_form_round_trips_and_is_cached() -> None:
    a = grants.canned("public-read", "owner-id", "owner-id")
    text = a.to_json()
    assert grants.from_json(text) == a
    assert grants.from_json(text) is grants.from_json(text)
    assert grants.stored(None, "x") == grants.private("x")


def test_rules_are_keyed_by_the_routers_operations() -> None:
    """A rule names its operation by the router's Op (a misspelt name fails at import), and
    every operation the router knows but these has no rule: the owner-only ones."""
    from gateway.s3.authorize import BYPASS_GOVERNANCE, RULES
    from gateway.s3.router import Op

    keys = [k for k in RULES if k != BYPASS_GOVERNANCE]
    assert keys and all(isinstance(k, Op) for k in keys)
