"""The console's Remotes page: the buckets of other S3 endpoints that the signed-in account's
replication rules may name as their destination (docs/replication.md, "Remote destinations"),
made and deleted at runtime, beside the operator's --replication-remotes file.

An account's remotes are documents of the catalog (Store.get_docs of replication/remotes.KIND),
so every node sees them; the secret key is sealed under the gateway's keys and never shown or
logged again. Who may: `s3:PutReplicationConfiguration` to make or delete one and
`s3:GetReplicationConfiguration` to list them, decided on the account as ListBuckets is
(authorize.decide_account: an account's root may, an IAM user as its policies say). The secret
key is accepted over HTTPS, or from this host (a loopback peer with no proxy in between: it
crossed no network). The endpoint is a request the gateway makes on the account's behalf: its
addresses must be inside --notify-networks, checked here and again at each connection
(replication/copier.py), as a topic's endpoint is.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from aiohttp import web

from ..notify.networks import OutsideNetworks, check_host, networks
from ..replication import remotes
from ..s3.authorize import decide_account
from ..s3.errors import S3Error
from .page import csrf_field, error_box, form, h, hidden, render
from .state import ACTION, CONSOLE, SESSION, redirect

_LIST = "s3:GetReplicationConfiguration"
_CHANGE = "s3:PutReplicationConfiguration"


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/remotes", remotes_page)
    router.add_post("/remotes", put_remote)
    router.add_post("/remotes/delete", delete_remote)


def _allowed(request: web.Request, action: str) -> None:
    if not decide_account(request[SESSION].user, action, "arn:aws:s3:::*"):
        raise S3Error("AccessDenied", f"Your policies do not allow {action}.")


def _account(request: web.Request) -> str:
    return request[SESSION].user.canonical_id


def _private_channel(request: web.Request) -> bool:
    """The secret key cannot have crossed a network in the clear: HTTPS, or a peer on this
    host that no proxy forwarded."""
    if request.secure:
        return True
    if "X-Forwarded-For" in request.headers or "Forwarded" in request.headers:
        return False
    try:
        return ipaddress.ip_address((request.remote or "").split("%", 1)[0]).is_loopback
    except ValueError:
        return False


async def remotes_page(request: web.Request) -> web.Response:
    request[ACTION] = "ListReplicationRemotes"
    console = request.app[CONSOLE]
    token = console.sessions.csrf(request[SESSION].nonce)
    _allowed(request, _LIST)
    own = await console.store.get_docs(remotes.KIND, _account(request))
    operators = remotes.load(console.settings.replication_remotes)
    rows = []
    for name, doc in sorted(own.items()):
        remote = remotes.from_doc(name, doc, None)  # the page shows no secret: none opened
        delete = form("/remotes/delete", token, hidden("bucket", name), "Delete", danger=True)
        cells = (
            f"<code>{h(remote.bucket_arn)}</code>",
            f"<code>{h(remote.endpoint)}</code>",
            h(remote.region),
            f"<code>{h(remote.access_key)}</code>",
            h(remote.addressing_style),
            delete,
        )
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    for name in sorted(set(operators) - set(own)):
        note = "set by the operator (--replication-remotes)"
        rows.append(
            f"<tr><td><code>{h(remotes.BUCKET_ARN + name)}</code></td>"
            f'<td colspan="5">{h(note)}</td></tr>'
        )
    table = (
        '<div class="scroll"><table id="remotes"><caption>Remote destinations</caption>'
        "<thead><tr><th>Bucket</th><th>Endpoint</th><th>Region</th><th>Access key</th>"
        f"<th>Addressing</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        if rows
        else "<p>No remote destinations yet.</p>"
    )
    hint = (
        ""
        if _private_channel(request)
        else error_box(
            "This page was not reached over HTTPS: a secret key sent from here would cross "
            "the network in the clear, and is refused. Use the console over HTTPS."
        )
    )
    create = f"""<section aria-labelledby="new-remote"><h2 id="new-remote">Add a remote</h2>
{hint}<form method="post" action="/remotes" class="stack wide">{csrf_field(token)}
<label>Bucket (its name there, or arn:aws:s3:::NAME) <input name="bucket" required></label>
<label>Endpoint <input name="endpoint" required placeholder="https://s3.eu-west-1.amazonaws.com"
 autocomplete="off"></label>
<label>Region <input name="region" required value="{h(console.settings.region)}"></label>
<label>Access key <input name="access_key" required autocomplete="off"></label>
<label>Secret key <input name="secret_key" type="password" required
 autocomplete="new-password"></label>
<label>Addressing <select name="addressing_style"><option>path</option>
<option>virtual</option></select></label>
<button>Add remote</button></form>
<p class="hint">A replication rule names a remote by its bucket ARN, as a destination. The
 secret key is kept sealed and never shown again; adding a bucket's remote again replaces it.
 A remote the operator set in the gateway's file wins over one of the same bucket here.</p>
</section>"""
    return render("Remotes", table + create, request[SESSION], token)


async def put_remote(request: web.Request) -> web.StreamResponse:
    request[ACTION] = "PutReplicationRemote"
    console = request.app[CONSOLE]
    _allowed(request, _CHANGE)
    posted = {k: str(v) for k, v in (await request.post()).items()}
    bucket = posted.get("bucket", "").strip()
    fields = {
        "bucket_arn": bucket
        if bucket.startswith(remotes.BUCKET_ARN)
        else remotes.BUCKET_ARN + bucket,
        "endpoint": posted.get("endpoint", ""),
        "region": posted.get("region", ""),
        "access_key": posted.get("access_key", ""),
        "secret_key": posted.get("secret_key", ""),
        "addressing_style": posted.get("addressing_style", "path"),
    }
    try:
        remote = remotes.check(fields)
    except ValueError as exc:
        raise S3Error("InvalidArgument", f"The remote: {exc}.") from None
    if not _private_channel(request):
        raise S3Error(
            "InvalidRequest", "A secret key is accepted over HTTPS only (or from this host)."
        )
    parts = urlsplit(remote.endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        await check_host(networks(console.settings.notify_networks), parts.hostname or "", port)
    except OutsideNetworks as exc:
        raise S3Error("InvalidArgument", f"The remote's endpoint: {exc}.") from None
    except OSError:
        raise S3Error(
            "InvalidArgument", f"The remote's endpoint: {parts.hostname} does not resolve."
        ) from None
    keys = console.store.keys
    if keys is None:
        raise S3Error("InternalError", "The gateway's keys are not available.")
    doc = remotes.to_doc(remote, keys.seal_remote_secret)

    def change(docs: dict[str, str]) -> tuple[dict[str, str], None]:
        return {**docs, remote.bucket: doc}, None

    await console.store.change_docs(remotes.KIND, _account(request), change)
    return redirect("/remotes")


async def delete_remote(request: web.Request) -> web.StreamResponse:
    request[ACTION] = "DeleteReplicationRemote"
    console = request.app[CONSOLE]
    _allowed(request, _CHANGE)
    name = str((await request.post()).get("bucket", "")).removeprefix(remotes.BUCKET_ARN)

    def change(docs: dict[str, str]) -> tuple[dict[str, str], None]:
        return {k: v for k, v in docs.items() if k != name}, None

    await console.store.change_docs(remotes.KIND, _account(request), change)
    return redirect("/remotes")
