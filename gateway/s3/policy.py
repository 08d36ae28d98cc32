"""Policies: the JSON grammar, its validation and its evaluation. Pure: no request, no store
(`authorize` builds a `PolicyRequest` and reads the verdict). Four kinds share the grammar:
bucket policies (a Principal, S3's actions and the bucket's resources), IAM identity policies
(no Principal; S3's, IAM's and STS's actions; any resource), a role's trust policy (a
Principal, STS's actions) and a topic's access policy (its `Policy` attribute: a Principal,
SNS's actions).

The language is IAM's as S3 applies it to a bucket
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements.html and
https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-policies.html): statements with
Effect, Principal / NotPrincipal, Action / NotAction, Resource / NotResource and Condition.
An explicit Deny wins over any Allow; a request no statement matches gets no verdict.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import ipaddress
import json
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..users import account_number, numbered
from .errors import S3Error
from .variables import LITERAL, substitute
from .wildcard import Wildcard, wildcard

MAX_POLICY_BYTES = 20 * 1024  # "Bucket policies are limited to 20 KB" (add-bucket-policy.html)
VERSIONS = ("2012-10-17", "2008-10-17")

# S3's actions (Service Authorization Reference, list_amazons3.html), the ones a bucket
# policy may name. Unknown names are "Policy has invalid action", as AWS answers.
_ACTION_NAMES = """
    AbortMultipartUpload BypassGovernanceRetention CreateBucket DeleteBucket
    DeleteBucketOwnershipControls DeleteBucketPolicy DeleteBucketWebsite DeleteObject
    DeleteObjectTagging DeleteObjectVersion DeleteObjectVersionTagging GetAccelerateConfiguration
    GetAnalyticsConfiguration GetBucketAcl GetBucketCORS GetBucketLocation GetBucketLogging
    GetBucketNotification GetBucketObjectLockConfiguration GetBucketOwnershipControls
    GetBucketPolicy GetBucketPolicyStatus GetBucketPublicAccessBlock GetBucketRequestPayment
    GetBucketTagging GetBucketVersioning GetBucketWebsite GetEncryptionConfiguration
    GetIntelligentTieringConfiguration GetInventoryConfiguration GetLifecycleConfiguration
    GetMetricsConfiguration GetObject GetObjectAcl GetObjectAttributes GetObjectLegalHold
    GetObjectRetention GetObjectTagging GetObjectTorrent GetObjectVersion GetObjectVersionAcl
    GetObjectVersionAttributes GetObjectVersionForReplication GetObjectVersionTagging
    GetObjectVersionTorrent GetReplicationConfiguration ListAllMyBuckets ListBucket
    ListBucketMultipartUploads ListBucketVersions ListMultipartUploadParts
    PutAccelerateConfiguration
    PutAnalyticsConfiguration PutBucketAcl PutBucketCORS PutBucketLogging PutBucketNotification
    PutBucketObjectLockConfiguration PutBucketOwnershipControls PutBucketPolicy
    PutBucketPublicAccessBlock PutBucketRequestPayment PutBucketTagging PutBucketVersioning
    PutBucketWebsite PutEncryptionConfiguration PutIntelligentTieringConfiguration
    PutInventoryConfiguration PutLifecycleConfiguration PutMetricsConfiguration PutObject
    PutObjectAcl PutObjectLegalHold PutObjectRetention PutObjectTagging PutObjectVersionAcl
    PutObjectVersionTagging PutReplicationConfiguration ReplicateDelete ReplicateObject
    ReplicateTags RestoreObject
"""
ACTIONS = frozenset("s3:" + name for name in _ACTION_NAMES.split())
_ACTIONS_LOWER = {a.lower() for a in ACTIONS}

# The condition keys a policy may name, in two sets. SUPPLIED: the gateway gives each a value
# whenever the request has one (policy_context.values for S3's requests; iam/judged.py and
# iam/sts.py for IAM's and STS's). ABSENT: AWS's keys that have no meaning on this gateway
# (VPCs, organisations, services acting for a principal, MFA, access points): accepted, as
# AWS accepts them, and never present in a request, so a condition on one holds only where
# AWS's rule for a missing key says so (IfExists, Null, ForAllValues on an empty set, the
# negated operators); docs/iam.md lists them. Any other key is refused when the policy is
# put ("Policy has an invalid condition key"), never silently judged absent.
# tests/unit/test_condition_keys.py gives each SUPPLIED key a request that sets it and one
# that does not. Keys ending in "/" are families: the tag key follows.
_SUPPLIED_NAMES = """
    aws:SourceIp aws:SecureTransport aws:CurrentTime aws:EpochTime aws:Referer aws:UserAgent
    aws:PrincipalArn aws:PrincipalAccount aws:userid aws:username aws:PrincipalType
    aws:PrincipalTag/ aws:RequestTag/ aws:TagKeys aws:ResourceTag/ iam:ResourceTag/
    sts:ExternalId sts:RoleSessionName
    s3:prefix s3:delimiter s3:max-keys s3:VersionId s3:x-amz-acl s3:x-amz-grant-read
    s3:x-amz-grant-write s3:x-amz-grant-read-acp s3:x-amz-grant-write-acp
    s3:x-amz-grant-full-control s3:x-amz-copy-source s3:x-amz-metadata-directive
    s3:x-amz-storage-class s3:x-amz-server-side-encryption
    s3:x-amz-server-side-encryption-aws-kms-key-id
    s3:x-amz-server-side-encryption-customer-algorithm s3:x-amz-content-sha256
    s3:object-lock-mode s3:object-lock-retain-until-date s3:object-lock-legal-hold
    s3:x-amz-object-ownership s3:if-match s3:if-none-match s3:signatureversion s3:authType
    s3:ExistingObjectTag/ s3:RequestObjectTag/ s3:RequestObjectTagKeys
"""
_ABSENT_NAMES = """
    aws:SourceVpc aws:SourceVpce aws:VpcSourceIp aws:SourceVpcArn aws:SourceArn
    aws:SourceAccount aws:SourceOrgID aws:SourceOrgPaths aws:PrincipalOrgID
    aws:PrincipalOrgPaths aws:PrincipalIsAWSService aws:PrincipalServiceName
    aws:PrincipalServiceNamesList aws:MultiFactorAuthPresent aws:MultiFactorAuthAge
    aws:TokenIssueTime aws:ViaAWSService aws:CalledVia aws:CalledViaFirst aws:CalledViaLast
    aws:RequestedRegion aws:FederatedProvider aws:SourceIdentity aws:ResourceAccount
    aws:ResourceOrgID aws:ResourceOrgPaths aws:Ec2InstanceSourceVpc
    aws:Ec2InstanceSourcePrivateIPv4 aws:VpceAccount aws:VpceOrgID aws:VpceOrgPaths
    aws:AssumedRoot aws:SourceOwner
    iam:PolicyARN iam:PassedToService iam:PermissionsBoundary iam:AWSServiceName
    iam:OrganizationsPolicyId
    sts:SourceIdentity sts:TransitiveTagKeys sts:AWSServiceName
    s3:signatureAge s3:TlsVersion s3:object-lock-remaining-retention-days
    s3:LocationConstraint s3:ResourceAccount s3:DataAccessPointArn
    s3:AccessPointNetworkOrigin s3:DataAccessPointAccount
"""
SUPPLIED_KEYS = frozenset(k.lower() for k in _SUPPLIED_NAMES.split())
ABSENT_KEYS = frozenset(k.lower() for k in _ABSENT_NAMES.split())
_KEY_FAMILIES = tuple(k for k in SUPPLIED_KEYS if k.endswith("/"))
# Keys whose fixed values make a statement non-public ("The meaning of public",
# access-control-block-public-access.html, and the PublicAccessBlockConfiguration API text):
# each names the caller or where the request comes from.
_FIXING_KEYS = frozenset(
    k.lower()
    for k in (
        "aws:SourceIp",
        "aws:SourceArn",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "aws:SourceOwner",
        "aws:SourceAccount",
        "aws:userid",
        "aws:PrincipalOrgID",
        "aws:PrincipalAccount",
        "aws:PrincipalArn",
        "s3:DataAccessPointArn",
        "s3:DataAccessPointAccount",
        "s3:x-amz-server-side-encryption-aws-kms-key-id",
    )
)
# The operators under which such a key fixes the caller: it must be present and equal one of
# the values. Negated ones (StringNotEquals, NotIpAddress), IfExists (true without the key),
# Null and ForAllValues (true for an empty set) let anyone through.
_FIXING_OPERATORS = frozenset(
    ("StringEquals", "StringEqualsIgnoreCase", "StringLike", "ArnEquals", "ArnLike", "IpAddress")
)


class Effect(enum.Enum):
    ALLOW = "Allow"
    DENY = "Deny"


class Kind(enum.Enum):
    BUCKET = "bucket"  # a bucket policy: Principal, S3's actions, the bucket's resources
    IDENTITY = "identity"  # an IAM user's, group's or role's: no Principal, any resource
    TRUST = "trust"  # a role's trust policy: who may assume it
    TOPIC = "topic"  # an SNS topic's access policy: who may publish to it (docs/notifications.md)


# The services whose actions an identity policy may name (the others' are no request here).
_IDENTITY_SERVICES = ("s3", "iam", "sts")


def malformed(message: str) -> S3Error:
    return S3Error("MalformedPolicy", message)


@dataclass(frozen=True)
class Caller:
    """Who asks, as a policy sees them: its account's 12-digit id (None: anonymous); for an
    IAM identity (not an account's root), the ARNs a Principal may name it by. `delegated`:
    a Principal naming the account matches an IAM identity of it too (the account passes its
    permission on; the identity's own policies must then allow as well, "Policy evaluation
    logic" in IAM's guide). `service`: an AWS service acting for the account, which a
    `{"Service": ...}` Principal names (S3 publishing a bucket's events to a topic)."""

    account: str | None
    arns: frozenset[str] = frozenset()
    root: bool = True
    delegated: bool = True
    service: str | None = None


@dataclass(frozen=True)
class PolicyRequest:
    caller: Caller
    action: str  # "s3:GetObject"
    resource: str  # "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
    # A condition key's values (lower-case key name), None when the request has none.
    lookup: Callable[[str], list[str] | None]


# -- principals ----------------------------------------------------------------------------

_ARN_PRINCIPAL = re.compile(r"arn:aws:(?:iam|sts)::([^:]+):(root|user/.+|role/.+|assumed-role/.+)")


@dataclass(frozen=True)
class Principals:
    """A Principal element: everyone (`*`), accounts by id (an account's root ARN, its id or
    canonical id), IAM users and roles by ARN, or services (`s3.amazonaws.com`: only S3
    publishing to a topic is a service's request here). Accounts are kept by number, and ARNs
    with their account's number, however the policy named them (users.numbered)."""

    everyone: bool
    accounts: frozenset[str]
    arns: frozenset[str] = frozenset()
    # The accounts of `arns`: a user of the users file is an account of its own, and a
    # user/NAME ARN of its account names it (a display name is not unique).
    arn_accounts: frozenset[str] = frozenset()
    services: frozenset[str] = frozenset()

    def match(self, caller: Caller) -> bool:
        if self.everyone:
            return True
        if caller.service is not None and caller.service in self.services:
            return True
        if caller.account is None:
            return False
        if caller.root:
            # An account's root answers to its account, by id or by any of its ARNs (every
            # user of the users file is an account of its own).
            return caller.account in self.accounts or caller.account in self.arn_accounts
        if caller.arns & self.arns:
            return True
        return caller.delegated and caller.account in self.accounts

    def fixed(self) -> bool:
        return not self.everyone


def _strings(value: object, what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise malformed(f"{what} must be a string or a list of strings")


def _principals(value: object) -> Principals:
    if value == "*":
        return Principals(True, frozenset())
    if not isinstance(value, dict) or not value:
        raise malformed("Invalid principal in policy")
    accounts: set[str] = set()
    arns: set[str] = set()
    arn_accounts: set[str] = set()
    services: set[str] = set()
    everyone = False
    for kind, names in value.items():
        if kind not in ("AWS", "CanonicalUser", "Service", "Federated"):
            raise malformed("Invalid principal in policy")
        for name in _strings(names, "Principal"):
            if kind == "AWS" and name == "*":
                everyone = True
            elif kind == "AWS":
                m = _ARN_PRINCIPAL.fullmatch(name)
                if m is not None:
                    # An account's root by its ARN; an IAM user or role by its ARN.
                    if m.group(2) == "root":
                        accounts.add(account_number(m.group(1)))
                    else:
                        arns.add(numbered(name))
                        arn_accounts.add(account_number(m.group(1)))
                elif re.fullmatch(r"[A-Za-z0-9$._-]+", name):
                    accounts.add(account_number(name))  # an account's id, or canonical id
                else:
                    raise malformed("Invalid principal in policy")
            elif kind == "CanonicalUser":
                if not re.fullmatch(r"[A-Za-z0-9$._-]+", name):
                    raise malformed("Invalid principal in policy")
                accounts.add(account_number(name))
            elif kind == "Service":
                services.add(name.lower())  # a service's name is case-insensitive
            # Federated principals are valid but no request here is theirs.
    return Principals(
        everyone, frozenset(accounts), frozenset(arns), frozenset(arn_accounts), frozenset(services)
    )


# -- conditions ----------------------------------------------------------------------------


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _date(text: str) -> float | None:
    if re.fullmatch(r"[0-9]+", text):
        return float(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None


_EVERY = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))


def _every_address(values: tuple[str, ...]) -> bool:
    """Whether the networks together admit every IPv4 or every IPv6 address: judged on
    their union, so that 0.0.0.0/1 with 128.0.0.0/1 is as public as 0.0.0.0/0 ("The meaning
    of public", access-control-block-public-access.html)."""
    networks = [n for n in map(_network, values) if n is not None]
    for every in _EVERY:
        same = [n for n in networks if n.version == every.version]
        if every in ipaddress.collapse_addresses(same):  # type: ignore[arg-type]
            return True
    return False


def _compare(
    parse: Callable[[str], float | None], test: Callable[[float, float], bool]
) -> Callable[[str, str], bool]:
    def match(actual: str, wanted: str) -> bool:
        a, w = parse(actual), parse(wanted)
        return a is not None and w is not None and test(a, w)

    return match


def _ip_in(actual: str, wanted: str) -> bool:
    net = _network(wanted)
    try:
        ip = ipaddress.ip_address(actual)
    except ValueError:
        return False
    return net is not None and ip.version == net.version and ip in net


def _like(actual: str, wanted: str) -> bool:
    return wildcard(wanted).matches(actual)


def _bool(actual: str, wanted: str) -> bool:
    return actual.lower() == wanted.lower()


# operator -> (match of one request value against one policy value, negated)
_OPERATORS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    "StringEquals": (str.__eq__, False),
    "StringNotEquals": (str.__eq__, True),
    "StringEqualsIgnoreCase": (lambda a, w: a.lower() == w.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda a, w: a.lower() == w.lower(), True),
    "StringLike": (_like, False),
    "StringNotLike": (_like, True),
    "Bool": (_bool, False),
    "BinaryEquals": (str.__eq__, False),
    "IpAddress": (_ip_in, False),
    "NotIpAddress": (_ip_in, True),
    "ArnEquals": (str.__eq__, False),
    "ArnNotEquals": (str.__eq__, True),
    "ArnLike": (_like, False),
    "ArnNotLike": (_like, True),
}
_COMPARISONS: dict[str, tuple[Callable[[float, float], bool], bool]] = {
    "Equals": (operator.eq, False),
    "NotEquals": (operator.eq, True),
    "LessThan": (operator.lt, False),
    "LessThanEquals": (operator.le, False),
    "GreaterThan": (operator.gt, False),
    "GreaterThanEquals": (operator.ge, False),
}
for _family, _parse in (("Numeric", _number), ("Date", _date)):
    for _suffix, (_test, _negated) in _COMPARISONS.items():
        _OPERATORS[_family + _suffix] = (_compare(_parse, _test), _negated)
_VALUE_CHECKS: dict[str, Callable[[str], object]] = {
    "Numeric": _number,
    "Date": _date,
    "IpAddress": _network,
    "NotIpAddress": _network,
}


@dataclass(frozen=True)
class Condition:
    operator: str  # as written, for messages
    key: str  # lower-case
    values: tuple[str, ...]
    match: Callable[[str, str], bool] | None  # None: the Null operator
    negated: bool
    if_exists: bool
    quantifier: str | None  # "ForAnyValue", "ForAllValues" or None
    base: str  # the operator without its quantifier and IfExists: "StringEquals"
    variables: bool = False  # its values hold policy variables (${aws:username})

    def fixes_caller(self) -> bool:
        """Whether the condition lets only known callers through: a key that names the
        caller or its network, required present and equal to fixed values ("The meaning of
        public": values without a wildcard or a policy variable; a CIDR other than /0)."""
        if self.key not in _FIXING_KEYS or self.base not in _FIXING_OPERATORS:
            return False
        if self.if_exists or self.negated or self.quantifier == "ForAllValues":
            return False
        for value in self.values:
            if "${" in value:
                return False
            if self.base.endswith("Like") and ("*" in value or "?" in value):
                return False
        if self.base == "IpAddress":
            return not _every_address(self.values)
        return True

    def holds(self, lookup: Callable[[str], list[str] | None]) -> bool:
        actual = lookup(self.key)
        if self.match is None:  # Null: "true" asks for the key's absence
            absent = actual is None or actual == []
            return any((v.lower() == "true") == absent for v in self.values)
        if actual is None:
            if self.if_exists:
                return True
            if self.quantifier == "ForAllValues":
                return True
            return self.negated
        wanted = self.values
        if self.variables:
            # A variable without a value (and no default) matches nothing; under a Like
            # operator what it brings in is text, never a wildcard (as in a Resource).
            like = self.base.endswith("Like")
            texts = (substitute(t, lookup, literal=like) for t in wanted)
            wanted = tuple(v for v in texts if v is not None)
            if like:
                actual = [a.translate(LITERAL) for a in actual]
        if self.quantifier == "ForAllValues":
            return all(self._one(a, wanted) for a in actual)
        if self.quantifier == "ForAnyValue":
            return any(self._one(a, wanted) for a in actual)
        if self.negated:
            return all(self._one(a, wanted) for a in actual)
        return any(self._one(a, wanted) for a in actual)

    def _one(self, actual: str, wanted: tuple[str, ...]) -> bool:
        assert self.match is not None
        hit = any(self.match(actual, value) for value in wanted)
        return not hit if self.negated else hit


def _condition_key(key: str, kind: Kind = Kind.BUCKET) -> str:
    low = key.lower()
    known = (low in SUPPLIED_KEYS and not low.endswith("/")) or low in ABSENT_KEYS
    if not known and not any(low.startswith(p) and len(low) > len(p) for p in _KEY_FAMILIES):
        raise malformed("Policy has an invalid condition key")
    if kind is Kind.BUCKET and low.partition(":")[0] not in ("aws", "s3"):
        raise malformed("Policy has an invalid condition key")  # IAM's and STS's keys
    if kind is Kind.TOPIC and low.partition(":")[0] != "aws":
        raise malformed("Policy has an invalid condition key")  # S3's, IAM's and STS's keys
    return low


_ACCOUNT_KEYS = frozenset(("aws:principalaccount", "aws:sourceaccount", "aws:resourceaccount"))
_ARN_KEYS = frozenset(("aws:principalarn", "aws:sourcearn"))


def _account_value(key: str, value: str) -> str:
    """A condition's value on an account or an ARN, as the request's values carry it: by the
    account's number (a policy written when this gateway's ARNs had the canonical id still
    holds)."""
    if key in _ARN_KEYS:
        return numbered(value)
    if key in _ACCOUNT_KEYS and value and not any(c in value for c in "*?$"):
        return account_number(value)
    return value


def _conditions(
    value: object, kind: Kind = Kind.BUCKET, variables: bool = False
) -> tuple[Condition, ...]:
    if not isinstance(value, dict):
        raise malformed("Condition must be an object")
    out: list[Condition] = []
    for op_name, block in value.items():
        name, quantifier = op_name, None
        if ":" in name:
            quantifier, _, name = name.partition(":")
            if quantifier not in ("ForAnyValue", "ForAllValues"):
                raise malformed(f"Invalid Condition type : {op_name}")
        if_exists = name.endswith("IfExists")
        base = name.removesuffix("IfExists")
        if (base != "Null" and base not in _OPERATORS) or (base == "Null" and if_exists):
            raise malformed(f"Invalid Condition type : {op_name}")
        if not isinstance(block, dict) or not block:
            raise malformed(f"Invalid Condition type : {op_name}")
        for key, raw in block.items():
            if isinstance(raw, bool | int | float) and not isinstance(raw, str):
                raw = str(raw).lower() if isinstance(raw, bool) else str(raw)
            if isinstance(raw, list):
                raw = [str(v).lower() if isinstance(v, bool) else str(v) for v in raw]
            values = _strings(raw, "Condition value")
            check = next((f for p, f in _VALUE_CHECKS.items() if base.startswith(p)), None)
            if check is not None and any(check(v) is None for v in values):
                raise malformed(f"Invalid Condition value for {op_name}: {values[0]}")
            match, negated = _OPERATORS.get(base, (None, False))
            ckey = _condition_key(key, kind)
            if base != "Null":
                values = [_account_value(ckey, v) for v in values]
            out.append(
                Condition(
                    op_name,
                    ckey,
                    tuple(values),
                    match if base != "Null" else None,
                    negated,
                    if_exists,
                    quantifier,
                    base,
                    variables and any("${" in v for v in values),
                )
            )
    return tuple(out)


# -- statements ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    sid: str | None
    effect: Effect
    principals: Principals
    not_principal: bool
    actions: tuple[Wildcard, ...]
    not_action: bool
    resources: tuple[Wildcard, ...]
    not_resource: bool
    conditions: tuple[Condition, ...]
    # Resources with policy variables, as written (matched once the request's values are in).
    variable_resources: tuple[str, ...] = ()

    def applies(self, request: PolicyRequest) -> bool:
        if self.principals.match(request.caller) == self.not_principal:
            return False
        hit = any(p.matches(request.action) for p in self.actions)
        if hit == self.not_action:
            return False
        hit = any(p.matches(request.resource) for p in self.resources)
        if not hit and self.variable_resources:
            # What a variable brings in is text, never a wildcard: its `*` and `?` are
            # matched as those characters (against the resource's, marked the same way).
            texts = (substitute(t, request.lookup, literal=True) for t in self.variable_resources)
            marked = request.resource.translate(LITERAL)
            hit = any(wildcard(t).matches(marked) for t in texts if t is not None)
        if hit == self.not_resource:
            return False
        return all(c.holds(request.lookup) for c in self.conditions)

    def is_public(self) -> bool:
        """An Allow to everyone that no condition narrows to known callers. Conditions are
        ANDed: one that fixes the caller is enough, and others cannot widen it."""
        if self.effect is not Effect.ALLOW:
            return False
        if self.principals.fixed() and not self.not_principal:
            return False
        return not any(c.fixes_caller() for c in self.conditions)


def _pair(doc: dict[str, object], name: str, required: bool = True) -> tuple[object, bool]:
    """(value, negated) of an element that has a Not form: exactly one of the two."""
    plain, negated = doc.get(name), doc.get("Not" + name)
    if plain is not None and negated is not None:
        raise malformed(f"Statement cannot have both {name} and Not{name}")
    if plain is None and negated is None:
        if required:
            raise malformed(f"Missing required field {name}")
        return None, False
    return (plain, False) if plain is not None else (negated, True)


_ANY = wildcard("*")


_NAME = re.compile(r"[A-Za-z0-9*?]+")
_SERVICE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def _actions(value: object, kind: Kind) -> tuple[Wildcard, ...]:
    out = []
    for action in _strings(value, "Action"):
        if action == "*":
            action = {Kind.BUCKET: "s3:*", Kind.TOPIC: "sns:*"}.get(kind, "*")
            out.append(wildcard(action))
            continue
        service, sep, name = action.partition(":")
        service = service.lower()
        if kind is Kind.TOPIC and service != "sns":
            # SNS's answer to another service's action in a topic's policy.
            raise malformed("Policy statement action out of service scope!")
        if kind is Kind.BUCKET:
            if not sep or service != "s3" or not name:
                raise malformed("Policy has invalid action")
            if "*" not in name and "?" not in name and ("s3:" + name).lower() not in _ACTIONS_LOWER:
                raise malformed("Policy has invalid action")
        elif not sep or not name or not _NAME.fullmatch(name) or not _SERVICE.fullmatch(service):
            # Any service's action, as IAM's grammar allows (`s3-object-lambda:Get*` in
            # AmazonS3ReadOnlyAccess): one this gateway does not serve matches no request.
            raise malformed(f"Actions/Conditions must be prefaced by a vendor: {action}")
        out.append(wildcard(f"{service}:{name}", ignore_case=True))
    return tuple(out)


def _resources(value: object, kind: Kind, bucket: str) -> tuple[Wildcard, ...]:
    out = []
    for resource in _strings(value, "Resource"):
        if kind is not Kind.BUCKET:
            if resource != "*" and not resource.startswith("arn:"):
                raise malformed(f'Resource {resource} must be in ARN format or "*".')
            out.append(wildcard(numbered(resource)))
            continue
        if not resource.startswith("arn:aws:s3:::"):
            raise malformed("Policy has invalid resource")
        named = resource[len("arn:aws:s3:::") :].partition("/")[0]
        if not wildcard(named).matches(bucket):
            raise malformed("Policy has invalid resource")
        out.append(wildcard(resource))
    return tuple(out)


def _statement(doc: object, kind: Kind, bucket: str, variables: bool = False) -> Statement:
    if not isinstance(doc, dict):
        raise malformed("Statement must be an object")
    known = {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction"}
    known |= {"Resource", "NotResource", "Condition"}
    unknown = set(doc) - known
    if unknown:
        raise malformed(f"Unknown field {sorted(unknown)[0]}")
    sid = doc.get("Sid")
    if sid is not None and not isinstance(sid, str):
        raise malformed("Sid must be a string")
    effect_text = doc.get("Effect")
    if effect_text is None:
        raise malformed("Missing required field Effect")
    if effect_text not in ("Allow", "Deny"):
        raise malformed(f"Invalid effect: {effect_text}")
    effect = Effect(effect_text)
    if kind is Kind.IDENTITY:
        if "Principal" in doc or "NotPrincipal" in doc:
            # "Policy document should not specify a principal" (IAM's MalformedPolicyDocument).
            raise malformed("Policy document should not specify a principal.")
        principals, not_principal = Principals(True, frozenset()), False
    else:
        principal, not_principal = _pair(doc, "Principal")
        if not_principal and effect is Effect.ALLOW:
            # NotPrincipal is valid only with Deny (reference_policies_elements_notprincipal).
            raise malformed("NotPrincipal is only valid with a Deny effect")
        principals = _principals(principal)
    action, not_action = _pair(doc, "Action")
    # A trust policy's statements apply to the role they are attached to: no Resource.
    resource, not_resource = _pair(doc, "Resource", required=kind is not Kind.TRUST)
    condition = doc.get("Condition")
    resources = _resources(resource, kind, bucket) if resource is not None else (_ANY,)
    with_variables: tuple[str, ...] = ()
    if variables and resource is not None:
        texts = _strings(resource, "Resource")
        with_variables = tuple(t for t in texts if "${" in t)
        resources = tuple(r for r, t in zip(resources, texts, strict=True) if "${" not in t)
    return Statement(
        sid=sid,
        effect=effect,
        principals=principals,
        not_principal=not_principal,
        actions=_actions(action, kind),
        not_action=not_action,
        resources=resources,
        not_resource=not_resource,
        conditions=_conditions(condition, kind, variables) if condition is not None else (),
        variable_resources=with_variables,
    )


@dataclass(frozen=True)
class Policy:
    statements: tuple[Statement, ...]

    def evaluate(self, request: PolicyRequest) -> Effect | None:
        """Deny if a Deny statement applies, else Allow if an Allow does, else None."""
        verdict = None
        for statement in self.statements:
            if statement.applies(request):
                if statement.effect is Effect.DENY:
                    return Effect.DENY
                verdict = Effect.ALLOW
        return verdict

    def is_public(self) -> bool:
        return any(s.is_public() for s in self.statements)


def _no_duplicate_keys(pairs: Iterable[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise malformed(f"Duplicate field {key}")
        out[key] = value
    return out


def parse(
    text: str | bytes, bucket: str = "", kind: Kind = Kind.BUCKET, max_bytes: int = MAX_POLICY_BYTES
) -> Policy:
    """A policy as PutBucketPolicy (or IAM's Put*Policy, CreateRole) receives it;
    MalformedPolicy with AWS's messages."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise malformed("Policies must be valid JSON and the first byte must be '{'") from None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError):
        raise malformed("Policies must be valid JSON and the first byte must be '{'") from None
    if not isinstance(doc, dict):
        raise malformed("Policies must be valid JSON and the first byte must be '{'")
    if len(json.dumps(doc, separators=(",", ":"))) > max_bytes:
        raise malformed("Policy exceeds the maximum allowed document size.")
    unknown = set(doc) - {"Version", "Id", "Statement"}
    if unknown:
        raise malformed(f"Unknown field {sorted(unknown)[0]}")
    version = doc.get("Version")
    if version is not None and version not in VERSIONS:
        raise malformed("The policy must contain a valid version string")
    if "Id" in doc and not isinstance(doc["Id"], str):
        raise malformed("Id must be a string")
    statements = doc.get("Statement")
    if statements is None:
        raise malformed("Missing required field Statement")
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list) or not statements:
        raise malformed("Missing required field Statement")
    # Policy variables are read only in the current language version (reference_policies_
    # variables.html: "Version": "2012-10-17"); in an older one "${...}" is literal text.
    variables = version == "2012-10-17"
    parsed = tuple(_statement(s, kind, bucket, variables) for s in statements)
    if kind is not Kind.BUCKET:
        sids = [s.sid for s in parsed if s.sid is not None]
        if len(sids) != len(set(sids)):
            raise malformed("Statement IDs (SID) in a single policy must be unique.")
    return Policy(parsed)


@functools.lru_cache(maxsize=1024)
def cached(text: str, bucket: str, kind: Kind = Kind.BUCKET) -> Policy:
    """A stored (already validated) policy, parsed once per text."""
    return parse(text, bucket, kind, max_bytes=1 << 20)
