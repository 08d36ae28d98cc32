"""IAM's quotas on an account (security review 4, M1): entities per account,
descriptions, trust policies; AWS's LimitExceeded and ValidationError
(reference_iam-quotas.html)."""

from __future__ import annotations

import json

import pytest

from gateway.iam.account import MAX_ENTITIES, Account, IamError

TRUST = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": "acct"}, "Action": "sts:AssumeRole"}]})  # fmt: skip
POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]})  # fmt: skip

MAKERS = {
    "users": lambda acc, name: acc.create_user(name, None),
    "groups": lambda acc, name: acc.create_group(name, None),
    "roles": lambda acc, name: acc.create_role(name, None, TRUST, None, None),
    "policies": lambda acc, name: acc.create_policy(name, None, POLICY, None),
}


@pytest.mark.parametrize("part", sorted(MAKERS))
def test_entities_per_account_are_bounded(part: str) -> None:
    quota, limit = MAX_ENTITIES[part]
    acc = Account.load("acct", None)
    for n in range(limit):
        MAKERS[part](acc, f"e{n}")
    with pytest.raises(IamError) as refused:
        MAKERS[part](acc, "one-more")
    assert (refused.value.code, refused.value.status) == ("LimitExceeded", 409)
    assert refused.value.message == f"Cannot exceed quota for {quota}: {limit}"
    # Deleting one makes room again.
    getattr(acc, f"delete_{part.rstrip('s').replace('policie', 'policy')}")(
        "e0" if part != "policies" else "arn:aws:iam::acct:policy/e0"
    )
    MAKERS[part](acc, "one-more")


def test_descriptions_and_trust_policies_are_bounded() -> None:
    acc = Account.load("acct", None)
    with pytest.raises(IamError) as refused:
        acc.create_role("r", None, TRUST, None, "d" * 1001)
    assert refused.value.code == "ValidationError"
    acc.create_role("r", None, TRUST, None, "d" * 1000)
    with pytest.raises(IamError) as refused:
        acc.create_policy("p", None, POLICY, "d" * 1001)
    assert refused.value.code == "ValidationError"
    principals = [f"arn:aws:iam::acct:user/u{n:04}" for n in range(80)]
    statement = {"Effect": "Allow", "Principal": {"AWS": principals}, "Action": "sts:AssumeRole"}
    big = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    assert len(big.replace(" ", "")) > 2048
    with pytest.raises(IamError) as refused:
        acc.create_role("big", None, big, None, None)
    assert (refused.value.code, refused.value.message) == (
        "LimitExceeded",
        "Cannot exceed quota for ACLSizePerRole: 2048",
    )
