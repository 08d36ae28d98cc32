"""The console's IAM pages: the signed-in account's users, their access keys, inline and
attached policies, groups, roles and customer managed policies.

Every read and change is IAM's own action, run by `gateway.iam.api.perform` for the
signed-in user: the same authorisation (a root administers its account, an IAM user as its
policies allow) and the same rules and errors (a policy document is validated as
PutUserPolicy validates it) as the query API. An error is IAM's code and message, shown on the
page (the console's middleware renders IamError as it renders S3Error). A new access key's
secret is on the answer to the form that made it, and nowhere else: IAM keeps it only sealed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlencode

from aiohttp import web

from ..iam.account import IamError
from ..iam.api import perform
from .page import csrf_field, error_box, form, h, hidden, render, url
from .state import ACTION, CONSOLE, SESSION, redirect

_TABS = (
    ("/iam/users", "Users"),
    ("/iam/groups", "Groups"),
    ("/iam/roles", "Roles"),
    ("/iam/policies", "Customer managed policies"),
)
# A policy to start from (a bucket's objects readable), to be edited before it is put.
_EXAMPLE_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::BUCKET/*"]}
        ],
    },
    indent=2,
)


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/iam", _home)
    router.add_get("/iam/users", users_page)
    router.add_post("/iam/users", create_user)
    router.add_get("/iam/user", user_page)
    router.add_get("/iam/key", key_page)
    router.add_post("/iam/keys", create_access_key)
    router.add_get("/iam/groups", groups_page)
    router.add_post("/iam/groups", create_group)
    router.add_get("/iam/group", group_page)
    router.add_get("/iam/roles", roles_page)
    router.add_get("/iam/policies", policies_page)
    for path, action, back, back_field, fields in _FORMS:
        router.add_post(path, _form_action(action, back, back_field, **fields))


# The forms that run one IAM action and go back to a page: (path, action, the page, the form
# field naming its entity, the action's parameters -> the form's fields).
_FORMS: tuple[tuple[str, str, str, str | None, dict[str, str]], ...] = (
    ("/iam/users/delete", "DeleteUser", "/iam/users", None, {"UserName": "user"}),
    ("/iam/keys/status", "UpdateAccessKey", "/iam/user", "user",
     {"UserName": "user", "AccessKeyId": "key", "Status": "status"}),
    ("/iam/keys/delete", "DeleteAccessKey", "/iam/user", "user",
     {"UserName": "user", "AccessKeyId": "key"}),
    ("/iam/user/policies", "PutUserPolicy", "/iam/user", "user",
     {"UserName": "user", "PolicyName": "policy", "PolicyDocument": "document"}),
    ("/iam/user/policies/delete", "DeleteUserPolicy", "/iam/user", "user",
     {"UserName": "user", "PolicyName": "policy"}),
    ("/iam/user/attach", "AttachUserPolicy", "/iam/user", "user",
     {"UserName": "user", "PolicyArn": "arn"}),
    ("/iam/user/detach", "DetachUserPolicy", "/iam/user", "user",
     {"UserName": "user", "PolicyArn": "arn"}),
    ("/iam/groups/delete", "DeleteGroup", "/iam/groups", None, {"GroupName": "group"}),
    ("/iam/group/members", "AddUserToGroup", "/iam/group", "group",
     {"GroupName": "group", "UserName": "user"}),
    ("/iam/group/members/remove", "RemoveUserFromGroup", "/iam/group", "group",
     {"GroupName": "group", "UserName": "user"}),
    ("/iam/roles", "CreateRole", "/iam/roles", None,
     {"RoleName": "role", "AssumeRolePolicyDocument": "trust", "Description": "description"}),
    ("/iam/roles/delete", "DeleteRole", "/iam/roles", None, {"RoleName": "role"}),
    ("/iam/policies", "CreatePolicy", "/iam/policies", None,
     {"PolicyName": "policy", "PolicyDocument": "document", "Description": "description"}),
    ("/iam/policies/delete", "DeletePolicy", "/iam/policies", None, {"PolicyArn": "arn"}),
)  # fmt: skip


# --- calling IAM -----------------------------------------------------------------------------


async def _iam(request: web.Request, action: str, **params: str | None) -> dict[str, Any]:
    """IAM's `action` for the signed-in user, through the API's own path (authorisation
    included); IamError as AWS answers it. The access log names the page's first action."""
    if ACTION not in request:
        request[ACTION] = action
    console = request.app[CONSOLE]
    sent = {k: v for k, v in params.items() if v}  # an empty field: the parameter left out
    answer = await perform(
        console.store, console.principals, request[SESSION].user, "iam", action, sent
    )
    return answer or {}


async def _shown(request: web.Request, action: str, **params: str | None) -> tuple[Any, str]:
    """A read for one section of a page: its answer, or None and the error shown in its place
    (an IAM user may be allowed one section and not another)."""
    try:
        return await _iam(request, action, **params), ""
    except IamError as exc:
        return None, error_box(f"{exc.code}: {exc.message}")


def _form_action(
    action: str, back: str, back_field: str | None = None, **fields: str
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A form's POST that runs one IAM action with the form's fields (`fields`: the action's
    parameter -> the form's field), then goes back to the page `back` (of the entity the
    form's `back_field` names)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        posted = await _posted(request)
        await _iam(request, action, **{param: posted.get(name) for param, name in fields.items()})
        if back_field is None:
            return redirect(back)
        return redirect(_query(back, name=posted.get(back_field, "")))

    return handle


async def _posted(request: web.Request) -> dict[str, str]:
    return {k: str(v) for k, v in (await request.post()).items()}


def _query(path: str, **values: str) -> str:
    return path + "?" + urlencode(values)


# --- HTML ------------------------------------------------------------------------------------


def _csrf(request: web.Request) -> str:
    return request.app[CONSOLE].sessions.csrf(request[SESSION].nonce)


def _page(request: web.Request, title: str, body: str, notice: str = "") -> web.Response:
    tabs = " · ".join(f'<a href="{path}">{h(label)}</a>' for path, label in _TABS)
    nav = f'<p class="tabs">IAM: {tabs}</p>'
    return render(title, nav + body, request[SESSION], _csrf(request), notice=notice)


def _table(
    caption: str, headers: tuple[str, ...], rows: list[list[str]], empty: str, error: str = ""
) -> str:
    """Rows of cells already escaped; `error`, shown instead when the read was refused."""
    if error or not rows:
        return f"<h2>{h(caption)}</h2>" + (error or f"<p>{h(empty)}</p>")
    head = "".join(f"<th>{h(x)}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f'<div class="scroll"><table><caption>{h(caption)}</caption><thead><tr>{head}</tr>'
        f"</thead><tbody>{body}</tbody></table></div>"
    )


def _more(path: str, answer: dict[str, Any], **query: str) -> str:
    """IAM's Marker paging: a link to the next page when the answer was truncated."""
    if not answer.get("IsTruncated"):
        return ""
    return f'<p><a href="{url(path, marker=answer.get("Marker"), **query)}">Next page</a></p>'


def _document(quoted: str) -> str:
    """A policy document as IAM answers it (URL-encoded JSON), indented for reading."""
    text = unquote(quoted)
    with contextlib.suppress(ValueError):  # shown as stored if it is not JSON
        text = json.dumps(json.loads(text), indent=2)
    return f"<details><summary>Document</summary><pre>{h(text)}</pre></details>"


def _create_form(action: str, token: str, fields: str, button: str) -> str:
    return (
        f'<form method="post" action="{action}" class="stack wide">{csrf_field(token)}'
        f"{fields}<button>{h(button)}</button></form>"
    )


def _input(label: str, name: str, required: bool = False, value: str = "") -> str:
    need = " required" if required else ""
    return f'<label>{h(label)} <input name="{name}" value="{h(value)}"{need}></label>'


def _textarea(label: str, name: str, value: str) -> str:
    return (
        f'<label>{h(label)} <textarea name="{name}" rows="10" spellcheck="false" '
        f"required>{h(value)}</textarea></label>"
    )


async def _home(request: web.Request) -> web.StreamResponse:
    return redirect("/iam/users")


# --- users -----------------------------------------------------------------------------------


async def users_page(request: web.Request) -> web.Response:
    token = _csrf(request)
    listed, error = await _shown(request, "ListUsers", Marker=request.query.get("marker"))
    body = error
    if listed is not None:
        rows = [
            [
                f'<a href="{url("/iam/user", name=u["UserName"])}">{h(u["UserName"])}</a>',
                h(u["Path"]),
                f"<code>{h(u['Arn'])}</code>",
                h(u["CreateDate"]),
                form("/iam/users/delete", token, hidden("user", u["UserName"]), "Delete", True),
            ]
            for u in listed["Users"]
        ]
        headers = ("Name", "Path", "ARN", "Created", "Actions")
        body += _table("IAM users", headers, rows, "No IAM users yet.")
        body += _more("/iam/users", listed)
    create = _create_form(
        "/iam/users",
        token,
        _input("New user", "user", required=True) + _input("Path (optional)", "path"),
        "Create user",
    )
    return _page(request, "IAM users", create + body)


async def create_user(request: web.Request) -> web.StreamResponse:
    posted = await _posted(request)
    made = await _iam(request, "CreateUser", UserName=posted.get("user"), Path=posted.get("path"))
    return redirect(_query("/iam/user", name=made["User"]["UserName"]))


def _key_rows(token: str, user: str, keys: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for key in keys:
        which = hidden("user", user) + hidden("key", key["AccessKeyId"])
        flip = "Inactive" if key["Status"] == "Active" else "Active"
        label = "Deactivate" if flip == "Inactive" else "Activate"
        link = url("/iam/key", user=user, id=key["AccessKeyId"])
        rows.append(
            [
                f'<a href="{link}"><code>{h(key["AccessKeyId"])}</code></a>',
                h(key["Status"]),
                h(key["CreateDate"]),
                form("/iam/keys/status", token, which + hidden("status", flip), label)
                + " "
                + form("/iam/keys/delete", token, which, "Delete", True),
            ]
        )
    return rows


async def user_page(request: web.Request) -> web.Response:
    name = request.query.get("name", "")
    token = _csrf(request)
    # Each section its own read: an IAM user may be allowed some of them and not others.
    try:
        u = (await _iam(request, "GetUser", UserName=name))["User"]
        cells = [h(u["UserName"]), f"<code>{h(u['Arn'])}</code>", h(u["UserId"]), h(u["Path"])]
        headers = ("Name", "ARN", "User id", "Path", "Created")
        facts = _table("User", headers, [[*cells, h(u["CreateDate"])]], "")
    except IamError as exc:
        if exc.code == "NoSuchEntity":
            raise  # no such user: the page is IAM's 404
        facts = _table("User", (), [], "", error_box(f"{exc.code}: {exc.message}"))
    user = hidden("user", name)

    keys, error = await _shown(request, "ListAccessKeys", UserName=name)
    rows = _key_rows(token, name, keys["AccessKeyMetadata"]) if keys else []
    headers = ("Access key", "Status", "Created", "Actions")
    section = _table("Access keys", headers, rows, "No access keys.", error)
    body = facts + section + form("/iam/keys", token, user, "Create access key")

    names, error = await _shown(request, "ListUserPolicies", UserName=name, MaxItems="1000")
    rows = []
    for policy in names["PolicyNames"] if names else []:
        text, _ = await _shown(request, "GetUserPolicy", UserName=name, PolicyName=policy)
        which = user + hidden("policy", policy)
        rows.append(
            [
                h(policy),
                _document(text["PolicyDocument"]) if text else "",
                form("/iam/user/policies/delete", token, which, "Delete", True),
            ]
        )
    headers = ("Name", "Document", "Actions")
    body += _table("Inline policies", headers, rows, "No inline policies.", error)
    body += _create_form(
        "/iam/user/policies",
        token,
        user
        + _input("Policy name", "policy", required=True)
        + _textarea("Policy document (JSON)", "document", _EXAMPLE_POLICY),
        "Put inline policy",
    )

    attached, error = await _shown(
        request, "ListAttachedUserPolicies", UserName=name, MaxItems="1000"
    )
    rows = [
        [
            h(p["PolicyName"]),
            f"<code>{h(p['PolicyArn'])}</code>",
            form("/iam/user/detach", token, user + hidden("arn", p["PolicyArn"]), "Detach", True),
        ]
        for p in (attached["AttachedPolicies"] if attached else [])
    ]
    headers = ("Name", "ARN", "Actions")
    body += _table("Attached managed policies", headers, rows, "None attached.", error)
    available, _ = await _shown(request, "ListPolicies", MaxItems="1000")
    if available:
        options = "".join(
            f'<option value="{h(p["Arn"])}">{h(p["PolicyName"])} ({h(p["Arn"])})</option>'
            for p in available["Policies"]
        )
        choose = f'<label>Managed policy <select name="arn">{options}</select></label>'
        body += form("/iam/user/attach", token, user + choose, "Attach")

    groups, error = await _shown(request, "ListGroupsForUser", UserName=name, MaxItems="1000")
    links = ", ".join(
        f'<a href="{url("/iam/group", name=g["GroupName"])}">{h(g["GroupName"])}</a>'
        for g in (groups["Groups"] if groups else [])
    )
    body += "<h2>Groups</h2>" + (error or f"<p>{links or 'In no group.'}</p>")
    return _page(request, f"IAM user {name}", body)


# --- access keys -----------------------------------------------------------------------------


def _key_view(
    request: web.Request, user: str, key: dict[str, Any], notice: str = ""
) -> web.Response:
    token = _csrf(request)
    rows = _key_rows(token, user, [key])
    body = _table("Access key", ("Access key", "Status", "Created", "Actions"), rows, "")
    back = f'<p><a href="{url("/iam/user", name=user)}">Back to the user {h(user)}</a></p>'
    hint = (
        ""
        if notice
        else '<p class="hint">The secret key was shown once, when the key was made: IAM '
        "keeps it only sealed and shows it to no one again. A lost secret means a new key.</p>"
    )
    return _page(request, f"Access key of {user}", body + hint + back, notice)


async def key_page(request: web.Request) -> web.Response:
    user, key_id = request.query.get("user", ""), request.query.get("id", "")
    keys = await _iam(request, "ListAccessKeys", UserName=user)
    for key in keys["AccessKeyMetadata"]:
        if key["AccessKeyId"] == key_id:
            return _key_view(request, user, key)
    raise IamError("NoSuchEntity", f"The Access Key with id {key_id} cannot be found.", 404)


async def create_access_key(request: web.Request) -> web.Response:
    user = (await _posted(request)).get("user", "")
    made = (await _iam(request, "CreateAccessKey", UserName=user))["AccessKey"]
    secret = made.pop("SecretAccessKey")
    notice = (
        "The secret key, shown this once (copy it now: it cannot be shown again):<br>"
        f'<input id="secret-key" class="link" readonly value="{h(secret)}" '
        'aria-label="Secret access key">'
    )
    return _key_view(request, made["UserName"], made, notice)


# --- a user's policies -----------------------------------------------------------------------


# --- groups ----------------------------------------------------------------------------------


async def groups_page(request: web.Request) -> web.Response:
    token = _csrf(request)
    listed, body = await _shown(request, "ListGroups", Marker=request.query.get("marker"))
    if listed is not None:
        rows = [
            [
                f'<a href="{url("/iam/group", name=g["GroupName"])}">{h(g["GroupName"])}</a>',
                h(g["Path"]),
                f"<code>{h(g['Arn'])}</code>",
                h(g["CreateDate"]),
                form("/iam/groups/delete", token, hidden("group", g["GroupName"]), "Delete", True),
            ]
            for g in listed["Groups"]
        ]
        headers = ("Name", "Path", "ARN", "Created", "Actions")
        body += _table("Groups", headers, rows, "No groups yet.") + _more("/iam/groups", listed)
    create = _create_form(
        "/iam/groups",
        token,
        _input("New group", "group", required=True) + _input("Path (optional)", "path"),
        "Create group",
    )
    return _page(request, "IAM groups", create + body)


async def create_group(request: web.Request) -> web.StreamResponse:
    posted = await _posted(request)
    made = await _iam(
        request, "CreateGroup", GroupName=posted.get("group"), Path=posted.get("path")
    )
    return redirect(_query("/iam/group", name=made["Group"]["GroupName"]))


async def group_page(request: web.Request) -> web.Response:
    name = request.query.get("name", "")
    token = _csrf(request)
    found = await _iam(request, "GetGroup", GroupName=name, MaxItems="1000")
    group = hidden("group", name)
    rows = [
        [
            f'<a href="{url("/iam/user", name=u["UserName"])}">{h(u["UserName"])}</a>',
            f"<code>{h(u['Arn'])}</code>",
            form(
                "/iam/group/members/remove",
                token,
                group + hidden("user", u["UserName"]),
                "Remove from group",
                True,
            ),
        ]
        for u in found.get("Users", [])
    ]
    body = f"<p><code>{h(found['Group']['Arn'])}</code></p>"
    body += _table("Members", ("User", "ARN", "Actions"), rows, "No members.")
    # The account's users to choose from, if the signed-in user may list them.
    users, _ = await _shown(request, "ListUsers", MaxItems="1000")
    names = "".join(f'<option value="{h(u["UserName"])}">' for u in (users or {}).get("Users", []))
    add = (
        '<label>User <input name="user" list="iam-users" required></label>'
        f'<datalist id="iam-users">{names}</datalist>'
    )
    body += form("/iam/group/members", token, group + add, "Add to group")
    return _page(request, f"IAM group {name}", body)


# --- roles -----------------------------------------------------------------------------------


async def roles_page(request: web.Request) -> web.Response:
    token = _csrf(request)
    listed, body = await _shown(request, "ListRoles", Marker=request.query.get("marker"))
    if listed is not None:
        rows = [
            [
                h(r["RoleName"]),
                f"<code>{h(r['Arn'])}</code>",
                h(r.get("Description") or ""),
                h(r["MaxSessionDuration"]),
                _document(r["AssumeRolePolicyDocument"]),
                form("/iam/roles/delete", token, hidden("role", r["RoleName"]), "Delete", True),
            ]
            for r in listed["Roles"]
        ]
        headers = ("Name", "ARN", "Description", "Max session (s)", "Trust policy", "Actions")
        body += _table("Roles", headers, rows, "No roles yet.") + _more("/iam/roles", listed)
    # A trust policy to start from: the signed-in user's own account may assume the role.
    account = request[SESSION].user.account
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
                    "Action": "sts:AssumeRole",
                }
            ],
        },
        indent=2,
    )
    create = _create_form(
        "/iam/roles",
        token,
        _input("New role", "role", required=True)
        + _input("Description (optional)", "description")
        + _textarea("Trust policy (JSON)", "trust", trust),
        "Create role",
    )
    return _page(request, "IAM roles", create + body)


# --- customer managed policies ---------------------------------------------------------------


async def policies_page(request: web.Request) -> web.Response:
    token = _csrf(request)
    listed, body = await _shown(
        request, "ListPolicies", Scope="Local", Marker=request.query.get("marker")
    )
    if listed is not None:
        rows = [
            [
                h(p["PolicyName"]),
                f"<code>{h(p['Arn'])}</code>",
                h(p.get("Description") or ""),
                h(p["AttachmentCount"]),
                form("/iam/policies/delete", token, hidden("arn", p["Arn"]), "Delete", True),
            ]
            for p in listed["Policies"]
        ]
        headers = ("Name", "ARN", "Description", "Attachments", "Actions")
        body += _table("Customer managed policies", headers, rows, "None yet.")
        body += _more("/iam/policies", listed)
    create = _create_form(
        "/iam/policies",
        token,
        _input("New policy", "policy", required=True)
        + _input("Description (optional)", "description")
        + _textarea("Policy document (JSON)", "document", _EXAMPLE_POLICY),
        "Create policy",
    )
    hint = '<p class="hint">Attach one to a user on the user\'s page.</p>'
    return _page(request, "Customer managed policies", create + hint + body)
