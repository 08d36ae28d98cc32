"""Rotating the master key (`s3gw keys rotate`) keeps IAM users' keys and ends sessions: the
secret keys are sealed under the keyring's IAM key, which a rotation re-wraps; session tokens
are sealed under the master itself, and a running gateway takes up the new master within its
IAM cache bound."""

from __future__ import annotations

import json
import time
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.process import ACCESS_KEY, SECRET_KEY
from tests.server import GatewayProcess

READ_ALL = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"}]})  # fmt: skip


def _client(url: str, service: str, *key: str) -> object:
    return boto3.client(
        service, endpoint_url=url, region_name="us-east-1",
        aws_access_key_id=key[0], aws_secret_access_key=key[1],
        aws_session_token=key[2] if len(key) > 2 else None,
        config=Config(retries={"max_attempts": 1}),
    )  # fmt: skip


def _user_key(url: str) -> tuple[str, str]:
    iam = _client(url, "iam", ACCESS_KEY, SECRET_KEY)
    iam.create_user(UserName="app")
    iam.put_user_policy(UserName="app", PolicyName="read", PolicyDocument=READ_ALL)
    key = iam.create_access_key(UserName="app")["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def test_an_iam_key_outlives_a_rotation_of_the_master_key(
    tmp_path: Path, catalog: str | None
) -> None:
    gw = GatewayProcess(tmp_path / "data", None, "--workers", "1", catalog=catalog).start()
    try:
        key = _user_key(gw.url)
        assert _client(gw.url, "s3", *key).list_buckets()["Buckets"] == []
    finally:
        gw.stop()
    rotated = gw.s3gw("keys", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    gw = GatewayProcess(tmp_path / "data", None, "--workers", "1", catalog=catalog).start()
    try:
        # It answered 500 (the secret, sealed under the retired master, no longer opened).
        assert _client(gw.url, "s3", *key).list_buckets()["Buckets"] == []
    finally:
        gw.stop()
    assert not [line for line in gw.log if "Traceback" in line], "".join(gw.log)


def test_a_rotation_ends_sessions_on_a_running_gateway(tmp_path: Path, catalog: str | None) -> None:
    gw = GatewayProcess(
        tmp_path / "data", {"S3GW_IAM_CACHE_SECONDS": "1"}, "--workers", "2", catalog=catalog
    ).start()
    try:
        key = _user_key(gw.url)
        sts = _client(gw.url, "sts", *key)
        creds = sts.get_session_token(DurationSeconds=900)["Credentials"]
        session = (creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
        assert _client(gw.url, "s3", *session).list_buckets()["Buckets"] == []
        rotated = gw.s3gw("keys", "rotate")
        assert rotated.returncode == 0, rotated.stderr
        # Within the IAM cache bound (1 s) every worker refuses it; the key itself still works
        # and makes sessions under the new master.
        deadline = time.monotonic() + 30
        refused = 0
        while refused < 6:  # several requests in a row, so that both workers answered
            try:
                _client(gw.url, "s3", *session).list_buckets()
                refused = 0
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "InvalidToken"
                refused += 1
            assert time.monotonic() < deadline, "a session outlived the master key's rotation"
        assert _client(gw.url, "s3", *key).list_buckets()["Buckets"] == []
        fresh = sts.get_session_token(DurationSeconds=900)["Credentials"]
        again = (fresh["AccessKeyId"], fresh["SecretAccessKey"], fresh["SessionToken"])
        for _ in range(6):
            assert _client(gw.url, "s3", *again).list_buckets()["Buckets"] == []
    finally:
        gw.stop()
