"""Bucket policies against the real server: the four operations with AWS's codes, the owner's
standing right to the policy, the public access block, and conditions on real requests."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from tests.integration.accounts import (
    ALT_ID,
    OWNER_ID,
    accounts_fixture,
    error,
    fails,
)

aws = accounts_fixture("aws")
legacy = accounts_fixture("legacy")


def policy(bucket: str, *statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(bucket: str, action: str | list[str] = "s3:GetObject", **kw: object) -> dict:
    return {
        "Effect": "Allow",
        "Principal": "*",
        "Action": action,
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
        **kw,
    }


def test_policy_operations(legacy):
    b = legacy.new_bucket()
    assert fails(legacy.owner.get_bucket_policy, Bucket=b) == ("NoSuchBucketPolicy", 404)
    assert fails(legacy.owner.get_bucket_policy_status, Bucket=b) == ("NoSuchBucketPolicy", 404)
    text = policy(b, allow(b))
    answer = legacy.owner.put_bucket_policy(Bucket=b, Policy=text)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert json.loads(legacy.owner.get_bucket_policy(Bucket=b)["Policy"]) == json.loads(text)
    assert legacy.owner.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is True
    fixed = policy(b, allow(b, Principal={"AWS": f"arn:aws:iam::{ALT_ID}:root"}))
    legacy.owner.put_bucket_policy(Bucket=b, Policy=fixed)
    assert legacy.owner.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False
    answer = legacy.owner.delete_bucket_policy(Bucket=b)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204
    legacy.owner.delete_bucket_policy(Bucket=b)  # nothing to delete: 204 as well
    assert fails(legacy.owner.get_bucket_policy, Bucket=b)[0] == "NoSuchBucketPolicy"


def test_malformed_policies_change_nothing(legacy):
    b = legacy.new_bucket()
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, allow(b)))
    before = legacy.owner.get_bucket_policy(Bucket=b)["Policy"]
    for text, message in (
        ("not json", "Policies must be valid JSON and the first byte must be '{'"),
        ("{}", "Missing required field Statement"),
        (policy(b, allow("other")), "Policy has invalid resource"),
        (policy(b, allow(b, "s3:Teleport")), "Policy has invalid action"),
        (policy(b, {**allow(b), "Effect": "Perhaps"}), "Invalid effect: Perhaps"),
        (policy(b, *[allow(b, Sid=f"s{i}") for i in range(200)]), None),  # over 20 KB
    ):
        try:
            legacy.owner.put_bucket_policy(Bucket=b, Policy=text)
        except ClientError as exc:
            response = exc.response
            assert response["Error"]["Code"] == "MalformedPolicy"
            assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
            if message is not None:
                assert response["Error"]["Message"] == message
        else:
            pytest.fail(f"accepted: {text[:40]}")
    assert legacy.owner.get_bucket_policy(Bucket=b)["Policy"] == before


def test_the_owner_keeps_the_policy_whatever_it_says(legacy):
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x")
    deny_all = policy(b, {**allow(b, "s3:*"), "Effect": "Deny"})
    legacy.owner.put_bucket_policy(Bucket=b, Policy=deny_all)
    # The Deny binds the owner for everything else...
    assert error(legacy.owner.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert error(legacy.owner.list_objects_v2, Bucket=b) == ("AccessDenied", 403)
    # ...but never locks them out of the policy itself.
    legacy.owner.get_bucket_policy(Bucket=b)
    legacy.owner.put_bucket_policy(Bucket=b, Policy=deny_all)
    legacy.owner.delete_bucket_policy(Bucket=b)
    assert legacy.owner.get_object(Bucket=b, Key="k")["Body"].read() == b"x"


def test_other_accounts_and_the_policy(legacy):
    b = legacy.new_bucket()
    assert error(legacy.alt.get_bucket_policy, Bucket=b) == ("AccessDenied", 403)
    grant = allow(b, ["s3:GetBucketPolicy", "s3:PutBucketPolicy"])
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, grant))
    # Allowed, but not the bucket's account: AWS answers 405.
    assert error(legacy.alt.get_bucket_policy, Bucket=b) == ("MethodNotAllowed", 405)
    assert error(legacy.anon.get_bucket_policy, Bucket=b) == ("MethodNotAllowed", 405)
    assert error(legacy.alt.delete_bucket_policy, Bucket=b) == ("AccessDenied", 403)


def test_block_public_policy(aws):
    b = aws.new_bucket()
    assert fails(aws.owner.put_bucket_policy, Bucket=b, Policy=policy(b, allow(b))) == (
        "AccessDenied",
        403,
    )
    assert fails(aws.owner.get_bucket_policy, Bucket=b)[0] == "NoSuchBucketPolicy"
    # A policy for one account is not public: accepted, and it works on a bucket whose
    # ACLs are off.
    aws.owner.put_object(Bucket=b, Key="k", Body=b"x")
    grant = allow(b, Principal={"AWS": [ALT_ID]})
    aws.owner.put_bucket_policy(Bucket=b, Policy=policy(b, grant))
    assert aws.alt.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    assert error(aws.anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)


def test_restrict_public_buckets(legacy):
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x")
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, allow(b)))
    assert legacy.anon.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    legacy.owner.put_public_access_block(
        Bucket=b, PublicAccessBlockConfiguration={"RestrictPublicBuckets": True}
    )
    assert error(legacy.anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert error(legacy.alt.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert legacy.owner.get_object(Bucket=b, Key="k")["Body"].read() == b"x"


def test_conditions_on_real_requests(legacy):
    b = legacy.new_bucket()
    for key in ("home/a", "other/b"):
        legacy.owner.put_object(Bucket=b, Key=key, Body=b"x")

    def put(*statements: dict) -> None:
        legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, *statements))

    put(allow(b, Condition={"IpAddress": {"aws:SourceIp": "127.0.0.1/32"}}))
    assert legacy.anon.get_object(Bucket=b, Key="home/a")["Body"].read() == b"x"
    put(allow(b, Condition={"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}))
    assert error(legacy.anon.get_object, Bucket=b, Key="home/a") == ("AccessDenied", 403)
    put(allow(b, Condition={"Bool": {"aws:SecureTransport": "true"}}))
    assert error(legacy.anon.get_object, Bucket=b, Key="home/a") == ("AccessDenied", 403)
    # s3:prefix: alt may list home/ and nothing else.
    put(
        allow(
            b,
            "s3:ListBucket",
            Principal={"CanonicalUser": ALT_ID},
            Condition={"StringEquals": {"s3:prefix": "home/"}},
        )
    )
    keys = [o["Key"] for o in legacy.alt.list_objects_v2(Bucket=b, Prefix="home/")["Contents"]]
    assert keys == ["home/a"]
    assert error(legacy.alt.list_objects_v2, Bucket=b) == ("AccessDenied", 403)
    # A Deny on unsigned requests (no s3:authType) binds anonymous callers only.
    put(
        allow(b, ["s3:GetObject"]),
        {
            **allow(b, "s3:GetObject"),
            "Effect": "Deny",
            "Condition": {"Null": {"s3:authType": True}},
        },
    )
    assert error(legacy.anon.get_object, Bucket=b, Key="home/a") == ("AccessDenied", 403)
    assert legacy.alt.get_object(Bucket=b, Key="home/a")["Body"].read() == b"x"


def test_allow_reaches_only_the_bucket_owners_objects(legacy):
    # "Allow statements in a bucket policy apply only to objects that are owned by the same
    # bucket-owning account" (troubleshoot-403-errors.html).
    b = legacy.new_bucket()
    legacy.owner.put_bucket_acl(Bucket=b, ACL="public-read-write")
    legacy.alt.put_object(Bucket=b, Key="alts", Body=b"a")
    legacy.owner.put_object(Bucket=b, Key="owners", Body=b"o")
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, allow(b)))
    assert legacy.anon.get_object(Bucket=b, Key="owners")["Body"].read() == b"o"
    assert error(legacy.anon.get_object, Bucket=b, Key="alts") == ("AccessDenied", 403)
    assert legacy.alt.get_object_acl(Bucket=b, Key="alts")["Owner"]["ID"] == ALT_ID
    assert legacy.owner.get_bucket_acl(Bucket=b)["Owner"]["ID"] == OWNER_ID


def test_a_missing_object_is_404_only_to_who_may_list_it(legacy):
    # GetObject in the API reference: 404 with s3:ListBucket, 403 without.
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="public/there", Body=b"x")
    listing = allow(b, "s3:ListBucket", Condition={"StringLike": {"s3:prefix": "public/*"}})
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, listing))
    assert error(legacy.alt.head_object, Bucket=b, Key="public/missing") == ("404", 404)
    assert error(legacy.alt.get_object, Bucket=b, Key="public/missing") == ("NoSuchKey", 404)
    assert error(legacy.alt.head_object, Bucket=b, Key="private/missing") == ("403", 403)
    # An object that exists stays refused: listing it is not reading it.
    assert error(legacy.alt.get_object, Bucket=b, Key="public/there") == ("AccessDenied", 403)


def test_delete_objects_is_decided_key_by_key(legacy):
    b = legacy.new_bucket()
    for key in ("keep/a", "other/b", "other/c"):
        legacy.owner.put_object(Bucket=b, Key=key, Body=b"x")
    legacy.owner.put_bucket_policy(
        Bucket=b,
        Policy=policy(
            b,
            {
                **allow(b, "s3:DeleteObject"),
                "Effect": "Deny",
                "Resource": f"arn:aws:s3:::{b}/keep/*",
            },
            allow(b, "s3:DeleteObject", Principal={"AWS": ALT_ID}),
        ),
    )
    answer = legacy.owner.delete_objects(
        Bucket=b, Delete={"Objects": [{"Key": "keep/a"}, {"Key": "other/b"}]}
    )
    assert [d["Key"] for d in answer["Deleted"]] == ["other/b"]
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [("keep/a", "AccessDenied")]
    # alt has no WRITE on the bucket, but the policy lets it delete objects.
    answer = legacy.alt.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "other/c"}]})
    assert [d["Key"] for d in answer["Deleted"]] == ["other/c"]
    answer = legacy.anon.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "keep/a"}]})
    assert [e["Code"] for e in answer["Errors"]] == ["AccessDenied"]
    listed = legacy.owner.list_objects_v2(Bucket=b)["Contents"]
    assert [o["Key"] for o in listed] == ["keep/a"]


def test_a_wildcard_resource_does_not_hold_the_worker(legacy):
    """A Resource of many stars against a long key: matched in one pass, not by a
    backtracking regex that held a worker for minutes. A hang fails by the clients' timeouts."""
    b = legacy.new_bucket()
    key = "a" * 300
    legacy.owner.put_object(Bucket=b, Key=key, Body=b"x")
    legacy.owner.put_object(Bucket=b, Key=key + "b", Body=b"y")
    hostile = allow(b, Resource=f"arn:aws:s3:::{b}/" + "*a" * 20 + "*b")
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, hostile))
    anon = legacy.server.client(signature_version=UNSIGNED, read_timeout=30, connect_timeout=5)
    # The statement does not reach the key (it ends with "b"), so nothing grants the read.
    assert error(anon.get_object, Bucket=b, Key=key) == ("AccessDenied", 403)
    with urllib.request.urlopen(f"{legacy.server.url}/health/live", timeout=30) as answer:
        assert answer.status == 200
    # A key the pattern does match is served.
    assert anon.get_object(Bucket=b, Key=key + "b")["Body"].read() == b"y"


# "The meaning of public": a condition that lets a caller through when its key is absent
# (IfExists), or for any value but one (StringNotEquals), fixes no caller.
LOOSE_CONDITIONS = (
    {"StringEqualsIfExists": {"aws:SourceVpc": "vpc-91237329"}},
    {"StringNotEquals": {"aws:SourceVpc": "vpc-91237329"}},
    {"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}},
    {"StringLike": {"aws:SourceVpc": "vpc-*"}},
)


@pytest.mark.parametrize("condition", LOOSE_CONDITIONS, ids=["IfExists", "Not", "/0", "Like"])
def test_block_public_policy_sees_loose_conditions(aws, condition):
    b = aws.new_bucket()
    loose = policy(b, allow(b, Condition=condition))
    assert fails(aws.owner.put_bucket_policy, Bucket=b, Policy=loose) == ("AccessDenied", 403)
    assert fails(aws.owner.get_bucket_policy, Bucket=b)[0] == "NoSuchBucketPolicy"
    # A fixed value is not public: accepted.
    fixed = {"StringEquals": {"aws:SourceVpc": "vpc-91237329"}}
    aws.owner.put_bucket_policy(Bucket=b, Policy=policy(b, allow(b, Condition=fixed)))
    assert aws.owner.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False


def test_policy_status_and_restrict_public_buckets_see_loose_conditions(legacy):
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x")
    loose = {"StringEqualsIfExists": {"aws:SourceVpc": "vpc-91237329"}}
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, allow(b, Condition=loose)))
    assert legacy.owner.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is True
    # No request here comes from a VPC: the condition holds, and anyone may read...
    assert legacy.anon.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    # ...until RestrictPublicBuckets, which the policy's being public brings into play.
    legacy.owner.put_public_access_block(
        Bucket=b, PublicAccessBlockConfiguration={"RestrictPublicBuckets": True}
    )
    assert error(legacy.anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert legacy.owner.get_object(Bucket=b, Key="k")["Body"].read() == b"x"


@contextlib.contextmanager
def sending(client: Any, operation: str, headers: dict[str, str]) -> Iterator[None]:
    """`client`'s `operation` requests carry `headers` (signed with the rest) while inside."""

    def add(request: Any, **_: Any) -> None:
        for name, value in headers.items():
            request.headers[name] = value

    event = f"before-sign.s3.{operation}"
    client.meta.events.register(event, add, unique_id="test-policy-sending")
    try:
        yield
    finally:
        client.meta.events.unregister(event, unique_id="test-policy-sending")


def test_if_exists_holds_when_the_key_is_absent(legacy):
    # reference_policies_elements_condition_operators.html, "...IfExists condition
    # operators": "If the policy key is present in the context of the request, process the
    # key as specified in the policy. If the key is not present, evaluate the condition
    # element as true."
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x")
    referer = {"StringLikeIfExists": {"aws:Referer": "http://www.example.com/*"}}
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, allow(b, Condition=referer)))
    assert legacy.anon.get_object(Bucket=b, Key="k")["Body"].read() == b"x"  # no Referer
    with sending(legacy.anon, "GetObject", {"Referer": "http://www.example.com/a.html"}):
        assert legacy.anon.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    with sending(legacy.anon, "GetObject", {"Referer": "http://example.com"}):
        assert error(legacy.anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    # The owner's own identity allows it: an Allow whose condition fails denies nothing
    # (ceph's s3-tests expect 403 here, test_bucket_policy_set_condition_operator_end_with_
    # IfExists, marked fails_on_rgw).
    with sending(legacy.owner, "GetObject", {"Referer": "http://example.com"}):
        assert legacy.owner.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    # A negated operator with IfExists in a Deny: the key's absence makes it hold, so a PUT
    # without the header is refused (the "require encryption" policy of the S3 user guide).
    require = {
        **allow(b, "s3:PutObject"),
        "Effect": "Deny",
        "Condition": {"StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption": "AES256"}},
    }
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, allow(b, "s3:PutObject"), require))
    assert error(legacy.alt.put_object, Bucket=b, Key="plain", Body=b"p") == ("AccessDenied", 403)
    legacy.alt.put_object(Bucket=b, Key="sse", Body=b"s", ServerSideEncryption="AES256")


def test_request_object_tags_on_put_object(legacy):
    # s3:RequestObjectTag/<key> and s3:RequestObjectTagKeys are the tags of x-amz-tagging
    # (list_amazons3.html; tagging-and-policies.html).
    b = legacy.new_bucket()
    only_public = {"StringEquals": {"s3:RequestObjectTag/security": "public"}}
    legacy.owner.put_bucket_policy(
        Bucket=b, Policy=policy(b, allow(b, "s3:PutObject", Condition=only_public))
    )
    assert error(legacy.alt.put_object, Bucket=b, Key="a", Body=b"a") == ("AccessDenied", 403)
    assert error(
        legacy.alt.put_object, Bucket=b, Key="a", Body=b"a", Tagging="security=private"
    ) == ("AccessDenied", 403)
    legacy.alt.put_object(Bucket=b, Key="a", Body=b"a", Tagging="security=public&team=x")
    tags = legacy.alt.get_object_tagging(Bucket=b, Key="a")["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"security": "public", "team": "x"}
    # Every tag key among the allowed ones, and at least one tag (without a tag the key is
    # absent, and ForAllValues holds on an absent key).
    keys = {
        "ForAllValues:StringEquals": {"s3:RequestObjectTagKeys": ["team", "project"]},
        "Null": {"s3:RequestObjectTagKeys": "false"},
    }
    legacy.owner.put_bucket_policy(
        Bucket=b, Policy=policy(b, allow(b, "s3:PutObject", Condition=keys))
    )
    legacy.alt.put_object(Bucket=b, Key="b", Body=b"b", Tagging="team=x&project=y")
    assert error(legacy.alt.put_object, Bucket=b, Key="b", Body=b"b", Tagging="team=x&owner=z") == (
        "AccessDenied",
        403,
    )
    assert error(legacy.alt.put_object, Bucket=b, Key="b", Body=b"b") == ("AccessDenied", 403)


def test_request_object_tags_on_put_object_tagging(legacy):
    # On PutObjectTagging the request's tags are the body's TagSet (list_amazons3.html: the
    # keys apply to PutObjectTagging): a policy on them judges what the body sets.
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"k")
    only_public = {"StringEquals": {"s3:RequestObjectTag/security": "public"}}
    no_owner = {"ForAnyValue:StringEquals": {"s3:RequestObjectTagKeys": ["owner"]}}
    statements = [
        allow(b, "s3:PutObjectTagging", Condition=only_public),
        {**allow(b, "s3:PutObjectTagging"), "Effect": "Deny", "Condition": no_owner},
    ]
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, *statements))

    def tag(**pairs):
        return legacy.alt.put_object_tagging(
            Bucket=b,
            Key="k",
            Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in pairs.items()]},
        )

    assert error(tag, security="private") == ("AccessDenied", 403)
    assert error(tag, security="public", owner="me") == ("AccessDenied", 403)
    tag(security="public", team="x")
    tags = legacy.owner.get_object_tagging(Bucket=b, Key="k")["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"security": "public", "team": "x"}


def test_not_principal_not_action_not_resource_against_the_server(legacy):
    """The negated elements, judged by the server on real requests (unit tests cover the
    parser): a Deny to everyone but the owner's account (NotPrincipal), an Allow of every
    action but DeleteObject (NotAction), and an Allow of every key but private/ (NotResource)."""
    b = legacy.new_bucket()
    for key in ("public/a", "private/b"):
        legacy.owner.put_object(Bucket=b, Key=key, Body=b"data")
    everything_but_delete = {
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{ALT_ID}:root"},
        "NotAction": "s3:DeleteObject",
        "Resource": f"arn:aws:s3:::{b}/*",
    }
    all_but_private = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:GetObject",
        "NotResource": f"arn:aws:s3:::{b}/public/*",
    }
    legacy.owner.put_bucket_policy(
        Bucket=b, Policy=policy(b, everything_but_delete, all_but_private)
    )
    assert legacy.alt.get_object(Bucket=b, Key="public/a")["Body"].read() == b"data"
    assert error(legacy.alt.get_object, Bucket=b, Key="private/b") == ("AccessDenied", 403)
    legacy.alt.put_object(Bucket=b, Key="public/new", Body=b"x")  # NotAction allows the rest
    assert error(legacy.alt.delete_object, Bucket=b, Key="public/a") == ("AccessDenied", 403)
    # NotPrincipal: a Deny of every principal but the owner's account; the owner still reads.
    deny_others = {
        "Effect": "Deny",
        "NotPrincipal": {"AWS": f"arn:aws:iam::{OWNER_ID}:root"},
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{b}/*",
    }
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy(b, everything_but_delete, deny_others))
    assert error(legacy.alt.get_object, Bucket=b, Key="public/a") == ("AccessDenied", 403)
    assert legacy.owner.get_object(Bucket=b, Key="public/a")["Body"].read() == b"data"
