"""The console's IAM pages (gateway/console/iam.py) over plain HTTP, against a real gateway on
each catalog: a user and its key made in the console, the key's secret shown once, the key
refused by S3 until an inline policy put in the console allows it; a malformed policy shown as
MalformedPolicyDocument and changing nothing; groups, roles and managed policies; an IAM user
signing in with its own key, refused what its policies do not allow, its session ended with
its key. And in a real browser (headless Chromium, tests/webdriver.py): a user and its key
made by clicking, the secret read off the page and working with boto3.

S3GW_CONSOLE_SCREENSHOTS=DIR saves the IAM screenshot of docs/console.md into DIR."""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from gateway.users import account_number
from tests.integration.accounts import fails
from tests.integration.test_console import (
    ALICE,
    USERS,
    Console,
    Session,
    _attempt,
    _shoot,
    _sign_in,
    _text,
)
from tests.server import GatewayProcess
from tests.webdriver import Browser, browser_for_test

ALICE_ID = "a11ce00000000000000000000000000000000000000000000000000000000001"
ALICE_NUMBER = account_number(ALICE_ID)  # the 12-digit id its ARNs carry
_counter = iter(range(1_000_000))


def _name(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


def start(tmp: Path, catalog: str | None) -> GatewayProcess:
    """The gateway of test_console's two users, its console on; IAM keys read for every
    request (no --iam-cache-seconds), so that a change made through one worker counts on the
    next request whichever worker takes it."""
    (tmp / "users.toml").write_text(USERS)
    env = {
        "S3GW_USERS": str(tmp / "users.toml"),
        "S3GW_ACCESS_KEY": "",
        "S3GW_SECRET_KEY": "",
        "S3GW_CONSOLE_ADDRESS": "127.0.0.1:0",
        "S3GW_IAM_CACHE_SECONDS": "0",
    }
    return GatewayProcess(tmp / "data", env, catalog=catalog).start()


@pytest.fixture(scope="module")
def console(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[Console]:
    server = start(tmp_path_factory.mktemp("console-iam"), module_catalog)
    yield Console(server)
    server.stop()


def client(console: Console, service: str, key: tuple[str, ...]) -> Any:
    return boto3.client(
        service,
        endpoint_url=console.server.url,
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        aws_session_token=key[2] if len(key) > 2 else None,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def new_key(page: str) -> tuple[str, str]:
    """The access key and the secret the answer to "Create access key" shows."""
    key = re.search(r"<code>(AKIA[A-Z0-9]+)</code>", page)
    secret = re.search(r'id="secret-key"[^>]* value="([^"]+)"', page)
    assert key is not None and secret is not None, page
    return key.group(1), html.unescape(secret.group(1))


def test_a_key_made_in_the_console_works_as_its_inline_policy_says(console):
    alice = Session(console, ALICE)
    owner_s3 = client(console, "s3", ALICE)
    owner_iam = client(console, "iam", ALICE)
    bucket, user = _name("console-iam"), _name("app")
    owner_s3.create_bucket(Bucket=bucket)
    owner_s3.put_object(Bucket=bucket, Key="data/a", Body=b"first")

    status, page = alice.act("/iam/users", user=user)
    assert status == 200 and f"IAM user {user}" in page, page
    assert f"arn:aws:iam::{ALICE_NUMBER}:user/{user}" in page
    assert user in alice.get("/iam/users")[1]
    status, page = alice.get("/iam/user", name=f"{user}-not")
    assert status == 404 and "NoSuchEntity" in page

    # The secret, on the answer to the form that made the key, and never again.
    status, page = alice.act("/iam/keys", user=user)
    assert status == 200, page
    key, secret = new_key(page)
    assert len(secret) == 40
    status, again = alice.get("/iam/key", user=user, id=key)
    assert status == 200 and key in again and "shown once" in again
    assert secret not in again
    status, listed = alice.get("/iam/user", name=user)
    assert status == 200 and key in listed and secret not in listed
    assert secret not in alice.get("/iam/key", user=user, id=key)[1]

    # No policy yet: S3 refuses the key.
    app = client(console, "s3", (key, secret))
    assert fails(app.get_object, Bucket=bucket, Key="data/a") == ("AccessDenied", 403)

    # A malformed document: IAM's error on the page, and nothing put.
    status, page = alice.act(
        "/iam/user/policies", user=user, policy="broken", document='{"Version": "2012-10-17",'
    )
    assert status == 400 and "MalformedPolicyDocument" in page, page
    status, page = alice.act(
        "/iam/user/policies",
        user=user,
        policy="broken",
        document=policy({"Effect": "Allow", "Action": "s3:GetObject"}),  # no Resource
    )
    assert status == 400 and "MalformedPolicyDocument" in page, page
    assert owner_iam.list_user_policies(UserName=user)["PolicyNames"] == []
    assert "No inline policies." in alice.get("/iam/user", name=user)[1]
    assert fails(app.get_object, Bucket=bucket, Key="data/a") == ("AccessDenied", 403)

    document = policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}
    )
    status, page = alice.act("/iam/user/policies", user=user, policy="read", document=document)
    assert status == 200 and "read" in page and "s3:GetObject" in html.unescape(page), page
    got = owner_iam.get_user_policy(UserName=user, PolicyName="read")["PolicyDocument"]
    assert got["Statement"][0]["Resource"] == f"arn:aws:s3:::{bucket}/*"
    # What the policy allows, and nothing else.
    assert app.get_object(Bucket=bucket, Key="data/a")["Body"].read() == b"first"
    assert fails(app.put_object, Bucket=bucket, Key="data/b", Body=b"x") == ("AccessDenied", 403)

    # Deactivated in the console: refused; active again: allowed; deleted: refused.
    status, _ = alice.act("/iam/keys/status", user=user, key=key, status="Inactive")
    assert status == 200
    assert "Inactive" in alice.get("/iam/key", user=user, id=key)[1]
    assert fails(app.get_object, Bucket=bucket, Key="data/a")[1] == 403
    alice.act("/iam/keys/status", user=user, key=key, status="Active")
    assert app.get_object(Bucket=bucket, Key="data/a")["Body"].read() == b"first"

    # A user with a key and a policy is not deleted (IAM's DeleteConflict), then is.
    status, page = alice.act("/iam/users/delete", user=user)
    assert status == 409 and "DeleteConflict" in page, page
    alice.act("/iam/user/policies/delete", user=user, policy="read")
    assert fails(app.get_object, Bucket=bucket, Key="data/a") == ("AccessDenied", 403)
    alice.act("/iam/keys/delete", user=user, key=key)
    assert fails(app.get_object, Bucket=bucket, Key="data/a") == ("InvalidAccessKeyId", 403)
    status, page = alice.act("/iam/users/delete", user=user)
    assert status == 200 and user not in page
    assert user not in [u["UserName"] for u in owner_iam.list_users()["Users"]]


def test_groups_roles_and_managed_policies(console):
    alice = Session(console, ALICE)
    owner_s3 = client(console, "s3", ALICE)
    owner_iam = client(console, "iam", ALICE)
    bucket, user, group = _name("console-grp"), _name("member"), _name("team")
    role, managed = _name("role"), _name("readers")
    owner_s3.create_bucket(Bucket=bucket)
    owner_s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    alice.act("/iam/users", user=user)
    key, secret = new_key(alice.act("/iam/keys", user=user)[1])
    app = client(console, "s3", (key, secret))

    # A customer managed policy, attached in the console: the user may read.
    document = policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}
    )
    status, page = alice.act("/iam/policies", policy=managed, document=document)
    assert status == 200 and managed in page, page
    arn = f"arn:aws:iam::{ALICE_NUMBER}:policy/{managed}"
    assert arn in alice.get("/iam/user", name=user)[1]  # offered to attach
    status, page = alice.act("/iam/user/attach", user=user, arn=arn)
    assert status == 200 and "Attached managed policies" in page
    assert app.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    status, page = alice.act("/iam/policies/delete", arn=arn)
    assert status == 409 and "DeleteConflict" in page, page
    alice.act("/iam/user/detach", user=user, arn=arn)
    assert fails(app.get_object, Bucket=bucket, Key="k") == ("AccessDenied", 403)
    status, page = alice.act("/iam/policies/delete", arn=arn)
    assert status == 200 and arn not in page

    # A group: made, a member added and removed, deleted.
    status, page = alice.act("/iam/groups", group=group)
    assert status == 200 and f"IAM group {group}" in page, page
    status, page = alice.act("/iam/group/members", group=group, user=user)
    assert status == 200 and f"arn:aws:iam::{ALICE_NUMBER}:user/{user}" in page
    groups = owner_iam.list_groups_for_user(UserName=user)["Groups"]
    assert [g["GroupName"] for g in groups] == [group]
    assert group in alice.get("/iam/user", name=user)[1]
    status, page = alice.act("/iam/group/members", group=group, user="nobody-at-all")
    assert status == 404 and "NoSuchEntity" in page
    alice.act("/iam/group/members/remove", group=group, user=user)
    assert owner_iam.list_groups_for_user(UserName=user)["Groups"] == []
    status, page = alice.act("/iam/groups/delete", group=group)
    assert status == 200 and group not in page

    # A role with its trust policy; a malformed one refused.
    trust = policy(
        {
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{ALICE_ID}:root"},
            "Action": "sts:AssumeRole",
        }
    )
    status, page = alice.act("/iam/roles", role=role, trust="[]")
    assert status == 400 and "MalformedPolicyDocument" in page, page
    status, page = alice.act("/iam/roles", role=role, trust=trust, description="for tests")
    assert status == 200 and role in page and "for tests" in page, page
    made = owner_iam.get_role(RoleName=role)["Role"]
    assert made["AssumeRolePolicyDocument"]["Statement"][0]["Action"] == "sts:AssumeRole"
    status, page = alice.act("/iam/roles/delete", role=role)
    assert status == 200 and role not in page
    assert role not in [r["RoleName"] for r in owner_iam.list_roles()["Roles"]]


def test_an_iam_user_signs_in_with_its_key_and_is_held_to_its_policies(console):
    owner_iam = client(console, "iam", ALICE)
    owner_s3 = client(console, "s3", ALICE)
    bucket, user, wanted = _name("console-own"), _name("operator"), _name("made")
    owner_s3.create_bucket(Bucket=bucket)
    owner_iam.create_user(UserName=user)
    made = owner_iam.create_access_key(UserName=user)["AccessKey"]
    keys = (made["AccessKeyId"], made["SecretAccessKey"])

    # Its own key signs it in; no IAM permission: refused creating users, as IAM refuses it.
    operator = Session(console, keys)
    page = operator.get("/buckets")[1]
    assert f"arn:aws:iam::{ALICE_NUMBER}:user/{user}" in page  # who is signed in
    assert bucket not in page and "s3:ListAllMyBuckets" in page  # not even the bucket list
    status, page = operator.act("/iam/users", user=wanted)
    assert status == 403 and "AccessDenied" in page, page
    assert f"iam:CreateUser on resource: arn:aws:iam::{ALICE_NUMBER}:user/{wanted}" in page
    assert wanted not in [u["UserName"] for u in owner_iam.list_users()["Users"]]
    status, page = operator.get("/iam/users")
    assert status == 200 and "not authorized to perform: iam:ListUsers" in page
    assert "<table" not in page
    status, page = operator.act("/buckets", bucket=_name("console-denied"))
    assert status == 403 and "AccessDenied" in page

    # Allowed by a policy, the same session may.
    allow = policy(
        {"Effect": "Allow", "Action": ["iam:CreateUser", "iam:ListUsers"], "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"},
    )
    owner_iam.put_user_policy(UserName=user, PolicyName="admin", PolicyDocument=allow)
    assert bucket in operator.get("/buckets")[1]
    # A bucket's count and size are a listing of it: not shown without s3:ListBucket, and
    # never past an explicit Deny of it (the same judgement as ListObjectsV2).
    owner_s3.put_object(Bucket=bucket, Key="counted", Body=b"12345")
    owner_s3.put_bucket_policy(Bucket=bucket, Policy=policy(
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ALICE_NUMBER}:user/{user}"},
         "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"}))  # fmt: skip
    assert "1 object · 5 B" in operator.get("/buckets")[1]
    owner_iam.put_user_policy(UserName=user, PolicyName="nolist", PolicyDocument=policy(
        {"Effect": "Deny", "Action": "s3:ListBucket", "Resource": "*"}))  # fmt: skip
    page = operator.get("/buckets")[1]
    assert bucket in page and "1 object" not in page and "5 B" not in page
    owner_iam.delete_user_policy(UserName=user, PolicyName="nolist")
    status, page = operator.act("/iam/users", user=wanted)
    assert status == 200 and f"IAM user {wanted}" in page, page
    assert wanted in operator.get("/iam/users")[1]
    # A user's page: each section as the policies allow (here, none of them).
    status, page = operator.get("/iam/user", name=wanted)
    assert status == 200 and f"IAM user {wanted}" in page
    for action in ("GetUser", "ListAccessKeys", "ListUserPolicies", "ListGroupsForUser"):
        assert f"not authorized to perform: iam:{action} " in page

    # Temporary credentials do not sign in (their token is no field of the form).
    sts = client(console, "sts", keys)
    temporary = sts.get_session_token(DurationSeconds=900)["Credentials"]
    status, page, _ = _attempt(console, (temporary["AccessKeyId"], temporary["SecretAccessKey"]))
    assert status == 403 and "Sign out" not in page

    # The key deactivated, then deleted: its session ends.
    owner_iam.update_access_key(UserName=user, AccessKeyId=keys[0], Status="Inactive")
    status, page = operator.get("/buckets")
    assert status == 200 and 'action="/signin"' in page and "Sign out" not in page
    status, page, _ = _attempt(console, keys)
    assert status == 403 and "Sign out" not in page
    owner_iam.update_access_key(UserName=user, AccessKeyId=keys[0], Status="Active")
    operator = Session(console, keys)
    owner_iam.delete_access_key(UserName=user, AccessKeyId=keys[0])
    assert "Sign out" not in operator.get("/buckets")[1]


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = browser_for_test()
    opened.set_size(1280, 900)
    yield opened
    opened.close()


def test_a_user_and_its_key_made_in_a_browser(console, browser):
    owner_s3 = client(console, "s3", ALICE)
    owner_iam = client(console, "iam", ALICE)
    bucket, user = _name("console-browser"), _name("webapp")
    owner_s3.create_bucket(Bucket=bucket)
    owner_s3.put_object(Bucket=bucket, Key="page.html", Body=b"<p>hi</p>")
    _sign_in(browser, console, ALICE)

    browser.click("nav a[href='/iam/users']")
    browser.wait_for_url(console.url + "/iam/users")
    browser.type("form[action='/iam/users'] input[name=user]", user)
    browser.click("form[action='/iam/users'] button")
    browser.wait_for_text(f"IAM user {user}", "h1")
    assert user in [u["UserName"] for u in owner_iam.list_users()["Users"]]

    browser.click("form[action='/iam/keys'] button")
    browser.wait_for("#secret-key")
    secret = browser.run("return document.querySelector('#secret-key').value;")
    key = browser.run("return document.querySelector('main table code').innerText;")
    assert key.startswith("AKIA") and len(secret) == 40
    _shoot(browser, "iam-key")
    # Back on the user's page: the key listed, its secret nowhere.
    browser.click(f"main a[href='/iam/user?name={user}']")
    browser.wait_for_text("Access keys")
    assert key in _text(browser) and secret not in browser.run("return document.body.outerHTML;")

    app = client(console, "s3", (key, secret))
    assert fails(app.get_object, Bucket=bucket, Key="page.html") == ("AccessDenied", 403)
    document = policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}
    )
    browser.type("form[action='/iam/user/policies'] input[name=policy]", "read")
    # The textarea holds an example to edit: replaced here as a user pastes over it.
    browser.run(
        "document.querySelector(\"form[action='/iam/user/policies'] textarea\").value = "
        "arguments[0];",
        document,
    )
    browser.click("form[action='/iam/user/policies'] button")
    browser.wait_for("form[action='/iam/user/policies/delete']")  # the policy's row
    assert "read" in _text(browser)
    assert app.get_object(Bucket=bucket, Key="page.html")["Body"].read() == b"<p>hi</p>"
