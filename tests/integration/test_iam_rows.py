"""One account's IAM activity and another account's requests (security review 4, M1): while
the owner's account, holding many identities, changes IAM in a loop, an IAM user of another
account keeps reading its objects, each request authenticated afresh (no key cache); every
answer is right and every change of the loop is made. tests/contract/test_iam_rows.py shows
what each reads and writes; the bench's figure is in the closing note of issue 40."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.test_iam import ALT, OWNER, _client, _start
from tests.process import GatewayProcess

TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
    "Principal": {"AWS": "arn:aws:iam::0wner:root"}, "Action": "sts:AssumeRole"}]})  # fmt: skip
MANY = 150


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, module_catalog: str | None
) -> Iterator[GatewayProcess]:
    gateway = _start(tmp_path_factory.mktemp("iam-rows"), module_catalog)
    yield gateway
    gateway.stop()


def test_another_account_is_answered_while_one_account_changes_iam(
    server: GatewayProcess,
) -> None:
    busy = _client(server, "iam", OWNER)
    for n in range(MANY):
        busy.create_role(RoleName=f"bulk{n}", AssumeRolePolicyDocument=TRUST,
                         Description="d" * 1000)  # fmt: skip
        busy.create_user(UserName=f"bulk{n}")
    alt_iam, alt_s3 = _client(server, "iam", ALT), _client(server, "s3", ALT)
    alt_s3.create_bucket(Bucket="quiet")
    alt_s3.put_object(Bucket="quiet", Key="k", Body=b"quiet data")
    alt_iam.create_user(UserName="reader")
    read = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::quiet/*"}
    alt_iam.put_user_policy(UserName="reader", PolicyName="read",
                            PolicyDocument=json.dumps({"Version": "2012-10-17",
                                                       "Statement": [read]}))  # fmt: skip
    made = alt_iam.create_access_key(UserName="reader")["AccessKey"]
    reader = _client(server, "s3", (made["AccessKeyId"], made["SecretAccessKey"]))

    stop = threading.Event()
    done: list[int] = []
    failed: list[BaseException] = []

    def loop() -> None:
        n = 0
        try:
            while not stop.is_set():
                busy.create_role(RoleName=f"loop{n}", AssumeRolePolicyDocument=TRUST)
                busy.attach_role_policy(
                    RoleName=f"loop{n}", PolicyArn="arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"
                )
                busy.detach_role_policy(
                    RoleName=f"loop{n}", PolicyArn="arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"
                )
                busy.delete_role(RoleName=f"loop{n}")
                done.append(n)
                n += 1
        except BaseException as exc:  # reported by the test
            failed.append(exc)

    changer = threading.Thread(target=loop)
    changer.start()
    bodies: list[bytes] = []
    try:
        # Reads until the loop has made 10 rounds of changes meanwhile (at most 2,000 reads).
        start = len(done)
        while len(done) < start + 10 and len(bodies) < 2000 and not failed:
            bodies.append(reader.get_object(Bucket="quiet", Key="k")["Body"].read())
    finally:
        stop.set()
        changer.join()
    assert not failed, failed
    assert len(done) >= 10
    assert bodies and set(bodies) == {b"quiet data"}
    summary: dict[str, Any] = busy.get_account_summary()["SummaryMap"]
    assert (summary["Roles"], summary["Users"]) == (MANY, MANY)  # every loop role made and gone
    assert busy.list_roles(PathPrefix="/", MaxItems=1000)["Roles"][-1]["RoleName"].startswith(
        "bulk"
    )
