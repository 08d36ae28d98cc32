"""ACLs, ownership controls and the public access block against the real server, with two
users (two accounts) and anonymous callers: AWS's defaults for new buckets, and the older
defaults (--bucket-defaults legacy) under which ACLs work."""

from __future__ import annotations

import json

from tests.integration.accounts import (
    ALT_EMAIL,
    ALT_ID,
    OWNER_ID,
    accounts_fixture,
    error,
    fails,
)

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
LOG_DELIVERY = "http://acs.amazonaws.com/groups/s3/LogDelivery"


aws = accounts_fixture("aws")
legacy = accounts_fixture("legacy")
legacy_email = accounts_fixture("legacy", S3GW_EMAIL_GRANTS="resolve")


def grants(acl: dict) -> list[tuple[str, str]]:
    """(grantee, permission) pairs, in order: a canonical id or a group URI."""
    return [(g["Grantee"].get("ID") or g["Grantee"]["URI"], g["Permission"]) for g in acl["Grants"]]


# -- AWS's defaults ----------------------------------------------------------------------------


def test_new_bucket_has_acls_disabled_and_public_access_blocked(aws):
    b = aws.new_bucket()
    rules = aws.owner.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"]["Rules"]
    assert rules == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    block = aws.owner.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"]
    assert block == dict.fromkeys(
        ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"),
        True,
    )
    # Every ACL write is refused and writes nothing; bucket-owner-full-control is the one
    # ACL an object write may carry.
    assert fails(aws.owner.put_object, Bucket=b, Key="k", Body=b"x", ACL="public-read") == (
        "AccessControlListNotSupported",
        400,
    )
    assert error(aws.owner.head_object, Bucket=b, Key="k") == ("404", 404)
    assert fails(aws.owner.put_bucket_acl, Bucket=b, ACL="private")[0] == (
        "AccessControlListNotSupported"
    )
    aws.owner.put_object(Bucket=b, Key="k", Body=b"x", ACL="bucket-owner-full-control")
    assert fails(aws.owner.put_object_acl, Bucket=b, Key="k", ACL="private")[0] == (
        "AccessControlListNotSupported"
    )
    # A bad canned ACL is a syntax error first, even here.
    assert fails(aws.owner.put_object, Bucket=b, Key="k", Body=b"x", ACL="nope") == (
        "InvalidArgument",
        400,
    )
    # Reading still works: the owner's FULL_CONTROL.
    for acl in (aws.owner.get_bucket_acl(Bucket=b), aws.owner.get_object_acl(Bucket=b, Key="k")):
        assert acl["Owner"]["ID"] == OWNER_ID
        assert grants(acl) == [(OWNER_ID, "FULL_CONTROL")]
    assert error(aws.anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert error(aws.alt.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)


def test_owner_private_acl_as_rclone_and_s3cmd_send_it(aws):
    """rclone and s3cmd send `x-amz-acl: private` on every bucket, upload and server-side
    copy; under BucketOwnerEnforced AWS judges the ACL by what it grants, and the bucket
    owner's own private grants just what bucket-owner-full-control does."""
    b = f"rclone-{aws.created}"
    aws.owner.create_bucket(Bucket=b, ACL="private")  # rclone mkdir
    aws.owner.put_object(Bucket=b, Key="a", Body=b"one", ACL="private")  # rclone copy
    aws.owner.copy_object(  # s3cmd cp
        Bucket=b, Key="b", CopySource={"Bucket": b, "Key": "a"}, ACL="private"
    )
    assert aws.owner.get_object(Bucket=b, Key="b")["Body"].read() == b"one"
    up = aws.owner.create_multipart_upload(Bucket=b, Key="mp", ACL="private")
    aws.owner.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"])
    # The same grant spelled as a header grant.
    aws.owner.put_object(Bucket=b, Key="c", Body=b"x", GrantFullControl=f'id="{OWNER_ID}"')
    # Anything that grants someone else stays refused, and writes nothing.
    for kw in (
        {"ACL": "public-read"},
        {"ACL": "authenticated-read"},
        {"GrantRead": f'id="{ALT_ID}"'},
        {"GrantFullControl": f'id="{OWNER_ID}", uri="{ALL_USERS}"'},
    ):
        assert fails(aws.owner.put_object, Bucket=b, Key="d", Body=b"x", **kw) == (
            "AccessControlListNotSupported",
            400,
        ), kw
    assert error(aws.owner.head_object, Bucket=b, Key="d") == ("404", 404)
    assert fails(aws.owner.put_bucket_acl, Bucket=b, ACL="private")[0] == (
        "AccessControlListNotSupported"
    )


def test_another_accounts_private_acl_is_refused(aws):
    """Another account's `private` gives the bucket owner nothing: refused, as on AWS
    (rclone#6413: only cross-account copies failed); its bucket-owner-full-control, or a
    full-control grant to the bucket owner, passes."""
    b = aws.new_bucket()
    grant = {
        "Effect": "Allow",
        "Principal": {"AWS": ALT_ID},
        "Action": ["s3:PutObject", "s3:GetObject"],
        "Resource": f"arn:aws:s3:::{b}/*",
    }
    aws.owner.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [grant]}))
    aws.owner.put_object(Bucket=b, Key="src", Body=b"src")
    assert fails(aws.alt.put_object, Bucket=b, Key="k", Body=b"x", ACL="private") == (
        "AccessControlListNotSupported",
        400,
    )
    copy = {"Bucket": b, "Key": "k2", "CopySource": {"Bucket": b, "Key": "src"}}
    assert fails(aws.alt.copy_object, ACL="private", **copy)[0] == "AccessControlListNotSupported"
    for key in ("k", "k2"):
        assert error(aws.owner.head_object, Bucket=b, Key=key) == ("404", 404)
    aws.alt.put_object(Bucket=b, Key="k", Body=b"x", ACL="bucket-owner-full-control")
    aws.alt.put_object(Bucket=b, Key="k3", Body=b"x", GrantFullControl=f'id="{OWNER_ID}"')
    aws.alt.copy_object(ACL="bucket-owner-full-control", **copy)
    assert aws.owner.get_object(Bucket=b, Key="k2")["Body"].read() == b"src"


def test_create_bucket_acl_and_ownership_headers(aws):
    assert fails(aws.owner.create_bucket, Bucket="acl-public", ACL="public-read") == (
        "InvalidBucketAclWithObjectOwnership",
        400,
    )
    assert fails(aws.owner.create_bucket, Bucket="acl-foo", ObjectOwnership="Foo") == (
        "InvalidArgument",
        400,
    )
    names = {b["Name"] for b in aws.owner.list_buckets()["Buckets"]}
    assert not names & {"acl-public", "acl-foo"}
    b = aws.new_bucket(ObjectOwnership="ObjectWriter")
    rules = aws.owner.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"]["Rules"]
    assert rules == [{"ObjectOwnership": "ObjectWriter"}]
    # ACLs are on, but the public access block still refuses public ones.
    assert fails(aws.owner.put_bucket_acl, Bucket=b, ACL="public-read") == ("AccessDenied", 403)
    aws.owner.put_bucket_acl(Bucket=b, GrantRead=f'id="{ALT_ID}"')
    aws.alt.list_objects(Bucket=b)


def test_anonymous_cannot_list_or_create_buckets(aws):
    assert fails(aws.anon.list_buckets) == ("AccessDenied", 403)
    assert fails(aws.anon.create_bucket, Bucket="acl-anon") == ("AccessDenied", 403)


# -- ACLs on (the older defaults) ----------------------------------------------------------------


def test_legacy_bucket_has_no_controls(legacy):
    b = legacy.new_bucket()
    assert fails(legacy.owner.get_bucket_ownership_controls, Bucket=b) == (
        "OwnershipControlsNotFoundError",
        404,
    )
    assert fails(legacy.owner.get_public_access_block, Bucket=b) == (
        "NoSuchPublicAccessBlockConfiguration",
        404,
    )


def test_canned_acls_render_and_grant(legacy):
    b = legacy.new_bucket(ACL="public-read")
    assert grants(legacy.owner.get_bucket_acl(Bucket=b)) == [
        (ALL_USERS, "READ"),
        (OWNER_ID, "FULL_CONTROL"),
    ]
    acl = legacy.owner.get_bucket_acl(Bucket=b)
    assert acl["Grants"][0]["Grantee"]["Type"] == "Group"
    assert acl["Grants"][1]["Grantee"] == {
        "ID": OWNER_ID,
        "DisplayName": "owner",
        "Type": "CanonicalUser",
    }
    legacy.owner.put_object(Bucket=b, Key="pub", Body=b"hello", ACL="public-read")
    legacy.owner.put_object(Bucket=b, Key="priv", Body=b"secret")
    for who in (legacy.anon, legacy.alt):
        assert [o["Key"] for o in who.list_objects(Bucket=b)["Contents"]] == ["priv", "pub"]
        assert who.get_object(Bucket=b, Key="pub")["Body"].read() == b"hello"
        assert error(who.get_object, Bucket=b, Key="priv") == ("AccessDenied", 403)
        assert error(who.put_object, Bucket=b, Key="new", Body=b"x") == ("AccessDenied", 403)
        assert error(who.get_bucket_acl, Bucket=b) == ("AccessDenied", 403)
    legacy.owner.put_bucket_acl(Bucket=b, ACL="private")
    assert grants(legacy.owner.get_bucket_acl(Bucket=b)) == [(OWNER_ID, "FULL_CONTROL")]
    assert error(legacy.anon.list_objects, Bucket=b) == ("AccessDenied", 403)


def test_public_read_write_lets_anyone_write_and_the_writer_owns(legacy):
    b = legacy.new_bucket(ACL="public-read-write")
    legacy.anon.put_object(Bucket=b, Key="from-anon", Body=b"a")
    legacy.alt.put_object(Bucket=b, Key="from-alt", Body=b"b")
    # The writer owns its object (ObjectWriter): private to alt, even to the bucket's owner.
    acl = legacy.alt.get_object_acl(Bucket=b, Key="from-alt")
    assert acl["Owner"]["ID"] == ALT_ID and grants(acl) == [(ALT_ID, "FULL_CONTROL")]
    assert error(legacy.owner.get_object, Bucket=b, Key="from-alt") == ("AccessDenied", 403)
    legacy.alt.put_object(Bucket=b, Key="shared", Body=b"c", ACL="bucket-owner-read")
    assert grants(legacy.alt.get_object_acl(Bucket=b, Key="shared")) == [
        (ALT_ID, "FULL_CONTROL"),
        (OWNER_ID, "READ"),
    ]
    assert legacy.owner.get_object(Bucket=b, Key="shared")["Body"].read() == b"c"
    # WRITE on the bucket deletes any object in it.
    legacy.owner.delete_object(Bucket=b, Key="from-alt")
    assert legacy.owner.get_object(Bucket=b, Key="from-anon")["Body"].read() == b"a"


def test_bucket_owner_preferred_takes_full_control_objects(legacy):
    b = legacy.new_bucket(ACL="public-read-write")
    legacy.owner.put_bucket_ownership_controls(
        Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}
    )
    legacy.alt.put_object(Bucket=b, Key="given", Body=b"x", ACL="bucket-owner-full-control")
    legacy.alt.put_object(Bucket=b, Key="kept", Body=b"y")
    assert legacy.owner.get_object_acl(Bucket=b, Key="given")["Owner"]["ID"] == OWNER_ID
    assert legacy.alt.get_object_acl(Bucket=b, Key="kept")["Owner"]["ID"] == ALT_ID


def test_grant_headers_replace_the_acl_and_give_their_permissions(legacy):
    b = legacy.new_bucket()
    legacy.owner.put_bucket_acl(
        Bucket=b, GrantRead=f'id="{ALT_ID}"', GrantWriteACP=f'id="{ALT_ID}", uri="{LOG_DELIVERY}"'
    )
    # Groups are listed first, then the others in the order given.
    assert grants(legacy.owner.get_bucket_acl(Bucket=b)) == [
        (LOG_DELIVERY, "WRITE_ACP"),
        (ALT_ID, "READ"),
        (ALT_ID, "WRITE_ACP"),
    ]
    legacy.alt.list_objects(Bucket=b)  # READ
    assert error(legacy.alt.get_bucket_acl, Bucket=b) == ("AccessDenied", 403)  # no READ_ACP
    assert error(legacy.alt.put_object, Bucket=b, Key="k", Body=b"") == ("AccessDenied", 403)
    # WRITE_ACP: alt may rewrite the ACL, here giving itself WRITE.
    legacy.alt.put_bucket_acl(Bucket=b, GrantWrite=f'id="{ALT_ID}"')
    legacy.alt.put_object(Bucket=b, Key="k", Body=b"")
    # The owner keeps its rights over its bucket whatever the ACL says.
    legacy.owner.get_bucket_acl(Bucket=b)


def test_access_control_policy_document(legacy):
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x")
    owner = {"ID": OWNER_ID}
    policy = {
        "Owner": owner,
        "Grants": [
            {"Grantee": {"ID": OWNER_ID, "Type": "CanonicalUser"}, "Permission": "FULL_CONTROL"},
            {"Grantee": {"ID": ALT_ID, "Type": "CanonicalUser"}, "Permission": "READ_ACP"},
            {"Grantee": {"URI": ALL_USERS, "Type": "Group"}, "Permission": "READ"},
        ],
    }
    legacy.owner.put_object_acl(Bucket=b, Key="k", AccessControlPolicy=policy)
    assert grants(legacy.alt.get_object_acl(Bucket=b, Key="k")) == [
        (ALL_USERS, "READ"),
        (OWNER_ID, "FULL_CONTROL"),
        (ALT_ID, "READ_ACP"),
    ]
    assert legacy.anon.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    assert error(legacy.alt.put_object_acl, Bucket=b, Key="k", ACL="private") == (
        "AccessDenied",
        403,
    )


def test_acl_request_errors_change_nothing(legacy):
    b = legacy.new_bucket()
    put = legacy.owner.put_bucket_acl
    cases = [
        ({"ACL": "private", "GrantRead": f'id="{ALT_ID}"'}, ("InvalidRequest", 400)),
        ({}, ("MissingSecurityHeader", 400)),
        ({"GrantRead": 'fakekey="1"'}, ("InvalidArgument", 400)),
        ({"GrantRead": 'id="nobody"'}, ("InvalidArgument", 400)),
        ({"GrantRead": 'uri="http://example.com/group"'}, ("InvalidArgument", 400)),
        ({"GrantRead": f'emailAddress="{ALT_EMAIL}"'}, ("MethodNotAllowed", 405)),
        (
            {
                "AccessControlPolicy": {
                    "Owner": {"ID": OWNER_ID},
                    "Grants": [
                        {
                            "Grantee": {"ID": ALT_ID, "Type": "CanonicalUser"},
                            "Permission": "EVERYTHING",
                        }
                    ],
                }
            },
            ("MalformedACLError", 400),
        ),
    ]
    for kw, expected in cases:
        assert error(put, Bucket=b, **kw) == expected, kw
    assert grants(legacy.owner.get_bucket_acl(Bucket=b)) == [(OWNER_ID, "FULL_CONTROL")]


def _email_policy(email: str) -> dict:
    """An AccessControlPolicy granting READ to `email`, and FULL_CONTROL to the owner."""
    return {
        "Owner": {"ID": OWNER_ID},
        "Grants": [
            {
                "Grantee": {"EmailAddress": email, "Type": "AmazonCustomerByEmail"},
                "Permission": "READ",
            },
            {"Grantee": {"ID": OWNER_ID, "Type": "CanonicalUser"}, "Permission": "FULL_CONTROL"},
        ],
    }


def test_grants_by_email_address_are_refused(legacy):
    """AWS has answered 405 to any ACL granting by e-mail address since 1 October 2025
    (API_PutBucketAcl.html, and the same notice on PutObjectAcl, PutObject, CopyObject,
    CreateMultipartUpload, CreateBucket and PutBucketLogging); nothing is written."""
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x")
    by_email = {"GrantRead": f'emailAddress="{ALT_EMAIL}"'}
    o = legacy.owner
    calls = [
        (o.put_bucket_acl, {"Bucket": b, **by_email}),
        (o.put_bucket_acl, {"Bucket": b, "AccessControlPolicy": _email_policy(ALT_EMAIL)}),
        (o.put_object_acl, {"Bucket": b, "Key": "k", **by_email}),
        (o.put_object, {"Bucket": b, "Key": "new", "Body": b"x", **by_email}),
        (o.copy_object, {"Bucket": b, "Key": "copy", "CopySource": f"{b}/k", **by_email}),
        (o.create_multipart_upload, {"Bucket": b, "Key": "mp", **by_email}),
        (o.create_bucket, {"Bucket": f"{b}-email", **by_email}),
    ]
    for call, kw in calls:
        assert error(call, **kw) == ("MethodNotAllowed", 405), call.__name__
    logging = {
        "LoggingEnabled": {
            "TargetBucket": b,
            "TargetPrefix": "logs/",
            "TargetGrants": [
                {
                    "Grantee": {"EmailAddress": ALT_EMAIL, "Type": "AmazonCustomerByEmail"},
                    "Permission": "READ",
                }
            ],
        }
    }
    assert error(o.put_bucket_logging, Bucket=b, BucketLoggingStatus=logging) == (
        "MethodNotAllowed",
        405,
    )
    assert grants(o.get_bucket_acl(Bucket=b)) == [(OWNER_ID, "FULL_CONTROL")]
    assert grants(o.get_object_acl(Bucket=b, Key="k")) == [(OWNER_ID, "FULL_CONTROL")]
    assert [x["Key"] for x in o.list_objects_v2(Bucket=b)["Contents"]] == ["k"]
    assert o.list_multipart_uploads(Bucket=b).get("Uploads", []) == []
    assert error(o.head_bucket, Bucket=f"{b}-email") == ("404", 404)
    assert "LoggingEnabled" not in o.get_bucket_logging(Bucket=b)


def test_grants_by_email_address_resolve_under_the_legacy_setting(legacy_email):
    """--email-grants resolve: an address is the users file's user with that email, stored
    as a grant to its canonical id (as AWS stored them); an unknown one is 400."""
    accounts = legacy_email
    b = accounts.new_bucket()
    o = accounts.owner
    o.put_bucket_acl(Bucket=b, GrantRead=f'emailAddress="{ALT_EMAIL.upper()}"')
    acl = o.get_bucket_acl(Bucket=b)
    assert grants(acl) == [(ALT_ID, "READ")]
    assert acl["Grants"][0]["Grantee"]["Type"] == "CanonicalUser"
    assert accounts.alt.list_objects_v2(Bucket=b)["KeyCount"] == 0
    o.put_bucket_acl(Bucket=b, AccessControlPolicy=_email_policy(ALT_EMAIL))
    assert grants(o.get_bucket_acl(Bucket=b)) == [(ALT_ID, "READ"), (OWNER_ID, "FULL_CONTROL")]
    # The object writes take theirs from the headers the dispatcher reads.
    o.put_object(Bucket=b, Key="k", Body=b"x", GrantRead=f'emailAddress="{ALT_EMAIL}"')
    assert grants(o.get_object_acl(Bucket=b, Key="k")) == [(ALT_ID, "READ")]
    assert accounts.alt.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    o.create_bucket(Bucket=f"{b}-email", GrantFullControl=f'emailAddress="{ALT_EMAIL}"')
    assert grants(o.get_bucket_acl(Bucket=f"{b}-email")) == [(ALT_ID, "FULL_CONTROL")]
    unknown = {"GrantRead": 'emailAddress="nobody@example.com"'}
    assert error(o.put_bucket_acl, Bucket=b, **unknown) == ("UnresolvableGrantByEmailAddress", 400)
    assert error(o.put_object, Bucket=b, Key="n", Body=b"x", **unknown) == (
        "UnresolvableGrantByEmailAddress",
        400,
    )


def test_copy_does_not_keep_the_source_acl(legacy):
    b = legacy.new_bucket()
    legacy.owner.put_object(Bucket=b, Key="src", Body=b"x", ACL="public-read")
    legacy.owner.copy_object(Bucket=b, Key="plain", CopySource={"Bucket": b, "Key": "src"})
    legacy.owner.copy_object(
        Bucket=b, Key="shared", CopySource={"Bucket": b, "Key": "src"}, ACL="authenticated-read"
    )
    assert grants(legacy.owner.get_object_acl(Bucket=b, Key="plain")) == [
        (OWNER_ID, "FULL_CONTROL")
    ]
    assert legacy.alt.get_object(Bucket=b, Key="shared")["Body"].read() == b"x"
    assert error(legacy.anon.get_object, Bucket=b, Key="shared") == ("AccessDenied", 403)
    # The copy's source is read with the caller's rights.
    legacy.owner.put_object(Bucket=b, Key="secret", Body=b"s")
    other = legacy.new_bucket(ACL="public-read-write")
    assert error(
        legacy.alt.copy_object, Bucket=other, Key="c", CopySource={"Bucket": b, "Key": "secret"}
    ) == ("AccessDenied", 403)
    legacy.alt.copy_object(Bucket=other, Key="c", CopySource={"Bucket": b, "Key": "src"})


def test_multipart_upload_takes_its_acl(legacy):
    b = legacy.new_bucket()
    up = legacy.owner.create_multipart_upload(Bucket=b, Key="mp", ACL="public-read")
    part = legacy.owner.upload_part(
        Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"data"
    )
    legacy.owner.complete_multipart_upload(
        Bucket=b,
        Key="mp",
        UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert legacy.anon.get_object(Bucket=b, Key="mp")["Body"].read() == b"data"


def test_public_access_block(legacy):
    b = legacy.new_bucket(ACL="public-read")
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x", ACL="public-read")
    legacy.anon.get_object(Bucket=b, Key="k")
    legacy.owner.put_public_access_block(
        Bucket=b, PublicAccessBlockConfiguration={"IgnorePublicAcls": True}
    )
    block = legacy.owner.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"]
    assert block == {
        "BlockPublicAcls": False,
        "IgnorePublicAcls": True,
        "BlockPublicPolicy": False,
        "RestrictPublicBuckets": False,
    }
    assert error(legacy.anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    assert error(legacy.alt.list_objects, Bucket=b) == ("AccessDenied", 403)
    legacy.owner.put_public_access_block(
        Bucket=b, PublicAccessBlockConfiguration={"BlockPublicAcls": True}
    )
    legacy.anon.get_object(Bucket=b, Key="k")  # no longer ignored
    for call, kw in (
        (legacy.owner.put_object, {"Key": "n", "Body": b"", "ACL": "public-read"}),
        (legacy.owner.put_object_acl, {"Key": "k", "ACL": "public-read-write"}),
        (legacy.owner.put_bucket_acl, {"GrantRead": f'uri="{ALL_USERS}"'}),
    ):
        assert error(call, Bucket=b, **kw) == ("AccessDenied", 403)
    assert error(legacy.owner.head_object, Bucket=b, Key="n") == ("404", 404)
    legacy.owner.delete_public_access_block(Bucket=b)
    legacy.owner.delete_public_access_block(Bucket=b)  # idempotent
    assert fails(legacy.owner.get_public_access_block, Bucket=b)[0] == (
        "NoSuchPublicAccessBlockConfiguration"
    )


def test_ownership_controls(legacy):
    b = legacy.new_bucket()
    put = legacy.owner.put_bucket_ownership_controls
    for rules in ([{"ObjectOwnership": "Foo"}], [], [{"ObjectOwnership": "ObjectWriter"}] * 2):
        assert error(put, Bucket=b, OwnershipControls={"Rules": rules}) == ("MalformedXML", 400)
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"x", ACL="public-read")
    put(Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    # ACLs disabled: the object's public grant no longer counts.
    assert error(legacy.anon.get_object, Bucket=b, Key="k") == ("AccessDenied", 403)
    legacy.owner.delete_bucket_ownership_controls(Bucket=b)
    assert legacy.anon.get_object(Bucket=b, Key="k")["Body"].read() == b"x"
    assert fails(legacy.owner.get_bucket_ownership_controls, Bucket=b)[0] == (
        "OwnershipControlsNotFoundError"
    )
    # A bucket whose ACL is public cannot have its ACLs disabled.
    legacy.owner.put_bucket_acl(Bucket=b, ACL="public-read")
    assert error(
        put, Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    ) == ("InvalidBucketAclWithObjectOwnership", 400)
    # Only the owner manages them.
    assert error(legacy.alt.get_bucket_ownership_controls, Bucket=b) == ("AccessDenied", 403)


def test_recreating_your_own_bucket_resets_its_acl(legacy):
    """In us-east-1 AWS "returns 200 OK and resets the bucket access control lists (ACLs)"
    when the owner creates its bucket again (API_CreateBucket.html): to what the request
    asks, private when it asks for nothing; the objects and other settings stay."""
    b = legacy.new_bucket(ACL="public-read")
    legacy.owner.put_object(Bucket=b, Key="k", Body=b"kept", ACL="public-read")
    policy = json.dumps(
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": ALT_ID},
                    "Action": "s3:GetObject",
                    "Resource": f"arn:aws:s3:::{b}/*",
                }
            ]
        }
    )
    legacy.owner.put_bucket_policy(Bucket=b, Policy=policy)
    legacy.owner.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    assert legacy.anon.list_objects_v2(Bucket=b)["KeyCount"] == 1

    legacy.owner.create_bucket(Bucket=b)
    assert grants(legacy.owner.get_bucket_acl(Bucket=b)) == [(OWNER_ID, "FULL_CONTROL")]
    assert error(legacy.anon.list_objects_v2, Bucket=b) == ("AccessDenied", 403)
    # Only the bucket's ACL: the object's, the policy and versioning are as they were.
    assert legacy.anon.get_object(Bucket=b, Key="k")["Body"].read() == b"kept"
    assert legacy.owner.get_bucket_policy(Bucket=b)["Policy"] == policy
    assert legacy.owner.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"

    legacy.owner.create_bucket(Bucket=b, GrantRead=f"id={ALT_ID}")
    assert grants(legacy.owner.get_bucket_acl(Bucket=b)) == [(ALT_ID, "READ")]
    legacy.owner.create_bucket(Bucket=b, ACL="public-read")
    assert grants(legacy.owner.get_bucket_acl(Bucket=b)) == [
        (ALL_USERS, "READ"),
        (OWNER_ID, "FULL_CONTROL"),
    ]
    # Another account's attempt is BucketAlreadyExists and resets nothing.
    assert error(legacy.alt.create_bucket, Bucket=b) == ("BucketAlreadyExists", 409)
    assert legacy.anon.list_objects_v2(Bucket=b)["KeyCount"] == 1
    # ACLs disabled: only the owner's own ACL may be asked for, as at a bucket's creation.
    legacy.owner.create_bucket(Bucket=b)
    legacy.owner.put_bucket_ownership_controls(
        Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    )
    assert error(legacy.owner.create_bucket, Bucket=b, ACL="public-read") == (
        "InvalidBucketAclWithObjectOwnership",
        400,
    )
    legacy.owner.create_bucket(Bucket=b, ACL="private")
    assert legacy.owner.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"]["Rules"]


def test_bucket_owner_enforced_objects_belong_to_the_bucket_owner(aws):
    b = aws.new_bucket()
    grant = {
        "Effect": "Allow",
        "Principal": {"AWS": ALT_ID},
        "Action": ["s3:PutObject", "s3:GetObjectAcl", "s3:ListMultipartUploadParts"],
        "Resource": f"arn:aws:s3:::{b}/*",
    }
    aws.owner.put_bucket_policy(Bucket=b, Policy=json.dumps({"Statement": [grant]}))
    aws.alt.put_object(Bucket=b, Key="k", Body=b"x")
    assert aws.alt.get_object_acl(Bucket=b, Key="k")["Owner"]["ID"] == OWNER_ID
    up = aws.alt.create_multipart_upload(Bucket=b, Key="mp")
    parts = aws.alt.list_parts(Bucket=b, Key="mp", UploadId=up["UploadId"])
    assert parts["Owner"]["ID"] == OWNER_ID
    assert parts["Initiator"]["ID"] == ALT_ID
