"""IAM's managed policies (customer and AWS managed, with their versions) and the inline and
attached policies of users, groups and roles: each a function of a Call, over the rows of the
account it reads (account.py, view.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from ..users import numbered
from . import account as model
from .account import Account, IamError
from .call import Call, iso_time, page, under


def _arn(acc: Account, entry: dict[str, Any]) -> str:
    return acc.arn("policy", entry["path"], entry["name"])


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
        "CreateDate": iso_time(entry["created"]),
        "UpdateDate": iso_time(entry["updated"]),
    }


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
    def run(acc: Account) -> dict[str, Any]:
        arn = call.get("PolicyArn")
        _, entry = acc.managed(arn)
        if entry is None:
            name = (arn or "").rpartition("/")[2]
            return {"Policy": {"PolicyName": name, "Arn": arn, "Path": "/",
                               "DefaultVersionId": "v1", "IsAttachable": True,
                               "AttachmentCount": acc.attachments(arn or "")}}  # fmt: skip
        return {"Policy": _policy_shape(acc, entry)}

    return await call.read(run)


async def get_policy_version(call: Call) -> dict[str, Any]:
    text, entry = await call.read(lambda acc: acc.managed(call.get("PolicyArn")))
    version = call.get("VersionId") or "v1"
    versions = {"v1": text} if entry is None else entry["versions"]  # AWS's: one version here
    if version not in versions:
        raise IamError("NoSuchEntity", f"Policy version {version} does not exist.", 404)
    text = versions[version]
    is_default = entry is None or entry["default"] == version
    return {"PolicyVersion": {"Document": quote(text, safe=""), "VersionId": version,
                              "IsDefaultVersion": is_default}}  # fmt: skip


async def list_policies(call: Call) -> dict[str, Any]:
    scope = call.get("Scope") or "All"

    def run(acc: Account) -> list[dict[str, Any]]:
        entries = [] if scope == "AWS" else under(acc.doc["policies"], call.get("PathPrefix"))
        aws = list(model.AWS_MANAGED) if scope in ("All", "AWS") else []
        # Every count in one read of the attachments' index.
        acc.view.attachments([acc.kept(a) for a in (*(_arn(acc, e) for e in entries), *aws)])
        shapes = [_policy_shape(acc, e) for e in entries]
        for arn in aws:
            shapes.append({"PolicyName": arn.rpartition("/")[2], "Arn": arn, "Path": "/",
                           "DefaultVersionId": "v1", "IsAttachable": True,
                           "AttachmentCount": acc.attachments(arn)})  # fmt: skip
        return shapes

    shapes = await call.read(run)
    if call.get("OnlyAttached") == "true":
        shapes = [s for s in shapes if s["AttachmentCount"]]
    return page(call, shapes, "Policies", lambda p: p["PolicyName"].lower())


async def delete_policy(call: Call) -> None:
    await call.change(lambda acc: acc.delete_policy(call.get("PolicyArn")))


def _version_shape(entry: dict[str, Any], version: str) -> dict[str, Any]:
    return {
        "VersionId": version,
        "IsDefaultVersion": entry["default"] == version,
        "CreateDate": iso_time(entry.get("dates", {}).get(version, entry["created"])),
    }


async def create_policy_version(call: Call) -> dict[str, Any]:
    """A new version of a customer managed policy (Terraform's update of aws_iam_policy)."""
    default = (call.get("SetAsDefault") or "false").lower() == "true"

    def run(acc: Account) -> dict[str, Any]:
        arn = call.get("PolicyArn")
        version = acc.create_policy_version(arn, call.get("PolicyDocument"), default)
        return {"PolicyVersion": _version_shape(acc.customer_policy(arn), version)}

    return await call.change(run)


async def list_policy_versions(call: Call) -> dict[str, Any]:
    entry = await call.read(lambda acc: acc.customer_policy(call.get("PolicyArn")))
    shapes = [_version_shape(entry, v) for v in entry["versions"]]
    return page(call, shapes, "Versions", lambda v: f"{int(v['VersionId'][1:]):09d}")


async def set_default_policy_version(call: Call) -> None:
    await call.change(
        lambda acc: acc.set_default_version(call.get("PolicyArn"), call.get("VersionId"))
    )


async def delete_policy_version(call: Call) -> None:
    await call.change(
        lambda acc: acc.delete_policy_version(call.get("PolicyArn"), call.get("VersionId"))
    )


# -- inline and attached policies of users, groups and roles (one set of functions) ---------

_KINDS = {"User": "user", "Group": "group", "Role": "role"}


def _holder(acc: Account, kind: str, name: str | None) -> dict[str, Any]:
    return {"user": acc.user, "group": acc.group, "role": acc.role}[kind](name)


def _inline_actions() -> dict[str, Callable[[Call], Awaitable[Any]]]:
    out: dict[str, Callable[[Call], Awaitable[Any]]] = {}
    for title, kind in _KINDS.items():
        name_param = f"{title}Name"

        def bind(kind: str = kind, title: str = title, name_param: str = name_param) -> None:
            def changing(
                act: Callable[[Account, dict[str, Any], Call], None],
            ) -> Callable[[Call], Awaitable[None]]:
                """An action that changes the named user's, group's or role's policies."""

                async def action(call: Call) -> None:
                    await call.change(
                        lambda acc: act(acc, _holder(acc, kind, call.get(name_param)), call)
                    )

                return action

            put = changing(
                lambda acc, entry, call: acc.put_inline(
                    kind, entry, call.get("PolicyName"), call.get("PolicyDocument")
                )
            )
            delete = changing(
                lambda acc, entry, call: acc.delete_inline(kind, entry, call.get("PolicyName"))
            )
            attach = changing(lambda acc, entry, call: acc.attach(entry, call.get("PolicyArn")))
            detach = changing(lambda acc, entry, call: acc.detach(entry, call.get("PolicyArn")))

            async def get(call: Call) -> dict[str, Any]:
                def run(acc: Account) -> tuple[dict[str, Any], str]:
                    entry = _holder(acc, kind, call.get(name_param))
                    return entry, acc.inline(kind, entry, call.get("PolicyName"))

                entry, text = await call.read(run)
                return {name_param: entry["name"], "PolicyName": call.get("PolicyName"),
                        "PolicyDocument": quote(text, safe="")}  # fmt: skip

            async def list_(call: Call) -> dict[str, Any]:
                entry = await call.read(lambda acc: _holder(acc, kind, call.get(name_param)))
                return page(call, list(entry["policies"]), "PolicyNames", lambda n: n)

            async def attached(call: Call) -> dict[str, Any]:
                entry = await call.read(lambda acc: _holder(acc, kind, call.get(name_param)))
                shapes = [{"PolicyName": a.rpartition("/")[2], "PolicyArn": numbered(a)}
                          for a in entry["attached"]]  # fmt: skip
                return page(call, shapes, "AttachedPolicies", lambda p: p["PolicyName"])

            out[f"Put{title}Policy"] = put
            out[f"Get{title}Policy"] = get
            out[f"List{title}Policies"] = list_
            out[f"Delete{title}Policy"] = delete
            out[f"Attach{title}Policy"] = attach
            out[f"Detach{title}Policy"] = detach
            out[f"ListAttached{title}Policies"] = attached

        bind()
    return out


ACTIONS: dict[str, Callable[[Call], Awaitable[Any]]] = {
    "CreatePolicy": create_policy,
    "GetPolicy": get_policy,
    "GetPolicyVersion": get_policy_version,
    "ListPolicies": list_policies,
    "DeletePolicy": delete_policy,
    "CreatePolicyVersion": create_policy_version,
    "ListPolicyVersions": list_policy_versions,
    "SetDefaultPolicyVersion": set_default_policy_version,
    "DeletePolicyVersion": delete_policy_version,
    **_inline_actions(),
}
