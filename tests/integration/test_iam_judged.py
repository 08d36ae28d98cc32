"""What IAM's actions are judged on (security review 4, H1 and H2): every action is judged on
the ARN IAM itself reports for the entity (path included) whichever way the action names it,
and the tag condition keys (aws:ResourceTag, iam:ResourceTag, aws:RequestTag, aws:TagKeys)
have the values AWS gives them; a cross-account AssumeRole needs both sides."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.auth import SigV4Auth
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from gateway.iam.actions import IAM_ACTIONS
from tests.integration.accounts import ALT_NUMBER, OWNER_ID, OWNER_NUMBER
from tests.integration.test_iam import ALT, OWNER, _client, _raw, _start
from tests.process import GatewayProcess

_names = itertools.count()

# Every IAM action by the entity it names (its parameter) and the other parameters it needs.
USER_ACTIONS = {
    "GetUser": {}, "UpdateUser": {}, "DeleteUser": {}, "CreateAccessKey": {},
    "ListAccessKeys": {}, "UpdateAccessKey": {"AccessKeyId": "AKIAX", "Status": "Inactive"},
    "DeleteAccessKey": {"AccessKeyId": "AKIAX"}, "PutUserPolicy": {"PolicyName": "p",
    "PolicyDocument": "{}"}, "GetUserPolicy": {"PolicyName": "p"},
    "DeleteUserPolicy": {"PolicyName": "p"}, "ListUserPolicies": {},
    "AttachUserPolicy": {"PolicyArn": "arn:aws:iam::aws:policy/IAMReadOnlyAccess"},
    "DetachUserPolicy": {"PolicyArn": "arn:aws:iam::aws:policy/IAMReadOnlyAccess"},
    "ListAttachedUserPolicies": {}, "ListGroupsForUser": {},
    "TagUser": {"Tags.member.1.Key": "k", "Tags.member.1.Value": "v"},
    "UntagUser": {"TagKeys.member.1": "k"}, "ListUserTags": {},
}  # fmt: skip
# Without a UserName, these act on the caller itself.
SELF_ACTIONS = ("GetUser", "CreateAccessKey", "ListAccessKeys", "UpdateAccessKey",
                "DeleteAccessKey")  # fmt: skip
GROUP_ACTIONS = {
    "GetGroup": {}, "UpdateGroup": {}, "DeleteGroup": {}, "AddUserToGroup": {"UserName": "x"},
    "RemoveUserFromGroup": {"UserName": "x"}, "PutGroupPolicy": {"PolicyName": "p",
    "PolicyDocument": "{}"}, "GetGroupPolicy": {"PolicyName": "p"},
    "DeleteGroupPolicy": {"PolicyName": "p"}, "ListGroupPolicies": {},
    "AttachGroupPolicy": {"PolicyArn": "arn:aws:iam::aws:policy/IAMReadOnlyAccess"},
    "DetachGroupPolicy": {"PolicyArn": "arn:aws:iam::aws:policy/IAMReadOnlyAccess"},
    "ListAttachedGroupPolicies": {},
}  # fmt: skip
ROLE_ACTIONS = {
    "GetRole": {}, "UpdateRole": {}, "DeleteRole": {}, "UpdateAssumeRolePolicy": {
    "PolicyDocument": "{}"}, "PutRolePolicy": {"PolicyName": "p", "PolicyDocument": "{}"},
    "GetRolePolicy": {"PolicyName": "p"}, "DeleteRolePolicy": {"PolicyName": "p"},
    "ListRolePolicies": {},
    "AttachRolePolicy": {"PolicyArn": "arn:aws:iam::aws:policy/IAMReadOnlyAccess"},
    "DetachRolePolicy": {"PolicyArn": "arn:aws:iam::aws:policy/IAMReadOnlyAccess"},
    "ListAttachedRolePolicies": {}, "ListInstanceProfilesForRole": {},
    "TagRole": {"Tags.member.1.Key": "k", "Tags.member.1.Value": "v"},
    "UntagRole": {"TagKeys.member.1": "k"}, "ListRoleTags": {},
}  # fmt: skip
POLICY_ACTIONS = {
    "GetPolicy": {}, "DeletePolicy": {}, "CreatePolicyVersion": {"PolicyDocument": "{}"},
    "GetPolicyVersion": {"VersionId": "v1"}, "ListPolicyVersions": {},
    "SetDefaultPolicyVersion": {"VersionId": "v1"}, "DeletePolicyVersion": {"VersionId": "v2"},
}  # fmt: skip
CREATE_ACTIONS = {"CreateUser": "user", "CreateGroup": "group", "CreateRole": "role",
                  "CreatePolicy": "policy"}  # fmt: skip
# Actions on the account or on no one entity: judged on "*".
ACCOUNT_ACTIONS = ("ListUsers", "ListGroups", "ListRoles", "ListPolicies", "GetAccountSummary",
                   "ListOpenIDConnectProviders", "GetAccessKeyLastUsed")  # fmt: skip


def test_the_tables_name_every_iam_action() -> None:
    tables = [USER_ACTIONS, GROUP_ACTIONS, ROLE_ACTIONS, POLICY_ACTIONS, CREATE_ACTIONS]
    named = set(ACCOUNT_ACTIONS).union(*tables)
    assert named == set(IAM_ACTIONS)


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


ALLOW_ALL = {"Effect": "Allow", "Action": ["iam:*", "sts:*"], "Resource": "*"}


class Iam:
    """An IAM identity's raw form POSTs (any action, any parameters)."""

    def __init__(self, server: GatewayProcess, key: tuple[str, str]) -> None:
        self.server = server
        self.auth = SigV4Auth(Credentials(*key), "iam", "us-east-1")

    def __call__(self, action: str, **params: str) -> tuple[int, str]:
        body = urlencode({"Action": action, "Version": "2010-05-08", **params})
        status, answer = _raw(self.server, body, self.auth)
        return status, answer.decode()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[GatewayProcess]:
    gateway = _start(tmp_path_factory.mktemp("iam-judged"), module_catalog)
    yield gateway
    gateway.stop()


def _user(server: GatewayProcess, path: str, *statements: dict[str, Any]) -> tuple[str, Iam]:
    iam = _client(server, "iam", OWNER)
    name = f"u{next(_names)}"
    iam.create_user(UserName=name, Path=path)
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=_policy(*statements))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return name, Iam(server, (key["AccessKeyId"], key["SecretAccessKey"]))


def _denied(answer: tuple[int, str], arn: str) -> bool:
    status, body = answer
    return status == 403 and "<Code>AccessDenied</Code>" in body and arn in body


def test_a_deny_on_the_arn_iam_reports_holds_for_every_action(server: GatewayProcess) -> None:
    """H1: a Deny written on GetUser's (GetGroup's, GetRole's, a policy's) ARN, path included,
    holds for every action that names the entity, in any case."""
    owner = _client(server, "iam", OWNER)
    n = next(_names)
    victim, group, role, pol = f"victim{n}", f"grp{n}", f"role{n}", f"pol{n}"
    user_arn = owner.create_user(UserName=victim, Path="/ops/")["User"]["Arn"]
    group_arn = owner.create_group(GroupName=group, Path="/g/")["Group"]["Arn"]
    trust = _policy({"Effect": "Allow", "Principal": {"AWS": OWNER_ID}, "Action": "sts:AssumeRole"})
    role_arn = owner.create_role(RoleName=role, Path="/svc/", AssumeRolePolicyDocument=trust)[
        "Role"
    ]["Arn"]
    doc = _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"})
    pol_arn = owner.create_policy(PolicyName=pol, Path="/p/", PolicyDocument=doc)["Policy"]["Arn"]
    assert user_arn.endswith(f":user/ops/{victim}") and role_arn.endswith(f":role/svc/{role}")
    denied = [user_arn, group_arn, role_arn, pol_arn]
    _, admin = _user(
        server, "/", ALLOW_ALL, {"Effect": "Deny", "Action": "iam:*", "Resource": denied}
    )
    for name in (victim, victim.upper()):
        for action, params in USER_ACTIONS.items():
            assert _denied(admin(action, UserName=name, **params), user_arn), action
    for name in (group, group.upper()):
        for action, params in GROUP_ACTIONS.items():
            assert _denied(admin(action, GroupName=name, **params), group_arn), action
    for name in (role, role.upper()):
        for action, params in ROLE_ACTIONS.items():
            assert _denied(admin(action, RoleName=name, **params), role_arn), action
    for action, params in POLICY_ACTIONS.items():
        assert _denied(admin(action, PolicyArn=pol_arn, **params), pol_arn), action
    # Making one again at the denied ARN: judged on the ARN it would have, Path included.
    assert _denied(admin("CreateUser", UserName=victim, Path="/ops/"), user_arn)
    assert _denied(admin("CreateGroup", GroupName=group, Path="/g/"), group_arn)
    assert _denied(
        admin("CreateRole", RoleName=role, Path="/svc/", AssumeRolePolicyDocument=trust),
        role_arn,
    )
    assert _denied(admin("CreatePolicy", PolicyName=pol, Path="/p/", PolicyDocument=doc), pol_arn)
    # Moved under a denied path by UpdateUser: the target ARN is judged too.
    free = f"free{n}"
    owner.create_user(UserName=free)
    moved = user_arn.replace(f"/ops/{victim}", f"/ops/{free}")
    deny_ops = {"Effect": "Deny", "Action": "iam:*", "Resource": user_arn.replace(victim, "*")}
    _, mover = _user(server, "/", ALLOW_ALL, deny_ops)
    assert _denied(mover("UpdateUser", UserName=free, NewPath="/ops/"), moved)
    # The control: the same admin acts on an entity no Deny names.
    assert admin("GetUser", UserName=free)[0] == 200
    assert admin("ListUserTags", UserName=free)[0] == 200


def test_a_deny_on_its_own_arn_holds_without_a_user_name(server: GatewayProcess) -> None:
    """H1: a user acting on itself (no UserName) is judged on its ARN with its path."""
    iam = _client(server, "iam", OWNER)
    name = f"selfsvc{next(_names)}"
    arn = iam.create_user(UserName=name, Path="/team/")["User"]["Arn"]
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=_policy(
        ALLOW_ALL, {"Effect": "Deny", "Action": "iam:*", "Resource": arn}))  # fmt: skip
    key = iam.create_access_key(UserName=name)["AccessKey"]
    me = Iam(server, (key["AccessKeyId"], key["SecretAccessKey"]))
    for action in SELF_ACTIONS:
        params = {k: v for k, v in USER_ACTIONS[action].items()}
        if "AccessKeyId" in params:
            params["AccessKeyId"] = key["AccessKeyId"]
        assert _denied(me(action, **params), arn), action
    assert me("ListUsers")[0] == 200  # the Deny names the user, not the account


def test_resource_tags_of_the_user_or_role_acted_on(server: GatewayProcess) -> None:
    """H2: aws:ResourceTag/<key> and iam:ResourceTag/<key> are the stored tags of the user or
    role acted on: a Deny protecting tagged users holds, and not for untagged ones."""
    owner = _client(server, "iam", OWNER)
    n = next(_names)
    guarded, plain, role = f"guarded{n}", f"plain{n}", f"trole{n}"
    owner.create_user(UserName=guarded, Tags=[{"Key": "Protected", "Value": "yes"}])
    owner.create_user(UserName=plain)
    trust = _policy({"Effect": "Allow", "Principal": {"AWS": OWNER_ID}, "Action": "sts:AssumeRole"})
    owner.create_role(RoleName=role, AssumeRolePolicyDocument=trust,
                      Tags=[{"Key": "protected", "Value": "yes"}])  # fmt: skip
    for key in ("aws:ResourceTag/protected", "iam:ResourceTag/protected"):
        deny = {"Effect": "Deny", "Action": "iam:*", "Resource": "*",
                "Condition": {"StringEquals": {key: "yes"}}}  # fmt: skip
        _, admin = _user(server, "/", ALLOW_ALL, deny)
        assert admin("CreateAccessKey", UserName=guarded)[0] == 403, key
        assert admin("TagRole", RoleName=role, **USER_ACTIONS["TagUser"])[0] == 403, key
        assert admin("ListUserTags", UserName=plain)[0] == 200, key
    # A policy that allows only what is tagged for the caller's team (ABAC).
    allow = {"Effect": "Allow", "Action": "iam:GetUser", "Resource": "*",
             "Condition": {"StringEquals": {"aws:ResourceTag/Protected": "yes"}}}  # fmt: skip
    _, reader = _user(server, "/", allow)
    assert reader("GetUser", UserName=guarded)[0] == 200
    assert reader("GetUser", UserName=plain)[0] == 403


def test_request_tags_and_tag_keys(server: GatewayProcess) -> None:
    """H2: aws:RequestTag/<key> and aws:TagKeys on the actions that set or remove tags."""
    owner = _client(server, "iam", OWNER)
    target = f"tagged{next(_names)}"
    owner.create_user(UserName=target)
    deny = {"Effect": "Deny", "Action": ["iam:TagUser", "iam:UntagUser", "iam:CreateUser"],
            "Resource": "*",
            "Condition": {"ForAnyValue:StringEquals": {"aws:TagKeys": ["owner"]}}}  # fmt: skip
    must = {"Effect": "Deny", "Action": "iam:TagUser", "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestTag/env": "prod"}}}  # fmt: skip
    _, admin = _user(server, "/", ALLOW_ALL, deny, must)

    def tags(**pairs: str) -> dict[str, str]:
        out = {}
        for i, (k, v) in enumerate(pairs.items(), 1):
            out[f"Tags.member.{i}.Key"], out[f"Tags.member.{i}.Value"] = k, v
        return out

    assert admin("TagUser", UserName=target, **tags(owner="me"))[0] == 403
    assert admin("TagUser", UserName=target, **tags(env="prod"))[0] == 403
    assert admin("TagUser", UserName=target, **tags(env="dev", team="a"))[0] == 200
    assert admin("UntagUser", UserName=target, **{"TagKeys.member.1": "owner"})[0] == 403
    assert admin("UntagUser", UserName=target, **{"TagKeys.member.1": "team"})[0] == 200
    made = f"made{next(_names)}"
    assert admin("CreateUser", UserName=made, **tags(owner="me"))[0] == 403
    assert admin("CreateUser", UserName=made, **tags(team="a"))[0] == 200


def test_a_trust_policy_limits_the_session_tags(server: GatewayProcess) -> None:
    """H2: `ForAllValues:StringEquals aws:TagKeys` in a trust policy limits which session
    tags a caller may set (a caller overrode the role's `team` tag before)."""
    owner = _client(server, "iam", OWNER)
    name, _ = _user(server, "/", ALLOW_ALL)
    user_arn = owner.get_user(UserName=name)["User"]["Arn"]
    key = owner.create_access_key(UserName=name)["AccessKey"]
    role = f"tagrole{next(_names)}"
    trust = _policy(
        {"Effect": "Allow", "Principal": {"AWS": user_arn}, "Action": "sts:AssumeRole"},
        {"Effect": "Allow", "Principal": {"AWS": user_arn}, "Action": "sts:TagSession",
         "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": ["project"]},
                       "StringEquals": {"aws:RequestTag/project": ["blue", "green"]}}},
    )  # fmt: skip
    role_arn = owner.create_role(RoleName=role, AssumeRolePolicyDocument=trust,
                                 Tags=[{"Key": "team", "Value": "eng"}])["Role"]["Arn"]  # fmt: skip
    sts = _client(server, "sts", (key["AccessKeyId"], key["SecretAccessKey"]))

    def assume(*tags: tuple[str, str]) -> int:
        try:
            sts.assume_role(RoleArn=role_arn, RoleSessionName="ss",
                            Tags=[{"Key": k, "Value": v} for k, v in tags])  # fmt: skip
        except ClientError as exc:
            return exc.response["ResponseMetadata"]["HTTPStatusCode"]  # type: ignore[attr-defined]
        return 200

    assert assume(("team", "fin")) == 403
    assert assume(("project", "blue"), ("team", "fin")) == 403
    assert assume(("project", "red")) == 403
    assert assume(("project", "blue")) == 200


def test_cross_account_assume_role_needs_both_sides(server: GatewayProcess) -> None:
    """An IAM user of another account, named by the role's trust, still needs an Allow of
    sts:AssumeRole from its own account's policies."""
    owner, alt = _client(server, "iam", OWNER), _client(server, "iam", ALT)
    name = f"visitor{next(_names)}"
    visitor_arn = alt.create_user(UserName=name)["User"]["Arn"]
    assert f":{ALT_NUMBER}:" in visitor_arn
    key = alt.create_access_key(UserName=name)["AccessKey"]
    role = f"shared{next(_names)}"
    trust = _policy({"Effect": "Allow", "Principal": {"AWS": visitor_arn},
                     "Action": "sts:AssumeRole"})  # fmt: skip
    role_arn = owner.create_role(RoleName=role, AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    sts = _client(server, "sts", (key["AccessKeyId"], key["SecretAccessKey"]))
    with pytest.raises(ClientError) as refused:
        sts.assume_role(RoleArn=role_arn, RoleSessionName="xx")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    alt.put_user_policy(UserName=name, PolicyName="go", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": role_arn}))  # fmt: skip
    assumed = sts.assume_role(RoleArn=role_arn, RoleSessionName="xx")["AssumedRoleUser"]
    assert f":{OWNER_NUMBER}:assumed-role/{role}/xx" in assumed["Arn"]
    # The role's ARN as this gateway wrote it before accounts had numbers names it too.
    assert role_arn.startswith(f"arn:aws:iam::{OWNER_NUMBER}:role/")
    old_arn = role_arn.replace(OWNER_NUMBER, OWNER_ID)
    again = sts.assume_role(RoleArn=old_arn, RoleSessionName="xx")["AssumedRoleUser"]
    assert again["Arn"] == assumed["Arn"]


@pytest.mark.parametrize(
    ("managed", "allowed", "refused"),
    [
        ("AmazonS3FullAccess", "put", "iam"),
        ("AmazonS3ReadOnlyAccess", "get", "put"),
        ("IAMFullAccess", "iam-write", "get"),
        ("IAMReadOnlyAccess", "iam", "iam-write"),
        ("AmazonSNSFullAccess", "sns-write", "get"),
        ("AmazonSNSReadOnlyAccess", "sns", "sns-write"),
    ],
)
def test_aws_managed_policies_are_used_not_only_read(
    server: GatewayProcess, managed: str, allowed: str, refused: str
) -> None:
    """Each AWS managed policy the gateway offers, attached and used: a request it allows
    works and one it does not is AccessDenied (AmazonS3ReadOnlyAccess names
    `s3-object-lambda:Get*`, which once made every request of its user MalformedPolicy)."""
    owner, owner_s3 = _client(server, "iam", OWNER), _client(server, "s3", OWNER)
    bucket = f"managed-{next(_names)}"
    owner_s3.create_bucket(Bucket=bucket)
    owner_s3.put_object(Bucket=bucket, Key="k", Body=b"managed")
    name = f"m{next(_names)}"
    owner.create_user(UserName=name)
    owner.attach_user_policy(UserName=name, PolicyArn=f"arn:aws:iam::aws:policy/{managed}")
    key = owner.create_access_key(UserName=name)["AccessKey"]
    creds = (key["AccessKeyId"], key["SecretAccessKey"])
    s3, iam = _client(server, "s3", creds), _client(server, "iam", creds)
    sns = _client(server, "sns", creds)
    requests = {
        "sns": lambda: sns.list_topics(),
        "sns-write": lambda: sns.create_topic(Name=f"t{next(_names)}"),
        "put": lambda: s3.put_object(Bucket=bucket, Key="new", Body=b"x"),
        "get": lambda: s3.get_object(Bucket=bucket, Key="k")["Body"].read(),
        "iam": lambda: iam.list_users(),
        "iam-write": lambda: iam.create_user(UserName=f"made{next(_names)}"),
    }
    requests[allowed]()
    with pytest.raises(ClientError) as denied:
        requests[refused]()
    # SNS's query protocol names a refusal AuthorizationError, as AWS's SNS does.
    assert denied.value.response["Error"]["Code"] in (
        ("AuthorizationError",) if refused.startswith("sns") else ("AccessDenied",)
    )
