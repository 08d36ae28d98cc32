"""The one place a request is allowed or refused: every operation's bucket, and every copy
source, pass through `authorize` (operations never check permissions themselves).

AWS's evaluation, for a gateway whose users are each an account of their own
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/how-s3-evaluates-access-control.html):

1. A Deny in the bucket policy refuses, whoever asks (the bucket's owner too), except that the
   owner may always read, replace and delete the policy itself.
2. The owner of the resource is allowed: the bucket's owner for the bucket and, unless ACLs
   are disabled (BucketOwnerEnforced), the writer of an object for that object.
3. An ACL grant allows, where ACLs are on; with IgnorePublicAcls, public grants count for
   nothing.
4. An Allow in the bucket policy allows (on objects the bucket's owner owns: "Allow statements
   in a bucket policy apply only to objects that are owned by the same bucket-owning account",
   troubleshoot-403-errors.html). With RestrictPublicBuckets, a public policy allows no one
   outside the owner's account.
5. Anything else is AccessDenied.

The bucket's settings are parsed once per stored text (cached), so a bucket without ACLs or a
policy costs a few dictionary lookups.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..store import Bucket, ObjectAttrs, Store, StoreError
from ..users import ACCOUNT_NUMBER, Identity, User, account_number, numbered
from . import grants, policy
from .auth import ANONYMOUS
from .errors import S3Error
from .names import could_be_a_bucket
from .policy_context import PRINCIPAL_KEYS, principal_tag, principal_value
from .router import Op

# Names of the bucket settings this module reads (Bucket.settings).
ACL = "acl"
OWNERSHIP = "ownership"
PUBLIC_ACCESS_BLOCK = "public_access_block"
POLICY = "policy"

BUCKET_OWNER_ENFORCED = "BucketOwnerEnforced"
BUCKET_OWNER_PREFERRED = "BucketOwnerPreferred"
OBJECT_WRITER = "ObjectWriter"
OWNERSHIPS = (BUCKET_OWNER_ENFORCED, BUCKET_OWNER_PREFERRED, OBJECT_WRITER)
PAB_FLAGS = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")


def is_anonymous(user: User) -> bool:
    return user is ANONYMOUS or user.access_key == ""


@dataclass(frozen=True)
class Rule:
    """What an operation needs: its policy action (and the one for a named version), the
    ACL permission that grants it (None: only the owner), and whether that permission is
    judged on the object's ACL rather than the bucket's."""

    action: str
    permission: str | None = None
    on_object: bool = False
    version_action: str | None = None


_R, _W = grants.READ, grants.WRITE
BYPASS_GOVERNANCE = "BypassGovernanceRetention"
# May the request's caller do (operation, key, version id)? Decided as the request itself.
Allowed = Callable[[str, str, str | None], bool]
RULES: dict[str, Rule] = {
    Op.HeadBucket: Rule("s3:ListBucket", _R),
    Op.ListObjects: Rule("s3:ListBucket", _R),
    Op.ListObjectsV2: Rule("s3:ListBucket", _R),
    Op.ListObjectVersions: Rule("s3:ListBucketVersions", _R),
    Op.ListMultipartUploads: Rule("s3:ListBucketMultipartUploads", _R),
    Op.GetBucketAcl: Rule("s3:GetBucketAcl", grants.READ_ACP),
    Op.PutBucketAcl: Rule("s3:PutBucketAcl", grants.WRITE_ACP),
    Op.DeleteObjects: Rule("s3:DeleteObject", _W),
    Op.PostObject: Rule("s3:PutObject", _W),
    Op.PutObject: Rule("s3:PutObject", _W),
    Op.CopyObject: Rule("s3:PutObject", _W),
    Op.CreateMultipartUpload: Rule("s3:PutObject", _W),
    Op.UploadPart: Rule("s3:PutObject", _W),
    Op.UploadPartCopy: Rule("s3:PutObject", _W),
    Op.CompleteMultipartUpload: Rule("s3:PutObject", _W),
    Op.AbortMultipartUpload: Rule("s3:AbortMultipartUpload", _W),
    Op.ListParts: Rule("s3:ListMultipartUploadParts", _R),
    Op.DeleteObject: Rule("s3:DeleteObject", _W, version_action="s3:DeleteObjectVersion"),
    Op.GetObject: Rule("s3:GetObject", _R, True, "s3:GetObjectVersion"),
    Op.HeadObject: Rule("s3:GetObject", _R, True, "s3:GetObjectVersion"),
    Op.GetObjectAttributes: Rule(
        "s3:GetObjectAttributes", _R, True, "s3:GetObjectVersionAttributes"
    ),
    Op.GetObjectAcl: Rule("s3:GetObjectAcl", grants.READ_ACP, True, "s3:GetObjectVersionAcl"),
    Op.PutObjectAcl: Rule("s3:PutObjectAcl", grants.WRITE_ACP, True, "s3:PutObjectVersionAcl"),
    Op.GetObjectTagging: Rule("s3:GetObjectTagging", None, True, "s3:GetObjectVersionTagging"),
    Op.PutObjectTagging: Rule("s3:PutObjectTagging", None, True, "s3:PutObjectVersionTagging"),
    Op.DeleteObjectTagging: Rule(
        "s3:DeleteObjectTagging", None, True, "s3:DeleteObjectVersionTagging"
    ),
    Op.GetObjectRetention: Rule("s3:GetObjectRetention", None, True),
    Op.PutObjectRetention: Rule("s3:PutObjectRetention", None, True),
    Op.GetObjectLegalHold: Rule("s3:GetObjectLegalHold", None, True),
    Op.PutObjectLegalHold: Rule("s3:PutObjectLegalHold", None, True),
    Op.RestoreObject: Rule("s3:RestoreObject", None, True),
    # Not an operation: what a request that lifts a GOVERNANCE lock with
    # x-amz-bypass-governance-retention needs besides its own action ("you must have the
    # s3:BypassGovernanceRetention permission and explicitly include the header",
    # object-lock-managing.html). The bucket owner has it unless a policy denies it.
    BYPASS_GOVERNANCE: Rule("s3:BypassGovernanceRetention", None, True),
    Op.GetBucketCors: Rule("s3:GetBucketCORS"),
    Op.PutBucketCors: Rule("s3:PutBucketCORS"),
    Op.DeleteBucketCors: Rule("s3:PutBucketCORS"),
    Op.GetBucketEncryption: Rule("s3:GetEncryptionConfiguration"),
    Op.PutBucketEncryption: Rule("s3:PutEncryptionConfiguration"),
    Op.DeleteBucketEncryption: Rule("s3:PutEncryptionConfiguration"),
    Op.GetBucketLifecycleConfiguration: Rule("s3:GetLifecycleConfiguration"),
    Op.PutBucketLifecycleConfiguration: Rule("s3:PutLifecycleConfiguration"),
    Op.DeleteBucketLifecycleConfiguration: Rule("s3:PutLifecycleConfiguration"),
    Op.GetBucketWebsite: Rule("s3:GetBucketWebsite"),
    Op.PutBucketWebsite: Rule("s3:PutBucketWebsite"),
    Op.DeleteBucketWebsite: Rule("s3:DeleteBucketWebsite"),
    Op.GetBucketTagging: Rule("s3:GetBucketTagging"),
    Op.PutBucketTagging: Rule("s3:PutBucketTagging"),
    Op.DeleteBucketTagging: Rule("s3:PutBucketTagging"),
    Op.GetObjectLockConfiguration: Rule("s3:GetBucketObjectLockConfiguration"),
    Op.PutObjectLockConfiguration: Rule("s3:PutBucketObjectLockConfiguration"),
    Op.GetPublicAccessBlock: Rule("s3:GetBucketPublicAccessBlock"),
    Op.PutPublicAccessBlock: Rule("s3:PutBucketPublicAccessBlock"),
    Op.DeletePublicAccessBlock: Rule("s3:PutBucketPublicAccessBlock"),
    Op.DeleteBucketOwnershipControls: Rule("s3:PutBucketOwnershipControls"),
    # The IAM actions keep the older API's names (PutBucketNotification): the service
    # authorization reference lists no s3:PutBucketNotificationConfiguration.
    Op.GetBucketNotificationConfiguration: Rule("s3:GetBucketNotification"),
    Op.PutBucketNotificationConfiguration: Rule("s3:PutBucketNotification"),
    # DeleteBucketReplication needs s3:PutReplicationConfiguration (its API reference).
    Op.GetBucketReplication: Rule("s3:GetReplicationConfiguration"),
    Op.PutBucketReplication: Rule("s3:PutReplicationConfiguration"),
    Op.DeleteBucketReplication: Rule("s3:PutReplicationConfiguration"),
}
# Decided key by key by the operation (through Context.allowed), each refusal an entry of
# its answer, as AWS reports them.
PER_KEY = frozenset({Op.DeleteObjects})
# The owner may always read, replace and delete the policy, even when it denies them
# (Put/Get/DeleteBucketPolicy in the API reference).
POLICY_OPERATIONS = frozenset({Op.GetBucketPolicy, Op.PutBucketPolicy, Op.DeleteBucketPolicy})


def rule(operation: str) -> Rule:
    # Other bucket configuration operations: their own action, the owner's alone.
    return RULES.get(operation) or Rule("s3:" + operation)


@dataclass(frozen=True)
class PublicAccessBlock:
    block_public_acls: bool = False
    ignore_public_acls: bool = False
    block_public_policy: bool = False
    restrict_public_buckets: bool = False

    def to_json(self) -> str:
        return json.dumps([self.block_public_acls, self.ignore_public_acls,
                           self.block_public_policy, self.restrict_public_buckets])  # fmt: skip


NO_BLOCK = PublicAccessBlock()
BLOCK_ALL = PublicAccessBlock(True, True, True, True)


@functools.lru_cache(maxsize=256)
def _pab(text: str) -> PublicAccessBlock:
    return PublicAccessBlock(*json.loads(text))


def public_access_block(bucket: Bucket) -> PublicAccessBlock:
    text = bucket.settings.get(PUBLIC_ACCESS_BLOCK)
    return NO_BLOCK if text is None else _pab(text)


def ownership(bucket: Bucket) -> str | None:
    """The bucket's ownership controls (None: none set, which behaves as ObjectWriter)."""
    return bucket.settings.get(OWNERSHIP)


def acls_enabled(bucket: Bucket) -> bool:
    return bucket.settings.get(OWNERSHIP) != BUCKET_OWNER_ENFORCED


def bucket_acl(bucket: Bucket) -> grants.Acl:
    return grants.stored(bucket.settings.get(ACL), bucket.owner)


def bucket_policy(bucket: Bucket) -> policy.Policy | None:
    text = bucket.settings.get(POLICY)
    return None if text is None else policy.cached(text, bucket.name)


def replication_allowed(
    destination: Bucket, source_owner: str, role: str, action: str, key: str
) -> bool:
    """May a replication rule of `source_owner`'s bucket (acting as `role`, its
    configuration's Role ARN) do `action` (s3:ReplicateObject, s3:ReplicateDelete,
    s3:ReplicateTags) on `key` of `destination`? As AWS allows it: the same account, or the
    destination's bucket policy allows it to the source's account or to the role."""
    if destination.owner == source_owner:
        return True
    doc = bucket_policy(destination)
    if doc is None:
        return False
    arns = frozenset({numbered(role)}) if role else frozenset()
    caller = policy.Caller(account_number(source_owner), arns, root=not arns)
    resource = f"arn:aws:s3:::{destination.name}/{key}"
    request = policy.PolicyRequest(caller, action, resource, _no_conditions)
    return doc.evaluate(request) is policy.Effect.ALLOW


def object_owner(bucket: Bucket, attrs: ObjectAttrs | None) -> str:
    """Who owns an object: its writer where ACLs are on, else the bucket's owner."""
    if attrs is None or attrs.owner is None or not acls_enabled(bucket):
        return bucket.owner
    return attrs.owner


def needs_object(operation: str, bucket: Bucket) -> bool:
    """Whether deciding `operation` needs the object's owner, ACL or tags: only on buckets
    with ACLs on, or whose policy looks at the object's tags (so the common case reads
    nothing more)."""
    if not rule(operation).on_object:
        return False
    if acls_enabled(bucket):
        return True
    text = bucket.settings.get(POLICY)
    return text is not None and "existingobjecttag" in text.lower()


async def resolve_bucket(store: Store, name: str) -> Bucket:
    """The bucket a request names; NoSuchBucket, or InvalidBucketName for a name no bucket
    can have (as AWS answers a GetObject from bucket "a")."""
    bucket = await store.get_bucket(name)
    if bucket is None:
        if not could_be_a_bucket(name):
            raise S3Error("InvalidBucketName", BucketName=name)
        raise S3Error("NoSuchBucket", BucketName=name)
    return bucket


def expect_owner(expected: str | None, bucket: Bucket, legacy: bool = False) -> None:
    """x-amz-expected-bucket-owner (x-amz-source-expected-bucket-owner for a copy's source),
    an account's 12-digit id: 403 when the bucket belongs to someone else, so a client never
    writes into, or reads from, a bucket of the same name that another account created
    meanwhile; 400 when it is no account id at all (AWS's answer; `legacy` bucket defaults
    answer 403 there too, as the s3-tests suite expects)."""
    if expected is None:
        return
    if not ACCOUNT_NUMBER.fullmatch(expected) and not legacy:
        raise S3Error(
            "InvalidBucketOwnerAWSAccountID",
            "The value of the expected bucket owner parameter must be an AWS Account ID... "
            f"[{expected}]",
        )
    if expected != account_number(bucket.owner):
        raise S3Error("AccessDenied")


def _no_conditions(key: str) -> list[str] | None:
    return None


@dataclass(frozen=True)
class Access:
    """One request to decide: who, what, on which bucket and key (and the object's attrs
    when `needs_object` said they matter), and the request's condition values."""

    user: User
    operation: str
    bucket: Bucket
    key: str | None = None
    version_id: str | None = None
    obj: ObjectAttrs | None = None
    conditions: Callable[[str], list[str] | None] = _no_conditions


def _caller(user: User, delegated: bool = True) -> policy.Caller:
    if is_anonymous(user):
        return policy.Caller(None)
    identity = user.identity
    if identity is None:
        return policy.Caller(user.account)
    return policy.Caller(user.account, identity.arns, root=False, delegated=delegated)


def identity_verdict(identity: Identity, request: policy.PolicyRequest) -> policy.Effect | None:
    """What an IAM identity's own policies say (Deny, Allow or nothing): a Deny in any of
    them refuses; an Allow needs one of them and, for a role's session, its session policy
    too ("Session policies", IAM's guide)."""
    verdict = None
    for doc in identity.policies:
        found = doc.evaluate(request)
        if found is policy.Effect.DENY:
            return found
        verdict = verdict or found
    if identity.session_policy is not None:
        narrowed = identity.session_policy.evaluate(request)
        if narrowed is not policy.Effect.ALLOW:
            return narrowed if narrowed is policy.Effect.DENY else None
    return verdict


def decide(access: Access) -> bool:
    """Whether the request is allowed (see the module's docstring)."""
    user, bucket = access.user, access.bucket
    anonymous = is_anonymous(user)
    caller_id = None if anonymous else user.canonical_id
    the_rule = rule(access.operation)
    action = the_rule.action
    if access.version_id is not None and the_rule.version_action is not None:
        action = the_rule.version_action
    is_owner = caller_id == bucket.owner
    identity = None if anonymous else user.identity
    if access.operation in POLICY_OPERATIONS and is_owner and identity is None:
        return True

    resource = "arn:aws:s3:::" + bucket.name
    if access.key is not None:
        resource += "/" + access.key
    request = policy.PolicyRequest(_caller(user), action, resource, access.conditions)
    own = None
    if identity is not None:
        own = identity_verdict(identity, request)
        if own is policy.Effect.DENY:
            return False

    verdict = None
    doc = bucket_policy(bucket)
    if doc is not None:
        verdict = doc.evaluate(request)
        if verdict is policy.Effect.DENY:
            return False

    owner = bucket.owner
    if the_rule.on_object and access.key is not None:
        owner = object_owner(bucket, access.obj)
    if identity is None and caller_id is not None and caller_id == owner:
        return True

    pab = public_access_block(bucket)
    restricted = (
        pab.restrict_public_buckets and doc is not None and doc.is_public() and not is_owner
    )
    if restricted:
        return False
    granted = False
    if the_rule.permission is not None and acls_enabled(bucket):
        if the_rule.on_object and access.key is not None:
            acl = grants.stored(access.obj.acl if access.obj else None, owner)
        else:
            acl = bucket_acl(bucket)
        granted = acl.grants_to(
            caller_id, the_rule.permission, ignore_public=pab.ignore_public_acls
        )
    # Allows reach only objects the bucket's owner owns.
    allowed = verdict is policy.Effect.ALLOW and owner == bucket.owner
    if identity is None:
        return granted or allowed
    # An IAM identity: its own policies allow, or, in its own account, a bucket policy that
    # names it (not only its account); another account's resource must let its account in
    # as well ("Cross-account policy evaluation logic", IAM's guide).
    if caller_id == owner:
        if own is policy.Effect.ALLOW:
            return True
        if not allowed:
            return False
        assert doc is not None

        def named_by(arns: frozenset[str]) -> bool:
            caller = policy.Caller(user.account, arns, root=False, delegated=False)
            found = doc.evaluate(policy.PolicyRequest(caller, action, resource, access.conditions))
            return found is policy.Effect.ALLOW

        if identity.session_policy is None:
            return named_by(identity.arns)
        # A role's session: a policy naming the session's own ARN allows past its session
        # policy; one naming the role is limited by it ("Session policies", IAM's guide).
        if named_by(identity.direct_arns):
            return True
        narrowed = identity.session_policy.evaluate(request)
        return narrowed is policy.Effect.ALLOW and named_by(identity.arns)
    return own is policy.Effect.ALLOW and (granted or allowed)


# Reads of an object: a missing one is 404 to a caller who may list the bucket, 403 to others
# ("If you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP status code 403",
# GetObject in the API reference).
READS = frozenset({Op.GetObject, Op.HeadObject})


def as_listing(access: Access) -> Access:
    """The ListBucket request that would list `access`'s key (s3:prefix = the key)."""
    key = access.key

    def conditions(name: str) -> list[str] | None:
        return [key] if name == "s3:prefix" and key is not None else access.conditions(name)

    return Access(access.user, Op.ListObjects, access.bucket, conditions=conditions)


async def object_attrs(
    store: Store, bucket: str, key: str, version_id: str | None
) -> ObjectAttrs | None:
    """The attrs of the object a request names, for its owner, ACL and tags; None when
    there is none (the operation answers that, once the caller may know it)."""
    try:
        return (await store.head_object(bucket, key, version_id)).attrs
    except (StoreError, S3Error):
        return None


async def authorize_read(
    store: Store, user: User, bucket: Bucket, key: str, version_id: str | None
) -> None:
    """May `user` read an object (a copy's source)? As a GetObject of it would be judged."""
    obj = None
    if needs_object(Op.GetObject, bucket):
        obj = await object_attrs(store, bucket.name, key, version_id)
    authorize(Access(user, Op.GetObject, bucket, key, version_id, obj))


def authorize(access: Access) -> None:
    """AccessDenied unless `decide` allows. Another account that the policy would let touch
    the policy itself gets 405, as AWS answers it."""
    if not decide(access):
        raise S3Error("AccessDenied")
    if access.operation in POLICY_OPERATIONS and access.user.canonical_id != access.bucket.owner:
        raise S3Error("MethodNotAllowed")


def decide_account(
    user: User, action: str, resource: str, values: Mapping[str, list[str]] | None = None
) -> bool:
    """May `user` make a request that names no bucket (ListBuckets, CreateBucket) or IAM's
    and STS's? An account's root may; an IAM identity as its own policies say. `values`:
    the condition values of the entity acted on and of the request (iam/judged.py)."""
    if is_anonymous(user):
        return False
    identity = user.identity
    if identity is None:
        return True
    request = policy.PolicyRequest(_caller(user), action, resource, principal_keys(user, values))
    return identity_verdict(identity, request) is policy.Effect.ALLOW


# The service principal S3 publishes a bucket's events as ("Granting permissions to publish
# event notification messages to a destination", S3's user guide).
S3_SERVICE = "s3.amazonaws.com"


def decide_topic_publish(
    topic_arn: str, topic_policy: str | None, bucket: str, bucket_owner: str
) -> bool:
    """May `bucket`'s events be published to the topic `topic_arn` (sns:Publish on it)? A
    topic of the bucket owner's own account: yes, no policy needed (Ceph RGW's rule). Another
    account's: only when the topic's `Policy` (its access policy, SNS's JSON) allows it, to
    S3 acting for the bucket's account. The request is both AWS's and Ceph's: a Principal may
    name the service (`{"Service": "s3.amazonaws.com"}`, with `aws:SourceArn` the bucket's ARN
    and `aws:SourceAccount` its owner's account as condition keys) or the bucket owner's
    account (its id, its root's ARN, `*`). An explicit Deny wins; a topic without a policy,
    or with one that does not parse (kept before policies were checked), allows nothing."""
    owner = account_number(bucket_owner)
    arn = numbered(topic_arn)
    if arn.split(":")[4:5] == [owner]:
        return True
    if not topic_policy:
        return False
    try:
        doc = policy.cached(topic_policy, "", policy.Kind.TOPIC)
    except S3Error:
        return False
    source = {
        "aws:sourcearn": [f"arn:aws:s3:::{bucket}"],
        "aws:sourceaccount": [owner],
        "aws:sourceowner": [owner],
    }
    caller = policy.Caller(owner, service=S3_SERVICE)
    request = policy.PolicyRequest(caller, "sns:Publish", arn, source.get)
    return doc.evaluate(request) is policy.Effect.ALLOW


def principal_keys(
    user: User, values: Mapping[str, list[str]] | None = None
) -> Callable[[str], list[str] | None]:
    """The condition keys (and policy variables) of a request that names no bucket: who
    signed it, and `values` (lower-case keys) that the action itself brings."""

    def value(key: str) -> list[str] | None:
        if values and key in values:
            return values[key]
        if key.startswith("aws:principaltag/"):
            return principal_tag(user, key)
        return principal_value(user, key) if key in PRINCIPAL_KEYS else None

    return value
