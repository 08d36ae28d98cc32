"""The web console (--console-address): browse, upload, download, share and inspect, served by
the gateway's own processes on a port of its own, so it never shares a namespace with bucket
names. It acts through the Store service and decides every action with the same authorisation
function as S3 requests (gateway/s3/authorize.py), as the signed-in user (an account's root,
or an IAM user with its access key); its IAM pages (iam.py) act through IAM's own actions,
its Topics page (topics.py) through SNS's, and its Remotes page (remotes.py) keeps the
account's replication remotes. Each action is an access log line with that
user. docs/console.md shows it."""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from .. import logs, metrics
from ..config import Settings
from ..iam.account import IamError
from ..iam.principals import Principals
from ..notify.topics import TopicError
from ..s3.errors import CODES, S3Error
from ..s3.middleware import SERVER, new_request_id, storage_unavailable
from ..store import Store, StoreError
from . import browse, iam, remotes, topics
from .page import error_box, render
from .session import Session, Sessions, folder_secret
from .state import ACTION, BUCKET, CONSOLE, KEY, SESSION, Console, redirect

log = logging.getLogger(__name__)
access_log = logging.getLogger("gateway.access")

COOKIE = "s3gw_console"
PRE_COOKIE = "s3gw_console_pre"
STATIC = Path(__file__).parent / "static"
# The files every page loads (page.py links them). They are package data: an install that
# left them out (pyproject.toml's package-data) has no console to serve.
STATIC_FILES = ("console.css", "console.js")
# Reached without a session (the sign-in form itself, and the files every page loads).
_OPEN = ("/signin", "/static/")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def missing_file() -> Path | None:
    """The first of the console's own files this install lacks, or None."""
    for name in STATIC_FILES:
        if not (STATIC / name).is_file():
            return STATIC / name
    return None


def build_console(
    store: Store, settings: Settings, renderer: metrics.Renderer, principals: Principals
) -> web.Application:
    # The Authenticator's users: the users file's roots and IAM users' keys alike.
    sessions = Sessions(folder_secret(settings.data), principals)
    app = web.Application(middlewares=[_middleware], client_max_size=1024**2)
    app.on_response_prepare.append(_server_header)
    app[CONSOLE] = Console(store, settings, sessions, renderer, principals)
    app.router.add_get("/", _home)
    app.router.add_get("/signin", _signin_form)
    app.router.add_post("/signin", _signin)
    app.router.add_post("/signout", _signout)
    app.router.add_static("/static/", STATIC)
    browse.add_routes(app.router)
    iam.add_routes(app.router)
    topics.add_routes(app.router)
    remotes.add_routes(app.router)
    return app


async def _server_header(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = SERVER


def _secure(request: web.Request) -> bool:
    return request.secure


def _is_api(request: web.Request) -> bool:
    return request.path.startswith("/api/")


@web.middleware
async def _middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.monotonic()
    request_id = new_request_id()
    console = request.app[CONSOLE]
    try:
        session = None
        if not request.path.startswith("/static/"):
            session = await _session(console, request.cookies.get(COOKIE))
        if session is not None:
            request[SESSION] = session
        if request.path.startswith(_OPEN):
            response = await handler(request)
        elif session is None:
            if _is_api(request):
                response = web.json_response({"error": "Sign in again: no session"}, status=401)
            else:
                response = redirect("/signin")
        elif request.method not in ("GET", "HEAD") and not await _csrf_ok(request):
            request[ACTION] = "RefusedNoCsrfToken"
            response = _failure(request, 403, "Refused: the form's CSRF token is missing or wrong")
        else:
            response = await handler(request)
    except web.HTTPException as exc:
        response = exc
    except (S3Error, IamError, TopicError) as exc:
        response = _failure(request, exc.status, f"{exc.code}: {exc.message}")
    except StoreError as exc:
        unavailable = storage_unavailable(exc) or S3Error(exc.code, exc.message or None)
        status = CODES.get(unavailable.code, (500, ""))[0]
        response = _failure(request, status, f"{unavailable.code}: {unavailable.message}")
    except OSError as exc:
        unavailable = storage_unavailable(exc)
        if unavailable is None:
            raise
        response = _failure(request, 503, unavailable.message)
    _account(request, response, request_id, time.monotonic() - started)
    return response


async def _session(console: Console, token: str | None) -> Session | None:
    """The cookie's session, its user found as the Authenticator finds a key's: an IAM
    user's key is read from the catalog (kept --iam-cache-seconds), so that a key deleted or
    deactivated, or a policy changed, counts for the console as it does for S3."""
    access_key = console.sessions.access_key(token)
    if access_key is None:
        return None
    await console.principals.prepare(access_key, None)
    return console.sessions.verify(token)


async def _csrf_ok(request: web.Request) -> bool:
    """The script's requests carry the token in a header (their bodies are files); forms,
    in a field."""
    session = request[SESSION]
    if _is_api(request):
        token = request.headers.get("X-CSRF-Token")
    elif request.content_type != "application/x-www-form-urlencoded":
        return False
    else:
        try:
            token = str((await request.post()).get("csrf", ""))
        except (ValueError, UnicodeDecodeError):
            return False
    return request.app[CONSOLE].sessions.check_csrf(session.nonce, token)


def _failure(request: web.Request, status: int, message: str) -> web.StreamResponse:
    if _is_api(request):
        return web.json_response({"error": message}, status=status)
    session = request.get(SESSION)
    csrf = request.app[CONSOLE].sessions.csrf(session.nonce) if session else ""
    back = '<p><a href="javascript:history.back()">Back</a> · <a href="/buckets">Buckets</a></p>'
    return render("Error", error_box(message) + back, session, csrf, status=status)


def _account(
    request: web.Request, response: web.StreamResponse, request_id: str, seconds: float
) -> None:
    """The access log line of a console action, with who did it; metrics count it as a
    Console… operation."""
    action = "Console" + request.get(ACTION, "Page")
    session = request.get(SESSION)
    user = session.user.access_key if session is not None else None
    metrics.REQUESTS.labels(action, str(response.status)).inc()
    if access_log.isEnabledFor(logging.INFO):
        access_log.info(
            "%s %s %s %s %d %.1fms user=%s",
            request_id,
            action,
            request.method,
            logs.masked_target(request.raw_path),
            response.status,
            seconds * 1000,
            user,
            extra={
                "request_id": request_id,
                "user": user,
                "operation": action,
                "bucket": request.get(BUCKET),
                "key": request.get(KEY),
                "status": response.status,
                "ms": round(seconds * 1000, 2),
                "console": True,
            },
        )


def _set_cookie(request: web.Request, response: web.StreamResponse, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        httponly=True,
        samesite="Strict",
        secure=_secure(request),
        path="/",
    )


async def _home(request: web.Request) -> web.StreamResponse:
    return redirect("/buckets" if SESSION in request else "/signin")


async def _signin_form(request: web.Request, message: str = "", status: int = 200) -> web.Response:
    console = request.app[CONSOLE]
    pre = request.cookies.get(PRE_COOKIE) or secrets.token_hex(16)
    body = (
        (error_box(message) if message else "")
        + f"""<form method="post" action="/signin" class="stack">
<input type="hidden" name="csrf" value="{console.sessions.csrf("pre:" + pre)}">
<label>Access key <input name="access_key" autocomplete="username" required autofocus></label>
<label>Secret key <input name="secret_key" type="password" autocomplete="current-password"
 required></label>
<button>Sign in</button></form>
<p class="hint">The keys of a user of the gateway (the users file, or the main user), or an
 IAM user's access key.</p>"""
    )
    response = render("Sign in", body, status=status)
    _set_cookie(request, response, PRE_COOKIE, pre)
    return response


async def _signin(request: web.Request) -> web.StreamResponse:
    console = request.app[CONSOLE]
    request[ACTION] = "SignIn"
    posted = await request.post()
    pre = request.cookies.get(PRE_COOKIE)
    if not console.sessions.check_csrf("pre:" + pre if pre else None, str(posted.get("csrf", ""))):
        return await _signin_form(request, "The form had expired: sign in again.", 403)
    access_key = str(posted.get("access_key", "")).strip()
    # Past the bound, the secret is not even compared: a guesser learns nothing more.
    waiting = console.limits.refused(access_key, request.remote)
    if waiting is not None:
        request[ACTION] = "SignInThrottled"
        what, seconds = waiting
        which = "for this access key" if what == "key" else "from this address"
        minutes = math.ceil(seconds / 60)
        message = (
            f"Too many failed sign-ins {which}: try again in {minutes} minute"
            f"{'s' if minutes > 1 else ''}."
        )
        response = await _signin_form(request, message, 429)
        response.headers["Retry-After"] = str(seconds)
        return response
    if access_key:
        await console.principals.prepare(access_key, None)  # an IAM user's key, if it is one
    made = console.sessions.sign_in(access_key, str(posted.get("secret_key", "")))
    if made is None:
        console.limits.failed(access_key, request.remote)
        request[ACTION] = "SignInRefused"
        return await _signin_form(request, "Those keys are not a user's of this gateway.", 403)
    console.limits.succeeded(access_key)
    session, token = made
    request[SESSION] = session
    response = redirect("/buckets")
    _set_cookie(request, response, COOKIE, token)
    response.del_cookie(PRE_COOKIE, path="/")
    return response


async def _signout(request: web.Request) -> web.StreamResponse:
    request[ACTION] = "SignOut"
    response = redirect("/signin")
    response.del_cookie(COOKIE, path="/")
    return response
