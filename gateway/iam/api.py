"""IAM's and STS's query APIs on the gateway's endpoint: form-encoded POSTs signed for the
service `iam` or `sts` (as aws-cli and the SDKs send them with --endpoint-url), answered in
their XML (https://docs.aws.amazon.com/IAM/latest/APIReference/ and
https://docs.aws.amazon.com/STS/latest/APIReference/).

Each action is authorised by the one authorisation function (`authorize.decide_account`: an
account's root may act on its own account, an IAM identity as its policies allow) and runs on
the caller's account's document (account.py) in one Store transaction.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import string
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from aiohttp import web

from ..s3 import policy
from ..s3.auth import Authenticator, SignedRequest, claimed_key, is_nobody
from ..s3.authorize import decide_account
from ..s3.errors import S3Error
from ..s3.middleware import OPERATION, REQUEST_ID, REQUESTER, USER
from ..s3.xmltext import escape
from ..store import Store, crypto
from ..store.identities import IdentityChange
from ..users import User
from . import account as model
from .account import Account, IamError
from .principals import Principals, role_identity, seal_token

T = TypeVar("T")
STS_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"
SECRET_LABEL = "iam"
# GetSessionToken's and AssumeRole's DurationSeconds (the API references' bounds).
SESSION_DEFAULT = {"GetSessionToken": 43200, "AssumeRole": 3600}
SESSION_MIN = 900
SESSION_MAX = 129600
MAX_ITEMS = 100


def is_service_request(request: web.Request, host_bucket: str | None) -> bool:
    """A request for IAM or STS, not S3: a form POSTed to the endpoint's root (S3 has no
    operation there)."""
    return (
        request.method == "POST"
        and host_bucket is None
        and request.raw_path.partition("?")[0] == "/"
        and request.content_type == "application/x-www-form-urlencoded"
    )


def _service_of(request: web.Request) -> str:
    authorization = request.headers.get("authorization", "")
    _, found, rest = authorization.partition("Credential=")
    scope = rest.split(",")[0].split("/") if found else []
    return "sts" if len(scope) >= 4 and scope[3] == "sts" else "iam"


@dataclass
class Call:
    """One IAM or STS request: who made it, for which account, with what parameters."""

    user: User
    params: Mapping[str, str]
    store: Store
    principals: Principals
    master: bytes
    added: list[str] = field(default_factory=list)  # access keys made
    removed: list[str] = field(default_factory=list)  # access keys deleted
    stale: list[str] = field(default_factory=list)  # keys whose powers changed

    @property
    def account(self) -> str:
        return self.user.canonical_id

    def get(self, name: str) -> str | None:
        return self.params.get(name)

    async def read(self) -> Account:
        return Account.load(self.account, await self.store.get_identities(self.account))

    async def change(self, fn: Callable[[Account], T]) -> T:
        def run(text: str | None) -> IdentityChange[T]:
            self.added.clear()
            self.removed.clear()
            self.stale.clear()
            acc = Account.load(self.account, text)
            result = fn(acc)
            return IdentityChange(result, acc.dump(), list(self.added), list(self.removed))

        result = await self.store.change_identities(self.account, run)
        self.principals.forget(self.removed + self.stale)
        return result


def _time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- XML -----------------------------------------------------------------------------------


def _xml(value: Any) -> str:
    if isinstance(value, dict):
        return "".join(f"<{k}>{_xml(v)}</{k}>" for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return "".join(f"<member>{_xml(v)}</member>" for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value))


def _answer(action: str, namespace: str, result: dict[str, Any] | None, request_id: str) -> str:
    inner = "" if result is None else f"<{action}Result>{_xml(result)}</{action}Result>"
    return (
        f'<{action}Response xmlns="{namespace}">{inner}'
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    )


def _error(exc: IamError, namespace: str, request_id: str) -> web.Response:
    kind = "Receiver" if exc.status >= 500 else "Sender"
    body = (
        f'<ErrorResponse xmlns="{namespace}"><Error><Type>{kind}</Type>'
        f"<Code>{escape(exc.code)}</Code><Message>{escape(exc.message)}</Message></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return web.Response(status=exc.status, text=body, content_type="text/xml")


# S3's authentication errors as IAM and STS name them.
_AUTH_ERRORS = {
    "InvalidAccessKeyId": ("InvalidClientTokenId", 403),
    "InvalidToken": ("InvalidClientTokenId", 403),
    "ExpiredToken": ("ExpiredToken", 400),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403),
    "RequestTimeTooSkewed": ("RequestExpired", 400),
    "AccessDenied": ("AccessDenied", 403),
}


def _from_s3(exc: S3Error) -> IamError:
    code, status = _AUTH_ERRORS.get(exc.code, ("InvalidRequest", 400))
    if exc.code == "InvalidAccessKeyId":
        message = "The security token included in the request is invalid."
    else:
        message = exc.message or exc.code
    return IamError(code, message, status)


# -- shapes --------------------------------------------------------------------------------


def _user_shape(acc: Account, user: dict[str, Any]) -> dict[str, Any]:
    return {
        "Path": user["path"],
        "UserName": user["name"],
        "UserId": user["id"],
        "Arn": acc.arn("user", user["path"], user["name"]),
        "CreateDate": _time(user["created"]),
    }


def _group_shape(acc: Account, group: dict[str, Any]) -> dict[str, Any]:
    return {
        "Path": group["path"],
        "GroupName": group["name"],
        "GroupId": group["id"],
        "Arn": acc.arn("group", group["path"], group["name"]),
        "CreateDate": _time(group["created"]),
    }


def _role_shape(acc: Account, role: dict[str, Any]) -> dict[str, Any]:
    from urllib.parse import quote

    return {
        "Path": role["path"],
        "RoleName": role["name"],
        "RoleId": role["id"],
        "Arn": acc.arn("role", role["path"], role["name"]),
        "CreateDate": _time(role["created"]),
        "AssumeRolePolicyDocument": quote(role["trust"], safe=""),
        "Description": role["description"] or None,
        "MaxSessionDuration": role["max_session"],
    }


def _policy_shape(acc: Account, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "PolicyName": entry["name"],
        "PolicyId": entry["id"],
        "Arn": acc.arn("policy", entry["path"], entry["name"]),
        "Path": entry["path"],
        "DefaultVersionId": entry["default"],
        "AttachmentCount": acc.attachments(acc.arn("policy", entry["path"], entry["name"])),
        "IsAttachable": True,
        "Description": entry["description"] or None,
        "CreateDate": _time(entry["created"]),
        "UpdateDate": _time(entry["updated"]),
    }


def _page(call: Call, items: list[Any], name: str, key: Callable[[Any], str]) -> dict[str, Any]:
    """A list answer with IAM's Marker paging (the marker: the next item's sort key)."""
    items = sorted(items, key=key)
    marker = call.get("Marker")
    if marker:
        items = [i for i in items if key(i) >= marker]
    limit = call.get("MaxItems")
    size = int(limit) if limit and limit.isdigit() and int(limit) > 0 else MAX_ITEMS
    shown, rest = items[:size], items[size:]
    out: dict[str, Any] = {name: shown, "IsTruncated": bool(rest)}
    if rest:
        out["Marker"] = key(rest[0])
    return out


def _under(entries: dict[str, dict[str, Any]], prefix: str | None) -> list[dict[str, Any]]:
    return [e for e in entries.values() if e["path"].startswith(prefix or "/")]


# -- users ---------------------------------------------------------------------------------


def _target_user(call: Call) -> str | None:
    """The UserName a call names, or the caller itself (an IAM user) when it names none."""
    name = call.get("UserName")
    if name is None and call.user.identity is not None and ":user/" in call.user.identity.arn:
        return call.user.identity.arn.rpartition("/")[2]
    return name


async def create_user(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> dict[str, Any]:
        return {"User": _user_shape(acc, acc.create_user(call.get("UserName"), call.get("Path")))}

    return await call.change(run)


async def get_user(call: Call) -> dict[str, Any]:
    name = _target_user(call)
    acc = await call.read()
    if name is None:
        root = call.user
        return {
            "User": {
                "UserId": root.canonical_id,
                "Arn": acc.root_arn(),
                "CreateDate": _time(0),
                "Path": "/",
                "UserName": root.display_name,
            }
        }
    return {"User": _user_shape(acc, acc.user(name))}


async def list_users(call: Call) -> dict[str, Any]:
    acc = await call.read()
    users = [_user_shape(acc, u) for u in _under(acc.doc["users"], call.get("PathPrefix"))]
    return _page(call, users, "Users", lambda u: u["UserName"].lower())


async def update_user(call: Call) -> None:
    def run(acc: Account) -> None:
        user = acc.user(call.get("UserName"))
        new_name = call.get("NewUserName")
        if new_name is not None:
            model.check_name(new_name, "newUserName", 64)
            if new_name.lower() != user["name"].lower() and new_name.lower() in acc.doc["users"]:
                raise IamError(
                    "EntityAlreadyExists", f"User with name {new_name} already exists.", 409
                )
            del acc.doc["users"][user["name"].lower()]
            user["name"] = new_name
            acc.doc["users"][new_name.lower()] = user
        if call.get("NewPath") is not None:
            user["path"] = model.check_path(call.get("NewPath"), "newPath")
        call.stale.extend(user["keys"])

    await call.change(run)


async def delete_user(call: Call) -> None:
    await call.change(lambda acc: acc.delete_user(call.get("UserName")))


# -- access keys ---------------------------------------------------------------------------


def _key_owner(call: Call, acc: Account) -> dict[str, Any]:
    name = _target_user(call)
    if name is None:
        raise IamError(
            "ValidationError", "An account's root has its keys in the users file, not in IAM."
        )
    return acc.user(name)


async def create_access_key(call: Call) -> dict[str, Any]:
    access_key = "AKIA" + "".join(
        secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16)
    )
    secret = model.new_secret()
    sealed = crypto.seal_secret(call.master, SECRET_LABEL, secret.encode())

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
        call.added.append(access_key)
        return {
            "AccessKey": {
                "UserName": user["name"],
                "AccessKeyId": access_key,
                "Status": "Active",
                "SecretAccessKey": secret,
                "CreateDate": _time(now),
            }
        }

    return await call.change(run)


async def list_access_keys(call: Call) -> dict[str, Any]:
    acc = await call.read()
    user = _key_owner(call, acc)
    keys = [
        {"UserName": user["name"], "AccessKeyId": k, "Status": v["status"],
         "CreateDate": _time(v["created"])}
        for k, v in user["keys"].items()
    ]  # fmt: skip
    return _page(call, keys, "AccessKeyMetadata", lambda k: k["AccessKeyId"])


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
        call.stale.append(access_key)

    await call.change(run)


async def delete_access_key(call: Call) -> None:
    def run(acc: Account) -> None:
        user, access_key = _key_of(call, acc)
        del user["keys"][access_key]
        call.removed.append(access_key)

    await call.change(run)


async def get_access_key_last_used(call: Call) -> dict[str, Any]:
    access_key = call.get("AccessKeyId") or ""
    acc = await call.read()
    user = acc.user_of_key(access_key)
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
    acc = await call.read()
    group = acc.group(call.get("GroupName"))
    members = [u for u in acc.doc["users"].values() if group["name"].lower() in u["groups"]]
    page = _page(call, [_user_shape(acc, u) for u in members], "Users", lambda u: u["UserName"])
    return {"Group": _group_shape(acc, group), **page}


async def list_groups(call: Call) -> dict[str, Any]:
    acc = await call.read()
    groups = [_group_shape(acc, g) for g in _under(acc.doc["groups"], call.get("PathPrefix"))]
    return _page(call, groups, "Groups", lambda g: g["GroupName"].lower())


async def update_group(call: Call) -> None:
    def run(acc: Account) -> None:
        group = acc.group(call.get("GroupName"))
        new_name = call.get("NewGroupName")
        if new_name is not None:
            model.check_name(new_name, "newGroupName", 128)
            old, new = group["name"].lower(), new_name.lower()
            if new != old and new in acc.doc["groups"]:
                raise IamError(
                    "EntityAlreadyExists", f"Group with name {new_name} already exists.", 409
                )
            del acc.doc["groups"][old]
            group["name"] = new_name
            acc.doc["groups"][new] = group
            for user in acc.doc["users"].values():
                user["groups"] = [new if g == old else g for g in user["groups"]]
                call.stale.extend(user["keys"])
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
        call.stale.extend(user["keys"])

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
        call.stale.extend(user["keys"])

    await call.change(run)


async def list_groups_for_user(call: Call) -> dict[str, Any]:
    acc = await call.read()
    user = acc.user(call.get("UserName"))
    groups = [_group_shape(acc, acc.doc["groups"][g]) for g in user["groups"]]
    return _page(call, groups, "Groups", lambda g: g["GroupName"].lower())


async def create_role(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> dict[str, Any]:
        role = acc.create_role(
            call.get("RoleName"),
            call.get("Path"),
            call.get("AssumeRolePolicyDocument"),
            call.get("MaxSessionDuration"),
            call.get("Description"),
        )
        return {"Role": _role_shape(acc, role)}

    return await call.change(run)


async def get_role(call: Call) -> dict[str, Any]:
    acc = await call.read()
    return {"Role": _role_shape(acc, acc.role(call.get("RoleName")))}


async def list_roles(call: Call) -> dict[str, Any]:
    acc = await call.read()
    roles = [_role_shape(acc, r) for r in _under(acc.doc["roles"], call.get("PathPrefix"))]
    return _page(call, roles, "Roles", lambda r: r["RoleName"].lower())


async def update_role(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> None:
        role = acc.role(call.get("RoleName"))
        if call.get("Description") is not None:
            role["description"] = call.get("Description")
        if call.get("MaxSessionDuration") is not None:
            role["max_session"] = model._session_limit(call.get("MaxSessionDuration"))

    await call.change(run)
    return {}


async def update_assume_role_policy(call: Call) -> None:
    def run(acc: Account) -> None:
        role = acc.role(call.get("RoleName"))
        role["trust"] = model.check_policy(
            call.get("PolicyDocument"), "policyDocument", policy.Kind.TRUST
        )

    await call.change(run)


async def delete_role(call: Call) -> None:
    await call.change(lambda acc: acc.delete_role(call.get("RoleName")))


async def create_policy(call: Call) -> dict[str, Any]:
    def run(acc: Account) -> dict[str, Any]:
        entry = acc.create_policy(
            call.get("PolicyName"),
            call.get("Path"),
            call.get("PolicyDocument"),
            call.get("Description"),
        )
        return {"Policy": _policy_shape(acc, entry)}

    return await call.change(run)


async def get_policy(call: Call) -> dict[str, Any]:
    acc = await call.read()
    arn = call.get("PolicyArn")
    _, entry = acc.managed(arn)
    if entry is None:
        name = (arn or "").rpartition("/")[2]
        return {"Policy": {"PolicyName": name, "Arn": arn, "Path": "/",
                           "DefaultVersionId": "v1", "IsAttachable": True,
                           "AttachmentCount": acc.attachments(arn or "")}}  # fmt: skip
    return {"Policy": _policy_shape(acc, entry)}


async def get_policy_version(call: Call) -> dict[str, Any]:
    from urllib.parse import quote

    acc = await call.read()
    text, entry = acc.managed(call.get("PolicyArn"))
    version = call.get("VersionId") or "v1"
    if entry is not None:
        if version not in entry["versions"]:
            raise IamError("NoSuchEntity", f"Policy version {version} does not exist.", 404)
        text = entry["versions"][version]
    is_default = entry is None or entry["default"] == version
    return {"PolicyVersion": {"Document": quote(text, safe=""), "VersionId": version,
                              "IsDefaultVersion": is_default}}  # fmt: skip


async def list_policies(call: Call) -> dict[str, Any]:
    acc = await call.read()
    scope = call.get("Scope") or "All"
    entries = [] if scope == "AWS" else _under(acc.doc["policies"], call.get("PathPrefix"))
    shapes = [_policy_shape(acc, e) for e in entries]
    if scope in ("All", "AWS"):
        for arn in model.AWS_MANAGED:
            shapes.append({"PolicyName": arn.rpartition("/")[2], "Arn": arn, "Path": "/",
                           "DefaultVersionId": "v1", "IsAttachable": True,
                           "AttachmentCount": acc.attachments(arn)})  # fmt: skip
    if call.get("OnlyAttached") == "true":
        shapes = [s for s in shapes if s["AttachmentCount"]]
    return _page(call, shapes, "Policies", lambda p: p["PolicyName"].lower())


async def delete_policy(call: Call) -> None:
    await call.change(lambda acc: acc.delete_policy(call.get("PolicyArn")))


# -- inline and attached policies of users, groups and roles (one set of functions) ---------

_KINDS = {"User": "user", "Group": "group", "Role": "role"}


def _holder(acc: Account, kind: str, name: str | None) -> dict[str, Any]:
    return {"user": acc.user, "group": acc.group, "role": acc.role}[kind](name)


def _inline_actions() -> dict[str, Callable[[Call], Awaitable[Any]]]:
    out: dict[str, Callable[[Call], Awaitable[Any]]] = {}
    for title, kind in _KINDS.items():
        name_param = f"{title}Name"

        def bind(kind: str = kind, title: str = title, name_param: str = name_param) -> None:
            def forget_keys(acc: Account, entry: dict[str, Any], call: Call) -> None:
                if kind == "user":
                    call.stale.extend(entry["keys"])
                elif kind == "group":
                    for user in acc.doc["users"].values():
                        if entry["name"].lower() in user["groups"]:
                            call.stale.extend(user["keys"])

            async def put(call: Call) -> None:
                def run(acc: Account) -> None:
                    entry = _holder(acc, kind, call.get(name_param))
                    acc.put_inline(kind, entry, call.get("PolicyName"), call.get("PolicyDocument"))
                    forget_keys(acc, entry, call)

                await call.change(run)
                call.principals.forget()

            async def get(call: Call) -> dict[str, Any]:
                from urllib.parse import quote

                acc = await call.read()
                entry = _holder(acc, kind, call.get(name_param))
                text = acc.inline(kind, entry, call.get("PolicyName"))
                return {name_param: entry["name"], "PolicyName": call.get("PolicyName"),
                        "PolicyDocument": quote(text, safe="")}  # fmt: skip

            async def list_(call: Call) -> dict[str, Any]:
                acc = await call.read()
                entry = _holder(acc, kind, call.get(name_param))
                return _page(call, list(entry["policies"]), "PolicyNames", lambda n: n)

            async def delete(call: Call) -> None:
                def run(acc: Account) -> None:
                    entry = _holder(acc, kind, call.get(name_param))
                    acc.delete_inline(kind, entry, call.get("PolicyName"))
                    forget_keys(acc, entry, call)

                await call.change(run)
                call.principals.forget()

            async def attach(call: Call) -> None:
                def run(acc: Account) -> None:
                    entry = _holder(acc, kind, call.get(name_param))
                    acc.attach(entry, call.get("PolicyArn"))

                await call.change(run)
                call.principals.forget()

            async def detach(call: Call) -> None:
                def run(acc: Account) -> None:
                    entry = _holder(acc, kind, call.get(name_param))
                    acc.detach(entry, call.get("PolicyArn"))

                await call.change(run)
                call.principals.forget()

            async def attached(call: Call) -> dict[str, Any]:
                acc = await call.read()
                entry = _holder(acc, kind, call.get(name_param))
                shapes = [{"PolicyName": a.rpartition("/")[2], "PolicyArn": a}
                          for a in entry["attached"]]  # fmt: skip
                return _page(call, shapes, "AttachedPolicies", lambda p: p["PolicyName"])

            out[f"Put{title}Policy"] = put
            out[f"Get{title}Policy"] = get
            out[f"List{title}Policies"] = list_
            out[f"Delete{title}Policy"] = delete
            out[f"Attach{title}Policy"] = attach
            out[f"Detach{title}Policy"] = detach
            out[f"ListAttached{title}Policies"] = attached

        bind()
    return out


# -- STS -----------------------------------------------------------------------------------


def _duration(call: Call, action: str, limit: int) -> int:
    text = call.get("DurationSeconds")
    if text is None:
        return min(SESSION_DEFAULT[action], limit)
    if not text.isdigit() or not SESSION_MIN <= int(text) <= limit:
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
        "Expiration": _time(expires),
    }


async def get_caller_identity(call: Call) -> dict[str, Any]:
    identity = call.user.identity
    if identity is None:
        arn = f"arn:aws:iam::{call.account}:root"
        user_id = call.account
    else:
        arn, user_id = identity.arn, identity.user_id
    return {"UserId": user_id, "Account": call.account, "Arn": arn}


async def get_session_token(call: Call) -> dict[str, Any]:
    user = call.user
    if user.session_token:
        raise IamError("AccessDenied", "Cannot call GetSessionToken with session credentials", 403)
    kind = "root" if user.identity is None else "user"
    seconds = _duration(call, "GetSessionToken", SESSION_MAX if kind == "user" else 3600)
    return {"Credentials": _credentials(call, {"kind": kind, "parent": user.access_key}, seconds)}


_SESSION_NAME = model.re.compile(r"[\w+=,.@-]{2,64}")


async def assume_role(call: Call) -> dict[str, Any]:
    arn = call.get("RoleArn") or ""
    session = call.get("RoleSessionName") or ""
    if not _SESSION_NAME.fullmatch(session):
        raise IamError(
            "ValidationError",
            f"1 validation error detected: Value '{session}' at 'roleSessionName' failed to "
            r"satisfy constraint: Member must satisfy regular expression pattern: [\w+=,.@-]*",
        )
    prefix, _, rest = arn.partition(":role")
    owner = prefix.removeprefix("arn:aws:iam::")
    root = call.principals.by_account.get(owner)
    if not prefix.startswith("arn:aws:iam::") or root is None or not rest.startswith("/"):
        raise IamError("AccessDenied", f"Not authorized to perform sts:AssumeRole on {arn}", 403)
    acc = Account.load(owner, await call.store.get_identities(owner))
    role = acc.doc["roles"].get(rest.rpartition("/")[2].lower())
    if role is None or acc.arn("role", role["path"], role["name"]) != arn:
        raise IamError("AccessDenied", f"Not authorized to perform sts:AssumeRole on {arn}", 403)
    session_policy = call.get("Policy")
    if session_policy is not None:
        model.check_policy(session_policy, "policy", policy.Kind.IDENTITY)
    if not _trusts(role, arn, call.user):
        raise IamError(
            "AccessDenied",
            f"User: {_arn_of(call.user)} is not authorized to perform: sts:AssumeRole on "
            f"resource: {arn}",
            403,
        )
    seconds = _duration(call, "AssumeRole", role["max_session"])
    claims = {"kind": "role", "role": role["name"], "role_id": role["id"], "session": session}
    if session_policy is not None:
        claims["policy"] = session_policy
    # The answer's account is the role's: the credentials act for it.
    call.user = User("", "", root.display_name, root.canonical_id)
    identity = role_identity(acc, role, session, session_policy)
    return {
        "Credentials": _credentials(call, claims, seconds),
        "AssumedRoleUser": {"AssumedRoleId": identity.user_id, "Arn": identity.arn},
        "PackedPolicySize": 0 if session_policy is None else 6,
    }


def _arn_of(user: User) -> str:
    return user.identity.arn if user.identity else f"arn:aws:iam::{user.canonical_id}:root"


def _trusts(role: dict[str, Any], role_arn: str, user: User) -> bool:
    """The role's trust policy allows `user` sts:AssumeRole: naming it (its ARN), or naming
    its account, whose IAM identities then also need an Allow of their own."""
    trust = policy.cached(role["trust"], "", policy.Kind.TRUST)
    arns = user.identity.arns if user.identity else frozenset()
    root = user.identity is None

    def verdict(delegated: bool) -> policy.Effect | None:
        caller = policy.Caller(user.canonical_id, arns, root=root, delegated=delegated)
        return trust.evaluate(policy.PolicyRequest(caller, "sts:AssumeRole", "*", _no_keys))

    if verdict(True) is not policy.Effect.ALLOW:
        return False
    if root or verdict(False) is policy.Effect.ALLOW:
        return True
    return decide_account(user, "sts:AssumeRole", role_arn)


def _no_keys(_key: str) -> list[str] | None:
    return None


# -- the handler ---------------------------------------------------------------------------

Action = Callable[[Call], Awaitable[Any]]
IAM_ACTIONS: dict[str, Action] = {
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
    "CreatePolicy": create_policy,
    "GetPolicy": get_policy,
    "GetPolicyVersion": get_policy_version,
    "ListPolicies": list_policies,
    "DeletePolicy": delete_policy,
    **_inline_actions(),
}
STS_ACTIONS: dict[str, Action] = {
    "GetCallerIdentity": get_caller_identity,
    "GetSessionToken": get_session_token,
    "AssumeRole": assume_role,
}
# Every identity may ask who it is and get a session token ("No permissions are required",
# the STS API reference); AssumeRole is judged with the role's trust policy (_trusts).
_ALWAYS = frozenset({"GetCallerIdentity", "GetSessionToken", "AssumeRole"})


def _resource(call: Call, action: str) -> str:
    """The ARN an IAM action is judged on (without paths: what policies name)."""
    account = call.account
    for param, kind in (
        ("UserName", "user"), ("GroupName", "group"), ("RoleName", "role"),
    ):  # fmt: skip
        value = call.get(param)
        if value:
            return f"arn:aws:iam::{account}:{kind}/{value}"
    if call.get("PolicyArn"):
        return call.get("PolicyArn") or "*"
    if action == "AssumeRole":
        return call.get("RoleArn") or "*"
    if call.user.identity is not None and action in ("GetUser", "CreateAccessKey",
                                                     "ListAccessKeys", "UpdateAccessKey",
                                                     "DeleteAccessKey"):  # fmt: skip
        return call.user.identity.arn
    return "*"


class Services:
    """The handler of IAM and STS requests (the S3 dispatcher hands them over)."""

    def __init__(self, store: Store, principals: Principals) -> None:
        self.store = store
        self.principals = principals

    async def __call__(
        self, request: web.Request, authenticator: Authenticator
    ) -> web.StreamResponse:
        service = _service_of(request)
        namespace = STS_NAMESPACE if service == "sts" else model.NAMESPACE
        actions = STS_ACTIONS if service == "sts" else IAM_ACTIONS
        request_id = request.get(REQUEST_ID, "")
        try:
            body = await request.read()
            try:
                params = dict(parse_qsl(body.decode(), keep_blank_values=True))
            except UnicodeDecodeError:
                raise IamError("MalformedQueryString", "The query string is not UTF-8.") from None
            action_name = params.get("Action", "")
            request[OPERATION] = (
                f"{service.upper()}.{action_name}"
                if action_name in actions
                else f"{service.upper()}.Unknown"
            )
            raw_path, _, query = request.raw_path.partition("?")
            signed = SignedRequest(request.method, raw_path, query, request.headers)
            if claimed_key(request.headers, query) is None:
                raise IamError(
                    "MissingAuthenticationToken", "Request is missing Authentication Token", 403
                )
            try:
                auth = await authenticator.identify(
                    signed, service, hashlib.sha256(body).hexdigest()
                )
            except S3Error as exc:
                raise _from_s3(exc) from None
            user = auth.user
            if is_nobody(user):
                raise IamError("AccessDenied", "Access denied", 403)
            request[USER] = user.display_name
            request[REQUESTER] = user.canonical_id
            action = actions.get(action_name)
            if action is None:
                raise IamError(
                    "InvalidAction", f"Could not find operation {action_name} for version."
                )
            master = self.store.keys.master if self.store.keys is not None else b""
            call = Call(user, params, self.store, self.principals, master)
            if action_name not in _ALWAYS and not decide_account(
                user, f"{service}:{action_name}", _resource(call, action_name)
            ):
                raise IamError(
                    "AccessDenied",
                    f"User: {_arn_of(user)} is not authorized to perform: "
                    f"{service}:{action_name} on resource: {_resource(call, action_name)}",
                    403,
                )
            result = await action(call)
        except IamError as exc:
            return _error(exc, namespace, request_id)
        return web.Response(
            text=_answer(action_name, namespace, result, request_id), content_type="text/xml"
        )
