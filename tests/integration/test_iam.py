"""IAM and STS on the gateway's endpoint (gateway/iam/): users, access keys and their
policies made with aws-cli and boto3, then used for S3 requests that the policies allow and
nothing else; keys deactivated and deleted; temporary credentials from GetSessionToken and
AssumeRole. On both catalogs; and across two nodes of one PostgreSQL catalog."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.awscli import BIN
from tests.integration.accounts import (
    ALT_ID,
    ALT_NUMBER,
    OWNER_ID,
    OWNER_NUMBER,
    USERS,
    fails,
)
from tests.process import GatewayProcess

OWNER = ("OWNERACCESSKEY000001", "owner-secret")
ALT = ("ALTACCESSKEY00000001", "alt-secret")


def _client(server: GatewayProcess, service: str, key: tuple[str, ...]) -> Any:
    return boto3.client(
        service,
        endpoint_url=server.url,
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        aws_session_token=key[2] if len(key) > 2 else None,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _start(tmp: Path, catalog: str | None, cache: str = "0") -> GatewayProcess:
    tmp.mkdir(parents=True, exist_ok=True)
    users = tmp / "users.toml"
    users.write_text(USERS)
    env = {
        "S3GW_USERS": str(users),
        "S3GW_ACCESS_KEY": "",
        "S3GW_SECRET_KEY": "",
        "S3GW_IAM_CACHE_SECONDS": cache,
        "S3GW_LOG_FORMAT": "json",  # its access log lines name the user
    }
    return GatewayProcess(tmp / "data", env, catalog=catalog).start()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[GatewayProcess]:
    # No cache: every request reads its key (the bound itself is tested below).
    gateway = _start(tmp_path_factory.mktemp("iam"), module_catalog)
    yield gateway
    gateway.stop()


def _aws(server: GatewayProcess, key: tuple[str, ...], *args: str) -> Any:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": key[0],
        "AWS_SECRET_ACCESS_KEY": key[1],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    if len(key) > 2:
        env["AWS_SESSION_TOKEN"] = key[2]
    done = subprocess.run(
        [str(BIN / "aws"), "--endpoint-url", server.url, "--output", "json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


_counter = iter(range(1_000_000))


def _name(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


def test_a_user_made_with_aws_cli_does_what_its_policy_allows_and_nothing_else(
    server: GatewayProcess,
) -> None:
    owner = _client(server, "s3", OWNER)
    bucket, other = _name("iam-app"), _name("iam-other")
    owner.create_bucket(Bucket=bucket)
    owner.create_bucket(Bucket=other)
    owner.put_object(Bucket=bucket, Key="data/a", Body=b"first")
    owner.put_object(Bucket=other, Key="b", Body=b"second")
    user = _name("app")

    made = _aws(server, OWNER, "iam", "create-user", "--user-name", user, "--path", "/apps/")
    assert made["User"]["Arn"] == f"arn:aws:iam::{OWNER_NUMBER}:user/apps/{user}"
    key = _aws(server, OWNER, "iam", "create-access-key", "--user-name", user)["AccessKey"]
    creds = (key["AccessKeyId"], key["SecretAccessKey"])
    assert creds[0].startswith("AKIA") and len(creds[1]) == 40
    app = _client(server, "s3", creds)
    # No policy yet: nothing at all.
    assert fails(app.get_object, Bucket=bucket, Key="data/a") == ("AccessDenied", 403)
    assert fails(app.list_buckets) == ("AccessDenied", 403)

    document = _policy(
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": f"arn:aws:s3:::{bucket}/data/*"},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
    )  # fmt: skip
    _aws(server, OWNER, "iam", "put-user-policy", "--user-name", user,
         "--policy-name", "app", "--policy-document", document)  # fmt: skip
    assert app.get_object(Bucket=bucket, Key="data/a")["Body"].read() == b"first"
    app.put_object(Bucket=bucket, Key="data/b", Body=b"mine")
    # What it made belongs to the account (the bucket's owner reads it as its own).
    assert owner.get_object(Bucket=bucket, Key="data/b")["Body"].read() == b"mine"
    head = owner.get_object_acl(Bucket=bucket, Key="data/b")
    assert head["Owner"]["ID"] == OWNER_ID
    listed = app.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in listed["Contents"]] == ["data/a", "data/b"]
    # Outside the policy: another prefix, another action, another bucket, IAM itself.
    assert fails(app.put_object, Bucket=bucket, Key="top", Body=b"x") == ("AccessDenied", 403)
    assert fails(app.delete_object, Bucket=bucket, Key="data/a") == ("AccessDenied", 403)
    assert fails(app.get_object, Bucket=other, Key="b") == ("AccessDenied", 403)
    assert fails(app.put_bucket_policy, Bucket=bucket, Policy=_policy(
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{bucket}/*"})) == ("AccessDenied", 403)  # fmt: skip
    iam = _client(server, "iam", creds)
    assert fails(iam.create_user, UserName=_name("x")) == ("AccessDenied", 403)
    assert owner.head_object(Bucket=bucket, Key="data/b")["ContentLength"] == 4
    # The access log names the IAM user who wrote, not only its account.
    deadline, puts = time.monotonic() + 10, []
    while not puts and time.monotonic() < deadline:
        time.sleep(0.1)
        wrote = [json.loads(line) for line in server.log if f"/{bucket}/data/b" in line]
        puts = [entry for entry in wrote if entry.get("operation") == "PutObject"]
    assert puts and puts[-1]["user"] == made["User"]["Arn"]


def test_an_explicit_deny_wins_and_a_bucket_policy_naming_the_user_allows(
    server: GatewayProcess,
) -> None:
    owner, iam = _client(server, "s3", OWNER), _client(server, "iam", OWNER)
    bucket, user = _name("iam-deny"), _name("deny")
    owner.create_bucket(Bucket=bucket)
    owner.put_object(Bucket=bucket, Key="k", Body=b"v")
    arn = iam.create_user(UserName=user)["User"]["Arn"]
    key = iam.create_access_key(UserName=user)["AccessKey"]
    app = _client(server, "s3", (key["AccessKeyId"], key["SecretAccessKey"]))
    # The same account's bucket policy naming the user (not only its account) allows alone.
    owner.put_bucket_policy(Bucket=bucket, Policy=_policy(
        {"Effect": "Allow", "Principal": {"AWS": arn}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{bucket}/*"}))  # fmt: skip
    assert app.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    # Naming the account passes the permission to its identities, which need their own.
    owner.put_bucket_policy(Bucket=bucket, Policy=_policy(
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{OWNER_ID}:root"},
         "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}))  # fmt: skip
    assert fails(app.get_object, Bucket=bucket, Key="k") == ("AccessDenied", 403)
    iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}))  # fmt: skip
    assert app.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    # A Deny in a group's policy wins over both Allows.
    group = _name("readers")
    iam.create_group(GroupName=group)
    iam.put_group_policy(
        GroupName=group,
        PolicyName="no",
        PolicyDocument=_policy(
            {"Effect": "Deny", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}
        ),
    )
    iam.add_user_to_group(GroupName=group, UserName=user)
    assert fails(app.get_object, Bucket=bucket, Key="k") == ("AccessDenied", 403)
    assert [g["GroupName"] for g in iam.list_groups_for_user(UserName=user)["Groups"]] == [group]
    iam.remove_user_from_group(GroupName=group, UserName=user)
    assert app.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"


def test_one_group_policy_gives_each_user_a_home(server: GatewayProcess) -> None:
    """${aws:username} in a group's policy: each member writes under its own prefix only."""
    owner, iam = _client(server, "s3", OWNER), _client(server, "iam", OWNER)
    bucket, group = _name("iam-homes"), _name("staff")
    owner.create_bucket(Bucket=bucket)
    iam.create_group(GroupName=group)
    iam.put_group_policy(GroupName=group, PolicyName="home", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject"],
         "Resource": f"arn:aws:s3:::{bucket}/home/${{aws:username}}/*"},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}",
         "Condition": {"StringLike": {"s3:prefix": "home/${aws:username}/*"}}},
    ))  # fmt: skip
    clients = {}
    for person in (_name("ann"), _name("ben")):
        iam.create_user(UserName=person)
        iam.add_user_to_group(GroupName=group, UserName=person)
        key = iam.create_access_key(UserName=person)["AccessKey"]
        clients[person] = _client(server, "s3", (key["AccessKeyId"], key["SecretAccessKey"]))
    (ann, a), (ben, b) = clients.items()
    a.put_object(Bucket=bucket, Key=f"home/{ann}/cv", Body=b"a")
    b.put_object(Bucket=bucket, Key=f"home/{ben}/cv", Body=b"b")
    assert fails(a.put_object, Bucket=bucket, Key=f"home/{ben}/x", Body=b"x")[1] == 403
    assert fails(a.get_object, Bucket=bucket, Key=f"home/{ben}/cv")[1] == 403
    listed = a.list_objects_v2(Bucket=bucket, Prefix=f"home/{ann}/")
    assert [o["Key"] for o in listed["Contents"]] == [f"home/{ann}/cv"]
    assert fails(a.list_objects_v2, Bucket=bucket, Prefix=f"home/{ben}/")[1] == 403


def test_another_accounts_user_needs_both_sides(server: GatewayProcess) -> None:
    owner = _client(server, "s3", OWNER)
    alt_iam = _client(server, "iam", ALT)
    bucket, user = _name("iam-cross"), _name("visitor")
    owner.create_bucket(Bucket=bucket)
    owner.put_object(Bucket=bucket, Key="k", Body=b"v")
    alt_iam.create_user(UserName=user)
    key = alt_iam.create_access_key(UserName=user)["AccessKey"]
    visitor = _client(server, "s3", (key["AccessKeyId"], key["SecretAccessKey"]))
    alt_iam.put_user_policy(UserName=user, PolicyName="read", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}))  # fmt: skip
    # Its own Allow is not enough in another account's bucket...
    assert fails(visitor.get_object, Bucket=bucket, Key="k") == ("AccessDenied", 403)
    owner.put_bucket_policy(Bucket=bucket, Policy=_policy(
        {"Effect": "Allow", "Principal": {"AWS": ALT_ID}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{bucket}/*"}))  # fmt: skip
    # ...the bucket's owner must let its account in too.
    assert visitor.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    alt_iam.delete_user_policy(UserName=user, PolicyName="read")
    assert fails(visitor.get_object, Bucket=bucket, Key="k") == ("AccessDenied", 403)


def test_a_key_deactivated_or_deleted_is_refused(server: GatewayProcess) -> None:
    iam, user = _client(server, "iam", OWNER), _name("rotating")
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="list", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"}))  # fmt: skip
    first = iam.create_access_key(UserName=user)["AccessKey"]
    second = iam.create_access_key(UserName=user)["AccessKey"]
    assert fails(iam.create_access_key, UserName=user) == ("LimitExceeded", 409)
    one = _client(server, "s3", (first["AccessKeyId"], first["SecretAccessKey"]))
    two = _client(server, "s3", (second["AccessKeyId"], second["SecretAccessKey"]))
    one.list_buckets()
    iam.update_access_key(UserName=user, AccessKeyId=first["AccessKeyId"], Status="Inactive")
    assert fails(one.list_buckets) == ("InvalidAccessKeyId", 403)
    two.list_buckets()  # rotation: the other key works on
    listed = iam.list_access_keys(UserName=user)["AccessKeyMetadata"]
    assert {(k["AccessKeyId"], k["Status"]) for k in listed} == {
        (first["AccessKeyId"], "Inactive"), (second["AccessKeyId"], "Active")}  # fmt: skip
    iam.update_access_key(UserName=user, AccessKeyId=first["AccessKeyId"], Status="Active")
    one.list_buckets()
    assert fails(iam.delete_user, UserName=user) == ("DeleteConflict", 409)
    for key in (first, second):
        iam.delete_access_key(UserName=user, AccessKeyId=key["AccessKeyId"])
    assert fails(one.list_buckets) == ("InvalidAccessKeyId", 403)
    assert fails(two.list_buckets) == ("InvalidAccessKeyId", 403)
    iam.delete_user_policy(UserName=user, PolicyName="list")
    iam.delete_user(UserName=user)
    assert fails(iam.get_user, UserName=user) == ("NoSuchEntity", 404)


def test_iam_answers_as_aws_does(server: GatewayProcess) -> None:
    iam, user = _client(server, "iam", OWNER), _name("Mixed")
    assert iam.get_user()["User"]["Arn"] == f"arn:aws:iam::{OWNER_NUMBER}:root"
    iam.create_user(UserName=user, Path="/team/")
    # Names are unique without regard to case, and found so.
    assert fails(iam.create_user, UserName=user.lower()) == ("EntityAlreadyExists", 409)
    assert iam.get_user(UserName=user.upper())["User"]["UserName"] == user
    assert fails(iam.create_user, UserName="bad name") == ("ValidationError", 400)
    assert fails(iam.create_user, UserName="p", Path="nope") == ("ValidationError", 400)
    for document in (
        '{"Statement": []}',
        "not json",
        _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Principal": "*"}),
    ):
        assert fails(iam.put_user_policy, UserName=user, PolicyName="p",
                     PolicyDocument=document) == ("MalformedPolicyDocument", 400)  # fmt: skip
    assert fails(iam.put_user_policy, UserName=_name("nobody"), PolicyName="p",
                 PolicyDocument=_policy({"Effect": "Allow", "Action": "s3:*",
                                         "Resource": "*"})) == ("NoSuchEntity", 404)  # fmt: skip
    listed = iam.list_users(PathPrefix="/team/")["Users"]
    assert user in [u["UserName"] for u in listed]
    # Another account sees none of this account's users.
    alt = _client(server, "iam", ALT)
    assert user not in [u["UserName"] for u in alt.list_users()["Users"]]
    assert fails(alt.get_user, UserName=user) == ("NoSuchEntity", 404)
    # A managed policy, attached, counted, and kept while attached.
    arn = iam.create_policy(PolicyName=_name("ro"), PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "s3:Get*", "Resource": "*"}))["Policy"]["Arn"]  # fmt: skip
    iam.attach_user_policy(UserName=user, PolicyArn=arn)
    attached = iam.list_attached_user_policies(UserName=user)["AttachedPolicies"]
    assert [p["PolicyArn"] for p in attached] == [arn]
    assert iam.get_policy(PolicyArn=arn)["Policy"]["AttachmentCount"] == 1
    assert fails(iam.delete_policy, PolicyArn=arn) == ("DeleteConflict", 409)
    iam.detach_user_policy(UserName=user, PolicyArn=arn)
    iam.delete_policy(PolicyArn=arn)
    aws_managed = "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"
    version = iam.get_policy_version(PolicyArn=aws_managed, VersionId="v1")["PolicyVersion"]
    assert "s3:Get*" in json.dumps(version["Document"])
    assert fails(iam.get_policy_version, PolicyArn=aws_managed, VersionId="v9")[1] == 404
    iam.delete_user(UserName=user)


def test_a_root_has_keys_of_its_own(server: GatewayProcess) -> None:
    """CreateAccessKey without a UserName, signed by a root: a key of the root's (its
    buckets, its powers), as AWS lets a root have; counted by GetAccountSummary."""
    iam = _client(server, "iam", ALT)
    made = iam.create_access_key()["AccessKey"]
    key = (made["AccessKeyId"], made["SecretAccessKey"])
    bucket = _name("root-key")
    _client(server, "s3", key).create_bucket(Bucket=bucket)
    assert _client(server, "s3", ALT).get_bucket_acl(Bucket=bucket)["Owner"]["ID"] == ALT_ID
    assert (
        _client(server, "sts", key).get_caller_identity()["Arn"]
        == f"arn:aws:iam::{ALT_NUMBER}:root"
    )
    summary = iam.get_account_summary()["SummaryMap"]
    assert summary["AccountAccessKeysPresent"] == 1 and summary["AccessKeysPerUserQuota"] == 2
    assert iam.list_open_id_connect_providers()["OpenIDConnectProviderList"] == []
    iam.delete_access_key(AccessKeyId=key[0])
    assert fails(_client(server, "s3", key).list_buckets) == ("InvalidAccessKeyId", 403)
    _client(server, "s3", ALT).delete_bucket(Bucket=bucket)


def test_tags_of_users_and_roles(server: GatewayProcess) -> None:
    """Tags given on create come back with the user or role (Terraform reads them back);
    TagUser, UntagUser, ListUserTags and the role's; the role's instance profiles, none."""
    iam, user, role = _client(server, "iam", OWNER), _name("tagged"), _name("tagged-role")
    made = iam.create_user(UserName=user, Tags=[{"Key": "team", "Value": "data"}])["User"]
    assert made["Tags"] == [{"Key": "team", "Value": "data"}]
    iam.tag_user(
        UserName=user, Tags=[{"Key": "env", "Value": "ci"}, {"Key": "team", "Value": "ml"}]
    )
    assert {t["Key"]: t["Value"] for t in iam.list_user_tags(UserName=user)["Tags"]} == {
        "team": "ml", "env": "ci"}  # fmt: skip
    iam.untag_user(UserName=user, TagKeys=["team"])
    assert iam.get_user(UserName=user)["User"]["Tags"] == [{"Key": "env", "Value": "ci"}]
    trust = _policy({"Effect": "Allow", "Principal": {"AWS": OWNER_ID}, "Action": "sts:AssumeRole"})
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust, Tags=[{"Key": "a", "Value": ""}])
    assert iam.get_role(RoleName=role)["Role"]["Tags"] == [{"Key": "a", "Value": ""}]
    iam.tag_role(RoleName=role, Tags=[{"Key": "b", "Value": "2"}])
    assert len(iam.list_role_tags(RoleName=role)["Tags"]) == 2
    many = [{"Key": f"k{i}", "Value": "v"} for i in range(50)]
    assert fails(iam.tag_role, RoleName=role, Tags=many) == ("LimitExceeded", 409)
    assert iam.list_instance_profiles_for_role(RoleName=role)["InstanceProfiles"] == []
    assert fails(iam.list_instance_profiles_for_role, RoleName=_name("none"))[1] == 404
    iam.delete_role(RoleName=role)
    iam.delete_user(UserName=user)


def test_a_principal_tag_decides(server: GatewayProcess) -> None:
    """Attribute-based access: one policy, `aws:PrincipalTag/team` in its resource, gives each
    tagged user its team's prefix (IAM's ABAC tutorial, with S3)."""
    owner, iam = _client(server, "s3", OWNER), _client(server, "iam", OWNER)
    bucket, group = _name("iam-abac"), _name("abac")
    owner.create_bucket(Bucket=bucket)
    iam.create_group(GroupName=group)
    iam.put_group_policy(GroupName=group, PolicyName="team", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "s3:PutObject",
         "Resource": f"arn:aws:s3:::{bucket}/${{aws:PrincipalTag/team}}/*"}))  # fmt: skip
    clients = {}
    for team in ("red", "blue", ""):
        person = _name("member")
        tags = [{"Key": "team", "Value": team}] if team else []
        iam.create_user(UserName=person, Tags=tags)
        iam.add_user_to_group(GroupName=group, UserName=person)
        key = iam.create_access_key(UserName=person)["AccessKey"]
        clients[team] = _client(server, "s3", (key["AccessKeyId"], key["SecretAccessKey"]))
    clients["red"].put_object(Bucket=bucket, Key="red/a", Body=b"r")
    assert fails(clients["red"].put_object, Bucket=bucket, Key="blue/a", Body=b"x")[1] == 403
    clients["blue"].put_object(Bucket=bucket, Key="blue/a", Body=b"b")
    # No tag: the variable has no value, and the resource matches nothing.
    assert fails(clients[""].put_object, Bucket=bucket, Key="/a", Body=b"x")[1] == 403


def test_session_tags(server: GatewayProcess) -> None:
    """AssumeRole with Tags: allowed only where the trust policy allows sts:TagSession too;
    a session tag is aws:PrincipalTag for the session, over the role's own tag."""
    owner, iam = _client(server, "s3", OWNER), _client(server, "iam", OWNER)
    bucket, user, role = _name("iam-stags"), _name("tagger"), _name("tag-role")
    owner.create_bucket(Bucket=bucket)
    iam.create_user(UserName=user)
    iam.put_user_policy(
        UserName=user,
        PolicyName="assume",
        PolicyDocument=_policy(
            {"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"], "Resource": "*"}
        ),
    )
    made = iam.create_access_key(UserName=user)["AccessKey"]
    sts = _client(server, "sts", (made["AccessKeyId"], made["SecretAccessKey"]))
    trust = {"Effect": "Allow", "Principal": {"AWS": OWNER_ID}, "Action": "sts:AssumeRole"}
    arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=_policy(trust),
                          Tags=[{"Key": "team", "Value": "red"}])["Role"]["Arn"]  # fmt: skip
    iam.put_role_policy(RoleName=role, PolicyName="team", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "s3:PutObject",
         "Resource": f"arn:aws:s3:::{bucket}/${{aws:PrincipalTag/team}}/*"}))  # fmt: skip
    tagged = {"RoleArn": arn, "RoleSessionName": "t1", "Tags": [{"Key": "team", "Value": "blue"}]}
    assert fails(sts.assume_role, **tagged)[1] == 403  # the trust policy allows no TagSession
    iam.update_assume_role_policy(RoleName=role, PolicyDocument=_policy(
        {**trust, "Action": ["sts:AssumeRole", "sts:TagSession"]}))  # fmt: skip
    c = sts.assume_role(**tagged)["Credentials"]
    session = _client(server, "s3", (c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]))
    session.put_object(Bucket=bucket, Key="blue/a", Body=b"b")
    assert fails(session.put_object, Bucket=bucket, Key="red/a", Body=b"r")[1] == 403
    # Without session tags, the role's own tag counts.
    plain = sts.assume_role(RoleArn=arn, RoleSessionName="t2")["Credentials"]
    untagged = _client(server, "s3", (plain["AccessKeyId"], plain["SecretAccessKey"],
                                      plain["SessionToken"]))  # fmt: skip
    untagged.put_object(Bucket=bucket, Key="red/a", Body=b"r")


def test_a_managed_policys_versions(server: GatewayProcess) -> None:
    """CreatePolicyVersion as Terraform updates a policy: the default version is the one
    that counts; five versions at most; the default is not deleted alone."""
    owner, iam = _client(server, "s3", OWNER), _client(server, "iam", OWNER)
    bucket, user = _name("iam-versions"), _name("versioned")
    owner.create_bucket(Bucket=bucket)
    owner.put_object(Bucket=bucket, Key="k", Body=b"v")
    read = _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"})
    none = _policy({"Effect": "Deny", "Action": "s3:GetObject", "Resource": "*"})
    arn = iam.create_policy(PolicyName=_name("p"), PolicyDocument=none)["Policy"]["Arn"]
    iam.create_user(UserName=user)
    iam.attach_user_policy(UserName=user, PolicyArn=arn)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    app = _client(server, "s3", (key["AccessKeyId"], key["SecretAccessKey"]))
    assert fails(app.get_object, Bucket=bucket, Key="k")[1] == 403
    made = iam.create_policy_version(PolicyArn=arn, PolicyDocument=read, SetAsDefault=True)
    assert made["PolicyVersion"]["VersionId"] == "v2"
    assert app.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    for _ in range(3):
        iam.create_policy_version(PolicyArn=arn, PolicyDocument=none)
    assert fails(iam.create_policy_version, PolicyArn=arn, PolicyDocument=none) == (
        "LimitExceeded", 409)  # fmt: skip
    versions = iam.list_policy_versions(PolicyArn=arn)["Versions"]
    assert [(v["VersionId"], v["IsDefaultVersion"]) for v in versions] == [
        ("v1", False), ("v2", True), ("v3", False), ("v4", False), ("v5", False)]  # fmt: skip
    assert fails(iam.delete_policy_version, PolicyArn=arn, VersionId="v2") == (
        "DeleteConflict", 409)  # fmt: skip
    iam.set_default_policy_version(PolicyArn=arn, VersionId="v1")
    assert fails(app.get_object, Bucket=bucket, Key="k")[1] == 403
    iam.detach_user_policy(UserName=user, PolicyArn=arn)
    assert fails(iam.delete_policy, PolicyArn=arn) == ("DeleteConflict", 409)
    for version in ("v2", "v3", "v4", "v5"):
        iam.delete_policy_version(PolicyArn=arn, VersionId=version)
    iam.delete_policy(PolicyArn=arn)
    assert fails(iam.get_policy, PolicyArn=arn)[1] == 404


def test_temporary_credentials(server: GatewayProcess) -> None:
    owner, iam = _client(server, "s3", OWNER), _client(server, "iam", OWNER)
    bucket, user, role = _name("iam-sts"), _name("ci"), _name("deployer")
    owner.create_bucket(Bucket=bucket)
    iam.create_user(UserName=user)
    iam.put_user_policy(
        UserName=user,
        PolicyName="read",
        PolicyDocument=_policy(
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}
        ),
    )
    key = iam.create_access_key(UserName=user)["AccessKey"]
    creds = (key["AccessKeyId"], key["SecretAccessKey"])

    # GetSessionToken (aws-cli): the user's powers, for the session's time.
    session = _aws(server, creds, "sts", "get-session-token", "--duration-seconds", "900")
    temp = session["Credentials"]
    token = (temp["AccessKeyId"], temp["SecretAccessKey"], temp["SessionToken"])
    assert token[0].startswith("ASIA")
    owner.put_object(Bucket=bucket, Key="k", Body=b"v")
    got = _aws(server, token, "s3api", "list-objects-v2", "--bucket", bucket)
    assert [o["Key"] for o in got["Contents"]] == ["k"]
    who = _client(server, "sts", token).get_caller_identity()
    assert who["Arn"].endswith(f":user/{user}") and who["Account"] == OWNER_NUMBER
    temp_s3 = _client(server, "s3", token)
    assert fails(temp_s3.put_object, Bucket=bucket, Key="w", Body=b"x") == ("AccessDenied", 403)
    # Without its token, or with an altered one, the key is nobody's.
    # A temporary key without its token: no key of that name exists for a signature alone.
    assert fails(_client(server, "s3", token[:2]).list_objects_v2, Bucket=bucket) == (
        "InvalidAccessKeyId",
        403,
    )
    altered = token[2][:-6] + ("AAAAAA" if not token[2].endswith("AAAAAA") else "BBBBBB")
    bad = _client(server, "s3", (*token[:2], altered))
    assert fails(bad.list_objects_v2, Bucket=bucket) == ("InvalidToken", 400)
    # A presigned URL carries the token too.
    import urllib.request

    for version in ("s3v4",):
        presigner = boto3.client(
            "s3", endpoint_url=server.url, aws_access_key_id=token[0],
            aws_secret_access_key=token[1], aws_session_token=token[2],
            region_name="us-east-1",
            config=Config(signature_version=version, s3={"addressing_style": "path"}),
        )  # fmt: skip
        url = presigner.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"})
        assert "security-token" in url.lower()
        with urllib.request.urlopen(url) as answer:
            assert answer.read() == b"v"

    # AssumeRole: the role's powers, narrowed by a session policy; the trust policy decides.
    principal = {"AWS": f"arn:aws:iam::{OWNER_ID}:user/{user}"}
    trust = _policy({"Effect": "Allow", "Principal": principal,
                     "Action": "sts:AssumeRole"})  # fmt: skip
    role_arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    iam.put_role_policy(
        RoleName=role,
        PolicyName="write",
        PolicyDocument=_policy(
            {"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject"], "Resource": "*"}
        ),
    )
    assumed = _aws(server, creds, "sts", "assume-role", "--role-arn", role_arn,
                   "--role-session-name", "job-1")  # fmt: skip
    assert assumed["AssumedRoleUser"]["Arn"] == (
        f"arn:aws:sts::{OWNER_NUMBER}:assumed-role/{role}/job-1"
    )
    c = assumed["Credentials"]
    as_role = _client(server, "s3", (c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]))
    as_role.put_object(Bucket=bucket, Key="by-role", Body=b"r")
    assert owner.get_object(Bucket=bucket, Key="by-role")["Body"].read() == b"r"
    narrowed = _client(server, "sts", creds).assume_role(
        RoleArn=role_arn, RoleSessionName="job-2",
        Policy=_policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}),
    )["Credentials"]  # fmt: skip
    reader = _client(server, "s3", (narrowed["AccessKeyId"], narrowed["SecretAccessKey"],
                                     narrowed["SessionToken"]))  # fmt: skip
    assert reader.get_object(Bucket=bucket, Key="by-role")["Body"].read() == b"r"
    assert fails(reader.put_object, Bucket=bucket, Key="no", Body=b"x") == ("AccessDenied", 403)
    # A root may assume no role (AWS's answer); a session policy is 2,048 characters at most;
    # a role's session assumes a role for an hour at most (role chaining).
    root_sts = _client(server, "sts", OWNER)
    assert fails(root_sts.assume_role, RoleArn=role_arn, RoleSessionName="xx") == (
        "AccessDenied", 403)  # fmt: skip
    big = _policy(*[{"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{i}"}
                    for i in range(60)])  # fmt: skip
    assert len(big) > 2048
    user_sts = _client(server, "sts", creds)
    assert fails(user_sts.assume_role, RoleArn=role_arn, RoleSessionName="xx", Policy=big)[0] == (
        "ValidationError")  # fmt: skip
    role_sts = _client(server, "sts", (c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]))
    both = [principal["AWS"], assumed["AssumedRoleUser"]["Arn"]]
    iam.update_assume_role_policy(
        RoleName=role,
        PolicyDocument=_policy(
            {"Effect": "Allow", "Principal": {"AWS": both}, "Action": "sts:AssumeRole"}
        ),
    )
    assert fails(role_sts.assume_role, RoleArn=role_arn, RoleSessionName="chain",
                 DurationSeconds=7200)[0] == "ValidationError"  # fmt: skip
    chained = role_sts.assume_role(RoleArn=role_arn, RoleSessionName="chain")["Credentials"]
    assert (chained["Expiration"] - dt.datetime.now(dt.UTC)).total_seconds() <= 3600
    # Someone the trust policy does not name may not assume it.
    alt_sts = _client(server, "sts", ALT)
    assert fails(alt_sts.assume_role, RoleArn=role_arn, RoleSessionName="xx")[1] == 403
    # A role's session names the user it means; GetSessionToken's credentials call no IAM.
    role_iam = _client(server, "iam", (c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]))
    iam.put_role_policy(RoleName=role, PolicyName="keys", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "iam:CreateAccessKey", "Resource": "*"}))  # fmt: skip
    assert fails(role_iam.create_access_key) == ("ValidationError", 400)  # not the root's key
    assert iam.list_access_keys()["AccessKeyMetadata"] == []
    iam.delete_role_policy(RoleName=role, PolicyName="keys")
    assert fails(_client(server, "iam", token).list_access_keys)[1] == 403
    # The role gone, its sessions go with it.
    iam.delete_role_policy(RoleName=role, PolicyName="write")
    iam.delete_role(RoleName=role)
    assert fails(as_role.get_object, Bucket=bucket, Key="k") == ("InvalidAccessKeyId", 403)
    # The key that made a session deleted, the session goes too.
    iam.delete_access_key(UserName=user, AccessKeyId=creds[0])
    assert fails(temp_s3.get_object, Bucket=bucket, Key="k") == ("InvalidAccessKeyId", 403)


@pytest.mark.parametrize("cache", ["1"])
def test_a_key_deleted_on_one_node_is_refused_on_the_other(
    tmp_path: Path, new_catalog: Any, cache: str
) -> None:
    """Two nodes on one catalog, each keeping keys for --iam-cache-seconds 1: a key deleted
    through one is refused by the other within that bound."""
    url = new_catalog()
    if url is None:
        pytest.skip("several nodes share a PostgreSQL catalog")
    first = _start(tmp_path / "one", url, cache)
    try:
        data = tmp_path / "one" / "data"
        users = tmp_path / "one" / "users.toml"
        env = {"S3GW_USERS": str(users), "S3GW_ACCESS_KEY": "", "S3GW_SECRET_KEY": "",
               "S3GW_IAM_CACHE_SECONDS": cache}  # fmt: skip
        second = GatewayProcess(data, env, catalog=url).start()
        try:
            iam = _client(first, "iam", OWNER)
            user = _name("node")
            iam.create_user(UserName=user)
            iam.put_user_policy(
                UserName=user,
                PolicyName="l",
                PolicyDocument=_policy(
                    {"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"}
                ),
            )
            key = iam.create_access_key(UserName=user)["AccessKey"]
            creds = (key["AccessKeyId"], key["SecretAccessKey"])
            # Made on one node, it works on the other at once, even where the other has read
            # the account lately (a second key, with the first one's document kept there).
            _client(second, "s3", creds).list_buckets()
            other = iam.create_access_key(UserName=user)["AccessKey"]
            _client(second, "s3", (other["AccessKeyId"], other["SecretAccessKey"])).list_buckets()
            # Both nodes changing one account at once (its first document too): no change
            # is lost, none is made twice.
            from concurrent.futures import ThreadPoolExecutor

            def make(node: GatewayProcess, name: str) -> None:
                _client(node, "iam", ALT).create_user(UserName=name)

            names = [_name("both") for _ in range(16)]
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(make, [first, second] * 8, names))
            for node in (first, second):
                listed = _client(node, "iam", ALT).list_users()["Users"]
                assert sorted(u["UserName"] for u in listed) == sorted(names)
            iam.delete_access_key(UserName=user, AccessKeyId=creds[0])
            assert fails(_client(first, "s3", creds).list_buckets)[0] == "InvalidAccessKeyId"
            time.sleep(float(cache) + 0.2)
            assert fails(_client(second, "s3", creds).list_buckets)[0] == "InvalidAccessKeyId"
        finally:
            second.stop()
    finally:
        first.stop()


def test_an_unsigned_or_foreign_iam_request_is_refused(server: GatewayProcess) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        server.url + "/", data=b"Action=ListUsers&Version=2010-05-08",
        headers={"Content-Type": "application/x-www-form-urlencoded"}, method="POST",
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 403
    assert b"MissingAuthenticationToken" in caught.value.read()
    huge = urllib.request.Request(
        server.url + "/", data=b"Action=ListUsers&x=" + b"a" * (2 << 20),
        headers={"Content-Type": "application/x-www-form-urlencoded"}, method="POST",
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(huge)
    assert caught.value.code == 413 and b"RequestEntityTooLarge" in caught.value.read()
    wrong = _client(server, "iam", (OWNER[0], "not-the-secret"))
    with pytest.raises(ClientError) as refused:
        wrong.list_users()
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


# -- review: what an identity must not be able to do ----------------------------------------


def _user_with(server: GatewayProcess, *statements: dict[str, Any]) -> tuple[str, tuple[str, str]]:
    """A new IAM user of the owner's account with one inline policy, and its key."""
    iam, user = _client(server, "iam", OWNER), _name("u")
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=_policy(*statements))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return user, (key["AccessKeyId"], key["SecretAccessKey"])


def _raw(server: GatewayProcess, body: str, auth: Any) -> tuple[int, bytes]:
    """A form POSTed to IAM's endpoint, signed by a botocore signer (`auth`)."""
    import urllib.error
    import urllib.request

    from botocore.awsrequest import AWSRequest

    signed = AWSRequest("POST", server.url + "/", data=body.encode(),
                        headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    auth.add_auth(signed)
    request = urllib.request.Request(
        signed.url, data=body.encode(), headers=dict(signed.headers.items()), method="POST"
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_form_whose_body_no_signature_covers_is_refused(server: GatewayProcess) -> None:
    """SigV2 (S3's) signs no body: a signature seen once would run any IAM action for 15
    minutes. IAM and STS take SigV4, which signs the body's hash."""
    from botocore.auth import HmacV1Auth
    from botocore.credentials import Credentials

    victim = _name("v2")
    status, body = _raw(
        server,
        f"Action=CreateUser&Version=2010-05-08&UserName={victim}",
        HmacV1Auth(Credentials(*OWNER)),
    )
    assert (status, b"<Code>IncompleteSignature</Code>" in body) == (400, True), body
    iam = _client(server, "iam", OWNER)
    assert fails(iam.get_user, UserName=victim)[1] == 404


def _bad_number(server: GatewayProcess, service: str, body: str) -> tuple[int, bytes]:
    from botocore.auth import SigV4Auth
    from botocore.credentials import Credentials

    return _raw(server, body, SigV4Auth(Credentials(*OWNER), service, "us-east-1"))


def test_a_bad_number_is_a_validation_error(server: GatewayProcess) -> None:
    from urllib.parse import quote

    # A trust policy that passes, so that the number is what is judged.
    trust = quote(_policy({"Effect": "Allow", "Principal": {"AWS": OWNER_ID},
                           "Action": "sts:AssumeRole"}))  # fmt: skip
    for service, body in (
        ("sts", "Action=GetSessionToken&Version=2011-06-15&DurationSeconds=%C2%B2"),
        ("iam", f"Action=CreateRole&Version=2010-05-08&RoleName={_name('r')}"
                f"&AssumeRolePolicyDocument={trust}&MaxSessionDuration=%C2%B2"),
    ):  # fmt: skip
        status, text = _bad_number(server, service, body)
        # AWS: 400 ValidationError for a number that is not one (a superscript two).
        assert (status, b"<Code>ValidationError</Code>" in text) == (400, True), text


def test_a_bad_max_items_is_a_validation_error(server: GatewayProcess) -> None:
    body = "Action=ListUsers&Version=2010-05-08&MaxItems=%C2%B2"
    status, text = _bad_number(server, "iam", body)
    assert (status, b"<Code>ValidationError</Code>" in text) == (400, True), text


def test_renaming_needs_the_new_name_too(server: GatewayProcess) -> None:
    """UpdateUser and UpdateGroup: "the requester must have appropriate permissions on both
    the source object and the target object" (API_UpdateUser.html): a user who may manage
    itself must not take a name that a bucket policy or a Deny names."""
    user, creds = _user_with(
        server, {"Effect": "Allow", "Action": "iam:UpdateUser", "Resource": "*"},
        {"Effect": "Deny", "Action": "*", "Resource": f"arn:aws:iam::{OWNER_ID}:user/admin-*"},
    )  # fmt: skip
    me = _client(server, "iam", creds)
    taken = _name("admin")
    assert fails(me.update_user, UserName=user, NewUserName=taken) == ("AccessDenied", 403)


def test_a_name_in_another_case_is_judged_as_the_entity(server: GatewayProcess) -> None:
    """IAM's names are one name whatever their case: a Deny naming user/Victim holds for
    UserName=victim too, and no Unicode look-alike (K, the Kelvin sign) reaches it."""
    iam = _client(server, "iam", OWNER)
    victim = _name("Victim")
    iam.create_user(UserName=victim)
    _, creds = _user_with(
        server, {"Effect": "Allow", "Action": "iam:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "*", "Resource": f"arn:aws:iam::{OWNER_ID}:user/{victim}"},
    )  # fmt: skip
    admin = _client(server, "iam", creds)
    assert fails(admin.create_access_key, UserName=victim.lower()) == ("AccessDenied", 403)
    assert fails(admin.create_access_key, UserName=victim.upper()) == ("AccessDenied", 403)
    kelvin = _name("kelvin").replace("k", "\u212a")
    assert fails(admin.create_user, UserName=kelvin) == ("ValidationError", 400)
    assert iam.list_access_keys(UserName=victim)["AccessKeyMetadata"] == []


def test_adding_a_user_to_a_group_is_judged_on_the_group(server: GatewayProcess) -> None:
    """iam:AddUserToGroup's resource is the group (the Service Authorization Reference): a
    user who may manage itself may not join the admins' group."""
    iam = _client(server, "iam", OWNER)
    admins = _name("admins")
    iam.create_group(GroupName=admins)
    user, creds = _user_with(server, {
        "Effect": "Allow", "Action": ["iam:AddUserToGroup", "iam:RemoveUserFromGroup"],
        "Resource": f"arn:aws:iam::{OWNER_ID}:user/${{aws:username}}"})  # fmt: skip
    me = _client(server, "iam", creds)
    assert fails(me.add_user_to_group, GroupName=admins, UserName=user) == ("AccessDenied", 403)
    assert iam.get_group(GroupName=admins)["Users"] == []


def _role(server: GatewayProcess, trust: dict[str, Any], *statements: dict[str, Any]) -> str:
    iam, role = _client(server, "iam", OWNER), _name("role")
    arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [trust]}))["Role"]["Arn"]  # fmt: skip
    if statements:
        iam.put_role_policy(RoleName=role, PolicyName="p", PolicyDocument=_policy(*statements))
    return arn


def test_a_deny_wins_over_a_trust_policy(server: GatewayProcess) -> None:
    """AssumeRole: an explicit Deny in the caller's own policies refuses even where the trust
    policy names it; and the trust policy's conditions see who asks (aws:PrincipalArn)."""
    user, creds = _user_with(
        server, {"Effect": "Deny", "Action": "sts:AssumeRole", "Resource": "*"}
    )
    user_arn = f"arn:aws:iam::{OWNER_ID}:user/{user}"
    named = _role(server, {"Effect": "Allow", "Principal": {"AWS": user_arn},
                           "Action": "sts:AssumeRole"})  # fmt: skip
    sts = _client(server, "sts", creds)
    assert fails(sts.assume_role, RoleArn=named, RoleSessionName="ss")[1] == 403

    other, other_creds = _user_with(
        server, {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}
    )
    other_arn = f"arn:aws:iam::{OWNER_ID}:user/{other}"
    guarded = _role(server, {"Effect": "Allow", "Principal": {"AWS": OWNER_ID},
                             "Action": "sts:AssumeRole"})  # fmt: skip
    iam = _client(server, "iam", OWNER)
    iam.update_assume_role_policy(RoleName=guarded.rpartition("/")[2], PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": OWNER_ID}, "Action": "sts:AssumeRole"},
            {"Effect": "Deny", "Principal": {"AWS": OWNER_ID}, "Action": "sts:AssumeRole",
             "Condition": {"StringEquals": {"aws:PrincipalArn": other_arn}}}]}))  # fmt: skip
    sts = _client(server, "sts", other_creds)
    assert fails(sts.assume_role, RoleArn=guarded, RoleSessionName="ss")[1] == 403


def test_a_session_policy_narrows_a_bucket_policy_naming_the_role(
    server: GatewayProcess,
) -> None:
    """A session policy limits "If the resource-based policy specifies the ARN of the role"
    (IAM's guide, Session policies); naming the session's own ARN is not limited."""
    owner = _client(server, "s3", OWNER)
    bucket = _name("iam-narrow")
    owner.create_bucket(Bucket=bucket)
    owner.put_object(Bucket=bucket, Key="k", Body=b"v")
    role_arn = _role(server, {"Effect": "Allow", "Principal": {"AWS": OWNER_ID},
                              "Action": "sts:AssumeRole"})  # fmt: skip
    owner.put_bucket_policy(Bucket=bucket, Policy=_policy(
        {"Effect": "Allow", "Principal": {"AWS": role_arn}, "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{bucket}/*"}))  # fmt: skip
    # Roots assume no role: an IAM user allowed sts:AssumeRole does.
    iam, assumer = _client(server, "iam", OWNER), _name("assumer")
    iam.create_user(UserName=assumer)
    iam.put_user_policy(UserName=assumer, PolicyName="assume", PolicyDocument=_policy(
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}))  # fmt: skip
    made = iam.create_access_key(UserName=assumer)["AccessKey"]
    sts = _client(server, "sts", (made["AccessKeyId"], made["SecretAccessKey"]))
    narrow = _policy({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"})
    creds = sts.assume_role(RoleArn=role_arn, RoleSessionName="ss", Policy=narrow)["Credentials"]
    session = _client(server, "s3", (creds["AccessKeyId"], creds["SecretAccessKey"],
                                     creds["SessionToken"]))  # fmt: skip
    assert fails(session.get_object, Bucket=bucket, Key="k") == ("AccessDenied", 403)
    # Without a session policy, the bucket policy naming the role allows.
    plain = sts.assume_role(RoleArn=role_arn, RoleSessionName="ss")["Credentials"]
    session = _client(server, "s3", (plain["AccessKeyId"], plain["SecretAccessKey"],
                                     plain["SessionToken"]))  # fmt: skip
    assert session.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
