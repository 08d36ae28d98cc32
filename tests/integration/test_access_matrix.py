"""The permission matrix: the bucket's owner, another user and an anonymous caller, each
trying each operation, on buckets set up seven ways. One table says what AWS allows; every
cell is tried against the real server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.integration.accounts import ALT_ID, Accounts, accounts_fixture

WHO = ("owner", "alt", "anon")
OPS = ("list", "get", "put", "delete", "get_acl", "put_acl")

# scenario -> who -> the operations allowed (the others must be AccessDenied).
EVERYTHING = set(OPS)
EXPECTED: dict[str, dict[str, set[str]]] = {
    "private": {"owner": EVERYTHING, "alt": set(), "anon": set()},
    "public-read": {
        "owner": EVERYTHING,
        "alt": {"list", "get"},
        "anon": {"list", "get"},
    },
    "public-read-write": {
        "owner": EVERYTHING,
        "alt": {"list", "get", "put", "delete"},
        "anon": {"list", "get", "put", "delete"},
    },
    # Allow alt to list and read: nobody else gains anything.
    "policy grant": {"owner": EVERYTHING, "alt": {"list", "get"}, "anon": set()},
    # A public-read bucket whose policy denies reading objects to everyone: the Deny binds
    # the owner too and beats the ACL's grant.
    "policy deny": {
        "owner": EVERYTHING - {"get"},
        "alt": {"list"},
        "anon": {"list"},
    },
    # The public-read ACLs of "public-read", after ownership controls disable ACLs.
    "ownership enforced": {"owner": EVERYTHING - {"put_acl"}, "alt": set(), "anon": set()},
    # The public-read ACLs of "public-read", with public ACLs ignored and public policies
    # restricted.
    "public access blocked": {"owner": EVERYTHING, "alt": set(), "anon": set()},
}


accounts = accounts_fixture("legacy")


def _policy(bucket: str, effect: str, principal: object, actions: list[str]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": effect,
                    "Principal": principal,
                    "Action": actions,
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                }
            ],
        }
    )


def setup(a: Accounts, scenario: str) -> tuple[str, str]:
    """The scenario's bucket, and the canned ACL its object "k" has."""
    bucket = "matrix-" + scenario.replace(" ", "-")
    acl = {"public-read-write": "public-read-write", "private": "private"}.get(
        scenario, "public-read"
    )
    if scenario == "policy grant":
        acl = "private"
    a.owner.create_bucket(Bucket=bucket, ACL=acl)
    object_acl = "private" if acl == "private" else "public-read"
    a.owner.put_object(Bucket=bucket, Key="k", Body=b"data", ACL=object_acl)
    if scenario == "policy grant":
        principal = {"AWS": f"arn:aws:iam::{ALT_ID}:root"}
        doc = _policy(bucket, "Allow", principal, ["s3:ListBucket", "s3:GetObject"])
        a.owner.put_bucket_policy(Bucket=bucket, Policy=doc)
    if scenario == "policy deny":
        a.owner.put_bucket_policy(
            Bucket=bucket, Policy=_policy(bucket, "Deny", "*", ["s3:GetObject"])
        )
    if scenario == "ownership enforced":
        a.owner.put_bucket_acl(Bucket=bucket, ACL="private")
        a.owner.put_bucket_ownership_controls(
            Bucket=bucket,
            OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        )
    if scenario == "public access blocked":
        a.owner.put_public_access_block(
            Bucket=bucket,
            PublicAccessBlockConfiguration={
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
        )
    return bucket, object_acl


def operation(client: Any, op: str, bucket: str, who: str, object_acl: str) -> Callable[[], object]:
    # PutObjectAcl writes the ACL "k" has already, so that one caller's success does not
    # change what the next one may do.
    return {
        "list": lambda: client.list_objects_v2(Bucket=bucket),
        "get": lambda: client.get_object(Bucket=bucket, Key="k")["Body"].read(),
        "put": lambda: client.put_object(Bucket=bucket, Key=f"new-{who}", Body=b"x"),
        "delete": lambda: client.delete_object(Bucket=bucket, Key=f"new-{who}"),
        "get_acl": lambda: client.get_object_acl(Bucket=bucket, Key="k"),
        "put_acl": lambda: client.put_object_acl(Bucket=bucket, Key="k", ACL=object_acl),
    }[op]


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_permission_matrix(accounts: Accounts, scenario: str) -> None:
    bucket, object_acl = setup(accounts, scenario)
    wrong = []
    for who in WHO:
        client = getattr(accounts, who)
        for op in OPS:
            allowed = op in EXPECTED[scenario][who]
            try:
                operation(client, op, bucket, who, object_acl)()
                outcome = "allowed"
            except ClientError as exc:
                code = exc.response["Error"].get("Code")
                status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
                outcome = "denied" if (code, status) == ("AccessDenied", 403) else code
                if scenario == "ownership enforced" and op == "put_acl" and who == "owner":
                    # The owner may, but ACLs are off: AWS's answer for any ACL write.
                    outcome = "denied" if code == "AccessControlListNotSupported" else code
            if outcome != ("allowed" if allowed else "denied"):
                wrong.append(f"{who} {op}: {outcome}")
    assert wrong == []
    # What was refused changed nothing: the object is still there, unchanged.
    listed = accounts.owner.list_objects_v2(Bucket=bucket)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("k", 4)]
