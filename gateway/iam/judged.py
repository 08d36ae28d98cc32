"""What an IAM action is judged on: the ARN of the entity it acts on, exactly as IAM reports
it (GetUser's, GetRole's, GetGroup's, a policy's `Arn`: path included), and the condition
values that entity and the request give (aws:ResourceTag, iam:ResourceTag, aws:RequestTag,
aws:TagKeys). One function for every action, so that a Deny written on the ARN IAM itself
returns applies whichever way the action names its entity: by name, in another case, or not
at all (a user acting on itself)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..users import numbered
from .account import PATH, Account
from .call import Call, members

# Actions judged on the group they name though they name a user too (the Service
# Authorization Reference, list_awsidentityandaccessmanagementiam.html: "group*").
_ON_GROUP = frozenset({"AddUserToGroup", "RemoveUserFromGroup"})
_ENTITIES = (("UserName", "user", "users"), ("GroupName", "group", "groups"),
             ("RoleName", "role", "roles"))  # fmt: skip
# Actions that, without a UserName, act on the caller itself (their API references: "If
# you do not specify a user name, IAM determines the user name implicitly based on the
# Amazon Web Services access key ID signing the request").
_SELF = frozenset(
    {"GetUser", "CreateAccessKey", "ListAccessKeys", "UpdateAccessKey", "DeleteAccessKey"}
)
# Actions whose Tags (or TagKeys) are the request's tags: aws:RequestTag/<key>, aws:TagKeys.
_TAGGING = frozenset({"CreateUser", "CreateRole", "TagUser", "TagRole"})
_UNTAGGING = frozenset({"UntagUser", "UntagRole"})


@dataclass(frozen=True)
class Judged:
    """The resource an action is judged on and the condition values it brings."""

    arn: str
    values: Mapping[str, list[str]] = field(default_factory=dict)


def _path(call: Call, param: str, default: str) -> str:
    value = call.get(param)
    return value if value is not None and PATH.fullmatch(value) else default


def _entity(
    call: Call, action: str, acc: Account | None
) -> tuple[str, dict[str, Any] | None] | None:
    """The ARN of the entity `action` names and its stored entry (None: not stored, as for
    the Create actions, whose ARN is the one the entity will have)."""
    account = call.user.account
    entities = _ENTITIES[1:2] if action in _ON_GROUP else _ENTITIES
    for param, kind, part in entities:
        name = call.get(param)
        if not name:
            continue
        entry = acc.doc[part].get(name.lower()) if acc is not None else None
        if entry is not None:
            return f"arn:aws:iam::{account}:{kind}{entry['path']}{entry['name']}", entry
        path = _path(call, "Path", "/") if action.startswith("Create") else "/"
        return f"arn:aws:iam::{account}:{kind}{path}{name}", None
    if action == "CreatePolicy" and call.get("PolicyName"):
        path = _path(call, "Path", "/")
        return f"arn:aws:iam::{account}:policy{path}{call.get('PolicyName')}", None
    if call.get("PolicyArn"):
        return numbered(call.get("PolicyArn") or "*"), None
    if action == "AssumeRole":
        return numbered(call.get("RoleArn") or "*"), None
    identity = call.user.identity
    if identity is not None and action in _SELF:
        entry = None
        if acc is not None and ":assumed-role/" not in identity.arn:
            entry = acc.doc["users"].get(identity.arn.rpartition("/")[2].lower())
        return identity.arn, entry
    if action == "GetAccessKeyLastUsed" and acc is not None:
        owner = acc.user_of_key(call.get("AccessKeyId") or "")
        if owner is not None and not acc.is_root(owner):
            return acc.arn("user", owner["path"], owner["name"]), owner
    return None


def judged(call: Call, action: str, acc: Account | None) -> Judged:
    """What `action` is judged on, from the stored entity where `acc` (the caller's account)
    holds it."""
    found = _entity(call, action, acc)
    arn, entry = found if found is not None else ("*", None)
    return Judged(arn, {**resource_tags(entry), **request_tags(call, action)})


def resource_tags(entry: dict[str, Any] | None) -> dict[str, list[str]]:
    """aws:ResourceTag/<key> and iam:ResourceTag/<key>: the stored tags of the user or role
    acted on (tag keys compare without regard to case in these keys, as IAM's tags do)."""
    values: dict[str, list[str]] = {}
    for key, value in ((entry or {}).get("tags") or {}).items():
        values[f"aws:resourcetag/{key.lower()}"] = [value]
        values[f"iam:resourcetag/{key.lower()}"] = [value]
    return values


def request_tags(call: Call, action: str) -> dict[str, list[str]]:
    """aws:RequestTag/<key> and aws:TagKeys of a request that sets or removes tags (absent
    when it names none, as AWS leaves them)."""
    values: dict[str, list[str]] = {}
    if action in _TAGGING or action == "AssumeRole":
        tags = [(m.get("Key", ""), m.get("Value", "")) for m in members(call, "Tags")]
        for key, value in tags:
            values[f"aws:requesttag/{key.lower()}"] = [value]
        if tags:
            values["aws:tagkeys"] = [key for key, _ in tags]
    elif action in _UNTAGGING:
        keys = [m.get("", "") for m in members(call, "TagKeys")]
        if keys:
            values["aws:tagkeys"] = keys
    return values


def renamed(call: Call, action: str, acc: Account | None) -> str | None:
    """The ARN an UpdateUser or UpdateGroup moves its entity to (a new name, a new path, or
    both): "the requester must have appropriate permissions on both the source object and
    the target object" (API_UpdateUser.html, API_UpdateGroup.html)."""
    for name, param, kind, part in (("UpdateUser", "UserName", "user", "users"),
                                    ("UpdateGroup", "GroupName", "group", "groups")):  # fmt: skip
        if action != name:
            continue
        new_name = call.get(f"New{kind.capitalize()}Name")
        new_path = call.get("NewPath")
        if not new_name and new_path is None:
            return None
        entry = acc.doc[part].get((call.get(param) or "").lower()) if acc is not None else None
        path = _path(call, "NewPath", entry["path"] if entry else "/")
        stored = entry["name"] if entry else call.get(param)
        return f"arn:aws:iam::{call.user.account}:{kind}{path}{new_name or stored}"
    return None
