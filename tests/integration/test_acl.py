"""ACLs as far as they go here: owner FULL_CONTROL, private writes accepted, sharing refused."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_read_acls(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    owner = s3.list_buckets()["Owner"]
    for acl in (s3.get_bucket_acl(Bucket=bucket), s3.get_object_acl(Bucket=bucket, Key="k")):
        assert acl["Owner"] == owner
        assert acl["Grants"] == [
            {
                "Grantee": {
                    "ID": owner["ID"],
                    "DisplayName": owner["DisplayName"],
                    "Type": "CanonicalUser",
                },
                "Permission": "FULL_CONTROL",
            }
        ]
    with pytest.raises(ClientError) as exc:
        s3.get_object_acl(Bucket=bucket, Key="missing")
    assert code(exc) == "NoSuchKey"


def test_private_writes_are_accepted(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", ACL="private")
    s3.put_object_acl(Bucket=bucket, Key="k", ACL="private")
    s3.put_bucket_acl(Bucket=bucket, ACL="private")
    # What s3cmd does around a server-side copy: read the ACL and write it back as it was.
    policy = s3.get_object_acl(Bucket=bucket, Key="k")
    s3.put_object_acl(
        Bucket=bucket,
        Key="k",
        AccessControlPolicy={"Owner": policy["Owner"], "Grants": policy["Grants"]},
    )


def test_sharing_is_refused_and_changes_nothing(s3, bucket):
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="public", Body=b"x", ACL="public-read")
    assert code(exc) == "NotImplemented"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="public")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.put_object_acl(Bucket=bucket, Key="k", ACL="public-read")
    assert code(exc) == "NotImplemented"
    with pytest.raises(ClientError) as exc:
        s3.put_object_acl(
            Bucket=bucket,
            Key="k",
            GrantRead='uri="http://acs.amazonaws.com/groups/global/AllUsers"',
        )
    assert code(exc) == "NotImplemented"
