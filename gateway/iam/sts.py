"""STS's actions (https://docs.aws.amazon.com/STS/latest/APIReference/): who am I, and
temporary credentials (session tokens sealed by principals.py) for a user or a role."""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..s3 import policy
from ..s3.authorize import identity_verdict, principal_keys
from ..users import User, numbered
from . import account as model
from .account import Account, IamError, read
from .call import MAX_TAGS, Call, arn_of, iso_time, tags_of
from .judged import request_tags, resource_tags
from .principals import role_identity, seal_token
from .view import Need

NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"
# GetSessionToken's and AssumeRole's DurationSeconds (the API references' bounds).
SESSION_DEFAULT = {"GetSessionToken": 43200, "AssumeRole": 3600}
SESSION_MIN = 900
SESSION_MAX = 129600
SESSION_CHAINED_MAX = 3600  # a role session assuming a role: one hour at most
# "The plaintext that you use for both inline and managed session policies can't exceed
# 2,048 characters" (API_AssumeRole.html).
MAX_SESSION_POLICY = 2048


# -- STS -----------------------------------------------------------------------------------


def _duration(call: Call, action: str, limit: int) -> int:
    text = call.get("DurationSeconds")
    if text is None:
        return min(SESSION_DEFAULT[action], limit)
    if not (text.isascii() and text.isdigit()) or not SESSION_MIN <= int(text) <= limit:
        raise IamError(
            "ValidationError",
            f"1 validation error detected: Value '{text}' at 'durationSeconds' failed to satisfy "
            f"constraint: Member must have value less than or equal to {limit} and greater "
            f"than or equal to {SESSION_MIN}",
        )
    return int(text)


def _credentials(call: Call, claims: dict[str, Any], seconds: int) -> dict[str, Any]:
    access_key = "ASIA" + "".join(
        secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16)
    )
    secret = model.new_secret()
    expires = int(time.time()) + seconds
    token = seal_token(
        call.master,
        {**claims, "ak": access_key, "sk": secret, "exp": expires, "acc": call.account},
    )
    return {
        "AccessKeyId": access_key,
        "SecretAccessKey": secret,
        "SessionToken": token,
        "Expiration": iso_time(expires),
    }


async def get_caller_identity(call: Call) -> dict[str, Any]:
    identity = call.user.identity
    number = call.user.account
    if identity is None:
        arn, user_id = f"arn:aws:iam::{number}:root", number
    else:
        arn, user_id = identity.arn, identity.user_id
    return {"UserId": user_id, "Account": number, "Arn": arn}


async def get_session_token(call: Call) -> dict[str, Any]:
    user = call.user
    if user.session_token:
        raise IamError("AccessDenied", "Cannot call GetSessionToken with session credentials", 403)
    # A users-file key is checked against the users file, any other against its account's keys.
    kind = "root" if user.access_key in call.principals.roots else "user"
    seconds = _duration(call, "GetSessionToken", SESSION_MAX if user.identity else 3600)
    return {"Credentials": _credentials(call, {"kind": kind, "parent": user.access_key}, seconds)}


_SESSION_NAME = model.re.compile(r"[\w+=,.@-]{2,64}", model.re.ASCII)


async def assume_role(call: Call) -> dict[str, Any]:
    arn = call.get("RoleArn") or ""
    session = call.get("RoleSessionName") or ""
    if not _SESSION_NAME.fullmatch(session):
        raise IamError(
            "ValidationError",
            f"1 validation error detected: Value '{session}' at 'roleSessionName' failed to "
            r"satisfy constraint: Member must satisfy regular expression pattern: [\w+=,.@-]*",
        )
    arn = numbered(arn)  # a role's ARN as written before accounts had numbers works too
    prefix, _, rest = arn.partition(":role")
    root = call.principals.by_number.get(prefix.removeprefix("arn:aws:iam::"))
    if not prefix.startswith("arn:aws:iam::") or root is None or not rest.startswith("/"):
        raise IamError("AccessDenied", f"Not authorized to perform sts:AssumeRole on {arn}", 403)

    def find(acc: Account) -> tuple[dict[str, Any], list[str]] | None:
        role = acc.doc["roles"].get(rest.rpartition("/")[2].lower())
        if role is None or acc.arn("role", role["path"], role["name"]) != arn:
            return None
        return role, acc.role_policies(role)

    owner = root.canonical_id
    found = await read(
        call.store, owner, find, Need(rows=(("roles", rest.rpartition("/")[2].lower()),))
    )
    if found is None:
        raise IamError("AccessDenied", f"Not authorized to perform sts:AssumeRole on {arn}", 403)
    role, policies = found
    if call.user.identity is None:
        # "You cannot use AWS account root user credentials to call AssumeRole" (its API
        # reference): AWS's answer.
        raise IamError("AccessDenied", "Roles may not be assumed by root accounts.", 403)
    session_policy = call.get("Policy")
    if session_policy is not None:
        if len(session_policy) > MAX_SESSION_POLICY:
            raise IamError(
                "ValidationError",
                "1 validation error detected: Value at 'policy' failed to satisfy constraint: "
                f"Member must have length less than or equal to {MAX_SESSION_POLICY}",
            )
        model.check_policy(session_policy, "policy", policy.Kind.IDENTITY)
    if not _trusts(role, arn, call.user, call):
        raise IamError(
            "AccessDenied",
            f"User: {arn_of(call.user)} is not authorized to perform: sts:AssumeRole on "
            f"resource: {arn}",
            403,
        )
    limit = role["max_session"]
    if ":assumed-role/" in call.user.identity.arn:
        # Role chaining: "limited to a maximum of one hour" (id_roles_terms-and-concepts).
        limit = SESSION_CHAINED_MAX
        asked = call.get("DurationSeconds")
        if asked is not None and asked.isascii() and asked.isdigit() and int(asked) > limit:
            raise IamError(
                "ValidationError",
                "The requested DurationSeconds exceeds the 1 hour session limit for roles "
                "assumed by role chaining.",
            )
    seconds = _duration(call, "AssumeRole", limit)
    claims: dict[str, Any] = {
        "kind": "role", "role": role["name"], "role_id": role["id"], "session": session,
    }  # fmt: skip
    if session_policy is not None:
        claims["policy"] = session_policy
    tags = tags_of(call)
    if tags:
        # Session tags need the trust policy's sts:TagSession as well (id_session-tags.html).
        if len(tags) > MAX_TAGS:
            raise IamError("ValidationError", f"A session has at most {MAX_TAGS} tags")
        if not _trusts(role, arn, call.user, call, "sts:TagSession"):
            raise IamError(
                "AccessDenied",
                f"User: {arn_of(call.user)} is not authorized to perform: sts:TagSession on "
                f"resource: {arn}",
                403,
            )
        claims["tags"] = tags
    # The answer's account is the role's: the credentials act for it.
    call.user = User("", "", root.display_name, root.canonical_id)
    identity = role_identity(owner, role, policies, session, session_policy, tags)
    return {
        "Credentials": _credentials(call, claims, seconds),
        "AssumedRoleUser": {"AssumedRoleId": identity.user_id, "Arn": identity.arn},
        "PackedPolicySize": 0
        if session_policy is None
        else len(session_policy) * 100 // MAX_SESSION_POLICY,
    }


def trust_values(call: Call, role: dict[str, Any]) -> dict[str, list[str]]:
    """What an AssumeRole brings to the trust policy and the caller's own policies besides
    who asks: its session tags (aws:RequestTag/<key>, aws:TagKeys: a trust policy limits
    which tags a session may carry), the role's own tags (aws:ResourceTag/<key>),
    sts:ExternalId and sts:RoleSessionName."""
    values = {**resource_tags(role), **request_tags(call, "AssumeRole")}
    for key, param in (("sts:externalid", "ExternalId"),
                       ("sts:rolesessionname", "RoleSessionName")):  # fmt: skip
        given = call.get(param)
        if given is not None:
            values[key] = [given]
    return values


def _trusts(
    role: dict[str, Any], role_arn: str, user: User, call: Call, action: str = "sts:AssumeRole"
) -> bool:
    """The role's trust policy allows `user` sts:AssumeRole: naming it (its ARN), or naming
    its account, whose IAM identities then also need an Allow of their own. An explicit Deny
    in the caller's own policies refuses either way ("Policy evaluation logic"), and the
    trust policy's conditions read who asks (aws:PrincipalArn, ...) and sts:ExternalId."""
    trust = policy.cached(role["trust"], "", policy.Kind.TRUST)
    arns = user.identity.arns if user.identity else frozenset()
    root = user.identity is None
    keys = principal_keys(user, trust_values(call, role))

    def verdict(delegated: bool) -> policy.Effect | None:
        caller = policy.Caller(user.account, arns, root=root, delegated=delegated)
        return trust.evaluate(policy.PolicyRequest(caller, action, role_arn, keys))

    own = None
    if user.identity is not None:
        request = policy.PolicyRequest(
            policy.Caller(user.account, arns, root=False), action, role_arn, keys
        )
        own = identity_verdict(user.identity, request)
        if own is policy.Effect.DENY:
            return False
    if verdict(True) is not policy.Effect.ALLOW:
        return False
    if role_arn.split(":")[4] != user.account:
        # Across accounts both sides must allow: the role's trust, and the caller's own
        # identity policies in its account, even when the trust names the caller itself
        # (id_roles_common-scenarios_aws-accounts.html).
        return own is policy.Effect.ALLOW
    if root or verdict(False) is policy.Effect.ALLOW:
        return True
    return own is policy.Effect.ALLOW


STS_ACTIONS: dict[str, Callable[[Call], Awaitable[Any]]] = {
    "GetCallerIdentity": get_caller_identity,
    "GetSessionToken": get_session_token,
    "AssumeRole": assume_role,
}
# Every identity may ask who it is and get a session token ("No permissions are required",
# the STS API reference); AssumeRole is judged with the role's trust policy (_trusts).
ALWAYS = frozenset({"GetCallerIdentity", "GetSessionToken", "AssumeRole"})
