"""The console's Topics page: the signed-in account's notification topics (the destinations of
its buckets' notification configurations), made and deleted as through the SNS-compatible API.

Every read and change is SNS's own action, run by `TopicsApi.perform` (gateway/notify/sns.py)
for the signed-in user: the same authorisation (`sns:<Action>` on the topic's ARN, judged by
the one authorisation function), the same checks (an endpoint's scheme, a password only over
HTTPS, --notify-networks) and the same sealing of the endpoint. A topic's endpoint is shown as
GetTopicAttributes shows it (scheme, host and port: never a password, a path or a query). An
error is SNS's code and message, shown as the console shows others (its middleware renders
TopicError as it renders S3Error).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..notify.sns import TopicsApi
from ..notify.topics import TopicError
from .page import csrf_field, error_box, form, h, hidden, render
from .state import ACTION, CONSOLE, SESSION, redirect

# What the page shows apart from the attributes' list.
_OWN = ("TopicArn", "Name", "Owner", "push-endpoint")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/topics", topics_page)
    router.add_post("/topics", create_topic)
    router.add_post("/topics/delete", delete_topic)


async def sns(request: web.Request, action: str, params: dict[str, str]) -> dict[str, Any]:
    """SNS's `action` for the signed-in user, through the API's own path (authorisation
    included); TopicError as SNS answers it. The access log names the page's first action."""
    if ACTION not in request:
        request[ACTION] = action
    console = request.app[CONSOLE]
    api = TopicsApi(console.store, console.settings)
    answer = await api.perform(request[SESSION].user, action, params, request.secure)
    return answer or {}


def _attributes_of(answer: dict[str, Any]) -> dict[str, str]:
    return {str(e["key"]): str(e["value"]) for e in answer.get("Attributes", [])}


async def _row(request: web.Request, arn: str, token: str) -> str:
    """One topic's row: its attributes as GetTopicAttributes answers them (or the refusal of
    that read, in their place) and its delete button."""
    name = arn.rsplit(":", 1)[-1]
    try:
        shown = _attributes_of(await sns(request, "GetTopicAttributes", {"TopicArn": arn}))
    except TopicError as exc:
        endpoint, attributes = error_box(f"{exc.code}: {exc.message}"), ""
    else:
        endpoint = f"<code>{h(shown.get('push-endpoint') or '(none)')}</code>"
        attributes = ", ".join(f"{h(k)}={h(v)}" for k, v in shown.items() if k not in _OWN)
    delete = form("/topics/delete", token, hidden("arn", arn), "Delete", danger=True)
    cells = (h(name), f"<code>{h(arn)}</code>", endpoint, attributes, delete)
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


async def topics_page(request: web.Request) -> web.Response:
    console = request.app[CONSOLE]
    token = console.sessions.csrf(request[SESSION].nonce)
    try:
        listed = await sns(request, "ListTopics", {})
    except TopicError as exc:
        table = error_box(f"{exc.code}: {exc.message}")
    else:
        arns = [str(t["TopicArn"]) for t in listed.get("Topics", [])]
        rows = [await _row(request, arn, token) for arn in arns]
        table = (
            '<div class="scroll"><table id="topics"><caption>Your account\'s topics</caption>'
            "<thead><tr>"
            "<th>Name</th><th>ARN</th><th>Endpoint</th><th>Attributes</th><th></th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
            if rows
            else "<p>No topics yet.</p>"
        )
    create = f"""<section aria-labelledby="new-topic"><h2 id="new-topic">Create a topic</h2>
<form method="post" action="/topics" class="stack wide">{csrf_field(token)}
<label>Name <input name="name" required pattern="[A-Za-z0-9_-]{{1,256}}"></label>
<label>Push endpoint <input name="endpoint" placeholder="https://hooks.example.com/s3"
 autocomplete="off"></label>
<label><span><input type="checkbox" name="verify_ssl" value="true" checked> Verify the
 endpoint's TLS certificate</span></label>
<label><span><input type="checkbox" name="persistent" value="true"> Persistent (NATS:
 through JetStream)</span></label>
<label><span>Other attributes, one <code>name=value</code> a line</span>
 <textarea name="attributes" rows="3" spellcheck="false"
 placeholder="amqp-exchange=events"></textarea></label>
<button>Create topic</button></form>
<p class="hint">A password in the endpoint is accepted over HTTPS only; it is kept sealed and
 never shown again (the endpoint shows its scheme, host and port). Creating an existing name
 gives it the new attributes. A bucket's notification configuration names a topic by its
 ARN.</p></section>"""
    return render("Topics", table + create, request[SESSION], token)


def _create_params(posted: dict[str, str]) -> dict[str, str]:
    """CreateTopic's parameters from the form: the query protocol's attribute map."""
    attributes: list[tuple[str, str]] = []
    if posted.get("endpoint", "").strip():
        attributes.append(("push-endpoint", posted["endpoint"].strip()))
    attributes.append(("verify-ssl", "true" if posted.get("verify_ssl") else "false"))
    if posted.get("persistent"):
        attributes.append(("persistent", "true"))
    for line in posted.get("attributes", "").splitlines():
        if not line.strip():
            continue
        key, equals, value = line.partition("=")
        if not equals:
            raise TopicError("InvalidParameter", "Invalid parameter: Attributes: name=value")
        attributes.append((key.strip(), value.strip()))
    params = {"Name": posted.get("name", "").strip()}
    for n, (key, value) in enumerate(attributes, 1):
        params[f"Attributes.entry.{n}.key"] = key
        params[f"Attributes.entry.{n}.value"] = value
    return params


async def create_topic(request: web.Request) -> web.StreamResponse:
    posted = {k: str(v) for k, v in (await request.post()).items()}
    request[ACTION] = "CreateTopic"
    await sns(request, "CreateTopic", _create_params(posted))
    return redirect("/topics")


async def delete_topic(request: web.Request) -> web.StreamResponse:
    posted = await request.post()
    await sns(request, "DeleteTopic", {"TopicArn": str(posted.get("arn", ""))})
    return redirect("/topics")
