"""Several users from a users file: a bucket belongs to its creator, and only to them."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.server import GatewayProcess

USERS = """
[[user]]
access_key = "MAINACCESSKEY0000001"
secret_key = "main-secret"
display_name = "main"

[[user]]
access_key = "ALTACCESSKEY00000001"
secret_key = "alt-secret"
display_name = "alt"
canonical_id = "alt-canonical-id"
"""


@pytest.fixture
def two_users(tmp_path, catalog):
    users = tmp_path / "users.toml"
    users.write_text(USERS)
    env = {"S3GW_USERS": str(users), "S3GW_ACCESS_KEY": "", "S3GW_SECRET_KEY": ""}
    server = GatewayProcess(tmp_path / "data", env, catalog=catalog).start()
    main = server.client("MAINACCESSKEY0000001", "main-secret")
    alt = server.client("ALTACCESSKEY00000001", "alt-secret")
    yield main, alt
    server.stop()


def denied(call, **kw) -> bool:
    try:
        call(**kw)
    except ClientError as exc:
        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        return status == 403 and exc.response["Error"]["Code"] in ("AccessDenied", "403")
    return False


def test_alt_user_cannot_touch_main_bucket(two_users):
    main, alt = two_users
    main.create_bucket(Bucket="main-bucket")
    main.put_object(Bucket="main-bucket", Key="k", Body=b"main's")
    assert denied(alt.get_object, Bucket="main-bucket", Key="k")
    assert denied(alt.head_object, Bucket="main-bucket", Key="k")
    assert denied(alt.list_objects_v2, Bucket="main-bucket")
    assert denied(alt.put_object, Bucket="main-bucket", Key="k", Body=b"alt's")
    assert denied(alt.delete_object, Bucket="main-bucket", Key="k")
    assert denied(alt.delete_bucket, Bucket="main-bucket")
    assert denied(alt.head_bucket, Bucket="main-bucket")
    assert denied(alt.create_multipart_upload, Bucket="main-bucket", Key="m")
    alt.create_bucket(Bucket="alt-bucket")
    assert denied(alt.copy_object, Bucket="alt-bucket", Key="c", CopySource="main-bucket/k")
    assert main.get_object(Bucket="main-bucket", Key="k")["Body"].read() == b"main's"


def test_buckets_are_listed_per_owner(two_users):
    main, alt = two_users
    main.create_bucket(Bucket="mine")
    alt.create_bucket(Bucket="theirs")
    assert [b["Name"] for b in main.list_buckets()["Buckets"]] == ["mine"]
    listing = alt.list_buckets()
    assert [b["Name"] for b in listing["Buckets"]] == ["theirs"]
    # No DisplayName: AWS dropped it in November 2025 (kept under --bucket-defaults legacy).
    assert listing["Owner"] == {"ID": "alt-canonical-id"}
    with pytest.raises(ClientError) as exc:
        alt.create_bucket(Bucket="mine")
    assert exc.value.response["Error"]["Code"] == "BucketAlreadyExists"
