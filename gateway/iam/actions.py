"""IAM's actions (https://docs.aws.amazon.com/IAM/latest/APIReference/): users, access keys,
groups, roles, managed policies, and the inline and attached policies of each; every one a
function of a Call, over the rows of the account it reads (account.py, view.py)."""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from . import account as model
from . import policies
from .account import Account, IamError
from .call import MAX_TAGS, Call, Entries, iso_time, members, page, tags_of, under

# -- shapes --------------------------------------------------------------------------------


def _user_shape(acc: Account, user: dict[str, Any]) -> dict[str, Any]:
    return {
        "Path": user["path"],
        "UserName": user["name"],
        "UserId": user["id"],
        "Arn": acc.arn("user", user["path"], user["name"]),
        "CreateDate": iso_time(user["created"]),
        "Tags": _tag_list(user),
    }


# -- tags of users and roles (Terraform sends them on create and reads them back) -----------


def _tag_list(entry: dict[str, Any]) -> list[dict[str, str]] | None:
    tags = entry.get("tags") or {}
    return [{"Key": k, "Value": v} for k, v in tags.items()] or None


def _tag(entry: dict[str, Any], tags: dict[str, str]) -> None:
    merged = {**entry.get("tags", {}), **tags}
    if len(merged) > MAX_TAGS:
        raise IamError("LimitExceeded", f"Cannot exceed quota for TagsPerEntity: {MAX_TAGS}", 409)
    entry["tags"] = merged


def _group_shape(acc: Account, group: dict[str, Any]) -> dict[str, Any]:
    return {
        "Path": group["path"],
        "GroupName": group["name"],
        "GroupId": group["id"],
        "Arn": acc.arn("group", group["path"], group["name"]),
        "CreateDate": iso_time(group["created"]),
    }


def _role_shape(acc: Account, role: dict[str, Any]) -> dict[str, Any]:

    return {
        "Path": role["path"],
        "RoleName": role["name"],
        "RoleId": role["id"],
        "Arn": acc.arn("role", role["path"], role["name"]),
        "CreateDate": iso_time(role["created"]),
        "AssumeRolePolicyDocument": quote(role["trust"], safe=""),
        "Description": role["description"] or None,
        "MaxSessionDuration": role["max_session"],
        "Tags": _tag_list(role),
    }


# -- users ---------------------------------------------------------------------------------


def _target_user(call: Call) -> str | None:
    """The UserName a call names, or the caller itself when it names none: an IAM user, or
    (None) the account's root. A role's session is neither: it must name one."""
    name = call.get("UserName")
    identity = call.user.identity
    if name is not None or identity is None:
        return name
    if ":user/" in identity.arn:
        return identity.arn.rpartition("/")[2]
    raise IamError(
        "ValidationError", "Must specify a userName when calling with non-User credentials"
    )


async def create_user(call: Call) -> dict[str, Any]:
    tags = tags_of(call)

    def run(acc: Account) -> dict[str, Any]:
        user = acc.create_user(call.get("UserName"), call.get("Path"))
        _tag(user, tags)
        return {"User": _user_shape(acc, user)}

    return await call.change(run)


async def get_user(call: Call) -> dict[str, Any]:
    name = _target_user(call)
    if name is None:
        root = call.user
        return {
            "User": {
                "UserId": root.account,
                "Arn": f"arn:aws:iam::{root.account}:root",
                "CreateDate": iso_time(0),
                "Path": "/",
                "UserName": root.display_name,
            }
        }
    return await call.read(lambda acc: {"User": _user_shape(acc, acc.user(name))})


async def list_users(call: Call) -> dict[str, Any]:
    users = await call.read(
        lambda acc: [_user_shape(acc, u) for u in under(acc.doc["users"], call.get("PathPrefix"))]
    )
    return page(call, users, "Users", lambda u: u["UserName"].lower())


async def update_user(call: Call) -> None:
    def run(acc: Account) -> None:
        user = acc.user(call.get("UserName"))
        if call.get("NewUserName") is not None:
            acc.rename("users", "user", user, call.get("NewUserName"), "newUserName")
        if call.get("NewPath") is not None:
            user["path"] = model.check_path(call.get("NewPath"), "newPath")

    await call.change(run)


async def delete_user(call: Call) -> None:
    await call.change(lambda acc: acc.delete_user(call.get("UserName")))


# -- access keys ---------------------------------------------------------------------------


def _key_owner(call: Call, acc: Account) -> dict[str, Any]:
    name = _target_user(call)
    if name is None:  # the root's own keys
        root = acc.root()
        root["name"] = call.user.display_name
        return root
    return acc.user(name)


async def create_access_key(call: Call) -> dict[str, Any]:
    access_key = "AKIA" + "".join(
        secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16)
    )
    secret = model.new_secret()
    sealed = call.store.keys.seal_iam_secret(secret.encode())

    def run(acc: Account) -> dict[str, Any]:
        user = _key_owner(call, acc)
        if len(user["keys"]) >= model.MAX_KEYS_PER_USER:
            raise IamError(
                "LimitExceeded",
                f"Cannot exceed quota for AccessKeysPerUser: {model.MAX_KEYS_PER_USER}",
                409,
            )
        now = time.time()
        user["keys"][access_key] = {"secret": sealed, "status": "Active", "created": now}
        return {
            "AccessKey": {
                "UserName": user["name"],
                "AccessKeyId": access_key,
                "Status": "Active",
                "SecretAccessKey": secret,
                "CreateDate": iso_time(now),
            }
        }

    return await call.change(run)


async def list_access_keys(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> list[dict[str, Any]]:
        user = _key_owner(call, acc)
        return [
            {"UserName": user["name"], "AccessKeyId": k, "Status": v["status"],
             "CreateDate": iso_time(v["created"])}
            for k, v in user["keys"].items()
        ]  # fmt: skip

    keys = await call.read(run)
    return page(call, keys, "AccessKeyMetadata", lambda k: k["AccessKeyId"])


def _key_of(call: Call, acc: Account) -> tuple[dict[str, Any], str]:
    user = _key_owner(call, acc)
    access_key = call.get("AccessKeyId") or ""
    if access_key not in user["keys"]:
        raise IamError("NoSuchEntity", f"The Access Key with id {access_key} cannot be found.", 404)
    return user, access_key


async def update_access_key(call: Call) -> None:
    status = call.get("Status")
    if status not in ("Active", "Inactive"):
        raise IamError("ValidationError", "Status must be Active or Inactive.")

    def run(acc: Account) -> None:
        user, access_key = _key_of(call, acc)
        user["keys"][access_key]["status"] = status

    await call.change(run)


async def delete_access_key(call: Call) -> None:
    def run(acc: Account) -> None:
        user, access_key = _key_of(call, acc)
        del user["keys"][access_key]

    await call.change(run)


async def get_account_summary(call: Call) -> dict[str, Any]:
    """The account's counts and IAM's quotas (reference_iam-quotas.html)."""

    def run(acc: Account) -> dict[str, int]:
        acc.view.counts()
        return {
            **{part: len(acc.doc[part]) for part in ("users", "groups", "roles", "policies")},
            "root keys": len(acc.root()["keys"]),
            "keys": acc.view.access_keys(),
        }

    found = await call.read(run)
    counts = {
        "Users": found["users"],
        "UsersQuota": 5000,
        "Groups": found["groups"],
        "GroupsQuota": 300,
        "GroupsPerUserQuota": model.MAX_GROUPS_PER_USER,
        "Roles": found["roles"],
        "RolesQuota": 1000,
        "Policies": found["policies"],
        "PoliciesQuota": 1500,
        "AttachedPoliciesPerUserQuota": model.MAX_ATTACHED,
        "AttachedPoliciesPerGroupQuota": model.MAX_ATTACHED,
        "AttachedPoliciesPerRoleQuota": model.MAX_ATTACHED,
        "AccessKeysPerUserQuota": model.MAX_KEYS_PER_USER,
        "AccountAccessKeysPresent": int(bool(found["root keys"])),
        "UserPolicySizeQuota": model.INLINE_BYTES["user"],
        "GroupPolicySizeQuota": model.INLINE_BYTES["group"],
        "PolicySizeQuota": model.MANAGED_BYTES,
        "PolicyVersionsInUse": found["policies"],
        "PolicyVersionsInUseQuota": 10000,
        "VersionsPerPolicyQuota": model.MAX_POLICY_VERSIONS,
        "AccountMFAEnabled": 0,
        "MFADevices": 0,
        "MFADevicesInUse": 0,
        "ServerCertificates": 0,
        "ServerCertificatesQuota": 20,
        "AccessKeysPresent": found["keys"],
    }
    return {"SummaryMap": Entries({"key": k, "value": v} for k, v in counts.items())}


async def list_open_id_connect_providers(call: Call) -> dict[str, Any]:
    """No OpenID Connect provider can be made here (AssumeRoleWithWebIdentity is not
    served): the list is empty."""
    return {"OpenIDConnectProviderList": []}


async def get_access_key_last_used(call: Call) -> dict[str, Any]:
    access_key = call.get("AccessKeyId") or ""
    user = await call.read(lambda acc: acc.user_of_key(access_key))
    if user is None:
        raise IamError("AccessDenied", f"The Access Key with id {access_key} cannot be found.", 403)
    return {
        "UserName": user["name"],
        "AccessKeyLastUsed": {"Region": "N/A", "ServiceName": "N/A"},
    }


# -- groups, roles, managed policies -------------------------------------------------------


async def create_group(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> dict[str, Any]:
        group = acc.create_group(call.get("GroupName"), call.get("Path"))
        return {"Group": _group_shape(acc, group)}

    return await call.change(run)


async def get_group(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        group = acc.group(call.get("GroupName"))
        names = acc.view.members(group["name"].lower())
        acc.doc["users"].require(names)
        return _group_shape(acc, group), [_user_shape(acc, acc.doc["users"][n]) for n in names]

    group, members = await call.read(run)
    users = page(call, members, "Users", lambda u: u["UserName"])
    return {"Group": group, **users}


async def list_groups(call: Call) -> dict[str, Any]:
    groups = await call.read(
        lambda acc: [_group_shape(acc, g) for g in under(acc.doc["groups"], call.get("PathPrefix"))]
    )
    return page(call, groups, "Groups", lambda g: g["GroupName"].lower())


async def update_group(call: Call) -> None:
    def run(acc: Account) -> None:
        group = acc.group(call.get("GroupName"))
        if call.get("NewGroupName") is not None:
            members = acc.view.members(group["name"].lower())
            acc.doc["users"].require(members)
            old, new = acc.rename(
                "groups", "group", group, call.get("NewGroupName"), "newGroupName"
            )
            for name in members:
                user = acc.doc["users"][name]
                user["groups"] = [new if g == old else g for g in user["groups"]]
        if call.get("NewPath") is not None:
            group["path"] = model.check_path(call.get("NewPath"), "newPath")

    await call.change(run)


async def delete_group(call: Call) -> None:
    await call.change(lambda acc: acc.delete_group(call.get("GroupName")))


async def add_user_to_group(call: Call) -> None:
    def run(acc: Account) -> None:
        group = acc.group(call.get("GroupName"))
        user = acc.user(call.get("UserName"))
        if group["name"].lower() not in user["groups"]:
            if len(user["groups"]) >= model.MAX_GROUPS_PER_USER:
                raise IamError("LimitExceeded", "Cannot exceed quota for GroupsPerUser: 10", 409)
            user["groups"].append(group["name"].lower())

    await call.change(run)


async def remove_user_from_group(call: Call) -> None:
    def run(acc: Account) -> None:
        group = acc.group(call.get("GroupName"))
        user = acc.user(call.get("UserName"))
        if group["name"].lower() not in user["groups"]:
            raise IamError(
                "NoSuchEntity", f"User {user['name']} is not in group {group['name']}.", 404
            )
        user["groups"].remove(group["name"].lower())

    await call.change(run)


async def list_groups_for_user(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> list[dict[str, Any]]:
        user = acc.user(call.get("UserName"))
        acc.doc["groups"].require(user["groups"])
        return [_group_shape(acc, acc.doc["groups"][g]) for g in user["groups"]]

    groups = await call.read(run)
    return page(call, groups, "Groups", lambda g: g["GroupName"].lower())


async def create_role(call: Call) -> dict[str, Any]:
    tags = tags_of(call)

    def run(acc: Account) -> dict[str, Any]:
        role = acc.create_role(
            call.get("RoleName"),
            call.get("Path"),
            call.get("AssumeRolePolicyDocument"),
            call.get("MaxSessionDuration"),
            call.get("Description"),
        )
        _tag(role, tags)
        return {"Role": _role_shape(acc, role)}

    return await call.change(run)


async def get_role(call: Call) -> dict[str, Any]:
    return await call.read(lambda acc: {"Role": _role_shape(acc, acc.role(call.get("RoleName")))})


async def list_roles(call: Call) -> dict[str, Any]:
    roles = await call.read(
        lambda acc: [_role_shape(acc, r) for r in under(acc.doc["roles"], call.get("PathPrefix"))]
    )
    return page(call, roles, "Roles", lambda r: r["RoleName"].lower())


async def update_role(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> None:
        role = acc.role(call.get("RoleName"))
        if call.get("Description") is not None:
            role["description"] = model.check_description(call.get("Description"))
        if call.get("MaxSessionDuration") is not None:
            role["max_session"] = model.session_limit(call.get("MaxSessionDuration"))

    await call.change(run)
    return {}


async def update_assume_role_policy(call: Call) -> None:
    def run(acc: Account) -> None:
        role = acc.role(call.get("RoleName"))
        role["trust"] = model.check_trust(call.get("PolicyDocument"))

    await call.change(run)


async def delete_role(call: Call) -> None:
    await call.change(lambda acc: acc.delete_role(call.get("RoleName")))


def _tag_actions() -> dict[str, Callable[[Call], Awaitable[Any]]]:
    """TagUser, UntagUser, ListUserTags and the same for roles."""
    out: dict[str, Callable[[Call], Awaitable[Any]]] = {}
    for title in ("User", "Role"):

        def bind(title: str = title) -> None:
            def holder(acc: Account, call: Call) -> dict[str, Any]:
                name = call.get(f"{title}Name")
                return acc.user(name) if title == "User" else acc.role(name)

            async def tag(call: Call) -> None:
                tags = tags_of(call)
                await call.change(lambda acc: _tag(holder(acc, call), tags))

            async def untag(call: Call) -> None:
                keys = [m.get("", "") for m in members(call, "TagKeys")]

                def run(acc: Account) -> None:
                    entry = holder(acc, call)
                    entry["tags"] = {
                        k: v for k, v in entry.get("tags", {}).items() if k not in keys
                    }

                await call.change(run)

            async def list_tags(call: Call) -> dict[str, Any]:
                tags = await call.read(lambda acc: _tag_list(holder(acc, call)) or [])
                return page(call, tags, "Tags", lambda t: t["Key"])

            out[f"Tag{title}"], out[f"Untag{title}"], out[f"List{title}Tags"] = (
                tag, untag, list_tags,
            )  # fmt: skip

        bind()
    return out


async def list_instance_profiles_for_role(call: Call) -> dict[str, Any]:
    """No instance profiles are made here (there are no instances): an empty list, as
    Terraform asks before it deletes a role."""
    await call.read(lambda acc: acc.role(call.get("RoleName")))
    return {"InstanceProfiles": [], "IsTruncated": False}


# -- the handler ---------------------------------------------------------------------------

IAM_ACTIONS: dict[str, Callable[[Call], Awaitable[Any]]] = {
    "CreateUser": create_user,
    "GetUser": get_user,
    "ListUsers": list_users,
    "UpdateUser": update_user,
    "DeleteUser": delete_user,
    "CreateAccessKey": create_access_key,
    "ListAccessKeys": list_access_keys,
    "UpdateAccessKey": update_access_key,
    "DeleteAccessKey": delete_access_key,
    "GetAccessKeyLastUsed": get_access_key_last_used,
    "GetAccountSummary": get_account_summary,
    "ListOpenIDConnectProviders": list_open_id_connect_providers,
    "CreateGroup": create_group,
    "GetGroup": get_group,
    "ListGroups": list_groups,
    "UpdateGroup": update_group,
    "DeleteGroup": delete_group,
    "AddUserToGroup": add_user_to_group,
    "RemoveUserFromGroup": remove_user_from_group,
    "ListGroupsForUser": list_groups_for_user,
    "CreateRole": create_role,
    "GetRole": get_role,
    "ListRoles": list_roles,
    "UpdateRole": update_role,
    "UpdateAssumeRolePolicy": update_assume_role_policy,
    "DeleteRole": delete_role,
    "ListInstanceProfilesForRole": list_instance_profiles_for_role,
    **_tag_actions(),
    **policies.ACTIONS,
}
